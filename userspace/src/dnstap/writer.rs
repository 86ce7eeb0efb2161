//! One writer per target: connects (Unix socket or TCP), does the Frame
//! Streams handshake (READY, ACCEPT, START), writes what the queue
//! holds in batches, and on any failure reconnects after a back-off.
//! When the tap drops its queue (off, or another target), it finishes
//! what is queued and ends with STOP and FINISH.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tracing::{info, warn};
use xdpdns_core::dnstap::backoff::Backoff;
use xdpdns_core::dnstap::frames::{check_accept, control, push_data, take_frame, ControlType};
use xdpdns_core::dnstap::{Event, Origin};

use super::queue::QueueReader;
use super::target::{TapStats, Target};

/// Waits between connection attempts.
const RETRY_MIN: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(10);
/// How long the reader has to answer READY and STOP.
const HANDSHAKE: Duration = Duration::from_secs(5);
/// How long the writer lets messages gather after a write.
const GATHER: Duration = Duration::from_millis(10);
/// Bytes gathered into one write.
const BATCH_BYTES: usize = 64 * 1024;
/// Least time between two log lines about a failing collector.
const LOG_EVERY: Duration = Duration::from_secs(30);

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

async fn connect(target: &Target) -> std::io::Result<Box<dyn Stream>> {
    Ok(match target {
        Target::Unix(path) => Box::new(tokio::net::UnixStream::connect(path).await?),
        Target::Tcp(addr) => {
            let s = tokio::net::TcpStream::connect(addr).await?;
            s.set_nodelay(true)?;
            Box::new(s)
        }
    })
}

/// Reads one control frame within [`HANDSHAKE`].
async fn read_control(
    s: &mut Box<dyn Stream>,
) -> std::io::Result<xdpdns_core::dnstap::frames::Frame> {
    let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidData, e);
    let mut buf = Vec::new();
    let read = async {
        loop {
            if let Some(f) = take_frame(&mut buf).map_err(|e| invalid(e.to_string()))? {
                return Ok(f);
            }
            let mut chunk = [0u8; 512];
            let n = s.read(&mut chunk).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(HANDSHAKE, read)
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
}

async fn handshake(s: &mut Box<dyn Stream>) -> std::io::Result<()> {
    s.write_all(&control(ControlType::Ready, true)).await?;
    let accept = read_control(s).await?;
    check_accept(&accept)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
    s.write_all(&control(ControlType::Start, true)).await?;
    s.flush().await
}

/// How a connection ended.
enum End {
    /// The queue is gone: the tap no longer writes here.
    Closed,
    Failed(std::io::Error),
}

async fn stream_events(
    s: &mut Box<dyn Stream>,
    rx: &mut QueueReader,
    origin: &Origin,
    stats: &TapStats,
) -> End {
    let mut buf = Vec::with_capacity(BATCH_BYTES);
    loop {
        let Some(first) = rx.recv().await else {
            return End::Closed;
        };
        buf.clear();
        let mut count = 0;
        let mut add = |events: Vec<Event>, buf: &mut Vec<u8>| {
            for e in events {
                push_data(buf, &e.encode(origin));
                count += 1;
            }
        };
        add(first, &mut buf);
        while buf.len() < BATCH_BYTES {
            match rx.try_recv() {
                Some(more) => add(more, &mut buf),
                None => break,
            }
        }
        if let Err(e) = s.write_all(&buf).await {
            stats.dropped_write.fetch_add(count, Ordering::Relaxed);
            return End::Failed(e);
        }
        stats.written.fetch_add(count, Ordering::Relaxed);
        // What arrives meanwhile waits for the next write: one wake-up
        // and one write per GATHER under load, not one per batch.
        if buf.len() < BATCH_BYTES {
            tokio::time::sleep(GATHER).await;
        }
    }
}

/// Runs until the tap drops the queue.
pub(super) async fn run(mut rx: QueueReader, target: Target, origin: Origin, stats: Arc<TapStats>) {
    let mut backoff = Backoff::new(RETRY_MIN, RETRY_MAX);
    let mut logged: Option<Instant> = None;
    let mut fail = |why: String, backoff: &mut Backoff| {
        if logged.is_none_or(|t| t.elapsed() >= LOG_EVERY) {
            warn!(%target, "dnstap: {why}; retrying (messages meanwhile are queued, then dropped and counted)");
            logged = Some(Instant::now());
        }
        backoff.failed(Instant::now())
    };
    loop {
        if rx.finished() {
            return;
        }
        let attempt = async {
            let mut s = connect(&target).await?;
            handshake(&mut s).await?;
            Ok::<_, std::io::Error>(s)
        };
        let mut s = match attempt.await {
            Ok(s) => s,
            Err(e) => {
                let at = fail(format!("cannot reach the collector: {e}"), &mut backoff);
                tokio::time::sleep_until(at.into()).await;
                continue;
            }
        };
        backoff.reset();
        stats.connected.store(true, Ordering::Relaxed);
        info!(%target, "dnstap: collector connected");
        let end = stream_events(&mut s, &mut rx, &origin, &stats).await;
        stats.connected.store(false, Ordering::Relaxed);
        match end {
            End::Closed => {
                // The reader answers STOP with FINISH; not waited for long.
                if s.write_all(&control(ControlType::Stop, false))
                    .await
                    .is_ok()
                {
                    let _ = read_control(&mut s).await;
                }
                return;
            }
            End::Failed(e) => {
                let at = fail(format!("the collector connection broke: {e}"), &mut backoff);
                tokio::time::sleep_until(at.into()).await;
            }
        }
    }
}
