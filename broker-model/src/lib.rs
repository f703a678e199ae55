//! The broker's records and rules (section A), shared by the batch
//! generator and the api: the source record of an agent ([`Agent`], its
//! HCS-11 [`Profile`]) and its validation, catalogs and feedback, the chat
//! adapter table, the availability rule, registration, the journal's
//! format, and a deterministic generator of realistic indexes.
//!
//! An [`Agent`] holds what the search hit (`SearchHit` of
//! `../shared/contracts/broker.md`) needs, plus what search ranks and
//! filters on (trust signals, verification status, type). Field names are
//! the wire names. No IO but the journal's files.

pub mod availability;
pub mod catalog;
pub mod chat;
/// Deterministic agent indexes for tests and benchmarks. Only the `tests`
/// crate's tools and tests and the crates' own tests call it, so the
/// shipped binaries link none of it.
pub mod generate;
pub mod journal;
pub mod ownership;
pub mod registration;

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use catalog::{Catalog, FeedbackEntry};

use shared::uaid::{Target, Uaid};

/// HCS-11 AI capability codes 0 to 18, by label.
pub const CAPABILITIES: [&str; 19] = [
    "Text Generation",
    "Image Generation",
    "Audio Generation",
    "Video Generation",
    "Code Generation",
    "Language Translation",
    "Summarization and Extraction",
    "Knowledge Retrieval",
    "Data Integration",
    "Market Intelligence",
    "Transaction Analytics",
    "Smart Contract Audit",
    "Governance Facilitation",
    "Security Monitoring",
    "Compliance Analysis",
    "Fraud Detection",
    "Multi-Agent Coordination",
    "API Integration",
    "Workflow Automation",
];

/// HCS-11 profile types.
pub const PROFILE_PERSONAL: u8 = 0;
pub const PROFILE_AI_AGENT: u8 = 1;
pub const PROFILE_MCP_SERVER: u8 = 2;

shared::vocabulary! {
    /// Where an agent stands with the broker.
    Verification, VERIFICATION {
        Registered = "registered",
        Indexed = "indexed",
        Pending = "pending",
    }
}

shared::vocabulary! {
    /// What an agent is: its `type`, and the `type` search filter.
    AgentKind, KINDS {
        AiAgents = "ai-agents",
        McpServers = "mcp-servers",
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Agent {
    /// The broker's id of the agent (unique).
    pub id: String,
    pub uaid: Uaid,
    pub registry: String,
    pub name: String,
    pub description: String,
    /// HCS-11 AI capability codes (0 to 18).
    pub capabilities: Vec<u8>,
    pub capability_labels: Vec<String>,
    pub protocols: Vec<String>,
    pub adapter: String,
    pub original_id: String,
    /// Endpoint name to URL.
    pub endpoints: BTreeMap<String, String>,
    /// 0 to 100.
    pub trust_score: f64,
    /// Named signals behind the score, each 0 to 100.
    pub trust_signals: BTreeMap<String, f64>,
    /// Whether the agent can be reached now: `availabilityStatus` is
    /// `online` ([`availability`]).
    pub available: bool,
    /// `online`, `offline`, or `unknown` (never checked).
    pub availability_status: String,
    /// Who says so: `broker` (measured here) or `registry` (the source's
    /// claim, for an agent this broker cannot check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_source: Option<availability::Source>,
    /// When the check behind the status was made (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_checked_at: Option<String>,
    /// How long that check took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_latency_ms: Option<u64>,
    /// When a check last reached the agent (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen: Option<String>,
    pub verification_status: Verification,
    #[serde(rename = "type")]
    pub kind: AgentKind,
    pub communication_supported: bool,
    pub routing_supported: bool,
    pub created_at: String,
    pub updated_at: String,
    /// Free-form metadata; `isFree` and nested keys are searchable.
    pub metadata: serde_json::Map<String, serde_json::Value>,
    pub profile: Profile,
}

/// An HCS-11 profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub version: String,
    #[serde(rename = "type")]
    pub kind: u8,
    pub display_name: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub alias: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bio: Option<String>,
    #[serde(rename = "inboundTopicId", skip_serializing_if = "Option::is_none", default)]
    pub inbound_topic_id: Option<String>,
    #[serde(rename = "outboundTopicId", skip_serializing_if = "Option::is_none", default)]
    pub outbound_topic_id: Option<String>,
    #[serde(rename = "aiAgent", skip_serializing_if = "Option::is_none", default)]
    pub ai_agent: Option<AiAgent>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub socials: Option<Vec<Social>>,
    /// An HRL (`hcs://1/0.0.123`) or another URI.
    #[serde(rename = "profileImage", skip_serializing_if = "Option::is_none", default)]
    pub profile_image: Option<String>,
    /// Free-form properties (HCS-11 defines no structure for them).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub properties: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(rename = "mcpServer", skip_serializing_if = "Option::is_none", default)]
    pub mcp_server: Option<McpServer>,
    pub uaid: String,
}

/// An HCS-11 social link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Social {
    pub platform: String,
    pub handle: String,
}

