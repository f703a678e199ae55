//! Re-checks: every `recheck_every`, the verified ownerships last checked
//! longer ago than that are looked at again, a few at a time, each as
//! [`one`] does on request. A change of state (revoked, expired) is
//! journaled by the store and shown through the live overlay at once.

use std::future::Future;
use std::sync::Arc;

use futures_util::StreamExt;

use crate::app::App;
use crate::reply::Error;
use crate::store::verification::{self as stored, Held};
use crate::store::{now_ms, registry};

/// Ownerships re-checked at once.
const CONCURRENCY: usize = 4;
/// Ownerships taken from the store per pass.
const BATCH: usize = 256;

/// Re-checks until `shutdown` resolves.
pub async fn run(app: Arc<App>, shutdown: impl Future<Output = ()>) {
    let every = app.verification.recheck_every;
    if every.is_zero() {
        return;
    }
    let passes = async {
        let mut tick = tokio::time::interval(every.min(std::time::Duration::from_secs(60)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(e) = pass(&app).await {
                tracing::error!(error = %e.message, "verification: a re-check pass failed");
            }
        }
    };
    tokio::select! {
        () = shutdown => {}
        () = passes => {}
    }
}

/// One pass: every due ownership, `BATCH` at a time.
async fn pass(app: &Arc<App>) -> Result<(), Error> {
    let before = now_ms() - app.verification.recheck_every.as_millis() as i64;
    loop {
        let due = app.store.read(move |conn| stored::due(conn, before, BATCH)).await?;
        let done = due.len();
        futures_util::stream::iter(due)
            .for_each_concurrent(CONCURRENCY, |held| async move {
                if let Err(e) = one(app, held).await {
                    tracing::warn!(error = %e.message, "verification: a re-check failed");
                }
            })
            .await;
        if done < BATCH {
            return Ok(());
        }
    }
}

/// Re-checks `held` now: records what was found, shows a change of state
/// live, and returns the ownership as it stands.
pub async fn one(app: &App, held: Held) -> Result<Held, Error> {
    let uaid = held.ownership.uaid.clone();
    let key = uaid.clone();
    let registrant = app.store.read(move |conn| registry::registrant(conn, &key)).await?;
    let build = app.live.get();
    let agent = match build.as_ref().and_then(|b| b.broker.as_deref()) {
        Some(broker) => {
            app.overlay.view().current(broker, &uaid).map_err(|e| Error::damaged_record(&e))?.map(|a| a.into_owned())
        }
        None => None,
    };
    let found = super::proof::recheck(
        app,
        agent.as_ref(),
        registrant.as_deref(),
        held.ownership.method,
        &held.proof,
        &held.code,
    )
    .await;
    let (at, lifetime) = (now_ms(), app.verification.lifetime.as_millis() as i64);
    let key = uaid.clone();
    let after = app.store.write(move |conn| stored::rechecked(conn, &key, &found, at, lifetime)).await?;
    let Some((after, journaled)) = after else {
        return Err(Error::new(
            warp::http::StatusCode::NOT_FOUND,
            "ownership_not_found",
            format!("no ownership of {uaid}"),
        ));
    };
    if let Some(seq) = journaled {
        tracing::info!(uaid, state = after.ownership.state.as_str(), "verification: an ownership changed on re-check");
        super::changed(app, seq, &after).await;
    }
    Ok(after)
}
