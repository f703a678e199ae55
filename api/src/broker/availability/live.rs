//! What the live overlay is given for availability and ownership: each
//! agent as the store holds it (registered through the api) or as the
//! build does, with its last measurement
//! ([`broker_model::availability::settle`]) and its ownership
//! ([`broker_model::ownership::settle`]). Every change the overlay is
//! given settles both, so a measurement never hides an ownership proven
//! since the build, nor an ownership a measurement.

use std::collections::HashSet;

use crate::store::Conn as Connection;
use broker_model::availability::{settle, Measurement};
use broker_model::ownership::{self, Ownership};
use broker_model::Agent;

use super::super::agents::Agents;
use crate::store::availability as stored;
use crate::store::verification;
use crate::store::{Failure, Store};
use search::segments::Change;

/// `uaid`'s ownership as the store holds it, if one was ever proven.
fn owned(conn: &Connection, uaid: &str) -> Result<Option<Ownership>, Failure> {
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
    let room = shown.room(held);
    let (registrations, owned_since, measured) = store
        .read(move |conn| {
            let registrations = crate::store::registry::changes_after(conn, held)?;
            let mut of_registrations = Vec::new();
            for (_, uaid, agent) in &registrations {
                of_registrations.push(match agent {
                    Some(_) => (stored::shown_of(conn, uaid)?, owned(conn, uaid)?),
                    None => (None, None),
                });
            }
            let owned_since = verification::changed_after(conn, held)?;
            // Enough to find `room` about agents not registered since.
            let measured = stored::shown_after(conn, held, room.saturating_add(registrations.len()))?;
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
