//! The status page as HTML, rendered whole on the server: the tables
//! are all there without JavaScript; the script (`assets/app.js`) only
//! swaps in fresh tables and draws the answers chart. Every value goes
//! through [`esc`].

use std::fmt::Write;

use super::collect::{
    InstanceRow, MemberRow, MemberState, ServiceRow, Tables, ZoneRow, INSTANCES_SHOWN,
    SERVICES_SHOWN,
};
use super::counters;
use super::html::{clock, count, esc, relative, span};
use crate::api::views::Reader;
use crate::registry::Status;

/// Seconds between reloads of the page when JavaScript is off.
const NOSCRIPT_REFRESH_SECS: u32 = 15;

/// The whole page.
pub(super) fn page(t: &Tables) -> String {
    let mut out = String::with_capacity(16 * 1024);
    out.push_str(&head("xdpdns status"));
    out.push_str("<body>\n<header>\n<h1>xdpdns <small>status</small></h1>\n");
    out.push_str(&who(t.reader));
    let _ = writeln!(
        out,
        "<p id=\"live\" class=\"updated\">Rendered at {}</p>\n</header>",
        esc(&clock(t.now_ms, t.now_ms))
    );
    out.push_str(CHART);
    out.push_str("<main id=\"tables\">\n");
    out.push_str(&main_inner(t));
    out.push_str("</main>\n<script src=\"ui/app.js\" defer></script>\n</body>\n</html>\n");
    out
}

/// The page asking for the token (reads need it: `public_reads = false`),
/// or telling that the one given was wrong.
pub(super) fn token_needed(wrong: bool) -> String {
    let mut out = head("xdpdns status: token needed");
    out.push_str("<body>\n<header>\n<h1>xdpdns <small>status</small></h1>\n</header>\n<main>\n");
    if wrong {
        out.push_str("<p class=\"bad\" id=\"wrong-token\">That token is not the registry's.</p>\n");
    }
    out.push_str(
        "<p id=\"token-needed\">Reading this server's status needs the registry token \
         (<code>[registry] public_reads = false</code>).</p>\n",
    );
    out.push_str(TOKEN_FORM);
    out.push_str("</main>\n</body>\n</html>\n");
    out
}

fn head(title: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<link rel=\"stylesheet\" href=\"ui/style.css\">\n\
         <noscript><meta http-equiv=\"refresh\" content=\"{NOSCRIPT_REFRESH_SECS}\"></noscript>\n\
         </head>\n",
        esc(title)
    )
}

const TOKEN_FORM: &str = "<form class=\"token\" method=\"get\" action=\"./\">\
<label>Token <input type=\"password\" name=\"token\" autocomplete=\"current-password\" required></label> \
<button type=\"submit\">Show</button></form>\n";

fn who(reader: Reader) -> String {
    match reader {
        Reader::Token => "<p class=\"who\" id=\"reader\" data-reader=\"token\">Viewing as \
             <b>token holder</b>: everything the registry holds. \
             <a href=\"./?token=\">Forget the token</a></p>\n"
            .to_string(),
        Reader::Public => format!(
            "<p class=\"who\" id=\"reader\" data-reader=\"public\">Viewing as \
             <b>anonymous reader</b>: only what DNS shows.</p>\n{TOKEN_FORM}"
        ),
    }
}

/// The answers chart, drawn by the script from `ui/counters`; kept out
/// of `<main>` so that swapping the tables leaves it alone.
const CHART: &str = "<section id=\"answers\">\n<h2>Answers per second</h2>\n<figure>\n\
<div class=\"plot\">\n<svg id=\"chart\" viewBox=\"0 0 600 180\" preserveAspectRatio=\"none\" role=\"img\" \
aria-label=\"Answers per second, kernel and fallback, over the last two minutes\" \
data-samples=\"0\" data-kernel-peak=\"0\" data-fallback-peak=\"0\">\n\
<line class=\"grid\" x1=\"0\" y1=\"20\" x2=\"600\" y2=\"20\"/>\
<line class=\"grid\" x1=\"0\" y1=\"95\" x2=\"600\" y2=\"95\"/>\
<line class=\"axis\" x1=\"0\" y1=\"170\" x2=\"600\" y2=\"170\"/>\n\
<polyline id=\"fallback-line\" class=\"fallback\" points=\"\"/>\n\
<polyline id=\"kernel-line\" class=\"kernel\" points=\"\"/>\n</svg>\n\
<span id=\"chart-max\" class=\"ymax\">0/s</span><span class=\"xstart\">2 min ago</span>\
<span class=\"xend\">now</span>\n</div>\n\
<figcaption><span class=\"key kernel\">kernel <b id=\"kernel-rate\">–</b>/s</span> \
<span class=\"key fallback\">fallback <b id=\"fallback-rate\">–</b>/s</span> \
<span id=\"kernel-share\"></span></figcaption>\n</figure>\n\
<noscript><p class=\"note\">The live chart needs JavaScript; the totals are in the tables below, \
and this page reloads itself every 15 seconds.</p></noscript>\n</section>\n";

