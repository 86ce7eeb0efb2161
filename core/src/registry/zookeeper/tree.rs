//! The ZooKeeper tree as last read, and the instances it makes: every
//! host node is one mirrored instance, a child of a service node is a
//! member of that service. Changes to nodes mark paths dirty; `changes`
//! turns the dirty paths into registry writes, only where what the tree
//! wants differs from what was last written. Pure: the driver feeds it
//! node data and applies what it returns.

use std::collections::{BTreeMap, BTreeSet};

use super::paths::{child_path, instance_id, leaf, parent, path_domain};
use super::records::{parse, HostRecord, RecordError, ZkRecord};
use crate::registry::model::{BinderService, BinderSpec, InstanceSpec, MAX_LEASE_SECS};
use crate::registry::{Instance, Status};

/// A write the tree asks of the registry.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// Register or replace the instance mirroring `node`.
    Mirror {
        id: String,
        node: String,
        spec: Box<InstanceSpec>,
    },
    /// The node is gone (or no longer a host record).
    Unmirror { id: String, node: String },
}

#[derive(Clone, Debug, PartialEq)]
enum Node {
    /// No data, or data that is not served (counted where it was read).
    Plain,
    Host(HostRecord),
    Service(BinderService),
}

#[derive(Default)]
pub struct MirrorTree {
    nodes: BTreeMap<String, Node>,
    /// What the registry holds, by node: as last written.
    written: BTreeMap<String, InstanceSpec>,
    dirty: BTreeSet<String>,
    /// Service members whose node vanished, held (status down) until
    /// hysteresis has withdrawn them.
    leaving: BTreeSet<String>,
    /// Vanished service members leave through hysteresis, not at once.
    hysteresis: bool,
}

