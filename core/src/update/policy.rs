//! Who may change what with an UPDATE: grants in the spirit of BIND's
//! `update-policy` and Knot's ACL `update-owner`/`update-type`. A grant
//! names its requester (a TSIG key, source prefixes, or both), the zones
//! it covers, the owner names (one name, a subtree, a wildcard pattern or
//! the whole zone) and the types. An update is allowed only if every
//! record it adds or deletes is covered by a grant of its requester.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};

use hickory_proto::rr::{LowerName, Name, RecordType};
use ipnet::IpNet;

/// Which owner names a grant covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NameMatch {
    /// Every name of the zones it covers.
    Zone,
    /// This name only.
    Exact(LowerName),
    /// This name and every name below it.
    Subdomain(LowerName),
    /// Names of as many labels as the pattern, each `*` label matching
    /// any one label: `_acme-challenge.*.example.com.`.
    Wildcard(Vec<Vec<u8>>),
}

impl NameMatch {
    /// A wildcard pattern from its presentation form.
    pub fn wildcard(pattern: &Name) -> NameMatch {
        NameMatch::Wildcard(
            pattern
                .iter()
                .map(|l| l.to_ascii_lowercase())
                .collect::<Vec<_>>(),
        )
    }

    pub fn covers(&self, name: &LowerName) -> bool {
        match self {
            NameMatch::Zone => true,
            NameMatch::Exact(n) => n == name,
            NameMatch::Subdomain(n) => n.zone_of(name),
            NameMatch::Wildcard(pattern) => {
                let name = Name::from(name);
                name.num_labels() as usize == pattern.len()
                    && name
                        .iter()
                        .zip(pattern)
                        .all(|(l, p)| p == b"*" || l.eq_ignore_ascii_case(p))
            }
        }
    }
}

/// One grant of the update policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The TSIG key the request must be signed with (`None`: unsigned
    /// requests, from `from` only); names compare case-insensitively.
    pub key: Option<Name>,
    /// Source prefixes (empty: any address; then a key is required).
    pub from: Vec<IpNet>,
    /// The zones it covers (empty: every primary zone).
    pub zones: Vec<LowerName>,
    pub names: NameMatch,
    /// The types it covers (empty: every type but SOA, which only the
    /// whole-zone grants may replace).
    pub types: Vec<RecordType>,
}

impl Grant {
    fn requester_matches(&self, peer: IpAddr, key: Option<&Name>) -> bool {
        let peer = match peer {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(peer, IpAddr::V4),
            v4 => v4,
        };
        let from_ok = self.from.is_empty() || self.from.iter().any(|n| n.contains(&peer));
        let key_ok = match (&self.key, key) {
            (None, None) => true,
            (Some(want), Some(got)) => LowerName::new(want) == LowerName::new(got),
            _ => false,
        };
        from_ok && key_ok
    }

    fn covers_zone(&self, zone: &LowerName) -> bool {
        self.zones.is_empty() || self.zones.contains(zone)
    }

    fn covers(&self, name: &LowerName, rtype: RecordType) -> bool {
        let type_ok = if self.types.is_empty() {
            rtype != RecordType::SOA || self.names == NameMatch::Zone
        } else {
            self.types.contains(&rtype)
        };
        type_ok && self.names.covers(name)
    }
}

/// The update policy: every grant, and the zones that may take updates
/// at all (the primary zones: file zones and zones added at runtime).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpdatePolicy {
    grants: Vec<Grant>,
    primaries: HashSet<LowerName>,
    /// Secondary zones whose UPDATEs are forwarded to their primaries
    /// (RFC 2136 §6), in order of preference.
    forward: HashMap<LowerName, Vec<SocketAddr>>,
}

/// What the policy lets one requester change in one zone (its grants,
/// copied: an update outlives a policy swapped by a reload).
#[derive(Clone, Debug)]
pub struct Permission {
    grants: Vec<Grant>,
}

impl UpdatePolicy {
    /// `grants` for `primaries` (zones other than these never take
    /// updates, whatever a grant says).
    pub fn new(grants: Vec<Grant>, primaries: impl IntoIterator<Item = LowerName>) -> UpdatePolicy {
        UpdatePolicy {
            grants,
            primaries: primaries.into_iter().collect(),
            forward: HashMap::new(),
        }
    }

    /// Forwards the UPDATEs of these secondary zones to their primaries.
    pub fn forwarding(mut self, forward: HashMap<LowerName, Vec<SocketAddr>>) -> UpdatePolicy {
        self.forward = forward;
        self
    }

    /// The primaries an UPDATE of `zone` is forwarded to, if it is.
    pub fn forward_to(&self, zone: &LowerName) -> Option<&[SocketAddr]> {
        self.forward.get(zone).map(Vec::as_slice)
    }

    /// The same grants for another set of primary zones (a zone added or
    /// removed at runtime).
    pub fn with_primaries(&self, primaries: impl IntoIterator<Item = LowerName>) -> UpdatePolicy {
        UpdatePolicy::new(self.grants.clone(), primaries).forwarding(self.forward.clone())
    }

    pub fn primaries(&self) -> impl Iterator<Item = &LowerName> {
        self.primaries.iter()
    }

