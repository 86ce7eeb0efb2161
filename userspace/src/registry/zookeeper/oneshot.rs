//! Child and data watches, for ZooKeeper servers before 3.6 (no
//! persistent watches, no multi-read): reading a node sets a data watch
//! and a child watch on it; each fires once and is set again when the
//! node is read again. A changed child list is compared with the last
//! one: new children are read (and watched), missing ones removed with
//! everything known below them.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;

use futures_util::stream::{FuturesUnordered, StreamExt};
use zookeeper_client::{Client, Error, EventType, OneshotWatcher, WatchedEvent};

use xdpdns_core::registry::zookeeper::paths::child_path;

/// Node reads in flight at once.
const IN_FLIGHT: usize = 256;

/// What the tree learns from a read.
#[derive(Debug, PartialEq)]
pub(super) enum Update {
    /// The node holds this data.
    Set(String, Vec<u8>),
    Removed(String),
    /// The node exists but its ACL refuses this client.
    Denied(String),
}

type Fired = Pin<Box<dyn Future<Output = WatchedEvent> + Send>>;

/// The watches set, and the children each node had when last listed.
#[derive(Default)]
pub(super) struct Watches {
    fired: FuturesUnordered<Fired>,
    children: HashMap<String, BTreeSet<String>>,
}

impl Watches {
    pub(super) fn is_empty(&self) -> bool {
        self.fired.is_empty()
    }

    /// The next watch to fire.
    pub(super) async fn next(&mut self) -> Option<WatchedEvent> {
        self.fired.next().await
    }

    fn watch(&mut self, watcher: OneshotWatcher) {
        self.fired.push(Box::pin(watcher.changed()));
    }

    /// Reads the subtrees at `roots`, breadth first, watching every node.
    pub(super) async fn read(
        &mut self,
        client: &Client,
        roots: Vec<String>,
    ) -> Result<Vec<Update>, Error> {
        let mut out = Vec::new();
        let mut frontier = roots;
        while !frontier.is_empty() {
            let mut next = Vec::new();
            let reads = super::bounded::each(std::mem::take(&mut frontier), IN_FLIGHT, |path| {
                let client = client.clone();
                async move {
                    let data = client.get_and_watch_data(&path).await;
                    let children = client.get_and_watch_children(&path).await;
                    (path, data, children)
                }
            })
            .await
            .map_err(|e| Error::UnexpectedError(e.to_string()))?;
            for (path, data, children) in reads {
                match data {
                    Ok((bytes, _, watcher)) => {
                        self.watch(watcher);
                        out.push(Update::Set(path.clone(), bytes));
                    }
                    Err(Error::NoNode) => {
                        out.extend(self.removed(&path));
                        continue;
                    }
                    Err(Error::NoAuth) => out.push(Update::Denied(path.clone())),
                    Err(e) => return Err(e),
                }
                match children {
                    Ok((names, _, watcher)) => {
                        self.watch(watcher);
                        next.extend(names.iter().map(|n| child_path(&path, n)));
                        self.children.insert(path, names.into_iter().collect());
                    }
                    Err(Error::NoNode | Error::NoAuth) => {}
                    Err(e) => return Err(e),
                }
            }
            frontier = next;
        }
        Ok(out)
    }

    /// What a fired watch means: the node read (and watched) again, or
    /// its new children read and its vanished ones removed.
    pub(super) async fn follow(
        &mut self,
        client: &Client,
        event: WatchedEvent,
    ) -> Result<Vec<Update>, Error> {
        let path = event.path;
        match event.event_type {
            EventType::NodeDataChanged | EventType::NodeCreated => {
                match client.get_and_watch_data(&path).await {
                    Ok((bytes, _, watcher)) => {
                        self.watch(watcher);
                        Ok(vec![Update::Set(path, bytes)])
                    }
                    Err(Error::NoNode) => Ok(self.removed(&path)),
                    Err(Error::NoAuth) => Ok(vec![Update::Denied(path)]),
                    Err(e) => Err(e),
                }
            }
            EventType::NodeDeleted => Ok(self.removed(&path)),
            EventType::NodeChildrenChanged => match client.get_and_watch_children(&path).await {
                Ok((names, _, watcher)) => {
                    self.watch(watcher);
                    let now: BTreeSet<String> = names.into_iter().collect();
                    let before = self
                        .children
                        .insert(path.clone(), now.clone())
                        .unwrap_or_default();
                    let mut out = Vec::new();
                    for gone in before.difference(&now) {
                        out.extend(self.removed(&child_path(&path, gone)));
                    }
                    let added = now
                        .difference(&before)
                        .map(|n| child_path(&path, n))
                        .collect();
                    out.extend(self.read(client, added).await?);
                    Ok(out)
                }
                Err(Error::NoNode) => Ok(self.removed(&path)),
                Err(Error::NoAuth) => Ok(Vec::new()),
                Err(e) => Err(e),
            },
            EventType::Session => Ok(Vec::new()),
        }
    }

    /// Node `path` and everything known below it are gone.
    fn removed(&mut self, path: &str) -> Vec<Update> {
        let mut out = vec![Update::Removed(path.to_string())];
        if let Some(children) = self.children.remove(path) {
            for c in children {
                out.extend(self.removed(&child_path(path, &c)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removed_node_takes_everything_known_below_it() {
        let mut w = Watches::default();
        w.children.insert(
            "/a".into(),
            ["b", "c"].iter().map(|s| s.to_string()).collect(),
        );
        w.children
            .insert("/a/b".into(), ["d"].iter().map(|s| s.to_string()).collect());
        let removed = w.removed("/a");
        assert_eq!(
            removed,
            ["/a", "/a/b", "/a/b/d", "/a/c"]
                .iter()
                .map(|p| Update::Removed(p.to_string()))
                .collect::<Vec<_>>()
        );
        assert!(w.children.is_empty());
    }
}
