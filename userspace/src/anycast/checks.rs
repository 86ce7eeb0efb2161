//! The self-checks behind an announcement, each returning why it failed:
//! the kernel path (a real query frame through the attached program and
//! the live table, and the program still attached), the fallback (the
//! check query over UDP and TCP to the local listener, answered exactly as
//! the handler answers it), and data freshness (every configured zone
//! loaded, none expired).

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{LowerName, Name, RecordType};

use super::netlink;
use crate::handler::Transport;
use crate::router::Router;
use crate::xdp::KernelTable;

/// How long a fallback check waits for its answer.
const FALLBACK_TIMEOUT: Duration = Duration::from_millis(500);
/// The client address of the kernel check's frame (TEST-NET-2: a source
/// the program answers).
const CHECK_CLIENT: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 53);
const XDP_PASS: u32 = 2;
const XDP_TX: u32 = 3;

/// What every check needs.
pub struct Checks {
    pub router: std::sync::Arc<Router>,
    pub name: Name,
    pub rtype: RecordType,
    /// The local listener the fallback check asks.
    pub listener: SocketAddr,
    /// The destination of the kernel check's frame (a served address).
    pub destination: Ipv4Addr,
    /// The zones that must be loaded and fresh.
    pub zones: Vec<Name>,
}

impl Checks {
    /// The check query (ID 0x5a5a, no EDNS: its answer does not depend on
    /// the client).
    fn query(&self) -> Vec<u8> {
        let mut m = Message::query();
        m.metadata.id = 0x5a5a;
        m.add_query(Query::query(self.name.clone(), self.rtype));
        m.to_vec().expect("a question always encodes")
    }

    /// The answer the handler gives to `query` from `peer` now.
    fn expected(&self, query: &[u8], transport: Transport, peer: IpAddr) -> Option<Vec<u8>> {
        let snapshot = self.router.zones.snapshot();
        let now = crate::clock::unix_secs();
        self.router
            .handler
            .load()
            .handle(&snapshot, query, transport, peer, now)
    }

