//! CORS (the Fetch standard's cross-origin rules), in one place. Every
//! answer may be read from any origin: the data is public and no route
//! relies on cookies, so `*` is safe, and `ETag` is exposed so that a
//! page can revalidate what it fetched. Preflights name the methods the
//! route answers and the request headers a page may send.

use warp::http::{header, HeaderMap, HeaderValue, Response, StatusCode};

use crate::reply::Reply;

/// How long a browser may keep a preflight's answer, in seconds.
const MAX_AGE: &str = "86400";

/// Gives an answer its CORS headers: readable from any origin, `ETag`
/// exposed. Applied once, to every answer, as the request leaves the api.
pub fn public(mut reply: Reply) -> Reply {
    let headers = reply.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("ETag"));
    reply
}

/// Which request headers a preflight allows.
pub enum AllowHeaders {
    /// Whatever the page asks for (`Access-Control-Request-Headers`), or
    /// these when it asks for none.
    Requested { default: &'static str },
    /// Exactly these.
    Only(&'static str),
}

/// The answer to a preflight (`OPTIONS`) for a route answering `methods`.
pub fn preflight(request: &HeaderMap, methods: HeaderValue, allow: AllowHeaders) -> Reply {
    let headers = match allow {
        AllowHeaders::Requested { default } => {
            request.get(header::ACCESS_CONTROL_REQUEST_HEADERS).cloned().unwrap_or(HeaderValue::from_static(default))
        }
        AllowHeaders::Only(list) => HeaderValue::from_static(list),
    };
    let reply = Response::builder()
        .status(StatusCode::NO_CONTENT)
        .header(header::ACCESS_CONTROL_ALLOW_METHODS, methods.clone())
        .header(header::ACCESS_CONTROL_ALLOW_HEADERS, headers)
        .header(header::ACCESS_CONTROL_MAX_AGE, MAX_AGE)
        .header(header::ALLOW, methods)
        .body(Default::default())
        .expect("valid preflight response");
    public(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(reply: &Reply, name: header::HeaderName) -> Option<&str> {
        reply.headers().get(name).map(|v| v.to_str().unwrap())
    }

    #[test]
    fn every_answer_is_public_and_exposes_its_etag() {
        let reply = public(crate::reply::Error::not_found("/x").into_reply());
        assert_eq!(header(&reply, header::ACCESS_CONTROL_ALLOW_ORIGIN), Some("*"));
        assert_eq!(header(&reply, header::ACCESS_CONTROL_EXPOSE_HEADERS), Some("ETag"));
        assert_eq!(reply.status(), StatusCode::NOT_FOUND, "the answer is otherwise unchanged");
    }

    #[test]
    fn preflights() {
        // (request headers asked for, policy) → allowed headers
        let check = |asked: Option<&'static str>, allow: AllowHeaders, expected: &str| {
            let mut request = HeaderMap::new();
            if let Some(asked) = asked {
                request.insert(header::ACCESS_CONTROL_REQUEST_HEADERS, HeaderValue::from_static(asked));
            }
            let reply = preflight(&request, HeaderValue::from_static("GET, HEAD, POST, OPTIONS"), allow);
            assert_eq!(reply.status(), StatusCode::NO_CONTENT);
            assert_eq!(header(&reply, header::ACCESS_CONTROL_ALLOW_HEADERS), Some(expected), "{asked:?}");
            assert_eq!(header(&reply, header::ACCESS_CONTROL_ALLOW_METHODS), Some("GET, HEAD, POST, OPTIONS"));
            assert_eq!(header(&reply, header::ALLOW), Some("GET, HEAD, POST, OPTIONS"));
            assert_eq!(header(&reply, header::ACCESS_CONTROL_MAX_AGE), Some("86400"));
            assert_eq!(header(&reply, header::ACCESS_CONTROL_ALLOW_ORIGIN), Some("*"));
        };
        let default = "If-None-Match, If-Modified-Since";
        check(Some("content-type"), AllowHeaders::Requested { default }, "content-type");
        check(None, AllowHeaders::Requested { default }, default);
        check(Some("x-evil"), AllowHeaders::Only("Content-Type"), "Content-Type");
        check(None, AllowHeaders::Only("Content-Type"), "Content-Type");
    }
}
