//! Statements against a DuckDB file: a connection ([`Connection`]),
//! parameters bound by position ([`ToSql`], [`params!`]), rows read one at
//! a time ([`Row`], [`FromSql`]) and transactions. Bulk reads take an
//! answer a chunk at a time ([`Statement::chunks`], [`crate::chunk`]);
//! bulk writes append columns ([`crate::columnar`]).
//!
//! The names follow rusqlite's (`execute`, `execute_batch`, `query_row`,
//! `prepare`, `query_map`), which the api's SQLite code uses too.
//!
//! A [`Connection`] may move to another thread but is used by one at a
//! time; [`Connection::try_clone`] opens another to the same database for
//! another thread. The database closes when its last connection does.

use std::ffi::CString;
use std::sync::Arc;

use crate::chunk::Chunk;
use crate::ffi;
pub use crate::value::{Error, FromSql, Result, Value};

fn c_string(text: &str) -> Result<CString> {
    CString::new(text).map_err(|_| Error::Nul)
}

/// An open database: closed when the last connection to it is dropped.
struct Database(ffi::duckdb_database);

// SAFETY: a DuckDB database instance is thread-safe.
unsafe impl Send for Database {}
unsafe impl Sync for Database {}

impl Drop for Database {
    fn drop(&mut self) {
        // SAFETY: opened by `Connection::open`, closed once, here.
        unsafe { ffi::duckdb_close(&mut self.0) }
    }
}

/// How a database file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    ReadWrite,
    ReadOnly,
}

pub struct Connection {
    raw: ffi::duckdb_connection,
    database: Arc<Database>,
}

// SAFETY: a connection may be used from any thread, one at a time (it is
// not Sync).
unsafe impl Send for Connection {}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").finish_non_exhaustive()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // SAFETY: connected in `connect`, disconnected once, here.
        unsafe { ffi::duckdb_disconnect(&mut self.raw) }
    }
}

impl Connection {
    /// Opens (or, read-write, creates) the database file at `path`.
    /// Callers go through [`crate::database::open`], which names the file
    /// in its errors.
    pub(crate) fn open(path: &std::path::Path, access: Access) -> Result<Connection> {
        let path = c_string(&path.to_string_lossy())?;
        let mode = match access {
            Access::ReadWrite => c"READ_WRITE",
            Access::ReadOnly => c"READ_ONLY",
        };
        let mut config: ffi::duckdb_config = std::ptr::null_mut();
        let mut database: ffi::duckdb_database = std::ptr::null_mut();
        let mut message: *mut std::os::raw::c_char = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the calls; the config is
        // destroyed after the open copied it; an error message is freed.
        unsafe {
            if ffi::duckdb_create_config(&mut config) != ffi::SUCCESS {
                return Err(Error::DuckDb("creating a configuration".into()));
            }
            let set = ffi::duckdb_set_config(config, c"access_mode".as_ptr(), mode.as_ptr());
            let opened = set == ffi::SUCCESS
                && ffi::duckdb_open_ext(path.as_ptr(), &mut database, config, &mut message) == ffi::SUCCESS;
            ffi::duckdb_destroy_config(&mut config);
            if !opened {
                let text = ffi::text(message).unwrap_or_else(|| "the database did not open".into());
                if !message.is_null() {
                    ffi::duckdb_free(message.cast());
                }
                return Err(Error::DuckDb(text));
            }
        }
        Connection::connect(Arc::new(Database(database)))
    }

    /// A database in memory only, gone with its last connection.
    pub fn open_in_memory() -> Result<Connection> {
        Connection::open(std::path::Path::new(":memory:"), Access::ReadWrite)
    }

    fn connect(database: Arc<Database>) -> Result<Connection> {
        let mut raw: ffi::duckdb_connection = std::ptr::null_mut();
        // SAFETY: the database is open while `database` lives.
        match unsafe { ffi::duckdb_connect(database.0, &mut raw) } {
            ffi::SUCCESS => Ok(Connection { raw, database }),
            _ => Err(Error::DuckDb("connecting to the database".into())),
        }
    }

    /// Another connection to the same database, for another thread.
    pub fn try_clone(&self) -> Result<Connection> {
        Connection::connect(self.database.clone())
    }

    /// Runs one or more statements separated by `;`, discarding results.
    pub fn execute_batch(&self, sql: &str) -> Result<()> {
        let sql = c_string(sql)?;
        let mut result = QueryResult::new();
        // SAFETY: the connection is open; `result` is destroyed on drop.
        let state = unsafe { ffi::duckdb_query(self.raw, sql.as_ptr(), &mut result.0) };
        result.check(state)
    }

