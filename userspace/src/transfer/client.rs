//! The client side of transfers: SOA queries, NOTIFY and AXFR/IXFR
//! requests to other servers, optionally TSIG-signed. Thin tokio shells
//! around hickory-proto messages; the transfer parsing is in
//! [`super::xfr_reader::XfrReader`].

use std::net::SocketAddr;
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, Record, RecordType, TSigVerifier};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

use super::tsig::TSigner;
use super::xfr_reader::{XfrError, XfrOutcome, XfrReader};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}: timed out")]
    Timeout(SocketAddr),
    #[error("{0}: {1}")]
    Io(SocketAddr, #[source] std::io::Error),
    #[error("{0}: reply does not decode: {1}")]
    Decode(
        SocketAddr,
        #[source] hickory_proto::serialize::binary::DecodeError,
    ),
    #[error("{0}: malformed reply: {1}")]
    Malformed(SocketAddr, &'static str),
    #[error("{0}: TSIG of the reply does not verify: {1}")]
    Tsig(
        SocketAddr,
        #[source] Box<dyn std::error::Error + Send + Sync>,
    ),
    #[error("{0}: answered {1}")]
    Rcode(SocketAddr, ResponseCode),
    #[error("{0}: {1}")]
    Transfer(SocketAddr, #[source] XfrError),
    #[error("{0}: the transferred zone is unusable: {1}")]
    Zone(SocketAddr, #[source] crate::zone::ZoneError),
    #[error("{0}: the transferred diff does not apply: {1}")]
    Store(SocketAddr, #[source] crate::zone::store::StoreError),
}

/// Builds and (with a key) signs a request; returns its bytes and the
/// verifier for the reply.
fn request(
    op: OpCode,
    zone: &Name,
    qtype: RecordType,
    authority: Option<Record>,
    key: Option<&TSigner>,
) -> (Message, Vec<u8>, Option<TSigVerifier>) {
    let mut m = Message::new(rand_id(), MessageType::Query, op);
    m.add_query(Query::query(zone.clone(), qtype));
    if op == OpCode::Notify {
        m.metadata.authoritative = true;
    }
    if let Some(a) = authority {
        if op == OpCode::Notify {
            m.add_answer(a);
        } else {
            m.add_authority(a);
        }
    }
    let verifier = key.and_then(|k| m.finalize(k, crate::clock::unix_secs()).ok().flatten());
    let bytes = m.to_vec().expect("a request always encodes");
    (m, bytes, verifier)
}

/// A message ID nobody can predict: std's hasher keys are random.
fn rand_id() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish() as u16
}

/// Sends one UDP request and waits for the reply with the same ID.
async fn udp_exchange(
    server: SocketAddr,
    req: &Message,
    bytes: &[u8],
    verifier: Option<&mut TSigVerifier>,
    timeout: Duration,
) -> Result<Message, ClientError> {
    let bind: SocketAddr = if server.is_ipv4() {
        "0.0.0.0:0".parse().expect("addr")
    } else {
        "[::]:0".parse().expect("addr")
    };
    let io = |e| ClientError::Io(server, e);
    let sock = UdpSocket::bind(bind).await.map_err(io)?;
    sock.connect(server).await.map_err(io)?;
    sock.send(bytes).await.map_err(io)?;
    let mut buf = vec![0u8; 65_535];
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let n = tokio::time::timeout_at(deadline, sock.recv(&mut buf))
            .await
            .map_err(|_| ClientError::Timeout(server))?
            .map_err(io)?;
        let Ok(reply) = Message::from_vec(&buf[..n]) else {
            continue;
        };
        if reply.id != req.id || reply.message_type != MessageType::Response {
            continue; // not ours: keep waiting
        }
        if let Some(v) = verifier {
            v.verify(&buf[..n])
                .map_err(|e| ClientError::Tsig(server, e.into()))?;
        }
        return Ok(reply);
    }
}

/// Sends one request over TCP and returns the (verified) reply.
async fn tcp_exchange(
    server: SocketAddr,
    req: &Message,
    bytes: &[u8],
    verifier: Option<&mut TSigVerifier>,
    timeout: Duration,
) -> Result<Message, ClientError> {
    let raw = relay(server, bytes, timeout).await?;
    let reply = Message::from_vec(&raw).map_err(|e| ClientError::Decode(server, e))?;
    if reply.id != req.id {
        return Err(ClientError::Malformed(server, "reply ID does not match"));
    }
    if let Some(v) = verifier {
        v.verify(&raw)
            .map_err(|e| ClientError::Tsig(server, e.into()))?;
    }
    Ok(reply)
}

/// The serial `server` serves for `zone`.
pub async fn soa_serial(
    server: SocketAddr,
    zone: &Name,
    key: Option<&TSigner>,
    timeout: Duration,
) -> Result<u32, ClientError> {
    let (req, bytes, mut v) = request(OpCode::Query, zone, RecordType::SOA, None, key);
    let mut reply = udp_exchange(server, &req, &bytes, v.as_mut(), timeout).await?;
    // Knot refuses queries for catalog zones over UDP but answers over
    // TCP, where a truncated answer has to be asked again too.
    if reply.metadata.truncation || reply.response_code == ResponseCode::Refused {
        let (req, bytes, mut v) = request(OpCode::Query, zone, RecordType::SOA, None, key);
        reply = tcp_exchange(server, &req, &bytes, v.as_mut(), timeout).await?;
    }
    if reply.response_code != ResponseCode::NoError {
        return Err(ClientError::Rcode(server, reply.response_code));
    }
    reply
        .answers
        .iter()
        .find_map(|r| match &r.data {
            RData::SOA(soa) if r.name == *zone => Some(soa.serial),
            _ => None,
        })
        .ok_or(ClientError::Malformed(server, "no SOA in the answer"))
}

/// The key tags of the DS records `server` serves for `zone` (a parent
/// asked during a KSK rollover); none when it has none.
pub async fn ds_tags(
    server: SocketAddr,
    zone: &Name,
    timeout: Duration,
) -> Result<Vec<u16>, ClientError> {
    let (req, bytes, mut v) = request(OpCode::Query, zone, RecordType::DS, None, None);
    let mut reply = udp_exchange(server, &req, &bytes, v.as_mut(), timeout).await?;
    if reply.metadata.truncation {
        let (req, bytes, mut v) = request(OpCode::Query, zone, RecordType::DS, None, None);
        reply = tcp_exchange(server, &req, &bytes, v.as_mut(), timeout).await?;
    }
    if reply.response_code != ResponseCode::NoError {
        return Err(ClientError::Rcode(server, reply.response_code));
    }
    Ok(reply
        .answers
        .iter()
        .filter(|r| r.name == *zone)
        .filter_map(|r| match &r.data {
            RData::DNSSEC(hickory_proto::dnssec::rdata::DNSSECRData::DS(ds)) => Some(ds.key_tag()),
            _ => None,
        })
        .collect())
}

/// Sends NOTIFY for `zone` at `serial` (RFC 1996) and waits for the ack.
pub async fn notify(
    server: SocketAddr,
    zone: &Name,
    soa: Option<Record>,
    key: Option<&TSigner>,
    timeout: Duration,
) -> Result<(), ClientError> {
    let (req, bytes, mut v) = request(OpCode::Notify, zone, RecordType::SOA, soa, key);
    let reply = udp_exchange(server, &req, &bytes, v.as_mut(), timeout).await?;
    if reply.op_code != OpCode::Notify {
        return Err(ClientError::Malformed(server, "reply is not a NOTIFY"));
    }
    match reply.response_code {
        ResponseCode::NoError => Ok(()),
        rcode => Err(ClientError::Rcode(server, rcode)),
    }
}

/// Sends `message` as it is to `server` over TCP and returns the reply
/// with its ID, as it is (an UPDATE forwarded to a primary, RFC 2136 §6:
/// its TSIG, made for the primary, stays valid both ways).
pub async fn relay(
    server: SocketAddr,
    message: &[u8],
    timeout: Duration,
) -> Result<Vec<u8>, ClientError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let io = |e| ClientError::Io(server, e);
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(server).await.map_err(io)?;
        let mut framed = (message.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(message);
        s.write_all(&framed).await.map_err(io)?;
        loop {
            let mut len = [0u8; 2];
            s.read_exact(&mut len).await.map_err(io)?;
            let mut reply = vec![0u8; u16::from_be_bytes(len) as usize];
            s.read_exact(&mut reply).await.map_err(io)?;
            if reply.len() >= 12 && reply[..2] == message[..2] && reply[2] & 0x80 != 0 {
                return Ok(reply);
            }
        }
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| ClientError::Timeout(server))?
}

/// What to ask a primary for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XfrKind {
    Axfr,
    /// IXFR from the serial we have (`our_soa` is our current SOA record).
    Ixfr,
}

