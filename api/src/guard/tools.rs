//! The public MCP endpoint's tools: read-only queries over the guard
//! datasets of the live build (the same bytes the JSON routes serve, parsed
//! once when the build is loaded).
//!
//! Each tool's arguments are declared once (`Arg`); the declaration gives
//! both the `inputSchema` the tool advertises and the validation a call's
//! arguments go through. Every result lists the evidence (ids and URLs) and
//! the limitations of the records it returns.

use std::collections::BTreeMap;

use crate::reply::excerpt;
use guard_data::public::Evidence;
use guard_data::Datasets;
use serde::Serialize;
use serde_json::{json, Map, Value};

/// One argument of a tool.
struct Arg {
    name: &'static str,
    description: &'static str,
    /// The values it may take; any string when empty.
    one_of: &'static [&'static str],
    required: bool,
}

const fn arg(name: &'static str, description: &'static str) -> Arg {
    Arg { name, description, one_of: &[], required: false }
}

struct Tool {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    args: &'static [Arg],
    /// The key of `structuredContent` that holds the records.
    records: &'static str,
}

/// In the order `tools/list` gives them.
const TOOLS: &[Tool] = &[
    Tool {
        name: "list_datasets",
        title: "List guard datasets",
        description: "Lists the published guard datasets with their schema versions, routes, record counts and \
                      last review dates.",
        args: &[],
        records: "datasets",
    },
    Tool {
        name: "get_product_facts",
        title: "Get product facts",
        description: "Returns the current, reviewed product facts, optionally only those of one area.",
        args: &[arg("area", "Only facts of this area (for example runtime-interception, mcp-scanning).")],
        records: "facts",
    },
    Tool {
        name: "search_campaigns",
        title: "Search threat campaigns",
        description: "Searches reviewed threat campaigns against AI coding agents and MCP tooling by text, severity \
                      and affected surface.",
        args: &[
            arg("text", "Words that must all appear in the name, summary, steps, detection or mitigation."),
            Arg { one_of: guard_data::SEVERITIES, ..arg("severity", "Only campaigns of this severity.") },
            arg("surface", "Only campaigns affecting this surface (for example mcp-server)."),
        ],
        records: "campaigns",
    },
    Tool {
        name: "get_campaign",
        title: "Get one campaign",
        description: "Returns one reviewed threat campaign with the defensive policies attached to it.",
        args: &[Arg { required: true, ..arg("id", "The campaign id (for example camp-mcp-tool-poisoning).") }],
        records: "campaigns",
    },
    Tool {
        name: "get_coverage",
        title: "Get harness coverage",
        description: "Returns coverage assertions per harness and risk class: support level, method, status and \
                      evidence.",
        args: &[
            arg("harness", "Only this harness (codex, claude_code, cursor, gemini_cli, opencode)."),
            arg("riskClass", "Only this risk class (for example secret-access)."),
        ],
        records: "assertions",
    },
    Tool {
        name: "get_policies",
        title: "Get defensive policies",
        description: "Returns defensive policy guidance attached to reviewed campaigns.",
        args: &[
            arg("campaignId", "Only policies of this campaign."),
            Arg { one_of: guard_data::ACTIONS, ..arg("action", "Only policies with this action.") },
        ],
        records: "policies",
    },
    Tool {
        name: "get_benchmark_results",
        title: "Get benchmark results",
        description: "Returns results of the AI coding agent runtime security benchmark (scenario x harness x \
                      comparator), with methodology and limitations, from the newest reviewed run unless a run is \
                      named.",
        args: &[
            arg("runId", "A run id; the newest run when absent."),
            arg("scenario", "Only this scenario (for example read_fixture_env)."),
            arg("harness", "Only this harness."),
            arg("comparator", "Only this comparator (native_default, native_strict, guard_default, guard_strict)."),
        ],
        records: "results",
    },
];

/// Why a call is refused as a protocol error (-32602).
#[derive(Debug, PartialEq, Eq)]
pub struct Refused(pub String);

/// `tools/list`'s `tools`: the same for every request, so built once.
pub fn list() -> &'static [Value] {
    static LIST: std::sync::LazyLock<Vec<Value>> = std::sync::LazyLock::new(describe);
    &LIST
}

