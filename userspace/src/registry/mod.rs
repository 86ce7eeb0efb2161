//! Service discovery, the I/O half: the registry journal on disk, the
//! etcd backend, the ZooKeeper source (Registrar's records), the projection of the registry into the zone store and
//! the tokio service that ties them together. The pure half (instances,
//! leases, health hysteresis, naming) is `xdpdns_core::registry`,
//! re-exported here.

pub use xdpdns_core::registry::*;

pub mod etcd;
pub mod journal;
pub mod projection;
pub mod service;
pub mod zookeeper;
