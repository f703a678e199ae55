//! The inscription worker: each open job taken through its steps, a few
//! jobs at a time, resumed after a restart from what the store holds.
//!
//! Steps, each stored before it is taken ([`crate::store::inscriptions::Step`]):
//! the topic created (memo, submit key, no admin key) and seen on the
//! mirror node; each message sent and seen, in order; then every message
//! read back from the mirror node and the file decoded and compared with
//! the content ([`super::hcs1::decode`]). Only then is the job
//! `completed`. A transaction the network refuses fails the job and
//! refunds it; one no node takes, or the mirror node does not show yet, is
//! tried again (under the same transaction id while its window lasts, so
//! nothing is written twice).

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shared::entity::EntityId;
use tokio::task::JoinSet;

use super::hcs1;
use super::ledger::{Ledger, Reached, Refused};
use crate::app::App;
use crate::broker::hapi::TxId;
use crate::store::inscriptions::{self as stored, Job, Step};
use crate::store::now_ms;

/// Why a job stopped before it ended.
pub(crate) enum Stop {
    /// Try again at the next pass (a node or the mirror node unavailable).
    Later(String),
    /// The job failed: refund it.
    Failed(String),
}

impl From<crate::store::Failure> for Stop {
    fn from(e: crate::store::Failure) -> Stop {
        Stop::Later(e.to_string())
    }
}

/// Runs jobs until `shutdown` resolves: every open job at the start, then
/// each new one as it is created (`wake`), and those that stopped for a
/// while every `retry_every`.
pub async fn run(app: Arc<App>, shutdown: impl Future<Output = ()>) {
    let Some(inscriptions) = app.inscriptions.as_ref() else { return };
    let running: Arc<Mutex<HashSet<String>>> = Arc::default();
    let passes = async {
        let mut tasks = JoinSet::new();
        loop {
            let open = match app.store.read(stored::open_jobs).await {
                Ok(open) => open,
                Err(e) => {
                    tracing::error!(error = %e, "inscriptions: open jobs cannot be read");
                    Vec::new()
                }
            };
            for job in open {
                if tasks.len() >= inscriptions.concurrency {
                    break;
                }
                if !running.lock().expect("running jobs").insert(job.id.clone()) {
                    continue;
                }
                let (app, running) = (app.clone(), running.clone());
                tasks.spawn(async move {
                    let id = job.id.clone();
                    if drive(&app, job).await == Ended::No {
                        // Given time before it is tried again.
                        let every = app.inscriptions.as_ref().map_or(Duration::ZERO, |s| s.retry_every);
                        tokio::time::sleep(every).await;
                    }
                    running.lock().expect("running jobs").remove(&id);
                });
            }
            tokio::select! {
                () = inscriptions.wake.notified() => {}
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
                () = tokio::time::sleep(inscriptions.retry_every) => {}
            }
        }
    };
    tokio::select! {
        () = shutdown => {}
        () = passes => {}
    }
}

/// Whether a job ended (completed or failed).
#[derive(PartialEq, Eq)]
pub(crate) enum Ended {
    Yes,
    No,
}

/// Takes `job` as far as it goes now.
async fn drive(app: &App, job: Job) -> Ended {
    let ledger = &app.inscriptions.as_ref().expect("inscriptions configured").ledger;
    let id = job.id.clone();
    match write(app, ledger, job).await {
        Ok(_) => tracing::info!(job = id, "inscriptions: a job completed"),
        Err(Stop::Later(why)) => {
            tracing::warn!(job = id, why, "inscriptions: a job waits");
            return Ended::No;
        }
        Err(Stop::Failed(why)) => {
            tracing::warn!(job = id, why, "inscriptions: a job failed; refunded");
            let at = now_ms();
            let key = id.clone();
            if let Err(e) = app.store.write(move |conn| stored::fail(conn, &key, &why, at)).await {
                tracing::error!(job = id, error = %e, "inscriptions: a failed job cannot be stored");
                return Ended::No;
            }
        }
    }
    Ended::Yes
}

async fn record(app: &App, id: &str, step: Step) -> Result<(), Stop> {
    let (key, at) = (id.to_string(), now_ms());
    Ok(app.store.write(move |conn| stored::step(conn, &key, &step, at)).await?)
}

