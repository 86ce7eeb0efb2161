//! The compiler: zone-store snapshot → answer-table entries for the XDP
//! program. Pure; decides which (name, type) pairs the kernel may answer
//! and pre-encodes their answer sections exactly as the fallback server
//! encodes them.

use hickory_proto::dnssec::rdata::DNSSECRData;
use hickory_proto::rr::{LowerName, Name, RData, RecordType};
use std::sync::Arc;

use xdpdns_common::negative::exist_flags;
use xdpdns_common::{answer_flags, qtype_slot, MAX_NAME_WIRE_LEN};

pub use super::addresses::{encode_answer, encode_signed_answer};
pub use super::depends::{Dependents, DependsDelta, Links};
use super::entry::shared_wire;
pub use super::entry::{lower_wire, ones_complement_sum, Compiled, EntryKey};
use super::negative::entries as negatives;
use super::negative::referral::{referral_template, Referral};
use super::negative::signed as signed_negatives;
use super::sharded::ByShard;
pub use super::sharded::Table;
use super::typed;
use crate::zone::key::NodeKey;
use crate::zone::{Node, Snapshot, Zone, ZoneDiff};

/// What a diff does to the table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TableDelta {
    pub upsert: Vec<(EntryKey, Compiled)>,
    pub delete: Vec<EntryKey>,
    /// What it does to the index of dependent names.
    pub depends: DependsDelta,
}

impl TableDelta {
    pub fn is_empty(&self) -> bool {
        self.upsert.is_empty() && self.delete.is_empty()
    }

    pub fn apply_to(&self, table: &mut Table) {
        for (k, v) in &self.upsert {
            table.insert(k.clone(), v.clone());
        }
        for k in &self.delete {
            table.remove(k);
        }
    }
}

/// The change that turns table `old` into `new`.
pub fn diff_tables(old: &Table, new: &Table) -> TableDelta {
    TableDelta {
        upsert: new
            .iter()
            .filter(|(k, v)| old.get(k) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        delete: old
            .keys()
            .filter(|k| !new.contains_key(k))
            .cloned()
            .collect(),
        depends: DependsDelta::default(),
    }
}

/// Why a name with A/AAAA data stays with the fallback server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    /// At or below a zone cut, or below a DNAME.
    pub below_cut: usize,
    /// Larger than a block, or than the kernel can rotate.
    pub too_large: usize,
    pub shadowed_by_child_zone: usize,
}

impl Skipped {
    fn add(&mut self, other: Skipped) {
        self.below_cut += other.below_cut;
        self.too_large += other.too_large;
        self.shadowed_by_child_zone += other.shadowed_by_child_zone;
    }
}

/// Names the table `snapshot` compiles to without compiling it: a hash
/// of each zone's contents id ([`Zone::uid`]) and counter id, never 0.
/// A kernel table pinned with this tag is adopted as it is by a
/// restarted controller serving the same zone versions.
pub fn table_tag(snapshot: &Snapshot) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let state = foldhash::quality::FixedState::with_seed(0x7864_7064_6e73_7467);
    // Summed, so the zones' order in the snapshot does not matter.
    let sum = snapshot.zones().fold(0u64, |sum, zone| {
        let mut h = state.build_hasher();
        zone.origin_key().hash(&mut h);
        zone.uid().hash(&mut h);
        zone.rotates().hash(&mut h);
        snapshot.zone_id(zone.origin_key()).hash(&mut h);
        sum.wrapping_add(h.finish())
    });
    state.hash_one((sum, snapshot.zone_count())).max(1)
}

/// Names per compile thread below which one thread does it all.
const PARALLEL_MIN_NAMES: usize = 50_000;

/// Every entry the kernel may answer in `snapshot`. Names are compiled on
/// every core (a million-name zone is seconds of work on one), each
/// thread sorting its entries into the table's shards, then the shards
/// are built on every core.
pub fn compile(snapshot: &Snapshot) -> (Table, Skipped) {
    let (table, skipped, _) = compile_all(snapshot);
    (table, skipped)
}

/// [`compile`], with the index of names whose entries hold other names'
/// records (what [`compile_diffs`] needs to follow a change).
pub fn compile_all(snapshot: &Snapshot) -> (Table, Skipped, Dependents) {
    compile_in_parallel(snapshot, PARALLEL_MIN_NAMES)
}

