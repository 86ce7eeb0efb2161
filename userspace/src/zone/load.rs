//! Loading a zone from a master file, with its checks and warnings.

use hickory_proto::rr::Name;

use super::check::{self, check_zone};
use super::disk::{parse_zone_file, parse_zone_file_in_batches};
use super::parser::SourceRecord;
use super::{signing_check, LoadError, Zone};

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
        let parsed = parse_zone_file_in_batches(path, origin, &mut |batch| {
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

#[cfg(test)]
mod tests {
    use hickory_proto::rr::LowerName;

    use super::*;
    use crate::zone::disk::is_current;

    fn name(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    #[test]
    fn a_file_loads_on_two_threads_with_the_exact_checks_and_messages() {
        let dir = std::env::temp_dir().join(format!("xdpdns-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let origin = name("example.com.");
        let head = "$ORIGIN example.com.\n$TTL 300\n@ SOA ns1 h 1 3600 600 86400 60\n@ NS ns1\nns1 A 192.0.2.1\n";
        let load = |body: &str| {
            let path = dir.join("z.zone");
            std::fs::write(&path, format!("{head}{body}")).unwrap();
            load_zone_file(&path, &origin).map_err(|e| e.to_string())
        };
        // Many batches' worth, an owner's records split across lines.
        let mut big = String::new();
        for i in 0..10_000 {
            big.push_str(&format!(
                "h{i} A 10.0.{}.{}\nh{i} AAAA 2001:db8::{i:x}\n",
                i / 256,
                i % 256
            ));
        }
        big.push_str("h0 TXT \"again\"\n");
        let zone = load(&big).unwrap();
        assert_eq!(zone.record_count(), 3 + 20_001);
        let h0 = zone
            .node(&LowerName::from(name("h0.example.com.")))
            .unwrap();
        assert_eq!(h0.rrsets().len(), 3);
        assert!(zone.source().is_some_and(is_current));
        // An included file is stamped even when it holds no record.
        std::fs::write(dir.join("inc.zone"), "$TTL 60\n").unwrap();
        let zone = load(&format!(
            "$INCLUDE {}\nwww A 192.0.2.80\n",
            dir.join("inc.zone").display()
        ))
        .unwrap();
        let stamp = zone.source().unwrap();
        assert_eq!(stamp.files.len(), 2, "{stamp:?}");
        assert!(is_current(stamp));
        std::fs::write(dir.join("inc.zone"), "$TTL 120\n").unwrap();
        assert!(
            !is_current(stamp),
            "an edited include makes the image stale"
        );
        // Problems are worded by the full check: the earlier line named.
        let z = dir.join("z.zone");
        let at = |line: usize| format!("{}:{line}: ", z.display());
        let err = load("www A 192.0.2.80\nwww CNAME other\n").unwrap_err();
        assert_eq!(
            err,
            format!(
                "{}CNAME and other data at www.example.com. (A at line 6)",
                at(7)
            )
        );
        let err = load(&format!("{big}x CNAME a\nx CNAME b\n")).unwrap_err();
        assert!(
            err.contains("second CNAME at x.example.com. (first at line"),
            "{err}"
        );
        let err = load("www.example.org. A 192.0.2.1\n").unwrap_err();
        assert_eq!(
            err,
            format!("{}www.example.org. is outside zone example.com.", at(6))
        );
        let err = load("@ SOA ns1 h 2 3600 600 86400 60\n").unwrap_err();
        assert!(
            err.contains("second SOA record for example.com. (first at line 3)"),
            "{err}"
        );
        let err = load("@ NS ns2\n").unwrap_err();
        assert!(
            err.contains("NS target ns2.example.com. is inside the zone but has no A/AAAA"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