fn describe() -> Vec<Value> {
    TOOLS
        .iter()
        .map(|t| {
            let properties: Map<String, Value> = t
                .args
                .iter()
                .map(|a| {
                    let mut schema = json!({"type": "string", "description": a.description});
                    if !a.one_of.is_empty() {
                        schema["enum"] = json!(a.one_of);
                    }
                    (a.name.to_string(), schema)
                })
                .collect();
            let required: Vec<&str> = t.args.iter().filter(|a| a.required).map(|a| a.name).collect();
            json!({
                "name": t.name,
                "title": t.title,
                "description": t.description,
                "inputSchema": {
                    "type": "object",
                    "properties": properties,
                    "required": required,
                    "additionalProperties": false,
                },
                "outputSchema": output_schema(t.records),
                "annotations": {"title": t.title, "readOnlyHint": true, "idempotentHint": true, "openWorldHint": false},
            })
        })
        .collect()
}

fn output_schema(records: &str) -> Value {
    json!({
        "type": "object",
        "properties": {
            records: {"type": "array", "items": {"type": "object"}},
            "count": {"type": "integer", "minimum": 0},
            "evidence": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"id": {"type": "string"}, "url": {"type": "string"}},
                    "required": ["id", "url"],
                },
            },
            "limitations": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"record": {"type": "string"}, "limitation": {"type": "string"}},
                    "required": ["record", "limitation"],
                },
            },
        },
        "required": [records, "count", "evidence", "limitations"],
    })
}

/// What a call returns: its `structuredContent`, or, when the request was
/// valid but names nothing, a message for a tool error (`isError: true`).
pub type Outcome = Result<Value, String>;

/// Runs tool `name` with `arguments` over the datasets.
pub fn call(data: &Datasets, name: &str, arguments: Option<&Value>) -> Result<Outcome, Refused> {
    let tool =
        TOOLS.iter().find(|t| t.name == name).ok_or_else(|| Refused(format!("unknown tool {:?}", excerpt(name))))?;
    let args = arguments_of(tool, arguments)?;
    let get = |key: &str| args.get(key).map(String::as_str);
    let mut out = Collected::default();
    match tool.name {
        "list_datasets" => {
            let entry = |route: &str, version: &str, last: &str, count: usize| json!({"route": route, "schemaVersion": version, "lastReviewed": last, "count": count});
            let d = data;
            out.records = vec![
                entry(guard_data::FACTS, &d.facts.schema_version, &d.facts.last_reviewed, d.facts.count),
                entry(
                    guard_data::CAMPAIGNS,
                    &d.campaigns.schema_version,
                    &d.campaigns.last_reviewed,
                    d.campaigns.count,
                ),
                entry(guard_data::COVERAGE, &d.coverage.schema_version, &d.coverage.last_reviewed, d.coverage.count),
                entry(guard_data::POLICIES, &d.policies.schema_version, &d.policies.last_reviewed, d.policies.count),
                entry(
                    guard_data::BENCHMARK,
                    &d.benchmark.schema_version,
                    &d.benchmark.last_reviewed,
                    d.benchmark.runs.len(),
                ),
            ];
        }
        "get_product_facts" => {
            for fact in data.facts.facts.iter().filter(|f| get("area").is_none_or(|a| f.area == a)) {
                out.add(fact, &fact.id, &fact.evidence, &fact.limitations);
            }
        }
        "search_campaigns" => {
            let words: Vec<String> =
                get("text").map(|t| t.split_whitespace().map(str::to_lowercase).collect()).unwrap_or_default();
            for c in &data.campaigns.campaigns {
                let haystack = [&c.name, &c.summary]
                    .into_iter()
                    .chain(c.attack_steps.iter().chain(&c.detection).chain(&c.mitigation).chain(&c.surfaces))
                    .map(|s| s.to_lowercase())
                    .collect::<Vec<_>>()
                    .join("\n");
                let matches = words.iter().all(|w| haystack.contains(w.as_str()))
                    && get("severity").is_none_or(|s| c.severity.as_str() == s)
                    && get("surface").is_none_or(|s| c.surfaces.iter().any(|x| x == s));
                if matches {
                    out.add(c, &c.id, &c.evidence, &c.limitations);
                }
            }
        }
        "get_campaign" => {
            let id = get("id").expect("required");
            let Some(c) = data.campaigns.campaigns.iter().find(|c| c.id == id) else {
                return Ok(Err(format!("no published campaign {id:?}")));
            };
            out.add(c, &c.id, &c.evidence, &c.limitations);
            let policies: Vec<_> = data.policies.policies.iter().filter(|p| p.campaign_id == c.id).collect();
            for p in &policies {
                out.cite(&p.id, &p.evidence, &p.limitations);
            }
            out.extra.insert("policies".into(), serde_json::to_value(&policies).expect("policies serialise"));
        }
        "get_coverage" => {
            for a in data.coverage.assertions.iter().filter(|a| {
                get("harness").is_none_or(|h| a.harness == h) && get("riskClass").is_none_or(|r| a.risk_class == r)
            }) {
                out.add(a, &a.id, &a.evidence, &a.limitations);
            }
        }
        "get_policies" => {
            for p in data.policies.policies.iter().filter(|p| {
                get("campaignId").is_none_or(|c| p.campaign_id == c)
                    && get("action").is_none_or(|a| p.action.as_str() == a)
            }) {
                out.add(p, &p.id, &p.evidence, &p.limitations);
            }
        }
        "get_benchmark_results" => {
            let run = match get("runId") {
                Some(id) => data.benchmark.runs.iter().find(|r| r.run_id == id),
                None => data.benchmark.runs.first(),
            };
            let Some(run) = run else {
                return Ok(Err(match get("runId") {
                    Some(id) => format!("no published run {id:?}"),
                    None => "no benchmark run is published".to_string(),
                }));
            };
            for r in run.results.iter().filter(|r| {
                get("scenario").is_none_or(|s| r.scenario == s)
                    && get("harness").is_none_or(|h| r.harness == h)
                    && get("comparator").is_none_or(|c| r.comparator == c)
            }) {
                out.records.push(serde_json::to_value(r).expect("results serialise"));
            }
            out.cite(&run.run_id, &run.evidence, &run.limitations);
            out.extra.insert(
                "run".into(),
                json!({
                    "runId": run.run_id, "runAt": run.run_at, "benchmarkVersion": run.benchmark_version,
                    "sampleSize": run.sample_size, "methodology": run.methodology,
                }),
            );
        }
        other => unreachable!("tool {other} has no implementation"),
    }
    Ok(Ok(out.finish(tool.records)))
}

