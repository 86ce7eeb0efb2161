//! The zone model: what every other part of the server compiles from.
//!
//! A [`Zone`] is a persistent (structurally shared) map from lower-cased owner
//! name to [`Node`]. Cloning a zone is O(1) and a small change to a clone
//! costs O(log n), which is what lets the store publish a fresh immutable
//! snapshot for every registration change without copying a million names.
//!
//! Empty non-terminals (names with no records but with descendants) exist as
//! nodes with no RRsets, because they block wildcard synthesis (RFC 4592) and
//! answer NODATA rather than NXDOMAIN.

pub mod check;
pub mod feed;
pub mod ids;
pub mod image;
pub mod load_log;
pub mod packed;
pub mod parser;
pub mod serial;
pub mod signing_check;
pub mod snapshot;
pub mod store;

use std::sync::Arc;

use hickory_proto::dnssec::rdata::DNSSECRData;
use hickory_proto::rr::rdata::SOA;
use hickory_proto::rr::{DNSClass, LowerName, Name, RData, Record, RecordType};

pub use check::{check_zone, ZoneCheckError};
pub use feed::{Commit, FeedItem, Subscription, ZoneEvent};
pub use load_log::{LoadLog, LoadRecord, TransferOutcome};
pub use packed::{PackError, PackedRdatas};
pub use parser::{parse_zone_file, parse_zone_str, SourceRecord, ZoneFileError};
pub use serial::SerialPolicy;
pub use snapshot::{Snapshot, ZoneDiff};
pub use store::{Change, RotationPolicy, ZoneStore};