/// An HCS-11 MCP server profile's own part (`mcpServer`); the optional
/// lists HCS-11 leaves open are kept as given.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpServer {
    pub version: String,
    pub connection_info: ConnectionInfo,
    /// HCS-11 MCP service codes.
    pub services: Vec<u8>,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub verification: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub host: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub capabilities: Option<Vec<serde_json::Value>>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub resources: Option<Vec<serde_json::Value>>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tools: Option<Vec<serde_json::Value>>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub maintainer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub repository: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub docs: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectionInfo {
    pub url: String,
    /// `stdio` or `sse` (HCS-11), or `streamable-http`.
    pub transport: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AiAgent {
    /// 0 manual, 1 autonomous.
    #[serde(rename = "type")]
    pub kind: u8,
    pub model: String,
    pub capabilities: Vec<u8>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub creator: Option<String>,
}

/// Checks one agent; the error names the agent and the field.
pub fn validate(agent: &Agent) -> Result<()> {
    let fail =
        |field: &str, problem: String| -> Result<()> { bail!("agent {:?}: field {field:?}: {problem}", agent.id) };
    for (field, value) in [("id", &agent.id), ("name", &agent.name), ("registry", &agent.registry)] {
        if value.trim().is_empty() {
            fail(field, "must not be empty".into())?;
        }
    }
    // The UAID itself was checked as it was read.
    let uaid = &agent.uaid;
    if uaid.target == Target::Aid && uaid.param("registry").is_some_and(|r| r != agent.registry) {
        fail("uaid", format!("its registry parameter is not {:?}", agent.registry))?;
    }
    if agent.uaid != agent.profile.uaid {
        fail("profile.uaid", "differs from uaid".into())?;
    }
    if let Some(code) = agent.capabilities.iter().find(|c| **c > 18) {
        fail("capabilities", format!("{code} is not an HCS-11 capability (0 to 18)"))?;
    }
    if !(0.0..=100.0).contains(&agent.trust_score) {
        fail("trustScore", format!("{} is outside 0 to 100", agent.trust_score))?;
    }
    if let Some((name, v)) = agent.trust_signals.iter().find(|(_, v)| !(0.0..=100.0).contains(*v)) {
        fail("trustSignals", format!("{name} = {v} is outside 0 to 100"))?;
    }
    for (field, value) in [("createdAt", &agent.created_at), ("updatedAt", &agent.updated_at)] {
        if !catalog::rfc3339(value) {
            fail(field, format!("{value:?} is not an RFC 3339 time"))?;
        }
    }
    if agent.updated_at < agent.created_at {
        fail("updatedAt", "is before createdAt".into())?;
    }
    Ok(())
}

/// Checks a whole index: every agent, and unique ids and UAIDs.
pub fn validate_index(agents: &[Agent]) -> Result<()> {
    let (mut ids, mut uaids) = (BTreeSet::new(), BTreeSet::new());
    for agent in agents {
        validate(agent)?;
        if !ids.insert(agent.id.as_str()) {
            bail!("agent {:?}: field \"id\": used twice", agent.id);
        }
        if !uaids.insert(agent.uaid.as_str()) {
            bail!("agent {:?}: field \"uaid\": {} is used twice", agent.id, agent.uaid);
        }
    }
    Ok(())
}

/// Everything the broker publishes, read from `datasets/broker/`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sources {
    pub agents: Vec<Agent>,
    pub catalog: Catalog,
    pub feedback: Vec<FeedbackEntry>,
    /// The `seq` of the last journal record applied (0: none), so that the
    /// api knows which of its live changes a build already holds.
    pub journal_seq: u64,
}

impl Sources {
    pub fn validate(&self) -> Result<()> {
        self.validate_with(&|_| None)
    }

    /// [`Sources::validate`], feedback entry `n` named as `origin(n)` says.
    pub fn validate_with(&self, origin: &dyn Fn(usize) -> Option<String>) -> Result<()> {
        validate_index(&self.agents).context("agents.json")?;
        catalog::validate(&self.catalog, &self.agents).context("catalog.json")?;
        let by_uaid: std::collections::HashMap<&str, catalog::Subject> =
            self.agents.iter().map(|a| (a.uaid.as_str(), catalog::Subject::of(a))).collect();
        catalog::validate_feedback_by(&self.feedback, |uaid| by_uaid.get(uaid).copied(), origin)
            .context("feedback.json")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An agent with `field` set to `value`: read, or refused naming what
    /// the field may hold.
    fn check(field: &str, value: &str, expected: Result<&str, &str>) {
        let mut agent = serde_json::to_value(generate::agents(1, 7).pop().unwrap()).unwrap();
        agent[field] = value.into();
        let read = serde_json::from_value::<Agent>(agent);
        match (read, expected) {
            (Ok(a), Ok(spelled)) => {
                let got = if field == "type" { a.kind.as_str() } else { a.verification_status.as_str() };
                assert_eq!(got, spelled, "{field}={value}");
            }
            (Err(e), Err(named)) => assert!(e.to_string().contains(named), "{field}={value}: {e}"),
            (got, expected) => panic!("{field}={value}: {:?}, expected {expected:?}", got.map(|a| a.id)),
        }
    }

    #[test]
    fn closed_sets_are_read_exactly_as_spelled_on_the_wire() {
        for status in VERIFICATION {
            check("verificationStatus", status, Ok(status));
        }
        for kind in KINDS {
            check("type", kind, Ok(kind));
        }
        check("verificationStatus", "verified", Err("`registered`, `indexed`, `pending`"));
        check("verificationStatus", "Registered", Err("`registered`"));
        check("type", "ai_agents", Err("`ai-agents` or `mcp-servers`"));
        check("type", "", Err("`ai-agents`"));
    }
}
