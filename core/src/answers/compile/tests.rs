//! The compiler's tests: what the table holds for a zone, and the
//! deltas a change turns into.

use std::path::Path;
use std::str::FromStr;

use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{RData, Record};

use super::*;
use crate::zone::store::Change;
use crate::zone::{load_zone_str, ZoneStore};

const ZONE: &str = "$ORIGIN example.com.\n$TTL 300\n\
    @ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\n@ A 192.0.2.10\n\
    ns1 A 192.0.2.1\nWWW A 192.0.2.80\nwww A 192.0.2.81\nwww AAAA 2001:db8::80\n\
    alias CNAME www\n*.wild A 192.0.2.99\nsub NS ns.sub\nns.sub A 192.0.2.53\n\
    txt TXT hello\n";

fn store_with(extra: &str) -> ZoneStore {
    let origin = Name::from_str("example.com.").unwrap();
    let text = format!("{ZONE}{extra}");
    let zone = load_zone_str(&text, &origin, Path::new("t")).unwrap();
    ZoneStore::with_zones(vec![zone])
}

fn key(name: &str, qtype: u8) -> EntryKey {
    EntryKey {
        name: lower_wire(&LowerName::from(Name::from_str(name).unwrap())).into(),
        qtype,
    }
}

#[test]
fn rotation_flags_its_entries_and_changes_the_table_tag() {
    let store = store_with("pool A 192.0.2.1\npool A 192.0.2.2\n");
    let plain_tag = table_tag(&store.snapshot());
    let origin = Name::from_str("example.com.").unwrap();
    store.set_rotation(crate::zone::RotationPolicy::new(&[origin]));
    let snapshot = store.snapshot();
    assert_ne!(
        table_tag(&snapshot),
        plain_tag,
        "a pinned table compiled without rotation is not adopted"
    );
    let (table, _) = compile(&snapshot);
    let flags = |name: &str, slot| table[&key(name, slot)].head.flags();
    assert_eq!(
        flags("pool.example.com.", qtype_slot::A),
        answer_flags::ROTATE
    );
    assert_eq!(
        flags("www.example.com.", qtype_slot::A),
        answer_flags::ROTATE,
        "WWW and www: two records"
    );
    assert_eq!(flags("ns1.example.com.", qtype_slot::A), 0, "one record");
    assert_eq!(flags("www.example.com.", qtype_slot::AAAA), 0);
}

#[test]
fn only_exact_in_zone_address_rrsets_are_compiled() {
    let (table, skipped) = compile(&store_with("").snapshot());
    let mut names: Vec<_> = table
        .keys()
        .filter(|k| [qtype_slot::A, qtype_slot::AAAA].contains(&k.qtype))
        .cloned()
        .collect();
    names.sort();
    let mut want = vec![
        key("example.com.", qtype_slot::A),
        key("ns1.example.com.", qtype_slot::A),
        key("www.example.com.", qtype_slot::A),
        key("www.example.com.", qtype_slot::AAAA),
        // The wildcard's own name, queried literally, is an exact match.
        key("*.wild.example.com.", qtype_slot::A),
        // A CNAME to an in-zone name: the chain and the target's set.
        key("alias.example.com.", qtype_slot::A),
        key("alias.example.com.", qtype_slot::AAAA),
    ];
    want.sort();
    assert_eq!(names, want, "no synthesis or glue below the cut");
    assert_eq!(skipped.below_cut, 1, "ns.sub is glue");
    // Every name that exists says so, glue and empty non-terminals
    // included, in an EXIST entry or folded into its A entry: a name
    // without either is NXDOMAIN to the kernel.
    let mut exist: Vec<_> = table
        .iter()
        .filter(|(k, c)| k.qtype == qtype_slot::EXIST || c.head.holds_exist())
        .map(|(k, _)| EntryKey {
            name: k.name.clone(),
            qtype: qtype_slot::EXIST,
        })
        .collect();
    let folded: Vec<_> = table.iter().filter(|(_, c)| c.head.holds_exist()).collect();
    assert!(
        folded.len() >= 3 && folded.iter().all(|(k, _)| k.qtype == qtype_slot::A),
        "names with one address keep their facts in their A entry: {folded:?}"
    );
    exist.sort();
    let mut want: Vec<_> = [
        "example.com.",
        "ns1.example.com.",
        "www.example.com.",
        "alias.example.com.",
        "wild.example.com.",
        "*.wild.example.com.",
        "sub.example.com.",
        "ns.sub.example.com.",
        "txt.example.com.",
    ]
    .into_iter()
    .map(|n| key(n, qtype_slot::EXIST))
    .collect();
    want.sort();
    assert_eq!(exist, want);
    let soa: Vec<_> = table
        .keys()
        .filter(|k| k.qtype == qtype_slot::SOA)
        .collect();
    assert_eq!(soa, [&key("example.com.", qtype_slot::SOA)]);
}

