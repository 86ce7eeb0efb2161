//! The XDP fast path, userspace side: the pure compiler from snapshots to
//! answer-table entries, and the loader that owns the BPF objects.

pub mod compile;
