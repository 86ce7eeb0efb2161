//! Record types written as a sequence of simple fields (DNSSEC, DANE,
//! SSHFP, NAPTR, LOC, ...): each is described by a field list, encoded to
//! its wire form here, then decoded by hickory (`rdata_from_wire`), so the
//! encoding a client sees is hickory's wherever hickory knows the type.
//! Presentation formats follow RFC 4034 (DNSSEC), RFC 5155 (NSEC3), RFC 1876
//! (LOC) and the other types' RFCs, as NSD, Knot and BIND read them.

use data_encoding::{BASE32HEX_NOPAD, BASE64, HEXLOWER_PERMISSIVE};
use hickory_proto::rr::{Name, RecordType};

use super::fail::Fail;
use super::fields::{character_string, Fields};
use super::lexer::Token;
use super::values::{parse_decimal, parse_type, type_name, unescape};

/// One field of a record's presentation form.
#[derive(Clone, Copy)]
enum Field {
    U8,
    U16,
    U32,
    /// A domain name, uncompressed on the wire.
    Name,
    /// One character-string (length byte + bytes).
    Str,
    /// The remaining tokens, each a character-string.
    Strs,
    /// The remaining tokens, base64 (spaces allowed inside).
    Base64,
    /// The remaining tokens, hex (spaces allowed inside).
    Hex,
    /// The remaining tokens, type mnemonics: an NSEC type bitmap.
    Types,
    /// A type mnemonic as a 16-bit code (RRSIG type covered).
    Type,
    /// A DNSSEC algorithm, number or mnemonic.
    Algorithm,
    /// An RRSIG time: YYYYMMDDHHmmSS or seconds.
    Time,
    /// NSEC3 salt: hex with a length byte, `-` for none.
    Salt,
    /// NSEC3 next hashed owner: base32hex with a length byte.
    Base32,
    /// CERT type, number or mnemonic.
    CertType,
    /// The rest of the rdata as bytes with no length byte (URI target).
    Bytes,
}

use Field::*;

/// The field list of each type described here.
fn fields_of(rtype: RecordType) -> Option<&'static [Field]> {
    Some(match u16::from(rtype) {
        43 | 59 => &[U16, Algorithm, U8, Hex],    // DS, CDS
        48 | 60 => &[U16, U8, Algorithm, Base64], // DNSKEY, CDNSKEY
        46 => &[Type, Algorithm, U8, U32, Time, Time, U16, Name, Base64], // RRSIG
        47 => &[Name, Types],                     // NSEC
        50 => &[U8, U8, U16, Salt, Base32, Types], // NSEC3
        51 => &[U8, U8, U16, Salt],               // NSEC3PARAM
        62 => &[U32, U16, Types],                 // CSYNC
        63 => &[U32, U8, U8, Hex],                // ZONEMD
        13 => &[Str, Str],                        // HINFO
        17 => &[Name, Name],                      // RP
        35 => &[U16, U16, Str, Str, Str, Name],   // NAPTR
        44 => &[U8, U8, Hex],                     // SSHFP
        52 | 53 => &[U8, U8, U8, Hex],            // TLSA, SMIMEA
        61 => &[Base64],                          // OPENPGPKEY
        39 => &[Name],                            // DNAME
        256 => &[U16, U16, Bytes],                // URI
        37 => &[CertType, U16, Algorithm, Base64], // CERT
        99 => &[Strs],                            // SPF
        _ => return None,
    })
}

/// The wire form of `rtype`'s rdata written as `f`'s tokens, if this
/// module describes the type.
pub(super) fn encode(f: &mut Fields<'_>, origin: &Name) -> Result<Option<Vec<u8>>, Fail> {
    if u16::from(f.rtype) == 29 {
        return loc(f).map(Some);
    }
    let Some(fields) = fields_of(f.rtype) else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for field in fields {
        encode_field(*field, f, origin, &mut out)?;
    }
    if out.len() > usize::from(u16::MAX) {
        return Err(Fail::new(
            f.line,
            format!(
                "{} record data is longer than 65535 bytes",
                type_name(f.rtype)
            ),
        ));
    }
    Ok(Some(out))
}

