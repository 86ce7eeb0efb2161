//! The compiled answers in userspace: the kernel table's entries, keyed
//! by lower-cased wire name, one map per query type, stamped with the
//! zone-store version they were compiled from.
//!
//! One writer (the subscriber) changes entries in place; readers run on
//! every UDP worker. A reader uses an entry only when the table's version
//! equals the snapshot it answers from, before and after the lookup (a
//! sequence lock over a concurrent map): while a change is being written,
//! or before the table has caught up with a commit, the full handler
//! answers. So a hot answer is always the full handler's answer for the
//! same snapshot, never a stale one.

use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

use dashmap::DashMap;
use xdpdns_common::qtype_slot;

use crate::xdp::compile::{Compiled, EntryKey, Installed, Table, TableDelta};

/// The version of a table being changed, or not yet filled.
const UNSETTLED: u64 = u64::MAX;

type Map = DashMap<NameKey, Compiled, foldhash::fast::RandomState>;

/// Longest name kept inside the map's slot; longer ones are referenced.
const INLINE_NAME: usize = 30;

/// A table key: the lower-cased wire name, inline when short (most
/// service names), so a lookup reads the slot and not a second
/// allocation. Hashed and compared as the bytes it holds, so a query's
/// name looks it up as a plain `&[u8]`.
#[derive(Clone)]
enum NameKey {
    Inline { len: u8, bytes: [u8; INLINE_NAME] },
    Shared(Arc<[u8]>),
}

impl NameKey {
    fn new(name: &Arc<[u8]>) -> Self {
        match name.len() {
            len @ 0..=INLINE_NAME => {
                let mut bytes = [0; INLINE_NAME];
                bytes[..len].copy_from_slice(name);
                NameKey::Inline {
                    len: len as u8,
                    bytes,
                }
            }
            _ => NameKey::Shared(name.clone()),
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            NameKey::Inline { len, bytes } => &bytes[..*len as usize],
            NameKey::Shared(b) => b,
        }
    }
}

impl std::borrow::Borrow<[u8]> for NameKey {
    fn borrow(&self) -> &[u8] {
        self.bytes()
    }
}

impl std::hash::Hash for NameKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.bytes().hash(state)
    }
}

impl PartialEq for NameKey {
    fn eq(&self, other: &Self) -> bool {
        self.bytes() == other.bytes()
    }
}

impl Eq for NameKey {}

pub struct HotTable {
    /// The store version the entries match, or [`UNSETTLED`].
    version: AtomicU64,
    /// One map per query-type slot (A, AAAA, and their signed variants).
    maps: [Map; 4],
}

impl Default for HotTable {
    fn default() -> Self {
        HotTable {
            version: AtomicU64::new(UNSETTLED),
            maps: Default::default(),
        }
    }
}

impl HotTable {
    fn map(&self, qtype: u8) -> &Map {
        &self.maps[usize::from(qtype & 3)]
    }

    /// Calls `f` with the entry for `name` (lower-cased wire form) and
    /// query-type slot `qtype` if the table is at store version
    /// `version` throughout; `None` otherwise or when there is no entry.
    pub fn read<R>(
        &self,
        version: u64,
        name: &[u8],
        qtype: u8,
        f: impl FnOnce(&Compiled) -> R,
    ) -> Option<R> {
        if self.version.load(Ordering::Acquire) != version {
            return None;
        }
        let out = f(&*self.map(qtype).get(name)?);
        // The entry was read under the shard's lock: if the writer had
        // begun changing the table by then, the version below shows it.
        fence(Ordering::Acquire);
        (self.version.load(Ordering::Relaxed) == version).then_some(out)
    }

    /// The store version the table matches, if it is settled.
    pub fn version(&self) -> Option<u64> {
        Some(self.version.load(Ordering::Acquire)).filter(|v| *v != UNSETTLED)
    }

