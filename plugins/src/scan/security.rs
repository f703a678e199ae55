//! Security (24 points here; the reference's optional Cisco MCP analyser
//! would add 12): a SECURITY.md and a LICENSE, no hard-coded secrets, no
//! dangerous command in `.mcp.json`, remote MCP servers over HTTPS (plain
//! HTTP only to loopback), and no configuration that defaults to bypassed
//! approvals or an unrestricted sandbox.
//!
//! The files read are the plugin's but for dependency and build folders
//! and binary formats, within the reference's bounds (50,000 files, 16 MiB
//! each, 512 MiB in all); past a bound the checks fail rather than pass on
//! what they did not read. (The reference lists a packaged executable over
//! 16 MiB instead of failing; this scanner reads no executable headers.)

mod secrets;
mod shell_reads;

use std::sync::OnceLock;

use fancy_regex::Regex;
use serde_json::Value;

use super::text::{found, ignoring_errors, url_scheme};
use super::Plugin;
use crate::report::{Check, Finding, Severity};
use crate::tree;

const CATEGORY: &str = "security";
const MCP_CONFIG: &str = ".mcp.json";
const CISCO_CHECKS: [&str; 3] =
    ["Cisco MCP scan completed", "No elevated Cisco MCP findings", "MCP sources analyzable"];
/// The licence files looked for, in order.
const LICENSE_STEMS: [&str; 6] = ["LICENSE", "LICENCE", "COPYING", "license", "licence", "copying"];
const LICENSE_SUFFIXES: [&str; 4] = ["", ".md", ".txt", ".rst"];

fn security_md(plugin: &Plugin) -> Check {
    const NAME: &str = "SECURITY.md found";
    if plugin.tree.exists("SECURITY.md") {
        return Check::pass(NAME, 3, "SECURITY.md found");
    }
    let missing = Finding::new(
        "SECURITY_MD_MISSING",
        Severity::Low,
        CATEGORY,
        "SECURITY.md is missing",
        "Plugins should publish a SECURITY.md file for responsible disclosure and support guidance.",
    )
    .remediation("Add a SECURITY.md file with reporting guidance and supported versions.")
    .file("SECURITY.md");
    Check::fail(NAME, 3, "SECURITY.md not found", vec![missing])
}

/// The first licence file there is passes, whatever it says; a folder of
/// that name fails, unread (the reference cannot read it either).
fn license(plugin: &Plugin) -> Check {
    const NAME: &str = "LICENSE found";
    let names =
        LICENSE_STEMS.iter().flat_map(|stem| LICENSE_SUFFIXES.iter().map(move |suffix| format!("{stem}{suffix}")));
    let Some(name) = names.into_iter().find(|name| plugin.tree.exists(name)) else {
        let missing = Finding::new(
            "LICENSE_MISSING",
            Severity::Low,
            CATEGORY,
            "LICENSE file is missing",
            "Plugins should ship a LICENSE file so consumers can review usage rights.",
        )
        .remediation("Add a LICENSE or LICENSE.md file that matches the manifest license metadata.")
        .file("LICENSE");
        return Check::fail(NAME, 3, "LICENSE file not found", vec![missing]);
    };
    if plugin.tree.file(&name).is_none() {
        return Check::fail(NAME, 3, "LICENSE exists but could not be read", vec![]);
    }
    Check::pass(NAME, 3, "LICENSE found")
}

/// The dangerous commands looked for in `.mcp.json`, with their text.
fn dangerous_commands() -> &'static [(Regex, &'static str)] {
    static PATTERNS: OnceLock<Vec<(Regex, &'static str)>> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let pattern = |p: &'static str| (Regex::new(p).expect("the MCP patterns compile"), p);
        vec![
            pattern(r"rm\s+-rf"),
            pattern(r"\bsudo\b"),
            pattern(r"curl\b.*\|\s*(ba)?sh"),
            pattern(r"wget\b.*\|\s*(ba)?sh"),
            pattern(r"bash\s+-c"),
            pattern(r"\beval\b"),
            pattern(r"\bexec\b"),
            pattern(r"(?i)powershell\s+-c"),
            pattern(r"(?i)cmd\s*/c"),
        ]
    })
}

