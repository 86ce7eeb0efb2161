//! What clients register: instances, their service memberships and their
//! Binder host/service records, validated into a canonical (lower-cased)
//! form. Pure: no clock, no I/O.

use std::collections::BTreeSet;
use std::net::IpAddr;

use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use super::error::RegistryError;

/// An instance as a client sends it (`PUT /v1/instances/{id}`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct InstanceSpec {
    /// CNS owner (account UUID or DNS-safe login); required for CNS names.
    #[serde(default)]
    pub owner: Option<String>,
    pub addresses: Vec<IpAddr>,
    /// CNS service memberships, in the `triton.cns.services` tag syntax
    /// (`name[:port][:key=value]*`) or as objects.
    #[serde(default)]
    pub services: Vec<MembershipInput>,
    /// Self-reported health; `down` removes the instance from its services
    /// (subject to hysteresis) but keeps its instance names.
    #[serde(default)]
    pub status: Status,
    /// Lease in seconds; the instance disappears unless heartbeats renew it.
    pub lease_secs: Option<u32>,
    /// Per-instance opt-out (`triton.cns.disable`): listed nowhere.
    #[serde(default)]
    pub disabled: bool,
    /// Binder-style host record (and optional service record).
    #[serde(default)]
    pub binder: Option<BinderSpec>,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    #[default]
    Up,
    Down,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum MembershipInput {
    Tag(String),
    Object(Membership),
}

/// One service an instance belongs to; a port makes an SRV record.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(deny_unknown_fields)]
pub struct Membership {
    pub name: CompactString,
    #[serde(default)]
    pub port: Option<u16>,
    /// SRV protocol label without the underscore (default `tcp`).
    #[serde(default = "default_proto")]
    pub proto: CompactString,
    #[serde(default)]
    pub priority: u16,
    #[serde(default = "default_weight")]
    pub weight: u16,
}

fn default_proto() -> CompactString {
    CompactString::const_new("tcp")
}

fn default_weight() -> u16 {
    10
}

/// Binder host record types and what each may do (Registrar README,
/// "Registration of host records").
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum HostType {
    DbHost,
    Host,
    LoadBalancer,
    MorayHost,
    OpsHost,
    RedisHost,
    RrHost,
}

impl HostType {
    /// Whether a query for the host name itself is answered.
    pub fn queryable(self) -> bool {
        !matches!(self, HostType::OpsHost | HostType::RrHost)
    }

    /// Whether the host is listed under its service record.
    pub fn serviceable(self) -> bool {
        !matches!(self, HostType::DbHost | HostType::Host)
    }
}

/// A Binder registration: host records `<id>.<domain>` and aliases, and
/// with `service`, the service record at `<domain>`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BinderSpec {
    pub domain: String,
    #[serde(rename = "type")]
    pub host_type: HostType,
    /// Fully-qualified extra host names for this instance.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Ports for SRV answers; empty = the service's port.
    #[serde(default)]
    pub ports: Vec<u16>,
    /// Host record TTL (`hostRecord.ttl`).
    #[serde(default)]
    pub ttl: Option<u32>,
    #[serde(default)]
    pub service: Option<BinderService>,
    /// The host record's own label, when it is not the instance id (a
    /// ZooKeeper node's name: the same label may be a host under several
    /// domains, while instance ids are unique).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// Binder's `registration.service.service` object.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BinderService {
    /// Service label with its underscore, e.g. `_http` ("srvce" is not a typo).
    pub srvce: String,
    pub proto: String,
    pub port: u16,
    /// SRV TTL.
    #[serde(default)]
    pub ttl: Option<u32>,
}

/// A validated, canonical registration (lower-case names, sorted sets).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub struct Registration {
    pub owner: Option<CompactString>,
    pub addresses: SmallVec<[IpAddr; 1]>,
    pub services: SmallVec<[Membership; 1]>,
    pub lease_secs: u32,
    pub disabled: bool,
    pub binder: Option<Box<BinderSpec>>,
    /// The ZooKeeper node this instance mirrors: it lives as long as the
    /// node does (no lease), and only the ZooKeeper source may change it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirrors: Option<Box<str>>,
}

/// Longest lease accepted (a day): leases are for liveness, not storage.
pub const MAX_LEASE_SECS: u32 = 86_400;

