//! Negative answers in the kernel: the entries that describe them.

/// The head of an [`EXIST`](crate::qtype_slot::EXIST) entry's data
/// (its whole inline "section"; never sent): the zone's apex length,
/// the flags, and how many record types follow (little-endian `u16`s
/// from byte [`EXIST_HEAD`]): every type the name has an RRset of,
/// other than A and AAAA, when [`exist_flags::NODATA_OTHER`] is set.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Exist {
    /// Wire length of the zone's apex name: where the apex starts in
    /// the query name, to find the zone's [`Template`].
    pub zone_len: u8,
    /// [`exist_flags`].
    pub flags: u8,
}

/// Bytes of an EXIST entry's head; its section is this plus two per
/// listed type.
pub const EXIST_HEAD: usize = 4;
/// Types an EXIST entry lists at most (its data is inline).
pub const EXIST_TYPES_MAX: usize = (crate::INLINE_MAX - EXIST_HEAD) / 2;

pub mod exist_flags {
    /// An A (or AAAA) query for this name gets NODATA.
    pub const NODATA_A: u8 = 1;
    pub const NODATA_AAAA: u8 = 2;
    /// A query for a name one or two labels below this one that does
    /// not exist gets NXDOMAIN (this name is its closest encloser).
    pub const ENCLOSER: u8 = 4;
    /// This name is its zone's apex: the label of the query just
    /// above it is checked against [`Template::risky`](super::Template).
    pub const APEX: u8 = 8;
    /// A query of any other plain type gets NODATA here unless the
    /// entry lists that type.
    pub const NODATA_OTHER: u8 = 16;
    /// A DS query gets NODATA here: a delegation without DS (the
    /// parent's answer), or a name below the apex that is no cut.
    pub const NODATA_DS: u8 = 32;
    /// A delegation with a [`REFERRAL`](crate::qtype_slot::REFERRAL)
    /// template: a query at it (but for DS), or for a name one or two
    /// labels below it that has no entry, gets the referral.
    pub const REFERRAL: u8 = 64;
}

/// The head of a template entry's section (an [`SOA`] entry at a
/// zone's apex, a [`REFERRAL`] entry at a delegation), followed by
/// the records as the fallback writes them after a question of
/// `sample_len` bytes whose first label matches no name of the
/// records: the SOA of the zone's negative answers, or a referral's
/// NS records and glue. Their compression pointers (at `fixups`, in
/// order, [`NO_FIXUP`] after the last) all point into the question's
/// apex or cut or into the records themselves, so for a question of
/// `n` bytes each moves by `n - sample_len` ([`relocate`]). The
/// entry's checksum covers the records with those pointers zeroed.
///
/// [`SOA`]: crate::qtype_slot::SOA
/// [`REFERRAL`]: crate::qtype_slot::REFERRAL
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Template {
    pub sample_len: u16,
    pub fixups: [u16; FIXUPS_MAX],
    /// The labels just above the apex of MNAME and RNAME (length byte
    /// and up to seven bytes, zero-padded), when they are below it: a
    /// query name with that label there would be compressed against
    /// them, so the kernel passes it.
    pub risky: [[u8; 8]; 2],
    /// The reply's authority and additional counts, and whether it is
    /// authoritative (an SOA: yes; a referral: no).
    pub authority: u8,
    pub additional: u8,
    pub authoritative: bool,
}

/// Most compression pointers a template's records hold.
pub const FIXUPS_MAX: usize = 16;
pub const NO_FIXUP: u16 = 0xffff;
/// Bytes of a [`Template`] at the head of a template entry's section.
pub const TEMPLATE_LEN: usize = 56;

/// Where [`Template`]'s fields sit in its bytes (little-endian).
pub mod template_at {
    pub const SAMPLE_LEN: usize = 0;
    pub const FIXUPS: usize = 2;
    pub const RISKY: usize = FIXUPS + 2 * super::FIXUPS_MAX;
    pub const AUTHORITY: usize = RISKY + 16;
    pub const ADDITIONAL: usize = AUTHORITY + 1;
    pub const AUTHORITATIVE: usize = AUTHORITY + 2;
}

