use std::str::FromStr;

use hickory_proto::op::{Message, Query};
use hickory_proto::rr::rdata::{A, SOA};
use hickory_proto::rr::{Name, RData, Record, RecordType};

use super::*;
use crate::transfer::NoHistory;
use crate::zone::ZoneStore;

fn name(s: &str) -> Name {
    Name::from_str(s).unwrap()
}

/// A zone with one name holding 3000 A records and 2000 other names.
fn big_zone() -> Zone {
    let origin = name("example.com.");
    let mut z = Zone::new(&origin);
    let soa = SOA::new(
        name("ns.example.com."),
        name("h.example.com."),
        7,
        3600,
        600,
        86400,
        60,
    );
    z.insert(Record::from_rdata(origin, 300, RData::SOA(soa)))
        .unwrap();
    for i in 0..3000u32 {
        let rd = RData::A(A::new(10, (i >> 16) as u8, (i >> 8) as u8, i as u8));
        z.insert(Record::from_rdata(name("many.example.com."), 60, rd))
            .unwrap();
    }
    for i in 0..2000u32 {
        let rd = RData::A(A::new(192, 0, 2, (i % 250) as u8));
        z.insert(Record::from_rdata(
            name(&format!("host{i}.example.com.")),
            60,
            rd,
        ))
        .unwrap();
    }
    z
}

fn collect(write: impl FnOnce(&mut dyn FnMut(Vec<u8>) -> bool) -> bool) -> Vec<Message> {
    let mut out = Vec::new();
    assert!(write(&mut |m| {
        assert!(m.len() <= u16::MAX as usize);
        out.push(Message::from_vec(&m).expect("each message parses"));
        true
    }));
    out
}

#[test]
fn axfr_spans_many_messages_starting_and_ending_with_soa() {
    let zone = big_zone();
    let q = Query::query(name("example.com."), RecordType::AXFR);
    let msgs = collect(|sink| write_axfr(&zone, 0x4242, &q, sink));
    assert!(msgs.len() > 3, "{} messages", msgs.len());
    let records: Vec<Record> = msgs.iter().flat_map(|m| m.answers.clone()).collect();
    assert_eq!(
        records.len(),
        zone.record_count() + 1,
        "SOA twice, everything else once"
    );
    assert_eq!(records.first().unwrap().record_type(), RecordType::SOA);
    assert_eq!(records.last().unwrap().record_type(), RecordType::SOA);
    let soas = records
        .iter()
        .filter(|r| r.record_type() == RecordType::SOA)
        .count();
    assert_eq!(soas, 2);
    let many = records
        .iter()
        .filter(|r| r.name == name("many.example.com."))
        .count();
    assert_eq!(many, 3000, "a name with thousands of records is sent whole");
    for (i, m) in msgs.iter().enumerate() {
        assert_eq!(m.id, 0x4242);
        assert!(m.authoritative);
        assert_eq!(
            m.queries.len(),
            usize::from(i == 0),
            "question in the first message only"
        );
    }
}

fn request(qtype: RecordType, serial: Option<u32>) -> Request {
    let mut r = Request::new(1, Query::query(name("example.com."), qtype));
    r.ixfr_serial = serial;
    r
}

#[test]
fn plans_for_each_transport_and_serial() {
    let store = ZoneStore::with_zones(vec![big_zone()]);
    let journal = NoHistory;
    let snap = store.snapshot();
    let rcode = |p: Plan| match p {
        Plan::Reply(r) => Some((r.rcode, r.answers.len())),
        _ => None,
    };
    use hickory_proto::op::ResponseCode as R;
    assert_eq!(
        rcode(plan(
            &snap,
            &journal,
            &request(RecordType::AXFR, None),
            Transport::Udp
        )),
        Some((R::Refused, 0))
    );
    assert!(matches!(
        plan(
            &snap,
            &journal,
            &request(RecordType::AXFR, None),
            Transport::Tcp
        ),
        Plan::Axfr(_)
    ));
    // IXFR: current -> SOA alone; unknown serial -> AXFR over TCP, SOA over UDP.
    assert_eq!(
        rcode(plan(
            &snap,
            &journal,
            &request(RecordType::IXFR, Some(7)),
            Transport::Tcp
        )),
        Some((R::NoError, 1))
    );
    assert!(matches!(
        plan(
            &snap,
            &journal,
            &request(RecordType::IXFR, Some(3)),
            Transport::Tcp
        ),
        Plan::Axfr(_)
    ));
    assert_eq!(
        rcode(plan(
            &snap,
            &journal,
            &request(RecordType::IXFR, Some(3)),
            Transport::Udp
        )),
        Some((R::NoError, 1))
    );
    assert_eq!(
        rcode(plan(
            &snap,
            &journal,
            &request(RecordType::IXFR, None),
            Transport::Tcp
        )),
        Some((R::FormErr, 0))
    );
    let mut other = request(RecordType::AXFR, None);
    other.query = Query::query(name("example.org."), RecordType::AXFR);
    assert_eq!(
        rcode(plan(&snap, &journal, &other, Transport::Tcp)),
        Some((R::NotAuth, 0))
    );
}

#[test]
fn ixfr_is_new_soa_old_soa_removed_new_soa_added_new_soa() {
    let soa = |serial| {
        Record::from_rdata(
            name("example.com."),
            300,
            RData::SOA(SOA::new(
                name("ns.example.com."),
                name("h.example.com."),
                serial,
                1,
                1,
                1,
                1,
            )),
        )
    };
    let a = |last| Record::from_rdata(name("x.example.com."), 60, RData::A(A::new(10, 0, 0, last)));
    let diff = ZoneDiff {
        origin: name("example.com."),
        old_serial: Some(1),
        new_serial: Some(2),
        removed: vec![soa(1), a(1)],
        added: vec![soa(2), a(2), a(3)],
        whole_zone: false,
    };
    let q = Query::query(name("example.com."), RecordType::IXFR);
    let msgs = collect(|sink| write_ixfr(&diff, 9, &q, sink));
    let got: Vec<String> = msgs
        .iter()
        .flat_map(|m| m.answers.iter())
        .map(|r| match &r.data {
            RData::SOA(s) => format!("SOA {}", s.serial),
            d => d.to_string(),
        })
        .collect();
    assert_eq!(
        got,
        ["SOA 2", "SOA 1", "10.0.0.1", "SOA 2", "10.0.0.2", "10.0.0.3", "SOA 2"]
    );
}
