//! The HCS-20 state machine: tokens keyed by (topic, tick), balances, and
//! the events that changed them, applied in global consensus order.

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashMap as HashMap;

use super::chunks::Envelope;
use super::message::{Decoded, OpKind, Operation, Reason, Rejection};
use super::verdict::OperationRow;
use shared::entity::EntityId;
use shared::timestamp::Timestamp;

/// The two well-known topics. Every other topic is learnt from `register`
/// messages on the registry topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Topics {
    pub public: EntityId,
    pub registry: EntityId,
}

impl Topics {
    /// Hedera mainnet's public and registry topics.
    pub const MAINNET: Topics =
        Topics { public: EntityId::new(0, 0, 4_350_190), registry: EntityId::new(0, 0, 4_362_300) };
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicInfo {
    pub id: EntityId,
    /// A private topic has a submit key, so every message on it is
    /// authorised; on a public topic the payer must be the sender.
    pub private: bool,
    /// Name given by the `register` message; `None` for the two well-known
    /// topics.
    pub name: Option<String>,
    pub registered_at: Option<Timestamp>,
}

/// Index of a token in [`Ledger::tokens`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TokenId(pub u32);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    pub topic: EntityId,
    pub tick: String,
    pub name: String,
    pub max: u64,
    pub lim: Option<u64>,
    pub metadata: Option<String>,
    pub memo: Option<String>,
    pub deployed_at: Timestamp,
    /// Total ever minted; `max` caps this, so burnt points are not
    /// mintable again.
    pub minted: u64,
    pub burned: u64,
    pub mints: u64,
    pub burns: u64,
    pub transfers: u64,
    /// Accounts with a balance above zero.
    pub holders: u64,
    /// Consensus time of the last valid operation on this token.
    pub last_change: Timestamp,
}

impl Token {
    pub fn supply(&self) -> u64 {
        self.minted - self.burned
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holding {
    pub balance: u64,
    /// Consensus time of the last event that changed this balance.
    pub updated_at: Timestamp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    Mint,
    Burn,
    Transfer,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Mint => "mint",
            EventKind::Burn => "burn",
            EventKind::Transfer => "transfer",
        }
    }
}

/// A valid mint, burn or transfer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub token: TokenId,
    pub kind: EventKind,
    pub amount: u64,
    pub from: Option<EntityId>,
    pub to: Option<EntityId>,
    pub payer: EntityId,
    pub memo: Option<String>,
    pub consensus: Timestamp,
    pub topic: EntityId,
    pub sequence: u64,
}

#[derive(Clone, Debug)]
pub struct Ledger {
    pub well_known: Topics,
    pub topics: BTreeMap<EntityId, TopicInfo>,
    pub tokens: Vec<Token>,
    /// Topic, then tick: looked up by `&str`, with no key to build.
    token_index: HashMap<EntityId, HashMap<String, TokenId>>,
    pub balances: HashMap<(TokenId, EntityId), Holding>,
    pub events: Vec<Event>,
    /// Consensus time of the last message applied, valid or not.
    pub last_applied: Option<Timestamp>,
    /// What changed since tracking was switched on: what an incremental
    /// build re-renders and writes to its snapshot.
    pub changes: Option<Changes>,
}

/// Tokens and balances an incremental run changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Tokens deployed or changed (supply, counters, holders).
    pub tokens: BTreeSet<TokenId>,
    /// (token, account) balances changed.
    pub balances: BTreeSet<(TokenId, EntityId)>,
    /// Index into [`Ledger::events`] of the first new event.
    pub first_event: usize,
}

impl Changes {
    pub fn accounts(&self) -> BTreeSet<EntityId> {
        self.balances.iter().map(|(_, account)| *account).collect()
    }
}

impl Ledger {
    pub fn new(well_known: Topics) -> Ledger {
        let mut topics = BTreeMap::new();
        for id in [well_known.public, well_known.registry] {
            topics.insert(id, TopicInfo { id, private: false, name: None, registered_at: None });
        }
        Ledger {
            well_known,
            topics,
            tokens: Vec::new(),
            token_index: HashMap::default(),
            balances: HashMap::default(),
            events: Vec::new(),
            last_applied: None,
            changes: None,
        }
    }

    /// A ledger resumed from a snapshot: every topic and token, and the
    /// balances the caller will touch (a balance not given is zero, so the
    /// caller loads every balance the coming messages name). Changes are
    /// tracked from here on.
    pub fn resume(
        well_known: Topics,
        topics: Vec<TopicInfo>,
        tokens: Vec<Token>,
        balances: Vec<((EntityId, String), EntityId, Holding)>,
        last_applied: Option<Timestamp>,
    ) -> Ledger {
        let mut ledger = Ledger::new(well_known);
        ledger.topics.extend(topics.into_iter().map(|t| (t.id, t)));
        for token in tokens {
            let id = TokenId(ledger.tokens.len() as u32);
            ledger.token_index.entry(token.topic).or_default().insert(token.tick.clone(), id);
            ledger.tokens.push(token);
        }
        for ((topic, tick), account, holding) in balances {
            if let Some(id) = ledger.token(topic, &tick) {
                ledger.balances.insert((id, account), holding);
            }
        }
        ledger.last_applied = last_applied;
        ledger.changes = Some(Changes::default());
        ledger
    }