fn bad(field: impl Into<String>, message: impl Into<String>) -> RegistryError {
    RegistryError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// Checks one DNS label: letters, digits and inner hyphens, 1–63 bytes
/// (an optional leading underscore for SRV labels). Returns it lower-cased.
pub fn label(field: &str, s: &str, underscore: bool) -> Result<String, RegistryError> {
    let body = if underscore {
        s.strip_prefix('_')
            .ok_or_else(|| bad(field, format!("{s:?} must start with '_'")))?
    } else {
        s
    };
    if body.is_empty() || s.len() > 63 {
        return Err(bad(field, format!("{s:?} must be 1 to 63 characters")));
    }
    let ok = body.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !body.starts_with('-')
        && !body.ends_with('-');
    if !ok {
        return Err(bad(
            field,
            format!("{s:?} is not a DNS label (letters, digits and inner hyphens only)"),
        ));
    }
    Ok(s.to_ascii_lowercase())
}

/// Checks a dotted domain name (no trailing dot needed), lower-cased.
pub fn domain(field: &str, s: &str) -> Result<String, RegistryError> {
    let trimmed = s.strip_suffix('.').unwrap_or(s);
    if trimmed.is_empty() || trimmed.len() > 253 {
        return Err(bad(field, format!("{s:?} must be 1 to 253 characters")));
    }
    let labels: Result<Vec<String>, _> =
        trimmed.split('.').map(|l| label(field, l, false)).collect();
    Ok(labels?.join("."))
}

/// Parses one `triton.cns.services` entry: `name[:port][:key=value]*` with
/// keys `port`, `priority`, `weight`, `proto`; the last value of a key wins.
pub fn parse_tag(field: &str, tag: &str) -> Result<Membership, RegistryError> {
    let mut parts = tag.split(':');
    let name = parts.next().unwrap_or_default();
    let mut m = Membership {
        name: name.into(),
        port: None,
        proto: default_proto(),
        priority: 0,
        weight: default_weight(),
    };
    let num = |k: &str, v: &str| -> Result<u16, RegistryError> {
        v.parse::<u16>()
            .map_err(|_| bad(field, format!("{tag:?}: {k} {v:?} is not a number 0-65535")))
    };
    for (i, part) in parts.enumerate() {
        match part.split_once('=') {
            None if i == 0 => m.port = Some(num("port", part)?),
            None => {
                return Err(bad(
                    field,
                    format!("{tag:?}: expected key=value, got {part:?}"),
                ))
            }
            Some(("port", v)) => m.port = Some(num("port", v)?),
            Some(("priority", v)) => m.priority = num("priority", v)?,
            Some(("weight", v)) => m.weight = num("weight", v)?,
            Some(("proto", v)) => m.proto = v.into(),
            Some((k, _)) => return Err(bad(field, format!("{tag:?}: unknown key {k:?}"))),
        }
    }
    Ok(m)
}

/// What one registration may hold (`[registry.limits]`): a client cannot
/// make one write arbitrarily expensive for the registry and for DNS.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Addresses per instance.
    pub max_addresses: usize,
    /// CNS service memberships per instance.
    pub max_services: usize,
    /// Binder aliases per instance.
    pub max_aliases: usize,
    /// Largest API request body, in bytes (413 above).
    pub max_body_bytes: usize,
    /// Instances in the registry (a new one over it gets 422).
    pub max_instances: usize,
    /// Instances of one CNS owner.
    pub max_instances_per_owner: usize,
    /// Open API connections, in all and from one client address (over
    /// either, a new connection gets one 503 and is closed).
    pub max_connections: usize,
    pub max_connections_per_address: usize,
    /// Time to send a request's headers, and then its body.
    pub header_timeout_ms: u64,
    pub body_timeout_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_addresses: 64,
            max_services: 32,
            max_aliases: 32,
            max_body_bytes: 64 * 1024,
            max_instances: 1_000_000,
            max_instances_per_owner: 100_000,
            max_connections: 512,
            max_connections_per_address: 64,
            header_timeout_ms: 10_000,
            body_timeout_ms: 10_000,
        }
    }
}

