//! xdpdns: authoritative DNS for service discovery.
//!
//! Layout: `zone` (model, master files, checks, versioned store) and `wire`
//! and `handler` (pure query → response logic) are I/O-free; `server`
//! (tokio sockets), `config` and `serve` are the thin shells around them.

pub mod zone;
pub mod handler;
pub mod wire;
pub mod config;
pub mod server;
pub mod serve;
