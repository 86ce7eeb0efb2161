//! The status page at the API's `/`, end to end: in headless Chromium
//! against a server whose kernel path answers real traffic (XDP on a
//! veth, as in `xdp_veth`), and over plain HTTP for who sees what: the
//! page filters exactly as the API's reads do.

use crate::support;

use std::collections::BTreeSet;
use std::net::{TcpStream, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hickory_proto::rr::RecordType;
use serde_json::Value;

use super::xdp_veth::{counters, in_netns, Link};
use support::browser::Chromium;
use support::{eventually, http, Server, TempDir};

const TOKEN: &str = "status-token-1";

const ZONE: &str = "$ORIGIN example.com.\n$TTL 300\n\
    @ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n\
    www A 192.0.2.80\nwww AAAA 2001:db8::80\n";

fn registry(listen: &str, extra: &str) -> String {
    format!(
        "[registry]\nlisten = \"{listen}\"\ntoken = \"{TOKEN}\"\ndata_dir = \"registry\"\n\
         batch_delay_ms = 2\nns = [\"ns1.example.com.\"]\nhostmaster = \"hostmaster.example.com.\"\n\
         {extra}\n\
         [[registry.zone]]\nname = \"sd.example.\"\nnetworks = [\"*\"]\n\
         [[registry.zone]]\nname = \"binder.example.\"\n"
    )
}

fn put(api: &str, path: &str, body: &str) {
    let (code, resp) = http("PUT", &format!("{api}{path}"), Some(TOKEN), Some(body));
    assert!(code == 200 || code == 204, "PUT {path}: {code} {resp}");
}

fn member(id: &str, last: u8) -> (String, String) {
    (
        format!("/v1/instances/{id}"),
        format!(
            r#"{{"owner":"acme","addresses":["10.7.0.{last}"],"services":["web:80"],"lease_secs":600}}"#
        ),
    )
}

/// xdpdns with XDP (generic mode) on a veth and its API on the server's
/// address; Chromium in the client's namespace opens `/` with the token,
/// sees zones, a service with a withdrawn and a held member, the chart's
/// kernel series rise with queries the kernel answers, an instance
/// registered meanwhile appear without a reload, and the kernel's rate
/// limiting act on one client over its rate. The screenshot is the
/// manual's (docs/src/status-page.md).
#[test]
fn the_page_follows_the_server_live_in_a_browser() {
    let link = Link::new("sp");
    let dir = TempDir::new("status-page");
    dir.write("zone.db", ZONE);
    let config = dir.write(
        "xdpdns.toml",
        &format!(
            "[server]\nlisten = [\"10.211.0.1:53\"]\n\
             [xdp]\ninterfaces = [\"{}\"]\nmode = \"generic\"\n\
             [rrl]\nenabled = true\nresponses_per_second = 25\n\
             [[zone]]\norigin = \"example.com.\"\nfile = \"zone.db\"\n{}",
            link.server_if,
            registry("10.211.0.1:8053", "require_opt_in = false")
        ),
    );
    let srv = Server::start_in(dir, config, &["ip", "netns", "exec", &link.server_ns]);
    let api = "http://10.211.0.1:8053";
    // Four members of web: one reports down and is withdrawn at once;
    // the next one down waits (a third of four may leave per window).
    in_netns(&link.client_ns, move || {
        for (i, id) in ["web-1", "web-2", "web-3", "web-4"].iter().enumerate() {
            let (path, body) = member(id, i as u8 + 1);
            put(api, &path, &body);
        }
        put(api, "/v1/instances/web-2/status", r#"{"status":"down"}"#);
        put(api, "/v1/instances/web-3/status", r#"{"status":"down"}"#);
        put(
            api,
            "/v1/instances/lb-1",
            r#"{"addresses":["10.7.1.1"],"lease_secs":300,"binder":{"domain":"db.binder.example","type":"load_balancer","service":{"srvce":"_pg","proto":"_tcp","port":5432}}}"#,
        );
    });

    let browser = Chromium::start(Some(&link.client_ns));
    let mut tab = browser.tab();
    tab.navigate(&format!("{api}/?token={TOKEN}"));
    // The token became the page's cookie and left the address bar.
    assert_eq!(tab.eval("location.href"), format!("{api}/"));
    assert_eq!(
        tab.eval("document.getElementById('reader').dataset.reader"),
        "token"
    );
    let zones = tab.eval("[...document.querySelectorAll('[data-zone]')].map(e => e.dataset.zone)");
    for z in ["example.com.", "sd.example.", "binder.example."] {
        assert!(
            zones.as_array().unwrap().contains(&Value::from(z)),
            "{zones}"
        );
    }
    let source =
        tab.eval("document.querySelector('[data-zone=\"example.com.\"]').children[1].textContent");
    assert_eq!(source, "file");
    let members = tab.eval(
        "[...document.querySelectorAll('[data-service=\"cns:acme:web\"] [data-member]')]\
         .map(e => e.dataset.member + ' ' + e.dataset.state)",
    );
    assert_eq!(
        members,
        serde_json::json!([
            "web-1 listed",
            "web-2 withdrawn",
            "web-3 held",
            "web-4 listed"
        ])
    );
    let withdrawn = tab.eval("document.querySelector('[data-member=\"web-2\"]').textContent");
    assert!(
        withdrawn.as_str().unwrap().contains("withdrawn since"),
        "{withdrawn}"
    );
    let service =
        tab.eval("document.querySelector('[data-service=\"cns:acme:web\"] .service').textContent");
    assert!(
        service.as_str().unwrap().contains("next withdrawal at"),
        "{service}"
    );
    assert!(tab.eval("!!document.querySelector('[data-service=\"binder:db.binder.example\"] [data-member=\"lb-1\"]')") == true);

    // Traffic on both paths: UDP queries the kernel answers, and now and
    // then one over TCP for the fallback. The kernel series rises.
    let before = counters(&srv);
    let traffic = Traffic::start(&link.client_ns);
    let mut kernel_peak = || {
        tab.eval("parseFloat(document.getElementById('chart').dataset.kernelPeak)")
            .as_f64()
            .unwrap_or(0.0)
    };
    let mut peak = 0.0;
    assert!(
        eventually(Duration::from_secs(15), || {
            peak = kernel_peak();
            peak >= 5.0
        }),
        "the chart's kernel series stayed at {peak}/s"
    );
    let after = counters(&srv);
    assert!(
        after["answered_a"] - before["answered_a"] >= 20,
        "answered by XDP: {before:?} → {after:?}"
    );
    let points = tab.eval("document.getElementById('kernel-line').getAttribute('points')");
    assert!(points.as_str().unwrap().contains(','), "{points}");

    // A registration appears without a reload.
    tab.eval("window.stayedHere = 42");
    in_netns(&link.client_ns, move || {
        let (path, body) = member("web-5", 5);
        put(api, &path, &body);
    });
    assert!(
        eventually(Duration::from_secs(10), || {
            tab.eval("!!document.querySelector('[data-instance=\"web-5\"]')")
                .as_bool()
                == Some(true)
        }),
        "web-5 never appeared"
    );
    assert_eq!(tab.eval("window.stayedHere"), 42, "the page reloaded");
    let live = tab.eval("document.getElementById('live').textContent");
    assert!(live.as_str().unwrap().starts_with("Live"), "{live}");

    // Some history on the chart, both series, for the manual's picture.
    assert!(
        eventually(Duration::from_secs(40), || {
            tab.eval(
                "(c => c.dataset.samples >= 20 && parseFloat(c.dataset.fallbackPeak) > 0)\
                 (document.getElementById('chart'))",
            ) == true
        }),
        "{}",
        tab.eval("document.getElementById('chart').outerHTML")
    );
    let shot = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/status-page.png");
    tab.screenshot(&shot);
    // Over `[rrl]`'s rate from one client: the kernel limited some.
    let limited = tab
        .eval("document.querySelector('[data-counter=\"rrl-limited\"]').children[1].textContent");
    assert_ne!(limited, "0", "nothing limited in the kernel");
    assert_ne!(limited, "–", "no kernel rate limiting shown");
    assert!(traffic.stop() > 100, "too few answers");
    drop(browser);
}

/// Queries from the client namespace until stopped (at most a minute):
/// UDP for the kernel, every fifth over TCP for the fallback.
struct Traffic {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<usize>>,
}

impl Traffic {
    fn start(netns: &str) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let (ns, flag) = (netns.to_string(), stop.clone());
        let thread = std::thread::spawn(move || {
            in_netns(&ns, move || {
                let q = support::query("www.example.com.", RecordType::A, None);
                let udp = UdpSocket::bind("10.211.0.2:0").unwrap();
                udp.set_read_timeout(Some(Duration::from_millis(100)))
                    .unwrap();
                let mut buf = [0u8; 512];
                let started = Instant::now();
                let mut answered = 0;
                for i in 0.. {
                    if flag.load(Ordering::Relaxed) || started.elapsed() > Duration::from_secs(60) {
                        break;
                    }
                    udp.send_to(&q, "10.211.0.1:53").unwrap();
                    answered += usize::from(udp.recv(&mut buf).is_ok());
                    if i % 5 == 0 {
                        let tcp = TcpStream::connect_timeout(
                            &"10.211.0.1:53".parse().unwrap(),
                            Duration::from_secs(2),
                        );
                        if let Ok(mut t) = tcp {
                            t.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                            support::tcp_send(&mut t, &q);
                            answered += usize::from(support::tcp_recv(&mut t).is_some());
                        }
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                answered
            })
        });
        Traffic {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops; the answers received.
    fn stop(mut self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Every `attr="…"` value in `html`, in order.
fn attrs(html: &str, attr: &str) -> Vec<String> {
    let needle = format!("{attr}=\"");
    html.match_indices(&needle)
        .map(|(i, _)| {
            let rest = &html[i + needle.len()..];
            rest[..rest.find('"').unwrap()].to_string()
        })
        .collect()
}

/// (service, member) pairs on a page.
fn page_members(html: &str) -> BTreeSet<(String, String)> {
    html.split("data-service=\"")
        .skip(1)
        .flat_map(|part| {
            let service = part[..part.find('"').unwrap()].to_string();
            let body = &part[..part.find("</tbody>").unwrap()];
            attrs(body, "data-member")
                .into_iter()
                .map(move |m| (service.clone(), m))
        })
        .collect()
}

/// (service, member) pairs in `GET /v1/services`.
fn api_members(services: &Value) -> BTreeSet<(String, String)> {
    services
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| {
            let key = s["service"].as_str().unwrap().to_string();
            s["members"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |m| (key.clone(), m["id"].as_str().unwrap().to_string()))
        })
        .collect()
}

/// One GET without following redirects: (status, Set-Cookie, Location,
/// body).
fn get(url: &str, headers: &[(&str, &str)]) -> (u16, Option<String>, Option<String>, String) {
    let agent = ureq::AgentBuilder::new()
        .redirects(0)
        .timeout(Duration::from_secs(10))
        .build();
    let mut req = agent.get(url);
    for (k, v) in headers {
        req = req.set(k, v);
    }
    let resp = match req.call() {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("GET {url}: {e}"),
    };
    let cookie = resp.header("set-cookie").map(str::to_string);
    let location = resp.header("location").map(str::to_string);
    (resp.status(), cookie, location, resp.into_string().unwrap())
}

/// The view of the page and of the API for one reader.
struct Seen {
    instances: Vec<String>,
    members: BTreeSet<(String, String)>,
    zones: Vec<String>,
}

fn seen_on_page(html: &str) -> Seen {
    Seen {
        instances: attrs(html, "data-instance"),
        members: page_members(html),
        zones: attrs(html, "data-zone"),
    }
}

fn seen_by_api(api: &str, token: Option<&str>) -> (Vec<String>, BTreeSet<(String, String)>) {
    let (code, list) = http("GET", &format!("{api}/v1/instances"), token, None);
    assert_eq!(code, 200);
    let ids = list
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect();
    let (code, services) = http("GET", &format!("{api}/v1/services"), token, None);
    assert_eq!(code, 200);
    (ids, api_members(&services))
}

/// Anonymous readers see on the page exactly what the API's public reads
/// show them (not disabled instances, not an owner that has not opted
/// in); the token, as a bearer header or as the page's cookie, shows
/// exactly what it shows through the API.
#[test]
fn anonymous_and_token_views_differ_as_the_api_reads_do() {
    let s = Server::start("example.com.", ZONE, "", &registry("127.0.0.1:0", ""));
    let api = s.api();
    put(&api, "/v1/owners/acme", r#"{"enabled":true}"#);
    for (id, owner, disabled) in [
        ("shown-1", "acme", false),
        ("shown-2", "acme", false),
        ("disabled-1", "acme", true),
        ("opted-out-1", "nobody", false),
    ] {
        put(
            &api,
            &format!("/v1/instances/{id}"),
            &format!(
                r#"{{"owner":"{owner}","addresses":["10.9.0.1"],"services":["web"],"lease_secs":600,"disabled":{disabled}}}"#
            ),
        );
    }
    put(
        &api,
        "/v1/instances/host-1",
        r#"{"addresses":["10.9.1.1"],"lease_secs":600,"binder":{"domain":"db.binder.example","type":"load_balancer"}}"#,
    );

    let (code, _, _, public_page) = get(&format!("{api}/"), &[]);
    assert_eq!(code, 200);
    assert!(public_page.contains("data-reader=\"public\""));
    let public = seen_on_page(&public_page);
    let (ids, members) = seen_by_api(&api, None);
    assert_eq!(public.instances, ids);
    assert_eq!(public.members, members);
    assert_eq!(public.instances, ["host-1", "shown-1", "shown-2"]);

    let bearer = format!("Bearer {TOKEN}");
    let (code, _, _, token_page) = get(&format!("{api}/"), &[("Authorization", &bearer)]);
    assert_eq!(code, 200);
    assert!(token_page.contains("data-reader=\"token\""));
    let token = seen_on_page(&token_page);
    let (ids, members) = seen_by_api(&api, Some(TOKEN));
    assert_eq!(token.instances, ids);
    assert_eq!(token.members, members);
    assert_eq!(
        token.instances,
        ["disabled-1", "host-1", "opted-out-1", "shown-1", "shown-2"]
    );
    // Zones are the API's public reads for both.
    assert_eq!(public.zones, token.zones);
    assert_eq!(
        public.zones,
        ["binder.example.", "example.com.", "sd.example."]
    );

    // The token as `?token=`: a cookie (not the token) and back to `/`.
    let (code, cookie, location, _) = get(&format!("{api}/?token={TOKEN}"), &[]);
    assert_eq!((code, location.as_deref()), (303, Some("./")));
    let cookie = cookie.expect("a cookie");
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    assert!(!cookie.contains(TOKEN), "{cookie}");
    let pair = cookie.split(';').next().unwrap().to_string();
    let (_, _, _, cookie_page) = get(&format!("{api}/"), &[("Cookie", &pair)]);
    let by_cookie = seen_on_page(&cookie_page);
    assert_eq!(by_cookie.instances, token.instances);
    assert_eq!(by_cookie.members, token.members);
    // The script's fragments follow the same rule.
    let (_, _, _, tables) = get(&format!("{api}/ui/tables"), &[("Cookie", &pair)]);
    assert_eq!(seen_on_page(&tables).instances, token.instances);
    let (_, _, _, tables) = get(&format!("{api}/ui/tables"), &[]);
    assert_eq!(seen_on_page(&tables).instances, public.instances);
    // A wrong token is told so and sets nothing; an empty one forgets.
    let (code, cookie, _, wrong) = get(&format!("{api}/?token=nope"), &[]);
    assert_eq!((code, cookie), (401, None));
    assert!(wrong.contains("id=\"wrong-token\"") && !wrong.contains("data-instance"));
    let (code, cookie, _, _) = get(&format!("{api}/?token="), &[("Cookie", &pair)]);
    assert_eq!(code, 303);
    assert!(cookie.unwrap().contains("Max-Age=0"));
    // The cookie opens the page's reads, never a write.
    let agent = ureq::AgentBuilder::new().build();
    let write = agent
        .put(&format!("{api}/v1/instances/sneaky"))
        .set("Cookie", &pair)
        .send_string(r#"{"owner":"acme","addresses":["10.9.0.9"],"lease_secs":60}"#);
    assert!(matches!(write, Err(ureq::Error::Status(401, _))));

    // The counters, as the chart reads them.
    let (code, status) = http("GET", &format!("{api}/v1/status"), None, None);
    assert_eq!(code, 200);
    assert_eq!(status["available"], true);
    assert!(status["answers"]["fallback_udp"].is_u64(), "{status}");
    assert!(status["kernel"].is_null() && status["anycast"].is_null());
    let before = status["answers"]["fallback_udp"].as_u64().unwrap();
    for _ in 0..3 {
        s.udp("www.example.com.", RecordType::A);
    }
    let (_, status) = http("GET", &format!("{api}/ui/counters"), None, None);
    assert!(status["answers"]["fallback_udp"].as_u64().unwrap() >= before + 3);
}

/// With `public_reads = false` the page shows nothing without the token
/// and says that it needs one; the token opens it as it opens the API.
#[test]
fn without_public_reads_the_page_asks_for_the_token() {
    let s = Server::start(
        "example.com.",
        ZONE,
        "",
        &registry(
            "127.0.0.1:0",
            "public_reads = false\nrequire_opt_in = false",
        ),
    );
    let api = s.api();
    put(
        &api,
        "/v1/instances/secret-1",
        r#"{"owner":"acme","addresses":["10.9.0.1"],"services":["web"],"lease_secs":600}"#,
    );
    let (code, _, _, page) = get(&format!("{api}/"), &[]);
    assert_eq!(code, 401);
    assert!(page.contains("id=\"token-needed\""), "{page}");
    assert!(page.contains("name=\"token\""), "a form for the token");
    for hidden in ["secret-1", "data-zone", "example.com", "data-service"] {
        assert!(!page.contains(hidden), "{hidden} shown:\n{page}");
    }
    for path in ["/ui/tables", "/ui/counters", "/v1/status"] {
        let (code, _, _, body) = get(&format!("{api}{path}"), &[]);
        assert_eq!(code, 401, "{path}");
        assert!(!body.contains("secret-1"));
    }
    let bearer = format!("Bearer {TOKEN}");
    let (code, _, _, page) = get(&format!("{api}/"), &[("Authorization", &bearer)]);
    assert_eq!(code, 200);
    assert_eq!(attrs(&page, "data-instance"), ["secret-1"]);
    let (_, cookie, _, _) = get(&format!("{api}/?token={TOKEN}"), &[]);
    let pair = cookie.unwrap().split(';').next().unwrap().to_string();
    let (code, _, _, page) = get(&format!("{api}/"), &[("Cookie", &pair)]);
    assert_eq!(code, 200);
    assert_eq!(attrs(&page, "data-instance"), ["secret-1"]);
    let (code, status) = http("GET", &format!("{api}/v1/status"), Some(TOKEN), None);
    assert_eq!((code, status["available"].as_bool()), (200, Some(true)));
    // The page's script and style hold no data: served to anyone.
    for asset in ["/ui/app.js", "/ui/style.css"] {
        assert_eq!(get(&format!("{api}{asset}"), &[]).0, 200, "{asset}");
    }
}
