//! Answers. One type for every answer ([`Reply`], an HTTP response whose
//! body is either buffered or streamed), and the ways the api makes one
//! (CORS headers are added to every answer by the `cors` module):
//! JSON computed on the request, JSON errors, a published representation
//! with its validators (or 304 / 412), and a stream of chunks sent as they
//! are produced (server-sent events for chat).

use std::borrow::Cow;
use std::time::SystemTime;

use bytes::Bytes;
use futures_util::Stream;
use serde::Serialize;
use shared::http::{Cache, JSON};
use warp::http::{header, HeaderMap, HeaderValue, Method, Response, StatusCode};
use warp::Reply as _;

use crate::conditional::{self, Outcome, Preconditions};

/// An HTTP answer; its body is buffered ([`Bytes`]) or a stream.
pub type Reply = warp::reply::Response;

/// Caches may store one variant per encoding once compressed variants are
/// offered; sent on every static answer and its 304s.
const VARY: &str = "Accept-Encoding";

/// A published answer: the exact bytes and the headers the manifest gives
/// them, made header values once, when the build is loaded, so that
/// answering (and above all answering 304) copies nothing.
#[derive(Clone, Debug)]
pub struct Representation {
    pub body: Bytes,
    /// Strong and quoted: `"…"`.
    pub etag: HeaderValue,
    pub last_modified: SystemTime,
    pub last_modified_text: HeaderValue,
    pub content_type: HeaderValue,
    pub cache_control: HeaderValue,
}

/// A manifest value that cannot be a header value (a damaged build).
#[derive(Debug, thiserror::Error)]
#[error("{field} {value:?} is not a valid header value")]
pub struct BadHeader {
    field: &'static str,
    value: String,
}

impl From<BadHeader> for Error {
    fn from(bad: BadHeader) -> Error {
        Error::bad_answer(bad)
    }
}

impl Representation {
    /// From the manifest's spelling of each header.
    pub fn new(
        body: Bytes,
        etag: &str,
        last_modified: &str,
        content_type: &str,
        cache_control: &str,
    ) -> Result<Representation, BadHeader> {
        let value = |field, text: &str| match shared::http::static_value(text) {
            Some(known) => Ok(HeaderValue::from_static(known)),
            None => HeaderValue::from_str(text).map_err(|_| BadHeader { field, value: text.to_string() }),
        };
        let date = httpdate::parse_http_date(last_modified)
            .map_err(|_| BadHeader { field: "Last-Modified", value: last_modified.to_string() })?;
        Ok(Representation {
            body,
            etag: value("ETag", etag)?,
            last_modified: date,
            last_modified_text: value("Last-Modified", last_modified)?,
            content_type: value("Content-Type", content_type)?,
            cache_control: value("Cache-Control", cache_control)?,
        })
    }

    /// A representation computed on the request (the generator's type):
    /// headers made as the manifest would make them.
    pub fn computed(r: shared::http::Representation) -> Result<Representation, BadHeader> {
        let etag = shared::manifest::etag(&r.body);
        let last_modified = r.last_modified.http_date();
        Representation::new(Bytes::from(r.body), &etag, &last_modified, r.content_type, r.cache.header())
    }

    /// The entity tag as text (header values made from text are text).
    pub fn etag(&self) -> &str {
        self.etag.to_str().unwrap_or_default()
    }
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
    code: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameter: Option<&'a str>,
    /// Fields a refusal carries besides (a 402's `shortfallCredits`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    fields: Option<&'a serde_json::Map<String, serde_json::Value>>,
}

/// What a handler gives back: an answer, or a refusal the pipeline turns
/// into the endpoint's error form.
pub type Answer = Result<Reply, Error>;

/// A refusal: an error status, a machine-readable `code`, a message for
/// people, the parameter at fault if any, and headers the status calls for
/// (`Allow` with 405, `Retry-After` with 429).
#[derive(Debug)]
pub struct Error {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub parameter: Option<Cow<'static, str>>,
    /// Boxed: refusals travel in `Result`s, which stay small without it.
    pub headers: Option<Box<HeaderMap>>,
    /// More fields for the JSON body.
    pub fields: Option<Box<serde_json::Map<String, serde_json::Value>>>,
}

impl Error {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Error {
        Error { status, code, message: message.into(), parameter: None, headers: None, fields: None }
    }

