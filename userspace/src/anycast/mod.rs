//! Anycast health coupling (as in ISC's anycast DNS cluster design): the
//! node announces its service addresses only while both answer paths and
//! its data pass self-checks, withdraws after `fall` failures, comes back
//! after `rise` passes and a flap hold-down, and withdraws first on a
//! graceful stop. The addresses live on a TUN device only this process
//! holds, so they vanish with it, however it ends (fail closed).
//!
//! `health` is the pure decision (`xdpdns_core::anycast::health`);
//! `checks` the self-checks; `interface` and `netlink` the kernel side;
//! [`run`] the thin driver.

pub mod checks;
pub mod interface;
pub mod netlink;

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, oneshot, watch};
use tracing::{info, warn};

pub use checks::{parse_check_name, Checks};
use health::{Action, Health};
pub use interface::{AnnounceInterface, InterfaceError};
pub use xdpdns_core::anycast::health;

use crate::xdp::WeakKernelTable;

/// The driver's handle: a graceful drain, answered once withdrawn and the
/// drain time has passed.
pub struct Anycast {
    commands: mpsc::Sender<Command>,
    /// Announced or not, for `ctl` and `/metrics`.
    pub announced: watch::Receiver<bool>,
}

impl Anycast {
    /// Withdraws for good, then waits the configured drain time.
    pub async fn drain(&self) {
        let (tx, rx) = oneshot::channel();
        if self.commands.send(Command::Drain(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// Ends a drain (`xdpdns ctl resume`): announced again after `rise`
    /// passing checks.
    pub async fn resume(&self) {
        let _ = self.commands.send(Command::Resume).await;
    }
}

/// What the handle asks of the driver.
enum Command {
    /// Withdraw for good; answered once the drain time has passed.
    Drain(oneshot::Sender<()>),
    Resume,
}

/// The interface, addresses and cadence (from `[anycast]`).
#[derive(Clone, Debug)]
pub struct Settings {
    pub interface: String,
    pub addresses: Vec<ipnet::IpNet>,
    pub rules: health::Rules,
    pub check_interval: std::time::Duration,
    pub drain: std::time::Duration,
    pub announce_command: Option<String>,
    pub withdraw_command: Option<String>,
}

/// What the driver checks and how.
pub struct Setup {
    pub config: Settings,
    pub checks: Checks,
    /// The kernel path, when XDP is configured (`None` inside: it failed).
    pub kernel: Option<Option<WeakKernelTable>>,
}

/// Creates the announce interface (withdrawn) and starts the driver.
pub fn start(setup: Setup) -> Result<Anycast, InterfaceError> {
    let iface = AnnounceInterface::create(&setup.config.interface, &setup.config.addresses)?;
    info!(
        interface = iface.name(),
        addresses = ?setup.config.addresses,
        "anycast: interface created; announcing after {} passing self-checks",
        setup.config.rules.rise
    );
    let (commands, drain_rx) = mpsc::channel(1);
    let (announced_tx, announced) = watch::channel(false);
    tokio::spawn(run(setup, iface, drain_rx, announced_tx));
    Ok(Anycast {
        commands,
        announced,
    })
}

async fn run(
    setup: Setup,
    mut iface: AnnounceInterface,
    mut commands: mpsc::Receiver<Command>,
    announced: watch::Sender<bool>,
) {
    let config = setup.config;
    let checks = Arc::new(setup.checks);
    let mut health = Health::new(config.rules);
    let mut tick = tokio::time::interval(config.check_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_failure: Option<String> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let result = check_once(&checks, setup.kernel.as_ref()).await;
                let now = Instant::now();
                match &result {
                    Err(why) if last_failure.as_ref() != Some(why) => {
                        warn!("anycast: self-check failed: {why}");
                    }
                    Ok(()) if last_failure.is_some() => info!("anycast: self-checks pass again"),
                    _ => {}
                }
                last_failure = result.as_ref().err().cloned();
                if let Some(action) = health.observe(result.is_ok(), now) {
                    apply(&mut iface, &config, action, health.held_until(now));
                    let _ = announced.send(iface.is_announced());
                }
            }
            command = commands.recv() => {
                let done = match command {
                    None => break,
                    Some(Command::Resume) => {
                        info!("anycast: resumed; announcing after {} passing self-checks", config.rules.rise);
                        health.resume();
                        continue;
                    }
                    Some(Command::Drain(done)) => done,
                };
                if let Some(action) = health.drain(Instant::now()) {
                    apply(&mut iface, &config, action, None);
                    let _ = announced.send(false);
                    info!("anycast: draining for {} ms", config.drain.as_millis());
                    tokio::time::sleep(config.drain).await;
                }
                let _ = done.send(());
            }
        }
    }
}

/// One round of self-checks: freshness, the fallback, the kernel path.
async fn check_once(
    checks: &Arc<Checks>,
    kernel: Option<&Option<WeakKernelTable>>,
) -> Result<(), String> {
    checks.freshness()?;
    let c = checks.clone();
    tokio::task::spawn_blocking(move || c.fallback())
        .await
        .map_err(|e| format!("fallback check: {e}"))??;
    match kernel {
        None => Ok(()),
        Some(None) => Err("kernel path: XDP is configured but not running".into()),
        Some(Some(weak)) => match weak.upgrade() {
            Some(k) => checks.kernel(&k).await,
            None => Err("kernel path: stopped".into()),
        },
    }
}

fn apply(
    iface: &mut AnnounceInterface,
    config: &Settings,
    action: Action,
    held_until: Option<Instant>,
) {
    let (result, command, what) = match action {
        Action::Announce => (iface.announce(), &config.announce_command, "announced"),
        Action::Withdraw => (iface.withdraw(), &config.withdraw_command, "withdrawn"),
    };
    match result {
        Ok(()) => match held_until {
            Some(t) => info!(
                interface = iface.name(),
                "anycast: {what}; held down for {} ms (flapping)",
                t.saturating_duration_since(Instant::now()).as_millis()
            ),
            None => info!(interface = iface.name(), "anycast: {what}"),
        },
        Err(e) => warn!("anycast: {e}"),
    }
    if let Some(cmd) = command {
        match std::process::Command::new("sh").arg("-c").arg(cmd).status() {
            Ok(s) if s.success() => {}
            Ok(s) => warn!("anycast: {what} command `{cmd}` exited with {s}"),
            Err(e) => warn!("anycast: cannot run {what} command `{cmd}`: {e}"),
        }
    }
}
