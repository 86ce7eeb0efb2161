//! Hot answers: the fallback answers A/AAAA queries for names in the
//! compiled answer table the way the XDP program does — header patch,
//! question copy, pre-encoded section, OPT — and NXDOMAIN/NODATA from
//! the served snapshot with its SOA, without parsing into a `Message` or
//! running the resolver. Everything else, and every hit while the table
//! is behind the zone store, goes to the full handler.
//!
//! `table` holds the entries (versioned, one writer), `reply` builds the
//! answer, `negative` decides and writes negative answers, `names`
//! compresses names as the full handler's encoder does, `subscriber`
//! keeps the table in step with the change feed.

mod names;
mod negative;
mod reply;
mod subscriber;
mod table;

pub use reply::answer;
pub use subscriber::{fill, start};
pub use table::HotTable;

#[cfg(test)]
mod tests;
