//! Zone images: a restart serves each zone from the image the previous
//! run wrote, answering exactly as a cold start does; a damaged image is
//! refused and the zone loads from its file; `kill -9` while an image is
//! being written never leaves a torn one to be served.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use hickory_proto::op::{Edns, Message, Query};
use hickory_proto::rr::{Name, RData, RecordType};

use crate::support::{eventually, signing, udp_raw, Server, TempDir};

/// Three zones: the shared example zone (with its include), a zone of
/// every record type, and a signed zone.
fn three_zone_server(dir: TempDir) -> Server {
    dir.write("example.zone", include_str!("support/example.com.zone"));
    dir.write("big.inc", include_str!("support/big.inc"));
    dir.write("every.zone", include_str!("support/every-type.zone"));
    dir.write("signed.zone", &signing::small_signed_zone());
    let config = dir.write(
        "xdpdns.toml",
        "[server]\nlisten = [\"127.0.0.1:0\"]\n[log]\nlevel = \"info\"\n\
         [transfer]\ndata_dir = \"data\"\n\
         [[zone]]\norigin = \"example.com.\"\nfile = \"example.zone\"\n\
         [[zone]]\norigin = \"every.test.\"\nfile = \"every.zone\"\n\
         [[zone]]\norigin = \"signed.test.\"\nfile = \"signed.zone\"\n",
    );
    Server::start_with_config(dir, config)
}

fn image_of(server: &Server, origin: &str) -> std::path::PathBuf {
    server.dir.0.join(format!("data/images/{origin}zimg"))
}

/// Every owner name of the zone files (and a name below each, which does
/// not exist), in the zones `origins`.
fn names(dir: &Path, files: &[(&str, &str)]) -> Vec<String> {
    let mut out = Vec::new();
    for (origin, file) in files {
        let origin = Name::from_str(origin).unwrap();
        let zone = xdpdns::zone::load_zone_file(&dir.join(file), &origin).unwrap();
        for (key, _) in zone.nodes() {
            let name = Name::from(key).to_ascii();
            out.push(format!("nx-below.{name}"));
            out.push(name);
        }
    }
    out.sort();
    out
}

const TYPES: [RecordType; 16] = [
    RecordType::A,
    RecordType::AAAA,
    RecordType::NS,
    RecordType::SOA,
    RecordType::MX,
    RecordType::TXT,
    RecordType::SRV,
    RecordType::CNAME,
    RecordType::DS,
    RecordType::DNSKEY,
    RecordType::RRSIG,
    RecordType::NSEC,
    RecordType::NAPTR,
    RecordType::TLSA,
    RecordType::HTTPS,
    RecordType::ANY,
];

/// Every answer, as raw bytes, for every name × type, with and without
/// DO (same query bytes each time, so the same ID).
fn answers(server: &Server, names: &[String]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (i, name) in names.iter().enumerate() {
        for (t, rtype) in TYPES.iter().enumerate() {
            for dnssec_ok in [false, true] {
                let mut m = Message::query();
                m.metadata.id = (i * 64 + t * 2 + dnssec_ok as usize) as u16;
                m.add_query(Query::query(Name::from_ascii(name).unwrap(), *rtype));
                let mut edns = Edns::new();
                edns.set_max_payload(1232);
                edns.set_dnssec_ok(dnssec_ok);
                m.set_edns(edns);
                let q = m.to_vec().unwrap();
                let reply = (0..3)
                    .find_map(|_| udp_raw(server.addr, &q))
                    .unwrap_or_else(|| panic!("no answer for {name} {rtype}"));
                out.push((format!("{name} {rtype} do={dnssec_ok}"), reply));
            }
        }
    }
    out
}

