//! One owner name's RRsets.

use hickory_proto::rr::RecordType;
use triomphe::ThinArc;

use super::rrset::RRset;

/// A name's RRsets live in one shared allocation behind a thin pointer
/// (an `Arc<Vec<RRset>>` took two allocations and 16 more bytes in every
/// map entry); an empty non-terminal allocates nothing.
#[derive(Clone, Debug, Default)]
pub struct Node {
    rrsets: Option<ThinArc<(), RRset>>,
    pub(super) children: u32,
}

impl Node {
    /// A node as a zone image stores it: its RRsets and how many nodes
    /// are below it.
    pub fn from_parts<I>(rrsets: I, children: u32) -> Node
    where
        I: IntoIterator<Item = RRset>,
        I::IntoIter: ExactSizeIterator,
    {
        let rrsets = rrsets.into_iter();
        Node {
            rrsets: (rrsets.len() > 0).then(|| ThinArc::from_header_and_iter((), rrsets)),
            children,
        }
    }

    /// Replaces the node's RRsets (a change copies the node's sets: they
    /// are shared with the zone's earlier versions).
    pub(super) fn set_rrsets(&mut self, rrsets: Vec<RRset>) {
        self.rrsets =
            (!rrsets.is_empty()).then(|| ThinArc::from_header_and_iter((), rrsets.into_iter()));
    }

    /// Brings the sets' reference count into the cache ahead of a copy
    /// or a drop of the node (the overlay's trie copies and frees nodes by the dozen).
    pub(super) fn prefetch(&self) {
        if let Some(sets) = &self.rrsets {
            crate::prefetch::prefetch(sets.ptr().cast());
        }
    }

    /// How many nodes are below this one (an empty non-terminal has no
    /// RRsets but children).
    pub fn children(&self) -> u32 {
        self.children
    }

    /// Whether both hold the very same sets (one version of the zone
    /// was made from the other, and this name was not changed).
    pub fn shares_sets(&self, other: &Node) -> bool {
        match (&self.rrsets, &other.rrsets) {
            (Some(a), Some(b)) => std::ptr::eq(&a.slice, &b.slice),
            (None, None) => true,
            _ => false,
        }
    }

    pub fn rrsets(&self) -> &[RRset] {
        match &self.rrsets {
            Some(sets) => &sets.slice,
            None => &[],
        }
    }

    /// The RRset of `rtype` (for RRSIG: the first of the per-type sets;
    /// see [`Node::signatures`]).
    pub fn rrset(&self, rtype: RecordType) -> Option<&RRset> {
        self.rrsets().iter().find(|s| s.rtype == rtype)
    }

    /// The RRSIGs covering `covered`. RRSIGs are kept as one set per
    /// covered type, each with the TTL of the set it signs.
    pub fn signatures(&self, covered: RecordType) -> Option<&RRset> {
        self.rrsets()
            .iter()
            .find(|s| s.rtype == RecordType::RRSIG && s.covered() == Some(covered))
    }

    /// This node's set that holds the same records as `set` would: same
    /// type, and for RRSIG the same covered type.
    pub fn set_like(&self, set: &RRset) -> Option<&RRset> {
        self.rrsets()
            .iter()
            .find(|s| s.rtype == set.rtype && s.covered() == set.covered())
    }

    /// True when the node exists only for NSEC3 records (an NSEC3 owner
    /// name, which is not a name of the zone, RFC 5155 §7.2.9).
    pub fn is_nsec3_only(&self) -> bool {
        self.children == 0
            && !self.rrsets().is_empty()
            && self
                .rrsets()
                .iter()
                .all(|s| s.rtype == RecordType::NSEC3 || s.covered() == Some(RecordType::NSEC3))
    }

    /// A node with no records (an empty non-terminal, or the apex of an
    /// empty zone).
    pub fn is_empty(&self) -> bool {
        self.rrsets.is_none()
    }

    pub fn has_children(&self) -> bool {
        self.children > 0
    }
}