    /// Runs one statement with `params`; the number of rows it changed.
    pub fn execute(&self, sql: &str, params: impl Params) -> Result<usize> {
        self.prepare(sql)?.execute(params)
    }

    /// The first row of one statement's answer, through `f`;
    /// [`Error::NoRows`] when there is none.
    pub fn query_row<T>(&self, sql: &str, params: impl Params, f: impl FnOnce(&Row) -> Result<T>) -> Result<T> {
        let mut statement = self.prepare(sql)?;
        let mut rows = statement.query(params)?;
        match rows.next() {
            Some(row) => f(&row?),
            None => Err(Error::NoRows),
        }
    }

    /// One statement, prepared to run any number of times.
    pub fn prepare(&self, sql: &str) -> Result<Statement<'_>> {
        let text = c_string(sql)?;
        let mut raw: ffi::duckdb_prepared_statement = std::ptr::null_mut();
        // SAFETY: the connection is open; the statement is destroyed by
        // `Statement`'s drop, also when preparing failed.
        let state = unsafe { ffi::duckdb_prepare(self.raw, text.as_ptr(), &mut raw) };
        let statement = Statement { raw, _connection: std::marker::PhantomData };
        match state {
            ffi::SUCCESS => Ok(statement),
            // SAFETY: the message lives as long as the statement.
            _ => Err(Error::DuckDb(
                unsafe { ffi::text(ffi::duckdb_prepare_error(raw)) }.unwrap_or_else(|| format!("preparing {sql}")),
            )),
        }
    }

    /// A transaction, rolled back unless committed.
    pub fn transaction(&mut self) -> Result<Transaction<'_>> {
        self.unchecked_transaction()
    }

    /// A transaction taken through a shared borrow: nothing stops another
    /// use of the connection from running inside it, which is what the
    /// callers that write through helpers taking `&Connection` want.
    pub fn unchecked_transaction(&self) -> Result<Transaction<'_>> {
        self.execute_batch("BEGIN TRANSACTION")?;
        Ok(Transaction { connection: self, open: true })
    }

    pub(crate) fn raw(&self) -> ffi::duckdb_connection {
        self.raw
    }
}

/// A transaction: [`Transaction::commit`] ends it; dropped, it rolls back.
pub struct Transaction<'c> {
    connection: &'c Connection,
    open: bool,
}

impl Transaction<'_> {
    pub fn commit(mut self) -> Result<()> {
        self.open = false;
        self.connection.execute_batch("COMMIT")
    }
}

impl std::ops::Deref for Transaction<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.connection
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.connection.execute_batch("ROLLBACK");
        }
    }
}

/// A result the library allocated, destroyed on drop.
pub(crate) struct QueryResult(pub(crate) ffi::duckdb_result);

impl QueryResult {
    fn new() -> QueryResult {
        QueryResult(ffi::duckdb_result::empty())
    }

    /// The error a failed call left in the result.
    fn check(&mut self, state: ffi::duckdb_state) -> Result<()> {
        match state {
            ffi::SUCCESS => Ok(()),
            // SAFETY: the message lives as long as the result.
            _ => Err(Error::DuckDb(
                unsafe { ffi::text(ffi::duckdb_result_error(&mut self.0)) }
                    .unwrap_or_else(|| "the query failed".into()),
            )),
        }
    }

    /// The next chunk of rows; `None` once the result is exhausted.
    pub(crate) fn next_chunk(&mut self) -> Option<Chunk> {
        // SAFETY: the struct is passed by value as the C API takes it; the
        // library keeps its state behind `internal_data`.
        let raw = unsafe { ffi::duckdb_fetch_chunk(std::ptr::read(&self.0)) };
        Chunk::from_raw(raw)
    }
}

impl Drop for QueryResult {
    fn drop(&mut self) {
        // SAFETY: destroying an empty (zeroed) result is allowed.
        unsafe { ffi::duckdb_destroy_result(&mut self.0) }
    }
}

pub struct Statement<'c> {
    raw: ffi::duckdb_prepared_statement,
    _connection: std::marker::PhantomData<&'c Connection>,
}

impl Drop for Statement<'_> {
    fn drop(&mut self) {
        // SAFETY: prepared by `Connection::prepare`, destroyed once, here.
        unsafe { ffi::duckdb_destroy_prepare(&mut self.raw) }
    }
}

