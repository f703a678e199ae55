//! Error messages in plain words. serde says what a value should have been
//! in Rust's terms (`expected usize`) and echoes whole input values; a
//! client wants the rule (`expected a non-negative integer`) and needs at
//! most a short excerpt of what it sent.

use crate::reply::excerpt;

/// serde's message for a value that does not fit, said plainly: Rust type
/// names become JSON ones, echoed strings become "a string", a name quoted
/// from the input is cut to an excerpt, and the position is dropped (the
/// caller names the field).
pub fn serde_rule(message: &str) -> String {
    let message = message.rsplit_once(" at line ").map_or(message, |(m, _)| m);
    let typed = message.strip_prefix("invalid type: ").or_else(|| message.strip_prefix("invalid value: "));
    if let Some((got, expected)) = typed.and_then(|rest| rest.rsplit_once(", expected ")) {
        return format!("expected {}, got {}", json_type(expected), value(got));
    }
    unquote(message)
}

/// A Rust type, as the JSON value it reads.
fn json_type(expected: &str) -> &str {
    match expected.trim() {
        "usize" | "u64" | "u32" | "u16" | "u8" => "a non-negative integer",
        "isize" | "i64" | "i32" | "i16" | "i8" => "an integer",
        "f64" | "f32" => "a number",
        "a sequence" => "an array",
        "a map" => "an object",
        other if other.starts_with("struct ") => "an object",
        other => other,
    }
}

/// serde's description of the value it got: `string "…"` becomes "a
/// string" (never echoed), `integer \`-1\`` the number itself.
fn value(got: &str) -> String {
    let got = got.trim();
    if got.starts_with("string ") {
        return "a string".into();
    }
    for kind in ["integer ", "floating point ", "boolean "] {
        if let Some(literal) = got.strip_prefix(kind) {
            return excerpt(literal.trim_matches('`')).into_owned();
        }
    }
    match got {
        "map" => "an object".into(),
        "sequence" => "an array".into(),
        "unit value" | "null" => "null".into(),
        other => excerpt(other).into_owned(),
    }
}

/// The names serde quotes in backticks, each cut to an excerpt and
/// unquoted: `unknown field \`x\`, expected one of \`a\`, \`b\``.
fn unquote(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(256));
    for (i, part) in message.split('`').enumerate() {
        // Odd parts were inside backticks.
        out.push_str(if i % 2 == 1 { excerpt(part) } else { part.into() }.as_ref());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_messages_in_plain_words() {
        let check = |raw: &str, plain: &str| assert_eq!(serde_rule(raw), plain, "{raw}");
        check(
            "invalid type: string \"x\", expected usize at line 1 column 12",
            "expected a non-negative integer, got a string",
        );
        check(
            "invalid value: integer `-1`, expected usize at line 1 column 11",
            "expected a non-negative integer, got -1",
        );
        check("invalid type: integer `7`, expected a string at line 1 column 10", "expected a string, got 7");
        check("invalid type: map, expected a sequence", "expected an array, got an object");
        check("invalid type: floating point `1.5`, expected u32", "expected a non-negative integer, got 1.5");
        check("invalid type: null, expected struct VectorFilter", "expected an object, got null");
        check("invalid type: boolean `true`, expected f64", "expected a number, got true");
        check(
            "unknown field `registries`, expected one of `capabilities`, `type` at line 1 column 23",
            "unknown field registries, expected one of capabilities, type",
        );
        check("missing field `query`", "missing field query");
        let long = "k".repeat(500);
        let got = serde_rule(&format!("unknown field `{long}`, expected one of `a`"));
        assert!(got.len() < 120 && got.ends_with("…, expected one of a"), "{got}");
        let got = serde_rule(&format!("invalid type: string \"{long}\", expected u32"));
        assert_eq!(got, "expected a non-negative integer, got a string");
    }
}
