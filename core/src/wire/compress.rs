//! Name compression, one implementation for every reply: the full
//! handler's encoder (`super::encode`), the hot path's negative answers
//! and the answer table's compiler, so the three write the same bytes.
//!
//! * every name's labels are written, then each suffix (longest first)
//!   is looked up among the suffixes already written, compared
//!   **case-insensitively** (as NSD and Knot do: a 0x20-cased question
//!   costs no bytes, and the answer's names then take the question's
//!   case where they point into it); the first one stored wins;
//! * a suffix with no match is remembered at its offset, at most 64 of
//!   them and only while the message is under 0x3FFF bytes;
//! * at most 120 names per message are compressed (the rest are written
//!   whole, their suffixes still remembered).
//!
//! The bounds keep the work per reply small whatever the data.

/// Suffixes remembered per message.
const MAX_SUFFIXES: usize = 64;
/// Names compressed per message.
const MAX_COMPRESSED_NAMES: usize = 120;

/// The suffixes written so far (their labels copied, so names may be
/// temporaries).
#[derive(Default)]
pub struct Compressor {
    /// Message offset, and where the suffix's labels are in `labels`.
    suffixes: Vec<(u16, u32, u32)>,
    labels: Vec<u8>,
    compressed: usize,
}

impl Compressor {
    /// Writes `name` (uncompressed wire form, root label included) at the
    /// end of `out`, compressed against the names written before.
    pub fn write(&mut self, out: &mut Vec<u8>, name: &[u8]) {
        match self.place(out.len(), name, true) {
            Some((at, pointer)) => {
                out.extend_from_slice(&name[..at]);
                out.extend_from_slice(&(0xC000 | pointer).to_be_bytes());
            }
            None => out.extend_from_slice(name),
        }
    }

    /// Writes `name` whole (where compression is not allowed, as in the
    /// RDATA of SRV or SVCB), remembering its suffixes for later names.
    pub fn write_whole(&mut self, out: &mut Vec<u8>, name: &[u8]) {
        let _whole = self.place(out.len(), name, false);
        out.extend_from_slice(name);
    }

    /// Notes `name`, already written whole at offset `start` (the
    /// question, copied as the client sent it).
    pub fn written(&mut self, start: usize, name: &[u8]) {
        let _first_name_has_no_match = self.place(start, name, true);
    }

    /// The walk for `name` written at `start`: remembers its suffixes up
    /// to the first one already written (when `compress`), and returns
    /// that one's position in `name` and the offset it points to.
    fn place(&mut self, start: usize, name: &[u8], compress: bool) -> Option<(usize, u16)> {
        let labels = &name[..name.len().saturating_sub(1)];
        let end = start + labels.len();
        let compress = compress && self.compressed < MAX_COMPRESSED_NAMES;
        if compress {
            self.compressed += 1;
        }
        let base = self.labels.len() as u32;
        let mut copied = false;
        let mut at = 0;
        while at < labels.len() {
            let suffix = &labels[at..];
            if compress {
                let arena = &self.labels;
                let found = self.suffixes.iter().find(|(_, from, to)| {
                    arena[*from as usize..*to as usize].eq_ignore_ascii_case(suffix)
                });
                if let Some(&(pointer, _, _)) = found {
                    return Some((at, pointer));
                }
            }
            if end < 0x3FFF && self.suffixes.len() < MAX_SUFFIXES {
                if !copied {
                    self.labels.extend_from_slice(labels);
                    copied = true;
                }
                let to = base + labels.len() as u32;
                self.suffixes
                    .push(((start + at) as u16, base + at as u32, to));
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

    fn written(names: &[&str]) -> Vec<u8> {
        let mut out = vec![0; 12];
        let mut c = Compressor::default();
        for n in names {
            let w = WireName::new(&Name::from_ascii(n).unwrap());
            c.write(&mut out, w.bytes());
        }
        out
    }

    #[test]
    fn suffixes_compress_case_insensitively_to_their_first_occurrence() {
        let out = written(&["WwW.ExAmple.com.", "mail.example.com.", "example.COM."]);
        let first = b"\x03WwW\x07ExAmple\x03com\x00";
        assert_eq!(&out[12..12 + first.len()], first);
        let rest = &out[12 + first.len()..];
        assert_eq!(
            rest, b"\x04mail\xc0\x10\xc0\x10",
            "example.com at offset 16"
        );
    }

    #[test]
    fn whole_names_are_remembered_but_not_compressed() {
        let mut out = vec![0; 12];
        let mut c = Compressor::default();
        let n = |s: &str| WireName::new(&Name::from_ascii(s).unwrap());
        c.written(12, n("example.com.").bytes());
        let target = n("host.example.com.");
        c.write_whole(&mut out, target.bytes());
        assert_eq!(&out[12..], target.bytes(), "not compressed");
        let again = out.len();
        c.write(&mut out, n("HOST.example.com.").bytes());
        assert_eq!(&out[again..], &[0xc0, 12], "but a later name points to it");
    }

    #[test]
    fn work_is_bounded_by_suffixes_and_names() {
        // More than 64 suffixes: the later ones are not remembered.
        let long: String = (0..70).map(|i| format!("l{}.", i % 10)).collect();
        let out = written(&[&format!("{long}example.com."), "example.com."]);
        let whole = WireName::new(&Name::from_ascii("example.com.").unwrap());
        assert!(out.ends_with(whole.bytes()), "example.com was suffix 71");
        // Past 120 names none is compressed.
        let many: Vec<&str> = (0..130).map(|_| "a.example.").collect();
        let out = written(&many);
        let plain = WireName::new(&Name::from_ascii("a.example.").unwrap());
        assert_eq!(out.len(), 12 + plain.bytes().len() * 11 + 2 * 119);
    }
}
