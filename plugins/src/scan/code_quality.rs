//! Code Quality (10 points): no direct `eval(` or `new Function(` in
//! Python or JavaScript/TypeScript sources, and no template literal with
//! `${...}` passed to a shell call (`exec`, `spawn`, their `Sync` forms,
//! directly or through `child_process`), straight or through a variable
//! assigned one.
//!
//! The patterns are the reference's, with its exceptions: a member's
//! `eval` (`client.eval(`, Puppeteer's `$eval(`) is not the global one,
//! and a method or function *named* `eval` is a declaration, not a call.
//! Matching runs per file, O(file length) for the regular expressions and
//! O(file length) more per `eval(` for the declaration test.

use std::sync::OnceLock;

use fancy_regex::Regex;

use super::text::{self, found};
use super::Plugin;
use crate::report::{Check, Finding, Severity};
use crate::tree;

const CATEGORY: &str = "code-quality";
const CODE_EXTENSIONS: [&str; 7] = [".py", ".js", ".ts", ".jsx", ".tsx", ".mjs", ".cjs"];
const EXCLUDED_DIRS: [&str; 8] = ["node_modules", ".git", "dist", ".next", "coverage", "__pycache__", ".venv", "venv"];

const TEMPLATE: &str = r"`[^`]*\$\{[^}]+\}[^`]*`";
const TS_TEMPLATE_SUFFIX: &str = r"(?:[ \t]+(?:as|satisfies)[ \t]+[^;\n]+)?";
const SHELL_CALL: &str = r"(?:execSync|spawnSync|exec|spawn)";
const SHELL_RECEIVER: &str =
    r#"(?<![\w$])(?:child_process|childProcess|cp|require\s*\(\s*['"](?:node:)?child_process['"]\s*\))"#;

struct Patterns {
    direct_eval: Regex,
    global_eval: Regex,
    function: Regex,
    declaration_suffix: Regex,
    single_line_declaration: Regex,
    def_prefix: Regex,
    direct_shell_template: Regex,
    member_shell_template: Regex,
    template_assignment: Regex,
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let compile = |pattern: &str| Regex::new(pattern).expect("the code patterns compile");
        Patterns {
            direct_eval: compile(r"(?<![\w$.#])eval\s*(?:\?\.)?\s*\("),
            global_eval: compile(
                r"(?<![\w$.#])(?:globalThis|window|global|builtins|__builtins__)\s*(?:\?\.|\.)\s*eval\s*(?:\?\.)?\s*\(",
            ),
            function: compile(r"new\s+Function\s*\("),
            declaration_suffix: compile(
                r"^[ \t]*(?:/\*[^\r\n]*\*/[ \t]*)?(?:\{|:[ \t]*(?:[^={;\r\n]|=>)+[ \t]*(?:\{|;))",
            ),
            single_line_declaration: compile(
                r"^eval\s*\(.*\)[ \t]*(?:/\*[^\r\n]*\*/[ \t]*)?(?:\{|:[ \t]*(?:[^={;\r\n]|=>)+[ \t]*(?:\{|;))",
            ),
            def_prefix: compile(r"(?:^|\s)def$"),
            direct_shell_template: compile(&format!(r"(?s)(?<![\w.]){SHELL_CALL}\s*\(\s*{TEMPLATE}")),
            member_shell_template: compile(&format!(r"(?s){SHELL_RECEIVER}\s*\.\s*{SHELL_CALL}\s*\(\s*{TEMPLATE}")),
            template_assignment: compile(&format!(
                r"(?s)\b(?:export\s+)?(?:const|let|var)\s+(?P<name>[A-Za-z_$][\w$]*)(?:\s*:\s*[^=;\n]+)?\s*=\s*{TEMPLATE}{TS_TEMPLATE_SUFFIX}[ \t]*;?"
            )),
        }
    })
}

