//! Zones added and removed at runtime (`POST /v1/zones`, `DELETE
//! /v1/zones/{name}`), without a restart or a reload: primary zones
//! created with an SOA and NS records or from a zone file in the request.
//! Each change is one commit (with the catalog zone's new version when
//! there is one), acknowledged once journaled; the list of runtime zones
//! is kept in `<data_dir>/dynamic/zones.json`, written after the commit,
//! so a zone whose creation was acknowledged is there after a restart
//! (its contents come back from the journal) and one whose creation was
//! not may or may not be.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use hickory_proto::rr::rdata::{NS, SOA};
use hickory_proto::rr::{LowerName, Name, RData, Record};
use serde::{Deserialize, Serialize};
use tracing::info;

use super::catalog::Catalog;
use crate::clock::unix_secs;
use crate::router::Router;
use crate::transfer::journal_subscriber::Journaled;
use crate::zone::{load_zone_str, Zone, ZoneStore};

/// Runtime zones at most (with `[update] max_runtime_zones`).
pub const MAX_RUNTIME_ZONES: usize = 10_000;

/// What a runtime zone is, as the list on disk keeps it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct RuntimeZone {
    pub name: String,
    /// Always "primary" (the secondary zones that come and go at runtime
    /// are a followed catalog's members, kept by `following`).
    pub kind: String,
    pub added_unix: u64,
    /// The policy it is signed online with, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dnssec_policy: Option<String>,
}

/// A request to create a primary zone: from `zone` (master-file text),
/// or else an SOA and NS records made from `ns` and `hostmaster`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewZone {
    pub name: String,
    #[serde(default)]
    pub ns: Vec<String>,
    #[serde(default)]
    pub hostmaster: Option<String>,
    #[serde(default)]
    pub zone: Option<String>,
    /// Sign it online with this `[[dnssec_policy]]` ("default": the
    /// built-in one).
    #[serde(default)]
    pub dnssec_policy: Option<String>,
}