/// All records of one (owner, type), in stable (insertion) order, packed
/// in wire form (see [`packed`]).
///
/// RFC 2181 §5.2: an RRset has one TTL; the latest inserted record's TTL wins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RRset {
    pub rtype: RecordType,
    pub ttl: u32,
    rdatas: PackedRdatas,
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
    fn same_set(&self, rtype: RecordType, rdata: Option<&RData>) -> bool {
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

#[derive(Clone, Debug, Default)]
pub struct Node {
    rrsets: Arc<Vec<RRset>>,
    children: u32,
}

impl Node {
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

/// What [`Zone::insert_at`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inserted {
    /// Records that were new (duplicates merge).
    pub added: usize,
    /// The name now holds a CNAME beside other data, or two CNAMEs.
    pub cname_conflict: bool,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ZoneError {
    #[error("{name} is not inside zone {origin}")]
    OutOfZone { name: Box<Name>, origin: Box<Name> },
    #[error("class {class} is not served (only IN)")]
    Class { class: DNSClass },
    #[error(transparent)]
    Pack(#[from] PackError),
}

/// A persistent hash map hashed with foldhash: every query hashes its name
/// into these maps (with SipHash that was a visible share of a fallback
/// answer's CPU). Seeded explicitly (a zone picks a random seed and its
/// image keeps it), so a zone read back from its image is inserted in its
/// map's own order, leaf after leaf, instead of at random: that halved
/// the time to build a million-name map.
pub(crate) type FastMap<K, V> =
    imbl::GenericHashMap<K, V, foldhash::fast::FixedState, imbl::shared_ptr::DefaultSharedPtr>;

/// A random seed for a zone's map.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// One authoritative zone.
#[derive(Clone, Debug)]
pub struct Zone {
    origin: Name,
    origin_key: LowerName,
    nodes: FastMap<LowerName, Node>,
    /// The seed of `nodes`' hasher.
    seed: u64,
    /// Names this version of the zone's contents: new for every zone
    /// built and for every change committed (`ZoneStore::commit`), kept
    /// by its image. Equal ids mean equal contents (the kernel table
    /// pinned across a restart is adopted on that: `compile::table_tag`).
    uid: u64,
    record_count: usize,
    /// Non-apex names with NS records. Without any, lookups skip the
    /// label-by-label walk that looks for a cut above the name.
    cut_count: usize,
    /// DNAME RRsets: names below them are redirected (RFC 6672).
    dname_count: usize,
    /// A secondary zone past its SOA expire: answered with SERVFAIL.
    expired: bool,
    /// A and AAAA answers rotate with the query ID (`xdpdns_common::rotation`).
    /// Serving policy, not contents: the store sets it from its
    /// [`RotationPolicy`](store::RotationPolicy) on every commit.
    rotate: bool,
    /// The apex SOA and its TTL, decoded once (serial checks and negative
    /// answers read it).
    soa: Option<Arc<(SOA, u32)>>,
    /// The zone file(s) it was loaded from, as they were then (file zones
    /// only): what decides whether its image is still current.
    source: Option<Arc<image::SourceStamp>>,
    /// Owners of NSEC records, in canonical order (RFC 4034 §6.1).
    nsec_owners: imbl::OrdSet<LowerName>,
    /// NSEC3 owners by chain (see [`nsec3_chain`]) and the hash their
    /// first label spells: a zone being re-salted holds two chains.
    nsec3_hashes: imbl::OrdMap<Vec<u8>, LowerName>,
}

impl Zone {
    /// An empty zone (only its apex node, no records).
    pub fn new(origin: &Name) -> Self {
        Self::with_seed(origin, random_seed())
    }

    /// An empty zone whose map hashes with `seed` (an image's).
    pub fn with_seed(origin: &Name, seed: u64) -> Self {
        let origin = fqdn_lower(origin);
        let origin_key = LowerName::new(&origin);
        let mut nodes = FastMap::with_hasher(foldhash::fast::FixedState::with_seed(seed));
        nodes.insert(origin_key.clone(), Node::default());
        Zone {
            origin,
            origin_key,
            nodes,
            seed,
            uid: random_seed(),
            record_count: 0,
            cut_count: 0,
            dname_count: 0,
            expired: false,
            rotate: false,
            soa: None,
            source: None,
            nsec_owners: imbl::OrdSet::new(),
            nsec3_hashes: imbl::OrdMap::new(),
        }
    }

    /// Builds a zone from records without any semantic check (see
    /// [`check_zone`] for those).
    pub fn from_records<I>(origin: &Name, records: I) -> Result<Self, ZoneError>
    where
        I: IntoIterator<Item = Record>,
    {
        let mut zone = Zone::new(origin);
        for r in records {
            zone.insert(r)?;
        }
        Ok(zone)
    }

    /// A zone from whole nodes (an image's), with its record count.
    /// `None` unless every name is inside the zone and the apex is there.
    pub fn from_nodes(
        origin: &Name,
        seed: u64,
        nodes: impl IntoIterator<Item = (LowerName, Node)>,
        record_count: usize,
    ) -> Option<Self> {
        let mut zone = Zone::with_seed(origin, seed);
        zone.nodes.clear();
        for (key, node) in nodes {
            if !zone.origin_key.zone_of(&key) {
                return None;
            }
            for set in node.rrsets() {
                match set.rtype {
                    RecordType::NS if key != zone.origin_key => zone.cut_count += 1,
                    RecordType::DNAME => zone.dname_count += 1,
                    RecordType::NSEC | RecordType::NSEC3 => {
                        for d in set.rdatas() {
                            zone.index_denial(set.rtype, &key, nsec3_chain(&d), true);
                        }
                    }
                    _ => {}
                }
            }
            zone.nodes.insert(key, node);
        }
        if !zone.nodes.contains_key(&zone.origin_key) {
            return None;
        }
        zone.record_count = record_count;
        zone.refresh_soa();
        Some(zone)
    }

    pub fn origin(&self) -> &Name {
        &self.origin
    }

    /// The seed of the zone's map (kept in its image).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The id of this version of the zone's contents (see the field).
    pub fn uid(&self) -> u64 {
        self.uid
    }

    /// Takes the id an image recorded.
    pub(crate) fn set_uid(&mut self, uid: u64) {
        self.uid = uid;
    }

    /// A new id: the contents changed.
    pub(crate) fn renew_uid(&mut self) {
        self.uid = random_seed();
    }

    pub fn source(&self) -> Option<&image::SourceStamp> {
        self.source.as_deref()
    }

    pub fn set_source(&mut self, stamp: image::SourceStamp) {
        self.source = Some(Arc::new(stamp));
    }

    pub fn origin_key(&self) -> &LowerName {
        &self.origin_key
    }

    /// Number of records (RRs, not RRsets).
    pub fn is_expired(&self) -> bool {
        self.expired
    }

    pub fn set_expired(&mut self, expired: bool) {
        self.expired = expired;
    }

    /// Whether A and AAAA answers rotate with the query ID.
    pub fn rotates(&self) -> bool {
        self.rotate
    }

    pub fn set_rotation(&mut self, rotate: bool) {
        self.rotate = rotate;
    }

    pub fn record_count(&self) -> usize {
        self.record_count
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn node(&self, name: &LowerName) -> Option<&Node> {
        self.nodes.get(name)
    }

    pub fn apex(&self) -> &Node {
        self.nodes
            .get(&self.origin_key)
            .expect("apex node always exists")
    }

    /// The apex SOA and its TTL, if the zone has one.
    pub fn soa(&self) -> Option<(&SOA, u32)> {
        self.soa.as_deref().map(|(soa, ttl)| (soa, *ttl))
    }

    fn refresh_soa(&mut self) {
        let set = self.apex().rrset(RecordType::SOA);
        self.soa = match set.and_then(|s| Some((s.first()?, s.ttl))) {
            Some((RData::SOA(soa), ttl)) => Some(Arc::new((soa, ttl))),
            _ => None,
        };
    }

    /// The apex SOA as a record (what transfers and NOTIFY carry).
    pub fn soa_record(&self) -> Option<Record> {
        let (soa, ttl) = self.soa()?;
        Some(Record::from_rdata(
            self.origin.clone(),
            ttl,
            RData::SOA(soa.clone()),
        ))
    }

    pub fn serial(&self) -> Option<u32> {
        self.soa().map(|(soa, _)| soa.serial)
    }

    /// Adds one record. Returns `false` if the identical record was already
    /// present (duplicates are merged, RFC 2181 §5).
    pub fn insert(&mut self, record: Record) -> Result<bool, ZoneError> {
        let key = LowerName::new(&record.name);
        Ok(self.insert_at(&key, [record])?.added == 1)
    }

    /// Adds records that all have the owner `key` (a file's consecutive
    /// lines for one name: one map lookup for all of them).
    pub fn insert_at(
        &mut self,
        key: &LowerName,
        records: impl IntoIterator<Item = Record>,
    ) -> Result<Inserted, ZoneError> {
        if !self.origin_key.zone_of(key) {
            return Err(ZoneError::OutOfZone {
                name: Box::new(Name::from(key)),
                origin: Box::new(self.origin.clone()),
            });
        }
        let node = match self.nodes.get_mut(key) {
            Some(node) => node,
            None => {
                self.ensure_node(key);
                self.nodes.get_mut(key).expect("ensured")
            }
        };
        let rrsets = Arc::make_mut(&mut node.rrsets);
        let mut indexed = Vec::new();
        let mut added = 0;
        let mut soa = false;
        for record in records {
            if record.dns_class != DNSClass::IN {
                return Err(ZoneError::Class {
                    class: record.dns_class,
                });
            }
            let rtype = record.record_type();
            // Encoded once: compared with the set's records, then kept.
            let wire = packed::encode(&record.data)?;
            let wire = wire.as_slice();
            let new = match rrsets
                .iter_mut()
                .find(|s| s.same_set(rtype, Some(&record.data)))
            {
                Some(set) => {
                    set.ttl = record.ttl;
                    if set.rdatas.position_encoded(&record.data, wire).is_some() {
                        false
                    } else {
                        set.rdatas.push_encoded(rtype, wire)?;
                        true
                    }
                }
                None => {
                    let mut rdatas = PackedRdatas::default();
                    rdatas.push_encoded(rtype, wire)?;
                    rrsets.push(RRset::from_packed(rtype, record.ttl, rdatas));
                    if rtype == RecordType::NS && *key != self.origin_key {
                        self.cut_count += 1;
                    }
                    if rtype == RecordType::DNAME {
                        self.dname_count += 1;
                    }
                    true
                }
            };
            soa |= rtype == RecordType::SOA;
            if new {
                added += 1;
                if matches!(rtype, RecordType::NSEC | RecordType::NSEC3) {
                    indexed.push((rtype, nsec3_chain(&record.data)));
                }
            }
        }
        // A pushed-to vector keeps room for four sets; most names have
        // one to three, and a million of them kept 18 MB of spare room.
        rrsets.shrink_to_fit();
        // RFC 2181 §10.1, RFC 4035 §2.5: a CNAME stands alone, but for
        // the DNSSEC records that sign or deny it.
        let cname = rrsets.iter().find(|s| s.rtype == RecordType::CNAME);
        let beside = rrsets.iter().any(|s| {
            !matches!(
                s.rtype,
                RecordType::CNAME | RecordType::RRSIG | RecordType::NSEC
            )
        });
        let cname_conflict = cname.is_some_and(|c| beside || c.len() > 1);
        self.record_count += added;
        for (rtype, chain) in indexed {
            self.index_denial(rtype, key, chain, true);
        }
        if soa {
            self.refresh_soa();
        }
        Ok(Inserted {
            added,
            cname_conflict,
        })
    }

    /// Removes one record (matched by owner, type and data; TTL ignored).
    /// Returns whether it was present.
    pub fn remove(&mut self, name: &Name, rdata: &RData) -> bool {
        let key = LowerName::new(name);
        let Some(node) = self.nodes.get_mut(&key) else {
            return false;
        };
        let rtype = rdata.record_type();
        let rrsets = Arc::make_mut(&mut node.rrsets);
        let Some(pos) = rrsets.iter().position(|s| s.same_set(rtype, Some(rdata))) else {
            return false;
        };
        let Some(i) = rrsets[pos].rdatas.position(rdata) else {
            return false;
        };
        rrsets[pos].rdatas.remove(i);
        if rrsets[pos].is_empty() {
            rrsets.remove(pos);
            if rtype == RecordType::NS && key != self.origin_key {
                self.cut_count -= 1;
            }
            if rtype == RecordType::DNAME {
                self.dname_count -= 1;
            }
            self.index_denial(rtype, &key, nsec3_chain(rdata), false);
        }
        self.record_count -= 1;
        self.prune(key);
        if rtype == RecordType::SOA {
            self.refresh_soa();
        }
        true
    }

    /// Whether any name below the apex has NS records (delegates).
    /// Keeps the NSEC and NSEC3 indexes in step with the records; `chain`
    /// is an NSEC3 record's [`nsec3_chain`].
    fn index_denial(
        &mut self,
        rtype: RecordType,
        key: &LowerName,
        chain: Option<Vec<u8>>,
        present: bool,
    ) {
        match rtype {
            RecordType::NSEC if present => {
                self.nsec_owners.insert(key.clone());
            }
            RecordType::NSEC => {
                self.nsec_owners.remove(key);
            }
            RecordType::NSEC3 => {
                let (Some(mut entry), Some(hash)) = (chain, self.nsec3_hash_of_owner(key)) else {
                    return;
                };
                entry.extend_from_slice(&hash);
                if present {
                    self.nsec3_hashes.insert(entry, key.clone());
                } else {
                    self.nsec3_hashes.remove(&entry);
                }
            }
            _ => {}
        }
    }

    /// The hash an NSEC3 owner name spells: its first label in base32hex,
    /// directly below the apex.
    fn nsec3_hash_of_owner(&self, key: &LowerName) -> Option<Vec<u8>> {
        if key.base_name() != self.origin_key {
            return None;
        }
        let name = Name::from(key);
        let label = name.iter().next()?;
        data_encoding::BASE32HEX_NOPAD
            .decode(&label.to_ascii_uppercase())
            .ok()
    }

    /// Signed: the apex holds a DNSKEY RRset.
    pub fn is_signed(&self) -> bool {
        self.apex().rrset(RecordType::DNSKEY).is_some()
    }

    /// The NSEC owner at or before `key` in canonical order (the NSEC that
    /// matches or covers it), wrapping to the last one.
    pub fn nsec_at_or_before(&self, key: &LowerName) -> Option<&LowerName> {
        self.nsec_owners
            .range(..=key.clone())
            .next_back()
            .or_else(|| self.nsec_owners.get_max())
    }

    pub fn has_nsec(&self) -> bool {
        !self.nsec_owners.is_empty()
    }

    pub fn has_nsec3(&self) -> bool {
        !self.nsec3_hashes.is_empty()
    }

    /// The NSEC3 owner of `chain` (see [`nsec3_chain`]) whose hash equals
    /// `hash`.
    pub fn nsec3_matching(&self, chain: &[u8], hash: &[u8]) -> Option<&LowerName> {
        self.nsec3_hashes.get(&[chain, hash].concat())
    }

    /// The NSEC3 owner of `chain` whose hash is the last one before `hash`
    /// (the one whose interval covers it), wrapping to the chain's last.
    pub fn nsec3_covering(&self, chain: &[u8], hash: &[u8]) -> Option<&LowerName> {
        let start = chain.to_vec();
        let mut end = chain.to_vec();
        // Above every key of the chain: hashes are at most 255 bytes.
        end.extend_from_slice(&[0xff; 256]);
        self.nsec3_hashes
            .range(start.clone()..[chain, hash].concat())
            .next_back()
            .or_else(|| self.nsec3_hashes.range(start..end).next_back())
            .map(|(_, owner)| owner)
    }

    /// The zone's NSEC3 hashing parameters: the apex NSEC3PARAM with flags
    /// 0 (RFC 5155 §4.1.2), else those of any NSEC3 record.
    pub fn nsec3_params(&self) -> Option<(u16, Vec<u8>)> {
        let from_param = self.apex().rrset(RecordType::NSEC3PARAM).and_then(|set| {
            set.rdatas().find_map(|d| match d {
                RData::DNSSEC(DNSSECRData::NSEC3PARAM(p)) if p.flags() == 0 => {
                    Some((p.iterations(), p.salt().to_vec()))
                }
                _ => None,
            })
        });
        from_param.or_else(|| {
            let (_, owner) = self.nsec3_hashes.get_min()?;
            let set = self.node(owner)?.rrset(RecordType::NSEC3)?;
            match set.first()? {
                RData::DNSSEC(DNSSECRData::NSEC3(n)) => Some((n.iterations(), n.salt().to_vec())),
                _ => None,
            }
        })
    }

    pub fn has_dnames(&self) -> bool {
        self.dname_count > 0
    }

    pub fn has_cuts(&self) -> bool {
        self.cut_count > 0
    }

    /// Whether `key` is at or below a zone cut (an NS RRset on a non-apex
    /// name): such names are answered with a referral, not with data.
    /// Whether a DNAME above `key` (the apex's included) redirects it: its
    /// own data is occluded (RFC 6672 §2.4).
    pub fn below_dname(&self, key: &LowerName) -> bool {
        if !self.has_dnames() {
            return false;
        }
        (label_count(&self.origin)..label_count(key)).any(|labels| {
            let ancestor = LowerName::from(key.trim_to(labels));
            self.node(&ancestor)
                .is_some_and(|n| n.rrset(RecordType::DNAME).is_some())
        })
    }

    pub fn below_cut(&self, key: &LowerName) -> bool {
        if !self.has_cuts() {
            return false;
        }
        (label_count(&self.origin) + 1..=label_count(key)).any(|labels| {
            let ancestor = LowerName::from(key.trim_to(labels));
            self.node(&ancestor)
                .is_some_and(|n| n.rrset(RecordType::NS).is_some())
        })
    }

    /// Every record, node by node (order unspecified, RRset order kept).
    pub fn records(&self) -> impl Iterator<Item = Record> + '_ {
        self.nodes.iter().flat_map(|(key, node)| {
            let name = Name::from(key);
            node.rrsets.iter().flat_map(move |set| {
                let name = name.clone();
                set.rdatas()
                    .map(move |d| Record::from_rdata(name.clone(), set.ttl, d))
            })
        })
    }

    /// Owner names with their nodes.
    pub fn nodes(&self) -> impl Iterator<Item = (&LowerName, &Node)> {
        self.nodes.iter()
    }

    /// Creates `key` and any missing ancestors up to the apex, keeping the
    /// child counts that decide empty non-terminals.
    fn ensure_node(&mut self, key: &LowerName) {
        if self.nodes.contains_key(key) {
            return;
        }
        self.nodes.insert(key.clone(), Node::default());
        let mut child = key.clone();
        loop {
            let parent = child.base_name();
            let existed = self.nodes.contains_key(&parent);
            let node = self.nodes.entry(parent.clone()).or_default();
            node.children += 1;
            if existed || parent == self.origin_key {
                return;
            }
            child = parent;
        }
    }

    /// Removes `key` if it is now empty and childless, then walks upwards.
    fn prune(&mut self, mut key: LowerName) {
        while key != self.origin_key {
            match self.nodes.get(&key) {
                Some(n) if n.rrsets.is_empty() && n.children == 0 => {}
                _ => return,
            }
            self.nodes.remove(&key);
            let parent = key.base_name();
            if let Some(p) = self.nodes.get_mut(&parent) {
                p.children -= 1;
            }
            key = parent;
        }
    }
}

/// Why a zone file did not become a zone. Both variants print as one line
/// naming the file (and line, where there is one).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    File(#[from] ZoneFileError),
    #[error(transparent)]
    Check(#[from] ZoneCheckError),
}

/// Parses and checks a master file: the whole path from disk to a servable
/// zone. A signed zone's warnings (expiring signatures, ...) are logged.
pub fn load_zone_file(path: &std::path::Path, origin: &Name) -> Result<Zone, LoadError> {
    let (zone, warnings) = load_zone_file_with_warnings(path, origin)?;
    for w in warnings {
        tracing::warn!(zone = %zone.origin(), "{w}");
    }
    Ok(zone)
}

/// [`load_zone_file`], returning the signing warnings (one line each,
/// naming file and line) instead of logging them.
pub fn load_zone_file_with_warnings(
    path: &std::path::Path,
    origin: &Name,
) -> Result<(Zone, Vec<String>), LoadError> {
    // Two threads: this one parses, the other builds and checks the zone
    // from batches of records as they come (each about half the work).
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<SourceRecord>>(16);
    let started = std::time::Instant::now();
    let (parsed, built) = std::thread::scope(|scope| {
        let builder = scope.spawn(|| check::build_checked(origin, path, rx));
        let parsed = parser::parse_zone_file_in_batches(path, origin, &mut |batch| {
            // A builder that stopped on a problem has said so; the rest
            // of the file is still parsed (a syntax error comes first).
            let _ = tx.send(batch);
        });
        drop(tx);
        let parse_ms = started.elapsed().as_millis() as u64;
        let built = builder.join().expect("the zone builder does not panic");
        tracing::debug!(file = %path.display(), parse_ms, load_ms = started.elapsed().as_millis() as u64, "zone file parsed and built");
        (parsed, built)
    });
    let stamp = parsed?;
    let built = match built {
        Ok(b) => b,
        // The message names the earlier record of a conflict: the full
        // check over the whole file finds it.
        Err(first) => {
            let records = parse_zone_file(path, origin)?;
            return Err(check_zone(origin, path, &records)
                .err()
                .unwrap_or(first)
                .into());
        }
    };
    let mut zone = built.zone;
    // Every file read, each stamped just before it was read: an edit
    // during the load leaves the stamp stale, so the next start reads
    // the file again.
    zone.set_source(stamp);
    let signed = !built.dnssec.is_empty();
    let warnings = match signed || zone.is_signed() {
        true => signing_check::signing_warnings(origin, &built.dnssec, crate::clock::unix_secs()),
        false => Vec::new(),
    };
    Ok((zone, warnings))
}

/// [`load_zone_file`] for text already in memory; `file` names it in errors.
pub fn load_zone_str(text: &str, origin: &Name, file: &std::path::Path) -> Result<Zone, LoadError> {
    let records = parse_zone_str(text, origin, file)?;
    Ok(check_zone(origin, file, &records)?)
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

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::A;
    use std::str::FromStr;

    fn name(s: &str) -> Name {
        Name::from_str(s).unwrap()
    }

    fn a(owner: &str, ip: [u8; 4]) -> Record {
        Record::from_rdata(
            name(owner),
            300,
            RData::A(A::new(ip[0], ip[1], ip[2], ip[3])),
        )
    }

    #[test]
    fn empty_non_terminals_appear_and_disappear_with_their_descendants() {
        let mut z = Zone::new(&name("example.com."));
        z.insert(a("a.b.c.example.com.", [192, 0, 2, 1])).unwrap();
        let ent = LowerName::from(name("b.c.example.com."));
        assert!(z.node(&ent).unwrap().is_empty());
        assert!(z.node(&ent).unwrap().has_children());
        assert!(z.node(&LowerName::from(name("c.example.com."))).is_some());

        assert!(z.remove(&name("A.B.C.example.com."), &RData::A(A::new(192, 0, 2, 1))));
        assert!(
            z.node(&ent).is_none(),
            "ENT must go when its last descendant goes"
        );
        assert!(z.node(&LowerName::from(name("c.example.com."))).is_none());
        assert_eq!(z.node_count(), 1, "only the apex remains");
        assert_eq!(z.record_count(), 0);
    }

    #[test]
    fn zone_cuts_are_counted_as_ns_rrsets_come_and_go() {
        let mut z = Zone::new(&name("example.com."));
        let ns = |owner: &str, target: &str| {
            Record::from_rdata(
                name(owner),
                3600,
                RData::NS(hickory_proto::rr::rdata::NS(name(target))),
            )
        };
        z.insert(ns("example.com.", "ns1.example.com.")).unwrap();
        assert!(!z.has_cuts(), "apex NS is not a cut");
        z.insert(ns("sub.example.com.", "ns1.sub.example.com."))
            .unwrap();
        z.insert(ns("sub.example.com.", "ns2.sub.example.com."))
            .unwrap();
        assert!(z.has_cuts());
        assert!(z.below_cut(&LowerName::new(&name("a.sub.example.com."))));
        z.remove(
            &name("sub.example.com."),
            &RData::NS(hickory_proto::rr::rdata::NS(name("ns1.sub.example.com."))),
        );
        assert!(z.has_cuts(), "one NS record left");
        z.remove(
            &name("sub.example.com."),
            &RData::NS(hickory_proto::rr::rdata::NS(name("ns2.sub.example.com."))),
        );
        assert!(!z.has_cuts());
        assert!(!z.below_cut(&LowerName::new(&name("a.sub.example.com."))));
    }

    #[test]
    fn names_are_case_insensitive_and_duplicates_merge() {
        let mut z = Zone::new(&name("Example.COM."));
        assert!(z.insert(a("www.example.com.", [192, 0, 2, 1])).unwrap());
        assert!(!z.insert(a("WWW.Example.Com.", [192, 0, 2, 1])).unwrap());
        assert!(z.insert(a("WWW.Example.Com.", [192, 0, 2, 2])).unwrap());
        let node = z.node(&LowerName::from(name("wWw.eXample.com."))).unwrap();
        assert_eq!(node.rrset(RecordType::A).unwrap().len(), 2);
        assert_eq!(z.record_count(), 2);
        assert_eq!(z.origin().to_string(), "example.com.");
    }

    #[test]
    fn a_file_loads_on_two_threads_with_the_exact_checks_and_messages() {
        let dir = std::env::temp_dir().join(format!("xdpdns-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let origin = name("example.com.");
        let head = "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 h 1 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n";
        let load = |body: &str| {
            let path = dir.join("z.zone");
            std::fs::write(&path, format!("{head}{body}")).unwrap();
            load_zone_file(&path, &origin).map_err(|e| e.to_string())
        };
        // Many batches' worth, an owner's records split across lines.
        let mut big = String::new();
        for i in 0..10_000 {
            big.push_str(&format!(
                "h{i} A 10.0.{}.{}\nh{i} AAAA 2001:db8::{i:x}\n",
                i / 256,
                i % 256
            ));
        }
        big.push_str("h0 TXT \"again\"\n");
        let zone = load(&big).unwrap();
        assert_eq!(zone.record_count(), 3 + 20_001);
        let h0 = zone
            .node(&LowerName::from(name("h0.example.com.")))
            .unwrap();
        assert_eq!(h0.rrsets().len(), 3);
        assert!(zone.source().is_some_and(|s| s.is_current()));
        // An included file is stamped even when it holds no record.
        std::fs::write(dir.join("inc.zone"), "$TTL 60\n").unwrap();
        let zone = load(&format!(
            "$INCLUDE {}\nwww A 192.0.2.80\n",
            dir.join("inc.zone").display()
        ))
        .unwrap();
        let stamp = zone.source().unwrap();
        assert_eq!(stamp.files.len(), 2, "{stamp:?}");
        assert!(stamp.is_current());
        std::fs::write(dir.join("inc.zone"), "$TTL 120\n").unwrap();
        assert!(
            !stamp.is_current(),
            "an edited include makes the image stale"
        );
        // Problems are worded by the full check: the earlier line named.
        let z = dir.join("z.zone");
        let at = |line: usize| format!("{}:{line}: ", z.display());
        let err = load("www A 192.0.2.80\nwww CNAME other\n").unwrap_err();
        assert_eq!(
            err,
            format!(
                "{}CNAME and other data at www.example.com. (A at line 6)",
                at(7)
            )
        );
        let err = load(&format!("{big}x CNAME a\nx CNAME b\n")).unwrap_err();
        assert!(
            err.contains("second CNAME at x.example.com. (first at line"),
            "{err}"
        );
        let err = load("www.example.org. A 192.0.2.1\n").unwrap_err();
        assert_eq!(
            err,
            format!("{}www.example.org. is outside zone example.com.", at(6))
        );
        let err = load("@ SOA ns1 h 2 3600 600 86400 60\n").unwrap_err();
        assert!(
            err.contains("second SOA record for example.com. (first at line 3)"),
            "{err}"
        );
        let err = load("@ NS ns2\n").unwrap_err();
        assert!(
            err.contains("NS target ns2.example.com. is inside the zone but has no A/AAAA"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn out_of_zone_records_are_rejected() {
        let mut z = Zone::new(&name("example.com."));
        let err = z.insert(a("www.example.org.", [192, 0, 2, 1])).unwrap_err();
        assert!(matches!(err, ZoneError::OutOfZone { .. }));
    }

    #[test]
    fn clones_share_structure_but_not_changes() {
        let mut z = Zone::new(&name("example.com."));
        z.insert(a("www.example.com.", [192, 0, 2, 1])).unwrap();
        let before = z.clone();
        z.insert(a("www.example.com.", [192, 0, 2, 2])).unwrap();
        let key = LowerName::from(name("www.example.com."));
        assert_eq!(
            before
                .node(&key)
                .unwrap()
                .rrset(RecordType::A)
                .unwrap()
                .len(),
            1
        );
        assert_eq!(z.node(&key).unwrap().rrset(RecordType::A).unwrap().len(), 2);
    }

    #[test]
    fn nsec3_lookups_stay_in_their_chain_and_wrap() {
        let h = |b: u8| {
            data_encoding::BASE32HEX_NOPAD
                .encode(&[b; 20])
                .to_lowercase()
        };
        let text = format!(
            "$TTL 300\n\
             {} NSEC3 1 0 0 - {} A\n{} NSEC3 1 0 0 - {} A\n\
             {} NSEC3 1 0 5 aabb {} A\n",
            h(0x10),
            h(0x80),
            h(0x80),
            h(0x10),
            h(0x40),
            h(0x40)
        );
        let origin = name("example.com.");
        let mut z = Zone::new(&origin);
        for r in parse_zone_str(&text, &origin, std::path::Path::new("z")).unwrap() {
            z.insert(r.record).unwrap();
        }
        let a = nsec3_chain_key(0, &[]);
        let b = nsec3_chain_key(5, &[0xaa, 0xbb]);
        let owner = |b: u8| LowerName::from(name(&format!("{}.example.com.", h(b))));
        assert_eq!(
            z.nsec3_covering(&a, &[0x50; 20]),
            Some(&owner(0x10)),
            "not chain b's"
        );
        assert_eq!(
            z.nsec3_covering(&a, &[0x05; 20]),
            Some(&owner(0x80)),
            "wraps"
        );
        assert_eq!(z.nsec3_covering(&a, &[0x90; 20]), Some(&owner(0x80)));
        assert_eq!(z.nsec3_matching(&a, &[0x40; 20]), None);
        assert_eq!(z.nsec3_matching(&b, &[0x40; 20]), Some(&owner(0x40)));
        assert_eq!(z.nsec3_covering(&b, &[0x10; 20]), Some(&owner(0x40)));
        // NSEC3 owners are no names of the zone.
        assert!(z.node(&owner(0x10)).unwrap().is_nsec3_only());
        // Removing the record takes it out of the index.
        let rec = parse_zone_str(&text, &origin, std::path::Path::new("z")).unwrap();
        assert!(z.remove(&rec[0].record.name, &rec[0].record.data));
        assert_eq!(z.nsec3_covering(&a, &[0x50; 20]), Some(&owner(0x80)));
    }
}
