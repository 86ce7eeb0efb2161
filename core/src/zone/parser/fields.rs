//! A cursor over one record's rdata tokens, with messages that name the
//! record type and the offending token.

use std::str::FromStr;

use hickory_proto::rr::{Name, RecordType};

use super::fail::Fail;
use super::lexer::Token;
use super::values::*;

/// A cursor over the rdata tokens of one record, producing messages that
/// name the record type and the offending token.
pub(super) struct Fields<'t> {
    pub(super) tokens: &'t [Token],
    pub(super) pos: usize,
    pub(super) rtype: RecordType,
    /// Where to report a missing field: the last token seen.
    pub(super) line: usize,
}

impl<'t> Fields<'t> {
    pub(super) fn next(&mut self, what: &str) -> Result<&'t Token, Fail> {
        let tok = self.tokens.get(self.pos).ok_or_else(|| {
            Fail::new(
                self.line,
                format!("missing {what} in {} record", type_name(self.rtype)),
            )
        })?;
        self.pos += 1;
        self.line = tok.line;
        Ok(tok)
    }

    pub(super) fn next_opt(&mut self) -> Option<&'t Token> {
        let tok = self.tokens.get(self.pos)?;
        self.pos += 1;
        self.line = tok.line;
        Some(tok)
    }

    pub(super) fn bad(&self, tok: &Token, what: &str) -> Fail {
        Fail::new(
            tok.line,
            format!(
                "bad {what} \"{}\" in {} record",
                tok.show(),
                type_name(self.rtype)
            ),
        )
    }

    pub(super) fn name(&mut self, what: &str, origin: &Name) -> Result<Name, Fail> {
        parse_name(self.next(what)?, origin)
    }

    pub(super) fn number<T: FromStr>(&mut self, what: &str) -> Result<T, Fail> {
        let tok = self.next(what)?;
        parse_decimal(tok).ok_or_else(|| self.bad(tok, what))
    }

    /// A time field (SOA timers): seconds or BIND units.
    pub(super) fn duration(&mut self, what: &str) -> Result<u32, Fail> {
        let tok = self.next(what)?;
        parse_duration(&tok.text).ok_or_else(|| self.bad(tok, what))
    }

    pub(super) fn parsed<T: FromStr>(&mut self, what: &str) -> Result<T, Fail> {
        let tok = self.next(what)?;
        std::str::from_utf8(&tok.text)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| self.bad(tok, what))
    }

    pub(super) fn end(&mut self) -> Result<(), Fail> {
        match self.next_opt() {
            None => Ok(()),
            Some(extra) => Err(Fail::new(
                extra.line,
                format!(
                    "unexpected \"{}\" after {} record data",
                    extra.show(),
                    type_name(self.rtype)
                ),
            )),
        }
    }
}

pub(super) fn character_string(tok: &Token, what: &str) -> Result<Vec<u8>, Fail> {
    let bytes = unescape(tok)?;
    if bytes.len() > 255 {
        return Err(Fail::new(
            tok.line,
            format!(
                "{what} \"{}\" is longer than 255 bytes ({} bytes)",
                tok.show(),
                bytes.len()
            ),
        ));
    }
    Ok(bytes)
}
