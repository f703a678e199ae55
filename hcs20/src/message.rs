//! Decoding one HCS-20 message body into an [`Operation`].
//!
//! Decoding looks at the body alone; whether the operation is allowed (tick
//! deployed, balance sufficient, payer authorised) is [`super::rules`]'s job.
//! Every way a body can be wrong maps to one [`Reason`], recorded with the
//! message in the warehouse.

use std::borrow::Cow;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use shared::entity::EntityId;

/// Longest number string the standard allows.
pub const MAX_NUMBER_CHARS: usize = 18;
/// Length bounds the standard states, in characters.
pub const MAX_NAME_CHARS: usize = 100;
pub const MAX_METADATA_CHARS: usize = 100;
pub const MAX_REGISTER_MEMO_CHARS: usize = 500;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    Deploy,
    Mint,
    Burn,
    Transfer,
    Register,
}

impl OpKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Deploy => "deploy",
            OpKind::Mint => "mint",
            OpKind::Burn => "burn",
            OpKind::Transfer => "transfer",
            OpKind::Register => "register",
        }
    }

    /// Protocol keywords are matched without regard to case, as the standard
    /// says of `p`; `op` gets the same treatment.
    fn parse(text: &str) -> Option<OpKind> {
        [OpKind::Deploy, OpKind::Mint, OpKind::Burn, OpKind::Transfer, OpKind::Register]
            .into_iter()
            .find(|kind| kind.as_str().eq_ignore_ascii_case(text))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operation {
    Deploy { tick: String, name: String, max: u64, lim: Option<u64>, metadata: Option<String>, memo: Option<String> },
    Mint { tick: String, amount: u64, to: EntityId, memo: Option<String> },
    Burn { tick: String, amount: u64, from: EntityId, memo: Option<String> },
    Transfer { tick: String, amount: u64, from: EntityId, to: EntityId, memo: Option<String> },
    Register { name: String, metadata: Option<String>, private: bool, topic: EntityId, memo: Option<String> },
}

impl Operation {
    pub fn kind(&self) -> OpKind {
        match self {
            Operation::Deploy { .. } => OpKind::Deploy,
            Operation::Mint { .. } => OpKind::Mint,
            Operation::Burn { .. } => OpKind::Burn,
            Operation::Transfer { .. } => OpKind::Transfer,
            Operation::Register { .. } => OpKind::Register,
        }
    }

    pub fn tick(&self) -> Option<&str> {
        match self {
            Operation::Deploy { tick, .. }
            | Operation::Mint { tick, .. }
            | Operation::Burn { tick, .. }
            | Operation::Transfer { tick, .. } => Some(tick),
            Operation::Register { .. } => None,
        }
    }

    pub fn memo(&self) -> Option<&str> {
        match self {
            Operation::Deploy { memo, .. }
            | Operation::Mint { memo, .. }
            | Operation::Burn { memo, .. }
            | Operation::Transfer { memo, .. }
            | Operation::Register { memo, .. } => memo.as_deref(),
        }
    }
}

/// Why a message was not applied. The code is what the warehouse stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    InvalidJson,
    NotHcs20,
    UnknownOp,
    MissingField,
    NotAString,
    NotABoolean,
    InvalidNumber,
    ZeroAmount,
    InvalidTick,
    InvalidText,
    TextTooLong,
    InvalidAccount,
    InvalidTopicId,
    // Rules, applied to a well-formed operation:
    UnknownTopic,
    WrongTopic,
    ReservedTopic,
    TopicAlreadyRegistered,
    TickExists,
    TickNotDeployed,
    ExceedsLimit,
    ExceedsMaxSupply,
    InsufficientBalance,
    PayerNotSender,
    // Chunked messages:
    InvalidChunk,
    DuplicateChunk,
    ChunkPayerMismatch,
    IncompleteChunks,
}

impl Reason {
    pub fn code(self) -> &'static str {
        match self {
            Reason::InvalidJson => "invalid_json",
            Reason::NotHcs20 => "not_hcs20",
            Reason::UnknownOp => "unknown_op",
            Reason::MissingField => "missing_field",
            Reason::NotAString => "not_a_string",
            Reason::NotABoolean => "not_a_boolean",
            Reason::InvalidNumber => "invalid_number",
            Reason::ZeroAmount => "zero_amount",
            Reason::InvalidTick => "invalid_tick",
            Reason::InvalidText => "invalid_text",
            Reason::TextTooLong => "text_too_long",
            Reason::InvalidAccount => "invalid_account",
            Reason::InvalidTopicId => "invalid_topic_id",
            Reason::UnknownTopic => "unknown_topic",
            Reason::WrongTopic => "wrong_topic",
            Reason::ReservedTopic => "reserved_topic",
            Reason::TopicAlreadyRegistered => "topic_already_registered",
            Reason::TickExists => "tick_exists",
            Reason::TickNotDeployed => "tick_not_deployed",
            Reason::ExceedsLimit => "exceeds_limit",
            Reason::ExceedsMaxSupply => "exceeds_max_supply",
            Reason::InsufficientBalance => "insufficient_balance",
            Reason::PayerNotSender => "payer_not_sender",
            Reason::InvalidChunk => "invalid_chunk",
            Reason::DuplicateChunk => "duplicate_chunk",
            Reason::ChunkPayerMismatch => "chunk_payer_mismatch",
            Reason::IncompleteChunks => "incomplete_chunks",
        }
    }
}

