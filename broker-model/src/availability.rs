//! Whether an agent can be reached, as measured rather than as claimed.
//!
//! The api checks every agent it can chat with (`api::broker::availability`)
//! and journals a [`Measurement`] when what an agent shows changes; a
//! build folds the journal's last measurement of each agent into its
//! record with [`settle`], and the api does the same for the agents its
//! live overlay holds. One rule, here, for both:
//!
//! - An agent the broker can chat with (an adapter of [`super::chat`]) is
//!   the broker's to measure: `online` or `offline` as its last check
//!   found it, or `unknown` until it is checked. A source's claim is not
//!   repeated for it, and its `uptime` trust signal is the measured one
//!   (absent until checked).
//! - A measurement speaks only for the endpoint it checked: after the
//!   agent's endpoint changes, the agent is `unknown` again until checked
//!   there.
//! - An agent the broker cannot chat with keeps its registry's claim,
//!   marked `availabilitySource: registry`.

use serde::{Deserialize, Serialize};

use crate::Agent;

shared::vocabulary! {
    /// Who an agent's availability comes from.
    Source, SOURCES {
        Broker = "broker",
        Registry = "registry",
    }
}

shared::vocabulary! {
    /// What a check found.
    Status, STATUSES {
        Online = "online",
        Offline = "offline",
    }
}

/// The status of an agent never checked.
pub const UNKNOWN: &str = "unknown";

/// How many checks the uptime averages over once it has that many: a
/// running mean of the first ones, then a moving average that forgets
/// the old ones at this pace.
pub const UPTIME_CHECKS: u32 = 20;

/// One agent's availability as its last check left it: the journal's
/// `availability` event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Measurement {
    pub uaid: String,
    /// The URL checked ([`checked_endpoint`]).
    pub endpoint: String,
    pub status: Status,
    /// RFC 3339.
    pub checked_at: String,
    /// When a check last reached it (RFC 3339), if ever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    /// The share of checks that reached it, 0 to 100 ([`uptime_after`]).
    pub uptime: f64,
}

/// What the broker checks for `agent`: its chat adapter's endpoint name
/// and URL, or `None` when it cannot chat with it.
pub fn checked(agent: &Agent) -> Option<(&'static str, &str)> {
    let adapter = super::chat::adapter_for(agent.endpoints.keys().map(String::as_str))?;
    agent.endpoints.get(adapter.endpoint).map(|url| (adapter.endpoint, url.as_str()))
}

/// The URL the broker checks for `agent` ([`checked`]).
pub fn checked_endpoint(agent: &Agent) -> Option<&str> {
    checked(agent).map(|(_, url)| url)
}

/// Sets `agent`'s availability by the rule of this module from its last
/// measurement (`None`: never checked). O(1).
pub fn settle(agent: &mut Agent, measured: Option<&Measurement>) {
    let Some(endpoint) = checked_endpoint(agent) else {
        agent.availability_source = Some(Source::Registry);
        return;
    };
    let measured = measured.filter(|m| m.endpoint == endpoint);
    agent.availability_source = Some(Source::Broker);
    match measured {
        Some(m) => {
            debug_assert_eq!(m.uaid, agent.uaid.as_str(), "a measurement settles its own agent");
            agent.available = m.status == Status::Online;
            agent.availability_status = m.status.as_str().to_string();
            agent.availability_checked_at = Some(m.checked_at.clone());
            agent.availability_latency_ms = m.latency_ms;
            agent.last_seen = m.last_seen.clone();
            agent.trust_signals.insert("uptime".into(), m.uptime);
        }
        None => {
            agent.available = false;
            agent.availability_status = UNKNOWN.to_string();
            agent.availability_checked_at = None;
            agent.availability_latency_ms = None;
            agent.last_seen = None;
            agent.trust_signals.remove("uptime");
        }
    }
}

