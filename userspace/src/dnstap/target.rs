//! What the tap writes to, and what it counts (shared by the tap and
//! its writer).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};

/// Where the messages go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Unix(p) => write!(f, "unix:{}", p.display()),
            Target::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

/// The tap at a glance (`ctl status`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TapStatus {
    pub target: String,
    pub connected: bool,
    pub written: u64,
    pub dropped: u64,
    pub kernel_samples: u64,
}

/// The tap's counters (`/metrics`, `ctl status`).
#[derive(Debug, Default)]
pub struct TapStats {
    /// Messages written to the collector.
    pub written: AtomicU64,
    /// Dropped because the queue was full (collector slow or gone).
    pub dropped_queue: AtomicU64,
    /// Lost with a connection that broke while they were being written.
    pub dropped_write: AtomicU64,
    /// Kernel samples received from the ring buffer, by kind.
    pub kernel_samples: [AtomicU64; xdpdns_common::tap::kind::COUNT],
    /// 1 while a collector is connected.
    pub connected: AtomicBool,
}
