//! Large zones: cold start, warm start and memory of one large file zone,
//! with NSD and Knot loading the same file in the same run, for zones of
//! two shapes at each size asked for:
//!
//! * **hosting**: a provider's zone. Most names one label below the apex,
//!   every fifth two labels deeper (under shared parents that are empty
//!   non-terminals), with A, A + AAAA, CNAME, MX + TXT, A + TXT, and a
//!   wildcard beside a name; a sixth of the names are a reverse tree of
//!   PTRs. About 1.4 records a name.
//! * **discovery**: a service registry's zone. Each service name with
//!   three A and three AAAA, each instance with an A and an AAAA, an SRV
//!   set per service. About 3 records a name.
//!
//! Each case is timed from spawn until the zone's last name is answered
//! over UDP; memory is PSS summed over the server's processes once it
//! holds still (from 4 s after that, four readings a second apart within
//! 1 %: a large zone's hot table and image are built after its first
//! answers; see `support/servers.rs`). xdpdns runs cold (no zone image)
//! and warm (its image), and, as root, with XDP in generic mode on a veth
//! pair in a namespace of its own (start -> ready: the kernel table is
//! installed; its memory is the kernel's and not in PSS).
//!
//! `cargo bench --bench large_zones`; `XDPDNS_LARGE_RECORDS` lists the
//! sizes (default `1000000`; `1000000,3000000,10000000` for the full
//! table), `XDPDNS_LARGE_RUNS` the runs per case (default 1),
//! `XDPDNS_LARGE_XDP=0` leaves the XDP rows out. Under `cargo test` it
//! runs each server once on a small zone of each shape as a smoke test.

use std::io::Write;
use std::path::{Path, PathBuf};

#[path = "../tests/support/process.rs"]
#[allow(dead_code)]
mod process;
#[path = "support/servers.rs"]
#[allow(dead_code)]
mod servers;

use servers::{
    measure, measure_xdpdns, nsd_config, spawn, which, write_service, xdp_case, xdpdns_config, Row,
};

const ORIGIN: &str = "large.test.";

