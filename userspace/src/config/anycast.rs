//! `[anycast]`: the announce interface, the service addresses, the
//! self-check cadence and the rise/fall/flap rules (see `crate::anycast`).

use std::time::Duration;

use ipnet::IpNet;
use serde::Deserialize;

use super::{Config, ConfigError};
use crate::anycast::{health::Rules, parse_check_name, Settings};

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AnycastConfig {
    /// The TUN device xdpdns creates and holds; the routing daemon
    /// exports its addresses (BIRD: `protocol direct`).
    pub interface: String,
    /// The service addresses, announced as these prefixes.
    pub addresses: Vec<IpNet>,
    /// A name and type in a served zone, e.g. `"example.com. SOA"`.
    pub check_name: String,
    #[serde(default = "default_interval")]
    pub check_interval_ms: u64,
    /// Failing checks in a row before withdrawing.
    #[serde(default = "default_count")]
    pub fall: u32,
    /// Passing checks in a row before announcing.
    #[serde(default = "default_count")]
    pub rise: u32,
    /// SIGTERM: withdrawn this long before the server stops.
    #[serde(default = "default_drain")]
    pub drain_ms: u64,
    /// Hold-down after a second withdrawal in a row of flaps, doubling
    /// with each further one up to `hold_down_max_ms`.
    #[serde(default = "default_hold")]
    pub hold_down_ms: u64,
    #[serde(default = "default_hold_max")]
    pub hold_down_max_ms: u64,
    /// Announced this long, a node's flap count starts again.
    #[serde(default = "default_hold_max")]
    pub flap_reset_ms: u64,
    /// Run (by `sh -c`) after announcing / withdrawing, for routing
    /// daemons that do not watch interfaces (FRR, ExaBGP, GoBGP).
    #[serde(default)]
    pub announce_command: Option<String>,
    #[serde(default)]
    pub withdraw_command: Option<String>,
}

fn default_interval() -> u64 {
    1000
}
fn default_count() -> u32 {
    3
}
fn default_drain() -> u64 {
    2000
}
fn default_hold() -> u64 {
    10_000
}
fn default_hold_max() -> u64 {
    300_000
}

impl AnycastConfig {
    pub fn rules(&self) -> Rules {
        Rules {
            rise: self.rise,
            fall: self.fall,
            hold: Duration::from_millis(self.hold_down_ms),
            hold_max: Duration::from_millis(self.hold_down_max_ms),
            flap_reset: Duration::from_millis(self.flap_reset_ms),
        }
    }

    /// What the anycast driver runs by.
    pub fn settings(&self) -> Settings {
        Settings {
            interface: self.interface.clone(),
            addresses: self.addresses.clone(),
            rules: self.rules(),
            check_interval: Duration::from_millis(self.check_interval_ms),
            drain: Duration::from_millis(self.drain_ms),
            announce_command: self.announce_command.clone(),
            withdraw_command: self.withdraw_command.clone(),
        }
    }
}

impl Config {
    pub(super) fn validate_anycast(&self) -> Result<(), ConfigError> {
        let Some(a) = &self.anycast else {
            return Ok(());
        };
        if a.interface.is_empty() || a.interface.len() > 15 {
            return Err(self.invalid("anycast.interface", "must be 1 to 15 bytes"));
        }
        if a.addresses.is_empty() {
            return Err(self.invalid("anycast.addresses", "at least one address is required"));
        }
        if let Err(e) = parse_check_name(&a.check_name) {
            return Err(self.invalid("anycast.check_name", e));
        }
        if a.check_interval_ms < 10 {
            return Err(self.invalid("anycast.check_interval_ms", "must be at least 10"));
        }
        if a.rise == 0 || a.fall == 0 {
            let key = if a.rise == 0 { "rise" } else { "fall" };
            return Err(self.invalid(format!("anycast.{key}"), "must be at least 1"));
        }
        if a.hold_down_max_ms < a.hold_down_ms {
            return Err(self.invalid("anycast.hold_down_max_ms", "must be at least hold_down_ms"));
        }
        Ok(())
    }
}
