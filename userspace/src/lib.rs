//! xdpdns: authoritative DNS for service discovery.
//!
//! Layout: `zone` (model, master files, checks, versioned store) and `wire`
//! and `handler` (pure query → response logic) are I/O-free; `server`
//! (tokio sockets), `config` and `serve` are the thin shells around them.

#![warn(unreachable_pub)]

pub mod agent;
pub mod answers;
pub mod anycast;
pub mod api;
pub mod clock;
pub mod config;
pub mod control;
pub mod cookies;
pub mod durable;
pub mod frames;
pub mod handler;
pub mod memory;
pub mod metrics;
pub mod privileges;
pub mod registry;
pub mod router;
pub mod rrl;
pub mod serve;
pub mod sockets;
pub mod transfer;
pub mod wire;
pub mod xdp;
pub mod zone;
