//! What the running server tells the status page and `/v1/status`
//! beyond the registry and the zone store: answer counters of both
//! paths, rate limiting and attack counters, the kernel path, anycast,
//! and per-zone details the API cannot see (where a zone comes from, its
//! answers). The server fills it in through a [`StatusSource`]; the API
//! never names the server's parts.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use serde::Serialize;

/// Reads the running server's counters (the same ones `/metrics` and
/// `xdpdns ctl` read).
pub trait StatusSource: Send + Sync {
    fn status(&self) -> Pin<Box<dyn Future<Output = ServerStatus> + Send + '_>>;
}

/// The server's [`StatusSource`], set once it has started the parts
/// the source reads (after the API itself).
#[derive(Clone, Default)]
pub struct StatusHook(Arc<OnceLock<Arc<dyn StatusSource>>>);

impl StatusHook {
    /// Sets the source; a second call is ignored.
    pub fn set(&self, source: Arc<dyn StatusSource>) {
        let _ = self.0.set(source);
    }

    /// The server's status, or an empty one (`available: false`) while
    /// the server is still starting.
    pub async fn read(&self) -> ServerStatus {
        match self.0.get() {
            Some(s) => {
                let mut status = s.status().await;
                status.available = true;
                status
            }
            None => ServerStatus::default(),
        }
    }
}

/// Counters are totals since the server started; a reader takes rates
/// from two readings and their `at_ms`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ServerStatus {
    /// False while the server is still starting (all counters zero).
    pub available: bool,
    /// When the counters were read (Unix milliseconds).
    pub at_ms: u64,
    pub uptime_secs: u64,
    pub answers: Answers,
    /// The XDP path, when it runs.
    pub kernel: Option<KernelPath>,
    /// Why the XDP path is off, when it is and was configured.
    pub xdp_off_reason: Option<String>,
    /// `[rrl]` counters of the fallback (`None`: rate limiting is off).
    pub rrl_fallback: Option<RrlCounts>,
    /// `[rrl]` counters of the kernel (`None`: off, or no XDP path).
    pub rrl_kernel: Option<RrlCounts>,
    pub attacks: Attacks,
    /// `[anycast]`, when configured.
    pub anycast: Option<AnycastState>,
    /// Per zone, by origin in lower case with the final dot.
    #[serde(skip)]
    pub zones: HashMap<String, ZoneExtra>,
}

/// Answers sent, by path (totals since start).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Answers {
    /// By the XDP program (NOERROR, NODATA, referrals and NXDOMAIN).
    pub kernel: u64,
    pub fallback_udp: u64,
    pub fallback_tcp: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct KernelPath {
    pub attached: Vec<Attached>,
    /// (name, type) entries in the kernel answer table.
    pub entries: usize,
    pub generation: u32,
    pub healthy: bool,
    /// Queries the program passed to the fallback (any reason).
    pub passed: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Attached {
    pub interface: String,
    /// `native`, `generic` or `offload`.
    pub mode: String,
}

/// UDP responses rate limiting acted on.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct RrlCounts {
    /// Over their rate.
    pub limited: u64,
    /// Limited, sent truncated (TC=1).
    pub slipped: u64,
    /// Limited, dropped.
    pub dropped: u64,
    /// Exempt by a valid server cookie.
    pub exempt: u64,
}

/// What hostile or broken traffic leaves in the counters.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Attacks {
    /// Queries lost because a UDP socket's receive queue was full.
    pub udp_receive_drops: u64,
    /// DNS over TCP connections closed at once at the connection cap.
    pub tcp_refused: u64,
    /// DNS over TCP connections closed idle.
    pub tcp_idle_closed: u64,
    /// FORMERR answers (malformed queries), both paths.
    pub formerr: u64,
    /// REFUSED answers (not our zones, transfers not allowed).
    pub refused: u64,
    /// Packets the kernel could not parse (passed to the fallback).
    pub kernel_parse_errors: u64,
    /// Packets from sources no reply may go to (reflection attempts).
    pub kernel_bad_sources: u64,
}

/// The anycast coupling: announced while the self-checks pass.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AnycastState {
    pub interface: String,
    pub addresses: Vec<String>,
    pub announced: bool,
}

/// What the server knows of a zone that the zone store does not say.
#[derive(Clone, Debug, Default)]
pub struct ZoneExtra {
    /// Where it comes from: `file`, `secondary`, `registry`, `runtime`,
    /// `catalog` (the catalog zone produced here), `catalog member` (a
    /// zone of a followed catalog) or `journal` (no longer configured).
    pub source: String,
    /// Answers from the kernel (`None`: no XDP path).
    pub kernel_answers: Option<u64>,
    pub fallback_answers: u64,
    /// Secondary zones: seconds before the copy expires without a refresh.
    pub expires_in_secs: Option<i64>,
    /// The last load or refresh failed (the previous version serves).
    pub load_failed: bool,
}
