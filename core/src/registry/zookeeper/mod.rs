//! Registrar's ZooKeeper records as a registry source, the pure half:
//! the record format (`records`), where names live in the tree
//! (`paths`), and the mirror of the tree that says which instances to
//! write (`tree`). The ZooKeeper session and watches are in the `xdpdns`
//! crate.

pub mod paths;
pub mod records;
pub mod tree;

pub use records::{parse, HostRecord, RecordError, ZkRecord};
pub use tree::{Change, MirrorTree};
