//! Skill Security (5 points here; the reference's optional Cisco skill
//! analyser would add 15): with a declared skills folder holding
//! `SKILL.md` files, no skill tells the agent to read `.env`, fetch or
//! send with `curl`/`wget` to a URL on the same line, run through
//! `bash -lc`/`sh -lc`, or touch SSH keys.
//!
//! The Cisco analyser's three checks are reported as not run (0 of 0), as
//! the reference reports them when the analyser is not installed; this
//! scanner never guesses what an outside service would have said. A
//! `curl` inside a fenced shell block made only of literal read-only
//! retrievals (a GET of a plain URL, a few harmless flags) is not a
//! finding, as in the reference ([`curl::read_only_spans`]).

mod curl;

use std::sync::OnceLock;

use fancy_regex::Regex;
use serde_json::Value;

use super::text::{self, ignoring_errors};
use super::Plugin;
use crate::report::{Check, Finding, Severity};
use crate::tree;

const CATEGORY: &str = "skill-security";
const CISCO_CHECKS: [&str; 3] = ["Cisco skill scan completed", "No elevated Cisco skill findings", "Skills analyzable"];

/// A risky instruction: how it is found, and what it does.
enum Pattern {
    Plain(Regex),
    /// A command, then a URL later on the same line.
    CommandUrl(Regex),
}

struct Patterns {
    risky: Vec<(Pattern, &'static str)>,
    url: Regex,
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let compile = |pattern: &str| Regex::new(pattern).expect("the skill patterns compile");
        Patterns {
            risky: vec![
                (Pattern::Plain(compile(r"(?i)cat\s+\.env")), "reads the local .env file"),
                (
                    Pattern::CommandUrl(compile(r"(?i)curl\s+")),
                    "uses curl with uploads, shell composition, or arguments requiring review",
                ),
                (Pattern::CommandUrl(compile(r"(?i)wget\s+")), "downloads or sends data over the network"),
                (Pattern::Plain(compile(r"(?i)\b(?:bash|sh)\s+-lc\b")), "runs through a shell wrapper"),
                (
                    Pattern::Plain(compile(r"(?i)(?:~/\.ssh|id_rsa|authorized_keys)")),
                    "references sensitive SSH material",
                ),
            ],
            url: compile(r#"(?i)https?://[^\s`"']+"#),
        }
    })
}

pub(super) fn checks(plugin: &Plugin) -> Vec<Check> {
    let skills = match skill_files(plugin) {
        Err(why) => return CISCO_CHECKS.into_iter().map(|name| Check::weightless(name, why.clone())).collect(),
        Ok(files) => files,
    };
    let mut checks: Vec<Check> = CISCO_CHECKS
        .into_iter()
        .map(|name| Check::weightless(name, "The Cisco skill analyser is not run by this scanner."))
        .collect();
    checks.push(local_instructions(plugin, &skills));
    checks
}

/// The `SKILL.md` files at any depth of the declared skills folder, or
/// why the category does not apply (the reference's reasons).
fn skill_files(plugin: &Plugin) -> Result<Vec<String>, String> {
    let Some(manifest) = &plugin.manifest else {
        return Err("plugin.json is unavailable; skill security checks skipped.".into());
    };
    let declared = match manifest.get("skills") {
        Some(Value::String(path)) if !path.trim().is_empty() => path,
        _ => return Err("No skills declared in plugin.json.".into()),
    };
    let Some(folder) = tree::join("", declared) else {
        return Err(format!("Skills directory \"{declared}\" is unsafe; skill security checks skipped."));
    };
    if !plugin.tree.is_dir(&folder) {
        return Err(format!("Skills directory \"{declared}\" is missing; see best-practice checks."));
    }
    let files: Vec<String> = plugin
        .tree
        .under(&folder)
        .filter(|(path, _)| tree::file_name(path) == "SKILL.md")
        .map(|(p, _)| p.to_string())
        .collect();
    if files.is_empty() {
        return Err(format!("No safe SKILL.md files were found in \"{declared}\"."));
    }
    Ok(files)
}

fn local_instructions(plugin: &Plugin, skills: &[String]) -> Check {
    const NAME: &str = "No risky local skill instructions";
    let mut findings = Vec::new();
    for path in skills {
        let text = join_continuations(&ignoring_errors(plugin.tree.file(path).unwrap_or_default()));
        let safe_curl = curl::read_only_spans(&text);
        for (index, (pattern, behaviour)) in patterns().risky.iter().enumerate() {
            let exempt = |start: usize, end: usize| {
                index == 1 && safe_curl.iter().any(|(from, to)| *from <= start && end <= *to)
            };
            let matched = match pattern {
                Pattern::Plain(regex) => regex.find(&text).ok().flatten().map(|m| m.as_str().to_string()),
                Pattern::CommandUrl(prefix) => command_urls(prefix, &text)
                    .find(|(start, end)| !exempt(*start, *end))
                    .map(|(s, e)| text[s..e].to_string()),
            };
            if let Some(matched) = matched {
                findings.push(
                    Finding::new(
                        "RISKY_SKILL_INSTRUCTION",
                        Severity::High,
                        CATEGORY,
                        "Risky local skill instruction detected",
                        format!("The skill includes \"{matched}\" and {behaviour}."),
                    )
                    .remediation(
                        "Remove instructions that read sensitive local files, launch shell wrappers, or send workspace data to remote endpoints.",
                    )
                    .file(path.clone()),
                );
            }
        }
    }
    if findings.is_empty() {
        return Check::pass(NAME, 5, "No risky local skill instructions detected.");
    }
    Check::fail(
        NAME,
        5,
        "Guard found risky local skill instructions that can expose secrets or contact remote endpoints.",
        findings,
    )
}

/// Each match of `prefix` followed, on the line where the prefix ends, by
/// a URL: the span from the prefix to the URL's end. URLs and line ends
/// are only searched forward: O(text) however many prefixes match.
fn command_urls<'t>(prefix: &'t Regex, text: &'t str) -> impl Iterator<Item = (usize, usize)> + 't {
    let mut urls = patterns().url.find_iter(text).filter_map(Result::ok).peekable();
    let (mut resume, mut line_end) = (0usize, None::<usize>);
    prefix.find_iter(text).filter_map(Result::ok).filter_map(move |found| {
        if found.start() < resume {
            return None;
        }
        while urls.peek().is_some_and(|url| url.start() < found.end()) {
            urls.next();
        }
        let url = urls.peek()?;
        if line_end.is_none_or(|end| end < found.end()) {
            line_end = Some(text[found.end()..].find('\n').map_or(text.len(), |at| found.end() + at));
        }
        if url.start() >= line_end.unwrap_or(text.len()) {
            return None;
        }
        resume = url.end();
        Some((found.start(), resume))
    })
}

/// Lines ending in a backslash joined to the next (the backslash and
/// line break become a space), but for shell comment lines.
fn join_continuations(text: &str) -> String {
    let mut joined = String::with_capacity(text.len());
    for line in text::lines_keeping_ends(text) {
        if line.trim_start_matches([' ', '\t']).starts_with('#') {
            joined.push_str(line);
        } else if let Some(body) = line.strip_suffix("\\\r\n").or_else(|| line.strip_suffix("\\\n")) {
            joined.push_str(body);
            joined.push(' ');
        } else {
            joined.push_str(line);
        }
    }
    joined
}