/// How a statement's answer is held while it is read.
#[derive(Clone, Copy)]
enum Answer {
    /// Computed whole before the first row is read: other statements may
    /// run on the connection while it is read.
    Materialized,
    /// Computed a chunk at a time as it is read: nothing else may run on
    /// the connection until it is dropped.
    Streaming,
}

impl Statement<'_> {
    fn bind(&mut self, params: impl Params) -> Result<()> {
        let mut binder = Binder { statement: self.raw, index: 0 };
        params.bind_to(&mut binder)?;
        // SAFETY: a prepared statement.
        let wanted = unsafe { ffi::duckdb_nparams(self.raw) };
        match binder.index == wanted {
            true => Ok(()),
            false => Err(Error::DuckDb(format!("the statement takes {wanted} parameters, not {}", binder.index))),
        }
    }

    fn run(&mut self, params: impl Params, answer: Answer) -> Result<QueryResult> {
        self.bind(params)?;
        let mut result = QueryResult::new();
        // SAFETY: the statement is prepared and bound.
        let state = unsafe {
            match answer {
                Answer::Materialized => ffi::duckdb_execute_prepared(self.raw, &mut result.0),
                Answer::Streaming => ffi::duckdb_execute_prepared_streaming(self.raw, &mut result.0),
            }
        };
        result.check(state)?;
        Ok(result)
    }

    /// Runs the statement; the number of rows it changed.
    pub fn execute(&mut self, params: impl Params) -> Result<usize> {
        let mut result = self.run(params, Answer::Materialized)?;
        // SAFETY: a successful result.
        Ok(unsafe { ffi::duckdb_rows_changed(&mut result.0) } as usize)
    }

    /// The answer's rows, one at a time (the answer held whole).
    pub fn query(&mut self, params: impl Params) -> Result<Rows<'_>> {
        Ok(Rows {
            result: self.run(params, Answer::Materialized)?,
            chunk: None,
            row: 0,
            _statement: std::marker::PhantomData,
        })
    }

    /// Each row of the answer through `f`.
    pub fn query_map<T, F: FnMut(&Row) -> Result<T>>(
        &mut self,
        params: impl Params,
        f: F,
    ) -> Result<MappedRows<'_, F>> {
        Ok(MappedRows { rows: self.query(params)?, f })
    }

    /// The answer a chunk of rows at a time, computed as it is read
    /// (bounded memory over a table of any size). Nothing else may run on
    /// the connection until the chunks are dropped.
    pub fn chunks(&mut self, params: impl Params) -> Result<Chunks<'_>> {
        Ok(Chunks { result: self.run(params, Answer::Streaming)?, _statement: std::marker::PhantomData })
    }
}

/// The answer of [`Statement::chunks`].
pub struct Chunks<'s> {
    result: QueryResult,
    _statement: std::marker::PhantomData<&'s mut ()>,
}

impl Iterator for Chunks<'_> {
    type Item = Chunk;
    fn next(&mut self) -> Option<Chunk> {
        self.result.next_chunk()
    }
}

/// The rows of [`Statement::query`].
pub struct Rows<'s> {
    result: QueryResult,
    chunk: Option<Arc<Chunk>>,
    row: usize,
    _statement: std::marker::PhantomData<&'s mut ()>,
}

impl Iterator for Rows<'_> {
    type Item = Result<Row>;
    fn next(&mut self) -> Option<Result<Row>> {
        loop {
            if let Some(chunk) = &self.chunk {
                if self.row < chunk.len() {
                    self.row += 1;
                    return Some(Ok(Row { chunk: chunk.clone(), row: self.row - 1 }));
                }
            }
            self.chunk = Some(Arc::new(self.result.next_chunk()?));
            self.row = 0;
        }
    }
}

/// The rows of [`Statement::query_map`], each through its function.
pub struct MappedRows<'s, F> {
    rows: Rows<'s>,
    f: F,
}

impl<T, F: FnMut(&Row) -> Result<T>> Iterator for MappedRows<'_, F> {
    type Item = Result<T>;
    fn next(&mut self) -> Option<Result<T>> {
        let row = self.rows.next()?;
        Some(row.and_then(|row| (self.f)(&row)))
    }
}

/// One row of an answer.
pub struct Row {
    chunk: Arc<Chunk>,
    row: usize,
}

