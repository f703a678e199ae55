//! Command-line types the generator's and the api's binaries share (the
//! `cli` feature, on by default): the library itself parses no command
//! line.

use std::time::Duration;

use crate::broker::embed::ProviderConfig;

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