    /// Entries in the table.
    pub fn len(&self) -> usize {
        self.maps.iter().map(Map::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Marks the table as changing: readers stop using it until
    /// [`HotTable::settle`]. Writer only.
    pub fn unsettle(&self) {
        self.version.store(UNSETTLED, Ordering::SeqCst);
    }

    /// Declares the entries those of store version `version`. Writer only.
    pub fn settle(&self, version: u64) {
        self.version.store(version, Ordering::Release);
    }

    /// Applies a change (between [`HotTable::unsettle`] and `settle`).
    pub fn apply(&self, delta: &TableDelta) {
        for (key, entry) in &delta.upsert {
            self.map(key.qtype)
                .insert(NameKey::new(&key.name), entry.clone());
        }
        for key in &delta.delete {
            self.map(key.qtype).remove(&*key.name);
        }
    }

    /// Replaces every entry by `table`'s (between `unsettle` and `settle`).
    pub fn replace(&self, table: &Table) {
        for m in &self.maps {
            m.clear();
        }
        for (key, entry) in table {
            self.map(key.qtype)
                .insert(NameKey::new(&key.name), entry.clone());
        }
        for m in &self.maps {
            m.shrink_to_fit();
        }
    }
}

impl Installed for HotTable {
    fn entry(&self, key: &EntryKey) -> Option<Compiled> {
        self.map(key.qtype).get(&*key.name).map(|e| e.clone())
    }

    fn each_key(&self, f: &mut dyn FnMut(&EntryKey)) {
        for qtype in qtype_slot::ALL {
            for e in self.map(qtype).iter() {
                let name = match e.key() {
                    NameKey::Shared(b) => b.clone(),
                    inline => inline.bytes().into(),
                };
                f(&EntryKey { name, qtype });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xdp::compile::encode_answer;
    use hickory_proto::rr::rdata::A;
    use hickory_proto::rr::RData;

    fn entry(last: u8) -> Compiled {
        let set = crate::zone::RRset::new(
            hickory_proto::rr::RecordType::A,
            60,
            [&RData::A(A::new(192, 0, 2, last))],
        )
        .unwrap();
        encode_answer(&set, 0).unwrap()
    }

    fn key(name: &[u8]) -> EntryKey {
        EntryKey {
            name: name.into(),
            qtype: qtype_slot::A,
        }
    }

    #[test]
    fn entries_are_read_only_at_the_settled_version() {
        let t = HotTable::default();
        let name = b"\x03www\x07example\x00";
        let delta = TableDelta {
            upsert: vec![(key(name), entry(1))],
            delete: vec![],
        };
        t.apply(&delta);
        assert_eq!(
            t.read(0, name, qtype_slot::A, |_| ()),
            None,
            "never settled"
        );
        t.settle(7);
        assert_eq!(t.version(), Some(7));
        let got = t.read(7, name, qtype_slot::A, |c| c.clone());
        assert_eq!(got, Some(entry(1)));
        assert_eq!(
            t.read(8, name, qtype_slot::A, |_| ()),
            None,
            "other version"
        );
        assert_eq!(
            t.read(7, name, qtype_slot::AAAA, |_| ()),
            None,
            "other type"
        );
        t.unsettle();
        assert_eq!(t.read(7, name, qtype_slot::A, |_| ()), None, "changing");
        t.apply(&TableDelta {
            upsert: vec![],
            delete: vec![key(name)],
        });
        t.settle(8);
        assert_eq!(t.read(8, name, qtype_slot::A, |_| ()), None, "deleted");
        assert!(t.is_empty());
    }

    #[test]
    fn a_change_written_during_a_read_voids_the_read() {
        let t = HotTable::default();
        let name = b"\x01a\x00";
        t.apply(&TableDelta {
            upsert: vec![(key(name), entry(1))],
            delete: vec![],
        });
        t.settle(1);
        // The writer begins a change while the reader holds the entry.
        let got = t.read(1, name, qtype_slot::A, |_| t.unsettle());
        assert_eq!(got, None);
    }

    #[test]
    fn replace_and_installed_view() {
        let t = HotTable::default();
        let mut table = Table::default();
        table.insert(key(b"\x01a\x00"), entry(1));
        table.insert(
            EntryKey {
                name: b"\x01b\x00".as_slice().into(),
                qtype: qtype_slot::AAAA,
            },
            entry(2),
        );
        t.replace(&table);
        assert_eq!(t.len(), 2);
        assert_eq!(t.entry(&key(b"\x01a\x00")), Some(entry(1)));
        let mut keys = Vec::new();
        t.each_key(&mut |k| keys.push(k.clone()));
        keys.sort();
        let mut want: Vec<_> = table.keys().cloned().collect();
        want.sort();
        assert_eq!(keys, want);
    }
}
