//! A zone's keys and signing policy: what the store signs a zone with.

use std::sync::Arc;

use hickory_proto::dnssec::rdata::{DNSKEY, DS};
use hickory_proto::dnssec::{Algorithm, DigestType, SigningKey, Verifier};
use hickory_proto::rr::Name;

use crate::zone::ZoneError;

#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("the zone has no SOA")]
    NoSoa,
    #[error("no key signs {0}")]
    NoKey(&'static str),
    #[error("key: {0}")]
    Key(String),
    #[error("{0}: cannot encode for signing: {1}")]
    Encode(Name, String),
    #[error(transparent)]
    Zone(#[from] ZoneError),
}

/// What a key does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyRole {
    /// Signs the DNSKEY RRset (and CDS/CDNSKEY); its DS is at the parent.
    Ksk,
    /// Signs everything else.
    Zsk,
    /// Both.
    Csk,
}

impl KeyRole {
    pub fn signs_keys(self) -> bool {
        matches!(self, KeyRole::Ksk | KeyRole::Csk)
    }

    pub fn signs_zone(self) -> bool {
        matches!(self, KeyRole::Zsk | KeyRole::Csk)
    }

    /// DNSKEY flags: zone key, plus SEP for key-signing keys.
    pub fn flags(self) -> u16 {
        if self.signs_keys() {
            257
        } else {
            256
        }
    }
}

/// A key that signs: its public half as published, and the private half.
#[derive(Clone)]
pub struct ActiveKey {
    pub role: KeyRole,
    pub dnskey: DNSKEY,
    pub tag: u16,
    pub key: Arc<dyn SigningKey>,
}

impl std::fmt::Debug for ActiveKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the private key.
        f.debug_struct("ActiveKey")
            .field("role", &self.role)
            .field("tag", &self.tag)
            .finish()
    }
}

impl ActiveKey {
    pub fn new(role: KeyRole, key: Arc<dyn SigningKey>) -> Result<ActiveKey, SignError> {
        let public = key
            .to_public_key()
            .map_err(|e| SignError::Key(e.to_string()))?;
        let dnskey = DNSKEY::with_flags(role.flags(), public);
        let tag = dnskey
            .calculate_key_tag()
            .map_err(|e| SignError::Key(e.to_string()))?;
        Ok(ActiveKey {
            role,
            dnskey,
            tag,
            key,
        })
    }

    pub fn algorithm(&self) -> Algorithm {
        self.dnskey.algorithm()
    }
}

/// Timing of signatures, in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignPolicy {
    /// How long a new signature is valid (Knot's `rrsig-lifetime`).
    pub validity: u32,
    /// A signature with less than this left is replaced
    /// (`rrsig-refresh`).
    pub refresh: u32,
    /// Inception this far in the past, for validators whose clocks lag.
    pub backdate: u32,
}

impl Default for SignPolicy {
    fn default() -> Self {
        SignPolicy {
            validity: 14 * 86_400,
            refresh: 7 * 86_400,
            backdate: 3_600,
        }
    }
}

/// One zone's keys at one moment of their timeline and its signing
/// policy: what the store signs with.
#[derive(Clone, Debug)]
pub struct ZoneSigner {
    /// Keys that sign now.
    pub signing: Vec<ActiveKey>,
    /// DNSKEYs published besides the signing ones (a key published ahead
    /// of its use, or kept after it, during a rollover).
    pub published: Vec<DNSKEY>,
    /// Keys the parent should hold DS records for (CDS/CDNSKEY, RFC
    /// 7344); empty publishes none.
    pub submitted: Vec<DNSKEY>,
    /// Signing keys kept out of the DNSKEY RRset (an algorithm
    /// rollover's, before they are published and after they leave).
    pub unpublished: Vec<DNSKEY>,
    pub policy: SignPolicy,
}

impl ZoneSigner {
    /// A signer with one CSK, or a KSK and a ZSK, all signing.
    pub fn new(signing: Vec<ActiveKey>, policy: SignPolicy) -> ZoneSigner {
        ZoneSigner {
            signing,
            published: Vec::new(),
            submitted: Vec::new(),
            unpublished: Vec::new(),
            policy,
        }
    }

    /// The keys that sign the DNSKEY RRset (and CDS/CDNSKEY), and those
    /// that sign the rest.
    pub fn signing_keys(&self) -> (Vec<&ActiveKey>, Vec<&ActiveKey>) {
        let keys = |f: fn(KeyRole) -> bool| self.signing.iter().filter(|k| f(k.role)).collect();
        (keys(KeyRole::signs_keys), keys(KeyRole::signs_zone))
    }

    /// Every DNSKEY the zone publishes.
    pub fn dnskeys(&self) -> Vec<DNSKEY> {
        let mut keys: Vec<DNSKEY> = self
            .signing
            .iter()
            .map(|k| k.dnskey.clone())
            .filter(|k| !self.unpublished.contains(k))
            .collect();
        for k in &self.published {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
        keys
    }
}

/// The DS record (SHA-256) for `key` at `zone`.
pub fn ds_for(zone: &Name, key: &DNSKEY) -> Result<DS, SignError> {
    let digest = key
        .to_digest(zone, DigestType::SHA256)
        .map_err(|e| SignError::Key(e.to_string()))?;
    let tag = key
        .calculate_key_tag()
        .map_err(|e| SignError::Key(e.to_string()))?;
    Ok(DS::new(
        tag,
        key.algorithm(),
        DigestType::SHA256,
        digest.as_ref().to_vec(),
    ))
}
