//! UDP: one SO_REUSEPORT socket per core, each drained by a thread of its
//! own, so the kernel spreads datagrams across cores without a shared
//! queue. Each thread moves datagrams in batches (`mmsg`). Threads, not
//! tokio tasks: a blocking `recvmmsg` cut server CPU per answer at 30k
//! q/s by a fifth (README, Benchmarks).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, warn};

use super::mmsg::{RecvBatch, SendBatch};
use super::reuse::reuse_socket;
use super::shutdown::ShutdownRx;
use crate::dnstap::{wall_now, Tap};
use crate::handler::Transport;
use crate::router::{Response, Router};
use xdpdns_core::dnstap::Protocol;

/// Socket buffer sizes, in bytes.
#[derive(Clone, Copy, Debug)]
pub struct Buffers {
    pub receive: usize,
    pub send: usize,
}

impl Buffers {
    /// The sizes `server.udp_receive_buffer` and `udp_send_buffer` ask for.
    pub fn of(server: &crate::config::ServerConfig) -> Self {
        Buffers {
            receive: server.udp_receive_buffer,
            send: server.udp_send_buffer,
        }
    }
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
        out.push(UdpSocket::from(s));
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

/// How often a blocking UDP worker looks at the shutdown flag when idle.
const IDLE_CHECK: Duration = Duration::from_millis(200);

/// Answers datagrams on `socket` on a thread of its own, as NSD and Knot
/// do: a blocking `recvmmsg` wakes the thread straight from the socket,
/// with no readiness poll and no task scheduling in between.
///
/// While queries come faster than one per `coalesce`, the thread waits
/// `coalesce` after each batch: the queries that arrive meanwhile cost one
/// wake-up together instead of one each (see [`Coalescer`]).
pub fn spawn_udp_worker(
    socket: UdpSocket,
    shared: Arc<Router>,
    tap: Arc<Tap>,
    shutdown: ShutdownRx,
    name: String,
    coalesce: Duration,
) -> io::Result<std::thread::JoinHandle<()>> {
    let local = socket.local_addr()?;
    socket.set_nonblocking(false)?;
    socket.set_read_timeout(Some(IDLE_CHECK))?;
    let replies = Arc::new(socket.try_clone()?);
    std::thread::Builder::new().name(name).spawn(move || {
        let fd = socket.as_raw_fd();
        let mut rx = RecvBatch::default();
        let mut tx = SendBatch::default();
        let mut drops = DropLog::default();
        let coalescer = Coalescer::new(coalesce);
        let counts = shared.metrics.counts();
        while !*shutdown.borrow() {
            let waiting = Instant::now();
            let received = rx.recv_blocking(fd);
            let read_at = Instant::now();
            let waited = read_at - waiting;
            let n = match received {
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) =>
                {
                    continue
                }
                Err(e) => {
                    debug!(error = %e, "udp recv");
                    continue;
                }
            };
            let now = crate::clock::now();
            // One read of the wall clock per batch, only while tapping.
            let tapped_at = tap.fallback_on().then(wall_now);
            let mut tapped_events = Vec::new();
            let mut answered = 0;
            for (query, peer) in rx.datagrams(n) {
                let response = shared.respond(query, Transport::Udp, peer.ip(), now);
                let tapped = tapped_at.is_some_and(|at| {
                    let reply = match &response {
                        Response::One(r) => Some(r.as_slice()),
                        _ => None,
                    };
                    let events = &mut tapped_events;
                    tap.exchange(Protocol::Udp, peer, local, query, at, reply, events)
                });
                match response {
                    Response::One(reply) => {
                        counts.count(Transport::Udp, &reply);
                        tx.push(reply, peer);
                        answered += 1;
                    }
                    Response::Update(pending) => {
                        // Answered later, from the socket's other handle,
                        // once the change is durable.
                        let out = replies.clone();
                        let (tap, at) = (tap.clone(), tapped_at.unwrap_or_default());
                        let send = move |reply: Vec<u8>| {
                            if tapped {
                                tap.response(Protocol::Udp, peer, local, at, &reply);
                            }
                            drop(out.send_to(&reply, peer));
                        };
                        shared.submit_update(pending, Box::new(send), now.unix_secs);
                    }
                    _ => {}
                }
            }
            send_all_blocking(fd, &mut tx);
            tap.flush(&mut tapped_events);
            // Every answer of a batch is written by one sendmmsg: each
            // waited as long as the batch took.
            counts.answered_in(Transport::Udp, read_at.elapsed(), answered);
            drops.follow(rx.drops());
            if let Some(pause) = coalescer.pause_after(n, waited) {
                std::thread::sleep(pause);
            }
        }
    })
}

