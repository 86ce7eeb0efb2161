//! The request router, socket-free: plain queries go straight to the
//! [`Handler`]; signed requests, transfers and NOTIFY go through TSIG
//! verification, the transfer ACLs and the transfer planner first.
//! Accepted NOTIFYs go to a [`NotifySink`]; transfers come back as a
//! [`Transfer`] the socket shell writes message by message.

use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use hickory_proto::op::{OpCode, ResponseCode};
use hickory_proto::rr::{LowerName, Name, RecordType};
use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::metrics::Metrics;
use crate::rrl::Limiter;

mod log_limit;
mod update;

use log_limit::LogLimit;
pub use update::{PendingUpdate, UpdateSink};

use xdpdns_common::rrl::Verdict;

use crate::answers::hot;
use crate::answers::AnswerTable;
use crate::handler::{Handler, Transport};
use crate::metrics::zones;
use crate::transfer::outbound::{self, Plan};
use crate::transfer::tsig::{self, ReplySigner};
use crate::transfer::{IxfrSource, NoHistory, TransferPolicy};
use crate::wire::{self, Rejected, Reply, Request};
use crate::zone::ZoneReader;

/// The request router: what every socket task hands each message to.
/// No sockets here: `respond` takes bytes, the transport, the peer and
/// the time, and says what to send back. Reads are one atomic load each.
/// It reads the zones and never commits: `serve` owns the store.
pub struct Router {
    pub zones: ZoneReader,
    pub handler: ArcSwap<Handler>,
    pub transfer: ArcSwap<TransferPolicy>,
    /// Where IXFR finds each zone's history (the IXFR journal).
    pub history: Arc<dyn IxfrSource>,
    /// Compiled A/AAAA answers, kept in step with the zones by the kernel
    /// table's subscriber, or [`crate::answers::follow`] without XDP; empty
    /// (and unused) until then.
    pub hot: Arc<AnswerTable>,
    /// Query counters, one block per answering thread (`/metrics`).
    pub metrics: Arc<Metrics>,
    /// Where accepted NOTIFYs for secondary zones go (set once the
    /// secondary zones run).
    pub notify_sink: OnceLock<Box<dyn NotifySink>>,
    /// Where admitted UPDATEs go (set by `serve`, which owns the commit
    /// path); without one they are REFUSED.
    pub update_sink: OnceLock<Box<dyn UpdateSink>>,
    /// Response rate limiting of UDP answers (`[rrl] enabled`).
    pub rrl: OnceLock<Limiter>,
    /// Per-packet log lines (refusals, bad signatures), rate-limited.
    log_limit: LogLimit,
    /// Outgoing transfers being written.
    transfers_out: Arc<AtomicUsize>,
}

/// The time a message is answered at, as the shells read it: unix
/// seconds (TSIG, cookies, transfers) and a coarse monotonic clock in
/// milliseconds (response rate limiting).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Now {
    pub unix_secs: u64,
    pub monotonic_ms: u32,
}

/// Unix seconds alone (tests and benches): the monotonic clock is the
/// same time in milliseconds.
impl From<u64> for Now {
    fn from(unix_secs: u64) -> Now {
        Now {
            unix_secs,
            monotonic_ms: unix_secs.wrapping_mul(1000) as u32,
        }
    }
}

impl Router {
    /// Serves the zones `zones` reads with `handler`, transfers to
    /// loopback only and no IXFR history (tests and benches).
    pub fn new(zones: ZoneReader, handler: Handler) -> Router {
        Router {
            zones,
            handler: ArcSwap::from_pointee(handler),
            transfer: ArcSwap::from_pointee(TransferPolicy::loopback_only()),
            history: Arc::new(NoHistory),
            hot: Arc::default(),
            metrics: Arc::default(),
            notify_sink: OnceLock::new(),
            update_sink: OnceLock::new(),
            rrl: OnceLock::new(),
            log_limit: LogLimit::default(),
            transfers_out: Arc::default(),
        }
    }
    /// The same router answering IXFR from `history` (the journal).
    pub fn with_history(mut self, history: Arc<dyn IxfrSource>) -> Router {
        self.history = history;
        self
    }
}

/// Where an accepted NOTIFY for a secondary zone goes (the secondary
/// zones' refresh tasks; a fake in tests).
pub trait NotifySink: Send + Sync {
    fn notified(&self, zone: &Name);
}

impl NotifySink for mpsc::UnboundedSender<Name> {
    fn notified(&self, zone: &Name) {
        let _ = self.send(zone.clone());
    }
}

/// Whether a reply may go to `peer`: not unspecified, broadcast or
/// multicast (the same rule as the kernel path; the kernel's IP layer
/// already drops most of these as martians).
fn replyable(peer: IpAddr) -> bool {
    match peer {
        IpAddr::V4(a) => a.octets()[0] != 0 && a.octets()[0] < 224,
        IpAddr::V6(a) => !a.is_unspecified() && !a.is_multicast(),
    }
}

