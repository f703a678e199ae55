//! Chat sessions and their messages. A turn (the user's message and the
//! agent's reply) is stored in one step once the agent has answered, so a
//! turn cut short stores nothing.

use crate::params;
use crate::sql::{Conn, Optional, Row};

use super::{registry, Failure};

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
    /// What a public listing calls it (the agent's name).
    pub title: Option<String>,
    pub created_at: i64,
    pub last_activity_at: i64,
    pub ended_at: Option<i64>,
    /// An encrypted session's state (JSON); `None` for plaintext.
    pub encryption: Option<String>,
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

/// Stores a new session with its first members: the agent, held by the
/// account that registered it here (if one did), and the sender, held by
/// the session's owner; each sees all of the history.
pub fn open(conn: &Conn, s: &Session) -> Result<(), Failure> {
    conn.execute(
        "INSERT INTO chat_sessions (id, uaid, agent_url, target, agent, account_id, context_id, history_ttl,
             visibility, sender_uaid, title, created_at, last_activity_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12)",
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
            s.title,
            s.created_at
        ],
    )?;
    let agent = (!s.uaid.is_empty()).then(|| Ok::<_, Failure>((s.uaid.clone(), registry::registrant(conn, &s.uaid)?)));
    let sender = s.sender_uaid.clone().map(|uaid| Ok((uaid, s.account.clone())));
    for member in [agent, sender].into_iter().flatten() {
        let (uaid, held_by) = member?;
        conn.execute(
            "INSERT INTO chat_members (session_id, uaid, invited_at, history_scope, held_by)
             VALUES (?1, ?2, ?3, 'all', ?4) ON CONFLICT DO NOTHING",
            params![s.id, uaid, s.created_at, held_by],
        )?;
    }
    Ok(())
}

pub fn session(conn: &Conn, id: &str) -> Result<Option<Session>, Failure> {
    let found = conn.query_row(&format!("{SESSION} WHERE id = ?1"), [id], session_row).optional()?;
    Ok(found)
}

const SESSION: &str = "SELECT id, uaid, agent_url, COALESCE(target, ''), COALESCE(agent, '{}'), account_id,
    context_id, history_ttl, visibility, sender_uaid, title, created_at, COALESCE(last_activity_at, created_at),
    ended_at, encryption FROM chat_sessions";

fn session_row(r: &Row<'_>) -> Result<Session, Failure> {
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
        title: r.get(10)?,
        created_at: r.get(11)?,
        last_activity_at: r.get(12)?,
        ended_at: r.get(13)?,
        encryption: r.get(14)?,
    })
}

/// A member of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub uaid: String,
    pub invited_at: i64,
    /// `all` or `since_invite`.
    pub history_scope: String,
    /// The account that held the UAID when it joined, the only one that
    /// acts for it (none: an agent no account registered here).
    pub held_by: Option<String>,
}

pub fn members(conn: &Conn, session: &str) -> Result<Vec<Member>, Failure> {
    let members = conn.query_map(
        "SELECT uaid, invited_at, history_scope, held_by FROM chat_members WHERE session_id = ?1
         ORDER BY invited_at, uaid",
        [session],
        |r| Ok(Member { uaid: r.get(0)?, invited_at: r.get(1)?, history_scope: r.get(2)?, held_by: r.get(3)? }),
    )?;
    Ok(members)
}

/// Adds `uaid` as a member at `now` (ms) with `history_scope`, held by
/// the account that registered it here now, or re-scopes it (its holder
/// unchanged: a member's rights stay with whoever held it when it
/// joined). The invite is recorded after the session's last message even
/// within the same millisecond, so that a member who sees only what
/// followed it never sees what preceded it.
pub fn invite(conn: &Conn, session: &str, uaid: &str, history_scope: &str, now: i64) -> Result<(), Failure> {
    let held_by = registry::registrant(conn, uaid)?;
    let greatest = conn.dialect().greatest();
    let invite = format!(
        "INSERT INTO chat_members (session_id, uaid, invited_at, history_scope, held_by)
         VALUES (?1, ?2, {greatest}(?3, COALESCE((SELECT MAX(created_at) + 1 FROM chat_messages WHERE session_id = ?1), 0)), ?4, ?5)
         ON CONFLICT (session_id, uaid) DO UPDATE SET history_scope = ?4"
    );
    conn.execute(&invite, params![session, uaid, now, history_scope, held_by])?;
    let touch = format!(
        "UPDATE chat_sessions SET last_activity_at = {greatest}(COALESCE(last_activity_at, 0), ?2) WHERE id = ?1"
    );
    conn.execute(&touch, params![session, now])?;
    Ok(())
}

