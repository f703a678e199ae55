//! Embeddings for hybrid search, from an OpenAI-compatible provider
//! (`POST {base}/embeddings` with `{model, input: [texts]}`, answering
//! `{data: [{index, embedding}]}`). The generator embeds every agent once
//! per distinct text (cached in the warehouse by model and SHA-256 of the
//! text); the api embeds each query with the same model.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use broker_model::Agent;

/// Where embeddings come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderConfig {
    /// The API base, such as `https://api.openai.com/v1`.
    pub url: String,
    pub model: String,
    /// Sent as a bearer token when set.
    pub key: Option<String>,
    pub timeout: Duration,
    /// Texts per request.
    pub batch: usize,
}

pub struct Provider {
    config: ProviderConfig,
    client: reqwest::Client,
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    index: usize,
    embedding: Vec<f32>,
}

impl Provider {
    pub fn new(config: ProviderConfig) -> Result<Provider> {
        let client = http_client::builder().timeout(config.timeout).build().context("embedding client")?;
        Ok(Provider { config, client })
    }

    pub fn model(&self) -> &str {
        &self.config.model
    }

    /// One vector per text, in order, each normalised to unit length (so a
    /// dot product is the cosine).
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let mut out = Vec::with_capacity(texts.len());
        for part in texts.chunks(self.config.batch.max(1)) {
            let url = format!("{}/embeddings", self.config.url.trim_end_matches('/'));
            let mut request =
                self.client.post(&url).json(&serde_json::json!({"model": self.config.model, "input": part}));
            if let Some(key) = &self.config.key {
                request = request.bearer_auth(key);
            }
            let response = request.send().await.with_context(|| format!("calling {url}"))?;
            let status = response.status();
            if !status.is_success() {
                bail!("{url} answered {status}");
            }
            let mut answer: Answer =
                response.json().await.with_context(|| format!("{url}: not an embeddings answer"))?;
            ensure!(
                answer.data.len() == part.len(),
                "{url}: {} embeddings for {} texts",
                answer.data.len(),
                part.len()
            );
            answer.data.sort_by_key(|d| d.index);
            for (n, item) in answer.data.into_iter().enumerate() {
                ensure!(item.index == n, "{url}: embedding indices are not 0..{}", part.len());
                out.push(normalised(item.embedding)?);
            }
        }
        if let Some(first) = out.first() {
            ensure!(out.iter().all(|v| v.len() == first.len()), "embeddings of different lengths");
        }
        Ok(out)
    }
}

fn normalised(mut v: Vec<f32>) -> Result<Vec<f32>> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    ensure!(!v.is_empty() && norm.is_finite(), "an embedding is empty or not finite");
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    Ok(v)
}

/// What an agent is embedded as: name, description, capabilities,
/// protocols and registry.
pub fn text(agent: &Agent) -> String {
    format!(
        "{}. {} Capabilities: {}. Protocols: {}. Registry: {}.",
        agent.name,
        agent.description,
        agent.capability_labels.join(", "),
        agent.protocols.join(", "),
        agent.registry
    )
}

/// The cache key of a text under a model.
pub fn key(model: &str, text: &str) -> String {
    let digest = Sha256::digest(format!("{model}\n{text}").as_bytes());
    shared::http::hex(&digest)
}

/// Embeds every agent's text ([`text`]), asking the provider only for
/// texts `cached` lacks; returns the vectors in agent order and the newly
/// computed entries.
pub async fn agents(
    provider: &Provider,
    texts: &[String],
    cached: &HashMap<String, Vec<f32>>,
) -> Result<(Vec<Vec<f32>>, Vec<(String, Vec<f32>)>)> {
    let keys: Vec<String> = texts.iter().map(|t| key(provider.model(), t)).collect();
    let mut missing: Vec<(String, String)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (text, k) in texts.iter().zip(&keys) {
        if !cached.contains_key(k) && seen.insert(k.clone()) {
            missing.push((k.clone(), text.clone()));
        }
    }
    let texts: Vec<String> = missing.iter().map(|(_, t)| t.clone()).collect();
    let fresh = provider.embed(&texts).await?;
    let computed: Vec<(String, Vec<f32>)> = missing.into_iter().map(|(k, _)| k).zip(fresh).collect();
    let lookup: HashMap<&str, &Vec<f32>> =
        cached.iter().map(|(k, v)| (k.as_str(), v)).chain(computed.iter().map(|(k, v)| (k.as_str(), v))).collect();
    let vectors = keys.iter().map(|k| lookup[k.as_str()].clone()).collect();
    Ok((vectors, computed))
}

/// The provider's command-line flags, shared by the generator (which
/// embeds agents) and the api (which embeds queries): both must name the
/// same model.
#[derive(Clone, Debug, clap::Args)]
pub struct ProviderArgs {
    /// An OpenAI-compatible API base (`.../v1`) that embeds texts for hybrid
    /// search; none: no vectors (the api's `POST /api/v1/search` is 501).
    #[arg(long = "embeddings-url", env = "ALMANAC_EMBEDDINGS_URL")]
    pub url: Option<String>,
    #[arg(long = "embeddings-model", env = "ALMANAC_EMBEDDINGS_MODEL", default_value = "text-embedding-3-small")]
    pub model: String,
    /// Bearer token for the embedding provider.
    #[arg(long = "embeddings-key", env = "ALMANAC_EMBEDDINGS_KEY")]
    pub key: Option<String>,
}

impl ProviderArgs {
    /// The provider, if a URL is given.
    pub fn config(self, timeout: Duration, batch: usize) -> Option<ProviderConfig> {
        let ProviderArgs { url, model, key } = self;
        url.map(|url| ProviderConfig { url, model, key, timeout, batch })
    }
}
