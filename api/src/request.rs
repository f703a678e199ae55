//! One request as a handler sees it: everything the pipeline has read and
//! decided before the handler runs.

use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use warp::http::{HeaderMap, Method};

use crate::app::App;
use crate::auth::Principal;
use crate::published::Build;
use serde::Deserialize;

use crate::reply::Error;

pub struct Request {
    pub app: Arc<App>,
    pub method: Method,
    /// The path in normal form, as matched (a trailing `/` dropped).
    pub path: String,
    /// The pattern's parameters, percent-decoded.
    pub params: Params,
    /// The raw query string, without `?`.
    pub query: String,
    pub headers: HeaderMap,
    /// The body, read up to the operation's bound (empty when the
    /// operation reads none).
    pub body: Bytes,
    /// Who is asking: the peer, or the address a trusted proxy forwarded.
    pub client: IpAddr,
    /// The build published when the request arrived; a swap meanwhile
    /// does not change what this request sees.
    pub build: Option<Arc<Build>>,
    /// Who the request's key names, when the operation reads keys
    /// ([`crate::routes::Auth`]).
    pub principal: Option<Principal>,
}

impl Request {
    /// The published build, or 503 while there is none.
    pub fn build(&self) -> Result<&Build, Error> {
        self.build.as_deref().ok_or_else(Error::unavailable)
    }

    /// The principal; an operation that needs one has it (the pipeline
    /// answered 401 otherwise).
    pub fn principal(&self) -> Result<&Principal, Error> {
        self.principal.as_ref().ok_or_else(crate::auth::sign_in_required)
    }

    /// The query parameter `name`, decoded (`+` is a space); 400 when it
    /// is given more than once.
    pub fn query_value(&self, name: &'static str) -> Result<Option<String>, Error> {
        let mut values = form_urlencoded::parse(self.query.as_bytes()).filter(|(k, _)| k == name);
        match (values.next(), values.next()) {
            (_, Some(_)) => Err(shared::http::BadParameter::repeated(name).into()),
            (value, None) => Ok(value.map(|(_, v)| v.into_owned())),
        }
    }

    /// The integer query parameter `name`, from `min` to `max`, if given.
    pub fn query_number(&self, name: &'static str, min: usize, max: usize) -> Result<Option<usize>, Error> {
        let Some(raw) = self.query_value(name)? else { return Ok(None) };
        Ok(Some(shared::http::number(name, &raw, min, max)?))
    }
}

/// Path parameters, each percent-decoded once.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Params(Vec<(String, String)>);

impl Params {
    pub fn new(decoded: Vec<(String, String)>) -> Params {
        Params(decoded)
    }

    /// The parameter `name`; the table guarantees that its pattern has it.
    pub fn get(&self, name: &str) -> &str {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).unwrap_or_default()
    }
}

/// The body as `T`, or a 400 that names the field at fault (as `parameter`,
/// a dotted path) and the rule it broke in plain words: no Rust type names,
/// and no more of the input than a short excerpt.
pub fn parse_body<T: for<'de> Deserialize<'de>>(body: &Bytes) -> Result<T, Error> {
    an_object_without_repeats(body)?;
    let mut json = serde_json::Deserializer::from_slice(body);
    let parsed = serde_path_to_error::deserialize(&mut json).map_err(body_error)?;
    json.end().map_err(|_| Error::invalid_body("the request body has more after its JSON value"))?;
    Ok(parsed)
}

// What `parse_body` does besides deserialising lives in functions of its
// own: `parse_body` is compiled once per body type (about 70), these once.

/// Refuses a body that is JSON but not an object, or an object that names
/// a key twice.
fn an_object_without_repeats(body: &Bytes) -> Result<(), Error> {
    // serde reads a struct from an array too (by position); a body here
    // is an object with named fields.
    if body.trim_ascii_start().first().is_some_and(|b| *b != b'{')
        && serde_json::from_slice::<serde_json::Value>(body).is_ok()
    {
        return Err(Error::invalid_body("the request body must be a JSON object"));
    }
    if let Some(path) = crate::body::duplicate_key(body) {
        let message = format!("{path}: appears twice in its object");
        return Err(Error::invalid_body(message).naming(path));
    }
    Ok(())
}

/// The 400 for a body serde could not read as its type.
fn body_error(error: serde_path_to_error::Error<serde_json::Error>) -> Error {
    // The path holds names from the input (an unknown field's, say).
    let path = crate::reply::excerpt(&error.path().to_string()).into_owned();
    let inner = error.into_inner();
    if !inner.is_data() {
        let message = format!("the request body is not JSON (line {}, column {})", inner.line(), inner.column());
        return Error::invalid_body(message);
    }
    let raw = inner.to_string();
    let rule = crate::wording::serde_rule(&raw);
    // A missing field is named by serde in its message, not its path.
    if let Some(name) = raw.strip_prefix("missing field `").and_then(|r| r.split('`').next()) {
        let field = match path.as_str() {
            "." => name.to_string(),
            parent => format!("{parent}.{name}"),
        };
        let message = format!("{field}: is required");
        return Error::invalid_body(message).naming(field);
    }
    match path.as_str() {
        "." => Error::invalid_body(format!("the request body: {rule}")),
        field => Error::invalid_body(format!("{field}: {rule}")).naming(field.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Debug)]
    #[allow(dead_code)]
    struct Body {
        message: String,
        auth: Option<serde_json::Value>,
    }

    /// Each case: a body, and the field a refusal names (`""` for the
    /// body as a whole), or `None` when it is taken.
    #[test]
    fn one_rule_for_every_body() {
        let cases: &[(&str, Option<&str>)] = &[
            (r#"{"message": "hi"}"#, None),
            ("{\"message\": \"hi\"}\n\t ", None),
            (r#"{"message": "hi"} GARBAGE"#, Some("")),
            (r#"{"message": "hi"}{"message": "again"}"#, Some("")),
            (r#"{"message": "hi", "message": "again"}"#, Some("message")),
            (r#"{"message": "hi", "auth": {"token": "a", "token": "b"}}"#, Some("auth.token")),
            (r#"{"message": "hi", "auth": [{"a": 1}, {"b": 1, "b": 2}]}"#, Some("auth[1].b")),
            (r#"{"message": "hi", "auth": {"token": "a", "Token": "b"}}"#, None),
            (r#"["hi"]"#, Some("")),
        ];
        for (body, refused) in cases {
            let parsed = parse_body::<Body>(&Bytes::from(body.to_string()));
            match (refused, parsed) {
                (None, Ok(_)) => {}
                (Some(field), Err(e)) => {
                    assert_eq!((e.code, e.parameter.as_deref().unwrap_or("")), ("invalid_body", *field), "{body}")
                }
                (expected, got) => panic!("{body}: expected {expected:?}, got {got:?}"),
            }
        }
    }
}
