//! Loading a zone from a master file, with its checks and warnings.

use hickory_proto::rr::Name;

use super::check::{self, check_zone, ZoneCheckError};
use super::parser::{self, parse_zone_file, parse_zone_str, SourceRecord, ZoneFileError};
use super::signing_check;
use super::tree::Zone;

/// Why a zone file did not become a zone. Both variants print as one line
/// naming the file (and line, where there is one).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    File(#[from] ZoneFileError),
    #[error(transparent)]
    Check(#[from] ZoneCheckError),
}

/// Parses and checks a master file: the whole path from disk to a servable
/// zone. A signed zone's warnings (expiring signatures, ...) are logged.
pub fn load_zone_file(path: &std::path::Path, origin: &Name) -> Result<Zone, LoadError> {
    let (zone, warnings) = load_zone_file_with_warnings(path, origin)?;
    for w in warnings {
        tracing::warn!(zone = %zone.origin(), "{w}");
    }
    Ok(zone)
}

/// [`load_zone_file`], returning the signing warnings (one line each,
/// naming file and line) instead of logging them.
pub fn load_zone_file_with_warnings(
    path: &std::path::Path,
    origin: &Name,
) -> Result<(Zone, Vec<String>), LoadError> {
    // Two threads: this one parses, the other builds and checks the zone
    // from batches of records as they come (each about half the work).
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<SourceRecord>>(16);
    let started = std::time::Instant::now();
    let (parsed, built) = std::thread::scope(|scope| {
        let builder = scope.spawn(|| check::build_checked(origin, path, rx));
        let parsed = parser::parse_zone_file_in_batches(path, origin, &mut |batch| {
            // A builder that stopped on a problem has said so; the rest
            // of the file is still parsed (a syntax error comes first).
            let _ = tx.send(batch);
        });
        drop(tx);
        let parse_ms = started.elapsed().as_millis() as u64;
        let built = builder.join().expect("the zone builder does not panic");
        tracing::debug!(file = %path.display(), parse_ms, load_ms = started.elapsed().as_millis() as u64, "zone file parsed and built");
        (parsed, built)
    });
    let stamp = parsed?;
    let built = match built {
        Ok(b) => b,
        // The message names the earlier record of a conflict: the full
        // check over the whole file finds it.
        Err(first) => {
            let records = parse_zone_file(path, origin)?;
            return Err(check_zone(origin, path, &records)
                .err()
                .unwrap_or(first)
                .into());
        }
    };
    let mut zone = built.zone;
    // Every file read, each stamped just before it was read: an edit
    // during the load leaves the stamp stale, so the next start reads
    // the file again.
    zone.set_source(stamp);
    let signed = !built.dnssec.is_empty();
    let warnings = match signed || zone.is_signed() {
        true => signing_check::signing_warnings(origin, &built.dnssec, crate::clock::unix_secs()),
        false => Vec::new(),
    };
    Ok((zone, warnings))
}

/// [`load_zone_file`] for text already in memory; `file` names it in errors.
pub fn load_zone_str(text: &str, origin: &Name, file: &std::path::Path) -> Result<Zone, LoadError> {
    let records = parse_zone_str(text, origin, file)?;
    Ok(check_zone(origin, file, &records)?)
}
