//! The registrar: delivers registrations and updates to their additional
//! registries in the background.
//!
//! An additional registry is an HTTP endpoint configured per catalog
//! network key (`--registry-endpoints`, a JSON object of key to URL). A
//! delivery is `POST {url}` with `{"mode", "uaid", "agent"}`; any 2xx is
//! success (its JSON `agentId` and `agentUri` are kept when present). A
//! timeout, a refused connection, 408, 429 or a 5xx is tried again after a
//! wait doubling from `--registry-backoff-ms`, up to `--registry-tries`
//! tries; any other answer, or a key with no endpoint here, fails the
//! delivery for good and refunds its credits.
//!
//! Deliveries live in the store: each is claimed (marked in progress)
//! before its call and settled after. One the api was calling when it died
//! is due again at the next start, so every attempt ends completed or
//! failed, never stuck.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::store::registry::{self, Due, Settle};
use crate::store::{self, Store};

/// Deliveries claimed at once.
const BATCH: usize = 16;
/// The longest idle wait between looks at the store.
const IDLE: Duration = Duration::from_secs(5);

pub struct Settings {
    /// Catalog network key to the registry's URL.
    pub endpoints: BTreeMap<String, String>,
    /// Connect and answer deadline of one call.
    pub timeout: Duration,
    /// Calls per delivery, at most.
    pub tries: u32,
    /// Wait before the second call (doubling after).
    pub backoff: Duration,
    /// How long a registration's answer waits for its deliveries.
    pub wait: Duration,
    /// Woken when deliveries are due.
    pub wake: Arc<Notify>,
    /// Told whenever a delivery settles.
    pub settled: Arc<Notify>,
    client: reqwest::Client,
}

impl Settings {
    pub fn new(
        endpoints: BTreeMap<String, String>,
        timeout: Duration,
        tries: u32,
        backoff: Duration,
        wait: Duration,
    ) -> Result<Settings> {
        let client = http_client::builder()
            .connect_timeout(timeout)
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .context("the registrar's HTTP client")?;
        Ok(Settings {
            endpoints,
            timeout,
            tries: tries.max(1),
            backoff,
            wait,
            wake: Arc::new(Notify::new()),
            settled: Arc::new(Notify::new()),
            client,
        })
    }

    /// Reads `--registry-endpoints`: `{"<network key>": "<url>", …}`.
    pub fn endpoints(text: &str) -> Result<BTreeMap<String, String>> {
        let endpoints: BTreeMap<String, String> = serde_json::from_str(text).context("the registry endpoints file")?;
        for (key, url) in &endpoints {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                anyhow::bail!("the registry endpoints file: {key}: {url:?} is not an http(s) URL");
            }
        }
        Ok(endpoints)
    }
}

/// Runs until `stop` resolves: resumes what a previous run left, then
/// delivers what is due, sleeping until the next is or until woken.
pub async fn run(store: Store, settings: Arc<Settings>, stop: impl std::future::Future<Output = ()>) {
    match store.write(|conn| registry::resume(conn, store::now_ms())).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(deliveries = n, "registrar: resuming deliveries a previous run left in progress"),
        Err(e) => tracing::error!(error = %e, "registrar: cannot resume"),
    }
    tokio::pin!(stop);
    loop {
        let woken = settings.wake.notified();
        let wait = match round(&store, &settings).await {
            Ok(true) => Duration::ZERO,
            Ok(false) => until_next(&store).await,
            Err(e) => {
                tracing::error!(error = %e, "registrar");
                IDLE
            }
        };
        if wait.is_zero() {
            continue;
        }
        tokio::select! {
            _ = &mut stop => return,
            _ = woken => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

async fn until_next(store: &Store) -> Duration {
    match store.read(registry::next_due).await {
        Ok(Some(at)) => Duration::from_millis((at - store::now_ms()).clamp(1, IDLE.as_millis() as i64) as u64),
        _ => IDLE,
    }
}

/// Claims and delivers what is due now; whether anything was.
async fn round(store: &Store, settings: &Arc<Settings>) -> Result<bool, store::Failure> {
    let due = store.write(|conn| registry::claim_due(conn, store::now_ms(), BATCH)).await?;
    if due.is_empty() {
        return Ok(false);
    }
    let calls = due.into_iter().map(|due| {
        let (store, settings) = (store.clone(), settings.clone());
        async move {
            let outcome = deliver(&settings, &due).await;
            let (attempt, key) = (due.attempt.clone(), due.key.clone());
            if let Settle::Failed { error } | Settle::Retry { error, .. } = &outcome {
                tracing::warn!(attempt, key, tries = due.tries, error, "registrar: delivery not done");
            }
            let settled = store.write(move |conn| registry::settle(conn, &attempt, &key, &outcome, store::now_ms()));
            if let Err(e) = settled.await {
                tracing::error!(error = %e, "registrar: cannot record a delivery");
            }
            settings.settled.notify_waiters();
        }
    });
    futures_util::future::join_all(calls).await;
    Ok(true)
}

/// One call to a registry.
async fn deliver(settings: &Settings, due: &Due) -> Settle {
    let Some(url) = settings.endpoints.get(&due.key) else {
        return Settle::Failed { error: format!("no endpoint for {} is configured on this broker", due.key) };
    };
    let Some(agent) = &due.agent else {
        return Settle::Failed { error: "the agent was deleted before delivery".into() };
    };
    let body = json!({"mode": due.mode.as_str(), "uaid": agent.uaid, "agent": agent});
    let again = |error: String| -> Settle {
        if due.tries >= i64::from(settings.tries) {
            return Settle::Failed { error: format!("{error} (after {} tries)", due.tries) };
        }
        let wait = settings.backoff.saturating_mul(1 << (due.tries - 1).clamp(0, 16) as u32);
        Settle::Retry { at: store::now_ms() + wait.as_millis() as i64, error }
    };
    let answer = match settings.client.post(url).json(&body).send().await {
        Ok(answer) => answer,
        Err(e) if e.is_timeout() => return again(format!("no answer within {} ms", settings.timeout.as_millis())),
        Err(e) => return again(format!("cannot reach the registry: {e}")),
    };
    let status = answer.status();
    let text = match answer.text().await {
        Ok(text) => text,
        Err(e) => return again(format!("the registry's answer broke off: {e}")),
    };
    if status.is_success() {
        let reply: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let field = |name: &str| reply.get(name).and_then(Value::as_str).map(str::to_string);
        return Settle::Completed { agent_id: field("agentId"), agent_uri: field("agentUri") };
    }
    let excerpt: String = text.chars().take(200).collect();
    let error = format!("the registry answered {status}: {excerpt}");
    match status.as_u16() {
        408 | 429 | 500..=599 => again(error),
        _ => Settle::Failed { error },
    }
}
