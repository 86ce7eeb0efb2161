//! The answer table: what the compiler decides the kernel and the hot path
//! may answer, and the bytes they answer with. One area for both users:
//! the fallback's hot path reads the table in userspace, the XDP loader
//! writes the same entries into the kernel (`xdpdns::xdp`).
//!
//! * `compile` — snapshot (or diffs) → entries, pure; `entry` the entry
//!   and the encodings the compilers share; `typed` the entries of every
//!   type but A/AAAA (the full handler's answers, compiled once);
//!   `depends` which names' entries hold other names' records;
//! * `negative` — the one place that decides NXDOMAIN/NODATA without the
//!   full handler, and the kernel entries that carry those decisions;
//! * `sharded` — the compiled entries by key, gathered on every core;
//! * `table` / `packed` — the compiled entries kept in userspace;
//! * `plan` — how a burst of commits updates a table (`xdpdns::answers::
//!   follow` keeps the userspace table current when no kernel table does);
//! * `hot` — the fallback's answers from the table, without the full
//!   handler; `on_demand` — the same entries compiled when a query asks
//!   for them, for large zones without a kernel table.

mod addresses;
pub mod compile;
pub mod depends;
mod entry;
pub mod hot;
pub mod negative;
pub mod on_demand;
pub mod packed;
pub mod plan;
pub mod sharded;
pub mod table;
mod typed;

pub use compile::{
    compile, compile_all, compile_diffs, diff_tables, table_tag, IndexedTable, Table, TableDelta,
};
pub use table::AnswerTable;
