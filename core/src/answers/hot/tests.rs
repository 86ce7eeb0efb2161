//! Differential tests: every query the hot path answers gets exactly the
//! full handler's bytes, over every query shape it answers (0x20 case,
//! EDNS sizes, DO, cookies, NSID, ECS and other options, truncation,
//! both transports, IPv4/IPv6/mapped peers); everything else is left to
//! the full handler; a table behind the store never answers.

use std::net::IpAddr;
use std::path::Path;

use hickory_proto::rr::Name;

use super::*;
use crate::answers::plan::fill;
use crate::answers::AnswerTable;
use crate::cookies::CookieSecrets;
use crate::handler::{Handler, Transport};
use crate::wire::ServerEdns;
use crate::zone::{load_zone_str, ZoneStore};

const NOW: u64 = 1_700_000_000;

fn zone(origin: &str, text: &str) -> crate::zone::Zone {
    load_zone_str(
        text,
        &Name::from_ascii(origin).unwrap(),
        Path::new("t.zone"),
    )
    .unwrap()
}

/// example.com.: single and dual-stack names, a 60-member set (a block),
/// a delegation, a wildcard, a CNAME, an empty non-terminal; signed.test.:
/// a zone with a DNSKEY, where DO=1 queries are hot only for names whose
/// RRset has RRSIGs (the signed variant).
fn zones() -> Vec<crate::zone::Zone> {
    let mut text = String::from(
        "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 h 7 3600 600 86400 60\n@ NS ns1\n\
         ns1 A 192.0.2.53\nwww A 192.0.2.1\nwww AAAA 2001:db8::1\nv6 AAAA 2001:db8::6\n\
         two A 192.0.2.2\ntwo A 192.0.2.3\nsub NS ns.sub\nns.sub A 192.0.2.54\n\
         *.wild A 192.0.2.9\nalias CNAME www\na.b.ent A 192.0.2.10\ntxt TXT hello\n\
         a-rather-long-service-name AAAA 2001:db8::42\n\
         _http._tcp SRV 10 5 80 www\n_http._tcp SRV 20 5 80 two\n_http._tcp SRV 30 5 80 gone\n\
         @ MX 10 mail\nmail A 192.0.2.25\n@ HTTPS 1 . alpn=h2\nwww HTTPS 1 . ipv4hint=192.0.2.1\n\
         @ CAA 0 issue \"ca.example\"\nptr PTR www.example.com.\nchain CNAME alias\n\
         out CNAME www.example.net.\ntomail CNAME mail\nto-ns1 CNAME ns1\n",
    );
    for i in 0..60 {
        text += &format!("big A 10.0.0.{i}\n");
    }
    let signed = "$ORIGIN signed.test.\n$TTL 300\n@ SOA ns1 h 1 3600 600 86400 60\n@ NS ns1\n\
        @ DNSKEY \\# 6 0101030daabb\n\
        ns1 A 192.0.2.1\nhost A 192.0.2.7\n\
        sig A 192.0.2.8\nsig RRSIG A 13 3 300 20300101000000 20200101000000 4711 signed.test. \
        c2lnbmF0dXJlLW9uZQ==\n\
        sig RRSIG A 15 3 300 20300101000000 20200101000000 4712 Signed.Test. c2lnbmF0dXJlLXR3bw==\n\
        sig AAAA 2001:db8::8\nsig RRSIG AAAA 13 3 300 20300101000000 20200101000000 4711 \
        signed.test. c2lnbmF0dXJlLXRocmVl\n\
        pool A 192.0.2.11\npool A 192.0.2.12\npool A 192.0.2.13\n\
        pool RRSIG A 13 3 300 20300101000000 20200101000000 4711 signed.test. c2lnbmF0dXJlLW9uZQ==\n\
        pool AAAA 2001:db8::11\npool AAAA 2001:db8::12\n\
        pool RRSIG AAAA 13 3 300 20300101000000 20200101000000 4711 signed.test. c2lnbmF0dXJl\n\
        pool RRSIG AAAA 15 3 300 20300101000000 20200101000000 4712 signed.test. c2lnbmF0dXJl\n\
        _s._udp SRV 0 0 53 host\n\
        _s._udp RRSIG SRV 13 3 300 20300101000000 20200101000000 4711 signed.test. c2lnbmF0dXJl\n";
    // Names of the SOA in other case and out of the zone, a DNAME, a
    // negative TTL below the SOA's.
    let other = "$ORIGIN Other.Test.\n$TTL 300\n\
        @ SOA NS.Elsewhere.NET. Host.Master.Other.TEST. 5 3600 600 86400 30\n\
        @ NS NS.Elsewhere.NET.\nd DNAME example.com.\nhost A 192.0.2.77\n\
        deep.a.b.c.e TXT x\nalias CNAME host\n";
    vec![
        zone("example.com.", &text),
        zone("signed.test.", signed),
        zone("other.test.", other),
    ]
}