    /// 400 naming a query or path parameter.
    pub fn parameter(parameter: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Error {
        let parameter = Some(parameter.into());
        Error { parameter, ..Error::new(StatusCode::BAD_REQUEST, "invalid_parameter", message) }
    }

    /// 400 `invalid_body`: a request body refused (name the field with
    /// [`Error::naming`]).
    pub fn invalid_body(message: impl Into<String>) -> Error {
        Error::new(StatusCode::BAD_REQUEST, "invalid_body", message)
    }

    /// 401: no principal, or not the one claimed.
    pub fn unauthorized(code: &'static str, message: impl Into<String>) -> Error {
        Error::new(StatusCode::UNAUTHORIZED, code, message)
    }

    /// 403 `forbidden`: the principal may not do this.
    pub fn forbidden(message: impl Into<String>) -> Error {
        Error::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// The refusal naming the request field at fault.
    pub fn naming(mut self, parameter: impl Into<Cow<'static, str>>) -> Error {
        self.parameter = Some(parameter.into());
        self
    }

    /// A published file that is not what its build says: never served.
    pub fn damaged(damage: &shared::manifest::Damage) -> Error {
        let message = format!("the file of this route is damaged ({damage}); it is not served");
        Error::new(StatusCode::INTERNAL_SERVER_ERROR, "damaged_file", message)
    }

    /// An agent record of the build that does not read as one: never
    /// served.
    pub fn damaged_record(error: &anyhow::Error) -> Error {
        let message = format!("the build's record of this agent is damaged ({error:#})");
        Error::new(StatusCode::INTERNAL_SERVER_ERROR, "damaged_record", message)
    }

    /// An answer the api made and cannot send (500 `bad_answer`): a
    /// computed body whose headers are not header-safe, a page that did not
    /// render.
    pub fn bad_answer(problem: impl std::fmt::Display) -> Error {
        Error::new(StatusCode::INTERNAL_SERVER_ERROR, "bad_answer", problem.to_string())
    }

    pub fn not_found(path: &str) -> Error {
        Error::new(StatusCode::NOT_FOUND, "not_found", format!("no route {}", excerpt(path)))
    }

    pub fn method_not_allowed(allow: HeaderValue) -> Error {
        Error::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "method not allowed")
            .with(header::ALLOW, allow)
    }

    /// The refusal with more fields in its body (`fields` is an object).
    pub fn with_fields(mut self, fields: serde_json::Value) -> Error {
        if let serde_json::Value::Object(map) = fields {
            self.fields.get_or_insert_default().extend(map);
        }
        self
    }

    /// The refusal with a header its status calls for.
    pub fn with(mut self, name: header::HeaderName, value: HeaderValue) -> Error {
        self.headers.get_or_insert_default().insert(name, value);
        self
    }

    /// The JSON-RPC or JSON reply gets these headers.
    pub fn add_headers(headers: Option<Box<HeaderMap>>, reply: &mut Reply) {
        if let Some(headers) = headers {
            reply.headers_mut().extend(*headers);
        }
    }

    pub fn unavailable() -> Error {
        Error::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "no build has been published yet")
    }

    /// The JSON form: `{"error": message, "code": code[, "parameter"]}`,
    /// never stored by caches.
    pub fn into_reply(self) -> Reply {
        let body = ErrorBody {
            error: &self.message,
            code: self.code,
            parameter: self.parameter.as_deref(),
            fields: self.fields.as_deref(),
        };
        let mut reply = error_reply(self.status, &body);
        Error::add_headers(self.headers, &mut reply);
        reply
    }
}

impl From<shared::http::BadParameter> for Error {
    fn from(bad: shared::http::BadParameter) -> Error {
        Error::parameter(bad.parameter, bad.message)
    }
}

fn error_reply(status: StatusCode, body: &ErrorBody) -> Reply {
    let body = serde_json::to_vec(body).expect("error body serialises");
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, JSON)
        .header(header::CACHE_CONTROL, Cache::NoStore.header())
        .body(Bytes::from(body).into())
        .expect("valid error response")
}

/// A JSON answer computed on the request. Its `Cache-Control` comes from
/// the route table (the pipeline adds it).
pub fn json(body: &serde_json::Value) -> Reply {
    bytes(body.to_string().into_bytes())
}

/// [`json`] with a status other than 200 (201, 202, 207).
pub fn json_with(status: StatusCode, body: &serde_json::Value) -> Reply {
    let mut reply = json(body);
    *reply.status_mut() = status;
    reply
}

