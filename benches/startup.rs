//! Start-up: time from process start to the zone's last name answered
//! over UDP, and the memory of the serving process, for
//!
//! * a file zone of about 1M records (service discovery shaped: each
//!   service name with three A and three AAAA, each instance name with an
//!   A and an AAAA, an SRV set per service), beside NSD loading the same
//!   file in the same run;
//! * the same zone as a secondary of NSD (AXFR in);
//! * a registry of 100k instances (recovered from its own journal);
//!
//! each cold (no zone image: `transfer.data_dir` empty of images) and warm
//! (the images the previous run wrote). Memory is the proportional set
//! size (PSS) summed over the server's processes (NSD forks), read once
//! the server has served for a while (its hot table built), with the
//! largest single-process RSS beside it.
//!
//! `cargo bench --bench startup`; under `cargo test` it runs each case
//! once on small zones as a smoke test. `XDPDNS_STARTUP_RUNS` sets the
//! runs per case (default 3, medians reported).

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

#[path = "../tests/support/process.rs"]
#[allow(dead_code)]
mod process;
#[path = "support/servers.rs"]
mod servers;

use servers::{
    measure, measure_xdpdns, nsd_config, settle, spawn, start_xdpdns, stop, wait_answer, which,
    write_service, xdp_case, xdpdns_config, Row, START_LIMIT,
};

