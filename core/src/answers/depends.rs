//! Which names' entries hold another name's records: an SRV, MX or NS
//! answer holds its targets' addresses, a CNAME's the chain's RRsets. A
//! change at the target recompiles the names that depend on it. The
//! lists may hold more than they need (a name that no longer depends on
//! a target leaves it when the target next changes): that costs a
//! recompile, never a stale answer.

use std::collections::HashMap;
use std::sync::Arc;

/// A name in lower-cased wire form, shared.
pub type Wire = Arc<[u8]>;
/// Names, each with a list of names.
pub type Links = Vec<(Wire, Vec<Wire>)>;

/// Dependent names by the name they depend on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dependents {
    by_target: HashMap<Wire, Names, foldhash::fast::RandomState>,
}

/// The names that depend on one target. Most targets have one (an
/// instance named by its service's SRV), kept without a list of its own:
/// a list was a third of the index at a million names.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Names {
    One(Wire),
    Many(Vec<Wire>),
}

impl Names {
    /// `names` as kept, `None` when there are none.
    fn of(mut names: Vec<Wire>) -> Option<Names> {
        match names.len() {
            0 => None,
            1 => names.pop().map(Names::One),
            _ => Some(Names::Many(names)),
        }
    }

    fn as_slice(&self) -> &[Wire] {
        match self {
            Names::One(name) => std::slice::from_ref(name),
            Names::Many(names) => names,
        }
    }

    fn push(&mut self, name: Wire) {
        match self {
            Names::One(first) => *self = Names::Many(vec![first.clone(), name]),
            Names::Many(names) => names.push(name),
        }
    }
}

impl Dependents {
    /// Notes that `name`'s entries hold the records of `targets`.
    pub fn add(&mut self, name: &Arc<[u8]>, targets: &[Arc<[u8]>]) {
        // The index keeps copies of its own: the names it is given are
        // the compile threads' allocations, made among the compiled
        // entries, which are freed once the table is packed; kept, each
        // would hold a page of that freed memory resident.
        let mut own: Option<Arc<[u8]>> = None;
        let mut own_name = || own.get_or_insert_with(|| Arc::from(&name[..])).clone();
        for t in targets {
            match self.by_target.get_mut(&t[..]) {
                Some(list) => {
                    if !list.as_slice().iter().any(|n| n[..] == name[..]) {
                        list.push(own_name());
                    }
                }
                None => {
                    self.by_target
                        .insert(Arc::from(&t[..]), Names::One(own_name()));
                }
            }
        }
    }

    /// The names whose entries may hold `target`'s records.
    pub fn of(&self, target: &[u8]) -> &[Arc<[u8]>] {
        self.by_target.get(target).map_or(&[], Names::as_slice)
    }

    /// Replaces the list of `target` (recompiled names that still depend
    /// on it).
    pub fn set(&mut self, target: Arc<[u8]>, names: Vec<Arc<[u8]>>) {
        match Names::of(names) {
            None => self.by_target.remove(&target),
            Some(names) => self.by_target.insert(target, names),
        };
    }

    /// Targets with dependents.
    pub fn len(&self) -> usize {
        self.by_target.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_target.is_empty()
    }
}

/// How a compile of some names changes the index.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DependsDelta {
    /// Targets looked at, with the exact names that depend on them now.
    pub rechecked: Links,
    /// Names recompiled, with the targets their entries hold.
    pub referred: Links,
}

impl DependsDelta {
    pub fn is_empty(&self) -> bool {
        self.rechecked.is_empty() && self.referred.iter().all(|(_, t)| t.is_empty())
    }

    pub fn apply_to(&self, index: &mut Dependents) {
        for (target, names) in &self.rechecked {
            index.set(target.clone(), names.clone());
        }
        for (name, targets) in &self.referred {
            index.add(name, targets);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Arc<[u8]> {
        Arc::from(s.as_bytes())
    }

    #[test]
    fn rechecked_lists_replace_and_referrals_add() {
        let mut index = Dependents::default();
        index.add(&w("srv"), &[w("host1"), w("host2")]);
        index.add(&w("mx"), &[w("host1")]);
        assert_eq!(index.of(b"host1"), &[w("srv"), w("mx")]);
        let delta = DependsDelta {
            rechecked: vec![(w("host1"), vec![w("mx")]), (w("host2"), vec![])],
            referred: vec![(w("alias"), vec![w("host2")])],
        };
        delta.apply_to(&mut index);
        assert_eq!(index.of(b"host1"), &[w("mx")]);
        assert_eq!(index.of(b"host2"), &[w("alias")]);
        assert_eq!(index.len(), 2);
        // One name, then a second, then back to one.
        index.add(&w("other"), &[w("host2")]);
        assert_eq!(index.of(b"host2"), &[w("alias"), w("other")]);
        index.set(w("host2"), vec![w("other")]);
        assert_eq!(index.of(b"host2"), &[w("other")]);
        index.add(&w("other"), &[w("host2")]);
        assert_eq!(index.of(b"host2"), &[w("other")], "a name is listed once");
        assert_eq!(index.of(b"nobody"), &[] as &[Wire]);
    }
}
