//! The XDP fast path, userspace side: the pure compiler from snapshots to
//! answer-table entries, the compiled table kept in userspace (which the
//! hot path answers from), the loader that owns the BPF objects, where
//! they are pinned to outlive a restart, the subscribers that keep both
//! tables current, and the raw bpf(2) calls aya does not wrap.

pub mod answers;
mod blocks;
pub mod compile;
mod entry;
pub mod loader;
mod negatives;
pub mod packed;
pub mod pins;
pub mod subscriber;
pub mod sys;
pub mod table;

pub use compile::{compile, compile_diffs, diff_tables, table_tag, Table, TableDelta};
pub use loader::{attach_helper_program, AttachMode, Capacity, Counters, FastPath, XdpError};
pub use pins::PinDir;
pub use subscriber::{KernelState, KernelTable, SelfCheck, WeakKernelTable};
pub use table::AnswerTable;
