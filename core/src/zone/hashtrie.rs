//! A persistent hash trie from [`NodeKey`] to an optional [`Node`]: the
//! overlay of a zone's node map ([`super::nodemap`]).
//!
//! A version is an `Arc` of its root. A change copies the branches on
//! the path to its entry and shares every other branch with the versions
//! before it. Copying a branch takes a reference to each of its up to 16
//! children, and freeing one releases them; at a million names those
//! children's reference counts are cache misses, each an atomic
//! read-modify-write that waits for the one before it. A branch here
//! prefetches every child's count before it copies or frees them, so the
//! misses overlap (`imbl`'s generic trie cannot reach into its values:
//! its copies and frees were a tenth of a busy registry's CPU).

use std::sync::Arc;

use super::key::NodeKey;
use super::node::Node;
use crate::prefetch::prefetch;

/// The value kept per key: the node as changed, or `None` where it was
/// removed.
pub(crate) type Value = Option<Node>;

/// Hash bits consumed per level: 16-way branches. A path of 32-way ones
/// (a level fewer at a million names) has more children to copy and
/// free; 8-way ones measured the same as 16-way, at more memory.
const BITS: u32 = 4;
const MASK: u64 = (1 << BITS) - 1;

#[derive(Clone)]
pub(crate) struct HashTrie {
    root: Arc<Branch>,
    len: usize,
}

impl Default for HashTrie {
    fn default() -> HashTrie {
        HashTrie {
            root: Arc::new(Branch::default()),
            len: 0,
        }
    }
}

#[derive(Default)]
struct Branch {
    /// Which of the 16 positions hold a slot; slots in position order.
    bitmap: u32,
    slots: Vec<Slot>,
}

#[derive(Clone)]
enum Slot {
    Leaf(Leaf),
    Branch(Arc<Branch>),
    /// Keys whose 64-bit hashes are all equal.
    Bucket(Arc<Bucket>),
}

#[derive(Clone)]
struct Leaf {
    hash: u64,
    key: NodeKey,
    value: Value,
}

#[derive(Clone)]
struct Bucket {
    hash: u64,
    leaves: Vec<(NodeKey, Value)>,
}

impl Clone for Branch {
    fn clone(&self) -> Branch {
        self.prefetch_children();
        Branch {
            bitmap: self.bitmap,
            slots: self.slots.clone(),
        }
    }
}

impl Drop for Branch {
    fn drop(&mut self) {
        self.prefetch_children();
    }
}

impl Branch {
    fn prefetch_children(&self) {
        for slot in &self.slots {
            match slot {
                Slot::Leaf(leaf) => {
                    if let Some(node) = &leaf.value {
                        node.prefetch();
                    }
                }
                Slot::Branch(b) => prefetch_arc(b),
                Slot::Bucket(b) => prefetch_arc(b),
            }
        }
    }

    /// The position of `hash` at `shift`, its bit, and where its slot is
    /// (or would go) in `slots`.
    fn locate(&self, hash: u64, shift: u32) -> (u32, usize) {
        let bit = 1u32 << ((hash >> shift) & MASK);
        (bit, (self.bitmap & (bit - 1)).count_ones() as usize)
    }

    fn slot(&self, hash: u64, shift: u32) -> Option<&Slot> {
        let (bit, at) = self.locate(hash, shift);
        (self.bitmap & bit != 0).then(|| &self.slots[at])
    }
}

/// Where an `Arc`'s counts are: just before its value (`std`'s layout;
/// a prefetch of a wrong address is harmless).
fn prefetch_arc<T>(arc: &Arc<T>) {
    prefetch(Arc::as_ptr(arc).cast::<u8>().wrapping_sub(16));
}

impl HashTrie {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn get(&self, hash: u64, key: &[u8]) -> Option<&Value> {
        let mut branch = &*self.root;
        let mut shift = 0;
        loop {
            match branch.slot(hash, shift)? {
                Slot::Leaf(leaf) => {
                    return (leaf.hash == hash && leaf.key.as_wire() == key).then_some(&leaf.value)
                }
                Slot::Branch(b) => {
                    branch = b;
                    shift += BITS;
                }
                Slot::Bucket(b) => {
                    return b
                        .leaves
                        .iter()
                        .find(|(k, _)| b.hash == hash && k.as_wire() == key)
                        .map(|(_, v)| v)
                }
            }
        }
    }

