//! Mirror-node pages captured to disk, so a build needs no network.
//!
//! Layout: `<dir>/<topic id>/<first>-<last>.json`, each file one mirror page
//! holding sequence numbers `first..=last` (zero-padded to 12 digits, so
//! names sort in sequence order). The names let a run skip every file at or
//! below its cursor without reading it.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::parse_page;
use hcs20::Message;
use shared::entity::EntityId;

pub fn page_file_name(first: u64, last: u64) -> String {
    format!("{first:012}-{last:012}.json")
}

fn page_range(path: &Path) -> Option<(u64, u64)> {
    let stem = path.file_stem()?.to_str()?;
    let (first, last) = stem.split_once('-')?;
    Some((first.parse().ok()?, last.parse().ok()?))
}

/// Topics that have a folder of captured pages.
pub fn topics(dir: &Path) -> Result<Vec<EntityId>> {
    let mut topics = Vec::new();
    if !dir.exists() {
        return Ok(topics);
    }
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        if let Some(id) = entry.file_name().to_str().and_then(|n| n.parse().ok()) {
            topics.push(id);
        }
    }
    topics.sort();
    Ok(topics)
}

/// Messages of `topic` with a sequence number above `after`, in sequence
/// order. Pages are parsed on every core: reading is the cost of a build.
pub fn read_topic(dir: &Path, topic: EntityId, after: u64) -> Result<Vec<Message>> {
    let topic_dir = dir.join(topic.to_string());
    if !topic_dir.exists() {
        return Ok(Vec::new());
    }
    let mut files: Vec<PathBuf> = Vec::new();
    for entry in fs::read_dir(&topic_dir).with_context(|| format!("reading {}", topic_dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "json") {
            match page_range(&path) {
                Some((_, last)) if last <= after => {}
                _ => files.push(path),
            }
        }
    }
    files.sort();
    let parsed: Vec<Result<Vec<Message>>> = {
        use rayon::prelude::*;
        files
            .par_iter()
            .map(|path| -> Result<Vec<Message>> {
                let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
                let page = parse_page(&bytes, topic).with_context(|| path.display().to_string())?;
                Ok(page.messages.into_iter().filter(|m| m.sequence > after).collect())
            })
            .collect()
    };
    let parts = parsed.into_iter().collect::<Result<Vec<_>>>()?;
    let mut messages = Vec::with_capacity(parts.iter().map(Vec::len).sum());
    for part in parts {
        messages.extend(part);
    }
    messages.sort_unstable_by_key(|m| m.sequence);
    messages.dedup_by_key(|m| m.sequence);
    Ok(messages)
}
