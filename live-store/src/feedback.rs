//! ERC-8004 feedback given through the api, and the chat sessions it is
//! judged by. One entry per session; each is an outbox event, so the next
//! build publishes it with the rest of the agent's feedback.

use crate::params;
use crate::sql::{Conn, Optional};
use broker_model::catalog::FeedbackEntry;
use broker_model::journal::Event;

use super::{outbox, Failure};

/// A chat session as eligibility reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    pub id: String,
    pub uaid: String,
    pub account: Option<String>,
    pub messages: u64,
    /// Feedback was already given in it.
    pub given: bool,
}

pub fn session(conn: &Conn, id: &str) -> Result<Option<Session>, Failure> {
    let sql = "SELECT s.id, s.uaid, s.account_id,
                      (SELECT COUNT(*) FROM chat_messages m WHERE m.session_id = s.id),
                      EXISTS (SELECT 1 FROM agent_feedback f WHERE f.session_id = s.id)
               FROM chat_sessions s WHERE s.id = ?1";
    conn.query_row(sql, [id], |r| {
        Ok(Session { id: r.get(0)?, uaid: r.get(1)?, account: r.get(2)?, messages: r.get(3)?, given: r.get(4)? })
    })
    .optional()
}

/// How giving feedback went.
#[derive(Debug, PartialEq)]
pub enum Given {
    /// Stored as outbox event `seq`, with its feedback index.
    Done { seq: i64, entry: Box<FeedbackEntry> },
    /// The session already has feedback.
    Already,
}

/// Stores `entry` for `session`. Its `feedback_index` is set here: one
/// past the client's entries for the agent, counting the `published` ones
/// of the build and those stored since the build's journal point
/// `journal_seq`.
pub fn give(
    conn: &Conn,
    session: &str,
    mut entry: FeedbackEntry,
    published: u64,
    journal_seq: i64,
    now: i64,
) -> Result<Given, Failure> {
    let given: bool =
        conn.query_row("SELECT EXISTS (SELECT 1 FROM agent_feedback WHERE session_id = ?1)", [session], |r| r.get(0))?;
    if given {
        return Ok(Given::Already);
    }
    let since: u64 = conn.query_row(
        "SELECT COUNT(*) FROM agent_feedback WHERE uaid = ?1 AND client = ?2 AND seq > ?3",
        params![entry.uaid, entry.client, journal_seq],
        |r| r.get(0),
    )?;
    entry.feedback_index = published + since + 1;
    let seq = outbox::push(conn, now, &Event::Feedback { entry: Box::new(entry.clone()) })?;
    let text = serde_json::to_string(&entry).map_err(|e| Failure::Corrupt(e.to_string()))?;
    conn.execute(
        "INSERT INTO agent_feedback (session_id, uaid, client, entry, seq, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![session, entry.uaid, entry.client, text, seq, now],
    )?;
    Ok(Given::Done { seq, entry: Box::new(entry) })
}

/// The feedback on `uaid` stored after `seq` (a build's journal point).
pub fn after(conn: &Conn, uaid: &str, seq: i64) -> Result<Vec<FeedbackEntry>, Failure> {
    let rows = conn.query_map(
        "SELECT entry FROM agent_feedback WHERE uaid = ?1 AND seq > ?2 ORDER BY seq",
        params![uaid, seq],
        |r| r.get::<String>(0),
    )?;
    let mut out = Vec::new();
    for text in rows {
        out.push(serde_json::from_str(&text).map_err(|e| Failure::Corrupt(format!("feedback of {uaid}: {e}")))?);
    }
    Ok(out)
}

/// The largest `seq` of stored feedback (0: none).
pub fn newest(conn: &Conn) -> Result<i64, Failure> {
    conn.query_row("SELECT COALESCE(MAX(seq), 0) FROM agent_feedback", [], |r| r.get(0))
}
