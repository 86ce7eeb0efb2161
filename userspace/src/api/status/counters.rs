//! The status page's counter tables: answers by path and the kernel
//! path, rate limiting, what attacks leave in the counters, anycast.

use std::fmt::Write;

use super::html::{count, esc};
use super::model::{RrlCounts, ServerStatus};

pub(super) fn traffic(out: &mut String, s: &ServerStatus) {
    out.push_str("<section id=\"traffic\">\n<h2>Answers since start</h2>\n");
    if !s.available {
        out.push_str("<p class=\"dim\">The server is still starting.</p>\n</section>\n");
        return;
    }
    let a = &s.answers;
    let total = a.kernel + a.fallback_udp + a.fallback_tcp;
    let share = if total > 0 {
        format!("{:.1}%", a.kernel as f64 * 100.0 / total as f64)
    } else {
        "–".into()
    };
    let _ = writeln!(
        out,
        "<table class=\"narrow\">\n<tbody>\n\
         <tr data-counter=\"kernel\"><th>Kernel (XDP)</th><td class=\"num\">{}</td></tr>\n\
         <tr data-counter=\"fallback-udp\"><th>Fallback, UDP</th><td class=\"num\">{}</td></tr>\n\
         <tr data-counter=\"fallback-tcp\"><th>Fallback, TCP</th><td class=\"num\">{}</td></tr>\n\
         <tr><th>Answered in the kernel</th><td class=\"num\">{share}</td></tr>\n\
         <tr><th>Up for</th><td class=\"num\">{}</td></tr>\n</tbody>\n</table>",
        count(a.kernel),
        count(a.fallback_udp),
        count(a.fallback_tcp),
        super::html::span(s.uptime_secs * 1000),
    );
    match (&s.kernel, &s.xdp_off_reason) {
        (Some(k), _) => {
            let attached: Vec<String> = k
                .attached
                .iter()
                .map(|a| format!("{} ({})", esc(&a.interface), esc(&a.mode)))
                .collect();
            let _ = writeln!(
                out,
                "<p id=\"kernel-path\">Kernel path: attached to {}; {} table entries \
                 (generation {}); {} packets passed on (to the fallback, or not DNS); {}.</p>",
                if attached.is_empty() {
                    "no interface".to_string()
                } else {
                    attached.join(", ")
                },
                count(k.entries as u64),
                k.generation,
                count(k.passed),
                if k.healthy {
                    "<span class=\"ok\">healthy</span>"
                } else {
                    "<span class=\"bad\">unhealthy</span>"
                }
            );
        }
        (None, Some(why)) => {
            let _ = writeln!(
                out,
                "<p id=\"kernel-path\" class=\"warn\">Kernel path off: {}. Every answer comes from the fallback.</p>",
                esc(why)
            );
        }
        (None, None) => out.push_str(
            "<p id=\"kernel-path\" class=\"dim\">No kernel path configured (<code>[xdp] interfaces</code>): \
             every answer comes from the fallback.</p>\n",
        ),
    }
    out.push_str("</section>\n");
}

/// One counter of an [`RrlCounts`].
type Pick = fn(&RrlCounts) -> u64;

pub(super) fn rate_limiting(out: &mut String, s: &ServerStatus) {
    out.push_str("<section id=\"rrl\">\n<h2>Response rate limiting</h2>\n");
    if s.rrl_fallback.is_none() && s.rrl_kernel.is_none() {
        out.push_str(
            "<p class=\"dim\">Off (<code>[rrl] enabled = false</code>).</p>\n</section>\n",
        );
        return;
    }
    out.push_str(
        "<table class=\"narrow\">\n<thead><tr><th>UDP responses</th><th class=\"num\">Kernel</th>\
         <th class=\"num\">Fallback</th></tr></thead>\n<tbody>\n",
    );
    let cell = |c: &Option<RrlCounts>, f: Pick| c.as_ref().map_or("–".into(), |c| count(f(c)));
    let rows: [(&str, &str, Pick); 4] = [
        ("limited", "over their rate", |c| c.limited),
        ("slipped", "limited, sent truncated", |c| c.slipped),
        ("dropped", "limited, dropped", |c| c.dropped),
        ("exempt", "exempt by a server cookie", |c| c.exempt),
    ];
    for (name, help, f) in rows {
        let _ = writeln!(
            out,
            "<tr data-counter=\"rrl-{name}\"><th>{help}</th><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            cell(&s.rrl_kernel, f),
            cell(&s.rrl_fallback, f)
        );
    }
    out.push_str("</tbody>\n</table>\n</section>\n");
}

pub(super) fn attacks(out: &mut String, s: &ServerStatus) {
    let a = &s.attacks;
    out.push_str("<section id=\"attacks\">\n<h2>Hostile and broken traffic</h2>\n");
    out.push_str("<table class=\"narrow\">\n<tbody>\n");
    let mut rows = vec![
        ("formerr", "Malformed queries (FORMERR answers)", a.formerr),
        (
            "refused",
            "Refused (not our zones, transfers not allowed)",
            a.refused,
        ),
        (
            "udp-receive-drops",
            "Queries lost to a full UDP receive queue",
            a.udp_receive_drops,
        ),
        (
            "tcp-refused",
            "TCP connections refused at the connection cap",
            a.tcp_refused,
        ),
        (
            "tcp-idle-closed",
            "TCP connections closed idle",
            a.tcp_idle_closed,
        ),
    ];
    if s.kernel.is_some() {
        rows.push((
            "kernel-parse-errors",
            "Packets the kernel could not parse",
            a.kernel_parse_errors,
        ));
        rows.push((
            "kernel-bad-sources",
            "Packets from sources no answer may go to (reflection)",
            a.kernel_bad_sources,
        ));
    }
    for (name, help, n) in rows {
        let _ = writeln!(
            out,
            "<tr data-counter=\"{name}\"><th>{help}</th><td class=\"num\">{}</td></tr>",
            count(n)
        );
    }
    out.push_str("</tbody>\n</table>\n</section>\n");
}

pub(super) fn anycast(out: &mut String, s: &ServerStatus) {
    let Some(a) = &s.anycast else {
        return;
    };
    let (class, state) = if a.announced {
        ("ok", "announced")
    } else {
        ("bad", "withdrawn")
    };
    let _ = writeln!(
        out,
        "<section id=\"anycast\">\n<h2>Anycast</h2>\n<p>Interface {} with {}: \
         <b class=\"{class}\" data-state=\"{state}\">{state}</b> (announced only while the \
         self-checks pass).</p>\n</section>",
        esc(&a.interface),
        esc(&a.addresses.join(", ")),
    );
}
