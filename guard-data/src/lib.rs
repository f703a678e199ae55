//! Guard data (section B): reviewed source records in `datasets/guard/`
//! become five public JSON datasets.
//!
//! 1. **load**: each source file is a list of records; each record is read
//!    on its own, so an error names the file, the record and the field;
//! 2. **validate**: dates, enumerations, URLs, unique ids, and references
//!    between records; one bad record fails the build (nothing published);
//! 3. **select**: only approved records, minus facts and coverage
//!    assertions past their expiry on the reference date;
//! 4. **project**: field by field into [`public`], the allow-list;
//! 5. **render**: one file per dataset, `Last-Modified` the newest review
//!    or verification date behind it.
//!
//! Pure but for reading the sources: the reference date is passed in.

pub mod public;
pub mod source;

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{bail, Context, Result};
use chrono::NaiveDate;
use serde::de::DeserializeOwned;
use serde::Serialize;

use public::*;
use shared::site::File;
use shared::timestamp::Timestamp;
use source::*;

/// Routes of the five datasets, and their source files under the guard
/// folder.
pub const FACTS: &str = "/guard/facts.json";
pub const CAMPAIGNS: &str = "/guard/security/campaigns/data.json";
pub const COVERAGE: &str = "/guard/security/coverage/data.json";
pub const POLICIES: &str = "/guard/security/policies.json";
pub const BENCHMARK: &str = "/guard/research/ai-coding-agent-runtime-security-benchmark/data.json";
pub const ROUTES: [&str; 5] = [FACTS, CAMPAIGNS, COVERAGE, POLICIES, BENCHMARK];

shared::vocabulary! {
    /// How dangerous a campaign is.
    Severity, SEVERITIES { Low = "low", Medium = "medium", High = "high", Critical = "critical" }
}

shared::vocabulary! {
    /// How far the product covers a runtime.
    SupportLevel, SUPPORT_LEVELS { Protected = "protected", Beta = "beta", MonitorOnly = "monitor-only" }
}

shared::vocabulary! {
    /// Where a coverage assertion stands.
    CoverageStatus, STATUSES { Verified = "verified", Partial = "partial", Regressed = "regressed" }
}

shared::vocabulary! {
    /// What a policy does.
    Action, ACTIONS {
        Allow = "allow",
        Warn = "warn",
        Block = "block",
        SandboxRequired = "sandbox-required",
        RequireReapproval = "require-reapproval",
    }
}

shared::vocabulary! {
    /// How one benchmark cell came out.
    Outcome, OUTCOMES {
        Prevented = "prevented",
        Prompted = "prompted",
        Allowed = "allowed",
        DetectionOnly = "detection_only",
        Unsupported = "unsupported",
        FalsePositive = "false_positive",
    }
}

/// The source records of all five datasets, validated.
#[derive(Clone, Debug)]
pub struct Sources {
    pub facts: Vec<FactRecord>,
    pub campaigns: Vec<CampaignRecord>,
    pub coverage: Vec<AssertionRecord>,
    pub policies: Vec<PolicyRecord>,
    pub runs: Vec<RunRecord>,
}

/// The five public datasets of one build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datasets {
    pub facts: Facts,
    pub campaigns: Campaigns,
    pub coverage: Coverage,
    pub policies: Policies,
    pub benchmark: Benchmark,
}

/// Loads and validates every source file of `dir`.
pub fn load(dir: &Path) -> Result<Sources> {
    let sources = Sources {
        facts: records(dir, "facts.json")?,
        campaigns: records(dir, "campaigns.json")?,
        coverage: records(dir, "coverage.json")?,
        policies: records(dir, "policies.json")?,
        runs: records(dir, "benchmark.json")?,
    };
    validate(&sources)?;
    Ok(sources)
}

