//! Reviewed source records as they are kept in `datasets/guard/`: the
//! public content, the review state, and private working fields (reviewer
//! notes, internal findings, workspace paths, prompts) that never leave the
//! generator. Unknown fields are refused, so a misspelt field fails the
//! build instead of silently vanishing.

use serde::Deserialize;

use super::public::{Evidence, Latency, Methodology, Reference, Scenario};

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReviewState {
    Draft,
    Pending,
    Approved,
    Rejected,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Review {
    pub state: ReviewState,
    /// Private: who reviewed.
    pub reviewer: String,
    /// `YYYY-MM-DD`; public as `reviewedAt`.
    pub reviewed_at: String,
    /// Private.
    #[serde(default)]
    pub notes: Option<String>,
}

/// Private working fields. Read so they are known and validated as a
/// shape; never projected.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Internal {
    #[serde(default)]
    pub findings: Vec<String>,
    #[serde(default)]
    pub workspace_path: Option<String>,
    #[serde(default)]
    pub prompts: Vec<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FactRecord {
    pub id: String,
    pub area: String,
    pub claim: String,
    pub evidence: Vec<Evidence>,
    pub verified_at: String,
    pub expires_at: String,
    pub limitations: Vec<String>,
    pub review: Review,
    #[serde(default)]
    pub internal: Internal,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CampaignRecord {
    pub id: String,
    pub name: String,
    pub summary: String,
    pub severity: super::Severity,
    pub first_seen: String,
    pub last_seen: String,
    pub surfaces: Vec<String>,
    pub attack_steps: Vec<String>,
    pub detection: Vec<String>,
    pub mitigation: Vec<String>,
    pub references: Vec<Reference>,
    pub evidence: Vec<Evidence>,
    pub limitations: Vec<String>,
    pub review: Review,
    #[serde(default)]
    pub internal: Internal,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AssertionRecord {
    pub id: String,
    pub harness: String,
    pub risk_class: String,
    pub support_level: super::SupportLevel,
    pub method: String,
    pub status: super::CoverageStatus,
    pub evidence: Vec<Evidence>,
    pub collected: String,
    pub expires: String,
    pub limitations: Vec<String>,
    pub review: Review,
    #[serde(default)]
    pub internal: Internal,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyRecord {
    pub id: String,
    pub campaign_id: String,
    pub title: String,
    pub action: super::Action,
    pub rationale: String,
    pub evidence: Vec<Evidence>,
    pub limitations: Vec<String>,
    pub review: Review,
    #[serde(default)]
    pub internal: Internal,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunRecord {
    pub run_id: String,
    pub run_at: String,
    pub benchmark_version: String,
    pub methodology: Methodology,
    pub sample_size: u32,
    pub scenarios: Vec<Scenario>,
    pub harnesses: Vec<String>,
    pub comparators: Vec<String>,
    pub results: Vec<ResultRecord>,
    pub limitations: Vec<String>,
    pub evidence: Vec<Evidence>,
    pub review: Review,
    #[serde(default)]
    pub internal: Internal,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResultRecord {
    pub scenario: String,
    pub harness: String,
    pub comparator: String,
    pub outcome: super::Outcome,
    pub latency_ms: Latency,
    pub notes: String,
    /// Private: the raw transcript location of the trial.
    #[serde(default)]
    pub transcript_path: Option<String>,
}