    /// Whether `zone` is a primary zone a grant covers: other zones take
    /// no updates at all (REFUSED, as NSD and Knot without an ACL).
    pub fn takes_updates(&self, zone: &LowerName) -> bool {
        self.primaries.contains(zone) && self.grants.iter().any(|g| g.covers_zone(zone))
    }

    /// The grants of the requester (`peer`, signed with the verified
    /// `key` or unsigned) in `zone`; `None` when it has none.
    pub fn permission(
        &self,
        zone: &LowerName,
        peer: IpAddr,
        key: Option<&Name>,
    ) -> Option<Permission> {
        let grants: Vec<Grant> = self
            .grants
            .iter()
            .filter(|g| g.covers_zone(zone) && g.requester_matches(peer, key))
            .cloned()
            .collect();
        (!grants.is_empty()).then_some(Permission { grants })
    }
}

impl Permission {
    /// No grant at all (an UPDATE forwarded, not applied here).
    pub fn none() -> Permission {
        Permission { grants: Vec::new() }
    }

    /// Whether the requester may change the `rtype` RRset at `name`.
    pub fn allows(&self, name: &LowerName, rtype: RecordType) -> bool {
        self.grants.iter().any(|g| g.covers(name, rtype))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn lower(s: &str) -> LowerName {
        LowerName::from(Name::from_str(s).unwrap())
    }

    fn grant(key: Option<&str>, names: NameMatch, types: &[RecordType]) -> Grant {
        Grant {
            key: key.map(|k| Name::from_str(k).unwrap()),
            from: vec![],
            zones: vec![lower("example.com.")],
            names,
            types: types.to_vec(),
        }
    }

    const LOOPBACK: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn name_matches() {
        let sub = NameMatch::Subdomain(lower("k8s.example.com."));
        assert!(sub.covers(&lower("k8s.example.com.")));
        assert!(sub.covers(&lower("a.b.K8S.example.com.")));
        assert!(!sub.covers(&lower("xk8s.example.com.")));
        assert!(!sub.covers(&lower("example.com.")));
        let exact = NameMatch::Exact(lower("www.example.com."));
        assert!(exact.covers(&lower("WWW.example.com.")));
        assert!(!exact.covers(&lower("a.www.example.com.")));
        let wild = NameMatch::wildcard(&Name::from_str("_acme-challenge.*.example.com.").unwrap());
        assert!(wild.covers(&lower("_acme-challenge.www.example.com.")));
        assert!(!wild.covers(&lower("_acme-challenge.a.b.example.com.")));
        assert!(!wild.covers(&lower("www.example.com.")));
    }

    #[test]
    fn requester_needs_its_key_or_its_address() {
        let key = Name::from_str("ACME.").unwrap();
        let other = Name::from_str("other.").unwrap();
        let policy = UpdatePolicy::new(
            vec![
                grant(Some("acme."), NameMatch::Zone, &[RecordType::TXT]),
                Grant {
                    key: None,
                    from: vec!["10.0.0.0/8".parse().unwrap()],
                    ..grant(None, NameMatch::Zone, &[])
                },
            ],
            [lower("example.com."), lower("other.org.")],
        );
        let zone = lower("example.com.");
        assert!(policy.takes_updates(&zone));
        assert!(
            !policy.takes_updates(&lower("other.org.")),
            "no grant covers it"
        );
        assert!(
            !policy.with_primaries([]).takes_updates(&zone),
            "not a primary"
        );
        assert!(policy.permission(&zone, LOOPBACK, Some(&key)).is_some());
        assert!(policy.permission(&zone, LOOPBACK, Some(&other)).is_none());
        assert!(policy.permission(&zone, LOOPBACK, None).is_none());
        let ten = "10.1.2.3".parse().unwrap();
        assert!(policy.permission(&zone, ten, None).is_some());
        let mapped = "::ffff:10.1.2.3".parse().unwrap();
        assert!(policy.permission(&zone, mapped, None).is_some());
        // A signed request does not match an unsigned grant.
        assert!(policy.permission(&zone, ten, Some(&other)).is_none());
    }

    #[test]
    fn types_limit_what_a_grant_changes() {
        let policy = UpdatePolicy::new(
            vec![
                grant(Some("acme."), NameMatch::Zone, &[RecordType::TXT]),
                grant(
                    Some("dns."),
                    NameMatch::Subdomain(lower("k8s.example.com.")),
                    &[],
                ),
            ],
            [lower("example.com.")],
        );
        let zone = lower("example.com.");
        let acme = Name::from_str("acme.").unwrap();
        let p = policy.permission(&zone, LOOPBACK, Some(&acme)).unwrap();
        assert!(p.allows(&lower("_acme-challenge.example.com."), RecordType::TXT));
        assert!(!p.allows(&lower("_acme-challenge.example.com."), RecordType::A));
        let dns = Name::from_str("dns.").unwrap();
        let p = policy.permission(&zone, LOOPBACK, Some(&dns)).unwrap();
        assert!(p.allows(&lower("web.k8s.example.com."), RecordType::A));
        assert!(!p.allows(&lower("web.example.com."), RecordType::A));
        // Every type but SOA, which only a whole-zone grant replaces.
        assert!(!p.allows(&lower("k8s.example.com."), RecordType::SOA));
    }
}