impl Template {
    pub fn to_bytes(&self) -> [u8; TEMPLATE_LEN] {
        let mut out = [0u8; TEMPLATE_LEN];
        out[..2].copy_from_slice(&self.sample_len.to_le_bytes());
        for (i, f) in self.fixups.iter().enumerate() {
            let at = template_at::FIXUPS + 2 * i;
            out[at..at + 2].copy_from_slice(&f.to_le_bytes());
        }
        out[template_at::RISKY..template_at::RISKY + 8].copy_from_slice(&self.risky[0]);
        out[template_at::RISKY + 8..template_at::AUTHORITY].copy_from_slice(&self.risky[1]);
        out[template_at::AUTHORITY] = self.authority;
        out[template_at::ADDITIONAL] = self.additional;
        out[template_at::AUTHORITATIVE] = self.authoritative as u8;
        out
    }

    pub fn from_bytes(b: &[u8; TEMPLATE_LEN]) -> Template {
        let word = |at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
        let mut t = Template {
            sample_len: word(template_at::SAMPLE_LEN),
            authority: b[template_at::AUTHORITY],
            additional: b[template_at::ADDITIONAL],
            authoritative: b[template_at::AUTHORITATIVE] != 0,
            ..Template::default()
        };
        for (i, f) in t.fixups.iter_mut().enumerate() {
            *f = word(template_at::FIXUPS + 2 * i);
        }
        t.risky[0].copy_from_slice(&b[template_at::RISKY..template_at::RISKY + 8]);
        t.risky[1].copy_from_slice(&b[template_at::RISKY + 8..template_at::AUTHORITY]);
        t
    }
}

/// Where a template pointer to `target` (an offset in the sample
/// message) points in a reply whose question name is `qname_len`
/// bytes and whose SOA record follows `prefix_len` bytes of answer
/// records (a CNAME chain; 0 for a plain negative answer): into the
/// question's apex, moved with the name's length; into the record
/// itself, moved by the prefix as well.
#[inline(always)]
pub const fn relocate(target: u32, sample_len: u32, qname_len: u32, prefix_len: u32) -> u32 {
    let record_start = crate::DNS_HEADER_LEN as u32 + sample_len + 4;
    let moved = (target + qname_len).wrapping_sub(sample_len);
    let moved = if target >= record_start {
        moved + prefix_len
    } else {
        moved
    };
    moved & 0x3fff
}

/// A name's EXIST facts folded into its A entry, so a name with an
/// address takes one kernel element, not two: the facts sit in the
/// entry's last [`fold::LEN`] bytes of inline data, which an entry whose
/// section is short enough (one A record) or in a block (whose inline
/// data holds only its zone and counts) leaves unused. They read as an
/// EXIST entry's section: apex length, flags, type count, then
/// [`fold::MARK`] where an EXIST entry has a zero, then the types. A name
/// without an EXIST entry is looked up under A before it is taken for
/// one that does not exist.
pub mod fold {
    use crate::{Answer, INLINE_MAX};

    use super::EXIST_HEAD;

    pub const LEN: usize = 8;
    /// Where the facts start in [`Answer::data`].
    pub const AT: usize = INLINE_MAX - LEN;
    /// Types folded facts list at most.
    pub const TYPES_MAX: usize = (LEN - EXIST_HEAD) / 2;
    /// Marks folded facts (the byte is zero in an entry without them).
    pub const MARK: u8 = 0xe5;

    const _: () = assert!(AT + LEN == INLINE_MAX && TYPES_MAX >= 1);

    /// Whether an entry whose section is `section_len` bytes leaves its
    /// last [`LEN`] inline bytes free: a short inline section, or one in
    /// a block (an absent marker's length is longer than any section,
    /// and its data all zero).
    #[inline(always)]
    pub const fn leaves_room(section_len: usize) -> bool {
        section_len <= AT || section_len > INLINE_MAX
    }