fn encode_field(
    field: Field,
    f: &mut Fields<'_>,
    origin: &Name,
    out: &mut Vec<u8>,
) -> Result<(), Fail> {
    match field {
        U8 => out.push(f.number("number (0-255)")?),
        U16 => out.extend_from_slice(&f.number::<u16>("number (0-65535)")?.to_be_bytes()),
        U32 => out.extend_from_slice(&f.number::<u32>("number")?.to_be_bytes()),
        Name => push_name(out, &f.name("domain name", origin)?),
        Str => {
            let s = character_string(f.next("string")?, "string")?;
            out.push(s.len() as u8);
            out.extend_from_slice(&s);
        }
        Strs => {
            let first = f.next("string")?;
            for tok in std::iter::once(first).chain(rest(f)) {
                let s = character_string(tok, "string")?;
                out.push(s.len() as u8);
                out.extend_from_slice(&s);
            }
        }
        Base64 => {
            let text = joined(f, "base64 data")?;
            let bytes = BASE64.decode(&text).map_err(|_| {
                Fail::new(f.line, format!("bad base64 data in {} record", name_of(f)))
            })?;
            out.extend_from_slice(&bytes);
        }
        Hex => {
            let text = joined(f, "hex data")?;
            let bytes = HEXLOWER_PERMISSIVE
                .decode(&text)
                .map_err(|_| Fail::new(f.line, format!("bad hex data in {} record", name_of(f))))?;
            out.extend_from_slice(&bytes);
        }
        Types => {
            let mut types = Vec::new();
            while let Some(tok) = f.next_opt() {
                types.push(u16::from(parse_type(tok)?));
            }
            out.extend_from_slice(&type_bitmap(types));
        }
        Type => {
            let tok = f.next("type")?;
            out.extend_from_slice(&u16::from(parse_type(tok)?).to_be_bytes());
        }
        Algorithm => {
            let tok = f.next("algorithm")?;
            let n = parse_decimal::<u8>(tok)
                .or_else(|| algorithm_number(&tok.keyword()))
                .ok_or_else(|| f.bad(tok, "algorithm"))?;
            out.push(n);
        }
        Time => {
            let tok = f.next("signature time")?;
            let t = parse_time(&tok.text).ok_or_else(|| f.bad(tok, "signature time"))?;
            out.extend_from_slice(&t.to_be_bytes());
        }
        Salt => {
            let tok = f.next("salt")?;
            let salt = if tok.is_bare(b"-") {
                Vec::new()
            } else {
                HEXLOWER_PERMISSIVE
                    .decode(&tok.text)
                    .map_err(|_| f.bad(tok, "salt (hex or -)"))?
            };
            if salt.len() > 255 {
                return Err(f.bad(tok, "salt (at most 255 bytes)"));
            }
            out.push(salt.len() as u8);
            out.extend_from_slice(&salt);
        }
        Base32 => {
            let tok = f.next("next hashed owner name")?;
            let upper = tok.text.to_ascii_uppercase();
            let hash = BASE32HEX_NOPAD
                .decode(&upper)
                .map_err(|_| f.bad(tok, "next hashed owner name (base32hex)"))?;
            if hash.is_empty() || hash.len() > 255 {
                return Err(f.bad(tok, "next hashed owner name"));
            }
            out.push(hash.len() as u8);
            out.extend_from_slice(&hash);
        }
        CertType => {
            let tok = f.next("certificate type")?;
            let n = parse_decimal::<u16>(tok)
                .or_else(|| cert_type_number(&tok.keyword()))
                .ok_or_else(|| f.bad(tok, "certificate type"))?;
            out.extend_from_slice(&n.to_be_bytes());
        }
        Bytes => {
            let tok = f.next("target")?;
            out.extend_from_slice(&unescape(tok)?);
        }
    }
    Ok(())
}

fn name_of(f: &Fields<'_>) -> String {
    type_name(f.rtype)
}

/// The tokens left in the record.
fn rest<'t>(f: &mut Fields<'t>) -> impl Iterator<Item = &'t Token> + 't {
    let toks = &f.tokens[f.pos..];
    f.pos = f.tokens.len();
    if let Some(last) = toks.last() {
        f.line = last.line;
    }
    toks.iter()
}

