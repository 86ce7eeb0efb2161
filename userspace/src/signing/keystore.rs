//! Signing keys on disk: `<transfer.data_dir>/keys/<zone>/`, one PKCS#8
//! file per private key (mode 0600, created once, never logged) and
//! `keys.json` listing them with their role and state. Keys are created
//! the first time a zone is signed and read at every start after; a key
//! the list names that cannot be read stops the start with its file's
//! name (a new KSK would break the chain of trust from a published DS).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hickory_proto::dnssec::crypto::{EcdsaSigningKey, Ed25519SigningKey};
use hickory_proto::dnssec::{Algorithm, SigningKey};
use hickory_proto::rr::Name;
use rustls_pki_types::PrivatePkcs8KeyDer;
use serde::{Deserialize, Serialize};

use crate::config::DnssecPolicyConfig;
use xdpdns_core::signing::timeline::{KeyState, TimedKey};
use xdpdns_core::signing::{ActiveKey, KeyRole};

const LIST: &str = "keys.json";

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
    #[error("creating a {algorithm} key: {message}")]
    Generate { algorithm: String, message: String },
    #[error("{zone} has no submitted key {tag} whose DS is not yet seen")]
    NotSubmitted {
        zone: hickory_proto::rr::Name,
        tag: u16,
    },
}

/// One key as `keys.json` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyEntry {
    pub tag: u16,
    pub role: KeyRole,
    pub algorithm: String,
    /// The private key's file, in the zone's key directory.
    pub file: String,
    pub created_unix: u64,
    /// Where it is on the key timeline.
    pub state: KeyState,
    /// When it entered `state` (0 in lists written before rollovers: its
    /// creation).
    #[serde(default)]
    pub since: u64,
    /// A KSK or CSK whose DS the parent is asked to publish (CDS).
    #[serde(default)]
    pub submitted: bool,
    /// When its DS was first seen at the parent.
    #[serde(default)]
    pub ds_seen: Option<u64>,
}

impl KeyEntry {
    /// Its place on the timeline.
    pub fn timed(&self) -> TimedKey {
        TimedKey {
            tag: self.tag,
            role: self.role,
            state: self.state,
            since: if self.since == 0 {
                self.created_unix
            } else {
                self.since
            },
            submitted: self.submitted,
            ds_seen: self.ds_seen,
            algorithm: algorithm_number(&self.algorithm),
        }
    }

    pub fn set_timed(&mut self, k: &TimedKey) {
        self.state = k.state;
        self.since = k.since;
        self.submitted = k.submitted;
        self.ds_seen = k.ds_seen;
    }
}

/// The key directory of `zone`.
pub fn zone_dir(data_dir: &Path, zone: &Name) -> PathBuf {
    let name = zone.to_lowercase().to_ascii();
    data_dir
        .join("keys")
        .join(name.trim_end_matches('.').to_string() + ".")
}

/// The keys listed for `zone` (none when it has never been signed).
pub fn list(dir: &Path) -> Result<Vec<KeyEntry>, KeyError> {
    let path = dir.join(LIST);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| KeyError::Invalid {
            path,
            message: e.to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(KeyError::Io { path, source }),
    }
}

/// The DNSSEC number of a policy's algorithm name.
pub fn algorithm_number(name: &str) -> u8 {
    u8::from(algorithm(name))
}

fn algorithm(name: &str) -> Algorithm {
    match name {
        "ed25519" => Algorithm::ED25519,
        _ => Algorithm::ECDSAP256SHA256,
    }
}

