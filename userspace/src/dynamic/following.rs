//! Following catalog zones (`consume_catalog = true` on a secondary
//! zone): whenever a followed catalog changes, its members are started,
//! stopped or reset as secondary zones (`members::plan`), transferred
//! from the catalog's primaries with its key, with NOTIFYs accepted as for
//! the catalog. The members served are kept in
//! `<data_dir>/dynamic/catalog-members.json`, so after a restart they are
//! served from the journal before the primaries answer.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use hickory_proto::rr::{LowerName, Name};
use tokio::sync::watch;
use tracing::{info, warn};

use super::catalog::Catalog;
use super::members::{self, Ignored, Listing, Owned, Step};
use crate::clock::unix_secs;
use crate::router::Router;
use crate::transfer::secondary::{SecondarySet, SecondaryZone};
use crate::zone::{FeedItem, Snapshot, Subscription, ZoneStore};

const LIST: &str = "catalog-members.json";

/// The members a previous run served (empty when none were kept).
pub fn read_list(dir: &Path) -> Vec<Owned> {
    std::fs::read_to_string(dir.join(LIST))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

fn fqdn(text: &str) -> Option<Name> {
    let mut n = Name::from_ascii(text).ok()?;
    n.set_fqdn(true);
    Some(n)
}

/// The catalogs followed and the members served from them.
pub struct Following {
    /// Each followed catalog as a secondary zone: its members are
    /// transferred from the same primaries with the same key.
    catalogs: BTreeMap<LowerName, SecondaryZone>,
    secondaries: Arc<SecondarySet>,
    store: Arc<ZoneStore>,
    /// Whose NOTIFY ACL learns of the members.
    router: Weak<Router>,
    /// The catalog produced here, which must not list followed members.
    producer: Option<Arc<Catalog>>,
    path: Option<PathBuf>,
    owned: Mutex<BTreeMap<LowerName, Owned>>,
}

impl Following {
    /// Starts serving the members kept by the previous run.
    pub fn new(
        catalogs: Vec<SecondaryZone>,
        dir: Option<&Path>,
        secondaries: Arc<SecondarySet>,
        store: Arc<ZoneStore>,
        router: &Arc<Router>,
        producer: Option<Arc<Catalog>>,
    ) -> Arc<Following> {
        let owned = dir
            .map(read_list)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|o| Some((LowerName::new(&fqdn(&o.zone)?), o)))
            .collect();
        let following = Arc::new(Following {
            catalogs: catalogs
                .into_iter()
                .map(|c| (LowerName::new(&c.zone), c))
                .collect(),
            secondaries,
            store,
            router: Arc::downgrade(router),
            producer,
            path: dir.map(|d| d.join(LIST)),
            owned: Mutex::new(owned),
        });
        let kept: Vec<Owned> = following.lock().values().cloned().collect();
        for member in &kept {
            following.start(member);
        }
        following.refresh_policy(&[]);
        following
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<LowerName, Owned>> {
        self.owned.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The members served now.
    pub fn members(&self) -> Vec<Owned> {
        self.lock().values().cloned().collect()
    }

    fn start(&self, member: &Owned) {
        let (Some(zone), Some(catalog)) = (fqdn(&member.zone), fqdn(&member.catalog)) else {
            return;
        };
        let Some(c) = self.catalogs.get(&LowerName::new(&catalog)) else {
            return;
        };
        self.secondaries.add(SecondaryZone {
            zone,
            primaries: c.primaries.clone(),
            key: c.key.clone(),
        });
    }

    /// Members take their catalog's NOTIFY ACL (after they change, and
    /// after a reload replaced the policy); `removed` lose theirs.
    pub fn refresh_policy(&self, removed: &[Name]) {
        let Some(router) = self.router.upgrade() else {
            return;
        };
        let owned = self.members();
        router.transfer.rcu(|p| {
            let mut p = (**p).clone();
            for zone in removed {
                p.notify_acl.remove(&LowerName::new(zone));
            }
            for m in &owned {
                let (Some(zone), Some(catalog)) = (fqdn(&m.zone), fqdn(&m.catalog)) else {
                    continue;
                };
                if let Some(acl) = p.notify_acl.get(&LowerName::new(&catalog)).cloned() {
                    p.notify_acl.insert(LowerName::new(&zone), acl);
                }
            }
            p
        });
        if let Some(c) = &self.producer {
            c.set_followed(self.lock().keys().cloned());
        }
    }

    /// What each followed catalog lists in `snapshot` (`None` while one
    /// is not there yet or cannot be read).
    fn listings(&self, snapshot: &Snapshot) -> BTreeMap<LowerName, Option<Listing>> {
        self.catalogs
            .keys()
            .map(|origin| {
                let listing = snapshot.zone(origin).and_then(|z| match members::read(z) {
                    Ok(l) => Some(l),
                    Err(e) => {
                        warn!(catalog = %origin, "catalog zone not followed while it is unreadable: {e}");
                        None
                    }
                });
                (origin.clone(), listing)
            })
            .collect()
    }

    /// Brings the members served in line with the catalogs in `snapshot`.
    pub fn reconcile(&self, snapshot: &Snapshot) {
        let listings = self.listings(snapshot);
        let served = |z: &LowerName| snapshot.zone(z).is_some() || self.secondaries.contains(z);
        let (steps, ignored) = members::plan(&self.lock(), &listings, served);
        for i in ignored {
            match i {
                Ignored::Served(zone) => {
                    warn!(%zone, "catalog member is served here already (configured or added by the API); not followed")
                }
                Ignored::OwnedElsewhere { zone, owner } => {
                    warn!(%zone, %owner, "catalog member belongs to another followed catalog without a change of ownership (coo); not moved")
                }
            }
        }
        if steps.is_empty() {
            return;
        }
        let mut dropped: Vec<Name> = Vec::new();
        let mut restart = Vec::new();
        {
            let mut owned = self.lock();
            for step in steps {
                match step {
                    Step::Add(m) => {
                        info!(zone = %m.zone, catalog = %m.catalog, "catalog member added");
                        owned.insert(key(&m.zone), m.clone());
                        restart.push(m);
                    }
                    Step::Remove(zone) => {
                        info!(%zone, "catalog member removed");
                        owned.remove(&LowerName::new(&zone));
                        self.secondaries.remove(&zone);
                        dropped.push(zone);
                    }
                    Step::Reset(m) => {
                        info!(zone = %m.zone, catalog = %m.catalog, id = %m.id, "catalog member reset: transferred anew");
                        if let Some(zone) = fqdn(&m.zone) {
                            self.secondaries.remove(&zone);
                            dropped.push(zone);
                        }
                        owned.insert(key(&m.zone), m.clone());
                        restart.push(m);
                    }
                    Step::Move(m) => {
                        info!(zone = %m.zone, catalog = %m.catalog, "catalog member changed owner (coo)");
                        owned.insert(key(&m.zone), m.clone());
                        restart.push(m); // its primaries are the new catalog's
                    }
                }
            }
        }
        // The list is kept before any zone is dropped or started, so a
        // restart after what DNS shows follows the same list.
        self.save();
        // What the removed and reset members served goes in one commit.
        if !dropped.is_empty() {
            self.store.replace_zones(Vec::new(), &dropped, unix_secs());
        }
        let gone: Vec<Name> = dropped
            .into_iter()
            .filter(|z| !self.lock().contains_key(&LowerName::new(z)))
            .collect();
        self.refresh_policy(&gone);
        for m in &restart {
            self.start(m);
        }
    }

    fn save(&self) {
        let Some(path) = &self.path else {
            return;
        };
        let list = serde_json::to_vec_pretty(&self.members()).expect("plain data");
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Err(e) = crate::durable::replace_with(path, 0o644, |w| w.write_all(&list)) {
            warn!(file = %path.display(), "cannot keep the list of catalog members: {e}");
        }
    }

    /// Follows the store: every commit that touches a followed catalog
    /// (and any resync) brings the members in line.
    pub async fn follow(
        self: Arc<Self>,
        snapshot: Arc<Snapshot>,
        mut feed: Subscription,
        mut stop: watch::Receiver<bool>,
    ) {
        self.reconcile(&snapshot);
        loop {
            let item = tokio::select! {
                item = feed.next() => item,
                _ = stop.changed() => return,
            };
            match item {
                Some(FeedItem::Commit(c)) => {
                    let touched: HashSet<LowerName> = c
                        .events
                        .iter()
                        .map(|e| LowerName::new(e.origin()))
                        .collect();
                    if self.catalogs.keys().any(|k| touched.contains(k)) {
                        self.reconcile(&c.snapshot);
                    }
                }
                Some(FeedItem::Resync(s)) => self.reconcile(&s),
                None => return,
            }
        }
    }
}

fn key(zone: &str) -> LowerName {
    LowerName::new(&fqdn(zone).unwrap_or_default())
}

/// The members a previous run served whose catalog is still followed, as
/// the secondary zones they are (read before the journal opens, so it
/// keeps their history).
pub fn kept_members(dir: Option<&Path>, catalogs: &[SecondaryZone]) -> Vec<SecondaryZone> {
    let Some(dir) = dir else {
        return Vec::new();
    };
    read_list(dir)
        .iter()
        .filter_map(|m| {
            let catalog = LowerName::new(&fqdn(&m.catalog)?);
            let c = catalogs
                .iter()
                .find(|c| LowerName::new(&c.zone) == catalog)?;
            Some(SecondaryZone {
                zone: fqdn(&m.zone)?,
                primaries: c.primaries.clone(),
                key: c.key.clone(),
            })
        })
        .collect()
}