/// The remaining tokens joined (base64 and hex may be split by blanks).
fn joined(f: &mut Fields<'_>, what: &str) -> Result<Vec<u8>, Fail> {
    let mut text = f.next(what)?.text.clone();
    for tok in rest(f) {
        text.extend_from_slice(&tok.text);
    }
    Ok(text)
}

pub(super) fn push_name(out: &mut Vec<u8>, name: &hickory_proto::rr::Name) {
    for label in name.iter() {
        out.push(label.len() as u8);
        out.extend_from_slice(label);
    }
    out.push(0);
}

/// RFC 4034 §4.1.2: window blocks of the present types, in order.
pub(crate) fn type_bitmap(mut types: Vec<u16>) -> Vec<u8> {
    types.sort_unstable();
    types.dedup();
    let mut out = Vec::new();
    let mut i = 0;
    while i < types.len() {
        let window = (types[i] >> 8) as u8;
        let mut bits = [0u8; 32];
        let mut len = 0;
        while i < types.len() && (types[i] >> 8) as u8 == window {
            let low = (types[i] & 0xff) as usize;
            bits[low / 8] |= 0x80 >> (low % 8);
            len = low / 8 + 1;
            i += 1;
        }
        out.push(window);
        out.push(len as u8);
        out.extend_from_slice(&bits[..len]);
    }
    out
}

/// RFC 4034 §3.2: `YYYYMMDDHHmmSS` (UTC), or a number of seconds. Times
/// past 2106 wrap, as serial-number arithmetic on the wire expects.
pub(crate) fn parse_time(text: &[u8]) -> Option<u32> {
    if !text.iter().all(u8::is_ascii_digit) || text.is_empty() {
        return None;
    }
    let s = std::str::from_utf8(text).ok()?;
    if text.len() != 14 {
        return s.parse().ok();
    }
    let n = |a: usize, b: usize| s[a..b].parse::<i64>().ok();
    let (y, mo, d, h, mi, se) = (
        n(0, 4)?,
        n(4, 6)?,
        n(6, 8)?,
        n(8, 10)?,
        n(10, 12)?,
        n(12, 14)?,
    );
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + se;
    Some(secs.rem_euclid(1 << 32) as u32)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// RFC 8624 / IANA mnemonics.
fn algorithm_number(word: &str) -> Option<u8> {
    Some(match word {
        "RSAMD5" => 1,
        "DH" => 2,
        "DSA" => 3,
        "RSASHA1" => 5,
        "DSA-NSEC3-SHA1" => 6,
        "RSASHA1-NSEC3-SHA1" => 7,
        "RSASHA256" => 8,
        "RSASHA512" => 10,
        "ECC-GOST" => 12,
        "ECDSAP256SHA256" => 13,
        "ECDSAP384SHA384" => 14,
        "ED25519" => 15,
        "ED448" => 16,
        "INDIRECT" => 252,
        "PRIVATEDNS" => 253,
        "PRIVATEOID" => 254,
        _ => return None,
    })
}

/// RFC 4398 §2.1 mnemonics.
fn cert_type_number(word: &str) -> Option<u16> {
    Some(match word {
        "PKIX" => 1,
        "SPKI" => 2,
        "PGP" => 3,
        "IPKIX" => 4,
        "ISPKI" => 5,
        "IPGP" => 6,
        "ACPKIX" => 7,
        "IACPKIX" => 8,
        "URI" => 253,
        "OID" => 254,
        _ => return None,
    })
}

/// RFC 1876 §3: `d1 [m1 [s1]] {N|S} d2 [m2 [s2]] {E|W} alt[m] [siz[m]
/// [hp[m] [vp[m]]]]`.
fn loc(f: &mut Fields<'_>) -> Result<Vec<u8>, Fail> {
    let latitude = angle(f, b'N', b'S', 90)?;
    let longitude = angle(f, b'E', b'W', 180)?;
    let alt_tok = f.next("altitude")?;
    let alt = centimetres(&alt_tok.text, true).ok_or_else(|| f.bad(alt_tok, "altitude"))?;
    // Altitude is stored from 100,000 m below the WGS 84 reference.
    let altitude = u32::try_from(alt + 10_000_000).map_err(|_| f.bad(alt_tok, "altitude"))?;
    let mut precision = [0x12u8, 0x16, 0x13]; // 1 m, 10,000 m, 10 m
    for slot in &mut precision {
        let Some(tok) = f.next_opt() else { break };
        let cm = centimetres(&tok.text, false).ok_or_else(|| f.bad(tok, "size or precision"))?;
        *slot = loc_precision(cm as u64).ok_or_else(|| f.bad(tok, "size or precision"))?;
    }
    let mut out = vec![0, precision[0], precision[1], precision[2]];
    out.extend_from_slice(&latitude.to_be_bytes());
    out.extend_from_slice(&longitude.to_be_bytes());
    out.extend_from_slice(&altitude.to_be_bytes());
    Ok(out)
}

/// Degrees [minutes [seconds]] and a hemisphere letter, in thousandths of
/// an arcsecond from 2^31.
fn angle(f: &mut Fields<'_>, positive: u8, negative: u8, max: u32) -> Result<u32, Fail> {
    let mut parts = Vec::new();
    loop {
        let tok = f.next("coordinate")?;
        let word = tok.text.to_ascii_uppercase();
        if word == [positive] || word == [negative] {
            let [deg, min, sec] = [0, 1, 2].map(|i| parts.get(i).copied().unwrap_or(0.0));
            let arcsec = deg * 3600.0 + min * 60.0 + sec;
            if arcsec > f64::from(max) * 3600.0 || min >= 60.0 || sec >= 60.0 || parts.is_empty() {
                return Err(f.bad(tok, "coordinate"));
            }
            let thousandths = (arcsec * 1000.0).round() as i64;
            let signed = if word == [negative] {
                -thousandths
            } else {
                thousandths
            };
            return Ok((i64::from(1u32 << 31) + signed) as u32);
        }
        if parts.len() == 3 {
            return Err(f.bad(tok, "coordinate"));
        }
        let v = std::str::from_utf8(&tok.text)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| f.bad(tok, "coordinate"))?;
        parts.push(v);
    }
}

