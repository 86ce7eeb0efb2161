//! The tokio shells around the [`Router`](crate::router::Router): UDP and TCP listeners and
//! graceful shutdown. Sockets only; what to answer is the router's.

mod bind;
mod mmsg;
mod reuse;
mod shutdown;
mod tcp;
mod udp;

pub use bind::bind_address;
pub use shutdown::ShutdownRx;
pub use tcp::TcpServer;
pub use udp::{bind_udp, reflect_udp, spawn_udp_worker, udp_receive_drops, Buffers};
