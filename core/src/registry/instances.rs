//! The registry's instances by id: a persistent ordered set of the
//! instances themselves, ordered by their ids.
//!
//! A map from id to instance held each id twice (the key, and the
//! instance's own) and 32 bytes an entry in the tree's nodes; the set
//! holds one pointer an entry, and a million instances cost a third of
//! the nodes. Serialised as the map it replaced (id → instance).

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use compact_str::CompactString;
use serde::de::{Error as _, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::instance::Instance;

#[derive(Clone, Debug, Default)]
pub struct Instances(imbl::OrdSet<ById>);

/// An instance as its id: equal, ordered and looked up by it alone.
#[derive(Clone, Debug)]
pub(crate) struct ById(pub(crate) Arc<Instance>);

impl PartialEq for ById {
    fn eq(&self, other: &Self) -> bool {
        self.0.id == other.0.id
    }
}

impl Eq for ById {}

impl PartialOrd for ById {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ById {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.id.cmp(&other.0.id)
    }
}

/// As its id is hashed as a `str` (see the `Borrow` below).
impl std::hash::Hash for ById {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.id.as_str().hash(state)
    }
}

impl Borrow<str> for ById {
    fn borrow(&self) -> &str {
        &self.0.id
    }
}

impl Instances {
    pub fn get(&self, id: &str) -> Option<&Arc<Instance>> {
        self.0.get(id).map(|i| &i.0)
    }

    pub fn contains_key(&self, id: &str) -> bool {
        self.0.contains(id)
    }

    /// Adds `instance`, or replaces the one with its id (returned).
    pub fn insert(&mut self, instance: Arc<Instance>) -> Option<Arc<Instance>> {
        self.0.insert(ById(instance)).map(|i| i.0)
    }

    pub fn remove(&mut self, id: &str) -> Option<Arc<Instance>> {
        self.0.remove(id).map(|i| i.0)
    }

    /// The instances in the order of their ids.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Arc<Instance>> {
        self.0.iter().map(|i| &i.0)
    }

    /// The instances whose ids sort after `id` (all of them: `None`), in
    /// the order of their ids: a page of a listing.
    pub fn after(&self, id: Option<&str>) -> impl Iterator<Item = &Arc<Instance>> {
        let from = match id {
            Some(id) => std::ops::Bound::Excluded(id),
            None => std::ops::Bound::Unbounded,
        };
        let range: (std::ops::Bound<&str>, _) = (from, std::ops::Bound::Unbounded);
        self.0.range::<_, str>(range).map(|i| &i.0)
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &CompactString> {
        self.0.iter().map(|i| &i.0.id)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::ops::Index<&str> for Instances {
    type Output = Arc<Instance>;

    fn index(&self, id: &str) -> &Arc<Instance> {
        self.get(id).expect("no instance with this id")
    }
}

/// Equal when they hold the same instances, whole (not only the same ids).
impl PartialEq for Instances {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.values().zip(other.values()).all(|(a, b)| a == b)
    }
}

impl Serialize for Instances {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.len()))?;
        for inst in self.values() {
            map.serialize_entry(&inst.id, &**inst)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Instances {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ByIdMap;
        impl<'de> Visitor<'de> for ByIdMap {
            type Value = Instances;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of instance ids to instances")
            }

            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Instances, M::Error> {
                let mut out = Instances::default();
                while let Some((id, inst)) = map.next_entry::<CompactString, Instance>()? {
                    if inst.id != id {
                        return Err(M::Error::custom(format!(
                            "instance {:?} is kept under the id {id:?}",
                            inst.id
                        )));
                    }
                    out.insert(Arc::new(inst));
                }
                Ok(out)
            }
        }
        d.deserialize_map(ByIdMap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(id: &str, lease_secs: u32) -> Arc<Instance> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "id": id,
                "reg": {"owner": "o", "addresses": ["10.0.0.1"], "services": [],
                        "lease_secs": lease_secs, "disabled": false, "binder": null},
                "status": "up", "status_at": 0, "expires_at": 1000,
            }))
            .unwrap(),
        )
    }

    fn instances(ids: &[&str]) -> Instances {
        let mut set = Instances::default();
        for id in ids {
            assert!(set.insert(instance(id, 30)).is_none());
        }
        set
    }

    #[test]
    fn looked_up_replaced_and_removed_by_id_in_id_order() {
        let first = instances(&["b", "c", "a"]);
        let mut set = first.clone();
        assert_eq!(
            set.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        assert_eq!(set["b"].id, "b");
        let after = |id| set.after(id).map(|i| i.id.to_string()).collect::<Vec<_>>();
        assert_eq!(after(Some("a")), ["b", "c"]);
        assert_eq!(after(Some("bb")), ["c"]);
        assert_eq!(after(None).len(), 3);
        let old = set.insert(instance("b", 99)).expect("replaces b");
        assert_eq!(old.reg.lease_secs, 30);
        assert_eq!(set["b"].reg.lease_secs, 99);
        assert_eq!(set.len(), 3);
        assert_ne!(set, first, "equal ids, different instances");
        assert_eq!(set.remove("a").unwrap().id, "a");
        assert!(!set.contains_key("a") && set.get("a").is_none());
        assert_eq!(first.len(), 3, "the copy is untouched");
    }

    #[test]
    fn serialised_as_a_map_of_ids_and_read_back() {
        let set = instances(&["x", "y"]);
        let json = serde_json::to_value(&set).unwrap();
        assert_eq!(json["y"]["id"], "y");
        assert_eq!(json.as_object().unwrap().len(), 2);
        let back: Instances = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, set);
        let mut wrong = json;
        wrong["z"] = wrong["x"].clone();
        let err = serde_json::from_value::<Instances>(wrong).unwrap_err();
        assert!(err.to_string().contains("kept under the id \"z\""), "{err}");
    }
}