const ORIGIN: &str = "bench.test.";
fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (services, instances) = if full { (66_667, 100_000) } else { (300, 200) };
    let runs: usize = match full {
        true => std::env::var("XDPDNS_STARTUP_RUNS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3),
        false => 1,
    };
    let dir = std::env::temp_dir().join(format!("xdpdns-bench-startup-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let zone = dir.join("bench.zone");
    let (records, last) = write_zone(&zone, services);
    println!(
        "startup: file zone of {records} records ({} bytes), last name {last}; {runs} runs per case",
        std::fs::metadata(&zone).unwrap().len()
    );
    let mut rows = Vec::new();

    // NSD, the reference, in the same run.
    if which("nsd") {
        let port = process::free_port();
        let cfg = nsd_config(&dir, ORIGIN, &zone, port, false);
        rows.push(measure(runs, "NSD, file zone", &last, port, None, || {
            spawn("nsd", &["-d", "-c", cfg.to_str().unwrap()])
        }));
    } else {
        println!("startup: nsd not installed; NSD rows skipped (cargo xtask deps installs it)");
    }

    // xdpdns, file zone: cold (images removed before each run), warm.
    let data = dir.join("file-data");
    let port = process::free_port();
    let cfg = xdpdns_config(
        &dir,
        "file",
        port,
        &format!(
            "[[zone]]\norigin = \"{ORIGIN}\"\nfile = \"{}\"\n",
            zone.display()
        ),
        &data,
        "",
    );
    rows.push(measure_xdpdns(
        runs,
        "xdpdns, file zone, cold",
        &last,
        port,
        Some(&data),
        &cfg,
    ));
    rows.push(measure_xdpdns(
        runs,
        "xdpdns, file zone, warm (image)",
        &last,
        port,
        None,
        &cfg,
    ));

    // xdpdns as a secondary of NSD: cold is the transfer in, warm the image.
    if which("nsd") {
        let primary_port = process::free_port();
        let pcfg = nsd_config(&dir, ORIGIN, &zone, primary_port, true);
        let primary = process::KillOnDrop(spawn("nsd", &["-d", "-c", pcfg.to_str().unwrap()]));
        wait_answer(primary_port, &last, START_LIMIT, None).expect("the primary serves");
        let data = dir.join("secondary-data");
        let port = process::free_port();
        let zones = format!(
            "[[zone]]\norigin = \"{ORIGIN}\"\nprimaries = [\"127.0.0.1:{primary_port}\"]\n"
        );
        let extra = "max_transfer_in_records = 5000000\n";
        let cfg = xdpdns_config(&dir, "secondary", port, &zones, &data, extra);
        let what = "xdpdns, secondary zone, cold (AXFR in)";
        rows.push(measure_xdpdns(runs, what, &last, port, Some(&data), &cfg));
        let what = "xdpdns, secondary zone, warm (image)";
        rows.push(measure_xdpdns(runs, what, &last, port, None, &cfg));
        drop(primary);
    }

    // With the XDP fast path: start -> ready (the ready file is written
    // once the kernel table is installed and the program attached).
    rows.extend(xdp_case(&dir, ORIGIN, &zone, runs, 1 << 20));

    // Registry: instances registered once, then restarts.
    let reg = registry_case(&dir, instances, runs);
    rows.extend(reg);

    println!();
    println!(
        "| case | start -> last name answered (median, min-max) | PSS (median) | largest RSS |"
    );
    println!("| --- | --- | --- | --- |");
    for r in &rows {
        let mb = |v: u64| match v {
            0 => "-".to_string(),
            v => format!("{v} MB"),
        };
        println!(
            "| {} | {:.3} s ({:.3}-{:.3}) | {} | {} |",
            r.what,
            r.median,
            r.min,
            r.max,
            mb(r.pss_mb),
            mb(r.rss_mb)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A service-discovery shaped zone of `services` services (15 records
/// each); returns the record count and the last instance name.
fn write_zone(path: &Path, services: usize) -> (usize, String) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(f, "$ORIGIN {ORIGIN}\n$TTL 60\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\nns1 A 10.77.0.1").unwrap();
    let last = write_service(&mut f, 0..services, (services / 50).max(1));
    (3 + services * 15, format!("{last}.{ORIGIN}"))
}

/// The registry case: `instances` registered through the API once, then
/// restarts recovering them from the registry's journal (cold: no image)
/// or from the zone image (warm).
fn registry_case(dir: &Path, instances: usize, runs: usize) -> Vec<Row> {
    let data = dir.join("registry-data");
    let images = data.join("images");
    let port = process::free_port();
    let api_port = process::free_port();
    let cfg = dir.join("registry.toml");
    std::fs::write(
        &cfg,
        format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\n[log]\nlevel = \"warn\"\n[control]\nsocket = \"{}\"\n\
             [transfer]\ndata_dir = \"{}\"\n\
             [registry]\nlisten = \"127.0.0.1:{api_port}\"\ntoken = \"t\"\ndata_dir = \"{}\"\nrequire_opt_in = false\n\
             ns = [\"ns1.example.com.\"]\nhostmaster = \"h.example.com.\"\n\
             [[registry.zone]]\nname = \"sd.example.\"\nnetworks = [\"*\"]\n",
            dir.join("registry.sock").display(),
            data.display(),
            dir.join("registry-journal").display()
        ),
    )
    .unwrap();
    let last = format!("r{}.inst.acme.sd.example.", instances - 1);
    {
        let child = process::KillOnDrop(start_xdpdns(&cfg));
        wait_port(api_port);
        let began = Instant::now();
        register(api_port, instances);
        wait_answer(port, &last, START_LIMIT, None).expect("the last registration is answered");
        println!(
            "startup: registered {instances} instances in {:.1} s",
            began.elapsed().as_secs_f64()
        );
        std::thread::sleep(settle());
        stop(child);
    }
    let what = format!("xdpdns, registry of {instances} instances");
    vec![
        measure_xdpdns(
            runs,
            &format!("{what}, cold (journal replay)"),
            &last,
            port,
            Some(&images),
            &cfg,
        ),
        measure_xdpdns(
            runs,
            &format!("{what}, warm (image)"),
            &last,
            port,
            None,
            &cfg,
        ),
    ]
}

fn wait_port(port: u16) {
    let deadline = Instant::now() + START_LIMIT;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the registry API never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Registers `n` instances from 16 writers (the journal commits their
/// writes together).
fn register(port: u16, n: usize) {
    let writers = 16.min(n);
    std::thread::scope(|s| {
        for w in 0..writers {
            s.spawn(move || {
                let http = ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).build();
                for i in (w..n).step_by(writers) {
                    http.put(&format!("http://127.0.0.1:{port}/v1/instances/r{i}"))
                        .set("Authorization", "Bearer t")
                        .send_string(&format!(
                            r#"{{"owner":"acme","addresses":["10.{}.{}.{}"],"services":["svc{}"],"lease_secs":86400}}"#,
                            i >> 16 & 255,
                            i >> 8 & 255,
                            i & 255,
                            i % 1000
                        ))
                        .expect("registration");
                }
            });
        }
    });
}