#[test]
fn a_warm_start_answers_every_name_and_type_like_a_cold_one() {
    let mut server = three_zone_server(TempDir::new("images"));
    let files = [
        ("example.com.", "example.zone"),
        ("every.test.", "every.zone"),
        ("signed.test.", "signed.zone"),
    ];
    let names = names(&server.dir.0, &files);
    let cold = answers(&server, &names);
    for (origin, _) in files {
        let image = image_of(&server, origin);
        assert!(
            eventually(Duration::from_secs(10), || image.exists()),
            "no image for {origin}"
        );
    }
    assert!(!server.log().contains("served from its image"));
    // The image of a zone no longer configured goes at the next start.
    let gone = server.dir.0.join("data/images/gone.test.zimg");
    std::fs::write(&gone, b"an old zone's image").unwrap();
    server.restart_after("TERM");
    assert!(!gone.exists(), "an unconfigured zone's image is removed");
    for (origin, _) in files {
        assert!(
            server
                .log()
                .contains(&format!("zone served from its image zone={origin}")),
            "{origin} not from its image:\n{}",
            server.log()
        );
    }
    assert!(server.log().contains("current=true"), "{}", server.log());
    assert!(!server.log().contains("current=false"), "{}", server.log());
    let warm = answers(&server, &names);
    assert_eq!(cold.len(), names.len() * TYPES.len() * 2);
    let differ: Vec<&String> = cold
        .iter()
        .zip(&warm)
        .filter(|(c, w)| c.1 != w.1)
        .map(|(c, _)| &c.0)
        .collect();
    assert!(
        differ.is_empty(),
        "{} of {} answers differ after a warm start, e.g. {:?}",
        differ.len(),
        cold.len(),
        &differ[..differ.len().min(5)]
    );
}

#[test]
fn an_edited_zone_file_is_served_from_its_image_then_reloaded() {
    let mut server = three_zone_server(TempDir::new("images-edit"));
    let image = image_of(&server, "example.com.");
    assert!(eventually(Duration::from_secs(10), || image.exists()));
    server.signal("TERM");
    let _ = server.child.wait();
    // Edited while stopped: a new serial and a new address for www.
    let path = server.dir.0.join("example.zone");
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text
        .replacen("2026010101", "2026010102", 1)
        .replace("192.0.2.80", "192.0.2.99");
    assert_ne!(edited, text, "the example zone's serial or www moved");
    std::fs::write(&path, edited).unwrap();
    let dir = std::mem::replace(&mut server.dir, TempDir(Default::default()));
    let server = Server::start_with_config(dir, server.config.clone());
    assert!(server.log().contains("current=false"), "{}", server.log());
    let www = |s: &Server| {
        s.udp("www.example.com.", RecordType::A)
            .answers
            .iter()
            .find_map(|r| match r.data {
                RData::A(a) => Some(a.0.octets()[3]),
                _ => None,
            })
    };
    assert!(
        eventually(Duration::from_secs(10), || www(&server) == Some(99)),
        "the edited file was not reloaded:\n{}",
        server.log()
    );
}

#[test]
fn a_damaged_or_torn_image_is_refused_and_the_zone_loads_from_its_file() {
    let mut server = three_zone_server(TempDir::new("images-damaged"));
    let image = image_of(&server, "every.test.");
    assert!(eventually(Duration::from_secs(10), || image.exists()));
    let good = std::fs::read(&image).unwrap();
    let before = server.udp("every.test.", RecordType::SOA);
    for (what, damage) in [
        ("a flipped byte", {
            let mut b = good.clone();
            let mid = b.len() / 2;
            b[mid] ^= 0x01;
            b
        }),
        ("a torn write", good[..good.len() * 2 / 3].to_vec()),
    ] {
        server.signal("TERM");
        let _ = server.child.wait();
        std::fs::write(&image, &damage).unwrap();
        let dir = std::mem::replace(&mut server.dir, TempDir(Default::default()));
        server = Server::start_with_config(dir, server.config.clone());
        let log = server.log();
        assert!(
            log.contains("zone image ignored") && log.contains("every.test.zimg"),
            "{what} not reported:\n{log}"
        );
        assert!(
            !log.contains("zone served from its image zone=every.test."),
            "{what}: the damaged image was served:\n{log}"
        );
        let after = server.udp("every.test.", RecordType::SOA);
        assert_eq!(after.answers, before.answers, "{what}");
        // The image is written again, whole.
        assert!(
            eventually(Duration::from_secs(10), || {
                xdpdns::zone::image::read(&image).is_ok_and(|l| l.zone.record_count() == 49)
            }),
            "{what}: image not rewritten"
        );
    }
}

