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

mod fail;
mod fields;
mod generate;
mod lexer;
mod rdata;
mod typed;
mod values;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hickory_proto::rr::{Name, RData, Record, RecordType};

use fail::Fail;
use lexer::{Entry, Lexer, Token};
use rdata::parse_rdata;
use values::*;

use crate::zone::source::{SourceFile, SourceStamp};

/// Where the parser reads files from: the main zone file and every
/// `$INCLUDE`. The server reads the disk (`xdpdns::zone::disk`); text in
/// memory has no files ([`parse_zone_str`]).
pub trait SourceFiles {
    /// The whole text of `path`, and the file's stamp taken just before
    /// it was read (an edit while it is read leaves the stamp stale).
    fn read(&mut self, path: &Path) -> io::Result<(String, SourceFile)>;
}

/// No file system: every `$INCLUDE` fails.
struct NoFiles;

impl SourceFiles for NoFiles {
    fn read(&mut self, _: &Path) -> io::Result<(String, SourceFile)> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "zone text in memory has no files to include",
        ))
    }
}

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

impl Fail {
    /// The error as it leaves the file it was found in.
    fn in_file(self, file: &Path) -> ZoneFileError {
        ZoneFileError::Syntax {
            file: file.to_path_buf(),
            line: self.line,
            message: self.message,
        }
    }
}

/// Parses zone-file text in memory; `file` names it in error messages and
/// in [`SourceRecord::file`]. An `$INCLUDE` is an error: there are no
/// files to read ([`parse_zone_text`] takes them).
pub fn parse_zone_str(
    text: &str,
    origin: &Name,
    file: &Path,
) -> Result<Vec<SourceRecord>, ZoneFileError> {
    parse_zone_text(text, origin, file, &mut NoFiles)
}

/// Parses zone-file text, reading `$INCLUDE`d files from `files`; `file`
/// is also the base for relative `$INCLUDE` paths.
pub fn parse_zone_text(
    text: &str,
    origin: &Name,
    file: &Path,
    files: &mut dyn SourceFiles,
) -> Result<Vec<SourceRecord>, ZoneFileError> {
    let mut scope = Scope::at(origin);
    let mut parser = Parser::new(files, None);
    parser.parse_text(text, &Arc::from(file), &mut scope, 0)?;
    Ok(parser.records)
}

/// Records handed to a [`parse_zone_source`] sink at a time.
pub const BATCH: usize = 4096;

/// Reads the zone file `path` from `files` and parses it, handing the
/// records to `sink` in batches of [`BATCH`] as they are parsed (so
/// another thread can build the zone meanwhile). Returns the stamp of
/// every file read, each taken just before it was read, the main file
/// first.
pub fn parse_zone_source(
    files: &mut dyn SourceFiles,
    path: &Path,
    origin: &Name,
    sink: &mut dyn FnMut(Vec<SourceRecord>),
) -> Result<SourceStamp, ZoneFileError> {
    let (text, main) = files.read(path).map_err(|source| ZoneFileError::Io {
        file: path.to_path_buf(),
        source,
    })?;
    let mut scope = Scope::at(origin);
    let mut parser = Parser::new(files, Some(sink));
    parser.parse_text(&text, &Arc::from(path), &mut scope, 0)?;
    let rest = std::mem::take(&mut parser.records);
    if let Some(sink) = parser.sink {
        sink(rest);
    }
    let mut stamped = vec![main];
    for f in parser.opened {
        if !stamped.iter().any(|seen| seen.path == f.path) {
            stamped.push(f);
        }
    }
    Ok(SourceStamp { files: stamped })
}

/// How many `$INCLUDE`s may be nested; this also stops include cycles.
const MAX_INCLUDE_DEPTH: usize = 16;

/// State that `$INCLUDE` saves and restores (RFC 1035 §5.1: the origin and
/// current owner revert after the included file).
struct Scope {
    origin: Name,
    owner: Option<Name>,
}

