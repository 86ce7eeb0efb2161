//! `xdpdns register`: the Registrar role. Registers one instance with a
//! registry API, renews its lease, runs a health-check command and reports
//! `down` after `fall` consecutive failures and `up` after `rise` consecutive
//! successes; deregisters on SIGTERM/SIGINT.
//!
//! With a health check the instance registers `down` and is listed only
//! once the check has passed `rise` times: a fresh instance is not sent
//! traffic before it has shown it can take it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Deserialize;
use tokio::signal::unix::{signal, SignalKind};
use tracing::{info, warn};

use crate::registry::{InstanceSpec, Status};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// Registry API base URL, e.g. `http://127.0.0.1:8053`.
    pub api: String,
    #[serde(default)]
    pub token: Option<String>,
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// Instance id (a DNS label); default: the host name.
    #[serde(default)]
    pub id: Option<String>,
    /// Heartbeat period; default: a third of the lease.
    #[serde(default)]
    pub heartbeat_ms: Option<u64>,
    pub instance: InstanceSpec,
    #[serde(default)]
    pub health: Option<HealthCheck>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthCheck {
    /// Run with `sh -c`; exit status 0 = healthy.
    pub command: String,
    #[serde(default = "default_interval")]
    pub interval_ms: u64,
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    /// Consecutive failures before reporting down.
    #[serde(default = "default_fall")]
    pub fall: u32,
    /// Consecutive successes before reporting up.
    #[serde(default = "default_rise")]
    pub rise: u32,
}

fn default_interval() -> u64 {
    5_000
}
fn default_timeout() -> u64 {
    2_000
}
fn default_fall() -> u32 {
    3
}
fn default_rise() -> u32 {
    2
}

/// Consecutive-result counter: pure, so the fall/rise rule is unit-tested.
#[derive(Debug)]
pub struct Debounce {
    status: Status,
    streak: u32,
    fall: u32,
    rise: u32,
}

impl Debounce {
    pub fn new(initial: Status, fall: u32, rise: u32) -> Self {
        Debounce {
            status: initial,
            streak: 0,
            fall: fall.max(1),
            rise: rise.max(1),
        }
    }

    /// Feeds one check result; returns the new status when it flips.
    pub fn observe(&mut self, healthy: bool) -> Option<Status> {
        let against = match self.status {
            Status::Up => !healthy,
            Status::Down => healthy,
        };
        if !against {
            self.streak = 0;
            return None;
        }
        self.streak += 1;
        let needed = match self.status {
            Status::Up => self.fall,
            Status::Down => self.rise,
        };
        if self.streak < needed {
            return None;
        }
        self.streak = 0;
        self.status = match self.status {
            Status::Up => Status::Down,
            Status::Down => Status::Up,
        };
        Some(self.status)
    }
}

impl AgentConfig {
    pub fn load(path: &Path) -> anyhow::Result<AgentConfig> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        let mut c: AgentConfig = toml::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}: {}",
                path.display(),
                e.to_string().trim_end().replace('\n', " ")
            )
        })?;
        if let Some(f) = &mut c.token_file {
            if f.is_relative() {
                *f = path.parent().unwrap_or(Path::new(".")).join(&*f);
            }
        }
        if c.token.is_none() && c.token_file.is_none() {
            bail!(
                "{}: token: a token (or token_file) is required",
                path.display()
            );
        }
        if c.instance.lease_secs.is_none() {
            bail!(
                "{}: instance.lease_secs: missing: every registration needs a lease",
                path.display()
            );
        }
        c.instance
            .validate()
            .map_err(|e| anyhow::anyhow!("{}: instance.{e}", path.display()))?;
        Ok(c)
    }
}

struct Client {
    http: ureq::Agent,
    base: String,
    bearer: String,
    id: String,
}

impl Client {
    fn url(&self, tail: &str) -> String {
        format!(
            "{}/v1/instances/{}{tail}",
            self.base.trim_end_matches('/'),
            self.id
        )
    }

