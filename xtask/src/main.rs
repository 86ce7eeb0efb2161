//! `cargo xtask <command>`: the project's own automation. Every command
//! installs what it needs first, so the README's commands work on a fresh
//! Debian 12 machine.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "xdpdns project tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Install the eBPF toolchain and the tools tests use (Debian apt, cargo install).
    Deps,
    /// Build the release binary.
    Build,
    /// Build and serve the example (examples/xdpdns.toml) on 127.0.0.1:5353;
    /// as root, also on a veth pair with the XDP program attached, so
    /// queries from its namespace are answered in the kernel.
    Run {
        /// Extra arguments passed to `xdpdns serve`.
        #[arg(trailing_var_arg = true)]
        args: Vec<String>,
    },
    /// Build the Debian package (target/deb/xdpdns_VERSION_ARCH.deb): the
    /// release binary, the systemd unit, a configuration, a system user,
    /// the man pages.
    Deb,
    /// Build the manual (docs/, mdBook) into target/doc-book and the man
    /// pages into target/man, after checking every link and include.
    Docs,
    /// Only the man pages, into DIR (the package test uses them).
    #[command(hide = true)]
    ManPages { dir: PathBuf },
    /// Install dependencies, then run format and lint checks, build the
    /// manual and man pages, run the whole test suite and the end-to-end
    /// benchmark's smoke run.
    Test,
    /// The end-to-end benchmark (benches/e2e/run.py): xdpdns beside NSD, Knot
    /// and BIND under dnsperf and kxdpgun; writes bench-results/e2e.{md,json}.
    BenchE2e {
        /// Arguments for benches/e2e/run.py (e.g. --names 1000000, --smoke).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// Debian packages the build and the tests need.
const APT_PACKAGES: &[&str] = &[
    // jemalloc, the server's allocator, is built from C with make
    "gcc",
    "make",
    // dig, as a test client
    "dnsutils",
    // ip netns/veth for the real-traffic XDP test
    "iproute2",
    // Peers of the transfer interop tests and the end-to-end benchmark:
    // NSD, Knot (with kdig and kxdpgun), BIND 9
    "nsd",
    "knot",
    "knot-dnsutils",
    "bind9",
    // dnssec-keygen and dnssec-signzone: the DNSSEC tests and benchmarks
    // sign their zones as an operator would
    "bind9-utils",
    // A real recursive resolver in front of the XDP path (veth test)
    "unbound",
    // DNSViz, the independent DNSSEC analyser the rollover tests consult
    // at every stage (its graph library is needed to read its results)
    "dnsviz",
    "python3-pygraphviz",
    // The anycast test's routing daemons (BIRD 2, as operators run it)
    // and the firewall that breaks a node's fallback on purpose
    "bird2",
    "nftables",
    // and detaches a node's XDP link behind its back
    "bpftool",
    // man, which shows the packaged man pages in the package test
    "man-db",
    // systemd-analyze, which verifies the shipped unit (dist/)
    "systemd",
    // promtool, which checks the /metrics exposition; curl scrapes it
    // from inside a test's network namespace
    "prometheus",
    "curl",
    // The end-to-end benchmark: its harness and its other load generator
    "python3",
    "dnsperf",
    // A second DNS library: reads zone files and transfers the tests compare
    "python3-dnspython",
    // A real ACME client and server: certbot's RFC 2136 plugin gets a
    // certificate from Pebble through dynamic updates
    "certbot",
    "python3-certbot-dns-rfc2136",
    "pebble",
    // The registry's etcd backend: a real etcd cluster for its tests, and
    // protoc and the protobuf well-known types, which etcd-client's build
    // compiles the etcd API with
    "etcd-server",
    "etcd-client",
    "protobuf-compiler",
    "libprotobuf-dev",
    // The registry's ZooKeeper source: a real ZooKeeper (standalone and
    // a three-member ensemble) and kazoo, the Registrar-like client the
    // tests kill to see its session expire
    "zookeeper",
    "python3-kazoo",
    // dnstap's real collector and reader: fstrm_capture takes the stream
    // (tests, and the benchmark's dnstap targets), dnstap-ldns reads it
    "fstrm-bin",
    "dnstap-ldns",
    // Headless Chromium: the status page's test opens it as a browser
    // would (DOM, live updates, the manual's screenshot)
    "chromium",
    // The eBPF build (see docs/src/architecture.md): Debian's rustc with a
    // precompiled core for bpfel-unknown-none, and LLVM 22 for bpf-linker.
    "rustc-web",
    "libstd-rust-web-dev-bpf",
    "llvm-22-dev",
];
const BPF_LINKER_VERSION: &str = "0.13.0";

mod demo;
mod docs;
mod process;

use process::run;

fn main() -> Result<()> {
    let root = workspace_root();
    match Cli::parse().task {
        Task::Deps => deps(),
        Task::Build => {
            deps()?;
            cargo(&root, &["build", "--release", "-p", "xdpdns"])
        }
        Task::Run { args } => {
            deps()?;
            cargo(&root, &["build", "--release", "-p", "xdpdns"])?;
            demo::run(&root, &args)
        }
        Task::Deb => {
            deps()?;
            cargo(&root, &["build", "--release", "-p", "xdpdns"])?;
            docs::man_pages(&root, &root.join("target/man"))?;
            run(Command::new("sh")
                .current_dir(&root)
                .arg("dist/debian/build-deb.sh")
                .arg("target/release/xdpdns")
                .arg("target/deb")
                .arg("target/man"))
        }
        Task::Docs => docs::build(&root),
        Task::ManPages { dir } => docs::man_pages(&root, &dir),
        Task::Test => {
            deps()?;
            cargo(&root, &["fmt", "--all", "--", "--check"])?;
            // A broken link, include or man page fails the run.
            docs::build(&root)?;
            cargo(
                &root,
                &[
                    "clippy",
                    "--workspace",
                    "--all-targets",
                    "--",
                    "-D",
                    "warnings",
                ],
            )?;
            // --all-targets also runs each criterion benchmark once, so the
            // benchmarks cannot rot.
            cargo(&root, &["test", "--workspace", "--all-targets"])?;
            // The same for the end-to-end harness: a tiny zone, 2 s per
            // target, on the debug binary the tests just built.
            bench_e2e(&root, &["--smoke", "--xdpdns", "target/debug/xdpdns"])
        }
        Task::BenchE2e { args } => {
            deps()?;
            cargo(&root, &["build", "--release", "-p", "xdpdns"])?;
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            bench_e2e(&root, &args)
        }
    }
}

fn bench_e2e(root: &Path, args: &[&str]) -> Result<()> {
    run(Command::new("python3")
        .current_dir(root)
        .arg("benches/e2e/run.py")
        .args(args))
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

fn deps() -> Result<()> {
    apt_install()?;
    bpf_linker()
}

fn apt_install() -> Result<()> {
    let missing: Vec<&str> = APT_PACKAGES
        .iter()
        .copied()
        .filter(|pkg| !dpkg_installed(pkg))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("xtask: installing {}", missing.join(" "));
    let install = |update: bool| -> Result<()> {
        if update {
            run(Command::new("apt-get").args(["update", "-q"]))?;
        }
        run(Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(&missing))
    };
    // A fresh machine may have no package lists yet: update only if needed.
    install(false).or_else(|_| install(true))
}

fn dpkg_installed(pkg: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", pkg])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        .unwrap_or(false)
}

/// bpf-linker built against Debian's LLVM 22 (the LLVM of rustc-web).
fn bpf_linker() -> Result<()> {
    let current = Command::new("bpf-linker").arg("--version").output();
    if let Ok(out) = current {
        if String::from_utf8_lossy(&out.stdout).contains(BPF_LINKER_VERSION) {
            return Ok(());
        }
    }
    eprintln!("xtask: installing bpf-linker {BPF_LINKER_VERSION}");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    run(Command::new(cargo)
        .env("LLVM_PREFIX", "/usr/lib/llvm-22")
        .args([
            "install",
            "bpf-linker",
            "--version",
            BPF_LINKER_VERSION,
            "--locked",
        ])
        .args(["--no-default-features", "--features", "llvm-22"]))
}

fn cargo(root: &Path, args: &[&str]) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    run(Command::new(cargo).current_dir(root).args(args))
}
