use std::sync::Arc;

use hickory_proto::dnssec::crypto::EcdsaSigningKey;
use hickory_proto::dnssec::rdata::{DNSSECRData, NSEC, RRSIG};
use hickory_proto::dnssec::{Algorithm, PublicKey, TBS};
use hickory_proto::rr::{DNSClass, LowerName, Name, RData, Record, RecordType};

use super::*;
use crate::zone::{load_zone_str, Zone};

const ZONE: &str = "$ORIGIN sd.test.\n$TTL 60\n\
    @ 300 SOA ns1 hostmaster 1 3600 600 86400 30\n@ NS ns1\nns1 A 192.0.2.53\n\
    web A 192.0.2.1\nweb A 192.0.2.2\n_http._tcp.web SRV 0 0 80 web\n\
    *.wild TXT \"any\"\nsub NS ns.sub\nns.sub A 192.0.2.9\nsub DS 1 13 2 \
    0000000000000000000000000000000000000000000000000000000000000000\n";

fn name(s: &str) -> Name {
    Name::from_ascii(s).unwrap()
}

fn key(role: KeyRole) -> ActiveKey {
    let pkcs8 = EcdsaSigningKey::generate_pkcs8(Algorithm::ECDSAP256SHA256).unwrap();
    let k = EcdsaSigningKey::from_pkcs8(&pkcs8, Algorithm::ECDSAP256SHA256).unwrap();
    ActiveKey::new(role, Arc::new(k)).unwrap()
}

fn zone(text: &str) -> Zone {
    load_zone_str(text, &name("sd.test."), std::path::Path::new("sd.test")).unwrap()
}

const NOW: u32 = 1_800_000_000;