impl Row {
    /// Column `index`'s value as `T`.
    pub fn get<I: RowIndex, T: FromSql>(&self, index: I) -> Result<T> {
        let column = index.index();
        let value = self.chunk.value(column, self.row)?;
        T::from_sql(value).map_err(|message| Error::Conversion { column, message })
    }
}

/// A column's position in a row.
pub trait RowIndex {
    fn index(self) -> usize;
}

impl RowIndex for usize {
    fn index(self) -> usize {
        self
    }
}

/// Where [`ToSql`] values are bound: the statement's parameters in order.
pub struct Binder {
    statement: ffi::duckdb_prepared_statement,
    index: ffi::idx_t,
}

impl Binder {
    fn bound(&mut self, state: ffi::duckdb_state) -> Result<()> {
        match state {
            ffi::SUCCESS => Ok(()),
            _ => Err(Error::DuckDb(format!("binding parameter {}", self.index))),
        }
    }

    fn next(&mut self) -> ffi::idx_t {
        self.index += 1;
        self.index
    }
}

/// A value bound to a statement's next parameter.
pub trait ToSql {
    fn bind(&self, binder: &mut Binder) -> Result<()>;
}

impl ToSql for str {
    fn bind(&self, binder: &mut Binder) -> Result<()> {
        let index = binder.next();
        // SAFETY: DuckDB copies the bytes.
        let state = unsafe {
            ffi::duckdb_bind_varchar_length(binder.statement, index, self.as_ptr().cast(), self.len() as ffi::idx_t)
        };
        binder.bound(state)
    }
}

impl ToSql for String {
    fn bind(&self, binder: &mut Binder) -> Result<()> {
        self.as_str().bind(binder)
    }
}

impl ToSql for [u8] {
    fn bind(&self, binder: &mut Binder) -> Result<()> {
        let index = binder.next();
        // SAFETY: DuckDB copies the bytes.
        let state =
            unsafe { ffi::duckdb_bind_blob(binder.statement, index, self.as_ptr().cast(), self.len() as ffi::idx_t) };
        binder.bound(state)
    }
}

impl ToSql for bool {
    fn bind(&self, binder: &mut Binder) -> Result<()> {
        let index = binder.next();
        // SAFETY: a prepared statement.
        let state = unsafe { ffi::duckdb_bind_boolean(binder.statement, index, *self) };
        binder.bound(state)
    }
}

impl ToSql for f64 {
    fn bind(&self, binder: &mut Binder) -> Result<()> {
        let index = binder.next();
        // SAFETY: a prepared statement.
        let state = unsafe { ffi::duckdb_bind_double(binder.statement, index, *self) };
        binder.bound(state)
    }
}

// Integers bound through the widest C binding of their sign.
macro_rules! integers {
    ($bind:ident, $wide:ty: $($t:ty),*) => {$(
        impl ToSql for $t {
            fn bind(&self, binder: &mut Binder) -> Result<()> {
                let index = binder.next();
                // SAFETY: a prepared statement.
                let state = unsafe { ffi::$bind(binder.statement, index, <$wide>::from(*self)) };
                binder.bound(state)
            }
        }
    )*};
}
integers!(duckdb_bind_int64, i64: i32, i64);
integers!(duckdb_bind_uint64, u64: u32, u64);

impl<T: ToSql + ?Sized> ToSql for &T {
    fn bind(&self, binder: &mut Binder) -> Result<()> {
        (**self).bind(binder)
    }
}

impl<T: ToSql> ToSql for Option<T> {
    fn bind(&self, binder: &mut Binder) -> Result<()> {
        match self {
            Some(value) => value.bind(binder),
            None => {
                let index = binder.next();
                // SAFETY: a prepared statement.
                let state = unsafe { ffi::duckdb_bind_null(binder.statement, index) };
                binder.bound(state)
            }
        }
    }
}

/// A statement's parameters: an array of one type (`[name]`, `[]`) or
/// [`params!`] of any.
pub trait Params {
    fn bind_to(self, binder: &mut Binder) -> Result<()>;
}

/// No parameters: `[]`.
impl Params for [&dyn ToSql; 0] {
    fn bind_to(self, _: &mut Binder) -> Result<()> {
        Ok(())
    }
}

// Arrays of one to eight values (not of any length: `[]` must have one
// type to infer).
macro_rules! arrays {
    ($($n:literal),*) => {$(
        impl<T: ToSql> Params for [T; $n] {
            fn bind_to(self, binder: &mut Binder) -> Result<()> {
                self.iter().try_for_each(|value| value.bind(binder))
            }
        }
    )*};
}
arrays!(1, 2, 3, 4, 5, 6, 7, 8);

