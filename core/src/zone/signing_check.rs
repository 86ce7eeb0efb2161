//! Warnings for pre-signed zones on load (RFC 4034/5155 consistency): a
//! zone with these problems is still served — it is what the signer made,
//! and the fix is upstream — but the operator hears of it in one line per
//! problem, naming file and line.

use std::collections::HashSet;

use hickory_proto::dnssec::rdata::DNSSECRData;
use hickory_proto::rr::{LowerName, Name, RData};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};

use super::SourceRecord;

/// NSEC3 iterations above this get a warning (RFC 9276 §3.2: common
/// validator limits).
const MAX_ITERATIONS: u16 = 100;

/// Signatures expiring sooner than this get a warning.
const SOON_SECS: u32 = 7 * 86_400;

/// One line per kind of problem: its first occurrence, with file and line,
/// and how many more there are. `now` is unix seconds.
pub fn signing_warnings(origin: &Name, records: &[SourceRecord], now: u64) -> Vec<String> {
    let origin_key = LowerName::new(origin);
    let now = now as u32;
    let mut keys = HashSet::new();
    let mut nsec3param = None;
    let mut nsec3 = 0usize;
    for rec in records {
        match &rec.record.data {
            RData::DNSSEC(DNSSECRData::DNSKEY(k))
                if LowerName::new(&rec.record.name) == origin_key =>
            {
                let mut wire = Vec::new();
                if k.emit(&mut BinEncoder::new(&mut wire)).is_ok() && wire.len() >= 4 {
                    keys.insert((key_tag(&wire), wire[3]));
                }
            }
            RData::DNSSEC(DNSSECRData::NSEC3PARAM(_)) => nsec3param = nsec3param.or(Some(rec)),
            RData::DNSSEC(DNSSECRData::NSEC3(_)) => nsec3 += 1,
            _ => {}
        }
    }
    let mut kinds: Vec<Finding> = Vec::new();
    let mut note = |kind: &'static str, rec: &SourceRecord, text: String| match kinds
        .iter_mut()
        .find(|f| f.kind == kind)
    {
        Some(f) => f.more += 1,
        None => kinds.push(Finding {
            kind,
            first: format!("{}:{}: {text}", rec.file.display(), rec.line),
            more: 0,
        }),
    };
    for rec in records {
        let RData::DNSSEC(DNSSECRData::RRSIG(sig)) = &rec.record.data else {
            continue;
        };
        let input = sig.input();
        let what = format!("RRSIG over {} at {}", input.type_covered, rec.record.name);
        let expiration = input.sig_expiration.get();
        let left = expiration.wrapping_sub(now) as i32;
        if left <= 0 {
            note(
                "expired",
                rec,
                format!("{what} expired at {expiration} (unix time)"),
            );
        } else if (left as u32) < SOON_SECS {
            note(
                "expiring",
                rec,
                format!("{what} expires in {} hours", left / 3600),
            );
        }
        if (input.sig_inception.get().wrapping_sub(now) as i32) > 0 {
            note(
                "future",
                rec,
                format!("{what} is not valid yet (inception in the future)"),
            );
        }
        if LowerName::new(&input.signer_name) != origin_key {
            note(
                "signer",
                rec,
                format!("{what} names signer {}, not the zone", input.signer_name),
            );
        } else if !keys.contains(&(input.key_tag, u8::from(input.algorithm))) {
            note(
                "key",
                rec,
                format!(
                    "{what} is by key {} (algorithm {}), which no apex DNSKEY is",
                    input.key_tag,
                    u8::from(input.algorithm)
                ),
            );
        }
    }
    if let Some(rec) = nsec3param {
        if let RData::DNSSEC(DNSSECRData::NSEC3PARAM(p)) = &rec.record.data {
            if p.iterations() > MAX_ITERATIONS {
                note(
                    "iterations",
                    rec,
                    format!(
                        "NSEC3 with {} iterations: validators treat more than {MAX_ITERATIONS} \
                         as insecure or bogus (RFC 9276, which asks for 0), and each negative \
                         answer costs that many SHA-1 rounds per name hashed",
                        p.iterations()
                    ),
                );
            }
        }
    }
    if let (Some(rec), 0) = (nsec3param, nsec3) {
        note(
            "nsec3param",
            rec,
            "NSEC3PARAM without any NSEC3 record: negative answers cannot be proven".into(),
        );
    }
    kinds
        .into_iter()
        .map(|f| match f.more {
            0 => f.first,
            n => format!("{} (and {n} more like it)", f.first),
        })
        .collect()
}

