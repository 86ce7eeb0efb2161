//! xdpdns: authoritative DNS for service discovery.
//!
//! Layout: the pure core (zones, wire format, the handler, the answer
//! table, the request router, RRL and the protocol state machines) is the
//! `xdpdns-core` crate, re-exported here under the same names; this crate
//! holds the shells that give it sockets, files and clocks: `sockets`,
//! `api`, the registry backends, transfer I/O, the XDP loader, `config`
//! and `serve`. An area split between the two keeps its name here and
//! re-exports the core half.

#![warn(unreachable_pub)]

pub mod agent;
pub mod answers;
pub mod anycast;
pub mod api;
pub mod background;
pub mod clock;
pub mod config;
pub mod control;
pub mod cookies;
pub mod dnstap;
pub mod durable;
pub mod dynamic;
pub mod frames;
pub use xdpdns_core::handler;
pub mod memory;
pub use xdpdns_core::metrics;
pub mod privileges;
pub mod registry;
pub use xdpdns_core::router;
pub use xdpdns_core::rrl;
pub mod serve;
pub mod signing;
pub mod sockets;
pub mod transfer;
pub use xdpdns_core::update;
pub use xdpdns_core::wire;
pub mod xdp;
pub mod zone;