    /// The facts in `tail`, an entry's last [`LEN`] inline bytes, beside
    /// a section of `section_len` bytes, laid out as an EXIST entry's
    /// section; none when the section reaches into them or they are not
    /// marked. What the hot path reads from its packed copy of an entry.
    pub fn facts(section_len: usize, tail: &[u8]) -> Option<&[u8]> {
        if !leaves_room(section_len) || tail.len() != LEN || tail[3] != MARK {
            return None;
        }
        let count = (tail[2] as usize).min(TYPES_MAX);
        Some(&tail[..EXIST_HEAD + 2 * count])
    }

    impl Answer {
        /// Whether the entry holds a name's folded EXIST facts at
        /// `data[AT..]` ([`facts`], as the kernel tests it).
        #[inline(always)]
        pub const fn holds_exist(&self) -> bool {
            leaves_room(self.section_len() as usize) && self.data[AT + 3] == MARK
        }

        /// Folds the facts of `exist` (an EXIST entry) into this entry;
        /// false when they do not fit (a section in the way, too many
        /// types, or a different signed flag).
        pub fn fold_exist(&mut self, exist: &Answer) -> bool {
            let facts = &exist.data[..exist.section_len() as usize];
            let same_signing = (self.flags() ^ exist.flags()) & crate::answer_flags::SIGNED == 0;
            if !leaves_room(self.section_len() as usize)
                || facts.len() > LEN
                || facts.len() < EXIST_HEAD
                || !same_signing
            {
                return false;
            }
            self.data[AT..].fill(0);
            self.data[AT..AT + facts.len()].copy_from_slice(facts);
            self.data[AT + 3] = MARK;
            true
        }

        /// The folded facts, laid out as an EXIST entry's section.
        pub fn folded_exist(&self) -> Option<&[u8]> {
            facts(self.section_len() as usize, &self.data[AT..])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{answer_flags, Answer};

    fn exist(types: &[u16], flags: u16) -> Answer {
        let mut e = Answer::new((EXIST_HEAD + 2 * types.len()) as u16, 0, flags);
        e.data[..3].copy_from_slice(&[12, exist_flags::NODATA_OTHER, types.len() as u8]);
        for (i, t) in types.iter().enumerate() {
            e.data[EXIST_HEAD + 2 * i..][..2].copy_from_slice(&t.to_le_bytes());
        }
        e
    }

    #[test]
    fn exist_facts_fold_where_the_entry_has_room_and_read_back_as_an_exist_section() {
        let facts = exist(&[65], 0);
        // One A record (16 bytes) inline: room.
        let mut a = Answer::new(16, 1, 0);
        a.data[..16].fill(0xee);
        assert!(!a.holds_exist());
        assert!(a.fold_exist(&facts));
        assert!(a.holds_exist());
        let folded = a.folded_exist().unwrap();
        assert_eq!(folded[..3], facts.data[..3]);
        assert_eq!(folded[EXIST_HEAD..], 65u16.to_le_bytes());
        assert!(
            a.data[..16].iter().all(|&b| b == 0xee),
            "the section is untouched"
        );
        // A block entry: its inline data holds only zone and counts.
        let mut block = Answer::new(200, 3, 0);
        block.set_zone(7);
        assert!(block.fold_exist(&facts) && block.holds_exist() && block.zone() == 7);
        // Two A records fill the inline data; an AAAA record too.
        for len in [32, 28, fold::AT as u16 + 1] {
            let mut full = Answer::new(len, 2, 0);
            full.data[..len as usize].fill(fold::MARK);
            assert!(!full.fold_exist(&facts));
            assert!(
                !full.holds_exist(),
                "section bytes are never taken for facts"
            );
        }
        // Too many types, or a signed name's facts in an unsigned entry.
        assert!(!Answer::new(16, 1, 0).fold_exist(&exist(&[15, 16, 65], 0)));
        assert!(!Answer::new(16, 1, 0).fold_exist(&exist(&[], answer_flags::SIGNED)));
        assert!(!Answer::absent().holds_exist());
    }
}