/// Checks `arguments` against the tool's declaration.
fn arguments_of(tool: &Tool, arguments: Option<&Value>) -> Result<BTreeMap<String, String>, Refused> {
    let empty = Map::new();
    let given = match arguments {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(map)) => map,
        Some(_) => return Err(Refused("arguments must be an object".into())),
    };
    let mut out = BTreeMap::new();
    for (key, value) in given {
        let Some(arg) = tool.args.iter().find(|a| a.name == key) else {
            return Err(Refused(format!("{} takes no argument {:?}", tool.name, excerpt(key))));
        };
        let Some(text) = value.as_str() else {
            return Err(Refused(format!("argument {key:?} must be a string")));
        };
        if !arg.one_of.is_empty() && !arg.one_of.contains(&text) {
            return Err(Refused(format!("argument {key:?} must be one of {}", arg.one_of.join(", "))));
        }
        out.insert(key.clone(), text.to_string());
    }
    if let Some(missing) = tool.args.iter().find(|a| a.required && !out.contains_key(a.name)) {
        return Err(Refused(format!("{} needs the argument {:?}", tool.name, missing.name)));
    }
    Ok(out)
}

/// Records of a result, with the evidence and limitations behind them.
#[derive(Default)]
struct Collected {
    records: Vec<Value>,
    /// By evidence id: first URL seen.
    evidence: BTreeMap<String, String>,
    limitations: Vec<(String, String)>,
    extra: Map<String, Value>,
}

impl Collected {
    fn add(&mut self, record: &impl Serialize, id: &str, evidence: &[Evidence], limitations: &[String]) {
        self.records.push(serde_json::to_value(record).expect("records serialise"));
        self.cite(id, evidence, limitations);
    }

    fn cite(&mut self, id: &str, evidence: &[Evidence], limitations: &[String]) {
        for e in evidence {
            self.evidence.entry(e.id.clone()).or_insert_with(|| e.url.clone());
        }
        self.limitations.extend(limitations.iter().map(|l| (id.to_string(), l.clone())));
    }

    fn finish(self, key: &str) -> Value {
        let mut out = Map::new();
        out.insert("count".into(), json!(self.records.len()));
        out.insert(key.into(), Value::Array(self.records));
        out.extend(self.extra);
        out.insert(
            "evidence".into(),
            self.evidence.into_iter().map(|(id, url)| json!({"id": id, "url": url})).collect(),
        );
        out.insert(
            "limitations".into(),
            self.limitations.into_iter().map(|(record, l)| json!({"record": record, "limitation": l})).collect(),
        );
        Value::Object(out)
    }
}
