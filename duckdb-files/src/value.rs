//! What DuckDB's answers are read as: a [`Value`] per cell, converted to
//! Rust types by [`FromSql`], and the [`Error`]s of the whole binding.

/// What DuckDB refused, or what a row could not be read as.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// DuckDB's own message (a syntax error, a constraint, an IO error).
    #[error("{0}")]
    DuckDb(String),
    /// [`Connection::query_row`] found no row.
    #[error("the query returned no rows")]
    NoRows,
    /// A value of a column could not be read as the type asked for.
    #[error("column {column}: {message}")]
    Conversion { column: usize, message: String },
    /// Text with a NUL byte, which the C API cannot take.
    #[error("SQL text holds a NUL byte")]
    Nul,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A value of column `column` that does not parse as what the caller
    /// wants (for `FromSql` conversions done by hand).
    pub fn conversion(column: usize, error: impl std::fmt::Display) -> Error {
        Error::Conversion { column, message: error.to_string() }
    }
}

/// A value read from an answer, in the few shapes almanac's tables hold.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Boolean(bool),
    /// Every integer type, `HUGEINT` included.
    Integer(i128),
    Double(f64),
    Text(String),
    Blob(Vec<u8>),
    List(Vec<Value>),
}

/// A Rust value a [`Value`] converts to; the error says why not.
pub trait FromSql: Sized {
    fn from_sql(value: Value) -> std::result::Result<Self, String>;
}

fn mismatch<T>(value: &Value, wanted: &str) -> std::result::Result<T, String> {
    Err(format!("{value:?} is not {wanted}"))
}

impl FromSql for Value {
    fn from_sql(value: Value) -> std::result::Result<Value, String> {
        Ok(value)
    }
}

impl FromSql for String {
    fn from_sql(value: Value) -> std::result::Result<String, String> {
        match value {
            Value::Text(text) => Ok(text),
            other => mismatch(&other, "text"),
        }
    }
}

impl FromSql for Vec<u8> {
    fn from_sql(value: Value) -> std::result::Result<Vec<u8>, String> {
        match value {
            Value::Blob(bytes) => Ok(bytes),
            Value::Text(text) => Ok(text.into_bytes()),
            other => mismatch(&other, "bytes"),
        }
    }
}

impl FromSql for bool {
    fn from_sql(value: Value) -> std::result::Result<bool, String> {
        match value {
            Value::Boolean(b) => Ok(b),
            other => mismatch(&other, "a boolean"),
        }
    }
}

impl FromSql for f64 {
    fn from_sql(value: Value) -> std::result::Result<f64, String> {
        match value {
            Value::Double(x) => Ok(x),
            Value::Integer(n) => Ok(n as f64),
            other => mismatch(&other, "a number"),
        }
    }
}

macro_rules! integers {
    ($($t:ty),*) => {$(
        impl FromSql for $t {
            fn from_sql(value: Value) -> std::result::Result<$t, String> {
                match value {
                    Value::Integer(n) => <$t>::try_from(n).map_err(|_| format!("{n} is out of range for {}", stringify!($t))),
                    other => mismatch(&other, stringify!($t)),
                }
            }
        }
    )*};
}
integers!(i32, i64, u32, u64, usize, i128);

impl<T: FromSql> FromSql for Option<T> {
    fn from_sql(value: Value) -> std::result::Result<Option<T>, String> {
        match value {
            Value::Null => Ok(None),
            value => T::from_sql(value).map(Some),
        }
    }
}
