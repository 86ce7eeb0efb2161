//! Zone files on disk: the parser's [`SourceFiles`] reading the file
//! system, and whether a zone's stamped files are still as they were.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use hickory_proto::rr::Name;

use super::parser::{parse_zone_source, parse_zone_text, SourceFiles, SourceRecord};
use super::source::{SourceFile, SourceStamp};
use super::ZoneFileError;

/// The file system, as the zone parser reads it.
pub struct DiskFiles;

impl SourceFiles for DiskFiles {
    fn read(&mut self, path: &Path) -> io::Result<(String, SourceFile)> {
        // Stamped before it is read: an edit while it is read makes the
        // stamp stale, never current.
        let stamp = stat(path)?;
        Ok((std::fs::read_to_string(path)?, stamp))
    }
}

/// The length and modification time of `path` now.
pub fn stat(path: &Path) -> io::Result<SourceFile> {
    let m = std::fs::metadata(path)?;
    Ok(SourceFile {
        path: path.to_path_buf(),
        len: m.len(),
        modified_s: m.mtime(),
        modified_ns: m.mtime_nsec() as u32,
    })
}

/// Whether every stamped file still has its length and modification
/// time (an edit, a replacement or a removal all change that).
pub fn is_current(stamp: &SourceStamp) -> bool {
    !stamp.files.is_empty()
        && stamp
            .files
            .iter()
            .all(|f| stat(&f.path).is_ok_and(|now| now == *f))
}

/// Parses the zone file `path`, reading its `$INCLUDE`s from disk.
pub fn parse_zone_file(path: &Path, origin: &Name) -> Result<Vec<SourceRecord>, ZoneFileError> {
    let (text, _) = DiskFiles.read(path).map_err(|source| ZoneFileError::Io {
        file: path.to_path_buf(),
        source,
    })?;
    parse_zone_text(&text, origin, path, &mut DiskFiles)
}

