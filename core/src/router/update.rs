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

/// An UPDATE that passed the router's checks, to be applied and answered.
pub struct PendingUpdate {
    pub update: Update,
    pub permission: Permission,
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
/// take updates (REFUSED: registry and secondary zones, zones no grant
/// covers), and the requester must hold a grant in it (REFUSED).
pub(super) fn admit(
    packet: &[u8],
    snapshot: &Snapshot,
    policy: &UpdatePolicy,
    peer: IpAddr,
    key: Option<&Name>,
) -> Result<(Update, Permission), ResponseCode> {
    let msg = Message::from_vec(packet).map_err(|_| ResponseCode::FormErr)?;
    let update = Update::from_message(msg)?;
    let zone = update.zone_key();
    if snapshot.zone(&zone).is_none() {
        return Err(ResponseCode::NotAuth);
    }
    if !policy.takes_updates(&zone) {
        return Err(ResponseCode::Refused);
    }
    let permission = policy
        .permission(&zone, peer, key)
        .ok_or(ResponseCode::Refused)?;
    Ok((update, permission))
}

pub(super) fn pending(
    (update, permission): (Update, Permission),
    key: Option<Name>,
    peer: IpAddr,
    req: Request,
    transport: Transport,
    signer: Option<ReplySigner>,
) -> PendingUpdate {
    PendingUpdate {
        update,
        permission,
        key,
        peer,
        req,
        transport,
        signer,
    }
}