    pub(crate) fn contains_key(&self, hash: u64, key: &[u8]) -> bool {
        self.get(hash, key).is_some()
    }

    /// The value at `key`, its path copied where other versions share it.
    pub(crate) fn get_mut(&mut self, hash: u64, key: &[u8]) -> Option<&mut Value> {
        if !self.contains_key(hash, key) {
            return None;
        }
        get_mut(&mut self.root, hash, key, 0)
    }

    /// Sets `key`'s value; the value it replaced, if any.
    pub(crate) fn insert(&mut self, hash: u64, key: NodeKey, value: Value) -> Option<Value> {
        let old = insert(&mut self.root, Leaf { hash, key, value }, 0);
        self.len += usize::from(old.is_none());
        old
    }

    pub(crate) fn remove(&mut self, hash: u64, key: &[u8]) -> Option<Value> {
        if !self.contains_key(hash, key) {
            return None;
        }
        let old = remove(&mut self.root, hash, key, 0);
        self.len -= usize::from(old.is_some());
        old
    }

    /// Every entry once, in no particular order.
    pub(crate) fn iter(&self) -> Iter<'_> {
        Iter {
            stack: vec![self.root.slots.iter()],
            bucket: [].iter(),
        }
    }

    /// Every entry, taken out of branches no other version shares and
    /// copied out of the rest.
    pub(crate) fn into_entries(self) -> Vec<(NodeKey, Value)> {
        let mut out = Vec::with_capacity(self.len);
        drain(self.root, &mut out);
        out
    }
}

fn get_mut<'a>(
    branch: &'a mut Arc<Branch>,
    hash: u64,
    key: &[u8],
    shift: u32,
) -> Option<&'a mut Value> {
    let branch = Arc::make_mut(branch);
    let (bit, at) = branch.locate(hash, shift);
    if branch.bitmap & bit == 0 {
        return None;
    }
    match &mut branch.slots[at] {
        Slot::Leaf(leaf) => {
            (leaf.hash == hash && leaf.key.as_wire() == key).then_some(&mut leaf.value)
        }
        Slot::Branch(b) => get_mut(b, hash, key, shift + BITS),
        Slot::Bucket(b) => Arc::make_mut(b)
            .leaves
            .iter_mut()
            .find(|(k, _)| k.as_wire() == key)
            .map(|(_, v)| v),
    }
}

fn insert(branch: &mut Arc<Branch>, new: Leaf, shift: u32) -> Option<Value> {
    let branch = Arc::make_mut(branch);
    let (bit, at) = branch.locate(new.hash, shift);
    if branch.bitmap & bit == 0 {
        branch.bitmap |= bit;
        branch.slots.insert(at, Slot::Leaf(new));
        return None;
    }
    let slot = &mut branch.slots[at];
    match slot {
        Slot::Branch(b) => insert(b, new, shift + BITS),
        Slot::Leaf(leaf) if leaf.hash == new.hash && leaf.key == new.key => {
            Some(std::mem::replace(&mut leaf.value, new.value))
        }
        Slot::Bucket(b) if b.hash == new.hash => {
            let b = Arc::make_mut(b);
            match b.leaves.iter_mut().find(|(k, _)| *k == new.key) {
                Some((_, v)) => Some(std::mem::replace(v, new.value)),
                None => {
                    b.leaves.push((new.key, new.value));
                    None
                }
            }
        }
        Slot::Leaf(_) | Slot::Bucket(_) => {
            let held = std::mem::replace(slot, Slot::Branch(Arc::default()));
            let held_hash = match &held {
                Slot::Leaf(l) => l.hash,
                Slot::Bucket(b) => b.hash,
                Slot::Branch(_) => unreachable!("matched above"),
            };
            *slot = if held_hash == new.hash {
                // A full 64-bit collision: the keys share a bucket.
                let Slot::Leaf(held) = held else {
                    unreachable!("a bucket of this hash matched above")
                };
                Slot::Bucket(Arc::new(Bucket {
                    hash: new.hash,
                    leaves: vec![(held.key, held.value), (new.key, new.value)],
                }))
            } else {
                Slot::Branch(pair(
                    shift + BITS,
                    (held_hash, held),
                    (new.hash, Slot::Leaf(new)),
                ))
            };
            None
        }
    }
}

