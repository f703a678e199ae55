//! Text as the reference's Python reads it, for every check: bytes decoded
//! with the invalid ones dropped (`errors="ignore"`), lines cut where
//! `str.splitlines` cuts them, a URL's scheme where `urlparse` finds one,
//! and a pattern's first match (an engine error, which only a pattern's
//! backtracking limit raises, counts as no match).

use fancy_regex::Regex;

/// The valid UTF-8 of `bytes`, the rest dropped.
pub(super) fn ignoring_errors(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        text.push_str(chunk.valid());
    }
    text
}

/// Whether `pattern` matches somewhere in `text`.
pub(super) fn found(pattern: &Regex, text: &str) -> bool {
    pattern.is_match(text).unwrap_or(false)
}

/// Whether `c` ends a line for `str.splitlines` (`\r\n` counts as one).
fn line_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{b}' | '\u{c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// `text`'s lines with their endings, split where `str.splitlines` splits.
pub(super) fn lines_keeping_ends(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if !line_break(c) {
            continue;
        }
        let end =
            if c == '\r' && chars.next_if(|(_, next)| *next == '\n').is_some() { at + 2 } else { at + c.len_utf8() };
        lines.push(&text[start..end]);
        start = end;
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

/// `text`'s lines without their endings (`str.splitlines()`).
pub(super) fn lines(text: &str) -> Vec<&str> {
    lines_keeping_ends(text)
        .into_iter()
        .map(|line| match line.strip_suffix("\r\n") {
            Some(body) => body,
            None => line.strip_suffix(line_break).unwrap_or(line),
        })
        .collect()
}

/// The scheme `urlparse` finds in `reference`: letters, digits, `+`, `-`
/// and `.` before a `:`, starting with a letter.
pub(super) fn url_scheme(reference: &str) -> Option<&str> {
    let (scheme, _) = reference.split_once(':')?;
    let valid = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some(scheme)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_as_splitlines_cuts_them() {
        let text = "a\r\nb\rc\u{2028}d\n\ne";
        assert_eq!(lines_keeping_ends(text), ["a\r\n", "b\r", "c\u{2028}", "d\n", "\n", "e"]);
        assert_eq!(lines(text), ["a", "b", "c", "d", "", "e"]);
        assert_eq!(lines("x\n"), ["x"]);
        assert_eq!(ignoring_errors(b"a\xffb"), "ab");
    }

    #[test]
    fn schemes_as_urlparse_finds_them() {
        for (reference, scheme) in [
            ("http://x", Some("http")),
            ("file:/x", Some("file")),
            ("./p", None),
            ("p", None),
            ("1a:b", None),
            ("a b:c", None),
        ] {
            assert_eq!(url_scheme(reference), scheme, "{reference}");
        }
    }
}
