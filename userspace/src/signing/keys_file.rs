//! The zones' `keys.json` files as shared state: one read-modify-write
//! cycle at a time (a rollover step, or the operator's `ctl keys
//! --ds-published`), and a signal that wakes the rollover tasks when the
//! operator changed one.

use tokio::sync::watch;

/// Held for a whole read-modify-write cycle of a keys file.
pub(super) static KEYS_FILE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

static KEYS_CHANGED: std::sync::OnceLock<watch::Sender<u64>> = std::sync::OnceLock::new();

/// Bumped when a keys file was changed by hand; the rollover tasks hold
/// receivers.
pub(super) fn keys_changed() -> &'static watch::Sender<u64> {
    KEYS_CHANGED.get_or_init(|| watch::channel(0).0)
}
