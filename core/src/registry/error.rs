//! What a registry write can be refused for.

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RegistryError {
    /// A bad input field; the message says what is wrong with it.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    #[error("id: no instance {0:?} is registered")]
    NotFound(String),
    /// The instance mirrors a ZooKeeper node: it changes there, not here.
    #[error("id: instance {id:?} mirrors ZooKeeper node {node}; change it in ZooKeeper")]
    Mirrored { id: String, node: String },
    #[error("the registry is shutting down")]
    Unavailable,
}