fn store() -> ZoneStore {
    ZoneStore::with_zones(zones())
}

fn handler(nsid: Option<&[u8]>) -> Handler {
    Handler {
        edns: ServerEdns {
            udp_payload: 1232,
            nsid: nsid.map(<[u8]>::to_vec),
            cookies: CookieSecrets {
                current: [7; 16],
                previous: Some([8; 16]),
            },
        },
        ..Handler::default()
    }
}

/// An OPT record: payload size, DO, version, the options' bytes.
type Opt<'a> = (u16, bool, u8, &'a [u8]);

/// A query in wire form: header flags byte 2/3, one question, and an OPT
/// record built from `opt` (payload, DO, version, options) if given.
fn query(name: &str, qtype: u16, flags: [u8; 2], opt: Option<Opt>) -> Vec<u8> {
    let mut q = vec![
        0xab,
        0xcd,
        flags[0],
        flags[1],
        0,
        1,
        0,
        0,
        0,
        0,
        0,
        opt.is_some() as u8,
    ];
    for label in name
        .trim_end_matches('.')
        .split('.')
        .filter(|l| !l.is_empty())
    {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&1u16.to_be_bytes());
    if let Some((payload, dnssec_ok, version, options)) = opt {
        q.extend_from_slice(&[0, 0, 41]);
        q.extend_from_slice(&payload.to_be_bytes());
        q.extend_from_slice(&[0, version, if dnssec_ok { 0x80 } else { 0 }, 0]);
        q.extend_from_slice(&(options.len() as u16).to_be_bytes());
        q.extend_from_slice(options);
    }
    q
}

fn option(code: u16, data: &[u8]) -> Vec<u8> {
    let mut o = code.to_be_bytes().to_vec();
    o.extend_from_slice(&(data.len() as u16).to_be_bytes());
    o.extend_from_slice(data);
    o
}

/// A valid server cookie for `peer` from the handler's current secret.
fn server_cookie(h: &Handler, client: [u8; 8], peer: IpAddr) -> Vec<u8> {
    let q = query(
        "www.example.com.",
        1,
        [0, 0],
        Some((1232, false, 0, &option(10, &client))),
    );
    let store = store();
    let reply = h
        .handle(&store.snapshot(), &q, Transport::Udp, peer, NOW)
        .unwrap();
    reply[reply.len() - 24..].to_vec()
}

/// Every option list a resolver or a fuzzer might send.
fn option_sets(h: &Handler, peer: IpAddr) -> Vec<Vec<u8>> {
    let client = [1, 2, 3, 4, 5, 6, 7, 8];
    let good = server_cookie(h, client, peer);
    let mut wrong = good.clone();
    wrong[20] ^= 1;
    let ecs4 = option(8, &[0, 1, 24, 0, 198, 51, 100]);
    let nsid = option(3, &[]);
    let mut sets = vec![
        vec![],
        nsid.clone(),
        option(10, &client),
        option(10, &good),
        option(10, &wrong),
        option(10, &[9; 16]),
        option(10, &[9; 40]),
        option(10, &[9; 7]),
        option(10, &[9; 12]),
        option(10, &[9; 41]),
        ecs4.clone(),
        option(8, &[0, 1, 33, 0, 1, 2, 3, 4, 5]),
        option(8, &[0, 3, 8, 0, 1]),
        option(8, &[0, 1]),
        option(12, &[0; 40]),
        option(65001, b"unknown"),
        option(3, b"x"),
        [nsid.clone(), nsid.clone()].concat(),
        [option(10, &client), option(10, &client)].concat(),
        [
            nsid.clone(),
            ecs4.clone(),
            option(10, &good),
            option(12, &[0; 8]),
        ]
        .concat(),
        [option(10, &client), nsid.clone()].concat(),
        (0..9).flat_map(|_| option(12, &[])).collect(),
        option(12, &[0; 300]),
    ];
    let mut cut = option(10, &client);
    cut.truncate(6);
    sets.push(cut);
    sets
}

