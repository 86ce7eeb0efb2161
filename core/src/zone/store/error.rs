//! Why the store refused a change.

use hickory_proto::rr::Name;

use crate::zone::ZoneError;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StoreError {
    #[error("zone {0} is not served")]
    UnknownZone(Name),
    #[error("zone {0} has no SOA record")]
    NoSoa(Name),
    #[error("change rejected: {0}")]
    Zone(#[from] ZoneError),
    #[error("the SOA record is managed by the store and cannot be changed directly")]
    SoaChange,
    #[error("zone {0} could not be signed; nothing changed")]
    Signing(Name),
}
