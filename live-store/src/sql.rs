//! One connection to either engine, and the values that cross it.
//!
//! The domain functions are written once, against [`Conn`]: its methods
//! take SQL in the dialect both engines share (placeholders `?1`, `?2`, …;
//! `ON CONFLICT`, `RETURNING`, `COALESCE`, `CAST`) with parameters made by
//! [`params!`](crate::params), and hand each result row to a closure as a
//! [`Row`]. Where the engines differ (a scalar `MAX(a, b)`, JSON paths, a
//! sequence), a function asks [`Conn::dialect`] and says each spelling.
//!
//! **SQLite**: statements are prepared once per connection (rusqlite's
//! cache) and values are bound and read without copying.
//!
//! **PostgreSQL**: each statement is rewritten once (`?N` becomes `$N`),
//! prepared once per connection and kept, so PostgreSQL infers each
//! parameter's type from where it stands; a value is then sent in the
//! binary form of that type ([`Param`]), and a column is read back by its
//! type into the same values SQLite gives ([`Raw`]). The schema keeps to
//! types both read the same way: `BIGINT` for SQLite's `INTEGER`
//! (booleans included, 0 or 1), `TEXT`, `BYTEA` for `BLOB`, `DOUBLE
//! PRECISION` for `REAL`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::error::Error as StdError;

use super::Failure;

/// Which engine a connection speaks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// The larger of two values: SQLite's two-argument `MAX`, PostgreSQL's
    /// `GREATEST` (the same for values that are not NULL).
    pub fn greatest(self) -> &'static str {
        match self {
            Dialect::Sqlite => "MAX",
            Dialect::Postgres => "GREATEST",
        }
    }

    /// A pattern match that ignores case, as SQLite's `LIKE` does (ASCII
    /// only there, all of Unicode on PostgreSQL).
    pub fn like(self) -> &'static str {
        match self {
            Dialect::Sqlite => "LIKE",
            Dialect::Postgres => "ILIKE",
        }
    }
}

/// A value as a statement takes it or a row gives it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ValueRef<'a> {
    Null,
    Integer(i64),
    Real(f64),
    Text(&'a str),
    Blob(&'a [u8]),
}

/// An owned [`ValueRef`], for parameters gathered at run time.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl From<String> for Value {
    fn from(text: String) -> Value {
        Value::Text(text)
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Value {
        Value::Integer(n)
    }
}

/// What can be a statement's parameter.
pub trait ToValue {
    fn to_value(&self) -> ValueRef<'_>;
}

macro_rules! integer_to_value {
    ($($t:ty),*) => {$(
        impl ToValue for $t {
            fn to_value(&self) -> ValueRef<'_> {
                ValueRef::Integer(*self as i64)
            }
        }
    )*};
}
integer_to_value!(i64, i32, i16, i8, u32, u16, u8);

macro_rules! wide_integer_to_value {
    ($($t:ty),*) => {$(
        impl ToValue for $t {
            /// Both engines hold signed 64-bit integers: a larger value
            /// is a bug of the caller, stored as the largest.
            fn to_value(&self) -> ValueRef<'_> {
                debug_assert!(i64::try_from(*self).is_ok(), "{} does not fit a 64-bit integer", self);
                ValueRef::Integer(i64::try_from(*self).unwrap_or(i64::MAX))
            }
        }
    )*};
}
wide_integer_to_value!(u64, usize);

impl ToValue for bool {
    fn to_value(&self) -> ValueRef<'_> {
        ValueRef::Integer(*self as i64)
    }
}

impl ToValue for f64 {
    fn to_value(&self) -> ValueRef<'_> {
        ValueRef::Real(*self)
    }
}

impl ToValue for str {
    fn to_value(&self) -> ValueRef<'_> {
        ValueRef::Text(self)
    }
}

impl ToValue for String {
    fn to_value(&self) -> ValueRef<'_> {
        ValueRef::Text(self)
    }
}

impl ToValue for [u8] {
    fn to_value(&self) -> ValueRef<'_> {
        ValueRef::Blob(self)
    }
}

impl ToValue for Vec<u8> {
    fn to_value(&self) -> ValueRef<'_> {
        ValueRef::Blob(self)
    }
}

impl<const N: usize> ToValue for [u8; N] {
    fn to_value(&self) -> ValueRef<'_> {
        ValueRef::Blob(self)
    }
}

