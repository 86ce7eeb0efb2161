//! The XDP fast path, userspace side: only what talks to the kernel. The
//! program's lifecycle (load, adopt, attach), the writer that puts
//! compiled answer tables (`crate::answers`) into its maps, the settings
//! it reads, where it is pinned to outlive a restart, the subscriber that
//! keeps the kernel table current, and the raw bpf(2) calls aya does not
//! wrap.

mod blocks;
pub mod loader;
pub mod pins;
pub mod subscriber;
pub mod sys;

pub use loader::{attach_helper_program, AttachMode, Capacity, Counters, FastPath, XdpError};
pub use pins::PinDir;
pub use subscriber::{KernelState, KernelTable, SelfCheck, WeakKernelTable};
