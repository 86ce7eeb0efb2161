//! The seeds' examples, answered through the real handler.

use std::str::FromStr;

use hickory_proto::op::{Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};

use super::*;
use crate::handler::Handler;
use crate::registry::health::HealthPolicy;
use crate::registry::model::{InstanceSpec, Status};
use crate::wire::{Reply, Request};
use crate::zone::ZoneStore;

const OWNER: &str = "5450ee30-5352-11e5-a7b9-77da49db660f";

fn name(s: &str) -> Name {
    Name::from_str(s).unwrap()
}

pub(crate) fn naming() -> Naming {
    Naming {
        zones: vec![
            RegistryZone {
                name: name("us-east-1.triton-hosted.io."),
                networks: Some(Networks::List(vec!["165.225.0.0/16".parse().unwrap()])),
            },
            RegistryZone {
                name: name("us-east-1.cns.internal."),
                networks: Some(Networks::CatchAll),
            },
            RegistryZone {
                name: name("emy-10.joyent.us."),
                networks: None,
            },
            RegistryZone {
                name: name("example.joyent.us."),
                networks: None,
            },
            RegistryZone {
                name: name("10.in-addr.arpa."),
                networks: None,
            },
        ],
        ttl: 30,
        srv_ttl: 60,
        require_opt_in: true,
        ns: vec![name("ns1.example.net.")],
        hostmaster: name("hostmaster.example.net."),
        soa_timers: [3600, 600, 86400, 30],
    }
}

fn register(r: &mut Registry, id: &str, json: &str) {
    let spec: InstanceSpec = serde_json::from_str(json).unwrap();
    let e = r.register(id, &spec, 0).unwrap();
    if let Entry::Put { instance } = &e {
        naming().check(instance).unwrap();
    }
    r.apply(&e);
}

fn ask(r: &Registry, q: &str, t: RecordType) -> Reply {
    let store =
        ZoneStore::with_zones(crate::registry::table::Table::build(&naming(), r).zones(&naming()));
    let req = Request::new(1, Query::query(name(q), t));
    Handler::default().answer(&store.snapshot(), &req)
}

fn rdatas(reply: &[hickory_proto::rr::Record]) -> Vec<String> {
    let mut v: Vec<String> = reply.iter().map(|r| r.data.to_string()).collect();
    v.sort();
    v
}

fn ttls(reply: &[hickory_proto::rr::Record]) -> Vec<u32> {
    reply.iter().map(|r| r.ttl).collect()
}

use crate::registry::state::{Entry, Registry};

fn opted_in() -> Registry {
    let mut r = Registry::default();
    r.apply(&r.set_owner(OWNER, true).unwrap());
    r
}

#[test]
fn cns_frontdoor_service_and_instance_names() {
    let mut r = opted_in();
    let inst = "c43ae904-528e-11e5-8df0-fbdc6110bcba";
    register(
        &mut r,
        inst,
        &format!(
            r#"{{"owner":"{OWNER}","addresses":["165.225.1.10","10.1.2.3"],"services":["frontdoor:443"],"lease_secs":60}}"#
        ),
    );
    register(
        &mut r,
        "b2",
        &format!(
            r#"{{"owner":"{OWNER}","addresses":["165.225.1.11"],"services":["frontdoor:443"],"lease_secs":60}}"#
        ),
    );
    let svc = format!("frontdoor.svc.{OWNER}.us-east-1.triton-hosted.io.");
    let a = ask(&r, &svc, RecordType::A);
    assert_eq!(rdatas(&a.answers), ["165.225.1.10", "165.225.1.11"]);
    assert_eq!(ttls(&a.answers), [30, 30]);
    let txt = ask(&r, &svc, RecordType::TXT);
    assert_eq!(rdatas(&txt.answers), ["b2", inst]);

    // The public address lives in the public zone, the private one in the
    // catch-all zone.
    let public = format!("{inst}.inst.{OWNER}.us-east-1.triton-hosted.io.");
    assert_eq!(
        rdatas(&ask(&r, &public, RecordType::A).answers),
        ["165.225.1.10"]
    );
    assert_eq!(rdatas(&ask(&r, &public, RecordType::TXT).answers), [inst]);
    let private = format!("{inst}.inst.{OWNER}.us-east-1.cns.internal.");
    assert_eq!(
        rdatas(&ask(&r, &private, RecordType::A).answers),
        ["10.1.2.3"]
    );

    // SRV per member port, with A additionals for the instance names.
    let srv = ask(&r, &format!("_frontdoor._tcp.{svc}"), RecordType::SRV);
    assert_eq!(srv.answers.len(), 2);
    assert!(rdatas(&srv.answers)[0].starts_with("0 10 443 "));
    assert_eq!(srv.additional.len(), 2);

    // Reverse: one PTR per address, to the instance name.
    let ptr = ask(&r, "3.2.1.10.in-addr.arpa.", RecordType::PTR);
    assert_eq!(rdatas(&ptr.answers), std::slice::from_ref(&private));

    // Names are case-insensitive.
    let upper = ask(&r, &svc.to_uppercase(), RecordType::A);
    assert_eq!(upper.answers.len(), 2);

    let names = naming().names_of(&r, r.get(inst).unwrap());
    assert!(names.contains(&public) && names.contains(&svc), "{names:?}");
}

