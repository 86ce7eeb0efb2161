//! The shutdown signal the listeners' tasks watch.

use tokio::sync::watch;

/// Resolves to `true` once shutdown has been requested.
pub type ShutdownRx = watch::Receiver<bool>;
