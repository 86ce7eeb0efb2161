//! `xdpdns ctl`: one request over the control socket, printed for people
//! (tables) or scripts (`--json`, the reply's payload as is).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;

use super::error::ControlError;
use super::protocol::{
    Counters, RegistryInfo, Reloaded, Reply, Request, Secondaries, SourceInfo, Status, ZoneInfo,
};

/// How long the server may take to answer (a zone reload parses a file).
const REPLY_TIMEOUT: Duration = Duration::from_secs(600);

pub struct Client {
    path: PathBuf,
}

impl Client {
    pub fn new(path: &Path) -> Client {
        Client {
            path: path.to_path_buf(),
        }
    }

    /// Sends `request`; the payload as JSON, or the server's error.
    pub fn raw(&self, request: &Request) -> Result<serde_json::Value, ControlError> {
        let io = |source| ControlError::Io {
            path: self.path.clone(),
            source,
        };
        let mut stream =
            UnixStream::connect(&self.path).map_err(|source| ControlError::Connect {
                path: self.path.clone(),
                source,
            })?;
        stream.set_read_timeout(Some(REPLY_TIMEOUT)).map_err(io)?;
        let mut line = serde_json::to_vec(request)?;
        line.push(b'\n');
        // A server that refuses may close before reading everything: its
        // reply says why, so read it even when the write failed.
        let written = stream.write_all(&line);
        let mut reply = String::new();
        let read = BufReader::new(stream).read_line(&mut reply);
        if reply.is_empty() {
            written.map_err(io)?;
            read.map_err(io)?;
        }
        match serde_json::from_str(&reply)? {
            Reply::Ok(v) => Ok(v),
            Reply::Error(e) => Err(ControlError::Server(e)),
        }
    }

    pub fn get<T: DeserializeOwned>(&self, request: &Request) -> Result<T, ControlError> {
        Ok(serde_json::from_value(self.raw(request)?)?)
    }
}

/// What `ctl status` prints.
pub fn status_text(s: &Status) -> String {
    let mut out = format!(
        "xdpdns {} (commit {}), pid {}, up {}\nlistening on {}\n",
        s.version,
        s.commit,
        s.pid,
        duration(s.uptime_secs),
        s.listen.join(", ")
    );
    match &s.xdp {
        Some(k) => {
            let ifaces: Vec<String> = k
                .interfaces
                .iter()
                .map(|(i, m)| format!("{i} ({m})"))
                .collect();
            out += &format!(
                "XDP: attached to {}; table generation {}, {} entries, {} bytes{}{}\n",
                ifaces.join(", "),
                k.generation,
                k.entries,
                k.bytes,
                if k.left_out > 0 {
                    format!(", {} left out (table full)", k.left_out)
                } else {
                    String::new()
                },
                if k.healthy {
                    ""
                } else {
                    "; UNHEALTHY: the last update failed, queries pass to the fallback"
                }
            );
        }
        None => {
            out += &format!(
                "XDP: off ({})\n",
                s.xdp_off_reason.as_deref().unwrap_or("not configured")
            )
        }
    }
    let a = &s.answers;
    out += &format!(
        "answers: {} in the kernel ({:.1} %), {} by the fallback over UDP, {} over TCP\n",
        a.kernel,
        100.0 * s.kernel_share,
        a.fallback_udp,
        a.fallback_tcp
    );
    let rcodes: Vec<String> = a.by_rcode.iter().map(|(r, n)| format!("{r} {n}")).collect();
    if !rcodes.is_empty() {
        out += &format!("by rcode: {}\n", rcodes.join(", "));
    }
    out += &format!(
        "passed up by the kernel: {}, UDP receive-queue drops: {}\n",
        a.kernel_passed, a.udp_receive_drops
    );
    out += &format!("zones: {}, {} records\n", s.zones, s.records);
    out += &match (s.answer_table.on_demand, s.answer_table.current) {
        (true, _) => "answer table: compiled on demand, current\n".to_string(),
        (false, current) => format!(
            "answer table: {} entries, {}\n",
            s.answer_table.entries,
            match current {
                true => "current",
                false => "being compiled (the full handler answers meanwhile)",
            }
        ),
    };
    if let Some(zk) = &s.zookeeper {
        out += &source_text(zk);
    }
    if let Some(d) = &s.dnstap {
        out += &format!(
            "dnstap: {} ({}); {} written, {} dropped, {} kernel samples\n",
            d.target,
            if d.connected {
                "connected"
            } else {
                "NOT CONNECTED"
            },
            d.written,
            d.dropped,
            d.kernel_samples
        );
    }
    out
}

