//! A zone's map from [`NodeKey`] to [`Node`]: a flat, shared base and a
//! small persistent overlay of what changed since the base was made (a
//! hash trie of its own, [`super::hashtrie`], which prefetches what a
//! copy or a free of its branches touches).
//!
//! A persistent hash trie alone (what the map was) costs a 32-slot node
//! for every few names at its last level: 80 bytes a name at 680k names,
//! 280 at 2.1M, and a million-name walk through it is a cache miss per
//! level. The base here is one vector of entries and a table of `u32`
//! indices into it (about 45 bytes a name), read with one probe. A
//! version of the zone is still O(1) to clone: it shares the base, and a
//! change copies only into the overlay. While no other version shares the
//! base (a zone being built, an image being read) changes go straight
//! into it; once the overlay outgrows a fraction of the base, a new base
//! is made, so its cost is a few entry copies per change.

use std::hash::BuildHasher;
use std::sync::Arc;

use foldhash::fast::FixedState;
use hashbrown::HashTable;

use super::hashtrie::HashTrie;
use super::key::NodeKey;
use super::node::Node;

/// An overlay entry: the node as changed, or `None` where the base's
/// node was removed (keyed by the base's hash of the name).
type Overlay = HashTrie;

/// A new base is made once the overlay holds more than this share of it
/// (and more than [`OVERLAY_MIN`] entries). A sixteenth measured less
/// memory than an eighth at a million names, at no more CPU (a 32nd, with
/// `imbl`'s trie, cost rate: each new base is made inside a commit).
const OVERLAY_SHARE: usize = 16;
const OVERLAY_MIN: usize = 256;

#[derive(Clone)]
pub(crate) struct NodeMap {
    base: Arc<Flat>,
    overlay: Overlay,
    len: usize,
}

impl std::fmt::Debug for NodeMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeMap")
            .field("len", &self.len)
            .field("base", &self.base.entries.len())
            .field("overlay", &self.overlay.len())
            .finish()
    }
}

