//! Hot answers: the fallback answers A/AAAA queries for names in the
//! compiled answer table the way the XDP program does — header patch,
//! question copy, pre-encoded section, OPT — without parsing into a
//! `Message` or running the resolver. Everything else, and every query
//! while the table is behind the zone store, goes to the full handler.
//!
//! `table` holds the entries (versioned, one writer), `reply` builds the
//! answer, `subscriber` keeps the table in step with the change feed.

mod reply;
mod subscriber;
mod table;

pub use reply::answer;
pub use subscriber::{fill, start};
pub use table::HotTable;

#[cfg(test)]
mod tests;
