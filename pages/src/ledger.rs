//! Section C's pages: the token list, a page per token (and per further
//! page of its holders), a page per account. Tables come from the same
//! [`Analytics`] functions as the JSON routes; the charts from the
//! warehouse's mints and burns per day.

use std::collections::HashMap;

use minijinja::{context, Value};

use super::{markup, routes, svg, Made, Page};
use hcs20::analytics::{Analytics, TokenSummary};
use hcs20::routes::Route;
use hcs20::tables::SupplyChange;
use shared::entity::EntityId;
use shared::http::Cache;
use shared::timestamp::Timestamp;

const MINUTE_NS: u64 = 60 * 1_000_000_000;
/// Bars of the mints chart at most, ending with the data's newest.
const BARS: usize = 60;
/// Points of a supply line at most.
const LINE_POINTS: usize = 120;
/// Newest events of each kind on a token's page.
const RECENT: usize = 10;

/// The step of a token's charts: the shortest of these that covers its
/// life in at most [`BARS`] steps (the longest, beyond).
const UNITS: [(i64, &str); 4] = [(1, "minute"), (60, "hour"), (1440, "day"), (10_080, "week")];

/// A token's supply at the end of each step (see [`UNITS`]) from its
/// deployment to the data's newest time, and what was minted in each.
struct History {
    /// Minutes per step, and the step's name.
    unit: (i64, &'static str),
    /// The first step's first minute.
    start: i64,
    supply: Vec<u64>,
    minted: Vec<u64>,
}

impl History {
    fn of(token: &TokenSummary, changes: &[&SupplyChange], newest: Timestamp) -> History {
        let first = (token.deployed_at.0 / MINUTE_NS) as i64;
        let last = ((newest.0 / MINUTE_NS) as i64).max(first);
        let unit = *UNITS.iter().find(|(m, _)| (last - first) / m < BARS as i64).unwrap_or(&UNITS[3]);
        let start = first - first.rem_euclid(unit.0);
        let steps = ((last - start) / unit.0 + 1) as usize;
        let (mut supply, mut minted) = (vec![0u64; steps], vec![0u64; steps]);
        let mut running: i128 = 0;
        let mut next = changes.iter().peekable();
        for step in 0..steps {
            let end = start + (step as i64 + 1) * unit.0;
            while let Some(c) = next.next_if(|c| c.minute < end) {
                running += c.minted as i128 - c.burned as i128;
                minted[step] += c.minted;
            }
            supply[step] = running.max(0) as u64;
        }
        History { unit, start, supply, minted }
    }

    /// When step `step` begins, in ISO 8601 to the minute.
    fn at(&self, step: usize) -> String {
        let minute = (self.start + step as i64 * self.unit.0).max(0) as u64;
        let iso = Timestamp(minute * MINUTE_NS).iso8601();
        match self.unit.0 {
            1 | 60 => format!("{} {} UTC", &iso[..10], &iso[11..16]),
            _ => iso[..10].to_string(),
        }
    }

    /// The first and last step's starts, in words.
    fn span(&self) -> String {
        format!("from {} to {}", self.at(0), self.at(self.supply.len() - 1))
    }
}

pub(super) fn pages(analytics: &Analytics, changes: &[SupplyChange]) -> Vec<Page> {
    let mut by_token: HashMap<(EntityId, &str), Vec<&SupplyChange>> = HashMap::new();
    for d in changes {
        by_token.entry((d.topic, d.tick.as_str())).or_default().push(d);
    }
    let histories: Vec<History> = analytics
        .tokens
        .iter()
        .map(|t| History::of(t, by_token.get(&(t.topic, t.tick.as_str())).map_or(&[][..], |v| v), analytics.newest))
        .collect();

    let mut pages = vec![list(analytics, &histories)];
    for (i, token) in analytics.tokens.iter().enumerate().filter(|(_, t)| routes::addressable(&t.tick)) {
        let count = (token.holders as usize).div_ceil(routes::HOLDERS_PER_PAGE).max(1);
        pages.extend((1..=count).map(|page| token_page(analytics, i, page, count, &histories[i])));
    }
    pages.extend(analytics.accounts().map(|id| account(analytics, id)));
    pages
}

fn href(token: &TokenSummary) -> Option<String> {
    routes::addressable(&token.tick).then(|| routes::token(token.topic, &token.tick, 1).0)
}

fn list(analytics: &Analytics, histories: &[History]) -> Page {
    let mut order: Vec<usize> = (0..analytics.tokens.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&analytics.tokens[a], &analytics.tokens[b]);
        b.holders.cmp(&a.holders).then_with(|| a.tick.cmp(&b.tick)).then_with(|| a.topic.cmp(&b.topic))
    });
    let tokens: Vec<Value> = order
        .iter()
        .map(|&i| {
            let t = &analytics.tokens[i];
            let label = format!("Supply of {} {}", t.tick, histories[i].span());
            let line = svg::line(&svg::downsample(&histories[i].supply, 60), 120, 24, &label);
            context! {
                tick => t.tick, name => t.name, topic => t.topic.to_string(), href => href(t),
                holders => t.holders, supply => t.supply, max => t.max, mints => t.mints,
                sparkline => markup(line),
            }
        })
        .collect();
    let topics: std::collections::BTreeSet<EntityId> = analytics.tokens.iter().map(|t| t.topic).collect();
    let (_, last_modified) = analytics.ticks();
    Page {
        route: routes::TOKENS.into(),
        file: routes::fixed_file(routes::TOKENS),
        template: "tokens.html",
        context: context! { tokens, topics => topics.len() },
        json: Some(Route::Ticks.canonical()),
        last_modified,
        cache: Cache::TokenLists,
        made: Made::Build,
    }
}

