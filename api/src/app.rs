//! The application: its settings, the published build and the per-client
//! quotas. Built once by [`crate::Config::app`] and shared by
//! every request.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use hcs20::routes::Limits;
use shared::site::Layout;

use crate::auth;
use crate::broker::overlay::{self, Overlay};
use crate::broker::payments::{Card, Redemption, Treasury};
use crate::broker::pricing::Pricing;
use crate::broker::provider::Vectors;
use crate::broker::registrar;
use crate::connection::Connections;
use crate::guard::mcp;
use crate::limit::Limiter;
use crate::published::Live;
use crate::store::Store;

pub struct App {
    /// The live store: the broker's accounts, keys, credits, registrations.
    pub store: Store,
    /// Agents registered, updated or deleted since the published build.
    pub overlay: Arc<Overlay>,
    /// The one thread that changes it.
    pub overlay_writer: overlay::Writer,
    /// How agents' availability is checked.
    pub availability: crate::broker::availability::Settings,
    /// Agents to check before the round reaches them.
    pub availability_soon: Arc<crate::broker::availability::Soon>,
    /// Availability changes the overlay shows over the live build.
    pub availability_shown: crate::broker::availability::Shown,
    /// Messages a chat session needs before it may give ERC-8004 feedback.
    pub feedback_min_messages: u64,
    /// The newest ERC-8004 feedback given through the api.
    pub feedback_changes: crate::store::Newest,
    /// The newest adapter registry write (categories, adapters).
    pub catalog_changes: crate::store::Newest,
    /// The newest change of the Programmable Secrets catalog stored.
    pub secrets_changes: crate::store::Newest,
    /// The newest journaled change of the plugin catalog.
    pub plugin_changes: crate::store::Newest,
    /// Delivery to additional registries.
    pub registrar: Arc<registrar::Settings>,
    pub auth: auth::Settings,
    /// Sign-in requests per client (signature checks cost CPU, challenges
    /// take room in the store).
    pub sign_in_limit: Limiter,
    /// Ownership verification: challenges, proofs and re-checks.
    pub verification: crate::broker::verification::settings::Settings,
    /// Verification requests per client (each may query DNS or call an
    /// agent).
    pub verification_limit: Limiter,
    /// Content inscription, when a network is configured.
    pub inscriptions: Option<Arc<crate::broker::inscription::settings::Settings>>,
    /// The skills registry, when inscription is on.
    pub skills: Option<Arc<crate::broker::skills::settings::Settings>>,
    /// The plugin catalog's imports.
    pub plugins: crate::broker::plugins::settings::Settings,
    /// Programmable Secrets, when the operator names a chain.
    pub secrets: Option<Arc<crate::broker::secrets::settings::Settings>>,
    /// Largest body of a Programmable Secrets publication (the ciphertext
    /// in hex, twice its bound, and the rest).
    pub secrets_max_body: usize,
    /// Largest body of an inscription request, in bytes (the content in
    /// base64 and the rest).
    pub content_max_body: usize,
    /// Largest body of a skill quote or publish, in bytes (the package's
    /// files in base64 and the rest).
    pub package_max_body: usize,
    /// Chat sessions opened without a key, per client (each may fetch an
    /// agent card; an account's are capped by `--chat-max-sessions`).
    pub anonymous_chat_limit: Limiter,
    /// Relays to agents per client (chat messages, routing by UAID): each
    /// calls an agent.
    pub relay_limit: Limiter,
    pub pricing: Pricing,
    /// HBAR purchases, when a treasury account is configured.
    pub treasury: Option<Arc<Treasury>>,
    /// Card purchases, when a payment provider is configured.
    pub card: Option<Arc<Card>>,
    /// Redemption of points, when a token is configured.
    pub redemption: Option<Redemption>,
    /// Chat: bounds, the agents' client, each session's authentication.
    pub chat: crate::chat::sessions::Chat,
    pub journal: Journal,
    /// This api among the replicas sharing its store (the duties' lease).
    pub replicas: crate::replicas::settings::Settings,
    /// Largest body of a live broker call, in bytes (413 above).
    pub live_max_body: usize,
    pub live: Arc<Live>,
    /// Where builds are published, or, when they come from a bucket,
    /// cached.
    pub layout: Layout,
    pub builds_from: Arc<crate::published::Source>,
    /// How often to look for a new build.
    pub reload_every: Duration,
    /// How often idle clients' rate-limit buckets are dropped.
    pub cleanup_every: Duration,
    pub limits: Limits,
    /// Published files kept in memory once read, in bytes, per build.
    pub file_cache_bytes: u64,
    pub guard: GuardLimits,
    /// Largest body of a broker POST (search), in bytes (413 above).
    pub broker_max_body: usize,
    /// The embedding provider for hybrid search, if configured.
    pub vectors: Option<Vectors>,
    /// Where searches run ([`crate::pool`]).
    pub searches: crate::pool::Pool,
    /// The open connections and their bounds.
    pub connections: Arc<Connections>,
}

/// Where the journal of live changes goes, and how the writer is woken
/// after a change is stored.
pub struct Journal {
    pub dir: std::path::PathBuf,
    pub rotate_bytes: u64,
    pub wake: Arc<tokio::sync::Notify>,
}

/// Section B's live settings: who may call the MCP endpoint, how big a
/// request may be, and the rate limits.
pub struct GuardLimits {
    pub access: mcp::Access,
    pub max_body: usize,
    /// How much of the tool results each build keeps.
    pub mcp_cache: mcp::CacheBounds,
    pub json: Limiter,
    pub mcp: Limiter,
    /// Peers whose `X-Forwarded-For` is believed.
    pub proxies: Vec<IpAddr>,
}