/// Names with the names their entries hold records of.
type Noted = Links;

fn compile_in_parallel(
    snapshot: &Snapshot,
    min_names_per_thread: usize,
) -> (Table, Skipped, Dependents) {
    let mut nodes = Vec::new();
    for zone in snapshot.zones() {
        let mark = ZoneMark::of(snapshot, zone);
        nodes.extend(
            zone.node_keys()
                .map(|(key, node)| (&**zone, mark, key, node)),
        );
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, (nodes.len() / min_names_per_thread).max(1));
    let chunk = nodes.len().div_ceil(threads).max(1);
    type Part = (ByShard, Skipped, Noted);
    let parts: Vec<Part> = std::thread::scope(|scope| {
        let workers: Vec<_> = nodes
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    let mut out = ByShard::with_capacity(part.len() * 2);
                    let mut skipped = Skipped::default();
                    let mut noted = Noted::new();
                    for (i, &(zone, mark, key, node)) in part.iter().enumerate() {
                        prefetch(part, i);
                        let mut sink = Sink {
                            entries: &mut out,
                            skipped: &mut skipped,
                            noted: &mut noted,
                            reuse: None,
                        };
                        let name = zone.name_of(key);
                        compile_node(snapshot, zone, mark, &name, node, &mut sink);
                    }
                    (out, skipped, noted)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("compile thread"))
            .collect()
    });
    let mut skipped = Skipped::default();
    let mut entries = Vec::with_capacity(parts.len());
    let mut noted = Vec::with_capacity(parts.len());
    for (part, s, links) in parts {
        skipped.add(s);
        entries.push(part);
        noted.push(links);
    }
    // The table and the index of dependents are built side by side.
    let (table, dependents) = std::thread::scope(|scope| {
        let index = scope.spawn(move || {
            let mut dependents = Dependents::default();
            for (name, targets) in noted.iter().flatten() {
                dependents.add(name, targets);
            }
            dependents
        });
        let table = Table::gather(entries, threads);
        (table, index.join().expect("dependents thread"))
    });
    (table, skipped, dependents)
}

/// Asks the CPU for the nodes a few places ahead: a zone's nodes are
/// scattered over the heap, and waiting for each in turn was a large part
/// of a million-name compile.
fn prefetch(part: &[(&Zone, ZoneMark, &NodeKey, &Node)], i: usize) {
    let hint = crate::prefetch::prefetch;
    if let Some(&(_, _, key, node)) = part.get(i + 8) {
        hint((node as *const Node).cast());
        hint((key as *const NodeKey).cast());
    }
    if let Some(&(_, _, _, node)) = part.get(i + 4) {
        let sets = node.rrsets();
        hint(sets.as_ptr().cast());
        if let Some(set) = sets.first() {
            hint(set.packed().as_bytes().as_ptr());
        }
    }
}

/// Where [`compile_node`] puts what it compiles.
struct Sink<'a, E> {
    entries: &'a mut E,
    skipped: &'a mut Skipped,
    /// Names whose entries hold other names' records, with those names.
    noted: &'a mut Noted,
    /// What a diff's recompile may keep of the name's installed gap list.
    reuse: Option<&'a signed_negatives::GapReuse<'a>>,
}

/// A table as a subscriber holds it: what [`compile_diffs`] compares with.
pub trait Installed {
    /// The entry under `key`, if any.
    fn entry(&self, key: &EntryKey) -> Option<Compiled>;
    /// The query-type slots `name` (lower-cased wire form) has entries
    /// under, in order.
    fn slots_of(&self, name: &[u8]) -> Vec<u8> {
        qtype_slot::all()
            .filter(|&qtype| {
                let key = EntryKey {
                    name: name.into(),
                    qtype,
                };
                self.entry(&key).is_some()
            })
            .collect()
    }
    /// Calls `f` with every key.
    fn each_key(&self, f: &mut dyn FnMut(&EntryKey));
    /// The names whose entries may hold `target`'s records.
    fn dependents_of(&self, target: &[u8]) -> Vec<Arc<[u8]>>;
}

impl Installed for Table {
    fn entry(&self, key: &EntryKey) -> Option<Compiled> {
        self.get(key).cloned()
    }

