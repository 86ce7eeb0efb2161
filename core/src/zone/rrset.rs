//! RRsets as the zone keeps them, and the name and DNSSEC helpers the
//! zone model shares.

use hickory_proto::dnssec::rdata::DNSSECRData;
use hickory_proto::rr::{Name, RData, RecordType};

use super::packed::{self, PackError, PackedRdatas};

/// All records of one (owner, type), in stable (insertion) order, packed
/// in wire form (see [`packed`]).
///
/// RFC 2181 §5.2: an RRset has one TTL; the latest inserted record's TTL wins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RRset {
    pub rtype: RecordType,
    pub ttl: u32,
    pub(super) rdatas: PackedRdatas,
}

impl RRset {
    pub fn new<'a>(
        rtype: RecordType,
        ttl: u32,
        rdatas: impl IntoIterator<Item = &'a RData>,
    ) -> Result<Self, PackError> {
        Ok(RRset {
            rtype,
            ttl,
            rdatas: PackedRdatas::pack(rdatas)?,
        })
    }

    /// A set of records already packed (a snapshot's).
    pub fn from_packed(rtype: RecordType, ttl: u32, rdatas: PackedRdatas) -> Self {
        RRset { rtype, ttl, rdatas }
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.rdatas.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rdatas.is_empty()
    }

    /// The records, decoded.
    pub fn rdatas(&self) -> impl Iterator<Item = RData> + '_ {
        self.rdatas.decoded(self.rtype)
    }

    /// The first record, decoded.
    pub fn first(&self) -> Option<RData> {
        self.rdatas().next()
    }

    /// Each record's RDATA in wire form (names uncompressed).
    pub fn wire(&self) -> packed::WireRdatas<'_> {
        self.rdatas.wire()
    }

    pub fn packed(&self) -> &PackedRdatas {
        &self.rdatas
    }

    pub fn contains(&self, rdata: &RData) -> bool {
        self.rdatas.position(rdata).is_some()
    }

    /// The type an RRSIG set covers: the first two bytes of its RDATA.
    pub fn covered(&self) -> Option<RecordType> {
        if self.rtype != RecordType::RRSIG {
            return None;
        }
        let w = self.rdatas.wire().next()?;
        Some(RecordType::from(u16::from_be_bytes(
            w.get(..2)?.try_into().ok()?,
        )))
    }

    /// Whether a record of `rtype` with `rdata` belongs in this set.
    pub(super) fn same_set(&self, rtype: RecordType, rdata: Option<&RData>) -> bool {
        self.rtype == rtype
            && (rtype != RecordType::RRSIG || self.covered() == rdata.and_then(covered_type))
    }
}

/// The chain an NSEC3 or NSEC3PARAM record belongs to, as the prefix of
/// the NSEC3 index's keys: iterations, salt length, salt.
pub fn nsec3_chain(rdata: &RData) -> Option<Vec<u8>> {
    let (iterations, salt) = match rdata {
        RData::DNSSEC(DNSSECRData::NSEC3(n)) => (n.iterations(), n.salt()),
        RData::DNSSEC(DNSSECRData::NSEC3PARAM(p)) => (p.iterations(), p.salt()),
        _ => return None,
    };
    Some(nsec3_chain_key(iterations, salt))
}

/// The NSEC3 index's key prefix for a chain of `iterations` and `salt`.
pub fn nsec3_chain_key(iterations: u16, salt: &[u8]) -> Vec<u8> {
    let mut chain = Vec::with_capacity(3 + salt.len());
    chain.extend_from_slice(&iterations.to_be_bytes());
    chain.push(salt.len() as u8);
    chain.extend_from_slice(salt);
    chain
}

/// The type an RRSIG record covers.
pub fn covered_type(rdata: &RData) -> Option<RecordType> {
    match rdata {
        RData::DNSSEC(DNSSECRData::RRSIG(sig)) => Some(sig.input().type_covered),
        _ => None,
    }
}

/// Number of labels, the root excluded and a leading `*` included
/// (hickory's `num_labels` leaves `*` out, as RRSIG label counts do, which
/// is wrong for walking names).
pub fn label_count(name: &Name) -> usize {
    name.iter().count()
}

/// Lower-cased, fully qualified copy of a name: the form zone origins and
/// map keys use.
pub fn fqdn_lower(name: &Name) -> Name {
    let mut n = name.to_lowercase();
    n.set_fqdn(true);
    n
}

/// The types an online signer owns: replaced whole at every signing,
/// whatever a zone file or a generator put there.
pub fn signer_managed(rtype: RecordType) -> bool {
    matches!(
        rtype,
        RecordType::RRSIG
            | RecordType::NSEC
            | RecordType::NSEC3
            | RecordType::NSEC3PARAM
            | RecordType::DNSKEY
            | RecordType::CDS
            | RecordType::CDNSKEY
    )
}
