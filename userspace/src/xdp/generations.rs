//! The overlay's state (see `overlay`): the generation in force, the
//! entries not yet folded into the base, the generations whose elements
//! are still in the overlay tables, and the blocks waiting to be freed.

use std::collections::{HashMap, VecDeque};

use super::blocks::Class;
use crate::answers::compile::{Compiled, EntryKey};

/// The overlay's state, owned by the writer.
#[derive(Default)]
pub(super) struct Overlay {
    /// The generation in force (0: none).
    pub(super) live: u32,
    /// The last generation number given out.
    pub(super) last: u32,
    /// Changed entries not yet in the base: their newest value (`None`:
    /// an absent marker) and the grace epoch asked for when they first
    /// became reachable in the overlay (`None`: not yet).
    pub(super) pending: HashMap<EntryKey, Pending>,
    /// Generations with elements in the overlay tables, oldest first.
    pub(super) written: VecDeque<Written>,
    /// Released blocks (class, id), freed once the overlay is off and a
    /// grace period has passed.
    pub(super) limbo: Vec<(Class, u32)>,
    /// Blocks whose grace period runs: freed once the epoch has passed.
    pub(super) freeing: Vec<(u64, Vec<(Class, u32)>)>,
    /// Elements in each overlay table (tiny, short, long).
    pub(super) elements: [usize; 3],
    /// The table tag to record once the overlay is off (the kernel's
    /// table is then exactly the base).
    pub(super) tag: u64,
}

pub(super) struct Pending {
    pub(super) value: Option<Compiled>,
    pub(super) since: Option<u64>,
}

pub(super) struct Written {
    pub(super) generation: u32,
    pub(super) keys: Vec<EntryKey>,
    /// The epoch after which no packet reaches it (`None`: live).
    pub(super) unreachable_after: Option<u64>,
}