impl<T: ToValue> ToValue for Option<T> {
    fn to_value(&self) -> ValueRef<'_> {
        self.as_ref().map_or(ValueRef::Null, ToValue::to_value)
    }
}

impl<T: ToValue + ?Sized> ToValue for &T {
    fn to_value(&self) -> ValueRef<'_> {
        (**self).to_value()
    }
}

impl ToValue for Value {
    fn to_value(&self) -> ValueRef<'_> {
        match self {
            Value::Null => ValueRef::Null,
            Value::Integer(n) => ValueRef::Integer(*n),
            Value::Real(x) => ValueRef::Real(*x),
            Value::Text(t) => ValueRef::Text(t),
            Value::Blob(b) => ValueRef::Blob(b),
        }
    }
}

/// A statement's parameters: [`params!`](crate::params), an array of
/// values of one type, or a slice of [`Value`]s.
pub trait Params {
    fn with<R>(self, f: impl FnOnce(&[&dyn ToValue]) -> R) -> R;
}

impl Params for &[&dyn ToValue] {
    fn with<R>(self, f: impl FnOnce(&[&dyn ToValue]) -> R) -> R {
        f(self)
    }
}

/// `[]`: no parameters.
impl Params for [&dyn ToValue; 0] {
    fn with<R>(self, f: impl FnOnce(&[&dyn ToValue]) -> R) -> R {
        f(&[])
    }
}

impl Params for &[Value] {
    fn with<R>(self, f: impl FnOnce(&[&dyn ToValue]) -> R) -> R {
        let values: Vec<&dyn ToValue> = self.iter().map(|v| v as &dyn ToValue).collect();
        f(&values)
    }
}

macro_rules! array_params {
    ($($n:literal)*) => {$(
        impl<T: ToValue> Params for [T; $n] {
            fn with<R>(self, f: impl FnOnce(&[&dyn ToValue]) -> R) -> R {
                let values: [&dyn ToValue; $n] = std::array::from_fn(|i| &self[i] as &dyn ToValue);
                f(&values)
            }
        }
    )*};
}
array_params!(1 2 3 4 5 6 7 8);

/// A statement's parameters of different types: `params![a, b, c]`.
#[macro_export]
macro_rules! params {
    () => {
        &[] as &[&dyn $crate::sql::ToValue]
    };
    ($($value:expr),+ $(,)?) => {
        &[$(&$value as &dyn $crate::sql::ToValue),+] as &[&dyn $crate::sql::ToValue]
    };
}

/// What a column can be read as.
pub trait FromValue: Sized {
    fn from_value(value: ValueRef<'_>) -> Result<Self, String>;
}

fn expected<T>(what: &str, value: ValueRef<'_>) -> Result<T, String> {
    Err(format!("{value:?} is not {what}"))
}

macro_rules! integer_from_value {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(value: ValueRef<'_>) -> Result<$t, String> {
                match value {
                    ValueRef::Integer(n) => <$t>::try_from(n).map_err(|_| format!("{n} does not fit {}", stringify!($t))),
                    other => expected("an integer", other),
                }
            }
        }
    )*};
}
integer_from_value!(i64, i32, u64, u32, u16, u8, usize);

impl FromValue for bool {
    fn from_value(value: ValueRef<'_>) -> Result<bool, String> {
        match value {
            ValueRef::Integer(n) => Ok(n != 0),
            other => expected("a boolean", other),
        }
    }
}

impl FromValue for f64 {
    fn from_value(value: ValueRef<'_>) -> Result<f64, String> {
        match value {
            ValueRef::Real(x) => Ok(x),
            ValueRef::Integer(n) => Ok(n as f64),
            other => expected("a number", other),
        }
    }
}

impl FromValue for String {
    fn from_value(value: ValueRef<'_>) -> Result<String, String> {
        match value {
            ValueRef::Text(t) => Ok(t.to_string()),
            other => expected("text", other),
        }
    }
}

impl FromValue for Vec<u8> {
    fn from_value(value: ValueRef<'_>) -> Result<Vec<u8>, String> {
        match value {
            ValueRef::Blob(b) => Ok(b.to_vec()),
            other => expected("bytes", other),
        }
    }
}