/// The reference's pattern text, as its finding names it (the flags it
/// compiles case-insensitive ones with are not part of it).
fn shown(pattern: &str) -> &str {
    pattern.strip_prefix("(?i)").unwrap_or(pattern)
}

fn dangerous_mcp(plugin: &Plugin) -> Check {
    const NAME: &str = "No dangerous MCP commands";
    if !plugin.tree.exists(MCP_CONFIG) {
        return Check::weightless(NAME, "No .mcp.json found, skipping check");
    }
    let Some(text) = plugin.tree.file(MCP_CONFIG).and_then(|b| std::str::from_utf8(b).ok()) else {
        let unreadable = Finding::new(
            "MCP_CONFIG_UNREADABLE",
            Severity::Medium,
            CATEGORY,
            "MCP configuration could not be safely read",
            "The MCP configuration is not a bounded regular file inside the plugin.",
        )
        .remediation("Replace links or special files with a regular, repository-contained .mcp.json file.")
        .file(MCP_CONFIG);
        return Check::fail(NAME, 4, "Could not safely read .mcp.json", vec![unreadable]);
    };
    let hits: Vec<&str> =
        dangerous_commands().iter().filter(|(regex, _)| found(regex, text)).map(|(_, p)| shown(p)).collect();
    if hits.is_empty() {
        return Check::pass(NAME, 4, "No dangerous commands found in .mcp.json");
    }
    let findings = hits
        .iter()
        .map(|pattern| {
            Finding::new(
                "DANGEROUS_MCP_COMMAND",
                Severity::High,
                CATEGORY,
                "Dangerous MCP command pattern detected",
                format!("The MCP configuration matches the risky pattern \"{pattern}\"."),
            )
            .remediation("Remove destructive commands and require explicit user approval before high-risk actions.")
            .file(MCP_CONFIG)
        })
        .collect();
    Check::fail(NAME, 4, format!("Dangerous patterns in .mcp.json: {}", hits.join(", ")), findings)
}

/// Keys whose string values are server URLs, and keys whose subtrees are
/// descriptions rather than configuration.
const MCP_URL_KEYS: [&str; 3] = ["url", "endpoint", "server_url"];
const IGNORED_MCP_URL_CONTEXT: [&str; 6] = ["metadata", "description", "homepage", "website", "docs", "documentation"];