    fn each_key(&self, f: &mut dyn FnMut(&EntryKey)) {
        self.keys().for_each(f);
    }

    /// A bare table keeps no index: every target has none.
    fn dependents_of(&self, _target: &[u8]) -> Vec<Arc<[u8]>> {
        Vec::new()
    }
}

/// A table with its index of dependent names, as [`compile_all`] makes
/// it: what the tests follow diffs with.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IndexedTable {
    pub table: Table,
    pub dependents: Dependents,
}

impl IndexedTable {
    pub fn of(snapshot: &Snapshot) -> IndexedTable {
        let (table, _, dependents) = compile_all(snapshot);
        IndexedTable { table, dependents }
    }

    pub fn apply(&mut self, delta: &TableDelta) {
        delta.apply_to(&mut self.table);
        delta.depends.apply_to(&mut self.dependents);
    }
}

impl Installed for IndexedTable {
    fn entry(&self, key: &EntryKey) -> Option<Compiled> {
        self.table.entry(key)
    }

    fn each_key(&self, f: &mut dyn FnMut(&EntryKey)) {
        self.table.each_key(f)
    }

    fn dependents_of(&self, target: &[u8]) -> Vec<Arc<[u8]>> {
        self.dependents.of(target).to_vec()
    }
}

/// The table changes `diffs` cause, given the snapshot they produced and
/// the table currently installed.
pub fn compile_diffs(
    snapshot: &Snapshot,
    diffs: &[ZoneDiff],
    installed: &dyn Installed,
) -> TableDelta {
    // A set: a burst of registrations touches thousands of names, most
    // of them under the same few ancestors.
    // (Hashed with foldhash, cheaper than std's SipHash: adding and
    // looking up these names took about 2 % of the server's CPU in a
    // fill of registrations.)
    let mut touched: std::collections::HashSet<LowerName, foldhash::fast::RandomState> =
        Default::default();
    let mut subtrees: Vec<LowerName> = Vec::new();
    for d in diffs {
        let zone_gone = d.new_serial.is_none();
        let origin = LowerName::new(&d.origin);
        for r in d.removed.iter().chain(&d.added) {
            let key = LowerName::new(&r.name);
            // A zone cut or a DNAME appearing or disappearing changes
            // every name below it; the apex DNSKEY set signs or unsigns
            // every name.
            if zone_gone
                || matches!(
                    r.record_type(),
                    RecordType::NS | RecordType::DNAME | RecordType::DNSKEY
                )
            {
                subtrees.push(key.clone());
            }
            // A name's existence and its wildcard children decide its
            // ancestors' EXIST entries (empty non-terminals come and go).
            // A name already touched has its ancestors touched too (each
            // is inserted after them, or as one of a name's ancestors,
            // whose walk goes on up to the first one already there).
            if !touched.contains(&key) {
                let mut up = key.base_name();
                while origin.zone_of(&up) && touched.insert(up.clone()) {
                    if up.is_root() {
                        break;
                    }
                    up = up.base_name();
                }
            }
            // An NSEC covers the gap before its next name, so it is in the
            // gap lists of the empty non-terminals above that name (up to
            // the owner's ancestors): they change with it.
            if let RData::DNSSEC(DNSSECRData::NSEC(nsec)) = &r.data {
                let mut up = LowerName::new(nsec.next_domain_name()).base_name();
                while origin.zone_of(&up) && !up.zone_of(&key) && touched.insert(up.clone()) {
                    up = up.base_name();
                }
            }
            touched.insert(key);
        }
        // MNAME and RNAME decide which names' negative answers the
        // kernel may send (`negatives`): a change of either, every name.
        if soa_names_changed(d) {
            subtrees.push(LowerName::new(&d.origin));
        }
        if zone_gone || d.old_serial.is_none() {
            subtrees.push(LowerName::new(&d.origin));
        }
    }
    let mut fresh = Table::default();
    let mut skipped = Skipped::default();
    let mut noted = Noted::new();
    // Each name with its wire form, made once: names are ordered and
    // told apart by it (cheaper than comparing names label by label).
    let keyed = |n: LowerName| (shared_wire(&n), n);
    let mut names: Vec<(Arc<[u8]>, LowerName)> = touched.into_iter().map(keyed).collect();
    for top in &subtrees {
        installed.each_key(&mut |k| {
            // Gap entries are their encloser's.
            if k.qtype == qtype_slot::GAP_SIGNED {
                return;
            }
            if let Some(n) = wire_to_name(&k.name).map(|n| LowerName::new(&n)) {
                if top.zone_of(&n) {
                    names.push((k.name.clone(), n));
                }
            }
        });
        for zone in snapshot.zones() {
            names.extend(
                zone.nodes()
                    .map(|(k, _)| k)
                    .filter(|k| top.zone_of(k))
                    .map(keyed),
            );
        }
    }
    let by_wire = |names: &mut Vec<(Arc<[u8]>, LowerName)>| {
        names.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        names.dedup_by(|a, b| a.0 == b.0);
    };
    by_wire(&mut names);
    // The names whose entries hold a changed name's records change too.
    let mut rechecked: Links = Vec::new();
    for (wire, _) in &names {
        let dependents = installed.dependents_of(wire);
        if !dependents.is_empty() {
            rechecked.push((wire.clone(), dependents));
        }
    }
    for (_, dependents) in &rechecked {
        names.extend(
            dependents
                .iter()
                .filter_map(|w| Some((w.clone(), LowerName::new(&wire_to_name(w)?)))),
        );
    }
    by_wire(&mut names);
    // Gap entries whose NSECs no diff touches are kept, not recompiled
    // (unless the SOA's names, which they compress against, changed).
    let reusable = !diffs
        .iter()
        .any(|d| soa_names_changed(d) || d.new_serial.is_none() || d.old_serial.is_none());
    // (Only a signed zone's gap lists ask: made at the first.)
    let changed = std::cell::OnceCell::new();
    let changed = || -> &std::collections::HashSet<LowerName> {
        changed.get_or_init(|| {
            diffs
                .iter()
                .flat_map(|d| d.removed.iter().chain(&d.added))
                .map(|r| LowerName::new(&r.name))
                .collect()
        })
    };
    let mut delta = TableDelta::default();
    for (wire, name) in &names {
        let head = EntryKey {
            name: wire.clone(),
            qtype: qtype_slot::GAPS_SIGNED,
        };
        let listed = |c: Option<&Compiled>| c.map_or(0, signed_negatives::gap_count);
        let old_gaps = listed(installed.entry(&head).as_ref());
        if let Some(zone) = snapshot.find_zone(name) {
            let reuse = (reusable && old_gaps > 0).then(|| signed_negatives::GapReuse {
                changed: changed(),
                old: (0..old_gaps)
                    .filter_map(|k| {
                        installed.entry(&EntryKey {
                            name: signed_negatives::gap_name(wire, k),
                            qtype: qtype_slot::GAP_SIGNED,
                        })
                    })
                    .map(|c| (signed_negatives::gap_label(&c), c))
                    .collect(),
            });
            let mut sink = Sink {
                entries: &mut fresh,
                skipped: &mut skipped,
                noted: &mut noted,
                reuse: reuse.as_ref(),
            };
            compile_name(snapshot, zone, name, &mut sink);
        }
        // The name's gap list, kept under names of its own.
        let gaps = listed(fresh.get(&head)).max(old_gaps);
        for k in 0..gaps {
            let key = EntryKey {
                name: signed_negatives::gap_name(wire, k),
                qtype: qtype_slot::GAP_SIGNED,
            };
            diff_entry(key, &mut fresh, installed, &mut delta);
        }
        // The slots the name had or has: the fresh table holds only this
        // name's entries now (the gap entries were taken above).
        let mut slots = installed.slots_of(wire);
        slots.extend(fresh.keys().map(|k| k.qtype));
        slots.sort_unstable();
        slots.dedup();
        for slot in slots {
            let key = EntryKey {
                name: wire.clone(),
                qtype: slot,
            };
            diff_entry(key, &mut fresh, installed, &mut delta);
        }
        debug_assert!(fresh.is_empty(), "entries of names not recompiled");
    }
    // A target's list now: the names that still depend on it.
    for (target, dependents) in &mut rechecked {
        dependents.retain(|d| {
            noted
                .iter()
                .any(|(name, targets)| name == d && targets.contains(target))
        });
    }
    delta.depends = DependsDelta {
        rechecked,
        referred: noted,
    };
    delta
}