impl NodeMap {
    /// An empty map hashing with `seed`.
    pub(crate) fn with_seed(seed: u64) -> NodeMap {
        let hasher = FixedState::with_seed(seed);
        NodeMap {
            base: Arc::new(Flat::new(hasher.clone())),
            overlay: Overlay::default(),
            len: 0,
        }
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.base.hasher.hash_one(key)
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn get(&self, key: &[u8]) -> Option<&Node> {
        let hash = self.hash(key);
        if !self.overlay.is_empty() {
            if let Some(changed) = self.overlay.get(hash, key) {
                return changed.as_ref();
            }
        }
        self.base.get_hashed(hash, key)
    }

    pub(crate) fn contains_key(&self, key: &[u8]) -> bool {
        self.get(key).is_some()
    }

    pub(crate) fn get_mut(&mut self, key: &[u8]) -> Option<&mut Node> {
        self.rebase_if_due();
        if self.own_base() {
            let base = self.base_mut();
            let at = base.find(key)?;
            return Some(&mut base.entries[at].1);
        }
        let hash = self.hash(key);
        if !self.overlay.contains_key(hash, key) {
            let node = self.base.get_hashed(hash, key)?.clone();
            self.overlay.insert(hash, NodeKey::new(key), Some(node));
        }
        self.overlay.get_mut(hash, key)?.as_mut()
    }

    /// Sets the node at `key` (new or replaced).
    pub(crate) fn insert(&mut self, key: NodeKey, node: Node) {
        let new = if self.own_base() {
            // One probe: a zone read from an image is millions of these.
            self.base_mut().insert(key, node)
        } else {
            // What the overlay held tells (one walk of it), but for a
            // name only the base has.
            let probe = key.clone();
            let hash = self.hash(key.as_wire());
            match self.overlay.insert(hash, key, Some(node)) {
                Some(held) => held.is_none(),
                None => self.base.find_hashed(hash, probe.as_wire()).is_none(),
            }
        };
        self.len += usize::from(new);
        self.rebase_if_due();
    }

    /// Inserts every entry: into the base at once when it is this map's
    /// alone (a zone being read from its image: millions of inserts),
    /// else one by one.
    pub(crate) fn extend(&mut self, entries: impl IntoIterator<Item = (NodeKey, Node)>) {
        if !self.own_base() {
            for (key, node) in entries {
                self.insert(key, node);
            }
            return;
        }
        let base = self.base_mut();
        let mut added = 0;
        for (key, node) in entries {
            added += usize::from(base.insert(key, node));
        }
        self.len += added;
    }

    pub(crate) fn remove(&mut self, key: &[u8]) {
        if !self.contains_key(key) {
            return;
        }
        self.len -= 1;
        if self.own_base() {
            self.base_mut().swap_remove(key);
        } else {
            let hash = self.hash(key);
            if self.base.find_hashed(hash, key).is_some() {
                self.overlay.insert(hash, NodeKey::new(key), None);
            } else {
                self.overlay.remove(hash, key);
            }
        }
        self.rebase_if_due();
    }

    /// Makes room for `additional` more nodes in a base no other version
    /// shares (a zone being built); otherwise nothing.
    pub(crate) fn reserve(&mut self, additional: usize) {
        if self.own_base() {
            self.base_mut().reserve(additional);
        }
    }

    pub(crate) fn clear(&mut self) {
        let hasher = self.base.hasher.clone();
        *self = NodeMap {
            base: Arc::new(Flat::new(hasher.clone())),
            overlay: Overlay::default(),
            len: 0,
        };
    }

    /// Every entry once, in the order of the buckets of a map of this
    /// seed made for this many names (hashbrown places a name by the low
    /// bits of its hash), then by hash and name: a map built in this
    /// order fills its index front to back, where any other order waits
    /// on a cache miss for every name (what a zone image is written in;
    /// an image of ten million names read back in 0.9 s where the order
    /// of reversed hashes took 2.8). It depends only on the seed and the
    /// names, not on the map's history.
    pub(crate) fn iter_by_hash(&self) -> impl Iterator<Item = (&NodeKey, &Node)> {
        let hasher = &self.base.hasher;
        let mask = index_buckets(self.len()) as u64 - 1;
        let mut all: Vec<_> = self
            .iter()
            .map(|(key, node)| (hasher.hash_one(key.as_wire()), key, node))
            .collect();
        all.sort_unstable_by(|a, b| {
            (a.0 & mask, a.0, a.1.as_wire()).cmp(&(b.0 & mask, b.0, b.1.as_wire()))
        });
        all.into_iter().map(|(_, key, node)| (key, node))
    }

    /// Every entry once (order unspecified).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&NodeKey, &Node)> {
        let overlay = &self.overlay;
        let hasher = &self.base.hasher;
        let unchanged = self
            .base
            .entries
            .iter()
            .filter(move |(key, _)| {
                overlay.is_empty()
                    || !overlay.contains_key(hasher.hash_one(key.as_wire()), key.as_wire())
            })
            .map(|(key, node)| (key, node));
        let changed = overlay
            .iter()
            .filter_map(|(key, node)| Some((key, node.as_ref()?)));
        unchanged.chain(changed)
    }

    /// Keys whose nodes may differ between `self` and `other` (two
    /// versions of one zone): only the overlays' keys where both share a
    /// base; `None` where they do not (compare every key).
    pub(crate) fn keys_changed_from<'a>(
        &'a self,
        other: &'a NodeMap,
    ) -> Option<impl Iterator<Item = &'a NodeKey>> {
        if !Arc::ptr_eq(&self.base, &other.base) {
            return None;
        }
        let hasher = &self.base.hasher;
        let mine = self.overlay.iter().map(|(key, _)| key);
        let theirs = other.overlay.iter().map(|(key, _)| key).filter(|key| {
            !self
                .overlay
                .contains_key(hasher.hash_one(key.as_wire()), key.as_wire())
        });
        Some(mine.chain(theirs))
    }

    /// Whether no other version shares the base, which may then be
    /// changed in place ([`NodeMap::base_mut`]); the overlay is folded
    /// into it first.
    fn own_base(&mut self) -> bool {
        if Arc::get_mut(&mut self.base).is_none() {
            return false;
        }
        if !self.overlay.is_empty() {
            let overlay = self.take_overlay();
            self.base_mut().apply(overlay);
        }
        true
    }

    /// The base, once [`NodeMap::own_base`] said it is this map's alone.
    fn base_mut(&mut self) -> &mut Flat {
        Arc::get_mut(&mut self.base).expect("the base is not shared")
    }

    fn take_overlay(&mut self) -> Overlay {
        std::mem::take(&mut self.overlay)
    }

    /// Makes a new base from the base and the overlay once the overlay
    /// has grown past its share.
    fn rebase_if_due(&mut self) {
        let size = self.overlay.len();
        if size <= OVERLAY_MIN || size <= self.base.entries.len() / OVERLAY_SHARE {
            return;
        }
        let overlay = self.take_overlay();
        // A copy of a shared base copies its index rather than rehashing
        // every name: this runs inside a commit.
        let base = Arc::make_mut(&mut self.base);
        base.reserve(size);
        base.apply(overlay);
    }
}

