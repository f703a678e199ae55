//! Pages for people: HTML files of the build, rendered from `templates/`
//! (minijinja) with the same data the JSON routes serve, into the same
//! manifest with the same ETags and atomic publish.
//!
//! A page needs nothing outside itself: its CSS is inline and small, its
//! charts are inline SVG drawn by [`svg`], no script runs. Links are
//! absolute paths, so the build reads the same on any host that serves it
//! at its root. The pages' routes ([`routes`]) use the spelling the
//! broker's client uses for a path segment (`encodeURIComponent`); the api
//! answers other spellings of the same path by re-encoding it the same way.
//!
//! Every page is rendered every run from the whole model (an incremental
//! run loads it from the warehouse); files whose bytes did not change are
//! linked from the live build like any other.

mod agents;
pub use agents::{directory_now, AgentSearch, Before, SearchForm};
mod guard;
mod ledger;
pub mod plugins;
pub mod routes;
pub mod secrets;
pub mod skills;
pub mod svg;

use anyhow::{Context, Result};
use minijinja::{context, Environment, Value};

use broker_model::catalog::FeedbackEntry;
use hcs20::analytics::Analytics;
use hcs20::tables::SupplyChange;
use shared::http::{Cache, Representation};
use shared::manifest::Export;
use shared::site::File;
use shared::timestamp::Timestamp;

/// Content type of every page.
pub const HTML: &str = "text/html; charset=utf-8";

/// What the pages are made of.
pub struct Inputs<'a> {
    pub analytics: &'a Analytics,
    /// Mints and burns per token and minute, for the charts.
    pub changes: &'a [SupplyChange],
    pub guard: Option<&'a guard_data::Datasets>,
    /// The newest of the directory's pages ([`DirectoryPages::newest`]):
    /// the landing page's time counts theirs. `None` when the build keeps
    /// the live build's (a layer: the agents did not change).
    pub directory: Option<Timestamp>,
    /// What the landing page says of the agents (with the newest of their
    /// profile pages, rendered with their batches: [`Renderer::profile`]).
    pub agents: Option<&'a broker_site::rows::Facts>,
    pub exports: &'a [Export],
}

/// What the directory's pages list: every agent's row, in order, and the
/// registries counted; for a layer, the directory as it was (only the
/// pages that change are made).
#[derive(Clone, Copy)]
pub struct Directory<'a> {
    pub rows: &'a [broker_site::rows::Row],
    pub tally: &'a broker_site::render::Tally,
    pub before: Option<agents::Before<'a>>,
}

/// The directory's pages made: those that changed (all of them without
/// [`Directory::before`]), every page's route, and the newest
/// Last-Modified among all of them.
#[derive(Default)]
pub struct DirectoryPages {
    pub files: Vec<File>,
    pub routes: Vec<String>,
    pub newest: Timestamp,
}

/// The templates, in the binary: a build does not depend on the folder it
/// runs from.
const TEMPLATES: &[(&str, &str)] = &[
    ("base.html", include_str!("../../templates/base.html")),
    ("landing.html", include_str!("../../templates/landing.html")),
    ("tokens.html", include_str!("../../templates/tokens.html")),
    ("token.html", include_str!("../../templates/token.html")),
    ("account.html", include_str!("../../templates/account.html")),
    ("guard.html", include_str!("../../templates/guard.html")),
    ("campaigns.html", include_str!("../../templates/campaigns.html")),
    ("coverage.html", include_str!("../../templates/coverage.html")),
    ("benchmark.html", include_str!("../../templates/benchmark.html")),
    ("agents.html", include_str!("../../templates/agents.html")),
    ("agent.html", include_str!("../../templates/agent.html")),
    ("skills.html", include_str!("../../templates/skills.html")),
    ("skill.html", include_str!("../../templates/skill.html")),
    ("secrets.html", include_str!("../../templates/secrets.html")),
    ("secret.html", include_str!("../../templates/secret.html")),
    ("plugins.html", include_str!("../../templates/plugins.html")),
    ("plugin.html", include_str!("../../templates/plugin.html")),
    ("search.html", include_str!("../../templates/search.html")),
    ("agent-search-form.html", include_str!("../../templates/agent-search-form.html")),
];