    /// Every configured zone is served and none is expired.
    pub fn freshness(&self) -> Result<(), String> {
        let snapshot = self.router.zones.snapshot();
        for origin in &self.zones {
            match snapshot
                .zones()
                .find(|z| z.origin_key() == &LowerName::new(origin))
            {
                None => return Err(format!("zone {origin} is not loaded")),
                Some(z) if z.is_expired() => return Err(format!("zone {origin} has expired")),
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// The check query over UDP and over TCP to the local listener.
    pub fn fallback(&self) -> Result<(), String> {
        let query = self.query();
        let local = match self.listener.ip() {
            IpAddr::V4(a) if a.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(a) if a.is_unspecified() => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        let to = SocketAddr::new(local, self.listener.port());
        let udp = ask_udp(to, &query).map_err(|e| format!("fallback over UDP: {e}"))?;
        let peer = match local {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        };
        if Some(&udp) != self.expected(&query, Transport::Udp, peer).as_ref() {
            return Err("fallback over UDP: not the expected answer".into());
        }
        let tcp = ask_tcp(to, &query).map_err(|e| format!("fallback over TCP: {e}"))?;
        if Some(&tcp) != self.expected(&query, Transport::Tcp, peer).as_ref() {
            return Err("fallback over TCP: not the expected answer".into());
        }
        Ok(())
    }

    /// The check query as a frame through the attached program and the
    /// live table: an answer must be the handler's, byte for byte, and a
    /// query the kernel leaves alone must pass unchanged; and the program
    /// must still be attached to every interface it was attached to.
    pub async fn kernel(&self, kernel: &KernelTable) -> Result<(), String> {
        let query = self.query();
        let frame = udp_frame(CHECK_CLIENT, self.destination, self.listener.port(), &query);
        let run = match kernel.self_check(frame.clone()).await {
            Some(Ok(run)) => run,
            Some(Err(e)) => return Err(format!("kernel path: {e}")),
            None => return Err("kernel path: the table's owner has stopped".into()),
        };
        match run.action {
            XDP_TX => {
                let dns = run.frame.get(FRAME_HEADERS..).unwrap_or_default();
                let expected = self.expected(&query, Transport::Udp, IpAddr::V4(CHECK_CLIENT));
                if Some(dns) != expected.as_deref() {
                    return Err("kernel path: not the expected answer".into());
                }
            }
            XDP_PASS if run.frame == frame => {}
            other => return Err(format!("kernel path: verdict {other} for the check query")),
        }
        for interface in &run.interfaces {
            let ifindex = crate::xdp::sys::interface_index(interface)
                .ok_or_else(|| format!("kernel path: interface {interface} is gone"))?;
            let id = netlink::xdp_program_id(ifindex)
                .map_err(|e| format!("kernel path: reading {interface}'s XDP program: {e}"))?;
            if id != run.program_id {
                return Err(format!(
                    "kernel path: the program is no longer attached to {interface}"
                ));
            }
        }
        Ok(())
    }
}

fn ask_udp(to: SocketAddr, query: &[u8]) -> std::io::Result<Vec<u8>> {
    let bind: SocketAddr = match to {
        SocketAddr::V4(_) => "0.0.0.0:0".parse().expect("literal"),
        SocketAddr::V6(_) => "[::]:0".parse().expect("literal"),
    };
    let s = UdpSocket::bind(bind)?;
    s.set_read_timeout(Some(FALLBACK_TIMEOUT))?;
    s.send_to(query, to)?;
    let mut buf = vec![0u8; 65_535];
    let (n, _) = s.recv_from(&mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

fn ask_tcp(to: SocketAddr, query: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut s = TcpStream::connect_timeout(&to, FALLBACK_TIMEOUT)?;
    s.set_read_timeout(Some(FALLBACK_TIMEOUT))?;
    s.set_write_timeout(Some(FALLBACK_TIMEOUT))?;
    let mut framed = (query.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(query);
    s.write_all(&framed)?;
    let mut len = [0u8; 2];
    s.read_exact(&mut len)?;
    let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
    s.read_exact(&mut buf)?;
    Ok(buf)
}

/// Ethernet + IPv4 + UDP before the DNS message.
const FRAME_HEADERS: usize = 14 + 20 + 8;

/// An Ethernet/IPv4/UDP frame carrying `dns` from `src` to `dst`:`port`.
fn udp_frame(src: Ipv4Addr, dst: Ipv4Addr, port: u16, dns: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(FRAME_HEADERS + dns.len());
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02, 0x08, 0x00]);
    let total = (20 + 8 + dns.len()) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let sum = ip
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum::<u32>();
    let folded = (sum & 0xffff) + (sum >> 16);
    ip[10..12].copy_from_slice(&(!(folded as u16)).to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&53535u16.to_be_bytes());
    f.extend_from_slice(&port.to_be_bytes());
    f.extend_from_slice(&((8 + dns.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]); // no UDP checksum (allowed over IPv4)
    f.extend_from_slice(dns);
    f
}

/// `"example.com. SOA"`: a name and a type in one string.
pub fn parse_check_name(text: &str) -> Result<(Name, RecordType), String> {
    let mut parts = text.split_whitespace();
    let (Some(name), Some(rtype), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err("expected a name and a type, e.g. \"example.com. SOA\"".into());
    };
    let mut name = Name::from_ascii(name).map_err(|e| format!("bad name {name:?}: {e}"))?;
    name.set_fqdn(true);
    let rtype: RecordType = rtype
        .to_ascii_uppercase()
        .parse()
        .map_err(|_| format!("unknown type {rtype:?}"))?;
    Ok((name, rtype))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_names_are_a_name_and_a_type() {
        let (n, t) = parse_check_name("example.com SOA").unwrap();
        assert_eq!(
            (n.to_ascii().as_str(), t),
            ("example.com.", RecordType::SOA)
        );
        assert_eq!(
            parse_check_name("www.example.com. a").unwrap().1,
            RecordType::A
        );
        assert!(parse_check_name("example.com.").is_err());
        assert!(parse_check_name("example.com. SOA extra").is_err());
        assert!(parse_check_name("example.com. NOPE").is_err());
    }

    #[test]
    fn check_frames_carry_a_valid_ipv4_header() {
        let f = udp_frame(CHECK_CLIENT, Ipv4Addr::new(192, 0, 2, 53), 53, b"hello");
        assert_eq!(f.len(), FRAME_HEADERS + 5);
        let sum: u32 = f[14..34]
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        assert_eq!(((sum & 0xffff) + (sum >> 16)) as u16, 0xffff);
        assert_eq!(&f[FRAME_HEADERS..], b"hello");
    }
}
