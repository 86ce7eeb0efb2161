//! The status page's tables as data: zones from the zone store (with
//! what the server adds), services and instances filtered for the reader
//! by the same rule as the JSON API (`views`), and the hysteresis state
//! of every member.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use compact_str::CompactString;
use hickory_proto::rr::{LowerName, RecordType};

use super::model::ServerStatus;
use crate::api::state::ApiState;
use crate::api::views::{self, Reader};
use crate::api::zones::{secondaries, SecondaryView};
use crate::registry::health::next_wake;
use crate::registry::service::{now_ms, View};
use crate::registry::{Instance, Status};

/// Most instances listed on the page (the API pages through the rest).
pub(super) const INSTANCES_SHOWN: usize = 500;
/// Most services listed on the page.
pub(super) const SERVICES_SHOWN: usize = 500;

/// Everything the page's tables show, for one reader, at one time.
pub(super) struct Tables {
    pub reader: Reader,
    pub now_ms: u64,
    pub zones: Vec<ZoneRow>,
    pub services: Vec<ServiceRow>,
    pub services_total: usize,
    pub instances: Vec<InstanceRow>,
    pub instances_total: usize,
    /// The hysteresis window (self-removals per window are limited).
    pub window_ms: u64,
    pub server: ServerStatus,
}

pub(super) struct ZoneRow {
    pub origin: String,
    pub source: String,
    pub serial: Option<u32>,
    pub signed: bool,
    pub records: usize,
    pub kernel_answers: Option<u64>,
    pub fallback_answers: Option<u64>,
    pub secondaries: Vec<SecondaryView>,
    /// A registry zone served as last read (etcd or ZooKeeper out of
    /// reach).
    pub stale: bool,
    /// A secondary zone past its SOA expire (answers SERVFAIL).
    pub expired: bool,
    pub expires_in_secs: Option<i64>,
    pub load_failed: bool,
}

pub(super) struct ServiceRow {
    pub key: String,
    pub members: Vec<MemberRow>,
    /// Members listed in answers (of those shown).
    pub listed: usize,
    /// When hysteresis lets the next `down` member go (if one waits).
    pub next_withdrawal_ms: Option<u64>,
}

pub(super) struct MemberRow {
    pub id: CompactString,
    pub status: Status,
    pub state: MemberState,
    /// DNS shows the instance (only a token holder sees those it hides).
    pub in_dns: bool,
}

pub(super) enum MemberState {
    /// In the service's answers.
    Listed,
    /// Reported down, still in answers: hysteresis holds it.
    Held,
    /// Out of the service's answers by its own `down` report, since
    /// `since_ms` (0: it joined while down and was never listed); back
    /// once it reports up.
    Withdrawn { since_ms: u64 },
}

pub(super) struct InstanceRow {
    pub id: CompactString,
    pub owner: Option<CompactString>,
    pub addresses: Vec<String>,
    /// Service keys it is a member of, and whether it is listed there.
    pub services: Vec<(String, bool)>,
    pub status: Status,
    pub disabled: bool,
    pub lease_secs: u32,
    /// `None`: no lease here (mirrored from ZooKeeper, or kept by etcd).
    pub expires_at_ms: Option<u64>,
    /// The ZooKeeper node it mirrors.
    pub mirrors: Option<String>,
}

/// The tables for `reader` now.
pub(super) fn tables(s: &ApiState, reader: Reader, server: ServerStatus) -> Tables {
    let now = now_ms();
    let view = s.registry.view();
    let services = service_rows(&view, reader, now);
    let mut instances = Vec::new();
    let mut instances_total = 0;
    for i in view.registry.instances.values() {
        if views::shows(&view, reader, i) {
            if instances_total < INSTANCES_SHOWN {
                instances.push(instance_row(i));
            }
            instances_total += 1;
        }
    }
    Tables {
        reader,
        now_ms: now,
        zones: zone_rows(s, &view, &server),
        services_total: services.len(),
        services: services.into_iter().take(SERVICES_SHOWN).collect(),
        instances,
        instances_total,
        window_ms: view.policy.window_ms,
        server,
    }
}

