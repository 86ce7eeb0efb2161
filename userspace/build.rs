//! Builds the XDP program (`../ebpf`) and hands its object file to the
//! userspace crate, so one `cargo build` produces a binary with the fast
//! path embedded.
//!
//! The eBPF crate needs Debian's rustc (it ships `core` precompiled for
//! `bpfel-unknown-none`) and `bpf-linker`; `cargo xtask deps` installs both
//! (docs/src/architecture.md says why this route).

use std::path::{Path, PathBuf};
use std::process::Command;

const DEBIAN_RUSTC: &str = "/usr/bin/rustc";

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.parent().unwrap().to_path_buf();
    let ebpf = root.join("ebpf");
    for p in [
        "ebpf/src",
        "ebpf/Cargo.toml",
        "ebpf/Cargo.lock",
        "common/src",
        "common/Cargo.toml",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    println!("cargo:rustc-env=XDPDNS_GIT_COMMIT={}", git_commit(&root));

    if !Path::new(DEBIAN_RUSTC).exists() || which("bpf-linker").is_none() {
        panic!(
            "the eBPF toolchain is missing (need {DEBIAN_RUSTC} from Debian's rustc-web and \
             libstd-rust-web-dev-bpf, and bpf-linker on PATH): run `cargo xtask deps`"
        );
    }
    // The object that serves, and the same program with the benchmark
    // programs (separate target dirs so neither build undoes the other).
    build_object(&root, &ebpf, "ebpf", &[], &out_dir.join("xdpdns.bpf.o"));
    build_object(
        &root,
        &ebpf,
        "ebpf-bench",
        &["--features", "bench"],
        &out_dir.join("xdpdns-bench.bpf.o"),
    );
}

fn build_object(root: &Path, ebpf: &Path, dir: &str, extra: &[&str], out: &Path) {
    let target_dir = root.join("target").join(dir);
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(ebpf)
        .args(["build", "--release", "--target", "bpfel-unknown-none"])
        .args(extra)
        .arg("--target-dir")
        .arg(&target_dir)
        .env("RUSTC", DEBIAN_RUSTC)
        .env("RUSTC_BOOTSTRAP", "1");
    for var in [
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_MAKEFLAGS",
        "RUSTDOCFLAGS",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd.status().expect("run cargo for the eBPF crate");
    if !status.success() {
        panic!("building the eBPF program failed: {status}");
    }
    let built = target_dir.join("bpfel-unknown-none/release/xdpdns");
    std::fs::copy(&built, out).unwrap_or_else(|e| panic!("copy {}: {e}", built.display()));
}

fn which(cmd: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(cmd))
        .find(|p| p.is_file())
}

/// The commit being built (`-dirty` with uncommitted changes), or
/// `unknown` outside a git checkout. Rebuilt when HEAD moves.
fn git_commit(root: &Path) -> String {
    let git = root.join(".git");
    for f in ["HEAD", "packed-refs"] {
        println!("cargo:rerun-if-changed={}", git.join(f).display());
    }
    if let Ok(head) = std::fs::read_to_string(git.join("HEAD")) {
        if let Some(r) = head.strip_prefix("ref: ") {
            println!("cargo:rerun-if-changed={}", git.join(r.trim()).display());
        }
    }
    let out = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match out(&["rev-parse", "--short=12", "HEAD"]) {
        Some(commit) => {
            let dirty = out(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            format!("{commit}{}", if dirty { "-dirty" } else { "" })
        }
        None => "unknown".into(),
    }
}
