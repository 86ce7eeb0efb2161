//! A compiled table entry and the encodings the compilers share: wire
//! names as keys, and the checksum the kernel finishes in O(1).

use std::sync::Arc;

use hickory_proto::rr::LowerName;
use xdpdns_common::Answer;

/// Lower-cased wire-form name plus query-type slot: the table key before
/// it is split into the short/long key layouts.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryKey {
    /// Shared by a name's A and AAAA entries.
    pub name: Arc<[u8]>,
    pub qtype: u8,
}

/// A compiled entry: the kernel's [`Answer`] (its `block` field is
/// assigned by the loader), and the section itself when it is too large
/// to inline (shared by every entry with the same section).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compiled {
    pub head: Answer,
    pub block: Option<Arc<[u8]>>,
}

impl Compiled {
    /// The answer section's bytes.
    pub fn section(&self) -> &[u8] {
        match &self.block {
            Some(b) => b,
            None => &self.head.data[..self.head.section_len() as usize],
        }
    }
}

/// RFC 1071 sum of `bytes` from an even offset, folded to 16 bits.
pub fn ones_complement_sum(bytes: &[u8]) -> u16 {
    let mut sum: u64 = bytes
        .chunks(2)
        .map(|c| u64::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Lower-cased uncompressed wire form of a name (a `LowerName`'s labels
/// are lower-case already).
pub fn lower_wire(name: &LowerName) -> Vec<u8> {
    let mut buf = [0u8; 256];
    wire_into(name, &mut buf).to_vec()
}

/// `name` in wire form, shared (one allocation, written from a stack
/// buffer; a million-name compile makes a million of them).
pub(super) fn shared_wire(name: &LowerName) -> Arc<[u8]> {
    let mut buf = [0u8; 256];
    Arc::from(wire_into(name, &mut buf))
}

fn wire_into<'b>(name: &LowerName, buf: &'b mut [u8; 256]) -> &'b [u8] {
    let mut at = 0;
    for label in name.iter() {
        // A name is at most 255 wire bytes, so this never runs past `buf`.
        buf[at] = label.len() as u8;
        buf[at + 1..at + 1 + label.len()].copy_from_slice(label);
        at += 1 + label.len();
    }
    buf[at] = 0;
    &buf[..at + 1]
}