impl<const N: usize> FromValue for [u8; N] {
    fn from_value(value: ValueRef<'_>) -> Result<[u8; N], String> {
        match value {
            ValueRef::Blob(b) => b.try_into().map_err(|_| format!("{} bytes, not {N}", b.len())),
            other => expected("bytes", other),
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(value: ValueRef<'_>) -> Result<Option<T>, String> {
        match value {
            ValueRef::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
}

/// One result row, read by column position.
pub struct Row<'r>(RowOf<'r>);

enum RowOf<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    Postgres(&'r postgres::Row),
}

impl Row<'_> {
    /// Column `index` as a `T`; a value that is not one (or a missing
    /// column) is [`Failure::Corrupt`] naming the column.
    pub fn get<T: FromValue>(&self, index: usize) -> Result<T, Failure> {
        let corrupt = |problem: String| Failure::Corrupt(format!("column {index}: {problem}"));
        match &self.0 {
            RowOf::Sqlite(row) => {
                let value = row.get_ref(index).map_err(|e| corrupt(e.to_string()))?;
                T::from_value(sqlite_value(value)).map_err(corrupt)
            }
            RowOf::Postgres(row) => {
                let raw: Raw<'_> = row.try_get(index).map_err(|e| corrupt(e.to_string()))?;
                let value = raw.value().map_err(corrupt)?;
                T::from_value(value.as_ref()).map_err(corrupt)
            }
        }
    }
}

fn sqlite_value(value: rusqlite::types::ValueRef<'_>) -> ValueRef<'_> {
    use rusqlite::types::ValueRef as V;
    match value {
        V::Null => ValueRef::Null,
        V::Integer(n) => ValueRef::Integer(n),
        V::Real(x) => ValueRef::Real(x),
        // Text the store wrote is UTF-8; other bytes read as a blob, which
        // every text reader refuses by name.
        V::Text(t) => std::str::from_utf8(t).map_or(ValueRef::Blob(t), ValueRef::Text),
        V::Blob(b) => ValueRef::Blob(b),
    }
}

/// The engine's connection.
pub struct Conn(Engine);

enum Engine {
    Sqlite(rusqlite::Connection),
    Postgres(Box<Postgres>),
}

/// A PostgreSQL client and its prepared statements, by the SQL they were
/// written as.
struct Postgres {
    client: RefCell<postgres::Client>,
    statements: RefCell<HashMap<Box<str>, postgres::Statement>>,
}

/// The statements a connection keeps prepared (SQLite's cache; every one
/// on PostgreSQL, where the store's statements are a fixed set).
const STATEMENT_CACHE: usize = 256;

impl Conn {
    pub(crate) fn sqlite(conn: rusqlite::Connection) -> Conn {
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Conn(Engine::Sqlite(conn))
    }

    pub(crate) fn postgres(client: postgres::Client) -> Conn {
        Conn(Engine::Postgres(Box::new(Postgres {
            client: RefCell::new(client),
            statements: RefCell::new(HashMap::new()),
        })))
    }

    pub fn dialect(&self) -> Dialect {
        match &self.0 {
            Engine::Sqlite(_) => Dialect::Sqlite,
            Engine::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Whether the connection is gone (PostgreSQL's, broken; SQLite's
    /// never is).
    pub(crate) fn is_closed(&self) -> bool {
        match &self.0 {
            Engine::Sqlite(_) => false,
            Engine::Postgres(pg) => pg.client.borrow().is_closed(),
        }
    }

    /// Runs `sql` (statements separated by `;`, no parameters).
    pub fn batch(&self, sql: &str) -> Result<(), Failure> {
        match &self.0 {
            Engine::Sqlite(conn) => Ok(conn.execute_batch(sql)?),
            Engine::Postgres(pg) => Ok(pg.client.borrow_mut().batch_execute(sql)?),
        }
    }

    /// Runs one statement; answers the rows it changed.
    pub fn execute(&self, sql: &str, params: impl Params) -> Result<usize, Failure> {
        params.with(|params| match &self.0 {
            Engine::Sqlite(conn) => Ok(conn.prepare_cached(sql)?.execute(sqlite_params(params))?),
            Engine::Postgres(pg) => {
                let statement = pg.prepared(sql)?;
                Ok(pg.client.borrow_mut().execute(&statement, &PgParams::new(params).refs())? as usize)
            }
        })
    }

    /// Every row of one statement, each read by `read`.
    pub fn query_map<T>(
        &self,
        sql: &str,
        params: impl Params,
        mut read: impl FnMut(&Row<'_>) -> Result<T, Failure>,
    ) -> Result<Vec<T>, Failure> {
        let mut out = Vec::new();
        self.each_row(sql, params, |row| {
            out.push(read(row)?);
            Ok(Flow::Next)
        })?;
        Ok(out)
    }

    /// The first row of one statement, read by `read`;
    /// [`Failure::NoRows`] when there is none (see [`Optional`]).
    pub fn query_row<T>(
        &self,
        sql: &str,
        params: impl Params,
        read: impl FnOnce(&Row<'_>) -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        let (mut read, mut first) = (Some(read), None);
        self.each_row(sql, params, |row| {
            first = read.take().map(|read| read(row));
            Ok(Flow::Stop)
        })?;
        first.unwrap_or(Err(Failure::NoRows))
    }

    /// Hands the rows of one statement to `each` in order, until it says
    /// to stop. (PostgreSQL's client gathers every row first.)
    fn each_row(
        &self,
        sql: &str,
        params: impl Params,
        mut each: impl FnMut(&Row<'_>) -> Result<Flow, Failure>,
    ) -> Result<(), Failure> {
        params.with(|params| match &self.0 {
            Engine::Sqlite(conn) => {
                let mut statement = conn.prepare_cached(sql)?;
                let mut rows = statement.query(sqlite_params(params))?;
                while let Some(row) = rows.next()? {
                    if each(&Row(RowOf::Sqlite(row)))? == Flow::Stop {
                        break;
                    }
                }
                Ok(())
            }
            Engine::Postgres(pg) => {
                let statement = pg.prepared(sql)?;
                let rows = pg.client.borrow_mut().query(&statement, &PgParams::new(params).refs())?;
                for row in &rows {
                    if each(&Row(RowOf::Postgres(row)))? == Flow::Stop {
                        break;
                    }
                }
                Ok(())
            }
        })
    }
}

/// Whether [`Conn::each_row`] goes on to the next row.
#[derive(PartialEq, Eq)]
enum Flow {
    Next,
    Stop,
}

/// Parameters bound to a SQLite statement as they are, without copies.
fn sqlite_params<'a>(params: &'a [&'a dyn ToValue]) -> impl rusqlite::Params + 'a {
    rusqlite::params_from_iter(params.iter().map(|p| SqliteParam(p.to_value())))
}

impl Postgres {
    /// `sql` prepared on this connection: once, then from the cache.
    fn prepared(&self, sql: &str) -> Result<postgres::Statement, Failure> {
        if let Some(statement) = self.statements.borrow().get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.borrow_mut().prepare(&numbered_placeholders(sql)).inspect_err(|e| {
            // A statement PostgreSQL refuses to prepare is a fault of the
            // store's code: say which.
            if e.as_db_error().is_some() {
                tracing::error!(sql, error = %crate::pg::describe(e), "PostgreSQL refused a statement");
            }
        })?;
        self.statements.borrow_mut().insert(sql.into(), statement.clone());
        Ok(statement)
    }
}

/// `sql` with SQLite's `?N` placeholders spelled as PostgreSQL's `$N`;
/// quoted text, quoted names and comments are left as they are. O(len).
pub(crate) fn numbered_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                out.push(c);
                for inner in chars.by_ref() {
                    out.push(inner);
                    if inner == c {
                        break;
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                out.push(c);
                for inner in chars.by_ref() {
                    out.push(inner);
                    if inner == '\n' {
                        break;
                    }
                }
            }
            '?' if chars.peek().is_some_and(char::is_ascii_digit) => out.push('$'),
            c => out.push(c),
        }
    }
    out
}

/// A parameter bound to SQLite without copying.
struct SqliteParam<'a>(ValueRef<'a>);

impl rusqlite::ToSql for SqliteParam<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::ValueRef as V;
        Ok(rusqlite::types::ToSqlOutput::Borrowed(match self.0 {
            ValueRef::Null => V::Null,
            ValueRef::Integer(n) => V::Integer(n),
            ValueRef::Real(x) => V::Real(x),
            ValueRef::Text(t) => V::Text(t.as_bytes()),
            ValueRef::Blob(b) => V::Blob(b),
        }))
    }
}

/// The parameters of one PostgreSQL statement.
struct PgParams<'a>(Vec<Param<'a>>);

impl<'a> PgParams<'a> {
    fn new(params: &'a [&'a dyn ToValue]) -> PgParams<'a> {
        PgParams(params.iter().map(|p| Param(p.to_value())).collect())
    }

    fn refs(&self) -> Vec<&(dyn postgres::types::ToSql + Sync)> {
        self.0.iter().map(|p| p as &(dyn postgres::types::ToSql + Sync)).collect()
    }
}

/// A value sent to PostgreSQL in the binary form of the type PostgreSQL
/// inferred for its placeholder; a value that is not of that type (text
/// where a number stands) is refused before it is sent.
#[derive(Debug)]
struct Param<'a>(ValueRef<'a>);

impl postgres::types::ToSql for Param<'_> {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<postgres::types::IsNull, Box<dyn StdError + Sync + Send>> {
        use bytes::BufMut;
        use postgres::types::{IsNull, Type};
        match (self.0, ty) {
            (ValueRef::Null, _) => return Ok(IsNull::Yes),
            (ValueRef::Integer(n), &Type::INT8) => out.put_i64(n),
            (ValueRef::Integer(n), &Type::INT4) => out.put_i32(i32::try_from(n)?),
            (ValueRef::Integer(n), &Type::INT2) => out.put_i16(i16::try_from(n)?),
            (ValueRef::Integer(n), &Type::FLOAT8) => out.put_f64(n as f64),
            (ValueRef::Integer(n), &Type::BOOL) => out.put_u8((n != 0) as u8),
            (ValueRef::Integer(n), &Type::TEXT | &Type::VARCHAR) => out.put_slice(n.to_string().as_bytes()),
            (ValueRef::Real(x), &Type::FLOAT8) => out.put_f64(x),
            (ValueRef::Real(x), &Type::FLOAT4) => out.put_f32(x as f32),
            (ValueRef::Text(t), &Type::TEXT | &Type::VARCHAR | &Type::BPCHAR | &Type::NAME | &Type::JSON) => {
                out.put_slice(t.as_bytes())
            }
            (ValueRef::Text(t), &Type::JSONB) => {
                out.put_u8(1);
                out.put_slice(t.as_bytes())
            }
            (ValueRef::Blob(b), &Type::BYTEA) => out.put_slice(b),
            (value, ty) => return Err(format!("{value:?} given where PostgreSQL expects {ty}").into()),
        }
        Ok(IsNull::No)
    }

    /// Every type is offered; `to_sql` refuses a value of another.
    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

