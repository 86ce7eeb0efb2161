//! What a reader may see, shared by the JSON API and the status page so
//! the two filter by one rule: with the token, everything; anonymously
//! (`public_reads`), only what DNS shows.

use std::net::IpAddr;

use axum::http::HeaderMap;
use compact_str::CompactString;
use serde::Serialize;
use smallvec::SmallVec;

use super::state::{authorize, ApiError, ApiState};
use crate::registry::model::{BinderSpec, Membership};
use crate::registry::service::{now_ms, View};
use crate::registry::{Instance, Status};

/// Who reads: with the token, everything; anonymously (public reads),
/// only what DNS shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reader {
    Token,
    Public,
}

/// The reader of an API request (the bearer token, or public reads).
pub(super) fn reader(state: &ApiState, headers: &HeaderMap) -> Result<Reader, ApiError> {
    match authorize(state, headers, true) {
        Ok(()) => Ok(Reader::Token),
        Err(_) if state.public_reads => Ok(Reader::Public),
        Err(e) => Err(e),
    }
}

/// Whether `reader` may see `inst`.
pub(super) fn shows(view: &View, reader: Reader, inst: &Instance) -> bool {
    reader == Reader::Token || view.naming.in_dns(&view.registry, inst)
}

/// Each service (by key) with the members `reader` may see; services
/// with none left out.
pub(super) fn services(view: &View, reader: Reader) -> Vec<(String, Vec<&Instance>)> {
    view.registry
        .services()
        .into_iter()
        .map(|(key, mut members)| {
            members.retain(|m| shows(view, reader, m));
            (key, members)
        })
        .filter(|(_, members)| !members.is_empty())
        .collect()
}

#[derive(Serialize)]
pub(super) struct InstanceView {
    pub(super) id: CompactString,
    owner: Option<CompactString>,
    addresses: SmallVec<[IpAddr; 1]>,
    services: SmallVec<[Membership; 1]>,
    status: Status,
    /// Services the instance is withdrawn from by its own `down` report.
    withdrawn_from: Vec<String>,
    lease_secs: u32,
    /// Absent when etcd keeps the lease (`backend = "etcd"`): its expiry
    /// is etcd's, not known here.
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_in_ms: Option<u64>,
    disabled: bool,
    binder: Option<BinderSpec>,
    /// The ZooKeeper node the instance mirrors (changed there only).
    #[serde(skip_serializing_if = "Option::is_none")]
    mirrors: Option<String>,
    dns_names: Vec<String>,
}

pub(super) fn instance_view(view: &View, inst: &Instance) -> InstanceView {
    InstanceView {
        id: inst.id.clone(),
        owner: inst.reg.owner.clone(),
        addresses: inst.reg.addresses.clone(),
        services: inst.reg.services.clone(),
        status: inst.status,
        withdrawn_from: inst.withdrawn.keys().cloned().collect(),
        lease_secs: inst.reg.lease_secs,
        expires_in_ms: inst
            .expires_at
            .is_finite()
            .then(|| inst.expires_at.get().saturating_sub(now_ms())),
        disabled: inst.reg.disabled,
        binder: inst.reg.binder.as_deref().cloned(),
        mirrors: inst.reg.mirrors.as_deref().map(String::from),
        dns_names: view.naming.names_of(&view.registry, inst),
    }
}
