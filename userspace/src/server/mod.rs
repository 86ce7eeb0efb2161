//! The tokio shells around the pure handler: UDP and TCP listeners, the
//! shared state they read, and graceful shutdown.

mod tcp;
mod udp;

use std::net::SocketAddr;

use arc_swap::ArcSwap;
use tokio::sync::watch;

use crate::config::ServerConfig;
use crate::handler::{Handler, Transport};
use crate::zone::ZoneStore;

pub use tcp::TcpServer;
pub use udp::{bind_udp, run_udp};

/// What every socket task reads: one atomic load each per query.
pub struct Shared {
    pub store: ZoneStore,
    pub handler: ArcSwap<Handler>,
}

impl AsRef<ZoneStore> for Shared {
    fn as_ref(&self) -> &ZoneStore {
        &self.store
    }
}

impl Shared {
    /// Answers one message from the current snapshot. The snapshot is held
    /// for the whole query, so a reload never changes data mid-answer.
    pub fn handle(&self, packet: &[u8], transport: Transport) -> Option<Vec<u8>> {
        let snapshot = self.store.load();
        self.handler.load().handle(&snapshot, packet, transport)
    }
}

/// Resolves to `true` once shutdown has been requested.
pub type ShutdownRx = watch::Receiver<bool>;

/// Binds UDP (several SO_REUSEPORT sockets) and TCP on one address. With
/// port 0 the first UDP socket picks the port and everything else follows.
pub fn bind_address(
    addr: SocketAddr,
    limits: &ServerConfig,
) -> std::io::Result<(
    Vec<tokio::net::UdpSocket>,
    tokio::net::TcpListener,
    SocketAddr,
)> {
    // A port picked by the kernel for UDP may be taken for TCP: retry.
    let attempts = if addr.port() == 0 { 16 } else { 1 };
    let mut last_err = None;
    for _ in 0..attempts {
        let udp = match bind_udp(addr, limits.udp_socket_count()) {
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
