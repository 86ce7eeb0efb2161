//! The lexer: text into entries (one logical line each: parentheses join
//! physical lines, `;` comments are dropped, quoted strings become single
//! tokens), and the escapes tokens keep until they are interpreted.

use super::fail::{show, Fail};

/// One token with its raw source text (escapes not yet interpreted; quotes
/// of a quoted string removed).
#[derive(Debug)]
pub(super) struct Token {
    pub(super) text: Vec<u8>,
    pub(super) quoted: bool,
    pub(super) line: usize,
}

impl Token {
    pub(super) fn show(&self) -> String {
        show(&self.text)
    }

    /// True for an unquoted token with exactly this text.
    pub(super) fn is_bare(&self, text: &[u8]) -> bool {
        !self.quoted && self.text == text
    }

    /// The token as upper-case text, for keyword matching.
    pub(super) fn keyword(&self) -> String {
        String::from_utf8_lossy(&self.text).to_ascii_uppercase()
    }
}

/// One logical line: a directive or a record.
#[derive(Debug)]
pub(super) struct Entry {
    /// The line of the first token; the record's reported line.
    pub(super) line: usize,
    /// The line began with blank space, so the owner is the previous one.
    pub(super) inherit_owner: bool,
    pub(super) tokens: Vec<Token>,
}

pub(super) struct Lexer<'a> {
    pub(super) src: &'a [u8],
    pub(super) pos: usize,
    pub(super) line: usize,
    /// Open parentheses; newlines inside them do not end the entry.
    pub(super) depth: usize,
    /// Where the outermost open parenthesis is, to report it if unclosed.
    pub(super) open_line: usize,
}

impl<'a> Lexer<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        Lexer {
            src: text.as_bytes(),
            pos: 0,
            line: 1,
            depth: 0,
            open_line: 0,
        }
    }

    /// The next non-empty entry, or `None` at the end of the text.
    pub(super) fn next_entry(&mut self) -> Result<Option<Entry>, Fail> {
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
    pub(super) fn entry(&mut self) -> Result<Entry, Fail> {
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

    pub(super) fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    /// Skips to (not past) the newline, which still ends the entry.
    pub(super) fn skip_comment(&mut self) {
        while !matches!(self.peek(), None | Some(b'\n')) {
            self.pos += 1;
        }
    }

    pub(super) fn open_paren(&mut self) {
        if self.depth == 0 {
            self.open_line = self.line;
        }
        self.depth += 1;
        self.pos += 1;
    }

    pub(super) fn close_paren(&mut self) -> Result<(), Fail> {
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
    pub(super) fn quoted(&mut self) -> Result<Token, Fail> {
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
    pub(super) fn word(&mut self) -> Result<Token, Fail> {
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
