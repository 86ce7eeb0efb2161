//! The pure core of xdpdns: everything that decides what to answer, with
//! no socket, file or clock. Time comes in as arguments (`now`), files as
//! text or through [`zone::parser::SourceFiles`], and the shells in the
//! `xdpdns` crate (sockets, the HTTP API, etcd, transfers over TCP, the XDP
//! loader, `serve`) drive it.
//!
//! * `zone` — the model, the master-file parser and checks, the versioned
//!   store with its one commit path and change feed;
//! * `wire`, `handler`, `router` — bytes in, bytes out: parsing, the full
//!   authoritative handler, and the socket-free request router;
//! * `answers` — the answer table the kernel and the hot path serve from;
//! * `rrl`, `cookies`, `metrics` — response rate limiting, cookie secrets,
//!   the query counters;
//! * `transfer`, `registry`, `anycast` — the pure halves of those areas:
//!   TSIG, ACLs, the IXFR history and planner, NOTIFY rounds and secondary
//!   timers; instances, naming and health hysteresis; anycast health.

#![warn(unreachable_pub)]

pub mod answers;
pub mod anycast;
pub mod cookies;
pub mod dnstap;
pub mod handler;
pub mod metrics;
mod prefetch;
pub mod registry;
pub mod router;
pub mod rrl;
pub mod signing;
pub mod transfer;
pub mod update;
pub mod wire;
pub mod zone;