/// A zone large enough that writing its image takes a while.
fn big_zone(serial: u32, marker: &str) -> String {
    let mut z = format!(
        "$ORIGIN big.test.\n$TTL 300\n@ SOA ns1 h {serial} 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n\
         marker TXT \"{marker}\"\n"
    );
    for i in 0..60_000u32 {
        z.push_str(&format!(
            "h{i} A 10.{}.{}.{}\nh{i} AAAA 2001:db8::{i:x}\n",
            i >> 16 & 255,
            i >> 8 & 255,
            i & 255
        ));
    }
    z
}

#[test]
fn kill_9_while_an_image_is_written_serves_a_whole_version_after_restart() {
    let dir = TempDir::new("images-kill");
    dir.write("big.zone", &big_zone(1, "v1"));
    let config = dir.write(
        "xdpdns.toml",
        "[server]\nlisten = [\"127.0.0.1:0\"]\n[log]\nlevel = \"info\"\n\
         [transfer]\ndata_dir = \"data\"\n\
         [[zone]]\norigin = \"big.test.\"\nfile = \"big.zone\"\n",
    );
    let mut server = Server::start_with_config(dir, config);
    let image = server.dir.0.join("data/images/big.test.zimg");
    let temp = server.dir.0.join("data/images/big.test.tmp");
    assert!(eventually(Duration::from_secs(20), || image.exists()));
    let marker = |s: &Server| {
        s.udp("marker.big.test.", RecordType::TXT)
            .answers
            .iter()
            .find_map(|r| match &r.data {
                RData::TXT(t) => Some(t.to_string()),
                _ => None,
            })
    };
    let mut caught_writing = 0;
    for version in 2..=4u32 {
        let previous = format!("v{}", version - 1);
        let next = format!("v{version}");
        let zone = server.dir.0.join("big.zone");
        std::fs::write(&zone, big_zone(version, &next)).unwrap();
        server.signal("HUP");
        // Killed as soon as the image writer's temporary file appears
        // (polled every 0.2 ms, bounded; a kill after the write is fine
        // too).
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let writing = loop {
            if temp.exists() {
                break true;
            }
            if std::time::Instant::now() > deadline {
                break false;
            }
            std::thread::sleep(Duration::from_micros(200));
        };
        server.signal("KILL");
        let _ = server.child.wait();
        caught_writing += writing as usize;
        let dir = std::mem::replace(&mut server.dir, TempDir(Default::default()));
        server = Server::start_with_config(dir, server.config.clone());
        let log = server.log();
        assert!(
            !log.contains("zone image ignored"),
            "a torn image was left behind:\n{log}"
        );
        // Whichever version was committed last: the old one, or the new
        // one (the journal has it, or the file is read again), and whole.
        let served = marker(&server).expect("the marker answers");
        assert!(
            served.contains(&previous) || served.contains(&next),
            "served {served}, expected {previous} or {next}"
        );
        assert!(
            eventually(Duration::from_secs(20), || marker(&server)
                .is_some_and(|m| m.contains(&next))),
            "{next} never served:\n{}",
            server.log()
        );
        for i in [0u32, 29_999, 59_999] {
            let a = server.udp(&format!("h{i}.big.test."), RecordType::A);
            assert_eq!(a.answers.len(), 1, "h{i} after the restart");
        }
        // The next round needs the image of this version in place.
        assert!(eventually(Duration::from_secs(20), || !temp.exists()));
    }
    assert!(
        caught_writing > 0,
        "no kill landed while an image was being written"
    );
}
