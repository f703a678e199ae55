//! The publish worker: each open publish job taken through its steps, one
//! job at a time, resumed after a restart from what the store holds.
//!
//! At its start it makes sure of the directory topic (the operator's, or
//! one it creates once). A job then: writes each file as an HCS-1 file
//! (its parts, through the inscription worker's [`write`], which reads
//! each back before it counts); writes the manifest the same way; gives
//! the skill, if it is new, a version topic and a directory entry (under
//! [`Settings::registry`], stored on the name's row); and registers the
//! version on the version topic. A transaction the network refuses, or a
//! part that fails, fails the job: refunded, its version given back.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use shared::entity::EntityId;

use super::hcs26::{self, Written};
use super::settings::Settings;
use super::Listing;
use crate::app::App;
use crate::broker::hapi::TxId;
use crate::broker::inscription::hcs1;
use crate::broker::inscription::jobs::{transact, write, Ended, Sent, Stop};
use crate::broker::inscription::ledger::Ledger;
use crate::store::inscriptions::{Job as Part, Status};
use crate::store::now_ms;
use crate::store::skills::{self as stored, Directory, Job, NameStep, Step};

/// Runs publish jobs until `shutdown` resolves: the directory made sure
/// of, then every open job, then each new one as it is created (`wake`),
/// and those that had to wait every `retry_every`.
pub async fn run(app: Arc<App>, shutdown: impl Future<Output = ()>) {
    let (Some(skills), Some(inscriptions)) = (app.skills.as_deref(), app.inscriptions.as_deref()) else { return };
    let ledger = &inscriptions.ledger;
    let passes = async {
        loop {
            let mut waiting = false;
            let known = directory(&app, skills, ledger).await;
            if let Err(Stop::Later(why) | Stop::Failed(why)) = &known {
                tracing::warn!(why, "skills: the directory topic is not known yet");
                *skills.directory_problem.lock().expect("the directory's problem") = Some(why.clone());
            }
            match known {
                Err(_) => waiting = true,
                Ok(_) => {
                    let open = app.store.read(stored::open_jobs).await.unwrap_or_else(|e| {
                        tracing::error!(error = %e, "skills: open jobs cannot be read");
                        Vec::new()
                    });
                    for job in open {
                        waiting |= drive(&app, skills, ledger, job).await == Ended::No;
                    }
                }
            }
            let every = inscriptions.retry_every;
            match waiting {
                true => tokio::select! {
                    () = skills.wake.notified() => {}
                    () = tokio::time::sleep(every) => {}
                },
                false => skills.wake.notified().await,
            }
        }
    };
    tokio::select! {
        () = shutdown => {}
        () = passes => {}
    }
}

/// The directory topic: the one known, the operator's (once the mirror
/// node shows it with a directory's memo), or one created (its transaction
/// stored first, so a restart does not create two).
async fn directory(app: &App, skills: &Settings, ledger: &Ledger) -> Result<EntityId, Stop> {
    if let Some(topic) = skills.directory.get() {
        return Ok(*topic);
    }
    let stored = app.store.read(stored::directory).await?;
    let topic = match (skills.configured_directory, stored.topic_id.as_deref().and_then(|t| t.parse().ok())) {
        (Some(topic), _) => {
            // The operator's: an HCS-26 directory, or every entry would go astray.
            match ledger.topic_memo(topic).await.map_err(Stop::Later)? {
                None => return Err(Stop::Later(format!("the mirror node does not show {topic}"))),
                Some(memo) if memo != hcs26::DIRECTORY_MEMO => {
                    let why =
                        format!("{topic}'s memo is {memo:?}, not an HCS-26 directory's ({})", hcs26::DIRECTORY_MEMO);
                    return Err(Stop::Failed(why));
                }
                Some(_) => topic,
            }
        }
        (None, Some(topic)) => topic,
        (None, None) => {
            let earlier = stored.topic_tx.as_deref().and_then(TxId::parse_sdk);
            let stored_as = |tx: String| async move {
                let directory = Directory { topic_tx: Some(tx), topic_id: None };
                Ok(app.store.write(move |conn| stored::set_directory(conn, &directory)).await?)
            };
            let sent = Sent::Topic { memo: hcs26::DIRECTORY_MEMO };
            let (tx, reached) = transact(app, ledger, earlier, stored_as, sent).await?;
            let topic = reached.entity.ok_or_else(|| Stop::Failed(format!("{} created no topic", tx.sdk())))?;
            let directory = Directory { topic_tx: Some(tx.sdk()), topic_id: Some(topic.to_string()) };
            app.store.write(move |conn| stored::set_directory(conn, &directory)).await?;
            tracing::info!(%topic, "skills: the directory topic is made");
            topic
        }
    };
    Ok(*skills.directory.get_or_init(|| topic))
}

