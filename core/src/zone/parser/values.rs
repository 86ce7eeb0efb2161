//! Escapes, names, numbers, TTLs, classes and types: the values fields
//! are made of.

use std::str::FromStr;

use hickory_proto::rr::{Name, RecordType};

use super::fail::{show, Fail, MAX_TTL};
use super::lexer::Token;

/// Decodes the escape after a backslash at `text[i..]`: `\DDD` (a decimal
/// byte value) or `\X` (X itself). Returns the byte and how many source
/// bytes it used, or `None` if malformed.
pub(super) fn escape_at(text: &[u8], i: usize) -> Option<(u8, usize)> {
    let first = *text.get(i)?;
    if !first.is_ascii_digit() {
        return Some((first, 1));
    }
    let digits = text.get(i..i + 3)?;
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let value = digits
        .iter()
        .fold(0u32, |acc, d| acc * 10 + u32::from(d - b'0'));
    u8::try_from(value).ok().map(|b| (b, 3))
}

/// Calls `f` for each byte of the token with escapes decoded; `escaped`
/// tells whether the byte came from an escape (so a `\.` is not a dot).
pub(super) fn for_each_byte(
    tok: &Token,
    mut f: impl FnMut(u8, bool) -> Result<(), Fail>,
) -> Result<(), Fail> {
    let text = &tok.text;
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'\\' {
            let (byte, used) = escape_at(text, i + 1)
                .ok_or_else(|| Fail::new(tok.line, format!("bad escape in \"{}\"", tok.show())))?;
            f(byte, true)?;
            i += 1 + used;
        } else {
            f(text[i], false)?;
            i += 1;
        }
    }
    Ok(())
}

/// The bytes of a character-string (or file name) with escapes decoded.
pub(super) fn unescape(tok: &Token) -> Result<Vec<u8>, Fail> {
    let mut out = Vec::with_capacity(tok.text.len());
    for_each_byte(tok, |b, _| {
        out.push(b);
        Ok(())
    })?;
    Ok(out)
}

/// Parses a domain name. `@` is the origin; a name not ending in an
/// unescaped dot is relative to the origin. Labels are built from raw
/// bytes so escaped dots and `\DDD` bytes survive exactly.
pub(super) fn parse_name(tok: &Token, origin: &Name) -> Result<Name, Fail> {
    if tok.is_bare(b"@") {
        return Ok(origin.clone());
    }
    let (labels, absolute) = split_labels(tok)?;
    // Wire length: a length byte per label plus the root byte.
    let own: usize = labels.iter().map(|l| l.len() + 1).sum();
    let suffix: usize = if absolute {
        1
    } else {
        origin.iter().map(|l| l.len() + 1).sum::<usize>() + 1
    };
    if own + suffix > 255 {
        return Err(Fail::new(
            tok.line,
            format!("name \"{}\" is longer than 255 bytes", tok.show()),
        ));
    }
    let bad = |e: hickory_proto::ProtoError| {
        Fail::new(tok.line, format!("bad name \"{}\": {e}", tok.show()))
    };
    let name = Name::from_labels(labels.iter().map(Vec::as_slice)).map_err(bad)?;
    if absolute {
        Ok(name)
    } else {
        name.append_domain(origin).map_err(bad)
    }
}

/// Splits a name token into decoded labels; the flag is true when the
/// name ends in an unescaped dot (is absolute).
pub(super) fn split_labels(tok: &Token) -> Result<(Vec<Vec<u8>>, bool), Fail> {
    if tok.is_bare(b".") {
        return Ok((Vec::new(), true));
    }
    let empty_label = || Fail::new(tok.line, format!("empty label in name \"{}\"", tok.show()));
    let mut labels = Vec::new();
    let mut label = Vec::new();
    for_each_byte(tok, |b, escaped| {
        if b == b'.' && !escaped {
            if label.is_empty() {
                return Err(empty_label());
            }
            labels.push(std::mem::take(&mut label));
        } else {
            label.push(b);
        }
        Ok(())
    })?;
    let absolute = label.is_empty();
    if absolute && labels.is_empty() {
        return Err(Fail::new(tok.line, "empty name"));
    }
    if !absolute {
        labels.push(label);
    }
    if let Some(long) = labels.iter().find(|l| l.len() > 63) {
        return Err(Fail::new(
            tok.line,
            format!(
                "label \"{}\" is longer than 63 bytes in name \"{}\"",
                show(long),
                tok.show()
            ),
        ));
    }
    Ok((labels, absolute))
}

