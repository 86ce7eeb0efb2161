//! Large RRsets' members by hash, while a long run of changes goes into
//! one zone ([`Zone::bulk`](super::Zone::bulk)).
//!
//! A set is a packed array (see `packed`): whether a record is already in
//! it is a scan of the whole set. Bringing a zone image forward through
//! thousands of journalled diffs added each member of a service's
//! thousand-member sets after such a scan, and the scans were half of a
//! restart's catch-up. Here a set of [`INDEXED_FROM`] members or more is
//! hashed once, and a record whose hash it lacks is known to be new
//! without a scan; one whose hash it has is looked for as before.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use hickory_proto::rr::RecordType;

use super::packed::{folds_names_only, PackedRdatas};

/// The smallest set worth hashing: below it a scan is as cheap.
pub(super) const INDEXED_FROM: usize = 64;

type Fixed = foldhash::fast::FixedState;

/// One set's member hashes, each with how many members have it.
type Hashes = HashMap<u64, u32, Fixed>;

/// Member hashes of the sets indexed so far, by type and then by node
/// (looked up by the node's key without copying it).
#[derive(Default)]
pub(super) struct Members {
    sets: HashMap<RecordType, HashMap<Box<[u8]>, Hashes, Fixed>, Fixed>,
}

impl Members {
    /// Whether the set `rdatas` of type `rtype`, at the node whose
    /// relative key is `node`, may hold a record of wire form `wire`:
    /// `Some(false)` when it certainly does not, `None` when the set is
    /// not indexed (too small, or of a type whose equality is not the
    /// bytes').
    pub(super) fn may_hold(
        &mut self,
        node: &[u8],
        rtype: RecordType,
        rdatas: &PackedRdatas,
        wire: &[u8],
    ) -> Option<bool> {
        let hash = member_hash(rtype, wire)?;
        let of_type = self.sets.entry(rtype).or_default();
        if !of_type.contains_key(node) {
            if rdatas.len() < INDEXED_FROM {
                return None;
            }
            let mut members = Hashes::with_capacity_and_hasher(rdatas.len(), Fixed::default());
            for w in rdatas.wire() {
                let h = member_hash(rtype, w).expect("same type");
                *members.entry(h).or_insert(0) += 1;
            }
            of_type.insert(node.into(), members);
        }
        Some(of_type[node].get(&hash).is_some_and(|&n| n > 0))
    }

    /// A member of wire form `wire` joined the set, if it is indexed.
    pub(super) fn added(&mut self, node: &[u8], rtype: RecordType, wire: &[u8]) {
        if let Some(members) = self.indexed(node, rtype) {
            let hash = member_hash(rtype, wire).expect("indexed type");
            *members.entry(hash).or_insert(0) += 1;
        }
    }

    /// The member equal to `wire` left the set, if it is indexed.
    pub(super) fn removed(&mut self, node: &[u8], rtype: RecordType, wire: &[u8]) {
        if let Some(members) = self.indexed(node, rtype) {
            let hash = member_hash(rtype, wire).expect("indexed type");
            if let Some(n) = members.get_mut(&hash) {
                *n -= 1;
                if *n == 0 {
                    members.remove(&hash);
                }
            }
        }
    }

    /// The set left its node (its last member removed).
    pub(super) fn forget(&mut self, node: &[u8], rtype: RecordType) {
        if let Some(of_type) = self.sets.get_mut(&rtype) {
            of_type.remove(node);
        }
    }

    /// How many sets are hashed.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.sets.values().map(HashMap::len).sum()
    }

    /// The hashes of the set of `rtype` at `node`, if it is indexed (only
    /// sets of indexable types ever are).
    fn indexed(&mut self, node: &[u8], rtype: RecordType) -> Option<&mut Hashes> {
        self.sets.get_mut(&rtype)?.get_mut(node)
    }
}

/// A member's hash, the same for every record its set counts as equal to
/// it: the bytes for addresses and text, the bytes with names' letters
/// folded for types of fixed fields and names. `None` for other types.
fn member_hash(rtype: RecordType, wire: &[u8]) -> Option<u64> {
    let mut h = Fixed::default().build_hasher();
    match rtype {
        RecordType::A | RecordType::AAAA | RecordType::TXT => h.write(wire),
        t if folds_names_only(t) => {
            for b in wire {
                h.write_u8(b.to_ascii_lowercase());
            }
        }
        _ => return None,
    }
    h.write_usize(wire.len());
    Some(h.finish())
}

