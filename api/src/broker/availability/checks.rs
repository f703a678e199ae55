//! The checker: rounds over the build's agents and the overlay's new
//! ones, paced and bounded as the module above says, each check through
//! the egress gate and recorded in the store.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use broker_model::availability::{checked, Measurement};
use broker_model::Agent;
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior};

use super::super::agents::Agents;
use super::Settings;
use crate::app::App;
use crate::chat::turn::Failure;
use crate::egress::Gate;
use crate::store::availability::{self as stored, Check, Outcome};
use crate::store::now_ms;
use search::segments::Found;

/// Agents read ahead of the checks: the memory a round holds.
const WINDOW: usize = 256;
/// The first wait before a silent host is tried again.
const BACKOFF_FIRST: Duration = Duration::from_secs(30);

/// Checks rounds until `shutdown` resolves.
pub async fn run(app: Arc<App>, settings: Settings, shutdown: impl Future<Output = ()>) {
    if settings.every.is_zero() {
        return;
    }
    let checker = Checker { hosts: HashMap::new(), app, settings };
    tokio::select! {
        () = shutdown => {}
        () = checker.rounds() => {}
    }
}

/// A check to make.
struct Probe {
    uaid: String,
    /// The adapter's endpoint name (`a2a`, `mcp`, `http`, `openrouter`).
    adapter: &'static str,
    url: String,
    host: String,
}

/// What the checks know of one host.
#[derive(Default)]
struct Host {
    /// A check of it is in flight.
    busy: bool,
    /// Checks that found it silent, in a row.
    silent: u32,
    /// Not to be called before.
    retry_at: Option<Instant>,
}

struct Checker {
    app: Arc<App>,
    settings: Settings,
    hosts: HashMap<String, Host>,
}

impl Checker {
    async fn rounds(mut self) {
        loop {
            let started = Instant::now();
            let checked = self.round(Walk::default()).await;
            tracing::info!(checked, took = ?started.elapsed(), "availability: a round");
            // Between rounds, the agents asked for soon as they come.
            let next = started + self.settings.every;
            loop {
                let soon = self.app.availability_soon.clone();
                tokio::select! {
                    () = tokio::time::sleep_until(next) => break,
                    () = soon.wake.notified() => {
                        self.round(Walk::finished()).await;
                    }
                }
            }
        }
    }

