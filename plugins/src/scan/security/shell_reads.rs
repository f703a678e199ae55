//! Shell credential reads: an assignment of one environment lookup
//! (`NAME="$(printenv VAR)"`) or one gcloud access-token command, at an
//! unquoted statement boundary of a shell file or a closed shell-tagged
//! Markdown fence. Such a read is a reference, not an embedded secret (the
//! secret detectors skip it), but a credential-related one is reported as
//! runtime credential access to review. Nothing is executed: the shell
//! text is only lexed, and anything beyond the small grammar (backticks,
//! here-documents, `$'...'`) ends the exemptions for the rest of the range.

use std::sync::OnceLock;

use fancy_regex::Regex;

use super::super::text::found;
use crate::tree;

const VARIABLE: &str = r"(?:\$[A-Za-z_][A-Za-z0-9_]*|\$\{[A-Za-z_][A-Za-z0-9_]*\})";
const ENV_NAME: &str = r"[A-Za-z_][A-Za-z0-9_]*";

/// What a read asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ReadKind {
    Environment,
    Gcloud,
    GcloudImpersonation,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ShellRead {
    /// From the assigned name to the value's closing quote, inclusive.
    pub span: (usize, usize),
    pub kind: ReadKind,
    pub credential_related: bool,
}

struct Patterns {
    assignment: Regex,
    fence: Regex,
    conditional_parameter: Regex,
    unbraced_variable: Regex,
    credential_name: Regex,
    impersonation: Regex,
    printenv_argument: Regex,
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let env_arg = format!(r#"(?:{VARIABLE}|{ENV_NAME}|"(?:{VARIABLE}|{ENV_NAME})")"#);
        let scope_name = r"[A-Za-z0-9_][A-Za-z0-9_.:@-]*";
        let scope_arg = format!(r#"(?:{VARIABLE}|{scope_name}|"(?:{VARIABLE}|{scope_name})")"#);
        let scope_option = format!(
            r"[ \t]+--(?:project|configuration|account|impersonate-service-account)(?:=|[ \t]+){scope_arg}"
        );
        let gcloud = format!(
            r"gcloud(?:{scope_option})*[ \t]+auth[ \t]+(?:application-default[ \t]+)?print-access-token(?:{scope_option})*"
        );
        let read = format!(r"(?:printenv[ \t]+{env_arg}|{gcloud})");
        let quiet = r"(?:[ \t]+2>/dev/null)?(?:[ \t]+\|\|[ \t]+true)?";
        let compile = |p: &str| Regex::new(p).expect("the shell-read patterns compile");
        Patterns {
            assignment: compile(&format!(
                r#"(?m)(?:^|;)[ \t]*(?:(?:then|else|do)[ \t]+)?(?:export[ \t]+)?(?P<name>{ENV_NAME})="(?P<value>\$\({read}{quiet}\))"(?=[ \t]*(?:$|;)|[ \t]+#)"#
            )),
            fence: compile(r"(?m)^[ \t]{0,3}(?P<marker>`{3,}|~{3,})(?P<info>[^\r\n]*)$"),
            conditional_parameter: compile(&format!(r"^\$\{{{ENV_NAME}:[+-]")),
            unbraced_variable: compile(&format!(r"\${ENV_NAME}")),
            credential_name: compile(
                r"(?i)(?:^|_)(?:token|secret|password|passwd|credentials?|api_?key|private_?key|access_?key)(?:_|$)",
            ),
            impersonation: compile(r"[ \t]+--impersonate-service-account(?:=|[ \t]+)"),
            printenv_argument: compile(&format!(r"^\$\(printenv[ \t]+({env_arg})")),
        }
    })
}

fn credential_name(name: &str, indirect: bool) -> bool {
    let upper = name.to_uppercase();
    if !indirect && ["_NAME", "_VAR", "_ENV", "_FILE", "_PATH"].iter().any(|s| upper.ends_with(s)) {
        return false;
    }
    found(&patterns().credential_name, name)
}

