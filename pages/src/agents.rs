//! Section A's pages: the agent directory (by name, about a hundred a page) and
//! a profile per agent. An agent's endpoints are shown as text, never
//! linked or loaded: they are whatever the agent's registrant wrote.

use minijinja::{context, Value};

use super::{markup, routes, svg, Made, Page};
use broker_model::catalog::{FeedbackEntry, FEEDBACK_REGISTRY};
use broker_model::Agent;
use broker_site::render::agent_route;
use broker_site::render::time as instant;
use broker_site::rows::Row;
use shared::http::Cache;

/// Feedback entries listed on a profile, newest first.
const FEEDBACK_SHOWN: usize = 20;

/// The directory's pages, from its rows (each agent's profile is
/// rendered with its batch: [`super::Renderer::profile`]). The first page
/// is `/agents` and says how many agents there are; each other page is
/// named for its first agent ([`routes::directory_page`]) and lists its
/// run of rows ([`runs`]), so a page's bytes change only when its own rows
/// or its neighbours' names do. Given the directory as it was
/// (`directory.before`), only the pages whose bytes change are made.
pub(super) fn directory(directory: &super::Directory) -> (Vec<Page>, Vec<String>) {
    use rayon::prelude::*;
    let rows = directory.rows;
    let hashes: Vec<u64> = rows.par_iter().map(|r| row_hash(&r.uaid)).collect();
    let runs = runs(&hashes);
    let keys = keys(&hashes, &runs);
    let render = match &directory.before {
        Some(before) => changed_pages(rows, &hashes, &runs, &keys, before),
        None => vec![true; runs.len()],
    };
    let places: Vec<(String, String)> = keys.into_iter().map(routes::directory_page).collect();
    let registries: Vec<&String> = directory.tally.registries.keys().collect();
    let pages = (0..runs.len())
        .into_par_iter()
        .filter(|i| render[*i])
        .map(|i| {
            let slice = &rows[runs[i].clone()];
            let mut table = String::with_capacity(slice.len() * 400);
            slice.iter().for_each(|row| directory_row(&mut table, row));
            let name = |row: Option<&Row>| row.map(|r| r.name.to_string()).unwrap_or_default();
            let link = |j: Option<usize>| j.and_then(|j| places.get(j)).map(|(route, _)| route.clone());
            let (route, file) = places[i].clone();
            Page {
                route,
                file,
                template: "agents.html",
                context: context! {
                    rows => markup(table), first => i == 0, from => name(slice.first()), to => name(slice.last()),
                    // Only the first page counts every agent.
                    total => (i == 0).then_some(rows.len()), registries => (i == 0).then_some(&registries),
                    previous => link(i.checked_sub(1)), next => link(Some(i + 1)),
                    form => SearchForm::default(),
                },
                json: None,
                last_modified: slice.iter().map(|a| a.updated).max().unwrap_or_default(),
                cache: Cache::Agent,
                made: Made::Build,
            }
        })
        .collect::<Vec<Page>>();
    tracing::debug!(made = pages.len(), pages = runs.len(), "the directory's pages");
    (pages, places.into_iter().map(|(route, _)| route).collect())
}

/// Which of the pages (`runs` of `rows`, named `keys`) differ from the
/// pages of the directory as it was (`before`): the first (it counts every
/// agent); one no page of the same name was; one holding a changed agent;
/// one whose length, last agent or neighbours' names changed. A page that
/// passes none of these lists the same agents in the same order as the
/// page of its name did (its bounds and length are the same and none of
/// its agents changed), with the same links: its bytes are the same.
fn changed_pages(
    rows: &[Row],
    hashes: &[u64],
    runs: &[std::ops::Range<usize>],
    keys: &[Option<String>],
    before: &Before,
) -> Vec<bool> {
    let changed: std::collections::HashSet<u64> = before.changed.iter().map(|u| row_hash(u)).collect();
    let is_changed = |i: usize| changed.contains(&hashes[i]) && before.changed.contains(&*rows[i].uaid);
    let old = before.uaids(rows, hashes, &is_changed);
    let old_hashes: Vec<u64> = old.iter().map(|(_, hash)| *hash).collect();
    let old_runs = self::runs(&old_hashes);
    let old_keys = self::keys(&old_hashes, &old_runs);
    let by_key: std::collections::HashMap<&Option<String>, usize> =
        old_keys.iter().enumerate().map(|(j, key)| (key, j)).collect();
    let key = |keys: &[Option<String>], i: Option<usize>| i.and_then(|i| keys.get(i)).cloned();
    (0..runs.len())
        .map(|i| {
            let Some(&j) = by_key.get(&keys[i]).filter(|_| i > 0) else { return true };
            let (run, was) = (&runs[i], &old_runs[j]);
            let same = run.len() == was.len()
                && *rows[run.end - 1].uaid == *old[was.end - 1].0
                && key(keys, i.checked_sub(1)) == key(&old_keys, j.checked_sub(1))
                && key(keys, Some(i + 1)) == key(&old_keys, Some(j + 1))
                && !run.clone().any(is_changed);
            !same
        })
        .collect()
}