/// Adds to `delta` what turns the installed entry of `key` into the
/// freshly compiled one (taken from `fresh`).
fn diff_entry(key: EntryKey, fresh: &mut Table, installed: &dyn Installed, delta: &mut TableDelta) {
    match (fresh.remove(&key), installed.entry(&key)) {
        (Some(new), Some(old)) if new == old => {}
        (Some(new), _) => delta.upsert.push((key, new)),
        (None, Some(_)) => delta.delete.push(key),
        (None, None) => {}
    }
}

/// Whether the diff changes the SOA's MNAME or RNAME (not just its serial).
fn soa_names_changed(d: &ZoneDiff) -> bool {
    let names = |records: &[hickory_proto::rr::Record]| {
        records.iter().find_map(|r| match &r.data {
            hickory_proto::rr::RData::SOA(soa) => Some((soa.mname.clone(), soa.rname.clone())),
            _ => None,
        })
    };
    match (names(&d.removed), names(&d.added)) {
        (Some(old), Some(new)) => old != new,
        (None, None) => false,
        _ => true,
    }
}

/// The entries of one name (lower-cased wire form), as a whole compile
/// of `snapshot` makes them: what the hot path compiles on demand. The
/// table holds no entry under a name but its own compile's (signed gap
/// lists aside, which only the kernel reads), so these are exactly the
/// whole table's entries for the name. `None` when no zone served here
/// has the name.
pub fn compile_one(snapshot: &Snapshot, wire: &[u8]) -> Option<Vec<(EntryKey, Compiled)>> {
    let (zone, name, node) = served_node(snapshot, wire)?;
    let mut entries = Vec::new();
    let mut sink = Sink {
        entries: &mut entries,
        skipped: &mut Skipped::default(),
        noted: &mut Noted::new(),
        reuse: None,
    };
    let mark = ZoneMark::of(snapshot, zone);
    compile_node(snapshot, zone, mark, &name, node, &mut sink);
    Some(entries)
}