#[test]
fn data_below_a_dname_is_occluded() {
    let (table, skipped) =
        compile(&store_with("d DNAME new.example.\nd A 192.0.2.6\nx.d A 192.0.2.7\n").snapshot());
    // RFC 6672 §2.4: x.d is redirected; d itself still answers.
    assert!(!table.contains_key(&key("x.d.example.com.", qtype_slot::A)));
    assert!(table.contains_key(&key("d.example.com.", qtype_slot::A)));
    assert_eq!(skipped.below_cut, 2, "ns.sub and x.d");
}

#[test]
fn answers_are_encoded_as_the_fallback_encodes_them() {
    let (table, _) = compile(&store_with("").snapshot());
    let a = &table[&key("www.example.com.", qtype_slot::A)];
    assert_eq!(a.head.ancount(), 2);
    assert_eq!(a.head.section_len(), 32);
    assert!(a.block.is_none(), "two A records are inlined");
    assert_eq!(
        &a.section()[..16],
        &[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 192, 0, 2, 80],
        "pointer to question, A, IN, TTL 300, RDLEN 4, address"
    );
    assert_eq!(a.head.csum, ones_complement_sum(a.section()));
    let aaaa = &table[&key("www.example.com.", qtype_slot::AAAA)];
    assert_eq!(aaaa.head.section_len(), 28);
}

#[test]
fn large_rrsets_go_to_shared_blocks_up_to_the_block_size() {
    // 60 AAAA records (1,680 bytes) fit a block; 74 (2,072) do not.
    let sixty: String = (1..=60)
        .map(|i| format!("big AAAA 2001:db8::{i:x}\n"))
        .collect();
    let same: String = (1..=60)
        .map(|i| format!("same AAAA 2001:db8::{i:x}\n"))
        .collect();
    let over: String = (1..=74)
        .map(|i| format!("over AAAA 2001:db8::{i:x}\n"))
        .collect();
    let (table, skipped) = compile(&store_with(&format!("{sixty}{same}{over}")).snapshot());
    let big = &table[&key("big.example.com.", qtype_slot::AAAA)];
    assert_eq!((big.head.section_len(), big.head.ancount()), (1680, 60));
    let section = big.block.as_ref().expect("not inlined");
    assert_eq!(big.head.csum, ones_complement_sum(section));
    let same = &table[&key("same.example.com.", qtype_slot::AAAA)];
    assert_eq!(same.block, big.block, "equal sections are equal blocks");
    assert!(!table.contains_key(&key("over.example.com.", qtype_slot::AAAA)));
    assert_eq!(skipped.too_large, 1);
}

#[test]
fn compiling_on_several_threads_gives_the_same_table() {
    let many: String = (0..300)
        .map(|i| format!("n{i} A 10.1.{}.{}\n", i / 256, i % 256))
        .collect();
    let store = store_with(&many);
    let one = compile_in_parallel(&store.snapshot(), usize::MAX);
    let several = compile_in_parallel(&store.snapshot(), 10);
    assert_eq!(one, several);
    assert!(one.0.len() > 300);
}