    /// One round of `walk`, the agents asked for soon first; how many
    /// agents it checked (or found their host down).
    async fn round(&mut self, mut walk: Walk) -> usize {
        let mut pacing = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(self.settings.rate.max(1))));
        pacing.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut pending: HashMap<String, VecDeque<Probe>> = HashMap::new();
        let mut queued = 0;
        let mut in_flight: JoinSet<(Probe, Outcome, Option<u64>)> = JoinSet::new();
        let mut checked = 0;
        loop {
            for probe in self.asked_for() {
                pending.entry(probe.host.clone()).or_default().push_front(probe);
                queued += 1;
            }
            while queued < WINDOW && !walk.done {
                for probe in self.next_due(&mut walk).await {
                    pending.entry(probe.host.clone()).or_default().push_back(probe);
                    queued += 1;
                }
            }
            let now = Instant::now();
            let mut down = Vec::new();
            for (host, waiting) in pending.iter_mut() {
                let state = self.hosts.entry(host.clone()).or_default();
                if state.busy {
                    continue;
                }
                if state.retry_at.is_some_and(|at| at > now) {
                    // Paced like a call: a round of agents on silent hosts
                    // reads records, writes rows and journals changes, and
                    // at a million unpaced that took a CPU from searches.
                    if let Some(probe) = waiting.pop_front() {
                        pacing.tick().await;
                        down.push(check(probe, Outcome::HostDown, None));
                    }
                    continue;
                }
                if in_flight.len() >= self.settings.concurrency.max(1) {
                    continue;
                }
                let Some(probe) = waiting.pop_front() else { continue };
                pacing.tick().await;
                state.busy = true;
                let (app, settings) = (self.app.clone(), self.settings.clone());
                in_flight.spawn(async move {
                    let started = Instant::now();
                    let checking = probe_one(&app.chat.gate, &probe, &settings);
                    let outcome = match tokio::time::timeout(settings.timeout, checking).await {
                        Ok(outcome) => outcome,
                        Err(_) => Outcome::Unreachable,
                    };
                    let latency = (outcome != Outcome::NotAllowed).then(|| started.elapsed().as_millis() as u64);
                    (probe, outcome, latency)
                });
            }
            pending.retain(|_, waiting| !waiting.is_empty());
            queued = pending.values().map(VecDeque::len).sum();
            checked += down.len();
            self.record(down).await;
            let Some(done) = in_flight.join_next().await else {
                if queued == 0 && walk.done {
                    // Only the hosts backing off are worth remembering:
                    // the map stays as small as the silent hosts.
                    self.hosts.retain(|_, host| host.retry_at.is_some());
                    return checked;
                }
                continue;
            };
            let Ok((probe, outcome, latency)) = done else { continue };
            let state = self.hosts.entry(probe.host.clone()).or_default();
            state.busy = false;
            match outcome {
                Outcome::Unreachable => {
                    state.silent += 1;
                    let doubling = BACKOFF_FIRST.saturating_mul(1 << (state.silent - 1).min(16));
                    state.retry_at = Some(Instant::now() + doubling.min(self.settings.backoff_max));
                }
                Outcome::Reached | Outcome::Refused => (state.silent, state.retry_at) = (0, None),
                Outcome::NotAllowed | Outcome::HostDown => {}
            }
            checked += 1;
            self.record(vec![check(probe, outcome, latency)]).await;
        }
    }

    /// The agents asked for soon, to check now.
    fn asked_for(&self) -> Vec<Probe> {
        let uaids = self.app.availability_soon.take();
        if uaids.is_empty() {
            return Vec::new();
        }
        let Some(build) = self.app.live.get().as_ref().and_then(|b| b.broker.clone()) else { return Vec::new() };
        let view = self.app.overlay.view();
        uaids.iter().filter_map(|uaid| view.current(&build, uaid).ok().flatten()).filter_map(|a| probe_of(&a)).collect()
    }

    /// The next agents of the walk that are due, at most [`WINDOW`]
    /// read; the walk is `done` after the last.
    async fn next_due(&self, walk: &mut Walk) -> Vec<Probe> {
        let build = self.app.live.get().as_ref().and_then(|b| b.broker.clone());
        let Some(build) = build else {
            walk.done = true;
            return Vec::new();
        };
        let view = self.app.overlay.view();
        let read = {
            let (build, view, walk_at) = (build.clone(), view.clone(), walk.clone());
            tokio::task::spawn_blocking(move || walk_at.read(&build, &view, WINDOW)).await
        };
        let Ok((agents, next)) = read else {
            walk.done = true;
            return Vec::new();
        };
        *walk = next;
        let probes: Vec<Probe> = agents.iter().filter_map(probe_of).collect();
        let uaids: Vec<String> = probes.iter().map(|p| p.uaid.clone()).collect();
        let checked = match self.app.store.read(move |conn| stored::checked_at(conn, &uaids)).await {
            Ok(checked) => checked,
            Err(e) => {
                tracing::error!(error = %e, "availability: the store cannot be read; the round ends");
                walk.done = true;
                return Vec::new();
            }
        };
        let recent = now_ms() - self.settings.every.as_millis() as i64;
        probes.into_iter().zip(checked).filter(|(_, at)| at.is_none_or(|at| at <= recent)).map(|(p, _)| p).collect()
    }

    /// Stores checks; shows what they change through the live overlay.
    async fn record(&mut self, checks: Vec<Check>) {
        if checks.is_empty() {
            return;
        }
        let published = match self.app.store.write(move |conn| stored::record(conn, &checks)).await {
            Ok(published) => published,
            Err(e) => {
                tracing::error!(error = %e, "availability: checks cannot be stored");
                return;
            }
        };
        if published.is_empty() {
            return;
        }
        self.app.journal.wake.notify_one();
        let Some(build) = self.app.live.get().as_ref().and_then(|b| b.broker.clone()) else { return };
        let room = self.app.availability_shown.take(build.journal_seq, published.len());
        if room < published.len() {
            tracing::warn!(
                live_max = self.settings.live_max,
                "availability: changes past the live bound wait for the next build"
            );
        }
        let published: Vec<(i64, Measurement)> = published.into_iter().take(room).collect();
        match super::live::changes(&self.app.store, &build, published).await {
            Ok(changes) => {
                let _ = self.app.overlay_writer.apply(changes).await;
            }
            Err(e) => tracing::error!(error = %e, "availability: changes cannot be shown live"),
        }
    }
}

