//! The kernel's samples are whole frames: their addresses, ports and DNS
//! message, read back here, and a sample turned into its dnstap events.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use xdpdns_common::tap::{kind, limited, QUERY_MAX, RECORD_HEADER, RESPONSE_MAX};
use xdpdns_common::PassReason;

use super::message::{Direction, Event, Protocol, WallTime};

/// A UDP datagram read from an Ethernet frame.
#[derive(Debug, PartialEq, Eq)]
pub struct Datagram<'a> {
    pub source: SocketAddr,
    pub destination: SocketAddr,
    pub payload: &'a [u8],
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// The UDP datagram in `frame` (Ethernet, VLAN tags, IPv4 or IPv6 with
/// UDP as the next header). The payload is cut where the frame is.
pub fn datagram(frame: &[u8]) -> Option<Datagram<'_>> {
    let mut at = 12;
    let mut ethertype = be16(frame, at)?;
    while ethertype == 0x8100 || ethertype == 0x88a8 {
        at += 4;
        ethertype = be16(frame, at)?;
    }
    at += 2;
    let (source, destination, l4) = match ethertype {
        0x0800 => {
            let ip = frame.get(at..at + 20)?;
            let header = usize::from(ip[0] & 0x0f) * 4;
            if ip[0] >> 4 != 4 || header < 20 || ip[9] != 17 {
                return None;
            }
            let src = IpAddr::V4(Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]));
            let dst = IpAddr::V4(Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]));
            (src, dst, at + header)
        }
        0x86dd => {
            let ip = frame.get(at..at + 40)?;
            if ip[0] >> 4 != 6 || ip[6] != 17 {
                return None;
            }
            let addr = |o: usize| {
                let mut a = [0u8; 16];
                a.copy_from_slice(&ip[o..o + 16]);
                IpAddr::V6(Ipv6Addr::from(a))
            };
            (addr(8), addr(24), at + 40)
        }
        _ => return None,
    };
    let (sport, dport, len) = (be16(frame, l4)?, be16(frame, l4 + 2)?, be16(frame, l4 + 4)?);
    let start = l4 + 8;
    let end = (l4 + usize::from(len)).min(frame.len());
    Some(Datagram {
        source: SocketAddr::new(source, sport),
        destination: SocketAddr::new(destination, dport),
        payload: frame.get(start..end.max(start))?,
    })
}

/// What `Dnstap.extra` says of a kernel sample.
pub fn decision(kind_: u32, detail: u32) -> String {
    match kind_ {
        kind::ANSWER => "xdp: answered".into(),
        kind::NEGATIVE => "xdp: answered (negative)".into(),
        kind::LIMITED if detail == limited::SLIPPED => "xdp: rate limited, slipped (TC)".into(),
        kind::LIMITED => "xdp: rate limited, dropped".into(),
        _ => {
            let reason = PassReason::ALL
                .iter()
                .find(|r| **r as u32 == detail)
                .map_or("unknown", |r| r.label());
            format!("xdp: passed to the fallback ({reason})")
        }
    }
}

