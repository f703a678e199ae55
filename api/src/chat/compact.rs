//! Compacting a session's history (`POST /chat/session/{id}/compact`):
//! the older entries are summarised by a configured OpenAI-compatible
//! provider and replaced by the summary, kept as an agent-role entry; the
//! newest `preserveEntries` stay as they are. Billed to the signed-in
//! account: 401 without one, 402 when short, 502 when the provider fails,
//! 503 when no provider is configured.

use serde::Deserialize;
use serde_json::{json, Value};
use warp::http::StatusCode;

use super::{entry, new_id, openai};
use crate::reply::{self, Answer, Error};
use crate::request::{parse_body, Request};
use crate::store::{self, chat as stored, credits};

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CompactRequest {
    preserve_entries: Option<f64>,
}

/// The instruction the summariser gets.
const INSTRUCTION: &str = "Summarise this conversation between a user and an agent for the agent to continue it: \
    keep names, numbers, decisions and open questions; write plain prose, no preamble.";

pub async fn compact(request: Request) -> Answer {
    let chat = &request.app.chat;
    let principal = request.principal.as_ref().ok_or_else(crate::auth::sign_in_required)?;
    let account = principal.billing(&request.headers)?;
    let body: CompactRequest = match request.body.trim_ascii().is_empty() {
        true => CompactRequest::default(),
        false => parse_body(&request.body)?,
    };
    let preserve = match body.preserve_entries {
        None => 0,
        Some(n) if n >= 0.0 && n.fract() == 0.0 && n <= 10_000.0 => n as usize,
        Some(_) => {
            return Err(Error::invalid_body("preserveEntries: a whole number, 0 or more").naming("preserveEntries"))
        }
    };
    let id = request.params.get("sessionId").to_string();
    let session = super::held(&request, &id).await?;
    super::access::require_owner(&request, &session).await?;
    let Some(provider) = chat.summarizer.clone() else {
        return Err(Error::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "compaction_disabled",
            "no summarisation provider is configured",
        ));
    };
    let since = store::now_ms() - session.history_ttl * 1000;
    let (key, limit) = (id.clone(), chat.max_history_entries);
    let history = request.app.store.read(move |conn| stored::history(conn, &key, since, limit)).await?;
    if history.len() <= preserve {
        let message = format!("nothing to summarise: {} entries, {preserve} to preserve", history.len());
        return Err(Error::new(StatusCode::BAD_REQUEST, "nothing_to_summarize", message));
    }
    if history.iter().any(|m| m.cipher_envelope.is_some()) {
        let message = "an encrypted session's history cannot be summarised here: the broker cannot read it";
        return Err(Error::new(StatusCode::BAD_REQUEST, "nothing_to_summarize", message));
    }
    let price = request.app.pricing.chat.compaction;
    let owner = account.clone();
    let balance = request.app.store.read(move |conn| credits::balance(conn, &owner)).await?;
    if balance < price {
        return Err(crate::broker::register::short(price, balance, price - balance));
    }
    let (older, kept) = history.split_at(history.len() - preserve);
    let transcript: String =
        older.iter().map(|m| format!("{}: {}\n", if m.role == "user" { "User" } else { "Agent" }, m.content)).collect();
    let messages = [json!({"role": "system", "content": INSTRUCTION}), json!({"role": "user", "content": transcript})];
    let completion = openai::complete(&chat.gate, &provider, &messages, chat.max_answer_bytes)
        .await
        .map_err(|f| Error::new(StatusCode::BAD_GATEWAY, "summarization_failed", f.message().to_string()))?;
    let summary = stored::Message {
        message_id: new_id("msg_"),
        role: "agent".into(),
        content: completion.text.clone(),
        cipher_envelope: None,
        created_at: older[0].created_at,
    };
    let summarized: Vec<String> = older.iter().map(|m| m.message_id.clone()).collect();
    let (key, held, change) = (
        id.clone(),
        summary.clone(),
        credits::Change {
            account,
            kind: credits::Kind::Debit,
            credits: price,
            idempotency_key: format!("compact:{}", summary.message_id),
            reason: "chat history compaction".into(),
            reference: Some(id.clone()),
        },
    );
    let outcome = request
        .app
        .store
        .write(move |conn| {
            if price > 0 {
                if let credits::Posted::Short { balance, shortfall } = credits::post(conn, &change, store::now_ms())? {
                    return Ok(Err((balance, shortfall)));
                }
            }
            stored::compact(conn, &key, &summarized, &held)?;
            Ok(Ok(()))
        })
        .await?;
    if let Err((balance, shortfall)) = outcome {
        return Err(crate::broker::register::short(price, balance, shortfall));
    }
    let summary_entry = entry(&summary);
    let preserved: Vec<Value> = kept.iter().map(entry).collect();
    let mut history = vec![summary_entry.clone()];
    history.extend(preserved.iter().cloned());
    Ok(reply::json(&json!({
        "sessionId": id,
        "history": history,
        "summaryEntry": summary_entry,
        "preservedEntries": preserved,
        "historyTtlSeconds": session.history_ttl,
        "creditsDebited": price,
        "metadata": {"summarizedEntries": older.len(), "model": provider.model, "tokens": completion.total_tokens},
    })))
}
