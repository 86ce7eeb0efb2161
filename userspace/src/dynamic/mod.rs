//! Zones written at runtime: RFC 2136 UPDATEs applied through the one
//! commit path and answered once durable (`updater`), and the files of
//! zones that take updates kept in step with them (`files`).

pub mod files;
mod updater;

pub use files::ZoneFiles;
pub use updater::Updater;
