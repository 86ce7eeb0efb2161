//! Replacing a file so that a crash at any moment leaves either its old
//! contents or the new ones, never a mix: a temporary file beside it,
//! `fsync`, rename over the old one, `fsync` of the directory. Every file
//! the server replaces goes through here.

use std::io::{self, BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Replaces `path` with what `write` writes (buffered), created with
/// permission bits `mode` (less the umask). The temporary file is `path`
/// with the extension `tmp`; it is removed on failure.
pub fn replace_with(
    path: &Path,
    mode: u32,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let result = (|| {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        let mut out = BufWriter::new(f);
        write(&mut out)?;
        let f = out.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
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
}
