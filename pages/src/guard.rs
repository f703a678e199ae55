//! Section B's pages: the facts, the campaigns with the policies that
//! answer them, the coverage matrix and the benchmark results. Made from
//! the public datasets only ([`guard_data::public`], the allow-list), so a
//! page can show nothing the JSON files do not.

use minijinja::{context, Value};

use super::{markup, routes, svg, Made, Page};
use guard_data::midnight;
use guard_data::{public::Run, Datasets, Outcome};
use guard_data::{BENCHMARK, CAMPAIGNS, COVERAGE, FACTS};
use shared::http::Cache;

/// Outcomes in the order their bars are stacked, best first, with colours
/// that keep 3:1 against white for the bars.
pub(super) const OUTCOME_COLOURS: [(Outcome, &str); 6] = [
    (Outcome::Prevented, "#1a7f37"),
    (Outcome::Prompted, "#0a56c2"),
    (Outcome::DetectionOnly, "#9a6700"),
    (Outcome::Unsupported, "#6e7781"),
    (Outcome::FalsePositive, "#8250df"),
    (Outcome::Allowed, "#b3261e"),
];

pub(super) fn pages(d: &Datasets) -> Vec<Page> {
    let page = |route: &str, template, context, json: &str, reviewed: &[&str], cache| Page {
        route: route.into(),
        file: routes::fixed_file(route),
        template,
        context,
        json: Some(json.into()),
        last_modified: reviewed.iter().map(|r| midnight(r)).max().unwrap_or_default(),
        cache,
        made: Made::Build,
    };
    vec![
        page(
            routes::GUARD,
            "guard.html",
            context! { facts => d.facts },
            FACTS,
            &[&d.facts.last_reviewed],
            Cache::Catalog,
        ),
        page(
            routes::CAMPAIGNS,
            "campaigns.html",
            campaigns(d),
            CAMPAIGNS,
            &[&d.campaigns.last_reviewed, &d.policies.last_reviewed],
            Cache::Catalog,
        ),
        page(routes::COVERAGE, "coverage.html", coverage(d), COVERAGE, &[&d.coverage.last_reviewed], Cache::Catalog),
        page(
            routes::BENCHMARK,
            "benchmark.html",
            context! { runs => d.benchmark.runs.iter().map(run).collect::<Vec<_>>() },
            BENCHMARK,
            &[&d.benchmark.last_reviewed],
            Cache::Catalog,
        ),
    ]
}

/// An id as an HTML id: letters, digits and `-` only.
fn anchor(prefix: &str, id: &str) -> String {
    let id: String = id.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    format!("{prefix}-{id}")
}

/// Campaigns, most severe first, each with its policies.
fn campaigns(d: &Datasets) -> Value {
    let mut list: Vec<_> = d.campaigns.campaigns.iter().collect();
    list.sort_by(|a, b| b.severity.cmp(&a.severity).then_with(|| a.name.cmp(&b.name)));
    let campaigns: Vec<Value> = list
        .into_iter()
        .map(|c| {
            let policies: Vec<_> = d.policies.policies.iter().filter(|p| p.campaign_id == c.id).collect();
            context! { anchor => anchor("campaign", &c.id), policies, ..Value::from_serialize(c) }
        })
        .collect();
    context! { campaigns }
}

/// The matrix: a row per risk class, a cell per harness (its assertion,
/// if any).
fn coverage(d: &Datasets) -> Value {
    let c = &d.coverage;
    let matrix: Vec<Value> = c
        .risk_classes
        .iter()
        .map(|risk| {
            let cells: Vec<Option<_>> = c
                .harnesses
                .iter()
                .map(|h| c.assertions.iter().find(|a| &a.harness == h && &a.risk_class == risk))
                .collect();
            context! { risk, cells }
        })
        .collect();
    context! { harnesses => c.harnesses, risks => c.risk_classes, count => c.count, assertions => c.assertions, matrix }
}

/// A run with its chart: per harness and comparator, the outcomes counted.
fn run(r: &Run) -> Value {
    let mut rows: Vec<(String, Vec<u64>)> = Vec::new();
    for harness in &r.harnesses {
        for comparator in &r.comparators {
            let counts = OUTCOME_COLOURS
                .iter()
                .map(|(o, _)| {
                    r.results
                        .iter()
                        .filter(|x| &x.harness == harness && &x.comparator == comparator && x.outcome == *o)
                        .count() as u64
                })
                .collect::<Vec<_>>();
            if counts.iter().any(|c| *c > 0) {
                rows.push((format!("{harness} · {comparator}"), counts));
            }
        }
    }
    let segments: Vec<svg::Segment> =
        OUTCOME_COLOURS.iter().map(|(o, colour)| svg::Segment { name: o.as_str(), colour }).collect();
    let summary: Vec<String> = rows
        .iter()
        .map(|(name, counts)| format!("{name}: {} of {} prevented", counts[0], counts.iter().sum::<u64>()))
        .collect();
    let label = format!("Outcomes of run {}. {}.", r.run_id, summary.join("; "));
    let chart = svg::stacked(&rows, &segments, 640, &label);
    context! { anchor => anchor("run", &r.run_id), chart => markup(chart), ..Value::from_serialize(r) }
}
