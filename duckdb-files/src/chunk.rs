//! The chunks of rows an answer is read in (up to 2,048 rows of typed
//! vectors, owned and freed on drop): a cell at a time as a [`Value`] (for
//! [`crate::sql::Row`]), or a column at a time through typed views
//! ([`Chunk::strings`], [`Chunk::u64s`], ...) that check the column's type
//! once and then read in place.

use anyhow::{anyhow, Result};

use crate::ffi;
use crate::value::{Error, Value};

/// A logical type the library allocated, destroyed on drop.
pub(crate) struct LogicalType(pub(crate) ffi::duckdb_logical_type);

impl LogicalType {
    pub(crate) fn of(id: ffi::duckdb_type) -> LogicalType {
        // SAFETY: a primitive type id.
        LogicalType(unsafe { ffi::duckdb_create_logical_type(id) })
    }

    pub(crate) fn list_of(child: LogicalType) -> LogicalType {
        // SAFETY: the list type copies its child's.
        LogicalType(unsafe { ffi::duckdb_create_list_type(child.0) })
    }

    fn of_vector(vector: ffi::duckdb_vector) -> LogicalType {
        // SAFETY: a live vector; the type returned is ours to destroy.
        LogicalType(unsafe { ffi::duckdb_vector_get_column_type(vector) })
    }

    fn id(&self) -> ffi::duckdb_type {
        // SAFETY: a live type.
        unsafe { ffi::duckdb_get_type_id(self.0) }
    }
}

impl Drop for LogicalType {
    fn drop(&mut self) {
        // SAFETY: created here, destroyed once.
        unsafe { ffi::duckdb_destroy_logical_type(&mut self.0) }
    }
}

/// A chunk of an answer's rows (up to 2,048), owned and freed on drop.
/// Its typed views borrow it.
pub struct Chunk {
    raw: ffi::duckdb_data_chunk,
    rows: usize,
}

// SAFETY: a fetched chunk is the caller's alone; its views only read it,
// so several threads may read one chunk at once.
unsafe impl Send for Chunk {}
unsafe impl Sync for Chunk {}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: fetched by `from_raw`'s caller, destroyed once.
        unsafe { ffi::duckdb_destroy_data_chunk(&mut self.raw) }
    }
}

/// A column of a chunk, its type read once.
#[derive(Clone, Copy)]
struct Vector {
    raw: ffi::duckdb_vector,
    type_id: ffi::duckdb_type,
    validity: *const u64,
}

// SAFETY: as for `Chunk`: a vector is only read, and lives as long as its
// chunk, which the views borrow.
unsafe impl Send for Vector {}
unsafe impl Sync for Vector {}

impl Vector {
    /// # Safety
    /// `raw` is a live vector.
    unsafe fn new(raw: ffi::duckdb_vector) -> Vector {
        Vector { raw, type_id: LogicalType::of_vector(raw).id(), validity: ffi::duckdb_vector_get_validity(raw) }
    }

    fn is_valid(&self, row: usize) -> bool {
        // SAFETY: the mask has a bit for every row of the vector.
        self.validity.is_null() || unsafe { *self.validity.add(row / 64) >> (row % 64) & 1 == 1 }
    }

    fn data<T>(&self) -> *const T {
        // SAFETY: a live vector.
        unsafe { ffi::duckdb_vector_get_data(self.raw) as *const T }
    }

    /// Row `row`'s value.
    ///
    /// # Safety
    /// `row` is within the vector's rows.
    unsafe fn value(&self, row: usize) -> Result<Value, String> {
        if !self.is_valid(row) {
            return Ok(Value::Null);
        }
        fn at<T: Copy>(vector: &Vector, row: usize) -> T {
            // SAFETY: the caller checked the type and the row.
            unsafe { *vector.data::<T>().add(row) }
        }
        Ok(match self.type_id {
            ffi::TYPE_BOOLEAN => Value::Boolean(at::<u8>(self, row) != 0),
            ffi::TYPE_TINYINT => Value::Integer(at::<i8>(self, row).into()),
            ffi::TYPE_SMALLINT => Value::Integer(at::<i16>(self, row).into()),
            ffi::TYPE_INTEGER => Value::Integer(at::<i32>(self, row).into()),
            ffi::TYPE_BIGINT | ffi::TYPE_TIMESTAMP => Value::Integer(at::<i64>(self, row).into()),
            ffi::TYPE_UTINYINT => Value::Integer(at::<u8>(self, row).into()),
            ffi::TYPE_USMALLINT => Value::Integer(at::<u16>(self, row).into()),
            ffi::TYPE_UINTEGER => Value::Integer(at::<u32>(self, row).into()),
            ffi::TYPE_UBIGINT => Value::Integer(at::<u64>(self, row).into()),
            ffi::TYPE_HUGEINT => {
                let n: ffi::duckdb_hugeint = at(self, row);
                Value::Integer((i128::from(n.upper) << 64) | i128::from(n.lower))
            }
            ffi::TYPE_UHUGEINT => {
                let n: ffi::duckdb_hugeint = at(self, row);
                let value = (u128::from(n.upper as u64) << 64) | u128::from(n.lower);
                Value::Integer(i128::try_from(value).map_err(|_| format!("{value} is out of range"))?)
            }
            ffi::TYPE_FLOAT => Value::Double(at::<f32>(self, row).into()),
            ffi::TYPE_DOUBLE => Value::Double(at(self, row)),
            ffi::TYPE_VARCHAR => {
                let text = at::<ffi::duckdb_string_t>(self, row);
                Value::Text(String::from_utf8_lossy(text.bytes()).into_owned())
            }
            ffi::TYPE_BLOB => Value::Blob(at::<ffi::duckdb_string_t>(self, row).bytes().to_vec()),
            ffi::TYPE_LIST => {
                let entry: ffi::duckdb_list_entry = at(self, row);
                let child = Vector::new(ffi::duckdb_list_vector_get_child(self.raw));
                let items = (entry.offset..entry.offset + entry.length).map(|i| child.value(i as usize));
                Value::List(items.collect::<Result<_, _>>()?)
            }
            other => return Err(format!("DuckDB type {other} is not read by almanac")),
        })
    }

