//! How a parse fails: a message and the line it names, and the limits
//! every part of the parser checks against.

/// RFC 2181 §8: a TTL is an unsigned 31-bit number.
pub(super) const MAX_TTL: u32 = i32::MAX as u32;

/// An error located in the file currently being parsed; the file name is
/// attached when it leaves that file (see [`Fail::in_file`]).
#[derive(Debug)]
pub(super) struct Fail {
    pub(super) line: usize,
    pub(super) message: String,
}

impl Fail {
    pub(super) fn new(line: usize, message: impl Into<String>) -> Self {
        Fail {
            line,
            message: message.into(),
        }
    }
}

/// Shows source bytes in a message, shortened so one huge token cannot
/// swamp the error line.
pub(super) fn show(bytes: &[u8]) -> String {
    const LIMIT: usize = 80;
    let text = String::from_utf8_lossy(bytes);
    if text.chars().count() <= LIMIT {
        text.into_owned()
    } else {
        let short: String = text.chars().take(LIMIT).collect();
        format!("{short}...")
    }
}
