//! Zones added and removed at runtime through the API, and the catalog
//! zone (RFC 9432) that Knot and BIND secondaries follow with nothing
//! else configured.

use std::time::{Duration, Instant};

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;

use crate::support::peers::{bind_catalog_consumer, knot_catalog_consumer, SECRET};
use crate::support::process::free_port;
use crate::support::{eventually, http, query, udp_query, Server};

const ZONE: &str = "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n\
                    @ NS ns1\nns1 A 192.0.2.53\n";

/// xdpdns with the API, a data directory, the `ddns` key (granted every
/// primary zone) and `extra`.
pub(crate) fn start(extra: &str) -> Server {
    Server::start(
        "example.com.",
        ZONE,
        "",
        &format!(
            "[registry]\nlisten = \"127.0.0.1:0\"\ntoken = \"t\"\ndata_dir = \"reg\"\n\
             ns = [\"ns1.example.com.\"]\nhostmaster = \"h.example.com.\"\n\
             [[registry.zone]]\nname = \"sd.example.\"\nnetworks = [\"*\"]\n\
             [transfer]\ndata_dir = \"data\"\n\
             [[tsig_key]]\nname = \"ddns\"\nsecret = \"{SECRET}\"\n\
             [[update_grant]]\nkey = \"ddns\"\n{extra}"
        ),
    )
}

fn rcode(srv: &Server, name: &str, rtype: RecordType) -> ResponseCode {
    srv.udp(name, rtype).metadata.response_code
}

