//! The records Registrar writes into ZooKeeper (Registrar README, "ZooKeeper
//! data format"): host records and service records, parsed strictly enough
//! that nothing is served half-read and loosely enough that the redundant
//! and historical fields Registrar writes are accepted.

use std::net::IpAddr;

use serde_json::{Map, Value};

use crate::registry::model::{label, BinderService, HostType};

/// One node's data, understood.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZkRecord {
    Host(HostRecord),
    Service(BinderService),
}

/// A host record: `{"type": T, T: {"address", "ports"?, "ttl"?}, "ttl"?}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostRecord {
    pub host_type: HostType,
    pub address: IpAddr,
    /// SRV ports; empty means the service's port.
    pub ports: Vec<u16>,
    /// The inner object's `ttl`, else the record's own (About TTLs).
    pub ttl: Option<u32>,
}

/// Why a node's data is not served.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("not a JSON object")]
    NotObject,
    #[error("\"type\" is missing or not a string")]
    NoType,
    #[error("unknown record type {0:?}")]
    UnknownType(String),
    #[error("{0}: missing or not an object")]
    NoObject(String),
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
}

/// Parses one node's data. Empty data (a plain directory node) is `None`.
pub fn parse(data: &[u8]) -> Result<Option<ZkRecord>, RecordError> {
    if data.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let value: Value =
        serde_json::from_slice(data).map_err(|e| RecordError::NotJson(e.to_string()))?;
    let top = value.as_object().ok_or(RecordError::NotObject)?;
    let kind = top
        .get("type")
        .and_then(Value::as_str)
        .ok_or(RecordError::NoType)?;
    if kind == "service" {
        return service(top).map(|s| Some(ZkRecord::Service(s)));
    }
    let host_type: HostType = serde_json::from_value(Value::String(kind.into()))
        .map_err(|_| RecordError::UnknownType(kind.into()))?;
    let inner = object(top, kind, kind)?;
    let address = inner
        .get("address")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(format!("{kind}.address"), "missing or not a string"))?;
    let address: IpAddr = address.parse().map_err(|_| {
        invalid(
            format!("{kind}.address"),
            format!("{address:?} is not an IP address"),
        )
    })?;
    if address.is_unspecified() || address.is_multicast() {
        return Err(invalid(
            format!("{kind}.address"),
            format!("{address} is not a unicast address"),
        ));
    }
    let ports = match inner.get("ports") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|p| port(p, &format!("{kind}.ports")))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(invalid(format!("{kind}.ports"), "not an array")),
    };
    let ttl = first_ttl(&[(inner, &format!("{kind}.ttl")), (top, "ttl")])?;
    Ok(Some(ZkRecord::Host(HostRecord {
        host_type,
        address,
        ports,
        ttl,
    })))
}

/// `{"type": "service", "service": {"type": "service", "service": {srvce,
/// proto, port, ttl?}, "ttl"?}, "ttl"?}`; the SRV TTL is the innermost
/// one given.
fn service(top: &Map<String, Value>) -> Result<BinderService, RecordError> {
    let middle = object(top, "service", "service")?;
    let details = object(middle, "service", "service.service")?;
    let text = |key: &str| {
        details
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| invalid(format!("service.service.{key}"), "missing or not a string"))
    };
    // SRV labels: `_name`, a DNS label after the underscore.
    let srv_label = |key: &str| {
        let field = format!("service.service.{key}");
        let value = text(key)?;
        label(&field, &value, true).map_err(|e| invalid(field, e.to_string()))
    };
    let srvce = srv_label("srvce")?;
    let proto = srv_label("proto")?;
    let port = details
        .get("port")
        .ok_or_else(|| invalid("service.service.port", "missing"))
        .and_then(|p| port(p, "service.service.port"))?;
    let ttl = first_ttl(&[
        (details, "service.service.ttl"),
        (middle, "service.ttl"),
        (top, "ttl"),
    ])?;
    Ok(BinderService {
        srvce,
        proto,
        port,
        ttl,
    })
}

fn object<'v>(
    parent: &'v Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<&'v Map<String, Value>, RecordError> {
    parent
        .get(key)
        .and_then(Value::as_object)
        .ok_or_else(|| RecordError::NoObject(field.into()))
}

fn port(v: &Value, field: &str) -> Result<u16, RecordError> {
    v.as_u64()
        .filter(|p| (1..=65535).contains(p))
        .map(|p| p as u16)
        .ok_or_else(|| invalid(field, format!("{v} is not a port (1-65535)")))
}

