//! A mirror node's REST API as a message source.
//!
//! Sequence numbers are dense per topic, so once the newest sequence number
//! is known the range after the cursor is split into pages of at most 100
//! (`sequencenumber=gte:a&sequencenumber=lte:b`) and up to `concurrency` of
//! them are fetched at once. A page that comes back short (a gap the node
//! has not filled yet) is completed by following its `links.next`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use reqwest::StatusCode;
use serde::Deserialize;
use tokio::sync::Semaphore;

use super::{parse_page, Parsed};
use hcs20::Message;
use shared::entity::EntityId;

/// The mirror node caps `limit` at 100.
pub const PAGE_LIMIT: u64 = 100;

#[derive(Debug, Clone)]
pub struct MirrorConfig {
    pub base_url: String,
    /// Requests in flight at once, per topic.
    pub concurrency: usize,
    pub timeout: Duration,
    /// Attempts per request for 429, 5xx and transport errors.
    pub attempts: u32,
    /// First backoff; doubled after each failed attempt.
    pub backoff: Duration,
}

impl MirrorConfig {
    pub fn new(base_url: impl Into<String>) -> Self {
        MirrorConfig {
            base_url: base_url.into().trim_end_matches('/').to_string(),
            concurrency: 16,
            timeout: Duration::from_secs(15),
            attempts: 5,
            backoff: Duration::from_millis(200),
        }
    }
}

#[derive(Clone)]
pub struct Mirror {
    config: Arc<MirrorConfig>,
    client: reqwest::Client,
}

#[derive(Debug, thiserror::Error)]
#[error("topic {topic} does not exist on the mirror node {base}: {message}")]
pub struct TopicNotFound {
    pub topic: EntityId,
    pub base: String,
    pub message: String,
}

#[derive(Deserialize)]
struct NotFoundBody {
    #[serde(rename = "_status")]
    status: Option<StatusBody>,
}

#[derive(Deserialize)]
struct StatusBody {
    messages: Vec<StatusMessage>,
}

#[derive(Deserialize)]
struct StatusMessage {
    message: String,
}

impl Mirror {
    pub fn new(config: MirrorConfig) -> Result<Mirror> {
        let client = http_client::builder()
            .timeout(config.timeout)
            .user_agent(concat!("almanac-generator/", env!("CARGO_PKG_VERSION")))
            .build()
            .context("building the HTTP client")?;
        Ok(Mirror { config: Arc::new(config), client })
    }

    /// Every message of `topic` after sequence number `after`, in order.
    pub async fn fetch_topic(&self, topic: EntityId, after: u64) -> Result<Vec<Message>> {
        let newest = match self.newest_sequence(topic).await? {
            Some(n) if n > after => n,
            _ => return Ok(Vec::new()),
        };
        let permits = Arc::new(Semaphore::new(self.config.concurrency.max(1)));
        let mut tasks = tokio::task::JoinSet::new();
        let mut start = after;
        let mut index = 0usize;
        while start < newest {
            let end = (start + PAGE_LIMIT).min(newest);
            let mirror = self.clone();
            let permits = permits.clone();
            let slot = index;
            tasks.spawn(async move {
                let _permit = permits.acquire_owned().await.expect("semaphore open");
                mirror.fetch_range(topic, start, end).await.map(|m| (slot, m))
            });
            start = end;
            index += 1;
        }
        let mut ranges: Vec<Vec<Message>> = vec![Vec::new(); index];
        while let Some(joined) = tasks.join_next().await {
            let (slot, messages) = joined.context("mirror fetch task failed")??;
            ranges[slot] = messages;
        }
        Ok(ranges.into_iter().flatten().collect())
    }

    /// Messages with sequence numbers in `(after, until]`.
    async fn fetch_range(&self, topic: EntityId, after: u64, until: u64) -> Result<Vec<Message>> {
        let mut out = Vec::with_capacity((until - after) as usize);
        let mut url = format!(
            "{}/api/v1/topics/{topic}/messages?limit={PAGE_LIMIT}&order=asc&sequencenumber=gte:{first}&sequencenumber=lte:{until}",
            self.config.base_url,
            // `gte`, not `gt:{after}`: the mirror node accepts only positive
            // sequence numbers, so `gt:0` (a topic's first fetch) is a 400.
            first = after + 1,
        );
        loop {
            let page = self.get_page(topic, &url).await?;
            let last_seen = out.last().map_or(after, |m: &Message| m.sequence);
            let empty = page.messages.is_empty();
            out.extend(page.messages.into_iter().filter(|m| m.sequence > last_seen));
            let done = out.last().is_some_and(|m| m.sequence >= until);
            match page.next {
                Some(next) if !done && !empty => url = self.absolute(&next),
                _ => break,
            }
        }
        out.retain(|m| m.sequence <= until);
        Ok(out)
    }

    async fn newest_sequence(&self, topic: EntityId) -> Result<Option<u64>> {
        let url = format!("{}/api/v1/topics/{topic}/messages?limit=1&order=desc", self.config.base_url);
        let page = self.get_page(topic, &url).await?;
        Ok(page.messages.first().map(|m| m.sequence))
    }

    fn absolute(&self, next: &str) -> String {
        if next.starts_with("http://") || next.starts_with("https://") {
            next.to_string()
        } else {
            format!("{}{}", self.config.base_url, next)
        }
    }

    /// One GET with retries: 429 and 5xx and transport errors back off
    /// (honouring `Retry-After` in seconds) and try again; 404 is a missing
    /// topic; any other status is an error at once.
    async fn get_page(&self, topic: EntityId, url: &str) -> Result<Parsed> {
        let mut delay = self.config.backoff;
        let mut attempt = 1;
        loop {
            let failure = match self.client.get(url).header("accept", "application/json").send().await {
                Ok(response) if response.status().is_success() => {
                    let bytes = response.bytes().await.with_context(|| format!("reading {url}"))?;
                    return parse_page(&bytes, topic)
                        .with_context(|| format!("{url} did not return a usable mirror page"));
                }
                Ok(response) if response.status() == StatusCode::NOT_FOUND => {
                    let body: Option<NotFoundBody> = response.json().await.ok();
                    let message = body
                        .and_then(|b| b.status)
                        .and_then(|s| s.messages.into_iter().next())
                        .map_or_else(|| "not found".to_string(), |m| m.message);
                    return Err(TopicNotFound { topic, base: self.config.base_url.clone(), message }.into());
                }
                Ok(response)
                    if response.status() == StatusCode::TOO_MANY_REQUESTS || response.status().is_server_error() =>
                {
                    if let Some(seconds) = response
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                    {
                        delay = delay.max(Duration::from_secs(seconds.min(60)));
                    }
                    anyhow!("{url}: {}", response.status())
                }
                Ok(response) => bail!("{url}: unexpected status {}", response.status()),
                Err(error) => anyhow!("{url}: {error}"),
            };
            if attempt >= self.config.attempts {
                return Err(failure.context(format!("giving up after {attempt} attempts")));
            }
            tracing::warn!(%url, attempt, error = %failure, "mirror request failed; retrying");
            tokio::time::sleep(delay).await;
            delay *= 2;
            attempt += 1;
        }
    }
}
