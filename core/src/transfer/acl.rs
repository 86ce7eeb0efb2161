//! Who may transfer a zone (or send it NOTIFY): a list of rules, any of
//! which may match. A rule names source prefixes, a TSIG key, or both; with
//! both, the request must come from a listed prefix *and* be signed with
//! the key (Knot's ACL semantics; BIND's `allow-transfer { key k; }` is a
//! rule with only a key).

use std::net::IpAddr;

use hickory_proto::rr::Name;
use ipnet::IpNet;
use serde::Deserialize;

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AclRule {
    /// Source prefixes; empty = any address (then `key` is required).
    #[serde(default)]
    pub from: Vec<IpNet>,
    /// Name of a `[[tsig_key]]`; absent = no signature needed.
    #[serde(default)]
    pub key: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Acl {
    rules: Vec<AclRule>,
}

impl Acl {
    pub fn new(rules: Vec<AclRule>) -> Acl {
        Acl { rules }
    }

    /// The CNS default: loopback only, no key.
    pub fn loopback() -> Acl {
        Acl::new(vec![AclRule {
            from: vec![
                "127.0.0.0/8".parse().expect("prefix"),
                "::1/128".parse().expect("prefix"),
            ],
            key: None,
        }])
    }

    /// Whether a request from `addr`, signed with the verified key `key`
    /// (if any), is allowed.
    pub fn allows(&self, addr: IpAddr, key: Option<&Name>) -> bool {
        let addr = canonical(addr);
        self.rules.iter().any(|r| {
            let addr_ok = r.from.is_empty() || r.from.iter().any(|n| n.contains(&addr));
            let key_ok = match (&r.key, key) {
                (None, _) => true,
                (Some(want), Some(got)) => same_key(want, got),
                (Some(_), None) => false,
            };
            addr_ok && key_ok
        })
    }
}

/// IPv4-mapped IPv6 sources (from a dual-stack socket) match v4 prefixes.
fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 => v4,
    }
}

/// Key names compare as DNS names: case-insensitive, trailing dot optional.
pub fn same_key(configured: &str, name: &Name) -> bool {
    let a = configured.trim_end_matches('.');
    let b = name.to_ascii();
    a.eq_ignore_ascii_case(b.trim_end_matches('.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn default_is_loopback_only() {
        let acl = Acl::loopback();
        assert!(acl.allows(ip("127.0.0.1"), None));
        assert!(acl.allows(ip("127.0.0.2"), None));
        assert!(acl.allows(ip("::1"), None));
        assert!(acl.allows(ip("::ffff:127.0.0.1"), None), "v4-mapped");
        assert!(!acl.allows(ip("10.0.0.1"), None));
        assert!(!acl.allows(ip("2001:db8::1"), None));
    }

    #[test]
    fn rules_combine_address_and_key() {
        let key = Name::from_str("xfr.key.").unwrap();
        let other = Name::from_str("other.").unwrap();
        let acl = Acl::new(vec![
            AclRule {
                from: vec![],
                key: Some("XFR.key".into()),
            },
            AclRule {
                from: vec!["10.1.0.0/16".parse().unwrap()],
                key: Some("other".into()),
            },
        ]);
        assert!(
            acl.allows(ip("192.0.2.1"), Some(&key)),
            "key alone, any address"
        );
        assert!(!acl.allows(ip("192.0.2.1"), None), "no key");
        assert!(
            !acl.allows(ip("192.0.2.1"), Some(&other)),
            "other key, wrong net"
        );
        assert!(acl.allows(ip("10.1.2.3"), Some(&other)));
        assert!(!acl.allows(ip("10.2.0.1"), Some(&other)));
        assert!(
            !Acl::default().allows(ip("127.0.0.1"), None),
            "empty denies"
        );
    }
}
