//! What an api does beside the others that share its live store: follow
//! the store's writes, and hold the background duties one at a time.
//!
//! **Following.** Each api keeps what it answers from memory over the
//! build (the live overlay of agents, the newest change of each catalog).
//! A write through another replica reaches it as a notice of the store
//! ([`crate::store::Store::writes`], PostgreSQL's `LISTEN`): it then reads
//! what changed after what it last applied, by the changes' `seq` (the
//! outbox's order), and applies that. No agent is polled. Alone on SQLite
//! every write is this api's own, applied as it was made, so there is
//! nothing to follow.
//!
//! **Duties.** Background work (registrations' deliveries, adapter
//! submissions resumed, payment watching, inscription, skill and plugin
//! jobs, the Programmable Secrets indexer, availability checks,
//! verification rechecks, the journal writer) runs on the one api holding
//! the lease `duties` ([`crate::store::leases`]). It renews the lease every
//! third of its length; an api that cannot renew it stops its duties when
//! its lease runs out, and whoever renews first afterwards takes them,
//! resuming their jobs from the store as a restart does (an api killed and
//! started again waits for its old lease to run out like any other).
//! Alone on SQLite, an api holds the duties with no lease. A notice of a
//! write wakes the holder's workers, so work queued through another
//! replica starts at once.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::app::App;
use crate::store::{self, leases, Dialect};

/// The lease of the background duties.
const DUTIES: &str = "duties";

pub mod settings;

/// Holds the duties while it can, until `stop`; then stops them and gives
/// the lease up. Alone on SQLite, the duties are this api's from its start
/// to its stop, with no lease.
pub async fn hold_duties(app: Arc<App>, stop: impl Future<Output = ()>) {
    if app.store.dialect() != Dialect::Postgres {
        let duties = Running::start(&app).await;
        stop.await;
        return duties.stop(&app).await;
    }
    let lease = app.replicas.lease;
    let lease_ms = lease.as_millis() as i64;
    let mut running: Option<Running> = None;
    let mut renewed_at = i64::MIN;
    let mut tick = tokio::time::interval(lease / 3);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = &mut stop => break,
        }
        let (holder, now) = (app.replicas.holder.clone(), store::now_ms());
        let took = app.store.write(move |conn| leases::take(conn, DUTIES, &holder, now, now + lease_ms)).await;
        match took {
            Ok(true) => {
                renewed_at = now;
                if running.is_none() {
                    tracing::info!(holder = app.replicas.holder, "holding the background duties");
                    running = Some(Running::start(&app).await);
                }
            }
            Ok(false) => {
                if let Some(duties) = running.take() {
                    tracing::warn!("another api holds the background duties; stopping ours");
                    duties.stop(&app).await;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "the duties' lease cannot be renewed");
                if running.is_some() && now >= renewed_at.saturating_add(lease_ms) {
                    tracing::warn!("the duties' lease ran out; stopping them for whoever renews first");
                    if let Some(duties) = running.take() {
                        duties.stop(&app).await;
                    }
                }
            }
        }
    }
    if let Some(duties) = running.take() {
        duties.stop(&app).await;
    }
    let holder = app.replicas.holder.clone();
    if let Err(e) = app.store.write(move |conn| leases::give_up(conn, DUTIES, &holder)).await {
        tracing::warn!(error = %e, "the duties' lease cannot be given up; it runs out instead");
    }
}

/// Follows the writes of the other apis sharing the store from change
/// `followed` on, until `stop` (see the module's doc). O(changes since
/// the last round) per round.
pub async fn follow(app: Arc<App>, mut followed: i64, stop: impl Future<Output = ()>) {
    if app.store.dialect() != Dialect::Postgres {
        return stop.await;
    }
    let mut writes = app.store.writes();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            changed = writes.changed() => if changed.is_err() { return },
            () = &mut stop => return,
        }
        writes.borrow_and_update();
        wake_duties(&app);
        followed = crate::broker::availability::live::follow(&app, followed).await;
        note_newest_changes(&app).await;
    }
}

/// Wakes the workers that wait for work queued in the store (they run
/// only where the duties are held; elsewhere no one waits).
fn wake_duties(app: &App) {
    app.registrar.wake.notify_one();
    app.journal.wake.notify_one();
    app.plugins.wake.notify_one();
    if let Some(inscriptions) = &app.inscriptions {
        inscriptions.wake.notify_one();
    }
    if let Some(skills) = &app.skills {
        skills.wake.notify_one();
    }
}

