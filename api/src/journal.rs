//! The journal writer: drains the live store's outbox into the
//! generator's journal (`broker_model::journal`), so that the next
//! build includes every registration, update, deletion and feedback.
//!
//! **Exactly once.** An event is appended (and the file synced) before it
//! is deleted from the outbox. If the api dies between the two, the event
//! is in both; at the next start [`Writer::open`] reads the journal's last
//! `seq` and deletes the outbox up to it instead of appending it again. A
//! line cut short by a crash mid-write is cut off at open, before anything
//! is appended after it.
//!
//! **Files.** `api-<first seq, 20 digits>.jsonl`, so that file-name order
//! is the order of writing; a new file is begun when the current one
//! passes `rotate_bytes`.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use broker_model::journal::{self, Record};
use tokio::sync::Notify;

use crate::store::{self, outbox, Store};

/// How many events one append takes.
const BATCH: usize = 1024;

pub struct Writer {
    dir: PathBuf,
    store: Store,
    /// The last `seq` in the journal.
    journaled: i64,
    /// The file appended to, and its length.
    file: Option<(File, u64)>,
    rotate_bytes: u64,
}

impl Writer {
    /// Opens the journal under `dir` (created if missing): repairs a cut
    /// line, finds the last `seq`, and settles the outbox against it.
    pub async fn open(dir: &Path, store: Store, rotate_bytes: u64) -> Result<Writer> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let (journaled, file) = last_seq(dir)?;
        store
            .write(move |conn| {
                outbox::follow(conn, journaled)?;
                outbox::delete_through(conn, journaled)
            })
            .await
            .context("settling the outbox against the journal")?;
        Ok(Writer { dir: dir.to_path_buf(), store, journaled, file, rotate_bytes: rotate_bytes.max(1) })
    }

    /// Appends what waits in the outbox, then deletes it there; returns how
    /// many events were journaled.
    pub async fn drain(&mut self) -> Result<usize> {
        let mut total = 0;
        loop {
            let after = self.journaled;
            let events = self.store.read(move |conn| outbox::waiting(conn, after, BATCH)).await?;
            let (Some(&(first, _, _)), Some(&(last, _, _))) = (events.first(), events.last()) else {
                return Ok(total);
            };
            total += events.len();
            let mut text = String::new();
            for (seq, at, event) in events {
                let record = Record { seq: seq as u64, at: store::rfc3339(at), event };
                text.push_str(&serde_json::to_string(&record).context("a journal record")?);
                text.push('\n');
            }
            self.append(text.as_bytes(), first)?;
            shared::fault::point("journal-appended");
            self.journaled = last;
            self.store.write(move |conn| outbox::delete_through(conn, last)).await?;
        }
    }

    fn append(&mut self, bytes: &[u8], first_seq: i64) -> Result<()> {
        if self.file.as_ref().is_none_or(|(_, len)| *len >= self.rotate_bytes) {
            let path = self.dir.join(format!("api-{first_seq:020}.jsonl"));
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .with_context(|| format!("opening {}", path.display()))?;
            let len = file.metadata()?.len();
            // The new name must be in the folder for good before lines in it
            // count.
            File::open(&self.dir)
                .and_then(|d| d.sync_all())
                .with_context(|| format!("syncing {}", self.dir.display()))?;
            self.file = Some((file, len));
        }
        let (file, len) = self.file.as_mut().expect("opened above");
        file.write_all(bytes).context("appending to the journal")?;
        file.sync_data().context("syncing the journal")?;
        *len += bytes.len() as u64;
        Ok(())
    }
}

/// Runs `writer` until `stop` resolves: drains whenever `wake` is
/// notified, and every `every` in case a notification was missed. A
/// failed drain is logged and tried again.
pub async fn run(mut writer: Writer, wake: Arc<Notify>, every: Duration, stop: impl std::future::Future<Output = ()>) {
    tokio::pin!(stop);
    loop {
        if let Err(e) = writer.drain().await {
            tracing::error!(error = format!("{e:#}"), "journal: appending the outbox failed; will retry");
        }
        tokio::select! {
            _ = &mut stop => break,
            _ = wake.notified() => {}
            _ = tokio::time::sleep(every) => {}
        }
    }
    // What was committed before the stop still goes out.
    if let Err(e) = writer.drain().await {
        tracing::error!(error = format!("{e:#}"), "journal: the last drain failed; the next start retries");
    }
}

