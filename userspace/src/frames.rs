//! The record framing both on-disk journals use (the registry's and the
//! IXFR journal): `len:u32le crc32:u32le payload`. A reader stops at the
//! first frame that is cut short or fails its checksum: that is the write
//! that was in flight when the process died, and it is cut off.

use std::io;
use std::path::{Path, PathBuf};

/// An I/O error on a journal file, naming the file.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct FileError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

/// For `map_err`: attaches `path` to an I/O error.
pub fn file_err(path: &Path) -> impl FnOnce(io::Error) -> FileError + '_ {
    move |source| FileError {
        path: path.to_path_buf(),
        source,
    }
}

/// Frames `payload` for appending.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 8);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// The intact frames at the start of `bytes`, each with the offset just
/// past it (the length to cut the file to if a later payload is refused).
pub fn frames(bytes: &[u8]) -> impl Iterator<Item = (&[u8], usize)> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let head = bytes.get(at..at + 8)?;
        let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(head[4..].try_into().expect("4 bytes"));
        let body = bytes.get(at + 8..at + 8 + len)?;
        if crc32fast::hash(body) != crc {
            return None;
        }
        at += 8 + len;
        Some((body, at))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_whole_frames_and_stops_at_a_torn_or_corrupt_one() {
        let mut file = frame(b"one");
        file.extend(frame(b"two"));
        let good = file.len();
        file.extend(frame(b"three"));
        let all: Vec<_> = frames(&file).collect();
        assert_eq!(all.len(), 3);
        assert_eq!(all[1], (&b"two"[..], good));
        assert_eq!(frames(&file[..file.len() - 1]).count(), 2, "torn");
        let mut bad = file.clone();
        bad[good + 9] ^= 1;
        assert_eq!(frames(&bad).count(), 2, "checksum");
    }
}
