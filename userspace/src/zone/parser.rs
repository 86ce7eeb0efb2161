//! RFC 1035 master-file parser. (Being written: see the helper's work.)

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hickory_proto::rr::{Name, Record};

/// A record with the place in the source it came from, so zone checks can
/// name the file and line.
#[derive(Clone, Debug)]
pub struct SourceRecord {
    pub record: Record,
    pub file: Arc<Path>,
    pub line: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum ZoneFileError {
    #[error("{}:{line}: {message}", file.display())]
    Syntax {
        file: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{}: cannot read: {source}", file.display())]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub fn parse_zone_file(path: &Path, origin: &Name) -> Result<Vec<SourceRecord>, ZoneFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| ZoneFileError::Io {
        file: path.to_path_buf(),
        source,
    })?;
    parse_zone_str(&text, origin, path)
}

pub fn parse_zone_str(
    _text: &str,
    _origin: &Name,
    file: &Path,
) -> Result<Vec<SourceRecord>, ZoneFileError> {
    Err(ZoneFileError::Syntax {
        file: file.to_path_buf(),
        line: 0,
        message: "parser not written yet".into(),
    })
}
