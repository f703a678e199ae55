//! Hard-coded secrets: provider keys by their shapes (AWS, GitHub, GitLab,
//! Slack, OpenAI and Anthropic), private keys with a body, and generic
//! `password`/`secret`/`token`/`api_key` assignments of a quoted value of
//! eight characters or more, less the reference's exemptions: complete
//! environment or template references, bracketed placeholders, shell
//! variables and reserved template markers in quotes, a generated
//! `openssl rand` token, TypeScript field-name maps and screen-route maps,
//! proven shell credential reads, and on example surfaces (documentation,
//! skills, tests, examples) placeholder-looking and synthetic values.
//!
//! Only the first retained secret of a file is reported (its line). One
//! exemption is not made here: the reference proves, by parsing a Python
//! file, that `name = "$ARGUMENTS"` is a whole assignment; this scanner
//! parses no Python and reports such a line.

use std::sync::OnceLock;

use fancy_regex::{Captures, Regex};

use super::super::text::{self, found};
use super::DOCUMENTATION_EXTENSIONS;
use crate::tree;

/// Matches read in one file before the scan gives up.
pub(super) const MAX_MATCHES_PER_FILE: usize = 10_000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Provider,
    Generic,
}

struct Detector {
    pattern: Regex,
    kind: Kind,
    group: usize,
}

struct Patterns {
    detectors: Vec<Detector>,
    private_key_header: Regex,
    test_file: Regex,
    illustrative: [Regex; 3],
    providers: Vec<(Regex, usize)>,
    placeholder_run: Regex,
    pure_shell_expansion: Regex,
    pure_template_expansion: Regex,
    bracketed: Regex,
    symbolic_reference: Regex,
    shell_option_prefix: Regex,
    generated_token: Regex,
    field_name_map: Regex,
    field_name_entry: Regex,
    screen_route_map: Regex,
    screen_route_entry: Regex,
    screen_route_entry_whole: Regex,
}