    fn expect(&self, column: usize, type_id: ffi::duckdb_type, name: &str) -> Result<()> {
        match self.type_id == type_id {
            true => Ok(()),
            false => Err(anyhow!("column {column} is not {name} (DuckDB type {})", self.type_id)),
        }
    }
}

impl Chunk {
    /// A fetched chunk; `None` for the null pointer that ends an answer.
    pub(crate) fn from_raw(raw: ffi::duckdb_data_chunk) -> Option<Chunk> {
        // SAFETY: a live chunk.
        (!raw.is_null()).then(|| Chunk { raw, rows: unsafe { ffi::duckdb_data_chunk_get_size(raw) } as usize })
    }

    /// Its number of rows.
    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    fn vector(&self, column: usize) -> Result<Vector, Error> {
        // SAFETY: a live chunk; the column is checked against its count.
        unsafe {
            if column >= ffi::duckdb_data_chunk_get_column_count(self.raw) as usize {
                return Err(Error::Conversion { column, message: "no such column".into() });
            }
            Ok(Vector::new(ffi::duckdb_data_chunk_get_vector(self.raw, column as ffi::idx_t)))
        }
    }

    /// The value at `column`, `row` (for [`crate::sql::Row`]).
    pub(crate) fn value(&self, column: usize, row: usize) -> Result<Value, Error> {
        debug_assert!(row < self.rows);
        let vector = self.vector(column)?;
        // SAFETY: the row is within the chunk.
        unsafe { vector.value(row) }.map_err(|message| Error::Conversion { column, message })
    }

