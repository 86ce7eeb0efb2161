//! Service discovery: the instance registry and everything it turns into
//! DNS. `model`, `state`, `health` and `naming` are pure and unit-tested;
//! `journal` is the disk, `service` the tokio shell that ties them to the
//! zone store.

pub mod census;
pub mod deadlines;
pub mod error;
pub mod etcd;
pub mod health;
pub mod journal;
pub mod model;
pub mod naming;
pub mod projection;
pub mod service;
pub mod state;
pub mod table;

pub use error::RegistryError;
pub use health::HealthPolicy;
pub use model::{InstanceSpec, Status};
pub use naming::Naming;
pub use state::{Entry, Instance, Registry};
