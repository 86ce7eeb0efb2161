use std::str::FromStr;

use hickory_proto::rr::rdata::{A, SOA};
use hickory_proto::rr::{Name, RData, Record};

use super::*;

fn name(s: &str) -> Name {
    Name::from_str(s).unwrap()
}

fn soa(serial: u32) -> Record {
    Record::from_rdata(
        name("example.net."),
        300,
        RData::SOA(SOA::new(
            name("ns.example.net."),
            name("h.example.net."),
            serial,
            10,
            5,
            60,
            30,
        )),
    )
}

fn a(last: u8) -> Record {
    Record::from_rdata(name("x.example.net."), 60, RData::A(A::new(10, 0, 0, last)))
}

fn read(ours: Option<u32>, messages: Vec<Vec<Record>>) -> Option<XfrOutcome> {
    let mut r = XfrReader::new(name("example.net."), ours);
    for m in messages {
        for rec in m {
            r.push(rec).unwrap();
        }
        if let Some(o) = r.finished() {
            return Some(o);
        }
    }
    None
}

#[test]
fn axfr_across_messages() {
    let got = read(
        None,
        vec![vec![soa(5), a(1)], vec![a(2)], vec![a(3), soa(5)]],
    );
    assert_eq!(got, Some(XfrOutcome::Full(vec![soa(5), a(1), a(2), a(3)])));
    assert_eq!(
        read(None, vec![vec![soa(5), a(1)]]),
        None,
        "not finished without the closing SOA"
    );
}

#[test]
fn ixfr_with_two_difference_sequences() {
    let msgs = vec![
        vec![soa(7), soa(5), a(1), soa(6), a(2)],
        vec![soa(6), a(2), soa(7), a(3), soa(7)],
    ];
    let Some(XfrOutcome::Incremental(diffs)) = read(Some(5), msgs) else {
        panic!("incremental expected")
    };
    assert_eq!(diffs.len(), 2);
    assert_eq!(
        (diffs[0].old_serial, diffs[0].new_serial),
        (Some(5), Some(6))
    );
    assert_eq!(diffs[0].removed, vec![soa(5), a(1)]);
    assert_eq!(diffs[0].added, vec![soa(6), a(2)]);
    assert_eq!(
        (diffs[1].old_serial, diffs[1].new_serial),
        (Some(6), Some(7))
    );
    assert_eq!(diffs[1].added, vec![soa(7), a(3)]);
}

#[test]
fn ixfr_answers_current_or_axfr_style() {
    assert_eq!(
        read(Some(5), vec![vec![soa(5)]]),
        Some(XfrOutcome::UpToDate(5))
    );
    // Newer serial and an AXFR-style body.
    let got = read(Some(5), vec![vec![soa(9)], vec![a(1), soa(9)]]);
    assert_eq!(got, Some(XfrOutcome::Full(vec![soa(9), a(1)])));
}

#[test]
fn a_transfer_must_start_with_the_soa_and_end_there() {
    let mut r = XfrReader::new(name("example.net."), None);
    assert!(r.push(a(1)).is_err());
    let mut r = XfrReader::new(name("example.net."), None);
    for rec in [soa(1), a(1), soa(1)] {
        r.push(rec).unwrap();
    }
    assert!(r.push(a(2)).is_err(), "records after the end");
}

#[test]
fn soa_timers_decide_refresh_retry_and_expiry() {
    let s = match soa(1).data {
        RData::SOA(s) => s,
        _ => unreachable!(),
    };
    let secs = Duration::from_secs;
    assert_eq!(
        schedule(Some(&s), true, Some(secs(0))),
        Schedule {
            next_check: secs(10),
            expired: false
        }
    );
    assert_eq!(
        schedule(Some(&s), false, Some(secs(30))),
        Schedule {
            next_check: secs(5),
            expired: false
        }
    );
    assert_eq!(
        schedule(Some(&s), false, Some(secs(60))),
        Schedule {
            next_check: secs(5),
            expired: true
        }
    );
    assert_eq!(
        schedule(Some(&s), false, None),
        Schedule {
            next_check: secs(5),
            expired: true
        },
        "never refreshed"
    );
    assert!(!schedule(None, false, None).expired, "nothing to expire");
}

#[test]
fn a_transfer_over_the_record_limit_is_abandoned_as_it_arrives() {
    let mut r = XfrReader::new(name("example.net."), None).with_max_records(3);
    for rec in [soa(1), a(1), a(2)] {
        r.push(rec).unwrap();
    }
    assert_eq!(r.push(a(3)), Err(XfrError::TooLarge(3)));
}