/// The inside of `<main>`: what `ui/tables` serves to the script.
pub(super) fn main_inner(t: &Tables) -> String {
    let mut out = String::with_capacity(16 * 1024);
    zones(&mut out, t);
    services(&mut out, t);
    instances(&mut out, t);
    counters::traffic(&mut out, &t.server);
    counters::rate_limiting(&mut out, &t.server);
    counters::attacks(&mut out, &t.server);
    counters::anycast(&mut out, &t.server);
    let _ = writeln!(
        out,
        "<p class=\"note\" id=\"rendered\" data-at=\"{}\">Tables as of {}.</p>",
        t.now_ms,
        esc(&clock(t.now_ms, t.now_ms))
    );
    out
}

fn zones(out: &mut String, t: &Tables) {
    let _ = writeln!(
        out,
        "<section id=\"zones\">\n<h2>Zones <span class=\"count\">{}</span></h2>",
        t.zones.len()
    );
    out.push_str(
        "<table>\n<thead><tr><th>Zone</th><th>Source</th><th>Serial</th><th>Signed</th>\
         <th class=\"num\">Records</th><th class=\"num\">Kernel answers</th>\
         <th class=\"num\">Fallback answers</th><th>Secondaries</th><th>State</th></tr></thead>\n<tbody>\n",
    );
    for z in &t.zones {
        zone(out, z);
    }
    out.push_str("</tbody>\n</table>\n</section>\n");
}

fn zone(out: &mut String, z: &ZoneRow) {
    let origin = esc(&z.origin);
    let (state, class) = if z.expired {
        ("expired: answers SERVFAIL".to_string(), "bad")
    } else if z.stale {
        ("stale: served as last read".to_string(), "warn")
    } else if z.load_failed {
        (
            "last load failed; the previous version serves".to_string(),
            "warn",
        )
    } else if let Some(s) = z.expires_in_secs {
        (
            format!("fresh; expires in {}", span(s.max(0) as u64 * 1000)),
            "ok",
        )
    } else {
        ("serving".to_string(), "ok")
    };
    let serial = z.serial.map_or("–".into(), |s| s.to_string());
    let opt = |n: Option<u64>| n.map_or("–".to_string(), count);
    let _ = write!(
        out,
        "<tr data-zone=\"{origin}\"><td class=\"name\">{origin}</td><td>{}</td><td>{serial}</td>\
         <td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>",
        esc(&z.source),
        if z.signed { "yes" } else { "no" },
        count(z.records as u64),
        opt(z.kernel_answers),
        opt(z.fallback_answers),
    );
    if z.secondaries.is_empty() {
        out.push_str("<span class=\"dim\">none known</span>");
    }
    for s in &z.secondaries {
        let seen = s.serial_seen.map_or("–".into(), |n| n.to_string());
        let title = s.error.as_deref().map(esc).unwrap_or_default();
        let lag = s
            .lag_ms
            .map(|l| format!(", lag {}", span(l)))
            .unwrap_or_default();
        let _ = write!(
            out,
            "<span class=\"secondary {state}\" title=\"{title}\">{} {state} (serial {seen}{lag})</span> ",
            esc(&s.secondary),
            state = s.state,
        );
    }
    let _ = writeln!(out, "</td><td class=\"{class}\">{}</td></tr>", esc(&state));
}

fn services(out: &mut String, t: &Tables) {
    let _ = writeln!(
        out,
        "<section id=\"services\">\n<h2>Services <span class=\"count\">{}</span></h2>",
        t.services_total
    );
    if t.services.is_empty() {
        out.push_str("<p class=\"dim\">No services registered.</p>\n");
    } else {
        let _ = writeln!(
            out,
            "<p class=\"note\">Hysteresis: a member reporting <code>down</code> leaves at once \
             while at most a third of the service has left in the last {}; the last listed \
             member leaves only after the last-member delay. A withdrawn member returns when it \
             reports <code>up</code>.</p>",
            esc(&span(t.window_ms))
        );
        out.push_str(
            "<table>\n<thead><tr><th>Service / member</th><th>Status</th><th>In answers</th></tr></thead>\n",
        );
        for s in &t.services {
            service(out, s, t.now_ms);
        }
        out.push_str("</table>\n");
    }
    if t.services_total > SERVICES_SHOWN {
        let _ = writeln!(
            out,
            "<p class=\"note\">The first {SERVICES_SHOWN} services are shown; \
             <code>GET /v1/services</code> lists them all.</p>"
        );
    }
    out.push_str("</section>\n");
}