async fn drive(app: &App, skills: &Settings, ledger: &Ledger, job: Job) -> Ended {
    let id = job.id.clone();
    match publish(app, skills, ledger, job).await {
        Ok(()) => tracing::info!(job = id, "skills: a version is published"),
        Err(Stop::Later(why)) => {
            tracing::warn!(job = id, why, "skills: a publish job waits");
            return Ended::No;
        }
        Err(Stop::Failed(why)) => {
            tracing::warn!(job = id, why, "skills: a publish job failed; refunded");
            let (key, at) = (id.clone(), now_ms());
            if let Err(e) = app.store.write(move |conn| stored::fail(conn, &key, &why, at)).await {
                tracing::error!(job = id, error = %e, "skills: a failed job cannot be stored");
                return Ended::No;
            }
        }
    }
    Ended::Yes
}

/// `part` written (if it is not yet), as it then stands.
async fn written(app: &App, ledger: &Ledger, mut part: Part) -> Result<Part, Stop> {
    match part.status {
        Status::Completed => Ok(part),
        Status::Failed => Err(Stop::Failed(part.failure.unwrap_or_else(|| "a file was not written".into()))),
        Status::Pending | Status::InProgress => {
            let topic = write(app, ledger, part.clone()).await?;
            (part.status, part.topic_id) = (Status::Completed, Some(topic.to_string()));
            Ok(part)
        }
    }
}

