//! DNS over TCP per RFC 7766: two-byte length framing, pipelined queries,
//! an idle timeout, a cap on connections and bounded per-connection
//! buffers (a 16 KiB read buffer, at most one 64 KiB message being read,
//! at most `max_pipelined` replies waiting to be written).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;
use tracing::debug;

use super::reuse::reuse_socket;
use super::shutdown::ShutdownRx;
use crate::dnstap::{wall_now, Tap};
use crate::handler::Transport;
use crate::metrics::QueryCounts;
use crate::router::{Response, Router};
use crate::wire::tcp_frame;
use xdpdns_core::dnstap::Protocol;

pub(crate) fn bind_tcp(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let sock = reuse_socket(addr, socket2::Type::STREAM)?;
    sock.set_tcp_nodelay(true)?;
    sock.listen(1024)?;
    TcpListener::from_std(sock.into())
}

pub struct TcpServer {
    pub listener: TcpListener,
    pub max_connections: usize,
    pub idle_timeout: Duration,
    pub max_pipelined: usize,
    pub shutdown_grace: Duration,
}

impl TcpServer {
    /// Accepts until shutdown, then gives open connections `shutdown_grace`
    /// to finish their queries before closing them.
    pub async fn run(self, shared: Arc<Router>, tap: Arc<Tap>, mut shutdown: ShutdownRx) {
        let slots = Arc::new(Semaphore::new(self.max_connections));
        // One block of counters for every connection of this listener.
        let counts = shared.metrics.counts();
        let mut conns = JoinSet::new();
        loop {
            let (stream, peer) = tokio::select! {
                r = self.listener.accept() => match r {
                    Ok(x) => x,
                    Err(e) => { debug!(error = %e, "tcp accept"); continue; }
                },
                Some(_) = conns.join_next(), if !conns.is_empty() => continue,
                _ = shutdown.changed() => break,
            };
            // Over the cap: close at once rather than leave the client
            // waiting in the backlog.
            let tcp = &shared.metrics.tcp;
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                tcp.refused.fetch_add(1, Ordering::Relaxed);
                debug!(%peer, "tcp connection limit reached; closing");
                continue;
            };
            tcp.accepted.fetch_add(1, Ordering::Relaxed);
            let open = OpenConnection::count(&shared);
            let (shared, counts, tap) = (shared.clone(), counts.clone(), tap.clone());
            let shutdown = shutdown.clone();
            let (idle, depth) = (self.idle_timeout, self.max_pipelined);
            conns.spawn(async move {
                let conn = Connection {
                    peer,
                    tap,
                    idle,
                    depth,
                };
                serve_connection(stream, conn, &shared, counts, shutdown).await;
                drop((open, permit));
            });
        }
        drop(self.listener);
        let drained = tokio::time::timeout(self.shutdown_grace, async {
            while conns.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            conns.abort_all();
        }
    }
}

/// One open connection in `xdpdns_tcp_connections`, however its task
/// ends (also when aborted at the stop).
struct OpenConnection(Arc<Router>);

