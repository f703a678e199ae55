//! The HCS-20 analytics model and the queries of section C.
//!
//! One model, two ways in: the generator builds it from the rules' ledger
//! ([`Analytics::from_ledger`]), the api from a build's snapshot
//! ([`crate::tables::load_analytics`]). Both go through
//! [`Analytics::from_parts`], and every route is answered by the functions
//! here, so a pre-rendered file and a live answer for other parameters can
//! never disagree.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::{Event, EventKind, Ledger, Token};
use shared::entity::EntityId;
use shared::timestamp::Timestamp;

/// Default page size of `/hcs20/holders` and `/hcs20/transactions`.
pub const DEFAULT_PAGE_SIZE: usize = 25;

/// A deployed token with its counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenSummary {
    pub topic: EntityId,
    pub tick: String,
    pub name: String,
    pub max: u64,
    pub lim: Option<u64>,
    pub memo: Option<String>,
    pub metadata: Option<String>,
    pub deployed_at: Timestamp,
    pub supply: u64,
    pub mints: u64,
    pub burns: u64,
    pub transfers: u64,
    pub holders: u64,
    pub last_change: Timestamp,
}

impl From<&Token> for TokenSummary {
    fn from(t: &Token) -> TokenSummary {
        TokenSummary {
            topic: t.topic,
            tick: t.tick.clone(),
            name: t.name.clone(),
            max: t.max,
            lim: t.lim,
            memo: t.memo.clone(),
            metadata: t.metadata.clone(),
            deployed_at: t.deployed_at,
            supply: t.supply(),
            mints: t.mints,
            burns: t.burns,
            transfers: t.transfers,
            holders: t.holders,
            last_change: t.last_change,
        }
    }
}

/// A balance, zero included: an account that once held a token keeps its
/// page, and the time it last changed is that page's `Last-Modified`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HoldingRow {
    pub topic: EntityId,
    pub tick: String,
    pub account: EntityId,
    pub balance: u64,
    pub updated_at: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRow {
    pub topic: EntityId,
    pub tick: String,
    pub kind: EventKind,
    pub amount: u64,
    pub from: Option<EntityId>,
    pub to: Option<EntityId>,
    pub payer: EntityId,
    pub memo: Option<String>,
    pub consensus: Timestamp,
    pub sequence: u64,
}

/// The newest events of one scope (a token, or the whole ecosystem), newest
/// first, at most `recent_limit` of each kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Recent {
    mints: Vec<usize>,
    burns: Vec<usize>,
    transfers: Vec<usize>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Analytics {
    /// Ordered by deploy time, then topic and tick.
    pub tokens: Vec<TokenSummary>,
    index: HashMap<(EntityId, String), usize>,
    /// Per token: positive balances, largest first, then by account.
    holders: Vec<Vec<(EntityId, u64)>>,
    /// Every account that ever held a token: (token, balance) by token
    /// order, and the time its balances last changed.
    accounts: BTreeMap<EntityId, (Vec<(usize, u64)>, Timestamp)>,
    events: Vec<EventRow>,
    recent: Vec<Recent>,
    ecosystem: Recent,
    /// Consensus time of the newest valid operation.
    pub newest: Timestamp,
    /// Accounts with a positive balance of any token. Counted from the
    /// holdings given to [`Analytics::from_parts`]; an incremental build,
    /// which loads only some, sets it from the snapshot instead.
    pub total_holders: usize,
    /// How many events of each kind are kept per scope: the largest
    /// `pageSize` `/hcs20/transactions` can answer.
    pub recent_limit: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no token {tick:?} on topic {topic}")]
pub struct UnknownToken {
    pub topic: EntityId,
    pub tick: String,
}

// Response shapes of section C (spec section 2). Field names are the wire
// names; `docs/hcs20.md` documents the ones the spec leaves open.

#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountBalances {
    pub success: bool,
    pub account_id: String,
    pub balances: Vec<AccountBalance>,
    pub count: usize,
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct AccountBalance {
    pub tick: String,
    pub topic: String,
    pub balance: u64,
    pub holder: String,
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct Stats {
    pub success: bool,
    pub data: StatsData,
    pub timestamp: String,
}

#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatsData {
    pub total_ticks: usize,
    pub total_mints: u64,
    pub total_burns: u64,
    pub total_transfers: u64,
    pub total_holders: usize,
}

#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Tick {
    pub tick: String,
    pub topic: String,
    pub max_supply: u64,
    pub decimals: u8,
    pub memo: String,
    pub holders: u64,
    pub mints: u64,
    #[serde(rename = "_created_at")]
    pub created_at: String,
}