#[test]
fn checksum_matches_rfc1071_for_odd_lengths() {
    assert_eq!(ones_complement_sum(&[0x01]), 0x0100);
    assert_eq!(ones_complement_sum(&[0xff, 0xff, 0x00, 0x02]), 0x0002);
}

#[test]
fn diffs_yield_the_same_table_as_a_full_compile() {
    let store = store_with(
        "_x._tcp SRV 0 0 80 new\n_x._tcp SRV 0 0 80 ns1\nmx MX 10 www\nc2 CNAME alias\n",
    );
    let mut installed = IndexedTable::of(&store.snapshot());
    let origin = Name::from_str("example.com.").unwrap();
    let a = |n: &str, last: u8| {
        Record::from_rdata(
            Name::from_str(n).unwrap(),
            300,
            RData::A(A::new(192, 0, 2, last)),
        )
    };
    let ns = Record::from_rdata(
        Name::from_str("www.example.com.").unwrap(),
        300,
        RData::NS(hickory_proto::rr::rdata::NS(
            Name::from_str("ns1.example.com.").unwrap(),
        )),
    );
    let dname = Record::from_rdata(
        Name::from_str("www.example.com.").unwrap(),
        300,
        RData::Unknown {
            code: RecordType::DNAME,
            rdata: hickory_proto::rr::rdata::NULL::with(b"\x03new\x07example\x00".to_vec()),
        },
    );
    let steps = vec![
        vec![
            Change::Add(a("new.example.com.", 7)),
            Change::Remove(a("ns1.example.com.", 1)),
        ],
        vec![
            Change::Add(a("ns1.example.com.", 2)),
            Change::Add(a("deep.www.example.com.", 3)),
        ],
        // www becomes a delegation: www and everything below leave,
        // and its referral comes; the address of its NS (a name of
        // the zone outside it) moves, and the referral with it.
        vec![Change::Add(ns.clone())],
        vec![Change::Add(a("ns1.example.com.", 9))],
        vec![Change::Remove(ns)],
        // A DNAME at www redirects deep.www, and lets it go again.
        vec![Change::Add(dname.clone())],
        vec![Change::Remove(dname)],
        // A TTL-only change must reach the kernel too.
        vec![Change::Add({
            let mut r = a("new.example.com.", 7);
            r.ttl = 5;
            r
        })],
    ];
    let mut referrals = 0;
    for changes in steps {
        let diff = store.update(&origin, &changes, 0).unwrap();
        let snap = store.snapshot();
        let delta = compile_diffs(&snap, &[diff], &installed);
        installed.apply(&delta);
        referrals += installed
            .table
            .contains_key(&key("www.example.com.", qtype_slot::REFERRAL))
            as u32;
        assert_eq!(installed.table, compile(&snap).0);
        assert!(diff_tables(&installed.table, &compile(&snap).0).is_empty());
        let index = IndexedTable::of(&snap).dependents;
        for name in ["www", "new", "ns1", "alias"] {
            let wire = key(&format!("{name}.example.com."), 0).name;
            let mut kept = installed.dependents.of(&wire).to_vec();
            let mut exact = index.of(&wire).to_vec();
            kept.sort();
            exact.sort();
            assert!(
                exact.iter().all(|d| kept.contains(d)),
                "{name}: {kept:?} ⊇ {exact:?}"
            );
        }
    }
    assert_eq!(referrals, 2, "a referral while www is a delegation");
    let t = &installed.table;
    assert!(t.contains_key(&key("deep.www.example.com.", qtype_slot::A)));
    let srv = qtype_slot::of(33);
    assert!(t.contains_key(&key("_x._tcp.example.com.", srv)));
    assert!(t.contains_key(&key("c2.example.com.", qtype_slot::AAAA)));
}
