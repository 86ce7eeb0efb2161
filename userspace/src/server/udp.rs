//! UDP: one SO_REUSEPORT socket per core, each drained by its own task, so
//! the kernel spreads datagrams across cores without a shared queue. Each
//! task moves datagrams in batches (`mmsg`).

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use tokio::io::Interest;
use tokio::net::UdpSocket;
use tracing::debug;

use super::mmsg::{RecvBatch, SendBatch};
use super::{reuse_socket, ShutdownRx};
use crate::handler::Transport;
use crate::router::{Response, Router};

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

/// Batches read before the loop checks for shutdown again (and lets
/// other tasks on this worker run).
const BATCHES_PER_WAKEUP: usize = 8;

/// Answers datagrams on `socket` until shutdown: waits for readiness, then
/// drains the queue a batch at a time.
pub async fn run_udp(socket: UdpSocket, shared: Arc<Router>, mut shutdown: ShutdownRx) {
    let fd = socket.as_raw_fd();
    let mut rx = RecvBatch::default();
    let mut tx = SendBatch::default();
    loop {
        tokio::select! {
            r = socket.readable() => if let Err(e) = r {
                debug!(error = %e, "udp readiness");
                continue;
            },
            _ = shutdown.changed() => return,
        }
        for _ in 0..BATCHES_PER_WAKEUP {
            let n = match socket.try_io(Interest::READABLE, || rx.recv(fd)) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // ICMP-induced errors (e.g. ECONNREFUSED) are per-peer noise.
                Err(e) => {
                    debug!(error = %e, "udp recv");
                    continue;
                }
            };
            // One clock read per batch (TSIG is the only reader).
            let now = crate::clock::unix_secs();
            for (query, peer) in rx.datagrams(n) {
                // Transfers never stream over UDP (the planner answers with
                // a single message there).
                if let Response::One(reply) = shared.respond(query, Transport::Udp, peer.ip(), now)
                {
                    tx.push(reply, peer);
                }
            }
            send_all(&socket, &mut tx).await;
        }
    }
}

/// Sends every queued reply, waiting for the socket when its buffer is full.
async fn send_all(socket: &UdpSocket, tx: &mut SendBatch) {
    let fd = socket.as_raw_fd();
    while !tx.is_empty() {
        match socket.try_io(Interest::WRITABLE, || tx.send(fd)) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if let Err(e) = socket.writable().await {
                    debug!(error = %e, "udp writability");
                    tx.drop_first();
                }
            }
            // The oldest reply cannot be sent (e.g. no route to its peer).
            Err(e) => {
                debug!(error = %e, "udp send");
                tx.drop_first();
            }
        }
    }
}