pub(super) fn checks(plugin: &Plugin) -> Vec<Check> {
    let files = code_files(plugin);
    vec![no_eval(&files), no_shell_injection(&files)]
}

/// The source files scanned, with their text (bytes that are not UTF-8
/// dropped, as the reference reads them).
fn code_files<'a>(plugin: &Plugin<'a>) -> Vec<(&'a str, String)> {
    plugin
        .tree
        .files()
        .filter(|(path, _)| CODE_EXTENSIONS.contains(&tree::suffix(path)))
        .filter(|(path, _)| !path.split('/').any(|part| EXCLUDED_DIRS.contains(&part)))
        .map(|(path, bytes)| (path, text::ignoring_errors(bytes)))
        .collect()
}

fn no_eval(files: &[(&str, String)]) -> Check {
    const NAME: &str = "No eval or Function constructor";
    let mut entries = Vec::new();
    for (path, text) in files {
        if direct_eval_call(text) {
            entries.push((*path, "eval()"));
        }
        if found(&patterns().function, text) {
            entries.push((*path, "new Function()"));
        }
    }
    if entries.is_empty() {
        return Check::pass(NAME, 5, "No eval() or new Function() usage detected");
    }
    let named: Vec<String> = entries.iter().map(|(path, what)| format!("{path}: {what}")).collect();
    let findings = named
        .iter()
        .zip(&entries)
        .map(|(entry, (path, _))| {
            Finding::new(
                "DANGEROUS_DYNAMIC_EXECUTION",
                Severity::High,
                CATEGORY,
                "Dynamic code execution detected",
                format!("{entry} uses eval() or new Function()."),
            )
            .remediation("Remove dynamic code evaluation and replace it with explicit control flow.")
            .file(*path)
        })
        .collect();
    let shown: Vec<&str> = named.iter().take(3).map(String::as_str).collect();
    Check::fail(NAME, 5, format!("Found: {}", shown.join(", ")), findings)
}

/// A call of the global `eval`: a match of the direct pattern that is
/// neither a member's nor a declaration, or an explicit global's.
fn direct_eval_call(text: &str) -> bool {
    let p = patterns();
    for found in p.direct_eval.find_iter(text) {
        let Ok(found) = found else { break };
        if member_access(text, found.start()) {
            continue;
        }
        if !declaration(text, found.start(), found.end()) {
            return true;
        }
    }
    found(&p.global_eval, text)
}

/// Whether `eval` at `start` follows a `.`, over whitespace and comments
/// (`/* */`, and `//` on the same line) between them.
fn member_access(text: &str, start: usize) -> bool {
    let mut index = start;
    while index > 0 {
        let previous = text[..index].chars().next_back().expect("index > 0");
        if previous.is_whitespace() {
            index -= previous.len_utf8();
            continue;
        }
        if text[..index].ends_with("*/") {
            match text[..index - 2].rfind("/*") {
                Some(comment) => {
                    index = comment;
                    continue;
                }
                None => break,
            }
        }
        let line_start = text[..index].rfind(['\n', '\r']).map_or(0, |at| at + 1);
        if let Some(comment) = text[line_start..index].rfind("//") {
            index = line_start + comment;
            continue;
        }
        break;
    }
    index > 0 && text[..index].ends_with('.')
}

/// Whether the `eval(` matched at `start..end` declares a method or
/// function named `eval`: its parameters close and a body or a type
/// follows on the same line, or a Python `def` precedes it.
fn declaration(text: &str, start: usize, end: usize) -> bool {
    let p = patterns();
    let Some(closing) = matching_paren(text, end - 1) else { return false };
    if found(&p.declaration_suffix, &text[closing + 1..]) {
        return true;
    }
    let line_end = text[start..].find('\n').map_or(text.len(), |at| start + at);
    if found(&p.single_line_declaration, &text[start..line_end]) {
        return true;
    }
    let line_start = text[..start].rfind('\n').map_or(0, |at| at + 1);
    found(&p.def_prefix, text[line_start..start].trim())
}

