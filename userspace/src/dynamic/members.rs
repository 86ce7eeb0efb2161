//! Following a catalog zone (RFC 9432, version 2), the pure half: what a
//! catalog lists (`read`), and what to start, stop or reset so the zones
//! served as members match the catalogs followed (`plan`), honouring
//! change of ownership (`coo`) and member id changes (a zone reset).

use std::collections::{BTreeMap, HashSet};

use hickory_proto::rr::{LowerName, Name, RData};
use serde::{Deserialize, Serialize};

use crate::zone::Zone;

/// One member as a catalog lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    pub zone: Name,
    /// The member's unique label (`<id>.zones.<catalog>`).
    pub id: String,
    /// `coo.<id>.zones.<catalog> PTR <new catalog>`: the member may move
    /// to that catalog.
    pub coo: Option<LowerName>,
}

/// What a catalog lists, by member zone.
pub type Listing = BTreeMap<LowerName, Listed>;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CatalogError {
    #[error("no version TXT record (version.{0})")]
    NoVersion(Name),
    #[error("version {0:?} is not supported (only \"2\", RFC 9432)")]
    Version(String),
}

/// A member served now: which catalog it came from, under which id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owned {
    pub zone: String,
    pub catalog: String,
    pub id: String,
}

/// One change to the members served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Start serving `zone` as a secondary zone.
    Add(Owned),
    /// Stop serving it and drop what was served.
    Remove(Name),
    /// Drop what was served and transfer it anew (its id changed, or it
    /// moved to another catalog under another id).
    Reset(Owned),
    /// Keep what is served; only the owner or id recorded changes (moved
    /// to another catalog under the same id).
    Move(Owned),
}

/// Why a listed member is not served (logged by the caller).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ignored {
    /// Served already, from the configuration or the API.
    Served(Name),
    /// Listed by another catalog too, which owns it (no `coo` to here).
    OwnedElsewhere { zone: Name, owner: String },
}

