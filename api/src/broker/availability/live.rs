//! What the live overlay is given for availability: each agent as the
//! store holds it (registered through the api) or as the build does, with
//! its last measurement ([`broker_model::availability::settle`]).

use std::collections::HashSet;

use broker_model::availability::{settle, Measurement};
use broker_model::Agent;

use super::super::agents::Agents;
use crate::store::availability as stored;
use crate::store::{Failure, Store};
use search::segments::Change;

/// The live overlay's changes for measurements published after the
/// build's journal point: each agent as the store holds it (registered
/// through the api) or as the build does, with its measurement.
pub async fn changes(
    store: &Store,
    build: &Agents,
    published: Vec<(i64, Measurement)>,
) -> Result<Vec<Change>, Failure> {
    let uaids: Vec<String> = published.iter().map(|(_, m)| m.uaid.clone()).collect();
    let registered = store.read(move |conn| stored::registered(conn, &uaids)).await?;
    let mut out = Vec::new();
    for ((seq, measurement), registered) in published.into_iter().zip(registered) {
        let agent = match registered {
            stored::Registered::Live(agent) => Some(*agent),
            stored::Registered::Deleted => None,
            stored::Registered::No => build.agent(&measurement.uaid).ok().flatten().map(|a| a.into_owned()),
        };
        if let Some(mut agent) = agent {
            settle(&mut agent, Some(&measurement));
            out.push((seq, measurement.uaid, Some(agent)));
        }
    }
    Ok(out)
}

/// The overlay's changes for a build whose journal point is `held`: the
/// agents registered, updated or deleted since, and the first of those
/// whose shown availability changed since that `shown` lets through, each
/// with its last measurement.
pub async fn overlay_after(
    store: &Store,
    build: Option<&Agents>,
    held: i64,
    shown: &super::Shown,
) -> Result<Vec<Change>, Failure> {
    let room = shown.room(held);
    let (registrations, measured) = store
        .read(move |conn| {
            let registrations = crate::store::registry::changes_after(conn, held)?;
            let mut of_registrations = Vec::new();
            for (_, uaid, agent) in &registrations {
                of_registrations.push(match agent {
                    Some(_) => stored::shown_of(conn, uaid)?,
                    None => None,
                });
            }
            // Enough to find `room` about agents not registered since.
            let measured = stored::shown_after(conn, held, room.saturating_add(registrations.len()))?;
            Ok((registrations.into_iter().zip(of_registrations).collect::<Vec<_>>(), measured))
        })
        .await?;
    let mut out: Vec<Change> = Vec::new();
    let mut changed = HashSet::new();
    for ((seq, uaid, agent), measurement) in registrations {
        changed.insert(uaid.clone());
        let agent = agent.map(|mut agent| {
            settle(&mut agent, measurement.as_ref());
            agent
        });
        out.push((seq, uaid, agent));
    }
    let mut measured: Vec<(i64, Measurement)> =
        measured.into_iter().filter(|(_, m)| !changed.contains(&m.uaid)).collect();
    measured.truncate(shown.take(held, measured.len()));
    if let Some(build) = build {
        out.extend(changes(store, build, measured).await?);
    }
    Ok(out)
}

/// `agent` (a registration's, just stored) with its last measurement.
pub async fn measured(store: &Store, mut agent: Agent) -> Agent {
    let uaid = agent.uaid.to_string();
    match store.read(move |conn| stored::shown_of(conn, &uaid)).await {
        Ok(measurement) => settle(&mut agent, measurement.as_ref()),
        Err(e) => tracing::error!(error = %e, "availability: a measurement cannot be read; shown unknown"),
    }
    agent
}
