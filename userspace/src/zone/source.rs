//! Where a zone was read from: its files as they were when read, so a
//! restart can tell whether a zone image is still current.

use std::io;
use std::path::{Path, PathBuf};

/// The files a zone was loaded from, as they were when it was read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceStamp {
    pub files: Vec<SourceFile>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFile {
    pub path: PathBuf,
    pub len: u64,
    pub modified_s: i64,
    pub modified_ns: u32,
}

impl SourceFile {
    pub fn stat(path: &Path) -> io::Result<SourceFile> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path)?;
        Ok(SourceFile {
            path: path.to_path_buf(),
            len: m.len(),
            modified_s: m.mtime(),
            modified_ns: m.mtime_nsec() as u32,
        })
    }
}

impl SourceStamp {
    /// Whether every stamped file still has its length and modification
    /// time (an edit, a replacement or a removal all change that).
    pub fn is_current(&self) -> bool {
        !self.files.is_empty()
            && self
                .files
                .iter()
                .all(|f| SourceFile::stat(&f.path).is_ok_and(|now| now == *f))
    }
}