/// A source file: `{"records": [...]}`. Each record is decoded on its own so
/// that an error names it.
fn records<T: DeserializeOwned>(dir: &Path, name: &str) -> Result<Vec<T>> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct SourceFile {
        records: Vec<serde_json::Value>,
    }
    let path = dir.join(name);
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let file: SourceFile =
        serde_json::from_slice(&bytes).with_context(|| format!("{}: not a guard source file", path.display()))?;
    file.records
        .into_iter()
        .enumerate()
        .map(|(i, value)| {
            let id = value.get("id").or_else(|| value.get("runId")).and_then(|v| v.as_str());
            let label = id.map_or(format!("record {}", i + 1), |id| format!("record {id:?}"));
            // The error names the field's path inside the record.
            serde_path_to_error::deserialize(value).map_err(|e| {
                anyhow::anyhow!("{}: {label}: field {:?}: {}", path.display(), e.path().to_string(), e.inner())
            })
        })
        .collect()
}

/// Where a validation error is: file, record, field.
struct At<'a> {
    file: &'a str,
    record: &'a str,
}

impl At<'_> {
    fn fail<T>(&self, field: &str, problem: impl std::fmt::Display) -> Result<T> {
        bail!("datasets/guard/{}: record {:?}: field {field:?}: {problem}", self.file, self.record)
    }

    fn text(&self, field: &str, value: &str) -> Result<()> {
        if value.trim().is_empty() {
            return self.fail(field, "must not be empty");
        }
        Ok(())
    }

    fn date(&self, field: &str, value: &str) -> Result<NaiveDate> {
        NaiveDate::parse_from_str(value, "%Y-%m-%d")
            .or_else(|_| self.fail(field, format!("{value:?} is not a date (YYYY-MM-DD)")))
    }

    fn url(&self, field: &str, value: &str) -> Result<()> {
        let rest = value.strip_prefix("https://").unwrap_or("");
        if rest.is_empty() || rest.starts_with('/') || rest.contains(char::is_whitespace) {
            return self.fail(field, format!("{value:?} is not an https URL"));
        }
        Ok(())
    }

    fn evidence(&self, evidence: &[Evidence]) -> Result<()> {
        if evidence.is_empty() {
            return self.fail("evidence", "at least one item is required");
        }
        for e in evidence {
            self.text("evidence.id", &e.id)?;
            self.url("evidence.url", &e.url)?;
            self.text("evidence.description", &e.description)?;
        }
        Ok(())
    }

    fn review(&self, review: &Review) -> Result<NaiveDate> {
        self.text("review.reviewer", &review.reviewer)?;
        self.date("review.reviewedAt", &review.reviewed_at)
    }
}

fn unique<'a>(file: &str, ids: impl Iterator<Item = &'a str>) -> Result<()> {
    let mut seen = BTreeSet::new();
    for id in ids {
        if id.trim().is_empty() {
            bail!("datasets/guard/{file}: a record has an empty id");
        }
        if !seen.insert(id) {
            bail!("datasets/guard/{file}: record {id:?}: field \"id\": used by two records");
        }
    }
    Ok(())
}