/// What signs runtime zones online: starts signing a zone with a policy
/// (keys made or read, the signer installed, its rollovers running), and
/// stops it.
pub trait RuntimeSigning: Send + Sync {
    fn start(&self, zone: &Name, policy: &str) -> Result<(), String>;
    fn stop(&self, zone: &Name);
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("{field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    #[error("zone {0} is already served")]
    Exists(String),
    #[error("zone {0} is not a zone added at runtime")]
    NotFound(String),
    #[error("at most {0} zones may be added at runtime")]
    TooMany(usize),
    #[error("the journal stopped before the change was durable")]
    NotDurable,
    #[error("writing {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The zones added at runtime, and what changing them takes.
pub struct RuntimeZones {
    path: PathBuf,
    store: Arc<ZoneStore>,
    /// Whose update policy learns of the primary zones added and removed.
    router: std::sync::Weak<Router>,
    journaled: Journaled,
    catalog: Option<Arc<Catalog>>,
    /// Serialises changes to the list (and keeps it).
    zones: Mutex<BTreeMap<LowerName, RuntimeZone>>,
    /// The primary zones of the configuration (file zones).
    configured_primaries: Mutex<Vec<LowerName>>,
    max: usize,
    /// Online signing, when the server can (a data directory).
    signing: std::sync::OnceLock<Arc<dyn RuntimeSigning>>,
}

/// The list of runtime zones kept in `dir` (empty when there is none).
pub fn read_list(dir: &Path) -> Vec<RuntimeZone> {
    std::fs::read_to_string(dir.join("zones.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

fn fqdn(field: &'static str, text: &str) -> Result<Name, RuntimeError> {
    let mut name = Name::from_ascii(text).map_err(|e| RuntimeError::Invalid {
        field,
        message: format!("{text:?}: {e}"),
    })?;
    name.set_fqdn(true);
    Ok(name)
}

impl RuntimeZones {
    pub fn new(
        dir: &Path,
        store: Arc<ZoneStore>,
        journaled: Journaled,
        catalog: Option<Arc<Catalog>>,
        router: &Arc<Router>,
    ) -> RuntimeZones {
        let zones = read_list(dir)
            .into_iter()
            .filter_map(|z| Some((LowerName::new(&fqdn("name", &z.name).ok()?), z)))
            .collect();
        let configured = router.transfer.load().update.primaries().cloned().collect();
        let runtime = RuntimeZones {
            path: dir.join("zones.json"),
            store,
            router: Arc::downgrade(router),
            journaled,
            catalog,
            zones: Mutex::new(zones),
            configured_primaries: Mutex::new(configured),
            max: MAX_RUNTIME_ZONES,
            signing: std::sync::OnceLock::new(),
        };
        runtime.refresh_policy();
        runtime
    }

    /// Has `signing` sign the zones that ask for it (set once, at start).
    pub fn set_signing(&self, signing: Arc<dyn RuntimeSigning>) {
        let _ = self.signing.set(signing);
    }

    /// The names of the zones added at runtime.
    pub fn names(&self) -> Vec<Name> {
        self.lock().keys().map(Name::from).collect()
    }

    /// Has the router's update policy count the runtime zones as primary
    /// zones (after they change, and after a reload replaced the policy).
    pub fn refresh_policy(&self) {
        let Some(router) = self.router.upgrade() else {
            return;
        };
        let runtime: Vec<LowerName> = self.lock().keys().cloned().collect();
        let configured = self
            .configured_primaries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        router.transfer.rcu(|p| {
            let mut p = (**p).clone();
            p.update = p
                .update
                .with_primaries(configured.iter().chain(&runtime).cloned());
            p
        });
    }

    /// After a reload: the file zones the new configuration serves.
    pub fn set_configured_primaries(&self, primaries: Vec<LowerName>) {
        *self
            .configured_primaries
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = primaries;
        self.refresh_policy();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<LowerName, RuntimeZone>> {
        self.zones.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn list(&self) -> Vec<RuntimeZone> {
        self.lock().values().cloned().collect()
    }

    pub fn contains(&self, zone: &LowerName) -> bool {
        self.lock().contains_key(zone)
    }

    /// Creates a primary zone; returns once it is served and durable.
    pub async fn add(&self, req: NewZone) -> Result<RuntimeZone, RuntimeError> {
        let origin = fqdn("name", &req.name)?;
        let zone = build(&origin, &req)?;
        let key = LowerName::new(&origin);
        let version = {
            let mut zones = self.lock();
            if zones.len() >= self.max {
                return Err(RuntimeError::TooMany(self.max));
            }
            // Served, or a secondary zone not transferred yet.
            let secondary = self
                .router
                .upgrade()
                .is_some_and(|r| r.transfer.load().notify_acl.contains_key(&key));
            if secondary || self.store.snapshot().zone(&key).is_some() {
                return Err(RuntimeError::Exists(origin.to_string()));
            }
            let entry = RuntimeZone {
                name: origin.to_string(),
                kind: "primary".into(),
                added_unix: unix_secs(),
                dnssec_policy: req.dnssec_policy.clone(),
            };
            // Signing starts before the zone's first commit, which is
            // then signed.
            if let Some(policy) = &req.dnssec_policy {
                let signing = self.signing.get().ok_or_else(|| RuntimeError::Invalid {
                    field: "dnssec_policy",
                    message: "online signing needs [transfer] data_dir".into(),
                })?;
                signing
                    .start(&origin, policy)
                    .map_err(|message| RuntimeError::Invalid {
                        field: "dnssec_policy",
                        message,
                    })?;
            }
            zones.insert(key.clone(), entry);
            let mut commit = vec![zone];
            if let Some(c) = &self.catalog {
                commit.extend(c.with_member(&self.store, &origin, true));
            }
            self.store.replace_zones(commit, &[], unix_secs());
            self.store.snapshot().version()
        };
        self.refresh_policy();
        self.durable(version).await?;
        let entry = self.lock().get(&key).cloned().expect("added above");
        info!(zone = %origin, "zone added at runtime");
        Ok(entry)
    }

    /// Removes a zone added at runtime; returns once that is durable.
    pub async fn remove(&self, name: &str) -> Result<(), RuntimeError> {
        let origin = fqdn("name", name)?;
        let key = LowerName::new(&origin);
        let version = {
            let mut zones = self.lock();
            if zones.remove(&key).is_none() {
                return Err(RuntimeError::NotFound(origin.to_string()));
            }
            let catalog = match &self.catalog {
                Some(c) => c.with_member(&self.store, &origin, false),
                None => Vec::new(),
            };
            self.store
                .replace_zones(catalog, std::slice::from_ref(&origin), unix_secs());
            if let Some(signing) = self.signing.get() {
                signing.stop(&origin);
            }
            self.store.snapshot().version()
        };
        self.refresh_policy();
        self.durable(version).await?;
        info!(zone = %origin, "zone removed at runtime");
        Ok(())
    }

    /// Waits for the journal to hold `version`, then writes the list.
    async fn durable(&self, version: u64) -> Result<(), RuntimeError> {
        if !self.journaled.clone().durable(version).await {
            return Err(RuntimeError::NotDurable);
        }
        let list = serde_json::to_vec_pretty(&self.list()).expect("plain data");
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| RuntimeError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        crate::durable::replace_with(&self.path, 0o644, |w| w.write_all(&list)).map_err(|source| {
            RuntimeError::Io {
                path: self.path.clone(),
                source,
            }
        })
    }
}

/// The zone a request describes, checked as a zone file would be.
fn build(origin: &Name, req: &NewZone) -> Result<Zone, RuntimeError> {
    if let Some(text) = &req.zone {
        let file = PathBuf::from(format!("request for {origin}"));
        return load_zone_str(text, origin, &file).map_err(|e| RuntimeError::Invalid {
            field: "zone",
            message: e.to_string(),
        });
    }
    if req.ns.is_empty() {
        return Err(RuntimeError::Invalid {
            field: "ns",
            message: "a zone needs name servers (or a `zone` file)".into(),
        });
    }
    let ns: Vec<Name> = req
        .ns
        .iter()
        .map(|n| fqdn("ns", n))
        .collect::<Result<_, _>>()?;
    let hostmaster = match &req.hostmaster {
        Some(h) => fqdn("hostmaster", h)?,
        None => Name::from_ascii("hostmaster")
            .and_then(|h| h.append_domain(origin))
            .map_err(|e| RuntimeError::Invalid {
                field: "hostmaster",
                message: e.to_string(),
            })?,
    };
    let soa = SOA::new(
        ns[0].clone(),
        hostmaster,
        unix_secs() as u32,
        3600,
        600,
        1_209_600,
        300,
    );
    let mut records = vec![Record::from_rdata(origin.clone(), 3600, RData::SOA(soa))];
    records.extend(
        ns.into_iter()
            .map(|n| Record::from_rdata(origin.clone(), 3600, RData::NS(NS(n)))),
    );
    Zone::from_records(origin, records).map_err(|e| RuntimeError::Invalid {
        field: "name",
        message: e.to_string(),
    })
}
