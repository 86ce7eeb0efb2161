//! Small etcd calls and key arithmetic the watch and the writer share.

use std::time::Duration;

use etcd_client::{Client, WatchResponse, WatchStream};

use crate::registry::state::{Entry, RemovalReason};
use crate::registry::Registry;

/// The end of the range of keys that start with `prefix`.
pub(super) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0] // every key
}

/// An etcd request that gives up after `timeout` (the channel has none:
/// it would cut the watch stream too).
pub(super) async fn bounded<T>(
    timeout: Duration,
    request: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, etcd_client::Error> {
    tokio::time::timeout(timeout, request)
        .await
        .unwrap_or_else(|_| {
            Err(etcd_client::Error::IoError(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "etcd request timed out",
            )))
        })
}

/// Renews a lease once; `false` when it has expired already. One stream
/// per call, as etcd's own `KeepAliveOnce` does: the client's keeper is
/// bound to one lease id, and a stream per lease held open would cost
/// etcd a goroutine for each of 100k instances.
pub(super) async fn keep_alive(
    client: &mut Client,
    lease: i64,
) -> Result<bool, etcd_client::Error> {
    // Opening the stream sends the first request and reads its answer, a
    // TTL of 0 (an error here) when the lease is gone.
    match client.lease_keep_alive(lease).await {
        Ok(_) => Ok(true),
        Err(etcd_client::Error::LeaseKeepAliveError(e)) if e.contains("not found") => Ok(false),
        Err(e) => Err(e),
    }
}

pub(super) async fn next_message(
    watch: &mut Option<WatchStream>,
) -> Result<Option<WatchResponse>, etcd_client::Error> {
    match watch {
        Some(w) => w.message().await,
        None => std::future::pending().await,
    }
}

/// The entries that turn registry `old` into `new`.
pub(super) fn difference(old: &Registry, new: &Registry) -> Vec<Entry> {
    let mut out = Vec::new();
    for instance in new.instances.values() {
        if old.instances.get(&instance.id) != Some(instance) {
            out.push(Entry::Put {
                instance: Box::new((**instance).clone()),
            });
        }
    }
    for id in old.instances.keys() {
        if !new.instances.contains_key(id) {
            out.push(Entry::Delete {
                id: id.clone(),
                reason: RemovalReason::LeaseExpired,
            });
        }
    }
    for (owner, enabled) in &new.owners {
        if old.owners.get(owner) != Some(enabled) {
            out.push(Entry::Owner {
                owner: owner.clone(),
                enabled: *enabled,
            });
        }
    }
    for owner in old.owners.keys() {
        if !new.owners.contains_key(owner) {
            out.push(Entry::Owner {
                owner: owner.clone(),
                enabled: false,
            });
        }
    }
    out
}
