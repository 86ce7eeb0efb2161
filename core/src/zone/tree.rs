//! The zone model: what every other part of the server compiles from.
//!
//! A [`Zone`] is a persistent (structurally shared) map from lower-cased owner
//! name to [`Node`] (see [`NodeMap`]). Cloning a zone is O(1) and a small
//! change to a clone copies little, which is what lets the store publish a fresh immutable
//! snapshot for every registration change without copying a million names.
//!
//! Empty non-terminals (names with no records but with descendants) exist as
//! nodes with no RRsets, because they block wildcard synthesis (RFC 4592) and
//! answer NODATA rather than NXDOMAIN.

use std::borrow::Cow;
use std::sync::Arc;

use hickory_proto::dnssec::rdata::DNSSECRData;
use hickory_proto::rr::rdata::SOA;
use hickory_proto::rr::{DNSClass, LowerName, Name, RData, Record, RecordType};

use super::key::{self, NodeKey, Origin};
use super::members::Members;

use super::node::Node;
use super::nodemap::NodeMap;
use super::packed::{self, PackError, PackedRdatas};
use super::rrset::{fqdn_lower, label_count, nsec3_chain, RRset};
use super::source::SourceStamp;

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
pub(crate) fn random_seed() -> u64 {
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
    /// The origin as keys of `nodes` are made from names.
    keys: Origin,
    nodes: NodeMap,
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
    source: Option<Arc<SourceStamp>>,
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
        let mut nodes = NodeMap::with_seed(seed);
        nodes.insert(NodeKey::new(b""), Node::default());
        Zone {
            origin,
            keys: Origin::new(&origin_key),
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

    /// A zone from whole nodes (an image's) under their keys (see
    /// [`Origin::key_of_wire`]), with its record count and room made for
    /// `node_count` nodes (a hint). `None` unless the apex is there. Each
    /// node comes with whether it may hold a delegation, a DNAME or a
    /// denial record: only those are looked at (the others are not
    /// touched again, which matters when another thread just made them).
    pub fn from_nodes(
        origin: &Name,
        seed: u64,
        nodes: impl IntoIterator<Item = (NodeKey, Node, bool)>,
        node_count: usize,
        record_count: usize,
    ) -> Option<Self> {
        let mut zone = Zone::with_seed(origin, seed);
        zone.nodes.clear();
        zone.nodes.reserve(node_count);
        let mut nodes = nodes.into_iter().peekable();
        // In runs, so that a signed zone's denial records are indexed as
        // they come rather than gathered for the whole zone first.
        while nodes.peek().is_some() {
            let (mut cuts, mut dnames) = (0, 0);
            let mut denials = Vec::new();
            let keys = &zone.keys;
            zone.nodes
                .extend(nodes.by_ref().take(4096).map(|(key, node, look)| {
                    for set in node.rrsets().iter().filter(|_| look) {
                        match set.rtype {
                            RecordType::NS if !key.as_wire().is_empty() => cuts += 1,
                            RecordType::DNAME => dnames += 1,
                            RecordType::NSEC | RecordType::NSEC3 => {
                                let name = keys.name_of(key.as_wire());
                                for d in set.rdatas() {
                                    denials.push((set.rtype, name.clone(), nsec3_chain(&d)));
                                }
                            }
                            _ => {}
                        }
                    }
                    (key, node)
                }));
            zone.cut_count += cuts;
            zone.dname_count += dnames;
            for (rtype, name, chain) in denials {
                zone.index_denial(rtype, &name, chain, true);
            }
        }
        if !zone.nodes.contains_key(b"") {
            return None;
        }
        zone.record_count = record_count;
        zone.refresh_soa();
        Some(zone)
    }

    /// Whether a node with sets of these types is one [`Zone::from_nodes`]
    /// must look at.
    pub fn needs_a_look(rtype: RecordType) -> bool {
        matches!(
            rtype,
            RecordType::NS | RecordType::DNAME | RecordType::NSEC | RecordType::NSEC3
        )
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
    pub fn set_uid(&mut self, uid: u64) {
        self.uid = uid;
    }

    /// A new id: the contents changed.
    pub(crate) fn renew_uid(&mut self) {
        self.uid = random_seed();
    }

    pub fn source(&self) -> Option<&SourceStamp> {
        self.source.as_deref()
    }

    pub fn set_source(&mut self, stamp: SourceStamp) {
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
        let mut buf = [0; 256];
        self.nodes.get(self.keys.relative(name, &mut buf)?)
    }

    pub fn apex(&self) -> &Node {
        self.nodes.get(b"").expect("apex node always exists")
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
        self.insert_indexed(key, records, None, false, |_| {})
    }

    /// [`Zone::insert_at`], calling `new_at` with the position (in
    /// `records`) of each record that was not already present. `fresh`:
    /// the caller's promise that no set holds any of `records` already,
    /// so none is looked for (a set of thousands is not scanned).
    pub fn insert_each(
        &mut self,
        key: &LowerName,
        records: impl IntoIterator<Item = Record>,
        fresh: bool,
        new_at: impl FnMut(usize),
    ) -> Result<Inserted, ZoneError> {
        self.insert_indexed(key, records, None, fresh, new_at)
    }

    /// A view of this zone for a long run of changes: large sets are
    /// hashed once, so adding a record to them needs no scan (see
    /// [`Bulk`]).
    pub fn bulk(&mut self) -> Bulk<'_> {
        Bulk::new(self)
    }

    /// [`Zone::insert_at`], with `members` kept in step where given.
    pub(super) fn insert_indexed(
        &mut self,
        key: &LowerName,
        records: impl IntoIterator<Item = Record>,
        mut members: Option<&mut Members>,
        fresh: bool,
        mut new_at: impl FnMut(usize),
    ) -> Result<Inserted, ZoneError> {
        if !self.origin_key.zone_of(key) {
            return Err(ZoneError::OutOfZone {
                name: Box::new(Name::from(key)),
                origin: Box::new(self.origin.clone()),
            });
        }
        let mut buf = [0; 256];
        let relative = self.keys.relative(key, &mut buf).expect("inside the zone");
        let node = match self.nodes.get_mut(relative) {
            Some(node) => node,
            None => {
                ensure_node(&mut self.nodes, relative);
                self.nodes.get_mut(relative).expect("ensured")
            }
        };
        // Only the sets that change are copied, and a set that grows is
        // copied once, with its new record (a service's thousand
        // addresses were copied twice for each member added).
        let mut rrsets: Vec<Cow<'_, RRset>> = node.rrsets().iter().map(Cow::Borrowed).collect();
        let mut indexed = Vec::new();
        let mut added = 0;
        let mut soa = false;
        for (at, record) in records.into_iter().enumerate() {
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
                    debug_assert!(
                        !fresh || set.rdatas.position_encoded(&record.data, wire).is_none(),
                        "{key}: a record promised new is in its set"
                    );
                    let absent = fresh
                        || members
                            .as_deref_mut()
                            .and_then(|m| m.may_hold(relative, rtype, &set.rdatas, wire))
                            == Some(false);
                    if !absent && set.rdatas.position_encoded(&record.data, wire).is_some() {
                        if set.ttl != record.ttl {
                            set.to_mut().ttl = record.ttl;
                        }
                        false
                    } else {
                        let rdatas = set.rdatas.pushed(rtype, wire)?;
                        *set = Cow::Owned(RRset::from_packed(rtype, record.ttl, rdatas));
                        if let Some(m) = members.as_deref_mut() {
                            m.added(relative, rtype, wire);
                        }
                        true
                    }
                }
                None => {
                    let mut rdatas = PackedRdatas::default();
                    rdatas.push_encoded(rtype, wire)?;
                    rrsets.push(Cow::Owned(RRset::from_packed(rtype, record.ttl, rdatas)));
                    if let Some(m) = members.as_deref_mut() {
                        m.added(relative, rtype, wire);
                    }
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
                new_at(at);
                if matches!(rtype, RecordType::NSEC | RecordType::NSEC3) {
                    indexed.push((rtype, nsec3_chain(&record.data)));
                }
            }
        }
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
        let rrsets = rrsets.into_iter().map(Cow::into_owned).collect();
        node.set_rrsets(rrsets);
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

    /// Adds the RRset `rdatas` (distinct, the caller's promise) of type
    /// `rtype` at `key`, packed at once: a generated zone is built set by
    /// set, and adding a set of thousands record by record searched and
    /// copied the set once per record. Where the name already has records
    /// of the type, or for the types the zone indexes (SOA, NSEC, NSEC3,
    /// RRSIG), the records go through [`Zone::insert_at`].
    pub fn insert_set(
        &mut self,
        key: &LowerName,
        rtype: RecordType,
        ttl: u32,
        rdatas: &[RData],
    ) -> Result<usize, ZoneError> {
        let Some(first) = rdatas.first() else {
            return Ok(0);
        };
        let indexed = matches!(
            rtype,
            RecordType::SOA | RecordType::NSEC | RecordType::NSEC3 | RecordType::RRSIG
        );
        let present = self
            .node(key)
            .is_some_and(|n| n.rrsets().iter().any(|s| s.same_set(rtype, Some(first))));
        if indexed || present || !self.origin_key.zone_of(key) {
            let name = Name::from(key);
            let records = rdatas
                .iter()
                .map(|d| Record::from_rdata(name.clone(), ttl, d.clone()));
            return Ok(self.insert_at(key, records)?.added);
        }
        let set = RRset::from_packed(rtype, ttl, PackedRdatas::pack(rdatas)?);
        let mut buf = [0; 256];
        let relative = self.keys.relative(key, &mut buf).expect("inside the zone");
        ensure_node(&mut self.nodes, relative);
        let node = self.nodes.get_mut(relative).expect("ensured");
        let mut rrsets = node.rrsets().to_vec();
        rrsets.push(set);
        node.set_rrsets(rrsets);
        if rtype == RecordType::NS && *key != self.origin_key {
            self.cut_count += 1;
        }
        if rtype == RecordType::DNAME {
            self.dname_count += 1;
        }
        self.record_count += rdatas.len();
        Ok(rdatas.len())
    }

    /// Removes one record (matched by owner, type and data; TTL ignored).
    /// Returns whether it was present.
    pub fn remove(&mut self, name: &Name, rdata: &RData) -> bool {
        self.remove_indexed(name, rdata, None)
    }

    /// [`Zone::remove`], with `members` kept in step where given.
    pub(super) fn remove_indexed(
        &mut self,
        name: &Name,
        rdata: &RData,
        members: Option<&mut Members>,
    ) -> bool {
        let key = LowerName::new(name);
        let mut buf = [0; 256];
        let Some(relative) = self.keys.relative(&key, &mut buf) else {
            return false;
        };
        let Some(node) = self.nodes.get_mut(relative) else {
            return false;
        };
        let rtype = rdata.record_type();
        let Some(pos) = node
            .rrsets()
            .iter()
            .position(|s| s.same_set(rtype, Some(rdata)))
        else {
            return false;
        };
        let Ok(wire) = packed::encode(rdata) else {
            return false;
        };
        let wire = wire.as_slice();
        let Some(i) = node.rrsets()[pos].rdatas.position_encoded(rdata, wire) else {
            return false;
        };
        let last = node.rrsets()[pos].len() == 1;
        if let Some(m) = members {
            // A set that goes away takes its hashes with it: the next set
            // of the type here starts unhashed.
            match last {
                true => m.forget(relative, rtype),
                false => m.removed(relative, rtype, wire),
            }
        }
        let mut rrsets = node.rrsets().to_vec();
        rrsets[pos].rdatas.remove(i);
        let emptied = rrsets[pos].is_empty();
        if emptied {
            rrsets.remove(pos);
        }
        node.set_rrsets(rrsets);
        if emptied {
            if rtype == RecordType::NS && key != self.origin_key {
                self.cut_count -= 1;
            }
            if rtype == RecordType::DNAME {
                self.dname_count -= 1;
            }
            self.index_denial(rtype, &key, nsec3_chain(rdata), false);
        }
        self.record_count -= 1;
        prune(&mut self.nodes, relative);
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

    /// The NSEC owner strictly before `key` in canonical order, wrapping
    /// to the last one.
    pub fn nsec_before(&self, key: &LowerName) -> Option<&LowerName> {
        self.nsec_owners
            .range(..key.clone())
            .next_back()
            .or_else(|| self.nsec_owners.get_max())
    }

    /// The NSEC owner strictly after `key` in canonical order, wrapping
    /// to the first one (the apex).
    pub fn nsec_after(&self, key: &LowerName) -> Option<&LowerName> {
        use std::ops::Bound::{Excluded, Unbounded};
        self.nsec_owners
            .range((Excluded(key.clone()), Unbounded))
            .next()
            .or_else(|| self.nsec_owners.get_min())
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

    /// Removes every record of a type an online signer owns (RRSIG,
    /// NSEC, DNSKEY…): what signing replaces, or stopping it leaves out.
    pub fn strip_signer_managed(&mut self) {
        let managed: Vec<(Name, RData)> = self
            .nodes()
            .flat_map(|(key, node)| {
                let name = Name::from(key);
                node.rrsets()
                    .iter()
                    .filter(|s| super::signer_managed(s.rtype))
                    .flat_map(move |s| {
                        let name = name.clone();
                        s.rdatas().map(move |d| (name.clone(), d))
                    })
            })
            .collect();
        for (name, rdata) in managed {
            self.remove(&name, &rdata);
        }
    }

    /// Every record, node by node (order unspecified, RRset order kept).
    pub fn records(&self) -> impl Iterator<Item = Record> + '_ {
        self.nodes.iter().flat_map(|(key, node)| {
            let name = Name::from(self.keys.name_of(key.as_wire()));
            node.rrsets().iter().flat_map(move |set| {
                let name = name.clone();
                set.rdatas()
                    .map(move |d| Record::from_rdata(name.clone(), set.ttl, d))
            })
        })
    }

    /// Owner names with their nodes.
    pub fn nodes(&self) -> impl Iterator<Item = (LowerName, &Node)> {
        self.nodes
            .iter()
            .map(|(key, node)| (self.keys.name_of(key.as_wire()), node))
    }

    /// The map's keys with their nodes: [`Zone::name_of`] makes the
    /// names (a compile spreads that over its threads).
    pub fn node_keys(&self) -> impl Iterator<Item = (&NodeKey, &Node)> {
        self.nodes.iter()
    }

    /// [`Zone::node_keys`] in the order a zone of the same seed and size
    /// is built fastest in (what its image is written in).
    pub fn node_keys_in_build_order(&self) -> impl Iterator<Item = (&NodeKey, &Node)> {
        self.nodes.iter_by_hash()
    }

    /// The node at a key of [`Zone::node_keys`] of this zone or of another
    /// version of it (the same origin).
    pub fn node_at(&self, key: &NodeKey) -> Option<&Node> {
        self.nodes.get(key.as_wire())
    }

    /// Keys whose nodes may differ between this version of the zone and
    /// `other`, where both were made from one version without rebuilding
    /// it whole; `None` otherwise (every key may differ).
    pub fn keys_changed_from<'a>(
        &'a self,
        other: &'a Zone,
    ) -> Option<impl Iterator<Item = &'a NodeKey>> {
        self.nodes.keys_changed_from(&other.nodes)
    }

    /// The owner name of a key of [`Zone::node_keys`].
    pub fn name_of(&self, key: &NodeKey) -> LowerName {
        self.keys.name_of(key.as_wire())
    }

    /// Appends the name of `key` in wire form, lower case and
    /// uncompressed, to `out` (no `Name` made).
    pub fn write_name_of(&self, key: &NodeKey, out: &mut Vec<u8>) {
        self.keys.write_name(key.as_wire(), out);
    }
}

