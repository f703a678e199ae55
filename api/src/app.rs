//! The application: its settings, the route table, the published build and
//! the per-client quotas. Built once by [`crate::Config::app`] and shared by
//! every request.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use almanac::hcs20::routes::Limits;
use almanac::site::Layout;

use crate::broker::vectors::Vectors;
use crate::guard::mcp;
use crate::limit::Limiter;
use crate::published::Live;
use crate::routes::{BodyLimit, Rate, Table};

pub struct App {
    pub table: Table,
    pub live: Arc<Live>,
    /// Where builds are published.
    pub layout: Layout,
    /// How often to look for a new build.
    pub reload_every: Duration,
    /// How often idle clients' rate-limit buckets are dropped.
    pub cleanup_every: Duration,
    pub limits: Limits,
    pub guard: GuardLimits,
    /// Largest body of a broker POST (search), in bytes (413 above).
    pub broker_max_body: usize,
    /// The embedding provider for hybrid search, if configured.
    pub vectors: Option<Vectors>,
}

/// Section B's live settings: who may call the MCP endpoint, how big a
/// request may be, and the rate limits.
pub struct GuardLimits {
    pub access: mcp::Access,
    pub max_body: usize,
    pub json: Limiter,
    pub mcp: Limiter,
    /// Peers whose `X-Forwarded-For` is believed.
    pub proxies: Vec<IpAddr>,
}

impl App {
    /// The quota a rate class spends, if it has one.
    pub fn limiter(&self, rate: Rate) -> Option<&Limiter> {
        match rate {
            Rate::Unlimited => None,
            Rate::Guard => Some(&self.guard.json),
            Rate::Mcp => Some(&self.guard.mcp),
        }
    }

    /// The configured bound of a body class, in bytes.
    pub fn body_limit(&self, body: BodyLimit) -> Option<usize> {
        match body {
            BodyLimit::None => None,
            BodyLimit::Search => Some(self.broker_max_body),
            BodyLimit::Mcp => Some(self.guard.max_body),
        }
    }
}