/// A reason plus, where one field is at fault, its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejection {
    pub reason: Reason,
    pub field: Option<&'static str>,
}

impl Rejection {
    pub fn new(reason: Reason) -> Self {
        Rejection { reason, field: None }
    }

    fn field(reason: Reason, field: &'static str) -> Self {
        Rejection { reason, field: Some(field) }
    }

    /// `reason` or `reason:field`, as stored and as tests name them.
    pub fn describe(&self) -> String {
        match self.field {
            Some(field) => format!("{}:{}", self.reason.code(), field),
            None => self.reason.code().to_string(),
        }
    }
}

/// What could be read of a body even when it is rejected, so the warehouse
/// row still says which op and tick it was about.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    pub op: Option<OpKind>,
    pub tick: Option<String>,
}

/// Decodes a body. Unknown fields are ignored; fields that copy the
/// consensus record (a `payer_account_id` in the body, say) are never read.
pub fn decode(body: &[u8]) -> (Header, Result<Operation, Rejection>) {
    // serde would read a JSON array positionally into `Fields`: only an
    // object is a message.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return (Header::default(), Err(Rejection::new(Reason::InvalidJson)));
    }
    let fields: Fields = match serde_json::from_slice(body) {
        Ok(fields) => fields,
        Err(_) => return (Header::default(), Err(Rejection::new(Reason::InvalidJson))),
    };
    match fields.operation() {
        // The tick of a decoded operation is in the operation itself.
        Ok(operation) => (Header { op: Some(operation.kind()), tick: None }, Ok(operation)),
        Err(rejection) => {
            let header = Header {
                op: fields.op.as_ref().and_then(Value::as_str).and_then(OpKind::parse),
                tick: fields.tick.as_ref().and_then(Value::as_str).and_then(normalise_tick),
            };
            (header, Err(rejection))
        }
    }
}

/// A decoded body: what [`decode`] returns, kept so decoding (the costly,
/// parallel part) can run before applying (the sequential part).
pub type Decoded = (Header, Result<Operation, Rejection>);

/// Ticks are compared trimmed and lower-cased; an empty tick is no tick.
pub fn normalise_tick(text: &str) -> Option<String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return None;
    }
    Some(trimmed.to_lowercase())
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Fields<'a> {
    #[serde(borrow)]
    p: Option<Value<'a>>,
    #[serde(borrow)]
    op: Option<Value<'a>>,
    #[serde(borrow)]
    tick: Option<Value<'a>>,
    #[serde(borrow)]
    name: Option<Value<'a>>,
    #[serde(borrow)]
    max: Option<Value<'a>>,
    #[serde(borrow)]
    lim: Option<Value<'a>>,
    #[serde(borrow)]
    amt: Option<Value<'a>>,
    #[serde(borrow)]
    to: Option<Value<'a>>,
    #[serde(borrow)]
    from: Option<Value<'a>>,
    #[serde(borrow)]
    metadata: Option<Value<'a>>,
    #[serde(borrow)]
    m: Option<Value<'a>>,
    #[serde(borrow)]
    t_id: Option<Value<'a>>,
    #[serde(borrow)]
    private: Option<Value<'a>>,
}

