//! What a scan says: categories of checks, each worth points, each
//! failure a finding with a rule id and a severity, and the score, grade
//! and label the reference scanner (`plugin-scanner`) derives from them.
//! Serialised with the field names of its `scan-result.v1` report.
//!
//! The score is `round(100 × earned / applicable maximum)` over every
//! check of every category (100 when nothing applies); a check about a
//! surface the plugin does not have is worth 0 of 0 and moves nothing.

use serde::Serialize;

/// The report's schema, as the reference names it.
pub const SCHEMA_VERSION: &str = "scan-result.v1";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Low,
    Medium,
    High,
    Critical,
}

impl Severity {
    /// Most severe first.
    pub const ALL: [Severity; 5] =
        [Severity::Critical, Severity::High, Severity::Medium, Severity::Low, Severity::Info];

    /// A severity's name; anything else is `info`.
    pub fn parse(text: &str) -> Severity {
        Severity::ALL.into_iter().find(|s| s.as_str() == text).unwrap_or(Severity::Info)
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::High => "high",
            Severity::Medium => "medium",
            Severity::Low => "low",
            Severity::Info => "info",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub rule_id: String,
    pub severity: Severity,
    /// The category's key (`manifest-validation`, `best-practices`, ...).
    pub category: &'static str,
    pub title: String,
    pub description: String,
    pub remediation: Option<String>,
    pub file_path: Option<String>,
    pub line_number: Option<u32>,
    /// `native`: found by this scanner (the reference also reports its
    /// optional third-party analysers' findings here).
    pub source: &'static str,
}

impl Finding {
    pub fn new(
        rule_id: impl Into<String>,
        severity: Severity,
        category: &'static str,
        title: impl Into<String>,
        description: impl Into<String>,
    ) -> Finding {
        Finding {
            rule_id: rule_id.into(),
            severity,
            category,
            title: title.into(),
            description: description.into(),
            remediation: None,
            file_path: None,
            line_number: None,
            source: "native",
        }
    }

    pub fn remediation(mut self, text: impl Into<String>) -> Finding {
        self.remediation = Some(text.into());
        self
    }

    pub fn file(mut self, path: impl Into<String>) -> Finding {
        self.file_path = Some(path.into());
        self
    }

    pub fn line(mut self, line: u32) -> Finding {
        self.line_number = Some(line);
        self
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    pub name: &'static str,
    pub passed: bool,
    pub points: u32,
    pub max_points: u32,
    pub message: String,
    pub findings: Vec<Finding>,
}

impl Check {
    /// Passed: all of `max` points.
    pub fn pass(name: &'static str, max: u32, message: impl Into<String>) -> Check {
        Check { name, passed: true, points: max, max_points: max, message: message.into(), findings: vec![] }
    }

    /// Failed: none of `max` points, with its findings (possibly none).
    pub fn fail(name: &'static str, max: u32, message: impl Into<String>, findings: Vec<Finding>) -> Check {
        Check { name, passed: false, points: 0, max_points: max, message: message.into(), findings }
    }

