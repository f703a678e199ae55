//! Chat's settings and what it holds in memory: each open session's
//! authentication for its agent (never stored, never logged; dropped when
//! the session ends, goes idle, or the api stops) and the bound on
//! upstream calls.
//!
//! Everything a client can make the api hold for a session is bounded:
//! its authentication by [`AuthBounds`] (headers and bytes per session,
//! bytes over all sessions), a send's idempotency claim by the sends in
//! flight. A session's authentication is replaced, never added to.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use warp::http::HeaderMap;

use super::relay::{auth_size, AuthBounds, Target};
use crate::store;

/// Chat's bounds and the gate agents are called through.
pub struct Chat {
    /// Every call to an agent passes it.
    pub gate: crate::egress::Gate,
    /// Largest message a client may send, in bytes.
    pub max_message_bytes: usize,
    /// Largest answer read from an agent (a card, a reply, a whole stream).
    pub max_answer_bytes: usize,
    /// Whether history is kept and answered (`GET …/history`).
    pub history_enabled: bool,
    /// How long a session's authentication is held unused.
    pub auth_idle: Duration,
    /// Whether sessions may be encrypted (the handshake routes).
    pub encryption_enabled: bool,
    /// History kept when a session asks for none in particular, and the
    /// most kept without credits.
    pub history_ttl: Duration,
    /// The most history a session may ask for (with credits).
    pub max_history_ttl: Duration,
    /// Messages answered in a history and sent to agents that take one.
    pub max_history_entries: usize,
    /// Sessions one account may have open.
    pub max_sessions: i64,
    /// Calls to agents in flight at once; past it, 503.
    pub upstream: std::sync::Arc<tokio::sync::Semaphore>,
    /// The bounds of sessions' authentication.
    pub auth_bounds: AuthBounds,
    /// Each session's headers for its agent.
    auth: Mutex<HeldAuth>,
    /// The model-routing providers the deployment pays.
    pub providers: super::openai::Providers,
    /// The provider that summarises histories (`…/compact`), if any.
    pub summarizer: Option<super::openai::Provider>,
    /// Agents routed to recently (`POST /route/{uaid}`).
    pub connections: Connections,
    /// Sends with an idempotency key in flight (session, key).
    in_flight: std::sync::Arc<Mutex<std::collections::HashSet<(String, String)>>>,
}

/// The authentication held: per session its headers, their size and when
/// they were last used; and the size of them all.
#[derive(Default)]
struct HeldAuth {
    sessions: HashMap<String, (HeaderMap, usize, std::time::Instant)>,
    bytes: usize,
}

/// The held authentication is at its bound: nothing more is taken until
/// sessions end or go idle.
#[derive(Debug, PartialEq, Eq)]
pub struct AuthFull;

/// A send's claim on its idempotency key, released when dropped.
pub struct Claim {
    key: (String, String),
    in_flight: std::sync::Arc<Mutex<std::collections::HashSet<(String, String)>>>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.in_flight.lock().unwrap().remove(&self.key);
    }
}

/// Chat's settings, as parsed from the flags.
pub struct Settings {
    pub egress: crate::egress::Settings,
    pub max_message_bytes: usize,
    pub max_answer_bytes: usize,
    pub history_enabled: bool,
    pub encryption_enabled: bool,
    pub auth_idle: Duration,
    pub auth_bounds: AuthBounds,
    pub history_ttl: Duration,
    pub max_history_ttl: Duration,
    pub max_history_entries: usize,
    pub max_sessions: i64,
    pub max_upstream: usize,
    /// Agent connections routing keeps open, and for how long unused.
    pub max_connections: usize,
    pub connection_idle: Duration,
    pub summarizer: Option<super::openai::Provider>,
    pub providers: super::openai::Providers,
}

impl Chat {
    pub fn new(settings: Settings) -> anyhow::Result<Chat> {
        Ok(Chat {
            gate: crate::egress::Gate::new(settings.egress)?,
            max_message_bytes: settings.max_message_bytes,
            max_answer_bytes: settings.max_answer_bytes,
            history_enabled: settings.history_enabled,
            encryption_enabled: settings.encryption_enabled,
            auth_idle: settings.auth_idle,
            history_ttl: settings.history_ttl,
            max_history_ttl: settings.max_history_ttl.max(settings.history_ttl),
            max_history_entries: settings.max_history_entries.max(1),
            max_sessions: settings.max_sessions.max(1),
            upstream: std::sync::Arc::new(tokio::sync::Semaphore::new(settings.max_upstream.max(1))),
            auth_bounds: settings.auth_bounds,
            auth: Mutex::new(HeldAuth::default()),
            in_flight: Default::default(),
            connections: Connections::new(settings.max_connections, settings.connection_idle),
            summarizer: settings.summarizer,
            providers: settings.providers,
        })
    }