fn service(out: &mut String, s: &ServiceRow, now: u64) {
    let key = esc(&s.key);
    let next = match s.next_withdrawal_ms {
        Some(at) if at <= now => " <span class=\"warn\">next withdrawal: now</span>".to_string(),
        Some(at) => format!(
            " <span class=\"warn\">next withdrawal at {} ({})</span>",
            esc(&clock(at, now)),
            esc(&relative(at, now))
        ),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "<tbody data-service=\"{key}\"><tr class=\"service\"><th colspan=\"3\">{key} \
         <span class=\"count\">{} of {} in answers</span>{next}</th></tr>",
        s.listed,
        s.members.len()
    );
    for m in &s.members {
        member(out, m, s.next_withdrawal_ms, now);
    }
    out.push_str("</tbody>\n");
}

fn member(out: &mut String, m: &MemberRow, next_withdrawal: Option<u64>, now: u64) {
    let (class, text) = match m.state {
        MemberState::Listed => ("listed", "listed".to_string()),
        MemberState::Held => (
            "held",
            match next_withdrawal {
                Some(at) if at > now => format!(
                    "held by hysteresis: reported down, still in answers; the service's next \
                     withdrawal is due at {} ({})",
                    clock(at, now),
                    relative(at, now)
                ),
                _ => "held by hysteresis: reported down, still in answers; due to leave now"
                    .to_string(),
            },
        ),
        MemberState::Withdrawn { since_ms: 0 } => (
            "withdrawn",
            "withdrawn: joined while down, never listed; until it reports up".to_string(),
        ),
        MemberState::Withdrawn { since_ms } => (
            "withdrawn",
            format!(
                "withdrawn since {} ({}); until it reports up",
                clock(since_ms, now),
                relative(since_ms, now)
            ),
        ),
    };
    let hidden = if m.in_dns {
        ""
    } else {
        " <span class=\"badge\">not in DNS</span>"
    };
    let _ = writeln!(
        out,
        "<tr class=\"member {class}\" data-member=\"{id}\" data-state=\"{class}\">\
         <td class=\"name\">{id}{hidden}</td><td class=\"{}\">{}</td><td>{}</td></tr>",
        status_class(m.status),
        status_name(m.status),
        esc(&text),
        id = esc(&m.id),
    );
}

fn instances(out: &mut String, t: &Tables) {
    let _ = writeln!(
        out,
        "<section id=\"instances\">\n<h2>Instances <span class=\"count\">{}</span></h2>",
        t.instances_total
    );
    if t.instances.is_empty() {
        out.push_str("<p class=\"dim\">No instances registered.</p>\n</section>\n");
        return;
    }
    out.push_str(
        "<table>\n<thead><tr><th>Instance</th><th>Owner</th><th>Addresses</th><th>Services</th>\
         <th>Status</th><th>Lease</th></tr></thead>\n<tbody>\n",
    );
    for i in &t.instances {
        instance(out, i, t.now_ms);
    }
    out.push_str("</tbody>\n</table>\n");
    if t.instances_total > INSTANCES_SHOWN {
        let _ = writeln!(
            out,
            "<p class=\"note\">The first {INSTANCES_SHOWN} instances are shown; \
             <code>GET /v1/instances</code> pages through them all.</p>"
        );
    }
    out.push_str("</section>\n");
}

fn instance(out: &mut String, i: &InstanceRow, now: u64) {
    let services: Vec<String> = i
        .services
        .iter()
        .map(|(key, listed)| {
            if *listed {
                esc(key)
            } else {
                format!("<s title=\"withdrawn\">{}</s>", esc(key))
            }
        })
        .collect();
    let lease = match (i.expires_at_ms, &i.mirrors) {
        (_, Some(node)) => format!("mirrors ZooKeeper node {}", esc(node)),
        (None, None) => format!("{}s, kept by etcd", i.lease_secs),
        (Some(at), None) => format!(
            "{}s; expires at {} ({})",
            i.lease_secs,
            esc(&clock(at, now)),
            esc(&relative(at, now))
        ),
    };
    let (status_class, status) = if i.disabled {
        ("dim", "disabled")
    } else {
        (status_class(i.status), status_name(i.status))
    };
    let _ = writeln!(
        out,
        "<tr data-instance=\"{id}\"><td class=\"name\">{id}</td><td>{}</td><td>{}</td><td>{}</td>\
         <td class=\"{status_class}\">{status}</td><td>{lease}</td></tr>",
        i.owner.as_deref().map(esc).unwrap_or_else(|| "–".into()),
        esc(&i.addresses.join(", ")),
        services.join(", "),
        id = esc(&i.id),
    );
}

