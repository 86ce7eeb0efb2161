//! Building Ethernet/IP/UDP frames around DNS messages and checking the
//! checksums of replies, for BPF_PROG_TEST_RUN tests.
#![allow(dead_code)]

pub const CLIENT_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
pub const SERVER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
pub const CLIENT_V4: [u8; 4] = [198, 51, 100, 7];
pub const SERVER_V4: [u8; 4] = [192, 0, 2, 53];
pub const CLIENT_V6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7];
pub const SERVER_V6: [u8; 16] = [
    0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x53,
];
pub const CLIENT_PORT: u16 = 40_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

/// Knobs for malformed frames.
#[derive(Clone, Copy, Debug, Default)]
pub struct Quirks {
    pub more_fragments: bool,
    pub fragment_offset: bool,
    pub ipv6_hop_by_hop: bool,
    pub udp_len_delta: i16,
    pub ip_proto: Option<u8>,
    pub dst_port: Option<u16>,
    /// Another client address (the same family as the frame).
    pub src_v4: Option<[u8; 4]>,
    pub src_v6: Option<[u8; 16]>,
    /// Another server address (not the one xdpdns serves).
    pub dst_v4: Option<[u8; 4]>,
    pub src_mac: Option<[u8; 6]>,
    /// IPv4 options: this many 4-byte words (NOPs, then an end marker).
    pub ipv4_option_words: u8,
}

pub fn sum16(bytes: &[u8]) -> u64 {
    bytes
        .chunks(2)
        .map(|c| u64::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum()
}

pub fn fold(mut s: u64) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

fn udp_checksum(family: Family, src: &[u8], dst: &[u8], udp: &[u8]) -> u16 {
    let mut s = sum16(src) + sum16(dst) + 17 + udp.len() as u64;
    s += sum16(udp);
    let _ = family;
    match !fold(s) {
        0 => 0xffff,
        c => c,
    }
}

/// A frame carrying `dns` from the client to the server's port 53.
pub fn frame(family: Family, vlans: usize, dns: &[u8], q: Quirks) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&SERVER_MAC);
    f.extend_from_slice(&q.src_mac.unwrap_or(CLIENT_MAC));
    for i in 0..vlans {
        f.extend_from_slice(
            &(if i == 0 && vlans == 2 {
                0x88a8u16
            } else {
                0x8100u16
            })
            .to_be_bytes(),
        );
        f.extend_from_slice(&(100 + i as u16).to_be_bytes()); // TCI
    }
    let mut udp = Vec::new();
    udp.extend_from_slice(&CLIENT_PORT.to_be_bytes());
    udp.extend_from_slice(&q.dst_port.unwrap_or(53).to_be_bytes());
    udp.extend_from_slice(&((8 + dns.len()) as i32 + q.udp_len_delta as i32).to_be_bytes()[2..]);
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(dns);
    let src_v4 = q.src_v4.unwrap_or(CLIENT_V4);
    let src_v6 = q.src_v6.unwrap_or(CLIENT_V6);
    match family {
        Family::V4 => {
            f.extend_from_slice(&0x0800u16.to_be_bytes());
            let opts = 4 * q.ipv4_option_words as usize;
            let mut ip = vec![0x45 + q.ipv4_option_words, 0];
            ip.extend_from_slice(&((20 + opts + udp.len()) as u16).to_be_bytes());
            ip.extend_from_slice(&[0x12, 0x34]);
            let mut frag: u16 = 0x4000; // DF
            if q.more_fragments {
                frag |= 0x2000;
            }
            if q.fragment_offset {
                frag |= 0x0010;
            }
            ip.extend_from_slice(&frag.to_be_bytes());
            ip.extend_from_slice(&[17, q.ip_proto.unwrap_or(17), 0, 0]);
            ip.extend_from_slice(&src_v4);
            ip.extend_from_slice(&q.dst_v4.unwrap_or(SERVER_V4));
            if opts > 0 {
                ip.extend(std::iter::repeat_n(1u8, opts - 1)); // NOP
                ip.push(0); // end of options
            }
            let c = !fold(sum16(&ip));
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            let c = udp_checksum(family, &src_v4, &SERVER_V4, &udp);
            udp[6..8].copy_from_slice(&c.to_be_bytes());
            f.extend_from_slice(&ip);
        }
        Family::V6 => {
            f.extend_from_slice(&0x86ddu16.to_be_bytes());
            let c = udp_checksum(family, &src_v6, &SERVER_V6, &udp);
            udp[6..8].copy_from_slice(&c.to_be_bytes());
            let mut payload = Vec::new();
            let next = if q.ipv6_hop_by_hop {
                // Hop-by-hop options header: next=UDP, len 0, PadN.
                payload.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
                0
            } else {
                q.ip_proto.unwrap_or(17)
            };
            payload.extend_from_slice(&udp);
            f.extend_from_slice(&[0x60, 0, 0, 0]);
            f.extend_from_slice(&(payload.len() as u16).to_be_bytes());
            f.extend_from_slice(&[next, 9]);
            f.extend_from_slice(&src_v6);
            f.extend_from_slice(&SERVER_V6);
            f.extend_from_slice(&payload);
            return f;
        }
    }
    f.extend_from_slice(&udp);
    f
}

