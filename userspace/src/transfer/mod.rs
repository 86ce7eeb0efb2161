//! Zone transfers both ways, the I/O half: the IXFR journal on disk and
//! its subscriber, the transfer client, NOTIFY out with propagation
//! tracking, and secondary zones pulled from a primary. The pure half
//! (ACLs, TSIG, the planner, the state machines) is
//! `xdpdns_core::transfer`, re-exported here.

pub use xdpdns_core::transfer::*;

pub mod client;
pub mod journal;
pub mod journal_subscriber;
pub mod notify;
pub mod secondary;

pub use journal::IxfrJournal;