/// A table filled whole from the store, and one compiling on demand: the
/// hot path answers alike from either.
fn both_tables(store: &ZoneStore) -> [AnswerTable; 2] {
    let whole = AnswerTable::default();
    fill(&whole, &store.snapshot());
    let on_demand = AnswerTable::default();
    on_demand.set_on_demand(true);
    [whole, on_demand]
}

/// The full handler's reply, and the hot path's.
fn both(
    store: &ZoneStore,
    table: &AnswerTable,
    h: &Handler,
    q: &[u8],
    transport: Transport,
    peer: IpAddr,
) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let snapshot = store.snapshot();
    let full = h.handle(&snapshot, q, transport, peer, NOW);
    // (Asked once before: a table compiling on demand leaves a name's
    // first query to the full handler.)
    let _ = answer(table, &snapshot, q, transport, peer, NOW, &h.edns);
    let hot = answer(table, &snapshot, q, transport, peer, NOW, &h.edns);
    if let (Some(hot), Ok(mut req)) = (&hot, crate::wire::parse_request(q)) {
        // Rate limiting exempts on the hot path's word: the handler's.
        assert_eq!(hot.valid_cookie, h.stamp(&mut req, peer, NOW), "{q:02x?}");
    }
    (full, hot.map(|a| a.bytes))
}