/// [`json`] for a body already serialised.
pub fn bytes(body: Vec<u8>) -> Reply {
    Response::builder().header(header::CONTENT_TYPE, JSON).body(Bytes::from(body).into()).expect("valid JSON response")
}

/// A published representation, or 304 / 412 as the request's
/// preconditions say (RFC 9110 section 13), with no body for `HEAD`.
pub fn representation(method: &Method, headers: &HeaderMap, r: &Representation) -> Reply {
    match outcome(headers, r) {
        Outcome::PreconditionFailed => {
            let message = "a precondition of the request failed";
            Error::new(StatusCode::PRECONDITION_FAILED, "precondition_failed", message).into_reply()
        }
        Outcome::NotModified => published(StatusCode::NOT_MODIFIED, None, r),
        Outcome::Proceed if method == Method::HEAD => published(StatusCode::OK, None, r),
        Outcome::Proceed => published(StatusCode::OK, Some(r.body.clone()), r),
    }
}

/// Whether the request asks whether a copy it holds is current
/// (`If-None-Match` or `If-Modified-Since`).
pub fn asks_if_modified(headers: &HeaderMap) -> bool {
    headers.contains_key(header::IF_NONE_MATCH) || headers.contains_key(header::IF_MODIFIED_SINCE)
}

/// 304 when the request's preconditions say the copy it holds of `head`
/// is current; `None` for any other outcome. `head` needs only its
/// validators and headers, not its body.
pub fn not_modified(headers: &HeaderMap, head: &Representation) -> Option<Reply> {
    (outcome(headers, head) == Outcome::NotModified).then(|| published(StatusCode::NOT_MODIFIED, None, head))
}

/// What the request's preconditions say of `r`.
fn outcome(headers: &HeaderMap, r: &Representation) -> Outcome {
    let value = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let (if_match, if_none_match) = (list_field(headers, header::IF_MATCH), list_field(headers, header::IF_NONE_MATCH));
    let preconditions = Preconditions {
        if_match: if_match.as_deref(),
        if_none_match: if_none_match.as_deref(),
        if_modified_since: value(header::IF_MODIFIED_SINCE),
        if_unmodified_since: value(header::IF_UNMODIFIED_SINCE),
    };
    conditional::evaluate(&preconditions, r.etag(), r.last_modified)
}

/// `r`'s answer with `status`: its validators and caching always, its
/// type and length with 200.
fn published(status: StatusCode, body: Option<Bytes>, r: &Representation) -> Reply {
    let mut response = Response::new(body.map(Into::into).unwrap_or_default());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.reserve(8);
    headers.insert(header::ETAG, r.etag.clone());
    headers.insert(header::LAST_MODIFIED, r.last_modified_text.clone());
    headers.insert(header::CACHE_CONTROL, r.cache_control.clone());
    headers.insert(header::VARY, HeaderValue::from_static(VARY));
    if status == StatusCode::OK {
        headers.insert(header::CONTENT_TYPE, r.content_type.clone());
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(r.body.len()));
    }
    response
}

/// A list field's lines as one value, joined by commas as RFC 9110 section
/// 5.3 combines them; a line that is not visible ASCII names no entity tag
/// but still counts as sent (so an `If-Match` of garbage fails, not
/// passes). Borrowed for the usual single line.
fn list_field(headers: &HeaderMap, name: header::HeaderName) -> Option<Cow<'_, str>> {
    let mut lines = headers.get_all(name).iter().map(|v| v.to_str().unwrap_or(""));
    let first = lines.next()?;
    Some(match lines.next() {
        None => first.into(),
        Some(second) => [first, second].into_iter().chain(lines).collect::<Vec<_>>().join(", ").into(),
    })
}

/// At most the first 64 characters of client input, for an error message:
/// enough to recognise it, too little to reflect a payload back.
pub fn excerpt(input: &str) -> Cow<'_, str> {
    const KEEP: usize = 64;
    match input.char_indices().nth(KEEP) {
        None => Cow::Borrowed(input),
        Some((end, _)) => Cow::Owned(format!("{}…", &input[..end])),
    }
}

/// A streamed answer: each chunk is sent as soon as `chunks` yields it.
/// When the client goes away the stream is dropped, so whatever feeds it
/// (a channel's sender, an upstream connection) learns at once and stops.
/// An `Err` item ends the response abruptly (the client sees a truncated
/// body, as with any failed upstream).
pub fn stream<S, E>(content_type: &str, cache_control: &str, chunks: S) -> Reply
where
    S: Stream<Item = Result<Bytes, E>> + Send + Sync + 'static,
    E: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    let mut response = warp::reply::stream(chunks).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, content_type.parse().expect("a valid content type"));
    headers.insert(header::CACHE_CONTROL, cache_control.parse().expect("a valid cache policy"));
    response
}

