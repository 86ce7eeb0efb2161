//! A zone from master-file text already in memory: parsed and checked,
//! with no file system (an `$INCLUDE` in the text is an error). Reading
//! zone files from disk is `xdpdns::zone::load`.

use std::path::Path;

use hickory_proto::rr::Name;

use super::check::{check_zone, ZoneCheckError};
use super::parser::{parse_zone_str, ZoneFileError};
use super::tree::Zone;

/// Why a zone file did not become a zone. Both variants print as one line
/// naming the file (and line, where there is one).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    File(#[from] ZoneFileError),
    #[error(transparent)]
    Check(#[from] ZoneCheckError),
}

/// Parses and checks zone-file text; `file` names it in errors.
pub fn load_zone_str(text: &str, origin: &Name, file: &Path) -> Result<Zone, LoadError> {
    let records = parse_zone_str(text, origin, file)?;
    Ok(check_zone(origin, file, &records)?)
}
