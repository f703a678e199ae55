//! The broker's batch side (section A): the agent index read from its
//! sources, checked and fingerprinted, folded with the journal, stored in
//! the warehouse and rendered as the static routes. The records and rules
//! it shares with the api are `broker_model`'s, its documents, rows and
//! tables `broker_site`'s; search is `search`'s.

pub mod delta;
pub mod scan;
pub mod source;

use std::path::Path;

use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use broker_model::catalog::{Catalog, FeedbackEntry};
use broker_model::{Agent, Sources};

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentsFile {
    pub agents: Vec<Agent>,
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FeedbackFile {
    pub feedback: Vec<FeedbackEntry>,
}

/// Reads a JSON source file; a field that does not fit is named by path.
fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mut deserializer = serde_json::Deserializer::from_slice(&bytes);
    serde_path_to_error::deserialize(&mut deserializer).with_context(|| format!("{}", path.display()))
}

/// Reads and checks `agents.json` (and `demo-agents.json` when present:
/// the agents `api --demo-agents` serves), `catalog.json` and
/// `feedback.json` (absent: no feedback) under `dir`. Nothing is published when any record
/// is wrong; the error names the file, the record and the field.
pub fn load(dir: &Path) -> Result<Sources> {
    // Marked for chat as they are read: which agents can be chatted with
    // is this deployment's to say.
    let agents = source::read_all(dir)?;
    let catalog: Catalog = read_json(&dir.join("catalog.json"))?;
    let feedback_path = dir.join("feedback.json");
    let feedback = match feedback_path.exists() {
        true => read_json::<FeedbackFile>(&feedback_path)?.feedback,
        false => Vec::new(),
    };
    let sources = Sources { agents, catalog, feedback, journal_seq: 0 };
    sources.validate().with_context(|| format!("{}", dir.display()))?;
    Ok(sources)
}
