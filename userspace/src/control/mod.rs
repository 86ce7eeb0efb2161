//! The control channel: `xdpdns ctl` asks the running server what it is
//! doing (status, zones, secondaries, registry, live rates) and tells it
//! to reload a zone, over a Unix socket. `protocol` is the wire format,
//! `server` the listener (the answers come from `serve`, which knows the
//! running parts), `client` the command's side.

pub mod client;
mod error;
pub mod protocol;
pub mod server;

pub use error::ControlError;
pub use protocol::{Reply, Request};
pub use server::{Backend, ControlSocket};
