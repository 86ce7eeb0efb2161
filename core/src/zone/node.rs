//! One owner name's RRsets.

use std::sync::Arc;

use hickory_proto::rr::RecordType;

use super::rrset::RRset;

#[derive(Clone, Debug, Default)]
pub struct Node {
    pub(super) rrsets: Arc<Vec<RRset>>,
    pub(super) children: u32,
}

impl Node {
    /// A node as a zone image stores it: its RRsets and how many nodes
    /// are below it.
    pub fn from_parts(rrsets: Vec<RRset>, children: u32) -> Node {
        Node {
            rrsets: Arc::new(rrsets),
            children,
        }
    }

    /// How many nodes are below this one (an empty non-terminal has no
    /// RRsets but children).
    pub fn children(&self) -> u32 {
        self.children
    }

    pub fn rrsets(&self) -> &[RRset] {
        &self.rrsets
    }

    /// The RRset of `rtype` (for RRSIG: the first of the per-type sets;
    /// see [`Node::signatures`]).
    pub fn rrset(&self, rtype: RecordType) -> Option<&RRset> {
        self.rrsets.iter().find(|s| s.rtype == rtype)
    }

    /// The RRSIGs covering `covered`. RRSIGs are kept as one set per
    /// covered type, each with the TTL of the set it signs.
    pub fn signatures(&self, covered: RecordType) -> Option<&RRset> {
        self.rrsets
            .iter()
            .find(|s| s.rtype == RecordType::RRSIG && s.covered() == Some(covered))
    }

    /// This node's set that holds the same records as `set` would: same
    /// type, and for RRSIG the same covered type.
    pub fn set_like(&self, set: &RRset) -> Option<&RRset> {
        self.rrsets
            .iter()
            .find(|s| s.rtype == set.rtype && s.covered() == set.covered())
    }

    /// True when the node exists only for NSEC3 records (an NSEC3 owner
    /// name, which is not a name of the zone, RFC 5155 §7.2.9).
    pub fn is_nsec3_only(&self) -> bool {
        self.children == 0
            && !self.rrsets.is_empty()
            && self
                .rrsets
                .iter()
                .all(|s| s.rtype == RecordType::NSEC3 || s.covered() == Some(RecordType::NSEC3))
    }

    /// A node with no records (an empty non-terminal, or the apex of an
    /// empty zone).
    pub fn is_empty(&self) -> bool {
        self.rrsets.is_empty()
    }

    pub fn has_children(&self) -> bool {
        self.children > 0
    }
}
