//! Service discovery: the instance registry and everything it turns into
//! DNS. `model`, `state`, `health` and `naming` are pure and unit-tested;
//! `journal` is the disk, `service` the tokio shell that ties them to the
//! zone store.

pub mod census;
pub mod deadlines;
pub mod etcd;
pub mod health;
pub mod journal;
pub mod model;
pub mod naming;
pub mod projection;
pub mod service;
pub mod state;
pub mod table;

pub use health::HealthPolicy;
pub use model::{InstanceSpec, Status};
pub use naming::Naming;
pub use state::{Entry, Instance, Registry};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RegistryError {
    /// A bad input field; the message says what is wrong with it.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    #[error("id: no instance {0:?} is registered")]
    NotFound(String),
    #[error("the registry is shutting down")]
    Unavailable,
}