/// The zone served in `snapshot` that has the name `wire` (wire form,
/// lower case), the name, and its node.
pub fn served_node<'s>(
    snapshot: &'s Snapshot,
    wire: &[u8],
) -> Option<(&'s Zone, LowerName, &'s Node)> {
    let name = LowerName::new(&wire_to_name(wire)?);
    let zone = snapshot.find_zone(&name)?;
    let node = zone.node(&name)?;
    Some((zone, name, node))
}

fn compile_name(snapshot: &Snapshot, zone: &Zone, key: &LowerName, sink: &mut Sink<'_, Table>) {
    if let Some(node) = zone.node(key) {
        compile_node(
            snapshot,
            zone,
            ZoneMark::of(snapshot, zone),
            key,
            node,
            sink,
        );
    }
}

/// What every entry of a zone carries: its flags (a signed zone's entries
/// send DO=1 queries to their signed variants) and the zone's id for the
/// per-zone counters.
#[derive(Clone, Copy)]
struct ZoneMark {
    flags: u16,
    /// A/AAAA answers rotate ([`Zone::rotates`]).
    rotate: bool,
    id: u32,
    /// What its EXIST entries depend on.
    facts: negatives::ZoneFacts,
}

impl ZoneMark {
    fn of(snapshot: &Snapshot, zone: &Zone) -> ZoneMark {
        let signed = zone.is_signed();
        ZoneMark {
            flags: if signed { answer_flags::SIGNED } else { 0 },
            rotate: zone.rotates(),
            id: snapshot.zone_id(zone.origin_key()),
            facts: negatives::ZoneFacts::of(zone),
        }
    }
}