/// The directory as it was before a layer's changes, for only the pages
/// that change to be made again.
#[derive(Clone, Copy)]
pub struct Before<'a> {
    /// The rows of the changed agents as they were (those updated or
    /// deleted; a registered agent had none).
    pub rows: &'a [Row],
    /// The UAIDs of the agents registered, updated or deleted.
    pub changed: &'a std::collections::HashSet<&'a str>,
}

impl Before<'_> {
    /// The UAIDs of the directory as it was, in order, with their
    /// hashes, from its rows now (`rows`, their `hashes`): those of agents
    /// that did not change (`is_changed` says which did, by position), with
    /// the changed agents' rows as they were put back in their places.
    fn uaids<'a>(&'a self, rows: &'a [Row], hashes: &[u64], is_changed: &dyn Fn(usize) -> bool) -> Vec<(&'a str, u64)> {
        let mut old: Vec<&Row> = self.rows.iter().collect();
        old.sort_by(|a, b| Row::order(a, b));
        let mut uaids = Vec::with_capacity(rows.len() + old.len());
        let unchanged = |range: std::ops::Range<usize>, uaids: &mut Vec<(&'a str, u64)>| {
            uaids.extend(range.filter(|i| !is_changed(*i)).map(|i| (&*rows[i].uaid, hashes[i])));
        };
        let mut at = 0;
        for row in old {
            let place = rows.partition_point(|r| Row::order(r, row).is_lt()).max(at);
            unchanged(at..place, &mut uaids);
            uaids.push((&*row.uaid, row_hash(&row.uaid)));
            at = place;
        }
        unchanged(at..rows.len(), &mut uaids);
        uaids
    }
}

/// Pages hold at least this many agents (but the last)...
pub const PAGE_MIN: usize = 50;
/// ...and past it a page ends before an agent whose hash is a multiple of
/// this (about a hundred agents a page in all)...
const PAGE_CUT: u64 = 50;
/// ...or at this many.
pub const PAGE_MAX: usize = 250;

/// The directory's rows (their UAIDs' [`row_hash`]es) cut into pages by their content: a page ends
/// before a row whose UAID's hash is a multiple of [`PAGE_CUT`] once it
/// holds [`PAGE_MIN`] rows, or at [`PAGE_MAX`]. Where a page ends depends
/// only on the rows near it, so an agent added or removed changes the page
/// it falls on (and seldom the next), not every page after it as pages of
/// a fixed size would: a layer over a thousand changed agents rewrites a
/// few hundred pages of a million agents' directory, not ten thousand.
pub fn runs(hashes: &[u64]) -> Vec<std::ops::Range<usize>> {
    let mut runs = Vec::with_capacity(hashes.len() / 90 + 1);
    let mut start = 0;
    for (i, hash) in hashes.iter().enumerate().skip(1) {
        let held = i - start;
        if held >= PAGE_MAX || (held >= PAGE_MIN && hash % PAGE_CUT == 0) {
            runs.push(start..i);
            start = i;
        }
    }
    runs.push(start..hashes.len());
    runs
}

/// Each page's key (none for the first, `/agents`): its first agent's
/// UAID's hash in hex, a hash that repeats an earlier page's key given a
/// suffix.
fn keys(hashes: &[u64], runs: &[std::ops::Range<usize>]) -> Vec<Option<String>> {
    let mut seen = std::collections::HashSet::new();
    let mut keys = vec![None];
    for run in runs.iter().skip(1) {
        let base = format!("{:016x}", hashes[run.start]);
        let key =
            (1..).map(|n| if n == 1 { base.clone() } else { format!("{base}-{n}") }).find(|k| seen.insert(k.clone()));
        keys.push(key);
    }
    keys
}