/// Who made a page: said in its footer, so a reader knows whether it is a
/// file of the build or what the api knows now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Made {
    /// A file of the build, the same on any host that serves it.
    Build,
    /// Made by the api when asked, from the build and what changed since
    /// (registrations, availability checks, the skills registry).
    Live,
}

impl Made {
    /// The footer's sentence (plain text: escaping leaves it as it is).
    pub const fn says(self) -> &'static str {
        match self {
            Made::Build => "This page is a static file of the build, made from public sources.",
            Made::Live => "This page is made by the api when asked, from the build and what has changed since.",
        }
    }
}

/// A page before it is rendered: where it goes, its template and context,
/// and the headers its representation gets.
struct Page {
    route: String,
    file: String,
    template: &'static str,
    context: Value,
    /// The JSON route with the same data, named in the footer.
    json: Option<String>,
    last_modified: Timestamp,
    cache: Cache,
    made: Made,
}

/// What every page's frame needs: which sections the build has.
#[derive(serde::Serialize)]
struct Site {
    guard: bool,
    agents: bool,
    openapi: &'static str,
}

/// The templates compiled, and what every page's frame says of the site.
pub struct Renderer {
    env: Environment<'static>,
    site: Site,
}

impl Renderer {
    /// A renderer for a site with the guard section or not, and the
    /// agents' or not.
    pub fn new(guard: bool, agents: bool) -> Renderer {
        Renderer { env: environment(), site: Site { guard, agents, openapi: shared::http::OPENAPI_ROUTE } }
    }

    /// Every page of the build but the agents' profiles and the
    /// directory's.
    #[tracing::instrument(level = "debug", skip_all)]
    pub fn render(&self, inputs: &Inputs) -> Result<Vec<File>> {
        use rayon::prelude::*;
        let mut pages = ledger::pages(inputs.analytics, inputs.changes);
        if let Some(datasets) = inputs.guard {
            pages.extend(guard::pages(datasets));
        }
        let profiles_newest = Timestamp(inputs.agents.map_or(0, |a| a.profiles_newest));
        let newest = pages.iter().map(|p| p.last_modified).chain(inputs.directory).max().unwrap_or_default();
        let newest = newest.max(profiles_newest);
        pages.push(landing(inputs, newest));
        pages.into_par_iter().map(|page| self.finish(page)).collect()
    }

    /// The directory's pages (about a hundred agents a page: [`agents::runs`]), over the cores.
    #[tracing::instrument(level = "debug", skip_all)]
    pub fn directory(&self, directory: Directory) -> Result<DirectoryPages> {
        use rayon::prelude::*;
        let (pages, routes) = agents::directory(&directory);
        let files = pages.into_par_iter().map(|page| self.finish(page)).collect::<Result<_>>()?;
        let newest = directory.rows.iter().map(|r| r.updated).max().unwrap_or_default();
        Ok(DirectoryPages { files, routes, newest })
    }

    /// An agent's profile page, with its feedback entries.
    pub fn profile(&self, agent: &broker_model::Agent, feedback: &[&FeedbackEntry], made: Made) -> Result<File> {
        self.finish(agents::profile(agent, feedback, made))
    }

    /// The page of a search of the agents (made by the api:
    /// [`Made::Live`]).
    pub fn agent_search(&self, found: &AgentSearch) -> Result<File> {
        self.finish(agents::search(found))
    }

    /// The skills registry's list, found by `query` (empty: every skill).
    pub fn skills(&self, list: &[skills::Skill], query: &str, last_modified: Timestamp) -> Result<File> {
        self.finish(skills::list(list, query, last_modified))
    }

