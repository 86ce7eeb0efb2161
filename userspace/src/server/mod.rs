//! The tokio shells around the [`Router`](crate::router::Router): UDP and TCP listeners and
//! graceful shutdown. Sockets only; what to answer is the router's.

mod mmsg;
mod tcp;
mod udp;

use std::net::SocketAddr;

use tokio::sync::watch;

use crate::config::ServerConfig;
pub use tcp::TcpServer;
pub use udp::{bind_udp, spawn_udp_worker, udp_receive_drops};

/// Resolves to `true` once shutdown has been requested.
pub type ShutdownRx = watch::Receiver<bool>;

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
        let buffers = udp::Buffers {
            receive: limits.udp_receive_buffer,
            send: limits.udp_send_buffer,
        };
        let udp = match bind_udp(addr, limits.udp_socket_count(), buffers) {
            Ok(u) => u,
            Err(e) => {
                last_err = Some(e);
                continue;
            }
        };
        let bound = udp[0].local_addr()?;
        match tcp::bind_tcp(bound) {
            Ok(tcp) => return Ok((udp, tcp, bound)),
            Err(e) => last_err = Some(e),
        }
    }
    Err(last_err.expect("at least one attempt"))
}

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
