//! Section C's routes: parsing a request into a [`Route`], its canonical
//! form (the manifest key), the file that holds its pre-rendered answer, its
//! cache lifetime, and rendering it from [`Analytics`].
//!
//! A route with query parameters has one canonical spelling per parameter
//! set (`/hcs20/holders?tick=pts&topic=0.0.1&page=2&pageSize=25`), so any
//! spelling of the same request finds the same file.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde::Serialize;

use std::collections::BTreeSet;

use crate::analytics::{Analytics, TokenSummary, DEFAULT_PAGE_SIZE};
use crate::message::normalise_tick;
use shared::entity::EntityId;
use shared::http::{file_name, BadParameter, Cache, Representation, JSON};
use shared::timestamp::Timestamp;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Route {
    Ticks,
    Stats,
    EcosystemStats,
    Account(EntityId),
    Holders { topic: EntityId, tick: String, page: usize, page_size: usize },
    Transactions { token: Option<(EntityId, String)>, page_size: usize },
}

/// Bounds the api applies to query parameters.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest `pageSize` of holders and transactions; the transactions
    /// bound is also how many events per kind the model keeps.
    pub max_page_size: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_page_size: 100 }
    }
}

/// Characters left as they are in a canonical query value.
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

impl Route {
    /// Parses a request. `Ok(None)`: not a section C path. `query` is the raw
    /// query string without `?`; a trailing `/` is ignored.
    pub fn parse(path: &str, query: &str, limits: Limits) -> Result<Option<Route>, BadParameter> {
        let path = path.strip_suffix('/').filter(|p| !p.is_empty()).unwrap_or(path);
        let route = match path {
            "/hcs20" => Route::Ticks,
            "/hcs20/stats" => Route::Stats,
            "/hcs20/ecosystem-stats" => Route::EcosystemStats,
            "/hcs20/holders" => Route::holders(query, limits)?,
            "/hcs20/transactions" => Route::transactions(query, limits)?,
            _ => match path.strip_prefix("/hcs20/account/") {
                Some(raw) => Route::account(&percent_encoding::percent_decode_str(raw).decode_utf8_lossy())?,
                None => return Ok(None),
            },
        };
        Ok(Some(route))
    }

    /// `/hcs20/account/{accountId}`, the id already percent-decoded.
    pub fn account(id: &str) -> Result<Route, BadParameter> {
        let account = id.parse().map_err(|_| {
            BadParameter::new(
                "accountId",
                format!("path parameter accountId must be a ledger account id shard.realm.num, got {id:?}"),
            )
        })?;
        Ok(Route::Account(account))
    }

    /// `/hcs20/holders?tick&topic[&page][&pageSize]`.
    pub fn holders(query: &str, limits: Limits) -> Result<Route, BadParameter> {
        let q = Query::parse(query)?;
        let tick = q.tick("tick")?.ok_or_else(|| BadParameter::new("tick", "query parameter tick is required"))?;
        let topic =
            q.entity("topic")?.ok_or_else(|| BadParameter::new("topic", "query parameter topic is required"))?;
        Ok(Route::Holders {
            topic,
            tick,
            page: q.number("page", 1, usize::MAX)?.unwrap_or(1),
            page_size: q.number("pageSize", 1, limits.max_page_size)?.unwrap_or(DEFAULT_PAGE_SIZE),
        })
    }

    /// `/hcs20/transactions[?tick&topic][&pageSize]`.
    pub fn transactions(query: &str, limits: Limits) -> Result<Route, BadParameter> {
        let q = Query::parse(query)?;
        let token = match (q.tick("tick")?, q.entity("topic")?) {
            (Some(tick), Some(topic)) => Some((topic, tick)),
            (None, None) => None,
            (Some(_), None) => {
                return Err(BadParameter::new("topic", "query parameter topic is required when tick is given"))
            }
            (None, Some(_)) => {
                return Err(BadParameter::new("tick", "query parameter tick is required when topic is given"))
            }
        };
        Ok(Route::Transactions {
            token,
            page_size: q.number("pageSize", 1, limits.max_page_size)?.unwrap_or(DEFAULT_PAGE_SIZE),
        })
    }

    /// The manifest key: one spelling per answer.
    pub fn canonical(&self) -> String {
        match self {
            Route::Ticks => "/hcs20".into(),
            Route::Stats => "/hcs20/stats".into(),
            Route::EcosystemStats => "/hcs20/ecosystem-stats".into(),
            Route::Account(id) => format!("/hcs20/account/{id}"),
            Route::Holders { topic, tick, page, page_size } => {
                format!("/hcs20/holders?tick={}&topic={topic}&page={page}&pageSize={page_size}", query_value(tick))
            }
            Route::Transactions { token: Some((topic, tick)), page_size } => {
                format!("/hcs20/transactions?tick={}&topic={topic}&pageSize={page_size}", query_value(tick))
            }
            Route::Transactions { token: None, page_size } => format!("/hcs20/transactions?pageSize={page_size}"),
        }
    }

