//! `cargo xtask run`: the example served as a newcomer should see it. As
//! root, a veth pair joins a namespace (`xdpdns-demo`) to this one and the
//! XDP program is attached to its host end in generic mode, so queries
//! sent from the namespace are answered in the kernel; both are removed
//! when the server stops. Without root the example is served from
//! userspace only, and the first line says why.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

const NAMESPACE: &str = "xdpdns-demo";
const HOST_IF: &str = "xdpdns-demo0";
const PEER_IF: &str = "xdpdns-demo1";
const SERVER_ADDR: &str = "10.53.0.1";
const CLIENT_ADDR: &str = "10.53.0.2";

pub(crate) fn run(root: &Path, args: &[String]) -> Result<()> {
    let bin = root.join("target/release/xdpdns");
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        println!(
            "xtask: not root, so serving from userspace only: attaching XDP needs CAP_BPF and \
             CAP_NET_ADMIN (run as root to see queries answered in the kernel)"
        );
        return crate::process::run(
            Command::new(&bin)
                .current_dir(root)
                .args(["serve", "--config", "examples/xdpdns.toml"])
                .args(args),
        );
    }
    let config = root.join("target/xdpdns-demo.toml");
    write_config(root, &config)?;
    let _link = Link::create()?;
    let ctl = format!("{} ctl --config {}", bin.display(), config.display());
    println!(
        "\nxtask: XDP demo. xdpdns serves 127.0.0.1:5353 and {SERVER_ADDR}:5353; the XDP program \
         on {HOST_IF} (generic mode) answers what comes from namespace {NAMESPACE}:\n\
         \n  ip netns exec {NAMESPACE} dig @{SERVER_ADDR} -p 5353 www.example.com      # answered in the kernel\
         \n  ip netns exec {NAMESPACE} dig @{SERVER_ADDR} -p 5353 +tcp example.com MX  # TCP: the fallback\
         \n  dig @127.0.0.1 -p 5353 www.example.com                               # loopback: the fallback\
         \n  {ctl} top     # answers/s, kernel vs fallback\
         \n  {ctl} status\
         \n\nCtrl-C stops the server and removes the namespace and the veth pair.\n"
    );
    // Ctrl-C reaches the server too (same process group); this process
    // outlives it to clean up.
    // SAFETY: ignoring SIGINT in this process; the server installs its own handler.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
    crate::process::run(
        Command::new(&bin)
            .current_dir(root)
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .args(args),
    )
}

/// The example configuration with absolute paths, the veth address added
/// to `server.listen` and `[xdp]` on the host end of the pair.
fn write_config(root: &Path, out: &Path) -> Result<()> {
    let examples = root.join("examples");
    let text = std::fs::read_to_string(examples.join("xdpdns.toml"))?;
    let mut config: toml::Table = toml::from_str(&text).context("examples/xdpdns.toml")?;
    let absolute = |v: &mut toml::Value| {
        if let Some(p) = v.as_str() {
            *v = toml::Value::String(examples.join(p).display().to_string());
        }
    };
    if let Some(zones) = config.get_mut("zone").and_then(|z| z.as_array_mut()) {
        for zone in zones {
            if let Some(f) = zone.get_mut("file") {
                absolute(f);
            }
        }
    }
    for section in ["transfer", "registry", "cookies"] {
        for key in ["data_dir", "token_file", "secret_file"] {
            if let Some(v) = config.get_mut(section).and_then(|s| s.get_mut(key)) {
                absolute(v);
            }
        }
    }
    let server = config
        .entry("server")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let listen = server
        .as_table_mut()
        .context("[server] is a table")?
        .entry("listen")
        .or_insert_with(|| toml::Value::Array(vec!["127.0.0.1:5353".into()]));
    if let Some(list) = listen.as_array_mut() {
        list.push(format!("{SERVER_ADDR}:5353").into());
    }
    let mut xdp = toml::Table::new();
    xdp.insert("interfaces".into(), vec![toml::Value::from(HOST_IF)].into());
    xdp.insert("mode".into(), "generic".into());
    config.insert("xdp".into(), xdp.into());
    std::fs::write(out, toml::to_string(&config)?)?;
    Ok(())
}

/// The namespace and the veth pair; deleted on drop.
struct Link;

fn ip(args: &[&str]) -> Result<()> {
    crate::process::run(Command::new("ip").args(args))
}

impl Link {
    fn create() -> Result<Link> {
        let _ = Command::new("ip")
            .args(["netns", "del", NAMESPACE])
            .output();
        let _ = Command::new("ip").args(["link", "del", HOST_IF]).output();
        ip(&["netns", "add", NAMESPACE])?;
        let link = Link;
        ip(&[
            "link", "add", HOST_IF, "type", "veth", "peer", "name", PEER_IF,
        ])?;
        ip(&["link", "set", PEER_IF, "netns", NAMESPACE])?;
        ip(&["addr", "add", &format!("{SERVER_ADDR}/24"), "dev", HOST_IF])?;
        ip(&["link", "set", HOST_IF, "up"])?;
        let n = ["-n", NAMESPACE];
        ip(&[
            &n[..],
            &["addr", "add", &format!("{CLIENT_ADDR}/24"), "dev", PEER_IF],
        ]
        .concat())?;
        ip(&[&n[..], &["link", "set", PEER_IF, "up"]].concat())?;
        ip(&[&n[..], &["link", "set", "lo", "up"]].concat())?;
        Ok(link)
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // Deleting the namespace deletes the veth pair with it.
        let _ = Command::new("ip")
            .args(["netns", "del", NAMESPACE])
            .output();
        let _ = Command::new("ip").args(["link", "del", HOST_IF]).output();
        println!("xtask: removed namespace {NAMESPACE} and veth {HOST_IF}");
    }
}
