//! Signatures per second per core: a zone of 200 names signed whole on
//! one thread (below the size at which signing spreads over the cores),
//! with an ECDSA P-256 and an Ed25519 combined key, NSEC. Criterion's
//! throughput is RRSIGs made per second: the per-core figure beside
//! `cargo bench --bench signing`'s whole-machine one. `cargo bench
//! --bench signatures`.

use std::path::Path;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use hickory_proto::dnssec::crypto::{EcdsaSigningKey, Ed25519SigningKey};
use hickory_proto::dnssec::{Algorithm, SigningKey};
use hickory_proto::rr::{Name, RecordType};
use xdpdns::zone::load_zone_str;
use xdpdns_core::signing::{sign_zone, ActiveKey, KeyRole, SignPolicy, ZoneSigner};

const NOW: u32 = 1_800_000_000;

fn bench(c: &mut Criterion) {
    let origin = Name::from_ascii("sig.test.").unwrap();
    let mut text = String::from(
        "$ORIGIN sig.test.\n$TTL 300\n@ SOA ns1 h 1 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n",
    );
    for i in 0..200 {
        text += &format!("h{i} A 10.0.{}.{}\n", i >> 8, i & 255);
    }
    let zone = load_zone_str(&text, &origin, Path::new("sig.test")).unwrap();
    let keys: [(&str, Arc<dyn SigningKey>); 2] = [
        ("ecdsap256sha256", {
            let pkcs8 = EcdsaSigningKey::generate_pkcs8(Algorithm::ECDSAP256SHA256).unwrap();
            Arc::new(EcdsaSigningKey::from_pkcs8(&pkcs8, Algorithm::ECDSAP256SHA256).unwrap())
        }),
        ("ed25519", {
            let pkcs8 = Ed25519SigningKey::generate_pkcs8().unwrap();
            Arc::new(Ed25519SigningKey::from_pkcs8(&pkcs8).unwrap())
        }),
    ];
    let mut g = c.benchmark_group("signatures_one_core");
    for (name, key) in keys {
        let signer = ZoneSigner::new(
            vec![ActiveKey::new(KeyRole::Csk, key).unwrap()],
            SignPolicy::default(),
        );
        let mut signed = zone.clone();
        sign_zone(&signer, None, &mut signed, NOW).unwrap();
        let sigs = signed
            .records()
            .filter(|r| r.record_type() == RecordType::RRSIG)
            .count();
        g.throughput(Throughput::Elements(sigs as u64));
        g.bench_function(format!("{name}_{sigs}_rrsigs"), |b| {
            b.iter_batched(
                || zone.clone(),
                |mut z| sign_zone(&signer, None, &mut z, NOW).unwrap(),
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