/// What to send back for one message.
pub enum Response {
    /// Nothing (garbage, or a response packet).
    Drop,
    One(Vec<u8>),
    /// A zone transfer: many messages, written by [`Transfer::write`].
    Transfer(Box<Transfer>),
    /// An UPDATE to apply, answered once durable: the shell hands it to
    /// [`Router::submit_update`] with a way to send the reply.
    Update(Box<PendingUpdate>),
}

pub struct Transfer {
    plan: Plan,
    req: Request,
    signer: Option<ReplySigner>,
    now: u64,
    _slot: OutgoingSlot,
}

/// One of `max_transfers_out` places, held while a transfer is written.
struct OutgoingSlot(Arc<AtomicUsize>);

impl OutgoingSlot {
    fn take(count: &Arc<AtomicUsize>, max: usize) -> Option<OutgoingSlot> {
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| OutgoingSlot(count.clone()))
    }
}

impl Drop for OutgoingSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Transfer {
    /// Writes every message to `sink` (which returns false to stop);
    /// true when the whole transfer was written.
    pub fn write(mut self, sink: &mut dyn FnMut(Vec<u8>) -> bool) -> bool {
        let now = self.now;
        let mut signed = |msg: Vec<u8>| match self.signer.as_mut() {
            Some(s) => sink(s.sign(msg, now)),
            None => sink(msg),
        };
        let (id, q) = (self.req.id, &self.req.query);
        match &self.plan {
            Plan::Axfr(zone) => outbound::write_axfr(zone, id, q, &mut signed),
            Plan::Ixfr(diff) => outbound::write_ixfr(diff, id, q, &mut signed),
            Plan::Reply(_) => false,
        }
    }

    pub fn describe(&self) -> (&'static str, usize) {
        match &self.plan {
            Plan::Axfr(z) => ("AXFR", z.record_count()),
            Plan::Ixfr(d) => ("IXFR", d.removed.len() + d.added.len()),
            Plan::Reply(_) => ("reply", 0),
        }
    }
}

impl Router {
    /// Answers one message from `peer` at `now`.
    pub fn respond(
        &self,
        packet: &[u8],
        transport: Transport,
        peer: IpAddr,
        now: impl Into<Now>,
    ) -> Response {
        let Now {
            unix_secs: now,
            monotonic_ms,
        } = now.into();
        if !replyable(peer) {
            return Response::Drop;
        }
        let handler = self.handler.load();
        let snapshot = self.zones.load();
        if let Some(hit) = hot::answer(
            &self.hot,
            &snapshot,
            packet,
            transport,
            peer,
            now,
            &handler.edns,
        ) {
            zones::count(hit.zone);
            return self.limited(hit.bytes, transport, peer, hit.valid_cookie, monotonic_ms);
        }
        let mut req = match wire::parse_request(packet) {
            Ok(req) => req,
            Err(Rejected::Drop) => return Response::Drop,
            Err(Rejected::Reply(bytes)) => return Response::One(bytes),
        };
        let valid_cookie = handler.stamp(&mut req, peer, now);
        let qtype = req.query.query_type();
        let transfer = matches!(qtype, RecordType::AXFR | RecordType::IXFR);
        if !req.signed && req.op_code == OpCode::Query && !transfer {
            let (reply, zone) = handler.reply_from(&snapshot, &req, transport);
            if let Some(z) = zone {
                zones::count(snapshot.zone_id(z.origin_key()));
            }
            return self.limited(reply, transport, peer, valid_cookie, monotonic_ms);
        }

        let policy = self.transfer.load();
        let verified = if req.signed {
            match tsig::verify_request(&policy.keyring, packet, now) {
                Ok(Some(v)) => Some(v),
                // Signed, but the TSIG cannot be read back out of the
                // message (not last, broken fields): FORMERR, not unsigned.
                Ok(None) => {
                    if let Some(held_back) = self.log_limit.admit("tsig", now) {
                        warn!(%peer, qname = %req.query.name(), held_back, "malformed TSIG record; FORMERR");
                    }
                    let reply = Reply::error(ResponseCode::FormErr);
                    return Response::One(handler.encode(&req, &reply, transport));
                }
                Err(r) => {
                    if let Some(held_back) = self.log_limit.admit("tsig", now) {
                        warn!(%peer, key = %r.key, error = ?r.error, qname = %req.query.name(), held_back, "TSIG verification failed; NOTAUTH");
                    }
                    return Response::One(r.reply);
                }
            }
        } else {
            None
        };
        let key = verified.as_ref().map(|v| v.key_name().clone());
        let mut signer = verified.as_ref().map(ReplySigner::new);
        if req.op_code == OpCode::Update {
            return match update::admit(packet, &snapshot, &policy.update, peer, key.as_ref()) {
                Ok(admitted) => Response::Update(Box::new(update::pending(
                    admitted,
                    update::Received {
                        key,
                        peer,
                        req,
                        transport,
                        signer,
                        message: packet.to_vec(),
                    },
                ))),
                Err(rcode) => {
                    if let Some(held_back) = self.log_limit.admit("update", now) {
                        info!(%peer, zone = %req.query.name(), key = ?key.as_ref().map(|k| k.to_string()), %rcode, held_back, "UPDATE not admitted");
                    }
                    let bytes = handler.encode(&req, &Reply::error(rcode), transport);
                    Response::One(match signer.as_mut() {
                        Some(s) => s.sign(bytes, now),
                        None => bytes,
                    })
                }
            };
        }
        let mut one = |bytes: Vec<u8>| {
            Response::One(match signer.as_mut() {
                Some(s) => s.sign(bytes, now),
                None => bytes,
            })
        };
        let zone = LowerName::new(req.query.name());

        if req.op_code == OpCode::Notify {
            let rcode = self.notify_received(&policy, &req, &zone, peer, key.as_ref(), now);
            let reply = Reply {
                rcode,
                authoritative: rcode == ResponseCode::NoError,
                ..Reply::default()
            };
            return one(handler.encode(&req, &reply, transport));
        }
        if !transfer {
            return one(handler.reply(&snapshot, &req, transport));
        }
        if !policy.transfer_acl(&zone).allows(peer, key.as_ref()) {
            if let Some(held_back) = self.log_limit.admit("transfer", now) {
                warn!(%peer, zone = %req.query.name(), qtype = %qtype, key = ?key.as_ref().map(|k| k.to_string()), held_back, "transfer refused by ACL");
            }
            return one(handler.encode(&req, &Reply::error(ResponseCode::Refused), transport));
        }
        match outbound::plan(&snapshot, &*self.history, &req, transport) {
            Plan::Reply(r) => one(handler.encode(&req, &r, transport)),
            plan => {
                let Some(slot) = OutgoingSlot::take(&self.transfers_out, policy.max_transfers_out)
                else {
                    if let Some(held_back) = self.log_limit.admit("transfers_out", now) {
                        warn!(%peer, zone = %req.query.name(), max = policy.max_transfers_out, held_back, "transfer refused: transfer.max_transfers_out are running");
                    }
                    return one(handler.encode(
                        &req,
                        &Reply::error(ResponseCode::Refused),
                        transport,
                    ));
                };
                let t = Transfer {
                    plan,
                    req,
                    signer,
                    now,
                    _slot: slot,
                };
                let (kind, records) = t.describe();
                info!(%peer, zone = %t.req.query.name(), asked = %qtype, kind, records, from_serial = t.req.ixfr_serial, "outgoing transfer");
                Response::Transfer(Box::new(t))
            }
        }
    }