fn zone_rows(s: &ApiState, view: &View, server: &ServerStatus) -> Vec<ZoneRow> {
    let stats = s.registry.stats();
    let registry_stale =
        stats.cut_off.load(Ordering::Relaxed) || stats.zookeeper.stale.load(Ordering::Relaxed);
    let mut secondaries = secondaries(s);
    let snapshot = s.store.snapshot();
    let mut rows: Vec<ZoneRow> = snapshot
        .zones()
        .map(|z| {
            let key = z.origin_key();
            let origin = z.origin().to_string();
            let extra = server.zones.get(&origin.to_ascii_lowercase());
            let in_registry = view
                .naming
                .zones
                .iter()
                .any(|r| LowerName::new(&r.name) == *key);
            let source = match extra {
                Some(e) => e.source.clone(),
                None if in_registry => "registry".into(),
                None if s.runtime.as_ref().is_some_and(|r| r.contains(key)) => "runtime".into(),
                None => "configured".into(),
            };
            ZoneRow {
                source,
                serial: z.serial(),
                signed: z.apex().rrset(RecordType::DNSKEY).is_some(),
                records: z.record_count(),
                kernel_answers: extra.and_then(|e| e.kernel_answers),
                fallback_answers: extra.map(|e| e.fallback_answers),
                secondaries: secondaries.remove(key).unwrap_or_default(),
                stale: in_registry && registry_stale,
                expired: z.is_expired(),
                expires_in_secs: extra.and_then(|e| e.expires_in_secs),
                load_failed: extra.is_some_and(|e| e.load_failed),
                origin,
            }
        })
        .collect();
    rows.sort_by(|a, b| a.origin.cmp(&b.origin));
    rows
}

fn service_rows(view: &View, reader: Reader, now: u64) -> Vec<ServiceRow> {
    // Hysteresis decides over every member, shown or not.
    let all = view.registry.services();
    views::services(view, reader)
        .into_iter()
        .map(|(key, members)| {
            let next_withdrawal_ms = all.get(&key).and_then(|everyone| {
                next_wake(
                    BTreeMap::from([(key.clone(), everyone.clone())]),
                    now,
                    &view.policy,
                )
            });
            let members: Vec<MemberRow> = members
                .iter()
                .map(|m| MemberRow {
                    id: m.id.clone(),
                    status: m.status,
                    state: member_state(m, &key),
                    in_dns: view.naming.in_dns(&view.registry, m),
                })
                .collect();
            ServiceRow {
                listed: members
                    .iter()
                    .filter(|m| !matches!(m.state, MemberState::Withdrawn { .. }))
                    .count(),
                key,
                members,
                next_withdrawal_ms,
            }
        })
        .collect()
}

fn member_state(m: &Instance, key: &str) -> MemberState {
    match m.withdrawn.get(key) {
        Some(since_ms) => MemberState::Withdrawn { since_ms },
        None if m.status == Status::Down => MemberState::Held,
        None => MemberState::Listed,
    }
}

fn instance_row(i: &Instance) -> InstanceRow {
    InstanceRow {
        id: i.id.clone(),
        owner: i.reg.owner.clone(),
        addresses: i.reg.addresses.iter().map(|a| a.to_string()).collect(),
        services: i
            .service_keys()
            .into_iter()
            .map(|k| {
                let listed = i.listed_in(&k);
                (k, listed)
            })
            .collect(),
        status: i.status,
        disabled: i.reg.disabled,
        lease_secs: i.reg.lease_secs,
        expires_at_ms: i.expires_at.is_finite().then(|| i.expires_at.get()),
        mirrors: i.reg.mirrors.as_deref().map(String::from),
    }
}