fn token_page(analytics: &Analytics, i: usize, page: usize, pages: usize, history: &History) -> Page {
    let t = &analytics.tokens[i];
    let topic = t.topic.to_string();
    let size = routes::HOLDERS_PER_PAGE;
    let (holders, last_modified) = analytics.holders(i, page, size);
    let rows: Vec<Value> = holders
        .holders
        .iter()
        .enumerate()
        .map(|(k, h)| {
            let share = match t.supply {
                0 => "—".to_string(),
                supply => format!("{:.2}%", h.balance as f64 * 100.0 / supply as f64),
            };
            context! {
                rank => (page - 1) * size + k + 1, account => h.holder_id, balance => h.balance, share,
                href => h.holder_id.parse::<EntityId>().ok().map(|id| routes::account(id).0),
            }
        })
        .collect();
    let link = |p: usize| (1..=pages).contains(&p).then(|| format!("{}#holders", routes::token(t.topic, &t.tick, p).0));
    let summary = context! {
        tick => t.tick, name => t.name, topic, supply => t.supply, max => t.max, lim => t.lim,
        memo => t.memo, holders => t.holders, mints => t.mints, burns => t.burns, transfers => t.transfers,
        deployed => t.deployed_at.iso8601(), last_change => t.last_change.iso8601(),
    };
    let mut context = context! {
        t => summary, page, pages, holders, rows, previous => link(page - 1), next => link(page + 1),
    };
    if page == 1 {
        let (recent, _) = analytics.transactions(Some(i), RECENT.min(analytics.recent_limit));
        let kinds = [
            ("mint", "mints", recent.mints, recent.total_mints, false, true),
            ("burn", "burns", recent.burns, recent.total_burns, true, false),
            ("transfer", "transfers", recent.transfers, recent.total_transfers, true, true),
        ];
        let recent: Vec<Value> = kinds
            .into_iter()
            .map(|(one, name, rows, total, from, to)| context! { one, name, rows, total, from, to })
            .collect();
        let unit = history.unit.1;
        let supply_caption =
            format!("Supply at the end of each {unit} {}: {} now.", history.span(), super::num(t.supply.into()));
        let supply_chart = svg::line(
            &svg::downsample(&history.supply, LINE_POINTS),
            640,
            160,
            &format!("Supply of {} over time. {supply_caption}", t.tick),
        );
        let skip = history.minted.len().saturating_sub(BARS);
        let window = &history.minted[skip..];
        let mints_caption = format!(
            "Amount minted per {unit} over the {} {} up to {}: {} in all.",
            window.len(),
            if window.len() == 1 { unit.to_string() } else { format!("{unit}s") },
            history.at(history.minted.len() - 1),
            super::num(window.iter().sum::<u64>().into())
        );
        let mints_chart = svg::bars(window, 640, 120, &format!("Mints of {} per {unit}. {mints_caption}", t.tick));
        context = context! {
            recent, supply_chart => markup(supply_chart), supply_caption,
            mints_chart => markup(mints_chart), mints_caption, ..context
        };
    }
    let (route, file) = routes::token(t.topic, &t.tick, page);
    Page {
        route,
        file,
        template: "token.html",
        context,
        json: Some(Route::Holders { topic: t.topic, tick: t.tick.clone(), page, page_size: size }.canonical()),
        last_modified,
        cache: Cache::Balances,
        made: Made::Build,
    }
}

fn account(analytics: &Analytics, id: EntityId) -> Page {
    let (balances, last_modified) = analytics.account(id);
    let rows: Vec<Value> = balances
        .balances
        .iter()
        .map(|b| {
            let topic: Option<EntityId> = b.topic.parse().ok();
            let href = topic.filter(|_| routes::addressable(&b.tick)).map(|topic| routes::token(topic, &b.tick, 1).0);
            context! { tick => b.tick, topic => b.topic, balance => b.balance, href }
        })
        .collect();
    let (route, file) = routes::account(id);
    Page {
        route,
        file,
        template: "account.html",
        context: context! { account => id.to_string(), balances, rows },
        json: Some(Route::Account(id).canonical()),
        last_modified,
        cache: Cache::Balances,
        made: Made::Build,
    }
}
