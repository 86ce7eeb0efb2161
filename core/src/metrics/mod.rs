//! Counters for `/metrics`. The query path counts into per-thread slots
//! (each UDP worker owns one block of atomics, TCP shares one), so
//! counting is a relaxed add on a cache line no other thread writes; a
//! scrape sums them. The HTTP endpoint is `serve/metrics_http.rs`; this
//! module depends on nothing that serves.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::handler::Transport;

pub mod zones;

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

/// Upper bounds of the latency buckets, in nanoseconds (the last bucket,
/// `+Inf`, is implied): 5 µs to 100 ms.
const LATENCY_BOUNDS_NS: [u64; 13] = [
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    100_000_000,
];
const LATENCY_BUCKETS: usize = LATENCY_BOUNDS_NS.len() + 1;

/// A latency histogram of relaxed atomics (one writer thread, or a few).
pub struct Histogram {
    buckets: [AtomicU64; LATENCY_BUCKETS],
    sum_ns: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_ns: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    /// Records `n` observations of `d` each.
    pub fn observe_n(&self, d: Duration, n: u64) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let i = LATENCY_BOUNDS_NS
            .iter()
            .position(|&b| ns <= b)
            .unwrap_or(LATENCY_BOUNDS_NS.len());
        self.buckets[i].fetch_add(n, Ordering::Relaxed);
        self.sum_ns
            .fetch_add(ns.saturating_mul(n), Ordering::Relaxed);
    }

    pub fn observe(&self, d: Duration) {
        self.observe_n(d, 1);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut s = HistogramSnapshot::default();
        s.add(self);
        s
    }
}

/// A histogram's values at one moment: per-bucket counts (upper bound in
/// seconds, `f64::MAX` for `+Inf`), as prometheus-client encodes them.
#[derive(Clone, Debug, PartialEq)]
pub struct HistogramSnapshot {
    pub sum_secs: f64,
    pub count: u64,
    pub buckets: Vec<(f64, u64)>,
}

impl Default for HistogramSnapshot {
    fn default() -> Self {
        HistogramSnapshot {
            sum_secs: 0.0,
            count: 0,
            buckets: LATENCY_BOUNDS_NS
                .iter()
                .map(|&b| b as f64 / 1e9)
                .chain([f64::MAX])
                .map(|b| (b, 0))
                .collect(),
        }
    }
}

impl HistogramSnapshot {
    fn add(&mut self, h: &Histogram) {
        for (slot, b) in self.buckets.iter_mut().zip(&h.buckets) {
            let n = b.load(Ordering::Relaxed);
            slot.1 += n;
            self.count += n;
        }
        self.sum_secs += h.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
    }
}

/// One thread's query counts: transport × type × RCODE, truncated
/// replies and answer latency per transport.
pub struct QueryCounts {
    slots: Box<[AtomicU64]>,
    truncated: [AtomicU64; 2],
    latency: [Histogram; 2],
}

impl Default for QueryCounts {
    fn default() -> Self {
        QueryCounts {
            slots: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            truncated: Default::default(),
            latency: Default::default(),
        }
    }
}

fn transport_index(transport: Transport) -> usize {
    match transport {
        Transport::Udp => 0,
        Transport::Tcp => 1,
    }
}

fn slot(transport: Transport, type_slot: usize, rcode: usize) -> usize {
    (transport_index(transport) * TYPE_SLOTS + type_slot) * RCODES + rcode
}

impl QueryCounts {
    /// Counts the reply `reply` (its question's type, its RCODE).
    pub fn count(&self, transport: Transport, reply: &[u8]) {
        if let Some((type_slot, rcode)) = classify(reply) {
            self.slots[slot(transport, type_slot, rcode)].fetch_add(1, Ordering::Relaxed);
        }
        if reply.get(2).is_some_and(|b| b & 0x02 != 0) {
            self.truncated[transport_index(transport)].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `n` answers that took `d` each from reading the query to writing
    /// the answer.
    pub fn answered_in(&self, transport: Transport, d: Duration, n: u64) {
        self.latency[transport_index(transport)].observe_n(d, n);
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

/// Every thread's counts, and the TCP listeners' connection counts.
#[derive(Default)]
pub struct Metrics {
    threads: Mutex<Vec<Arc<QueryCounts>>>,
    pub tcp: TcpCounts,
}

/// TCP connections: open now, and how many were accepted, refused at the
/// cap and closed for idleness.
#[derive(Default)]
pub struct TcpCounts {
    pub open: AtomicI64,
    pub accepted: AtomicU64,
    pub refused: AtomicU64,
    pub idle_closed: AtomicU64,
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

    /// Truncated replies over every thread: (UDP, TCP).
    pub fn truncated(&self) -> (u64, u64) {
        let threads = self.threads.lock().expect("metrics lock");
        let sum = |t: usize| {
            threads
                .iter()
                .map(|c| c.truncated[t].load(Ordering::Relaxed))
                .sum()
        };
        (sum(0), sum(1))
    }

    /// Answer latency over every thread, for one transport.
    pub fn latency(&self, transport: Transport) -> HistogramSnapshot {
        let mut s = HistogramSnapshot::default();
        for c in self.threads.lock().expect("metrics lock").iter() {
            s.add(&c.latency[transport_index(transport)]);
        }
        s
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

    #[test]
    fn latencies_fall_in_their_buckets_and_sum_over_threads() {
        let m = Metrics::default();
        let (a, b) = (m.counts(), m.counts());
        a.answered_in(Transport::Udp, Duration::from_micros(3), 2);
        b.answered_in(Transport::Udp, Duration::from_micros(5), 1);
        b.answered_in(Transport::Udp, Duration::from_millis(30), 1);
        b.answered_in(Transport::Tcp, Duration::from_secs(1), 1);
        let udp = m.latency(Transport::Udp);
        assert_eq!(udp.count, 4);
        assert_eq!(udp.buckets[0], (5e-6, 3), "5 µs is within the first bound");
        assert_eq!(udp.buckets[12], (0.1, 1));
        assert!((udp.sum_secs - 0.030_011).abs() < 1e-9, "{}", udp.sum_secs);
        let tcp = m.latency(Transport::Tcp);
        assert_eq!(tcp.buckets.last(), Some(&(f64::MAX, 1)));
    }

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
        let mut tc = reply(1, 0);
        tc[2] |= 0x02;
        a.count(Transport::Udp, &tc);
        assert_eq!(m.truncated(), (1, 0));
        assert_eq!(rcode_name(0), "NOERROR");
    }
}