/// Reads a catalog zone. Members whose node does not hold exactly one PTR
/// are skipped (RFC 9432 §4.2); a zone listed twice keeps its first id in
/// label order.
pub fn read(catalog: &Zone) -> Result<Listing, CatalogError> {
    let origin = catalog.origin().clone();
    let lower = |n: &Name| n.to_lowercase();
    let version_name = Name::from_ascii("version")
        .and_then(|v| v.append_domain(&origin))
        .expect("version.<catalog> is a name");
    let zones_name = Name::from_ascii("zones")
        .and_then(|v| v.append_domain(&origin))
        .expect("zones.<catalog> is a name");
    let mut version = None;
    let mut ptrs: BTreeMap<String, Vec<Name>> = BTreeMap::new();
    let mut coo: BTreeMap<String, LowerName> = BTreeMap::new();
    for r in catalog.records() {
        let owner = lower(&r.name);
        match &r.data {
            RData::TXT(t) if owner == lower(&version_name) => {
                let text: Vec<u8> = t.txt_data.iter().flat_map(|s| s.iter().copied()).collect();
                version = Some(String::from_utf8_lossy(&text).into_owned());
            }
            RData::PTR(p) => {
                let labels = owner.num_labels().saturating_sub(zones_name.num_labels());
                if !zones_name.zone_of(&owner) {
                    continue;
                }
                let rel: Vec<String> = owner
                    .iter()
                    .take(labels as usize)
                    .map(|l| String::from_utf8_lossy(l).into_owned())
                    .collect();
                match rel.as_slice() {
                    [id] => ptrs.entry(id.clone()).or_default().push(p.0.clone()),
                    [property, id] if property == "coo" => {
                        coo.insert(id.clone(), LowerName::new(&p.0));
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    match version.as_deref() {
        Some("2") => {}
        Some(v) => return Err(CatalogError::Version(v.to_string())),
        None => return Err(CatalogError::NoVersion(origin)),
    }
    let mut listing = Listing::new();
    for (id, targets) in ptrs {
        let [zone] = targets.as_slice() else {
            continue;
        };
        let mut zone = zone.clone();
        zone.set_fqdn(true);
        let key = LowerName::new(&zone);
        listing.entry(key).or_insert(Listed {
            zone,
            coo: coo.get(&id).cloned(),
            id,
        });
    }
    Ok(listing)
}

/// What changes so the members served match the catalogs. `catalogs`
/// holds each followed catalog's listing, or `None` while it is not
/// loaded or not readable (its members then stay as they are); `served`
/// says whether a zone is served by other means (configuration, API).
pub fn plan(
    owned: &BTreeMap<LowerName, Owned>,
    catalogs: &BTreeMap<LowerName, Option<Listing>>,
    served: impl Fn(&LowerName) -> bool,
) -> (Vec<Step>, Vec<Ignored>) {
    let mut steps = Vec::new();
    let mut ignored = Vec::new();
    let mut kept: HashSet<LowerName> = HashSet::new();
    for (key, member) in owned {
        let owner = catalog_key(&member.catalog);
        let Some(listing) = catalogs.get(&owner) else {
            // Its catalog is no longer followed.
            steps.push(Step::Remove(Name::from(key)));
            continue;
        };
        let Some(listing) = listing else {
            kept.insert(key.clone());
            continue;
        };
        let listed = listing.get(key);
        // A change of ownership: the owner points the member at another
        // followed catalog that lists it.
        let moved = listed
            .and_then(|l| l.coo.as_ref())
            .filter(|to| **to != owner)
            .and_then(|to| {
                let new = catalogs.get(to)?.as_ref()?.get(key)?;
                Some((to, new))
            });
        kept.insert(key.clone());
        match (listed, moved) {
            (_, Some((to, new))) => {
                let next = Owned {
                    zone: member.zone.clone(),
                    catalog: Name::from(to).to_string(),
                    id: new.id.clone(),
                };
                steps.push(if new.id == member.id {
                    Step::Move(next)
                } else {
                    Step::Reset(next)
                });
            }
            (Some(l), None) if l.id != member.id => steps.push(Step::Reset(Owned {
                id: l.id.clone(),
                ..member.clone()
            })),
            (Some(_), None) => {}
            (None, None) => {
                kept.remove(key);
                steps.push(Step::Remove(Name::from(key)));
            }
        }
    }
    for (catalog, listing) in catalogs {
        for (key, l) in listing.iter().flatten() {
            let claimed = |steps: &[Step]| steps.iter().any(|s| claims(s, key));
            match owned.get(key) {
                Some(m) if catalog_key(&m.catalog) == *catalog => continue,
                // Taken over by this catalog (coo) above.
                Some(_) if claimed(&steps) => continue,
                Some(m) if kept.contains(key) => {
                    ignored.push(Ignored::OwnedElsewhere {
                        zone: l.zone.clone(),
                        owner: m.catalog.clone(),
                    });
                    continue;
                }
                Some(_) => {} // its owner dropped it: a new member here
                None if served(key) => {
                    ignored.push(Ignored::Served(l.zone.clone()));
                    continue;
                }
                None if claimed(&steps) => continue, // the first catalog wins
                None => {}
            }
            steps.push(Step::Add(Owned {
                zone: l.zone.to_string(),
                catalog: Name::from(catalog).to_string(),
                id: l.id.clone(),
            }));
        }
    }
    (steps, ignored)
}

fn name(text: &str) -> Name {
    let mut n = Name::from_ascii(text).unwrap_or_default();
    n.set_fqdn(true);
    n
}

fn catalog_key(text: &str) -> LowerName {
    LowerName::new(&name(text))
}

/// Whether `step` has `zone` served from here on.
fn claims(step: &Step, zone: &LowerName) -> bool {
    match step {
        Step::Add(o) | Step::Reset(o) | Step::Move(o) => LowerName::new(&name(&o.zone)) == *zone,
        Step::Remove(_) => false,
    }
}

#[cfg(test)]
mod tests;