fn status_name(s: Status) -> &'static str {
    match s {
        Status::Up => "up",
        Status::Down => "down",
    }
}

fn status_class(s: Status) -> &'static str {
    match s {
        Status::Up => "ok",
        Status::Down => "bad",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::status::collect::InstanceRow;
    use crate::api::status::model::ServerStatus;
    use crate::api::zones::SecondaryView;

    fn tables() -> Tables {
        let now = 1_709_296_496_000;
        Tables {
            reader: Reader::Public,
            now_ms: now,
            zones: vec![ZoneRow {
                origin: "we<i>rd\\\".example.".into(),
                source: "file".into(),
                serial: Some(7),
                signed: true,
                records: 12_345,
                kernel_answers: Some(3),
                fallback_answers: Some(4),
                secondaries: vec![SecondaryView {
                    secondary: "192.0.2.7:53".into(),
                    serial_seen: Some(6),
                    state: "error",
                    lag_ms: None,
                    error: Some("\"><script>alert(1)</script>".into()),
                }],
                stale: false,
                expired: false,
                expires_in_secs: None,
                load_failed: false,
            }],
            services: vec![ServiceRow {
                key: "cns:acme:web".into(),
                members: vec![
                    MemberRow {
                        id: "a".into(),
                        status: Status::Down,
                        state: MemberState::Withdrawn {
                            since_ms: now - 5000,
                        },
                        in_dns: true,
                    },
                    MemberRow {
                        id: "b".into(),
                        status: Status::Down,
                        state: MemberState::Held,
                        in_dns: true,
                    },
                ],
                listed: 1,
                next_withdrawal_ms: Some(now + 40_000),
            }],
            services_total: 1,
            instances: vec![InstanceRow {
                id: "a".into(),
                owner: Some("acme".into()),
                addresses: vec!["10.0.0.1".into()],
                services: vec![("cns:acme:web".into(), false)],
                status: Status::Down,
                disabled: false,
                lease_secs: 60,
                expires_at_ms: Some(now + 30_000),
                mirrors: None,
            }],
            instances_total: 1,
            window_ms: 60_000,
            server: ServerStatus::default(),
        }
    }

    #[test]
    fn values_are_escaped_and_states_marked() {
        let page = page(&tables());
        assert!(!page.contains("<script>alert"), "{page}");
        assert!(!page.contains("<i>rd"), "{page}");
        assert!(page.contains("we&lt;i&gt;rd\\&quot;.example."));
        assert!(page.contains("title=\"&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;\""));
        assert!(page.contains(
            "data-member=\"a\" data-state=\"withdrawn\"><td class=\"name\">a</td><td class=\"bad\">down</td>\
             <td>withdrawn since 12:34:51 UTC (5s ago); until it reports up</td>"
        ));
        assert!(page.contains("data-member=\"b\" data-state=\"held\""));
        assert!(page.contains("next withdrawal at 12:35:36 UTC (in 40s)"));
        assert!(page.contains("expires at 12:35:26 UTC (in 30s)"));
        assert!(page.contains("<s title=\"withdrawn\">cns:acme:web</s>"));
        // The only script is the page's own file; nothing inline.
        assert_eq!(page.matches("<script").count(), 1);
        assert!(page.contains("<script src=\"ui/app.js\" defer></script>"));
        // The tables are all there for a browser without JavaScript.
        for id in [
            "zones",
            "services",
            "instances",
            "traffic",
            "rrl",
            "attacks",
        ] {
            assert!(page.contains(&format!("<section id=\"{id}\">")), "{id}");
        }
        assert!(!page.contains("id=\"anycast\""), "no [anycast], no section");
    }

    #[test]
    fn without_the_token_the_page_shows_only_the_form() {
        let page = token_needed(false);
        assert!(page.contains("name=\"token\"") && page.contains("id=\"token-needed\""));
        assert!(!page.contains("wrong-token") && !page.contains("<table"));
        assert!(token_needed(true).contains("id=\"wrong-token\""));
    }
}