/// A column as PostgreSQL sent it: its type and its binary form.
struct Raw<'a> {
    ty: postgres::types::Type,
    bytes: Option<&'a [u8]>,
}

impl<'a> postgres::types::FromSql<'a> for Raw<'a> {
    fn from_sql(ty: &postgres::types::Type, raw: &'a [u8]) -> Result<Raw<'a>, Box<dyn StdError + Sync + Send>> {
        Ok(Raw { ty: ty.clone(), bytes: Some(raw) })
    }

    fn from_sql_null(ty: &postgres::types::Type) -> Result<Raw<'a>, Box<dyn StdError + Sync + Send>> {
        Ok(Raw { ty: ty.clone(), bytes: None })
    }

    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }
}

/// A value read from PostgreSQL: borrowed where the bytes are the value.
enum Read<'a> {
    Borrowed(ValueRef<'a>),
    Integer(i64),
    Real(f64),
}

impl Read<'_> {
    fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Read::Borrowed(value) => *value,
            Read::Integer(n) => ValueRef::Integer(*n),
            Read::Real(x) => ValueRef::Real(*x),
        }
    }
}

impl<'a> Raw<'a> {
    /// The value as SQLite would have given it: integers of every width
    /// and booleans as integers, `NUMERIC` (PostgreSQL's `SUM` of
    /// integers) as an integer when whole, JSON as its text.
    fn value(&self) -> Result<Read<'a>, String> {
        use postgres::types::Type;
        let Some(bytes) = self.bytes else { return Ok(Read::Borrowed(ValueRef::Null)) };
        let fixed = |n: usize| -> Result<&'a [u8], String> {
            (bytes.len() == n).then_some(bytes).ok_or_else(|| format!("{} bytes for {}", bytes.len(), self.ty))
        };
        Ok(match self.ty {
            Type::INT8 => Read::Integer(i64::from_be_bytes(fixed(8)?.try_into().unwrap_or_default())),
            Type::INT4 => Read::Integer(i32::from_be_bytes(fixed(4)?.try_into().unwrap_or_default()) as i64),
            Type::INT2 => Read::Integer(i16::from_be_bytes(fixed(2)?.try_into().unwrap_or_default()) as i64),
            Type::BOOL => Read::Integer((fixed(1)?[0] != 0) as i64),
            Type::FLOAT8 => Read::Real(f64::from_be_bytes(fixed(8)?.try_into().unwrap_or_default())),
            Type::FLOAT4 => Read::Real(f32::from_be_bytes(fixed(4)?.try_into().unwrap_or_default()) as f64),
            Type::NUMERIC => numeric(bytes)?,
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::JSON | Type::UNKNOWN => {
                Read::Borrowed(ValueRef::Text(std::str::from_utf8(bytes).map_err(|e| e.to_string())?))
            }
            Type::JSONB => match bytes.split_first() {
                Some((1, text)) => {
                    Read::Borrowed(ValueRef::Text(std::str::from_utf8(text).map_err(|e| e.to_string())?))
                }
                _ => return Err("a JSONB value of an unknown version".into()),
            },
            Type::BYTEA => Read::Borrowed(ValueRef::Blob(bytes)),
            ref other => return Err(format!("a column of type {other}, which the store does not read")),
        })
    }
}