fn collect_urls(node: &Value, urls: &mut Vec<String>) {
    match node {
        Value::Object(map) => {
            for (key, value) in map {
                let key = key.to_lowercase();
                if IGNORED_MCP_URL_CONTEXT.contains(&key.as_str()) {
                    continue;
                }
                match value {
                    Value::String(url) if MCP_URL_KEYS.contains(&key.as_str()) => urls.push(url.clone()),
                    Value::Object(_) | Value::Array(_) => collect_urls(value, urls),
                    _ => {}
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect_urls(item, urls)),
        _ => {}
    }
}

/// The URLs of `mcpServers` or `servers` when either is there, else of the
/// whole document.
fn mcp_urls(payload: &Value) -> Vec<String> {
    let mut urls = Vec::new();
    let targeted: Vec<&Value> = ["mcpServers", "servers"]
        .iter()
        .filter_map(|key| payload.get(key))
        .filter(|value| value.is_object() || value.is_array())
        .collect();
    if payload.is_object() && !targeted.is_empty() {
        targeted.into_iter().for_each(|value| collect_urls(value, &mut urls));
    } else {
        collect_urls(payload, &mut urls);
    }
    urls
}

/// The scheme (lower-cased) and host of a URL as Python's `urlparse` reads
/// them, enough to tell `https`, and `http` to a loopback host.
fn scheme_and_host(url: &str) -> (String, Option<String>) {
    let Some(scheme) = url_scheme(url) else { return (String::new(), None) };
    let rest = &url[scheme.len() + 1..];
    let Some(after) = rest.strip_prefix("//") else { return (scheme.to_lowercase(), None) };
    let authority = &after[..after.find(['/', '?', '#']).unwrap_or(after.len())];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host = if let Some(bracketed) = host_port.strip_prefix('[') {
        bracketed.split_once(']').map(|(inside, _)| inside.to_string())
    } else {
        Some(host_port.split(':').next().unwrap_or_default().to_string())
    };
    (scheme.to_lowercase(), host.filter(|h| !h.is_empty()).map(|h| h.to_lowercase()))
}

fn loopback(host: &str) -> bool {
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn mcp_transport(plugin: &Plugin) -> Check {
    const NAME: &str = "MCP remote transports are hardened";
    if !plugin.tree.exists(MCP_CONFIG) {
        return Check::weightless(NAME, "No .mcp.json found, skipping transport hardening checks.");
    }
    let payload = plugin
        .tree
        .file(MCP_CONFIG)
        .and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|text| serde_json::from_str::<Value>(text).ok());
    let Some(payload) = payload else {
        let invalid = Finding::new(
            "MCP_CONFIG_INVALID_JSON",
            Severity::Medium,
            CATEGORY,
            "MCP configuration is not valid JSON",
            "The .mcp.json file exists but could not be parsed.",
        )
        .remediation("Fix the .mcp.json syntax so transport settings can be validated.")
        .file(MCP_CONFIG);
        return Check::fail(NAME, 4, "Could not parse .mcp.json for transport URLs.", vec![invalid]);
    };
    let urls = mcp_urls(&payload);
    if urls.is_empty() {
        return Check::weightless(
            NAME,
            "No remote MCP URLs declared; stdio-only configuration is not applicable here.",
        );
    }
    let insecure: Vec<&String> = urls
        .iter()
        .filter(|url| match scheme_and_host(url) {
            (scheme, _) if scheme == "https" => false,
            (scheme, Some(host)) if scheme == "http" => !loopback(&host),
            _ => true,
        })
        .collect();
    if insecure.is_empty() {
        return Check::pass(
            NAME,
            4,
            "Remote MCP URLs use hardened transports or stay on loopback for local development.",
        );
    }
    let findings = insecure
        .iter()
        .map(|url| {
            Finding::new(
                "MCP_REMOTE_URL_INSECURE",
                Severity::High,
                CATEGORY,
                "MCP remote transport uses an insecure URL",
                format!("The remote MCP endpoint \"{url}\" is not HTTPS or loopback-only HTTP."),
            )
            .remediation("Use HTTPS for remote MCP servers and reserve plain HTTP for localhost development only.")
            .file(MCP_CONFIG)
        })
        .collect();
    let listed: Vec<&str> = insecure.iter().map(|u| u.as_str()).collect();
    Check::fail(NAME, 4, format!("Insecure MCP remote URLs detected: {}", listed.join(", ")), findings)
}

fn cisco_not_run() -> Vec<Check> {
    CISCO_CHECKS
        .into_iter()
        .map(|name| Check::weightless(name, "The Cisco MCP analyser is not run by this scanner."))
        .collect()
}

/// Documentation formats: a risky value named there in an inline code
/// span is a mention, not a setting.
pub(super) const DOCUMENTATION_EXTENSIONS: [&str; 6] = [".md", ".mdx", ".markdown", ".rst", ".adoc", ".asciidoc"];
const AGENT_INSTRUCTION_FILENAMES: [&str; 5] = ["agent.md", "agents.md", "claude.md", "gemini.md", "skill.md"];
const AGENT_INSTRUCTION_STEMS: [&str; 3] = ["context", "system-prompt", "system_prompt"];
const AGENT_INSTRUCTION_PATH_HINTS: [&str; 18] = [
    ".agents",
    ".claude",
    ".codex",
    ".cursor",
    ".gemini",
    ".github",
    ".kiro",
    ".windsurf",
    "agent",
    "agents",
    "command",
    "commands",
    "instruction",
    "instructions",
    "prompt",
    "prompts",
    "skill",
    "skills",
];
/// How much of a line before an inline code span is read for an
/// assignment, a flag or an instruction.
const APPROVAL_CONTEXT_WINDOW: usize = 256;

struct ApprovalPatterns {
    risky: [Regex; 3],
    fence: Regex,
    blockquote: Regex,
    list_marker: Regex,
    instruction: Regex,
    negation: Regex,
    risk: Regex,
    assignment_tail: Regex,
}

fn approval_patterns() -> &'static ApprovalPatterns {
    static PATTERNS: OnceLock<ApprovalPatterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let compile = |p: &str| Regex::new(p).expect("the approval patterns compile");
        ApprovalPatterns {
            risky: [
                compile(r"danger-full-access"),
                compile(r#"(?i)approval[_ -]?policy["']?\s*[:=]\s*["']never["']"#),
                compile(r#"(?i)approvalMode["']?\s*[:=]\s*["']bypass["']"#),
            ],
            fence: compile(r"^\s*(`{3,}|~{3,})"),
            blockquote: compile(r"^(?: {0,3}>[ \t]?)+"),
            list_marker: compile(r"^ {0,3}(?:[-*+]|\d{1,9}[.)])[ \t]+"),
            instruction: compile(
                r"(?i)\b(?:select(?:ing|ed)?|set(?:ting)?|use|using|enable|enabling|switch(?:ing)? to|choose|choosing|pick(?:ing)?|configure|configuring|pass(?:ing)?|turn(?:ing)? on|run(?:ning)? with|start(?:ing)? with|launch(?:ing)? with|opt(?:ing)? (?:in|for)|change (?:it )?to|allow(?:ing)?)\b",
            ),
            negation: compile(r"(?i)\b(?:never|avoid|don'?t|do not|not)\s+$"),
            risk: compile(r"(?i)\b(?:unsafe|insecure|dangerous|risky|risks?)\b"),
            assignment_tail: compile(r"(?:[=:]|(?:^|\s)--?[A-Za-z][\w-]*)\s*$"),
        }
    })
}

/// The stem of a file name as Python's `Path.stem`.
fn stem(path: &str) -> &str {
    let name = tree::file_name(path);
    let suffix = tree::suffix(path);
    &name[..name.len() - suffix.len()]
}

/// Whether an agent loads the file as instructions, by its name or its
/// folders.
fn agent_instruction_surface(path: &str) -> bool {
    let name = tree::file_name(path).to_lowercase();
    if AGENT_INSTRUCTION_FILENAMES.contains(&name.as_str()) {
        return true;
    }
    let stem = stem(path).to_lowercase();
    if AGENT_INSTRUCTION_STEMS.contains(&stem.as_str()) || AGENT_INSTRUCTION_PATH_HINTS.contains(&stem.as_str()) {
        return true;
    }
    let folders: Vec<String> = path.split('/').rev().skip(1).map(str::to_lowercase).collect();
    folders.iter().any(|folder| AGENT_INSTRUCTION_PATH_HINTS.contains(&folder.as_str()))
}

/// A fence token on the line and the column of its first character, a
/// list marker before it skipped.
fn fence_marker(line: &str) -> Option<(String, usize)> {
    let p = approval_patterns();
    let captured = |text: &str| {
        p.fence.captures(text).ok().flatten().and_then(|c| c.get(1).map(|m| (m.as_str().to_string(), m.start())))
    };
    if let Some(marker) = captured(line) {
        return Some(marker);
    }
    let marker_end = p.list_marker.find(line).ok().flatten()?.end();
    let (token, column) = captured(&line[marker_end..])?;
    Some((token, marker_end + column))
}

/// Which lines are fenced or indented code (fence lines included), read
/// through block quotes and list markers as the reference reads them.
fn markdown_code_lines(lines: &[&str]) -> Vec<bool> {
    let p = approval_patterns();
    let mut code = Vec::with_capacity(lines.len());
    let (mut fence, mut fence_column, mut fence_depth) = (None::<String>, 0usize, 0usize);
    let mut can_start_indented = true;
    for raw in lines {
        let quote = p.blockquote.find(raw).ok().flatten();
        let depth = quote.map_or(0, |q| q.as_str().matches('>').count());
        let line = quote.map_or(*raw, |q| &raw[q.end()..]);
        let marker = fence_marker(line);
        let is_code = if let Some(open) = &fence {
            if let Some((token, column)) = &marker {
                let rest = &line[column + token.len()..];
                if depth == fence_depth
                    && *column <= fence_column
                    && token.as_bytes()[0] == open.as_bytes()[0]
                    && token.len() >= open.len()
                    && rest.trim().is_empty()
                {
                    fence = None;
                }
            }
            true
        } else if let Some((token, column)) = marker {
            (fence, fence_column, fence_depth) = (Some(token), column, depth);
            true
        } else {
            (line.starts_with("    ") || line.starts_with('\t')) && can_start_indented
        };
        code.push(is_code);
        let stripped = line.trim();
        can_start_indented = is_code || stripped.is_empty() || stripped.starts_with('#');
    }
    code
}

/// Whether `line[start..end]` is a bare value alone in an inline code span
/// of prose, named rather than set (no assignment or flag before it, no
/// instruction to turn it on unless negated or called risky).
fn documented_value(line: &str, start: usize, end: usize) -> bool {
    let p = approval_patterns();
    if line[start..end].contains(['=', ':']) {
        return false;
    }
    let bytes = line.as_bytes();
    let opens = start >= 1 && bytes[start - 1] == b'`' && (start < 2 || bytes[start - 2] != b'`');
    let closes = bytes.get(end) == Some(&b'`') && bytes.get(end + 1) != Some(&b'`');
    if !(opens && closes) {
        return false;
    }
    let mut cut = start - 1;
    while cut > 0 && matches!(bytes[cut - 1], b' ' | b'\t') {
        cut -= 1;
    }
    while cut > 0 && bytes[cut - 1] == b'`' {
        cut -= 1;
    }
    while cut > 0 && matches!(bytes[cut - 1], b' ' | b'\t') {
        cut -= 1;
    }
    let before = window_before(line, cut);
    if found(&p.assignment_tail, before) {
        return false;
    }
    let sentence_start = before.rfind(['.', '!', '?', ';']).map_or(0, |at| at + 1);
    let prefix = &before[sentence_start..];
    let after = window_after(line, end + 1);
    let suffix = after.split(['.', '!', '?', ';']).next().unwrap_or_default();
    let verbs: Vec<usize> = p.instruction.find_iter(prefix).filter_map(Result::ok).map(|m| m.start()).collect();
    let Some(last) = verbs.last() else { return true };
    let negated = found(&p.negation, &prefix[..*last]);
    let risky = found(&p.risk, &format!("{prefix} {suffix}"));
    negated || risky
}

/// The last `APPROVAL_CONTEXT_WINDOW` characters of `line` before `cut`.
fn window_before(line: &str, cut: usize) -> &str {
    let head = &line[..cut];
    let from = head.char_indices().rev().nth(APPROVAL_CONTEXT_WINDOW - 1).map_or(0, |(at, _)| at);
    &head[from..]
}

/// The first `APPROVAL_CONTEXT_WINDOW` characters of `line` from `from`.
fn window_after(line: &str, from: usize) -> &str {
    let tail = line.get(from..).unwrap_or_default();
    let to = tail.char_indices().nth(APPROVAL_CONTEXT_WINDOW).map_or(tail.len(), |(at, _)| at);
    &tail[..to]
}

/// Whether the file sets a risky approval or sandbox default: anywhere in
/// a configuration or an agent's instructions, and outside a mention in
/// prose in documentation.
fn risky_approval_default(path: &str, text: &str) -> bool {
    let p = approval_patterns();
    let documentation = DOCUMENTATION_EXTENSIONS.contains(&tree::suffix(path).to_lowercase().as_str());
    if !documentation || agent_instruction_surface(path) {
        return p.risky.iter().any(|pattern| found(pattern, text));
    }
    let lines: Vec<&str> = text.split('\n').collect();
    let mut starts = Vec::with_capacity(lines.len());
    let mut at = 0;
    for line in &lines {
        starts.push(at);
        at += line.len() + 1;
    }
    let code = markdown_code_lines(&lines);
    for pattern in &p.risky {
        for hit in pattern.find_iter(text).filter_map(Result::ok) {
            let index = starts.partition_point(|start| *start <= hit.start()) - 1;
            if hit.as_str().contains('\n') || code[index] {
                return true;
            }
            let line_start = starts[index];
            if !documented_value(lines[index], hit.start() - line_start, hit.end() - line_start) {
                return true;
            }
        }
    }
    false
}

/// Folders the security checks do not read, at any depth.
const EXCLUDED_DIRS: [&str; 9] =
    ["node_modules", ".git", "dist", ".next", "coverage", ".turbo", "__pycache__", ".venv", "venv"];
/// Files the security checks do not read, by extension (any case).
const BINARY_EXTENSIONS: [&str; 20] = [
    ".png", ".jpg", ".jpeg", ".gif", ".ico", ".webp", ".woff", ".woff2", ".ttf", ".eot", ".otf", ".zip", ".tar", ".gz",
    ".7z", ".rar", ".wasm", ".pyc", ".so", ".dylib",
];
const MAX_SCAN_FILES: usize = 50_000;
const MAX_SCAN_FILE_BYTES: usize = 16 * 1024 * 1024;
const MAX_SCAN_TOTAL_BYTES: usize = 512 * 1024 * 1024;

/// The files the security checks read, in path order, or why the scan
/// stops short (a bound passed: the checks then fail rather than pass on
/// what they did not read).
fn scanned_files<'a>(plugin: &Plugin<'a>) -> Result<Vec<(&'a str, &'a [u8])>, String> {
    let files: Vec<(&str, &[u8])> = plugin
        .tree
        .files()
        .filter(|(path, _)| {
            let mut folders = path.split('/').rev().skip(1);
            !folders.any(|folder| EXCLUDED_DIRS.contains(&folder))
        })
        .filter(|(path, _)| !BINARY_EXTENSIONS.contains(&tree::suffix(path).to_lowercase().as_str()))
        .collect();
    if files.len() > MAX_SCAN_FILES {
        return Err(format!("scannable files exceeded {MAX_SCAN_FILES}"));
    }
    let mut total = 0usize;
    for (path, bytes) in &files {
        if bytes.len() > MAX_SCAN_FILE_BYTES {
            return Err(format!("{} exceeded {MAX_SCAN_FILE_BYTES} bytes", tree::file_name(path)));
        }
        total += bytes.len();
        if total > MAX_SCAN_TOTAL_BYTES {
            return Err(format!("aggregate input exceeded {MAX_SCAN_TOTAL_BYTES} bytes"));
        }
    }
    Ok(files)
}

