//! What `xdpdns ctl` and the server say to each other over the control
//! socket: one JSON request line, one JSON reply line, then close.

use serde::{Deserialize, Serialize};

use crate::transfer::notify::PeerStatus;

/// A request; `{"command":"status"}` on the wire.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Request {
    Status,
    Zones,
    ZoneReload {
        zone: String,
    },
    /// Add a primary zone at runtime (as `POST /v1/zones`).
    ZoneAdd {
        name: String,
        #[serde(default)]
        ns: Vec<String>,
        #[serde(default)]
        hostmaster: Option<String>,
        /// A zone file's text, read by the client.
        #[serde(default)]
        zone: Option<String>,
        /// Sign it online with this policy.
        #[serde(default)]
        dnssec_policy: Option<String>,
    },
    /// Remove a zone added at runtime.
    ZoneRemove {
        zone: String,
    },
    Secondaries,
    Registry,
    /// A signed zone's keys, with the DS for its parent; with
    /// `ds_published`, first notes that the parent serves that key's DS.
    Keys {
        zone: String,
        #[serde(default)]
        ds_published: Option<u16>,
    },
    /// Cumulative answer counts, which `ctl top` turns into rates.
    Counters,
    /// Withdraw the anycast addresses (and wait the drain time).
    Drain,
    /// Announce them again after `rise` passing self-checks.
    Resume,
}

/// The reply: `{"ok": …}` or `{"error": "…"}`. What `ok` holds follows
/// from the request: [`Status`], a list of [`ZoneInfo`], [`Reloaded`], a
/// list of [`PeerStatus`], [`RegistryInfo`] or [`Counters`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    Ok(serde_json::Value),
    Error(String),
}

impl Reply {
    pub fn ok(payload: &impl Serialize) -> Reply {
        match serde_json::to_value(payload) {
            Ok(v) => Reply::Ok(v),
            Err(e) => Reply::Error(format!("cannot encode the reply: {e}")),
        }
    }
}

/// Secondaries' transfer status, as `transfer-status` prints it.
pub type Secondaries = Vec<PeerStatus>;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub version: String,
    pub commit: String,
    pub pid: u32,
    pub uptime_secs: u64,
    pub listen: Vec<String>,
    /// `None`: the kernel path is off (reason in `xdp_off_reason`).
    pub xdp: Option<KernelStatus>,
    pub xdp_off_reason: Option<String>,
    pub answers: Counters,
    /// Share of all answers given in the kernel, 0..=1.
    pub kernel_share: f64,
    pub zones: usize,
    pub records: usize,
    /// The registry's ZooKeeper source, when configured.
    #[serde(default)]
    pub zookeeper: Option<SourceInfo>,
    /// dnstap, when on.
    #[serde(default)]
    pub dnstap: Option<DnstapStatus>,
    /// The compiled answer table (the fallback's hot path, and what the
    /// kernel table mirrors).
    #[serde(default)]
    pub answer_table: AnswerTableStatus,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AnswerTableStatus {
    pub entries: usize,
    /// Compiled from the zones as they are now; false while a compile
    /// runs (after a start, a reload or a burst of changes), when the
    /// full handler answers what the table would. Always true when
    /// entries are compiled on demand.
    pub current: bool,
    /// Entries are compiled when a query asks for them; none are held.
    #[serde(default)]
    pub on_demand: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DnstapStatus {
    pub target: String,
    pub connected: bool,
    pub written: u64,
    pub dropped: u64,
    pub kernel_samples: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelStatus {
    /// (interface, attach mode).
    pub interfaces: Vec<(String, String)>,
    pub generation: u32,
    pub entries: usize,
    pub bytes: u64,
    /// Entries the table had no room for (answered by the fallback).
    pub left_out: u64,
    pub healthy: bool,
}

/// Answers so far, summed over threads and CPUs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    pub kernel: u64,
    pub fallback_udp: u64,
    pub fallback_tcp: u64,
    /// By RCODE mnemonic, both paths.
    pub by_rcode: std::collections::BTreeMap<String, u64>,
    pub kernel_passed: u64,
    pub udp_receive_drops: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ZoneInfo {
    pub origin: String,
    pub serial: Option<u32>,
    pub records: usize,
    /// `file PATH`, `secondary of ADDR,…` or `registry`.
    pub source: String,
    /// Holds DNSKEY records (served as loaded or transferred).
    pub signed: bool,
    /// Secondary zones past their SOA expire answer SERVFAIL.
    pub expired: bool,
    /// The last load or transfer attempt: unix seconds and its result.
    pub last_load: Option<LoadOutcome>,
    /// Secondary zones: seconds until expiry without a refresh.
    pub expires_in_secs: Option<i64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadOutcome {
    pub at: u64,
    pub ok: bool,
    pub detail: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Reloaded {
    pub zone: String,
    pub detail: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RegistryInfo {
    /// Instances by status (`up`, `down`, …).
    pub instances: std::collections::BTreeMap<String, usize>,
    pub services: usize,
    pub owners_disabled: usize,
    /// Instances held in DNS by hysteresis that will be withdrawn.
    pub pending_withdrawals: usize,
    pub journal_bytes: u64,
    pub lease_expiries: u64,
    /// The ZooKeeper source, when configured.
    #[serde(default)]
    pub zookeeper: Option<SourceInfo>,
}

/// A registry source that mirrors ZooKeeper.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceInfo {
    /// No session, or not yet read in full: served as last read.
    pub stale: bool,
    pub nodes: u64,
    pub mirrored: u64,
    pub skipped: u64,
    pub sessions: u64,
    pub writes: u64,
    pub leaving: u64,
}

/// Longest request line accepted.
pub const MAX_REQUEST: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_replies_round_trip_as_one_json_line() {
        let r = Request::ZoneReload {
            zone: "example.com.".into(),
        };
        let line = serde_json::to_string(&r).unwrap();
        assert_eq!(line, r#"{"command":"zone_reload","zone":"example.com."}"#);
        assert_eq!(serde_json::from_str::<Request>(&line).unwrap(), r);
        let reply = Reply::ok(&Reloaded {
            zone: "example.com.".into(),
            detail: "serial 5".into(),
        });
        let line = serde_json::to_string(&reply).unwrap();
        assert!(!line.contains('\n'));
        assert_eq!(serde_json::from_str::<Reply>(&line).unwrap(), reply);
        let err: Reply = serde_json::from_str(r#"{"error":"no such zone"}"#).unwrap();
        assert_eq!(err, Reply::Error("no such zone".into()));
    }
}
