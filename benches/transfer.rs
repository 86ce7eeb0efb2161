//! Zone transfer at scale: AXFR of a large zone out of xdpdns, and an
//! xdpdns secondary pulling the same zone, each copy checked record for
//! record against the zone file.
//!
//! `cargo bench --bench transfer` uses 1,000,000 records (500k names with
//! A and AAAA); without `--bench` (as `cargo test --all-targets` runs it)
//! 10,000, as a smoke test.

use std::collections::BTreeSet;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use hickory_proto::rr::{Name, Record};
use xdpdns::transfer::client::{self, XfrKind};
use xdpdns::transfer::secondary::XfrOutcome;

/// Starting the binary: the same code as the end-to-end tests.
#[path = "../tests/support/process.rs"]
#[allow(dead_code)] // the API address: this bench has no registry
mod process;

struct Server {
    _child: process::KillOnDrop,
    addr: SocketAddr,
    ready_after: Duration,
}

fn start(config: &Path) -> Server {
    let t0 = Instant::now();
    let stderr = process::bench_stderr();
    let l = process::launch(&[], config, stderr, Duration::from_secs(300)).expect("xdpdns starts");
    Server {
        _child: process::KillOnDrop(l.child),
        addr: l.dns[0],
        ready_after: t0.elapsed(),
    }
}

fn key(r: &Record) -> String {
    format!(
        "{} {} {} {}",
        r.name.to_lowercase(),
        r.ttl,
        r.record_type(),
        r.data
    )
}

fn axfr(rt: &tokio::runtime::Runtime, addr: SocketAddr, zone: &Name) -> (Vec<Record>, Duration) {
    let t0 = Instant::now();
    let out = rt
        .block_on(client::transfer(
            addr,
            zone,
            XfrKind::Axfr,
            None,
            None,
            Duration::from_secs(300),
            usize::MAX,
        ))
        .expect("AXFR");
    let took = t0.elapsed();
    let XfrOutcome::Full(records) = out else {
        panic!("AXFR gave {out:?}")
    };
    (records, took)
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let names = if full { 500_000 } else { 5_000 };
    let dir = std::env::temp_dir().join(format!("xdpdns-bench-xfr-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("big.zone")).unwrap());
    writeln!(f, "$ORIGIN big.example.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1").unwrap();
    for i in 0..names {
        writeln!(
            f,
            "i{i}.svc{} A 10.{}.{}.{}",
            i % 97,
            (i >> 16) & 255,
            (i >> 8) & 255,
            i & 255
        )
        .unwrap();
        writeln!(
            f,
            "i{i}.svc{} AAAA 2001:db8::{:x}:{:x}",
            i % 97,
            i >> 16,
            i & 0xffff
        )
        .unwrap();
    }
    drop(f);
    let records = 2 * names + 3;
    std::fs::write(
        dir.join("primary.toml"),
        "[server]\nlisten = [\"127.0.0.1:0\"]\n[log]\nlevel = \"warn,xdpdns::serve=info\"\n\
         [[zone]]\norigin = \"big.example.\"\nfile = \"big.zone\"\n",
    )
    .unwrap();
    let primary = start(&dir.join("primary.toml"));
    let zone = Name::from_ascii("big.example.").unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    let want: BTreeSet<String> = xdpdns::zone::load_zone_file(&dir.join("big.zone"), &zone)
        .unwrap()
        .records()
        .map(|r| key(&r))
        .collect();
    assert_eq!(want.len(), records);

    // 1. AXFR out, three times.
    let mut times = Vec::new();
    for _ in 0..3 {
        let (got, took) = axfr(&rt, primary.addr, &zone);
        let got: BTreeSet<String> = got.iter().map(key).collect();
        assert!(got == want, "the AXFR copy differs from the zone file");
        times.push(took);
    }
    times.sort();

    // 2. An xdpdns secondary pulls the zone.
    std::fs::write(
        dir.join("secondary.toml"),
        format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\n[log]\nlevel = \"warn,xdpdns::serve=info,xdpdns::transfer=info\"\n\
             [transfer]\ndata_dir = \"sec-data\"\nprimary_timeout_ms = 300000\n\
             [[zone]]\norigin = \"big.example.\"\nprimaries = [\"{}\"]\n",
            primary.addr
        ),
    )
    .unwrap();
    let t0 = Instant::now();
    let secondary = start(&dir.join("secondary.toml"));
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let serial = rt.block_on(client::soa_serial(
            secondary.addr,
            &zone,
            None,
            Duration::from_millis(500),
        ));
        if serial.is_ok() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the secondary never loaded the zone"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let secondary_took = t0.elapsed();
    let (copy, _) = axfr(&rt, secondary.addr, &zone);
    let copy: BTreeSet<String> = copy.iter().map(key).collect();
    assert!(
        copy == want,
        "the secondary's copy differs from the zone file"
    );

    println!("transfer bench: {records} records ({names} names, A + AAAA)");
    println!(
        "  primary start-up (load zone file):      {:>8.2} s",
        primary.ready_after.as_secs_f64()
    );
    println!(
        "  AXFR out, received and parsed (3 runs): median {:.2} s, min {:.2} s, max {:.2} s",
        times[1].as_secs_f64(),
        times[0].as_secs_f64(),
        times[2].as_secs_f64()
    );
    println!(
        "  xdpdns secondary: start to serving it:  {:>8.2} s (AXFR + install + journal snapshot)",
        secondary_took.as_secs_f64()
    );
    println!("  both copies identical to the zone file: yes");
    drop(secondary);
    drop(primary);
    let _ = std::fs::remove_dir_all(&dir);
}
