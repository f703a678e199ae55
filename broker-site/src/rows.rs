//! What a build keeps of the agents besides their files: one small
//! [`Row`] per agent for the directory, the [`Facts`] the pages say of them
//! all, and the [`Digest`] of the sources they came from. The generator
//! makes them as it scans; the snapshot keeps them (`store`), so that a
//! layer or the api says the same without reading an agent.

use std::collections::HashMap;
use std::sync::Arc;

use rayon::prelude::*;

use crate::render::Tally;
use broker_model::catalog::Catalog;
use broker_model::Agent;
use shared::timestamp::Timestamp;

/// What the pages say of the agents besides each agent's own page, kept
/// in the snapshot (`broker_meta`): a run that keeps the live build's
/// broker files (a layer, `build`) says the same without reading an agent.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Facts {
    pub agents: usize,
    pub registries: usize,
    /// The newest agent update, else the catalog's.
    pub updated: String,
    pub catalog_updated: String,
    pub journal_seq: u64,
    /// The newest Last-Modified of the agents' pages (nanoseconds).
    pub profiles_newest: u64,
}

impl Facts {
    /// What the pages say of the agents `tally` counts, with their
    /// `catalog`, journal point and the newest time of their pages.
    pub fn of(tally: &Tally, catalog: &Catalog, journal_seq: u64, profiles_newest: Timestamp) -> Facts {
        Facts {
            agents: tally.total,
            registries: tally.registries.len(),
            updated: tally.last_update().unwrap_or(&catalog.updated_at).to_string(),
            catalog_updated: catalog.updated_at.clone(),
            journal_seq,
            profiles_newest: profiles_newest.0,
        }
    }
}

/// The broker's sources by their bytes, with the generator's version:
/// `sources` of the files a scan reads from the broker folder (agents,
/// catalog, feedback), `whole` of those and of every journal file. Equal
/// digests, equal sources: a run compares them with the live build's to
/// know, without parsing an agent, whether the broker's files would come
/// out the same (`whole`), or whether only the journal grew (`sources`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Digest {
    pub sources: String,
    pub whole: String,
}

impl Digest {
    /// The digest of sources whose agents' vectors `model` gives (none:
    /// no vectors): recorded with a whole build's agents.
    pub fn with_model(&self, model: Option<&str>) -> Digest {
        let with = |digest: &str| match model {
            Some(model) => format!("{digest} {model}"),
            None => digest.to_string(),
        };
        Digest { sources: with(&self.sources), whole: with(&self.whole) }
    }
}

/// An agent as the directory lists it: one per agent, so kept small (the
/// registry and the protocol list shared among the rows that have them).
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub name: Box<str>,
    pub uaid: Box<str>,
    pub registry: Arc<str>,
    pub protocols: Arc<[String]>,
    pub trust_score: f64,
    pub available: bool,
    pub updated: Timestamp,
}

impl Row {
    /// The directory's order: by name without regard to case (each
    /// character lower-cased as it is compared, nothing allocated), then
    /// UAID.
    pub fn order(a: &Row, b: &Row) -> std::cmp::Ordering {
        a.name
            .chars()
            .flat_map(char::to_lowercase)
            .cmp(b.name.chars().flat_map(char::to_lowercase))
            .then_with(|| a.uaid.cmp(&b.uaid))
    }

    /// Sorts rows into the directory's order, over the cores: each name
    /// lower-cased once (as [`Row::order`] compares them: UTF-8's byte
    /// order is its characters' order), the keys sorted, then the rows
    /// moved into place along the permutation's cycles (no second copy of
    /// the rows).
    pub fn sort(rows: &mut [Row]) {
        let mut keys: Vec<(String, u32)> = rows
            .par_iter()
            .enumerate()
            .map(|(i, r)| (r.name.chars().flat_map(char::to_lowercase).collect(), i as u32))
            .collect();
        let uaid = |i: u32| &rows[i as usize].uaid;
        keys.par_sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| uaid(a.1).cmp(uaid(b.1))));
        let order: Vec<usize> = keys.into_iter().map(|(_, i)| i as usize).collect();
        // Position k takes the row at order[k].
        let mut done = vec![false; rows.len()];
        for start in 0..rows.len() {
            let mut k = start;
            while !done[k] {
                done[k] = true;
                let from = order[k];
                if from == start {
                    break;
                }
                rows.swap(k, from);
                k = from;
            }
        }
        debug_assert!(rows.windows(2).all(|w| Row::order(&w[0], &w[1]).is_lt()));
    }
}

/// What a [`Row`] is made of, borrowed from an agent or a stored row.
pub struct RowParts<'a> {
    pub name: &'a str,
    pub uaid: &'a str,
    pub registry: &'a str,
    pub protocols: &'a [String],
    pub trust_score: f64,
    pub available: bool,
    pub updated_at: &'a str,
}

/// The rows' shared values: each registry and protocol list once.
#[derive(Default)]
pub struct Shared {
    registries: HashMap<String, Arc<str>>,
    protocols: HashMap<Vec<String>, Arc<[String]>>,
}

impl Shared {
    pub fn row(&mut self, agent: &Agent) -> Row {
        self.row_of(RowParts {
            name: &agent.name,
            uaid: &agent.uaid,
            registry: &agent.registry,
            protocols: &agent.protocols,
            trust_score: agent.trust_score,
            available: agent.available,
            updated_at: &agent.updated_at,
        })
    }

    pub fn row_of(&mut self, parts: RowParts) -> Row {
        let registry = match self.registries.get(parts.registry) {
            Some(r) => r.clone(),
            None => self.registries.entry(parts.registry.to_string()).or_insert_with(|| parts.registry.into()).clone(),
        };
        let protocols = match self.protocols.get(parts.protocols) {
            Some(p) => p.clone(),
            None => self.protocols.entry(parts.protocols.to_vec()).or_insert_with(|| parts.protocols.into()).clone(),
        };
        Row {
            name: parts.name.into(),
            uaid: parts.uaid.into(),
            registry,
            protocols,
            trust_score: parts.trust_score,
            available: parts.available,
            updated: crate::render::time(parts.updated_at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sorting by lower-cased keys gives the order [`Row::order`] defines:
    /// case, letters beyond ASCII that lower-case to several, a name that
    /// is another's beginning, equal names told apart by UAID.
    #[test]
    fn rows_sort_into_the_directorys_order() {
        let names = [
            "beta",
            "Alpha",
            "alpha",
            "ALPHA2",
            "İstanbul",
            "istanbul",
            "Zed",
            "",
            "ß",
            "SS",
            "Éclair",
            "eclair",
            "alp",
        ];
        let mut shared = Shared::default();
        let mut rows: Vec<Row> = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let uaid = format!("uaid:{}", (i * 7) % names.len());
                let parts = RowParts {
                    name,
                    uaid: &uaid,
                    registry: "r",
                    protocols: &[],
                    trust_score: 0.0,
                    available: true,
                    updated_at: "2026-01-01T00:00:00Z",
                };
                shared.row_of(parts)
            })
            .collect();
        let mut expected = rows.clone();
        expected.sort_by(Row::order);
        for _ in 0..3 {
            Row::sort(&mut rows);
            assert_eq!(rows, expected);
            rows.reverse();
        }
    }
}
