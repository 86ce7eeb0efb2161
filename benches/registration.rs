//! Registration-to-answer latency, end to end through the real binary:
//! `PUT /v1/instances/{id}` on the HTTP API, then UDP queries for the new
//! instance name until it answers. Reports p50/p99/max over 1000 fresh
//! registrations (the acknowledgement alone, which includes the journal
//! fdatasync, is reported too).
//!
//! `cargo bench --bench registration`; under `cargo test` it runs 20
//! registrations as a smoke test.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};

const BIN: &str = env!("CARGO_BIN_EXE_xdpdns");

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let n = if full { 1000 } else { 20 };
    let dir = std::env::temp_dir().join(format!("xdpdns-bench-reg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("xdpdns.toml");
    std::fs::write(
        &config,
        "[server]\nlisten = [\"127.0.0.1:0\"]\nudp_sockets = 1\n[log]\nlevel = \"warn,xdpdns::serve=info,xdpdns::registry=info\"\n\
         [registry]\nlisten = \"127.0.0.1:0\"\ntoken = \"t\"\ndata_dir = \"reg\"\nrequire_opt_in = false\n\
         ns = [\"ns1.example.com.\"]\nhostmaster = \"h.example.com.\"\n\
         [[registry.zone]]\nname = \"sd.example.\"\nnetworks = [\"*\"]\n",
    )
    .unwrap();
    let mut child = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&config)
        .env("NO_COLOR", "1")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut dns, mut api) = (None, None);
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let field = |key: &str| {
            line.split(key)
                .nth(1)
                .and_then(|a| a.split_whitespace().next())
                .map(str::to_string)
        };
        if line.contains("listening (udp+tcp)") {
            dns = field(" addr=");
        }
        if line.contains("registry API listening") {
            api = field("api_addr=");
        }
        if line.contains(" ready") {
            break;
        }
    }
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if std::env::var_os("XDPDNS_BENCH_LOG").is_some() {
                eprintln!("{line}");
            }
        }
    });
    let dns: SocketAddr = dns.expect("dns address").parse().unwrap();
    let api = format!("http://{}", api.expect("api address"));
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let http = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(5))
        .build();

    let mut acked = Vec::with_capacity(n);
    let mut answered = Vec::with_capacity(n);
    let mut buf = [0u8; 1500];
    for i in 0..n {
        let name = Name::from_ascii(format!("r{i}.inst.acme.sd.example.")).unwrap();
        let mut q = Message::query();
        q.add_query(Query::query(name, RecordType::A));
        let start = Instant::now();
        http.put(&format!("{api}/v1/instances/r{i}"))
            .set("Authorization", "Bearer t")
            .send_string(&format!(
                r#"{{"owner":"acme","addresses":["10.{}.{}.{}"],"services":["bench"],"lease_secs":600}}"#,
                i >> 16 & 255,
                i >> 8 & 255,
                i & 255
            ))
            .expect("registration");
        acked.push(start.elapsed());
        let deadline = start + Duration::from_secs(2);
        loop {
            q.metadata.id = (i as u16).wrapping_add(answered.len() as u16);
            sock.send_to(&q.to_vec().unwrap(), dns).unwrap();
            if let Ok((len, _)) = sock.recv_from(&mut buf) {
                if Message::from_vec(&buf[..len]).is_ok_and(|m| !m.answers.is_empty()) {
                    answered.push(start.elapsed());
                    break;
                }
            }
            assert!(Instant::now() < deadline, "r{i} never answered");
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    report(
        "registration acknowledged (journal fdatasync included)",
        &mut acked,
    );
    report("registration -> UDP answer", &mut answered);
}

fn report(what: &str, samples: &mut [Duration]) {
    samples.sort();
    let pct = |p: f64| samples[((samples.len() as f64 * p).ceil() as usize).saturating_sub(1)];
    println!(
        "{what}: n={} p50={:.2} ms p99={:.2} ms max={:.2} ms",
        samples.len(),
        pct(0.50).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        samples[samples.len() - 1].as_secs_f64() * 1e3
    );
}