#[test]
fn zones_added_through_the_api_are_served_durable_and_take_updates() {
    let mut srv = start("");
    let api = srv.api();
    let body = r#"{"name": "added.test", "ns": ["ns1.added.test."]}"#;
    let (code, out) = http("POST", &format!("{api}/v1/zones"), None, Some(body));
    assert_eq!(code, 401, "the token is needed: {out}");
    let (code, out) = http("POST", &format!("{api}/v1/zones"), Some("t"), Some(body));
    assert_eq!(code, 201, "{out}");
    let m = srv.udp("added.test.", RecordType::SOA);
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert!(m.metadata.authoritative && m.answers.len() == 1, "{m:?}");
    let (code, out) = http("POST", &format!("{api}/v1/zones"), Some("t"), Some(body));
    assert_eq!(code, 409, "already served: {out}");
    let (code, _) = http(
        "POST",
        &format!("{api}/v1/zones"),
        Some("t"),
        Some(r#"{"name": "bad.test", "zone": "@ SOA broken"}"#),
    );
    assert_eq!(code, 422, "a zone file that does not load");
    // From a zone file in the request.
    let text =
        "$TTL 60\n@ SOA ns1 h 7 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.7\nwww A 192.0.2.8\n";
    let body = serde_json::json!({"name": "file.test", "zone": text}).to_string();
    let (code, out) = http("POST", &format!("{api}/v1/zones"), Some("t"), Some(&body));
    assert_eq!(code, 201, "{out}");
    assert_eq!(srv.udp("www.file.test.", RecordType::A).answers.len(), 1);
    // A runtime primary zone takes updates under the grants.
    let update = crate::dynamic_updates::signed_update("added.test.", "www", "192.0.2.9");
    assert_eq!(
        crate::dynamic_updates::send_update(srv.addr, &update),
        ResponseCode::NoError
    );
    assert_eq!(srv.udp("www.added.test.", RecordType::A).answers.len(), 1);
    // Durable: both zones and the update are there after kill -9.
    srv.restart_after("KILL");
    assert_eq!(srv.udp("www.added.test.", RecordType::A).answers.len(), 1);
    assert_eq!(srv.udp("www.file.test.", RecordType::A).answers.len(), 1);
    let api = srv.api();
    let (code, out) = http(
        "GET",
        &format!("{api}/v1/zones/added.test"),
        Some("t"),
        None,
    );
    assert!(code == 200 && out["source"] == "runtime", "{out}");
    // Removed, and still removed after a restart; a configured zone stays.
    let (code, out) = http(
        "DELETE",
        &format!("{api}/v1/zones/added.test"),
        Some("t"),
        None,
    );
    assert_eq!(code, 204, "{out}");
    assert_eq!(
        rcode(&srv, "added.test.", RecordType::SOA),
        ResponseCode::Refused
    );
    let (code, _) = http(
        "DELETE",
        &format!("{api}/v1/zones/example.com"),
        Some("t"),
        None,
    );
    assert_eq!(code, 404, "only zones added at runtime are removed");
    srv.restart_after("KILL");
    assert_eq!(
        rcode(&srv, "added.test.", RecordType::SOA),
        ResponseCode::Refused
    );
    assert_eq!(
        rcode(&srv, "example.com.", RecordType::SOA),
        ResponseCode::NoError
    );
    assert_eq!(srv.udp("www.file.test.", RecordType::A).answers.len(), 1);
}

/// Whether the server on `port` answers for `zone` authoritatively.
fn serves(port: u16, zone: &str) -> bool {
    let q = query(zone, RecordType::SOA, None);
    udp_query(([127, 0, 0, 1], port).into(), &q).is_some_and(|m| {
        m.metadata.response_code == ResponseCode::NoError && m.metadata.authoritative
    })
}

#[test]
fn knot_and_bind_serve_zones_added_and_removed_through_the_catalog() {
    let (kport, bport) = (free_port(), free_port());
    let srv = start(&format!(
        "[catalog]\nzone = \"catalog.test\"\nnotify = [\"127.0.0.1:{kport}\", \"127.0.0.1:{bport}\"]\n"
    ));
    let primary = srv.addr.port();
    let knot = knot_catalog_consumer("catalog.test", kport, primary);
    let named = bind_catalog_consumer("catalog.test", bport, primary);
    // The configured zone is a member from the start.
    let ready = eventually(Duration::from_secs(20), || {
        serves(kport, "example.com.") && serves(bport, "example.com.")
    });
    assert!(ready, "knot:\n{}\nbind:\n{}", knot.log(), named.log());
    let api = srv.api();
    let body = r#"{"name": "fresh.test", "ns": ["ns1.fresh.test."]}"#;
    let t0 = Instant::now();
    let (code, out) = http("POST", &format!("{api}/v1/zones"), Some("t"), Some(body));
    assert_eq!(code, 201, "{out}");
    let added = eventually(Duration::from_secs(10), || {
        serves(kport, "fresh.test.") && serves(bport, "fresh.test.")
    });
    let took = t0.elapsed();
    assert!(added, "knot:\n{}\nbind:\n{}", knot.log(), named.log());
    eprintln!("zone added -> served by Knot and BIND: {took:?}");
    assert!(took < Duration::from_secs(1), "served after {took:?}");
    // Per secondary: the serial each serves, live once it is ours.
    let live = eventually(Duration::from_secs(10), || {
        let (code, view) = http(
            "GET",
            &format!("{api}/v1/zones/fresh.test"),
            Some("t"),
            None,
        );
        code == 200
            && view["secondaries"]
                .as_array()
                .is_some_and(|s| s.len() == 2 && s.iter().all(|p| p["state"] == "live"))
    });
    let (_, view) = http(
        "GET",
        &format!("{api}/v1/zones/fresh.test"),
        Some("t"),
        None,
    );
    assert!(live, "{view}");
    let t0 = Instant::now();
    let (code, out) = http(
        "DELETE",
        &format!("{api}/v1/zones/fresh.test"),
        Some("t"),
        None,
    );
    assert_eq!(code, 204, "{out}");
    let removed = eventually(Duration::from_secs(10), || {
        !serves(kport, "fresh.test.") && !serves(bport, "fresh.test.")
    });
    let took = t0.elapsed();
    assert!(removed, "knot:\n{}\nbind:\n{}", knot.log(), named.log());
    eprintln!("zone removed -> no longer served by Knot and BIND: {took:?}");
    assert!(took < Duration::from_secs(1), "still served after {took:?}");
}

/// The API stays writable while 2,000 slow clients from 50 addresses hold
/// connections open with half a request each: an authenticated client
/// creates a zone within a second.
#[test]
fn an_authenticated_client_creates_a_zone_past_two_thousand_slow_clients() {
    use std::io::Write as _;
    let srv = start("");
    let api: std::net::SocketAddr = srv.api().trim_start_matches("http://").parse().unwrap();
    let mut slow = Vec::new();
    for i in 0..2000u32 {
        let source: std::net::SocketAddr = ([127, 0, 3, 1 + (i % 50) as u8], 0).into();
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.bind(&source.into()).unwrap();
        if s.connect_timeout(&api.into(), Duration::from_secs(2))
            .is_err()
        {
            continue;
        }
        let mut s: std::net::TcpStream = s.into();
        let _ = s.write_all(b"POST /v1/zones HTTP/1.1\r\n");
        slow.push(s);
    }
    let t0 = Instant::now();
    let body = r#"{"name": "busy.test", "ns": ["ns1.busy.test."]}"#;
    let (code, out) = http(
        "POST",
        &format!("http://{api}/v1/zones"),
        Some("t"),
        Some(body),
    );
    let took = t0.elapsed();
    assert_eq!(code, 201, "{out}");
    eprintln!(
        "zone created past {} slow connections in {took:?}",
        slow.len()
    );
    assert!(took < Duration::from_secs(1), "took {took:?}");
    assert_eq!(
        rcode(&srv, "busy.test.", RecordType::SOA),
        ResponseCode::NoError
    );
}
