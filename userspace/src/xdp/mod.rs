//! The XDP fast path, userspace side: only what talks to the kernel. The
//! program's lifecycle (load, adopt, attach), the writer that puts
//! compiled answer tables (`crate::answers`) into its maps, the settings
//! it reads, where it is pinned to outlive a restart, the subscriber that
//! keeps the kernel table current, and the raw bpf(2) calls aya does not
//! wrap.

mod blocks;
mod counters;
mod error;
mod generations;
mod grace;
mod layout;
mod maps;
mod overlay;
pub mod pins;
pub mod program;
mod settings;
mod slots;
pub mod subscriber;
pub mod sys;
mod writer;

pub use counters::Counters;
pub use error::XdpError;
pub use maps::{Capacity, Served};
pub use pins::PinDir;
pub use program::{attach_helper_program, object_sha256, AttachMode, FastPath};
pub use settings::realtime_offset_ns;
pub use subscriber::{KernelState, KernelTable, SelfCheck, WeakKernelTable};
