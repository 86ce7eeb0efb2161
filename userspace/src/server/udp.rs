//! UDP: one SO_REUSEPORT socket per core, each drained by its own task, so
//! the kernel spreads datagrams across cores without a shared queue. Each
//! task moves datagrams in batches (`mmsg`).

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::Interest;
use tokio::net::UdpSocket;
use tracing::{debug, warn};

use super::mmsg::{RecvBatch, SendBatch};
use super::{reuse_socket, ShutdownRx};
use crate::handler::Transport;
use crate::router::{Response, Router};

/// Socket buffer sizes, in bytes.
#[derive(Clone, Copy, Debug)]
pub struct Buffers {
    pub receive: usize,
    pub send: usize,
}

/// Binds `count` sockets to `addr`; with port 0 the first picks the port.
pub fn bind_udp(addr: SocketAddr, count: usize, buffers: Buffers) -> io::Result<Vec<UdpSocket>> {
    let first = reuse_socket(addr, socket2::Type::DGRAM)?;
    let bound = first.local_addr()?.as_socket().expect("inet socket");
    let mut socks = vec![first];
    for _ in 1..count.max(1) {
        socks.push(reuse_socket(bound, socket2::Type::DGRAM)?);
    }
    let mut out = Vec::with_capacity(socks.len());
    for s in socks {
        set_buffer(&s, libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, buffers.receive)?;
        set_buffer(&s, libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, buffers.send)?;
        // Each datagram then carries the socket's drop count (`mmsg`).
        set_int(&s, libc::SO_RXQ_OVFL, 1)?;
        out.push(UdpSocket::from_std(s.into())?);
    }
    if let Some(s) = out.first() {
        let got = socket2::SockRef::from(s).recv_buffer_size()?;
        if got < buffers.receive {
            warn!(
                wanted = buffers.receive,
                got, "UDP receive buffer capped by net.core.rmem_max (run privileged or raise it)"
            );
        }
    }
    Ok(out)
}

fn set_int(s: &socket2::Socket, option: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: a plain int socket option on a socket we own.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            option,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets a socket buffer past `net.core.[rw]mem_max` when privileged
/// (`force`), else up to it.
fn set_buffer(
    s: &socket2::Socket,
    force: libc::c_int,
    plain: libc::c_int,
    bytes: usize,
) -> io::Result<()> {
    // The kernel doubles the value for its bookkeeping; ask for half.
    let half = (bytes / 2).min(libc::c_int::MAX as usize) as libc::c_int;
    set_int(s, force, half).or_else(|_| set_int(s, plain, half))
}

/// Queries the kernel dropped because a UDP socket's receive queue was
/// full, over every socket, since start (what `SO_RXQ_OVFL` reports).
static RECEIVE_DROPS: AtomicU64 = AtomicU64::new(0);

pub fn udp_receive_drops() -> u64 {
    RECEIVE_DROPS.load(Ordering::Relaxed)
}

/// Least time between two log lines about receive-queue drops.
const DROP_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Batches read before the loop checks for shutdown again (and lets
/// other tasks on this worker run).
const BATCHES_PER_WAKEUP: usize = 8;

/// Answers datagrams on `socket` until shutdown: waits for readiness, then
/// drains the queue a batch at a time.
pub async fn run_udp(socket: UdpSocket, shared: Arc<Router>, mut shutdown: ShutdownRx) {
    let fd = socket.as_raw_fd();
    let mut rx = RecvBatch::default();
    let mut tx = SendBatch::default();
    // This socket's drop count as last seen, and what is not logged yet.
    let (mut seen_drops, mut unlogged, mut logged_at) = (0u32, 0u64, None::<Instant>);
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
            if let Some(d) = rx.drops().filter(|d| *d != seen_drops) {
                let new = u64::from(d.wrapping_sub(seen_drops));
                seen_drops = d;
                RECEIVE_DROPS.fetch_add(new, Ordering::Relaxed);
                unlogged += new;
            }
            if unlogged > 0 && logged_at.is_none_or(|t| t.elapsed() >= DROP_LOG_INTERVAL) {
                warn!(
                    dropped = unlogged,
                    total = udp_receive_drops(),
                    "UDP receive queue full: queries dropped (raise server.udp_receive_buffer or add cores)"
                );
                unlogged = 0;
                logged_at = Some(Instant::now());
            }
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
