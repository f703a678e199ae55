//! A plugin's trust answer: the scan combined with what else is known of
//! it, each signal with its evidence, and the recommendation the Guard
//! API's vocabulary allows (`monitor`, `review`, `block`).
//!
//! The formula ([docs/plugins.md](../../docs/plugins.md) says it for
//! people): `trustScore` is the weighted mean of the signals that apply,
//! rounded half to even:
//!
//! | signal | weight | points |
//! | --- | --- | --- |
//! | `security` | 50 | the scan's score; absent when the plugin was not scanned |
//! | `publisher` | 20 | 100 when the importing account proved ownership of an agent (Verification), else 0 |
//! | `metadata` | 10 | 25 for each of `repository`, `license`, `homepage`, `author` in the manifest |
//! | `scannerCi` | 10 | 100 when a workflow of the repository runs the scanner, else 0 |
//! | `maintenance` | 10 | 50 for one imported version, 100 for more |
//!
//! Weights of absent signals are left out of the mean, not counted as 0.
//! The recommendation: `block` for a critical finding; `review` for a
//! high one, a score under 80 (the reference's bar to qualify), no scan,
//! or a reviewed Guard campaign that the findings match; `monitor`
//! otherwise. Nothing here reads a clock: the same inputs, the same answer.

use serde::Serialize;

use crate::report::Severity;

/// A scan as trust reads it.
#[derive(Clone, Debug)]
pub struct Scanned {
    pub score: u32,
    pub findings: Vec<ScannedFinding>,
}

#[derive(Clone, Debug)]
pub struct ScannedFinding {
    pub rule_id: String,
    pub severity: Severity,
    pub file_path: Option<String>,
}

/// A reviewed Guard campaign (section B): what it threatens.
#[derive(Clone, Debug)]
pub struct Campaign {
    pub id: String,
    pub name: String,
    pub severity: Severity,
    pub surfaces: Vec<String>,
}

impl Campaign {
    /// A campaign from a Guard dataset's fields.
    pub fn new(id: &str, name: &str, severity: &str, surfaces: &[String]) -> Campaign {
        Campaign { id: id.into(), name: name.into(), severity: Severity::parse(severity), surfaces: surfaces.to_vec() }
    }
}

/// Everything a trust answer is made of.
#[derive(Clone, Debug)]
pub struct Inputs<'a> {
    /// `None`: not scanned (almanac scans Codex plugins).
    pub scan: Option<&'a Scanned>,
    /// How the publisher proved itself, if it did.
    pub publisher_proof: Option<String>,
    /// The manifest fields present, of `repository`, `license`, `homepage`, `author`.
    pub metadata: Vec<&'static str>,
    /// The workflow that runs the scanner, if one does.
    pub scanner_workflow: Option<String>,
    pub versions: u32,
    pub campaigns: &'a [Campaign],
}

/// The Guard API's recommendation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Recommendation {
    Monitor,
    Review,
    Block,
}

impl Recommendation {
    pub fn as_str(self) -> &'static str {
        match self {
            Recommendation::Monitor => "monitor",
            Recommendation::Review => "review",
            Recommendation::Block => "block",
        }
    }

    /// The verdict's decision: `allow` for what only needs watching.
    pub fn decision(self) -> &'static str {
        match self {
            Recommendation::Monitor => "allow",
            Recommendation::Review => "review",
            Recommendation::Block => "block",
        }
    }
}

/// One signal: its weight, its points (0-100) and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Signal {
    pub name: &'static str,
    pub weight: u32,
    pub points: u32,
    pub evidence: Vec<String>,
}

/// A piece of evidence that moved the recommendation, in the Guard API's
/// `matchedEvidence` shape.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Matched {
    pub category: &'static str,
    pub source: String,
    pub detail: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Trust {
    pub trust_score: u32,
    /// The scan's score.
    pub safety_score: Option<u32>,
    pub recommendation: Recommendation,
    pub rationale: String,
    pub signals: Vec<Signal>,
    pub matched_evidence: Vec<Matched>,
}

