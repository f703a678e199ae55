//! Which fenced shell blocks of a skill are only literal, read-only
//! retrievals (`curl https://host/path`, a few flags that change nothing
//! sent): a `curl` there is not a risky instruction. A whole block must
//! qualify, so a download followed by its execution never does. The rules
//! are the reference's: POSIX shell words as Python's `shlex` splits them,
//! URLs as `urlsplit` reads them, one bounded query field at most.
//!
//! Offsets are byte offsets into the text (the reference counts
//! characters; the two differ only in the 64 KiB bound on a block).

use std::net::Ipv6Addr;

/// Flags that change nothing a request sends.
const READ_ONLY_FLAGS: [&str; 7] =
    ["--silent", "--show-error", "--fail", "--location", "--head", "--compressed", "--no-progress-meter"];
/// The longest block exempted.
const MAX_BLOCK: usize = 65_536;

/// A fence line's marker (three or more backticks or tildes) and what
/// follows it.
fn fence_boundary(line: &str) -> Option<(&str, &str)> {
    let body = line.strip_suffix("\r\n").or_else(|| line.strip_suffix(['\r', '\n'])).unwrap_or(line);
    let body = body.trim_start_matches([' ', '\t']);
    let marker = body.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let width = body.len() - body.trim_start_matches(marker).len();
    (width >= 3).then(|| body.split_at(width))
}

/// The byte spans of the fenced blocks (info string empty, `bash`, `sh`
/// or `shell`) whose every command line is a read-only retrieval, in
/// order. O(text).
pub(super) fn read_only_spans(text: &str) -> Vec<(usize, usize)> {
    if text.contains(['\u{b}', '\u{c}', '\u{85}', '\u{2028}', '\u{2029}']) {
        return Vec::new();
    }
    let mut spans = Vec::new();
    let (mut fence, mut body_start, mut offset, mut safe, mut saw_command) = (None::<String>, 0, 0, false, false);
    for line in super::super::text::lines_keeping_ends(text) {
        let boundary = fence_boundary(line);
        match &fence {
            None => {
                if let Some((marker, info)) = boundary {
                    fence = Some(marker.to_string());
                    safe = matches!(info.trim(), "" | "bash" | "sh" | "shell");
                    body_start = offset + line.len();
                    saw_command = false;
                }
            }
            Some(open)
                if boundary.is_some_and(|(marker, rest)| {
                    marker.starts_with(&open[..1]) && marker.len() >= open.len() && rest.trim().is_empty()
                }) =>
            {
                if safe && saw_command && offset - body_start <= MAX_BLOCK {
                    spans.push((body_start, offset));
                }
                fence = None;
            }
            Some(_) => {
                if line.trim_start().starts_with('#') {
                    safe = safe && !line.trim_end_matches(['\r', '\n']).ends_with('\\');
                } else if !line.trim().is_empty() {
                    safe = safe && read_only_command(line);
                    saw_command = true;
                }
            }
        }
        offset += line.len();
    }
    spans
}

/// Whether the line is one `curl` of one literal URL, with only flags
/// that change nothing sent (`-X`/`--request` only as `GET` or `HEAD`).
fn read_only_command(line: &str) -> bool {
    // A line broken by a lone `\r` keeps it, and fails as a control
    // character below, as in the reference.
    let command = match line.split_once('\n') {
        Some((command, _)) => command.strip_suffix('\r').unwrap_or(command),
        None => line,
    };
    if command.len() > 16_384 || command.contains(['$', '`', '|', ';', '&', '<', '>', '(', ')', '{', '}']) {
        return false;
    }
    if command.chars().any(|c| (c < ' ' && c != '\t') || c as u32 >= 127) {
        return false;
    }
    let Some(words) = shell_words(command) else { return false };
    if words.first().map(String::as_str) != Some("curl") {
        return false;
    }
    let mut saw_url = false;
    let mut args = words[1..].iter();
    while let Some(word) = args.next() {
        let short_flags = word.len() > 1 && word.starts_with('-') && word[1..].chars().all(|c| "fsSLI".contains(c));
        if READ_ONLY_FLAGS.contains(&word.as_str()) || short_flags {
            continue;
        }
        let mut url = word.as_str();
        if word == "-X" || word == "--request" {
            if !args.next().is_some_and(|method| method == "GET" || method == "HEAD") {
                return false;
            }
            continue;
        }
        if word == "--url" {
            url = args.next().map_or("", String::as_str);
        }
        if saw_url || !literal_retrieval_url(url) {
            return false;
        }
        saw_url = true;
    }
    saw_url
}

/// POSIX shell words as Python's `shlex.split` makes them: whitespace
/// separates, single quotes take everything literally, double quotes let
/// a backslash escape only `"` and `\`, a bare backslash escapes the next
/// character. `None` for an unclosed quote or a trailing backslash.
fn shell_words(command: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let (mut word, mut in_word) = (String::new(), false);
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\r' | '\n' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        other => word.push(other),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => match chars.next()? {
                            escaped @ ('"' | '\\') => word.push(escaped),
                            other => {
                                word.push('\\');
                                word.push(other);
                            }
                        },
                        other => word.push(other),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.push(chars.next()?);
            }
            other => {
                in_word = true;
                word.push(other);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Some(words)
}