    /// Holds `headers` for the session's calls, in place of what it held
    /// (none: it holds nothing). [`AuthFull`] when the held bytes would pass
    /// their bound: the session keeps what it held. O(1).
    pub fn hold_auth(&self, session: &str, headers: HeaderMap) -> Result<(), AuthFull> {
        let mut held = self.auth.lock().unwrap();
        let released = held.sessions.get(session).map_or(0, |(_, size, _)| *size);
        let size = auth_size(&headers);
        if !headers.is_empty() && held.bytes - released + size > self.auth_bounds.max_held_bytes {
            return Err(AuthFull);
        }
        held.bytes -= released;
        match headers.is_empty() {
            true => {
                held.sessions.remove(session);
            }
            false => {
                held.bytes += size;
                held.sessions.insert(session.to_string(), (headers, size, std::time::Instant::now()));
            }
        }
        debug_assert_eq!(held.bytes, held.sessions.values().map(|(_, size, _)| size).sum::<usize>());
        Ok(())
    }

    /// The session's headers (none when it has none, after a restart, or
    /// once they went unused for the idle time).
    pub fn auth(&self, session: &str) -> HeaderMap {
        let mut held = self.auth.lock().unwrap();
        match held.sessions.get_mut(session) {
            Some((headers, _, used)) => {
                *used = std::time::Instant::now();
                headers.clone()
            }
            None => HeaderMap::new(),
        }
    }

    /// Forgets the headers of sessions idle longer than `idle`.
    pub fn forget_idle(&self, idle: Duration) {
        let mut held = self.auth.lock().unwrap();
        held.sessions.retain(|_, (_, _, used)| used.elapsed() <= idle);
        held.bytes = held.sessions.values().map(|(_, size, _)| size).sum();
    }

    /// Forgets the session's authentication.
    pub fn forget(&self, session: &str) {
        let mut held = self.auth.lock().unwrap();
        if let Some((_, size, _)) = held.sessions.remove(session) {
            held.bytes -= size;
        }
    }

    /// Claims `key` for a send in `session`; `None` while another send
    /// with it is in flight.
    pub fn claim(&self, session: &str, key: &str) -> Option<Claim> {
        let key = (session.to_string(), key.to_string());
        self.in_flight.lock().unwrap().insert(key.clone()).then(|| Claim { key, in_flight: self.in_flight.clone() })
    }

    /// What a session keeps in the store: the messages a history answers,
    /// and as many keyed sends' answers (a retry of an older key is a new
    /// send).
    pub fn keep(&self) -> crate::store::chat::Keep {
        crate::store::chat::Keep { messages: self.max_history_entries, sends: self.max_history_entries }
    }

    /// Sessions whose authentication is held, and its bytes.
    pub fn held(&self) -> (usize, usize) {
        let held = self.auth.lock().unwrap();
        (held.sessions.len(), held.bytes)
    }
}

/// An open connection to an agent.
pub struct Connection {
    pub target: Target,
    pub opened_at: i64,
    pub last_used: AtomicI64,
}

impl Connection {
    pub fn adapter(&self) -> &'static str {
        self.target.adapter()
    }

    pub fn describe(&self) -> Value {
        let mut connection = json!({"openedAt": store::rfc3339(self.opened_at),
            "lastUsedAt": store::rfc3339(self.last_used.load(Ordering::Relaxed))});
        let target = self.target.to_json();
        for key in ["url", "protocolVersion", "streaming", "model"] {
            if let Some(value) = target.get(key) {
                connection[key] = value.clone();
            }
        }
        connection
    }
}

/// The open connections, by UAID: at most `capacity`, each dropped after
/// `idle_ms` unused.
pub struct Connections {
    open: quick_cache::sync::Cache<String, Arc<Connection>>,
    idle_ms: i64,
}

impl Connections {
    pub fn new(capacity: usize, idle: std::time::Duration) -> Connections {
        Connections { open: quick_cache::sync::Cache::new(capacity.max(1)), idle_ms: idle.as_millis() as i64 }
    }

    /// The connection to `uaid`, if open and not idle too long.
    pub fn get(&self, uaid: &str, now: i64) -> Option<Arc<Connection>> {
        let connection = self.open.get(uaid)?;
        if now - connection.last_used.load(Ordering::Relaxed) > self.idle_ms {
            self.open.remove(uaid);
            return None;
        }
        Some(connection)
    }

    pub fn put(&self, uaid: &str, connection: Arc<Connection>) {
        self.open.insert(uaid.to_string(), connection);
    }

    /// Closes the connection to `uaid`; whether one was open.
    pub fn close(&self, uaid: &str) -> bool {
        self.open.remove(uaid).is_some()
    }
}