/// The uptime after one more check (`reached` or not), from the uptime
/// after `checks` earlier ones (`previous`, ignored when `checks` is 0):
/// their mean for the first [`UPTIME_CHECKS`], then a moving average
/// that weighs each new check 1 / [`UPTIME_CHECKS`]. Rounded to a tenth.
pub fn uptime_after(previous: f64, checks: u32, reached: bool) -> f64 {
    let sample = if reached { 100.0 } else { 0.0 };
    let weight = f64::from(checks.saturating_add(1).min(UPTIME_CHECKS));
    let previous = if checks == 0 { sample } else { previous };
    ((previous + (sample - previous) / weight) * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate;

    fn measured(agent: &Agent, endpoint: &str, status: Status) -> Measurement {
        Measurement {
            uaid: agent.uaid.to_string(),
            endpoint: endpoint.into(),
            status,
            checked_at: "2026-11-28T10:00:00Z".into(),
            last_seen: (status == Status::Online).then(|| "2026-11-28T10:00:00Z".to_string()),
            latency_ms: Some(12),
            uptime: 95.0,
        }
    }

    /// Each case: the agent's endpoints, the measurement's endpoint and
    /// status (if any), and what the agent then shows.
    #[test]
    fn the_rule_decides_each_kind_of_agent() {
        type Case = (
            &'static [(&'static str, &'static str)],
            Option<(&'static str, Status)>,
            (&'static str, bool, Option<Source>, bool),
        );
        let cases: &[Case] = &[
            // chattable, never checked: unknown, never the source's claim
            (&[("a2a", "https://a.example/x")], None, ("unknown", false, Some(Source::Broker), false)),
            // checked at its endpoint
            (
                &[("a2a", "https://a.example/x")],
                Some(("https://a.example/x", Status::Online)),
                ("online", true, Some(Source::Broker), true),
            ),
            (
                &[("mcp", "https://a.example/m")],
                Some(("https://a.example/m", Status::Offline)),
                ("offline", false, Some(Source::Broker), true),
            ),
            // checked at an endpoint it no longer has: unknown again
            (
                &[("a2a", "https://b.example/x")],
                Some(("https://a.example/x", Status::Online)),
                ("unknown", false, Some(Source::Broker), false),
            ),
            // the adapter the broker uses decides which endpoint is checked
            (
                &[("a2a", "https://a.example/x"), ("http", "https://a.example/h")],
                Some(("https://a.example/h", Status::Online)),
                ("unknown", false, Some(Source::Broker), false),
            ),
            // not chattable: the registry's claim stands, marked as its
            (&[("inboundTopic", "hcs://0.0.5")], None, ("online", true, Some(Source::Registry), true)),
            (
                &[("inboundTopic", "hcs://0.0.5")],
                Some(("hcs://0.0.5", Status::Offline)),
                ("online", true, Some(Source::Registry), true),
            ),
        ];
        for (endpoints, measurement, (status, available, source, uptime)) in cases {
            let mut agent = generate::agents(1, 7).remove(0);
            agent.endpoints = endpoints.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            (agent.available, agent.availability_status) = (true, "online".into());
            agent.trust_signals.insert("uptime".into(), 99.0);
            let m = measurement.map(|(endpoint, s)| measured(&agent, endpoint, s));
            settle(&mut agent, m.as_ref());
            let case = format!("{endpoints:?} {measurement:?}");
            assert_eq!(agent.availability_status, *status, "{case}");
            assert_eq!(agent.available, *available, "{case}");
            assert_eq!(agent.availability_source, *source, "{case}");
            assert_eq!(agent.trust_signals.contains_key("uptime"), *uptime, "{case}");
            let checked = m.is_some() && agent.availability_source == Some(Source::Broker) && status != &"unknown";
            assert_eq!(agent.availability_checked_at.is_some(), checked, "{case}");
        }
    }

    #[test]
    fn uptime_is_a_mean_then_a_moving_average() {
        assert_eq!(uptime_after(0.0, 0, true), 100.0);
        assert_eq!(uptime_after(55.0, 0, false), 0.0);
        // the mean of the first checks
        let mut uptime = 0.0;
        for (n, reached) in [true, false, true, true].into_iter().enumerate() {
            uptime = uptime_after(uptime, n as u32, reached);
        }
        assert_eq!(uptime, 75.0);
        // later, each check moves it by a twentieth of the way
        assert_eq!(uptime_after(100.0, 500, false), 95.0);
        assert_eq!(uptime_after(0.0, 500, true), 5.0);
    }
}
