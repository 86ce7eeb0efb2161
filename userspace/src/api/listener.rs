//! The API's accept loop: HTTP/1 (hyper) with a header-read timeout, a
//! cap on open connections in all and per client address, and a graceful
//! stop. A connection over its address's cap gets one `503` in the API's
//! JSON form and is closed at once. When the total cap is reached, the
//! oldest connection that has not yet sent a whole request makes room
//! for the new one: slow or idle clients, from however many addresses,
//! can neither pile up file descriptors (which DNS over TCP shares) nor
//! keep a client that sends its request out.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;
use tracing::debug;

/// How long a stop waits for requests in flight.
const STOP_GRACE: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub max_connections_per_address: usize,
    /// From a connection's start (or the end of its last response) to the
    /// end of the next request's headers.
    pub header_timeout: Duration,
}

/// Open connections, in all and per client address.
#[derive(Default)]
struct Open {
    total: usize,
    by_address: HashMap<IpAddr, usize>,
    /// Connections that have not sent a whole request yet, oldest first,
    /// each with the way to close it.
    unproven: BTreeMap<u64, oneshot::Sender<()>>,
    next_id: u64,
}

/// One open connection's place; given back when dropped.
struct Slot {
    open: Arc<Mutex<Open>>,
    address: IpAddr,
    id: u64,
}

impl Slot {
    /// A place for a connection from `address`, and what closes it if it
    /// is evicted before its first request. At the total cap, the oldest
    /// connection without a request is evicted to make room.
    fn take(
        open: &Arc<Mutex<Open>>,
        address: IpAddr,
        limits: &ConnectionLimits,
    ) -> Option<(Slot, oneshot::Receiver<()>)> {
        let mut o = open.lock().expect("never held across a panic");
        let here = o.by_address.get(&address).copied().unwrap_or(0);
        if here >= limits.max_connections_per_address {
            return None;
        }
        if o.total >= limits.max_connections {
            let (_, evict) = o.unproven.pop_first()?;
            let _ = evict.send(());
        }
        o.total += 1;
        *o.by_address.entry(address).or_default() += 1;
        o.next_id += 1;
        let id = o.next_id;
        let (tx, rx) = oneshot::channel();
        o.unproven.insert(id, tx);
        let slot = Slot {
            open: open.clone(),
            address,
            id,
        };
        Some((slot, rx))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut o = self.open.lock().expect("never held across a panic");
        o.unproven.remove(&self.id);
        o.total -= 1;
        if let Some(n) = o.by_address.get_mut(&self.address) {
            *n -= 1;
            if *n == 0 {
                o.by_address.remove(&self.address);
            }
        }
    }
}

/// The answer to a connection over a cap: written with one non-blocking
/// send (a fresh socket's buffer takes it whole), then the socket closes.
const OVER_CAP: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/json\r\nconnection: close\r\nretry-after: 1\r\ncontent-length: 103\r\n\r\n\
{\"error\":\"too many open API connections (registry.limits.max_connections[_per_address])\",\"field\":null}\n";

fn refuse(stream: TcpStream, peer: SocketAddr) {
    debug!(%peer, "API connection limit reached; refused");
    let _ = stream.try_write(OVER_CAP);
}

/// Serves `app` on `listener` until `stop` flips, then lets requests in
/// flight finish (at most [`STOP_GRACE`]).
pub(super) async fn serve(
    listener: TcpListener,
    app: axum::Router,
    limits: ConnectionLimits,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let open = Arc::new(Mutex::new(Open::default()));
    let mut conns = JoinSet::new();
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // Out of file descriptors, or a connection reset while
                    // queued: wait a little rather than spin.
                    debug!(error = %e, "API accept");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
            _ = stopped(&mut stop) => break,
        };
        let Some((slot, evicted)) = Slot::take(&open, peer.ip(), &limits) else {
            refuse(stream, peer);
            continue;
        };
        let service = Proven {
            inner: TowerToHyperService::new(app.clone()),
            open: open.clone(),
            id: slot.id,
        };
        let mut stop = stop.clone();
        conns.spawn(async move {
            let _slot = slot;
            let conn = http1::Builder::new()
                // A reply is small: headers and body copied into one
                // buffer and sent with one `write`.
                .writev(false)
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                // Room for a newer connection: this one sent no request.
                Ok(()) = evicted => debug!(%peer, "API connection without a request closed to make room"),
                _ = stopped(&mut stop) => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(STOP_GRACE, conn).await;
                }
            }
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(STOP_GRACE, async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    Ok(())
}

/// The API service, marking its connection as having sent a request
/// (no longer evicted to make room) when the first one arrives.
struct Proven<S> {
    inner: S,
    open: Arc<Mutex<Open>>,
    id: u64,
}

impl<S: hyper::service::Service<R>, R> hyper::service::Service<R> for Proven<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn call(&self, req: R) -> Self::Future {
        let mut o = self.open.lock().expect("never held across a panic");
        o.unproven.remove(&self.id);
        drop(o);
        self.inner.call(req)
    }
}

