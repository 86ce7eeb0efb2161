//! The services an instance has been withdrawn from, and since when.
//!
//! Almost every instance has none, so the map lives out of line: an empty
//! set is one null pointer in the instance rather than a 24-byte map,
//! which keeps an instance within a smaller allocation class (a node with
//! a million of them holds each once).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Service key → when its withdrawal took effect (unix milliseconds).
/// Serialised as a plain map, as it always was.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[allow(clippy::box_collection)] // the point: 8 bytes inline, not 24
pub struct Withdrawals(Option<Box<BTreeMap<String, u64>>>);

impl Withdrawals {
    pub fn get(&self, service: &str) -> Option<u64> {
        self.0.as_ref()?.get(service).copied()
    }

    pub fn contains(&self, service: &str) -> bool {
        self.get(service).is_some()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.iter().flat_map(|m| m.keys())
    }

    /// Records a withdrawal from `service` at `at` (replacing an earlier one).
    pub fn insert(&mut self, service: String, at: u64) {
        self.0
            .get_or_insert_with(Default::default)
            .insert(service, at);
    }

    /// Records a withdrawal from `service` at `at` unless there is one.
    pub fn insert_if_absent(&mut self, service: String, at: u64) {
        self.0
            .get_or_insert_with(Default::default)
            .entry(service)
            .or_insert(at);
    }

    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        if let Some(m) = &mut self.0 {
            m.retain(|k, _| keep(k));
            if m.is_empty() {
                self.0 = None;
            }
        }
    }

    pub fn clear(&mut self) {
        self.0 = None;
    }
}

impl Serialize for Withdrawals {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Some(m) => m.serialize(s),
            None => BTreeMap::<String, u64>::new().serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Withdrawals {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m = BTreeMap::<String, u64>::deserialize(d)?;
        Ok(Withdrawals((!m.is_empty()).then(|| Box::new(m))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_is_null_and_round_trips_as_a_map() {
        let mut w = Withdrawals::default();
        assert!(w.is_empty());
        assert_eq!(serde_json::to_string(&w).unwrap(), "{}");
        w.insert_if_absent("b".into(), 5);
        w.insert_if_absent("b".into(), 9);
        w.insert("a".into(), 7);
        assert_eq!(
            (w.get("a"), w.get("b"), w.get("c")),
            (Some(7), Some(5), None)
        );
        let text = serde_json::to_string(&w).unwrap();
        assert_eq!(text, r#"{"a":7,"b":5}"#);
        assert_eq!(serde_json::from_str::<Withdrawals>(&text).unwrap(), w);
        w.retain(|k| k == "a");
        assert_eq!(w.keys().collect::<Vec<_>>(), ["a"]);
        w.retain(|_| false);
        assert!(w.is_empty(), "emptied by retain: back to null");
        assert_eq!(serde_json::from_str::<Withdrawals>("{}").unwrap(), w);
    }
}