/// The newest stored change of each catalog the api answers from the
/// store once the build is older: feedback, the adapter registry, the
/// secrets and plugin catalogs.
pub async fn note_newest_changes(app: &App) {
    let newest = app.store.read(|conn| {
        Ok([
            store::feedback::newest(conn)?,
            store::adapters::newest(conn)?,
            store::secrets::catalog_newest(conn)?,
            store::plugins::catalog_newest(conn)?,
        ])
    });
    match newest.await {
        Ok([feedback, adapters, secrets, plugins]) => {
            app.feedback_changes.saw(feedback);
            app.catalog_changes.saw(adapters);
            app.secrets_changes.saw(secrets);
            app.plugin_changes.saw(plugins);
        }
        Err(e) => tracing::error!(error = %e, "the catalogs' stored changes cannot be read; they stay hidden"),
    }
}

/// The background workers of the duties, each with what stops it, in the
/// order they stop.
struct Running {
    workers: Vec<(oneshot::Sender<()>, JoinHandle<()>)>,
}

impl Running {
    async fn start(app: &Arc<App>) -> Running {
        app.replicas.set_holding(true);
        // Adapter submissions cut short by the last holder.
        match app.store.read(store::adapters::unsettled).await {
            Ok(ids) => ids
                .into_iter()
                .for_each(|id| drop(tokio::spawn(crate::broker::adapter_registry::process(app.clone(), id)))),
            Err(e) => tracing::error!(error = %e, "adapter submissions cannot be read"),
        }
        let mut workers = Vec::new();
        let mut spawn = |worker: Box<dyn FnOnce(Stop) -> JoinHandle<()>>| {
            let (stop, stopped) = oneshot::channel::<()>();
            let stopped: Stop = Box::pin(async move {
                let _ = stopped.await;
            });
            workers.push((stop, worker(stopped)));
        };
        // Availability: chattable agents checked in rounds.
        let a = app.clone();
        spawn(Box::new(move |stop| {
            tokio::spawn(crate::broker::availability::checks::run(a.clone(), a.availability.clone(), stop))
        }));
        // Verification: proofs looked at again.
        let a = app.clone();
        spawn(Box::new(move |stop| tokio::spawn(crate::broker::verification::recheck::run(a, stop))));
        // Inscriptions, skills and plugins: open jobs run, resumed.
        let a = app.clone();
        spawn(Box::new(move |stop| tokio::spawn(crate::broker::inscription::jobs::run(a, stop))));
        let a = app.clone();
        spawn(Box::new(move |stop| tokio::spawn(crate::broker::skills::jobs::run(a, stop))));
        let a = app.clone();
        spawn(Box::new(move |stop| tokio::spawn(crate::broker::plugins::import::run(a, stop))));
        // Programmable Secrets: the chains' events followed.
        let a = app.clone();
        spawn(Box::new(move |stop| tokio::spawn(crate::broker::secrets::indexer::run(a, stop))));
        // Registrations' deliveries to additional registries.
        let a = app.clone();
        spawn(Box::new(move |stop| {
            tokio::spawn(crate::broker::registrar::run(a.store.clone(), a.registrar.clone(), stop))
        }));
        // HBAR purchases: pending transfers looked up on the mirror node.
        if let Some(treasury) = app.treasury.clone() {
            let store = app.store.clone();
            spawn(Box::new(move |stop| tokio::spawn(treasury.watch(store, stop))));
        }
        // The journal writer: drains the outbox until stopped, then once
        // more.
        match crate::journal::Writer::open(&app.journal.dir, app.store.clone(), app.journal.rotate_bytes).await {
            Ok(writer) => {
                let wake = app.journal.wake.clone();
                spawn(Box::new(move |stop| {
                    tokio::spawn(crate::journal::run(writer, wake, Duration::from_secs(1), stop))
                }));
            }
            // The changes wait in the outbox (stored) until a holder that
            // can open the journal.
            Err(e) => {
                tracing::error!(error = format!("{e:#}"), "journal: cannot open; live changes wait in the outbox")
            }
        }
        Running { workers }
    }

    /// Stops each worker and waits for it, in order.
    async fn stop(self, app: &App) {
        for (stop, worker) in self.workers {
            let _ = stop.send(());
            let _ = worker.await;
        }
        app.replicas.set_holding(false);
    }
}

/// What a worker waits on to stop.
type Stop = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;
