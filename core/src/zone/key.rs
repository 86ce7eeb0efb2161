//! Names as keys of a zone's map: the labels below the zone's origin, in
//! wire form and lower case. A hickory `Name` took 80 bytes in every
//! entry of the map; a key is 24, and most names of a large zone are
//! short enough below their origin to fit in it without an allocation.

use std::borrow::Borrow;

use hickory_proto::rr::{LowerName, Name};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder};

use super::inline::InlineBytes;

/// A name in its zone's map (see the module). The apex is the empty key.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct NodeKey(InlineBytes);

impl NodeKey {
    pub(crate) fn new(relative: &[u8]) -> NodeKey {
        NodeKey(InlineBytes::from_slice(relative))
    }

    /// The labels below the origin in wire form, without a root label.
    pub fn as_wire(&self) -> &[u8] {
        self.0.as_slice()
    }
}

impl Borrow<[u8]> for NodeKey {
    fn borrow(&self) -> &[u8] {
        self.as_wire()
    }
}

impl std::fmt::Debug for NodeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NodeKey({:?})", self.as_wire())
    }
}

/// The parent of a relative name (its first label dropped); `None` at
/// the apex.
pub(crate) fn parent(relative: &[u8]) -> Option<&[u8]> {
    let first = *relative.first()? as usize;
    relative.get(1 + first..)
}

/// A zone's origin, as keys are made from names and names from keys.
#[derive(Clone, Debug)]
pub struct Origin {
    /// The origin's labels in wire form, lower case, no root label.
    wire: Box<[u8]>,
}

/// A wire-form name's longest form (RFC 1035 §2.3.4), with the root.
const NAME_MAX: usize = 255;

impl Origin {
    pub fn new(origin: &LowerName) -> Origin {
        let mut buf = [0; NAME_MAX + 1];
        let len = write_labels(origin, &mut buf);
        Origin {
            wire: buf[..len].into(),
        }
    }

    /// The labels of `name` below the origin, in `buf`; `None` unless
    /// `name` is the origin or below it.
    pub(crate) fn relative<'b>(
        &self,
        name: &LowerName,
        buf: &'b mut [u8; NAME_MAX + 1],
    ) -> Option<&'b [u8]> {
        let len = write_labels(name, buf);
        let cut = len.checked_sub(self.wire.len())?;
        // The origin must start at a label, not inside one.
        let mut at = 0;
        while at < cut {
            at += 1 + buf[at] as usize;
        }
        (at == cut && buf[cut..len] == *self.wire).then_some(&buf[..cut])
    }

    /// The key of a whole lower-case name in wire form (root label
    /// included), as a zone image holds it; `None` unless it is a
    /// well-formed lower-case name at or below the origin.
    pub fn key_of_wire(&self, wire: &[u8]) -> Option<NodeKey> {
        if wire.len() > NAME_MAX {
            return None;
        }
        let mut at = 0;
        let mut cut = None;
        loop {
            if wire.len() - at == self.wire.len() + 1 {
                cut = Some(at);
            }
            let len = *wire.get(at)? as usize;
            if len == 0 {
                break;
            }
            let label = wire.get(at + 1..at + 1 + len)?;
            if len > 63 || label.iter().any(u8::is_ascii_uppercase) {
                return None;
            }
            at += 1 + len;
        }
        let cut = cut?;
        (at + 1 == wire.len() && wire[cut..at] == *self.wire).then(|| NodeKey::new(&wire[..cut]))
    }

    /// Appends the full name of the key `relative` in wire form (root
    /// label included) to `out`.
    pub(crate) fn write_name(&self, relative: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(relative);
        out.extend_from_slice(&self.wire);
        out.push(0);
    }

    /// The full name of a key of this zone.
    pub(crate) fn name_of(&self, relative: &[u8]) -> LowerName {
        let mut buf = [0; 2 * (NAME_MAX + 1)];
        let len = relative.len() + self.wire.len();
        buf[..relative.len()].copy_from_slice(relative);
        buf[relative.len()..len].copy_from_slice(&self.wire);
        let name = Name::read(&mut BinDecoder::new(&buf[..=len]))
            .expect("a key and its origin make a name");
        // The labels are lower case already: `LowerName::new` would copy.
        LowerName::from(name)
    }
}

