//! A zone's compiled image on disk: what a restart serves at once instead
//! of parsing the zone file (or replaying a transfer) again.
//!
//! The layout is the in-memory one flattened: each node's lower-cased
//! wire name, its child count and its RRsets already packed in wire form
//! (see [`super::packed`]), so loading is a walk over a memory map that
//! copies byte ranges, with no text parsing and no RDATA decoding. Nodes
//! are written in the order of the zone's map, whose hash seed the image
//! keeps, so they are inserted into the new map in order too. The
//! zone file(s) it came from are stamped (path, length, modification
//! time), so a start-up can tell whether the image is still current.
//!
//! ```text
//! "XDPDNSZI" version:u32 flags:u32 (none yet) body_len:u64
//! body: origin(u8 len, wire) serial:u32 records:u64 seed:u64 uid:u64
//!       sources:u32 { path(u16 len, bytes) len:u64 mtime_s:i64 mtime_ns:u32 }
//!       nodes:u64   { name(u8 len, wire) children:u32 rrsets:u16
//!                     { type:u16 ttl:u32 packed(u32 len, bytes) } }
//! crc32(everything before):u32
//! ```
//! Integers are little-endian. An image that fails its magic, version,
//! length or checksum is refused as a whole ([`ImageError`]).

use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use hickory_proto::rr::{LowerName, Name, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder, BinEncodable, BinEncoder};

use super::key::{NodeKey, Origin};
use super::{Node, PackedRdatas, RRset, Zone};

const MAGIC: &[u8; 8] = b"XDPDNSZI";
/// Bumped whenever the layout changes: an image of another version is
/// rebuilt from its source, never misread.
pub use super::source::{SourceFile, SourceStamp};

pub const VERSION: u32 = 2;
const HEAD_LEN: usize = 24;

/// Why an image was not used.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}: not a zone image (bad magic or too short)", path.display())]
    NotAnImage { path: PathBuf },
    #[error("{}: image version {found}, this build reads {VERSION}", path.display())]
    Version { path: PathBuf, found: u32 },
    #[error("{}: checksum mismatch (torn or damaged)", path.display())]
    Checksum { path: PathBuf },
    #[error("{}: damaged at byte {at}: {what}", path.display())]
    Damaged {
        path: PathBuf,
        at: usize,
        what: &'static str,
    },
}

/// A zone read back from its image, with the stamp of its sources.
pub struct Loaded {
    pub zone: Zone,
    pub stamp: SourceStamp,
}

/// Encodes `zone` (with the stamp of the files it came from).
pub fn encode(zone: &Zone, stamp: &SourceStamp) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEAD_LEN + zone.node_count() * 48);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    // Flags, none defined: whether a secondary copy expired is decided
    // again at start-up from its SOA timers.
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    put_name(&mut out, zone.origin_key());
    out.extend_from_slice(&zone.serial().unwrap_or(0).to_le_bytes());
    out.extend_from_slice(&(zone.record_count() as u64).to_le_bytes());
    out.extend_from_slice(&zone.seed().to_le_bytes());
    out.extend_from_slice(&zone.uid().to_le_bytes());
    out.extend_from_slice(&(stamp.files.len() as u32).to_le_bytes());
    for f in &stamp.files {
        let path = f.path.as_os_str().as_encoded_bytes();
        out.extend_from_slice(&(path.len() as u16).to_le_bytes());
        out.extend_from_slice(path);
        out.extend_from_slice(&f.len.to_le_bytes());
        out.extend_from_slice(&f.modified_s.to_le_bytes());
        out.extend_from_slice(&f.modified_ns.to_le_bytes());
    }
    out.extend_from_slice(&(zone.node_count() as u64).to_le_bytes());
    // A name is its key's labels, then the origin's (with the root).
    let mut origin = Vec::with_capacity(64);
    let _ = zone.origin_key().emit(&mut BinEncoder::new(&mut origin));
    for (key, node) in zone.node_keys_in_build_order() {
        let relative = key.as_wire();
        out.push((relative.len() + origin.len()) as u8);
        out.extend_from_slice(relative);
        out.extend_from_slice(&origin);
        out.extend_from_slice(&node.children().to_le_bytes());
        out.extend_from_slice(&(node.rrsets().len() as u16).to_le_bytes());
        for set in node.rrsets() {
            out.extend_from_slice(&u16::from(set.rtype).to_le_bytes());
            out.extend_from_slice(&set.ttl.to_le_bytes());
            let packed = set.packed().as_bytes();
            out.extend_from_slice(&(packed.len() as u32).to_le_bytes());
            out.extend_from_slice(packed);
        }
    }
    let body_len = (out.len() - HEAD_LEN) as u64;
    out[16..24].copy_from_slice(&body_len.to_le_bytes());
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes an image held in `bytes` (read from `path`, named in errors).
pub fn decode(bytes: &[u8], path: &Path) -> Result<Loaded, ImageError> {
    let not_image = || ImageError::NotAnImage {
        path: path.to_path_buf(),
    };
    if bytes.len() < HEAD_LEN + 4 || &bytes[..8] != MAGIC {
        return Err(not_image());
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(ImageError::Version {
            path: path.to_path_buf(),
            found: version,
        });
    }
    let body_len = u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes"));
    if HEAD_LEN as u64 + body_len + 4 != bytes.len() as u64 {
        return Err(ImageError::Checksum {
            path: path.to_path_buf(),
        });
    }
    let (covered, crc) = bytes.split_at(bytes.len() - 4);
    if crc32fast::hash(covered) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
        return Err(ImageError::Checksum {
            path: path.to_path_buf(),
        });
    }
    let mut r = Reader {
        bytes: covered,
        at: HEAD_LEN,
    };
    read_body(&mut r).map_err(|what| ImageError::Damaged {
        path: path.to_path_buf(),
        at: r.at,
        what,
    })
}