impl Scope {
    fn at(origin: &Name) -> Scope {
        let mut origin = origin.clone();
        origin.set_fqdn(true);
        Scope {
            origin,
            owner: None,
        }
    }
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

struct Parser<'s> {
    records: Vec<SourceRecord>,
    ttl: TtlDefaults,
    /// Where `$INCLUDE`d files are read from.
    files: &'s mut dyn SourceFiles,
    /// Where full batches go, when records are streamed.
    sink: Option<&'s mut dyn FnMut(Vec<SourceRecord>)>,
    /// Every included file read, as it was just before (the main file's
    /// stamp is the caller's): what decides whether a zone's image is
    /// current.
    opened: Vec<SourceFile>,
}

impl<'s> Parser<'s> {
    fn new(
        files: &'s mut dyn SourceFiles,
        sink: Option<&'s mut dyn FnMut(Vec<SourceRecord>)>,
    ) -> Parser<'s> {
        Parser {
            records: Vec::new(),
            ttl: TtlDefaults::default(),
            files,
            sink,
            opened: Vec::new(),
        }
    }

    fn push(&mut self, record: SourceRecord) {
        self.records.push(record);
        if let Some(sink) = self.sink.as_mut() {
            if self.records.len() >= BATCH {
                sink(std::mem::replace(
                    &mut self.records,
                    Vec::with_capacity(BATCH),
                ));
            }
        }
    }

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
            self.push(SourceRecord {
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
            "$GENERATE" => return self.generate(first, args, file, scope),
            _ => Err(Fail::new(
                first.line,
                format!("unknown directive \"{}\"", first.show()),
            )),
        };
        result.map_err(|f| f.in_file(file))
    }

    /// BIND's `$GENERATE start-stop[/step] lhs [ttl] [class] type rhs...`:
    /// one record per value, `$` (or `${offset,width,base}`) in the owner
    /// and data replaced by it.
    fn generate(
        &mut self,
        directive: &Token,
        args: &[Token],
        file: &Arc<Path>,
        scope: &mut Scope,
    ) -> Result<(), ZoneFileError> {
        let fail = |message: String| Fail::new(directive.line, message).in_file(file);
        let (range, template) = match args {
            [range, lhs, rest @ ..] if rest.len() >= 2 => (range, std::iter::once(lhs).chain(rest)),
            _ => {
                return Err(fail(
                    "$GENERATE needs a range, an owner, a type and data".into(),
                ))
            }
        };
        let (start, stop, step) = generate::range(&range.text)
            .ok_or_else(|| fail(format!("bad $GENERATE range \"{}\"", range.show())))?;
        let template: Vec<&Token> = template.collect();
        let mut value = start;
        while value <= stop {
            let mut tokens = Vec::with_capacity(template.len());
            for tok in &template {
                let text = if tok.quoted {
                    tok.text.clone()
                } else {
                    generate::substitute(&tok.text, value).ok_or_else(|| {
                        fail(format!("bad $GENERATE modifier in \"{}\"", tok.show()))
                    })?
                };
                tokens.push(Token {
                    text,
                    quoted: tok.quoted,
                    line: tok.line,
                });
            }
            let entry = Entry {
                line: directive.line,
                inherit_owner: false,
                tokens,
            };
            let record = self
                .parse_record(&entry, scope)
                .map_err(|f| f.in_file(file))?;
            self.push(SourceRecord {
                record,
                file: file.clone(),
                line: directive.line,
            });
            match value.checked_add(step) {
                Some(next) => value = next,
                None => break,
            }
        }
        Ok(())
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
        let (text, stamp) = self.files.read(&path).map_err(|e| {
            fail(format!(
                "cannot read included file \"{}\": {e}",
                path.display()
            ))
        })?;
        self.opened.push(stamp);
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

#[cfg(test)]
mod tests;
