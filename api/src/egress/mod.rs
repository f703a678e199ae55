//! The egress gate: the one way the broker calls a destination a client
//! chose, or one that came from data a client supplied (an agent URL, a
//! registered endpoint, an agent card's `url`, a redirect). Destinations
//! the operator configured (the mirror node, the embedding, summarising
//! and payment providers, the additional registries) are trusted as
//! configured and keep their own clients.
//!
//! Every call, and every redirect it is sent, is judged before a
//! connection is made ([`address::Policy`]): http or https, and the host
//! allowed on its port. A name is resolved once, by the gate's resolver
//! ([`resolve`]), which gives the connector only the addresses it
//! admitted, so the address checked is the address connected to (no
//! second lookup for a rebinding DNS server to answer differently).
//! Redirects are followed here, a few at most, each judged again; the
//! call's credentials go to its first origin only.
//!
//! Bounded: the connection's set-up (`connect_timeout`), the wait for the
//! answer's head (`first_byte_timeout`), every gap between reads
//! (`read_timeout`), and the whole call, redirects and body included
//! (`deadline`, or `stream_deadline` for an answer relayed as it streams).
//! The body's size is the caller's bound, read by [`crate::chat::turn`].

pub mod address;
pub mod resolve;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use warp::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};

pub use address::{Allow, NotAllowed, Policy};

/// The gate's settings, from the flags.
#[derive(Clone, Debug)]
pub struct Settings {
    pub policy: Policy,
    /// The DNS server names are resolved by; `None`: the system's resolver.
    pub dns: Option<std::net::SocketAddr>,
    pub connect_timeout: Duration,
    pub first_byte_timeout: Duration,
    pub read_timeout: Duration,
    pub deadline: Duration,
    pub stream_deadline: Duration,
    pub max_redirects: usize,
}

/// Why a call through the gate failed.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The destination, or one it redirected to, is not allowed.
    #[error("the broker does not call this destination")]
    NotAllowed,
    /// Not reached, or no answer within the call's bounds.
    #[error("{url} {}", if *.timed_out { "did not answer in time" } else { "cannot be reached" })]
    Unreachable { url: String, timed_out: bool },
    /// More redirects than the gate follows.
    #[error("{url} redirected more than {max} times")]
    Redirects { url: String, max: usize },
}

/// What a refused destination answers: 403 `destination_not_allowed`,
/// the same words whatever the reason (nothing of the inside).
pub fn refusal() -> crate::reply::Error {
    crate::reply::Error::new(StatusCode::FORBIDDEN, "destination_not_allowed", NotAllowed.to_string())
}

/// How a call's answer is read: whole, or relayed as it streams (a longer
/// deadline).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    Whole,
    Streamed,
}

/// Who chose a call's destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trust {
    /// A client, or data a client supplied: judged by the policy.
    Judged,
    /// The operator, in the configuration (a model provider's origin):
    /// that origin called as configured, with the same bounds; a redirect
    /// to another origin is judged like a client's destination.
    Configured,
}

/// The gate: its policy, and the clients calls are made with.
pub struct Gate {
    policy: Arc<Policy>,
    /// Judged calls: the gate's resolver, nothing else resolves for it.
    client: reqwest::Client,
    /// Calls to destinations the operator configured.
    configured: reqwest::Client,
    first_byte_timeout: Duration,
    deadline: Duration,
    stream_deadline: Duration,
    max_redirects: usize,
}

impl Gate {
    pub fn new(settings: Settings) -> anyhow::Result<Gate> {
        let policy = Arc::new(settings.policy);
        let resolver = resolve::Resolver::new(policy.clone(), settings.dns)?;
        let client = http_client::builder()
            .connect_timeout(settings.connect_timeout)
            .read_timeout(settings.read_timeout)
            // Redirects are followed by `Call::send`, each judged.
            .redirect(reqwest::redirect::Policy::none())
            // A proxy from the environment would resolve and connect for us.
            .no_proxy()
            .dns_resolver(Arc::new(resolver))
            .build()?;
        let configured = http_client::builder()
            .connect_timeout(settings.connect_timeout)
            .read_timeout(settings.read_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Gate {
            policy,
            client,
            configured,
            first_byte_timeout: settings.first_byte_timeout,
            deadline: settings.deadline,
            stream_deadline: settings.stream_deadline,
            max_redirects: settings.max_redirects,
        })
    }

    /// Judges `url` without resolving it or connecting: what can be told
    /// of a destination from its text (a registered endpoint is checked
    /// so; its addresses are judged again whenever it is called).
    pub fn judge(&self, url: &str) -> Result<(), NotAllowed> {
        self.policy.judge(&url::Url::parse(url).map_err(|_| NotAllowed)?).map(|_| ())
    }

    /// Judges an endpoint being registered, by its text
    /// ([`Policy::judge_registered`]: a name of no network is kept).
    pub fn judge_registered(&self, url: &str) -> Result<(), NotAllowed> {
        self.policy.judge_registered(&url::Url::parse(url).map_err(|_| NotAllowed)?)
    }