async fn publish(app: &App, skills: &Settings, ledger: &Ledger, mut job: Job) -> Result<(), Stop> {
    if job.status == Status::Pending {
        let (key, at) = (job.id.clone(), now_ms());
        app.store.write(move |conn| stored::start(conn, &key, at)).await?;
    }
    let listing: Listing = serde_json::from_str(&job.listing)
        .map_err(|e| Stop::Failed(format!("the stored listing does not read: {e}")))?;
    let package = listing.package(&job.name, &job.version).map_err(Stop::Failed)?;
    let key = job.id.clone();
    let mut parts: HashMap<String, Part> =
        app.store.read(move |conn| stored::parts(conn, &key)).await?.into_iter().map(|p| (p.id.clone(), p)).collect();
    // Each file, in the package's order.
    let mut files = Vec::with_capacity(listing.files.len());
    for file in &listing.files {
        let part = parts.remove(&file.part).ok_or_else(|| Stop::Failed(format!("{} has no part", file.name)))?;
        files.push(written(app, ledger, part).await?);
    }
    // The manifest, once every file has its topic.
    let manifest = match job.manifest_job.as_ref().and_then(|id| parts.remove(id)) {
        Some(part) => part,
        None => {
            let list: Vec<Written<'_>> = listing
                .files
                .iter()
                .zip(&files)
                .map(|(file, part)| Written {
                    path: &file.name,
                    topic: part.topic_id.as_deref().unwrap_or_default(),
                    sha256: &file.sha256,
                    mime: &file.mime,
                })
                .collect();
            let content = hcs26::manifest(&package, &job.account, &list);
            let mime = "application/json";
            let messages = hcs1::messages_for(&content, mime).map_err(|e| Stop::Failed(format!("compressing: {e}")))?;
            let part = super::part(&job, "manifest.json", mime, &content, messages);
            let (parent, stored_part, at) = (job.id.clone(), part.clone(), now_ms());
            app.store.write(move |conn| stored::add_manifest(conn, &parent, &stored_part, &content, at)).await?;
            job.manifest_job = Some(part.id.clone());
            part
        }
    };
    let manifest = written(app, ledger, manifest).await?;
    let manifest_topic = manifest.topic_id.clone().unwrap_or_default();
    let directory = directory(app, skills, ledger).await?;
    // The skill's version topic and directory entry, made once.
    let (version_topic, uid) = {
        let _held = skills.registry.lock().await;
        let key = job.name.clone();
        let name = app.store.read(move |conn| stored::name(conn, &key)).await?;
        let mut name = name.ok_or_else(|| Stop::Failed(format!("skill {} is not claimed", job.name)))?;
        let store_step = |step: NameStep| {
            let key = job.name.clone();
            async move { Ok(app.store.write(move |conn| stored::name_step(conn, &key, &step)).await?) }
        };
        let version_topic = match name.version_topic.as_deref().and_then(|t| t.parse::<EntityId>().ok()) {
            Some(topic) => topic,
            None => {
                let earlier = name.topic_tx.as_deref().and_then(TxId::parse_sdk);
                let stored_as = |tx| store_step(NameStep::CreatingTopic { tx });
                let sent = Sent::Topic { memo: hcs26::VERSIONS_MEMO };
                let (tx, reached) = transact(app, ledger, earlier, stored_as, sent).await?;
                let topic = reached.entity.ok_or_else(|| Stop::Failed(format!("{} created no topic", tx.sdk())))?;
                store_step(NameStep::TopicCreated { topic: topic.to_string() }).await?;
                topic
            }
        };
        let uid = match name.skill_uid.take() {
            Some(uid) => uid,
            None => {
                let earlier = name.register_tx.as_deref().and_then(TxId::parse_sdk);
                let stored_as = |tx| store_step(NameStep::Registering { tx });
                let entry = hcs26::register_skill(&package, &job.account, &version_topic.to_string());
                let sent = Sent::Message { topic: directory, message: &entry, memo: hcs26::REGISTER_SKILL };
                let (_, reached) = transact(app, ledger, earlier, stored_as, sent).await?;
                let uid = sequence(ledger, directory, reached.consensus_timestamp.as_deref()).await?;
                store_step(NameStep::Registered { uid }).await?;
                uid
            }
        };
        (version_topic, uid)
    };
    // The version's entry.
    let earlier = job.version_tx.as_deref().and_then(TxId::parse_sdk);
    let stored_as = |tx: String| {
        let (key, at) = (job.id.clone(), now_ms());
        async move {
            Ok(app.store.write(move |conn| stored::step(conn, &key, &Step::Registering { tx: tx.clone() }, at)).await?)
        }
    };
    let entry = hcs26::register_version(uid, &job.version, &manifest_topic, &manifest.content_hash);
    let sent = Sent::Message { topic: version_topic, message: &entry, memo: hcs26::REGISTER_VERSION };
    let (_, reached) = transact(app, ledger, earlier, stored_as, sent).await?;
    let seq = sequence(ledger, version_topic, reached.consensus_timestamp.as_deref()).await?;
    let (key, at) = (job.id.clone(), now_ms());
    app.store.write(move |conn| stored::step(conn, &key, &Step::Completed { seq }, at)).await?;
    Ok(())
}

/// The sequence number of the message that reached consensus on `topic`
/// at `timestamp`.
async fn sequence(ledger: &Ledger, topic: EntityId, timestamp: Option<&str>) -> Result<i64, Stop> {
    let timestamp = timestamp.ok_or_else(|| Stop::Failed("the mirror node shows no consensus time".into()))?;
    match ledger.sequence_at(topic, timestamp).await.map_err(Stop::Later)? {
        Some(seq) => Ok(seq as i64),
        None => Err(Stop::Later(format!("the mirror node does not show {topic}'s message at {timestamp} yet"))),
    }
}
