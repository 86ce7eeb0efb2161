//! UDP: one SO_REUSEPORT socket per core, each drained by its own task, so
//! the kernel spreads datagrams across cores without a shared queue.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::UdpSocket;
use tracing::debug;

use super::{reuse_socket, Response, Shared, ShutdownRx};
use crate::handler::Transport;

/// Largest datagram we accept; anything longer is truncated by the kernel
/// and then fails to parse.
const MAX_DATAGRAM: usize = 65_535;

/// Binds `count` sockets to `addr`; with port 0 the first picks the port.
pub fn bind_udp(addr: SocketAddr, count: usize) -> std::io::Result<Vec<UdpSocket>> {
    let first = reuse_socket(addr, socket2::Type::DGRAM)?;
    let bound = first.local_addr()?.as_socket().expect("inet socket");
    let mut out = vec![UdpSocket::from_std(first.into())?];
    for _ in 1..count.max(1) {
        let s = reuse_socket(bound, socket2::Type::DGRAM)?;
        out.push(UdpSocket::from_std(s.into())?);
    }
    Ok(out)
}

/// Answers datagrams on `socket` until shutdown.
pub async fn run_udp(socket: UdpSocket, shared: Arc<Shared>, mut shutdown: ShutdownRx) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        let (len, peer) = tokio::select! {
            r = socket.recv_from(&mut buf) => match r {
                Ok(x) => x,
                // ICMP-induced errors (e.g. ECONNREFUSED) are per-peer noise.
                Err(e) => { debug!(error = %e, "udp recv"); continue; }
            },
            _ = shutdown.changed() => return,
        };
        // Transfers never stream over UDP (the planner answers with a
        // single message there).
        if let Response::One(reply) = shared.respond(&buf[..len], Transport::Udp, peer.ip()) {
            if let Err(e) = socket.send_to(&reply, peer).await {
                debug!(error = %e, %peer, "udp send");
            }
        }
    }
}
