//! Zones signed as an operator signs them, with BIND's `dnssec-keygen`
//! and `dnssec-signzone` (bind9-utils, installed by `cargo xtask deps`):
//! for the DNSSEC tests and the benchmarks that put signed answers beside
//! unsigned ones. Depends on std only, so benchmarks include it by path
//! (each uses part of it).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// A signed zone in a directory of its own (removed on drop), with the
/// key-signing key a validator should trust.
pub struct Signed {
    pub dir: PathBuf,
    pub file: PathBuf,
    pub trust_anchor: String,
}

impl Drop for Signed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Signed {
    pub fn text(&self) -> String {
        std::fs::read_to_string(&self.file).unwrap()
    }
}

/// Runs a command in `dir`; its stdout, or a panic with its output.
pub fn run_in(dir: &std::path::Path, cmd: &mut Command) -> String {
    let out = cmd
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (install bind9-utils: cargo xtask deps)"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Signs `text` (zone `origin`) with a fresh KSK and ZSK of `algorithm`;
/// `extra` goes to dnssec-signzone (e.g. `-3 salt -H 2` for NSEC3).
pub fn sign(origin: &str, text: &str, algorithm: &str, extra: &[&str]) -> Signed {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "xdpdns-signed-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("unsigned.zone"), text).unwrap();
    let keygen = |ksk: bool| {
        let mut cmd = Command::new("dnssec-keygen");
        cmd.args(["-q", "-K", ".", "-a", algorithm]);
        if ksk {
            cmd.args(["-f", "KSK"]);
        }
        run_in(&dir, cmd.arg(origin)).trim().to_string()
    };
    let ksk = keygen(true);
    keygen(false);
    run_in(
        &dir,
        Command::new("dnssec-signzone")
            .args(["-q", "-S", "-K", ".", "-o", origin, "-f", "signed.zone"])
            .args(extra)
            .arg("unsigned.zone"),
    );
    let key = std::fs::read_to_string(dir.join(format!("{ksk}.key"))).unwrap();
    let trust_anchor = key
        .lines()
        .find(|l| !l.starts_with(';') && l.contains("DNSKEY"))
        .unwrap()
        .replace('\t', " ");
    Signed {
        file: dir.join("signed.zone"),
        dir,
        trust_anchor,
    }
}

/// A small zone, `signed.test.`, with `www` A 192.0.2.80, signed with
/// ECDSA P-256 (NSEC): the benchmarks' signed hit.
pub fn small_signed_zone() -> String {
    sign(
        "signed.test.",
        "$ORIGIN signed.test.\n$TTL 300\n@ SOA ns1 h 1 3600 600 86400 60\n@ NS ns1\n\
         ns1 A 192.0.2.1\nwww A 192.0.2.80\n",
        "ECDSAP256SHA256",
        &[],
    )
    .text()
}
