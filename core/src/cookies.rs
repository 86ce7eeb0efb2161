//! DNS cookie secrets (RFC 7873, RFC 9018): where they come from and how
//! they roll over. The cookie construction itself lives in
//! `xdpdns_common::cookie`, shared with the XDP program.
//!
//! The secret file holds one or two lines of 32 hex digits: the current
//! secret (minting and validating) and optionally the previous one (still
//! accepted). A rollover is: put the new secret first and the old one
//! second, reload; some hours later drop the second line, reload. Nodes
//! of an anycast set share the file so each validates the others'
//! cookies. Lines starting with `#` are comments.

use std::fmt;
use std::path::{Path, PathBuf};

use xdpdns_common::cookie::key_words;

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}, line {line}: {message}")]
    Invalid {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// The server secrets for cookies.
#[derive(Clone, PartialEq, Eq)]
pub struct CookieSecrets {
    pub current: [u8; 16],
    pub previous: Option<[u8; 16]>,
}

// Never print a secret.
impl fmt::Debug for CookieSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CookieSecrets")
            .field("previous", &self.previous.is_some())
            .finish_non_exhaustive()
    }
}

impl CookieSecrets {
    /// A fresh random secret with no previous one. The server's own
    /// secret comes from its secret file or the OS's random bytes
    /// (`xdpdns::cookies`); this one serves tests and defaults.
    pub fn random() -> Self {
        CookieSecrets {
            current: random_secret(),
            previous: None,
        }
    }

    /// SipHash keys as the XDP program takes them: current, previous.
    pub fn key_words(&self) -> [[u64; 2]; 2] {
        [
            key_words(&self.current),
            key_words(&self.previous.unwrap_or(self.current)),
        ]
    }

    pub fn parse(text: &str, path: &Path) -> Result<Self, SecretError> {
        let mut found = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let invalid = |message: &str| SecretError::Invalid {
                path: path.to_path_buf(),
                line: i + 1,
                message: message.to_string(),
            };
            let bytes = data_encoding::HEXLOWER_PERMISSIVE
                .decode(line.as_bytes())
                .map_err(|_| invalid("a secret is 32 hex digits"))?;
            let secret: [u8; 16] = bytes
                .try_into()
                .map_err(|_| invalid("a secret is 32 hex digits (16 bytes)"))?;
            if found.len() == 2 {
                return Err(invalid("at most two secrets: the current and the previous"));
            }
            found.push(secret);
        }
        let Some(&current) = found.first() else {
            return Err(SecretError::Invalid {
                path: path.to_path_buf(),
                line: text.lines().count().max(1),
                message: "no secret in the file".into(),
            });
        };
        Ok(CookieSecrets {
            current,
            previous: found.get(1).copied(),
        })
    }
}

/// 16 bytes from std's per-process random hash keys (SipHash of two
/// counters under keys the OS's random source seeded): no file, socket or
/// clock.
fn random_secret() -> [u8; 16] {
    use std::hash::{BuildHasher, Hasher};
    let state = std::collections::hash_map::RandomState::new();
    let mut out = [0u8; 16];
    for (i, half) in out.chunks_exact_mut(8).enumerate() {
        let mut h = state.build_hasher();
        h.write_usize(i);
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_lines_are_current_and_previous() {
        let text =
            "# rolled over\n e5e973e5a6b2a43f48e7dc849e37bfcf\n445536BCD2513298075A5D379663C962\n";
        let s = CookieSecrets::parse(text, Path::new("s")).unwrap();
        assert_eq!(s.current[0], 0xe5);
        assert_eq!(s.previous.unwrap()[0], 0x44);
        assert_eq!(s.key_words()[1], key_words(&s.previous.unwrap()));
    }

    #[test]
    fn bad_files_name_the_line() {
        let e = CookieSecrets::parse("\nabcd\n", Path::new("/etc/x")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/etc/x, line 2: a secret is 32 hex digits (16 bytes)"
        );
        let three = "00000000000000000000000000000000\n".repeat(3);
        let e = CookieSecrets::parse(&three, Path::new("f")).unwrap_err();
        assert!(e.to_string().contains("line 3"), "{e}");
        assert!(CookieSecrets::parse("# nothing\n", Path::new("f")).is_err());
    }

    #[test]
    fn debug_output_hides_the_secret() {
        let s = CookieSecrets::parse("e5e973e5a6b2a43f48e7dc849e37bfcf", Path::new("f")).unwrap();
        assert!(!format!("{s:?}").contains("e5"));
    }
}