/// A UAID's hash: FNV-1a, its bits mixed (splitmix64's finaliser) so that
/// its residues are even.
fn row_hash(uaid: &str) -> u64 {
    let mut h = shared::http::fnv(uaid.as_bytes());
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// How a row's availability cell begins: the row's last cell, written
/// by [`directory_row`] and rewritten by [`directory_now`].
const AVAILABLE_CELL: &str = "<td class=\"available\">";
const AVAILABLE_YES: &str = "<span class=\"good\">yes</span>";
const AVAILABLE_NO: &str = "no";
/// How a row ends.
const ROW_END: &str = "</td></tr>\n";
/// How a row begins, up to its agent's route.
const ROW_START: &str = "<tr><th scope=\"row\"><a href=\"";

/// One row of the directory's table, as markup (a million of them are
/// written by each build that changes agents: made here, not by the
/// template engine). One line: [`directory_now`] reads them back.
fn directory_row(out: &mut String, row: &Row) {
    use std::fmt::Write;
    out.push_str(ROW_START);
    svg::escape_into(out, &routes::agent_route(&row.uaid));
    out.push_str("\">");
    svg::escape_into(out, &row.name);
    out.push_str("</a></th><td>");
    svg::escape_into(out, &row.registry);
    out.push_str("</td><td>");
    for (i, protocol) in row.protocols.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        svg::escape_into(out, protocol);
    }
    let _ = write!(out, "</td><td class=\"n\">{:.0}</td>{AVAILABLE_CELL}", row.trust_score);
    out.push_str(if row.available { AVAILABLE_YES } else { AVAILABLE_NO });
    out.push_str(ROW_END);
}

/// A directory page of the build as the api knows it now: each row's
/// availability as `available_now` says for its agent (`None`: as the
/// build had it), and the footer saying the page is made by the api.
/// `None` when no row changes (the build's file is served as it is).
/// O(size of the page).
pub fn directory_now(page: &[u8], available_now: impl Fn(&str) -> Option<bool>) -> Option<Vec<u8>> {
    let html = std::str::from_utf8(page).ok()?;
    let mut out = String::with_capacity(html.len() + 64);
    let mut changed = false;
    for line in html.split_inclusive('\n') {
        let now = line
            .strip_prefix(ROW_START)
            .and_then(|rest| rest.split_once('"'))
            .and_then(|(route, _)| route.strip_prefix(routes::AGENTS)?.strip_prefix('/'))
            .and_then(|segment| percent_encoding::percent_decode_str(segment).decode_utf8().ok())
            .and_then(|uaid| available_now(&uaid));
        let cell = line.rfind(AVAILABLE_CELL).map(|at| at + AVAILABLE_CELL.len());
        match (now, cell) {
            (Some(available), Some(at)) if line.ends_with(ROW_END) => {
                let shown = if available { AVAILABLE_YES } else { AVAILABLE_NO };
                changed |= &line[at..line.len() - ROW_END.len()] != shown;
                out.push_str(&line[..at]);
                out.push_str(shown);
                out.push_str(ROW_END);
            }
            _ => out.push_str(line),
        }
    }
    changed.then(|| out.replacen(Made::Build.says(), Made::Live.says(), 1).into_bytes())
}

/// The search form's fields as filled (the names of `GET /search`'s
/// parameters: `q`, `registries`, `protocols`, `online`).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SearchForm {
    pub q: String,
    pub registry: String,
    pub protocol: String,
    pub online: bool,
}

/// What a search of the agents found, as its page shows it.
#[derive(Clone, Debug, Default)]
pub struct AgentSearch {
    pub form: SearchForm,
    /// The page's agents, in the order search ranked them.
    pub rows: Vec<Row>,
    pub total: usize,
    pub page: usize,
    /// The registries and protocols the form offers (those among the
    /// agents found, and the ones chosen).
    pub registries: Vec<String>,
    pub protocols: Vec<String>,
    /// Links to the pages before and after, if any.
    pub previous: Option<String>,
    pub next: Option<String>,
    /// The same search as JSON (`/api/v1/search?...`).
    pub json: String,
    /// The newest update among the agents found.
    pub last_modified: shared::timestamp::Timestamp,
}

