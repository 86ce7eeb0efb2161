//! One write to etcd: a transaction that compares the key's revision with
//! the one this node last saw, retried on a lost connection.

use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp};

use super::client::{bounded, keep_alive};
use crate::registry::state::Entry;
use crate::registry::Expiry;

/// What this node last saw of an instance's key.
#[derive(Clone, Copy, Debug)]
pub(super) struct Seen {
    pub(super) revision: i64,
    pub(super) lease: i64,
}

/// What a write did.
pub(super) enum Written {
    /// Committed at this revision.
    At(i64),
    /// The key changed since this node saw it (revision now).
    Conflict(i64),
}

/// What a write needs of the writer: each write of a wave runs as a task
/// of its own with a clone (a client is a handle on one connection).
#[derive(Clone)]
pub(super) struct Writing {
    pub(super) client: Client,
    pub(super) prefix: String,
    pub(super) timeout: Duration,
}

impl Writing {
    pub(super) fn key(&self, tail: &str) -> String {
        format!("{}{tail}", self.prefix)
    }

    /// [`write`](Self::write), bounded in time, and tried again after a
    /// transport error (a member that died or lost its leader). A write
    /// that did commit before its error loses its compare when tried
    /// again, and is then recomputed against the newer state like any
    /// conflict. With the entry's lease (a registration's) when written.
    pub(super) async fn write_retrying(
        &self,
        entry: &Entry,
        seen: Option<Seen>,
        same_lease: bool,
    ) -> Result<(Written, i64), etcd_client::Error> {
        let mut last = None;
        for attempt in 0..WRITE_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(WRITE_RETRY_AFTER).await;
            }
            let mut client = self.client.clone();
            let write = self.write(&mut client, entry, seen, same_lease);
            match bounded(self.timeout, write).await {
                Ok(w) => return Ok(w),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("at least one attempt"))
    }

    /// Writes one entry: a transaction that succeeds only if the key is as
    /// this node last saw it (`seen`).
    pub(super) async fn write(
        &self,
        client: &mut Client,
        entry: &Entry,
        seen: Option<Seen>,
        same_lease: bool,
    ) -> Result<(Written, i64), etcd_client::Error> {
        let seen_revision = seen.map_or(0, |s| s.revision);
        match entry {
            Entry::Put { instance } => {
                let key = self.key(&format!("instances/{}", instance.id));
                // A re-registration renews the lease it has, if still alive.
                let renewed = match seen {
                    Some(s) if s.lease != 0 && same_lease => keep_alive(client, s.lease).await?,
                    _ => false,
                };
                let (lease, granted) = match (renewed, seen) {
                    (true, Some(s)) => (s.lease, false),
                    _ => {
                        let secs = i64::from(instance.reg.lease_secs);
                        (client.lease_grant(secs, None).await?.id(), true)
                    }
                };
                let mut stored = (**instance).clone();
                stored.expires_at = Expiry::new(Expiry::NEVER);
                let value = serde_json::to_vec(&stored).expect("an instance serializes");
                let txn = Txn::new()
                    .when([Compare::mod_revision(
                        key.clone(),
                        CompareOp::Equal,
                        seen_revision,
                    )])
                    .and_then([TxnOp::put(
                        key,
                        value,
                        Some(PutOptions::new().with_lease(lease)),
                    )]);
                let resp = client.txn(txn).await?;
                let revision = resp.header().map_or(0, |h| h.revision());
                if !resp.succeeded() {
                    if granted {
                        let _ = client.lease_revoke(lease).await;
                    }
                    return Ok((Written::Conflict(revision), 0));
                }
                if let Some(old) = seen.filter(|s| s.lease != 0 && s.lease != lease) {
                    let _ = client.lease_revoke(old.lease).await;
                }
                Ok((Written::At(revision), lease))
            }
            Entry::Delete { id, .. } => {
                let key = self.key(&format!("instances/{id}"));
                let marker = client.lease_grant(MARKER_SECS, None).await?.id();
                let ops = vec![
                    TxnOp::delete(key.clone(), None),
                    TxnOp::put(
                        self.key(&format!("removed/{id}")),
                        "deregistered",
                        Some(PutOptions::new().with_lease(marker)),
                    ),
                ];
                let txn = Txn::new()
                    .when([Compare::mod_revision(key, CompareOp::Equal, seen_revision)])
                    .and_then(ops);
                let resp = client.txn(txn).await?;
                let revision = resp.header().map_or(0, |h| h.revision());
                if !resp.succeeded() {
                    return Ok((Written::Conflict(revision), 0));
                }
                if let Some(s) = seen.filter(|s| s.lease != 0) {
                    let _ = client.lease_revoke(s.lease).await;
                }
                Ok((Written::At(revision), 0))
            }
            Entry::Renew { .. } => unreachable!("a heartbeat is not written"),
            Entry::Owner { owner, enabled } => {
                let key = self.key(&format!("owners/{owner}"));
                let value = serde_json::to_vec(enabled).expect("a bool");
                let resp = client.put(key, value, None).await?;
                Ok((Written::At(resp.header().map_or(0, |h| h.revision())), 0))
            }
        }
    }
}

/// How long a deregistration's marker stays: it tells the watchers the
/// delete was not an expiry, and a node reading the registry later that
/// a change happened at its revision.
pub(super) const MARKER_SECS: i64 = 600;

/// Attempts of a write that fails for want of a member, and the pause
/// between them (an election takes about a second).
pub(super) const WRITE_ATTEMPTS: u32 = 6;

pub(super) const WRITE_RETRY_AFTER: Duration = Duration::from_millis(250);
