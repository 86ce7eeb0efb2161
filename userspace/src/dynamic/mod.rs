//! Zones written at runtime: RFC 2136 UPDATEs applied through the one
//! commit path and answered once durable (`updater`), the files of zones
//! that take updates kept in step with them (`files`), zones added and
//! removed at runtime (`runtime`), the catalog zone listing the zones
//! served as primary (`catalog`), and the catalogs followed as secondary
//! (`members`, `following`).

pub mod catalog;
pub mod files;
pub mod following;
pub mod members;
pub mod runtime;
mod updater;

use std::sync::Arc;

pub use catalog::Catalog;
pub use files::ZoneFiles;
pub use runtime::RuntimeZones;
pub use updater::Updater;

/// What a running server holds of the dynamic sources (what a reload
/// and the API reach).
#[derive(Clone, Default)]
pub struct Dynamic {
    pub files: Option<Arc<ZoneFiles>>,
    pub runtime: Option<Arc<RuntimeZones>>,
    pub catalog: Option<Arc<Catalog>>,
    pub following: Option<Arc<following::Following>>,
}