    /// A skill's page.
    pub fn skill(&self, detail: &skills::SkillDetail, last_modified: Timestamp) -> Result<File> {
        self.finish(skills::detail(detail, last_modified))
    }

    /// The plugin catalog's pages of a build: the list of `items` (the
    /// catalog's, in its order) and each plugin's page from its detail.
    /// O(plugins).
    pub fn plugins(
        &self,
        items: &[serde_json::Value],
        details: &[serde_json::Value],
        last_modified: Timestamp,
    ) -> Result<Vec<File>> {
        let mut pages = vec![plugins::list_page(items, last_modified, Made::Build)];
        pages.extend(details.iter().map(|detail| plugins::plugin_page(detail, Made::Build)));
        pages.into_iter().map(|page| self.finish(page)).collect()
    }

    /// The plugin catalog's list, as the api knows it now.
    pub fn plugin_list(&self, items: &[serde_json::Value], last_modified: Timestamp, made: Made) -> Result<File> {
        self.finish(plugins::list_page(items, last_modified, made))
    }

    /// A plugin's page, from its detail (`plugins::catalog::detail`).
    pub fn plugin(&self, detail: &serde_json::Value, made: Made) -> Result<File> {
        self.finish(plugins::plugin_page(detail, made))
    }

    /// Programmable Secrets' pages of a build: every page of the list and
    /// every policy's, from the catalog's policies (in its order) and its
    /// time. O(policies).
    pub fn secret_policies(
        &self,
        policies: &[broker_model::catalog::SecretPolicy],
        last_modified: Timestamp,
    ) -> Result<Vec<File>> {
        let mut pages = secrets::list_pages(policies, last_modified);
        pages.extend(policies.iter().map(|policy| secrets::policy_page(policy, Made::Build)));
        pages.into_iter().map(|page| self.finish(page)).collect()
    }

    /// A page of the policies' list, as the api knows them now.
    pub fn secret_policy_list(&self, list: &secrets::PolicyList, made: Made) -> Result<File> {
        self.finish(secrets::list_page(list, made))
    }

    /// A policy's page.
    pub fn secret_policy(&self, policy: &broker_model::catalog::SecretPolicy, made: Made) -> Result<File> {
        self.finish(secrets::policy_page(policy, made))
    }

    /// Renders a page into a file of the build.
    fn finish(&self, page: Page) -> Result<File> {
        let template = self.env.get_template(page.template).expect("the templates are compiled in");
        let as_of = page.last_modified.iso8601();
        let context =
            context! { site => self.site, as_of => as_of, json => page.json, made => page.made.says(), ..page.context };
        let html = template.render(context).with_context(|| format!("rendering {} ({})", page.route, page.template))?;
        Ok(File {
            route: page.route,
            path: page.file,
            representation: Representation {
                body: html.into_bytes(),
                last_modified: page.last_modified,
                content_type: HTML,
                cache: page.cache,
            },
        })
    }
}

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    // A name the context lacks is an error where it would be printed, not
    // an empty string on a page.
    env.set_undefined_behavior(minijinja::UndefinedBehavior::SemiStrict);
    for (name, source) in TEMPLATES {
        env.add_template(name, source).unwrap_or_else(|e| panic!("template {name}: {e:#}"));
    }
    // HTML escaping of the five characters that matter (minijinja's own
    // also writes every `/` as `&#x2f;`, which doubles a URL's size).
    env.set_formatter(|out, state, value| match (state.auto_escape(), value.as_str()) {
        (minijinja::AutoEscape::Html, Some(text)) if !value.is_safe() => {
            out.write_str(&svg::escape(text)).map_err(minijinja::Error::from)
        }
        _ => minijinja::escape_formatter(out, state, value),
    });
    env.add_filter("num", num);
    env.add_filter("web", web);
    env.add_filter("count", count);
    env
}

