//! The public shapes of the five guard datasets: the allow-list.
//!
//! A source record reaches the site only through these types, built field
//! by field in [`super::project`]. A field that is not written here cannot
//! leave the generator, whatever the source holds. The api reads the built
//! files back into the same types to answer MCP tool calls.

use serde::{Deserialize, Serialize};

/// Version of the public schemas below; bumped on any change a client could
/// notice.
pub const SCHEMA_VERSION: &str = "1.0.0";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Evidence {
    pub id: String,
    pub url: String,
    pub description: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Reference {
    pub title: String,
    pub url: String,
}

/// `/guard/facts.json`
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Facts {
    pub schema_version: String,
    pub dataset: String,
    /// Newest review or verification date behind the file (`YYYY-MM-DD`).
    pub last_reviewed: String,
    pub count: usize,
    pub facts: Vec<Fact>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Fact {
    pub id: String,
    pub area: String,
    pub claim: String,
    pub evidence: Vec<Evidence>,
    pub verified_at: String,
    pub expires_at: String,
    pub limitations: Vec<String>,
    pub reviewed_at: String,
}

/// `/guard/security/campaigns/data.json`
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Campaigns {
    pub schema_version: String,
    pub dataset: String,
    pub last_reviewed: String,
    pub count: usize,
    pub campaigns: Vec<Campaign>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Campaign {
    pub id: String,
    pub name: String,
    pub summary: String,
    /// `low`, `medium`, `high` or `critical`.
    pub severity: super::Severity,
    pub first_seen: String,
    pub last_seen: String,
    /// Affected surfaces (`mcp-server`, `ide-extension`, ...).
    pub surfaces: Vec<String>,
    pub attack_steps: Vec<String>,
    pub detection: Vec<String>,
    pub mitigation: Vec<String>,
    pub references: Vec<Reference>,
    pub evidence: Vec<Evidence>,
    pub limitations: Vec<String>,
    pub reviewed_at: String,
}

/// `/guard/security/coverage/data.json`
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Coverage {
    pub schema_version: String,
    pub dataset: String,
    pub last_reviewed: String,
    pub count: usize,
    pub harnesses: Vec<String>,
    pub risk_classes: Vec<String>,
    pub assertions: Vec<Assertion>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Assertion {
    pub id: String,
    pub harness: String,
    pub risk_class: String,
    /// `protected`, `beta` or `monitor-only`.
    pub support_level: super::SupportLevel,
    pub method: String,
    /// `verified`, `partial` or `regressed`.
    pub status: super::CoverageStatus,
    pub evidence: Vec<Evidence>,
    pub collected: String,
    pub expires: String,
    pub limitations: Vec<String>,
    pub reviewed_at: String,
}

/// `/guard/security/policies.json`
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Policies {
    pub schema_version: String,
    pub dataset: String,
    pub last_reviewed: String,
    pub count: usize,
    pub policies: Vec<Policy>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    pub id: String,
    pub campaign_id: String,
    pub title: String,
    /// `allow`, `warn`, `block`, `sandbox-required` or `require-reapproval`.
    pub action: super::Action,
    pub rationale: String,
    pub evidence: Vec<Evidence>,
    pub limitations: Vec<String>,
    pub reviewed_at: String,
}

/// `/guard/research/ai-coding-agent-runtime-security-benchmark/data.json`
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Benchmark {
    pub schema_version: String,
    pub dataset: String,
    pub last_reviewed: String,
    /// Newest run first.
    pub runs: Vec<Run>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    pub run_id: String,
    /// RFC 3339.
    pub run_at: String,
    pub benchmark_version: String,
    pub methodology: Methodology,
    /// Trials per scenario, harness and comparator.
    pub sample_size: u32,
    pub scenarios: Vec<Scenario>,
    pub harnesses: Vec<String>,
    pub comparators: Vec<String>,
    pub results: Vec<RunResult>,
    pub limitations: Vec<String>,
    pub evidence: Vec<Evidence>,
    pub reviewed_at: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Methodology {
    pub summary: String,
    pub steps: Vec<String>,
    pub environment: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    pub id: String,
    pub title: String,
    pub risk_class: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    pub scenario: String,
    pub harness: String,
    pub comparator: String,
    /// `prevented`, `prompted`, `allowed`, `detection_only`, `unsupported`
    /// or `false_positive`.
    pub outcome: super::Outcome,
    pub latency_ms: Latency,
    pub notes: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Latency {
    pub median: u32,
    pub p95: u32,
}