    pub fn get(&self, url: &str) -> Call<'_> {
        self.call(Method::GET, url, Trust::Judged)
    }

    pub fn post(&self, url: &str) -> Call<'_> {
        self.call(Method::POST, url, Trust::Judged)
    }

    pub fn call(&self, method: Method, url: &str, trust: Trust) -> Call<'_> {
        Call {
            gate: self,
            trust,
            method,
            url: url.to_string(),
            headers: HeaderMap::new(),
            credentials: HeaderMap::new(),
            body: None,
            answer: Answer::Whole,
        }
    }
}

/// One call being made: what is sent, and how its answer is read.
pub struct Call<'a> {
    gate: &'a Gate,
    trust: Trust,
    method: Method,
    url: String,
    headers: HeaderMap,
    /// Sent to the first origin only, never after a redirect elsewhere.
    credentials: HeaderMap,
    body: Option<Bytes>,
    answer: Answer,
}

impl Call<'_> {
    pub fn header(mut self, name: &'static str, value: &str) -> Self {
        if let Ok(value) = HeaderValue::from_str(value) {
            self.headers.insert(HeaderName::from_static(name), value);
        }
        self
    }

    /// Headers that authenticate the broker or a session to the destination.
    pub fn credentials(mut self, headers: &HeaderMap) -> Self {
        self.credentials.extend(headers.iter().map(|(n, v)| (n.clone(), v.clone())));
        self
    }

    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = Some(body.into());
        self
    }

    pub fn answer(mut self, answer: Answer) -> Self {
        self.answer = answer;
        self
    }

    /// Sends the call, following redirects through the gate: the answer
    /// once its head has arrived (its body then read within the call's
    /// deadline and the read gap).
    pub async fn send(self) -> Result<reqwest::Response, Error> {
        let gate = self.gate;
        let deadline = Instant::now()
            + match self.answer {
                Answer::Whole => gate.deadline,
                Answer::Streamed => gate.stream_deadline,
            };
        let first = url::Url::parse(&self.url).map_err(|_| Error::NotAllowed)?;
        let (mut url, mut method, mut body) = (first.clone(), self.method, self.body);
        for hop in 0..=gate.max_redirects {
            // The operator configured an origin, not wherever it redirects:
            // another origin is judged, and reached through the gate's
            // resolver.
            let client = match self.trust {
                Trust::Configured if url.origin() == first.origin() => &gate.configured,
                _ => {
                    gate.policy.judge(&url).map_err(|_| Error::NotAllowed)?;
                    &gate.client
                }
            };
            let remaining = deadline.saturating_duration_since(Instant::now());
            let mut request = client.request(method.clone(), url.clone()).headers(self.headers.clone());
            if url.origin() == first.origin() {
                request = request.headers(self.credentials.clone());
            }
            if let Some(body) = &body {
                request = request.body(body.clone());
            }
            let sent = tokio::time::timeout(gate.first_byte_timeout.min(remaining), request.timeout(remaining).send());
            let response = match sent.await {
                Err(_) => return Err(Error::Unreachable { url: url.to_string(), timed_out: true }),
                Ok(Err(error)) => return Err(failure(&url, &error)),
                Ok(Ok(response)) => response,
            };
            let Some(next) = redirect(&url, &response) else { return Ok(response) };
            if hop == gate.max_redirects {
                break;
            }
            // 303, and 301 or 302 after a POST, continue as a GET without
            // the body (as browsers and the HTTP clients of the field do);
            // 307 and 308 repeat the request.
            let status = response.status();
            if status == StatusCode::SEE_OTHER
                || (matches!(status, StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND) && method == Method::POST)
            {
                (method, body) = (if method == Method::HEAD { Method::HEAD } else { Method::GET }, None);
            }
            url = next;
        }
        Err(Error::Redirects { url: first.to_string(), max: gate.max_redirects })
    }
}

/// Where a redirect answer points, resolved against the URL that gave it.
fn redirect(url: &url::Url, response: &reqwest::Response) -> Option<url::Url> {
    let status = response.status();
    let redirects = matches!(
        status,
        StatusCode::MOVED_PERMANENTLY
            | StatusCode::FOUND
            | StatusCode::SEE_OTHER
            | StatusCode::TEMPORARY_REDIRECT
            | StatusCode::PERMANENT_REDIRECT
    );
    let location = response.headers().get("location")?.to_str().ok()?;
    redirects.then(|| url.join(location).ok()).flatten()
}

/// A client error as the gate's: a refusal by the resolver is
/// [`Error::NotAllowed`], whatever wraps it.
fn failure(url: &url::Url, error: &reqwest::Error) -> Error {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if cause.downcast_ref::<NotAllowed>().is_some() {
            return Error::NotAllowed;
        }
        source = cause.source();
    }
    Error::Unreachable { url: url.to_string(), timed_out: error.is_timeout() }
}