/// A zone taking a long run of changes (a restart bringing its image
/// forward through the journal): its large sets hashed as they are first
/// added to, and every change made through here, so the hashes stay
/// true for as long as this view lives.
pub struct Bulk<'a> {
    zone: &'a mut Zone,
    members: Members,
}

impl<'a> Bulk<'a> {
    fn new(zone: &'a mut Zone) -> Self {
        Bulk {
            zone,
            members: Members::default(),
        }
    }

    pub fn zone(&self) -> &Zone {
        self.zone
    }

    /// [`Zone::insert`].
    pub fn insert(&mut self, record: Record) -> Result<bool, ZoneError> {
        let key = LowerName::new(&record.name);
        let inserted =
            self.zone
                .insert_indexed(&key, [record], Some(&mut self.members), false, |_| {})?;
        Ok(inserted.added == 1)
    }

    /// [`Zone::remove`].
    pub fn remove(&mut self, name: &Name, rdata: &RData) -> bool {
        self.zone
            .remove_indexed(name, rdata, Some(&mut self.members))
    }
    #[cfg(test)]
    pub(super) fn hashed_sets(&self) -> usize {
        self.members.len()
    }
}

/// Creates `relative` and any missing ancestors up to the apex, keeping
/// the child counts that decide empty non-terminals.
fn ensure_node(nodes: &mut NodeMap, relative: &[u8]) {
    if nodes.contains_key(relative) {
        return;
    }
    nodes.insert(NodeKey::new(relative), Node::default());
    let mut child = relative;
    while let Some(parent) = key::parent(child) {
        match nodes.get_mut(parent) {
            Some(node) => {
                node.children += 1;
                return;
            }
            None => nodes.insert(NodeKey::new(parent), Node::from_parts(Vec::new(), 1)),
        }
        child = parent;
    }
}

/// Removes `relative` if it is now empty and childless, then walks
/// upwards (the apex stays).
fn prune(nodes: &mut NodeMap, relative: &[u8]) {
    let mut key = relative;
    while let Some(parent) = key::parent(key) {
        match nodes.get(key) {
            Some(n) if n.is_empty() && n.children == 0 => {}
            _ => return,
        }
        nodes.remove(key);
        if let Some(p) = nodes.get_mut(parent) {
            p.children -= 1;
        }
        key = parent;
    }
}
