//! `[anycast]`: the announce interface, the service addresses, the
//! self-check cadence and the rise/fall/flap rules (see `crate::anycast`).

use std::time::Duration;

use super::error::ConfigError;
use super::file::{AnycastConfig, Config};
use crate::anycast::{health::Rules, parse_check_name, Settings};

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
