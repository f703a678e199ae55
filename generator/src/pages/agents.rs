//! Section A's pages: the agent directory (by name, a page per hundred) and
//! a profile per agent. An agent's endpoints are shown as text, never
//! linked or loaded: they are whatever the agent's registrant wrote.

use minijinja::{context, Value};

use super::{markup, routes, svg, Page};
use crate::broker::catalog::{FeedbackEntry, FEEDBACK_REGISTRY};
use crate::broker::render::agent_route;
use crate::broker::render::time as instant;
use crate::broker::Agent;
use crate::http::Cache;

/// Feedback entries listed on a profile, newest first.
const FEEDBACK_SHOWN: usize = 20;

/// The directory's pages, from its rows (each agent's profile is
/// rendered with its batch: [`super::Renderer::profile`]).
pub(super) fn directory(directory: &super::Directory) -> Vec<Page> {
    use rayon::prelude::*;
    let order = directory.rows;
    let count = order.len().div_ceil(routes::AGENTS_PER_PAGE).max(1);
    let registries: Vec<&String> = directory.tally.registries.keys().collect();
    (1..=count)
        .into_par_iter()
        .map(|page| {
            let slice = order.chunks(routes::AGENTS_PER_PAGE).nth(page - 1).unwrap_or(&[]);
            let agents: Vec<Value> = slice
                .iter()
                .map(|a| {
                    context! {
                        name => &*a.name, href => routes::agent_route(&a.uaid), registry => &*a.registry,
                        protocols => &*a.protocols, trust => format!("{:.0}", a.trust_score), available => a.available,
                    }
                })
                .collect();
            let link = |p: usize| (1..=count).contains(&p).then(|| routes::directory(p).0);
            let (route, file) = routes::directory(page);
            Page {
                route,
                file,
                template: "agents.html",
                context: context! {
                    agents, page, pages => count, total => order.len(), registries => &registries,
                    previous => link(page - 1), next => link(page + 1),
                },
                json: None,
                last_modified: slice.iter().map(|a| a.updated).max().unwrap_or_default(),
                cache: Cache::Agent,
            }
        })
        .collect()
}

/// An agent's profile page, with its feedback entries.
pub(super) fn profile(a: &Agent, entries: &[&FeedbackEntry]) -> Page {
    let mut signals: Vec<(String, f64)> = a.trust_signals.iter().map(|(k, v)| (k.clone(), *v)).collect();
    signals.sort_by(|x, y| x.0.cmp(&y.0));
    let chart = svg::scores(
        &signals,
        100.0,
        480,
        &format!(
            "Trust signals of {}: {}.",
            a.name,
            signals.iter().map(|(k, v)| format!("{k} {v:.0}")).collect::<Vec<_>>().join(", ")
        ),
    );
    let trust =
        context! { score => format!("{:.0}", a.trust_score), signals => !signals.is_empty(), chart => markup(chart) };
    let endpoints: Vec<Value> = a.endpoints.iter().map(|(name, url)| context! { name, url }).collect();
    let mut updated = instant(&a.updated_at);
    let feedback = (a.registry == FEEDBACK_REGISTRY).then(|| {
        let mut kept: Vec<&&FeedbackEntry> = entries.iter().filter(|f| !f.revoked).collect();
        kept.sort_by(|x, y| y.created_at.cmp(&x.created_at).then_with(|| x.client.cmp(&y.client)));
        if let Some(newest) = kept.first() {
            updated = updated.max(instant(&newest.created_at));
        }
        let average = match kept.len() {
            0 => String::new(),
            n => format!("{:.1}", kept.iter().map(|f| f.score as f64).sum::<f64>() / n as f64),
        };
        let rows: Vec<&&FeedbackEntry> = kept.iter().take(FEEDBACK_SHOWN).copied().collect();
        context! { count => kept.len(), average, rows }
    });
    let summary: String = match a.description.chars().count() {
        n if n > 155 => format!("{}…", a.description.chars().take(150).collect::<String>()),
        _ => a.description.clone(),
    };
    let (route, file) = routes::agent(a.uaid.as_str());
    Page {
        route,
        file,
        template: "agent.html",
        context: context! { a, trust, endpoints, feedback, summary },
        json: Some(agent_route(a.uaid.as_str())),
        last_modified: updated,
        cache: Cache::Agent,
    }
}
