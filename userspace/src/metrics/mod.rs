//! Counters for `/metrics`. The query path counts into per-thread slots
//! (each UDP worker owns one block of atomics, TCP shares one), so
//! counting is a relaxed add on a cache line no other thread writes; a
//! scrape sums them. The HTTP endpoint is `serve/metrics_http.rs`; this
//! module depends on nothing that serves.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::handler::Transport;

/// Query types counted by name; the rest are `other`.
pub const TYPES: [(&str, u16); 13] = [
    ("A", 1),
    ("NS", 2),
    ("CNAME", 5),
    ("SOA", 6),
    ("PTR", 12),
    ("MX", 15),
    ("TXT", 16),
    ("AAAA", 28),
    ("SRV", 33),
    ("HTTPS", 65),
    ("IXFR", 251),
    ("AXFR", 252),
    ("ANY", 255),
];
const OTHER_TYPE: usize = TYPES.len();
const TYPE_SLOTS: usize = TYPES.len() + 1;
const RCODES: usize = 16;
const SLOTS: usize = 2 * TYPE_SLOTS * RCODES;

/// One thread's query counts: transport × type × RCODE.
pub struct QueryCounts {
    slots: Box<[AtomicU64]>,
}

impl Default for QueryCounts {
    fn default() -> Self {
        QueryCounts {
            slots: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

fn slot(transport: Transport, type_slot: usize, rcode: usize) -> usize {
    let t = match transport {
        Transport::Udp => 0,
        Transport::Tcp => 1,
    };
    (t * TYPE_SLOTS + type_slot) * RCODES + rcode
}

impl QueryCounts {
    /// Counts the reply `reply` (its question's type, its RCODE).
    pub fn count(&self, transport: Transport, reply: &[u8]) {
        if let Some((type_slot, rcode)) = classify(reply) {
            self.slots[slot(transport, type_slot, rcode)].fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The question type's slot and the RCODE of a reply.
fn classify(reply: &[u8]) -> Option<(usize, usize)> {
    let rcode = (*reply.get(3)? & 0x0f) as usize;
    let mut pos = 12;
    if reply.get(4..6)? == [0, 0] {
        return Some((OTHER_TYPE, rcode));
    }
    loop {
        let len = *reply.get(pos)? as usize;
        if len == 0 {
            pos += 1;
            break;
        }
        if len & 0xc0 != 0 {
            pos += 2;
            break;
        }
        pos += 1 + len;
    }
    let qtype = u16::from_be_bytes(reply.get(pos..pos + 2)?.try_into().ok()?);
    let type_slot = TYPES
        .iter()
        .position(|(_, t)| *t == qtype)
        .unwrap_or(OTHER_TYPE);
    Some((type_slot, rcode))
}

/// Every thread's counts.
#[derive(Default)]
pub struct Metrics {
    threads: Mutex<Vec<Arc<QueryCounts>>>,
}

/// One summed series of `xdpdns_queries_total` (fallback).
#[derive(Debug, PartialEq, Eq)]
pub struct QuerySeries {
    pub transport: &'static str,
    pub qtype: &'static str,
    pub rcode: usize,
    pub count: u64,
}

impl Metrics {
    /// A block of counters for one thread (or one shared by TCP tasks).
    pub fn counts(&self) -> Arc<QueryCounts> {
        let c = Arc::new(QueryCounts::default());
        self.threads.lock().expect("metrics lock").push(c.clone());
        c
    }

    /// The sums over every thread, the series that are not zero.
    pub fn queries(&self) -> Vec<QuerySeries> {
        let mut sums = vec![0u64; SLOTS];
        for c in self.threads.lock().expect("metrics lock").iter() {
            for (s, v) in sums.iter_mut().zip(c.slots.iter()) {
                *s += v.load(Ordering::Relaxed);
            }
        }
        let mut out = Vec::new();
        for (transport, t) in [("udp", Transport::Udp), ("tcp", Transport::Tcp)] {
            for type_slot in 0..TYPE_SLOTS {
                for rcode in 0..RCODES {
                    let count = sums[slot(t, type_slot, rcode)];
                    if count > 0 {
                        out.push(QuerySeries {
                            transport,
                            qtype: TYPES.get(type_slot).map_or("other", |(n, _)| n),
                            rcode,
                            count,
                        });
                    }
                }
            }
        }
        out
    }
}

/// The RCODE's mnemonic (RFC 6895 §2.3), as `dig` shows it.
pub fn rcode_name(rcode: usize) -> String {
    const NAMES: [&str; 11] = [
        "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED", "YXDOMAIN", "YXRRSET",
        "NXRRSET", "NOTAUTH", "NOTZONE",
    ];
    NAMES
        .get(rcode)
        .map_or_else(|| format!("RCODE{rcode}"), |n| (*n).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(qtype: u16, rcode: u8) -> Vec<u8> {
        let mut r = vec![0, 1, 0x84, rcode, 0, 1, 0, 0, 0, 0, 0, 0];
        r.extend_from_slice(b"\x03www\x07example\x00");
        r.extend_from_slice(&qtype.to_be_bytes());
        r.extend_from_slice(&[0, 1]);
        r
    }

    #[test]
    fn replies_are_counted_by_transport_type_and_rcode_over_threads() {
        let m = Metrics::default();
        let (a, b) = (m.counts(), m.counts());
        a.count(Transport::Udp, &reply(1, 0));
        b.count(Transport::Udp, &reply(1, 0));
        b.count(Transport::Tcp, &reply(33, 3));
        a.count(Transport::Udp, &reply(99, 5));
        a.count(Transport::Udp, &[0, 1, 0x81]); // too short: not counted
        let mut q = m.queries();
        q.sort_by_key(|s| (s.transport, s.qtype, s.rcode));
        let got: Vec<_> = q
            .iter()
            .map(|s| (s.transport, s.qtype, s.rcode, s.count))
            .collect();
        assert_eq!(
            got,
            [
                ("tcp", "SRV", 3, 1),
                ("udp", "A", 0, 2),
                ("udp", "other", 5, 1)
            ]
        );
        assert_eq!(rcode_name(3), "NXDOMAIN");
        assert_eq!(rcode_name(0), "NOERROR");
    }
}
