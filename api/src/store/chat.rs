//! Chat sessions and their messages. A turn (the user's message and the
//! agent's reply) is stored in one step once the agent has answered, so a
//! turn cut short stores nothing.

use rusqlite::{params, Connection, OptionalExtension};

use super::Failure;

/// A session as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    pub id: String,
    /// The agent's UAID, or empty for a session opened by URL.
    pub uaid: String,
    pub agent_url: Option<String>,
    /// How the agent is reached (JSON).
    pub target: String,
    /// The agent as answered (JSON: name, description, capabilities).
    pub agent: String,
    pub account: Option<String>,
    pub context: Option<String>,
    /// Seconds of history kept and answered.
    pub history_ttl: i64,
    pub visibility: String,
    pub sender_uaid: Option<String>,
    pub created_at: i64,
    pub ended_at: Option<i64>,
}

/// One message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub message_id: String,
    /// `user` or `agent`.
    pub role: String,
    pub content: String,
    pub cipher_envelope: Option<String>,
    pub created_at: i64,
}

pub fn open(conn: &Connection, s: &Session) -> Result<(), Failure> {
    conn.execute(
        "INSERT INTO chat_sessions (id, uaid, agent_url, target, agent, account_id, context_id, history_ttl,
             visibility, sender_uaid, created_at, last_activity_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)",
        params![
            s.id,
            s.uaid,
            s.agent_url,
            s.target,
            s.agent,
            s.account,
            s.context,
            s.history_ttl,
            s.visibility,
            s.sender_uaid,
            s.created_at
        ],
    )?;
    Ok(())
}

pub fn session(conn: &Connection, id: &str) -> Result<Option<Session>, Failure> {
    let found = conn
        .query_row(
            "SELECT id, uaid, agent_url, COALESCE(target, ''), COALESCE(agent, '{}'), account_id, context_id,
                    history_ttl, visibility, sender_uaid, created_at, ended_at
             FROM chat_sessions WHERE id = ?1",
            [id],
            |r| {
                Ok(Session {
                    id: r.get(0)?,
                    uaid: r.get(1)?,
                    agent_url: r.get(2)?,
                    target: r.get(3)?,
                    agent: r.get(4)?,
                    account: r.get(5)?,
                    context: r.get(6)?,
                    history_ttl: r.get(7)?,
                    visibility: r.get(8)?,
                    sender_uaid: r.get(9)?,
                    created_at: r.get(10)?,
                    ended_at: r.get(11)?,
                })
            },
        )
        .optional()?;
    Ok(found)
}

/// Sessions `account` has open.
pub fn open_sessions(conn: &Connection, account: &str) -> Result<i64, Failure> {
    Ok(conn.query_row(
        "SELECT COUNT(*) FROM chat_sessions WHERE account_id = ?1 AND ended_at IS NULL",
        [account],
        |r| r.get(0),
    )?)
}

/// Stores a whole turn and the agent's conversation id; false when the
/// session has ended meanwhile (nothing stored).
pub fn turn(conn: &Connection, session: &str, messages: &[Message], context: Option<&str>) -> Result<bool, Failure> {
    let now = messages.last().map_or(0, |m| m.created_at);
    let updated = conn.execute(
        "UPDATE chat_sessions SET last_activity_at = ?2, context_id = COALESCE(?3, context_id)
         WHERE id = ?1 AND ended_at IS NULL",
        params![session, now, context],
    )?;
    if updated == 0 {
        return Ok(false);
    }
    for m in messages {
        conn.execute(
            "INSERT INTO chat_messages (session_id, message_id, role, content, cipher_envelope, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![session, m.message_id, m.role, m.content, m.cipher_envelope, m.created_at],
        )?;
    }
    Ok(true)
}

/// The session's messages at or after `since` (ms), oldest first, the
/// newest `limit` of them.
pub fn history(conn: &Connection, session: &str, since: i64, limit: usize) -> Result<Vec<Message>, Failure> {
    let mut statement = conn.prepare(
        "SELECT message_id, role, content, cipher_envelope, created_at FROM chat_messages
         WHERE session_id = ?1 AND created_at >= ?2 ORDER BY id DESC LIMIT ?3",
    )?;
    let mut messages = statement
        .query_map(params![session, since, limit as i64], |r| {
            Ok(Message {
                message_id: r.get::<_, Option<String>>(0)?.unwrap_or_default(),
                role: r.get(1)?,
                content: r.get(2)?,
                cipher_envelope: r.get(3)?,
                created_at: r.get(4)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    messages.reverse();
    Ok(messages)
}

/// Ends a session; false when it was unknown or already ended.
pub fn end(conn: &Connection, session: &str, now: i64) -> Result<bool, Failure> {
    Ok(conn
        .execute("UPDATE chat_sessions SET ended_at = ?2 WHERE id = ?1 AND ended_at IS NULL", params![session, now])?
        > 0)
}