/// The ZooKeeper source's line in `ctl status` and `ctl registry`.
fn source_text(zk: &SourceInfo) -> String {
    format!(
        "zookeeper: {}; {} nodes, {} instances mirrored, {} held by hysteresis, {} records skipped, {} sessions\n",
        if zk.stale {
            "STALE (no session or not yet read; serving the last state read)"
        } else {
            "in session"
        },
        zk.nodes,
        zk.mirrored,
        zk.leaving,
        zk.skipped,
        zk.sessions
    )
}

fn duration(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}d {h}h {m}m")
    } else if h > 0 {
        format!("{h}h {m}m {s}s")
    } else {
        format!("{m}m {s}s")
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// What `ctl zones` prints.
pub fn zones_text(zones: &[ZoneInfo], now: u64) -> String {
    let mut out = format!(
        "{:<32} {:>10} {:>9} {:<7} {:<8} {:<24} source\n",
        "zone", "serial", "records", "signed", "state", "last load"
    );
    for z in zones {
        let state = if z.expired {
            "EXPIRED".to_string()
        } else if let Some(s) = z.expires_in_secs {
            format!("exp {}", duration(s.max(0) as u64))
        } else {
            "ok".into()
        };
        let last = z.last_load.as_ref().map_or("-".into(), |l| {
            format!(
                "{} {} ago",
                if l.ok { "ok" } else { "FAILED" },
                duration(now.saturating_sub(l.at))
            )
        });
        out += &format!(
            "{:<32} {:>10} {:>9} {:<7} {:<8} {:<24} {}\n",
            z.origin,
            opt(z.serial),
            z.records,
            if z.signed { "yes" } else { "no" },
            state,
            last,
            z.source
        );
        if let Some(l) = z.last_load.as_ref().filter(|l| !l.ok) {
            out += &format!("    last error: {}\n", l.detail);
        }
    }
    out
}

/// What `ctl secondaries` prints.
pub fn secondaries_text(peers: &Secondaries) -> String {
    if peers.is_empty() {
        return "no secondaries configured (zone notify = [...])\n".into();
    }
    let mut out = format!(
        "{:<28} {:<24} {:>10} {:>10} {:>10} {:>8} {:>9} {:>8}  last error\n",
        "zone", "secondary", "serial", "notified", "seen", "in sync", "lag ms", "failures"
    );
    for p in peers {
        out += &format!(
            "{:<28} {:<24} {:>10} {:>10} {:>10} {:>8} {:>9} {:>8}  {}\n",
            p.zone,
            p.secondary,
            opt(p.serial),
            opt(p.notified),
            opt(p.serial_seen),
            if p.in_sync { "yes" } else { "NO" },
            opt(p.lag_ms),
            p.failures,
            p.last_error.as_deref().unwrap_or(""),
        );
    }
    out
}

/// What `ctl registry` prints.
pub fn registry_text(r: &RegistryInfo) -> String {
    let by: Vec<String> = r
        .instances
        .iter()
        .map(|(s, n)| format!("{n} {s}"))
        .collect();
    let total: usize = r.instances.values().sum();
    format!(
        "instances: {total} ({})\nservices: {}\nowners disabled: {}\npending withdrawals (hysteresis): {}\nlease expiries since start: {}\njournal: {} bytes\n",
        if by.is_empty() { "none".into() } else { by.join(", ") },
        r.services,
        r.owners_disabled,
        r.pending_withdrawals,
        r.lease_expiries,
        r.journal_bytes
    ) + &r.zookeeper.as_ref().map(source_text).unwrap_or_default()
}

pub fn reloaded_text(r: &Reloaded) -> String {
    format!("{}: {}\n", r.zone, r.detail)
}

/// Per-second rates between two readings of the counters.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Rates {
    pub kernel: f64,
    pub fallback_udp: f64,
    pub fallback_tcp: f64,
    pub kernel_passed: f64,
    pub udp_receive_drops: f64,
    pub by_rcode: std::collections::BTreeMap<String, f64>,
}

