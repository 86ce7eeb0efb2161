//! UPDATE messages at the router: what it decides at once (malformed,
//! unserved zone, no grant: an RCODE) and what it hands on, as a
//! [`PendingUpdate`], to whoever owns the commit path: the update is
//! applied there and answered only once it is durable.

use std::net::IpAddr;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::Name;

use crate::handler::{Handler, Transport};
use crate::transfer::tsig::ReplySigner;
use crate::update::{Permission, Update, UpdatePolicy};
use crate::wire::{Reply, Request};
use crate::zone::Snapshot;

/// An UPDATE that passed the router's checks, to be applied and answered
/// (or forwarded to the zone's primaries, when `forward_to` names some).
pub struct PendingUpdate {
    pub update: Update,
    pub permission: Permission,
    /// A secondary zone's primaries (RFC 2136 §6): the message goes to
    /// them as it came, and their answer back as it comes.
    pub forward_to: Vec<std::net::SocketAddr>,
    /// The message as received.
    pub message: Vec<u8>,
    /// The verified TSIG key, for the log.
    pub key: Option<Name>,
    pub peer: IpAddr,
    req: Request,
    transport: Transport,
    signer: Option<ReplySigner>,
}

impl PendingUpdate {
    /// The reply with `rcode`, signed when the request was.
    pub fn reply(mut self, handler: &Handler, rcode: ResponseCode, now: u64) -> Vec<u8> {
        let bytes = handler.encode(&self.req, &Reply::error(rcode), self.transport);
        match self.signer.as_mut() {
            Some(s) => s.sign(bytes, now),
            None => bytes,
        }
    }
}

/// Where UPDATEs that passed the router go: the owner of the commit path
/// (`serve`), which calls `reply` with the answer once the change is
/// durable (or refused).
pub trait UpdateSink: Send + Sync {
    fn submit(&self, pending: PendingUpdate, reply: Box<dyn FnOnce(Vec<u8>) + Send>);
}

/// What the router decides about an UPDATE before the commit path sees
/// it: the zone section is read, the zone must be served (NOTAUTH) and
/// take updates (REFUSED: registry zones, secondary zones that do not
/// forward them, zones no grant covers), and the requester must hold a
/// grant in it (REFUSED). A secondary zone that forwards its UPDATEs
/// names its primaries instead (they decide).
pub(super) fn admit(
    packet: &[u8],
    snapshot: &Snapshot,
    policy: &UpdatePolicy,
    peer: IpAddr,
    key: Option<&Name>,
) -> Result<Admitted, ResponseCode> {
    let msg = Message::from_vec(packet).map_err(|_| ResponseCode::FormErr)?;
    let update = Update::from_message(msg)?;
    let zone = update.zone_key();
    if snapshot.zone(&zone).is_none() {
        return Err(ResponseCode::NotAuth);
    }
    if let Some(primaries) = policy.forward_to(&zone) {
        return Ok(Admitted {
            update,
            permission: Permission::none(),
            forward_to: primaries.to_vec(),
        });
    }
    if !policy.takes_updates(&zone) {
        return Err(ResponseCode::Refused);
    }
    let permission = policy
        .permission(&zone, peer, key)
        .ok_or(ResponseCode::Refused)?;
    Ok(Admitted {
        update,
        permission,
        forward_to: Vec::new(),
    })
}

/// An UPDATE the router let through.
pub(super) struct Admitted {
    update: Update,
    permission: Permission,
    forward_to: Vec<std::net::SocketAddr>,
}

pub(super) struct Received {
    pub(super) key: Option<Name>,
    pub(super) peer: IpAddr,
    pub(super) req: Request,
    pub(super) transport: Transport,
    pub(super) signer: Option<ReplySigner>,
    pub(super) message: Vec<u8>,
}

pub(super) fn pending(a: Admitted, r: Received) -> PendingUpdate {
    PendingUpdate {
        update: a.update,
        permission: a.permission,
        forward_to: a.forward_to,
        message: r.message,
        key: r.key,
        peer: r.peer,
        req: r.req,
        transport: r.transport,
        signer: r.signer,
    }
}