/// Checks every record, published or not: a broken draft is still broken.
pub fn validate(s: &Sources) -> Result<()> {
    unique("facts.json", s.facts.iter().map(|r| r.id.as_str()))?;
    for r in &s.facts {
        let at = At { file: "facts.json", record: &r.id };
        at.text("area", &r.area)?;
        at.text("claim", &r.claim)?;
        at.evidence(&r.evidence)?;
        let verified = at.date("verifiedAt", &r.verified_at)?;
        if at.date("expiresAt", &r.expires_at)? <= verified {
            at.fail("expiresAt", "must be after verifiedAt")?;
        }
        at.review(&r.review)?;
    }
    unique("campaigns.json", s.campaigns.iter().map(|r| r.id.as_str()))?;
    for r in &s.campaigns {
        let at = At { file: "campaigns.json", record: &r.id };
        at.text("name", &r.name)?;
        at.text("summary", &r.summary)?;
        if at.date("lastSeen", &r.last_seen)? < at.date("firstSeen", &r.first_seen)? {
            at.fail("lastSeen", "is before firstSeen")?;
        }
        for (field, list) in [
            ("surfaces", &r.surfaces),
            ("attackSteps", &r.attack_steps),
            ("detection", &r.detection),
            ("mitigation", &r.mitigation),
        ] {
            if list.is_empty() || list.iter().any(|v| v.trim().is_empty()) {
                at.fail(field, "needs at least one non-empty entry")?;
            }
        }
        for reference in &r.references {
            at.text("references.title", &reference.title)?;
            at.url("references.url", &reference.url)?;
        }
        at.evidence(&r.evidence)?;
        at.review(&r.review)?;
    }
    unique("coverage.json", s.coverage.iter().map(|r| r.id.as_str()))?;
    for r in &s.coverage {
        let at = At { file: "coverage.json", record: &r.id };
        at.text("harness", &r.harness)?;
        at.text("riskClass", &r.risk_class)?;
        at.text("method", &r.method)?;
        at.evidence(&r.evidence)?;
        if at.date("expires", &r.expires)? <= at.date("collected", &r.collected)? {
            at.fail("expires", "must be after collected")?;
        }
        at.review(&r.review)?;
    }
    unique("policies.json", s.policies.iter().map(|r| r.id.as_str()))?;
    let campaign_ids: BTreeSet<&str> = s.campaigns.iter().map(|c| c.id.as_str()).collect();
    for r in &s.policies {
        let at = At { file: "policies.json", record: &r.id };
        if !campaign_ids.contains(r.campaign_id.as_str()) {
            at.fail("campaignId", format!("{:?} names no campaign", r.campaign_id))?;
        }
        at.text("title", &r.title)?;
        at.text("rationale", &r.rationale)?;
        at.evidence(&r.evidence)?;
        at.review(&r.review)?;
    }
    unique("benchmark.json", s.runs.iter().map(|r| r.run_id.as_str()))?;
    for r in &s.runs {
        let at = At { file: "benchmark.json", record: &r.run_id };
        if chrono::DateTime::parse_from_rfc3339(&r.run_at).is_err() {
            at.fail("runAt", format!("{:?} is not an RFC 3339 time", r.run_at))?;
        }
        at.text("benchmarkVersion", &r.benchmark_version)?;
        at.text("methodology.summary", &r.methodology.summary)?;
        if r.sample_size == 0 {
            at.fail("sampleSize", "must be at least 1")?;
        }
        let scenarios: BTreeSet<&str> = r.scenarios.iter().map(|s| s.id.as_str()).collect();
        for result in &r.results {
            if !scenarios.contains(result.scenario.as_str()) {
                at.fail("results.scenario", format!("{:?} is not a scenario of the run", result.scenario))?;
            }
            if !r.harnesses.contains(&result.harness) {
                at.fail("results.harness", format!("{:?} is not a harness of the run", result.harness))?;
            }
            if !r.comparators.contains(&result.comparator) {
                at.fail("results.comparator", format!("{:?} is not a comparator of the run", result.comparator))?;
            }
            if result.latency_ms.p95 < result.latency_ms.median {
                at.fail("results.latencyMs", "p95 is below the median")?;
            }
        }
        let cells: BTreeSet<(&str, &str, &str)> =
            r.results.iter().map(|x| (x.scenario.as_str(), x.harness.as_str(), x.comparator.as_str())).collect();
        if cells.len() != r.results.len() {
            at.fail("results", "a scenario, harness and comparator appear twice")?;
        }
        if cells.len() != scenarios.len() * r.harnesses.len() * r.comparators.len() {
            at.fail("results", "every scenario x harness x comparator needs exactly one result")?;
        }
        at.evidence(&r.evidence)?;
        at.review(&r.review)?;
    }
    Ok(())
}

fn approved(review: &Review) -> bool {
    review.state == ReviewState::Approved
}

/// Dates are validated: this only reads them.
fn day(text: &str) -> NaiveDate {
    NaiveDate::parse_from_str(text, "%Y-%m-%d").expect("validated date")
}

/// Midnight UTC of a validated `YYYY-MM-DD` date: a dataset's
/// `Last-Modified` (its file's, and its page's).
pub fn midnight(text: &str) -> Timestamp {
    let seconds = day(text).and_hms_opt(0, 0, 0).expect("midnight").and_utc().timestamp();
    Timestamp(seconds.max(0) as u64 * 1_000_000_000)
}