pub fn rates(before: &Counters, after: &Counters, secs: f64) -> Rates {
    let r = |a: u64, b: u64| a.saturating_sub(b) as f64 / secs.max(1e-9);
    Rates {
        kernel: r(after.kernel, before.kernel),
        fallback_udp: r(after.fallback_udp, before.fallback_udp),
        fallback_tcp: r(after.fallback_tcp, before.fallback_tcp),
        kernel_passed: r(after.kernel_passed, before.kernel_passed),
        udp_receive_drops: r(after.udp_receive_drops, before.udp_receive_drops),
        by_rcode: after
            .by_rcode
            .iter()
            .map(|(k, &v)| {
                let was = before.by_rcode.get(k).copied().unwrap_or(0);
                (k.clone(), r(v, was))
            })
            .filter(|(_, v)| *v > 0.0)
            .collect(),
    }
}

/// One line of `ctl top`.
pub fn rates_text(r: &Rates) -> String {
    let total = r.kernel + r.fallback_udp + r.fallback_tcp;
    let share = if total > 0.0 {
        100.0 * r.kernel / total
    } else {
        0.0
    };
    let rcodes: Vec<String> = r
        .by_rcode
        .iter()
        .map(|(k, v)| format!("{k} {v:.0}"))
        .collect();
    format!(
        "{total:>9.0} answers/s | kernel {:>9.0} ({share:>5.1} %) | fallback udp {:>8.0} tcp {:>7.0} | passed {:>8.0} | drops {:>5.0} | {}\n",
        r.kernel,
        r.fallback_udp,
        r.fallback_tcp,
        r.kernel_passed,
        r.udp_receive_drops,
        rcodes.join(" ")
    )
}

/// What `ctl keys` prints: one block per key, the DS for key-signing keys.
pub fn keys_text(keys: &[crate::signing::KeyInfo]) -> String {
    let mut out = String::new();
    for k in keys {
        let submitted = if k.submitted {
            ", DS asked of the parent"
        } else {
            ""
        };
        out.push_str(&format!(
            "{:?} {} {} {:?}{submitted} (created {})\n",
            k.role, k.tag, k.algorithm, k.state, k.created_unix
        ));
        if !k.dnskey.is_empty() {
            out.push_str(&format!("  {}\n", k.dnskey));
        }
        if let Some(ds) = &k.ds {
            out.push_str(&format!("  {ds}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_differences_over_the_interval() {
        let mut a = Counters {
            kernel: 100,
            fallback_udp: 10,
            ..Counters::default()
        };
        a.by_rcode.insert("NOERROR".into(), 110);
        let mut b = Counters {
            kernel: 300,
            fallback_udp: 20,
            fallback_tcp: 4,
            ..Counters::default()
        };
        b.by_rcode.insert("NOERROR".into(), 320);
        b.by_rcode.insert("NXDOMAIN".into(), 4);
        let r = rates(&a, &b, 2.0);
        assert_eq!(
            (r.kernel, r.fallback_udp, r.fallback_tcp),
            (100.0, 5.0, 2.0)
        );
        assert_eq!(r.by_rcode["NOERROR"], 105.0);
        assert_eq!(r.by_rcode["NXDOMAIN"], 2.0);
        let line = rates_text(&r);
        assert!(line.contains("107 answers/s"), "{line}");
        assert!(line.contains("( 93.5 %)"), "{line}");
    }

    #[test]
    fn durations_read_like_uptime() {
        assert_eq!(duration(59), "0m 59s");
        assert_eq!(duration(3_723), "1h 2m 3s");
        assert_eq!(duration(90_061), "1d 1h 1m");
    }
}
