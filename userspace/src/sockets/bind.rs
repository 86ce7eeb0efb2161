//! Binding the fallback's sockets: UDP and TCP on one port.

use std::net::SocketAddr;

use super::tcp::bind_tcp;
use super::udp::{bind_udp, Buffers};
use crate::config::ServerConfig;

/// Binds UDP (several SO_REUSEPORT sockets) and TCP on one address. With
/// port 0 the first UDP socket picks the port and everything else follows.
pub fn bind_address(
    addr: SocketAddr,
    limits: &ServerConfig,
) -> std::io::Result<(
    Vec<std::net::UdpSocket>,
    tokio::net::TcpListener,
    SocketAddr,
)> {
    // A port picked by the kernel for UDP may be taken for TCP: retry.
    let attempts = if addr.port() == 0 { 16 } else { 1 };
    let mut last_err = None;
    for _ in 0..attempts {
        let udp = match bind_udp(addr, limits.udp_socket_count(), Buffers::of(limits)) {
            Ok(u) => u,
            Err(e) => {
                last_err = Some(e);
                continue;
            }
        };
        let bound = udp[0].local_addr()?;
        match bind_tcp(bound) {
            Ok(tcp) => return Ok((udp, tcp, bound)),
            Err(e) => last_err = Some(e),
        }
    }
    Err(last_err.expect("at least one attempt"))
}