/// The public datasets on `today`: approved records only, without facts and
/// coverage assertions whose expiry is before `today`. Output depends on
/// `today` only through which records are in: it changes when a record's
/// state does.
pub fn project(s: &Sources, today: NaiveDate) -> Datasets {
    let live = |expires: &str| day(expires) >= today;
    let mut facts: Vec<Fact> = s
        .facts
        .iter()
        .filter(|r| approved(&r.review) && live(&r.expires_at))
        .map(|r| Fact {
            id: r.id.clone(),
            area: r.area.clone(),
            claim: r.claim.clone(),
            evidence: r.evidence.clone(),
            verified_at: r.verified_at.clone(),
            expires_at: r.expires_at.clone(),
            limitations: r.limitations.clone(),
            reviewed_at: r.review.reviewed_at.clone(),
        })
        .collect();
    facts.sort_by(|a, b| (&a.area, &a.id).cmp(&(&b.area, &b.id)));

    let mut campaigns: Vec<Campaign> = s
        .campaigns
        .iter()
        .filter(|r| approved(&r.review))
        .map(|r| Campaign {
            id: r.id.clone(),
            name: r.name.clone(),
            summary: r.summary.clone(),
            severity: r.severity,
            first_seen: r.first_seen.clone(),
            last_seen: r.last_seen.clone(),
            surfaces: r.surfaces.clone(),
            attack_steps: r.attack_steps.clone(),
            detection: r.detection.clone(),
            mitigation: r.mitigation.clone(),
            references: r.references.clone(),
            evidence: r.evidence.clone(),
            limitations: r.limitations.clone(),
            reviewed_at: r.review.reviewed_at.clone(),
        })
        .collect();
    campaigns.sort_by(|a, b| a.id.cmp(&b.id));
    let published: BTreeSet<&str> = campaigns.iter().map(|c| c.id.as_str()).collect();

    let mut assertions: Vec<Assertion> = s
        .coverage
        .iter()
        .filter(|r| approved(&r.review) && live(&r.expires))
        .map(|r| Assertion {
            id: r.id.clone(),
            harness: r.harness.clone(),
            risk_class: r.risk_class.clone(),
            support_level: r.support_level,
            method: r.method.clone(),
            status: r.status,
            evidence: r.evidence.clone(),
            collected: r.collected.clone(),
            expires: r.expires.clone(),
            limitations: r.limitations.clone(),
            reviewed_at: r.review.reviewed_at.clone(),
        })
        .collect();
    assertions.sort_by(|a, b| (&a.harness, &a.risk_class, &a.id).cmp(&(&b.harness, &b.risk_class, &b.id)));

    // A policy is guidance on a published campaign; one whose campaign is
    // not published is withheld with it.
    let mut policies: Vec<Policy> = s
        .policies
        .iter()
        .filter(|r| approved(&r.review) && published.contains(r.campaign_id.as_str()))
        .map(|r| Policy {
            id: r.id.clone(),
            campaign_id: r.campaign_id.clone(),
            title: r.title.clone(),
            action: r.action,
            rationale: r.rationale.clone(),
            evidence: r.evidence.clone(),
            limitations: r.limitations.clone(),
            reviewed_at: r.review.reviewed_at.clone(),
        })
        .collect();
    policies.sort_by(|a, b| (&a.campaign_id, &a.id).cmp(&(&b.campaign_id, &b.id)));

    let mut runs: Vec<Run> = s
        .runs
        .iter()
        .filter(|r| approved(&r.review))
        .map(|r| Run {
            run_id: r.run_id.clone(),
            run_at: r.run_at.clone(),
            benchmark_version: r.benchmark_version.clone(),
            methodology: r.methodology.clone(),
            sample_size: r.sample_size,
            scenarios: r.scenarios.clone(),
            harnesses: r.harnesses.clone(),
            comparators: r.comparators.clone(),
            results: r
                .results
                .iter()
                .map(|x| RunResult {
                    scenario: x.scenario.clone(),
                    harness: x.harness.clone(),
                    comparator: x.comparator.clone(),
                    outcome: x.outcome,
                    latency_ms: x.latency_ms.clone(),
                    notes: x.notes.clone(),
                })
                .collect(),
            limitations: r.limitations.clone(),
            evidence: r.evidence.clone(),
            reviewed_at: r.review.reviewed_at.clone(),
        })
        .collect();
    runs.sort_by(|a, b| (&b.run_at, &b.run_id).cmp(&(&a.run_at, &a.run_id)));

    let newest = |dates: Vec<&str>| dates.into_iter().max().unwrap_or("1970-01-01").to_string();
    let sorted_unique = |values: Vec<&String>| -> Vec<String> {
        values.into_iter().cloned().collect::<BTreeSet<_>>().into_iter().collect()
    };
    Datasets {
        facts: Facts {
            schema_version: SCHEMA_VERSION.into(),
            dataset: "guard-product-facts".into(),
            last_reviewed: newest(facts.iter().flat_map(|f| [f.reviewed_at.as_str(), &f.verified_at]).collect()),
            count: facts.len(),
            facts,
        },
        campaigns: Campaigns {
            schema_version: SCHEMA_VERSION.into(),
            dataset: "guard-threat-campaigns".into(),
            last_reviewed: newest(campaigns.iter().map(|c| c.reviewed_at.as_str()).collect()),
            count: campaigns.len(),
            campaigns,
        },
        coverage: Coverage {
            schema_version: SCHEMA_VERSION.into(),
            dataset: "guard-harness-coverage".into(),
            last_reviewed: newest(assertions.iter().flat_map(|a| [a.reviewed_at.as_str(), &a.collected]).collect()),
            count: assertions.len(),
            harnesses: sorted_unique(assertions.iter().map(|a| &a.harness).collect()),
            risk_classes: sorted_unique(assertions.iter().map(|a| &a.risk_class).collect()),
            assertions,
        },
        policies: Policies {
            schema_version: SCHEMA_VERSION.into(),
            dataset: "guard-defensive-policies".into(),
            last_reviewed: newest(policies.iter().map(|p| p.reviewed_at.as_str()).collect()),
            count: policies.len(),
            policies,
        },
        benchmark: Benchmark {
            schema_version: SCHEMA_VERSION.into(),
            dataset: "ai-coding-agent-runtime-security-benchmark".into(),
            last_reviewed: newest(runs.iter().map(|r| r.reviewed_at.as_str()).collect()),
            runs,
        },
    }
}

