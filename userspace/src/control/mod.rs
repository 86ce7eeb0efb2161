//! The control channel: `xdpdns ctl` asks the running server what it is
//! doing (status, zones, secondaries, registry, live rates) and tells it
//! to reload a zone, over a Unix socket. `protocol` is the wire format,
//! `server` the listener (the answers come from `serve`, which knows the
//! running parts), `client` the command's side.

pub mod client;
pub mod protocol;
pub mod server;

use std::path::PathBuf;

pub use protocol::{Reply, Request};
pub use server::{Backend, ControlSocket};

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
