//! The announce interface: a TUN device that only this process holds open
//! (not persistent), so the kernel deletes it — and its addresses, and so
//! the routing daemon's route — when the process exits, even by `kill -9`.
//! Announced = the service addresses are on it (BIRD's `direct` protocol
//! exports them); withdrawn = they are not.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use ipnet::IpNet;

use super::netlink;

/// `_IOW('T', 202, int)`.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;

#[derive(Debug, thiserror::Error)]
pub enum InterfaceError {
    #[error("cannot create TUN device {name}: {source}")]
    Create {
        name: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot {what} on {name}: {source}")]
    Change {
        what: String,
        name: String,
        #[source]
        source: io::Error,
    },
}

/// The TUN device, up, with or without the service addresses.
pub struct AnnounceInterface {
    name: String,
    ifindex: u32,
    addresses: Vec<IpNet>,
    announced: bool,
    /// Holding it keeps the device; closing it deletes the device.
    _tun: OwnedFd,
}

impl AnnounceInterface {
    /// Creates `name` (a leftover device of that name from a crashed run
    /// is gone already: it was not persistent) and brings it up, without
    /// addresses.
    pub fn create(name: &str, addresses: &[IpNet]) -> Result<Self, InterfaceError> {
        let fail = |source| InterfaceError::Create {
            name: name.to_string(),
            source,
        };
        let path = CString::new("/dev/net/tun").expect("no NUL");
        // SAFETY: open(2) on a constant path.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(fail(io::Error::last_os_error()));
        }
        // SAFETY: a fresh descriptor we own.
        let tun = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut req = ifreq(name).map_err(fail)?;
        req.ifr_ifru.ifru_flags = IFF_TUN | IFF_NO_PI;
        // SAFETY: TUNSETIFF with a valid ifreq.
        if unsafe { libc::ioctl(tun.as_raw_fd(), TUNSETIFF, &mut req) } < 0 {
            return Err(fail(io::Error::last_os_error()));
        }
        set_up(name).map_err(fail)?;
        let c = CString::new(name).map_err(|_| fail(io::ErrorKind::InvalidInput.into()))?;
        // SAFETY: a NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(c.as_ptr()) };
        if ifindex == 0 {
            return Err(fail(io::Error::last_os_error()));
        }
        Ok(AnnounceInterface {
            name: name.to_string(),
            ifindex,
            addresses: addresses.to_vec(),
            announced: false,
            _tun: tun,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn is_announced(&self) -> bool {
        self.announced
    }

    /// Puts the service addresses on the device.
    pub fn announce(&mut self) -> Result<(), InterfaceError> {
        for a in &self.addresses {
            netlink::add_address(self.ifindex, a.addr(), a.prefix_len())
                .map_err(|source| self.change(format!("add {a}"), source))?;
        }
        self.announced = true;
        Ok(())
    }

    /// Takes them off (all of them, even if one fails).
    pub fn withdraw(&mut self) -> Result<(), InterfaceError> {
        let mut first = None;
        for a in &self.addresses {
            if let Err(source) = netlink::delete_address(self.ifindex, a.addr(), a.prefix_len()) {
                first.get_or_insert(self.change(format!("remove {a}"), source));
            }
        }
        self.announced = false;
        first.map_or(Ok(()), Err)
    }

    fn change(&self, what: String, source: io::Error) -> InterfaceError {
        InterfaceError::Change {
            what,
            name: self.name.clone(),
            source,
        }
    }
}

fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "interface names are 1-15 bytes",
        ));
    }
    // SAFETY: ifreq is plain data; all zero is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    Ok(req)
}

/// Sets IFF_UP on `name`.
fn set_up(name: &str) -> io::Result<()> {
    // SAFETY: a datagram socket for the interface ioctls.
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    let sock = unsafe { OwnedFd::from_raw_fd(sock) };
    let mut req = ifreq(name)?;
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS with a valid ifreq.
    unsafe {
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) < 0 {
            return Err(io::Error::last_os_error());
        }
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
