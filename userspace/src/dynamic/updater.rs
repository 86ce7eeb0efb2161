//! Applies the UPDATEs the router admitted: one UPDATE, one commit
//! (decided and applied under the store's writer lock, all or nothing),
//! answered NOERROR only once the IXFR journal has written and
//! `fdatasync`ed it, so an acknowledged update survives `kill -9`.

use std::sync::{Arc, Weak};

use hickory_proto::op::ResponseCode;
use tokio::runtime::Handle;
use tracing::{info, warn};

use crate::clock::unix_secs;
use crate::router::{PendingUpdate, Router, UpdateSink};
use crate::transfer::journal_subscriber::Journaled;
use crate::zone::store::StoreError;
use crate::zone::{EditError, Edited, ZoneStore};

pub struct Updater {
    store: Arc<ZoneStore>,
    journaled: Journaled,
    /// For the handler that encodes replies (weak: the router holds the
    /// updater).
    router: Weak<Router>,
    runtime: Handle,
}

impl Updater {
    pub fn new(
        store: Arc<ZoneStore>,
        journaled: Journaled,
        router: &Arc<Router>,
        runtime: Handle,
    ) -> Updater {
        Updater {
            store,
            journaled,
            router: Arc::downgrade(router),
            runtime,
        }
    }
}

impl UpdateSink for Updater {
    fn submit(&self, pending: PendingUpdate, reply: Box<dyn FnOnce(Vec<u8>) + Send>) {
        let store = self.store.clone();
        let journaled = self.journaled.clone();
        let router = self.router.clone();
        self.runtime.spawn(async move {
            let rcode = if pending.forward_to.is_empty() {
                apply(&store, journaled, &pending).await
            } else {
                match forward(&pending).await {
                    Some(answer) => return reply(answer),
                    None => ResponseCode::ServFail,
                }
            };
            if let Some(router) = router.upgrade() {
                reply(pending.reply(&router.handler.load(), rcode, unix_secs()));
            }
        });
    }
}

/// How long a primary has to answer a forwarded UPDATE.
const FORWARD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Forwards a secondary zone's UPDATE to its primaries in turn; the first
/// answer, as it came (`None`: none answered).
async fn forward(pending: &PendingUpdate) -> Option<Vec<u8>> {
    for &primary in &pending.forward_to {
        match crate::transfer::client::relay(primary, &pending.message, FORWARD_TIMEOUT).await {
            Ok(answer) => {
                info!(zone = %pending.update.zone, peer = %pending.peer, %primary, "UPDATE forwarded to the primary");
                return Some(answer);
            }
            Err(e) => {
                warn!(zone = %pending.update.zone, %primary, "forwarding an UPDATE failed: {e}")
            }
        }
    }
    None
}

/// Commits `pending` and waits until it is durable; the RCODE to answer.
async fn apply(
    store: &ZoneStore,
    mut journaled: Journaled,
    pending: &PendingUpdate,
) -> ResponseCode {
    let u = &pending.update;
    let started = std::time::Instant::now();
    let edited = store.edit(&u.zone, unix_secs(), |zone| {
        crate::update::plan(zone, u, &pending.permission)
    });
    let key = pending.key.as_ref().map(|k| k.to_string());
    match edited {
        Ok(Edited {
            version: Some(version),
            diff,
        }) => {
            if !journaled.durable(version).await {
                warn!(zone = %u.zone, "UPDATE committed but the journal could not write it to disk; SERVFAIL");
                return ResponseCode::ServFail;
            }
            info!(zone = %u.zone, peer = %pending.peer, key, serial = diff.new_serial,
                  added = diff.added.len(), removed = diff.removed.len(),
                  ms = started.elapsed().as_secs_f64() * 1e3, "UPDATE applied");
            ResponseCode::NoError
        }
        Ok(_) => {
            info!(zone = %u.zone, peer = %pending.peer, key, "UPDATE changed nothing");
            ResponseCode::NoError
        }
        Err(EditError::Refused(rcode)) => {
            info!(zone = %u.zone, peer = %pending.peer, key, %rcode, "UPDATE refused");
            rcode
        }
        Err(EditError::Store(StoreError::UnknownZone(_))) => ResponseCode::NotAuth,
        Err(EditError::Store(e)) => {
            warn!(zone = %u.zone, peer = %pending.peer, key, "UPDATE failed: {e}");
            ResponseCode::ServFail
        }
    }
}