fn budget_failure(name: &'static str, max: u32, reason: &str) -> Check {
    let finding = Finding::new(
        "SCAN_RESOURCE_BUDGET_EXCEEDED",
        Severity::Medium,
        CATEGORY,
        "Security scan resource budget exceeded",
        format!("The scanner stopped before complete analysis because {reason}."),
    )
    .remediation("Reduce generated or vendored scan input, or scan the intended plugin directory directly.");
    Check::fail(name, max, format!("Security analysis incomplete: {reason}."), vec![finding])
}

fn approval_bypass(scanned: &Result<Vec<(&str, &[u8])>, String>) -> Check {
    const NAME: &str = "No approval bypass defaults";
    let files = match scanned {
        Err(reason) => return budget_failure(NAME, 3, reason),
        Ok(files) => files,
    };
    let risky: Vec<&str> = files
        .iter()
        .filter(|(path, _)| [".json", ".md", ".yaml", ".yml", ".toml"].iter().any(|ext| path.ends_with(ext)))
        .filter(|(path, bytes)| risky_approval_default(path, &ignoring_errors(bytes)))
        .map(|(path, _)| *path)
        .collect();
    if risky.is_empty() {
        return Check::pass(NAME, 3, "No risky approval or sandbox defaults detected.");
    }
    let findings = risky
        .iter()
        .map(|path| {
            Finding::new(
                "RISKY_APPROVAL_DEFAULT",
                Severity::Medium,
                CATEGORY,
                "Risky approval or sandbox default detected",
                format!("{path} contains a dangerous approval or sandbox default."),
            )
            .remediation("Avoid shipping configurations that default to bypassed approvals or unrestricted sandboxes.")
            .file(*path)
        })
        .collect();
    Check::fail(NAME, 3, format!("Risky approval defaults found in: {}", risky.join(", ")), findings)
}