    /// Hands an admitted UPDATE to the commit path, which calls `reply`
    /// with the answer once the change is durable; REFUSED at once when
    /// nothing applies updates here.
    pub fn submit_update(
        &self,
        pending: Box<PendingUpdate>,
        reply: Box<dyn FnOnce(Vec<u8>) + Send>,
        now: u64,
    ) {
        match self.update_sink.get() {
            Some(sink) => sink.submit(*pending, reply),
            None => reply(pending.reply(&self.handler.load(), ResponseCode::Refused, now)),
        }
    }

    /// A UDP answer as response rate limiting lets it go: sent, sent
    /// truncated (slipped) or dropped.
    fn limited(
        &self,
        reply: Vec<u8>,
        transport: Transport,
        peer: IpAddr,
        valid_cookie: bool,
        now_ms: u32,
    ) -> Response {
        let Some(rrl) = self.rrl.get().filter(|_| transport == Transport::Udp) else {
            return Response::One(reply);
        };
        let class = crate::rrl::class_of(&reply);
        match rrl.judge(peer, class, valid_cookie, now_ms) {
            Verdict::Send => Response::One(reply),
            Verdict::Slip => crate::rrl::slipped(&reply).map_or(Response::Drop, Response::One),
            Verdict::Drop => Response::Drop,
        }
    }

    /// A NOTIFY for a secondary zone from an allowed source schedules an
    /// immediate refresh (RFC 1996 §3.7). Others are refused.
    fn notify_received(
        &self,
        policy: &crate::transfer::TransferPolicy,
        req: &Request,
        zone: &LowerName,
        peer: IpAddr,
        key: Option<&Name>,
        now: u64,
    ) -> ResponseCode {
        let Some(acl) = policy.notify_acl.get(zone) else {
            if let Some(held_back) = self.log_limit.admit("notify", now) {
                info!(%peer, zone = %req.query.name(), held_back, "NOTIFY for a zone that is not a secondary here; NOTAUTH");
            }
            return ResponseCode::NotAuth;
        };
        if !acl.allows(peer, key) {
            if let Some(held_back) = self.log_limit.admit("notify", now) {
                warn!(%peer, zone = %req.query.name(), held_back, "NOTIFY refused by ACL");
            }
            return ResponseCode::Refused;
        }
        info!(%peer, zone = %req.query.name(), serial = req.ixfr_serial, "NOTIFY received");
        if let Some(sink) = self.notify_sink.get() {
            sink.notified(&Name::from(zone));
        }
        ResponseCode::NoError
    }
}

#[cfg(test)]
mod tests;