fn read_body(r: &mut Reader<'_>) -> Result<Loaded, &'static str> {
    let origin = Name::from(r.name()?);
    let _serial = r.u32()?;
    let records = r.u64()? as usize;
    let seed = r.u64()?;
    let uid = r.u64()?;
    let mut stamp = SourceStamp::default();
    for _ in 0..r.u32()? {
        let len = r.u16()? as usize;
        let path = r.take(len)?;
        // Written from an OsStr on this platform (Unix: any bytes).
        let path = PathBuf::from(std::ffi::OsStr::from_bytes(path));
        stamp.files.push(SourceFile {
            path,
            len: r.u64()?,
            modified_s: r.u64()? as i64,
            modified_ns: r.u32()?,
        });
    }
    let count = r.u64()? as usize;
    // Two stages on two threads: this one decodes nodes, the other
    // inserts them into the zone's map (each about half the work).
    // A damaged count must not reserve more than the bytes left could hold.
    let room = count.min(r.bytes.len() - r.at);
    let keys = Origin::new(&LowerName::new(&origin));
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Framed>>(8);
    std::thread::scope(|scope| {
        let builder = scope.spawn(move || {
            let nodes = rx.into_iter().flatten().map(Framed::into_node);
            Zone::from_nodes(&origin, seed, nodes, room, records)
        });
        let decoded = (|| {
            let mut batch = Vec::with_capacity(BATCH);
            for _ in 0..count {
                batch.push(read_node(r, &keys)?);
                if batch.len() == BATCH {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                    tx.send(full).map_err(|_| "zone builder stopped")?;
                }
            }
            tx.send(batch).map_err(|_| "zone builder stopped")?;
            drop(tx);
            if r.at != r.bytes.len() {
                return Err("bytes after the last node");
            }
            Ok(())
        })();
        let zone = builder.join().map_err(|_| "zone builder panicked")?;
        decoded?;
        let mut zone = zone.ok_or("nodes do not make a zone")?;
        zone.set_uid(uid);
        Ok(Loaded { zone, stamp })
    })
}

/// Nodes handed from the decoding thread to the building one at a time.
const BATCH: usize = 4096;

/// A node's parts as read from the image: made into a node (its
/// allocation) and inserted on the thread that builds the zone, so that
/// the two threads share the work (decoding whole nodes here left the
/// builder idle two thirds of the time).
struct Framed {
    key: NodeKey,
    children: u32,
    sets: smallvec::SmallVec<[RRset; 4]>,
    /// The zone must look at its sets ([`Zone::needs_a_look`]).
    look: bool,
}

impl Framed {
    fn into_node(self) -> (NodeKey, Node, bool) {
        (
            self.key,
            Node::from_parts(self.sets, self.children),
            self.look,
        )
    }
}

fn read_node(r: &mut Reader<'_>, keys: &Origin) -> Result<Framed, &'static str> {
    let len = r.take(1)?[0] as usize;
    let key = keys
        .key_of_wire(r.take(len)?)
        .ok_or("a name that is not a lower-case name of the zone")?;
    let children = r.u32()?;
    let count = r.u16()? as usize;
    // Most names have a few sets: no allocation.
    let mut sets = smallvec::SmallVec::with_capacity(count);
    let mut look = false;
    for _ in 0..count {
        let rtype = RecordType::from(r.u16()?);
        look |= Zone::needs_a_look(rtype);
        let ttl = r.u32()?;
        let len = r.u32()? as usize;
        let packed = PackedRdatas::from_packed(r.take(len)?).ok_or("bad record framing")?;
        sets.push(RRset::from_packed(rtype, ttl, packed));
    }
    Ok(Framed {
        key,
        children,
        sets,
        look,
    })
}

/// Maps and decodes the image at `path`.
pub fn read(path: &Path) -> Result<Loaded, ImageError> {
    let io = |source| ImageError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    // SAFETY: images are read only at start, before the image writer
    // runs, and replaced only by rename; a replaced file is then shrunk
    // away (`durable`), so a map must not outlive the read: it does not.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    decode(&map, path)
}

/// Writes `image` to `path` so that a crash at any moment leaves either
/// the previous image or this one (mode 0600: an image holds the zone's
/// hash seed).
pub fn write_atomically(path: &Path, image: &[u8]) -> io::Result<()> {
    crate::durable::replace_file(path, image)
}

/// Where the image of zone `origin` lives in `dir`.
pub fn path_in(dir: &Path, origin: &Name) -> PathBuf {
    dir.join(format!("{}zimg", file_stem(origin)))
}

/// A file name for zone `origin`: its lower-case text with a final dot
/// (`example.com.`, `root.` for the root), any character that is not
/// alphanumeric, `-`, `_` or `.` as `%` (escaped labels could hold `/`).
pub fn file_stem(origin: &Name) -> String {
    let mut name = origin.to_lowercase().to_ascii();
    if name == "." {
        name = "root.".into();
    }
    name.chars()
        .map(|c| match c.is_ascii_alphanumeric() || "-_.".contains(c) {
            true => c,
            false => '%',
        })
        .collect()
}

fn put_name(out: &mut Vec<u8>, name: &LowerName) {
    let mut wire = Vec::with_capacity(64);
    let _ = name.emit(&mut BinEncoder::new(&mut wire));
    out.push(wire.len() as u8);
    out.extend_from_slice(&wire);
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        let s = self.bytes.get(self.at..self.at + n).ok_or("cut short")?;
        self.at += n;
        Ok(s)
    }

    fn u16(&mut self) -> Result<u16, &'static str> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("2")))
    }

    fn u32(&mut self) -> Result<u32, &'static str> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }

    fn u64(&mut self) -> Result<u64, &'static str> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }

    fn name(&mut self) -> Result<LowerName, &'static str> {
        let len = self.take(1)?[0] as usize;
        let wire = self.take(len)?;
        let mut d = BinDecoder::new(wire);
        let name = LowerName::read(&mut d).map_err(|_| "bad name")?;
        match d.is_empty() {
            true => Ok(name),
            false => Err("bad name length"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zone::load_zone_str;
    use std::str::FromStr;

    fn every_type_zone() -> Zone {
        let text = include_str!("../../../tests/support/every-type.zone");
        let origin = Name::from_str("every.test.").unwrap();
        load_zone_str(text, &origin, Path::new("every.zone")).unwrap()
    }

    fn stamp() -> SourceStamp {
        SourceStamp {
            files: vec![SourceFile {
                path: PathBuf::from("/etc/zones/every.zone"),
                len: 1234,
                modified_s: 1_700_000_000,
                modified_ns: 42,
            }],
        }
    }

    #[test]
    fn a_zone_comes_back_node_for_node_with_its_seed_and_stamp() {
        let zone = every_type_zone();
        let image = encode(&zone, &stamp());
        let back = decode(&image, Path::new("x.zimg")).unwrap();
        assert_eq!(back.stamp, stamp());
        let z = back.zone;
        assert_eq!(z.origin(), zone.origin());
        assert_eq!(z.serial(), zone.serial());
        assert_eq!(z.record_count(), zone.record_count());
        assert_eq!(z.node_count(), zone.node_count());
        assert_eq!(z.seed(), zone.seed());
        assert_eq!(z.uid(), zone.uid(), "the same version of the contents");
        assert_eq!(
            (z.has_cuts(), z.has_dnames(), z.has_nsec(), z.has_nsec3()),
            (
                zone.has_cuts(),
                zone.has_dnames(),
                zone.has_nsec(),
                zone.has_nsec3()
            )
        );
        for (key, node) in zone.nodes() {
            let other = z.node(&key).unwrap_or_else(|| panic!("{key} missing"));
            assert_eq!(other.rrsets(), node.rrsets(), "{key}");
            assert_eq!(other.has_children(), node.has_children(), "{key}");
        }
        // Same map order: the image of the copy is the same bytes.
        assert_eq!(encode(&z, &stamp()), image);
    }

    #[test]
    fn any_flipped_byte_or_cut_is_refused() {
        let image = encode(&every_type_zone(), &stamp());
        for at in (0..image.len()).step_by(97).chain([image.len() - 1]) {
            let mut bad = image.clone();
            bad[at] ^= 0x20;
            assert!(decode(&bad, Path::new("x")).is_err(), "flip at {at}");
        }
        for len in [0, 10, HEAD_LEN + 3, image.len() / 2, image.len() - 1] {
            assert!(
                decode(&image[..len], Path::new("x")).is_err(),
                "cut at {len}"
            );
        }
        let mut other = image.clone();
        other[8..12].copy_from_slice(&(VERSION + 1).to_le_bytes());
        assert!(matches!(
            decode(&other, Path::new("x")),
            Err(ImageError::Version { .. })
        ));
    }

    #[test]
    fn written_atomically_or_not_at_all() {
        let dir = std::env::temp_dir().join(format!("xdpdns-image-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let origin = Name::from_str("every.test.").unwrap();
        let path = path_in(&dir, &origin);
        assert_eq!(path.file_name().unwrap(), "every.test.zimg");
        let image = encode(&every_type_zone(), &stamp());
        write_atomically(&path, &image).unwrap();
        assert!(!path.with_extension("tmp").exists());
        assert_eq!(read(&path).unwrap().zone.record_count(), 49);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
