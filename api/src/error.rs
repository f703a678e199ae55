//! JSON error answers: `{"error": "...", "code": "..."}`, plus the
//! offending `parameter` for validation errors.

use bytes::Bytes;
use serde::Serialize;
use warp::http::{header, Response, StatusCode};
use warp::reply::Response as Reply;

#[derive(Serialize)]
struct Body<'a> {
    error: &'a str,
    code: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameter: Option<&'a str>,
}

pub fn json_error(status: StatusCode, code: &str, message: &str, parameter: Option<&str>) -> Reply {
    let body = serde_json::to_vec(&Body { error: message, code, parameter }).expect("error body serialises");
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CACHE_CONTROL, "no-store")
        .header(header::ACCESS_CONTROL_ALLOW_ORIGIN, "*")
        .body(Bytes::from(body).into())
        .expect("valid error response")
}

pub fn not_found(path: &str) -> Reply {
    json_error(StatusCode::NOT_FOUND, "not_found", &format!("no route {path}"), None)
}

pub fn method_not_allowed(allow: &str) -> Reply {
    let mut response = json_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "method not allowed", None);
    response.headers_mut().insert(header::ALLOW, allow.parse().expect("static header"));
    response
}