impl OpenConnection {
    fn count(router: &Arc<Router>) -> Self {
        router.metrics.tcp.open.fetch_add(1, Ordering::Relaxed);
        OpenConnection(router.clone())
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.metrics.tcp.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Reads framed queries and answers them in one task: queries that
/// arrived together (pipelined) are read from one buffer and their
/// replies leave in one write once no whole query is left buffered (or
/// `depth` replies are waiting). A client that does not read stops the
/// reading too, until the idle timeout closes the connection.
///
/// One task and no queue between reading and writing: at a few hundred
/// queries per second per connection, a writer task of its own cost a
/// second wake-up (often of another thread) per answer.
async fn serve_connection(
    stream: TcpStream,
    conn: Connection,
    shared: &Router,
    counts: Arc<QueryCounts>,
    mut shutdown: ShutdownRx,
) {
    let Connection {
        peer,
        tap,
        idle,
        depth,
    } = conn;
    let local = stream.local_addr().unwrap_or(peer);
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::with_capacity(READ_BUFFER, rd);
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut waiting = 0;
    loop {
        let read = tokio::select! {
            r = tokio::time::timeout(idle, read_frame(&mut rd, &mut buf)) => r,
            // Stop reading new queries; answered ones still get written.
            _ = shutdown.changed() => break,
        };
        match read {
            Ok(Ok(true)) => {}
            Err(_) => {
                shared
                    .metrics
                    .tcp
                    .idle_closed
                    .fetch_add(1, Ordering::Relaxed);
                break;
            }
            // EOF, a zero-length frame or a truncated one.
            _ => break,
        }
        let read_at = std::time::Instant::now();
        let tapped_at = tap.fallback_on().then(wall_now);
        let response = shared.respond(&buf, Transport::Tcp, peer.ip(), crate::clock::now());
        // A transfer's and an UPDATE's responses are tapped as they go.
        let tapped = tapped_at.is_some_and(|at| {
            let reply = match &response {
                Response::One(r) => Some(r.as_slice()),
                _ => None,
            };
            let mut events = Vec::new();
            let tapped = !matches!(response, Response::Transfer(_))
                && tap.exchange(Protocol::Tcp, peer, local, &buf, at, reply, &mut events);
            tap.flush(&mut events);
            tapped
        });
        match response {
            Response::Drop => {}
            Response::One(reply) => {
                counts.count(Transport::Tcp, &reply);
                counts.answered_in(Transport::Tcp, read_at.elapsed(), 1);
                out.extend_from_slice(&(reply.len() as u16).to_be_bytes());
                out.extend_from_slice(&reply);
                waiting += 1;
            }
            // An UPDATE is answered once durable; the connection's later
            // messages wait for it (they may depend on it).
            Response::Update(pending) => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                let now = crate::clock::unix_secs();
                shared.submit_update(pending, Box::new(move |b| drop(tx.send(b))), now);
                if let Ok(reply) = rx.await {
                    if let (true, Some(at)) = (tapped, tapped_at) {
                        tap.response(Protocol::Tcp, peer, local, at, &reply);
                    }
                    counts.count(Transport::Tcp, &reply);
                    out.extend_from_slice(&(reply.len() as u16).to_be_bytes());
                    out.extend_from_slice(&reply);
                    waiting += 1;
                }
            }
            // A transfer owns the connection until its last message is
            // written; encoding runs off the async threads and a bounded
            // queue holds it to the client's reading speed.
            Response::Transfer(t) => {
                if !flush(&mut wr, &mut out, idle).await {
                    return;
                }
                let (tx, mut rx) = mpsc::channel::<Vec<u8>>(depth);
                let counts = counts.clone();
                let tapping = tapped_at.map(|at| (tap.clone(), at, buf.clone()));
                let job = tokio::task::spawn_blocking(move || {
                    let mut first = true;
                    let mut tapped = false;
                    t.write(&mut |msg| {
                        // One transfer, one answer: counted by its first
                        // message (the question, the RCODE).
                        let is_first = std::mem::take(&mut first);
                        if is_first {
                            counts.count(Transport::Tcp, &msg);
                        }
                        if let Some((tap, at, query)) = &tapping {
                            let p = Protocol::Tcp;
                            if is_first {
                                let mut events = Vec::new();
                                let (q, m) = (query.as_slice(), Some(msg.as_slice()));
                                tapped = tap.exchange(p, peer, local, q, *at, m, &mut events);
                                tap.flush(&mut events);
                            } else if tapped {
                                tap.response(p, peer, local, *at, &msg);
                            }
                        }
                        tx.blocking_send(tcp_frame(&msg)).is_ok()
                    })
                });
                while let Some(mut frame) = rx.recv().await {
                    if !flush(&mut wr, &mut frame, idle).await {
                        drop(rx); // the encoder stops at its next message
                        break;
                    }
                }
                if !matches!(job.await, Ok(true)) {
                    debug!(%peer, "transfer ended early");
                    return;
                }
            }
        }
        if waiting >= depth || !whole_frame_buffered(rd.buffer()) {
            if !flush(&mut wr, &mut out, idle).await {
                return;
            }
            waiting = 0;
        }
    }
    if flush(&mut wr, &mut out, idle).await {
        let _ = wr.shutdown().await;
    }
}

/// What a connection's task is given besides its stream.
struct Connection {
    peer: SocketAddr,
    tap: Arc<Tap>,
    idle: Duration,
    depth: usize,
}

/// Bytes read from a connection at once: many pipelined queries.
const READ_BUFFER: usize = 16 * 1024;

/// Whether `buffered` holds a whole length-prefixed message.
fn whole_frame_buffered(buffered: &[u8]) -> bool {
    buffered.len() >= 2
        && buffered.len() >= 2 + u16::from_be_bytes([buffered[0], buffered[1]]) as usize
}

/// Writes and empties `out`; false when the client is gone or has not
/// taken the bytes within `idle`.
async fn flush(wr: &mut OwnedWriteHalf, out: &mut Vec<u8>, idle: Duration) -> bool {
    if out.is_empty() {
        return true;
    }
    let written = tokio::time::timeout(idle, wr.write_all(out)).await;
    out.clear();
    matches!(written, Ok(Ok(())))
}

/// Reads one length-prefixed message into `buf`. `Ok(false)` for a clean
/// end of stream or a zero-length frame (which cannot be a DNS message).
async fn read_frame(
    rd: &mut (impl AsyncReadExt + Unpin),
    buf: &mut Vec<u8>,
) -> std::io::Result<bool> {
    let mut len = [0u8; 2];
    match rd.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(false),
        Err(e) => return Err(e),
    }
    let len = u16::from_be_bytes(len) as usize;
    if len == 0 {
        return Ok(false);
    }
    buf.resize(len, 0);
    rd.read_exact(buf).await?;
    Ok(true)
}