/// A whole number with thousands separated (`12,345`); other values as
/// they print.
fn num(value: Value) -> String {
    match i64::try_from(value.clone()) {
        Ok(n) => {
            let digits = n.unsigned_abs().to_string();
            let mut out = String::new();
            for (i, c) in digits.chars().enumerate() {
                if i > 0 && (digits.len() - i) % 3 == 0 {
                    out.push(',');
                }
                out.push(c);
            }
            if n < 0 {
                out.insert(0, '-');
            }
            out
        }
        Err(_) => value.to_string(),
    }
}

/// A number of things in words: `1 token`, `1,200 tokens` (the plural
/// is the singular with `s` unless given).
fn count(value: Value, one: &str, many: Option<&str>) -> String {
    let n = num(value.clone());
    match n.as_str() {
        "1" => format!("1 {one}"),
        _ => format!("{n} {}", many.map_or_else(|| format!("{one}s"), str::to_string)),
    }
}

/// Whether a link may point at `url`: only web addresses (a source's URL
/// could say `javascript:`); others are shown as text.
fn web(url: &str) -> bool {
    url.starts_with("https://") || url.starts_with("http://")
}

/// Markup made here (the charts), not to be escaped again.
fn markup(svg: String) -> Value {
    Value::from_safe_string(svg)
}

/// The landing page: what is served, the datasets and their times, the
/// downloads.
fn landing(inputs: &Inputs, newest: Timestamp) -> Page {
    let analytics = inputs.analytics;
    let (stats, _) = analytics.stats();
    let topics: std::collections::BTreeSet<_> = analytics.tokens.iter().map(|t| t.topic).collect();
    let ledger = context! {
        tokens => stats.data.total_ticks,
        holders => stats.data.total_holders,
        mints => stats.data.total_mints,
        burns => stats.data.total_burns,
        transfers => stats.data.total_transfers,
        topics => topics.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
        as_of => analytics.newest.iso8601(),
    };
    let mut datasets = Vec::new();
    let guard = inputs.guard.map(|g| {
        for (name, version, reviewed) in [
            (&g.facts.dataset, &g.facts.schema_version, &g.facts.last_reviewed),
            (&g.campaigns.dataset, &g.campaigns.schema_version, &g.campaigns.last_reviewed),
            (&g.coverage.dataset, &g.coverage.schema_version, &g.coverage.last_reviewed),
            (&g.policies.dataset, &g.policies.schema_version, &g.policies.last_reviewed),
            (&g.benchmark.dataset, &g.benchmark.schema_version, &g.benchmark.last_reviewed),
        ] {
            datasets.push(context! { name, version => format!("schema {version}"), as_of => reviewed });
        }
        context! {
            facts => g.facts.count,
            campaigns => g.campaigns.count,
            assertions => g.coverage.count,
            runs => g.benchmark.runs.len(),
        }
    });
    let agents = inputs.agents.map(|a| {
        datasets.push(context! {
            name => "Agent index",
            version => format!("{} agents, journal record {}", a.agents, a.journal_seq),
            as_of => a.updated,
        });
        datasets.push(context! { name => "Broker catalog", version => "catalog", as_of => a.catalog_updated });
        context! { count => a.agents, registries => a.registries }
    });
    let exports: Vec<Value> = inputs
        .exports
        .iter()
        .map(|e| {
            let name = e.route.rsplit('/').next().unwrap_or(&e.route);
            context! { route => e.route, name, description => e.description, rows => e.rows }
        })
        .collect();
    Page {
        route: routes::LANDING.into(),
        file: "index.html".into(),
        template: "landing.html",
        context: context! { ledger, guard, agents, datasets, exports },
        json: None,
        last_modified: newest.max(analytics.newest),
        cache: Cache::EcosystemStats,
        made: Made::Build,
    }
}

#[cfg(test)]
mod tests;