#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EcosystemStats {
    pub success: bool,
    pub top_ticks_by_holders: Vec<TickByHolders>,
    pub top_ticks_by_mints: Vec<TickByMints>,
}

#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TickByHolders {
    pub tick: String,
    pub topic: String,
    pub holder_count: u64,
}

#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TickByMints {
    pub tick: String,
    pub topic: String,
    pub mint_count: u64,
}

#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HoldersPage {
    pub success: bool,
    pub tick: String,
    pub topic: String,
    pub holders: Vec<Holder>,
    pub pagination: Pagination,
}

#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Holder {
    pub holder_id: String,
    pub balance: u64,
    pub tick: String,
    pub topic: String,
}

#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Pagination {
    pub page: usize,
    pub page_size: usize,
    pub total: usize,
    pub total_pages: usize,
    pub has_next_page: bool,
    pub has_previous_page: bool,
}

#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Transactions {
    pub success: bool,
    pub tick: Option<String>,
    pub topic: Option<String>,
    pub page_size: usize,
    pub mints: Vec<Transaction>,
    pub burns: Vec<Transaction>,
    pub transfers: Vec<Transaction>,
    pub total_mints: u64,
    pub total_burns: u64,
    pub total_transfers: u64,
}

/// One mint, burn or transfer. `from` is null for a mint, `to` for a burn.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Transaction {
    pub id: String,
    pub op: &'static str,
    pub tick: String,
    pub topic: String,
    pub amount: u64,
    pub from: Option<String>,
    pub to: Option<String>,
    pub payer: String,
    pub memo: Option<String>,
    pub consensus_timestamp: String,
    pub timestamp: String,
    pub sequence_number: u64,
}

/// How many entries each ranking of `/hcs20/ecosystem-stats` lists.
pub const RANKING_SIZE: usize = 10;

impl Analytics {
    /// The model of a ledger the rules just computed.
    pub fn from_ledger(ledger: &Ledger, recent_limit: usize) -> Analytics {
        let tokens = ledger.tokens.iter().map(TokenSummary::from).collect();
        let holdings = ledger
            .balances
            .iter()
            .map(|((token, account), h)| {
                let t = &ledger.tokens[token.0 as usize];
                HoldingRow {
                    topic: t.topic,
                    tick: t.tick.clone(),
                    account: *account,
                    balance: h.balance,
                    updated_at: h.updated_at,
                }
            })
            .collect();
        let events = recent_events(ledger, recent_limit);
        Analytics::from_parts(tokens, holdings, events, recent_limit)
    }

    /// Assembles the model from rows. `events` must hold at least the
    /// newest `recent_limit` events of each kind per token and for the whole
    /// ecosystem; more are allowed and dropped.
    pub fn from_parts(
        mut tokens: Vec<TokenSummary>,
        holdings: Vec<HoldingRow>,
        mut events: Vec<EventRow>,
        recent_limit: usize,
    ) -> Analytics {
        tokens.sort_by(|a, b| (a.deployed_at, a.topic, &a.tick).cmp(&(b.deployed_at, b.topic, &b.tick)));
        let index: HashMap<(EntityId, String), usize> =
            tokens.iter().enumerate().map(|(i, t)| ((t.topic, t.tick.clone()), i)).collect();

        let mut holders: Vec<Vec<(EntityId, u64)>> = vec![Vec::new(); tokens.len()];
        let mut accounts: BTreeMap<EntityId, (Vec<(usize, u64)>, Timestamp)> = BTreeMap::new();
        for row in holdings {
            let Some(&i) = index.get(&(row.topic, row.tick)) else { continue };
            if row.balance > 0 {
                holders[i].push((row.account, row.balance));
            }
            let entry = accounts.entry(row.account).or_insert_with(|| (Vec::new(), row.updated_at));
            entry.0.push((i, row.balance));
            entry.1 = entry.1.max(row.updated_at);
        }
        for list in &mut holders {
            list.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        }
        for (list, _) in accounts.values_mut() {
            list.sort_unstable();
        }

        events.sort_unstable_by_key(|e| std::cmp::Reverse((e.consensus, e.topic, e.sequence)));
        events.dedup_by(|a, b| (a.topic, a.sequence) == (b.topic, b.sequence));
        let mut recent = vec![Recent::default(); tokens.len()];
        let mut ecosystem = Recent::default();
        let mut kept = Vec::new();
        for event in events {
            let Some(&i) = index.get(&(event.topic, event.tick.clone())) else { continue };
            let position = kept.len();
            let mut keep = false;
            for scope in [&mut recent[i], &mut ecosystem] {
                let list = scope.list_mut(event.kind);
                if list.len() < recent_limit {
                    list.push(position);
                    keep = true;
                }
            }
            if keep {
                kept.push(event);
            }
        }

        let newest = tokens.iter().map(|t| t.last_change).max().unwrap_or_default();
        let total_holders = accounts.values().filter(|(list, _)| list.iter().any(|(_, balance)| *balance > 0)).count();
        Analytics {
            tokens,
            index,
            holders,
            accounts,
            events: kept,
            recent,
            ecosystem,
            newest,
            total_holders,
            recent_limit,
        }
    }