/// Checks a reply frame to a query built by [`frame`]: addresses and ports
/// swapped, VLAN tags kept, IP and UDP checksums valid. Returns the DNS
/// payload.
pub fn check_reply(family: Family, vlans: usize, query: &[u8], reply: &[u8]) -> Vec<u8> {
    let client = match family {
        Family::V4 => &CLIENT_V4[..],
        Family::V6 => &CLIENT_V6[..],
    };
    check_reply_to(family, vlans, query, reply, client)
}

/// [`check_reply`] for a query from `client` (its address bytes).
pub fn check_reply_to(
    family: Family,
    vlans: usize,
    query: &[u8],
    reply: &[u8],
    client: &[u8],
) -> Vec<u8> {
    assert_eq!(&reply[..6], &CLIENT_MAC, "dst MAC");
    assert_eq!(&reply[6..12], &SERVER_MAC, "src MAC");
    let l3 = 14 + 4 * vlans;
    assert_eq!(&reply[12..l3], &query[12..l3], "VLAN tags kept");
    let (udp_off, src, dst) = match family {
        Family::V4 => {
            let ip = &reply[l3..l3 + 20];
            assert_eq!(fold(sum16(ip)), 0xffff, "IPv4 header checksum");
            assert_eq!(&ip[12..16], &SERVER_V4);
            assert_eq!(&ip[16..20], client);
            assert_eq!(
                u16::from_be_bytes([ip[2], ip[3]]) as usize,
                reply.len() - l3,
                "IPv4 length"
            );
            (l3 + 20, SERVER_V4.to_vec(), client.to_vec())
        }
        Family::V6 => {
            let ip = &reply[l3..l3 + 40];
            assert_eq!(&ip[8..24], &SERVER_V6);
            assert_eq!(&ip[24..40], client);
            assert_eq!(
                u16::from_be_bytes([ip[4], ip[5]]) as usize,
                reply.len() - l3 - 40,
                "IPv6 payload length"
            );
            (l3 + 40, SERVER_V6.to_vec(), client.to_vec())
        }
    };
    let udp = &reply[udp_off..];
    assert_eq!(u16::from_be_bytes([udp[0], udp[1]]), 53, "src port");
    assert_eq!(
        u16::from_be_bytes([udp[2], udp[3]]),
        CLIENT_PORT,
        "dst port"
    );
    assert_eq!(
        u16::from_be_bytes([udp[4], udp[5]]) as usize,
        udp.len(),
        "UDP length"
    );
    assert_ne!(
        u16::from_be_bytes([udp[6], udp[7]]),
        0,
        "UDP checksum present"
    );
    let s = sum16(&src) + sum16(&dst) + 17 + udp.len() as u64 + sum16(udp);
    assert_eq!(fold(s), 0xffff, "UDP checksum verifies");
    udp[8..].to_vec()
}