/// Which campaign surfaces a finding's rule shows. Only findings of
/// medium severity or above are matched: a missing lockfile is not a
/// campaign.
const RULE_SURFACES: &[(&str, &[&str])] = &[
    ("DANGEROUS_MCP_COMMAND", &["mcp-server"]),
    ("MCP_REMOTE_URL_INSECURE", &["mcp-server"]),
    ("ENV_FILE_COMMITTED", &["secret-files"]),
    ("HARDCODED_SECRET", &["secret-files"]),
    ("RUNTIME_CREDENTIAL_ACCESS", &["secret-files"]),
    ("RISKY_SKILL_INSTRUCTION", &["rules-file"]),
];

/// The trust answer for `inputs`.
pub fn assess(inputs: &Inputs<'_>) -> Trust {
    let mut signals = Vec::new();
    if let Some(scan) = inputs.scan {
        let counts = |severity| scan.findings.iter().filter(|f| f.severity == severity).count();
        signals.push(Signal {
            name: "security",
            weight: 50,
            points: scan.score,
            evidence: vec![format!(
                "scan score {} ({} critical, {} high, {} medium findings)",
                scan.score,
                counts(Severity::Critical),
                counts(Severity::High),
                counts(Severity::Medium)
            )],
        });
    }
    signals.push(Signal {
        name: "publisher",
        weight: 20,
        points: if inputs.publisher_proof.is_some() { 100 } else { 0 },
        evidence: vec![inputs
            .publisher_proof
            .clone()
            .unwrap_or_else(|| "the publisher has proved no ownership".into())],
    });
    signals.push(Signal {
        name: "metadata",
        weight: 10,
        points: 25 * inputs.metadata.len().min(4) as u32,
        evidence: vec![match inputs.metadata.is_empty() {
            true => "the manifest names no repository, license, homepage or author".into(),
            false => format!("the manifest names its {}", inputs.metadata.join(", ")),
        }],
    });
    signals.push(Signal {
        name: "scannerCi",
        weight: 10,
        points: if inputs.scanner_workflow.is_some() { 100 } else { 0 },
        evidence: vec![match &inputs.scanner_workflow {
            Some(path) => format!("{path} runs the plugin scanner"),
            None => "no workflow of the repository runs the plugin scanner".into(),
        }],
    });
    signals.push(Signal {
        name: "maintenance",
        weight: 10,
        points: if inputs.versions > 1 { 100 } else { 50 },
        evidence: vec![format!("{} imported version(s)", inputs.versions)],
    });
    let weight: u32 = signals.iter().map(|s| s.weight).sum();
    let weighted: u32 = signals.iter().map(|s| s.weight * s.points).sum();
    let trust_score = (f64::from(weighted) / f64::from(weight)).round_ties_even() as u32;

    let mut matched = Vec::new();
    let mut recommendation = Recommendation::Monitor;
    let mut reasons = Vec::new();
    let mut raise = |to: Recommendation, why: String, recommendation: &mut Recommendation| {
        *recommendation = (*recommendation).max(to);
        reasons.push(why);
    };
    match inputs.scan {
        None => raise(Recommendation::Review, "not scanned".into(), &mut recommendation),
        Some(scan) => {
            for finding in scan.findings.iter().filter(|f| f.severity >= Severity::High) {
                let to =
                    if finding.severity == Severity::Critical { Recommendation::Block } else { Recommendation::Review };
                matched.push(Matched {
                    category: "trust",
                    source: format!("scan:{}", finding.rule_id),
                    detail: format!(
                        "{} finding{}",
                        finding.severity.as_str(),
                        finding.file_path.as_deref().map(|p| format!(" in {p}")).unwrap_or_default()
                    ),
                });
                raise(
                    to,
                    format!("a {} finding ({})", finding.severity.as_str(), finding.rule_id),
                    &mut recommendation,
                );
            }
            if scan.score < 80 {
                raise(
                    Recommendation::Review,
                    format!("a scan score of {} (under 80)", scan.score),
                    &mut recommendation,
                );
            }
            for campaign in inputs.campaigns {
                let hit = scan.findings.iter().filter(|f| f.severity >= Severity::Medium).find_map(|f| {
                    let surfaces = RULE_SURFACES.iter().find(|(rule, _)| *rule == f.rule_id)?.1;
                    let surface = surfaces.iter().find(|s| campaign.surfaces.iter().any(|c| c == *s))?;
                    Some((f, *surface))
                });
                if let Some((finding, surface)) = hit {
                    matched.push(Matched {
                        category: "watchlist",
                        source: format!("guard:campaign:{}", campaign.id),
                        detail: format!(
                            "{} ({} severity) threatens {surface}; the scan found {}",
                            campaign.name,
                            campaign.severity.as_str(),
                            finding.rule_id
                        ),
                    });
                    raise(Recommendation::Review, format!("the Guard campaign {}", campaign.id), &mut recommendation);
                }
            }
        }
    }
    let rationale = match reasons.is_empty() {
        true => format!("trust score {trust_score}; no finding of high severity and no Guard campaign matched"),
        false => format!("trust score {trust_score}; {}", reasons.join("; ")),
    };
    Trust {
        trust_score,
        safety_score: inputs.scan.map(|s| s.score),
        recommendation,
        rationale,
        signals,
        matched_evidence: matched,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(rule: &str, severity: Severity) -> ScannedFinding {
        ScannedFinding { rule_id: rule.into(), severity, file_path: Some("x".into()) }
    }

    fn campaigns() -> Vec<Campaign> {
        vec![
            Campaign {
                id: "camp-mcp".into(),
                name: "MCP poisoning".into(),
                severity: Severity::Critical,
                surfaces: vec!["mcp-server".into()],
            },
            Campaign {
                id: "camp-ide".into(),
                name: "IDE".into(),
                severity: Severity::Medium,
                surfaces: vec!["ide-extension".into()],
            },
        ]
    }

    #[test]
    fn recommendations_follow_the_rules() {
        let campaigns = campaigns();
        let cases: Vec<(Option<Scanned>, Recommendation, u32, Vec<&str>)> = vec![
            // score, recommendation, trust score, matched sources
            (Some(Scanned { score: 95, findings: vec![] }), Recommendation::Monitor, 55, vec![]),
            (
                Some(Scanned { score: 95, findings: vec![finding("DEPENDENCY_LOCKFILE_MISSING", Severity::Low)] }),
                Recommendation::Monitor,
                55,
                vec![],
            ),
            (Some(Scanned { score: 79, findings: vec![] }), Recommendation::Review, 47, vec![]),
            (
                Some(Scanned { score: 90, findings: vec![finding("MCP_REMOTE_URL_INSECURE", Severity::Medium)] }),
                Recommendation::Review,
                52,
                vec!["guard:campaign:camp-mcp"],
            ),
            (
                Some(Scanned { score: 85, findings: vec![finding("HARDCODED_SECRET", Severity::Critical)] }),
                Recommendation::Block,
                50,
                vec!["scan:HARDCODED_SECRET"],
            ),
            (None, Recommendation::Review, 15, vec![]),
        ];
        for (scan, recommendation, score, sources) in cases {
            let inputs = Inputs {
                scan: scan.as_ref(),
                publisher_proof: None,
                metadata: vec!["license"],
                scanner_workflow: None,
                versions: 1,
                campaigns: &campaigns,
            };
            let trust = assess(&inputs);
            assert_eq!(trust.recommendation, recommendation, "{scan:?}");
            assert_eq!(trust.trust_score, score, "{scan:?}");
            let got: Vec<&str> = trust.matched_evidence.iter().map(|m| m.source.as_str()).collect();
            assert_eq!(got, sources, "{scan:?}");
        }
    }

    #[test]
    fn every_signal_counts_by_its_weight() {
        let scan = Scanned { score: 100, findings: vec![] };
        let inputs = Inputs {
            scan: Some(&scan),
            publisher_proof: Some("verified by DNS".into()),
            metadata: vec!["repository", "license", "homepage", "author"],
            scanner_workflow: Some(".github/workflows/scan.yml".into()),
            versions: 2,
            campaigns: &[],
        };
        let trust = assess(&inputs);
        assert_eq!(trust.trust_score, 100);
        assert_eq!(trust.signals.iter().map(|s| s.weight).sum::<u32>(), 100);
        assert_eq!(trust.safety_score, Some(100));
    }
}