async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_one_well_formed_json_response() {
        let text = std::str::from_utf8(OVER_CAP).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(body.len(), len);
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert!(v["error"].as_str().unwrap().contains("max_connections"));
    }

    /// Whether the server closes `stream` within `within` (reading what it
    /// sends meanwhile).
    async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 1024];
        tokio::time::timeout(within, async {
            loop {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        })
        .await
        .is_ok()
    }

    #[tokio::test]
    async fn silent_and_slow_clients_are_cut_off_at_the_header_timeout() {
        use tokio::io::AsyncWriteExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let limits = ConnectionLimits {
            max_connections: 8,
            max_connections_per_address: 8,
            header_timeout: Duration::from_millis(300),
        };
        let app = axum::Router::new().route("/", axum::routing::get(|| async { "ok" }));
        let (_stop_tx, stop) = watch::channel(false);
        tokio::spawn(serve(listener, app, limits, stop));

        let mut silent = TcpStream::connect(addr).await.unwrap();
        assert!(
            closed_within(&mut silent, Duration::from_secs(3)).await,
            "silent client kept"
        );

        // One header byte every 100 ms, never finishing: cut off at the
        // header timeout though bytes keep coming.
        let slow = TcpStream::connect(addr).await.unwrap();
        let (mut rd, mut wr) = slow.into_split();
        let drip = tokio::spawn(async move {
            for _ in 0..100 {
                if wr.write_all(b"x").await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        let started = std::time::Instant::now();
        let mut buf = [0u8; 1024];
        let eof = tokio::time::timeout(Duration::from_secs(3), async {
            use tokio::io::AsyncReadExt;
            loop {
                match rd.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        })
        .await;
        drip.abort();
        assert!(eof.is_ok(), "a client dripping header bytes was kept");
        assert!(started.elapsed() >= Duration::from_millis(250));

        // A prompt client is served.
        let mut ok = TcpStream::connect(addr).await.unwrap();
        ok.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut reply = Vec::new();
        use tokio::io::AsyncReadExt;
        ok.read_to_end(&mut reply).await.unwrap();
        assert!(
            reply.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&reply)
        );
    }

    #[test]
    fn slots_are_counted_in_all_and_per_address_and_given_back() {
        let limits = ConnectionLimits {
            max_connections: 3,
            max_connections_per_address: 2,
            header_timeout: Duration::from_secs(1),
        };
        let open = Arc::new(Mutex::new(Open::default()));
        let (a, b, c): (IpAddr, IpAddr, IpAddr) = (
            "127.0.0.1".parse().unwrap(),
            "127.0.0.2".parse().unwrap(),
            "127.0.0.3".parse().unwrap(),
        );
        let (a1, mut a1_evicted) = Slot::take(&open, a, &limits).unwrap();
        let (a2, _a2_evicted) = Slot::take(&open, a, &limits).unwrap();
        assert!(Slot::take(&open, a, &limits).is_none(), "per address");
        let (b1, _b1_evicted) = Slot::take(&open, b, &limits).unwrap();
        // At the cap, the oldest connection without a request makes room.
        let (c1, _c1_evicted) = Slot::take(&open, c, &limits).expect("room made");
        assert!(a1_evicted.try_recv().is_ok(), "the oldest is told to close");
        drop(a1);
        assert_eq!(open.lock().unwrap().total, 3);
        // Connections that sent a request are never evicted.
        for id in [a2.id, b1.id, c1.id] {
            open.lock().unwrap().unproven.remove(&id);
        }
        assert!(Slot::take(&open, c, &limits).is_none(), "in all");
        drop(b1);
        let again = Slot::take(&open, c, &limits);
        assert!(again.is_some(), "given back");
        assert_eq!(open.lock().unwrap().total, 3);
    }

    /// Connects from `source` (any 127.0.0.0/8 address is this host's).
    async fn connect_from(source: std::net::Ipv4Addr, to: SocketAddr) -> TcpStream {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind((source, 0).into()).unwrap();
        socket.connect(to).await.unwrap()
    }

    #[tokio::test]
    async fn slow_clients_from_many_addresses_make_room_for_a_request() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let limits = ConnectionLimits {
            max_connections: 64,
            max_connections_per_address: 8,
            header_timeout: Duration::from_secs(30),
        };
        let app = axum::Router::new().route("/", axum::routing::get(|| async { "ok" }));
        let (_stop_tx, stop) = watch::channel(false);
        tokio::spawn(serve(listener, app, limits, stop));
        // 160 connections from 20 addresses, each with half a request:
        // more than the total cap, none over its address's.
        let mut slow = Vec::new();
        for a in 1..=20u8 {
            for _ in 0..8 {
                let mut s = connect_from([127, 0, 1, a].into(), addr).await;
                s.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
                slow.push(s);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = std::time::Instant::now();
        let mut client = connect_from([127, 0, 2, 1].into(), addr).await;
        client
            .write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut reply = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut reply))
            .await
            .expect("answered")
            .unwrap();
        let reply = String::from_utf8_lossy(&reply);
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        assert!(started.elapsed() < Duration::from_secs(5));
        // The slow ones that made room were closed: at most the cap stay.
        let mut open_now = 0;
        for s in &mut slow {
            let mut b = [0u8; 1];
            let closed = matches!(
                tokio::time::timeout(Duration::from_millis(5), s.read(&mut b)).await,
                Ok(Ok(0)) | Ok(Err(_))
            );
            open_now += usize::from(!closed);
        }
        assert!(open_now < 64, "{open_now} slow connections still open");
    }
}