/// Buckets of a hashbrown table reserved for `names` when empty (its
/// `capacity_to_buckets`: a power of two with room at seven eighths).
fn index_buckets(names: usize) -> usize {
    match names {
        0..4 => 4,
        4..8 => 8,
        n => (n * 8 / 7).next_power_of_two(),
    }
}

/// Entries in a vector, found through a table of their indices.
#[derive(Clone)]
struct Flat {
    entries: Vec<(NodeKey, Node)>,
    index: HashTable<u32>,
    hasher: FixedState,
}

impl Flat {
    fn new(hasher: FixedState) -> Flat {
        Flat {
            entries: Vec::new(),
            index: HashTable::new(),
            hasher,
        }
    }

    fn reserve(&mut self, additional: usize) {
        self.entries.reserve_exact(additional);
        let Flat {
            entries,
            index,
            hasher,
        } = self;
        index.reserve(additional, |&i| {
            hasher.hash_one(entries[i as usize].0.as_wire())
        });
    }

    fn find(&self, key: &[u8]) -> Option<usize> {
        self.find_hashed(self.hasher.hash_one(key), key)
    }

    fn find_hashed(&self, hash: u64, key: &[u8]) -> Option<usize> {
        self.index
            .find(hash, |&i| self.entries[i as usize].0.as_wire() == key)
            .map(|&i| i as usize)
    }

    fn get_hashed(&self, hash: u64, key: &[u8]) -> Option<&Node> {
        self.find_hashed(hash, key).map(|at| &self.entries[at].1)
    }

    /// Whether `key` is new.
    fn insert(&mut self, key: NodeKey, node: Node) -> bool {
        let Flat {
            entries,
            index,
            hasher,
        } = self;
        let hash = hasher.hash_one(key.as_wire());
        let entry = index.entry(
            hash,
            |&i| entries[i as usize].0 == key,
            |&i| hasher.hash_one(entries[i as usize].0.as_wire()),
        );
        match entry {
            hashbrown::hash_table::Entry::Occupied(at) => {
                entries[*at.get() as usize].1 = node;
                false
            }
            hashbrown::hash_table::Entry::Vacant(slot) => {
                let at = u32::try_from(entries.len()).expect("fewer than 2^32 names in a zone");
                slot.insert(at);
                entries.push((key, node));
                true
            }
        }
    }

    /// Takes an overlay's changes.
    fn apply(&mut self, overlay: Overlay) {
        for (key, node) in overlay.into_entries() {
            match node {
                Some(node) => {
                    self.insert(key, node);
                }
                None => self.swap_remove(key.as_wire()),
            }
        }
    }