/// Writes `name`'s labels in wire form (no root label) to `buf`; returns
/// the length.
fn write_labels(name: &LowerName, buf: &mut [u8]) -> usize {
    let mut at = 0;
    for label in name.iter() {
        // A name is at most 255 wire bytes, so this stays inside `buf`.
        buf[at] = label.len() as u8;
        buf[at + 1..at + 1 + label.len()].copy_from_slice(label);
        at += 1 + label.len();
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn lower(s: &str) -> LowerName {
        LowerName::new(&Name::from_str(s).unwrap())
    }

    #[test]
    fn keys_are_labels_below_the_origin() {
        let origin = Origin::new(&lower("Example.COM."));
        let mut buf = [0; NAME_MAX + 1];
        assert_eq!(
            origin.relative(&lower("WWW.a.example.com."), &mut buf),
            Some(&b"\x03www\x01a"[..])
        );
        assert_eq!(
            origin.relative(&lower("example.com."), &mut buf),
            Some(&b""[..])
        );
        // Same label count below, other origin; a label that only ends
        // like the origin; a name above it.
        assert_eq!(origin.relative(&lower("www.example.org."), &mut buf), None);
        assert_eq!(origin.relative(&lower("www.xexample.com."), &mut buf), None);
        assert_eq!(origin.relative(&lower("com."), &mut buf), None);
        assert_eq!(origin.name_of(b"\x03www\x01a"), lower("www.a.example.com."));
        assert_eq!(origin.name_of(b""), lower("example.com."));
    }

    #[test]
    fn keys_of_whole_wire_names_are_checked() {
        let origin = Origin::new(&lower("example.com."));
        let key = |w: &[u8]| origin.key_of_wire(w).map(|k| k.as_wire().to_vec());
        assert_eq!(
            key(b"\x03www\x07example\x03com\x00"),
            Some(b"\x03www".to_vec())
        );
        assert_eq!(key(b"\x07example\x03com\x00"), Some(Vec::new()));
        // Upper case, another origin, a label that only ends like the
        // origin, no root label, bytes after it, a label past the end.
        assert_eq!(key(b"\x03WWW\x07example\x03com\x00"), None);
        assert_eq!(key(b"\x03www\x07example\x03org\x00"), None);
        assert_eq!(key(b"\x08xexample\x03com\x00"), None);
        assert_eq!(key(b"\x03www\x07example\x03com"), None);
        assert_eq!(key(b"\x03www\x07example\x03com\x00\x00"), None);
        assert_eq!(key(b"\x09www\x07example\x03com\x00"), None);
        let root = Origin::new(&lower("."));
        assert_eq!(
            root.key_of_wire(b"\x01a\x01b\x00")
                .map(|k| k.as_wire().to_vec()),
            Some(b"\x01a\x01b".to_vec())
        );
        assert_eq!(
            root.key_of_wire(b"\x00").map(|k| k.as_wire().len()),
            Some(0)
        );
    }

    #[test]
    fn the_root_zone_keeps_whole_names() {
        let root = Origin::new(&lower("."));
        let mut buf = [0; NAME_MAX + 1];
        assert_eq!(
            root.relative(&lower("a.b."), &mut buf),
            Some(&b"\x01a\x01b"[..])
        );
        assert_eq!(root.name_of(b"\x01a\x01b"), lower("a.b."));
        assert_eq!(root.name_of(b""), lower("."));
    }

    #[test]
    fn parents_drop_the_first_label() {
        assert_eq!(parent(b"\x03www\x01a"), Some(&b"\x01a"[..]));
        assert_eq!(parent(b"\x01a"), Some(&b""[..]));
        assert_eq!(parent(b""), None);
    }
}