#[test]
fn opt_in_and_opt_out() {
    let mut r = Registry::default();
    let json = format!(
        r#"{{"owner":"{OWNER}","addresses":["10.0.0.1"],"services":["web"],"lease_secs":60}}"#
    );
    register(&mut r, "i1", &json);
    let inst = format!("i1.inst.{OWNER}.us-east-1.cns.internal.");
    assert_eq!(
        ask(&r, &inst, RecordType::A).rcode,
        ResponseCode::NXDomain,
        "owner has not opted in"
    );
    r.apply(&r.set_owner(OWNER, true).unwrap());
    assert_eq!(ask(&r, &inst, RecordType::A).answers.len(), 1);
    let disabled = json.replace("\"lease_secs\"", "\"disabled\":true,\"lease_secs\"");
    register(&mut r, "i1", &disabled);
    assert_eq!(
        ask(&r, &inst, RecordType::A).rcode,
        ResponseCode::NXDomain,
        "instance opted out"
    );
}

#[test]
fn down_leaves_the_service_but_keeps_the_instance_name() {
    let mut r = opted_in();
    for (id, ip) in [("a", "10.0.0.1"), ("b", "10.0.0.2"), ("c", "10.0.0.3")] {
        register(
            &mut r,
            id,
            &format!(
                r#"{{"owner":"{OWNER}","addresses":["{ip}"],"services":["web"],"lease_secs":60}}"#
            ),
        );
    }
    r.apply(&r.set_status("b", Status::Down, 1000).unwrap());
    for e in r.tick(1000, &HealthPolicy::default()) {
        r.apply(&e);
    }
    let svc = format!("web.svc.{OWNER}.us-east-1.cns.internal.");
    assert_eq!(
        rdatas(&ask(&r, &svc, RecordType::A).answers),
        ["10.0.0.1", "10.0.0.3"]
    );
    assert_eq!(rdatas(&ask(&r, &svc, RecordType::TXT).answers), ["a", "c"]);
    let inst = format!("b.inst.{OWNER}.us-east-1.cns.internal.");
    assert_eq!(rdatas(&ask(&r, &inst, RecordType::A).answers), ["10.0.0.2"]);
}

/// Registrar README: the authcache service with two instances.
#[test]
fn binder_authcache_two_instances() {
    let mut r = Registry::default();
    for (id, ip) in [
        ("a2674d3b-a9c4-46bc-a835-b6ce21d522c2", "172.27.10.62"),
        ("b9f2c1a0-0000-4000-8000-000000000067", "172.27.10.67"),
    ] {
        register(
            &mut r,
            id,
            &format!(
                r#"{{"addresses":["{ip}"],"lease_secs":60,"binder":{{"domain":"authcache.emy-10.joyent.us",
                   "type":"redis_host","ttl":30,"ports":[6379],
                   "service":{{"srvce":"_redis","proto":"_tcp","port":6379,"ttl":60}}}}}}"#
            ),
        );
    }
    let a = ask(&r, "authcache.emy-10.joyent.us.", RecordType::A);
    assert_eq!(rdatas(&a.answers), ["172.27.10.62", "172.27.10.67"]);
    assert_eq!(
        ttls(&a.answers),
        [30, 30],
        "A at a service: min(SRV 60, host 30)"
    );
    let host = ask(
        &r,
        "a2674d3b-a9c4-46bc-a835-b6ce21d522c2.authcache.emy-10.joyent.us.",
        RecordType::A,
    );
    assert_eq!(rdatas(&host.answers), ["172.27.10.62"]);
    assert_eq!(ttls(&host.answers), [30]);
}