    /// Passed, and worth 0 of 0: a check about a surface the plugin does
    /// not have, or one the reference reports without weighing it.
    pub fn weightless(name: &'static str, message: impl Into<String>) -> Check {
        Check { name, passed: true, points: 0, max_points: 0, message: message.into(), findings: vec![] }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Category {
    pub name: &'static str,
    pub score: u32,
    pub max: u32,
    pub checks: Vec<Check>,
}

impl Category {
    pub fn new(name: &'static str, checks: Vec<Check>) -> Category {
        let score = checks.iter().map(|c| c.points).sum();
        let max = checks.iter().map(|c| c.max_points).sum();
        debug_assert!(checks.iter().all(|c| c.points <= c.max_points), "a check earns at most its maximum");
        Category { name, score, max, checks }
    }
}

/// `round(earned / max × 100)` over `categories`, 100 when nothing
/// applies: in that order of operations and rounded half to even, as the
/// reference computes it in Python, so that the two agree on every tie.
pub fn score(categories: &[Category]) -> u32 {
    let earned: u32 = categories.iter().map(|c| c.score).sum();
    let max: u32 = categories.iter().map(|c| c.max).sum();
    if max == 0 {
        return 100;
    }
    (f64::from(earned) / f64::from(max) * 100.0).round_ties_even() as u32
}

/// The letter for a score: A from 90, B from 80, C from 70, D from 60.
pub fn grade(score: u32) -> &'static str {
    match score {
        90.. => "A",
        80..=89 => "B",
        70..=79 => "C",
        60..=69 => "D",
        _ => "F",
    }
}

/// What a grade says.
pub fn grade_label(grade: &str) -> &'static str {
    match grade {
        "A" => "Excellent",
        "B" => "Good",
        "C" => "Acceptable",
        "D" => "Needs Improvement",
        "F" => "Failing",
        _ => "Unknown",
    }
}

/// The findings counted by severity, every severity named.
pub fn severity_counts(findings: &[&Finding]) -> serde_json::Map<String, serde_json::Value> {
    let mut counts = serde_json::Map::new();
    for severity in Severity::ALL {
        let n = findings.iter().filter(|f| f.severity == severity).count();
        counts.insert(severity.as_str().into(), n.into());
    }
    counts
}

/// A whole scan, in `scan-result.v1`'s names. What the reference adds
/// that this scanner does not compute is left out rather than invented:
/// its policy profiles and verification (`policy_pass`, `verify_pass`),
/// its trust domains, and the wall-clock `timestamp` (a report is the same
/// bytes for the same files).
#[derive(Clone, Debug, Serialize)]
pub struct ScanReport {
    pub schema_version: &'static str,
    pub tool_version: String,
    pub scope: &'static str,
    pub score: u32,
    pub raw_score: u32,
    pub effective_score: u32,
    pub grade: &'static str,
    pub ecosystems: Vec<&'static str>,
    pub packages: Vec<Package>,
    pub summary: Summary,
    pub categories: Vec<Category>,
    /// Every finding, most severe first (in category order within a
    /// severity).
    pub findings: Vec<Finding>,
    #[serde(rename = "pluginDir")]
    pub plugin_dir: String,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Package {
    pub ecosystem: &'static str,
    pub package_kind: &'static str,
    pub root_path: String,
    pub manifest_path: String,
    pub name: Option<String>,
    pub version: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub grade_label: &'static str,
    pub findings: serde_json::Map<String, serde_json::Value>,
    pub integrations: Vec<Integration>,
}

/// An optional outside analyser, and what became of it here.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Integration {
    pub name: &'static str,
    pub status: &'static str,
    pub message: &'static str,
    pub findings_count: u32,
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

impl ScanReport {
    /// The report of `categories` for `package` (the plugin at its root,
    /// as the caller names it).
    pub fn new(categories: Vec<Category>, package: Package) -> ScanReport {
        let score = score(&categories);
        let grade = grade(score);
        let mut findings: Vec<Finding> =
            categories.iter().flat_map(|c| &c.checks).flat_map(|c| c.findings.iter().cloned()).collect();
        findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
        let counted: Vec<&Finding> = findings.iter().collect();
        let not_run = |name| Integration {
            name,
            status: "skipped",
            message: "Not run: almanac's scanner runs no outside analyser.",
            findings_count: 0,
            metadata: serde_json::Map::new(),
        };
        ScanReport {
            schema_version: SCHEMA_VERSION,
            tool_version: format!("almanac {}", env!("CARGO_PKG_VERSION")),
            scope: "plugin",
            score,
            raw_score: score,
            effective_score: score,
            grade,
            ecosystems: vec!["codex"],
            plugin_dir: package.root_path.clone(),
            packages: vec![package],
            summary: Summary {
                grade_label: grade_label(grade),
                findings: severity_counts(&counted),
                integrations: vec![not_run("cisco-skill-scanner"), not_run("cisco-mcp-scanner")],
            },
            categories,
            findings,
        }
    }

    /// The report as people read it: the score, each category, each
    /// finding with where it is.
    pub fn text(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{}: {} / 100, grade {} ({})",
            self.plugin_dir, self.score, self.grade, self.summary.grade_label
        );
        for category in &self.categories {
            let _ = writeln!(out, "  {:<22} {:>3} / {:<3}", category.name, category.score, category.max);
        }
        if self.findings.is_empty() {
            let _ = writeln!(out, "No findings.");
        }
        for finding in &self.findings {
            let place = match (&finding.file_path, finding.line_number) {
                (Some(path), Some(line)) => format!(" ({path}:{line})"),
                (Some(path), None) => format!(" ({path})"),
                _ => String::new(),
            };
            let _ = writeln!(out, "  {:<8} {} {}{place}", finding.severity.as_str(), finding.rule_id, finding.title);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_and_grades() {
        let check = |points, max| Check { points, max_points: max, ..Check::pass("c", max, "") };
        for (checks, expected) in [
            (vec![], 100),
            (vec![check(0, 0)], 100),
            (vec![check(68, 71)], 96),
            (vec![check(1, 8)], 12), // 12.5 rounds to even
            (vec![check(3, 8)], 38), // 37.5 rounds to even
            (vec![check(0, 5)], 0),
        ] {
            assert_eq!(score(&[Category::new("x", checks)]), expected);
        }
        for (score, grade_) in [(100, "A"), (90, "A"), (89, "B"), (80, "B"), (79, "C"), (60, "D"), (59, "F"), (0, "F")]
        {
            assert_eq!(grade(score), grade_, "{score}");
        }
        assert_eq!(grade_label("D"), "Needs Improvement");
    }
}
