//! What the live overlay is given for availability and ownership: each
//! agent as the store holds it (registered through the api) or as the
//! build does, with its last measurement
//! ([`broker_model::availability::settle`]) and its ownership
//! ([`broker_model::ownership::settle`]). Every change the overlay is
//! given settles both, so a measurement never hides an ownership proven
//! since the build, nor an ownership a measurement.

use std::collections::HashSet;

use crate::store::Conn;
use broker_model::availability::{settle, Measurement};
use broker_model::ownership::{self, Ownership};
use broker_model::Agent;

use super::super::agents::Agents;
use crate::store::availability as stored;
use crate::store::verification;
use crate::store::{Failure, Store};
use search::segments::Change;

/// `uaid`'s ownership as the store holds it, if one was ever proven.
fn owned(conn: &Conn, uaid: &str) -> Result<Option<Ownership>, Failure> {
    Ok(verification::of(conn, uaid)?.map(|held| held.ownership))
}

/// `agent` with its measurement and its ownership.
fn settled(mut agent: Agent, measurement: Option<&Measurement>, ownership: Option<&Ownership>) -> Agent {
    settle(&mut agent, measurement);
    ownership::settle(&mut agent, ownership);
    agent
}

/// The live overlay's changes for measurements published after the
/// build's journal point: each agent as the store holds it (registered
/// through the api) or as the build does, with its measurement.
pub async fn changes(
    store: &Store,
    build: &Agents,
    published: Vec<(i64, Measurement)>,
) -> Result<Vec<Change>, Failure> {
    let uaids: Vec<String> = published.iter().map(|(_, m)| m.uaid.clone()).collect();
    let stored = store
        .read(move |conn| {
            let registered = stored::registered(conn, &uaids)?;
            let owned = uaids.iter().map(|uaid| owned(conn, uaid)).collect::<Result<Vec<_>, _>>()?;
            Ok(registered.into_iter().zip(owned).collect::<Vec<_>>())
        })
        .await?;
    let mut out = Vec::new();
    for ((seq, measurement), (registered, ownership)) in published.into_iter().zip(stored) {
        if let Some(agent) = base(build, registered, &measurement.uaid) {
            out.push((seq, measurement.uaid.clone(), Some(settled(agent, Some(&measurement), ownership.as_ref()))));
        }
    }
    Ok(out)
}

/// An agent's record before what the store says of it: the store's
/// (registered through the api; `None` when deleted since) or the build's.
fn base(build: &Agents, registered: stored::Registered, uaid: &str) -> Option<Agent> {
    match registered {
        stored::Registered::Live(agent) => Some(*agent),
        stored::Registered::Deleted => None,
        stored::Registered::No => build.agent(uaid).ok().flatten().map(|a| a.into_owned()),
    }
}

/// The overlay's change for an ownership just changed at `seq`: the agent
/// with its measurement and that ownership (none: the agent is not
/// indexed, or deleted since).
pub async fn owned_change(
    store: &Store,
    build: &Agents,
    seq: i64,
    ownership: Ownership,
) -> Result<Vec<Change>, Failure> {
    let uaid = ownership.uaid.clone();
    let (registered, measurement) = store
        .read(move |conn| {
            let registered = stored::registered(conn, std::slice::from_ref(&uaid))?.remove(0);
            Ok((registered, stored::shown_of(conn, &uaid)?))
        })
        .await?;
    Ok(base(build, registered, &ownership.uaid)
        .map(|agent| (seq, ownership.uaid.clone(), Some(settled(agent, measurement.as_ref(), Some(&ownership)))))
        .into_iter()
        .collect())
}

/// The overlay's changes for a build whose journal point is `held`: the
/// agents registered, updated or deleted since, those whose ownership
/// changed since, and the first of those whose shown availability changed
/// since that `shown` lets through, each with its last measurement and
/// its ownership.
pub async fn overlay_after(
    store: &Store,
    build: Option<&Agents>,
    held: i64,
    shown: &super::Shown,
) -> Result<Vec<Change>, Failure> {
    changes_since(store, build, held, held, Measurements::Followed, shown).await
}

/// Whose measurements a reading of the store's changes shows.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Measurements {
    /// Every one stored (each counts against the live bound, `Shown`).
    Followed,
    /// None: this api made them and showed them as it did.
    Own,
}

