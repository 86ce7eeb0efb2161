//! A lease's expiry, renewed in place.
//!
//! Renewals are the registry's most frequent write (one per instance and
//! lease third). The instances live in a persistent map shared with every
//! reader's view, so changing a field of one means copying the instance
//! and the map's path to it, and the copied path is freed again when the
//! previous view goes. The expiry alone is an atomic instead, shared by
//! every version that holds the instance: a renewal is one store, and a
//! reader of an older view sees the newer expiry, which is the one it
//! would want. Everything else about an instance changes by replacement.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Unix milliseconds at which a lease runs out; [`Expiry::NEVER`] when
/// this node keeps no lease (etcd keeps them).
#[derive(Debug, Default)]
pub struct Expiry(AtomicU64);

impl Expiry {
    pub const NEVER: u64 = u64::MAX;

    pub fn new(at_ms: u64) -> Expiry {
        Expiry(AtomicU64::new(at_ms))
    }

    pub fn get(&self) -> u64 {
        // A timestamp read alone: no other memory depends on it.
        self.0.load(Ordering::Relaxed)
    }

    /// Moves the lease, in every version of the registry that holds it.
    pub fn set(&self, at_ms: u64) {
        self.0.store(at_ms, Ordering::Relaxed)
    }

    /// Whether a lease is kept here at all.
    pub fn is_finite(&self) -> bool {
        self.get() != Self::NEVER
    }
}

impl Clone for Expiry {
    fn clone(&self) -> Expiry {
        Expiry::new(self.get())
    }
}

impl PartialEq for Expiry {
    fn eq(&self, other: &Expiry) -> bool {
        self.get() == other.get()
    }
}

impl Eq for Expiry {}

impl Serialize for Expiry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.get())
    }
}

impl<'de> Deserialize<'de> for Expiry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Expiry, D::Error> {
        u64::deserialize(d).map(Expiry::new)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_renewal_reaches_every_holder_and_a_clone_is_its_own() {
        let shared = Arc::new(Expiry::new(1_000));
        let holder = shared.clone();
        let copy = (*shared).clone();
        shared.set(2_000);
        assert_eq!(holder.get(), 2_000);
        assert_eq!(copy.get(), 1_000);
        assert_ne!(copy, *shared);
    }

    #[test]
    fn serialises_as_the_number_it_holds() {
        let e = Expiry::new(42);
        assert_eq!(serde_json::to_string(&e).unwrap(), "42");
        let back: Expiry = serde_json::from_str("42").unwrap();
        assert_eq!(back, e);
        assert!(!serde_json::from_str::<Expiry>(&u64::MAX.to_string())
            .unwrap()
            .is_finite());
    }
}
