//! The few rtnetlink requests the anycast coupling needs, written out by
//! hand (a route socket, one request, its acknowledgement): add and delete
//! an address on an interface, and read which XDP program an interface
//! runs.

use std::io;
use std::net::IpAddr;

const RTM_GETLINK: u16 = 18;
const RTM_NEWADDR: u16 = 20;
const RTM_DELADDR: u16 = 21;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_CREATE: u16 = 0x400;
const NLM_F_REPLACE: u16 = 0x100;
const NLMSG_ERROR: u16 = 2;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFLA_XDP: u16 = 43;
const IFLA_XDP_PROG_ID: u16 = 4;
const NLA_F_NESTED: u16 = 1 << 15;

/// A netlink route socket, closed on drop.
struct Socket(libc::c_int);

impl Drop for Socket {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours.
        unsafe { libc::close(self.0) };
    }
}

impl Socket {
    fn open() -> io::Result<Socket> {
        // SAFETY: plain socket(2).
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let s = Socket(fd);
        let tv = libc::timeval {
            tv_sec: 2,
            tv_usec: 0,
        };
        // SAFETY: a valid timeval for SO_RCVTIMEO.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as u32,
            )
        };
        Ok(s)
    }

    /// Sends one request and returns the replies up to its ACK or error.
    fn request(&self, kind: u16, flags: u16, body: &[u8]) -> io::Result<Vec<Vec<u8>>> {
        let mut msg = Vec::with_capacity(16 + body.len());
        msg.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
        msg.extend_from_slice(&kind.to_ne_bytes());
        msg.extend_from_slice(&(flags | NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
        msg.extend_from_slice(&1u32.to_ne_bytes()); // sequence
        msg.extend_from_slice(&0u32.to_ne_bytes()); // port: the kernel's
        msg.extend_from_slice(body);
        // SAFETY: sending our buffer on our socket (to the kernel: no
        // address needed for a route socket's default destination).
        let sent = unsafe { libc::send(self.0, msg.as_ptr() as *const _, msg.len(), 0) };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut replies = Vec::new();
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            // SAFETY: receiving into our buffer.
            let n = unsafe { libc::recv(self.0, buf.as_mut_ptr() as *mut _, buf.len(), 0) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let mut at = 0;
            let n = n as usize;
            while at + 16 <= n {
                let len = u32::from_ne_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
                let kind = u16::from_ne_bytes([buf[at + 4], buf[at + 5]]);
                if len < 16 || at + len > n {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "netlink: bad length",
                    ));
                }
                let payload = &buf[at + 16..at + len];
                if kind == NLMSG_ERROR {
                    let code = i32::from_ne_bytes(payload[..4].try_into().unwrap());
                    return match code {
                        0 => Ok(replies),
                        e => Err(io::Error::from_raw_os_error(-e)),
                    };
                }
                replies.push(payload.to_vec());
                at += (len + 3) & !3;
            }
        }
    }
}

fn attr(out: &mut Vec<u8>, kind: u16, data: &[u8]) {
    out.extend_from_slice(&((4 + data.len()) as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(data);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

fn address_message(ifindex: u32, addr: IpAddr, prefix: u8) -> Vec<u8> {
    let (family, bytes) = match addr {
        IpAddr::V4(a) => (libc::AF_INET as u8, a.octets().to_vec()),
        IpAddr::V6(a) => (libc::AF_INET6 as u8, a.octets().to_vec()),
    };
    // struct ifaddrmsg { family, prefixlen, flags, scope, index }
    let mut body = vec![family, prefix, 0, 0];
    body.extend_from_slice(&ifindex.to_ne_bytes());
    attr(&mut body, IFA_LOCAL, &bytes);
    attr(&mut body, IFA_ADDRESS, &bytes);
    body
}

/// Adds `addr/prefix` to interface `ifindex` (present already is fine).
pub fn add_address(ifindex: u32, addr: IpAddr, prefix: u8) -> io::Result<()> {
    let body = address_message(ifindex, addr, prefix);
    Socket::open()?
        .request(RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE, &body)
        .map(drop)
}

/// Removes `addr/prefix` from interface `ifindex` (absent already is fine).
pub fn delete_address(ifindex: u32, addr: IpAddr, prefix: u8) -> io::Result<()> {
    let body = address_message(ifindex, addr, prefix);
    match Socket::open()?.request(RTM_DELADDR, 0, &body) {
        Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => Ok(()),
        r => r.map(drop),
    }
}

/// The id of the XDP program attached to interface `ifindex` (0: none).
pub fn xdp_program_id(ifindex: u32) -> io::Result<u32> {
    // struct ifinfomsg { family, pad, type, index, flags, change }
    let mut body = vec![libc::AF_UNSPEC as u8, 0, 0, 0];
    body.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    body.extend_from_slice(&0u32.to_ne_bytes());
    body.extend_from_slice(&0u32.to_ne_bytes());
    let replies = Socket::open()?.request(RTM_GETLINK, 0, &body)?;
    for reply in replies {
        let Some(attrs) = reply.get(16..) else {
            continue;
        };
        if let Some(xdp) = find_attr(attrs, IFLA_XDP) {
            if let Some(id) = find_attr(xdp, IFLA_XDP_PROG_ID) {
                if id.len() >= 4 {
                    return Ok(u32::from_ne_bytes(id[..4].try_into().unwrap()));
                }
            }
        }
    }
    Ok(0)
}

fn find_attr(mut attrs: &[u8], kind: u16) -> Option<&[u8]> {
    while attrs.len() >= 4 {
        let len = u16::from_ne_bytes([attrs[0], attrs[1]]) as usize;
        let this = u16::from_ne_bytes([attrs[2], attrs[3]]) & !NLA_F_NESTED;
        if len < 4 || len > attrs.len() {
            return None;
        }
        if this == kind {
            return Some(&attrs[4..len]);
        }
        attrs = &attrs[((len + 3) & !3).min(attrs.len())..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_attributes_are_found() {
        let mut inner = Vec::new();
        attr(&mut inner, 1, &[2]);
        attr(&mut inner, IFLA_XDP_PROG_ID, &42u32.to_ne_bytes());
        let mut outer = Vec::new();
        attr(&mut outer, 3, b"eth0\0");
        attr(&mut outer, IFLA_XDP | NLA_F_NESTED, &inner);
        let xdp = find_attr(&outer, IFLA_XDP).unwrap();
        assert_eq!(
            find_attr(xdp, IFLA_XDP_PROG_ID),
            Some(&42u32.to_ne_bytes()[..])
        );
        assert_eq!(find_attr(&outer, 99), None);
    }
}