/// The journal's last `seq` (0 when empty), and the last `api-` file open
/// for appending. A last line without its newline (a write cut short) is
/// cut off first.
fn last_seq(dir: &Path) -> Result<(i64, Option<(File, u64)>)> {
    let files = journal::files(dir)?;
    let mut appendable = None;
    for (n, path) in files.iter().enumerate().rev() {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        let mut text = Vec::new();
        file.read_to_end(&mut text)?;
        let complete = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        if complete < text.len() {
            tracing::warn!(file = %path.display(), "journal: cutting off a line left unfinished");
            file.set_len(complete as u64)?;
            file.sync_data()?;
        }
        let is_ours = path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("api-"));
        if n + 1 == files.len() && is_ours {
            // Opened for appending: writes go to the end whatever was read.
            appendable = Some((file, complete as u64));
        }
        let mut lines = text[..complete].rsplit(|b| *b == b'\n').filter(|l| !l.iter().all(u8::is_ascii_whitespace));
        if let Some(line) = lines.next() {
            let record: Record =
                serde_json::from_slice(line).with_context(|| format!("{}: the last line", path.display()))?;
            return Ok((record.seq as i64, appendable));
        }
    }
    Ok((0, appendable))
}

#[cfg(test)]
mod tests {
    use broker_model::journal::{self, Event};

    use super::*;
    use crate::store::Settings;

    /// A fresh folder, removed when the test ends.
    fn temp(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new().prefix(&format!("almanac-journal-{name}-")).tempdir().unwrap()
    }

    fn search(n: u64) -> Event {
        Event::Search { query: format!("query {n}"), hits: n }
    }

    async fn push(store: &Store, events: Vec<Event>) {
        store
            .write(move |conn| {
                for event in &events {
                    outbox::push(conn, 1_700_000_000_000, event)?;
                }
                Ok(())
            })
            .await
            .unwrap();
    }

    fn journaled(dir: &Path) -> Vec<(u64, Event)> {
        journal::read(dir).unwrap().into_iter().map(|(_, r)| (r.seq, r.event)).collect()
    }

    #[tokio::test]
    async fn events_reach_the_journal_once_even_when_the_outbox_delete_was_lost() {
        let scratch = temp("once");
        let root = scratch.path();
        let (dir, path) = (root.join("journal"), root.join("store.sqlite"));
        let store = Store::open(&path, Settings::default()).unwrap();
        push(&store, vec![search(1), search(2)]).await;
        let mut writer = Writer::open(&dir, store.clone(), 1 << 20).await.unwrap();
        assert_eq!(writer.drain().await.unwrap(), 2);
        assert_eq!(journaled(&dir), [(1, search(1)), (2, search(2))]);

        // A crash after the append, before the delete: the events are in
        // both places. Put them back in the outbox as that crash leaves it.
        store
            .write(|conn| {
                conn.batch(
                    "INSERT INTO outbox (seq, at, event) VALUES
                     (1, 0, '{\"event\":\"search\",\"query\":\"query 1\",\"hits\":1}'),
                     (2, 0, '{\"event\":\"search\",\"query\":\"query 2\",\"hits\":2}')",
                )?;
                Ok(())
            })
            .await
            .unwrap();
        drop(writer);
        let mut writer = Writer::open(&dir, store.clone(), 1 << 20).await.unwrap();
        assert_eq!(writer.drain().await.unwrap(), 0);
        push(&store, vec![search(3)]).await;
        assert_eq!(writer.drain().await.unwrap(), 1);
        assert_eq!(journaled(&dir), [(1, search(1)), (2, search(2)), (3, search(3))]);
    }

    #[tokio::test]
    async fn a_cut_line_is_dropped_and_a_fresh_store_follows_the_journal() {
        let scratch = temp("cut");
        let root = scratch.path();
        let dir = root.join("journal");
        let store = Store::open(&root.join("a.sqlite"), Settings::default()).unwrap();
        push(&store, vec![search(1), search(2)]).await;
        let mut writer = Writer::open(&dir, store, 1 << 20).await.unwrap();
        writer.drain().await.unwrap();
        drop(writer);
        // A write cut short by a crash.
        let file = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
        let mut f = OpenOptions::new().append(true).open(&file).unwrap();
        f.write_all(b"{\"seq\":3,\"at\":\"2026").unwrap();
        drop(f);
        // A new store (its sequence would start at 1) continues after 2.
        let fresh = Store::open(&root.join("b.sqlite"), Settings::default()).unwrap();
        let mut writer = Writer::open(&dir, fresh.clone(), 1 << 20).await.unwrap();
        push(&fresh, vec![search(9)]).await;
        writer.drain().await.unwrap();
        assert_eq!(journaled(&dir), [(1, search(1)), (2, search(2)), (3, search(9))]);
    }

    #[tokio::test]
    async fn files_rotate_past_their_size_and_read_back_in_order() {
        let scratch = temp("rotate");
        let root = scratch.path();
        let dir = root.join("journal");
        let store = Store::open(&root.join("store.sqlite"), Settings::default()).unwrap();
        let mut writer = Writer::open(&dir, store.clone(), 10).await.unwrap();
        for n in 1..=3 {
            push(&store, vec![search(n)]).await;
            writer.drain().await.unwrap();
        }
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 3);
        assert_eq!(journaled(&dir), [(1, search(1)), (2, search(2)), (3, search(3))]);
    }
}