/// A kernel sample as the ring buffer delivers it: its kind and the
/// query event, with the response event when the kernel sent one.
/// `wall` turns the kernel's monotonic nanoseconds into wall time.
pub fn sample_events(
    record: &[u8],
    wall: impl Fn(u64) -> WallTime,
) -> Option<(u32, Event, Option<Event>)> {
    let head = record.get(..RECORD_HEADER)?;
    let u32_at = |o: usize| u32::from_ne_bytes([head[o], head[o + 1], head[o + 2], head[o + 3]]);
    let mut t = [0u8; 8];
    t.copy_from_slice(&head[..8]);
    let time = wall(u64::from_ne_bytes(t));
    let (kind_, detail) = (u32_at(8), u32_at(12));
    let (query_len, response_len) = (u32_at(16) as usize, u32_at(20) as usize);
    let query_frame = record.get(RECORD_HEADER..RECORD_HEADER + query_len.min(QUERY_MAX))?;
    let q = datagram(query_frame)?;
    let extra = decision(kind_, detail).into_bytes();
    let query = Event {
        direction: Direction::Query,
        protocol: Protocol::Udp,
        client: q.source,
        server: q.destination,
        query_time: time,
        response_time: None,
        message: q.payload.to_vec(),
        extra: Some(extra.clone()),
    };
    let response = (response_len > 0)
        .then(|| {
            let at = RECORD_HEADER + QUERY_MAX;
            let frame = record.get(at..at + response_len.min(RESPONSE_MAX))?;
            let r = datagram(frame)?;
            Some(Event {
                direction: Direction::Response,
                response_time: Some(time),
                message: r.payload.to_vec(),
                ..query.clone()
            })
        })
        .flatten();
    Some((kind_, query, response))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp4(payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x81, 0x00, 0, 5]); // one VLAN tag
        f.extend_from_slice(&[0x08, 0x00]);
        let total = 20 + 8 + payload.len();
        f.extend_from_slice(&[
            0x45,
            0,
            (total >> 8) as u8,
            total as u8,
            0,
            0,
            0,
            0,
            64,
            17,
            0,
            0,
        ]);
        f.extend_from_slice(&[192, 0, 2, 7, 198, 51, 100, 53]);
        let ulen = 8 + payload.len();
        f.extend_from_slice(&[0x30, 0x39, 0, 53, (ulen >> 8) as u8, ulen as u8, 0, 0]);
        f.extend_from_slice(payload);
        f.extend_from_slice(&[0xee; 4]); // Ethernet padding
        f
    }

    #[test]
    fn a_vlan_tagged_ipv4_datagram_is_read_without_its_padding() {
        let f = udp4(b"dns!");
        let d = datagram(&f).unwrap();
        assert_eq!(d.source, "192.0.2.7:12345".parse().unwrap());
        assert_eq!(d.destination, "198.51.100.53:53".parse().unwrap());
        assert_eq!(d.payload, b"dns!");
        assert_eq!(datagram(&f[..20]), None);
    }

    #[test]
    fn ipv6_and_other_protocols() {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 10, 17, 64]);
        f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        f.extend_from_slice(&[0; 11]);
        f.push(1);
        f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        f.extend_from_slice(&[0; 11]);
        f.push(0x53);
        f.extend_from_slice(&[0, 53, 0x30, 0x39, 0, 10, 0, 0, b'h', b'i']);
        let d = datagram(&f).unwrap();
        assert_eq!(d.source, "[2001:db8::1]:53".parse().unwrap());
        assert_eq!(d.destination, "[2001:db8::53]:12345".parse().unwrap());
        assert_eq!(d.payload, b"hi");
        f[20] = 6; // TCP
        assert_eq!(datagram(&f), None);
    }

    #[test]
    fn a_sample_gives_the_query_and_the_response() {
        let mut record = vec![0u8; RECORD_HEADER + QUERY_MAX + RESPONSE_MAX];
        record[..8].copy_from_slice(&5u64.to_ne_bytes());
        record[8..12].copy_from_slice(&kind::ANSWER.to_ne_bytes());
        let (q, r) = (udp4(b"query"), udp4(b"the answer"));
        record[16..20].copy_from_slice(&(q.len() as u32).to_ne_bytes());
        record[20..24].copy_from_slice(&(r.len() as u32).to_ne_bytes());
        record[RECORD_HEADER..RECORD_HEADER + q.len()].copy_from_slice(&q);
        let at = RECORD_HEADER + QUERY_MAX;
        record[at..at + r.len()].copy_from_slice(&r);
        let wall = |ns: u64| WallTime {
            secs: 100,
            nanos: ns as u32,
        };
        let (k, query, response) = sample_events(&record, wall).unwrap();
        assert_eq!(k, kind::ANSWER);
        assert_eq!(query.message, b"query");
        assert_eq!(query.query_time.nanos, 5);
        let response = response.unwrap();
        assert_eq!(response.message, b"the answer");
        assert_eq!(response.direction, Direction::Response);
        assert_eq!(response.extra.as_deref(), Some(&b"xdp: answered"[..]));
        // Passed: no response, the reason said.
        record[8..12].copy_from_slice(&kind::PASSED.to_ne_bytes());
        record[12..16].copy_from_slice(&(PassReason::Miss as u32).to_ne_bytes());
        record[20..24].copy_from_slice(&0u32.to_ne_bytes());
        let (_, query, response) = sample_events(&record, wall).unwrap();
        assert!(response.is_none());
        let extra = String::from_utf8(query.extra.unwrap()).unwrap();
        assert!(
            extra.contains("passed") && extra.contains(PassReason::Miss.label()),
            "{extra}"
        );
        assert!(sample_events(&record[..10], wall).is_none());
    }
}