fn compile(pattern: &str) -> Regex {
    Regex::new(pattern).expect("the secret patterns compile")
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let provider = |p: &str| Detector { pattern: compile(p), kind: Kind::Provider, group: 0 };
        let generic = |p: &str| Detector { pattern: compile(p), kind: Kind::Generic, group: 1 };
        Patterns {
            detectors: vec![
                provider(r"AKIA[0-9A-Z]{16}"),
                Detector {
                    pattern: compile(r#"(?i)aws_secret_access_key\s*[=:]\s*["']?([A-Za-z0-9/+=]{40})"#),
                    kind: Kind::Provider,
                    group: 1,
                },
                generic(r#"(?i)password\s*[=:]\s*["']([^\s"']{8,})"#),
                generic(r#"(?i)secret\s*[=:]\s*["']([^\s"']{8,})"#),
                generic(r#"(?i)token\s*[=:]\s*["']([^\s"']{8,})"#),
                generic(r#"(?i)api_?key\s*[=:]\s*["']([^\s"']{8,})"#),
                generic(r#"API_KEY\s*[=:]\s*["']([^\s"']{8,})"#),
                generic(r#"PRIVATE_KEY\s*[=:]\s*["']([^\s"']{8,})"#),
                provider(r"ghp_[A-Za-z0-9]{36}"),
                provider(r"gho_[A-Za-z0-9]{36}"),
                provider(r"ghu_[A-Za-z0-9]{36}"),
                provider(r"ghs_[A-Za-z0-9]{36}"),
                provider(r"github_pat_[A-Za-z0-9_]{20,}"),
                provider(r"glpat-[A-Za-z0-9\-]{20}"),
                provider(r"xox[bpas]-[A-Za-z0-9\-]{10,}"),
                provider(r"xoxe-[A-Za-z0-9\-]{10,}"),
                provider(r"xoxr-[A-Za-z0-9\-]{10,}"),
                provider(r"xapp-[A-Za-z0-9\-]{10,}"),
                provider(r"(?<![A-Za-z0-9])sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"),
            ],
            private_key_header: compile(r"-----BEGIN (?P<label>(?:RSA |EC |DSA |OPENSSH )?PRIVATE KEY)-----"),
            test_file: compile(r"(?i)(?:^test_|\.test\.[^.]+$|\.spec\.[^.]+$|_test\.[^.]+$)"),
            illustrative: [
                compile(r"(?i)\b(?:assert|fixture|mock|pytest|test\(|writeandstage|detectsecrets)\b"),
                compile(r"(?i)\b(?:example|sample|demo|bad|wrong|good|correct|never|always)\b"),
                compile(r"(?i)hardcoded secret|in source code|environment variable|env var|set via|\.env"),
            ],
            providers: vec![
                (compile(r"^AKIA(?P<payload>[0-9A-Z]+)$"), 16),
                (compile(r"^(?:ghp_|gho_|ghu_|ghs_)(?P<payload>[A-Za-z0-9]+)$"), 36),
                (compile(r"^github_pat_(?P<payload>[A-Za-z0-9_]+)$"), 20),
                (compile(r"^glpat-(?P<payload>[A-Za-z0-9\-]+)$"), 20),
                (compile(r"^(?:xox[bpas]-|xoxe-|xoxr-|xapp-)(?P<payload>[A-Za-z0-9\-]+)$"), 10),
                (compile(r"^sk-(?:proj-|ant-)?(?P<payload>[A-Za-z0-9_-]+)$"), 20),
            ],
            placeholder_run: compile(r"(?i)(?:^|[-_])(x{4,}|\*{3,})(?:[-_]|$)"),
            pure_shell_expansion: compile(
                r"^\$\{[A-Za-z_][A-Za-z0-9_]*(?:(?::-|-|:=|=|:\?|\?|:\+|\+)(?:\$\{[A-Za-z_][A-Za-z0-9_]*\}|\$[A-Za-z_][A-Za-z0-9_]*)?)?\}$",
            ),
            pure_template_expansion: compile(r"^\{\{[^}]+\}\}$"),
            bracketed: compile(
                r"^(?:<[A-Za-z][A-Za-z0-9 _.,:()/\-]{0,80}>|\[[A-Za-z][A-Za-z0-9 _.,:()/\-]{0,120}\])$",
            ),
            symbolic_reference: compile(r"^\$[A-Z_][A-Z0-9_]*$"),
            shell_option_prefix: compile(
                r"^[ \t]*(?:-[ \t]+)?[A-Za-z0-9_./-]+(?:[ \t]+[A-Za-z0-9_./-]+)*[ \t]+--[A-Za-z0-9_-]*$",
            ),
            generated_token: compile(r#"^\$\(openssl rand -(?:hex|base64) [1-9][0-9]{0,3}\)"(?=$|[\s;])"#),
            field_name_map: compile(
                r"(?m)^[ \t]*const [A-Za-z_$][\w$]*[ \t]*:[ \t]*Record<[^;\n{}]{1,160}>[ \t]*=[ \t]*\{(?P<body>[^{}]{1,4096})\}[ \t]*;",
            ),
            field_name_entry: compile(r#"^\s*([A-Za-z][A-Za-z0-9_]*)\s*:\s*(["'])([A-Za-z][A-Za-z0-9_]*)\2\s*$"#),
            screen_route_map: compile(r"\bscreens\s*:\s*\{(?P<body>[^{}]{1,4096})\}"),
            screen_route_entry: compile(r#"\s*([A-Z][A-Za-z]*)\s*:\s*(["'])([a-z]+(?:-[a-z]+)*)\2\s*"#),
            screen_route_entry_whole: compile(r#"^\s*([A-Z][A-Za-z]*)\s*:\s*(["'])([a-z]+(?:-[a-z]+)*)\2\s*$"#),
        }
    })
}

/// Whether a generic detector (`password`, `secret`, `token`, `api_key`
/// assignments) matches `text`.
pub(super) fn generic_match(text: &str) -> bool {
    patterns().detectors.iter().filter(|d| d.kind == Kind::Generic).any(|d| found(&d.pattern, text))
}

fn suffix_lower(path: &str) -> String {
    tree::suffix(path).to_lowercase()
}

fn documentation(path: &str) -> bool {
    DOCUMENTATION_EXTENSIONS.contains(&suffix_lower(path).as_str())
}

fn shell_or_documentation(path: &str) -> bool {
    documentation(path) || matches!(suffix_lower(path).as_str(), ".sh" | ".bash")
}

/// Python's `str.strip()` of a candidate, then its quotes, then a
/// `Bearer ` prefix.
fn normalize(value: &str) -> &str {
    let normalized = value.trim().trim_matches(['"', '\'', '`']);
    match normalized.get(..7) {
        Some(prefix) if prefix.eq_ignore_ascii_case("bearer ") => normalized[7..].trim(),
        _ => normalized,
    }
}

fn interpolated(value: &str) -> bool {
    let p = patterns();
    let normalized = normalize(value);
    found(&p.pure_shell_expansion, normalized) || found(&p.pure_template_expansion, normalized)
}

/// A whole `<...>` or `[...]` of word-like text: not credential-shaped (a
/// lone token with a digit, or a run mixing cases and digits).
fn bracketed_placeholder(candidate: &str) -> bool {
    if !found(&patterns().bracketed, candidate) {
        return false;
    }
    let inner = &candidate[1..candidate.len() - 1];
    let segments: Vec<&str> = inner.split(|c: char| !c.is_ascii_alphanumeric()).filter(|s| !s.is_empty()).collect();
    !segments.iter().any(|segment| {
        segment.bytes().any(|b| b.is_ascii_digit())
            && (segments.len() == 1
                || (segment.bytes().any(|b| b.is_ascii_lowercase()) && segment.bytes().any(|b| b.is_ascii_uppercase())))
    })
}

fn bracketed_literal(content: &str, start: usize, value: &str) -> bool {
    let quote = content[..start].chars().next_back();
    match quote {
        Some(q @ ('"' | '\'' | '`')) => {
            let Some(end) = content[start..].find(q).map(|at| start + at) else { return false };
            if content[start..end].contains('\n') {
                return false;
            }
            bracketed_placeholder(content[start..end].trim())
        }
        _ => bracketed_placeholder(value.trim().trim_matches(['"', '\'', '`'])),
    }
}

fn placeholder(value: &str) -> bool {
    let normalized = normalize(value);
    let lowered = normalized.to_lowercase();
    if normalized.is_empty() || interpolated(normalized) || bracketed_placeholder(normalized) {
        return true;
    }
    if normalized.contains("...") || normalized.contains('…') {
        return true;
    }
    if ["your-", "your_", "your", "example-", "sample-", "demo-"].iter().any(|p| lowered.starts_with(p)) {
        return true;
    }
    if ["-here", "_here", "example", "sample"].iter().any(|s| lowered.ends_with(s)) {
        return true;
    }
    if ["redacted", "changeme", "set-at-runtime", "set_at_runtime"].contains(&lowered.as_str()) {
        return true;
    }
    found(&patterns().placeholder_run, normalized)
}

fn alnum_lower(value: &str) -> String {
    normalize(value).to_lowercase().chars().filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit()).collect()
}

/// The longest run of consecutive characters (`abcd`, `1234`) and how
/// many characters are in runs of four or more.
fn ascending_runs(value: &str) -> (usize, usize) {
    let chars: Vec<char> = value.chars().collect();
    if chars.is_empty() {
        return (0, 0);
    }
    let (mut longest, mut current, mut coverage) = (1, 1, 0);
    for pair in chars.windows(2) {
        if pair[1] as u32 == pair[0] as u32 + 1 {
            current += 1;
            longest = longest.max(current);
        } else {
            if current >= 4 {
                coverage += current;
            }
            current = 1;
        }
    }
    if current >= 4 {
        coverage += current;
    }
    (longest, coverage)
}

/// A provider key's payload after its prefix, and the length a real one
/// has at least.
fn provider_payload(value: &str) -> Option<(String, usize)> {
    let normalized = normalize(value);
    patterns().providers.iter().find_map(|(pattern, minimum)| {
        let captures = pattern.captures(normalized).ok().flatten()?;
        Some((captures.name("payload")?.as_str().to_string(), *minimum))
    })
}

fn synthetic_provider(value: &str) -> bool {
    let Some((payload, _)) = provider_payload(value) else { return false };
    let normalized = alnum_lower(&payload);
    if normalized.len() < 8 {
        return false;
    }
    let (longest, coverage) = ascending_runs(&normalized);
    longest >= 8 && coverage as f64 / normalized.chars().count() as f64 >= 0.6
}

fn incomplete_provider(value: &str) -> bool {
    provider_payload(value).is_some_and(|(payload, minimum)| alnum_lower(&payload).chars().count() < minimum)
}

const EXAMPLE_PATH_HINTS: [&str; 22] = [
    "docs",
    "doc",
    "skills",
    "skill",
    "prompts",
    "prompt",
    "instructions",
    "instruction",
    "examples",
    "example",
    "samples",
    "sample",
    "guides",
    "guide",
    "tutorials",
    "tutorial",
    "rules",
    "tests",
    "test",
    "__tests__",
    "fixtures",
    "fixture",
];

fn example_surface(path: &str) -> bool {
    documentation(path)
        || path.split('/').any(|part| EXAMPLE_PATH_HINTS.contains(&part.to_lowercase().as_str()))
        || found(&patterns().test_file, tree::file_name(path))
}

/// The `\n` offsets of a text, for line numbers (1-based) of offsets.
pub(super) struct Lines {
    newlines: Vec<usize>,
}

impl Lines {
    pub(super) fn of(text: &str) -> Lines {
        Lines { newlines: text.match_indices('\n').map(|(at, _)| at).collect() }
    }

    pub(super) fn number(&self, offset: usize) -> usize {
        self.newlines.partition_point(|at| *at < offset) + 1
    }
}

const ILLUSTRATIVE_PATH_HINTS: [&str; 5] = ["commands", "examples", "prompts", "rules", "skills"];

fn illustrative_context(path: &str, lines: &[&str], line_number: usize) -> bool {
    if path.split('/').any(|part| ILLUSTRATIVE_PATH_HINTS.contains(&part.to_lowercase().as_str())) {
        return true;
    }
    let start = line_number.saturating_sub(3);
    let end = (line_number + 2).min(lines.len());
    let context = lines.get(start..end).map(|l| l.join("\n")).unwrap_or_default();
    patterns().illustrative.iter().any(|pattern| found(pattern, &context))
}

fn private_key_placeholder(body: &[String]) -> bool {
    if placeholder(&body.join("\n")) {
        return true;
    }
    body.iter().map(|line| line.to_lowercase()).any(|line| {
        ["mii...", "[redacted]", "redacted", "secret-key-material"].contains(&line.as_str())
            || line.contains("redacted")
    })
}

fn inline_private_key_body(line: &str, header: &str) -> Vec<String> {
    let Some(at) = line.find(header) else { return Vec::new() };
    let tail = &line[at + header.len()..];
    if !tail.contains("\\n") {
        return Vec::new();
    }
    tail.split("\\n")
        .skip(1)
        .map(|fragment| fragment.trim().trim_matches(['"', '\'', '`', ')', ',', ';', '}', ']']).to_string())
        .filter(|fragment| !fragment.is_empty())
        .collect()
}

fn first_private_key_line(path: &str, content: &str, lines: &[&str], numbers: &Lines) -> Option<usize> {
    let example = example_surface(path);
    for header in patterns().private_key_header.captures_iter(content).filter_map(Result::ok) {
        let whole = header.get(0).expect("a match");
        let line_number = numbers.number(whole.start());
        let footer = format!("-----END {}-----", header.name("label").map_or("", |m| m.as_str()));
        let mut body = lines.get(line_number - 1).map_or_else(Vec::new, |l| inline_private_key_body(l, whole.as_str()));
        let mut has_footer = false;
        for candidate in lines.iter().skip(line_number) {
            let stripped = candidate.trim();
            if stripped.is_empty() {
                if !body.is_empty() {
                    break;
                }
                continue;
            }
            if stripped == footer {
                has_footer = true;
                break;
            }
            if stripped.starts_with("-----END ") || stripped.starts_with("-----BEGIN ") || stripped == "```" {
                break;
            }
            body.push(stripped.to_string());
        }
        if body.is_empty() || (example && private_key_placeholder(&body)) {
            continue;
        }
        if body.concat().chars().count() >= 32 || has_footer {
            return Some(line_number);
        }
    }
    None
}

/// Spans (byte offsets) where a generic match is no secret: the bodies of
/// TypeScript field-name maps whose every value is its key in another
/// case, and the password-navigation entries of screen-route maps.
fn field_and_route_spans(path: &str, content: &str) -> Vec<(usize, usize)> {
    let p = patterns();
    let mut spans = Vec::new();
    let suffix = suffix_lower(path);
    if matches!(suffix.as_str(), ".ts" | ".tsx") {
        for map in p.field_name_map.captures_iter(content).filter_map(Result::ok) {
            let body = map.name("body").expect("a body");
            let entries: Vec<&str> = body.as_str().trim().trim_end_matches(',').split(',').collect();
            if entries.len() < 2 {
                continue;
            }
            let case_derived = entries.iter().all(|entry| {
                let Some(pair) = p.field_name_entry.captures(entry).ok().flatten() else { return false };
                let group = |i: usize| pair.get(i).map_or("", |m| m.as_str()).to_string();
                let (mut key, mut value) = (group(1), group(3));
                if key.starts_with(|c: char| c.is_uppercase()) {
                    std::mem::swap(&mut key, &mut value);
                }
                let lower_camel =
                    key.starts_with(|c: char| c.is_ascii_lowercase()) && key.chars().all(|c| c.is_ascii_alphanumeric());
                lower_camel && value == snake_upper(&key)
            });
            if case_derived {
                spans.push((body.start(), body.end()));
            }
        }
    }
    if documentation(path) || matches!(suffix.as_str(), ".js" | ".jsx" | ".ts" | ".tsx") {
        for map in p.screen_route_map.captures_iter(content).filter_map(Result::ok) {
            let body = map.name("body").expect("a body");
            let entries: Vec<&str> = body.as_str().trim().trim_end_matches(',').split(',').collect();
            if entries.len() < 2 {
                continue;
            }
            let kebab_routes = entries.iter().all(|entry| {
                let Some(pair) = p.screen_route_entry_whole.captures(entry).ok().flatten() else { return false };
                let group = |i: usize| pair.get(i).map_or("", |m| m.as_str());
                group(3) == kebab_lower(group(1))
            });
            if !kebab_routes {
                continue;
            }
            for pair in p.screen_route_entry.captures_iter(body.as_str()).filter_map(Result::ok) {
                if ["ForgotPassword", "ResetPassword", "ChangePassword"]
                    .contains(&pair.get(1).map_or("", |m| m.as_str()))
                {
                    let whole = pair.get(0).expect("a match");
                    spans.push((body.start() + whole.start(), body.start() + whole.end()));
                }
            }
        }
    }
    spans.sort_unstable();
    spans
}

/// `camelCase` as `CAMEL_CASE` (a lower-case letter or digit then an
/// upper-case one gets an underscore between).
fn snake_upper(key: &str) -> String {
    let mut out = String::new();
    let mut previous: Option<char> = None;
    for c in key.chars() {
        if c.is_ascii_uppercase() && previous.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit()) {
            out.push('_');
        }
        out.push(c);
        previous = Some(c);
    }
    out.to_uppercase()
}

/// `ForgotPassword` as `forgot-password`.
fn kebab_lower(key: &str) -> String {
    let mut out = String::new();
    let mut previous: Option<char> = None;
    for c in key.chars() {
        if c.is_ascii_uppercase() && previous.is_some_and(|p| p.is_ascii_lowercase()) {
            out.push('-');
        }
        out.push(c);
        previous = Some(c);
    }
    out.to_lowercase()
}

/// A quoted shell variable or reserved template marker, where the file's
/// kind says it is a reference and the literal ends the statement.
fn symbolic_reference(path: &str, content: &str, match_start: usize, value: (usize, usize)) -> bool {
    let p = patterns();
    let (start, value_end) = value;
    let Some(quote) = content[..start].chars().next_back().filter(|c| matches!(c, '"' | '\'')) else { return false };
    let suffix = suffix_lower(path);
    if quote == '\'' && shell_or_documentation(path) {
        return false;
    }
    let Some(end) = content[start..].find(quote).map(|at| start + at) else { return false };
    if value_end > end || !found(&p.symbolic_reference, &content[start..end]) {
        return false;
    }
    let line_start = content[..match_start].rfind('\n').map_or(0, |at| at + 1);
    let shell_option = found(&p.shell_option_prefix, &content[line_start..match_start]);
    let marker = &content[start..end] == "$ARGUMENTS";
    let shell_file = matches!(suffix.as_str(), ".sh" | ".bash");
    if !(marker || shell_file || (documentation(path) && shell_option)) {
        return false;
    }
    if suffix == ".py" {
        return false;
    }
    let after = end + 1;
    let rest = &content[after..];
    let spaces = rest.len() - rest.trim_start_matches([' ', '\t']).len();
    let terminated = rest[spaces..].is_empty() || rest[spaces..].starts_with([';', '\r', '\n']);
    if !terminated {
        return false;
    }
    let after = after + spaces;
    if after == content.len() || content[after..].starts_with(';') {
        return true;
    }
    if content[after..].trim().is_empty() {
        return true;
    }
    shell_or_documentation(path) && shell_option
}

fn generated_token(path: &str, content: &str, value: (usize, usize)) -> bool {
    if !shell_or_documentation(path) {
        return false;
    }
    let (start, end) = value;
    if start == 0 || !content[..start].ends_with('"') {
        return false;
    }
    match patterns().generated_token.find(&content[start..]).ok().flatten() {
        Some(generated) => end <= start + generated.end(),
        None => false,
    }
}

/// Whether a detector's match is one of the reference's exemptions.
#[allow(clippy::too_many_arguments)]
fn skipped(
    path: &str,
    content: &str,
    detector: &Detector,
    captures: &Captures<str>,
    lines: &[&str],
    numbers: &Lines,
    spans: &[(usize, usize)],
    shell_reads: &[(usize, usize)],
) -> bool {
    let whole = captures.get(0).expect("a match");
    let value = captures.get(detector.group).expect("the value group");
    let candidate = value.as_str().trim();
    if interpolated(candidate) {
        return true;
    }
    if detector.kind == Kind::Generic && bracketed_literal(content, value.start(), value.as_str()) {
        return true;
    }
    if detector.kind == Kind::Generic && provider_payload(candidate).is_none() {
        if symbolic_reference(path, content, whole.start(), (value.start(), value.end())) {
            return true;
        }
        if generated_token(path, content, (value.start(), value.end())) {
            return true;
        }
        for spans in [spans, shell_reads] {
            let index = spans.partition_point(|(start, _)| *start <= whole.start());
            if index > 0 && spans[index - 1].0 <= whole.start() && whole.end() <= spans[index - 1].1 {
                return true;
            }
        }
    }
    if !example_surface(path) {
        return false;
    }
    if placeholder(candidate) {
        return true;
    }
    let provider = detector.kind == Kind::Provider || provider_payload(candidate).is_some();
    if !provider {
        let normalized = normalize(candidate).to_lowercase();
        return [
            "admin123",
            "adminpass123",
            "mypassword123",
            "password123",
            "secret-value",
            "secure123",
            "securep@ss1",
            "testpass123",
        ]
        .contains(&normalized.as_str());
    }
    if !illustrative_context(path, lines, numbers.number(whole.start())) {
        return false;
    }
    synthetic_provider(candidate) || incomplete_provider(candidate)
}

/// The line of the file's first retained secret, or none; an error when
/// the file holds more matches than the scan reads.
pub(super) fn first_secret_line(
    path: &str,
    content: &str,
    shell_reads: &[(usize, usize)],
) -> Result<Option<usize>, String> {
    let numbers = Lines::of(content);
    let lines = text::lines(content);
    let spans = field_and_route_spans(path, content);
    let mut first_line = first_private_key_line(path, content, &lines, &numbers);
    let mut first_offset: Option<usize> = None;
    let mut seen = 0;
    for detector in &patterns().detectors {
        for captures in detector.pattern.captures_iter(content).filter_map(Result::ok) {
            seen += 1;
            if seen > MAX_MATCHES_PER_FILE {
                return Err(format!("secret matches exceeded {MAX_MATCHES_PER_FILE} in {path}"));
            }
            let start = captures.get(0).expect("a match").start();
            if first_offset.is_some_and(|first| start >= first) {
                break;
            }
            if skipped(path, content, detector, &captures, &lines, &numbers, &spans, shell_reads) {
                continue;
            }
            first_offset = Some(start);
            let line = numbers.number(start);
            if first_line.is_none_or(|first| line < first) {
                first_line = Some(line);
            }
        }
    }
    Ok(first_line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_and_is_not_a_secret() {
        let secret = |path: &str, text: &str| first_secret_line(path, text, &[]).unwrap();
        for (path, text, line) in [
            ("src/a.js", "const key = 'AKIAIOSFODNN7ABCDEFG';", Some(1)),
            ("src/a.js", "x\nconst password = \"hunter2hunter2\";", Some(2)),
            ("src/a.js", "const password = \"${DB_PASSWORD}\";", None),
            ("src/a.js", "const token = \"<your token here>\";", None),
            ("docs/setup.md", "api_key = \"your-api-key-here\"", None),
            ("src/a.py", "api_key = \"your-api-key-here\"", Some(1)),
            ("run.sh", "TOKEN=\"$(openssl rand -hex 32)\"", None),
            ("run.sh", "curl --token \"$API_TOKEN\"", None),
            ("docs/x.md", "const t = 'ghp_abcdefghijklmnopqrstuvwxyz0123456789'; // example", None),
            ("src/x.ts", "const t = 'ghp_abcdefghijklmnopqrstuvwxyz0123456789';", Some(1)),
            ("k.pem", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQ\n-----END PRIVATE KEY-----\n", Some(1)),
        ] {
            assert_eq!(secret(path, text), line, "{path}: {text}");
        }
    }
}
