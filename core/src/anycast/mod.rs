//! Anycast health coupling, the pure half: when to announce and when to
//! withdraw, told the time and the self-check results. The self-checks,
//! the TUN interface and the driver are in the `xdpdns` crate.

pub mod health;
