//! Routing (spec section 4, Routing): one message to an agent by UAID,
//! without a session, through the adapter the table picks; and the
//! bounded cache of open agent connections it keeps (an A2A agent's card
//! read once, reused until idle), with its status and close routes.

use std::borrow::Cow;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use warp::http::StatusCode;

use super::relay::{self, Failure, Turn};
use super::sessions::Connection;
use crate::reply::{self, Answer, Error};
use crate::request::{parse_body, Request};
use crate::store;

fn code(status: StatusCode, code: &'static str, message: impl Into<String>) -> Error {
    Error::new(status, code, message)
}

/// `POST /api/v1/route/{uaid} {message}`.
pub async fn route(request: Request) -> Answer {
    let uaid = request.params.get("uaid").to_string();
    let body: Value = match request.body.trim_ascii().is_empty() {
        true => json!({}),
        false => parse_body(&request.body)?,
    };
    let text = match &body["message"] {
        Value::String(s) if !s.trim().is_empty() => s.clone(),
        Value::Object(o) if !o.is_empty() => body["message"].to_string(),
        Value::Array(a) if !a.is_empty() => body["message"].to_string(),
        _ => {
            let message = "message: a text, object or array is required";
            return Err(code(StatusCode::BAD_REQUEST, "message_required", message).naming("message"));
        }
    };
    let chat = &request.app.chat;
    if text.len() > chat.max_message_bytes {
        let message = format!("message: larger than {} bytes", chat.max_message_bytes);
        return Err(code(StatusCode::PAYLOAD_TOO_LARGE, "message_too_large", message));
    }
    if uaid.parse::<shared::uaid::Uaid>().is_err() {
        return Err(code(StatusCode::BAD_REQUEST, "invalid_uaid", format!("{uaid:?} is not a UAID")));
    }
    let view = request.app.overlay.view();
    let Some(agent) = crate::broker::register::lookup(&request, &view, &uaid)?.map(Cow::into_owned) else {
        return Err(code(StatusCode::NOT_FOUND, "uaid_not_found", format!("no agent {uaid} is indexed here")));
    };
    let now = store::now_ms();
    let connection = match chat.connections.get(&uaid, now) {
        Some(connection) => connection,
        None => {
            let target = relay::target(&chat.gate, &agent, chat.max_answer_bytes).await.map_err(|f| match f {
                Failure::Unsupported(why) => code(StatusCode::UNPROCESSABLE_ENTITY, "routing_not_supported", why),
                Failure::NotAllowed => crate::egress::refusal(),
                other => code(StatusCode::INTERNAL_SERVER_ERROR, "routing_failed", other.message().to_string()),
            })?;
            let connection = Arc::new(Connection { target, opened_at: now, last_used: AtomicI64::new(now) });
            chat.connections.put(&uaid, connection.clone());
            connection
        }
    };
    connection.last_used.store(now, Ordering::Relaxed);
    let _permit = chat.upstream.clone().try_acquire_owned().map_err(|_| {
        code(StatusCode::SERVICE_UNAVAILABLE, "too_busy", "too many agent calls are in flight; try again")
    })?;
    let session = format!("route:{uaid}");
    let headers = Default::default();
    if connection.target.metered() {
        // Routing bills no one: a metered agent is chatted with in a session.
        let message = "a model-routing provider agent is billed per message: open a chat session with it";
        return Err(code(StatusCode::UNPROCESSABLE_ENTITY, "routing_not_supported", message));
    }
    let turn = Turn { text: &text, session: &session, context: None, history: &[], headers: &headers };
    let reply = relay::send(&chat.gate, &chat.providers, &connection.target, &turn, chat.max_answer_bytes)
        .await
        .map_err(|failure| {
            // A connection that failed is not kept.
            chat.connections.close(&uaid);
            match failure {
                Failure::NotAllowed => crate::egress::refusal(),
                _ => code(StatusCode::INTERNAL_SERVER_ERROR, "routing_failed", failure.message().to_string()),
            }
        })?;
    let mut answer = json!({"response": reply.text, "uaid": uaid, "adapter": connection.adapter()});
    if !reply.raw.is_null() {
        answer["rawResponse"] = reply.raw;
    }
    Ok(reply::json(&answer))
}

/// `GET /api/v1/uaids/connections/{uaid}/status`.
pub async fn status(request: Request) -> Answer {
    let uaid = request.params.get("uaid");
    Ok(reply::json(&match request.app.chat.connections.get(uaid, store::now_ms()) {
        Some(connection) => json!({"connected": true, "adapter": connection.adapter(), "agentId": uaid,
            "connection": connection.describe()}),
        None => json!({"connected": false}),
    }))
}

/// `DELETE /api/v1/uaids/connections/{uaid}`.
pub async fn close(request: Request) -> Answer {
    let uaid = request.params.get("uaid");
    let closed = request.app.chat.connections.close(uaid);
    let message = if closed { "the connection was closed" } else { "no connection was open" };
    Ok(reply::json(&json!({"success": true, "message": message})))
}
