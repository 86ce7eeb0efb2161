//! Zones, the I/O half: zone files read from disk (with their checks and
//! stamps), zone images for restarts, and the load log. The model, the
//! parser and the store are `xdpdns_core::zone`, re-exported here.

pub use xdpdns_core::zone::*;

pub mod disk;
pub mod image;
mod load;
pub mod load_log;

pub use disk::{parse_zone_file, parse_zone_file_in_batches};
pub use load::{load_zone_file, load_zone_file_with_warnings};
pub use load_log::{LoadLog, LoadRecord, TransferOutcome};