/// The two credential checks, from one pass over the files: hard-coded
/// secrets (7 points), and runtime credential access (advisory, 0 of 0:
/// its findings are for review, not a score).
fn credentials(scanned: &Result<Vec<(&str, &[u8])>, String>) -> [Check; 2] {
    const SECRETS: &str = "No hardcoded secrets";
    const RUNTIME: &str = "Runtime credential access";
    let mut runtime = Vec::new();
    let mut secret_lines = Vec::new();
    let mut failure = None;
    match scanned {
        Err(reason) => failure = Some(reason.clone()),
        Ok(files) => {
            for (path, bytes) in files {
                let text = ignoring_errors(bytes);
                let reads = shell_reads::reads(path, &text, &secrets::generic_match);
                if reads.len() > secrets::MAX_MATCHES_PER_FILE {
                    failure = Some(format!("runtime reads exceeded {} in {path}", secrets::MAX_MATCHES_PER_FILE));
                    break;
                }
                runtime.extend(runtime_findings(path, &text, &reads));
                let spans: Vec<(usize, usize)> = reads.iter().map(|r| r.span).collect();
                match secrets::first_secret_line(path, &text, &spans) {
                    Err(reason) => {
                        failure = Some(reason);
                        break;
                    }
                    Ok(Some(line)) => secret_lines.push((*path, line)),
                    Ok(None) => {}
                }
            }
        }
    }
    let literal = match failure {
        Some(reason) => budget_failure(SECRETS, 7, &reason),
        None if secret_lines.is_empty() => Check::pass(SECRETS, 7, "No hardcoded secrets detected"),
        None => {
            let shown: Vec<&str> = secret_lines.iter().take(5).map(|(path, _)| *path).collect();
            let more =
                if secret_lines.len() > 5 { format!(" and {} more", secret_lines.len() - 5) } else { String::new() };
            let findings = secret_lines
                .iter()
                .map(|(path, line)| {
                    Finding::new(
                        "HARDCODED_SECRET",
                        Severity::High,
                        CATEGORY,
                        "Hardcoded secret detected",
                        format!("Potential secret material was detected in {path}."),
                    )
                    .remediation("Remove the secret from source control and load it securely at runtime.")
                    .file(*path)
                    .line(*line as u32)
                })
                .collect();
            Check::fail(SECRETS, 7, format!("Hardcoded secrets found in: {}{more}", shown.join(", ")), findings)
        }
    };
    let complete = literal.findings.iter().all(|f| f.rule_id == "HARDCODED_SECRET");
    let message = match (complete, runtime.is_empty()) {
        (false, _) => format!("Runtime credential review incomplete: {}", literal.message),
        (true, false) => "Runtime credential access requires review".to_string(),
        (true, true) => {
            "No supported runtime credential-access pattern detected; other access is not ruled out".to_string()
        }
    };
    let advisory = Check { passed: complete, findings: runtime, ..Check::weightless(RUNTIME, message) };
    [literal, advisory]
}