impl Params for &[&dyn ToSql] {
    fn bind_to(self, binder: &mut Binder) -> Result<()> {
        self.iter().try_for_each(|value| value.bind(binder))
    }
}

/// Parameters of different types: `params![name, 3u64, None::<String>]`.
#[macro_export]
macro_rules! params {
    ($($value:expr),* $(,)?) => {
        &[$(&$value as &dyn $crate::sql::ToSql),*] as &[&dyn $crate::sql::ToSql]
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::database;

    fn memory() -> Connection {
        Connection::open_in_memory().unwrap()
    }

    #[test]
    fn parameters_and_values_round_trip() {
        let conn = memory();
        conn.execute_batch("CREATE TABLE t (s VARCHAR, n UBIGINT, i BIGINT, b BOOLEAN, d DOUBLE, x BLOB, l VARCHAR[])")
            .unwrap();
        let long = "a string longer than twelve bytes";
        let changed = conn
            .execute(
                "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ['a', NULL, 'ccc'])",
                params![long, u64::MAX, -5i64, true, 0.5, b"\0\x01".as_slice()],
            )
            .unwrap();
        assert_eq!(changed, 1);
        conn.execute("INSERT INTO t VALUES (?, NULL, NULL, NULL, NULL, NULL, NULL)", ["short"]).unwrap();
        let mut statement = conn.prepare("SELECT s, n, i, b, d, x, l FROM t ORDER BY s").unwrap();
        type Read = (String, Option<u64>, Option<i64>, Option<bool>, Option<f64>, Option<Vec<u8>>, Value);
        let rows: Vec<Read> = statement
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?)))
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(rows[0].0, long);
        assert_eq!(rows[0].1, Some(u64::MAX));
        assert_eq!((rows[0].2, rows[0].3, rows[0].4), (Some(-5), Some(true), Some(0.5)));
        assert_eq!(rows[0].5.as_deref(), Some(&[0u8, 1][..]));
        assert_eq!(rows[0].6, Value::List(vec![Value::Text("a".into()), Value::Null, Value::Text("ccc".into())]));
        assert_eq!(rows[1], ("short".into(), None, None, None, None, None, Value::Null));
    }

    #[test]
    fn errors_are_duckdbs_and_conversions_name_the_column() {
        let conn = memory();
        let error = conn.execute("SELECT ?", []).unwrap_err();
        assert!(error.to_string().contains("takes 1 parameters, not 0"), "{error}");
        let error = conn.execute_batch("SELEC 1").unwrap_err();
        assert!(matches!(&error, Error::DuckDb(m) if m.contains("syntax error")), "{error}");
        assert!(matches!(conn.query_row("SELECT 1 WHERE false", [], |r| r.get::<_, i64>(0)), Err(Error::NoRows)));
        let error = conn.query_row("SELECT 1, -1", [], |r| r.get::<_, u64>(1)).unwrap_err();
        assert!(matches!(error, Error::Conversion { column: 1, .. }), "{error}");
        let error = conn.query_row("SELECT 'x'", [], |r| r.get::<_, i64>(0)).unwrap_err();
        assert!(matches!(error, Error::Conversion { column: 0, .. }), "{error}");
        // Aggregates answer in wider types than their input.
        let (count, sum): (u64, i64) =
            conn.query_row("SELECT count(*), sum(x) FROM range(10) r(x)", [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        assert_eq!((count, sum), (10, 45));
    }

    #[test]
    fn a_transaction_dropped_rolls_back_and_a_committed_one_stays() {
        let dir = std::env::temp_dir().join(format!("almanac-sql-tx-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut conn = database::open(&dir.join("t.duckdb"), database::Access::ReadWrite).unwrap();
        conn.execute_batch("CREATE TABLE t (n INTEGER)").unwrap();
        {
            let tx = conn.transaction().unwrap();
            tx.execute("INSERT INTO t VALUES (?)", [1i64]).unwrap();
        }
        let tx = conn.transaction().unwrap();
        tx.execute("INSERT INTO t VALUES (?)", [2i64]).unwrap();
        tx.commit().unwrap();
        let other = conn.try_clone().unwrap();
        drop(conn);
        let values: i64 = other.query_row("SELECT sum(n) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(values, 2);
        drop(other);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