    /// Removes `key`; the last entry takes its place.
    fn swap_remove(&mut self, key: &[u8]) {
        let hash = self.hasher.hash_one(key);
        let Flat {
            entries,
            index,
            hasher,
        } = self;
        let Ok(found) = index.find_entry(hash, |&i| entries[i as usize].0.as_wire() == key) else {
            return;
        };
        let (at, _) = found.remove();
        let last = entries.len() - 1;
        if at as usize != last {
            let moved = hasher.hash_one(entries[last].0.as_wire());
            let slot = index
                .find_mut(moved, |&i| i as usize == last)
                .expect("every entry is indexed");
            *slot = at;
        }
        entries.swap_remove(at as usize);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::super::hashtrie::tests::key;
    use super::*;

    fn node(children: u32) -> Node {
        Node::from_parts(Vec::new(), children)
    }

    fn contents(map: &NodeMap) -> HashMap<Vec<u8>, u32> {
        let all: HashMap<_, _> = map
            .iter()
            .map(|(k, n)| (k.as_wire().to_vec(), n.children()))
            .collect();
        assert_eq!(all.len(), map.len(), "each entry iterated once");
        all
    }

    /// The image order is the bucket order of the map a reader reserves
    /// for the same number of names: hashbrown sizes its index as
    /// `index_buckets` says (its capacity is seven eighths of that).
    #[test]
    fn names_come_in_the_bucket_order_of_a_map_reserved_for_them() {
        for names in [1, 3, 5, 9, 100, 1000, 7000, 7169, 100_000] {
            let mut index = HashTable::<u32>::new();
            index.reserve(names, |_| 0);
            let buckets = index_buckets(names);
            let capacity = match buckets {
                ..=8 => buckets - 1,
                b => b / 8 * 7,
            };
            assert_eq!(index.capacity(), capacity, "{names} names");
        }
        let mut map = NodeMap::with_seed(11);
        for i in 0..5000u32 {
            map.insert(key(i), node(i));
        }
        let mask = index_buckets(map.len()) as u64 - 1;
        let buckets: Vec<u64> = map
            .iter_by_hash()
            .map(|(k, _)| map.base.hasher.hash_one(k.as_wire()) & mask)
            .collect();
        assert_eq!(buckets.len(), 5000);
        assert!(buckets.windows(2).all(|w| w[0] <= w[1]));
    }

    /// The same changes, applied to a plain map: what every version must
    /// hold, whether its base is shared or its own.
    #[test]
    fn versions_hold_their_own_contents() {
        let mut map = NodeMap::with_seed(7);
        let mut model = HashMap::new();
        let mut versions = Vec::new();
        // Deterministic pseudo-random inserts, replacements and removals,
        // with versions kept (shared bases, overlays, rebases) and
        // dropped (owned bases again).
        let mut x = 1u32;
        for step in 0..20_000u32 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let k = (x >> 8) % 3_000;
            if x.is_multiple_of(5) {
                map.remove(key(k).as_wire());
                model.remove(key(k).as_wire());
            } else {
                map.insert(key(k), node(step));
                model.insert(key(k).as_wire().to_vec(), step);
            }
            if step.is_multiple_of(997) {
                versions.push((map.clone(), model.clone()));
            }
            if step.is_multiple_of(4_001) {
                versions.clear();
            }
        }
        assert_eq!(contents(&map), model);
        for (version, expected) in &versions {
            assert_eq!(&contents(version), expected);
            for (k, children) in expected {
                assert_eq!(version.get(k).map(Node::children), Some(*children));
            }
        }
    }

    #[test]
    fn a_change_to_a_version_leaves_the_other_alone() {
        let mut a = NodeMap::with_seed(1);
        for i in 0..100 {
            a.insert(key(i), node(i));
        }
        let mut b = a.clone();
        b.get_mut(key(5).as_wire()).unwrap().children = 500;
        b.remove(key(6).as_wire());
        b.insert(key(1000), node(1000));
        assert_eq!(a.get(key(5).as_wire()).unwrap().children(), 5);
        assert!(a.contains_key(key(6).as_wire()));
        assert!(!a.contains_key(key(1000).as_wire()));
        assert_eq!(b.get(key(5).as_wire()).unwrap().children(), 500);
        assert!(!b.contains_key(key(6).as_wire()));
        assert_eq!((a.len(), b.len()), (100, 100));

        let mut changed: Vec<_> = b
            .keys_changed_from(&a)
            .expect("one base")
            .map(|k| k.as_wire().to_vec())
            .collect();
        changed.sort();
        let mut expected: Vec<_> = [5, 6, 1000].map(|i| key(i).as_wire().to_vec()).into();
        expected.sort();
        assert_eq!(changed, expected);
        assert!(b.keys_changed_from(&NodeMap::with_seed(1)).is_none());
    }

    #[test]
    fn removing_moves_the_last_entry_and_keeps_it_found() {
        let mut map = NodeMap::with_seed(3);
        for i in 0..10 {
            map.insert(key(i), node(i));
        }
        map.remove(key(2).as_wire());
        map.remove(key(9).as_wire());
        map.remove(key(42).as_wire());
        assert_eq!(map.len(), 8);
        for i in (0..10).filter(|i| ![2, 9].contains(i)) {
            assert_eq!(map.get(key(i).as_wire()).map(Node::children), Some(i));
        }
    }
}