    pub fn token_index(&self, topic: EntityId, tick: &str) -> Option<usize> {
        self.index.get(&(topic, tick.to_string())).copied()
    }

    /// Every account that ever held a balance: each has a page.
    pub fn accounts(&self) -> impl Iterator<Item = EntityId> + '_ {
        self.accounts.keys().copied()
    }

    /// `/hcs20/account/{accountId}`: positive balances by token order. An
    /// account that never held anything gets an empty list.
    pub fn account(&self, account: EntityId) -> (AccountBalances, Timestamp) {
        let (balances, updated) = match self.accounts.get(&account) {
            Some((list, updated)) => (
                list.iter()
                    .filter(|(_, balance)| *balance > 0)
                    .map(|&(i, balance)| AccountBalance {
                        tick: self.tokens[i].tick.clone(),
                        topic: self.tokens[i].topic.to_string(),
                        balance,
                        holder: account.to_string(),
                    })
                    .collect::<Vec<_>>(),
                *updated,
            ),
            None => (Vec::new(), self.newest),
        };
        let count = balances.len();
        (AccountBalances { success: true, account_id: account.to_string(), balances, count }, updated)
    }

    /// `/hcs20/stats`. `timestamp` is the newest valid operation's time.
    pub fn stats(&self) -> (Stats, Timestamp) {
        let sum = |f: fn(&TokenSummary) -> u64| self.tokens.iter().map(f).sum();
        let data = StatsData {
            total_ticks: self.tokens.len(),
            total_mints: sum(|t| t.mints),
            total_burns: sum(|t| t.burns),
            total_transfers: sum(|t| t.transfers),
            total_holders: self.total_holders,
        };
        (Stats { success: true, data, timestamp: self.newest.iso8601() }, self.newest)
    }

    /// `/hcs20`: every token, in deploy order.
    pub fn ticks(&self) -> (Vec<Tick>, Timestamp) {
        let ticks = self
            .tokens
            .iter()
            .map(|t| Tick {
                tick: t.tick.clone(),
                topic: t.topic.to_string(),
                max_supply: t.max,
                decimals: 0,
                memo: t.memo.clone().unwrap_or_default(),
                holders: t.holders,
                mints: t.mints,
                created_at: t.deployed_at.iso8601(),
            })
            .collect();
        (ticks, self.newest)
    }

    /// `/hcs20/ecosystem-stats`: the top tokens by holders and by mints;
    /// ties go to the older token.
    pub fn ecosystem_stats(&self) -> (EcosystemStats, Timestamp) {
        let top = |key: fn(&TokenSummary) -> u64| {
            let mut order: Vec<&TokenSummary> = self.tokens.iter().collect();
            order.sort_by_key(|t| std::cmp::Reverse(key(t))); // stable: deploy order breaks ties
            order.truncate(RANKING_SIZE);
            order
        };
        let stats = EcosystemStats {
            success: true,
            top_ticks_by_holders: top(|t| t.holders)
                .into_iter()
                .map(|t| TickByHolders { tick: t.tick.clone(), topic: t.topic.to_string(), holder_count: t.holders })
                .collect(),
            top_ticks_by_mints: top(|t| t.mints)
                .into_iter()
                .map(|t| TickByMints { tick: t.tick.clone(), topic: t.topic.to_string(), mint_count: t.mints })
                .collect(),
        };
        (stats, self.newest)
    }

    /// `/hcs20/holders`: one page of a token's holders. A page past the end
    /// is empty, with the same metadata.
    pub fn holders(&self, token: usize, page: usize, page_size: usize) -> (HoldersPage, Timestamp) {
        let t = &self.tokens[token];
        let all = &self.holders[token];
        let total_pages = all.len().div_ceil(page_size);
        let start = (page - 1).saturating_mul(page_size).min(all.len());
        let end = start.saturating_add(page_size).min(all.len());
        let holders = all[start..end]
            .iter()
            .map(|(account, balance)| Holder {
                holder_id: account.to_string(),
                balance: *balance,
                tick: t.tick.clone(),
                topic: t.topic.to_string(),
            })
            .collect();
        let pagination = Pagination {
            page,
            page_size,
            total: all.len(),
            total_pages,
            has_next_page: page < total_pages,
            has_previous_page: page > 1,
        };
        let page = HoldersPage { success: true, tick: t.tick.clone(), topic: t.topic.to_string(), holders, pagination };
        (page, t.last_change)
    }

    /// `/hcs20/transactions`: the newest `page_size` mints, burns and
    /// transfers of one token, or of all tokens when `token` is `None`.
    /// `page_size` must not exceed [`Analytics::recent_limit`].
    pub fn transactions(&self, token: Option<usize>, page_size: usize) -> (Transactions, Timestamp) {
        let (scope, totals, last_change, tick, topic) = match token {
            Some(i) => {
                let t = &self.tokens[i];
                (
                    &self.recent[i],
                    (t.mints, t.burns, t.transfers),
                    t.last_change,
                    Some(t.tick.clone()),
                    Some(t.topic.to_string()),
                )
            }
            None => {
                let sum = |f: fn(&TokenSummary) -> u64| self.tokens.iter().map(f).sum::<u64>();
                (&self.ecosystem, (sum(|t| t.mints), sum(|t| t.burns), sum(|t| t.transfers)), self.newest, None, None)
            }
        };
        let list = |positions: &[usize]| -> Vec<Transaction> {
            positions.iter().take(page_size).map(|&p| self.transaction(&self.events[p])).collect()
        };
        let transactions = Transactions {
            success: true,
            tick,
            topic,
            page_size,
            mints: list(&scope.mints),
            burns: list(&scope.burns),
            transfers: list(&scope.transfers),
            total_mints: totals.0,
            total_burns: totals.1,
            total_transfers: totals.2,
        };
        (transactions, last_change)
    }

    fn transaction(&self, e: &EventRow) -> Transaction {
        Transaction {
            id: format!("{}-{}", e.topic, e.sequence),
            op: e.kind.as_str(),
            tick: e.tick.clone(),
            topic: e.topic.to_string(),
            amount: e.amount,
            from: e.from.map(|a| a.to_string()),
            to: e.to.map(|a| a.to_string()),
            payer: e.payer.to_string(),
            memo: e.memo.clone(),
            consensus_timestamp: e.consensus.to_string(),
            timestamp: e.consensus.iso8601(),
            sequence_number: e.sequence,
        }
    }

    /// The kept events, for the snapshot's `recent_events` table.
    pub fn recent_events(&self) -> &[EventRow] {
        &self.events
    }
}