fn load_key(path: &Path, alg: &str) -> Result<Arc<dyn SigningKey>, KeyError> {
    let der = std::fs::read(path).map_err(|source| KeyError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let pkcs8 = PrivatePkcs8KeyDer::from(der);
    let key: Result<Arc<dyn SigningKey>, _> = match algorithm(alg) {
        Algorithm::ED25519 => Ed25519SigningKey::from_pkcs8(&pkcs8).map(|k| Arc::new(k) as _),
        a => EcdsaSigningKey::from_pkcs8(&pkcs8, a).map(|k| Arc::new(k) as _),
    };
    key.map_err(|e| KeyError::Invalid {
        path: path.to_path_buf(),
        message: format!("not a {alg} private key: {e}"),
    })
}

fn generate(alg: &str) -> Result<Vec<u8>, KeyError> {
    let pkcs8 = match algorithm(alg) {
        Algorithm::ED25519 => Ed25519SigningKey::generate_pkcs8(),
        a => EcdsaSigningKey::generate_pkcs8(a),
    };
    pkcs8
        .map(|k| k.secret_pkcs8_der().to_vec())
        .map_err(|e| KeyError::Generate {
            algorithm: alg.into(),
            message: e.to_string(),
        })
}

/// The active keys of `zone` under `data_dir`, created by `policy` when the
/// zone has none yet.
pub fn load_or_create(
    data_dir: &Path,
    zone: &Name,
    policy: &DnssecPolicyConfig,
    now: u64,
) -> Result<(Vec<ActiveKey>, Vec<KeyEntry>), KeyError> {
    let dir = zone_dir(data_dir, zone);
    let mut entries = list(&dir)?;
    if entries.is_empty() {
        entries = create(&dir, policy, now)?;
    }
    let keys = load_existing(&dir, &entries)?;
    Ok((keys, entries))
}

/// The keys `entries` lists in `dir` (every one must read back, with the
/// tag the list says), in the list's order; a removed key's file may be
/// gone, and it is left out.
pub fn load_existing(dir: &Path, entries: &[KeyEntry]) -> Result<Vec<ActiveKey>, KeyError> {
    entries
        .iter()
        .filter(|e| e.state != KeyState::Removed)
        .map(|e| {
            let path = dir.join(&e.file);
            let key = load_key(&path, &e.algorithm)?;
            let active = ActiveKey::new(e.role, key).map_err(|err| KeyError::Invalid {
                path: path.clone(),
                message: err.to_string(),
            })?;
            if active.tag != e.tag {
                return Err(KeyError::Invalid {
                    path,
                    message: format!("key tag {} where {LIST} says {}", active.tag, e.tag),
                });
            }
            Ok(active)
        })
        .collect()
}

/// Creates the keys `policy` asks for, active at once (a zone signed for
/// the first time), and the list that names them.
fn create(dir: &Path, policy: &DnssecPolicyConfig, now: u64) -> Result<Vec<KeyEntry>, KeyError> {
    let roles: &[KeyRole] = match policy.keys.as_str() {
        "ksk+zsk" => &[KeyRole::Ksk, KeyRole::Zsk],
        _ => &[KeyRole::Csk],
    };
    let mut entries = Vec::new();
    for &role in roles {
        let mut e = create_key(dir, role, policy, now)?;
        e.state = KeyState::Active;
        e.submitted = role.signs_keys();
        entries.push(e);
    }
    save(dir, &entries)?;
    Ok(entries)
}

/// Creates one key of `role` (its private key file written whole and
/// synced), published from `now`; the caller adds it to the list.
pub fn create_key(
    dir: &Path,
    role: KeyRole,
    policy: &DnssecPolicyConfig,
    now: u64,
) -> Result<KeyEntry, KeyError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| KeyError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let der = generate(&policy.algorithm)?;
    let file = format!("{}-{now}-{:04x}.pkcs8", role_name(role), rand_suffix());
    let path = dir.join(&file);
    crate::durable::replace_with(&path, 0o600, |w| w.write_all(&der)).map_err(io(&path))?;
    let key = load_key(&path, &policy.algorithm)?;
    let tag = ActiveKey::new(role, key)
        .map_err(|e| KeyError::Invalid {
            path: path.clone(),
            message: e.to_string(),
        })?
        .tag;
    Ok(KeyEntry {
        tag,
        role,
        algorithm: policy.algorithm.clone(),
        file,
        created_unix: now,
        state: KeyState::Published,
        since: now,
        submitted: false,
        ds_seen: None,
    })
}

/// Writes the list whole (then it is what the next start reads).
pub fn save(dir: &Path, entries: &[KeyEntry]) -> Result<(), KeyError> {
    let list = dir.join(LIST);
    let text = serde_json::to_vec_pretty(entries).expect("plain data");
    crate::durable::replace_with(&list, 0o644, |w| w.write_all(&text)).map_err(|source| {
        KeyError::Io {
            path: list.clone(),
            source,
        }
    })
}

/// Tells apart two files made in the same second.
fn rand_suffix() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish() as u16
}

fn role_name(role: KeyRole) -> &'static str {
    match role {
        KeyRole::Ksk => "ksk",
        KeyRole::Zsk => "zsk",
        KeyRole::Csk => "csk",
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn keys_are_created_once_private_and_read_back_the_same() {
        let dir = std::env::temp_dir().join(format!("xdpdns-keys-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let zone = Name::from_ascii("sd.test.").unwrap();
        let mut policy = DnssecPolicyConfig::builtin_default();
        policy.keys = "ksk+zsk".into();
        let (keys, entries) = load_or_create(&dir, &zone, &policy, 7).unwrap();
        assert_eq!(keys.len(), 2);
        for e in &entries {
            let mode = std::fs::metadata(zone_dir(&dir, &zone).join(&e.file))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "{} is private", e.file);
        }
        let (again, _) = load_or_create(&dir, &zone, &policy, 8).unwrap();
        let tags = |k: &[ActiveKey]| k.iter().map(|k| k.tag).collect::<Vec<_>>();
        assert_eq!(tags(&keys), tags(&again), "the same keys after a restart");
        // A listed key that is gone stops the start, naming its file.
        let gone = zone_dir(&dir, &zone).join(&entries[0].file);
        std::fs::remove_file(&gone).unwrap();
        let err = load_or_create(&dir, &zone, &policy, 9)
            .unwrap_err()
            .to_string();
        assert!(err.contains(&entries[0].file), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
