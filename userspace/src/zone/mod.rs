//! Zones: the model every other part of the server compiles from
//! (`tree`, `node`, `rrset`), its master-file parser and checks, the
//! versioned store with its one commit path and change feed, and zone
//! images for restarts.

pub mod check;
pub mod feed;
pub mod ids;
pub mod image;
mod load;
pub mod load_log;
mod node;
pub mod packed;
pub mod parser;
mod rrset;
pub mod serial;
pub mod signing_check;
pub mod snapshot;
pub mod source;
pub mod store;
mod tree;

pub use check::{check_zone, ZoneCheckError};
pub use feed::{Commit, FeedItem, Subscription, ZoneEvent};
pub use load::{load_zone_file, load_zone_file_with_warnings, load_zone_str, LoadError};
pub use load_log::{LoadLog, LoadRecord, TransferOutcome};
pub use node::Node;
pub use packed::{PackError, PackedRdatas};
pub use parser::{parse_zone_file, parse_zone_str, SourceRecord, ZoneFileError};
pub use rrset::{covered_type, fqdn_lower, label_count, nsec3_chain, nsec3_chain_key, RRset};
pub use serial::SerialPolicy;
pub use snapshot::{Snapshot, ZoneDiff};
pub use store::{Change, RotationPolicy, ZoneStore};
pub(crate) use tree::{random_seed, FastMap};
pub use tree::{Inserted, Zone, ZoneError};

#[cfg(test)]
mod tests;
