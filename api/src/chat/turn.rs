//! What a relayed turn is, whatever the adapter: the turn, the agent's
//! reply (whole or in chunks), how a relay fails, and reading an agent's
//! answer within a bound.

use futures_util::StreamExt;
use serde_json::Value;
use warp::http::HeaderMap;

/// A turn as relayed.
pub struct Turn<'a> {
    pub text: &'a str,
    pub session: &'a str,
    /// The agent's conversation id from an earlier turn (A2A `contextId`).
    pub context: Option<&'a str>,
    /// Earlier messages, oldest first (role, text), for agents that take them.
    pub history: &'a [(String, String)],
    /// The session's authentication headers.
    pub headers: &'a HeaderMap,
}

/// An agent's whole reply.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    pub text: String,
    pub context: Option<String>,
    /// The agent's answer as received (JSON), where there is one.
    pub raw: Value,
}

/// A piece of a streamed reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Chunk {
    Text(String),
    Done(Reply),
}

/// Why a relay failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The agent could not be reached (connect, timeout).
    Unreachable(String),
    /// It answered with an error.
    Refused(String),
    /// It answered something that is not its protocol.
    Garbage(String),
    /// Its stream stopped midway.
    Cut(String),
    /// Nothing here speaks its protocol.
    Unsupported(String),
    /// The egress gate refused the agent's address, or one it redirected to.
    NotAllowed,
}

impl From<crate::egress::NotAllowed> for Failure {
    fn from(_: crate::egress::NotAllowed) -> Failure {
        Failure::NotAllowed
    }
}

impl From<crate::egress::Error> for Failure {
    fn from(error: crate::egress::Error) -> Failure {
        use crate::egress::Error;
        match error {
            Error::NotAllowed => Failure::NotAllowed,
            Error::Unreachable { .. } => Failure::Unreachable(format!("the agent at {error}")),
            Error::Redirects { .. } => Failure::Refused(format!("the agent at {error}")),
        }
    }
}

impl Failure {
    /// A body that stopped coming: past the call's deadline (the egress
    /// gate's), or broken off.
    pub fn broke(error: &reqwest::Error, who: &str) -> Failure {
        match error.is_timeout() {
            true => Failure::Unreachable(format!("the {who} did not answer in time")),
            false => Failure::Cut(format!("the {who}'s answer broke off: {error}")),
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Failure::Unreachable(m)
            | Failure::Refused(m)
            | Failure::Garbage(m)
            | Failure::Cut(m)
            | Failure::Unsupported(m) => m,
            Failure::NotAllowed => "the broker does not call this destination",
        }
    }

    /// The error code answered.
    pub fn code(&self) -> &'static str {
        match self {
            Failure::Unreachable(_) => "agent_unreachable",
            Failure::Refused(_) => "agent_error",
            Failure::Garbage(_) => "agent_bad_answer",
            Failure::Cut(_) => "agent_stream_cut",
            Failure::Unsupported(_) => "chat_not_supported",
            Failure::NotAllowed => "destination_not_allowed",
        }
    }
}

/// A body read up to `max` bytes (an agent that sends more is refused).
pub async fn read_bounded(response: reqwest::Response, max: usize) -> Result<bytes::Bytes, Failure> {
    if response.content_length().is_some_and(|n| n > max as u64) {
        return Err(Failure::Garbage(format!("the agent's answer is larger than {max} bytes")));
    }
    let mut body = bytes::BytesMut::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| Failure::broke(&e, "agent"))?;
        if body.len() + chunk.len() > max {
            return Err(Failure::Garbage(format!("the agent's answer is larger than {max} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// A body read within `max` bytes as JSON; `what` names it in the failure
/// (`the agent's answer`).
pub async fn read_json(response: reqwest::Response, max: usize, what: &str) -> Result<Value, Failure> {
    let bytes = read_bounded(response, max).await?;
    serde_json::from_slice(&bytes).map_err(|_| Failure::Garbage(format!("{what} is not JSON")))
}