    pub fn token(&self, topic: EntityId, tick: &str) -> Option<TokenId> {
        self.token_index.get(&topic).and_then(|ticks| ticks.get(tick)).copied()
    }

    pub fn balance(&self, token: TokenId, account: EntityId) -> u64 {
        self.balances.get(&(token, account)).map_or(0, |h| h.balance)
    }

    /// Registers the topics announced on the registry topic before any token
    /// operation is applied. A topic's privacy is a property of the topic
    /// (its submit key), so it governs the topic's messages from the first
    /// one, including those sent before the announcement.
    pub fn learn_topics<'a>(&mut self, messages: impl Iterator<Item = (&'a Envelope<'a>, &'a Decoded)>) {
        for (envelope, decoded) in messages.filter(|(e, _)| e.topic == self.well_known.registry) {
            if let (_, Ok(Operation::Register { topic, private, name, .. })) = decoded {
                if !self.topics.contains_key(topic) {
                    let info = TopicInfo {
                        id: *topic,
                        private: *private,
                        name: Some(name.clone()),
                        registered_at: Some(envelope.consensus),
                    };
                    self.topics.insert(*topic, info);
                }
            }
        }
    }

    /// Applies one complete message, its body already decoded, and says
    /// what became of it.
    pub fn apply_decoded(&mut self, envelope: &Envelope, (header, decoded): Decoded) -> OperationRow {
        self.last_applied = Some(self.last_applied.map_or(envelope.consensus, |t| t.max(envelope.consensus)));
        let mut row = OperationRow {
            topic: envelope.topic,
            sequence: envelope.sequence,
            consensus: envelope.consensus,
            payer: envelope.payer,
            chunks: envelope.chunks,
            op: header.op,
            tick: header.tick,
            amount: None,
            from: None,
            to: None,
            memo: None,
            rejection: None,
        };
        let operation = match decoded {
            Ok(operation) => operation,
            Err(rejection) => {
                row.rejection = Some(rejection);
                return row;
            }
        };
        match &operation {
            Operation::Mint { amount, to, .. } => (row.amount, row.to) = (Some(*amount), Some(*to)),
            Operation::Burn { amount, from, .. } => (row.amount, row.from) = (Some(*amount), Some(*from)),
            Operation::Transfer { amount, from, to, .. } => {
                (row.amount, row.from, row.to) = (Some(*amount), Some(*from), Some(*to))
            }
            Operation::Deploy { max, .. } => row.amount = Some(*max),
            Operation::Register { .. } => {}
        }
        row.rejection = self.check_and_apply(envelope, &operation).err();
        // The row takes the operation's tick and memo rather than copies.
        (row.tick, row.memo) = match operation {
            Operation::Deploy { tick, memo, .. }
            | Operation::Mint { tick, memo, .. }
            | Operation::Burn { tick, memo, .. }
            | Operation::Transfer { tick, memo, .. } => (Some(tick), memo),
            Operation::Register { memo, .. } => (None, memo),
        };
        row
    }

    fn check_and_apply(&mut self, envelope: &Envelope, operation: &Operation) -> Result<(), Rejection> {
        let on_registry = envelope.topic == self.well_known.registry;
        if let Operation::Register { topic, .. } = operation {
            if !on_registry {
                return Err(Rejection::new(Reason::WrongTopic));
            }
            if *topic == self.well_known.public || *topic == self.well_known.registry {
                return Err(Rejection::new(Reason::ReservedTopic));
            }
            // `learn_topics` recorded the first registration of each topic;
            // any other registration of it is a repeat.
            let first = self.topics.get(topic).and_then(|t| t.registered_at);
            if first != Some(envelope.consensus) {
                return Err(Rejection::new(Reason::TopicAlreadyRegistered));
            }
            return Ok(());
        }
        if on_registry {
            return Err(Rejection::new(Reason::WrongTopic));
        }
        let private = match self.topics.get(&envelope.topic) {
            Some(info) => info.private,
            None => return Err(Rejection::new(Reason::UnknownTopic)),
        };
        let authorised = |from: EntityId| private || envelope.payer == from;
        let at = envelope.consensus;
        let kind = operation.kind();
        match operation {
            Operation::Deploy { tick, name, max, lim, metadata, memo } => {
                if self.token(envelope.topic, tick).is_some() {
                    return Err(Rejection::new(Reason::TickExists));
                }
                let id = TokenId(self.tokens.len() as u32);
                self.tokens.push(Token {
                    topic: envelope.topic,
                    tick: tick.clone(),
                    name: name.clone(),
                    max: *max,
                    lim: *lim,
                    metadata: metadata.clone(),
                    memo: memo.clone(),
                    deployed_at: at,
                    minted: 0,
                    burned: 0,
                    mints: 0,
                    burns: 0,
                    transfers: 0,
                    holders: 0,
                    last_change: at,
                });
                self.token_index.entry(envelope.topic).or_default().insert(tick.clone(), id);
                self.touch(id, None);
                Ok(())
            }
            &Operation::Mint { ref tick, amount, to, ref memo } => {
                let id = self.existing(envelope.topic, tick)?;
                let token = &self.tokens[id.0 as usize];
                if token.lim.is_some_and(|lim| amount > lim) {
                    return Err(Rejection::new(Reason::ExceedsLimit));
                }
                if token.minted.checked_add(amount).is_none_or(|total| total > token.max) {
                    return Err(Rejection::new(Reason::ExceedsMaxSupply));
                }
                self.credit(id, to, amount, at);
                let token = &mut self.tokens[id.0 as usize];
                token.minted += amount;
                token.mints += 1;
                self.record(envelope, id, kind, amount, None, Some(to), memo.clone());
                Ok(())
            }
            &Operation::Burn { ref tick, amount, from, ref memo } => {
                let id = self.existing(envelope.topic, tick)?;
                if !authorised(from) {
                    return Err(Rejection::new(Reason::PayerNotSender));
                }
                self.debit(id, from, amount, at)?;
                let token = &mut self.tokens[id.0 as usize];
                token.burned += amount;
                token.burns += 1;
                self.record(envelope, id, kind, amount, Some(from), None, memo.clone());
                Ok(())
            }
            &Operation::Transfer { ref tick, amount, from, to, ref memo } => {
                let id = self.existing(envelope.topic, tick)?;
                if !authorised(from) {
                    return Err(Rejection::new(Reason::PayerNotSender));
                }
                self.debit(id, from, amount, at)?;
                self.credit(id, to, amount, at);
                self.tokens[id.0 as usize].transfers += 1;
                self.record(envelope, id, kind, amount, Some(from), Some(to), memo.clone());
                Ok(())
            }
            Operation::Register { .. } => unreachable!("handled above"),
        }
    }

    fn existing(&self, topic: EntityId, tick: &str) -> Result<TokenId, Rejection> {
        self.token(topic, tick).ok_or(Rejection::new(Reason::TickNotDeployed))
    }

    fn touch(&mut self, token: TokenId, account: Option<EntityId>) {
        if let Some(changes) = &mut self.changes {
            changes.tokens.insert(token);
            if let Some(account) = account {
                changes.balances.insert((token, account));
            }
        }
    }

    fn credit(&mut self, id: TokenId, account: EntityId, amount: u64, at: Timestamp) {
        self.touch(id, Some(account));
        let holding = self.balances.entry((id, account)).or_insert(Holding { balance: 0, updated_at: at });
        if holding.balance == 0 {
            self.tokens[id.0 as usize].holders += 1;
        }
        // Cannot overflow: every balance is part of a supply capped by `max`.
        holding.balance += amount;
        holding.updated_at = at;
    }

    fn debit(&mut self, id: TokenId, account: EntityId, amount: u64, at: Timestamp) -> Result<(), Rejection> {
        if self.balances.get(&(id, account)).is_some_and(|h| h.balance >= amount) {
            self.touch(id, Some(account));
        }
        let holding = self
            .balances
            .get_mut(&(id, account))
            .filter(|h| h.balance >= amount)
            .ok_or(Rejection::new(Reason::InsufficientBalance))?;
        holding.balance -= amount;
        holding.updated_at = at;
        if holding.balance == 0 {
            self.tokens[id.0 as usize].holders -= 1;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        envelope: &Envelope,
        token: TokenId,
        kind: OpKind,
        amount: u64,
        from: Option<EntityId>,
        to: Option<EntityId>,
        memo: Option<String>,
    ) {
        let kind = match kind {
            OpKind::Mint => EventKind::Mint,
            OpKind::Burn => EventKind::Burn,
            OpKind::Transfer => EventKind::Transfer,
            OpKind::Deploy | OpKind::Register => unreachable!("not an event"),
        };
        self.tokens[token.0 as usize].last_change = envelope.consensus;
        self.events.push(Event {
            token,
            kind,
            amount,
            from,
            to,
            payer: envelope.payer,
            memo,
            consensus: envelope.consensus,
            topic: envelope.topic,
            sequence: envelope.sequence,
        });
    }
}

#[cfg(test)]
mod tests;
