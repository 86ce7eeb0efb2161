//! Replacing a file so that a crash at any moment leaves either its old
//! contents or the new ones, never a mix: a temporary file beside it,
//! `fsync`, rename over the old one, `fsync` of the directory. Every file
//! the server replaces goes through here.
//!
//! Large files (zone images, journals: 90–250 MB at a million registered
//! instances) are handed to the disk as they are written, and the blocks
//! of the file they replace are freed a few MiB at a time. Flushed at
//! once, a file's whole writeback queued on the disk ahead of every other
//! `fsync` (the registry journal's: an acknowledged write took 25–60 ms
//! instead of 1–3); freed at once, its blocks were discarded at once
//! (filesystems mounted with online discard), with the same effect.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Replaces `path` with what `write` writes (buffered), created with
/// permission bits `mode` (less the umask). The temporary file is `path`
/// with the extension `tmp`; it is removed on failure.
pub fn replace_with(
    path: &Path,
    mode: u32,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    Replacement::write(path, mode, write)?.finish(&[])
}

/// A file's new contents, written and synced beside it but not yet in
/// its place: a large file is written on a thread of its own while its
/// owner goes on appending to the old one, then takes what was appended
/// meanwhile ([`Replacement::finish`]). Dropped unfinished, the
/// temporary file is removed and the old one stays as it was.
pub struct Replacement {
    path: PathBuf,
    tmp: PathBuf,
    file: Option<File>,
    /// The file replaced, held across the rename so its blocks can be
    /// freed gradually once no name reaches it.
    old: Option<File>,
}

impl Replacement {
    /// Writes `write`'s bytes to `path`'s temporary file and syncs them.
    pub fn write(
        path: &Path,
        mode: u32,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> io::Result<Replacement> {
        let tmp = path.with_extension("tmp");
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        let mut r = Replacement {
            path: path.to_path_buf(),
            tmp,
            file: None,
            old: std::fs::OpenOptions::new().write(true).open(path).ok(),
        };
        let mut out = BufWriter::new(PacedWriteback::new(f));
        write(&mut out)?;
        let f = out.into_inner().map_err(|e| e.into_error())?.file;
        f.sync_all()?;
        r.file = Some(f);
        Ok(r)
    }

    /// Appends `tail` (synced) and renames the file into place.
    pub fn finish(mut self, tail: &[u8]) -> io::Result<()> {
        let mut f = self.file.take().expect("a replacement is finished once");
        if !tail.is_empty() {
            f.write_all(tail)?;
            f.sync_data()?;
        }
        std::fs::rename(&self.tmp, &self.path)?;
        // Renamed: nothing left to remove on drop.
        self.tmp = PathBuf::new();
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir)?.sync_all()?;
        }
        if let Some(old) = self.old.take() {
            free_gradually(&old);
        }
        Ok(())
    }
}

impl Drop for Replacement {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Removes `path`, its blocks freed a step at a time (see the module).
pub fn remove_file(path: &Path) -> io::Result<()> {
    let file = std::fs::OpenOptions::new().write(true).open(path);
    std::fs::remove_file(path)?;
    if let Ok(file) = file {
        free_gradually(&file);
    }
    Ok(())
}

/// Bytes of a replaced or removed file freed at a time.
const FREE_STEP: u64 = 8 << 20;

/// Shrinks `file`, which no name reaches any more, a step at a time with
/// a pause between steps, so each of the filesystem's commits frees (and
/// discards) a step's blocks rather than the whole file's. Called on the
/// background threads that write large files. A crash part way leaves an
/// orphan the filesystem frees at mount.
fn free_gradually(file: &File) {
    let Ok(meta) = file.metadata() else { return };
    let mut size = meta.len();
    while size > FREE_STEP {
        size -= FREE_STEP;
        if file.set_len(size).is_err() {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Bytes a large file is handed to the disk by, as it is written.
const WRITEBACK_CHUNK: u64 = 1 << 20;

/// A file that starts the kernel's writeback of each chunk once it is
/// written and waits for the chunk before it, so a large file reaches the
/// disk while it is written and never holds more than two chunks dirty.
/// Written whole and then synced, a zone image of 92 MB (a million
/// registered instances) was flushed at once, and every other `fsync` on
/// the disk waited behind it: the registry journal's, so an acknowledged
/// registration took up to 60 ms. The
/// final `fsync` still decides durability; these are hints, and their
/// errors are left to it.
struct PacedWriteback {
    file: File,
    written: u64,
    /// Where the chunk being written starts, and where the one before did.
    chunk: u64,
    previous: u64,
}

impl PacedWriteback {
    fn new(file: File) -> Self {
        PacedWriteback {
            file,
            written: 0,
            chunk: 0,
            previous: 0,
        }
    }

    fn hand_over_chunk(&mut self) {
        let fd = self.file.as_raw_fd();
        let range = |from: u64, to: u64| (from as libc::off64_t, (to - from) as libc::off64_t);
        // SAFETY: sync_file_range on a file descriptor we own; it reads
        // no memory of ours.
        unsafe {
            let (at, len) = range(self.chunk, self.written);
            libc::sync_file_range(fd, at, len, libc::SYNC_FILE_RANGE_WRITE);
            if self.previous < self.chunk {
                let (at, len) = range(self.previous, self.chunk);
                libc::sync_file_range(
                    fd,
                    at,
                    len,
                    libc::SYNC_FILE_RANGE_WAIT_BEFORE
                        | libc::SYNC_FILE_RANGE_WRITE
                        | libc::SYNC_FILE_RANGE_WAIT_AFTER,
                );
            }
        }
        self.previous = self.chunk;
        self.chunk = self.written;
    }
}

impl Write for PacedWriteback {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        if self.written - self.chunk >= WRITEBACK_CHUNK {
            self.hand_over_chunk();
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Replaces `path` with `bytes`, readable by the owner only (the files
/// written this way hold secrets or hash seeds).
pub fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_with(path, 0o600, |w| w.write_all(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_file_is_replaced_whole_and_a_failed_write_leaves_the_old_one() {
        let dir = std::env::temp_dir().join(format!("xdpdns-durable-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.json");
        replace_file(&path, b"one").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"one");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let failed = replace_with(&path, 0o644, |w| {
            w.write_all(b"half")?;
            Err(io::Error::other("disk full"))
        });
        assert!(failed.is_err());
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"one",
            "the old contents stay"
        );
        assert!(
            !path.with_extension("tmp").exists(),
            "the temporary file is gone"
        );
        replace_with(&path, 0o644, |w| w.write_all(b"two")).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_of_many_chunks_is_written_whole_in_writes_of_any_size() {
        let dir = std::env::temp_dir().join(format!("xdpdns-durable-big-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("image");
        let bytes: Vec<u8> = (0..(5 * WRITEBACK_CHUNK as usize + 12_345))
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        replace_with(&path, 0o644, |w| {
            // Writes that straddle chunk boundaries, some past a chunk.
            let mut rest = &bytes[..];
            let mut size = 1;
            while !rest.is_empty() {
                let (now, later) = rest.split_at(size.min(rest.len()));
                w.write_all(now)?;
                rest = later;
                size = size * 3 % 3_000_001 + 1;
            }
            Ok(())
        })
        .unwrap();
        assert!(
            std::fs::read(&path).unwrap() == bytes,
            "written whole, in order"
        );
        // Replaced again: the new contents whole, the old freed in steps.
        replace_file(&path, b"small").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"small");
        remove_file(&path).unwrap();
        assert!(!path.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