/// Registrar README: `_http._tcp.example.joyent.us` SRV 0 10 80 with the
/// host's A record as an additional, SRV TTL 60 and A TTL 30.
#[test]
fn binder_http_srv_with_a_additionals() {
    let mut r = Registry::default();
    register(
        &mut r,
        "b44c74d6",
        r#"{"addresses":["172.27.10.72"],"lease_secs":60,"binder":{"domain":"example.joyent.us",
           "type":"load_balancer","ttl":30,
           "service":{"srvce":"_http","proto":"_tcp","port":80,"ttl":60}}}"#,
    );
    let srv = ask(&r, "_http._tcp.example.joyent.us.", RecordType::SRV);
    assert_eq!(
        rdatas(&srv.answers),
        ["0 10 80 b44c74d6.example.joyent.us."]
    );
    assert_eq!(ttls(&srv.answers), [60]);
    assert_eq!(srv.additional.len(), 1);
    assert_eq!(srv.additional[0].name, name("b44c74d6.example.joyent.us."));
    assert_eq!(
        srv.additional[0].data,
        RData::A("172.27.10.72".parse().unwrap())
    );
    assert_eq!(srv.additional[0].ttl, 30);

    // A second instance appears under the service name too.
    register(
        &mut r,
        "c55d85e7",
        r#"{"addresses":["172.27.10.73"],"lease_secs":60,"binder":{"domain":"example.joyent.us",
           "type":"load_balancer","service":{"srvce":"_http","proto":"_tcp","port":80}}}"#,
    );
    let a = ask(&r, "example.joyent.us.", RecordType::A);
    assert_eq!(rdatas(&a.answers), ["172.27.10.72", "172.27.10.73"]);
}

#[test]
fn binder_type_rules_and_aliases() {
    let mut r = Registry::default();
    // ops_host: usable for the service, not queryable directly.
    register(
        &mut r,
        "ops1",
        r#"{"addresses":["172.27.10.80"],"lease_secs":60,"binder":{"domain":"example.joyent.us",
           "type":"ops_host","service":{"srvce":"_http","proto":"_tcp","port":80}}}"#,
    );
    // host: queryable, with aliases, but never listed under the service.
    register(
        &mut r,
        "h1",
        r#"{"addresses":["172.27.10.81"],"lease_secs":60,"binder":{"domain":"example.joyent.us",
           "type":"host","aliases":["host-1a.example.joyent.us"]}}"#,
    );
    assert_eq!(
        rdatas(&ask(&r, "example.joyent.us.", RecordType::A).answers),
        ["172.27.10.80"]
    );
    assert_eq!(
        ask(&r, "ops1.example.joyent.us.", RecordType::A).rcode,
        ResponseCode::NXDomain
    );
    assert_eq!(
        rdatas(&ask(&r, "h1.example.joyent.us.", RecordType::A).answers),
        ["172.27.10.81"]
    );
    assert_eq!(
        rdatas(&ask(&r, "host-1a.example.joyent.us.", RecordType::A).answers),
        ["172.27.10.81"]
    );
    // Ports on the host record override the service port, one SRV each.
    register(
        &mut r,
        "m1",
        r#"{"addresses":["172.27.10.90"],"lease_secs":60,"binder":{"domain":"example.joyent.us",
           "type":"moray_host","ports":[2021,2022],"service":{"srvce":"_http","proto":"_tcp","port":80}}}"#,
    );
    let srv = ask(&r, "_http._tcp.example.joyent.us.", RecordType::SRV);
    assert_eq!(
        rdatas(&srv.answers),
        [
            "0 10 2021 m1.example.joyent.us.",
            "0 10 2022 m1.example.joyent.us.",
            "0 10 80 ops1.example.joyent.us."
        ]
    );
}

#[test]
fn binder_names_outside_every_zone_are_rejected() {
    let spec: InstanceSpec = serde_json::from_str(
        r#"{"addresses":["10.0.0.1"],"lease_secs":5,"binder":{"domain":"elsewhere.org","type":"host"}}"#,
    )
    .unwrap();
    let r = Registry::default();
    let Entry::Put { instance } = r.register("x", &spec, 0).unwrap() else {
        panic!()
    };
    let e = naming().check(&instance).unwrap_err();
    assert!(e.to_string().starts_with("binder.domain"), "{e}");
}

#[test]
fn ipv6_reverse_names() {
    assert_eq!(
        reverse_name("2001:db8::1".parse().unwrap()).to_string(),
        "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa."
    );
}