/// PostgreSQL's binary `NUMERIC`: digit count, weight, sign, scale, then
/// base-10000 digits, most significant first.
fn numeric(bytes: &[u8]) -> Result<Read<'static>, String> {
    let word = |i: usize| -> Result<u16, String> {
        bytes
            .get(2 * i..2 * i + 2)
            .map(|w| u16::from_be_bytes([w[0], w[1]]))
            .ok_or_else(|| "a short NUMERIC".to_string())
    };
    let (count, weight, sign, scale) = (word(0)? as usize, word(1)? as i16, word(2)?, word(3)?);
    const NEGATIVE: u16 = 0x4000;
    if sign != 0 && sign != NEGATIVE {
        return Err("a NUMERIC that is not a number".into());
    }
    let mut value = 0f64;
    let mut whole: Option<i64> = Some(0);
    for i in 0..count {
        let digit = word(4 + i)? as i64;
        let power = weight as i32 - i as i32;
        value += digit as f64 * 10000f64.powi(power);
        // Whole while every digit stands left of the point and the sum
        // fits 64 bits.
        whole = match (whole, power) {
            (Some(w), p) if p >= 0 => {
                10000i64.checked_pow(p as u32).and_then(|unit| digit.checked_mul(unit)).and_then(|d| w.checked_add(d))
            }
            (w, _) if digit == 0 => w,
            _ => None,
        };
    }
    let negative = sign == NEGATIVE;
    Ok(match whole {
        Some(w) if scale == 0 || value.fract() == 0.0 => Read::Integer(if negative { -w } else { w }),
        _ => Read::Real(if negative { -value } else { value }),
    })
}