fn compile_node(
    snapshot: &Snapshot,
    zone: &Zone,
    mark: ZoneMark,
    key: &LowerName,
    node: &Node,
    sink: &mut Sink<'_, impl Extend<(EntryKey, Compiled)>>,
) {
    let table = &mut *sink.entries;
    let skipped = &mut *sink.skipped;
    let wire = shared_wire(key);
    let entry = |qtype| EntryKey {
        name: wire.clone(),
        qtype,
    };
    // An expired secondary zone answers SERVFAIL, which only the fallback
    // does; its apex says it exists, so no name in it is mistaken for
    // one below its parent.
    if zone.is_expired() {
        if key == zone.origin_key() && !key.is_root() {
            let len = wire.len() as u8;
            let exist = negatives::bare_exist(len, 0, mark.flags, mark.id);
            table.extend(std::iter::once((entry(qtype_slot::EXIST), exist)));
        }
        return;
    }
    // Another zone served here may own this name (a child zone): only
    // then is the longest-match lookup needed.
    if snapshot.zone_count() > 1
        && !std::ptr::eq(
            &**snapshot.find_zone(key).expect("zone contains its names"),
            zone,
        )
    {
        skipped.shadowed_by_child_zone += 1;
        return;
    }
    // At a delegation: its referral, for queries at and below it.
    let referral = referral_template(zone, key, node, mark.id);
    // Every name that exists has an EXIST entry, or its facts folded into
    // its A entry: a name without either does not exist, which is how the
    // kernel tells NXDOMAIN. Only a leaf's facts may fold (`exist` holds
    // them until its A entry is made): a name with children is the
    // closest encloser NXDOMAIN answers look up, found at the first lookup.
    let mut exist = None;
    if !node.is_nsec3_only() {
        if let Some(mut facts) =
            negatives::exist_entry(zone, &mark.facts, key, &wire, node, mark.flags, mark.id)
        {
            if referral.is_some() {
                facts.head.data[1] |= exist_flags::REFERRAL;
            }
            // A signed zone's DNSSEC NODATA: the name's NSEC after the
            // zone's signed SOA.
            let flags = facts.head.data[1];
            match node.has_children() {
                true => table.extend(std::iter::once((entry(qtype_slot::EXIST), facts))),
                false => exist = Some(facts),
            }
            // (The zone's mark says whether it is signed: asking the zone
            // finds its apex, twice a name.)
            let signed = mark.flags & answer_flags::SIGNED != 0;
            let denial =
                signed.then(|| signed_negatives::denial_entry(zone, key, node, flags, mark.id));
            if let Some(d) = denial.flatten() {
                table.extend(std::iter::once((entry(qtype_slot::DENIAL_SIGNED), d)));
            }
            // And DNSSEC NXDOMAIN below it: its gap list.
            let reuse = sink.reuse;
            let gaps =
                signed.then(|| signed_negatives::gap_entries(zone, key, flags, mark.id, reuse));
            if let Some((head, gaps)) = gaps.flatten() {
                table.extend(std::iter::once((entry(qtype_slot::GAPS_SIGNED), head)));
                table.extend(gaps.into_iter().enumerate().map(|(k, gap)| {
                    let key = EntryKey {
                        name: signed_negatives::gap_name(&wire, k as u16),
                        qtype: qtype_slot::GAP_SIGNED,
                    };
                    (key, gap)
                }));
            }
        }
        if key == zone.origin_key() {
            if let Some(soa) = negatives::soa_template(zone, mark.id) {
                table.extend(std::iter::once((entry(qtype_slot::SOA), soa)));
            }
            if let Some(soa) = signed_negatives::soa_template(zone, mark.id) {
                table.extend(std::iter::once((entry(qtype_slot::SOA_SIGNED), soa)));
            }
        }
    }
    // The root has no label to point to: the fallback writes its owner as
    // one zero byte, not as a pointer, so the kernel cannot match it.
    if key.is_root() || wire.len() > MAX_NAME_WIRE_LEN {
        table.extend(exist.map(|e| (entry(qtype_slot::EXIST), e)));
        return;
    }
    let mut depends = Vec::new();
    if let Some(Referral {
        entry: e,
        depends: on,
    }) = referral
    {
        table.extend(std::iter::once((entry(qtype_slot::REFERRAL), e)));
        depends.extend(on.iter().map(shared_wire));
    }
    compile_addresses(zone, mark, key, node, &wire, table, &mut exist, skipped);
    depends.extend(compile_types(
        zone, mark, key, node, &wire, table, &mut exist,
    ));
    table.extend(exist.map(|e| (entry(qtype_slot::EXIST), e)));
    if !depends.is_empty() {
        sink.noted.push((wire.clone(), depends));
    }
}