pub fn set_visibility(conn: &Conn, session: &str, visibility: &str, now: i64) -> Result<(), Failure> {
    let sql = format!(
        "UPDATE chat_sessions SET visibility = ?2, last_activity_at = {}(COALESCE(last_activity_at, 0), ?3) WHERE id = ?1",
        conn.dialect().greatest()
    );
    conn.execute(&sql, params![session, visibility, now])?;
    Ok(())
}

/// A page of public sessions, most recently active first, after `cursor`
/// (the last one's activity time and id), matching `q` (in the session
/// id, a member's UAID or the title) when given.
pub fn public(
    conn: &Conn,
    q: Option<&str>,
    cursor: Option<(i64, String)>,
    limit: usize,
) -> Result<Vec<(Session, Vec<String>)>, Failure> {
    let pattern = q.map(|q| format!("%{}%", q.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")));
    let (at, id) = cursor.unwrap_or((i64::MAX, String::new()));
    let like = conn.dialect().like();
    let sql = format!(
        "{SESSION} s WHERE visibility = 'public' AND ended_at IS NULL
           AND (COALESCE(last_activity_at, created_at) < ?1 OR (COALESCE(last_activity_at, created_at) = ?1 AND id < ?2 AND ?2 <> ''))
           AND (CAST(?3 AS TEXT) IS NULL OR id {like} ?3 ESCAPE '\\' OR COALESCE(title, '') {like} ?3 ESCAPE '\\'
                OR EXISTS (SELECT 1 FROM chat_members m WHERE m.session_id = s.id AND m.uaid {like} ?3 ESCAPE '\\'))
         ORDER BY COALESCE(last_activity_at, created_at) DESC, id DESC LIMIT ?4"
    );
    let sessions = conn.query_map(&sql, params![at, id, pattern, limit as i64], session_row)?;
    sessions
        .into_iter()
        .map(|s| {
            let uaids = members(conn, &s.id)?.into_iter().map(|m| m.uaid).collect();
            Ok((s, uaids))
        })
        .collect()
}

/// A send stored under an idempotency key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent<'a> {
    pub key: &'a str,
    /// The request's digest (none for sends stored before digests were).
    pub digest: Option<&'a str>,
    pub answer: &'a str,
}

/// The answer given to a send with this idempotency key, and the digest
/// of the request it answered, if any.
pub fn sent(conn: &Conn, session: &str, key: &str) -> Result<Option<(String, Option<String>)>, Failure> {
    conn.query_row(
        "SELECT answer, request_digest FROM chat_sends WHERE session_id = ?1 AND idempotency_key = ?2",
        [session, key],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
}

/// Sessions `account` has open.
pub fn open_sessions(conn: &Conn, account: &str) -> Result<i64, Failure> {
    conn.query_row("SELECT COUNT(*) FROM chat_sessions WHERE account_id = ?1 AND ended_at IS NULL", [account], |r| {
        r.get(0)
    })
}

/// What a session keeps: its newest `messages` messages (what a history
/// answers) and the answers of its newest `sends` keyed sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keep {
    pub messages: usize,
    pub sends: usize,
}

/// Stores a whole turn and the agent's conversation id (and, for a send
/// with an idempotency key, its answer), then drops what the session keeps
/// no more; false when the session has ended meanwhile (nothing stored).
/// O(kept) through the session's index.
pub fn turn(
    conn: &Conn,
    session: &str,
    messages: &[Message],
    context: Option<&str>,
    sent: Option<Sent<'_>>,
    keep: Keep,
) -> Result<bool, Failure> {
    let now = messages.last().map_or(0, |m| m.created_at);
    let updated = conn.execute(
        "UPDATE chat_sessions SET last_activity_at = ?2, context_id = COALESCE(?3, context_id)
         WHERE id = ?1 AND ended_at IS NULL",
        params![session, now, context],
    )?;
    if updated == 0 {
        return Ok(false);
    }
    // A message is never recorded before an invite it follows (the
    // invite may stand a millisecond ahead: see `invite`).
    for m in messages {
        let sql = format!(
            "INSERT INTO chat_messages (session_id, message_id, role, content, cipher_envelope, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5,
                     {}(?6, COALESCE((SELECT MAX(invited_at) FROM chat_members WHERE session_id = ?1), 0)))",
            conn.dialect().greatest()
        );
        conn.execute(&sql, params![session, m.message_id, m.role, m.content, m.cipher_envelope, m.created_at])?;
    }
    if let Some(sent) = sent {
        conn.execute(
            "INSERT INTO chat_sends (session_id, idempotency_key, answer, request_digest)
             VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
            params![session, sent.key, sent.answer, sent.digest],
        )?;
        conn.execute(
            "DELETE FROM chat_sends WHERE session_id = ?1 AND rowid NOT IN
                 (SELECT rowid FROM chat_sends WHERE session_id = ?1 ORDER BY rowid DESC LIMIT ?2)",
            params![session, keep.sends as i64],
        )?;
    }
    conn.execute(
        "DELETE FROM chat_messages WHERE session_id = ?1 AND id NOT IN
             (SELECT id FROM chat_messages WHERE session_id = ?1 ORDER BY created_at DESC, id DESC LIMIT ?2)",
        params![session, keep.messages as i64],
    )?;
    Ok(true)
}