/// A live store failure answered as the 500 it is (logged; the answer
/// says no more).
/// A failure of the live store: 503 when asking again soon may succeed
/// (the store unreachable or busy), else 500.
impl From<crate::store::Failure> for Error {
    fn from(failure: crate::store::Failure) -> Error {
        if failure.is_transient() {
            tracing::warn!(error = %failure, "live store");
            return Error::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                "the live store cannot answer now; try again",
            );
        }
        tracing::error!(error = %failure, "live store");
        Error::new(StatusCode::INTERNAL_SERVER_ERROR, "store_failed", "the live store failed; try again")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use futures_util::StreamExt;
    use tokio::sync::mpsc;

    use super::*;

    /// The reply's status, the headers named, and its body.
    async fn read(reply: Reply, names: &[header::HeaderName]) -> (u16, Vec<Option<String>>, Vec<u8>) {
        use http_body_util::BodyExt;
        let status = reply.status().as_u16();
        let headers = names.iter().map(|n| reply.headers().get(n).map(|v| v.to_str().unwrap().to_string())).collect();
        let body = reply.into_body().collect().await.unwrap().to_bytes().to_vec();
        (status, headers, body)
    }

    #[tokio::test]
    async fn a_representation_answers_as_its_preconditions_say() {
        let r = Representation::new(
            Bytes::from_static(b"{\"a\":1}"),
            "\"e1\"",
            "Mon, 01 Jan 2024 00:00:00 GMT",
            "application/json",
            "public, max-age=60",
        )
        .unwrap();
        let names = [header::ETAG, header::CACHE_CONTROL, header::CONTENT_TYPE, header::CONTENT_LENGTH];
        /// (method, request headers) → status, whether the entity headers
        /// are sent, body.
        type Case = (Method, &'static [(&'static str, &'static [u8])], u16, bool, &'static [u8]);
        let cases: &[Case] = &[
            (Method::GET, &[], 200, true, b"{\"a\":1}"),
            (Method::HEAD, &[], 200, true, b""),
            (Method::GET, &[("if-none-match", b"\"e1\"")], 304, false, b""),
            (Method::GET, &[("if-none-match", b"W/\"e1\", \"x\"")], 304, false, b""),
            (Method::GET, &[("if-none-match", b"\"e2\"")], 200, true, b"{\"a\":1}"),
            (Method::GET, &[("if-modified-since", b"Mon, 01 Jan 2024 00:00:00 GMT")], 304, false, b""),
            (Method::GET, &[("if-modified-since", b"Sun, 31 Dec 2023 00:00:00 GMT")], 200, true, b"{\"a\":1}"),
            // Field lines of one list are combined (RFC 9110 section 5.3).
            (Method::GET, &[("if-none-match", b"\"x\""), ("if-none-match", b"\"e1\"")], 304, false, b""),
            (Method::GET, &[("if-match", b"\"x\""), ("if-match", b"\"e1\"")], 200, true, b"{\"a\":1}"),
        ];
        for (method, request, status, entity, body) in cases {
            let mut headers = HeaderMap::new();
            for (k, v) in *request {
                headers.append(*k, HeaderValue::from_bytes(v).unwrap());
            }
            let (got, values, bytes) = read(representation(method, &headers, &r), &names).await;
            assert_eq!(got, *status, "{method} {request:?}");
            assert_eq!(values[0].as_deref(), Some("\"e1\""), "{method} {request:?}: the ETag is always sent");
            assert_eq!(values[1].as_deref(), Some("public, max-age=60"), "{method} {request:?}");
            assert_eq!(values[2].is_some(), *entity, "{method} {request:?}: Content-Type");
            assert_eq!(values[3].as_deref(), entity.then_some("7"), "{method} {request:?}: Content-Length");
            assert_eq!(&bytes[..], *body, "{method} {request:?}");
        }
        let mut failing = HeaderMap::new();
        failing.insert(header::IF_MATCH, "\"e2\"".parse().unwrap());
        let (status, values, body) = read(representation(&Method::GET, &failing, &r), &names).await;
        assert_eq!((status, values[1].as_deref()), (412, Some("no-store")));
        assert!(String::from_utf8(body).unwrap().contains("precondition_failed"));
        // An If-Match that is not visible ASCII matches nothing: 412, not
        // ignored.
        let mut garbage = HeaderMap::new();
        garbage.insert(header::IF_MATCH, HeaderValue::from_bytes(b"\"e1\xff\"").unwrap());
        let (status, _, _) = read(representation(&Method::GET, &garbage, &r), &names).await;
        assert_eq!(status, 412);
    }