/// The first TTL set among `places`; a TTL that is set must be valid.
fn first_ttl(places: &[(&Map<String, Value>, &str)]) -> Result<Option<u32>, RecordError> {
    for (object, field) in places {
        match object.get("ttl") {
            None | Some(Value::Null) => continue,
            Some(v) => {
                return v
                    .as_u64()
                    .filter(|t| *t <= i32::MAX as u64)
                    .map(|t| Some(t as u32))
                    .ok_or_else(|| invalid(*field, format!("{v} is not a TTL")));
            }
        }
    }
    Ok(None)
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> RecordError {
    RecordError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(json: &str) -> HostRecord {
        match parse(json.as_bytes()) {
            Ok(Some(ZkRecord::Host(h))) => h,
            other => panic!("{json}: {other:?}"),
        }
    }

    #[test]
    fn the_readme_host_records() {
        let h = host(
            r#"{"type":"redis_host","address":"172.27.10.62","ttl":30,
                "redis_host":{"address":"172.27.10.62","ports":[6379]}}"#,
        );
        assert_eq!(h.host_type, HostType::RedisHost);
        assert_eq!(h.address, "172.27.10.62".parse::<IpAddr>().unwrap());
        assert_eq!((h.ports, h.ttl), (vec![6379], Some(30)));
        let lb = host(
            r#"{"type":"load_balancer","address":"172.27.10.72",
                "load_balancer":{"address":"172.27.10.72","ports":[80]}}"#,
        );
        assert_eq!((lb.host_type, lb.ttl), (HostType::LoadBalancer, None));
    }

    #[test]
    fn every_host_type_and_the_ttl_order() {
        for t in [
            "db_host",
            "host",
            "load_balancer",
            "moray_host",
            "ops_host",
            "redis_host",
            "rr_host",
        ] {
            let h = host(&format!(
                r#"{{"type":"{t}","ttl":30,"{t}":{{"address":"10.0.0.1","ttl":5}}}}"#
            ));
            assert_eq!(h.ttl, Some(5), "{t}: the inner object's TTL comes first");
            assert!(h.ports.is_empty());
        }
    }

    #[test]
    fn the_readme_service_records_and_the_srv_ttl_order() {
        let authcache = r#"{"type":"service","service":{"type":"service",
            "service":{"srvce":"_redis","proto":"_tcp","port":6379,"ttl":60},"ttl":60}}"#;
        let Ok(Some(ZkRecord::Service(s))) = parse(authcache.as_bytes()) else {
            panic!()
        };
        assert_eq!(
            (s.srvce.as_str(), s.proto.as_str(), s.port, s.ttl),
            ("_redis", "_tcp", 6379, Some(60))
        );
        let middle = r#"{"type":"service","ttl":9,"service":{"type":"service","ttl":7,
            "service":{"srvce":"_http","proto":"_tcp","port":80}}}"#;
        let Ok(Some(ZkRecord::Service(s))) = parse(middle.as_bytes()) else {
            panic!()
        };
        assert_eq!(s.ttl, Some(7));
        let outer = r#"{"type":"service","ttl":9,"service":{"type":"service",
            "service":{"srvce":"_http","proto":"_tcp","port":80}}}"#;
        let Ok(Some(ZkRecord::Service(s))) = parse(outer.as_bytes()) else {
            panic!()
        };
        assert_eq!(s.ttl, Some(9));
    }

    #[test]
    fn records_the_readme_does_not_define_are_refused() {
        for (json, why) in [
            ("{", "not JSON"),
            ("[1]", "not a JSON object"),
            (r#"{"address":"10.0.0.1"}"#, "type"),
            (
                r#"{"type":"database","database":{"address":"10.0.0.1"}}"#,
                "unknown",
            ),
            (r#"{"type":"host","address":"10.0.0.1"}"#, "host"),
            (r#"{"type":"host","host":{}}"#, "host.address"),
            (
                r#"{"type":"host","host":{"address":"nope"}}"#,
                "host.address",
            ),
            (
                r#"{"type":"host","host":{"address":"0.0.0.0"}}"#,
                "host.address",
            ),
            (
                r#"{"type":"host","host":{"address":"10.0.0.1","ports":[0]}}"#,
                "host.ports",
            ),
            (
                r#"{"type":"host","host":{"address":"10.0.0.1","ports":8}}"#,
                "host.ports",
            ),
            (
                r#"{"type":"host","host":{"address":"10.0.0.1","ttl":-1}}"#,
                "host.ttl",
            ),
            (
                r#"{"type":"service","service":{"type":"service"}}"#,
                "service.service",
            ),
            (
                r#"{"type":"service","service":{"service":{"proto":"_tcp","port":80}}}"#,
                "srvce",
            ),
            (
                r#"{"type":"service","service":{"service":{"srvce":"_a","proto":"_tcp","port":70000}}}"#,
                "port",
            ),
            (
                r#"{"type":"service","service":{"service":{"srvce":"http","proto":"_tcp","port":80}}}"#,
                "service.service.srvce",
            ),
        ] {
            let err = parse(json.as_bytes()).expect_err(json).to_string();
            assert!(err.contains(why), "{json}: {err}");
        }
        assert_eq!(parse(b""), Ok(None), "a directory node has no record");
    }
}
