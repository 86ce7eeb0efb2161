//! Service discovery, the pure half: instances and their leases (`model`,
//! `state`, `expiry`, `census`, `deadlines`), health hysteresis (`health`), and the
//! naming rules and generated records (`naming`, `table`). The journal,
//! etcd and the tokio service that ties them to the zone store are in the
//! `xdpdns` crate. `zookeeper` reads the records Registrar writes.

pub mod census;
pub mod deadlines;
mod dense;
pub mod error;
pub mod expiry;
pub mod health;
pub mod instance;
pub mod instances;
pub mod model;
pub mod naming;
pub mod state;
pub mod table;
pub mod withdrawals;
pub mod zookeeper;

pub use error::RegistryError;
pub use expiry::Expiry;
pub use health::HealthPolicy;
pub use instance::Instance;
pub use model::{InstanceSpec, Status};
pub use naming::Naming;
pub use state::{Entry, Registry};
pub use withdrawals::Withdrawals;