    #[tokio::test]
    async fn refusals_are_json_never_stored_and_carry_their_headers() {
        let names = [header::CONTENT_TYPE, header::CACHE_CONTROL, header::ALLOW];
        let (status, values, body) =
            read(Error::parameter("page", "page must be 1 or more").into_reply(), &names).await;
        assert_eq!(status, 400);
        assert_eq!(values[..2], [Some("application/json".into()), Some("no-store".into())]);
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"error": "page must be 1 or more", "code": "invalid_parameter", "parameter": "page"})
        );
        let allow = HeaderValue::from_static("GET, HEAD, OPTIONS");
        let (status, values, body) = read(Error::method_not_allowed(allow).into_reply(), &names).await;
        assert_eq!((status, values[2].as_deref()), (405, Some("GET, HEAD, OPTIONS")));
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert!(body.get("parameter").is_none(), "no parameter: the field is omitted, not null");
    }

    /// Serves one streamed answer fed by the returned sender, on loopback,
    /// through the api's own connection loop.
    async fn streaming_server(
    ) -> (String, mpsc::Receiver<mpsc::Sender<Result<Bytes, std::io::Error>>>, Arc<crate::connection::Connections>)
    {
        let (senders_tx, senders_rx) = mpsc::channel(4);
        let answer = move |_request, _peer| {
            let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(1);
            senders_tx.try_send(tx).expect("one request at a time");
            let chunks =
                futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) });
            std::future::ready(stream("text/event-stream", "no-store", chunks))
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seconds = Duration::from_secs(5);
        let limits = crate::connection::Limits {
            max_connections: 16,
            header_timeout: seconds,
            idle_timeout: seconds,
            send_timeout: seconds,
            body_timeout: seconds,
            max_head_bytes: 8192,
        };
        let connections = crate::connection::Connections::new(limits);
        tokio::spawn(crate::server::accept(listener, connections.clone(), std::future::pending(), answer));
        (format!("http://{addr}/"), senders_rx, connections)
    }

    #[tokio::test]
    async fn chunks_reach_the_client_as_they_are_produced() {
        let (url, mut senders, _) = streaming_server().await;
        let response = http_client::get(&url).await.unwrap();
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        assert_eq!(response.headers()["cache-control"], "no-store");
        let tx = senders.recv().await.unwrap();
        let mut body = response.bytes_stream();
        // Each chunk is read before the next exists: nothing is buffered
        // until the end.
        for event in ["data: one\n\n", "data: two\n\n", "data: three\n\n"] {
            tx.send(Ok(Bytes::from(event))).await.unwrap();
            let mut got = Vec::new();
            while got.len() < event.len() {
                let chunk = tokio::time::timeout(Duration::from_secs(5), body.next()).await.expect("chunk in time");
                got.extend_from_slice(&chunk.unwrap().unwrap());
            }
            assert_eq!(got, event.as_bytes());
        }
        drop(tx);
        assert!(body.next().await.is_none(), "the stream ends when its producer does");
    }

    #[tokio::test]
    async fn a_client_that_goes_away_mid_stream_releases_the_producer() {
        let (url, mut senders, connections) = streaming_server().await;
        let response = http_client::get(&url).await.unwrap();
        assert_eq!(connections.count(), 1);
        let tx = senders.recv().await.unwrap();
        tx.send(Ok(Bytes::from("data: first\n\n"))).await.unwrap();
        let mut body = response.bytes_stream();
        body.next().await.unwrap().unwrap();
        drop(body);
        // The server drops the stream, and with it the receiver: the
        // producer's channel closes instead of filling forever.
        tokio::time::timeout(Duration::from_secs(5), tx.closed()).await.expect("the producer is released");
        assert!(tx.send(Ok(Bytes::from("data: lost\n\n"))).await.is_err());
        // And the connection's place is free again.
        let start = std::time::Instant::now();
        while connections.count() > 0 {
            assert!(start.elapsed() < Duration::from_secs(5), "the connection is released");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
