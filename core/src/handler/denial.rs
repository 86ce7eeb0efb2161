//! Which NSEC or NSEC3 records prove a denial in a pre-signed zone (RFC
//! 4035 §3.1.3, RFC 5155 §7.2). Returns owner names of the zone's own
//! NSEC/NSEC3 records; the lookup copies them with their RRSIGs. Pure.

use hickory_proto::dnssec::Nsec3HashAlgorithm;
use hickory_proto::rr::{LowerName, Name};

use crate::zone::{label_count, nsec3_chain_key, Zone};

/// The denial records a negative or wildcard answer needs, as owner names
/// (duplicates removed, in the order they go into the authority section).
pub(super) struct Proof {
    pub owners: Vec<LowerName>,
    /// Whether the owners hold NSEC3 (else NSEC) records.
    pub nsec3: bool,
}

/// What is being proven.
pub(super) enum Denial<'a> {
    /// `qname` does not exist; `closest` is its closest encloser.
    Name {
        qname: &'a LowerName,
        closest: &'a LowerName,
    },
    /// `qname` exists (or is an empty non-terminal) without the type.
    /// `ds` marks a DS query, where an opt-out span may stand in.
    Type { qname: &'a LowerName, ds: bool },
    /// `qname` was answered from `*.closest`: the exact name does not exist.
    WildcardAnswer {
        qname: &'a LowerName,
        closest: &'a LowerName,
    },
    /// `qname` matched `*.closest`, which lacks the type.
    WildcardType {
        qname: &'a LowerName,
        closest: &'a LowerName,
    },
    /// A delegation at `cut` without DS: it is insecure.
    NoDs { cut: &'a LowerName },
}

/// The proof of `denial` in `zone`, or `None` when the zone has neither
/// NSEC nor NSEC3 records (then nothing can be proven).
pub(super) fn prove(zone: &Zone, denial: &Denial<'_>) -> Option<Proof> {
    if zone.has_nsec3() {
        Nsec3::new(zone).map(|n| n.prove(denial))
    } else if zone.has_nsec() {
        Some(nsec(zone, denial))
    } else {
        None
    }
}

/// RFC 4035 §3.1.3 with NSEC.
fn nsec(zone: &Zone, denial: &Denial<'_>) -> Proof {
    let at_or_before = |name: &LowerName| zone.nsec_at_or_before(name).cloned();
    let wildcard = |closest: &LowerName| wildcard_of(closest);
    let owners = match denial {
        Denial::Name { qname, closest } => vec![
            at_or_before(qname),
            wildcard(closest).and_then(|w| at_or_before(&w)),
        ],
        // At an existing name its own NSEC; at an empty non-terminal the
        // one before it, whose next name lies below it.
        Denial::Type { qname, .. } => vec![at_or_before(qname)],
        Denial::WildcardAnswer { qname, .. } => vec![at_or_before(qname)],
        Denial::WildcardType { qname, closest } => vec![
            at_or_before(qname),
            wildcard(closest).and_then(|w| at_or_before(&w)),
        ],
        Denial::NoDs { cut } => vec![at_or_before(cut)],
    };
    Proof {
        owners: dedup(owners),
        nsec3: false,
    }
}

/// A zone's NSEC3 chain with its hashing parameters.
struct Nsec3<'z> {
    zone: &'z Zone,
    iterations: u16,
    salt: Vec<u8>,
    /// The chain's key prefix in the zone's NSEC3 index: only its records
    /// prove anything (a zone being re-salted holds two chains).
    chain: Vec<u8>,
}

impl<'z> Nsec3<'z> {
    fn new(zone: &'z Zone) -> Option<Self> {
        let (iterations, salt) = zone.nsec3_params()?;
        Some(Nsec3 {
            zone,
            iterations,
            chain: nsec3_chain_key(iterations, &salt),
            salt,
        })
    }

    fn hash(&self, name: &LowerName) -> Option<Vec<u8>> {
        Nsec3HashAlgorithm::SHA1
            .hash(&self.salt, &Name::from(name), self.iterations)
            .ok()
            .map(|d| d.as_ref().to_vec())
    }

    fn matching(&self, name: &LowerName) -> Option<LowerName> {
        self.zone
            .nsec3_matching(&self.chain, &self.hash(name)?)
            .cloned()
    }

    fn covering(&self, name: &LowerName) -> Option<LowerName> {
        self.zone
            .nsec3_covering(&self.chain, &self.hash(name)?)
            .cloned()
    }

    /// RFC 5155 §7.2.1: the closest provable encloser of `qname` at or
    /// above `closest` (the NSEC3 matching it) and the NSEC3 covering the
    /// next closer name. Returns the encloser too.
    fn closest_encloser(
        &self,
        qname: &LowerName,
        closest: &LowerName,
    ) -> (LowerName, Vec<Option<LowerName>>) {
        let apex = self.zone.origin_key();
        let mut encloser = closest.clone();
        let matched = loop {
            if let Some(m) = self.matching(&encloser) {
                break Some(m);
            }
            if &encloser == apex || !apex.zone_of(&encloser) {
                break None;
            }
            encloser = encloser.base_name();
        };
        let next_closer = LowerName::from(qname.trim_to(label_count(&Name::from(&encloser)) + 1));
        (encloser, vec![matched, self.covering(&next_closer)])
    }

    fn prove(&self, denial: &Denial<'_>) -> Proof {
        let owners = match denial {
            // §7.2.2
            Denial::Name { qname, closest } => {
                let (encloser, mut owners) = self.closest_encloser(qname, closest);
                owners.push(wildcard_of(&encloser).and_then(|w| self.covering(&w)));
                owners
            }
            // §7.2.3, and §7.2.4 for DS: without a matching NSEC3 (an
            // opt-out span) the closest provable encloser proof.
            Denial::Type { qname, ds } => match self.matching(qname) {
                Some(m) => vec![Some(m)],
                None if *ds => self.closest_encloser(qname, &qname.base_name()).1,
                None => self.closest_encloser(qname, qname).1,
            },
            // §7.2.6
            Denial::WildcardAnswer { qname, closest } => {
                let next_closer =
                    LowerName::from(qname.trim_to(label_count(&Name::from(*closest)) + 1));
                vec![self.covering(&next_closer)]
            }
            // §7.2.5
            Denial::WildcardType { qname, closest } => {
                let (encloser, mut owners) = self.closest_encloser(qname, closest);
                owners.push(wildcard_of(&encloser).and_then(|w| self.matching(&w)));
                owners
            }
            // §7.2.7: the NSEC3 matching the cut, else (opt-out) the
            // closest provable encloser proof.
            Denial::NoDs { cut } => match self.matching(cut) {
                Some(m) => vec![Some(m)],
                None => self.closest_encloser(cut, &cut.base_name()).1,
            },
        };
        Proof {
            owners: dedup(owners),
            nsec3: true,
        }
    }
}

fn wildcard_of(closest: &LowerName) -> Option<LowerName> {
    Name::from(closest)
        .prepend_label("*")
        .ok()
        .map(LowerName::from)
}

fn dedup(owners: Vec<Option<LowerName>>) -> Vec<LowerName> {
    let mut out: Vec<LowerName> = Vec::with_capacity(owners.len());
    for o in owners.into_iter().flatten() {
        if !out.contains(&o) {
            out.push(o);
        }
    }
    out
}