/// The page of a search ([`AgentSearch`]): made by the api.
pub(super) fn search(found: &AgentSearch) -> Page {
    let mut table = String::with_capacity(found.rows.len() * 400);
    found.rows.iter().for_each(|row| directory_row(&mut table, row));
    Page {
        route: routes::AGENT_SEARCH.into(),
        file: routes::fixed_file(routes::AGENT_SEARCH),
        template: "search.html",
        context: context! {
            form => found.form, rows => markup(table), found => found.rows.len(), total => found.total,
            page => found.page, registries => found.registries, protocols => found.protocols,
            previous => found.previous, next => found.next,
        },
        json: Some(found.json.clone()),
        last_modified: found.last_modified,
        cache: Cache::NoStore,
        made: Made::Live,
    }
}

/// An agent's profile page, with its feedback entries.
pub(super) fn profile(a: &Agent, entries: &[&FeedbackEntry], made: Made) -> Page {
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
    // Why an agent the broker checks is offline, where it can be told
    // from the agent alone: an endpoint under a special-use name, which
    // the broker never looks up.
    let endpoint = broker_model::availability::checked_endpoint(a).and_then(|url| url::Url::parse(url).ok());
    let nowhere = endpoint.as_ref().and_then(url::Url::domain).and_then(shared::special_use::nowhere);
    Page {
        route,
        file,
        template: "agent.html",
        context: context! { a, trust, endpoints, feedback, summary, nowhere },
        json: Some(agent_route(a.uaid.as_str())),
        last_modified: updated,
        cache: Cache::Agent,
        made,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::timestamp::Timestamp;

    fn row(n: u64) -> Row {
        Row {
            name: format!("agent {n:08}").into(),
            uaid: format!("uaid:aid:{n}").into(),
            registry: "nanda".into(),
            protocols: vec!["a2a".to_string()].into(),
            trust_score: 50.0,
            available: true,
            updated: Timestamp(0),
        }
    }

    fn hashes(rows: &[Row]) -> Vec<u64> {
        rows.iter().map(|r| row_hash(&r.uaid)).collect()
    }

    /// The pages as the UAIDs they list.
    fn pages(rows: &[Row]) -> Vec<Vec<String>> {
        runs(&hashes(rows)).into_iter().map(|run| rows[run].iter().map(|r| r.uaid.to_string()).collect()).collect()
    }

    #[test]
    fn pages_cover_the_rows_in_bounded_runs_of_about_a_hundred() {
        for n in [0, 1, 49, 50, 251, 10_000, 200_000] {
            let rows: Vec<Row> = (0..n).map(row).collect();
            let runs = runs(&hashes(&rows));
            assert_eq!(runs.first().unwrap().start, 0, "{n}");
            assert_eq!(runs.last().unwrap().end, rows.len(), "{n}");
            assert!(runs.windows(2).all(|w| w[0].end == w[1].start), "{n}: contiguous");
            let (last, full) = runs.split_last().unwrap();
            assert!(full.iter().all(|r| (PAGE_MIN..=PAGE_MAX).contains(&r.len())), "{n}");
            assert!(last.len() <= PAGE_MAX, "{n}");
            if n >= 10_000 {
                let mean = n as f64 / runs.len() as f64;
                assert!((80.0..120.0).contains(&mean), "{n}: {mean} agents a page");
            }
        }
    }

    /// An agent added or removed changes the page it falls on and at most
    /// a few near it; pages of a fixed size would change every page after.
    #[test]
    fn an_agent_added_or_removed_changes_only_pages_near_it() {
        let check = |before: &[Row], after: &[Row]| {
            let old: std::collections::HashSet<Vec<String>> = pages(before).into_iter().collect();
            let changed = pages(after).into_iter().filter(|p| !old.contains(p)).count();
            assert!((1..=4).contains(&changed), "{changed} pages changed");
        };
        let rows: Vec<Row> = (0..100_000).map(|n| row(n * 2)).collect();
        for at in [0, 1, 777, 50_000, 99_999] {
            let mut added = rows.clone();
            added.insert(at, row(at as u64 * 2 + 1));
            check(&rows, &added);
            let mut removed = rows.clone();
            removed.remove(at);
            check(&rows, &removed);
        }
    }

    /// Every page not made again is, route for route, the page the
    /// directory as it was had: after agents registered, renamed (moved)
    /// and deleted, here and there and side by side.
    #[test]
    fn only_the_pages_that_change_are_made_again() {
        let tally = broker_site::render::Tally::default();
        let made = |rows: &[Row], before: Option<Before>| {
            let (pages, routes) = directory(&crate::Directory { rows, tally: &tally, before });
            let pages: std::collections::HashMap<String, (Value, shared::timestamp::Timestamp)> =
                pages.into_iter().map(|p| (p.route, (p.context, p.last_modified))).collect();
            (pages, routes)
        };
        let old: Vec<Row> = (0..30_000u64).map(|n| row(n * 2)).collect();
        let (old_pages, _) = made(&old, None);
        // The agents registered, deleted and renamed (by number: the old
        // directory holds the even ones).
        type Changes = (Vec<u64>, Vec<u64>, Vec<u64>);
        let cases: [(&str, Changes); 4] = [
            ("registered", (vec![1, 7_001, 30_001, 59_999], vec![], vec![])),
            ("deleted", (vec![], vec![0, 100, 102, 104, 40_000], vec![])),
            ("renamed", (vec![], vec![], vec![2, 20_000, 50_000])),
            (
                "all three",
                ((0..60).map(|n| n * 997 + 1).collect(), (0..30).map(|n| n * 1_994).collect(), vec![8, 9_000]),
            ),
        ];
        for (name, (registered, deleted, renamed)) in cases {
            let mut rows: Vec<Row> =
                old.iter().filter(|r| !deleted.iter().any(|d| *r.uaid == *row(*d).uaid)).cloned().collect();
            rows.retain(|r| !renamed.iter().any(|n| *r.uaid == *row(*n).uaid));
            rows.extend(registered.iter().map(|n| row(*n)));
            rows.extend(renamed.iter().map(|n| Row {
                name: format!("zz renamed {n}").into(),
                updated: Timestamp(9),
                ..row(*n)
            }));
            rows.sort_by(Row::order);
            let was: Vec<Row> = deleted.iter().chain(&renamed).map(|n| row(*n)).collect();
            let changed: Vec<String> =
                registered.iter().chain(&deleted).chain(&renamed).map(|n| row(*n).uaid.to_string()).collect();
            let changed: std::collections::HashSet<&str> = changed.iter().map(String::as_str).collect();
            let (all, routes) = made(&rows, None);
            let (again, same_routes) = made(&rows, Some(Before { rows: &was, changed: &changed }));
            assert_eq!(routes, same_routes, "{name}");
            for route in &routes {
                match again.get(route) {
                    Some(page) => assert_eq!(Some(page), all.get(route), "{name}: {route}"),
                    None => assert_eq!(old_pages.get(route), all.get(route), "{name}: {route} was not made again"),
                }
            }
            let bound = 2 + 4 * (registered.len() + deleted.len() + renamed.len() * 2);
            assert!(again.len() <= bound, "{name}: {} of {} pages made again", again.len(), routes.len());
        }
    }

    #[test]
    fn pages_are_named_by_their_first_agent() {
        let rows: Vec<Row> = (0..1_000).map(row).collect();
        let runs = runs(&hashes(&rows));
        let keys = keys(&hashes(&rows), &runs);
        assert_eq!(keys[0], None);
        for (run, key) in runs.iter().zip(&keys).skip(1) {
            assert_eq!(key.as_deref(), Some(format!("{:016x}", row_hash(&rows[run.start].uaid)).as_str()));
        }
    }

    #[test]
    fn a_row_is_escaped_markup() {
        let mut out = String::new();
        let mut r = row(1);
        r.name = "<b>\"Tom\" & 'Jerry'</b>".into();
        directory_row(&mut out, &r);
        assert!(out.contains(">&lt;b&gt;&quot;Tom&quot; &amp; &#39;Jerry&#39;&lt;/b&gt;</a>"), "{out}");
        assert!(out.contains("href=\"/agents/uaid%3Aaid%3A1\""), "{out}");
        assert!(
            out.ends_with("<td class=\"n\">50</td><td class=\"available\"><span class=\"good\">yes</span></td></tr>\n"),
            "{out}"
        );
    }
}
