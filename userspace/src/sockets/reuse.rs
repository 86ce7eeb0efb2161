//! The sockets every listener binds: SO_REUSEADDR and SO_REUSEPORT,
//! non-blocking, IPv6 only on IPv6 addresses.

use std::net::SocketAddr;

/// Binds a socket of type `ty` on `addr`.
pub(crate) fn reuse_socket(
    addr: SocketAddr,
    ty: socket2::Type,
) -> std::io::Result<socket2::Socket> {
    let domain = socket2::Domain::for_address(addr);
    let sock = socket2::Socket::new(domain, ty, None)?;
    if addr.is_ipv6() {
        sock.set_only_v6(true)?;
    }
    sock.set_reuse_address(true)?;
    sock.set_reuse_port(true)?;
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    Ok(sock)
}
