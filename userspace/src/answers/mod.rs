//! The answer table, the I/O half: `follow` keeps the userspace table in
//! step with the zone store when no kernel table does. The compiler, the
//! entries and the hot path are `xdpdns_core::answers`, re-exported here.

pub use xdpdns_core::answers::*;

pub mod follow;
