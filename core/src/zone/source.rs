//! Where a zone was read from: its files as they were when read, so a
//! restart can tell whether a zone image is still current (the shell
//! stamps files and compares: `xdpdns::zone::disk`).

use std::path::PathBuf;

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