struct Finding {
    kind: &'static str,
    first: String,
    more: usize,
}

/// RFC 4034 Appendix B over a DNSKEY's rdata.
fn key_tag(rdata: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    for (i, b) in rdata.iter().enumerate() {
        acc += if i & 1 == 0 {
            u32::from(*b) << 8
        } else {
            u32::from(*b)
        };
    }
    acc += (acc >> 16) & 0xffff;
    (acc & 0xffff) as u16
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::zone::parse_zone_str;

    const NOW: u64 = 1_767_225_600; // 2026-01-01

    fn warnings(text: &str) -> Vec<String> {
        let origin = Name::from_ascii("example.com.").unwrap();
        let records = parse_zone_str(text, &origin, Path::new("z.zone")).unwrap();
        signing_warnings(&origin, &records, NOW)
    }

    // RFC 4034 §5.4's DNSKEY, key tag 60485, algorithm 5.
    const KEY: &str = "@ DNSKEY 256 3 5 ( AQOeiiR0GOMYkDshWoSKz9Xz\
        fwJr1AYtsmx3TGkJaNXVbfi/ 2pHm822aJ5iI9BMzNXxeYCmZ DRD99WYwYqUSdjMmmAphXdvx\
        egXd/M5+X7OrzKBaMbCVdFLU Uh6DhweJBjEVv5f2wwjM9Xzc nOf+EPbtG9DMBmADjFDc2w/r\
        ljwvFw== )\n";

    #[test]
    fn a_consistent_signed_zone_has_no_warnings() {
        let text = format!(
            "$TTL 300\n{KEY}@ RRSIG A 5 2 300 20260201000000 20251201000000 60485 example.com. AAAA\n"
        );
        assert_eq!(warnings(&text), Vec::<String>::new());
    }

    #[test]
    fn expired_expiring_and_keyless_signatures_are_one_line_each() {
        let text = format!(
            "$TTL 300\n{KEY}\
             a RRSIG A 5 3 300 20251201000000 20251101000000 60485 example.com. AAAA\n\
             b RRSIG A 5 3 300 20251202000000 20251101000000 60485 example.com. AAAA\n\
             c RRSIG A 5 3 300 20260103000000 20251201000000 60485 example.com. AAAA\n\
             d RRSIG A 5 3 300 20260201000000 20251201000000 11111 example.com. AAAA\n\
             e RRSIG A 5 3 300 20260201000000 20261201000000 60485 example.com. AAAA\n\
             @ NSEC3PARAM 1 0 150 -\n"
        );
        let w = warnings(&text);
        assert_eq!(w.len(), 6, "{w:#?}");
        assert!(
            w[0].starts_with("z.zone:3: RRSIG over A at a.example.com. expired at ")
                && w[0].ends_with("(and 1 more like it)"),
            "{w:#?}"
        );
        assert_eq!(
            w[1],
            "z.zone:5: RRSIG over A at c.example.com. expires in 48 hours"
        );
        assert_eq!(
            w[2],
            "z.zone:6: RRSIG over A at d.example.com. is by key 11111 (algorithm 5), \
             which no apex DNSKEY is"
        );
        assert!(w[3].starts_with("z.zone:7: ") && w[3].contains("not valid yet"));
        assert!(
            w[4].starts_with("z.zone:8: NSEC3 with 150 iterations: "),
            "{w:#?}"
        );
        assert_eq!(
            w[5],
            "z.zone:8: NSEC3PARAM without any NSEC3 record: negative answers cannot be proven"
        );
    }
}