/// `query_row(…).optional()`: no row is `None`, not a failure.
pub trait Optional<T> {
    fn optional(self) -> Result<Option<T>, Failure>;
}

impl<T> Optional<T> for Result<T, Failure> {
    fn optional(self) -> Result<Option<T>, Failure> {
        match self {
            Ok(value) => Ok(Some(value)),
            Err(Failure::NoRows) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_outside_quotes_and_comments() {
        let cases = [
            ("SELECT ?1, ?2", "SELECT $1, $2"),
            ("WHERE a = '?1' AND b = ?12", "WHERE a = '?1' AND b = $12"),
            ("SELECT \"?1\" -- ?3\n, ?4", "SELECT \"?1\" -- ?3\n, $4"),
            ("a ? b", "a ? b"),
            ("'it''s ?1' || ?2", "'it''s ?1' || $2"),
        ];
        for (sql, want) in cases {
            assert_eq!(numbered_placeholders(sql), want, "{sql}");
        }
    }

    #[test]
    fn numerics_read_as_integers_when_whole() {
        // 12345678 = 1234 * 10000 + 5678: two digits, weight 1.
        let bytes = [0, 2, 0, 1, 0, 0, 0, 0, 0x04, 0xd2, 0x16, 0x2e];
        assert!(matches!(numeric(&bytes), Ok(Read::Integer(12_345_678))));
        let negative = [0, 1, 0, 0, 0x40, 0, 0, 0, 0, 7];
        assert!(matches!(numeric(&negative), Ok(Read::Integer(-7))));
        let zero = [0, 0, 0, 0, 0, 0, 0, 0];
        assert!(matches!(numeric(&zero), Ok(Read::Integer(0))));
        // 1.5: digits 1 and 5000, weight 0, scale 1.
        let half = [0, 2, 0, 0, 0, 0, 0, 1, 0, 1, 0x13, 0x88];
        assert!(matches!(numeric(&half), Ok(Read::Real(x)) if x == 1.5));
    }
}