    /// The file, relative to a build directory, that holds the answer.
    pub fn file(&self) -> String {
        match self {
            Route::Ticks => "hcs20/index.json".into(),
            Route::Stats => "hcs20/stats.json".into(),
            Route::EcosystemStats => "hcs20/ecosystem-stats.json".into(),
            Route::Account(id) => format!("hcs20/account/{id}.json"),
            Route::Holders { topic, tick, page, page_size } => {
                format!("hcs20/holders/{topic}/{}/{page_size}/{page}.json", file_name(tick))
            }
            Route::Transactions { token: Some((topic, tick)), page_size } => {
                format!("hcs20/transactions/{topic}/{}/{page_size}.json", file_name(tick))
            }
            Route::Transactions { token: None, page_size } => format!("hcs20/transactions/{page_size}.json"),
        }
    }

    pub fn cache(&self) -> Cache {
        match self {
            Route::Ticks => Cache::TokenLists,
            Route::Stats | Route::EcosystemStats => Cache::EcosystemStats,
            Route::Account(_) | Route::Holders { .. } => Cache::Balances,
            Route::Transactions { .. } => Cache::Transactions,
        }
    }

    /// Renders the answer. `Err` when the route names a token that does not
    /// exist.
    pub fn render(&self, analytics: &Analytics) -> Result<Representation, crate::analytics::UnknownToken> {
        let token = |topic: EntityId, tick: &str| {
            analytics
                .token_index(topic, tick)
                .ok_or_else(|| crate::analytics::UnknownToken { topic, tick: tick.to_string() })
        };
        let (body, last_modified) = match self {
            Route::Ticks => json(analytics.ticks()),
            Route::Stats => json(analytics.stats()),
            Route::EcosystemStats => json(analytics.ecosystem_stats()),
            Route::Account(id) => json(analytics.account(*id)),
            Route::Holders { topic, tick, page, page_size } => {
                json(analytics.holders(token(*topic, tick)?, *page, *page_size))
            }
            Route::Transactions { token: scope, page_size } => {
                let index = scope.as_ref().map(|(topic, tick)| token(*topic, tick)).transpose()?;
                json(analytics.transactions(index, (*page_size).min(analytics.recent_limit)))
            }
        };
        Ok(Representation { body, last_modified, content_type: JSON, cache: self.cache() })
    }

    /// Every route the generator pre-renders: the fixed ones, each account
    /// that ever held a balance, every holders page and each token's
    /// transactions at the default page size.
    pub fn all_static(analytics: &Analytics) -> Vec<Route> {
        let mut routes = Route::global_static();
        for token in &analytics.tokens {
            routes.extend(Route::token_static(token));
        }
        routes.extend(analytics.accounts().map(Route::Account));
        routes
    }

    /// The pre-rendered routes that depend on every token.
    pub fn global_static() -> Vec<Route> {
        vec![
            Route::Ticks,
            Route::Stats,
            Route::EcosystemStats,
            Route::Transactions { token: None, page_size: DEFAULT_PAGE_SIZE },
        ]
    }

    /// A token's pre-rendered routes: every holders page, and its
    /// transactions.
    pub fn token_static(token: &TokenSummary) -> impl Iterator<Item = Route> + '_ {
        let pages = (token.holders as usize).div_ceil(DEFAULT_PAGE_SIZE).max(1);
        (1..=pages)
            .map(|page| Route::Holders {
                topic: token.topic,
                tick: token.tick.clone(),
                page,
                page_size: DEFAULT_PAGE_SIZE,
            })
            .chain([Route::Transactions {
                token: Some((token.topic, token.tick.clone())),
                page_size: DEFAULT_PAGE_SIZE,
            }])
    }

    /// Whether the answer can change when these tokens and accounts change:
    /// the global routes always, a token's routes when it changed, an
    /// account's page when it changed.
    pub fn touched_by(&self, tokens: &BTreeSet<(EntityId, String)>, accounts: &BTreeSet<EntityId>) -> bool {
        match self {
            Route::Ticks | Route::Stats | Route::EcosystemStats | Route::Transactions { token: None, .. } => true,
            Route::Holders { topic, tick, .. } | Route::Transactions { token: Some((topic, tick)), .. } => {
                tokens.contains(&(*topic, tick.clone()))
            }
            Route::Account(account) => accounts.contains(account),
        }
    }
}

fn json<T: Serialize>((value, last_modified): (T, Timestamp)) -> (Vec<u8>, Timestamp) {
    (serde_json::to_vec(&value).expect("response shapes serialise"), last_modified)
}

fn query_value(text: &str) -> String {
    utf8_percent_encode(text, QUERY_VALUE).to_string()
}