/// A finding per credential-related read: LOW for reading the runtime's
/// credentials, MEDIUM for impersonating another service account. The
/// same finding twice on one line is reported once.
fn runtime_findings(path: &str, text: &str, reads: &[shell_reads::ShellRead]) -> Vec<Finding> {
    let lines = secrets::Lines::of(text);
    let mut findings: Vec<Finding> = Vec::new();
    for read in reads.iter().filter(|r| r.credential_related) {
        let impersonation = read.kind == shell_reads::ReadKind::GcloudImpersonation;
        let description = match read.kind {
            shell_reads::ReadKind::GcloudImpersonation => {
                "A supported gcloud command requests an access token for another service account. Token minting requires the caller's impersonation permissions; those permissions, the target account's access and successful execution have not been verified."
            }
            shell_reads::ReadKind::Gcloud => {
                "A supported gcloud command requests an access token using the runtime identity. Available credentials, effective permissions and token scope have not been verified."
            }
            shell_reads::ReadKind::Environment => {
                "A supported shell assignment reads an environment variable with a credential-related source or destination name. Runtime contents and effective permissions have not been verified."
            }
        };
        let finding = Finding::new(
            if impersonation { "GCLOUD_SERVICE_ACCOUNT_IMPERSONATION" } else { "RUNTIME_CREDENTIAL_ACCESS" },
            if impersonation { Severity::Medium } else { Severity::Low },
            CATEGORY,
            if impersonation { "Service-account impersonation requested" } else { "Runtime credential access" },
            description,
        )
        .remediation("Review the agent's shell access, credential handling, identity grants and effective scope. Use the least privilege required; a clean embedded-secret check does not prove limited access.")
        .file(path)
        .line(lines.number(read.span.0) as u32);
        if !findings.contains(&finding) {
            findings.push(finding);
        }
    }
    findings
}

pub(super) fn checks(plugin: &Plugin) -> Vec<Check> {
    let scanned = scanned_files(plugin);
    let mut checks = vec![security_md(plugin), license(plugin)];
    checks.extend(credentials(&scanned));
    checks.push(dangerous_mcp(plugin));
    checks.push(mcp_transport(plugin));
    checks.push(approval_bypass(&scanned));
    checks.extend(cisco_not_run());
    checks
}