impl Fields<'_> {
    fn operation(&self) -> Result<Operation, Rejection> {
        let protocol = self.p.as_ref().and_then(Value::as_str);
        if !protocol.is_some_and(|p| p.eq_ignore_ascii_case("hcs-20")) {
            return Err(Rejection::field(Reason::NotHcs20, "p"));
        }
        let op = required_str(&self.op, "op")?;
        let kind = OpKind::parse(op).ok_or(Rejection::field(Reason::UnknownOp, "op"))?;
        Ok(match kind {
            OpKind::Deploy => Operation::Deploy {
                tick: self.tick()?,
                name: text(required_str(&self.name, "name")?, "name", MAX_NAME_CHARS)?,
                max: amount(&self.max, "max")?,
                lim: self.lim.as_ref().map(|_| amount(&self.lim, "lim")).transpose()?,
                metadata: optional_text(&self.metadata, "metadata", MAX_METADATA_CHARS)?,
                memo: self.memo(usize::MAX)?,
            },
            OpKind::Mint => Operation::Mint {
                tick: self.tick()?,
                amount: amount(&self.amt, "amt")?,
                to: account(&self.to, "to")?,
                memo: self.memo(usize::MAX)?,
            },
            OpKind::Burn => Operation::Burn {
                tick: self.tick()?,
                amount: amount(&self.amt, "amt")?,
                from: account(&self.from, "from")?,
                memo: self.memo(usize::MAX)?,
            },
            OpKind::Transfer => Operation::Transfer {
                tick: self.tick()?,
                amount: amount(&self.amt, "amt")?,
                from: account(&self.from, "from")?,
                to: account(&self.to, "to")?,
                memo: self.memo(usize::MAX)?,
            },
            OpKind::Register => Operation::Register {
                name: text(required_str(&self.name, "name")?, "name", MAX_NAME_CHARS)?,
                metadata: optional_text(&self.metadata, "metadata", MAX_METADATA_CHARS)?,
                private: match &self.private {
                    Some(Value::Bool(flag)) => *flag,
                    Some(_) => return Err(Rejection::field(Reason::NotABoolean, "private")),
                    None => return Err(Rejection::field(Reason::MissingField, "private")),
                },
                topic: account(&self.t_id, "t_id").map_err(|r| match r.reason {
                    Reason::InvalidAccount => Rejection::field(Reason::InvalidTopicId, "t_id"),
                    _ => r,
                })?,
                memo: self.memo(MAX_REGISTER_MEMO_CHARS)?,
            },
        })
    }

    fn tick(&self) -> Result<String, Rejection> {
        normalise_tick(required_str(&self.tick, "tick")?).ok_or(Rejection::field(Reason::InvalidTick, "tick"))
    }

    fn memo(&self, max_chars: usize) -> Result<Option<String>, Rejection> {
        optional_text(&self.m, "m", max_chars)
    }
}

fn required_str<'v>(value: &'v Option<Value>, field: &'static str) -> Result<&'v str, Rejection> {
    match value {
        None => Err(Rejection::field(Reason::MissingField, field)),
        Some(value) => value.as_str().ok_or(Rejection::field(Reason::NotAString, field)),
    }
}

fn text(value: &str, field: &'static str, max_chars: usize) -> Result<String, Rejection> {
    if value.trim().is_empty() {
        return Err(Rejection::field(Reason::InvalidText, field));
    }
    if value.chars().count() > max_chars {
        return Err(Rejection::field(Reason::TextTooLong, field));
    }
    Ok(value.to_string())
}

fn optional_text(value: &Option<Value>, field: &'static str, max_chars: usize) -> Result<Option<String>, Rejection> {
    match value {
        None => Ok(None),
        Some(value) => {
            let s = value.as_str().ok_or(Rejection::field(Reason::NotAString, field))?;
            if s.chars().count() > max_chars {
                return Err(Rejection::field(Reason::TextTooLong, field));
            }
            Ok(Some(s.to_string()))
        }
    }
}

/// A positive integer written as a string of at most 18 digits. Leading
/// zeros are allowed (`"007"` is 7). Zero is rejected: no amount, supply or
/// limit of zero means anything.
fn amount(value: &Option<Value>, field: &'static str) -> Result<u64, Rejection> {
    let digits = required_str(value, field)?;
    if digits.is_empty() || digits.len() > MAX_NUMBER_CHARS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Rejection::field(Reason::InvalidNumber, field));
    }
    // 18 digits always fit in a u64.
    let n: u64 = digits.parse().map_err(|_| Rejection::field(Reason::InvalidNumber, field))?;
    if n == 0 {
        return Err(Rejection::field(Reason::ZeroAmount, field));
    }
    Ok(n)
}

fn account(value: &Option<Value>, field: &'static str) -> Result<EntityId, Rejection> {
    required_str(value, field)?.parse().map_err(|_| Rejection::field(Reason::InvalidAccount, field))
}

/// A JSON value reduced to what decoding needs: strings (borrowed from the
/// body when unescaped), booleans, and "anything else".
enum Value<'a> {
    Str(Cow<'a, str>),
    Bool(bool),
    Other,
}

impl Value<'_> {
    fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Value<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ValueVisitor<'a>(std::marker::PhantomData<&'a ()>);

        impl<'de: 'a, 'a> Visitor<'de> for ValueVisitor<'a> {
            type Value = Value<'a>;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Value::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Value::Str(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Value::Str(Cow::Owned(v)))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Value::Bool(v))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Value::Other)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Value::Other)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Value::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Value::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Value::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Value::Other)
            }
        }

        deserializer.deserialize_any(ValueVisitor(std::marker::PhantomData))
    }
}