impl Recent {
    fn list_mut(&mut self, kind: EventKind) -> &mut Vec<usize> {
        match kind {
            EventKind::Mint => &mut self.mints,
            EventKind::Burn => &mut self.burns,
            EventKind::Transfer => &mut self.transfers,
        }
    }
}

/// The newest `limit` events of each kind per token and for the ecosystem,
/// walking the ledger's events from the newest.
fn recent_events(ledger: &Ledger, limit: usize) -> Vec<EventRow> {
    let mut per_scope: HashMap<(Option<u32>, EventKind), usize> = HashMap::new();
    let mut out = Vec::new();
    for event in ledger.events.iter().rev() {
        let mut keep = false;
        for scope in [Some(event.token.0), None] {
            let n = per_scope.entry((scope, event.kind)).or_default();
            if *n < limit {
                *n += 1;
                keep = true;
            }
        }
        if keep {
            out.push(EventRow::of(ledger, event));
        }
    }
    out
}

impl EventRow {
    /// A ledger's event as a row of the model.
    pub fn of(ledger: &Ledger, event: &Event) -> EventRow {
        EventRow {
            topic: event.topic,
            tick: ledger.tokens[event.token.0 as usize].tick.clone(),
            kind: event.kind,
            amount: event.amount,
            from: event.from,
            to: event.to,
            payer: event.payer,
            memo: event.memo.clone(),
            consensus: event.consensus,
            sequence: event.sequence,
        }
    }
}