/// The `)` closing the `(` at `opening`, quoted strings skipped.
fn matching_paren(text: &str, opening: usize) -> Option<usize> {
    debug_assert_eq!(text.as_bytes()[opening], b'(');
    let (mut depth, mut quote, mut escaped) = (0i64, None, false);
    for (at, c) in text[opening..].char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' | '`' => quote = Some(c),
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(opening + at);
                }
            }
            _ => {}
        }
    }
    None
}

fn no_shell_injection(files: &[(&str, String)]) -> Check {
    const NAME: &str = "No shell injection patterns";
    let paths: Vec<&str> = files.iter().filter(|(_, text)| shell_injection(text)).map(|(path, _)| *path).collect();
    if paths.is_empty() {
        return Check::pass(NAME, 5, "No shell injection patterns detected");
    }
    let findings = paths
        .iter()
        .map(|path| {
            Finding::new(
                "SHELL_INJECTION_PATTERN",
                Severity::High,
                CATEGORY,
                "Potential shell injection pattern detected",
                format!("{path} interpolates untrusted values into a shell execution call."),
            )
            .remediation("Pass arguments as structured arrays and validate user-controlled input before execution.")
            .file(*path)
        })
        .collect();
    Check::fail(NAME, 5, format!("Shell injection patterns in: {}", paths.join(", ")), findings)
}

fn shell_injection(text: &str) -> bool {
    let p = patterns();
    if found(&p.direct_shell_template, text) || found(&p.member_shell_template, text) {
        return true;
    }
    for assignment in p.template_assignment.captures_iter(text) {
        let Ok(assignment) = assignment else { break };
        let (Some(whole), Some(name)) = (assignment.get(0), assignment.name("name")) else { continue };
        if shell_call_uses(&text[whole.end()..], name.as_str()) {
            return true;
        }
    }
    false
}

/// Whether a shell call takes the variable `name` as its first argument.
fn shell_call_uses(text: &str, name: &str) -> bool {
    let name = fancy_regex::escape(name);
    let direct = format!(r"(?<![\w.]){SHELL_CALL}\s*\(\s*{name}(?![\w$])");
    let member = format!(r"{SHELL_RECEIVER}\s*\.\s*{SHELL_CALL}\s*\(\s*{name}(?![\w$])");
    [direct, member].iter().any(|pattern| Regex::new(pattern).is_ok_and(|re| found(&re, text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference's exceptions, each way.
    #[test]
    fn eval_calls_and_what_is_not_one() {
        for (source, call) in [
            ("eval(code)", true),
            ("x = eval (input())", true),
            ("globalThis.eval(code)", true),
            ("window?.eval(code)", true),
            ("client.eval(script)", false),
            ("await page.$eval('#a', el => el.textContent)", false),
            ("client.\n  // a comment\n  eval(x)", false),
            ("client. /* c */ eval(x)", false),
            ("class A { eval(x) { return x; } }", false),
            ("def eval(self, x):\n    return x", false),
            ("eval(a: string): number;", false),
            ("evaluate(x)", false),
            ("retrieval(x)", false),
        ] {
            assert_eq!(direct_eval_call(source), call, "{source}");
        }
    }

    #[test]
    fn shell_templates() {
        for (source, injection) in [
            ("execSync(`rm -rf ${dir}`)", true),
            ("child_process.exec(`ls ${x}`)", true),
            ("require('child_process').spawn(`a ${b}`)", true),
            ("const cmd = `git log ${ref}`;\nexec(cmd);", true),
            ("const cmd = `git log ${ref}`;\nexec(cmdline);", false),
            ("execSync(`ls`)", false),
            ("execSync(['ls', dir])", false),
            ("x.execSync(`ls ${d}`)", false),
        ] {
            assert_eq!(shell_injection(source), injection, "{source}");
        }
    }
}
