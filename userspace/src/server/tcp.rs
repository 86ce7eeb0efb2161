//! DNS over TCP per RFC 7766: two-byte length framing, pipelined queries,
//! an idle timeout, a cap on connections and bounded per-connection
//! buffers (at most one 64 KiB message being read and a bounded queue of
//! replies being written).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;
use tracing::debug;

use super::{reuse_socket, ShutdownRx};
use crate::handler::Transport;
use crate::metrics::QueryCounts;
use crate::router::{Response, Router};
use crate::wire::tcp_frame;

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
    pub async fn run(self, shared: Arc<Router>, mut shutdown: ShutdownRx) {
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
            let (shared, counts) = (shared.clone(), counts.clone());
            let shutdown = shutdown.clone();
            let (idle, depth) = (self.idle_timeout, self.max_pipelined);
            conns.spawn(async move {
                serve_connection(stream, peer, &shared, counts, shutdown, idle, depth).await;
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

/// Reads framed queries and answers each as soon as it is read, so a
/// client may pipeline as many as it likes; replies go out through a
/// bounded queue, which stops reading while the client is not reading.
async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    shared: &Router,
    counts: Arc<QueryCounts>,
    mut shutdown: ShutdownRx,
    idle: Duration,
    depth: usize,
) {
    let (mut rd, mut wr) = stream.into_split();
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(depth);
    let writer = tokio::spawn(async move {
        while let Some(frame) = rx.recv().await {
            if wr.write_all(&frame).await.is_err() {
                return;
            }
        }
        let _ = wr.shutdown().await;
    });
    let mut buf = Vec::new();
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
        match shared.respond(&buf, Transport::Tcp, peer.ip(), crate::clock::unix_secs()) {
            Response::Drop => {}
            Response::One(reply) => {
                counts.count(Transport::Tcp, &reply);
                counts.answered_in(Transport::Tcp, read_at.elapsed(), 1);
                if tx.send(tcp_frame(&reply)).await.is_err() {
                    break;
                }
            }
            // A transfer owns the connection until its last message is
            // queued; encoding runs off the async threads and the bounded
            // queue holds it to the client's reading speed.
            Response::Transfer(t) => {
                let (tx, counts) = (tx.clone(), counts.clone());
                let job = tokio::task::spawn_blocking(move || {
                    let mut first = true;
                    t.write(&mut |msg| {
                        // One transfer, one answer: counted by its first
                        // message (the question, the RCODE).
                        if std::mem::take(&mut first) {
                            counts.count(Transport::Tcp, &msg);
                        }
                        tx.blocking_send(tcp_frame(&msg)).is_ok()
                    })
                });
                if !matches!(job.await, Ok(true)) {
                    debug!(%peer, "transfer ended early");
                    break;
                }
            }
        }
    }
    drop(tx);
    let _ = writer.await;
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
