//! `[dnstap]`: where dnstap goes (a Unix socket or a TCP address, a
//! Frame Streams reader such as `fstrm_capture`), what each path taps
//! and how often, and for which zones.

use std::net::SocketAddr;
use std::path::PathBuf;

use hickory_proto::rr::{LowerName, Name};
use serde::Deserialize;

use crate::dnstap::Target;
use xdpdns_core::dnstap::{policy::kind, Policy};

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DnstapConfig {
    /// A Unix socket a Frame Streams reader listens on.
    pub socket: Option<PathBuf>,
    /// Or a TCP address one listens on.
    pub address: Option<SocketAddr>,
    /// The fallback's exchanges: one in this many (0: none, 1: all).
    pub fallback: u32,
    /// Write the queries (AUTH_QUERY) and the responses (AUTH_RESPONSE).
    pub queries: bool,
    pub responses: bool,
    /// The kernel's outcomes, one in this many each (0: none): answers,
    /// negative answers and referrals, rate-limited answers, and DNS
    /// queries passed up to the fallback.
    pub kernel_answers: u32,
    pub kernel_negatives: u32,
    pub kernel_limited: u32,
    pub kernel_passed: u32,
    /// Only names at or below these zones (empty: all).
    pub zones: Vec<String>,
    /// Messages waiting for the collector; past this they are dropped
    /// (counted), never waited for.
    pub queue: usize,
}

impl Default for DnstapConfig {
    fn default() -> Self {
        DnstapConfig {
            socket: None,
            address: None,
            fallback: 1,
            queries: true,
            responses: true,
            kernel_answers: 100,
            kernel_negatives: 100,
            kernel_limited: 100,
            kernel_passed: 100,
            zones: Vec::new(),
            queue: 16_384,
        }
    }
}

impl DnstapConfig {
    /// Where the messages go, or why the section is unusable (the key).
    pub fn target(&self, base: &std::path::Path) -> Result<Target, (&'static str, String)> {
        match (&self.socket, self.address) {
            (Some(path), None) => Ok(Target::Unix(base.join(path))),
            (None, Some(addr)) => Ok(Target::Tcp(addr)),
            (Some(_), Some(_)) => Err((
                "dnstap.socket",
                "give either dnstap.socket or dnstap.address, not both".into(),
            )),
            (None, None) => Err((
                "dnstap.socket",
                "[dnstap] needs a socket (a Unix socket path) or an address (host:port)".into(),
            )),
        }
    }

    /// What is tapped, or the key that is wrong.
    pub fn policy(&self) -> Result<Policy, (&'static str, String)> {
        if self.queue == 0 {
            return Err(("dnstap.queue", "must be at least 1".into()));
        }
        let zones = self
            .zones
            .iter()
            .map(|z| {
                Name::from_ascii(z)
                    .map(|n| LowerName::new(&n.to_lowercase()))
                    .map_err(|e| ("dnstap.zones", format!("{z:?}: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut kernel_every = [0; kind::COUNT];
        kernel_every[kind::ANSWER as usize] = self.kernel_answers;
        kernel_every[kind::NEGATIVE as usize] = self.kernel_negatives;
        kernel_every[kind::LIMITED as usize] = self.kernel_limited;
        kernel_every[kind::PASSED as usize] = self.kernel_passed;
        Ok(Policy {
            fallback_every: self.fallback,
            queries: self.queries,
            responses: self.responses,
            kernel_every,
            zones,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> DnstapConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn one_target_and_the_kinds_in_their_slots() {
        let c = parse("socket = \"tap.sock\"\nkernel_answers = 7\nkernel_passed = 0\nzones = [\"Example.com\"]\n");
        assert_eq!(
            c.target(std::path::Path::new("/etc/xdpdns")),
            Ok(Target::Unix("/etc/xdpdns/tap.sock".into()))
        );
        let p = c.policy().unwrap();
        assert_eq!(p.kernel_every, [7, 100, 100, 0]);
        assert_eq!(p.fallback_every, 1);
        assert_eq!(p.zones[0].to_string(), "example.com");
        let both = parse("socket = \"a\"\naddress = \"127.0.0.1:6000\"\n");
        assert_eq!(
            both.target(std::path::Path::new("/")).unwrap_err().0,
            "dnstap.socket"
        );
        assert!(parse("").target(std::path::Path::new("/")).is_err());
        let bad = parse("address = \"127.0.0.1:6000\"\nzones = [\"a..b\"]\n");
        assert_eq!(bad.policy().unwrap_err().0, "dnstap.zones");
        assert!(toml::from_str::<DnstapConfig>("sockett = \"x\"").is_err());
    }

    /// The reference configuration shows the section commented out (it
    /// is off by default): uncommented, it states the defaults.
    #[test]
    fn the_reference_section_states_the_defaults() {
        let text = include_str!("../../../examples/reference.toml");
        let section: String = text
            .lines()
            .skip_while(|l| !l.starts_with("# [dnstap]"))
            .skip(1)
            .take_while(|l| l.starts_with("# "))
            .map(|l| format!("{}\n", &l[2..]))
            .collect();
        let c = parse(&section);
        assert_eq!(
            c,
            DnstapConfig {
                socket: Some("dnstap.sock".into()),
                ..DnstapConfig::default()
            }
        );
    }
}