impl Limits {
    /// Checks `spec` against the per-instance limits; the error names the
    /// field and the limit's key.
    pub fn check(&self, spec: &InstanceSpec) -> Result<(), RegistryError> {
        let over = |field: &str, n: usize, max: usize, key: &str| {
            (n > max).then(|| {
                bad(
                    field,
                    format!("{n} given, at most {max} per instance (registry.limits.{key})"),
                )
            })
        };
        let aliases = spec.binder.as_ref().map_or(0, |b| b.aliases.len());
        let error = over(
            "addresses",
            spec.addresses.len(),
            self.max_addresses,
            "max_addresses",
        )
        .or_else(|| {
            over(
                "services",
                spec.services.len(),
                self.max_services,
                "max_services",
            )
        })
        .or_else(|| over("binder.aliases", aliases, self.max_aliases, "max_aliases"));
        match error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl InstanceSpec {
    /// Validates and canonicalises the spec; errors name the field.
    pub fn validate(&self) -> Result<Registration, RegistryError> {
        let owner = match &self.owner {
            Some(o) => Some(label("owner", o, false)?.into()),
            None => None,
        };
        if self.addresses.is_empty() {
            return Err(bad("addresses", "at least one address is required"));
        }
        for (i, a) in self.addresses.iter().enumerate() {
            if a.is_unspecified() || a.is_multicast() {
                return Err(bad(
                    format!("addresses[{i}]"),
                    format!("{a} is not a unicast address"),
                ));
            }
        }
        let addresses: Vec<IpAddr> = self
            .addresses
            .iter()
            .copied()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut services = BTreeSet::new();
        for (i, input) in self.services.iter().enumerate() {
            let field = format!("services[{i}]");
            let mut m = match input {
                MembershipInput::Tag(t) => parse_tag(&field, t)?,
                MembershipInput::Object(m) => m.clone(),
            };
            m.name = label(&format!("{field}.name"), &m.name, false)?.into();
            m.proto = label(&format!("{field}.proto"), &m.proto, false)?.into();
            if m.port == Some(0) {
                return Err(bad(format!("{field}.port"), "must be 1-65535"));
            }
            services.insert(m);
        }
        if !services.is_empty() && owner.is_none() {
            return Err(bad(
                "owner",
                "required when services are given (CNS names are <service>.svc.<owner>.<zone>)",
            ));
        }
        let lease_secs = self
            .lease_secs
            .ok_or_else(|| bad("lease_secs", "missing: every registration needs a lease"))?;
        if lease_secs == 0 || lease_secs > MAX_LEASE_SECS {
            return Err(bad("lease_secs", format!("must be 1 to {MAX_LEASE_SECS}")));
        }
        let binder = match &self.binder {
            None => None,
            Some(b) => Some(b.validate()?),
        };
        if owner.is_none() && binder.is_none() {
            return Err(bad(
                "owner",
                "an instance needs an owner (CNS names) or a binder record",
            ));
        }
        Ok(Registration {
            owner,
            addresses: addresses.into_iter().collect(),
            services: services.into_iter().collect(),
            lease_secs,
            disabled: self.disabled,
            binder: binder.map(Box::new),
            mirrors: None,
        })
    }
}

impl BinderSpec {
    /// The label of the host record `<label>.<domain>`.
    pub fn host_label<'a>(&'a self, id: &'a str) -> &'a str {
        self.host.as_deref().unwrap_or(id)
    }

    fn validate(&self) -> Result<BinderSpec, RegistryError> {
        let mut b = self.clone();
        b.domain = domain("binder.domain", &self.domain)?;
        b.aliases = self
            .aliases
            .iter()
            .enumerate()
            .map(|(i, a)| domain(&format!("binder.aliases[{i}]"), a))
            .collect::<Result<_, _>>()?;
        if self.ports.contains(&0) {
            return Err(bad("binder.ports", "ports must be 1-65535"));
        }
        if let Some(h) = &self.host {
            b.host = Some(label("binder.host", h, false)?);
        }
        if let Some(s) = &mut b.service {
            s.srvce = label("binder.service.srvce", &s.srvce, true)?;
            s.proto = label("binder.service.proto", &s.proto, true)?;
            if s.port == 0 {
                return Err(bad("binder.service.port", "must be 1-65535"));
            }
        }
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: &str) -> Result<Registration, String> {
        let s: InstanceSpec = serde_json::from_str(json).map_err(|e| e.to_string())?;
        s.validate().map_err(|e| e.to_string())
    }

    #[test]
    fn cns_tag_syntax() {
        let m = parse_tag("t", "foo:1234:priority=20:weight=5").unwrap();
        assert_eq!((m.port, m.priority, m.weight), (Some(1234), 20, 5));
        assert_eq!(parse_tag("t", "foo:port=80").unwrap().port, Some(80));
        assert_eq!(parse_tag("t", "foo:1:port=2").unwrap().port, Some(2));
        assert!(parse_tag("t", "foo:http").is_err());
        assert!(parse_tag("t", "foo:1:colour=red").is_err());
    }

    #[test]
    fn canonical_and_case_insensitive() {
        let r = spec(
            r#"{"owner":"ABC","addresses":["10.0.0.2","10.0.0.1","10.0.0.2"],
                        "services":["Web:80","web:80","db"],"lease_secs":30}"#,
        )
        .unwrap();
        assert_eq!(r.owner.as_deref(), Some("abc"));
        assert_eq!(r.addresses.len(), 2);
        assert_eq!(r.services.len(), 2, "duplicate memberships collapse");
        assert_eq!(r.services[1].name, "web");
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (r#"{"owner":"a","addresses":["10.0.0.1"]}"#, "lease_secs"),
            (
                r#"{"owner":"a","addresses":[],"lease_secs":5}"#,
                "addresses",
            ),
            (
                r#"{"owner":"a_b","addresses":["10.0.0.1"],"lease_secs":5}"#,
                "owner",
            ),
            (
                r#"{"owner":"a","addresses":["10.0.0.1"],"services":["bad name"],"lease_secs":5}"#,
                "services[0].name",
            ),
            (
                r#"{"owner":"a","addresses":["10.0.0.1"],"lease_secs":0}"#,
                "lease_secs",
            ),
            (
                r#"{"owner":"a","addresses":["0.0.0.0"],"lease_secs":5}"#,
                "addresses[0]",
            ),
            (
                r#"{"addresses":["10.0.0.1"],"lease_secs":5,"binder":{"domain":"x..y","type":"host"}}"#,
                "binder.domain",
            ),
            (r#"{"addresses":["10.0.0.1"],"lease_secs":5}"#, "owner"),
        ];
        for (json, field) in cases {
            let e = spec(json).unwrap_err();
            assert!(e.starts_with(field), "{json}: {e}");
        }
        let e = spec(r#"{"owner":"a","addresses":["10.0.0.1"],"lease_secs":5,"colour":1}"#)
            .unwrap_err();
        assert!(e.contains("unknown field `colour`"), "{e}");
    }

    #[test]
    fn binder_type_rules() {
        use HostType::*;
        let all = [
            DbHost,
            Host,
            LoadBalancer,
            MorayHost,
            OpsHost,
            RedisHost,
            RrHost,
        ];
        let pick = |f: fn(HostType) -> bool| all.into_iter().filter(|&t| f(t)).collect::<Vec<_>>();
        assert_eq!(
            pick(HostType::queryable),
            [DbHost, Host, LoadBalancer, MorayHost, RedisHost]
        );
        assert_eq!(
            pick(HostType::serviceable),
            [LoadBalancer, MorayHost, OpsHost, RedisHost, RrHost]
        );
    }

    #[test]
    fn limits_name_the_field_and_the_key() {
        let limits = Limits {
            max_addresses: 2,
            max_services: 1,
            max_aliases: 1,
            ..Limits::default()
        };
        let spec = |json: &str| -> InstanceSpec { serde_json::from_str(json).unwrap() };
        let ok = spec(
            r#"{"owner":"a","addresses":["10.0.0.1","10.0.0.2"],"services":["w"],"lease_secs":5}"#,
        );
        assert_eq!(limits.check(&ok), Ok(()));
        let many =
            spec(r#"{"owner":"a","addresses":["10.0.0.1","10.0.0.2","10.0.0.3"],"lease_secs":5}"#);
        let e = limits.check(&many).unwrap_err().to_string();
        assert_eq!(
            e,
            "addresses: 3 given, at most 2 per instance (registry.limits.max_addresses)"
        );
        let svcs =
            spec(r#"{"owner":"a","addresses":["10.0.0.1"],"services":["w","x"],"lease_secs":5}"#);
        assert!(limits
            .check(&svcs)
            .unwrap_err()
            .to_string()
            .starts_with("services: "));
        let aliases = spec(
            r#"{"addresses":["10.0.0.1"],"lease_secs":5,"binder":{"domain":"d.example","type":"host","aliases":["a.example","b.example"]}}"#,
        );
        assert!(limits
            .check(&aliases)
            .unwrap_err()
            .to_string()
            .contains("registry.limits.max_aliases"));
    }
}