/// The session's messages at or after `since` (ms), oldest first, the
/// newest `limit` of them.
pub fn history(conn: &Conn, session: &str, since: i64, limit: usize) -> Result<Vec<Message>, Failure> {
    let mut messages = conn.query_map(
        "SELECT message_id, role, content, cipher_envelope, created_at FROM chat_messages
         WHERE session_id = ?1 AND created_at >= ?2 ORDER BY created_at DESC, id DESC LIMIT ?3",
        params![session, since, limit as i64],
        |r| {
            Ok(Message {
                message_id: r.get::<Option<String>>(0)?.unwrap_or_default(),
                role: r.get(1)?,
                content: r.get(2)?,
                cipher_envelope: r.get(3)?,
                created_at: r.get(4)?,
            })
        },
    )?;
    messages.reverse();
    Ok(messages)
}

/// Ends a session; false when it was unknown or already ended.
pub fn end(conn: &Conn, session: &str, now: i64) -> Result<bool, Failure> {
    Ok(conn
        .execute("UPDATE chat_sessions SET ended_at = ?2 WHERE id = ?1 AND ended_at IS NULL", params![session, now])?
        > 0)
}

pub fn set_encryption(conn: &Conn, session: &str, state: &str) -> Result<(), Failure> {
    conn.execute("UPDATE chat_sessions SET encryption = ?2 WHERE id = ?1", params![session, state])?;
    Ok(())
}

/// Replaces the messages `summarized` (by message id) with `summary`,
/// which takes the place of the earliest of them.
pub fn compact(conn: &Conn, session: &str, summarized: &[String], summary: &Message) -> Result<(), Failure> {
    for id in summarized {
        conn.execute("DELETE FROM chat_messages WHERE session_id = ?1 AND message_id = ?2", params![session, id])?;
    }
    conn.execute(
        "INSERT INTO chat_messages (session_id, message_id, role, content, cipher_envelope, created_at)
         VALUES (?1, ?2, ?3, ?4, NULL, ?5)",
        params![session, summary.message_id, summary.role, summary.content, summary.created_at],
    )?;
    Ok(())
}