/// The five files of the datasets.
pub fn render(datasets: &Datasets) -> Vec<File> {
    fn file<T: Serialize>(route: &str, last_reviewed: &str, value: &T) -> File {
        let mut body = serde_json::to_vec_pretty(value).expect("datasets serialise");
        body.push(b'\n');
        let last_modified = midnight(last_reviewed);
        File {
            route: route.to_string(),
            path: route.trim_start_matches('/').to_string(),
            representation: shared::http::Representation {
                body,
                last_modified,
                content_type: shared::http::JSON,
                cache: shared::http::Cache::Catalog,
            },
        }
    }
    vec![
        file(FACTS, &datasets.facts.last_reviewed, &datasets.facts),
        file(CAMPAIGNS, &datasets.campaigns.last_reviewed, &datasets.campaigns),
        file(COVERAGE, &datasets.coverage.last_reviewed, &datasets.coverage),
        file(POLICIES, &datasets.policies.last_reviewed, &datasets.policies),
        file(BENCHMARK, &datasets.benchmark.last_reviewed, &datasets.benchmark),
    ]
}

/// Reads the built datasets back from their files' bytes (the api does, to
/// answer MCP tool calls from exactly what the JSON routes serve).
pub fn parse(files: impl Fn(&str) -> Option<Vec<u8>>) -> Result<Datasets> {
    fn one<T: DeserializeOwned>(files: &impl Fn(&str) -> Option<Vec<u8>>, route: &str) -> Result<T> {
        let bytes = files(route).with_context(|| format!("the build has no {route}"))?;
        serde_json::from_slice(&bytes).with_context(|| format!("{route} does not parse"))
    }
    Ok(Datasets {
        facts: one(&files, FACTS)?,
        campaigns: one(&files, CAMPAIGNS)?,
        coverage: one(&files, COVERAGE)?,
        policies: one(&files, POLICIES)?,
        benchmark: one(&files, BENCHMARK)?,
    })
}

#[cfg(test)]
mod tests;