/// A branch at `shift` holding two slots of different hashes (they part
/// at some level: hashes that differ do so within 64 bits).
fn pair(shift: u32, a: (u64, Slot), b: (u64, Slot)) -> Arc<Branch> {
    let (ia, ib) = ((a.0 >> shift) & MASK, (b.0 >> shift) & MASK);
    let branch = if ia == ib {
        Branch {
            bitmap: 1 << ia,
            slots: vec![Slot::Branch(pair(shift + BITS, a, b))],
        }
    } else {
        let (first, second) = if ia < ib { (a, b) } else { (b, a) };
        Branch {
            bitmap: (1 << ia) | (1 << ib),
            slots: vec![first.1, second.1],
        }
    };
    Arc::new(branch)
}

fn remove(branch: &mut Arc<Branch>, hash: u64, key: &[u8], shift: u32) -> Option<Value> {
    let branch = Arc::make_mut(branch);
    let (bit, at) = branch.locate(hash, shift);
    if branch.bitmap & bit == 0 {
        return None;
    }
    let (old, emptied, lone) = match &mut branch.slots[at] {
        Slot::Leaf(leaf) if leaf.hash == hash && leaf.key.as_wire() == key => {
            let Slot::Leaf(leaf) = branch.slots.remove(at) else {
                unreachable!("matched above")
            };
            branch.bitmap &= !bit;
            return Some(leaf.value);
        }
        Slot::Leaf(_) => return None,
        Slot::Branch(child) => {
            let old = remove(child, hash, key, shift + BITS);
            (old, child.slots.is_empty(), lone_slot(child))
        }
        Slot::Bucket(b) if b.hash != hash => return None,
        Slot::Bucket(b) => {
            let b = Arc::make_mut(b);
            let found = b.leaves.iter().position(|(k, _)| k.as_wire() == key);
            let old = found.map(|i| b.leaves.swap_remove(i).1);
            let lone = (b.leaves.len() == 1).then(|| {
                let (key, value) = b.leaves.pop().expect("one leaf");
                Slot::Leaf(Leaf {
                    hash: b.hash,
                    key,
                    value,
                })
            });
            (old, false, lone)
        }
    };
    if emptied {
        branch.slots.remove(at);
        branch.bitmap &= !bit;
    } else if let Some(lone) = lone {
        // A branch or bucket down to one leaf (or one bucket) gives it
        // back to this level: its position here is the same.
        branch.slots[at] = lone;
    }
    old
}

/// A branch's only slot when that is a leaf or a bucket (which may then
/// take the branch's place one level up).
fn lone_slot(branch: &Branch) -> Option<Slot> {
    match branch.slots.as_slice() {
        [slot @ (Slot::Leaf(_) | Slot::Bucket(_))] => Some(slot.clone()),
        _ => None,
    }
}