/// Query parameters, decoded (`+` is a space), each allowed once.
struct Query(Vec<(String, String)>);

impl Query {
    fn parse(raw: &str) -> Result<Query, BadParameter> {
        let pairs: Vec<(String, String)> =
            form_urlencoded::parse(raw.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
        for (i, (key, _)) in pairs.iter().enumerate() {
            if pairs[..i].iter().any(|(k, _)| k == key) {
                if let Some(name) = ["tick", "topic", "page", "pageSize"].into_iter().find(|n| n == key) {
                    return Err(BadParameter::repeated(name));
                }
            }
        }
        Ok(Query(pairs))
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    fn tick(&self, name: &'static str) -> Result<Option<String>, BadParameter> {
        match self.get(name) {
            None => Ok(None),
            Some(raw) => normalise_tick(raw)
                .map(Some)
                .ok_or_else(|| BadParameter::new(name, format!("query parameter {name} must not be empty"))),
        }
    }

    fn entity(&self, name: &'static str) -> Result<Option<EntityId>, BadParameter> {
        match self.get(name) {
            None => Ok(None),
            Some(raw) => raw.parse().map(Some).map_err(|_| {
                BadParameter::new(
                    name,
                    format!("query parameter {name} must be a ledger id shard.realm.num, got {raw:?}"),
                )
            }),
        }
    }

    fn number(&self, name: &'static str, min: usize, max: usize) -> Result<Option<usize>, BadParameter> {
        self.get(name).map(|raw| shared::http::number(name, raw, min, max)).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(path: &str, query: &str, expected: Result<Option<&str>, &str>) {
        let got = Route::parse(path, query, Limits::default());
        let got = got.as_ref().map(|r| r.as_ref().map(Route::canonical)).map_err(|e| e.parameter);
        let expected = expected.map(|o| o.map(str::to_string));
        assert_eq!(got, expected, "{path}?{query}");
    }

    #[test]
    fn parses_to_canonical_routes() {
        check("/hcs20", "", Ok(Some("/hcs20")));
        check("/hcs20/", "", Ok(Some("/hcs20")));
        check("/hcs20/stats", "x=1", Ok(Some("/hcs20/stats")));
        check("/hcs20/account/0.0.123-abcde", "", Ok(Some("/hcs20/account/0.0.123")));
        check("/hcs20/account/0.0.x", "", Err("accountId"));
        check("/hcs20/account/..%2F..%2Fetc", "", Err("accountId"));
        check(
            "/hcs20/holders",
            "topic=0.0.1&tick=PTS",
            Ok(Some("/hcs20/holders?tick=pts&topic=0.0.1&page=1&pageSize=25")),
        );
        check(
            "/hcs20/holders",
            "tick=%20a+b&topic=0.0.1&page=3&pageSize=10",
            Ok(Some("/hcs20/holders?tick=a%20b&topic=0.0.1&page=3&pageSize=10")),
        );
        check("/hcs20/holders", "topic=0.0.1", Err("tick"));
        check("/hcs20/holders", "tick=pts", Err("topic"));
        check("/hcs20/holders", "tick=pts&topic=nope", Err("topic"));
        check("/hcs20/holders", "tick=pts&topic=0.0.1&page=0", Err("page"));
        check("/hcs20/holders", "tick=pts&topic=0.0.1&pageSize=101", Err("pageSize"));
        check("/hcs20/holders", "tick=pts&topic=0.0.1&pageSize=-1", Err("pageSize"));
        check("/hcs20/holders", "tick=pts&topic=0.0.1&page=1&page=2", Err("page"));
        check("/hcs20/holders", "tick=++&topic=0.0.1", Err("tick"));
        check("/hcs20/transactions", "", Ok(Some("/hcs20/transactions?pageSize=25")));
        check("/hcs20/transactions", "tick=pts", Err("topic"));
        check("/hcs20/transactions", "topic=0.0.1", Err("tick"));
        check(
            "/hcs20/transactions",
            "tick=pts&topic=0.0.1&pageSize=5",
            Ok(Some("/hcs20/transactions?tick=pts&topic=0.0.1&pageSize=5")),
        );
        check("/hcs20x", "", Ok(None));
        check("/api/v1/health", "", Ok(None));
    }

    #[test]
    fn file_names_stay_inside_their_folder() {
        let route =
            |tick: &str| Route::Holders { topic: EntityId::new(0, 0, 1), tick: tick.into(), page: 1, page_size: 25 };
        assert_eq!(route("pts").file(), "hcs20/holders/0.0.1/pts/25/1.json");
        assert_eq!(route("../x").file(), "hcs20/holders/0.0.1/%2E%2E%2Fx/25/1.json");
        assert_eq!(route("é").file(), "hcs20/holders/0.0.1/%C3%A9/25/1.json");
        assert!(route(&"x".repeat(500)).file().starts_with("hcs20/holders/0.0.1/~"));
    }
}