    /// A `VARCHAR` column.
    pub fn strings(&self, column: usize) -> Result<Strings<'_>> {
        let vector = self.vector(column)?;
        vector.expect(column, ffi::TYPE_VARCHAR, "VARCHAR")?;
        Ok(Strings { vector, rows: self.rows, _chunk: std::marker::PhantomData })
    }

    /// A `BLOB` column.
    pub fn binaries(&self, column: usize) -> Result<Binaries<'_>> {
        let vector = self.vector(column)?;
        vector.expect(column, ffi::TYPE_BLOB, "BLOB")?;
        Ok(Binaries { vector, rows: self.rows, _chunk: std::marker::PhantomData })
    }

    /// A `UBIGINT` column.
    pub fn u64s(&self, column: usize) -> Result<Primitives<'_, u64>> {
        self.primitives(column, ffi::TYPE_UBIGINT, "UBIGINT")
    }

    /// A `UINTEGER` column.
    pub fn u32s(&self, column: usize) -> Result<Primitives<'_, u32>> {
        self.primitives(column, ffi::TYPE_UINTEGER, "UINTEGER")
    }

    /// A `DOUBLE` column.
    pub fn f64s(&self, column: usize) -> Result<Primitives<'_, f64>> {
        self.primitives(column, ffi::TYPE_DOUBLE, "DOUBLE")
    }

    /// A `BOOLEAN` column (DuckDB keeps one byte per value).
    pub fn bools(&self, column: usize) -> Result<Primitives<'_, bool>> {
        self.primitives(column, ffi::TYPE_BOOLEAN, "BOOLEAN")
    }

    fn primitives<T: Copy>(&self, column: usize, type_id: ffi::duckdb_type, name: &str) -> Result<Primitives<'_, T>> {
        let vector = self.vector(column)?;
        vector.expect(column, type_id, name)?;
        // SAFETY: a vector of `T`s with a value (maybe masked) per row.
        let values = unsafe { std::slice::from_raw_parts(vector.data::<T>(), self.rows) };
        Ok(Primitives { vector, values })
    }

    /// A `VARCHAR[]` column: each row's strings (a NULL list or string:
    /// none, empty).
    pub fn string_lists(&self, column: usize) -> Result<Vec<Vec<String>>> {
        // SAFETY: the child vector holds VARCHARs (checked by `lists`).
        self.lists(column, ffi::TYPE_VARCHAR, "VARCHAR[]", |child, i| unsafe { text_at(child, i) }.to_string())
            .map(|rows| rows.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// A `FLOAT[]` column: each row's list, `None` for NULL.
    pub fn float_lists(&self, column: usize) -> Result<Vec<Option<Vec<f32>>>> {
        // SAFETY: the child vector holds FLOATs (checked by `lists`).
        self.lists(column, ffi::TYPE_FLOAT, "FLOAT[]", |child, i| unsafe { *child.data::<f32>().add(i) })
    }

    /// A list column of `child_type` items, each item through `item`.
    fn lists<T>(
        &self,
        column: usize,
        child_type: ffi::duckdb_type,
        name: &str,
        item: impl Fn(&Vector, usize) -> T,
    ) -> Result<Vec<Option<Vec<T>>>> {
        let vector = self.vector(column)?;
        vector.expect(column, ffi::TYPE_LIST, name)?;
        // SAFETY: a list vector has a child vector; its entries are
        // `duckdb_list_entry`s, one per row, within the child's size.
        let child = unsafe { Vector::new(ffi::duckdb_list_vector_get_child(vector.raw)) };
        child.expect(column, child_type, name)?;
        let entries = vector.data::<ffi::duckdb_list_entry>();
        Ok((0..self.rows)
            .map(|row| {
                vector.is_valid(row).then(|| {
                    // SAFETY: as above.
                    let entry = unsafe { *entries.add(row) };
                    (entry.offset..entry.offset + entry.length).map(|i| item(&child, i as usize)).collect()
                })
            })
            .collect())
    }
}

/// The bytes of a `VARCHAR` or `BLOB` vector's row, read in place: they
/// live as long as the chunk.
///
/// # Safety
/// `vector` is a `VARCHAR` or `BLOB` vector of a chunk that outlives `'c`,
/// `row` within it.
unsafe fn bytes_at<'c>(vector: &Vector, row: usize) -> &'c [u8] {
    let bytes = (*vector.data::<ffi::duckdb_string_t>().add(row)).bytes();
    std::slice::from_raw_parts(bytes.as_ptr(), bytes.len())
}

/// A `VARCHAR` vector's row as text. DuckDB's `VARCHAR` is UTF-8: it checks
/// every value it stores.
///
/// # Safety
/// As for [`bytes_at`], of a `VARCHAR` vector.
unsafe fn text_at<'c>(vector: &Vector, row: usize) -> &'c str {
    std::str::from_utf8(bytes_at(vector, row)).expect("DuckDB's VARCHAR is UTF-8")
}

/// A `VARCHAR` column of a chunk.
pub struct Strings<'c> {
    vector: Vector,
    rows: usize,
    _chunk: std::marker::PhantomData<&'c Chunk>,
}

impl<'c> Strings<'c> {
    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    pub fn is_null(&self, row: usize) -> bool {
        !self.vector.is_valid(row)
    }

    /// Row `row`'s text ("" for NULL).
    pub fn value(&self, row: usize) -> &'c str {
        assert!(row < self.rows, "row {row} of {}", self.rows);
        match self.is_null(row) {
            true => "",
            // SAFETY: a VARCHAR vector's row within it.
            false => unsafe { text_at(&self.vector, row) },
        }
    }

    /// Each row's text, `None` for NULL.
    pub fn iter(&self) -> impl Iterator<Item = Option<&'c str>> + '_ {
        (0..self.rows).map(|row| (!self.is_null(row)).then(|| self.value(row)))
    }
}

/// A `BLOB` column of a chunk.
pub struct Binaries<'c> {
    vector: Vector,
    rows: usize,
    _chunk: std::marker::PhantomData<&'c Chunk>,
}

impl<'c> Binaries<'c> {
    pub fn is_null(&self, row: usize) -> bool {
        !self.vector.is_valid(row)
    }

    /// Row `row`'s bytes (empty for NULL).
    pub fn value(&self, row: usize) -> &'c [u8] {
        assert!(row < self.rows, "row {row} of {}", self.rows);
        if self.is_null(row) {
            return &[];
        }
        // SAFETY: a BLOB vector's row within it.
        unsafe { bytes_at(&self.vector, row) }
    }
}

/// A column of fixed-size values of a chunk.
pub struct Primitives<'c, T> {
    vector: Vector,
    values: &'c [T],
}

impl<'c, T: Copy> Primitives<'c, T> {
    pub fn is_null(&self, row: usize) -> bool {
        !self.vector.is_valid(row)
    }

    /// Row `row`'s value (unspecified for NULL: ask [`Self::is_null`]).
    pub fn value(&self, row: usize) -> T {
        self.values[row]
    }

    /// Every row's value, NULLs unspecified.
    pub fn values(&self) -> &'c [T] {
        self.values
    }

    /// Each row's value, `None` for NULL.
    pub fn iter(&self) -> impl Iterator<Item = Option<T>> + '_ {
        self.values.iter().enumerate().map(|(row, value)| (!self.is_null(row)).then_some(*value))
    }
}