fn drain(branch: Arc<Branch>, out: &mut Vec<(NodeKey, Value)>) {
    match Arc::try_unwrap(branch) {
        Ok(mut branch) => {
            for slot in std::mem::take(&mut branch.slots) {
                match slot {
                    Slot::Leaf(leaf) => out.push((leaf.key, leaf.value)),
                    Slot::Branch(b) => drain(b, out),
                    Slot::Bucket(b) => match Arc::try_unwrap(b) {
                        Ok(b) => out.extend(b.leaves),
                        Err(b) => out.extend(b.leaves.iter().cloned()),
                    },
                }
            }
        }
        Err(shared) => {
            let trie = HashTrie {
                root: shared,
                len: 0,
            };
            out.extend(trie.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
}

pub(crate) struct Iter<'a> {
    stack: Vec<std::slice::Iter<'a, Slot>>,
    bucket: std::slice::Iter<'a, (NodeKey, Value)>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a NodeKey, &'a Value);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((k, v)) = self.bucket.next() {
                return Some((k, v));
            }
            let slot = match self.stack.last_mut()?.next() {
                Some(slot) => slot,
                None => {
                    self.stack.pop();
                    continue;
                }
            };
            match slot {
                Slot::Leaf(leaf) => return Some((&leaf.key, &leaf.value)),
                Slot::Branch(b) => self.stack.push(b.slots.iter()),
                Slot::Bucket(b) => self.bucket = b.leaves.iter(),
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::HashMap;

    use super::*;

    /// The key of name `n<i>` (one label).
    pub(in crate::zone) fn key(i: u32) -> NodeKey {
        let label = format!("n{i}");
        let mut wire = vec![label.len() as u8];
        wire.extend_from_slice(label.as_bytes());
        NodeKey::new(&wire)
    }

    fn node(children: u32) -> Value {
        Some(Node::from_parts(Vec::new(), children))
    }

    fn children(v: &Value) -> Option<u32> {
        v.as_ref().map(Node::children)
    }

    fn contents(trie: &HashTrie) -> HashMap<Vec<u8>, Option<u32>> {
        let all: HashMap<_, _> = trie
            .iter()
            .map(|(k, v)| (k.as_wire().to_vec(), children(v)))
            .collect();
        assert_eq!(all.len(), trie.len(), "each entry iterated once");
        all
    }

    /// Random inserts, replacements, changes in place and removals, with
    /// versions kept, under a hash of few bits (long shared paths, full
    /// collisions into buckets, buckets split again) and a full one: every
    /// version holds what a plain map given the same changes holds.
    #[test]
    fn versions_hold_their_own_contents_whatever_the_hashes() {
        type Hash = fn(u32) -> u64;
        let hashes: [(&str, Hash); 3] = [
            ("full", |k| {
                (k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (k as u64) << 7
            }),
            ("colliding", |k| (k % 7) as u64 * 0x0101_0101_0101_0101),
            ("high bits only", |k| ((k % 97) as u64) << 58 | 0x1f),
        ];
        for (what, hash) in hashes {
            let mut trie = HashTrie::default();
            let mut model: HashMap<Vec<u8>, Option<u32>> = HashMap::new();
            let mut versions = Vec::new();
            let mut x = 7u32;
            for step in 0..6_000u32 {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                let k = (x >> 8) % 400;
                let wire = key(k).as_wire().to_vec();
                match x % 6 {
                    0 | 1 => {
                        let old = trie.remove(hash(k), &wire);
                        assert_eq!(old.as_ref().map(children), model.remove(&wire), "{what}");
                    }
                    2 => {
                        let got = trie.get_mut(hash(k), &wire);
                        match (got, model.get_mut(&wire)) {
                            (Some(v), Some(m)) => {
                                *v = node(step);
                                *m = Some(step);
                            }
                            (None, None) => {}
                            (got, m) => panic!("{what}: {:?} / {m:?}", got.is_some()),
                        }
                    }
                    3 => {
                        let old = trie.insert(hash(k), key(k), None);
                        assert_eq!(old.as_ref().map(children), model.insert(wire, None));
                    }
                    _ => {
                        let old = trie.insert(hash(k), key(k), node(step));
                        assert_eq!(old.as_ref().map(children), model.insert(wire, Some(step)));
                    }
                }
                if step % 211 == 0 {
                    versions.push((trie.clone(), model.clone()));
                }
            }
            assert_eq!(contents(&trie), model, "{what}");
            for (version, expected) in &versions {
                assert_eq!(&contents(version), expected, "{what}");
                for k in 0..400 {
                    let wire = key(k).as_wire().to_vec();
                    assert_eq!(
                        version.get(hash(k), &wire).map(children),
                        expected.get(&wire).copied(),
                        "{what}"
                    );
                }
            }
            let shared = versions.last().expect("kept").0.clone();
            let mut drained: HashMap<_, _> = shared
                .into_entries()
                .into_iter()
                .map(|(k, v)| (k.as_wire().to_vec(), children(&v)))
                .collect();
            assert_eq!(drained, versions.last().unwrap().1, "{what}: shared");
            drained = trie
                .into_entries()
                .into_iter()
                .map(|(k, v)| (k.as_wire().to_vec(), children(&v)))
                .collect();
            assert_eq!(drained, model, "{what}: owned");
        }
    }

    /// Removals give a lone leaf back to the level above, up to the root,
    /// and removing every key leaves no branch behind but the root.
    #[test]
    fn removing_everything_leaves_an_empty_root() {
        let hash = |k: u32| (k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut trie = HashTrie::default();
        for k in 0..2_000 {
            trie.insert(hash(k), key(k), node(k));
        }
        let kept = trie.clone();
        for k in 1..2_000 {
            assert!(trie.remove(hash(k), key(k).as_wire()).is_some());
        }
        assert!(
            matches!(trie.root.slots.as_slice(), [Slot::Leaf(_)]),
            "the last key back at the root"
        );
        assert!(trie.remove(hash(0), key(0).as_wire()).is_some());
        assert!(trie.is_empty());
        assert!(trie.root.slots.is_empty());
        assert_eq!(kept.len(), 2_000);
        assert_eq!(contents(&kept).len(), 2_000);
    }
}
