//! Hot answers: the fallback answers A/AAAA queries for names in the
//! compiled answer table the way the XDP program does — header patch,
//! question copy, pre-encoded section, OPT — and NXDOMAIN/NODATA from
//! the served snapshot with its SOA, without parsing into a `Message` or
//! running the resolver. Everything else, and every hit while the table
//! is behind the zone store, goes to the full handler.
//!
//! The entries are [`crate::answers::AnswerTable`]'s (versioned, one writer:
//! the kernel table's subscriber, or `answers::follow` without XDP).
//! `reply` builds the answer; [`crate::answers::negative`] decides and writes
//! negative answers.

mod reply;

pub use reply::{answer, Answered};

#[cfg(test)]
mod tests;