/// Writes `job`'s content as an HCS-1 file, from the step it stopped at,
/// and records it `completed` once it reads back: the file's topic (a
/// part of a skill publish job is written by its publish job, through
/// here).
pub(crate) async fn write(app: &App, ledger: &Ledger, mut job: Job) -> Result<EntityId, Stop> {
    let settings = app.inscriptions.as_ref().expect("inscriptions configured");
    let key = job.id.clone();
    let content = app.store.read(move |conn| stored::content(conn, &key)).await?.unwrap_or_default();
    let file = hcs1::encode(&content, &job.mime).map_err(|e| Stop::Failed(format!("compressing: {e}")))?;
    if file.messages.len() as i64 != job.messages || file.hash != job.content_hash {
        return Err(Stop::Failed("the stored content is not the content quoted".into()));
    }
    let topic = match job.topic_id.as_deref().and_then(|t| t.parse::<EntityId>().ok()) {
        Some(topic) => topic,
        None => {
            let topic_tx = job.topic_tx.as_deref().and_then(TxId::parse_sdk);
            let topic = Sent::Topic { memo: &file.memo };
            let stored_as = |tx| record(app, &job.id, Step::CreatingTopic { tx });
            let (tx, reached) = transact(app, ledger, topic_tx, stored_as, topic).await?;
            let topic = reached.entity.ok_or_else(|| Stop::Failed(format!("{} created no topic", tx.sdk())))?;
            record(app, &job.id, Step::TopicCreated { topic: topic.to_string() }).await?;
            job.topic_tx = Some(tx.sdk());
            topic
        }
    };
    while job.written < job.messages {
        let message = &file.messages[job.written as usize];
        let pending = job.pending_tx.take().as_deref().and_then(TxId::parse_sdk);
        let sent = Sent::Message { topic, message, memo: "" };
        let stored_as = |tx| record(app, &job.id, Step::SendingMessage { tx });
        transact(app, ledger, pending, stored_as, sent).await?;
        record(app, &job.id, Step::MessageWritten).await?;
        job.written += 1;
    }
    let held = ledger.messages(topic, file.messages.len()).await.map_err(Stop::Later)?;
    if held.len() < file.messages.len() {
        return Err(Stop::Later(format!("the mirror node shows {} of {} messages", held.len(), file.messages.len())));
    }
    let (read, _) = hcs1::decode(&file.memo, &held, settings.max_bytes)
        .map_err(|e| Stop::Failed(format!("the topic does not read back: {e}")))?;
    if read != content {
        return Err(Stop::Failed("the topic reads back as other content".into()));
    }
    record(app, &job.id, Step::Completed).await?;
    Ok(topic)
}

/// What a transaction does.
#[derive(Clone, Copy)]
pub(crate) enum Sent<'a> {
    /// A topic with this memo, the broker's submit key and no admin key.
    Topic { memo: &'a str },
    /// A message, and the transaction's memo.
    Message { topic: EntityId, message: &'a [u8], memo: &'a str },
}

impl Sent<'_> {
    /// The mirror node's name of the transaction's kind.
    fn kind(self) -> &'static str {
        match self {
            Sent::Topic { .. } => "CONSENSUSCREATETOPIC",
            Sent::Message { .. } => "CONSENSUSSUBMITMESSAGE",
        }
    }

    async fn send(self, ledger: &Ledger, id: &TxId) -> Result<(), Refused> {
        match self {
            Sent::Topic { memo } => ledger.create_topic(id, memo).await,
            Sent::Message { topic, message, memo } => ledger.submit_message(id, topic, message, memo).await,
        }
    }
}

/// Sends one transaction until the mirror node shows it reached
/// consensus: `earlier` (one sent before a restart) is looked up first,
/// sent again within its window, or replaced by a new id (stored by
/// `stored_as`, on the row of what the transaction makes, before it is
/// sent) once its window has passed.
pub(crate) async fn transact<F: Future<Output = Result<(), Stop>>>(
    app: &App,
    ledger: &Ledger,
    earlier: Option<TxId>,
    stored_as: impl Fn(String) -> F,
    sent: Sent<'_>,
) -> Result<(TxId, Reached), Stop> {
    let settings = app.inscriptions.as_ref().expect("inscriptions configured");
    let mut tx = earlier;
    loop {
        let id = match tx {
            Some(id) if ledger.in_window(&id, chrono::Utc::now().timestamp()) => id,
            Some(id) => {
                // Past its window: if it never reached consensus, it never will.
                if let Some(reached) = ledger.reached(&id).await.map_err(Stop::Later)? {
                    return settled(id, reached, sent);
                }
                fresh(ledger, &stored_as).await?
            }
            None => fresh(ledger, &stored_as).await?,
        };
        if let Some(reached) = ledger.reached(&id).await.map_err(Stop::Later)? {
            return settled(id, reached, sent);
        }
        match sent.send(ledger, &id).await {
            Ok(()) => {}
            Err(Refused::Status(status)) => return Err(Stop::Failed(format!("the network refused it: {status}"))),
            Err(Refused::Unavailable(why)) => return Err(Stop::Later(why)),
        }
        // Wait for the mirror node to show it, a little longer each look.
        let mut wait = Duration::from_millis(20);
        let deadline = tokio::time::Instant::now() + settings.confirm_timeout;
        while tokio::time::Instant::now() < deadline {
            if let Some(reached) = ledger.reached(&id).await.map_err(Stop::Later)? {
                return settled(id, reached, sent);
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(settings.retry_every);
        }
        tx = Some(id);
    }
}

/// A new transaction id, stored before it is used.
async fn fresh<F: Future<Output = Result<(), Stop>>>(
    ledger: &Ledger,
    stored_as: &impl Fn(String) -> F,
) -> Result<TxId, Stop> {
    let id = ledger.next_id();
    stored_as(id.sdk()).await?;
    Ok(id)
}

/// A transaction that reached consensus, as the job's step: `SUCCESS`, and
/// of the kind sent (an id shown for another kind was not this step's).
fn settled(id: TxId, reached: Reached, sent: Sent<'_>) -> Result<(TxId, Reached), Stop> {
    if reached.name != sent.kind() {
        return Err(Stop::Failed(format!("{} is a {}, not this step's {}", id.sdk(), reached.name, sent.kind())));
    }
    match reached.result.as_str() {
        "SUCCESS" => Ok((id, reached)),
        other => Err(Stop::Failed(format!("{} reached consensus as {other}", id.sdk()))),
    }
}