fn assignment_read(
    name: &str,
    value: &str,
    whole: &str,
    span: (usize, usize),
    generic: &dyn Fn(&str) -> bool,
) -> ShellRead {
    let p = patterns();
    if value.starts_with("$(gcloud") {
        let kind = if found(&p.impersonation, value) { ReadKind::GcloudImpersonation } else { ReadKind::Gcloud };
        return ShellRead { span, kind, credential_related: true };
    }
    let argument = p
        .printenv_argument
        .captures(value)
        .ok()
        .flatten()
        .and_then(|c| c.get(1).map(|m| m.as_str().trim_matches('"').to_string()))
        .unwrap_or_default();
    let credential_related = credential_name(name, false)
        || credential_name(argument.trim_matches(['$', '{', '}']), argument.starts_with('$'))
        || generic(whole);
    ShellRead { span, kind: ReadKind::Environment, credential_related }
}

#[derive(Clone)]
struct Context {
    quote: Option<u8>,
    parentheses: usize,
    word_start: bool,
    parameter: bool,
}

impl Default for Context {
    /// A new context starts a word, as a statement does.
    fn default() -> Context {
        Context { quote: None, parentheses: 0, word_start: true, parameter: false }
    }
}

/// The reads at unquoted statement boundaries of `content[start..end]`.
fn statement_reads(content: &str, start: usize, end: usize, generic: &dyn Fn(&str) -> bool) -> Vec<ShellRead> {
    let p = patterns();
    let mut candidates = std::collections::HashMap::new();
    let range = &content[..end];
    let mut from = start;
    while let Ok(Some(captures)) = p.assignment.captures_from_pos(range, from) {
        let whole = captures.get(0).expect("a match");
        let (name, value) = (captures.name("name").expect("a name"), captures.name("value").expect("a value"));
        candidates.insert(
            whole.start(),
            (
                name.as_str().to_string(),
                value.as_str().to_string(),
                whole.as_str().to_string(),
                (name.start(), value.end() + 1),
            ),
        );
        from = if whole.end() > whole.start() { whole.end() } else { whole.start() + 1 };
        if from > range.len() {
            break;
        }
    }
    if candidates.is_empty() {
        return Vec::new();
    }
    let bytes = content.as_bytes();
    let mut contexts = vec![Context::default()];
    let mut statement_start = start;
    let mut reads = Vec::new();
    let mut index = start;
    while index < end {
        let top_level = contexts.len() == 1 && contexts[0].quote.is_none() && contexts[0].parentheses == 0;
        let c = bytes[index];
        if top_level && (index == statement_start || c == b';') {
            if let Some((name, value, whole, span)) = candidates.get(&index) {
                reads.push(assignment_read(name, value, whole, *span, generic));
            }
        }
        let starts = |s: &str| content[index..end].starts_with(s);
        let depth = contexts.len();
        let context = contexts.last_mut().expect("a context");
        if context.quote == Some(b'\'') {
            if c == b'\'' {
                context.quote = None;
            }
            index += 1;
            continue;
        }
        if context.parameter && (c == b'\'' || c == b'\\' || starts("$(")) {
            break;
        }
        if c == b'\\' {
            if index + 1 < end && bytes[index + 1] != b'\n' {
                context.word_start = false;
            }
            index += 2;
            continue;
        }
        if c == b'#' && context.quote.is_none() && context.word_start && !context.parameter {
            index = content[index..end].find('\n').map_or(end, |at| index + at);
            continue;
        }
        if c == b'`' || (context.quote.is_none() && (starts("$'") || starts("$\"") || starts("<<"))) {
            break;
        }
        if context.parameter && c == b'$' && !starts("${") {
            match p
                .unbraced_variable
                .find_from_pos(&content[..end], index)
                .ok()
                .flatten()
                .filter(|m| m.start() == index)
            {
                Some(variable) => {
                    index = variable.end();
                    continue;
                }
                None => break,
            }
        }
        if starts("${") {
            let Some(closing) = content[index + 2..end].find('}').map(|at| index + 2 + at) else { break };
            let inner = p.unbraced_variable.replace_all(&content[index + 2..closing], "");
            if inner.contains(['\'', '"', '`', '{', '}', '\\', '$']) {
                let conditional = found(&p.conditional_parameter, &content[index..end]);
                if context.quote.is_some() || depth >= 64 || !conditional {
                    break;
                }
                context.word_start = false;
                contexts.push(Context { parameter: true, ..Context::default() });
                index += 2;
                continue;
            }
            context.word_start = false;
            index = closing + 1;
            continue;
        }
        if starts("$(") {
            if depth >= 64 {
                break;
            }
            context.word_start = false;
            contexts.push(Context::default());
            index += 2;
            continue;
        }
        if c == b'"' {
            context.quote = if context.quote == Some(b'"') { None } else { Some(b'"') };
            context.word_start = false;
        } else if c == b'\'' && context.quote.is_none() {
            context.quote = Some(b'\'');
            context.word_start = false;
        } else if context.quote.is_none() {
            let parameter = context.parameter;
            // A context closed here takes the word-start flag with it.
            let mut closed = false;
            if c == b'}' && parameter {
                closed = true;
            } else if c == b'(' && !parameter {
                context.parentheses += 1;
            } else if c == b')' && !parameter {
                if context.parentheses > 0 {
                    context.parentheses -= 1;
                } else if depth > 1 {
                    closed = true;
                }
            }
            if closed {
                contexts.pop();
            } else if let Some(context) = contexts.last_mut() {
                context.word_start = b" \t\n;|&()<>".contains(&c);
            }
            if c == b'\n' && top_level {
                statement_start = index + 1;
            }
        }
        index += 1;
    }
    reads
}

