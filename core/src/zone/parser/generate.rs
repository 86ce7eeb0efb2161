//! `$GENERATE` ranges and `$` substitution, as BIND reads them.

/// Values a single `$GENERATE` may produce: a typo in a range must not
/// fill the memory.
const MAX_VALUES: u64 = 1_000_000;

/// `start-stop[/step]`, start ≤ stop, step ≥ 1.
pub(super) fn range(text: &[u8]) -> Option<(u64, u64, u64)> {
    let text = std::str::from_utf8(text).ok()?;
    let (span, step) = match text.split_once('/') {
        Some((span, step)) => (span, step.parse().ok()?),
        None => (text, 1),
    };
    let (start, stop) = span.split_once('-')?;
    let (start, stop): (u64, u64) = (start.parse().ok()?, stop.parse().ok()?);
    if start > stop || step == 0 || (stop - start) / step >= MAX_VALUES {
        return None;
    }
    Some((start, stop, step))
}

/// `text` with each unescaped `$` replaced by `value`, and each
/// `${offset[,width[,base]]}` by `value + offset` written in `base` (d, o,
/// x, X, or n/N for reversed nibbles) zero-padded to `width`. Escapes are
/// kept for the record parser.
pub(super) fn substitute(text: &[u8], value: u64) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() + 8);
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'\\' => {
                out.extend_from_slice(&text[i..(i + 2).min(text.len())]);
                i += 2;
            }
            b'$' if text.get(i + 1) == Some(&b'{') => {
                let end = i + 2 + text[i + 2..].iter().position(|&b| b == b'}')?;
                let spec = std::str::from_utf8(&text[i + 2..end]).ok()?;
                out.extend_from_slice(modified(spec, value)?.as_bytes());
                i = end + 1;
            }
            b'$' => {
                out.extend_from_slice(value.to_string().as_bytes());
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(out)
}

fn modified(spec: &str, value: u64) -> Option<String> {
    let mut parts = spec.split(',');
    let offset: i64 = parts.next()?.trim().parse().ok()?;
    let width: usize = match parts.next() {
        Some(w) => w.trim().parse().ok()?,
        None => 0,
    };
    let base = parts.next().map(str::trim).unwrap_or("d");
    if parts.next().is_some() || width > 255 {
        return None;
    }
    let v = u64::try_from(i128::from(value) + i128::from(offset)).ok()?;
    Some(match base {
        "d" => format!("{v:0width$}"),
        "o" => format!("{v:0width$o}"),
        "x" => format!("{v:0width$x}"),
        "X" => format!("{v:0width$X}"),
        "n" | "N" => {
            let hex = if base == "n" {
                format!("{v:0width$x}")
            } else {
                format!("{v:0width$X}")
            };
            let nibbles: Vec<String> = hex.chars().rev().map(String::from).collect();
            nibbles.join(".")
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(range(b"1-10"), Some((1, 10, 1)));
        assert_eq!(range(b"0-254/2"), Some((0, 254, 2)));
        assert_eq!(range(b"10-1"), None);
        assert_eq!(range(b"1-10/0"), None);
        assert_eq!(range(b"0-99999999"), None, "bounded");
        assert_eq!(
            range(b"18446744073709551615-18446744073709551615"),
            Some((u64::MAX, u64::MAX, 1))
        );
    }

    #[test]
    fn substitution_as_bind_documents_it() {
        let s = |t: &str, v| String::from_utf8(substitute(t.as_bytes(), v).unwrap()).unwrap();
        assert_eq!(s("host-$", 7), "host-7");
        assert_eq!(s("$.0.0.10.in-addr.arpa.", 3), "3.0.0.10.in-addr.arpa.");
        assert_eq!(s("h${0,3,d}", 7), "h007");
        assert_eq!(s("h${10,4,x}", 7), "h0011");
        assert_eq!(s("h${0,2,X}", 255), "hFF");
        assert_eq!(s("${0,3,n}", 0x12), "2.1.0");
        assert_eq!(s("a\\$b$", 1), "a\\$b1", "an escaped $ stays");
        assert_eq!(s("$$", 4), "44");
        assert!(substitute(b"${x}", 1).is_none());
        assert!(substitute(b"${1,2,q}", 1).is_none());
        assert!(substitute(b"${-5}", 1).is_none(), "negative");
        assert!(
            substitute(b"${9223372036854775807}", u64::MAX).is_none(),
            "overflow"
        );
    }
}
