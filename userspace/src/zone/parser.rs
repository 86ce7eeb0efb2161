//! RFC 1035 master-file (zone file) parser.
//!
//! Two layers:
//!
//! * a `Lexer` that turns text into *entries* (one logical line each:
//!   parentheses join physical lines, `;` comments are dropped, quoted
//!   strings become single tokens). Tokens keep their raw text with escapes
//!   still in place, because names and character-strings interpret the same
//!   escapes differently (an unescaped `.` splits labels only in names);
//! * a `Parser` that interprets entries as directives (`$ORIGIN`, `$TTL`,
//!   `$INCLUDE`) or resource records, and builds hickory [`Record`]s.
//!
//! Supported record types in text form: A, AAAA, NS, SOA, CNAME, MX, TXT,
//! SRV, PTR, CAA. Any type (by mnemonic or `TYPEnnn`) may be written in the
//! RFC 3597 generic form `\# <length> <hex>`. Only class IN is accepted.
//!
//! Every error is reported as `file:line: message`, with the line of the
//! offending token; records carry the line where they start.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use hickory_proto::rr::rdata::{A, AAAA, CAA, CNAME, MX, NS, NULL, PTR, SOA, SRV, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::{
    BinDecoder, BinEncodable, BinEncoder, NameEncoding, Restrict,
};

/// A record with the place in the source it came from, so zone checks can
/// name the file and line.
#[derive(Clone, Debug)]
pub struct SourceRecord {
    pub record: Record,
    pub file: Arc<Path>,
    pub line: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum ZoneFileError {
    #[error("{}:{line}: {message}", file.display())]
    Syntax {
        file: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{}: cannot read: {source}", file.display())]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub fn parse_zone_file(path: &Path, origin: &Name) -> Result<Vec<SourceRecord>, ZoneFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| ZoneFileError::Io {
        file: path.to_path_buf(),
        source,
    })?;
    parse_zone_str(&text, origin, path)
}

/// Parses zone-file text. `file` is used in error messages, in
/// [`SourceRecord::file`], and as the base for relative `$INCLUDE` paths.
pub fn parse_zone_str(
    text: &str,
    origin: &Name,
    file: &Path,
) -> Result<Vec<SourceRecord>, ZoneFileError> {
    let mut origin = origin.clone();
    origin.set_fqdn(true);
    let mut scope = Scope {
        origin,
        owner: None,
    };
    let mut parser = Parser::default();
    parser.parse_text(text, &Arc::from(file), &mut scope, 0)?;
    Ok(parser.records)
}

/// How many `$INCLUDE`s may be nested; this also stops include cycles.
const MAX_INCLUDE_DEPTH: usize = 16;

/// RFC 2181 §8: a TTL is an unsigned 31-bit number.
const MAX_TTL: u32 = i32::MAX as u32;

// ---------------------------------------------------------------------------
// Errors inside one file
// ---------------------------------------------------------------------------

/// An error located in the file currently being parsed; the file name is
/// attached when it leaves that file (see [`Fail::in_file`]).
#[derive(Debug)]
struct Fail {
    line: usize,
    message: String,
}

impl Fail {
    fn new(line: usize, message: impl Into<String>) -> Self {
        Fail {
            line,
            message: message.into(),
        }
    }

    fn in_file(self, file: &Path) -> ZoneFileError {
        ZoneFileError::Syntax {
            file: file.to_path_buf(),
            line: self.line,
            message: self.message,
        }
    }
}

/// Shows source bytes in a message, shortened so one huge token cannot
/// swamp the error line.
fn show(bytes: &[u8]) -> String {
    const LIMIT: usize = 80;
    let text = String::from_utf8_lossy(bytes);
    if text.chars().count() <= LIMIT {
        text.into_owned()
    } else {
        let short: String = text.chars().take(LIMIT).collect();
        format!("{short}...")
    }
}

// ---------------------------------------------------------------------------
// Lexer
// ---------------------------------------------------------------------------

/// One token with its raw source text (escapes not yet interpreted; quotes
/// of a quoted string removed).
#[derive(Debug)]
struct Token {
    text: Vec<u8>,
    quoted: bool,
    line: usize,
}

impl Token {
    fn show(&self) -> String {
        show(&self.text)
    }

    /// True for an unquoted token with exactly this text.
    fn is_bare(&self, text: &[u8]) -> bool {
        !self.quoted && self.text == text
    }

    /// The token as upper-case text, for keyword matching.
    fn keyword(&self) -> String {
        String::from_utf8_lossy(&self.text).to_ascii_uppercase()
    }
}

/// One logical line: a directive or a record.
#[derive(Debug)]
struct Entry {
    /// The line of the first token; the record's reported line.
    line: usize,
    /// The line began with blank space, so the owner is the previous one.
    inherit_owner: bool,
    tokens: Vec<Token>,
}

struct Lexer<'a> {
    src: &'a [u8],
    pos: usize,
    line: usize,
    /// Open parentheses; newlines inside them do not end the entry.
    depth: usize,
    /// Where the outermost open parenthesis is, to report it if unclosed.
    open_line: usize,
}

impl<'a> Lexer<'a> {
    fn new(text: &'a str) -> Self {
        Lexer {
            src: text.as_bytes(),
            pos: 0,
            line: 1,
            depth: 0,
            open_line: 0,
        }
    }

    /// The next non-empty entry, or `None` at the end of the text.
    fn next_entry(&mut self) -> Result<Option<Entry>, Fail> {
        loop {
            if self.pos >= self.src.len() {
                return Ok(None);
            }
            let entry = self.entry()?;
            if !entry.tokens.is_empty() {
                return Ok(Some(entry));
            }
        }
    }

    /// Reads from the start of a physical line to the newline that ends
    /// the logical line (one outside parentheses) or to the end of text.
    fn entry(&mut self) -> Result<Entry, Fail> {
        let inherit_owner = matches!(self.peek(), Some(b' ' | b'\t'));
        let mut tokens = Vec::new();
        while let Some(c) = self.peek() {
            match c {
                b'\n' => {
                    self.pos += 1;
                    self.line += 1;
                    if self.depth == 0 {
                        break;
                    }
                }
                b' ' | b'\t' | b'\r' => self.pos += 1,
                b';' => self.skip_comment(),
                b'(' => self.open_paren(),
                b')' => self.close_paren()?,
                b'"' => tokens.push(self.quoted()?),
                _ => tokens.push(self.word()?),
            }
        }
        if self.peek().is_none() && self.depth > 0 {
            return Err(Fail::new(
                self.open_line,
                "unbalanced parenthesis: \"(\" is never closed",
            ));
        }
        let line = tokens.first().map_or(self.line, |t: &Token| t.line);
        Ok(Entry {
            line,
            inherit_owner,
            tokens,
        })
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    /// Skips to (not past) the newline, which still ends the entry.
    fn skip_comment(&mut self) {
        while !matches!(self.peek(), None | Some(b'\n')) {
            self.pos += 1;
        }
    }

    fn open_paren(&mut self) {
        if self.depth == 0 {
            self.open_line = self.line;
        }
        self.depth += 1;
        self.pos += 1;
    }

    fn close_paren(&mut self) -> Result<(), Fail> {
        if self.depth == 0 {
            return Err(Fail::new(
                self.line,
                "unbalanced parenthesis: \")\" without \"(\"",
            ));
        }
        self.depth -= 1;
        self.pos += 1;
        Ok(())
    }

    /// A quoted string. A newline before the closing quote is an error: a
    /// stray quote would otherwise swallow the rest of the file.
    fn quoted(&mut self) -> Result<Token, Fail> {
        let line = self.line;
        self.pos += 1;
        let start = self.pos;
        loop {
            match self.peek() {
                None | Some(b'\n') => return Err(Fail::new(line, "unterminated quoted string")),
                Some(b'"') => break,
                Some(b'\\') => {
                    // The escaped character is kept (with its backslash)
                    // for later decoding; it cannot end the string.
                    if matches!(self.src.get(self.pos + 1), None | Some(b'\n')) {
                        return Err(Fail::new(line, "unterminated quoted string"));
                    }
                    self.pos += 2;
                }
                Some(_) => self.pos += 1,
            }
        }
        let text = self.src[start..self.pos].to_vec();
        self.pos += 1;
        Ok(Token {
            text,
            quoted: true,
            line,
        })
    }

    /// A bare word: up to blank space, a newline, or a special character,
    /// any of which can be included by escaping it with a backslash.
    fn word(&mut self) -> Result<Token, Fail> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            match c {
                b' ' | b'\t' | b'\r' | b'\n' | b';' | b'(' | b')' | b'"' => break,
                b'\\' => {
                    if matches!(self.src.get(self.pos + 1), None | Some(b'\n')) {
                        return Err(Fail::new(
                            self.line,
                            format!(
                                "backslash at end of line in \"{}\"",
                                show(&self.src[start..=self.pos])
                            ),
                        ));
                    }
                    self.pos += 2;
                }
                _ => self.pos += 1,
            }
        }
        Ok(Token {
            text: self.src[start..self.pos].to_vec(),
            quoted: false,
            line: self.line,
        })
    }
}

