//! dnstap: the schema an authoritative server writes (`message`), Frame
//! Streams framing and its handshake (`frames`), what is tapped and how
//! often (`policy`), the kernel's samples read back into events
//! (`packet`), and the writer's reconnection pace (`backoff`). Pure: the
//! shell owns the socket, the clock and the queue.

pub mod backoff;
pub mod frames;
pub mod message;
pub mod packet;
pub mod policy;

pub use message::{Direction, Event, Origin, Protocol, WallTime};
pub use policy::{Kind, Policy};
