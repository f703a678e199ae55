//! Data-driven rule tests: one helper, many cases, each naming its rule.
//!
//! Every case starts from [`SETUP`] (two registered topics, one private; a
//! token `pts` on the public topic with max 1000 and lim 100; 100 minted to
//! 0.0.1), appends its own messages, and states the verdict of its last
//! message (`ok` or a rejection code) and any balances that must hold.

use super::*;
use crate::{replay, Chunk, Message};

const PUBLIC: &str = "0.0.4350190";
const REGISTRY: &str = "0.0.4362300";
const PRIVATE: &str = "0.0.5000";
const OTHER: &str = "0.0.6000";

type Msg = (&'static str, &'static str, &'static str);

const SETUP: &[Msg] = &[
    (REGISTRY, "0.0.9", r#"{"p":"hcs-20","op":"register","name":"Private","private":true,"t_id":"0.0.5000"}"#),
    (REGISTRY, "0.0.9", r#"{"p":"hcs-20","op":"register","name":"Other","private":false,"t_id":"0.0.6000"}"#),
    (PUBLIC, "0.0.1", r#"{"p":"hcs-20","op":"deploy","name":"Points","tick":"pts","max":"1000","lim":"100"}"#),
    (PUBLIC, "0.0.1", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":"100","to":"0.0.1"}"#),
];

struct Case {
    rule: &'static str,
    msgs: &'static [Msg],
    expect: &'static str,
    balances: &'static [(&'static str, &'static str, &'static str, u64)],
}

fn message(i: usize, (topic, payer, body): Msg) -> Message {
    Message {
        topic: topic.parse().unwrap(),
        sequence: i as u64 + 1,
        consensus: Timestamp(1_700_000_000_000_000_000 + i as u64 * 1_000),
        payer: payer.parse().unwrap(),
        body: body.as_bytes().to_vec(),
        chunk: None,
    }
}

fn verdict(row: &OperationRow) -> String {
    row.rejection.map_or_else(|| "ok".to_string(), |r| r.describe())
}

fn check(case: &Case) {
    let messages: Vec<Message> = SETUP.iter().chain(case.msgs).enumerate().map(|(i, m)| message(i, *m)).collect();
    let (ledger, rows) = replay(&messages, Topics::MAINNET);
    for (i, row) in rows.iter().take(SETUP.len()).enumerate() {
        assert_eq!(verdict(row), "ok", "{}: setup message {i} failed", case.rule);
    }
    let last = rows.last().unwrap();
    assert_eq!(verdict(last), case.expect, "rule: {}", case.rule);
    for (topic, tick, account, expected) in case.balances {
        let token = ledger.token(topic.parse().unwrap(), tick);
        let balance = token.map_or(0, |t| ledger.balance(t, account.parse().unwrap()));
        assert_eq!(balance, *expected, "rule: {}: balance of {account} in {tick}@{topic}", case.rule);
    }
    check_invariants(&ledger, case.rule);
}

/// Whatever the messages, supply equals the sum of balances and the holder
/// count equals the number of positive balances.
fn check_invariants(ledger: &Ledger, rule: &str) {
    for (i, token) in ledger.tokens.iter().enumerate() {
        let id = TokenId(i as u32);
        let held: Vec<u64> = ledger.balances.iter().filter(|((t, _), _)| *t == id).map(|(_, h)| h.balance).collect();
        assert_eq!(held.iter().sum::<u64>(), token.supply(), "{rule}: supply of {}", token.tick);
        assert_eq!(held.iter().filter(|b| **b > 0).count() as u64, token.holders, "{rule}: holders");
        assert!(token.minted <= token.max, "{rule}: minted above max");
    }
}

const CASES: &[Case] = &[
    // Protocol and decoding.
    Case { rule: "p is case-insensitive", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"HCS-20","op":"mint","tick":"pts","amt":"1","to":"0.0.2"}"#)], expect: "ok", balances: &[(PUBLIC, "pts", "0.0.2", 1)] },
    Case { rule: "op is case-insensitive", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"MINT","tick":"pts","amt":"1","to":"0.0.2"}"#)], expect: "ok", balances: &[] },
    Case { rule: "p must be hcs-20", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"brc-20","op":"mint","tick":"pts","amt":"1","to":"0.0.2"}"#)], expect: "not_hcs20:p", balances: &[(PUBLIC, "pts", "0.0.2", 0)] },
    Case { rule: "p is required", msgs: &[(PUBLIC, "0.0.2", r#"{"op":"mint","tick":"pts","amt":"1","to":"0.0.2"}"#)], expect: "not_hcs20:p", balances: &[] },
    Case { rule: "body must be JSON", msgs: &[(PUBLIC, "0.0.2", "mint 1 pts")], expect: "invalid_json", balances: &[] },
    Case { rule: "body must be an object", msgs: &[(PUBLIC, "0.0.2", r#"["hcs-20"]"#)], expect: "invalid_json", balances: &[] },
    Case { rule: "duplicate keys are malformed", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":"1","amt":"2","to":"0.0.2"}"#)], expect: "invalid_json", balances: &[] },
    Case { rule: "op must be known", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"airdrop","tick":"pts"}"#)], expect: "unknown_op:op", balances: &[] },
    Case { rule: "numbers must be strings", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":5,"to":"0.0.2"}"#)], expect: "not_a_string:amt", balances: &[(PUBLIC, "pts", "0.0.2", 0)] },
    Case { rule: "amounts are digits only", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":"1.5","to":"0.0.2"}"#)], expect: "invalid_number:amt", balances: &[] },
    Case { rule: "amounts have no sign", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":"+5","to":"0.0.2"}"#)], expect: "invalid_number:amt", balances: &[] },
    Case { rule: "amounts are at most 18 characters", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"deploy","name":"Big","tick":"big","max":"1000000000000000000"}"#)], expect: "invalid_number:max", balances: &[] },
    Case { rule: "18-digit max is accepted", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"deploy","name":"Big","tick":"big","max":"999999999999999999"}"#)], expect: "ok", balances: &[] },
    Case { rule: "leading zeros are accepted", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":"007","to":"0.0.2"}"#)], expect: "ok", balances: &[(PUBLIC, "pts", "0.0.2", 7)] },
    Case { rule: "amt 0 is rejected", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":"0","to":"0.0.2"}"#)], expect: "zero_amount:amt", balances: &[] },
    Case { rule: "lim 0 is rejected", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"deploy","name":"Zero","tick":"zero","max":"10","lim":"0"}"#)], expect: "zero_amount:lim", balances: &[] },
    Case { rule: "max 0 is rejected", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"deploy","name":"Zero","tick":"zero","max":"0"}"#)], expect: "zero_amount:max", balances: &[] },
    Case { rule: "null counts as absent", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"deploy","name":"N","tick":"nul","max":"10","lim":null}"#), (PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"nul","amt":"10","to":"0.0.2"}"#)], expect: "ok", balances: &[(PUBLIC, "nul", "0.0.2", 10)] },
    Case { rule: "missing amt", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"pts","to":"0.0.2"}"#)], expect: "missing_field:amt", balances: &[] },
    // Deploy.
    Case { rule: "deploy needs a name", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"deploy","tick":"new","max":"10"}"#)], expect: "missing_field:name", balances: &[] },
    Case { rule: "name at most 100 characters", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"deploy","name":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx","tick":"new","max":"10"}"#)], expect: "text_too_long:name", balances: &[] },
    Case { rule: "metadata at most 100 characters", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"deploy","name":"N","tick":"new","max":"10","metadata":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}"#)], expect: "text_too_long:metadata", balances: &[] },
    Case { rule: "first deploy of a tick wins", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"deploy","name":"Again","tick":"pts","max":"5"}"#)], expect: "tick_exists", balances: &[] },
    Case { rule: "ticks are trimmed and lower-cased", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"deploy","name":"Again","tick":"  PTS ","max":"5"}"#)], expect: "tick_exists", balances: &[] },
    Case { rule: "an empty tick is invalid", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"deploy","name":"E","tick":"   ","max":"5"}"#)], expect: "invalid_tick:tick", balances: &[] },
    Case { rule: "one namespace per topic: same tick on another topic", msgs: &[(OTHER, "0.0.2", r#"{"p":"hcs-20","op":"deploy","name":"Pts elsewhere","tick":"pts","max":"5"}"#), (OTHER, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":"5","to":"0.0.1"}"#)], expect: "ok", balances: &[(OTHER, "pts", "0.0.1", 5), (PUBLIC, "pts", "0.0.1", 100)] },
    // Mint.
    Case { rule: "mint needs a deployed tick", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"nope","amt":"1","to":"0.0.2"}"#)], expect: "tick_not_deployed", balances: &[] },
    Case { rule: "mint ticks match case-insensitively", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":" Pts","amt":"1","to":"0.0.2"}"#)], expect: "ok", balances: &[(PUBLIC, "pts", "0.0.2", 1)] },
    Case { rule: "mint must not exceed lim", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":"101","to":"0.0.2"}"#)], expect: "exceeds_limit", balances: &[(PUBLIC, "pts", "0.0.2", 0)] },
    Case { rule: "mint equal to lim is fine", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":"100","to":"0.0.2"}"#)], expect: "ok", balances: &[(PUBLIC, "pts", "0.0.2", 100)] },
    Case { rule: "mint must not take supply above max", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"deploy","name":"S","tick":"small","max":"10"}"#), (PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"small","amt":"8","to":"0.0.2"}"#), (PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"small","amt":"3","to":"0.0.2"}"#)], expect: "exceeds_max_supply", balances: &[(PUBLIC, "small", "0.0.2", 8)] },
    Case { rule: "burnt points are not mintable again", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"deploy","name":"S","tick":"small","max":"10"}"#), (PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"small","amt":"10","to":"0.0.2"}"#), (PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"burn","tick":"small","amt":"4","from":"0.0.2"}"#), (PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"small","amt":"1","to":"0.0.2"}"#)], expect: "exceeds_max_supply", balances: &[(PUBLIC, "small", "0.0.2", 6)] },
    Case { rule: "anyone may mint on a public topic", msgs: &[(PUBLIC, "0.0.77", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":"5","to":"0.0.2"}"#)], expect: "ok", balances: &[(PUBLIC, "pts", "0.0.2", 5)] },
    Case { rule: "mint to an invalid account", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":"5","to":"alice"}"#)], expect: "invalid_account:to", balances: &[] },
    // The standard's account pattern: shard.realm.num, ASCII digits without
    // leading zeros (`0` alone is fine), nothing around it, an optional
    // -checksum. Anything else names no account: read loosely, `0.0.0123`
    // would credit 0.0.123, a different account.
    Case { rule: "an account with a leading zero in num", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":"5","to":"0.0.0123"}"#)], expect: "invalid_account:to", balances: &[(PUBLIC, "pts", "0.0.123", 0)] },
    Case { rule: "an account with a leading zero in shard", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":"5","to":"00.0.1234"}"#)], expect: "invalid_account:to", balances: &[(PUBLIC, "pts", "0.0.1234", 0)] },
    Case { rule: "an account with a leading zero in realm", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":"5","to":"0.00.1234"}"#)], expect: "invalid_account:to", balances: &[(PUBLIC, "pts", "0.0.1234", 0)] },
    Case { rule: "an account with a space before it", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":"5","to":" 0.0.1234"}"#)], expect: "invalid_account:to", balances: &[(PUBLIC, "pts", "0.0.1234", 0)] },
    Case { rule: "an account with a space after it", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":"5","to":"0.0.1234 "}"#)], expect: "invalid_account:to", balances: &[(PUBLIC, "pts", "0.0.1234", 0)] },
    Case { rule: "an account with a tab or newline around it", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":"5","to":"0.0.1234\n"}"#)], expect: "invalid_account:to", balances: &[(PUBLIC, "pts", "0.0.1234", 0)] },
    Case { rule: "an account in other digits than ASCII", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":"5","to":"0.0.１２３"}"#)], expect: "invalid_account:to", balances: &[(PUBLIC, "pts", "0.0.123", 0)] },
    Case { rule: "an account whose parts are zero", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":"5","to":"0.0.0"}"#)], expect: "ok", balances: &[(PUBLIC, "pts", "0.0.0", 5)] },
    Case { rule: "an account with an upper-case checksum", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":"5","to":"0.0.2-ABCDE"}"#)], expect: "invalid_account:to", balances: &[(PUBLIC, "pts", "0.0.2", 0)] },
    Case { rule: "a transfer from a malformed account", msgs: &[(PUBLIC, "0.0.1", r#"{"p":"hcs-20","op":"transfer","tick":"pts","amt":"5","from":"0.0.01","to":"0.0.2"}"#)], expect: "invalid_account:from", balances: &[(PUBLIC, "pts", "0.0.1", 100), (PUBLIC, "pts", "0.0.2", 0)] },
    Case { rule: "a transfer to a malformed account", msgs: &[(PUBLIC, "0.0.1", r#"{"p":"hcs-20","op":"transfer","tick":"pts","amt":"5","from":"0.0.1","to":"0.0.002"}"#)], expect: "invalid_account:to", balances: &[(PUBLIC, "pts", "0.0.1", 100), (PUBLIC, "pts", "0.0.2", 0)] },
    Case { rule: "a burn from a malformed account", msgs: &[(PUBLIC, "0.0.1", r#"{"p":"hcs-20","op":"burn","tick":"pts","amt":"5","from":" 0.0.1"}"#)], expect: "invalid_account:from", balances: &[(PUBLIC, "pts", "0.0.1", 100)] },
    Case { rule: "a registration of a malformed topic id", msgs: &[(REGISTRY, "0.0.2", r#"{"p":"hcs-20","op":"register","name":"Z","private":false,"t_id":"0.0.07000"}"#)], expect: "invalid_topic_id:t_id", balances: &[] },
    Case { rule: "checksummed account ids drop the checksum", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"pts","amt":"5","to":"0.0.2-abcde"}"#)], expect: "ok", balances: &[(PUBLIC, "pts", "0.0.2", 5)] },
    // Transfer.
    Case { rule: "transfer moves points", msgs: &[(PUBLIC, "0.0.1", r#"{"p":"hcs-20","op":"transfer","tick":"pts","amt":"30","from":"0.0.1","to":"0.0.2"}"#)], expect: "ok", balances: &[(PUBLIC, "pts", "0.0.1", 70), (PUBLIC, "pts", "0.0.2", 30)] },
    Case { rule: "transfer of the whole balance", msgs: &[(PUBLIC, "0.0.1", r#"{"p":"hcs-20","op":"transfer","tick":"pts","amt":"100","from":"0.0.1","to":"0.0.2"}"#)], expect: "ok", balances: &[(PUBLIC, "pts", "0.0.1", 0), (PUBLIC, "pts", "0.0.2", 100)] },
    Case { rule: "transfer must not exceed the balance", msgs: &[(PUBLIC, "0.0.1", r#"{"p":"hcs-20","op":"transfer","tick":"pts","amt":"101","from":"0.0.1","to":"0.0.2"}"#)], expect: "insufficient_balance", balances: &[(PUBLIC, "pts", "0.0.1", 100)] },
    Case { rule: "transfer from an account with nothing", msgs: &[(PUBLIC, "0.0.3", r#"{"p":"hcs-20","op":"transfer","tick":"pts","amt":"1","from":"0.0.3","to":"0.0.2"}"#)], expect: "insufficient_balance", balances: &[] },
    Case { rule: "public topic: payer must be the sender of a transfer", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"transfer","tick":"pts","amt":"10","from":"0.0.1","to":"0.0.2"}"#)], expect: "payer_not_sender", balances: &[(PUBLIC, "pts", "0.0.1", 100)] },
    Case { rule: "payer comes from the record, never the body", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"transfer","tick":"pts","amt":"10","from":"0.0.1","to":"0.0.2","payer_account_id":"0.0.1","payer":"0.0.1"}"#)], expect: "payer_not_sender", balances: &[(PUBLIC, "pts", "0.0.1", 100)] },
    Case { rule: "checksummed sender matches the payer", msgs: &[(PUBLIC, "0.0.1", r#"{"p":"hcs-20","op":"transfer","tick":"pts","amt":"10","from":"0.0.1-abcde","to":"0.0.2"}"#)], expect: "ok", balances: &[(PUBLIC, "pts", "0.0.2", 10)] },
    Case { rule: "transfer to oneself is valid and changes nothing", msgs: &[(PUBLIC, "0.0.1", r#"{"p":"hcs-20","op":"transfer","tick":"pts","amt":"10","from":"0.0.1","to":"0.0.1"}"#)], expect: "ok", balances: &[(PUBLIC, "pts", "0.0.1", 100)] },
    Case { rule: "private topic: any payer is authorised", msgs: &[(PRIVATE, "0.0.50", r#"{"p":"hcs-20","op":"deploy","name":"Club","tick":"club","max":"100"}"#), (PRIVATE, "0.0.50", r#"{"p":"hcs-20","op":"mint","tick":"club","amt":"10","to":"0.0.1"}"#), (PRIVATE, "0.0.50", r#"{"p":"hcs-20","op":"transfer","tick":"club","amt":"4","from":"0.0.1","to":"0.0.2"}"#)], expect: "ok", balances: &[(PRIVATE, "club", "0.0.1", 6), (PRIVATE, "club", "0.0.2", 4)] },
    Case { rule: "registered public topic keeps the payer rule", msgs: &[(OTHER, "0.0.2", r#"{"p":"hcs-20","op":"deploy","name":"O","tick":"o","max":"100"}"#), (OTHER, "0.0.2", r#"{"p":"hcs-20","op":"mint","tick":"o","amt":"10","to":"0.0.1"}"#), (OTHER, "0.0.2", r#"{"p":"hcs-20","op":"transfer","tick":"o","amt":"4","from":"0.0.1","to":"0.0.2"}"#)], expect: "payer_not_sender", balances: &[(OTHER, "o", "0.0.1", 10)] },
    // Burn.
    Case { rule: "burn reduces balance and supply", msgs: &[(PUBLIC, "0.0.1", r#"{"p":"hcs-20","op":"burn","tick":"pts","amt":"40","from":"0.0.1"}"#)], expect: "ok", balances: &[(PUBLIC, "pts", "0.0.1", 60)] },
    Case { rule: "burn must not exceed the balance", msgs: &[(PUBLIC, "0.0.1", r#"{"p":"hcs-20","op":"burn","tick":"pts","amt":"101","from":"0.0.1"}"#)], expect: "insufficient_balance", balances: &[(PUBLIC, "pts", "0.0.1", 100)] },
    Case { rule: "public topic: payer must be the sender of a burn", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"burn","tick":"pts","amt":"1","from":"0.0.1"}"#)], expect: "payer_not_sender", balances: &[(PUBLIC, "pts", "0.0.1", 100)] },
    // Topics.
    Case { rule: "register only on the registry topic", msgs: &[(PUBLIC, "0.0.2", r#"{"p":"hcs-20","op":"register","name":"X","private":false,"t_id":"0.0.7000"}"#)], expect: "wrong_topic", balances: &[] },
    Case { rule: "token operations are not valid on the registry topic", msgs: &[(REGISTRY, "0.0.2", r#"{"p":"hcs-20","op":"deploy","name":"R","tick":"reg","max":"5"}"#)], expect: "wrong_topic", balances: &[] },
    Case { rule: "first registration of a topic wins", msgs: &[(REGISTRY, "0.0.2", r#"{"p":"hcs-20","op":"register","name":"Again","private":false,"t_id":"0.0.5000"}"#)], expect: "topic_already_registered", balances: &[] },
    Case { rule: "the well-known topics cannot be registered", msgs: &[(REGISTRY, "0.0.2", r#"{"p":"hcs-20","op":"register","name":"Pub","private":true,"t_id":"0.0.4350190"}"#)], expect: "reserved_topic", balances: &[] },
    Case { rule: "register needs a boolean private", msgs: &[(REGISTRY, "0.0.2", r#"{"p":"hcs-20","op":"register","name":"X","private":"true","t_id":"0.0.7000"}"#)], expect: "not_a_boolean:private", balances: &[] },
    Case { rule: "register needs a valid topic id", msgs: &[(REGISTRY, "0.0.2", r#"{"p":"hcs-20","op":"register","name":"X","private":false,"t_id":"topic"}"#)], expect: "invalid_topic_id:t_id", balances: &[] },
    Case { rule: "register memo at most 500 characters", msgs: &[(REGISTRY, "0.0.2", concat!(r#"{"p":"hcs-20","op":"register","name":"X","private":false,"t_id":"0.0.7000","m":""#, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", r#""}"#))], expect: "text_too_long:m", balances: &[] },
    Case { rule: "messages on an unannounced topic are not indexed", msgs: &[(OTHER, "0.0.2", r#"{"p":"hcs-20","op":"deploy","name":"O","tick":"o","max":"100"}"#), ("0.0.8888", "0.0.2", r#"{"p":"hcs-20","op":"deploy","name":"U","tick":"u","max":"100"}"#)], expect: "unknown_topic", balances: &[] },
];

#[test]
fn rules() {
    for case in CASES {
        check(case);
    }
}

/// A topic's privacy governs its messages from the first one, even those
/// sent before the registry announced it.
#[test]
fn topic_privacy_applies_to_messages_before_the_announcement() {
    let msgs: &[Msg] = &[
        ("0.0.7000", "0.0.50", r#"{"p":"hcs-20","op":"deploy","name":"Early","tick":"early","max":"100"}"#),
        ("0.0.7000", "0.0.50", r#"{"p":"hcs-20","op":"mint","tick":"early","amt":"10","to":"0.0.1"}"#),
        (
            "0.0.7000",
            "0.0.50",
            r#"{"p":"hcs-20","op":"transfer","tick":"early","amt":"3","from":"0.0.1","to":"0.0.2"}"#,
        ),
        (REGISTRY, "0.0.9", r#"{"p":"hcs-20","op":"register","name":"Late","private":true,"t_id":"0.0.7000"}"#),
    ];
    let messages: Vec<Message> = msgs.iter().enumerate().map(|(i, m)| message(i, *m)).collect();
    let (ledger, rows) = replay(&messages, Topics::MAINNET);
    assert!(rows.iter().all(|r| r.rejection.is_none()), "{rows:?}");
    let token = ledger.token("0.0.7000".parse().unwrap(), "early").unwrap();
    assert_eq!(ledger.balance(token, "0.0.2".parse().unwrap()), 3);
}

/// Order is global consensus order, not topic by topic, and not the order
/// the messages were read in.
#[test]
fn global_consensus_order_across_topics() {
    // A transfer on topic OTHER at t=3 spends points minted at t=2; listed
    // out of order, and with the public topic's messages in between.
    let mut messages = vec![
        message(
            3,
            (OTHER, "0.0.1", r#"{"p":"hcs-20","op":"transfer","tick":"o","amt":"5","from":"0.0.1","to":"0.0.2"}"#),
        ),
        message(
            0,
            (REGISTRY, "0.0.9", r#"{"p":"hcs-20","op":"register","name":"Other","private":false,"t_id":"0.0.6000"}"#),
        ),
        message(2, (OTHER, "0.0.1", r#"{"p":"hcs-20","op":"mint","tick":"o","amt":"5","to":"0.0.1"}"#)),
        message(1, (OTHER, "0.0.1", r#"{"p":"hcs-20","op":"deploy","name":"O","tick":"o","max":"5"}"#)),
    ];
    messages.reverse();
    let (ledger, rows) = replay(&messages, Topics::MAINNET);
    assert!(rows.iter().all(|r| r.rejection.is_none()), "{rows:?}");
    let token = ledger.token(OTHER.parse().unwrap(), "o").unwrap();
    assert_eq!(ledger.balance(token, "0.0.2".parse().unwrap()), 5);
    let order: Vec<u64> = rows.iter().map(|r| r.consensus.0).collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]));
}

fn chunked(i: usize, payer: &str, group: &str, number: u32, total: u32, body: &str) -> Message {
    let mut m = message(i, (PUBLIC, "0.0.1", "")); // body and payer set below
    m.payer = payer.parse().unwrap();
    m.body = body.as_bytes().to_vec();
    m.chunk = Some(Chunk { group: group.to_string(), number, total });
    m
}

fn setup_messages() -> Vec<Message> {
    SETUP.iter().enumerate().map(|(i, m)| message(i, *m)).collect()
}

#[test]
fn chunked_messages_are_reassembled_in_number_order() {
    let mut messages = setup_messages();
    let body = r#"{"p":"hcs-20","op":"transfer","tick":"pts","amt":"25","from":"0.0.1","to":"0.0.2"}"#;
    let (a, b) = body.split_at(30);
    // Part 2 reaches consensus before part 1.
    messages.push(chunked(10, "0.0.1", "0.0.1@1700000000.1", 2, 2, b));
    messages.push(chunked(11, "0.0.1", "0.0.1@1700000000.1", 1, 2, a));
    let (ledger, rows) = replay(&messages, Topics::MAINNET);
    let last = rows.last().unwrap();
    assert_eq!(verdict(last), "ok");
    assert_eq!((last.chunks, last.sequence), (2, 12), "applied at the completing part");
    let token = ledger.token(PUBLIC.parse().unwrap(), "pts").unwrap();
    assert_eq!(ledger.balance(token, "0.0.2".parse().unwrap()), 25);
}

#[test]
fn chunk_failures_are_recorded_and_skipped() {
    struct ChunkCase {
        rule: &'static str,
        parts: &'static [(&'static str, &'static str, u32, u32)], // payer, group, number, total
        expect: &'static [&'static str],
    }
    let cases = [
        ChunkCase {
            rule: "incomplete group",
            parts: &[("0.0.1", "g", 1, 3), ("0.0.1", "g", 2, 3)],
            expect: &["incomplete_chunks", "incomplete_chunks"],
        },
        ChunkCase { rule: "part number out of range", parts: &[("0.0.1", "g", 3, 2)], expect: &["invalid_chunk"] },
        ChunkCase {
            rule: "duplicate part",
            parts: &[("0.0.1", "g", 1, 2), ("0.0.1", "g", 1, 2)],
            expect: &["incomplete_chunks", "duplicate_chunk"],
        },
        ChunkCase {
            rule: "parts from two payers",
            parts: &[("0.0.1", "g", 1, 2), ("0.0.2", "g", 2, 2)],
            expect: &["chunk_payer_mismatch", "chunk_payer_mismatch"],
        },
    ];
    for case in cases {
        let mut messages = setup_messages();
        for (i, (payer, group, number, total)) in case.parts.iter().enumerate() {
            messages.push(chunked(10 + i, payer, group, *number, *total, r#"{"p":"hcs-20""#));
        }
        let (_, rows) = replay(&messages, Topics::MAINNET);
        let verdicts: Vec<String> = rows[SETUP.len()..].iter().map(verdict).collect();
        assert_eq!(verdicts, case.expect, "rule: {}", case.rule);
    }
}