#[test]
fn names_skip_idna_only_where_it_would_change_nothing() {
    for text in [
        "i1.inst.acme",
        "web-1.svc.acme.sd.example.",
        "_http._tcp",
        "Web.Inst",
        "xn--bcher-kva",
        "bücher",
        "a_b",
        "1.2.3.10.in-addr.arpa.",
        "a..b",
        "",
        ".",
        "-lead.trail-",
    ] {
        let fast = super::parse(text).map(|n| (n.to_string(), n.is_fqdn()));
        let idna = Name::from_str(text).map(|n| (n.to_string(), n.is_fqdn()));
        assert_eq!(fast.ok(), idna.ok(), "{text:?}");
    }
}

#[test]
fn names_for_the_api_are_every_record_name_but_the_reverse_ones() {
    let mut r = opted_in();
    register(
        &mut r,
        "c1",
        &format!(
            r#"{{"owner":"{OWNER}","addresses":["165.225.1.10","10.1.2.3","fd00::7"],"services":["web:443","Db"],"lease_secs":60}}"#
        ),
    );
    register(
        &mut r,
        "m1",
        r#"{"addresses":["172.27.10.90"],"lease_secs":60,"binder":{"domain":"example.joyent.us",
           "type":"moray_host","aliases":["m-1.example.joyent.us"],"ports":[2021,2022],
           "service":{"srvce":"_http","proto":"_tcp","port":80}}}"#,
    );
    for id in ["c1", "m1"] {
        let inst = r.get(id).unwrap();
        let mut expected: Vec<String> = naming()
            .contributions(&r, inst)
            .into_iter()
            .filter(|c| c.data.record_type() != RecordType::PTR)
            .map(|c| c.name.to_string())
            .collect();
        expected.sort();
        expected.dedup();
        assert!(expected.len() > 2, "{id}: {expected:?}");
        assert_eq!(naming().names_of(&r, inst), expected, "{id}");
    }
}

/// The API's names of a CNS-only instance, written out as text, are
/// those the walk makes: opted in or not, disabled, withdrawn from a
/// service, with ports of either protocol, addresses in several zones.
#[test]
fn names_written_out_are_the_walks() {
    let mut r = Registry::default();
    let body = |addresses: &str, services: &str, extra: &str| {
        format!(
            r#"{{"owner":"{OWNER}","addresses":[{addresses}],"services":[{services}],{extra}"lease_secs":60}}"#
        )
    };
    let shapes = [
        ("one", body(r#""10.0.0.1""#, r#""web""#, "")),
        (
            "many",
            body(
                r#""165.225.1.10","10.1.2.3","fd00::7","10.1.2.4""#,
                r#""web:443",{"name":"dns","port":53,"proto":"udp"},"db""#,
                "",
            ),
        ),
        ("none", body(r#""10.0.0.2""#, "", "")),
        (
            "off",
            body(r#""10.0.0.3""#, r#""web""#, r#""disabled":true,"#),
        ),
        ("down", body(r#""10.0.0.4""#, r#""web:80","api""#, "")),
    ];
    for (id, json) in &shapes {
        register(&mut r, id, json);
    }
    let compare = |r: &Registry, expect_names: bool| {
        for (id, _) in &shapes {
            let inst = r.get(id).unwrap();
            let written = naming().plain_cns_names(r, inst);
            assert_eq!(
                written.as_ref(),
                Some(&naming().walked_names(r, inst)),
                "{id}"
            );
            let named = written.is_some_and(|n| !n.is_empty());
            assert_eq!(named, expect_names && *id != "off", "{id}");
        }
    };
    compare(&r, false);
    r.apply(&r.set_owner(OWNER, true).unwrap());
    r.apply(&r.set_status("down", Status::Down, 1000).unwrap());
    for e in r.tick(1000, &HealthPolicy::default()) {
        r.apply(&e);
    }
    assert!(!r.get("down").unwrap().withdrawn.is_empty());
    compare(&r, true);
    // A Binder record, or a label the walk would print otherwise (IDNA's,
    // decoded), is left to the walk.
    register(
        &mut r,
        "m1",
        r#"{"addresses":["172.27.10.90"],"lease_secs":60,"binder":{"domain":"example.joyent.us","type":"host"}}"#,
    );
    assert_eq!(naming().plain_cns_names(&r, r.get("m1").unwrap()), None);
    for id in ["xn--bcher-kva", "xn--a"] {
        register(&mut r, id, &body(r#""10.0.0.9""#, r#""web""#, ""));
        let inst = r.get(id).unwrap();
        assert_eq!(naming().plain_cns_names(&r, inst), None, "{id}");
        assert_eq!(
            naming().names_of(&r, inst),
            naming().walked_names(&r, inst),
            "{id}"
        );
    }
}
