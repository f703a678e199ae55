//! The agent index read as a stream, so that no run holds every agent at
//! once: `agents.jsonl` (one agent per line, the form for large indexes:
//! its lines are parsed in parallel) or `agents.json` (one document,
//! `{"agents": [...]}`, read element by element), then `demo-agents.json`
//! when present (the agents `api --demo-agents` serves). Agents come in
//! batches of a bounded size, in file order, marked for chat
//! ([`broker_model::chat::mark`]) and with availability as the broker tells it
//! ([`broker_model::availability::settle`]: unknown until the api has checked).
//!
//! A record that does not fit names its file and where in it: the line of
//! `agents.jsonl`, or the path (`agents[41].trustScore`) in a document.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use serde::de::{DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};

use broker_model::Agent;

/// Agents per batch unless a caller asks otherwise: enough to keep the
/// cores busy, few enough that a batch and what is rendered from it stay
/// small.
pub const BATCH: usize = 4096;

/// The agent files of a broker folder, in the order they are read.
pub fn files(dir: &Path) -> Result<Vec<PathBuf>> {
    let (lines, document) = (dir.join("agents.jsonl"), dir.join("agents.json"));
    let mut files = match (lines.exists(), document.exists()) {
        (true, true) => bail!("{}: both agents.jsonl and agents.json; keep one", dir.display()),
        (true, false) => vec![lines],
        // A missing agents.json is named by the read that fails.
        (false, _) => vec![document],
    };
    let demo = dir.join("demo-agents.json");
    if demo.exists() {
        files.push(demo);
    }
    Ok(files)
}

/// Whether a broker folder has an agent index.
pub fn present(dir: &Path) -> bool {
    dir.join("agents.jsonl").exists() || dir.join("agents.json").exists()
}

/// Reads every agent under `dir`, handing them to `each` in batches of at
/// most `batch`, in order.
pub fn read(dir: &Path, batch: usize, mut each: impl FnMut(Vec<Agent>) -> Result<()>) -> Result<()> {
    let batch = batch.max(1);
    for file in files(dir)? {
        let marked = |mut agents: Vec<Agent>| {
            broker_model::chat::mark(&mut agents);
            agents.iter_mut().for_each(|agent| broker_model::availability::settle(agent, None));
            each(agents)
        };
        match file.extension().is_some_and(|e| e == "jsonl") {
            true => read_lines(&file, batch, marked),
            false => read_document(&file, batch, marked),
        }
        .with_context(|| format!("{}", file.display()))?;
    }
    Ok(())
}

/// Every agent under `dir`, in one vector (small indexes and tests).
pub fn read_all(dir: &Path) -> Result<Vec<Agent>> {
    let mut agents = Vec::new();
    read(dir, BATCH, |batch| {
        agents.extend(batch);
        Ok(())
    })?;
    Ok(agents)
}

/// `agents.jsonl`: lines gathered into a batch, then parsed over the cores.
fn read_lines(path: &Path, batch: usize, mut each: impl FnMut(Vec<Agent>) -> Result<()>) -> Result<()> {
    let file = File::open(path).context("opening")?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut lines: Vec<(usize, Vec<u8>)> = Vec::with_capacity(batch);
    let mut number = 0;
    let parse = |lines: &[(usize, Vec<u8>)]| -> Result<Vec<Agent>> {
        lines
            .par_iter()
            .map(|(n, line)| {
                let mut de = serde_json::Deserializer::from_slice(line);
                serde_path_to_error::deserialize(&mut de).with_context(|| format!("line {n}"))
            })
            .collect()
    };
    loop {
        let mut line = Vec::new();
        let read = reader.read_until(b'\n', &mut line).context("reading")?;
        if read == 0 {
            break;
        }
        number += 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        lines.push((number, line));
        if lines.len() == batch {
            each(parse(&lines)?)?;
            lines.clear();
        }
    }
    if !lines.is_empty() {
        each(parse(&lines)?)?;
    }
    Ok(())
}

/// `{"agents": [...]}`, read element by element: the document is never
/// whole in memory.
fn read_document(path: &Path, batch: usize, each: impl FnMut(Vec<Agent>) -> Result<()>) -> Result<()> {
    let file = File::open(path).context("opening")?;
    let mut de = serde_json::Deserializer::from_reader(BufReader::with_capacity(1 << 20, file));
    let mut sink = Sink { batch, pending: Vec::with_capacity(batch), each, failed: None };
    let mut track = serde_path_to_error::Track::new();
    let outcome = Document(&mut sink).deserialize(serde_path_to_error::Deserializer::new(&mut de, &mut track));
    if let Some(error) = sink.failed.take() {
        return Err(error);
    }
    match outcome {
        Ok(()) => de.end().context("after the document")?,
        Err(error) => bail!("{}: {error}", track.path()),
    }
    sink.flush()
}

/// Where a document's agents go: gathered into batches for `each`. An
/// error of `each` is kept here (serde's errors carry only text) and
/// returned as it was.
struct Sink<F> {
    batch: usize,
    pending: Vec<Agent>,
    each: F,
    failed: Option<anyhow::Error>,
}

impl<F: FnMut(Vec<Agent>) -> Result<()>> Sink<F> {
    fn push(&mut self, agent: Agent) -> Result<()> {
        self.pending.push(agent);
        match self.pending.len() >= self.batch {
            true => self.flush(),
            false => Ok(()),
        }
    }

