//! Record data: the RDATA of each type in text form, and any type in the
//! RFC 3597 generic form.

use std::net::{Ipv4Addr, Ipv6Addr};

use hickory_proto::rr::rdata::{A, AAAA, CAA, CNAME, MX, NS, NULL, PTR, SOA, SRV, TXT};
use hickory_proto::rr::{Name, RData, RecordType};
use hickory_proto::serialize::binary::{
    BinDecoder, BinEncodable, BinEncoder, NameEncoding, Restrict,
};

use super::fail::Fail;
use super::fields::{character_string, Fields};
use super::lexer::Token;
use super::typed;
use super::values::*;

pub(super) fn parse_rdata(
    rtype: RecordType,
    tokens: &[Token],
    origin: &Name,
    line: usize,
) -> Result<RData, Fail> {
    let mut f = Fields {
        tokens,
        pos: 0,
        rtype,
        line,
    };
    if tokens.first().is_some_and(|t| t.is_bare(b"\\#")) {
        f.pos = 1;
        return parse_generic(&mut f);
    }
    let rdata = match rtype {
        RecordType::A => RData::A(A(f.parsed::<Ipv4Addr>("IPv4 address")?)),
        RecordType::AAAA => RData::AAAA(AAAA(f.parsed::<Ipv6Addr>("IPv6 address")?)),
        RecordType::NS => RData::NS(NS(f.name("name server", origin)?)),
        RecordType::CNAME => RData::CNAME(CNAME(f.name("target name", origin)?)),
        RecordType::PTR => RData::PTR(PTR(f.name("target name", origin)?)),
        RecordType::MX => {
            let preference = f.number("preference")?;
            RData::MX(MX::new(preference, f.name("exchange name", origin)?))
        }
        RecordType::SRV => {
            let priority = f.number("priority")?;
            let weight = f.number("weight")?;
            let port = f.number("port")?;
            RData::SRV(SRV::new(
                priority,
                weight,
                port,
                f.name("target name", origin)?,
            ))
        }
        RecordType::SOA => RData::SOA(parse_soa(&mut f, origin)?),
        RecordType::TXT => RData::TXT(parse_txt(&mut f)?),
        RecordType::CAA => RData::CAA(parse_caa(&mut f)?),
        RecordType::SVCB | RecordType::HTTPS => parse_svcb(&mut f, origin)?,
        other => {
            if let Some(bytes) = typed::encode(&mut f, origin)? {
                f.end()?;
                return rdata_from_bytes(rtype, bytes, "{} record data")
                    .map_err(|message| Fail::new(f.line, message));
            }
            return Err(Fail::new(
                line,
                format!(
                    "record type {} is only supported in RFC 3597 form (\\# <length> <hex>)",
                    type_name(other)
                ),
            ));
        }
    };
    f.end()?;
    Ok(rdata)
}

pub(super) fn parse_soa(f: &mut Fields<'_>, origin: &Name) -> Result<SOA, Fail> {
    let mname = f.name("primary name server", origin)?;
    let rname = f.name("responsible mailbox", origin)?;
    let serial = f.number("serial")?;
    // hickory stores the timers as i32 but emits their 32 bits unchanged,
    // so the cast keeps the wire value for any u32.
    let refresh = f.duration("refresh")? as i32;
    let retry = f.duration("retry")? as i32;
    let expire = f.duration("expire")? as i32;
    let minimum = f.duration("minimum")?;
    Ok(SOA::new(
        mname, rname, serial, refresh, retry, expire, minimum,
    ))
}

/// One or more character-strings, quoted or bare, each at most 255 bytes.
pub(super) fn parse_txt(f: &mut Fields<'_>) -> Result<TXT, Fail> {
    let mut strings = vec![character_string(f.next("text")?, "TXT string")?];
    while let Some(tok) = f.next_opt() {
        strings.push(character_string(tok, "TXT string")?);
    }
    let wire_len: usize = strings.iter().map(|s| s.len() + 1).sum();
    if wire_len > usize::from(u16::MAX) {
        return Err(Fail::new(
            f.line,
            "TXT record data is longer than 65535 bytes",
        ));
    }
    Ok(TXT::from_bytes(strings.iter().map(Vec::as_slice).collect()))
}

/// `flags tag value`. hickory emits the tag's bytes and the raw value as
/// stored, so the record re-encodes exactly as written; but its decoder
/// (and RFC 8659) only allow tags of 1-15 ASCII letters and digits, so
/// other tags are refused rather than producing unreadable records.
pub(super) fn parse_caa(f: &mut Fields<'_>) -> Result<CAA, Fail> {
    let flags: u8 = f.number("flags")?;
    let tag_tok = f.next("tag")?;
    let tag = unescape(tag_tok)?;
    if tag.is_empty() || tag.len() > 15 || !tag.iter().all(u8::is_ascii_alphanumeric) {
        return Err(Fail::new(
            tag_tok.line,
            format!(
                "bad CAA tag \"{}\" (must be 1-15 ASCII letters or digits)",
                tag_tok.show()
            ),
        ));
    }
    let value = unescape(f.next("value")?)?;
    if 2 + tag.len() + value.len() > usize::from(u16::MAX) {
        return Err(Fail::new(
            f.line,
            "CAA record data is longer than 65535 bytes",
        ));
    }
    // `tag` is ASCII (checked above), so this cannot fail.
    let tag = String::from_utf8(tag).expect("ASCII tag");
    let mut caa = CAA::new_issue(false, None, Vec::new());
    caa.issuer_critical = flags & 0x80 != 0;
    caa.reserved_flags = flags & 0x7f;
    caa.tag = tag;
    caa.value = value;
    Ok(caa)
}