/// A plain decimal number (no sign, no units).
pub(super) fn parse_decimal<T: FromStr>(tok: &Token) -> Option<T> {
    if tok.text.is_empty() || !tok.text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(&tok.text).ok()?.parse().ok()
}

/// A time value: plain seconds, or BIND units (`1w2d3h4m5s`, any case,
/// every number followed by a unit).
pub(super) fn parse_duration(text: &[u8]) -> Option<u32> {
    if text.is_empty() {
        return None;
    }
    if text.iter().all(u8::is_ascii_digit) {
        return std::str::from_utf8(text).ok()?.parse().ok();
    }
    let mut total: u64 = 0;
    let mut number: Option<u64> = None;
    for &c in text {
        if c.is_ascii_digit() {
            let n = number.unwrap_or(0) * 10 + u64::from(c - b'0');
            if n > u64::from(u32::MAX) {
                return None;
            }
            number = Some(n);
            continue;
        }
        let unit = match c.to_ascii_lowercase() {
            b's' => 1,
            b'm' => 60,
            b'h' => 3600,
            b'd' => 86_400,
            b'w' => 604_800,
            _ => return None,
        };
        total += number.take()? * unit;
    }
    if number.is_some() {
        return None;
    }
    u32::try_from(total).ok()
}

/// A TTL for a record or `$TTL`: a duration no larger than 2^31-1.
pub(super) fn parse_ttl(tok: &Token) -> Result<u32, Fail> {
    let ttl = parse_duration(&tok.text)
        .ok_or_else(|| Fail::new(tok.line, format!("bad TTL \"{}\"", tok.show())))?;
    if ttl > MAX_TTL {
        return Err(Fail::new(
            tok.line,
            format!("TTL \"{}\" is larger than {MAX_TTL}", tok.show()),
        ));
    }
    Ok(ttl)
}

/// `IN`/`CLASS1` → `Some(true)`; another class name → `Some(false)`; not a
/// class at all → `None`.
pub(super) fn class_keyword(tok: &Token) -> Option<bool> {
    let word = tok.keyword();
    match word.as_str() {
        "IN" => Some(true),
        "CH" | "CHAOS" | "CS" | "HS" | "HESIOD" | "NONE" | "ANY" => Some(false),
        _ => {
            let number = word.strip_prefix("CLASS")?;
            if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some(number.parse::<u16>().ok() == Some(1))
        }
    }
}

/// A record type mnemonic or `TYPEnnn`. Meta types (queries, OPT, TSIG)
/// cannot be stored in a zone.
/// Mnemonics hickory's `RecordType` does not know, with their codes.
pub(super) const EXTRA_TYPES: &[(&str, u16)] = &[
    ("RP", 17),
    ("LOC", 29),
    ("SPF", 99),
    ("ZONEMD", 63),
    ("URI", 256),
];

pub(super) fn parse_type(tok: &Token) -> Result<RecordType, Fail> {
    let word = tok.keyword();
    let unknown = || Fail::new(tok.line, format!("unknown record type \"{}\"", tok.show()));
    let rtype = match word.strip_prefix("TYPE") {
        Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            RecordType::from(n.parse::<u16>().map_err(|_| unknown())?)
        }
        _ => match EXTRA_TYPES.iter().find(|(n, _)| *n == word) {
            Some((_, code)) => RecordType::from(*code),
            None => RecordType::from_str(&word).map_err(|_| unknown())?,
        },
    };
    let code = u16::from(rtype);
    if code == 0 || code == 41 || (128..=255).contains(&code) {
        return Err(Fail::new(
            tok.line,
            format!(
                "record type \"{}\" cannot appear in a zone file",
                tok.show()
            ),
        ));
    }
    Ok(rtype)
}

/// The name used for a type in messages (hickory shows unknown types as
/// just "Unknown").
pub(super) fn type_name(rtype: RecordType) -> String {
    match rtype {
        RecordType::Unknown(code) => match EXTRA_TYPES.iter().find(|(_, c)| *c == code) {
            Some((name, _)) => name.to_string(),
            None => format!("TYPE{code}"),
        },
        known => known.to_string(),
    }
}