#[test]
fn every_hot_answer_is_the_full_handlers_bytes() {
    let store = store();
    for table in both_tables(&store) {
        let peers: [IpAddr; 3] = [
            "192.0.2.99".parse().unwrap(),
            "2001:db8::99".parse().unwrap(),
            "::ffff:192.0.2.99".parse().unwrap(),
        ];
        let names = [
            "www.example.com.",
            "WwW.ExAmPlE.cOm.",
            "v6.example.com.",
            "two.example.com.",
            "BIG.example.com.",
            "ns1.example.com.",
            "a.b.ent.example.com.",
            "A-Rather-Long-Service-Name.example.com.",
            "b.ent.example.com.",
            "x.wild.example.com.",
            "alias.example.com.",
            "ns.sub.example.com.",
            "missing.example.com.",
            "MiSsInG.ExAmPlE.CoM.",
            "a.missing.b.ent.example.com.",
            "x.sub.example.com.",
            "nx.other.test.",
            "NX.Other.TEST.",
            "x.d.other.test.",
            "d.other.test.",
            "b.c.e.other.test.",
            "z.deep.a.b.c.e.other.test.",
            "missing.signed.test.",
            "txt.example.com.",
            "host.signed.test.",
            "HOST.Signed.Test.",
            "sig.signed.test.",
            "SIG.signed.TEST.",
            "example.net.",
            ".",
            "_http._tcp.example.com.",
            "_HTTP._Tcp.Example.COM.",
            "example.com.",
            "mail.example.com.",
            "ptr.example.com.",
            "chain.example.com.",
            "out.example.com.",
            "_s._udp.signed.test.",
            "tomail.example.com.",
            "ToMail.Example.Com.",
            "sub.example.com.",
            "to-ns1.example.com.",
            "ALIAS.other.test.",
        ];
        let (mut hot_count, mut total) = (0, 0);
        let mut hot_shapes = std::collections::BTreeSet::new();
        for nsid in [None, Some(&b"node-1"[..]), Some(&[b'n'; 65][..])] {
            let h = handler(nsid);
            for peer in peers {
                let sets = option_sets(&h, peer);
                for name in names {
                    for qtype in [1u16, 28, 16, 255, 6, 43, 33, 15, 65, 2, 5, 257, 12] {
                        for flags in [
                            [0, 0],
                            [1, 0],
                            [1, 0x10],
                            [0x07, 0xef],
                            [0x08, 0],
                            [0x80, 0],
                        ] {
                            let mut shapes: Vec<(&str, Option<Opt>)> = vec![("no EDNS", None)];
                            for payload in [0, 512, 1232, 4096] {
                                for dnssec_ok in [false, true] {
                                    shapes.push(("EDNS", Some((payload, dnssec_ok, 0, &[][..]))));
                                }
                            }
                            shapes.push(("EDNS version 1", Some((1232, false, 1, &[][..]))));
                            for set in &sets {
                                shapes.push(("options", Some((1232, true, 0, &set[..]))));
                            }
                            for (shape, opt) in shapes {
                                let q = query(name, qtype, flags, opt);
                                for transport in [Transport::Udp, Transport::Tcp] {
                                    let (full, hot) = both(&store, &table, &h, &q, transport, peer);
                                    total += 1;
                                    if let Some(hot) = hot {
                                        assert_eq!(
                                            Some(&hot),
                                            full.as_ref(),
                                            "{name} type {qtype} flags {flags:?} {opt:?} {transport:?} from {peer} nsid {nsid:?}"
                                        );
                                        hot_count += 1;
                                        hot_shapes.insert(shape);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        // The hot path must carry its share, over every kind of EDNS.
        assert!(hot_count > total / 20, "{hot_count} of {total} hot");
        assert_eq!(hot_shapes.len(), 3, "{hot_shapes:?}");
    }
}

/// The addresses of a reply's answer section, in order.
fn answer_addresses(reply: &[u8]) -> Vec<String> {
    let m = hickory_proto::op::Message::from_vec(reply).unwrap();
    m.answers
        .iter()
        .filter_map(|r| match &r.data {
            hickory_proto::rr::RData::A(a) => Some(a.to_string()),
            hickory_proto::rr::RData::AAAA(a) => Some(a.to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn rotated_answers_start_at_the_query_id_and_match_the_full_handler() {
    let store = ZoneStore::new();
    let origins = ["example.com.", "signed.test."].map(|o| Name::from_ascii(o).unwrap());
    store.set_rotation(crate::zone::RotationPolicy::new(&origins));
    store.replace_zones(zones(), &[], NOW);
    for table in both_tables(&store) {
        let h = handler(None);
        let peer: IpAddr = "192.0.2.99".parse().unwrap();
        // (name, type, DO, the RRset in stored order)
        let sets: [(&str, u16, bool, &[&str]); 6] = [
            ("two.example.com.", 1, false, &["192.0.2.2", "192.0.2.3"]),
            ("BIG.example.com.", 1, false, &[]),
            (
                "pool.signed.test.",
                1,
                false,
                &["192.0.2.11", "192.0.2.12", "192.0.2.13"],
            ),
            (
                "pool.signed.test.",
                1,
                true,
                &["192.0.2.11", "192.0.2.12", "192.0.2.13"],
            ),
            (
                "pool.signed.test.",
                28,
                true,
                &["2001:db8::11", "2001:db8::12"],
            ),
            ("www.example.com.", 1, false, &["192.0.2.1"]),
        ];
        let big: Vec<String> = (0..60).map(|i| format!("10.0.0.{i}")).collect();
        for (name, qtype, dnssec_ok, stored) in sets {
            let stored: Vec<String> = match stored.is_empty() {
                true => big.clone(),
                false => stored.iter().map(|s| s.to_string()).collect(),
            };
            let mut firsts = std::collections::BTreeSet::new();
            for id in [0u16, 1, 2, 3, 4, 59, 60, 61, 0xfffe, 0xffff] {
                let mut q = query(name, qtype, [0, 0], Some((1232, dnssec_ok, 0, &[][..])));
                q[..2].copy_from_slice(&id.to_be_bytes());
                for transport in [Transport::Udp, Transport::Tcp] {
                    let (full, hot) = both(&store, &table, &h, &q, transport, peer);
                    let full = full.unwrap();
                    assert_eq!(
                        hot.as_ref(),
                        Some(&full),
                        "{name} {qtype} DO {dnssec_ok} id {id}"
                    );
                    let n = stored.len();
                    let k = id as usize % n;
                    let expect = [&stored[k..], &stored[..k]].concat();
                    assert_eq!(answer_addresses(&full), expect, "{name} id {id}");
                    firsts.insert(expect[0].clone());
                }
            }
            assert_eq!(
                firsts.len().min(3),
                stored.len().min(3),
                "{name}: rotation moves"
            );
        }
        // A zone without rotation answers in stored order whatever the ID.
        let plain = self::store();
        let mut q = query("two.example.com.", 1, [0, 0], None);
        q[..2].copy_from_slice(&1u16.to_be_bytes());
        let full = handler(None)
            .handle(&plain.snapshot(), &q, Transport::Udp, peer, NOW)
            .unwrap();
        assert_eq!(answer_addresses(&full), ["192.0.2.2", "192.0.2.3"]);
    }
}

#[test]
fn what_the_hot_path_answers_and_what_it_leaves() {
    let store = store();
    for table in both_tables(&store) {
        let h = handler(Some(b"node-1"));
        let peer: IpAddr = "192.0.2.99".parse().unwrap();
        let hot = |q: &[u8], t| both(&store, &table, &h, q, t, peer).1.is_some();
        let udp = Transport::Udp;
        assert!(
            hot(&query("WWW.example.com.", 1, [1, 0], None), udp),
            "0x20 hit"
        );
        assert!(
            hot(&query("www.example.com.", 28, [0, 0], None), udp),
            "AAAA"
        );
        let nsid = option(3, &[]);
        assert!(hot(
            &query("www.example.com.", 1, [0, 0], Some((1232, true, 0, &nsid))),
            udp
        ));
        let cookie = option(10, &[1; 8]);
        assert!(hot(
            &query(
                "host.signed.test.",
                1,
                [0, 0],
                Some((1232, false, 0, &cookie))
            ),
            udp
        ));
        assert!(
            !hot(
                &query(
                    "host.signed.test.",
                    1,
                    [0, 0],
                    Some((1232, true, 0, &cookie))
                ),
                udp
            ),
            "signed zone, DO=1, no RRSIG"
        );
        assert!(
            hot(
                &query(
                    "sig.signed.test.",
                    1,
                    [0, 0],
                    Some((1232, true, 0, &cookie))
                ),
                udp
            ),
            "signed zone, DO=1, signed variant"
        );
        // 60 A records (972 bytes): over 512 truncated by the full handler.
        let big = |payload| {
            query(
                "big.example.com.",
                1,
                [0, 0],
                Some((payload, false, 0, &[][..])),
            )
        };
        assert!(!hot(&big(512), udp));
        let (full, _) = both(&store, &table, &h, &big(512), udp, peer);
        assert_ne!(full.unwrap()[2] & 0x02, 0, "TC from the full handler");
        assert!(hot(&big(4096), udp));
        assert!(hot(&big(512), Transport::Tcp));
        // Negative answers from the snapshot: NXDOMAIN, NODATA at a name,
        // at an empty non-terminal, in a signed zone without DO.
        for q in [
            query("missing.example.com.", 1, [0, 0], None),
            query("Deeper.Missing.example.com.", 16, [0, 0], None),
            query("txt.example.com.", 1, [0, 0], None),
            query("www.example.com.", 16, [0, 0], None),
            query("b.ent.example.com.", 28, [0, 0], None),
            query("missing.signed.test.", 1, [0, 0], None),
            // Every type's answer, with additional addresses, through a
            // CNAME chain inside the zone.
            query("alias.example.com.", 1, [0, 0], None),
            query("chain.example.com.", 28, [0, 0], None),
            query("alias.example.com.", 5, [0, 0], None),
            query("_http._tcp.example.com.", 33, [0, 0], None),
            query("example.com.", 15, [0, 0], None),
            query("example.com.", 2, [0, 0], None),
            query("example.com.", 6, [0, 0], None),
            query("example.com.", 65, [0, 0], None),
            query("example.com.", 257, [0, 0], None),
            query("txt.example.com.", 16, [0, 0], None),
            query("ptr.example.com.", 12, [0, 0], None),
            // Referrals: at the cut, below it.
            query("sub.example.com.", 2, [0, 0], None),
            query("Sub.example.com.", 16, [0, 0], None),
            query("missing.sub.example.com.", 1, [0, 0], None),
            query("b.missing.SUB.example.com.", 43, [0, 0], None),
            // DS: NODATA at a name and at a delegation without one.
            query("www.example.com.", 43, [0, 0], None),
            query("Sub.example.com.", 43, [0, 0], None),
            // NODATA at a chain's end: the chain, then the zone's SOA.
            query("tomail.example.com.", 65, [0, 0], None),
            query(
                "ToMail.example.com.",
                28,
                [0, 0],
                Some((1232, false, 0, &[][..])),
            ),
            query("alias.other.test.", 65, [0, 0], None),
            query(
                "_s._udp.signed.test.",
                33,
                [0, 0],
                Some((1232, true, 0, &[][..])),
            ),
        ] {
            assert!(hot(&q, udp), "{q:?}");
        }
        for q in [
            query("alias.example.com.", 16, [0, 0], None),
            // The SOA's MNAME would compress against the chain's target.
            query("to-ns1.example.com.", 65, [0, 0], None),
            query("out.example.com.", 1, [0, 0], None),
            query("x.wild.example.com.", 1, [0, 0], None),
            query("y.x.wild.example.com.", 1, [0, 0], None),
            // Glue below a cut, and three labels below it.
            query("ns.sub.example.com.", 1, [0, 0], None),
            query("a.b.missing.sub.example.com.", 1, [0, 0], None),
            query("www.example.com.", 255, [0, 0], None),
            query("www.example.com.", 46, [0, 0], None),
            query("missing.example.net.", 1, [0, 0], None),
            query(
                "missing.signed.test.",
                1,
                [0, 0],
                Some((1232, true, 0, &[][..])),
            ),
            query("www.example.com.", 1, [0x08, 0], None),
            query(
                "www.example.com.",
                1,
                [0, 0],
                Some((1232, false, 1, &[][..])),
            ),
            query(
                "www.example.com.",
                1,
                [0, 0],
                Some((1232, false, 0, &option(10, &[1; 9]))),
            ),
        ] {
            assert!(!hot(&q, udp), "{q:?}");
        }
    }
}

#[test]
fn a_table_behind_the_store_never_answers() {
    let store = store();
    let table = AnswerTable::default();
    let h = handler(None);
    let peer: IpAddr = "192.0.2.99".parse().unwrap();
    let q = query("www.example.com.", 1, [0, 0], None);
    assert_eq!(
        both(&store, &table, &h, &q, Transport::Udp, peer).1,
        None,
        "empty"
    );
    fill(&table, &store.snapshot());
    let before = both(&store, &table, &h, &q, Transport::Udp, peer)
        .1
        .unwrap();
    // The store moves on; the table has not caught up.
    let text = "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 h 8 3600 600 86400 60\n@ NS ns1\n\
                ns1 A 192.0.2.53\nwww A 192.0.2.200\n";
    store.replace_zones(vec![zone("example.com.", text)], &[], NOW);
    let (full, hot) = both(&store, &table, &h, &q, Transport::Udp, peer);
    assert_eq!(hot, None, "stale table");
    assert_ne!(full.as_ref(), Some(&before));
    fill(&table, &store.snapshot());
    let (full, hot) = both(&store, &table, &h, &q, Transport::Udp, peer);
    assert_eq!(hot, full);
}

/// A signed answer through a wildcard CNAME to an MX, asked with a
/// 0x20-cased name at 512 bytes: compressed into the question whatever
/// its case, so it fits as it does asked in lower case (NSD fits it too);
/// the same chain at an exact name is a hot answer, byte for byte the
/// full handler's.
#[test]
fn a_cased_question_costs_no_bytes_and_is_not_truncated() {
    let sig = "A".repeat(86) + "==";
    let rrsig = |covered: &str, labels: u8| {
        format!(
            "RRSIG {covered} 13 {labels} 300 20300101000000 20200101000000 4711 sig.example. {sig}"
        )
    };
    let text = format!(
        "$ORIGIN sig.example.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\n\
         @ DNSKEY \\# 6 0101030daabb\nns1 A 192.0.2.53\n\
         *.wild CNAME target\n*.wild {}\nchain CNAME target\nchain {}\n\
         target MX 10 mail\ntarget {}\nmail A 192.0.2.25\nmail {}\n\
         wild NSEC *.wild.sig.example. NSEC RRSIG\nwild {}\n",
        rrsig("CNAME", 2),
        rrsig("CNAME", 3),
        rrsig("MX", 3),
        rrsig("A", 3),
        rrsig("NSEC", 3),
    );
    let store = ZoneStore::with_zones(vec![zone("sig.example.", &text)]);
    for table in both_tables(&store) {
        let h = handler(None);
        let peer: IpAddr = "192.0.2.99".parse().unwrap();
        let do512 = Some((512, true, 0, &[][..]));
        let reply = |name: &str| {
            let q = query(name, 15, [0, 0], do512);
            let (full, hot) = both(&store, &table, &h, &q, Transport::Udp, peer);
            (q.len(), full.unwrap(), hot)
        };
        let (qlen, lower, hot) = reply("foo.wild.sig.example.");
        assert_eq!(hot, None, "a wildcard's answer is the full handler's");
        let (_, cased, _) = reply("FoO.WiLd.SiG.ExAmPlE.");
        assert_eq!(cased[2] & 0x02, 0, "not truncated");
        assert!(cased.len() <= 512);
        assert!(
            u16::from_be_bytes([cased[6], cased[7]]) >= 4,
            "CNAME, MX, RRSIGs"
        );
        assert_eq!(
            &cased[qlen - 11..],
            &lower[qlen - 11..],
            "the same sections, whatever the question's case"
        );
        for name in ["chain.sig.example.", "CHAIN.Sig.EXAMPLE."] {
            let (_, full, hot) = reply(name);
            assert_eq!(
                hot.as_ref(),
                Some(&full),
                "{name}: hot, and the full handler's bytes"
            );
        }
    }
}