/// The shell code of a file: all of a `.sh`/`.bash` file, or the closed
/// fences of a Markdown file whose info string starts with a shell.
fn shell_ranges(path: &str, content: &str) -> Vec<(usize, usize)> {
    let suffix = tree::suffix(path).to_lowercase();
    if matches!(suffix.as_str(), ".sh" | ".bash") {
        return vec![(0, content.len())];
    }
    if !matches!(suffix.as_str(), ".md" | ".mdx" | ".markdown") {
        return Vec::new();
    }
    let mut ranges = Vec::new();
    let mut opened: Option<(u8, usize, usize, bool)> = None;
    for fence in patterns().fence.captures_iter(content).filter_map(Result::ok) {
        let marker = fence.name("marker").expect("a marker").as_str();
        let info = fence.name("info").expect("an info string").as_str().trim();
        let whole = fence.get(0).expect("a match");
        match opened {
            None => {
                let language = info.split_whitespace().next().unwrap_or_default();
                opened = Some((
                    marker.as_bytes()[0],
                    marker.len(),
                    whole.end(),
                    matches!(language, "bash" | "sh" | "shell"),
                ));
            }
            Some((character, width, body, shell))
                if info.is_empty() && marker.as_bytes()[0] == character && marker.len() >= width =>
            {
                if shell {
                    ranges.push((body, whole.start()));
                }
                opened = None;
            }
            Some(_) => {}
        }
    }
    ranges
}

/// Every proven read of the file. `generic` says whether a generic secret
/// detector matches an assignment's text (a read exempts such a match, so
/// it must stay visible as credential access).
pub(super) fn reads(path: &str, content: &str, generic: &dyn Fn(&str) -> bool) -> Vec<ShellRead> {
    if !content.contains("$(") {
        return Vec::new();
    }
    shell_ranges(path, content)
        .into_iter()
        .flat_map(|(start, end)| statement_reads(content, start, end, generic))
        .collect()
}