/// RFC 3597: `\# <length> <hex...>`, the hex possibly split into pieces.
pub(super) fn parse_generic(f: &mut Fields<'_>) -> Result<RData, Fail> {
    let len: u16 = f.number("RFC 3597 data length")?;
    let mut hex = Vec::new();
    while let Some(tok) = f.next_opt() {
        if tok.quoted || !tok.text.iter().all(u8::is_ascii_hexdigit) {
            return Err(f.bad(tok, "RFC 3597 hex data"));
        }
        hex.extend_from_slice(&tok.text);
    }
    if hex.len() % 2 != 0 {
        return Err(Fail::new(
            f.line,
            "odd number of hex digits in RFC 3597 data",
        ));
    }
    let bytes: Vec<u8> = hex
        .chunks(2)
        .map(|pair| hex_byte(pair[0], pair[1]))
        .collect();
    if bytes.len() != usize::from(len) {
        return Err(Fail::new(
            f.line,
            format!(
                "RFC 3597 data length {len} does not match the {} bytes given",
                bytes.len()
            ),
        ));
    }
    rdata_from_wire(f.rtype, bytes).map_err(|message| Fail::new(f.line, message))
}

pub(super) fn hex_byte(high: u8, low: u8) -> u8 {
    let digit = |c: u8| match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    };
    digit(high) << 4 | digit(low)
}

/// Builds rdata from its wire form: opaque bytes for types hickory does not
/// know, decoded rdata for the ones it does (so a known type looks the same
/// however it was written).
pub(super) fn rdata_from_wire(rtype: RecordType, bytes: Vec<u8>) -> Result<RData, String> {
    rdata_from_bytes(rtype, bytes, "RFC 3597 data for {} record")
}

/// As [`rdata_from_wire`], errors starting with `what` (`{}` is the type).
pub(super) fn rdata_from_bytes(
    rtype: RecordType,
    bytes: Vec<u8>,
    what: &str,
) -> Result<RData, String> {
    if let RecordType::Unknown(_) = rtype {
        // NULL::with insists on non-empty data.
        let rdata = if bytes.is_empty() {
            NULL::new()
        } else {
            NULL::with(bytes)
        };
        return Ok(RData::Unknown { code: rtype, rdata });
    }
    let name = what.replace("{}", &type_name(rtype));
    let mut decoder = BinDecoder::new(&bytes);
    // The length fits: it came from a u16 field.
    let rdata = RData::read(&mut decoder, rtype, Restrict::new(bytes.len() as u16))
        .map_err(|e| format!("{name} does not decode: {e}"))?;
    // Re-encode to catch data that decodes but would not be sent as given,
    // e.g. a compression pointer, meaningless outside a message.
    let mut again = Vec::with_capacity(bytes.len());
    let mut encoder = BinEncoder::new(&mut again);
    encoder.set_name_encoding(NameEncoding::Uncompressed);
    rdata
        .emit(&mut encoder)
        .map_err(|e| format!("{name} cannot be re-encoded: {e}"))?;
    // hickory writes an RRSIG's signer name in lower case, its canonical
    // form (RFC 4034 §6.2), which validates the same.
    let same = again == bytes || (rtype == RecordType::RRSIG && again.eq_ignore_ascii_case(&bytes));
    if !same {
        return Err(format!(
            "{name} does not re-encode to the same bytes \
             (compressed names are not allowed)"
        ));
    }
    Ok(rdata)
}

/// SVCB and HTTPS (RFC 9460): priority, target and `key=value` parameters,
/// read by hickory's parser once the target is made absolute (hickory
/// reads names without an origin) and `key="value"` is joined again.
pub(super) fn parse_svcb(f: &mut Fields<'_>, origin: &Name) -> Result<RData, Fail> {
    let priority: u16 = f.number("priority")?;
    let target = f.name("target name", origin)?;
    let mut text = format!("{priority} {}", target.to_ascii());
    let line = f.line;
    let mut after_equals = false;
    while let Some(tok) = f.next_opt() {
        let piece = String::from_utf8_lossy(&tok.text);
        if tok.quoted && after_equals {
            text.push_str(&piece);
        } else {
            text.push(' ');
            text.push_str(&piece);
        }
        after_equals = !tok.quoted && tok.text.ends_with(b"=");
    }
    RData::try_from_str(f.rtype, &text).map_err(|e| {
        Fail::new(
            line,
            format!("bad {} record data \"{text}\": {e}", type_name(f.rtype)),
        )
    })
}
