//! Name compression exactly as hickory-proto's encoder does it, so that a
//! reply assembled here is byte-identical to the full handler's
//! (`hickory_proto::rr::Name::emit` with `BinEncoder`, 0.26):
//!
//! * every name's labels are written, then each suffix (longest first)
//!   is looked up among the suffixes already written, compared as bytes
//!   (case-sensitive), first one stored wins;
//! * a suffix with no match is remembered at its offset, at most 64 of
//!   them and only while the message is under 0x3FFF bytes;
//! * at most 120 names per message are compressed (the rest are written
//!   whole, their suffixes still remembered).

/// hickory's `COMPRESSION_CANDIDATE_LIMIT`.
const MAX_SUFFIXES: usize = 64;
/// hickory's `COMPRESSED_NAME_LIMIT`.
const MAX_COMPRESSED_NAMES: usize = 120;

/// The suffixes written so far; each one borrows the name it came from
/// (the query, the zone's data), as the encoder keeps a copy of them.
#[derive(Default)]
pub struct Compressor<'a> {
    suffixes: Vec<(u16, &'a [u8])>,
    compressed: usize,
}

impl<'a> Compressor<'a> {
    /// Writes `name` (uncompressed wire form, root label included) at the
    /// end of `out`, compressed against the names written before.
    pub fn write(&mut self, out: &mut Vec<u8>, name: &'a [u8]) {
        match self.place(out.len(), name) {
            Some((at, pointer)) => {
                out.extend_from_slice(&name[..at]);
                out.extend_from_slice(&(0xC000 | pointer).to_be_bytes());
            }
            None => out.extend_from_slice(name),
        }
    }

    /// Notes `name`, already written whole at offset `start` (the
    /// question, copied as the client sent it).
    pub fn written(&mut self, start: usize, name: &'a [u8]) {
        let _first_name_has_no_match = self.place(start, name);
    }

    /// The encoder's walk for `name` written at `start`: remembers its
    /// suffixes up to the first one already written, and returns that
    /// one's position in `name` and the offset it points to.
    fn place(&mut self, start: usize, name: &'a [u8]) -> Option<(usize, u16)> {
        let labels = &name[..name.len().saturating_sub(1)];
        let end = start + labels.len();
        let compress = self.compressed < MAX_COMPRESSED_NAMES;
        if compress {
            self.compressed += 1;
        }
        let mut at = 0;
        while at < labels.len() {
            let suffix = &labels[at..];
            if compress {
                let found = self.suffixes.iter().find(|(_, s)| *s == suffix);
                if let Some(&(pointer, _)) = found.filter(|(p, _)| p & 0xC000 == 0) {
                    return Some((at, pointer));
                }
            }
            if end < 0x3FFF && self.suffixes.len() < MAX_SUFFIXES {
                self.suffixes.push(((start + at) as u16, suffix));
            }
            at += 1 + labels[at] as usize;
        }
        None
    }
}

/// A name in uncompressed wire form, its labels as stored (case kept),
/// on the stack.
pub struct WireName {
    buf: [u8; 256],
    len: usize,
}

impl WireName {
    pub fn new(name: &hickory_proto::rr::Name) -> Self {
        let mut w = WireName {
            buf: [0; 256],
            len: 0,
        };
        for label in name.iter() {
            w.buf[w.len] = label.len() as u8;
            w.buf[w.len + 1..w.len + 1 + label.len()].copy_from_slice(label);
            w.len += 1 + label.len();
        }
        w.len += 1; // the root label
        w
    }

    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::Name;
    use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};

    /// hickory's bytes for `names` written one after another after a
    /// 12-byte header.
    fn hickory(names: &[Name]) -> Vec<u8> {
        let mut bytes = Vec::new();
        let mut e = BinEncoder::new(&mut bytes);
        for _ in 0..12 {
            e.emit(0).unwrap();
        }
        for n in names {
            n.emit(&mut e).unwrap();
        }
        bytes
    }

    fn ours(names: &[Name]) -> Vec<u8> {
        let wires: Vec<WireName> = names.iter().map(WireName::new).collect();
        let mut out = vec![0; 12];
        let mut c = Compressor::default();
        for w in &wires {
            c.write(&mut out, w.bytes());
        }
        out
    }

    #[test]
    fn compresses_as_hickory_does() {
        let n = |s: &str| Name::from_ascii(s).unwrap();
        let long: String = (0..70).map(|i| format!("l{}.", i % 10)).collect();
        let cases: Vec<Vec<Name>> = vec![
            vec![
                n("www.example.com."),
                n("example.com."),
                n("ns1.example.com."),
            ],
            // Case matters: hickory compares bytes.
            vec![
                n("WwW.ExAmple.com."),
                n("example.com."),
                n("x.example.com."),
            ],
            vec![n("a.b.c."), n("b.c."), n("x.b.c."), n("c."), n("a.b.c.")],
            vec![n("."), n("a."), n(".")],
            // More than 64 suffixes: the later ones are not remembered.
            vec![
                n(&format!("{long}example.com.")),
                n("example.com."),
                n("l9.example.com."),
            ],
            vec![n(&long), n("l0."), n(&format!("x.{long}"))],
        ];
        for names in cases {
            assert_eq!(ours(&names), hickory(&names), "{names:?}");
        }
        // 130 names: past 120 none is compressed.
        let many: Vec<Name> = (0..130).map(|_| n("a.example.")).collect();
        assert_eq!(ours(&many), hickory(&many));
    }
}