impl MirrorTree {
    /// A tree that starts from what the registry already mirrors (its
    /// journal), so the first full read writes only the difference.
    pub fn resume<'a>(hysteresis: bool, mirrored: impl Iterator<Item = &'a Instance>) -> Self {
        let mut tree = MirrorTree {
            hysteresis,
            ..Default::default()
        };
        for inst in mirrored {
            let Some(node) = &inst.reg.mirrors else {
                continue;
            };
            if inst.status == Status::Down {
                tree.leaving.insert(node.to_string());
            }
            tree.written.insert(node.to_string(), spec_of(inst));
        }
        tree
    }

    /// Node `path` now holds `data`. A record that cannot be served is
    /// returned as the error, and the node serves nothing.
    pub fn set(&mut self, path: &str, data: &[u8]) -> Result<(), RecordError> {
        let (node, result) = match parse(data) {
            Ok(None) => (Node::Plain, Ok(())),
            Ok(Some(ZkRecord::Host(h))) => (Node::Host(h), Ok(())),
            Ok(Some(ZkRecord::Service(s))) => (Node::Service(s), Ok(())),
            Err(e) => (Node::Plain, Err(e)),
        };
        let old = self.nodes.insert(path.to_string(), node);
        self.touch(path, old.as_ref());
        result
    }

    /// Node `path` is deleted.
    pub fn remove(&mut self, path: &str) {
        if let Some(old) = self.nodes.remove(path) {
            self.touch(path, Some(&old));
        }
    }

    /// The whole tree under the watched roots, as a full read found it:
    /// every node known before or now is re-examined. Returns the nodes
    /// whose records cannot be served.
    pub fn replace_all(
        &mut self,
        nodes: impl IntoIterator<Item = (String, Vec<u8>)>,
    ) -> Vec<(String, RecordError)> {
        let old = std::mem::take(&mut self.nodes);
        self.dirty.extend(old.into_keys());
        self.dirty.extend(self.written.keys().cloned());
        let mut bad = Vec::new();
        for (path, data) in nodes {
            self.dirty.insert(path.clone());
            if let Err(e) = self.set(&path, &data) {
                bad.push((path, e));
            }
        }
        bad
    }

    fn touch(&mut self, path: &str, old: Option<&Node>) {
        self.dirty.insert(path.to_string());
        let now = self.nodes.get(path);
        let service_changed =
            matches!(old, Some(Node::Service(_))) || matches!(now, Some(Node::Service(_)));
        if service_changed && old != now {
            let children = self.children(path);
            self.dirty.extend(children);
        }
    }

    /// Nodes directly below `path`, known now or written before.
    fn children(&self, path: &str) -> Vec<String> {
        let prefix = child_path(path, "");
        let mut out = direct_children(&self.nodes, &prefix);
        out.extend(direct_children(&self.written, &prefix));
        out
    }

    /// The instance node `path` should be, if any.
    fn want(&self, path: &str) -> Option<InstanceSpec> {
        let Some(Node::Host(h)) = self.nodes.get(path) else {
            return None;
        };
        let up = parent(path)?;
        let domain = path_domain(up)?;
        let service = match self.nodes.get(up) {
            Some(Node::Service(s)) => Some(BinderService {
                srvce: s.srvce.to_ascii_lowercase(),
                proto: s.proto.to_ascii_lowercase(),
                port: s.port,
                ttl: s.ttl,
            }),
            _ => None,
        };
        Some(InstanceSpec {
            owner: None,
            addresses: vec![h.address],
            services: Vec::new(),
            status: Status::Up,
            lease_secs: Some(MAX_LEASE_SECS),
            disabled: false,
            binder: Some(BinderSpec {
                domain,
                host_type: h.host_type,
                aliases: Vec::new(),
                ports: h.ports.clone(),
                ttl: h.ttl,
                service,
                host: Some(leaf(path).to_ascii_lowercase()),
            }),
        })
    }

    /// The registry writes the dirty paths need, recorded as written.
    pub fn changes(&mut self) -> Vec<Change> {
        let dirty = std::mem::take(&mut self.dirty);
        let mut out = Vec::new();
        for path in dirty {
            let want = self.want(&path);
            let had = self.written.get(&path);
            if want.as_ref() == had {
                continue;
            }
            let id = instance_id(&path);
            match want {
                Some(spec) => {
                    self.leaving.remove(&path);
                    self.written.insert(path.clone(), spec.clone());
                    out.push(Change::Mirror {
                        id,
                        node: path,
                        spec: Box::new(spec),
                    });
                }
                None if self.hysteresis && had.is_some_and(is_listed_member) => {
                    let mut down = had.cloned().expect("checked");
                    down.status = Status::Down;
                    self.leaving.insert(path.clone());
                    self.written.insert(path.clone(), down.clone());
                    out.push(Change::Mirror {
                        id,
                        node: path,
                        spec: Box::new(down),
                    });
                }
                None if self.leaving.contains(&path) => {}
                None => {
                    self.written.remove(&path);
                    out.push(Change::Unmirror { id, node: path });
                }
            }
        }
        out
    }

    /// Vanished members that hysteresis has now withdrawn from their
    /// service (`withdrawn(id)`), or whose node is back, leave or return.
    pub fn release(&mut self, withdrawn: impl Fn(&str) -> bool) -> Vec<Change> {
        let done: Vec<String> = self
            .leaving
            .iter()
            .filter(|p| self.nodes.contains_key(*p) || withdrawn(&instance_id(p)))
            .cloned()
            .collect();
        let mut out = Vec::new();
        for path in done {
            self.leaving.remove(&path);
            if self.want(&path).is_some() {
                self.dirty.insert(path);
            } else {
                self.written.remove(&path);
                out.push(Change::Unmirror {
                    id: instance_id(&path),
                    node: path,
                });
            }
        }
        out.extend(self.changes());
        out
    }

    /// A write the registry refused: the node is not mirrored.
    pub fn refused(&mut self, node: &str) {
        self.written.remove(node);
        self.leaving.remove(node);
    }

    /// Nodes held (down) until hysteresis withdraws them.
    pub fn leaving(&self) -> usize {
        self.leaving.len()
    }

    /// Instances mirrored now.
    pub fn mirrored(&self) -> usize {
        self.written.len()
    }
}

/// Keys of `map` one level below `prefix` (which ends with `/`).
fn direct_children<V>(map: &BTreeMap<String, V>, prefix: &str) -> Vec<String> {
    map.range(prefix.to_string()..)
        .map(|(p, _)| p)
        .take_while(|p| p.starts_with(prefix))
        .filter(|p| !p[prefix.len()..].contains('/'))
        .cloned()
        .collect()
}

/// A member still listed in its service's answers.
fn is_listed_member(spec: &InstanceSpec) -> bool {
    spec.status == Status::Up
        && spec
            .binder
            .as_ref()
            .is_some_and(|b| b.service.is_some() && b.host_type.serviceable())
}

/// The spec a mirrored instance was written with.
fn spec_of(inst: &Instance) -> InstanceSpec {
    InstanceSpec {
        owner: None,
        addresses: inst.reg.addresses.to_vec(),
        services: Vec::new(),
        status: inst.status,
        lease_secs: Some(inst.reg.lease_secs),
        disabled: inst.reg.disabled,
        binder: inst.reg.binder.as_deref().cloned(),
    }
}

#[cfg(test)]
mod tests;
