//! Small HTML helpers for the status page: escaping (every value that
//! goes into the page passes through [`esc`]) and times as people read
//! them.

use std::fmt::Write;

/// `text` escaped for HTML text and quoted attribute values.
pub(super) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Unix milliseconds as `HH:MM:SS UTC` (with the date when it is not
/// `now`'s day).
pub(super) fn clock(ms: u64, now_ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let time = format!(
        "{:02}:{:02}:{:02} UTC",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    );
    if days == now_ms / 1000 / 86_400 {
        time
    } else {
        let (y, m, d) = civil_from_days(days as i64);
        format!("{y:04}-{m:02}-{d:02} {time}")
    }
}

/// A duration in its two largest units, the smaller left out when
/// zero: `45s`, `9m 58s`, `1m`, `3h 2m`, `2d 1h`.
pub(super) fn span(ms: u64) -> String {
    let s = ms / 1000;
    let (big, big_unit, small, small_unit) = match s {
        0..60 => return format!("{s}s"),
        60..3600 => (s / 60, "m", s % 60, "s"),
        3600..86_400 => (s / 3600, "h", s % 3600 / 60, "m"),
        _ => (s / 86_400, "d", s % 86_400 / 3600, "h"),
    };
    let mut out = format!("{big}{big_unit}");
    if small > 0 {
        let _ = write!(out, " {small}{small_unit}");
    }
    out
}

/// `at` relative to `now`: `in 9m 58s` or `3m ago`.
pub(super) fn relative(at_ms: u64, now_ms: u64) -> String {
    if at_ms >= now_ms {
        format!("in {}", span(at_ms - now_ms))
    } else {
        format!("{} ago", span(now_ms - at_ms))
    }
}

/// A count with thousands separated by thin spaces (`12 345`).
pub(super) fn count(n: u64) -> String {
    let digits = n.to_string();
    let first = match digits.len() % 3 {
        0 => 3,
        short => short,
    }
    .min(digits.len());
    let (head, tail) = digits.split_at(first);
    let mut out = head.to_string();
    for group in tail.as_bytes().chunks(3) {
        out.push('\u{2009}');
        out.push_str(std::str::from_utf8(group).expect("ASCII digits"));
    }
    out
}

/// The proleptic Gregorian date of a day count since 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_that_could_be_markup_is_escaped() {
        assert_eq!(
            esc(r#"<script>alert("x&y's")</script>"#),
            "&lt;script&gt;alert(&quot;x&amp;y&#39;s&quot;)&lt;/script&gt;"
        );
        assert_eq!(esc("example.com."), "example.com.");
    }

    #[test]
    fn times_read_as_people_read_them() {
        // 2024-03-01 12:34:56 UTC
        let t = 1_709_296_496_000;
        assert_eq!(clock(t, t), "12:34:56 UTC");
        assert_eq!(clock(t, t + 86_400_000), "2024-03-01 12:34:56 UTC");
        assert_eq!(span(45_000), "45s");
        assert_eq!(span(598_000), "9m 58s");
        assert_eq!(span(3 * 3_600_000 + 120_000), "3h 2m");
        assert_eq!(span(90_000_000), "1d 1h");
        assert_eq!(relative(t + 5_000, t), "in 5s");
        assert_eq!(span(60_000), "1m");
        assert_eq!(relative(t, t + 180_000), "3m ago");
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1\u{2009}000");
        assert_eq!(count(12_345), "12\u{2009}345");
        assert_eq!(count(1_234_567), "1\u{2009}234\u{2009}567");
    }
}