fn sigs_of(zone: &Zone, owner: &str, covered: RecordType) -> Vec<RRSIG> {
    zone.node(&LowerName::new(&name(owner)))
        .and_then(|n| n.signatures(covered))
        .map(|s| {
            s.rdatas()
                .filter_map(|d| match d {
                    RData::DNSSEC(DNSSECRData::RRSIG(r)) => Some(r),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `sig` over `owner`'s `covered` set verifies with `key`.
fn verifies(zone: &Zone, owner: &str, covered: RecordType, sig: &RRSIG, key: &ActiveKey) -> bool {
    let owner = name(owner);
    let set = zone
        .node(&LowerName::new(&owner))
        .and_then(|n| n.rrset(covered))
        .unwrap();
    let records: Vec<Record> = set
        .rdatas()
        .map(|d| Record::from_rdata(owner.clone(), set.ttl, d))
        .collect();
    let tbs = TBS::from_input(&owner, DNSClass::IN, sig.input(), records.iter()).unwrap();
    sig.input().key_tag == key.tag
        && key
            .dnskey
            .public_key()
            .verify(tbs.as_ref(), sig.sig())
            .is_ok()
}

fn nsec(zone: &Zone, owner: &str) -> Option<NSEC> {
    zone.node(&LowerName::new(&name(owner)))?
        .rrset(RecordType::NSEC)?
        .rdatas()
        .find_map(|d| match d {
            RData::DNSSEC(DNSSECRData::NSEC(n)) => Some(n),
            _ => None,
        })
}

#[test]
fn every_authoritative_rrset_is_signed_and_the_nsec_chain_closes() {
    let csk = key(KeyRole::Csk);
    let signer = ZoneSigner::new(vec![csk.clone()], SignPolicy::default());
    let mut z = zone(ZONE);
    let done = sign_zone(&signer, None, &mut z, NOW).unwrap();
    assert!(done.signed > 8 && done.kept == 0, "{done:?}");
    for (owner, t) in [
        ("sd.test.", RecordType::SOA),
        ("sd.test.", RecordType::NS),
        ("sd.test.", RecordType::DNSKEY),
        ("sd.test.", RecordType::NSEC),
        ("web.sd.test.", RecordType::A),
        ("_http._tcp.web.sd.test.", RecordType::SRV),
        ("*.wild.sd.test.", RecordType::TXT),
        ("sub.sd.test.", RecordType::DS),
        ("sub.sd.test.", RecordType::NSEC),
    ] {
        let sigs = sigs_of(&z, owner, t);
        assert_eq!(sigs.len(), 1, "{owner} {t}");
        assert!(verifies(&z, owner, t, &sigs[0], &csk), "{owner} {t}");
        let i = sigs[0].input();
        assert_eq!(i.sig_inception.get(), NOW - 3600);
        assert!(i.sig_expiration.get() > NOW + 13 * 86_400, "{owner} {t}");
    }
    // The wildcard's RRSIG counts the labels without the `*`.
    assert_eq!(
        sigs_of(&z, "*.wild.sd.test.", RecordType::TXT)[0]
            .input()
            .num_labels,
        3
    );
    // Not the zone's: the delegation's NS and the glue below it.
    assert!(sigs_of(&z, "sub.sd.test.", RecordType::NS).is_empty());
    assert!(sigs_of(&z, "ns.sub.sd.test.", RecordType::A).is_empty());
    assert!(nsec(&z, "ns.sub.sd.test.").is_none(), "glue has no NSEC");
    // The chain in canonical order, back to the apex; no NSEC at the
    // empty non-terminals (_tcp.web, wild).
    let order = [
        "sd.test.",
        "ns1.sd.test.",
        "sub.sd.test.",
        "web.sd.test.",
        "_http._tcp.web.sd.test.",
        "*.wild.sd.test.",
    ];
    let mut canonical: Vec<LowerName> = order.iter().map(|o| LowerName::new(&name(o))).collect();
    canonical.sort();
    for (i, owner) in canonical.iter().enumerate() {
        let n = nsec(&z, &owner.to_string()).unwrap_or_else(|| panic!("NSEC at {owner}"));
        let next = &canonical[(i + 1) % canonical.len()];
        assert_eq!(LowerName::new(n.next_domain_name()), *next, "after {owner}");
    }
    assert!(nsec(&z, "_tcp.web.sd.test.").is_none());
    let at_cut: Vec<RecordType> = nsec(&z, "sub.sd.test.").unwrap().type_bit_maps().collect();
    assert_eq!(
        at_cut,
        [
            RecordType::NS,
            RecordType::DS,
            RecordType::RRSIG,
            RecordType::NSEC
        ]
    );
    let apex: Vec<RecordType> = nsec(&z, "sd.test.").unwrap().type_bit_maps().collect();
    assert!(apex.contains(&RecordType::DNSKEY) && apex.contains(&RecordType::SOA));
    // NSEC TTL: the lesser of the SOA's TTL and minimum (RFC 9077).
    let ttl = z
        .node(&LowerName::new(&name("sd.test.")))
        .unwrap()
        .rrset(RecordType::NSEC)
        .unwrap()
        .ttl;
    assert_eq!(ttl, 30);
}

#[test]
fn a_change_signs_only_what_it_touched_and_its_neighbours_nsec() {
    let signer = ZoneSigner::new(vec![key(KeyRole::Csk)], SignPolicy::default());
    let mut v1 = zone(ZONE);
    sign_zone(&signer, None, &mut v1, NOW).unwrap();
    let mut v2 = zone(
        &ZONE
            .replace("SOA ns1 hostmaster 1", "SOA ns1 hostmaster 2")
            .replace("web A 192.0.2.2\n", "web A 192.0.2.3\nnew A 192.0.2.4\n"),
    );
    let done = sign_zone(&signer, Some(&v1), &mut v2, NOW + 60).unwrap();
    // SOA, web/A, new/A; the NSECs of new and of its predecessor (the
    // apex), and nothing else.
    assert_eq!(done.signed, 5, "{done:?}");
    let same = |owner: &str, t| sigs_of(&v1, owner, t) == sigs_of(&v2, owner, t);
    assert!(same("_http._tcp.web.sd.test.", RecordType::SRV));
    assert!(same("sd.test.", RecordType::DNSKEY));
    assert!(!same("web.sd.test.", RecordType::A));
    assert!(!same("sd.test.", RecordType::NSEC));
    assert!(same("ns1.sd.test.", RecordType::NSEC));
    assert_eq!(
        LowerName::new(nsec(&v2, "new.sd.test.").unwrap().next_domain_name()),
        LowerName::new(&name("ns1.sd.test."))
    );
}

#[test]
fn signatures_are_refreshed_once_due_and_a_ksk_signs_only_the_keys() {
    let (ksk, zsk) = (key(KeyRole::Ksk), key(KeyRole::Zsk));
    let signer = ZoneSigner::new(vec![ksk.clone(), zsk.clone()], SignPolicy::default());
    let mut v1 = zone(ZONE);
    sign_zone(&signer, None, &mut v1, NOW).unwrap();
    let dnskey = sigs_of(&v1, "sd.test.", RecordType::DNSKEY);
    assert_eq!(dnskey.len(), 1);
    assert!(verifies(
        &v1,
        "sd.test.",
        RecordType::DNSKEY,
        &dnskey[0],
        &ksk
    ));
    let soa = sigs_of(&v1, "sd.test.", RecordType::SOA);
    assert!(soa.len() == 1 && verifies(&v1, "sd.test.", RecordType::SOA, &soa[0], &zsk));
    assert!(!zone::refresh_due(&signer, &v1, NOW + 86_400));
    // Past validity minus refresh (less 10 % jitter): due, and a signing
    // then replaces every signature.
    let later = NOW + 7 * 86_400;
    assert!(zone::refresh_due(&signer, &v1, later));
    let mut v2 = v1.clone();
    let done = sign_zone(&signer, Some(&v1), &mut v2, later).unwrap();
    assert_eq!(done.kept, 0, "{done:?}");
    assert!(!zone::refresh_due(&signer, &v2, later));
    // A key that stops signing makes the zone due too.
    let other = ZoneSigner::new(vec![key(KeyRole::Csk)], SignPolicy::default());
    assert!(zone::refresh_due(&other, &v2, later));
}

#[test]
fn cds_and_cdnskey_follow_the_submitted_keys() {
    let csk = key(KeyRole::Csk);
    let mut signer = ZoneSigner::new(vec![csk.clone()], SignPolicy::default());
    signer.submitted = vec![csk.dnskey.clone()];
    let mut z = zone(ZONE);
    sign_zone(&signer, None, &mut z, NOW).unwrap();
    let apex = z.node(&LowerName::new(&name("sd.test."))).unwrap();
    let cds: Vec<RData> = apex.rrset(RecordType::CDS).unwrap().rdatas().collect();
    let ds = ds_for(&name("sd.test."), &csk.dnskey).unwrap();
    match &cds[..] {
        [RData::DNSSEC(DNSSECRData::CDS(c))] => {
            assert_eq!((c.key_tag(), c.digest()), (ds.key_tag(), ds.digest()))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(apex.rrset(RecordType::CDNSKEY).unwrap().len(), 1);
    assert_eq!(sigs_of(&z, "sd.test.", RecordType::CDS).len(), 1);
}

#[test]
fn the_store_signs_on_its_commit_path_and_only_when_content_changes() {
    use crate::zone::{Change, ZoneStore};
    let store = ZoneStore::with_zones(vec![zone(ZONE)]);
    let origin = name("sd.test.");
    let signer = Arc::new(ZoneSigner::new(
        vec![key(KeyRole::Csk)],
        SignPolicy::default(),
    ));
    store.set_signer(&origin, Some(signer.clone()), NOW.into());
    let signed = store
        .snapshot()
        .zone(&LowerName::new(&origin))
        .cloned()
        .unwrap();
    assert!(signed.is_signed() && signed.has_nsec());
    let serial = signed.serial().unwrap();
    assert!(serial > 1, "signing is a change under a new serial");
    // The same unsigned contents again: nothing to commit.
    assert!(store
        .publish_generated(vec![zone(ZONE)], None, NOW.into())
        .is_empty());
    // A change: its record, the new signatures and NSECs in one diff.
    let add = Record::from_rdata(
        name("new.sd.test."),
        60,
        RData::A("192.0.2.4".parse().unwrap()),
    );
    let diff = store
        .update(&origin, &[Change::Add(add)], (NOW + 5).into())
        .unwrap();
    let added: Vec<RecordType> = diff.added.iter().map(|r| r.record_type()).collect();
    for t in [
        RecordType::SOA,
        RecordType::A,
        RecordType::NSEC,
        RecordType::RRSIG,
    ] {
        assert!(added.contains(&t), "{t} in {added:?}");
    }
    let z = store
        .snapshot()
        .zone(&LowerName::new(&origin))
        .cloned()
        .unwrap();
    assert_eq!(sigs_of(&z, "new.sd.test.", RecordType::A).len(), 1);
    assert!(z.serial().unwrap() > serial);
    // Nothing due a day later; a week later every signature is renewed.
    assert!(store.refresh_due((NOW + 86_400).into(), 1000).is_empty());
    assert_eq!(
        store.refresh_due((NOW + 7 * 86_400).into(), 1000),
        vec![(origin.clone(), 1)]
    );
    // Stopping signing strips what the signer owned.
    store.set_signer(&origin, None, (NOW + 7 * 86_400).into());
    let z = store
        .snapshot()
        .zone(&LowerName::new(&origin))
        .cloned()
        .unwrap();
    assert!(!z.is_signed() && !z.has_nsec());
}

/// Every RRset of `z` has one valid signature per key that should sign
/// it, and its NSEC chain is the one signing it whole would build.
fn consistent(z: &Zone, signer: &ZoneSigner) -> Result<(), String> {
    let mut whole = z.clone();
    sign_zone(signer, None, &mut whole, NOW).map_err(|e| e.to_string())?;
    let managed = |zone: &Zone, t: RecordType| -> std::collections::BTreeSet<String> {
        zone.records()
            .filter(|r| r.record_type() == t)
            .map(|r| r.to_string())
            .collect()
    };
    if managed(z, RecordType::NSEC) != managed(&whole, RecordType::NSEC) {
        return Err(format!(
            "NSEC chain differs:\n{:#?}\nvs\n{:#?}",
            managed(z, RecordType::NSEC),
            managed(&whole, RecordType::NSEC)
        ));
    }
    for (key, node) in whole.nodes() {
        for set in node
            .rrsets()
            .iter()
            .filter(|s| s.rtype != RecordType::RRSIG)
        {
            let wanted = whole
                .node(&key)
                .and_then(|n| n.signatures(set.rtype))
                .map_or(0, |s| s.len());
            let owner = Name::from(&key).to_string();
            let sigs = sigs_of(z, &owner, set.rtype);
            let valid = sigs
                .iter()
                .filter(|s| {
                    signer
                        .signing
                        .iter()
                        .any(|k| verifies(z, &owner, set.rtype, s, k))
                })
                .count();
            if sigs.len() != wanted || valid != wanted {
                return Err(format!(
                    "{owner} {}: {} sigs, {valid} valid, {wanted} wanted",
                    set.rtype,
                    sigs.len()
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn signing_only_the_change_gives_the_zone_signing_it_whole_would() {
    use crate::zone::{Change, ZoneStore};
    let store = ZoneStore::with_zones(vec![zone(ZONE)]);
    let origin = name("sd.test.");
    let signer = ZoneSigner::new(
        vec![key(KeyRole::Ksk), key(KeyRole::Zsk)],
        SignPolicy::default(),
    );
    store.set_signer(&origin, Some(Arc::new(signer.clone())), NOW.into());
    let rec = |owner: &str, rdata: RData| Record::from_rdata(name(owner), 60, rdata);
    let a = |s: &str| RData::A(s.parse().unwrap());
    let txt = |s: &str| RData::TXT(hickory_proto::rr::rdata::TXT::new(vec![s.to_string()]));
    let steps: Vec<Vec<Change>> = vec![
        // A new name at the front and one at the end of the chain.
        vec![
            Change::Add(rec("aaa.sd.test.", a("192.0.2.10"))),
            Change::Add(rec("zzz.sd.test.", a("192.0.2.11"))),
        ],
        // A new type at an existing name (its NSEC's types move).
        vec![Change::Add(rec("web.sd.test.", txt("hello")))],
        // A record of a set removed, and a whole name removed.
        vec![
            Change::Remove(rec("web.sd.test.", a("192.0.2.2"))),
            Change::Remove(rec("aaa.sd.test.", a("192.0.2.10"))),
        ],
        // Below an empty non-terminal, and a wildcard.
        vec![
            Change::Add(rec("x.y.deep.sd.test.", a("192.0.2.12"))),
            Change::Add(rec("*.any.sd.test.", a("192.0.2.13"))),
        ],
        // A type gone from a name that keeps others.
        vec![Change::Remove(rec("web.sd.test.", txt("hello")))],
        // A delegation added: signed whole.
        vec![Change::Add(rec(
            "kid.sd.test.",
            RData::NS(hickory_proto::rr::rdata::NS(name("ns.elsewhere."))),
        ))],
    ];
    for (i, changes) in steps.iter().enumerate() {
        let diff = store
            .update(&origin, changes, (NOW + i as u32).into())
            .unwrap();
        assert!(!diff.is_empty());
        let z = store
            .snapshot()
            .zone(&LowerName::new(&origin))
            .cloned()
            .unwrap();
        if let Err(e) = consistent(&z, &signer) {
            panic!("after step {i}: {e}");
        }
        // The diff carries every signed record that changed.
        let nsec_changes = diff
            .added
            .iter()
            .chain(&diff.removed)
            .filter(|r| r.record_type() == RecordType::NSEC)
            .count();
        assert!(nsec_changes > 0 || i == 1, "step {i}: {diff:?}");
    }
}

#[test]
fn a_reloaded_file_is_signed_at_what_it_changed() {
    use crate::zone::ZoneStore;
    let store = ZoneStore::with_zones(vec![zone(ZONE)]);
    let origin = name("sd.test.");
    let signer = ZoneSigner::new(vec![key(KeyRole::Csk)], SignPolicy::default());
    store.set_signer(&origin, Some(Arc::new(signer.clone())), NOW.into());
    let before = store
        .snapshot()
        .zone(&LowerName::new(&origin))
        .cloned()
        .unwrap();
    // The same file again (its serial behind the signed one): no change.
    assert!(store
        .replace_zones(vec![zone(ZONE)], &[], (NOW + 1).into())
        .is_empty());
    // One address edited, one name added.
    let edited = ZONE.replace("web A 192.0.2.2\n", "web A 192.0.2.3\nnew A 192.0.2.4\n");
    let diffs = store.replace_zones(vec![zone(&edited)], &[], (NOW + 2).into());
    assert_eq!(diffs.len(), 1);
    let after = store
        .snapshot()
        .zone(&LowerName::new(&origin))
        .cloned()
        .unwrap();
    assert!(after.serial() > before.serial());
    consistent(&after, &signer).unwrap();
    let same = |owner: &str, t| sigs_of(&before, owner, t) == sigs_of(&after, owner, t);
    assert!(same("_http._tcp.web.sd.test.", RecordType::SRV), "kept");
    assert!(same("ns1.sd.test.", RecordType::A), "kept");
    assert!(!same("web.sd.test.", RecordType::A), "signed anew");
    // The diff holds the edit and what signing it changed, nothing else.
    let owners: std::collections::BTreeSet<String> = diffs[0]
        .added
        .iter()
        .chain(&diffs[0].removed)
        .map(|r| r.name.to_string())
        .collect();
    assert_eq!(
        owners,
        ["new.sd.test.", "sd.test.", "web.sd.test."]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
}

#[test]
fn due_signatures_are_refreshed_in_batches_of_a_few_names_per_commit() {
    use crate::zone::ZoneStore;
    let mut text = ZONE.to_string();
    for i in 0..40 {
        text.push_str(&format!("h{i} A 192.0.2.{i}\n"));
    }
    let store = ZoneStore::with_zones(vec![zone(&text)]);
    let origin = name("sd.test.");
    let signer = ZoneSigner::new(vec![key(KeyRole::Csk)], SignPolicy::default());
    store.set_signer(&origin, Some(Arc::new(signer.clone())), NOW.into());
    assert!(
        store.refresh_due((NOW + 86_400).into(), 10).is_empty(),
        "nothing due"
    );
    let (_, mut feed) = store.subscribe();
    let later = NOW + 7 * 86_400;
    let before = store
        .snapshot()
        .zone(&LowerName::new(&origin))
        .cloned()
        .unwrap();
    let due = due_names(&signer, &before, later);
    assert!(due.len() > 40, "{}", due.len());
    let done = store.refresh_due(later.into(), 10);
    assert_eq!(done, vec![(origin.clone(), due.len().div_ceil(10))]);
    // Each commit touched one batch of names (and the apex).
    while let Some(item) = feed.try_next() {
        if let crate::zone::FeedItem::Commit(c) = item {
            let names: std::collections::BTreeSet<_> = c
                .diffs()
                .flat_map(|d| d.added.iter().map(|r| r.name.clone()))
                .collect();
            assert!(names.len() <= 11, "{}", names.len());
        }
    }
    let after = store
        .snapshot()
        .zone(&LowerName::new(&origin))
        .cloned()
        .unwrap();
    assert!(due_names(&signer, &after, later).is_empty());
    consistent(&after, &signer).unwrap();
}

/// During an algorithm rollover both algorithms' keys sign every RRset
/// (each RRset carries a signature of each), while the DNSKEY RRset lists
/// only the published ones; a change keeps both signatures.
#[test]
fn two_algorithms_sign_everything_while_one_is_unpublished() {
    use hickory_proto::dnssec::crypto::Ed25519SigningKey;
    let ed = |role| {
        let pkcs8 = Ed25519SigningKey::generate_pkcs8().unwrap();
        let k = Ed25519SigningKey::from_pkcs8(&pkcs8).unwrap();
        ActiveKey::new(role, Arc::new(k)).unwrap()
    };
    let (ksk, zsk) = (key(KeyRole::Ksk), key(KeyRole::Zsk));
    let (ksk15, zsk15) = (ed(KeyRole::Ksk), ed(KeyRole::Zsk));
    let mut signer = ZoneSigner::new(
        vec![ksk.clone(), zsk.clone(), ksk15.clone(), zsk15.clone()],
        SignPolicy::default(),
    );
    signer.unpublished = vec![ksk15.dnskey.clone(), zsk15.dnskey.clone()];
    let mut z = zone(ZONE);
    sign_zone(&signer, None, &mut z, NOW).unwrap();
    let dnskeys: Vec<u16> = z
        .apex()
        .rrset(RecordType::DNSKEY)
        .unwrap()
        .rdatas()
        .filter_map(|d| match d {
            RData::DNSSEC(DNSSECRData::DNSKEY(k)) => k.calculate_key_tag().ok(),
            _ => None,
        })
        .collect();
    assert_eq!(dnskeys.len(), 2);
    assert!(dnskeys.contains(&ksk.tag) && dnskeys.contains(&zsk.tag));
    for (owner, covered, keys) in [
        ("web.sd.test.", RecordType::A, [&zsk, &zsk15]),
        ("sd.test.", RecordType::SOA, [&zsk, &zsk15]),
        ("sd.test.", RecordType::DNSKEY, [&ksk, &ksk15]),
        ("web.sd.test.", RecordType::NSEC, [&zsk, &zsk15]),
    ] {
        let sigs = sigs_of(&z, owner, covered);
        assert_eq!(sigs.len(), 2, "{owner} {covered}");
        for k in keys {
            assert!(
                sigs.iter().any(|s| verifies(&z, owner, covered, s, k)),
                "{owner} {covered}: a signature by {}",
                k.tag
            );
        }
    }
    consistent(&z, &signer).unwrap();
}