/// The floor of any socket server on this host, for benchmarks: each
/// datagram of 12 bytes or more goes back as it came with QR set, through
/// the fallback's own batched, coalescing loop and sockets, with no DNS
/// work at all. The difference between this and the fallback is what
/// answering costs; the rest is the kernel's.
pub fn reflect_udp(socket: UdpSocket, coalesce: Duration) -> io::Result<()> {
    socket.set_nonblocking(false)?;
    let fd = socket.as_raw_fd();
    let mut rx = RecvBatch::default();
    let mut tx = SendBatch::default();
    let coalescer = Coalescer::new(coalesce);
    loop {
        let waiting = Instant::now();
        let n = match rx.recv_blocking(fd) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let waited = waiting.elapsed();
        for (query, peer) in rx.datagrams(n) {
            if query.len() >= 12 {
                let mut reply = query.to_vec();
                reply[2] |= 0x80;
                tx.push(reply, peer);
            }
        }
        send_all_blocking(fd, &mut tx);
        if let Some(pause) = coalescer.pause_after(n, waited) {
            std::thread::sleep(pause);
        }
    }
}

/// Decides when a worker pauses between batches. A pause pays only when
/// at least one query is expected during it: when the last wait for a
/// query was shorter than the pause itself. A full batch means more are
/// queued already. Below that rate nothing waits, so a lone query is
/// never delayed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Coalescer {
    window: Duration,
}

impl Coalescer {
    pub(crate) fn new(window: Duration) -> Self {
        if !window.is_zero() {
            // The kernel may stretch a sleep by the thread's timer slack
            // (50 µs by default); keep it a tenth of the window.
            let slack = (window.as_nanos() / 10).max(1) as libc::c_ulong;
            // SAFETY: PR_SET_TIMERSLACK takes one integer, this thread only.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, slack, 0, 0, 0) };
        }
        Coalescer { window }
    }

    /// The pause after a batch of `received` datagrams that took `waited`
    /// to arrive, if any.
    pub(crate) fn pause_after(&self, received: usize, waited: Duration) -> Option<Duration> {
        let busy = received > 0 && received < super::mmsg::BATCH && waited < self.window;
        busy.then_some(self.window)
    }
}

/// Sends every queued reply; when the socket's buffer is full, waits for
/// room (bounded), then drops what still cannot go.
fn send_all_blocking(fd: std::os::fd::RawFd, tx: &mut SendBatch) {
    while !tx.is_empty() {
        match tx.send(fd) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let mut p = libc::pollfd {
                    fd,
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one pollfd on the stack.
                if unsafe { libc::poll(&mut p, 1, 100) } <= 0 {
                    tx.drop_first();
                }
            }
            Err(e) => {
                debug!(error = %e, "udp send");
                tx.drop_first();
            }
        }
    }
}

/// One socket's receive-queue drops: added to the process total, logged
/// at most every [`DROP_LOG_INTERVAL`].
#[derive(Default)]
struct DropLog {
    seen: u32,
    unlogged: u64,
    logged_at: Option<Instant>,
}

impl DropLog {
    fn follow(&mut self, drops: Option<u32>) {
        if let Some(d) = drops.filter(|d| *d != self.seen) {
            let new = u64::from(d.wrapping_sub(self.seen));
            self.seen = d;
            RECEIVE_DROPS.fetch_add(new, Ordering::Relaxed);
            self.unlogged += new;
        }
        if self.unlogged > 0
            && self
                .logged_at
                .is_none_or(|t| t.elapsed() >= DROP_LOG_INTERVAL)
        {
            warn!(
                dropped = self.unlogged,
                total = udp_receive_drops(),
                "UDP receive queue full: queries dropped (raise server.udp_receive_buffer or add cores)"
            );
            self.unlogged = 0;
            self.logged_at = Some(Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sockets::mmsg::BATCH;

    #[test]
    fn a_pause_only_while_queries_come_faster_than_the_window() {
        let window = Duration::from_micros(100);
        let c = Coalescer::new(window);
        // Queries 30 µs apart: wait, so the next wake-up takes several.
        assert_eq!(c.pause_after(1, Duration::from_micros(30)), Some(window));
        // Queries already queued (no wait at all): keep gathering.
        assert_eq!(c.pause_after(3, Duration::ZERO), Some(window));
        // A lone query after a quiet spell is answered with no delay added.
        assert_eq!(c.pause_after(1, Duration::from_millis(5)), None);
        assert_eq!(c.pause_after(1, window), None);
        // A full batch: more are waiting already.
        assert_eq!(c.pause_after(BATCH, Duration::ZERO), None);
        // Nothing received (timeout, error).
        assert_eq!(c.pause_after(0, Duration::ZERO), None);
        // Off.
        let off = Coalescer::new(Duration::ZERO);
        assert_eq!(off.pause_after(1, Duration::ZERO), None);
    }
}