#[derive(Clone, Copy, Debug)]
enum Shape {
    Hosting,
    Discovery,
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let env_list = |key: &str| std::env::var(key).ok().filter(|v| !v.is_empty());
    let sizes: Vec<usize> = match (full, env_list("XDPDNS_LARGE_RECORDS")) {
        (true, Some(v)) => v
            .split(',')
            .map(|s| {
                s.trim()
                    .parse()
                    .expect("XDPDNS_LARGE_RECORDS: record counts")
            })
            .collect(),
        (true, None) => vec![1_000_000],
        (false, _) => vec![20_000],
    };
    let runs: usize = match full {
        true => env_list("XDPDNS_LARGE_RUNS").map_or(1, |v| v.parse().expect("a run count")),
        false => 1,
    };
    let xdp = full && env_list("XDPDNS_LARGE_XDP").as_deref() != Some("0");
    let dir = std::env::temp_dir().join(format!("xdpdns-bench-large-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut table = Vec::new();
    for &records in &sizes {
        for shape in [Shape::Hosting, Shape::Discovery] {
            let zone = dir.join(format!("{shape:?}-{records}.zone").to_lowercase());
            let (written, last) = write_zone(&zone, shape, records);
            let bytes = std::fs::metadata(&zone).unwrap().len();
            println!("large zones: {shape:?}, {written} records ({bytes} bytes), last name {last}");
            let label = format!("{shape:?} {}", mega(written));
            for row in cases(&dir, &zone, &last, runs, xdp, written) {
                table.push((label.clone(), written, row));
            }
            let _ = std::fs::remove_file(&zone);
        }
    }
    println!();
    println!("| zone | server, case | start -> last name answered (median) | PSS | per record | vs NSD |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for (label, records, r) in &table {
        let nsd = table
            .iter()
            .find(|(l, _, n)| l == label && n.what.starts_with("NSD"))
            .map(|(_, _, n)| n);
        let ratio = |ours: f64, theirs: f64| match theirs > 0.0 {
            true => format!("{:.2}x", ours / theirs),
            false => "-".into(),
        };
        let vs = match nsd {
            Some(n) if !r.what.starts_with("NSD") => format!(
                "start {}, memory {}",
                ratio(r.median, n.median),
                ratio(r.pss_mb as f64, n.pss_mb as f64)
            ),
            _ => "-".into(),
        };
        println!(
            "| {label} | {} | {:.2} s ({:.2}-{:.2}) | {} MB | {} B | {vs} |",
            r.what,
            r.median,
            r.min,
            r.max,
            r.pss_mb,
            r.pss_mb * 1024 * 1024 / *records as u64
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// 1.0M, 3.0M, 20k.
fn mega(n: usize) -> String {
    match n >= 1_000_000 {
        true => format!("{:.1}M", n as f64 / 1e6),
        false => format!("{}k", n / 1000),
    }
}

/// Every server on one zone file.
fn cases(dir: &Path, zone: &Path, last: &str, runs: usize, xdp: bool, records: usize) -> Vec<Row> {
    let mut rows = Vec::new();
    if which("nsd") {
        let port = process::free_port();
        let cfg = nsd_config(dir, ORIGIN, zone, port, false);
        rows.push(measure(runs, "NSD", last, port, None, || {
            spawn("nsd", &["-d", "-c", cfg.to_str().unwrap()])
        }));
    } else {
        println!("large zones: nsd not installed; NSD rows skipped (cargo xtask deps installs it)");
    }
    if which("knotd") {
        let port = process::free_port();
        let cfg = knot_config(dir, zone, port);
        rows.push(measure(runs, "Knot", last, port, None, || {
            spawn("knotd", &["-c", cfg.to_str().unwrap()])
        }));
    } else {
        println!(
            "large zones: knotd not installed; Knot rows skipped (cargo xtask deps installs it)"
        );
    }
    let data = dir.join("data");
    let port = process::free_port();
    let zones = format!(
        "[[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\n",
        zone.display()
    );
    let cfg = xdpdns_config(dir, "large", port, &zones, &data, "");
    rows.push(measure_xdpdns(
        runs,
        "xdpdns, cold (no image)",
        last,
        port,
        Some(&data),
        &cfg,
    ));
    rows.push(measure_xdpdns(
        runs,
        "xdpdns, warm (image)",
        last,
        port,
        None,
        &cfg,
    ));
    let _ = std::fs::remove_dir_all(&data);
    if xdp {
        // Room for every entry (about 1.3 a record), a power of two.
        let capacity = (records * 3 / 2).next_power_of_two();
        rows.extend(xdp_case(dir, ORIGIN, zone, runs, capacity));
    }
    rows
}

/// Knot loading `zone` whole, with no journal and no zone file writes.
fn knot_config(dir: &Path, zone: &Path, port: u16) -> PathBuf {
    let d = dir.join(format!("knot-{port}"));
    std::fs::create_dir_all(&d).unwrap();
    let path = d.join("knot.conf");
    std::fs::write(
        &path,
        format!(
            "server:\n    listen: 127.0.0.1@{port}\n    rundir: \"{d}\"\n    background-workers: 1\n\
             log:\n  - target: stderr\n    any: error\n\
             database:\n    storage: \"{d}\"\n\
             template:\n  - id: default\n    storage: \"{d}\"\n    zonefile-sync: -1\n\
             \x20   zonefile-load: whole\n    journal-content: none\n    semantic-checks: off\n\
             zone:\n  - domain: {ORIGIN}\n    file: \"{}\"\n",
            zone.display(),
            d = d.display()
        ),
    )
    .unwrap();
    path
}

/// Writes a zone of `shape` with about `records` records; returns the
/// records written and the last name (it has an A record).
fn write_zone(path: &Path, shape: Shape, records: usize) -> (usize, String) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(f, "$ORIGIN {ORIGIN}\n$TTL 3600\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\n@ NS ns2\nns1 A 192.0.2.1\nns2 A 192.0.2.2").unwrap();
    let mut written = 5;
    match shape {
        Shape::Hosting => {
            // A sixth of the names are PTRs in a reverse tree.
            let ptrs = records / 8;
            for j in 0..ptrs {
                let (a, b, c) = (j & 255, (j >> 8) & 255, (j >> 16) & 255);
                writeln!(f, "{a}.{b}.{c}.rev PTR host-{j}.{ORIGIN}").unwrap();
            }
            written += ptrs;
            let mut i: usize = 0;
            while written < records {
                let name = match i % 5 {
                    4 => format!("h{i}.grp{}.d{}", i / 5 % 997, i % 13),
                    _ => format!("host-{i}"),
                };
                let a = format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255);
                let v6 = format!("2001:db8::{:x}:{:x}", i >> 16, i & 0xffff);
                let lines = match i % 10 {
                    0..=3 => format!("{name} A {a}\n"),
                    4 | 5 => format!("{name} A {a}\n{name} AAAA {v6}\n"),
                    6 => format!("{name} CNAME host-{}\n", i.saturating_sub(1)),
                    7 => format!("{name} MX 10 mx{}.example.net.\n{name} TXT \"v=spf1 include:_spf.example.net ~all\"\n", i % 50),
                    8 => format!("{name} A {a}\n{name} TXT \"id={i}\"\n"),
                    _ => format!("*.{name} A {a}\n{name} A {a}\n"),
                };
                f.write_all(lines.as_bytes()).unwrap();
                written += lines.lines().count();
                i += 1;
            }
        }
        Shape::Discovery => {
            let services = (records - written) / 15;
            write_service(&mut f, 0..services, (services / 50).max(1));
            written += services * 15;
        }
    }
    writeln!(f, "last-name A 10.255.255.254").unwrap();
    f.flush().unwrap();
    (written + 1, format!("last-name.{ORIGIN}"))
}
