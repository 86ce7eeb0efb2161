//! Zones signed by BIND's `dnssec-signzone` (ECDSA P-256 KSK and ZSK,
//! NSEC), for the benchmarks that put signed answers beside unsigned ones.
//! `cargo xtask deps` installs the tools (bind9-utils).

use std::path::Path;
use std::process::Command;

/// `text` (zone `origin`) signed; the signed zone's text.
pub fn sign(origin: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!(
        "xdpdns-bench-sign-{}-{}",
        std::process::id(),
        origin.trim_end_matches('.')
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("unsigned.zone"), text).unwrap();
    let run = |cmd: &mut Command| {
        let out = cmd
            .current_dir(&dir)
            .output()
            .unwrap_or_else(|e| panic!("{cmd:?}: {e} (install bind9-utils: cargo xtask deps)"));
        assert!(
            out.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    for ksk in [true, false] {
        let mut keygen = Command::new("dnssec-keygen");
        keygen.args(["-q", "-K", ".", "-a", "ECDSAP256SHA256"]);
        if ksk {
            keygen.args(["-f", "KSK"]);
        }
        run(keygen.arg(origin));
    }
    run(Command::new("dnssec-signzone").args([
        "-q",
        "-S",
        "-K",
        ".",
        "-o",
        origin,
        "-f",
        "signed.zone",
        "unsigned.zone",
    ]));
    let signed = std::fs::read_to_string(dir.join("signed.zone")).unwrap();
    let _ = std::fs::remove_dir_all(Path::new(&dir));
    signed
}