#[cfg(test)]
mod tests {
    use hickory_proto::rr::rdata::{A, MX, SRV, TXT};

    use crate::zone::Zone;
    use hickory_proto::rr::{Name, RData, Record};

    fn name(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    /// Every record of `zone`, with its set's TTL, in a comparable order.
    fn contents(zone: &Zone) -> Vec<String> {
        let mut all: Vec<String> = zone.records().map(|r| r.to_string()).collect();
        all.sort();
        all
    }

    #[test]
    fn a_bulk_run_of_changes_ends_where_the_same_changes_one_by_one_end() {
        let origin = name("example.");
        let svc = name("svc.example.");
        let srv = |i: u16, target: &str| {
            Record::from_rdata(
                svc.clone(),
                60,
                RData::SRV(SRV::new(0, 10, 8000 + i, name(target))),
            )
        };
        let a = |i: u16, ttl: u32| {
            Record::from_rdata(
                svc.clone(),
                ttl,
                RData::A(A::new(10, 0, (i >> 8) as u8, i as u8)),
            )
        };
        let txt =
            |s: &str| Record::from_rdata(svc.clone(), 60, RData::TXT(TXT::new(vec![s.into()])));
        let mx = |i: u16| {
            let exchange = name(&format!("Mail{i}.example."));
            Record::from_rdata(svc.clone(), 60, RData::MX(MX::new(10, exchange)))
        };
        // Sets grow past the size where they are hashed, then take
        // duplicates, case variants of their names, text differing only
        // in case (a different record), removals and re-additions.
        let mut steps: Vec<(bool, Record)> = Vec::new();
        for i in 0..200u16 {
            steps.push((true, srv(i, &format!("i{i:03}.svc.example."))));
            steps.push((true, a(i, 60)));
        }
        for i in (0..200u16).step_by(7) {
            steps.push((true, srv(i, &format!("I{i:03}.SVC.Example."))));
            steps.push((true, a(i, 30)));
            steps.push((false, srv(i + 1, &format!("I{:03}.svc.EXAMPLE.", i + 1))));
            steps.push((false, a(i + 2, 60)));
            steps.push((true, a(i + 2, 60)));
            steps.push((false, a(i + 2, 60)));
        }
        for s in ["abc", "ABC", "abc"] {
            steps.push((true, txt(s)));
        }
        for i in 0..70u16 {
            steps.push((true, txt(&format!("t{i}"))));
        }
        steps.push((true, txt("ABC")));
        steps.push((false, txt("Abc")));
        // A hashed set emptied, then made again and added to twice.
        for i in 0..70u16 {
            steps.push((true, mx(i)));
        }
        for i in 0..70u16 {
            steps.push((false, mx(i)));
        }
        steps.extend([(true, mx(5)), (true, mx(5)), (true, mx(6)), (true, mx(5))]);

        let mut one_by_one = Zone::new(&origin);
        let mut bulk_zone = Zone::new(&origin);
        let mut said = Vec::new();
        for (add, r) in &steps {
            said.push(match add {
                true => one_by_one.insert(r.clone()).unwrap(),
                false => one_by_one.remove(&r.name, &r.data),
            });
        }
        let mut bulk = bulk_zone.bulk();
        for ((add, r), expected) in steps.iter().zip(&said) {
            let got = match add {
                true => bulk.insert(r.clone()).unwrap(),
                false => bulk.remove(&r.name, &r.data),
            };
            assert_eq!(
                got,
                *expected,
                "{} {r}",
                if *add { "insert" } else { "remove" }
            );
        }
        assert_eq!(
            bulk.hashed_sets(),
            3,
            "the SRV, A and TXT sets are hashed; the MX set went"
        );
        assert_eq!(contents(&bulk_zone), contents(&one_by_one));
        assert_eq!(bulk_zone.record_count(), one_by_one.record_count());
    }
}