/// Runs one AXFR or IXFR over TCP and returns what it carried.
pub async fn transfer(
    server: SocketAddr,
    zone: &Name,
    kind: XfrKind,
    our_soa: Option<Record>,
    key: Option<&TSigner>,
    timeout: Duration,
    max_records: usize,
) -> Result<XfrOutcome, ClientError> {
    let io = |e| ClientError::Io(server, e);
    let (qtype, authority) = match (kind, &our_soa) {
        (XfrKind::Ixfr, Some(soa)) => (RecordType::IXFR, Some(soa.clone())),
        _ => (RecordType::AXFR, None),
    };
    let (req, bytes, mut verifier) = request(OpCode::Query, zone, qtype, authority, key);
    let work = async {
        let mut tcp = TcpStream::connect(server).await.map_err(io)?;
        tcp.write_all(&crate::wire::tcp_frame(&bytes))
            .await
            .map_err(io)?;
        let ours = our_soa.as_ref().and_then(|r| match &r.data {
            RData::SOA(s) => Some(s.serial),
            _ => None,
        });
        let mut reader = XfrReader::new(zone.clone(), ours).with_max_records(max_records);
        let mut buf = Vec::new();
        loop {
            let mut len = [0u8; 2];
            tcp.read_exact(&mut len).await.map_err(io)?;
            buf.resize(u16::from_be_bytes(len) as usize, 0);
            tcp.read_exact(&mut buf).await.map_err(io)?;
            let msg = Message::from_vec(&buf).map_err(|e| ClientError::Decode(server, e))?;
            if msg.id != req.id {
                return Err(ClientError::Malformed(server, "reply ID does not match"));
            }
            if let Some(v) = verifier.as_mut() {
                v.verify(&buf)
                    .map_err(|e| ClientError::Tsig(server, e.into()))?;
            }
            if msg.response_code != ResponseCode::NoError {
                return Err(ClientError::Rcode(server, msg.response_code));
            }
            for r in msg.answers {
                reader
                    .push(r)
                    .map_err(|e| ClientError::Transfer(server, e))?;
            }
            if let Some(outcome) = reader.finished() {
                return Ok(outcome);
            }
        }
    };
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| ClientError::Timeout(server))?
}
