//! What can go wrong on the control socket, on either side.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("control socket {}: {source}", path.display())]
    Bind {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("control socket {}: another server is listening on it", .0.display())]
    InUse(PathBuf),
    #[error("cannot connect to the control socket {} ({source}); is the server running, and may this user use it?", path.display())]
    Connect {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("control socket {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("control socket: the server's reply is not understood: {0}")]
    BadReply(#[from] serde_json::Error),
    /// The server refused or failed the request.
    #[error("{0}")]
    Server(String),
}
