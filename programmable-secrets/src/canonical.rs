//! Canonical JSON, the text a policy's metadata is hashed as: object keys
//! sorted (by UTF-16 code units, as JavaScript sorts them) at every depth,
//! no whitespace, strings escaped as `JSON.stringify` escapes them, and
//! numbers written as serde_json writes them (the same as JavaScript for
//! integers and the usual decimals; the two differ for exponents of 21
//! and up, which metadata does not use).

use serde_json::Value;

/// `value` as canonical JSON. O(n log n) in its size (the key sorts).
pub fn to_string(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each case: JSON text, and its canonical form as `JSON.stringify`
    /// over recursively sorted keys writes it.
    #[test]
    fn canonical_forms() {
        let cases = [
            (r#"{"b": 1, "a": [true, null, {"d": "x", "c": 2.5}]}"#, r#"{"a":[true,null,{"c":2.5,"d":"x"}],"b":1}"#),
            (r#"{"é": 1, "z": 2, "Z": 3}"#, r#"{"Z":3,"z":2,"é":1}"#),
            (r#"{"\ud83d\ude00": 1, "\uffff": 2}"#, "{\"\u{1F600}\":1,\"\u{FFFF}\":2}"),
            (r#"{"s": "line\nbreak \"quoted\" \u0001"}"#, r#"{"s":"line\nbreak \"quoted\" \u0001"}"#),
            (r#"[]"#, r#"[]"#),
            (r#"{"n": -0.5, "big": 12345678901234567890}"#, r#"{"big":12345678901234567890,"n":-0.5}"#),
        ];
        for (input, expected) in cases {
            let value: Value = serde_json::from_str(input).unwrap();
            assert_eq!(to_string(&value), expected, "{input}");
        }
    }
}
