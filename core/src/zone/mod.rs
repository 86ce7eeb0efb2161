//! Zones: the model every other part of the server compiles from
//! (`tree`, `node`, `rrset`), its master-file parser and checks, and the
//! versioned store with its one commit path and change feed. Reading zone
//! files from disk and zone images are in the `xdpdns` crate.

pub mod check;
pub mod dump;
pub mod feed;
mod hashtrie;
pub mod ids;
pub(crate) mod inline;
pub mod key;
mod members;
mod node;
mod nodemap;
pub mod packed;
pub mod parser;
mod rrset;
pub mod serial;
pub mod signing_check;
pub mod snapshot;
pub mod source;
pub mod store;
pub mod text;
mod tree;

pub use check::{check_zone, ZoneCheckError};
pub use feed::{Commit, FeedItem, Subscription, ZoneEvent};
pub use node::Node;
pub use packed::{PackError, PackedRdatas};
pub use parser::{parse_zone_str, parse_zone_text, SourceFiles, SourceRecord, ZoneFileError};
pub use rrset::{
    covered_type, fqdn_lower, label_count, nsec3_chain, nsec3_chain_key, signer_managed, RRset,
};
pub use serial::SerialPolicy;
pub use snapshot::{Snapshot, ZoneDiff};
pub use store::{
    Additions, Change, Edit, EditError, Edited, RotationPolicy, ZoneReader, ZoneStore,
};
pub use text::{load_zone_str, LoadError};
pub(crate) use tree::{random_seed, FastMap};
pub use tree::{Bulk, Inserted, Zone, ZoneError};

#[cfg(test)]
mod tests;
