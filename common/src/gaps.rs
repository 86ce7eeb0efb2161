//! DNSSEC NXDOMAIN in the kernel. Below a closest encloser E, a name
//! that does not exist falls in the gap between two of E's children (in
//! canonical order), and the gap decides its proof: the NSEC covering it
//! and the NSEC covering `*.E`. E's gap list has one entry per gap, the
//! first before its first child, each after the child whose label it
//! holds; the kernel finds the last entry whose label sorts before the
//! query's label below E (a binary search) and sends the zone's signed
//! SOA, then that entry's records.

/// Most children an encloser's list covers; below one with more, the
/// fallback answers.
pub const CHILDREN_MAX: usize = 256;
/// Where a gap entry's block keeps its label (lower-cased,
/// zero-padded), the label's length, and the records' length
/// (little-endian `u16`); its negative-answer `Template` head follows at
/// [`TEMPLATE_AT`] (56 bytes), its records at [`RECORDS_AT`].
pub const LABEL_AT: usize = 0;
pub const LABEL_LEN_AT: usize = 64;
pub const RECORDS_LEN_AT: usize = 66;
pub const TEMPLATE_AT: usize = 72;
pub const RECORDS_AT: usize = TEMPLATE_AT + 56;
/// Bytes of the label that prepends a gap entry's index to its
/// encloser's name: a two-byte label of six bits each, below 0x40 so
/// lower-casing leaves it alone.
pub const KEY_LABEL_LEN: usize = 3;

pub const fn key_label(k: u16) -> [u8; KEY_LABEL_LEN] {
    [2, (k >> 6) as u8 & 0x3f, k as u8 & 0x3f]
}