    fn flush(&mut self) -> Result<()> {
        match self.pending.is_empty() {
            true => Ok(()),
            false => (self.each)(std::mem::replace(&mut self.pending, Vec::with_capacity(self.batch))),
        }
    }
}

/// The document: an object whose one field is `agents`.
struct Document<'s, F>(&'s mut Sink<F>);

impl<'de, F: FnMut(Vec<Agent>) -> Result<()>> DeserializeSeed<'de> for Document<'_, F> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_map(self)
    }
}

impl<'de, F: FnMut(Vec<Agent>) -> Result<()>> Visitor<'de> for Document<'_, F> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object with an `agents` array")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = false;
        while let Some(key) = map.next_key::<String>()? {
            if key != "agents" {
                return Err(A::Error::unknown_field(&key, &["agents"]));
            }
            if seen {
                return Err(A::Error::duplicate_field("agents"));
            }
            seen = true;
            map.next_value_seed(List(&mut *self.0))?;
        }
        match seen {
            true => Ok(()),
            false => Err(A::Error::missing_field("agents")),
        }
    }
}

/// The `agents` array, each element to the sink as it is read.
struct List<'s, F>(&'s mut Sink<F>);

impl<'de, F: FnMut(Vec<Agent>) -> Result<()>> DeserializeSeed<'de> for List<'_, F> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_seq(self)
    }
}

impl<'de, F: FnMut(Vec<Agent>) -> Result<()>> Visitor<'de> for List<'_, F> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of agents")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(agent) = seq.next_element::<Agent>()? {
            if let Err(error) = self.0.push(agent) {
                self.0.failed = Some(error);
                return Err(A::Error::custom("stopped"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::AgentsFile;
    use broker_model::generate;

    fn folder(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("almanac-source-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Both forms give the same agents in the same order, in batches of
    /// the size asked, whatever the batch size.
    #[test]
    fn lines_and_document_read_alike_in_bounded_batches() {
        let mut agents = generate::agents(50, 4);
        broker_model::chat::mark(&mut agents);
        agents.iter_mut().for_each(|agent| broker_model::availability::settle(agent, None));
        let (doc, lines) = (folder("doc"), folder("lines"));
        std::fs::write(
            doc.join("agents.json"),
            serde_json::to_vec_pretty(&AgentsFile { agents: agents.clone() }).unwrap(),
        )
        .unwrap();
        let text: String = agents.iter().map(|a| serde_json::to_string(a).unwrap() + "\n\n").collect();
        std::fs::write(lines.join("agents.jsonl"), text).unwrap();
        for dir in [&doc, &lines] {
            for batch in [1, 7, 50, 64] {
                let mut sizes = Vec::new();
                let mut got = Vec::new();
                read(dir, batch, |b| {
                    sizes.push(b.len());
                    got.extend(b);
                    Ok(())
                })
                .unwrap();
                assert_eq!(got, agents, "{} batch {batch}", dir.display());
                assert!(sizes.iter().all(|s| *s <= batch && *s > 0), "{sizes:?}");
            }
        }
        std::fs::write(lines.join("agents.json"), "{}").unwrap();
        assert!(format!("{:#}", read_all(&lines).unwrap_err()).contains("keep one"));
        for dir in [doc, lines] {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    /// A record that does not fit names the file and where in it; an
    /// error of the consumer is returned as it was.
    #[test]
    fn a_bad_record_is_named_by_line_or_path() {
        let agents = generate::agents(3, 4);
        let mut bad = serde_json::to_value(&agents[2]).unwrap();
        bad["trustScore"] = "high".into();
        let dir = folder("bad");
        let check = |name: &str, text: String, expected: &[&str]| {
            for other in ["agents.json", "agents.jsonl"] {
                let _ = std::fs::remove_file(dir.join(other));
            }
            std::fs::write(dir.join(name), text).unwrap();
            let error = format!("{:#}", read_all(&dir).unwrap_err());
            for fragment in expected {
                assert!(error.contains(fragment), "{error} lacks {fragment}");
            }
        };
        let line = |v: &serde_json::Value| v.to_string() + "\n";
        let good: Vec<serde_json::Value> = agents[..2].iter().map(|a| serde_json::to_value(a).unwrap()).collect();
        check("agents.jsonl", good.iter().chain([&bad]).map(line).collect(), &["agents.jsonl", "line 3", "trustScore"]);
        check("agents.jsonl", line(&good[0]) + "{\n", &["line 2"]);
        let doc = serde_json::json!({"agents": [good[0], good[1], bad]});
        check("agents.json", doc.to_string(), &["agents.json", "agents[2].trustScore"]);
        check("agents.json", serde_json::json!({"agents": [], "extra": 1}).to_string(), &["unknown field `extra`"]);
        check("agents.json", "{}".into(), &["missing field `agents`"]);
        check("agents.json", serde_json::json!({"agents": good}).to_string() + " x", &["after the document"]);
        std::fs::write(dir.join("agents.json"), serde_json::json!({"agents": good}).to_string()).unwrap();
        let mut calls = 0;
        let error = read(&dir, 1, |_| {
            calls += 1;
            anyhow::ensure!(calls < 2, "the consumer stops");
            Ok(())
        })
        .unwrap_err();
        assert!(format!("{error:#}").contains("the consumer stops"), "{error:#}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
