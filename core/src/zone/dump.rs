//! A zone as master-file text: what a zone that takes updates writes back
//! to its file. One absolute record per line, the apex first, then names
//! in canonical order; each record in its presentation form when that
//! reads back to the same data, else in RFC 3597 form (`TYPEn \# len
//! hex`), so the file always loads back to the zone it was written from.

use std::fmt::Write;
use std::path::Path;

use hickory_proto::rr::{Name, RData, RecordType};

use super::packed;
use super::parser::parse_zone_str;
use super::tree::Zone;

/// The whole zone as master-file text.
pub fn master_file(zone: &Zone) -> String {
    let origin = zone.origin();
    let mut names: Vec<(Name, &super::Node)> = zone
        .nodes()
        .map(|(key, node)| (Name::from(key), node))
        .collect();
    names.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = format!("; zone {origin} as xdpdns wrote it\n$ORIGIN {origin}\n");
    for (name, node) in names {
        let mut rrsets: Vec<_> = node.rrsets().iter().collect();
        // The SOA first, as every tool expects it.
        rrsets.sort_by_key(|s| (s.rtype != RecordType::SOA, u16::from(s.rtype)));
        for set in rrsets {
            for (wire, data) in set.wire().zip(set.rdatas()) {
                let line = format!(
                    "{name} {} IN {} {}",
                    set.ttl,
                    set.rtype,
                    presentation(&data)
                );
                if reads_back(&line, origin, wire) {
                    out.push_str(&line);
                } else {
                    let _ = write!(
                        out,
                        "{name} {} IN TYPE{} \\# {} {}",
                        set.ttl,
                        u16::from(set.rtype),
                        wire.len(),
                        data_encoding::HEXUPPER.encode(wire)
                    );
                }
                out.push('\n');
            }
        }
    }
    out
}

/// A record's data in presentation form. TXT strings are quoted and
/// escaped (hickory prints them bare, which splits at spaces).
fn presentation(data: &RData) -> String {
    let RData::TXT(txt) = data else {
        return data.to_string();
    };
    let mut out = String::new();
    for (i, s) in txt.txt_data.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push('"');
        for &b in s.iter() {
            match b {
                b'"' | b'\\' => {
                    out.push('\\');
                    out.push(b as char);
                }
                0x20..=0x7e => out.push(b as char),
                _ => {
                    let _ = write!(out, "\\{b:03}");
                }
            }
        }
        out.push('"');
    }
    out
}

/// Whether `line` parses back to one record whose data is `wire`.
fn reads_back(line: &str, origin: &Name, wire: &[u8]) -> bool {
    let Ok(records) = parse_zone_str(line, origin, Path::new("written")) else {
        return false;
    };
    match records.as_slice() {
        [one] => packed::encode(&one.record.data).is_ok_and(|e| e.as_slice() == wire),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zone::load_zone_str;
    use std::str::FromStr;

    #[test]
    fn every_type_reads_back_to_the_same_zone() {
        let text = "\
$ORIGIN example.com.
$TTL 300
@ SOA ns1 hostmaster 7 3600 600 86400 60
@ NS ns1
@ MX 10 mail
@ TXT \"v=spf1 -all\" \"two strings\" \"quote \\\" inside\"
@ CAA 0 issue \"letsencrypt.org\"
@ HTTPS 1 . alpn=h2,h3 ipv4hint=192.0.2.1
ns1 A 192.0.2.53
ns1 AAAA 2001:db8::53
_sip._tcp SRV 10 60 5060 sip
alias CNAME www
www A 192.0.2.1
x NAPTR 100 10 \"U\" \"E2U+sip\" \"!^.*$!sip:info@example.com!\" .
t TLSA 3 1 1 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
u TYPE65280 \\# 4 0A000001
";
        let origin = Name::from_str("example.com.").unwrap();
        let zone = load_zone_str(text, &origin, Path::new("t")).unwrap();
        let written = master_file(&zone);
        let back = load_zone_str(&written, &origin, Path::new("written")).unwrap();
        let mut a: Vec<_> = zone.records().map(|r| (r.to_string(), r.ttl)).collect();
        let mut b: Vec<_> = back.records().map(|r| (r.to_string(), r.ttl)).collect();
        a.sort();
        b.sort();
        assert_eq!(a, b, "{written}");
        assert!(written.contains("SOA"), "{written}");
        assert!(
            written.contains(r#"TXT "v=spf1 -all" "two strings" "quote \" inside""#),
            "TXT in presentation form: {written}"
        );
    }
}