/// Metres with an optional `m` suffix, in centimetres.
fn centimetres(text: &[u8], signed: bool) -> Option<i64> {
    let s = std::str::from_utf8(text).ok()?;
    let s = s.strip_suffix(['m', 'M']).unwrap_or(s);
    let v: f64 = s.parse().ok()?;
    // RFC 1876 bounds: altitude -100,000.00 .. 42,849,672.95 m, sizes
    // up to 90,000,000 m.
    let ok = v.is_finite()
        && match signed {
            true => (-100_000.0..=42_849_672.95).contains(&v),
            false => (0.0..=90_000_000.0).contains(&v),
        };
    ok.then(|| (v * 100.0).round() as i64)
}

/// RFC 1876's size encoding: mantissa and power of ten, in centimetres.
fn loc_precision(cm: u64) -> Option<u8> {
    let mut exponent = 0u8;
    let mut value = cm;
    while value >= 10 && exponent < 9 {
        value /= 10;
        exponent += 1;
    }
    (value <= 9).then_some(((value as u8) << 4) | exponent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrsig_times_are_utc_seconds() {
        assert_eq!(parse_time(b"19700101000000"), Some(0));
        assert_eq!(parse_time(b"20260101000000"), Some(1_767_225_600));
        assert_eq!(parse_time(b"1767225600"), Some(1_767_225_600));
        assert_eq!(parse_time(b"20261301000000"), None);
        // Past 2106 the 32-bit field wraps.
        assert_eq!(parse_time(b"21060207062816"), Some(0));
    }

    #[test]
    fn type_bitmaps_follow_rfc_4034_example() {
        // RFC 4034 §4.3: A MX RRSIG NSEC TYPE1234.
        let bitmap = type_bitmap(vec![1, 15, 46, 47, 1234]);
        let mut expected = vec![0x00, 0x06, 0x40, 0x01, 0x00, 0x00, 0x00, 0x03, 0x04, 0x1b];
        expected.extend([0; 26]);
        expected.push(0x20);
        assert_eq!(bitmap, expected);
    }

    #[test]
    fn loc_sizes_are_mantissa_and_power_of_ten() {
        assert_eq!(loc_precision(100), Some(0x12));
        assert_eq!(loc_precision(1_000_000), Some(0x16));
        assert_eq!(loc_precision(0), Some(0x00));
    }
}
