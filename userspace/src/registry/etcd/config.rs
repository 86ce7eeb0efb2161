//! `[registry.etcd]`: the endpoints, prefix and timeout, and how to
//! reach the members: TLS (CAs, client certificate, server name) and
//! authentication.

use std::path::PathBuf;
use std::time::Duration;

use etcd_client::{Certificate, Identity, TlsOptions};
use serde::Deserialize;

/// `[registry.etcd]`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct EtcdConfig {
    /// Client URLs of the etcd members, e.g. `http://127.0.0.1:2379`.
    pub endpoints: Vec<String>,
    /// Key prefix of this registry (several registries may share etcd).
    #[serde(default = "default_prefix")]
    pub prefix: String,
    /// etcd authentication (`user` with `password` or `password_file`).
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub password: Option<String>,
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// Connect and request timeout.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// TLS (with `https://` endpoints): the CA certificates (PEM) that
    /// sign the members' certificates; without it, the system's roots.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// A client certificate and its key (PEM), for members started with
    /// `--client-cert-auth`.
    #[serde(default)]
    pub cert_file: Option<PathBuf>,
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// The name to verify in the members' certificates, when it is not the
    /// endpoints' host.
    #[serde(default)]
    pub server_name: Option<String>,
}

fn default_prefix() -> String {
    "/xdpdns/".into()
}

fn default_timeout_ms() -> u64 {
    2000
}

impl EtcdConfig {
    pub(super) fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.max(1))
    }

    /// Whether the endpoints are `https://` (all or none must be).
    pub(super) fn uses_tls(&self) -> bool {
        self.endpoints.iter().any(|e| e.starts_with("https://"))
    }

    /// What is wrong with the table, as (key, message).
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.endpoints.is_empty() {
            return Err((
                "registry.etcd.endpoints",
                "at least one etcd client URL is required".into(),
            ));
        }
        if !self.prefix.ends_with('/') {
            return Err((
                "registry.etcd.prefix",
                "must end with '/' (keys are the prefix, then instances/ or owners/)".into(),
            ));
        }
        let https = self.endpoints.iter().filter(|e| e.starts_with("https://"));
        if !matches!(https.count(), n if n == 0 || n == self.endpoints.len()) {
            return Err((
                "registry.etcd.endpoints",
                "either every endpoint is https:// or none is".into(),
            ));
        }
        let tls_keys = [
            ("registry.etcd.ca_file", self.ca_file.is_some()),
            ("registry.etcd.cert_file", self.cert_file.is_some()),
            ("registry.etcd.key_file", self.key_file.is_some()),
            ("registry.etcd.server_name", self.server_name.is_some()),
        ];
        if !self.uses_tls() {
            if let Some((key, _)) = tls_keys.iter().find(|(_, set)| *set) {
                return Err((key, "a TLS setting needs https:// endpoints".into()));
            }
        }
        if self.cert_file.is_some() != self.key_file.is_some() {
            return Err((
                "registry.etcd.key_file",
                "cert_file and key_file go together".into(),
            ));
        }
        Ok(())
    }

    /// Makes relative file paths relative to `base`.
    pub fn resolve_paths(&mut self, base: &std::path::Path) {
        for f in [
            &mut self.password_file,
            &mut self.ca_file,
            &mut self.cert_file,
            &mut self.key_file,
        ]
        .into_iter()
        .flatten()
        {
            if f.is_relative() {
                *f = base.join(&*f);
            }
        }
    }

    /// The TLS options for `https://` endpoints, files read now.
    pub(super) fn tls(&self) -> Result<Option<TlsOptions>, String> {
        if !self.uses_tls() {
            return Ok(None);
        }
        let read = |key: &str, f: &PathBuf| {
            std::fs::read(f).map_err(|e| format!("registry.etcd.{key}: {}: {e}", f.display()))
        };
        let mut tls = TlsOptions::new();
        tls = match &self.ca_file {
            Some(f) => tls.ca_certificate(Certificate::from_pem(read("ca_file", f)?)),
            None => tls.with_native_roots(),
        };
        if let (Some(cert), Some(key)) = (&self.cert_file, &self.key_file) {
            tls = tls.identity(Identity::from_pem(
                read("cert_file", cert)?,
                read("key_file", key)?,
            ));
        }
        if let Some(name) = &self.server_name {
            tls = tls.domain_name(name.clone());
        }
        Ok(Some(tls))
    }

    pub(super) fn password(&self) -> Result<String, String> {
        match (&self.password, &self.password_file) {
            (Some(p), _) => Ok(p.clone()),
            (None, Some(f)) => std::fs::read_to_string(f)
                .map(|s| s.trim().to_string())
                .map_err(|e| format!("registry.etcd.password_file: {}: {e}", f.display())),
            (None, None) => Ok(String::new()),
        }
    }
}