// ---------------------------------------------------------------------------
// Escapes, names, numbers
// ---------------------------------------------------------------------------

/// Decodes the escape after a backslash at `text[i..]`: `\DDD` (a decimal
/// byte value) or `\X` (X itself). Returns the byte and how many source
/// bytes it used, or `None` if malformed.
fn escape_at(text: &[u8], i: usize) -> Option<(u8, usize)> {
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
fn for_each_byte(tok: &Token, mut f: impl FnMut(u8, bool) -> Result<(), Fail>) -> Result<(), Fail> {
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
fn unescape(tok: &Token) -> Result<Vec<u8>, Fail> {
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
fn parse_name(tok: &Token, origin: &Name) -> Result<Name, Fail> {
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
fn split_labels(tok: &Token) -> Result<(Vec<Vec<u8>>, bool), Fail> {
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
fn parse_decimal<T: FromStr>(tok: &Token) -> Option<T> {
    if tok.text.is_empty() || !tok.text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(&tok.text).ok()?.parse().ok()
}

/// A time value: plain seconds, or BIND units (`1w2d3h4m5s`, any case,
/// every number followed by a unit).
fn parse_duration(text: &[u8]) -> Option<u32> {
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
fn parse_ttl(tok: &Token) -> Result<u32, Fail> {
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
fn class_keyword(tok: &Token) -> Option<bool> {
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
fn parse_type(tok: &Token) -> Result<RecordType, Fail> {
    let word = tok.keyword();
    let unknown = || Fail::new(tok.line, format!("unknown record type \"{}\"", tok.show()));
    let rtype = match word.strip_prefix("TYPE") {
        Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            RecordType::from(n.parse::<u16>().map_err(|_| unknown())?)
        }
        _ => RecordType::from_str(&word).map_err(|_| unknown())?,
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
fn type_name(rtype: RecordType) -> String {
    match rtype {
        RecordType::Unknown(code) => format!("TYPE{code}"),
        known => known.to_string(),
    }
}

// ---------------------------------------------------------------------------
// Parser
// ---------------------------------------------------------------------------

/// State that `$INCLUDE` saves and restores (RFC 1035 §5.1: the origin and
/// current owner revert after the included file).
struct Scope {
    origin: Name,
    owner: Option<Name>,
}

/// Where a record's TTL comes from when it gives none. Shared across
/// included files, as BIND does.
#[derive(Default)]
struct TtlDefaults {
    directive: Option<u32>,
    last_explicit: Option<u32>,
    soa_minimum: Option<u32>,
}

impl TtlDefaults {
    /// `$TTL`, else the last explicit TTL, else the SOA MINIMUM once an
    /// SOA has been seen (the SOA itself included, as in BIND).
    fn resolve(&mut self, explicit: Option<u32>, rdata: &RData) -> Option<u32> {
        if let RData::SOA(soa) = rdata {
            self.soa_minimum = Some(soa.minimum);
        }
        if let Some(ttl) = explicit {
            self.last_explicit = Some(ttl);
            return Some(ttl);
        }
        self.directive.or(self.last_explicit).or(self.soa_minimum)
    }
}

#[derive(Default)]
struct Parser {
    records: Vec<SourceRecord>,
    ttl: TtlDefaults,
}

impl Parser {
    fn parse_text(
        &mut self,
        text: &str,
        file: &Arc<Path>,
        scope: &mut Scope,
        depth: usize,
    ) -> Result<(), ZoneFileError> {
        let mut lexer = Lexer::new(text);
        while let Some(entry) = lexer.next_entry().map_err(|f| f.in_file(file))? {
            self.parse_entry(&entry, file, scope, depth)?;
        }
        Ok(())
    }

    fn parse_entry(
        &mut self,
        entry: &Entry,
        file: &Arc<Path>,
        scope: &mut Scope,
        depth: usize,
    ) -> Result<(), ZoneFileError> {
        let first = &entry.tokens[0];
        if first.quoted || !first.text.starts_with(b"$") {
            let record = self
                .parse_record(entry, scope)
                .map_err(|f| f.in_file(file))?;
            self.records.push(SourceRecord {
                record,
                file: file.clone(),
                line: entry.line,
            });
            return Ok(());
        }
        let args = &entry.tokens[1..];
        let result = match first.keyword().as_str() {
            "$ORIGIN" => one_arg(first, args).and_then(|t| {
                scope.origin = parse_name(t, &scope.origin)?;
                Ok(())
            }),
            "$TTL" => one_arg(first, args).and_then(|t| {
                self.ttl.directive = Some(parse_ttl(t)?);
                Ok(())
            }),
            "$INCLUDE" => return self.include(first, args, file, scope, depth),
            _ => Err(Fail::new(
                first.line,
                format!("unknown directive \"{}\"", first.show()),
            )),
        };
        result.map_err(|f| f.in_file(file))
    }

    /// `$INCLUDE file [origin]`: the path is relative to the including
    /// file's directory; the included file gets a copy of the scope so its
    /// `$ORIGIN` changes do not leak back.
    fn include(
        &mut self,
        directive: &Token,
        args: &[Token],
        file: &Arc<Path>,
        scope: &Scope,
        depth: usize,
    ) -> Result<(), ZoneFileError> {
        let fail = |message: String| Fail::new(directive.line, message).in_file(file);
        let (path, origin) =
            include_args(directive, args, file, &scope.origin).map_err(|f| f.in_file(file))?;
        if depth >= MAX_INCLUDE_DEPTH {
            return Err(fail(format!(
                "$INCLUDE \"{}\" nested more than {MAX_INCLUDE_DEPTH} deep",
                path.display()
            )));
        }
        let text = std::fs::read_to_string(&path).map_err(|e| {
            fail(format!(
                "cannot read included file \"{}\": {e}",
                path.display()
            ))
        })?;
        let mut inner = Scope {
            origin: origin.unwrap_or_else(|| scope.origin.clone()),
            owner: scope.owner.clone(),
        };
        self.parse_text(&text, &Arc::from(path), &mut inner, depth + 1)
    }

    /// `[owner] [ttl] [class] type rdata...` (TTL and class in either order).
    fn parse_record(&mut self, entry: &Entry, scope: &mut Scope) -> Result<Record, Fail> {
        let (owner, rest) = if entry.inherit_owner {
            let owner = scope.owner.clone().ok_or_else(|| {
                Fail::new(
                    entry.line,
                    "line starts with blank space but there is no previous owner name",
                )
            })?;
            (owner, &entry.tokens[..])
        } else {
            let owner = parse_name(&entry.tokens[0], &scope.origin)?;
            (owner, &entry.tokens[1..])
        };
        let header = parse_header(rest, entry.line)?;
        let rdata = parse_rdata(header.rtype, header.rdata, &scope.origin, header.type_line)?;
        let ttl = self.ttl.resolve(header.ttl, &rdata).ok_or_else(|| {
            Fail::new(
                entry.line,
                "no TTL specified (give one, or set $TTL before this record)",
            )
        })?;
        scope.owner = Some(owner.clone());
        Ok(Record::from_rdata(owner, ttl, rdata))
    }
}

/// The single argument of `$ORIGIN` / `$TTL`.
fn one_arg<'t>(directive: &Token, args: &'t [Token]) -> Result<&'t Token, Fail> {
    match args {
        [arg] => Ok(arg),
        [] => Err(Fail::new(
            directive.line,
            format!("missing argument after {}", directive.show()),
        )),
        [_, extra, ..] => Err(Fail::new(
            extra.line,
            format!("unexpected \"{}\" after {}", extra.show(), directive.show()),
        )),
    }
}

fn include_args(
    directive: &Token,
    args: &[Token],
    file: &Path,
    origin: &Name,
) -> Result<(PathBuf, Option<Name>), Fail> {
    let (name_tok, origin_tok) = match args {
        [name] => (name, None),
        [name, origin] => (name, Some(origin)),
        [] => {
            return Err(Fail::new(
                directive.line,
                "missing file name after $INCLUDE",
            ))
        }
        [_, _, extra, ..] => {
            return Err(Fail::new(
                extra.line,
                format!("unexpected \"{}\" after $INCLUDE origin", extra.show()),
            ))
        }
    };
    let name = String::from_utf8(unescape(name_tok)?).map_err(|_| {
        Fail::new(
            name_tok.line,
            format!("$INCLUDE file name \"{}\" is not UTF-8", name_tok.show()),
        )
    })?;
    let base = file.parent().unwrap_or(Path::new(""));
    let path = base.join(name);
    let origin = origin_tok.map(|t| parse_name(t, origin)).transpose()?;
    Ok((path, origin))
}

/// The part of a record between the owner and the rdata.
struct Header<'t> {
    ttl: Option<u32>,
    rtype: RecordType,
    type_line: usize,
    rdata: &'t [Token],
}

fn parse_header(tokens: &[Token], line: usize) -> Result<Header<'_>, Fail> {
    let mut ttl = None;
    let mut class_seen = false;
    for (i, tok) in tokens.iter().enumerate() {
        if tok.text.first().is_some_and(u8::is_ascii_digit) {
            if ttl.is_some() {
                return Err(Fail::new(
                    tok.line,
                    format!("unexpected \"{}\": the TTL was already given", tok.show()),
                ));
            }
            ttl = Some(parse_ttl(tok)?);
        } else if let Some(is_in) = class_keyword(tok) {
            if !is_in {
                return Err(Fail::new(
                    tok.line,
                    format!(
                        "unsupported class \"{}\" (only IN is supported)",
                        tok.show()
                    ),
                ));
            }
            if class_seen {
                return Err(Fail::new(tok.line, "the class is given twice"));
            }
            class_seen = true;
        } else {
            return Ok(Header {
                ttl,
                rtype: parse_type(tok)?,
                type_line: tok.line,
                rdata: &tokens[i + 1..],
            });
        }
    }
    let line = tokens.last().map_or(line, |t| t.line);
    Err(Fail::new(line, "missing record type"))
}

// ---------------------------------------------------------------------------
// Record data
// ---------------------------------------------------------------------------

/// A cursor over the rdata tokens of one record, producing messages that
/// name the record type and the offending token.
struct Fields<'t> {
    tokens: &'t [Token],
    pos: usize,
    rtype: RecordType,
    /// Where to report a missing field: the last token seen.
    line: usize,
}

impl<'t> Fields<'t> {
    fn next(&mut self, what: &str) -> Result<&'t Token, Fail> {
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

    fn next_opt(&mut self) -> Option<&'t Token> {
        let tok = self.tokens.get(self.pos)?;
        self.pos += 1;
        self.line = tok.line;
        Some(tok)
    }

    fn bad(&self, tok: &Token, what: &str) -> Fail {
        Fail::new(
            tok.line,
            format!(
                "bad {what} \"{}\" in {} record",
                tok.show(),
                type_name(self.rtype)
            ),
        )
    }

    fn name(&mut self, what: &str, origin: &Name) -> Result<Name, Fail> {
        parse_name(self.next(what)?, origin)
    }

    fn number<T: FromStr>(&mut self, what: &str) -> Result<T, Fail> {
        let tok = self.next(what)?;
        parse_decimal(tok).ok_or_else(|| self.bad(tok, what))
    }

    /// A time field (SOA timers): seconds or BIND units.
    fn duration(&mut self, what: &str) -> Result<u32, Fail> {
        let tok = self.next(what)?;
        parse_duration(&tok.text).ok_or_else(|| self.bad(tok, what))
    }

    fn parsed<T: FromStr>(&mut self, what: &str) -> Result<T, Fail> {
        let tok = self.next(what)?;
        std::str::from_utf8(&tok.text)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| self.bad(tok, what))
    }

    fn end(&mut self) -> Result<(), Fail> {
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

fn parse_rdata(
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
        other => {
            return Err(Fail::new(
                line,
                format!(
                    "record type {} is only supported in RFC 3597 form (\\# <length> <hex>)",
                    type_name(other)
                ),
            ))
        }
    };
    f.end()?;
    Ok(rdata)
}

fn parse_soa(f: &mut Fields<'_>, origin: &Name) -> Result<SOA, Fail> {
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
fn parse_txt(f: &mut Fields<'_>) -> Result<TXT, Fail> {
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

fn character_string(tok: &Token, what: &str) -> Result<Vec<u8>, Fail> {
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

/// `flags tag value`. hickory emits the tag's bytes and the raw value as
/// stored, so the record re-encodes exactly as written; but its decoder
/// (and RFC 8659) only allow tags of 1-15 ASCII letters and digits, so
/// other tags are refused rather than producing unreadable records.
fn parse_caa(f: &mut Fields<'_>) -> Result<CAA, Fail> {
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
fn parse_generic(f: &mut Fields<'_>) -> Result<RData, Fail> {
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

fn hex_byte(high: u8, low: u8) -> u8 {
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
fn rdata_from_wire(rtype: RecordType, bytes: Vec<u8>) -> Result<RData, String> {
    if let RecordType::Unknown(_) = rtype {
        // NULL::with insists on non-empty data.
        let rdata = if bytes.is_empty() {
            NULL::new()
        } else {
            NULL::with(bytes)
        };
        return Ok(RData::Unknown { code: rtype, rdata });
    }
    let name = type_name(rtype);
    let mut decoder = BinDecoder::new(&bytes);
    // The length fits: it came from a u16 field.
    let rdata = RData::read(&mut decoder, rtype, Restrict::new(bytes.len() as u16))
        .map_err(|e| format!("RFC 3597 data for {name} record does not decode: {e}"))?;
    // Re-encode to catch data that decodes but would not be sent as given,
    // e.g. a compression pointer, meaningless outside a message.
    let mut again = Vec::with_capacity(bytes.len());
    let mut encoder = BinEncoder::new(&mut again);
    encoder.set_name_encoding(NameEncoding::Uncompressed);
    rdata
        .emit(&mut encoder)
        .map_err(|e| format!("RFC 3597 data for {name} record cannot be re-encoded: {e}"))?;
    if again != bytes {
        return Err(format!(
            "RFC 3597 data for {name} record does not re-encode to the same bytes \
             (compressed names are not allowed)"
        ));
    }
    Ok(rdata)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "zones/x.zone";

    fn origin() -> Name {
        Name::from_ascii("example.com.").unwrap()
    }

    fn name(text: &str) -> Name {
        Name::from_ascii(text).unwrap()
    }

    fn parse(text: &str) -> Vec<SourceRecord> {
        parse_zone_str(text, &origin(), Path::new(FILE)).unwrap_or_else(|e| panic!("{e}"))
    }

    fn error(text: &str) -> String {
        match parse_zone_str(text, &origin(), Path::new(FILE)) {
            Ok(records) => panic!("expected an error, got {records:?}"),
            Err(e) => e.to_string(),
        }
    }

    fn only(text: &str) -> Record {
        let mut records = parse(text);
        assert_eq!(records.len(), 1, "{records:?}");
        records.remove(0).record
    }

    fn wire(rdata: &RData) -> Vec<u8> {
        let mut buf = Vec::new();
        let mut encoder = BinEncoder::new(&mut buf);
        encoder.set_name_encoding(NameEncoding::Uncompressed);
        rdata.emit(&mut encoder).unwrap();
        buf
    }

    fn labels(name: &Name) -> Vec<Vec<u8>> {
        name.iter().map(<[u8]>::to_vec).collect()
    }

    // --- basic records and names -----------------------------------------

    #[test]
    fn basic_types() {
        let records = parse(
            "$TTL 300\n\
             @        IN A     192.0.2.1\n\
             www         AAAA  2001:db8::1\n\
             @           NS    ns1\n\
             @           NS    ns2.example.net.\n\
             alias       CNAME www\n\
             1.2         PTR   host.example.org.\n\
             @           MX    10 mail\n\
             _sip._tcp   SRV   1 2 5060 sip\n",
        );
        let got: Vec<(Name, RData, usize)> = records
            .iter()
            .map(|r| (r.record.name.clone(), r.record.data.clone(), r.line))
            .collect();
        let expected = vec![
            (name("example.com."), RData::A(A::new(192, 0, 2, 1)), 2),
            (
                name("www.example.com."),
                RData::AAAA(AAAA("2001:db8::1".parse().unwrap())),
                3,
            ),
            (
                name("example.com."),
                RData::NS(NS(name("ns1.example.com."))),
                4,
            ),
            (
                name("example.com."),
                RData::NS(NS(name("ns2.example.net."))),
                5,
            ),
            (
                name("alias.example.com."),
                RData::CNAME(CNAME(name("www.example.com."))),
                6,
            ),
            (
                name("1.2.example.com."),
                RData::PTR(PTR(name("host.example.org."))),
                7,
            ),
            (
                name("example.com."),
                RData::MX(MX::new(10, name("mail.example.com."))),
                8,
            ),
            (
                name("_sip._tcp.example.com."),
                RData::SRV(SRV::new(1, 2, 5060, name("sip.example.com."))),
                9,
            ),
        ];
        assert_eq!(got, expected);
        for r in &records {
            assert_eq!(r.record.ttl, 300);
            assert_eq!(r.record.dns_class, hickory_proto::rr::DNSClass::IN);
            assert!(r.record.name.is_fqdn());
            assert_eq!(&*r.file, Path::new(FILE));
        }
    }

    #[test]
    fn names_keep_case_and_absolute_names_are_not_extended() {
        let rec = only("$TTL 1\nWWW.Example.ORG. CNAME Target\n");
        assert!(rec.name.eq_case(&name("WWW.Example.ORG.")));
        let RData::CNAME(target) = &rec.data else {
            panic!("{rec:?}")
        };
        assert!(target.0.eq_case(&name("Target.example.com.")));
    }

    #[test]
    fn root_and_wildcard_names() {
        let records = parse("$TTL 1\n. NS a.root.\n*.dyn A 192.0.2.9\n");
        assert!(records[0].record.name.is_root());
        assert_eq!(records[1].record.name, name("*.dyn.example.com."));
        assert!(records[1].record.name.is_wildcard());
    }

    #[test]
    fn type_class_and_keywords_are_case_insensitive() {
        let rec = only("www 60 in a 192.0.2.1\n");
        assert_eq!(rec.data, RData::A(A::new(192, 0, 2, 1)));
        let rec = only("www 60 class1 type1 192.0.2.1\n");
        assert_eq!(rec.data, RData::A(A::new(192, 0, 2, 1)));
        let rec = only("$ttl 5\n$origin example.net.\nwww a 192.0.2.1\n");
        assert_eq!((rec.ttl, rec.name), (5, name("www.example.net.")));
    }

    #[test]
    fn ttl_and_class_in_either_order() {
        let records = parse(
            "a 100 IN A 192.0.2.1\n\
             b IN 200 A 192.0.2.2\n\
             c 300 A 192.0.2.3\n\
             d IN A 192.0.2.4\n",
        );
        let ttls: Vec<u32> = records.iter().map(|r| r.record.ttl).collect();
        assert_eq!(ttls, [100, 200, 300, 300]);
    }

    #[test]
    fn owner_inheritance() {
        let records = parse(
            "$TTL 60\n\
             www A 192.0.2.1\n\
             \tA 192.0.2.2\n\
             ; a comment line does not change the owner\n\
             \n   TXT \"hi\"\n\
             other A 192.0.2.3\n\
             \x20 60 IN A 192.0.2.4\n",
        );
        let owners: Vec<String> = records.iter().map(|r| r.record.name.to_ascii()).collect();
        assert_eq!(
            owners,
            [
                "www.example.com.",
                "www.example.com.",
                "www.example.com.",
                "other.example.com.",
                "other.example.com."
            ]
        );
        let lines: Vec<usize> = records.iter().map(|r| r.line).collect();
        assert_eq!(lines, [2, 3, 6, 7, 8]);
    }

    #[test]
    fn blank_owner_without_previous_owner_is_an_error() {
        assert_eq!(
            error("$TTL 60\n  A 192.0.2.1\n"),
            "zones/x.zone:2: line starts with blank space but there is no previous owner name"
        );
    }

    #[test]
    fn origin_directive_absolute_and_relative() {
        let records = parse(
            "$TTL 1\n\
             a A 192.0.2.1\n\
             $ORIGIN sub\n\
             b A 192.0.2.2\n\
             @ A 192.0.2.3\n\
             $ORIGIN example.org.\n\
             c MX 1 @\n",
        );
        assert_eq!(records[0].record.name, name("a.example.com."));
        assert_eq!(records[1].record.name, name("b.sub.example.com."));
        assert_eq!(records[2].record.name, name("sub.example.com."));
        assert_eq!(records[3].record.name, name("c.example.org."));
        assert_eq!(
            records[3].record.data,
            RData::MX(MX::new(1, name("example.org.")))
        );
    }

    #[test]
    fn origin_without_trailing_dot_is_treated_as_absolute() {
        let recs = parse_zone_str(
            "$TTL 1\nwww A 192.0.2.1\n",
            &name("example.com"),
            Path::new(FILE),
        )
        .unwrap();
        assert_eq!(recs[0].record.name, name("www.example.com."));
        assert!(recs[0].record.name.is_fqdn());
    }

    #[test]
    fn records_keep_source_order() {
        let records = parse("$TTL 1\nz A 192.0.2.1\na A 192.0.2.2\nm A 192.0.2.3\n");
        let names: Vec<String> = records.iter().map(|r| r.record.name.to_ascii()).collect();
        assert_eq!(
            names,
            ["z.example.com.", "a.example.com.", "m.example.com."]
        );
    }

    #[test]
    fn crlf_line_endings_and_missing_final_newline() {
        let records = parse("$TTL 1\r\na A 192.0.2.1\r\n\tA 192.0.2.2");
        assert_eq!(records.len(), 2);
        assert_eq!(records[1].record.name, name("a.example.com."));
        assert_eq!(records[1].line, 3);
    }

    // --- TTLs ---------------------------------------------------------------

    #[test]
    fn ttl_units() {
        assert_eq!(parse_duration(b"3600"), Some(3600));
        assert_eq!(parse_duration(b"1h30m"), Some(5400));
        assert_eq!(parse_duration(b"1d"), Some(86_400));
        assert_eq!(parse_duration(b"1w"), Some(604_800));
        assert_eq!(
            parse_duration(b"2W3D4H5M6S"),
            Some(2 * 604_800 + 3 * 86_400 + 4 * 3600 + 306)
        );
        assert_eq!(parse_duration(b"0"), Some(0));
        assert_eq!(parse_duration(b"1h30"), None);
        assert_eq!(parse_duration(b"h"), None);
        assert_eq!(parse_duration(b"1x"), None);
        assert_eq!(parse_duration(b"4294967296"), None);
        assert_eq!(parse_duration(b"10000w"), None);

        let records = parse("$TTL 1h30m\na A 192.0.2.1\nb 1d A 192.0.2.2\nc 1W IN A 192.0.2.3\n");
        let ttls: Vec<u32> = records.iter().map(|r| r.record.ttl).collect();
        assert_eq!(ttls, [5400, 86_400, 604_800]);
    }

    #[test]
    fn bad_ttls() {
        assert_eq!(error("$TTL 1x\n"), "zones/x.zone:1: bad TTL \"1x\"");
        assert_eq!(
            error("a 12q A 192.0.2.1\n"),
            "zones/x.zone:1: bad TTL \"12q\""
        );
        assert_eq!(
            error("a 2147483648 A 192.0.2.1\n"),
            "zones/x.zone:1: TTL \"2147483648\" is larger than 2147483647"
        );
        assert_eq!(
            error("a 1 2 A 192.0.2.1\n"),
            "zones/x.zone:1: unexpected \"2\": the TTL was already given"
        );
        assert_eq!(
            error("$TTL\n"),
            "zones/x.zone:1: missing argument after $TTL"
        );
        assert_eq!(
            error("$TTL 1 2\n"),
            "zones/x.zone:1: unexpected \"2\" after $TTL"
        );
    }

    #[test]
    fn default_ttl_rules() {
        // Last explicit TTL carries over when there is no $TTL.
        let records = parse("a 120 A 192.0.2.1\nb A 192.0.2.2\n");
        assert_eq!(records[1].record.ttl, 120);

        // $TTL wins over the last explicit TTL.
        let records = parse("$TTL 60\na 120 A 192.0.2.1\nb A 192.0.2.2\n");
        assert_eq!(records[1].record.ttl, 60);

        // Without either, the SOA MINIMUM applies, to the SOA itself too.
        let records = parse("@ SOA ns hm 1 2 3 4 900\nb A 192.0.2.2\n");
        assert_eq!(records[0].record.ttl, 900);
        assert_eq!(records[1].record.ttl, 900);

        // An explicit TTL after the SOA becomes the default.
        let records = parse("@ SOA ns hm 1 2 3 4 900\nb 30 A 192.0.2.2\nc A 192.0.2.3\n");
        assert_eq!(records[2].record.ttl, 30);

        assert_eq!(
            error("\n\nwww A 192.0.2.1\n"),
            "zones/x.zone:3: no TTL specified (give one, or set $TTL before this record)"
        );
    }

    // --- SOA, parentheses, comments --------------------------------------

    #[test]
    fn parenthesised_soa_across_lines_with_comments() {
        let text = "$TTL 1h\n\
                    @ IN SOA ns1 hostmaster.example.com. ( ; start\n\
                    \t2024010101 ; serial\n\
                    \t1h         ; refresh\n\
                    \t15m        ; retry\n\
                    \t1w         ; expire\n\
                    \t300 )      ; minimum\n\
                    www A 192.0.2.1 ; trailing comment\n";
        let records = parse(text);
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].line, 2);
        assert_eq!(records[1].line, 8);
        let RData::SOA(soa) = &records[0].record.data else {
            panic!("{records:?}")
        };
        assert_eq!(soa.mname, name("ns1.example.com."));
        assert_eq!(soa.rname, name("hostmaster.example.com."));
        assert_eq!(
            (soa.serial, soa.refresh, soa.retry, soa.expire, soa.minimum),
            (2024010101, 3600, 900, 604_800, 300)
        );
        assert_eq!(records[0].record.ttl, 3600);
    }

    #[test]
    fn soa_timer_above_i32_keeps_its_wire_bits() {
        let rec = only("@ 1 SOA ns hm 4294967295 4294967295 1 1 1\n");
        let RData::SOA(soa) = &rec.data else {
            panic!("{rec:?}")
        };
        assert_eq!(soa.serial, u32::MAX);
        let bytes = wire(&rec.data);
        let timers = &bytes[bytes.len() - 16..bytes.len() - 8];
        assert_eq!(timers, [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1]);
    }

    #[test]
    fn soa_errors() {
        assert_eq!(
            error("@ 1 SOA ns hm 1h 2 3 4 5\n"),
            "zones/x.zone:1: bad serial \"1h\" in SOA record"
        );
        assert_eq!(
            error("@ 1 SOA ns hm (\n 1 2 3\n 4 )\n"),
            "zones/x.zone:3: missing minimum in SOA record"
        );
        assert_eq!(
            error("@ 1 SOA ns hm 1 2 3 4x 5\n"),
            "zones/x.zone:1: bad expire \"4x\" in SOA record"
        );
    }

    #[test]
    fn comments_and_semicolons_in_quotes() {
        let rec = only("a 1 TXT \"x; not a comment\" ; real comment \"ignored\n");
        let RData::TXT(txt) = &rec.data else {
            panic!("{rec:?}")
        };
        assert_eq!(
            &*txt.txt_data,
            [b"x; not a comment".to_vec().into_boxed_slice()]
        );
    }

    #[test]
    fn parentheses_in_the_middle_of_a_record() {
        let records = parse("$TTL 1\na MX ( 10\n mail ) \nb A 192.0.2.1\n");
        assert_eq!(
            records[0].record.data,
            RData::MX(MX::new(10, name("mail.example.com.")))
        );
        assert_eq!(records[1].line, 4);
    }

    #[test]
    fn unbalanced_parentheses() {
        assert_eq!(
            error("$TTL 1\n\na A 192.0.2.1 )\n"),
            "zones/x.zone:3: unbalanced parenthesis: \")\" without \"(\""
        );
        assert_eq!(
            error("$TTL 1\n@ SOA ns hm ( 1 2 3\n 4 5\nb A 192.0.2.1\n"),
            "zones/x.zone:2: unbalanced parenthesis: \"(\" is never closed"
        );
    }

    // --- escapes ----------------------------------------------------------

    #[test]
    fn escapes_in_names_build_raw_labels() {
        let rec = only("$TTL 1\na\\.b.c\\032d.\\065\\\\ A 192.0.2.1\n");
        assert_eq!(
            labels(&rec.name),
            [
                b"a.b".to_vec(),
                b"c d".to_vec(),
                b"A\\".to_vec(),
                b"example".to_vec(),
                b"com".to_vec()
            ]
        );
        // \DDD above 127 is kept as the raw byte.
        let rec = only("$TTL 1\n\\255x.example. A 192.0.2.1\n");
        assert_eq!(labels(&rec.name)[0], [255u8, b'x']);
        // An escaped dot at the end does not make the name absolute.
        let rec = only("$TTL 1\nend\\. A 192.0.2.1\n");
        assert_eq!(labels(&rec.name)[0], b"end.");
        assert_eq!(rec.name.num_labels(), 3);
    }

    #[test]
    fn escapes_in_rdata_names() {
        let rec = only("$TTL 1\n@ SOA ns john\\.doe.example.com. 1 2 3 4 5\n");
        let RData::SOA(soa) = &rec.data else {
            panic!("{rec:?}")
        };
        assert_eq!(labels(&soa.rname)[0], b"john.doe");
        assert_eq!(soa.rname.num_labels(), 3);
    }

    #[test]
    fn escaped_special_characters_in_bare_words() {
        let rec = only("$TTL 1\na TXT semi\\;colon paren\\( quote\\\" space\\ x\n");
        let RData::TXT(txt) = &rec.data else {
            panic!("{rec:?}")
        };
        let strings: Vec<&[u8]> = txt.txt_data.iter().map(|s| &**s).collect();
        assert_eq!(
            strings,
            [&b"semi;colon"[..], b"paren(", b"quote\"", b"space x"]
        );
    }

    #[test]
    fn bad_escapes() {
        assert_eq!(
            error("$TTL 1\na TXT \"\\25x\"\n"),
            "zones/x.zone:2: bad escape in \"\\25x\""
        );
        assert_eq!(
            error("$TTL 1\na\\300 A 192.0.2.1\n"),
            "zones/x.zone:2: bad escape in \"a\\300\""
        );
        assert_eq!(
            error("$TTL 1\na TXT foo\\\n"),
            "zones/x.zone:2: backslash at end of line in \"foo\\\""
        );
    }

    #[test]
    fn name_errors() {
        let long_label = "a".repeat(64);
        assert_eq!(
            error(&format!("$TTL 1\n{long_label} A 192.0.2.1\n")),
            format!(
                "zones/x.zone:2: label \"{long_label}\" is longer than 63 bytes in name \"{long_label}\""
            )
        );
        // 63 is fine, and \DDD counts as one byte.
        let ok = format!("{}\\097", "a".repeat(62));
        assert_eq!(
            only(&format!("$TTL 1\n{ok} A 192.0.2.1\n"))
                .name
                .iter()
                .next()
                .unwrap()
                .len(),
            63
        );

        // 4 labels of 63 = 256 bytes of wire form with the root: too long.
        let long_name = vec!["a".repeat(63); 4].join(".") + ".";
        let msg = error(&format!("$TTL 1\n{long_name} A 192.0.2.1\n"));
        assert!(msg.starts_with("zones/x.zone:2: name \"aaa"), "{msg}");
        assert!(msg.ends_with("is longer than 255 bytes"), "{msg}");
        // Too long only once the origin (12 more bytes) is appended.
        let relative = vec!["a".repeat(63); 3].join(".") + "." + &"a".repeat(52);
        let msg = error(&format!("$TTL 1\n{relative} A 192.0.2.1\n"));
        assert!(msg.contains("is longer than 255 bytes"), "{msg}");
        // 255 exactly is fine.
        let max = vec!["a".repeat(63); 3].join(".") + "." + &"b".repeat(61) + ".";
        assert_eq!(
            only(&format!("$TTL 1\n{max} A 192.0.2.1\n")).name.len(),
            254
        );

        assert_eq!(
            error("$TTL 1\na..b A 192.0.2.1\n"),
            "zones/x.zone:2: empty label in name \"a..b\""
        );
        assert_eq!(
            error("$TTL 1\nwww CNAME .foo\n"),
            "zones/x.zone:2: empty label in name \".foo\""
        );
        assert_eq!(
            error("$TTL 1\n\"\" A 192.0.2.1\n"),
            "zones/x.zone:2: empty name"
        );
    }

    // --- TXT ----------------------------------------------------------------

    #[test]
    fn txt_multiple_strings_and_escaped_quotes() {
        let rec = only(
            "$TTL 1\na TXT \"v=spf1 -all\" bare \"say \\\"hi\\\"\" \"\" \"\\065\\\\\" (\n \"next line\" )\n",
        );
        let RData::TXT(txt) = &rec.data else {
            panic!("{rec:?}")
        };
        let strings: Vec<&[u8]> = txt.txt_data.iter().map(|s| &**s).collect();
        assert_eq!(
            strings,
            [
                &b"v=spf1 -all"[..],
                b"bare",
                b"say \"hi\"",
                b"",
                b"A\\",
                b"next line"
            ]
        );
    }

    #[test]
    fn txt_length_limits() {
        let ok = "x".repeat(255);
        let rec = only(&format!("$TTL 1\na TXT \"{ok}\"\n"));
        assert_eq!(wire(&rec.data).len(), 256);
        let long = "x".repeat(256);
        let msg = error(&format!("$TTL 1\na TXT ok \"{long}\"\n"));
        assert!(
            msg.starts_with("zones/x.zone:2: TXT string \"xxxx"),
            "{msg}"
        );
        assert!(
            msg.ends_with("is longer than 255 bytes (256 bytes)"),
            "{msg}"
        );
        // Escapes count as the byte they stand for.
        let escaped = "\\120".repeat(255);
        let rec = only(&format!("$TTL 1\na TXT {escaped}\n"));
        assert_eq!(wire(&rec.data).len(), 256);
        assert_eq!(
            error("$TTL 1\na TXT\n"),
            "zones/x.zone:2: missing text in TXT record"
        );
    }

    #[test]
    fn unterminated_quoted_string() {
        assert_eq!(
            error("$TTL 1\na TXT \"abc\nb A 192.0.2.1\n"),
            "zones/x.zone:2: unterminated quoted string"
        );
        assert_eq!(
            error("$TTL 1\na TXT \"abc\\\""),
            "zones/x.zone:2: unterminated quoted string"
        );
    }

    // --- CAA ----------------------------------------------------------------

    #[test]
    fn caa_round_trips_exact_bytes() {
        let records = parse(
            "$TTL 1\n\
             @ CAA 0 issue \"ca.example.net; account=230123\"\n\
             @ CAA 128 tbs \"Unknown\"\n\
             @ CAA 0 iodef mailto:security@example.com\n\
             @ CAA 0 issue \";\"\n\
             @ CAA 1 Issue \"%%%odd \\255 value\"\n\
             @ CAA 0 issuewild \"\"\n",
        );
        let expect = |flags: u8, tag: &str, value: &[u8]| {
            let mut v = vec![flags, tag.len() as u8];
            v.extend_from_slice(tag.as_bytes());
            v.extend_from_slice(value);
            v
        };
        let wires: Vec<Vec<u8>> = records.iter().map(|r| wire(&r.record.data)).collect();
        assert_eq!(
            wires,
            [
                expect(0, "issue", b"ca.example.net; account=230123"),
                expect(128, "tbs", b"Unknown"),
                expect(0, "iodef", b"mailto:security@example.com"),
                expect(0, "issue", b";"),
                expect(1, "Issue", b"%%%odd \xff value"),
                expect(0, "issuewild", b""),
            ]
        );
        // And hickory's decoder reads back the same record.
        for r in &records {
            let bytes = wire(&r.record.data);
            let back = rdata_from_wire(RecordType::CAA, bytes).unwrap();
            assert_eq!(back, r.record.data);
        }
    }

    #[test]
    fn caa_errors() {
        assert_eq!(
            error("$TTL 1\n@ CAA 0 is-sue \"x\"\n"),
            "zones/x.zone:2: bad CAA tag \"is-sue\" (must be 1-15 ASCII letters or digits)"
        );
        assert_eq!(
            error("$TTL 1\n@ CAA 0 abcdefghijklmnop \"x\"\n"),
            "zones/x.zone:2: bad CAA tag \"abcdefghijklmnop\" (must be 1-15 ASCII letters or digits)"
        );
        assert_eq!(
            error("$TTL 1\n@ CAA 256 issue \"x\"\n"),
            "zones/x.zone:2: bad flags \"256\" in CAA record"
        );
        assert_eq!(
            error("$TTL 1\n@ CAA 0 issue\n"),
            "zones/x.zone:2: missing value in CAA record"
        );
        assert_eq!(
            error("$TTL 1\n@ CAA 0 issue a b\n"),
            "zones/x.zone:2: unexpected \"b\" after CAA record data"
        );
    }

    // --- RFC 3597 -----------------------------------------------------------

    #[test]
    fn generic_unknown_type() {
        let records = parse(
            "$TTL 1\n\
             a TYPE65280 \\# 4 0A000001\n\
             b type731 \\# 6 ( 0a 00\n  00 01 ; comment\n FFff )\n\
             c TYPE65281 \\# 0\n",
        );
        assert_eq!(
            records[0].record.data,
            RData::Unknown {
                code: RecordType::Unknown(65280),
                rdata: NULL::with(vec![10, 0, 0, 1]),
            }
        );
        assert_eq!(records[0].record.record_type(), RecordType::Unknown(65280));
        assert_eq!(
            records[1].record.data,
            RData::Unknown {
                code: RecordType::Unknown(731),
                rdata: NULL::with(vec![10, 0, 0, 1, 255, 255]),
            }
        );
        assert_eq!(records[2].line, 6);
        assert_eq!(
            records[2].record.data,
            RData::Unknown {
                code: RecordType::Unknown(65281),
                rdata: NULL::new(),
            }
        );
    }

    #[test]
    fn generic_form_of_known_types_is_decoded() {
        let records = parse(
            "$TTL 1\n\
             a A \\# 4 0A000001\n\
             b TYPE1 10.0.0.2\n\
             c MX \\# 8 000a 04 6d61696c 00\n\
             d TXT \\# 7 0268690361 6263\n\
             e TYPE15 20 mx\n\
             f CAA \\# 11 00 05 6973737565 6361 2e6e\n",
        );
        let data: Vec<RData> = records.iter().map(|r| r.record.data.clone()).collect();
        assert_eq!(
            data,
            [
                RData::A(A::new(10, 0, 0, 1)),
                RData::A(A::new(10, 0, 0, 2)),
                RData::MX(MX::new(10, name("mail."))),
                RData::TXT(TXT::new(vec!["hi".into(), "abc".into()])),
                RData::MX(MX::new(20, name("mx.example.com."))),
                parse("$TTL 1\n@ CAA 0 issue ca.n\n")[0].record.data.clone(),
            ]
        );
    }

    #[test]
    fn quoted_backslash_hash_is_text_not_generic_form() {
        let rec = only("$TTL 1\na TXT \"\\#\" 1 00\n");
        assert_eq!(
            rec.data,
            RData::TXT(TXT::new(vec!["#".into(), "1".into(), "00".into()]))
        );
    }

    #[test]
    fn generic_errors() {
        assert_eq!(
            error("$TTL 1\na TYPE65280 \\# 4 0A0000\n"),
            "zones/x.zone:2: RFC 3597 data length 4 does not match the 3 bytes given"
        );
        assert_eq!(
            error("$TTL 1\na TYPE65280 \\# 2 0A0\n"),
            "zones/x.zone:2: odd number of hex digits in RFC 3597 data"
        );
        assert_eq!(
            error("$TTL 1\na TYPE65280 \\# 2 0A (\n 0g )\n"),
            "zones/x.zone:3: bad RFC 3597 hex data \"0g\" in TYPE65280 record"
        );
        assert_eq!(
            error("$TTL 1\na TYPE65280 \\# x 00\n"),
            "zones/x.zone:2: bad RFC 3597 data length \"x\" in TYPE65280 record"
        );
        assert_eq!(
            error("$TTL 1\na TYPE65280 \\#\n"),
            "zones/x.zone:2: missing RFC 3597 data length in TYPE65280 record"
        );
        assert_eq!(
            error("$TTL 1\na TYPE65280 \\# 70000\n"),
            "zones/x.zone:2: bad RFC 3597 data length \"70000\" in TYPE65280 record"
        );
        let msg = error("$TTL 1\na A \\# 3 0A0000\n");
        assert!(
            msg.starts_with("zones/x.zone:2: RFC 3597 data for A record does not decode: "),
            "{msg}"
        );
        let msg = error("$TTL 1\na A \\# 5 0A00000102\n");
        assert!(
            msg.starts_with("zones/x.zone:2: RFC 3597 data for A record does not decode: "),
            "{msg}"
        );
        // A CAA tag hickory cannot decode.
        let msg = error("$TTL 1\na CAA \\# 4 00 01 2d 78\n");
        assert!(msg.contains("CAA record does not decode"), "{msg}");
        // SOA whose rname is a compression pointer to the mname.
        assert_eq!(
            error(
                "$TTL 1\n@ SOA \\# 26 026e7300 c000 00000001 00000002 00000003 00000004 00000005\n"
            ),
            "zones/x.zone:2: RFC 3597 data for SOA record does not re-encode to the same bytes \
             (compressed names are not allowed)"
        );
    }

    // --- types, classes, general errors ----------------------------------

    #[test]
    fn bad_addresses() {
        assert_eq!(
            error("$TTL 1\n\n\n\n\n\nwww A 300.1.1.1\n"),
            "zones/x.zone:7: bad IPv4 address \"300.1.1.1\" in A record"
        );
        assert_eq!(
            error("$TTL 1\nwww AAAA 2001:db8::g\n"),
            "zones/x.zone:2: bad IPv6 address \"2001:db8::g\" in AAAA record"
        );
        assert_eq!(
            error("$TTL 1\nwww A\n"),
            "zones/x.zone:2: missing IPv4 address in A record"
        );
        assert_eq!(
            error("$TTL 1\nwww A 192.0.2.1 192.0.2.2\n"),
            "zones/x.zone:2: unexpected \"192.0.2.2\" after A record data"
        );
    }

    #[test]
    fn bad_numbers() {
        assert_eq!(
            error("$TTL 1\n@ MX 65536 mail\n"),
            "zones/x.zone:2: bad preference \"65536\" in MX record"
        );
        assert_eq!(
            error("$TTL 1\n@ MX -1 mail\n"),
            "zones/x.zone:2: bad preference \"-1\" in MX record"
        );
        assert_eq!(
            error("$TTL 1\n_s._tcp SRV 1 2 http x\n"),
            "zones/x.zone:2: bad port \"http\" in SRV record"
        );
        assert_eq!(
            error("$TTL 1\n_s._tcp SRV 1 2 80\n"),
            "zones/x.zone:2: missing target name in SRV record"
        );
    }

    #[test]
    fn type_errors() {
        assert_eq!(
            error("$TTL 1\nwww AA 192.0.2.1\n"),
            "zones/x.zone:2: unknown record type \"AA\""
        );
        assert_eq!(
            error("$TTL 1\nwww TYPE70000 \\# 0\n"),
            "zones/x.zone:2: unknown record type \"TYPE70000\""
        );
        assert_eq!(
            error("$TTL 1\nwww 60 IN\n"),
            "zones/x.zone:2: missing record type"
        );
        assert_eq!(
            error("$TTL 1\nwww TYPE41 \\# 0\n"),
            "zones/x.zone:2: record type \"TYPE41\" cannot appear in a zone file"
        );
        assert_eq!(
            error("$TTL 1\nwww AXFR \\# 0\n"),
            "zones/x.zone:2: record type \"AXFR\" cannot appear in a zone file"
        );
        assert_eq!(
            error("$TTL 1\nwww TYPE0 \\# 0\n"),
            "zones/x.zone:2: record type \"TYPE0\" cannot appear in a zone file"
        );
        assert_eq!(
            error("$TTL 1\nwww HINFO \"pc\" \"os\"\n"),
            "zones/x.zone:2: record type HINFO is only supported in RFC 3597 form (\\# <length> <hex>)"
        );
        // ... and the RFC 3597 form of it works.
        let rec = only("$TTL 1\nwww HINFO \\# 6 02706302 6f73\n");
        assert_eq!(rec.record_type(), RecordType::HINFO);
    }

    #[test]
    fn class_errors() {
        assert_eq!(
            error("$TTL 1\nwww CH A 192.0.2.1\n"),
            "zones/x.zone:2: unsupported class \"CH\" (only IN is supported)"
        );
        assert_eq!(
            error("$TTL 1\nwww 60 CLASS3 A 192.0.2.1\n"),
            "zones/x.zone:2: unsupported class \"CLASS3\" (only IN is supported)"
        );
        assert_eq!(
            error("$TTL 1\nwww IN IN A 192.0.2.1\n"),
            "zones/x.zone:2: the class is given twice"
        );
    }

    #[test]
    fn unknown_directive() {
        assert_eq!(
            error("$GENERATE 1-10 a$ A 192.0.2.$\n"),
            "zones/x.zone:1: unknown directive \"$GENERATE\""
        );
        assert_eq!(
            error("$ORIGIN\n"),
            "zones/x.zone:1: missing argument after $ORIGIN"
        );
    }

    #[test]
    fn io_error_for_missing_top_level_file() {
        let err = parse_zone_file(Path::new("/nonexistent/xdpdns/zone"), &origin()).unwrap_err();
        assert!(matches!(err, ZoneFileError::Io { .. }));
        assert!(err
            .to_string()
            .starts_with("/nonexistent/xdpdns/zone: cannot read: "));
    }

    // --- $INCLUDE -----------------------------------------------------------

    /// A scratch directory removed on drop, unique per test and process.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            let dir = std::env::temp_dir().join(format!(
                "xdpdns-parser-{tag}-{}-{:?}",
                std::process::id(),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos()
            ));
            std::fs::create_dir_all(dir.join("sub")).unwrap();
            TempDir(dir)
        }

        fn write(&self, rel: &str, text: &str) -> PathBuf {
            let path = self.0.join(rel);
            std::fs::write(&path, text).unwrap();
            path
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn include_files() {
        let dir = TempDir::new("include");
        let main = dir.write(
            "main.zone",
            "$TTL 60\n\
             www A 192.0.2.1\n\
             $INCLUDE sub/inc.zone svc ; with origin\n\
             \tA 192.0.2.2\n\
             $INCLUDE \"sub/plain.zone\"\n\
             after A 192.0.2.3\n",
        );
        dir.write(
            "sub/inc.zone",
            "; included with origin svc.example.com.\n\
             \n\
             @ SRV 0 0 80 web\n\
             $ORIGIN elsewhere.test.\n\
             web A 192.0.2.10\n\
             $INCLUDE deeper.zone\n",
        );
        dir.write("sub/deeper.zone", "deep A 192.0.2.11\n");
        dir.write(
            "sub/plain.zone",
            "\tTXT inherits-owner\nplain A 192.0.2.12\n",
        );

        let records = parse_zone_file(&main, &origin()).unwrap_or_else(|e| panic!("{e}"));
        let got: Vec<(String, String, usize)> = records
            .iter()
            .map(|r| {
                (
                    r.record.name.to_ascii(),
                    r.file.strip_prefix(&dir.0).unwrap().display().to_string(),
                    r.line,
                )
            })
            .collect();
        let want = [
            ("www.example.com.", "main.zone", 2),
            ("svc.example.com.", "sub/inc.zone", 3),
            ("web.elsewhere.test.", "sub/inc.zone", 5),
            ("deep.elsewhere.test.", "sub/deeper.zone", 1),
            // The owner and origin revert after the include.
            ("www.example.com.", "main.zone", 4),
            ("www.example.com.", "sub/plain.zone", 1),
            ("plain.example.com.", "sub/plain.zone", 2),
            ("after.example.com.", "main.zone", 6),
        ];
        let want: Vec<(String, String, usize)> = want
            .iter()
            .map(|(n, f, l)| (n.to_string(), f.to_string(), *l))
            .collect();
        assert_eq!(got, want);
        assert_eq!(
            records[1].record.data,
            RData::SRV(SRV::new(0, 0, 80, name("web.svc.example.com.")))
        );
        assert!(records.iter().all(|r| r.record.ttl == 60));
    }

    #[test]
    fn include_errors_name_the_right_file_and_line() {
        let dir = TempDir::new("include-errors");
        let main = dir.write("main.zone", "$TTL 60\n$INCLUDE sub/bad.zone\n");
        let bad = dir.write("sub/bad.zone", "ok A 192.0.2.1\n\nbad A 1.2.3\n");
        let err = parse_zone_file(&main, &origin()).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "{}:3: bad IPv4 address \"1.2.3\" in A record",
                bad.display()
            )
        );

        let missing = dir.write("missing.zone", "\n$INCLUDE nothere.zone\n");
        let err = parse_zone_file(&missing, &origin())
            .unwrap_err()
            .to_string();
        let prefix = format!(
            "{}:2: cannot read included file \"{}\": ",
            missing.display(),
            dir.0.join("nothere.zone").display()
        );
        assert!(err.starts_with(&prefix), "{err}");

        let noarg = dir.write("noarg.zone", "$INCLUDE\n");
        let err = parse_zone_file(&noarg, &origin()).unwrap_err().to_string();
        assert_eq!(
            err,
            format!("{}:1: missing file name after $INCLUDE", noarg.display())
        );
    }

    #[test]
    fn include_depth_is_limited() {
        let dir = TempDir::new("include-loop");
        let looping = dir.write("loop.zone", "$TTL 1\na A 192.0.2.1\n$INCLUDE loop.zone\n");
        let err = parse_zone_file(&looping, &origin())
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "{}:3: $INCLUDE \"{}\" nested more than 16 deep",
                looping.display(),
                looping.display()
            )
        );
    }
}