/// Adds the name's entry `c` under `slot`, with the name's EXIST facts
/// (taken from `exist`) folded into it when it is the A entry and has
/// room for them.
fn add_entry(
    table: &mut impl Extend<(EntryKey, Compiled)>,
    key: EntryKey,
    mut c: Compiled,
    exist: &mut Option<Compiled>,
) {
    if key.qtype == qtype_slot::A && exist.as_ref().is_some_and(|e| c.head.fold_exist(&e.head)) {
        *exist = None;
    }
    table.extend(std::iter::once((key, c)));
}

/// The name's A and AAAA entries, written directly (fixed-size records,
/// rotated by the kernel where the zone rotates).
#[allow(clippy::too_many_arguments)]
fn compile_addresses(
    zone: &Zone,
    mark: ZoneMark,
    key: &LowerName,
    node: &Node,
    wire: &Arc<[u8]>,
    table: &mut impl Extend<(EntryKey, Compiled)>,
    exist: &mut Option<Compiled>,
    skipped: &mut Skipped,
) {
    let entry = |qtype| EntryKey {
        name: wire.clone(),
        qtype,
    };
    let a = node.rrset(RecordType::A);
    let aaaa = node.rrset(RecordType::AAAA);
    if a.is_none() && aaaa.is_none() {
        return;
    }
    if zone.below_cut(key) || zone.below_dname(key) {
        skipped.below_cut += 1;
        return;
    }
    let sets = [(a, qtype_slot::A), (aaaa, qtype_slot::AAAA)];
    for (set, slot) in sets.into_iter().filter_map(|(s, slot)| Some((s?, slot))) {
        let rotate = if mark.rotate { answer_flags::ROTATE } else { 0 };
        let Some(mut answer) = encode_answer(set, mark.flags | rotate) else {
            skipped.too_large += 1;
            continue;
        };
        answer.head.set_zone(mark.id);
        add_entry(table, entry(slot), answer, exist);
        // In a signed zone, the variant for DO=1: the RRset and its
        // RRSIGs, as the fallback answers it.
        if mark.flags & answer_flags::SIGNED == 0 {
            continue;
        }
        let signed = node
            .signatures(set.rtype)
            .and_then(|sigs| encode_signed_answer(set, sigs, mark.rotate));
        if let Some(mut answer) = signed {
            answer.head.set_zone(mark.id);
            table.extend(std::iter::once((entry(slot | qtype_slot::SIGNED), answer)));
        }
    }
}

/// The name's entries of every other type (and A/AAAA through a CNAME):
/// the full handler's answers ([`typed`]); returns the names they hold
/// records of.
fn compile_types(
    zone: &Zone,
    mark: ZoneMark,
    key: &LowerName,
    node: &Node,
    wire: &Arc<[u8]>,
    table: &mut impl Extend<(EntryKey, Compiled)>,
    exist: &mut Option<Compiled>,
) -> Vec<Arc<[u8]>> {
    let mut depends = Vec::new();
    let mut types = Vec::new();
    typed::types_at(zone, node, &mut types);
    let name = Name::from(key);
    let owner = typed::Owner {
        key,
        name: &name,
        wire,
    };
    let signed = mark.flags & answer_flags::SIGNED != 0;
    for t in types {
        let slot = qtype_slot::of(u16::from(t));
        let variants = [(false, slot), (true, slot | qtype_slot::SIGNED)];
        for (dnssec, slot) in variants.into_iter().take(1 + usize::from(signed)) {
            // As the A/AAAA variants: only the plain one sends DO=1
            // queries on to the signed one.
            let how = (if dnssec { 0 } else { mark.flags }, mark.id);
            if let Some(c) = typed::compile_type(zone, &owner, node, t, dnssec, how, &mut depends) {
                let key = EntryKey {
                    name: wire.clone(),
                    qtype: slot,
                };
                add_entry(table, key, c, exist);
            }
        }
    }
    depends
}

fn wire_to_name(wire: &[u8]) -> Option<Name> {
    let mut labels = Vec::new();
    let mut i = 0;
    while *wire.get(i)? != 0 {
        let len = wire[i] as usize;
        labels.push(wire.get(i + 1..i + 1 + len)?);
        i += 1 + len;
    }
    Name::from_labels(labels).ok()
}

#[cfg(test)]
mod tests;