/// A plain `http(s)` URL with a host (a name, an IPv4 address, or a
/// bracketed IPv6 address), an optional port from 1 to 65535, no user, no
/// brackets or braces after the host, and at most one query field: a
/// page, limit, per_page or offset of up to four digits, or a format
/// among json, xml, text, csv and yaml.
fn literal_retrieval_url(url: &str) -> bool {
    if url.len() > 4096 {
        return false;
    }
    let Some(rest) = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://")) else { return false };
    if url.chars().any(|c| c <= ' ' || c as u32 >= 127 || c == '\\') {
        return false;
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, after) = rest.split_at(authority_end);
    let (before_fragment, fragment) = after.split_once('#').unwrap_or((after, ""));
    let (path, query) = before_fragment.split_once('?').unwrap_or((before_fragment, ""));
    if authority.is_empty() || authority.contains('@') {
        return false;
    }
    if [path, query, fragment].iter().any(|part| part.contains(['[', ']', '{', '}'])) {
        return false;
    }
    let port = if let Some(bracketed) = authority.strip_prefix('[') {
        let Some((inside, after)) = bracketed.split_once(']') else { return false };
        if inside.is_empty() || inside.contains('[') {
            return false;
        }
        let (address, zone) = inside.split_once('%').unwrap_or((inside, ""));
        if inside.contains('%') && !zone_ok(zone) {
            return false;
        }
        if address.parse::<Ipv6Addr>().is_err() {
            return false;
        }
        match after {
            "" => None,
            port => match port.strip_prefix(':') {
                Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => Some(digits),
                _ => return false,
            },
        }
    } else {
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        };
        let host_ok = !host.is_empty() && host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
        let port_ok = port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        if !host_ok || !port_ok {
            return false;
        }
        port
    };
    if port.is_some_and(|p| p.parse::<u32>().map_or(true, |n| !(1..=65_535).contains(&n))) {
        return false;
    }
    if query.is_empty() {
        return true;
    }
    let Some((key, value)) = query.split_once('=') else { return false };
    match key {
        "page" | "limit" | "per_page" | "offset" => {
            (1..=4).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_digit())
        }
        "format" => matches!(value, "json" | "xml" | "text" | "csv" | "yaml"),
        _ => false,
    }
}

/// An IPv6 zone as the reference allows it: an optional `25` (an escaped
/// `%`), then 1 to 32 letters, digits, `_`, `.` or `-`.
fn zone_ok(zone: &str) -> bool {
    let valid =
        |z: &str| (1..=32).contains(&z.len()) && z.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    valid(zone) || zone.strip_prefix("25").is_some_and(valid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_as_shlex_splits_them() {
        for (command, words) in [
            ("curl -s https://a.example/x", Some(vec!["curl", "-s", "https://a.example/x"])),
            ("curl 'https://a.example/x y'", Some(vec!["curl", "https://a.example/x y"])),
            (r#"curl "a\"b" "c\d" e\ f"#, Some(vec!["curl", "a\"b", "c\\d", "e f"])),
            ("curl ''", Some(vec!["curl", ""])),
            ("curl 'open", None),
            ("curl end\\", None),
        ] {
            let words: Option<Vec<String>> = words.map(|w| w.into_iter().map(String::from).collect());
            assert_eq!(shell_words(command), words, "{command}");
        }
    }

    #[test]
    fn literal_retrievals() {
        for (url, literal) in [
            ("https://api.example.org/v1/items", true),
            ("http://127.0.0.1:8080/x", true),
            ("https://[::1]:443/x", true),
            ("https://example.org/x?page=2", true),
            ("https://example.org/x?format=json", true),
            ("https://example.org/x?page=12345", false),
            ("https://example.org/x?q=a", false),
            ("https://example.org/x?format", false),
            ("https://user@example.org/", false),
            ("https://example.org:0/", false),
            ("https://example.org:70000/", false),
            ("https://example.org:/", false),
            ("https://exa_mple.org/", false),
            ("https:///x", false),
            ("https://example.org/{x}", false),
            ("https://[nope]/", false),
            ("ftp://example.org/", false),
        ] {
            assert_eq!(literal_retrieval_url(url), literal, "{url}");
        }
    }

    #[test]
    fn only_whole_read_only_blocks_are_spans() {
        let text = "intro\n```bash\ncurl -fsSL https://a.example/x\n# a comment\ncurl --url https://b.example/y\n```\n\
                    ```sh\ncurl https://a.example/install.sh -o i.sh\nsh i.sh\n```\n";
        let spans = read_only_spans(text);
        assert_eq!(spans.len(), 1, "{spans:?}");
        let (from, to) = spans[0];
        assert!(text[from..to].starts_with("curl -fsSL") && text[from..to].ends_with("/y\n"));
    }
}