    /// One API call; `Ok(false)` for 404 (the registry no longer knows us).
    fn call(
        &self,
        method: &str,
        tail: &str,
        body: Option<serde_json::Value>,
    ) -> anyhow::Result<bool> {
        let req = self
            .http
            .request(method, &self.url(tail))
            .set("Authorization", &self.bearer);
        let res = match body {
            Some(b) => req.send_json(b),
            None => req.call(),
        };
        match res {
            Ok(_) => Ok(true),
            Err(ureq::Error::Status(404, _)) => Ok(false),
            Err(ureq::Error::Status(code, resp)) => {
                bail!(
                    "{method} {}: {code} {}",
                    self.url(tail),
                    resp.into_string().unwrap_or_default()
                )
            }
            Err(e) => bail!("{method} {}: {e}", self.url(tail)),
        }
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f)
        .await
        .expect("API call panicked")
}

async fn check(h: &HealthCheck) -> bool {
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&h.command)
        .kill_on_drop(true)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status();
    matches!(
        tokio::time::timeout(Duration::from_millis(h.timeout_ms), child).await,
        Ok(Ok(s)) if s.success()
    )
}

pub async fn run(config: AgentConfig) -> anyhow::Result<()> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let token = crate::config::read_token(&config.token, &config.token_file, "token")?;
    let id = match &config.id {
        Some(id) => id.clone(),
        None => std::fs::read_to_string("/proc/sys/kernel/hostname")?
            .trim()
            .to_string(),
    };
    let client = std::sync::Arc::new(Client {
        http: ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(5))
            .build(),
        base: config.api.clone(),
        bearer: format!("Bearer {token}"),
        id,
    });
    let lease_ms = u64::from(config.instance.lease_secs.expect("validated")) * 1000;
    let heartbeat = Duration::from_millis(config.heartbeat_ms.unwrap_or(lease_ms / 3).max(1));
    let mut spec = config.instance;
    let mut debounce = config
        .health
        .as_ref()
        .map(|h| Debounce::new(Status::Down, h.fall, h.rise));
    if debounce.is_some() {
        spec.status = Status::Down;
    }
    let register = |spec: &InstanceSpec| {
        let c = client.clone();
        let body = serde_json::to_value(spec).expect("spec serialises");
        blocking(move || c.call("PUT", "", Some(body)))
    };
    register(&spec).await?;
    info!(id = %client.id, status = ?spec.status, "registered");

    let mut beat = tokio::time::interval(heartbeat);
    let check_every = config
        .health
        .as_ref()
        .map_or(Duration::from_secs(3600), |h| {
            Duration::from_millis(h.interval_ms)
        });
    let mut checks = tokio::time::interval(check_every);
    loop {
        tokio::select! {
            _ = beat.tick() => {
                let c = client.clone();
                match blocking(move || c.call("POST", "/heartbeat", None)).await {
                    Ok(true) => {}
                    Ok(false) => {
                        warn!("registry lost this instance (lease expired?); registering again");
                        if let Err(e) = register(&spec).await { warn!("{e}"); }
                    }
                    Err(e) => warn!("heartbeat failed: {e}"),
                }
            }
            _ = checks.tick(), if config.health.is_some() => {
                let h = config.health.as_ref().expect("guarded");
                let healthy = check(h).await;
                if let Some(status) = debounce.as_mut().and_then(|d| d.observe(healthy)) {
                    spec.status = status;
                    info!(?status, "health changed; reporting");
                    let c = client.clone();
                    let body = serde_json::json!({ "status": status });
                    match blocking(move || c.call("PUT", "/status", Some(body))).await {
                        Ok(true) => {}
                        Ok(false) => { let _ = register(&spec).await; }
                        Err(e) => warn!("status report failed: {e}"),
                    }
                }
            }
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    let c = client.clone();
    match blocking(move || c.call("DELETE", "", None)).await {
        Ok(_) => info!("deregistered"),
        Err(e) => warn!("deregistration failed (the lease will expire): {e}"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fall_and_rise() {
        let mut d = Debounce::new(Status::Down, 3, 2);
        assert_eq!(d.observe(true), None);
        assert_eq!(d.observe(true), Some(Status::Up), "up after 2 successes");
        assert_eq!(d.observe(false), None);
        assert_eq!(d.observe(false), None);
        assert_eq!(d.observe(true), None, "a success resets the failure streak");
        assert_eq!(d.observe(false), None);
        assert_eq!(d.observe(false), None);
        assert_eq!(
            d.observe(false),
            Some(Status::Down),
            "down after 3 failures in a row"
        );
        assert_eq!(d.observe(false), None);
    }
}
