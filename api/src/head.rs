//! The request head, checked before routing (RFC 9112): the form of the
//! request target (section 3.2), the `Host` field (section 3.2) and the
//! message framing (section 6.1). A request that fails here is answered 400
//! and its connection closed, since its body, if any, cannot be trusted to
//! end where the next request begins.
//!
//! Origin-form (`/path?query`) is what clients send to an origin server.
//! Absolute-form (`http://host/path`) must be accepted too (section
//! 3.2.2); it is, when its authority names the same host as `Host`, so
//! that checks on `Host` (the MCP endpoint's) mean what they say.
//! Asterisk-form is for `OPTIONS *` alone; authority-form is for `CONNECT`,
//! which a server that is not a proxy refuses.

use warp::http::uri::Scheme;
use warp::http::{header, HeaderMap, Method, Uri, Version};

/// What is wrong with a head: the answer's `code` and message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadHead {
    pub code: &'static str,
    pub message: &'static str,
}

/// Where a well-formed request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// A path (with the query, if any, in the URI).
    Path(&'a str),
    /// `OPTIONS *`: the server itself.
    Server,
}

const fn bad(code: &'static str, message: &'static str) -> BadHead {
    BadHead { code, message }
}

/// Checks a request head; the target it names, or why it is refused.
pub fn check<'a>(method: &Method, uri: &'a Uri, version: Version, headers: &HeaderMap) -> Result<Target<'a>, BadHead> {
    let host = single_host(version, headers)?;
    framing(headers)?;
    target(method, uri, host)
}

/// The `Host` field: exactly one in HTTP/1.1, at most one before.
fn single_host(version: Version, headers: &HeaderMap) -> Result<Option<&[u8]>, BadHead> {
    let mut hosts = headers.get_all(header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => Err(bad("bad_host", "the Host header field is sent more than once")),
        (None, _) if version == Version::HTTP_11 => Err(bad("bad_host", "an HTTP/1.1 request must carry Host")),
        (host, _) => Ok(host.map(|h| h.as_bytes())),
    }
}

/// Only `chunked` is a transfer coding this server reads (hyper refuses a
/// request whose last coding is another; this refuses `gzip, chunked`
/// too, which hyper would hand on still compressed).
///
/// A request with both `Content-Length` and `Transfer-Encoding` never gets
/// here as such: hyper drops the length, reads the body as chunked and
/// closes the connection after answering, which section 6.1 allows in
/// place of refusing, and which leaves nothing behind the body to be taken
/// for a second request (the smuggling the rule is about).
fn framing(headers: &HeaderMap) -> Result<(), BadHead> {
    let only_chunked = headers
        .get_all(header::TRANSFER_ENCODING)
        .iter()
        .flat_map(|value| value.as_bytes().split(|b| *b == b','))
        .map(|coding| coding.trim_ascii())
        .all(|coding| coding.eq_ignore_ascii_case(b"chunked"));
    if only_chunked {
        Ok(())
    } else {
        Err(bad("bad_framing", "the only transfer coding accepted is chunked"))
    }
}

fn target<'a>(method: &Method, uri: &'a Uri, host: Option<&[u8]>) -> Result<Target<'a>, BadHead> {
    let path = uri.path();
    match (uri.scheme(), uri.authority()) {
        (None, None) if path.starts_with('/') => Ok(Target::Path(path)),
        (None, None) if path == "*" && method == Method::OPTIONS => Ok(Target::Server),
        (None, None) => Err(bad("bad_target", "the request target must be a path")),
        (Some(scheme), Some(authority)) if *scheme == Scheme::HTTP || *scheme == Scheme::HTTPS => {
            let same = host.is_some_and(|h| h.eq_ignore_ascii_case(authority.as_str().as_bytes()));
            if same {
                Ok(Target::Path(if path.is_empty() { "/" } else { path }))
            } else {
                Err(bad("bad_target", "an absolute request target must name the Host"))
            }
        }
        _ => Err(bad("bad_target", "the request target must be a path")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (method, target, version, header lines) → the target, or the code.
    fn check_case(
        method: &str,
        target: &str,
        version: Version,
        fields: &[(&str, &str)],
        expected: Result<Target, &str>,
    ) {
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let uri: Uri = target.parse().unwrap();
        let mut headers = HeaderMap::new();
        for (name, value) in fields {
            headers.append(header::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
        }
        let got = check(&method, &uri, version, &headers).map_err(|bad| bad.code);
        assert_eq!(got, expected, "{method} {target} {version:?} {fields:?}");
    }

    const V11: Version = Version::HTTP_11;
    const HOST: (&str, &str) = ("host", "example.org");

    #[test]
    fn targets() {
        check_case("GET", "/a?b", V11, &[HOST], Ok(Target::Path("/a")));
        check_case("OPTIONS", "*", V11, &[HOST], Ok(Target::Server));
        check_case("GET", "*", V11, &[HOST], Err("bad_target"));
        check_case("CONNECT", "example.org:443", V11, &[HOST], Err("bad_target"));
        check_case("GET", "example.org:443", V11, &[HOST], Err("bad_target"));
        check_case("GET", "http://example.org/a", V11, &[HOST], Ok(Target::Path("/a")));
        check_case("GET", "http://EXAMPLE.org", V11, &[HOST], Ok(Target::Path("/")));
        check_case("GET", "http://other.org/a", V11, &[HOST], Err("bad_target"));
        check_case("GET", "http://example.org:8080/a", V11, &[HOST], Err("bad_target"));
        check_case("GET", "ftp://example.org/a", V11, &[HOST], Err("bad_target"));
    }

    #[test]
    fn host() {
        check_case("GET", "/", V11, &[], Err("bad_host"));
        check_case("GET", "/", Version::HTTP_10, &[], Ok(Target::Path("/")));
        check_case("GET", "/", V11, &[HOST, ("host", "example.org")], Err("bad_host"));
        check_case("GET", "/", Version::HTTP_10, &[HOST, ("host", "b")], Err("bad_host"));
    }

    #[test]
    fn framing() {
        check_case("POST", "/", V11, &[HOST, ("transfer-encoding", "chunked")], Ok(Target::Path("/")));
        check_case("POST", "/", V11, &[HOST, ("transfer-encoding", "Chunked")], Ok(Target::Path("/")));
        check_case("POST", "/", V11, &[HOST, ("transfer-encoding", "gzip, chunked")], Err("bad_framing"));
        check_case("POST", "/", V11, &[HOST, ("transfer-encoding", "gzip")], Err("bad_framing"));
        check_case("POST", "/", V11, &[HOST, ("content-length", "5")], Ok(Target::Path("/")));
    }
}