/// What was stored after `since` (by another api sharing the store),
/// applied to the overlay over the build this api serves: answers the
/// newest `seq` applied (`since` when there was none, or the store could
/// not be read: the next round reads it again).
pub async fn follow(app: &crate::app::App, since: i64) -> i64 {
    let build = app.live.get().as_ref().and_then(|b| b.broker.clone());
    let held = build.as_ref().map_or(0, |broker| broker.journal_seq);
    let since = since.max(held);
    // The holder of the duties checks availability and shows its own
    // measurements as it makes them; the others follow them.
    let measurements = match app.replicas.holds_duties() {
        true => Measurements::Own,
        false => Measurements::Followed,
    };
    match changes_since(&app.store, build.as_deref(), held, since, measurements, &app.availability_shown).await {
        Ok(changes) => {
            let newest = changes.iter().map(|(seq, _, _)| *seq).max().unwrap_or(since).max(since);
            if app.overlay_writer.apply(changes).await.is_err() {
                tracing::error!("the live overlay cannot be changed; another api's changes stay hidden");
                return since;
            }
            newest
        }
        Err(e) => {
            tracing::warn!(error = %e, "another api's changes cannot be read yet");
            since
        }
    }
}

/// [`overlay_after`] for what was stored after `since` (at or past the
/// build's journal point `held`, which bounds what `shown` lets through).
async fn changes_since(
    store: &Store,
    build: Option<&Agents>,
    held: i64,
    since: i64,
    measurements: Measurements,
    shown: &super::Shown,
) -> Result<Vec<Change>, Failure> {
    debug_assert!(since >= held, "nothing the build holds is followed");
    let room = match measurements {
        Measurements::Followed => shown.room(held),
        Measurements::Own => 0,
    };
    let (registrations, owned_since, measured) = store
        .read(move |conn| {
            let registrations = crate::store::registry::changes_after(conn, since)?;
            let mut of_registrations = Vec::new();
            for (_, uaid, agent) in &registrations {
                of_registrations.push(match agent {
                    Some(_) => (stored::shown_of(conn, uaid)?, owned(conn, uaid)?),
                    None => (None, None),
                });
            }
            let owned_since = verification::changed_after(conn, since)?;
            // Enough to find `room` about agents not registered since.
            let measured = match measurements {
                Measurements::Followed => stored::shown_after(conn, since, room.saturating_add(registrations.len()))?,
                Measurements::Own => Vec::new(),
            };
            Ok((registrations.into_iter().zip(of_registrations).collect::<Vec<_>>(), owned_since, measured))
        })
        .await?;
    let mut out: Vec<Change> = Vec::new();
    let mut changed = HashSet::new();
    for ((seq, uaid, agent), (measurement, ownership)) in registrations {
        changed.insert(uaid.clone());
        let agent = agent.map(|agent| settled(agent, measurement.as_ref(), ownership.as_ref()));
        out.push((seq, uaid, agent));
    }
    if let Some(build) = build {
        // A measurement of the same agent comes after, settled with the
        // ownership too: the overlay keeps whichever is newer.
        for held in owned_since.into_iter().filter(|h| !changed.contains(&h.ownership.uaid)) {
            out.extend(owned_change(store, build, held.seq, held.ownership).await?);
        }
    }
    let mut measured: Vec<(i64, Measurement)> =
        measured.into_iter().filter(|(_, m)| !changed.contains(&m.uaid)).collect();
    measured.truncate(shown.take(held, measured.len()));
    if let Some(build) = build {
        out.extend(changes(store, build, measured).await?);
    }
    Ok(out)
}

/// `agent` (a registration's, just stored) as it is shown: with its last
/// measurement and its ownership.
pub async fn as_shown(store: &Store, agent: Agent) -> Agent {
    let uaid = agent.uaid.to_string();
    match store.read(move |conn| Ok((stored::shown_of(conn, &uaid)?, owned(conn, &uaid)?))).await {
        Ok((measurement, ownership)) => settled(agent, measurement.as_ref(), ownership.as_ref()),
        Err(e) => {
            tracing::error!(error = %e, "availability: a measurement cannot be read; shown unknown");
            settled(agent, None, None)
        }
    }
}