fn check(probe: Probe, outcome: Outcome, latency_ms: Option<u64>) -> Check {
    Check { uaid: probe.uaid, endpoint: probe.url, outcome, at: now_ms(), latency_ms }
}

/// What to check for `agent`, if the broker can chat with it.
fn probe_of(agent: &Agent) -> Option<Probe> {
    let (adapter, url) = checked(agent)?;
    let url = url.to_string();
    let parsed = reqwest::Url::parse(&url).ok();
    let host = parsed.map_or_else(
        || url.clone(),
        |u| format!("{}:{}", u.host_str().unwrap_or_default(), u.port_or_known_default().unwrap_or(0)),
    );
    Some(Probe { uaid: agent.uaid.to_string(), adapter, url, host })
}

/// One check, its outcome.
async fn probe_one(gate: &Gate, probe: &Probe, settings: &Settings) -> Outcome {
    let max = settings.max_answer_bytes;
    let result = match probe.adapter {
        "a2a" => crate::chat::a2a::discover(gate, &probe.url, max).await.map(drop),
        "mcp" => crate::chat::mcp::probe(gate, &probe.url, max).await,
        _ => answers(gate, &probe.url).await,
    };
    match result {
        Ok(()) => Outcome::Reached,
        Err(Failure::Unreachable(_)) => Outcome::Unreachable,
        Err(Failure::NotAllowed) => Outcome::NotAllowed,
        Err(_) => Outcome::Refused,
    }
}

/// Whether `url` answers a GET below 500 (its body unread).
async fn answers(gate: &Gate, url: &str) -> Result<(), Failure> {
    let response = gate.get(url).send().await?;
    match response.status().as_u16() {
        500.. => Err(Failure::Refused(format!("{url} answered {}", response.status()))),
        _ => Ok(()),
    }
}

/// Where a round is: the build it walks and the next position, then the
/// overlay's new agents.
#[derive(Clone, Default)]
struct Walk {
    /// The build walked (its journal point and size): another build starts
    /// the walk over, since positions are the build's.
    build: Option<(i64, usize)>,
    next: usize,
    overlay_done: bool,
    done: bool,
}

impl Walk {
    /// A walk with nothing to walk: a round of the agents asked for soon.
    fn finished() -> Walk {
        Walk { done: true, ..Walk::default() }
    }

    /// Up to `limit` agents from where the walk is, as they are now, and
    /// where it is after them. Reads records: run off the async threads.
    fn read(mut self, build: &Agents, view: &super::super::overlay::View, limit: usize) -> (Vec<Agent>, Walk) {
        let held = (build.journal_seq, build.index.len());
        if self.build != Some(held) {
            (self.build, self.next, self.overlay_done) = (Some(held), 0, false);
        }
        let mut agents = Vec::new();
        while agents.len() < limit && self.next < build.index.len() {
            let at = self.next;
            self.next += 1;
            let Ok(agent) = build.index.records.agent(at) else { continue };
            match view.segments.find(agent.uaid.as_str(), build.journal_seq) {
                Found::Live(live) => agents.push(live.clone()),
                Found::Deleted => {}
                Found::Build => agents.push(agent.into_owned()),
            }
        }
        if agents.len() < limit && !self.overlay_done {
            self.overlay_done = true;
            let new = view.agents_after(build.journal_seq).filter(|a| build.position(a.uaid.as_str()).is_none());
            agents.extend(new.cloned());
        }
        self.done = self.next >= build.index.len() && self.overlay_done;
        (agents, self)
    }
}