/// [`parse_zone_file`] handing the records to `sink` in batches as they
/// are parsed; returns the stamp of every file read.
pub fn parse_zone_file_in_batches(
    path: &Path,
    origin: &Name,
    sink: &mut dyn FnMut(Vec<SourceRecord>),
) -> Result<SourceStamp, ZoneFileError> {
    parse_zone_source(&mut DiskFiles, path, origin, sink)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use hickory_proto::rr::rdata::SRV;
    use hickory_proto::rr::RData;

    use super::*;

    #[test]
    fn a_stamp_is_current_until_its_file_changes() {
        let dir = std::env::temp_dir().join(format!("xdpdns-stamp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("z.zone");
        std::fs::write(&file, "one").unwrap();
        let stamp = SourceStamp {
            files: vec![stat(&file).unwrap()],
        };
        assert!(is_current(&stamp));
        std::fs::write(&file, "one more").unwrap();
        assert!(!is_current(&stamp));
        std::fs::remove_file(&file).unwrap();
        assert!(!is_current(&stamp));
        assert!(!is_current(&SourceStamp::default()), "no file, no proof");
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn origin() -> Name {
        Name::from_ascii("example.com.").unwrap()
    }

    fn name(text: &str) -> Name {
        Name::from_ascii(text).unwrap()
    }

    #[test]
    fn io_error_for_missing_top_level_file() {
        let err = parse_zone_file(Path::new("/nonexistent/xdpdns/zone"), &origin()).unwrap_err();
        assert!(matches!(err, ZoneFileError::Io { .. }));
        assert!(err
            .to_string()
            .starts_with("/nonexistent/xdpdns/zone: cannot read: "));
    }

    // --- $INCLUDE -----------------------------------------------------------

    /// A scratch directory removed on drop, unique per test and process.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            let dir = std::env::temp_dir().join(format!(
                "xdpdns-parser-{tag}-{}-{:?}",
                std::process::id(),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos()
            ));
            std::fs::create_dir_all(dir.join("sub")).unwrap();
            TempDir(dir)
        }

        fn write(&self, rel: &str, text: &str) -> PathBuf {
            let path = self.0.join(rel);
            std::fs::write(&path, text).unwrap();
            path
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn include_files() {
        let dir = TempDir::new("include");
        let main = dir.write(
            "main.zone",
            "$TTL 60\n\
             www A 192.0.2.1\n\
             $INCLUDE sub/inc.zone svc ; with origin\n\
             \tA 192.0.2.2\n\
             $INCLUDE \"sub/plain.zone\"\n\
             after A 192.0.2.3\n",
        );
        dir.write(
            "sub/inc.zone",
            "; included with origin svc.example.com.\n\
             \n\
             @ SRV 0 0 80 web\n\
             $ORIGIN elsewhere.test.\n\
             web A 192.0.2.10\n\
             $INCLUDE deeper.zone\n",
        );
        dir.write("sub/deeper.zone", "deep A 192.0.2.11\n");
        dir.write(
            "sub/plain.zone",
            "\tTXT inherits-owner\nplain A 192.0.2.12\n",
        );

        let records = parse_zone_file(&main, &origin()).unwrap_or_else(|e| panic!("{e}"));
        let got: Vec<(String, String, usize)> = records
            .iter()
            .map(|r| {
                (
                    r.record.name.to_ascii(),
                    r.file.strip_prefix(&dir.0).unwrap().display().to_string(),
                    r.line,
                )
            })
            .collect();
        let want = [
            ("www.example.com.", "main.zone", 2),
            ("svc.example.com.", "sub/inc.zone", 3),
            ("web.elsewhere.test.", "sub/inc.zone", 5),
            ("deep.elsewhere.test.", "sub/deeper.zone", 1),
            // The owner and origin revert after the include.
            ("www.example.com.", "main.zone", 4),
            ("www.example.com.", "sub/plain.zone", 1),
            ("plain.example.com.", "sub/plain.zone", 2),
            ("after.example.com.", "main.zone", 6),
        ];
        let want: Vec<(String, String, usize)> = want
            .iter()
            .map(|(n, f, l)| (n.to_string(), f.to_string(), *l))
            .collect();
        assert_eq!(got, want);
        assert_eq!(
            records[1].record.data,
            RData::SRV(SRV::new(0, 0, 80, name("web.svc.example.com.")))
        );
        assert!(records.iter().all(|r| r.record.ttl == 60));
    }

    #[test]
    fn include_errors_name_the_right_file_and_line() {
        let dir = TempDir::new("include-errors");
        let main = dir.write("main.zone", "$TTL 60\n$INCLUDE sub/bad.zone\n");
        let bad = dir.write("sub/bad.zone", "ok A 192.0.2.1\n\nbad A 1.2.3\n");
        let err = parse_zone_file(&main, &origin()).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "{}:3: bad IPv4 address \"1.2.3\" in A record",
                bad.display()
            )
        );

        let missing = dir.write("missing.zone", "\n$INCLUDE nothere.zone\n");
        let err = parse_zone_file(&missing, &origin())
            .unwrap_err()
            .to_string();
        let prefix = format!(
            "{}:2: cannot read included file \"{}\": ",
            missing.display(),
            dir.0.join("nothere.zone").display()
        );
        assert!(err.starts_with(&prefix), "{err}");

        let noarg = dir.write("noarg.zone", "$INCLUDE\n");
        let err = parse_zone_file(&noarg, &origin()).unwrap_err().to_string();
        assert_eq!(
            err,
            format!("{}:1: missing file name after $INCLUDE", noarg.display())
        );
    }

    #[test]
    fn include_depth_is_limited() {
        let dir = TempDir::new("include-loop");
        let looping = dir.write("loop.zone", "$TTL 1\na A 192.0.2.1\n$INCLUDE loop.zone\n");
        let err = parse_zone_file(&looping, &origin())
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "{}:3: $INCLUDE \"{}\" nested more than 16 deep",
                looping.display(),
                looping.display()
            )
        );
    }
}
