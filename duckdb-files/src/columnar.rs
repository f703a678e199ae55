//! Moving rows in and out of DuckDB as Arrow record batches: an order of
//! magnitude faster than row-at-a-time for the million-row tables of a
//! build.

use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use duckdb::arrow::array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Float32Array, ListArray, StringArray, UInt32Array, UInt64Array,
};
use duckdb::arrow::compute::cast;
use duckdb::arrow::datatypes::{DataType, Field, Float32Type, Schema};
use duckdb::arrow::record_batch::RecordBatch;
use duckdb::Connection;

/// A record batch of named columns, all nullable.
pub fn batch(columns: Vec<(&str, ArrayRef)>) -> Result<RecordBatch> {
    let fields: Vec<Field> = columns.iter().map(|(name, a)| Field::new(*name, a.data_type().clone(), true)).collect();
    let arrays = columns.into_iter().map(|(_, a)| a).collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).context("building a record batch")
}

/// Appends a batch to `table` (columns in table order).
pub fn append(conn: &Connection, table: &str, batch: RecordBatch) -> Result<()> {
    let mut appender = conn.appender(table)?;
    appender.append_record_batch(batch).with_context(|| format!("appending to {table}"))?;
    appender.flush()?;
    Ok(())
}

pub fn strings<I: IntoIterator<Item = Option<S>>, S: AsRef<str>>(values: I) -> ArrayRef {
    Arc::new(values.into_iter().collect::<StringArray>())
}

pub fn u64s(values: impl IntoIterator<Item = Option<u64>>) -> ArrayRef {
    Arc::new(values.into_iter().collect::<UInt64Array>())
}

pub fn u32s(values: impl IntoIterator<Item = Option<u32>>) -> ArrayRef {
    Arc::new(values.into_iter().collect::<UInt32Array>())
}

pub fn bools(values: impl IntoIterator<Item = Option<bool>>) -> ArrayRef {
    Arc::new(values.into_iter().collect::<BooleanArray>())
}

pub fn binaries<'a>(values: impl IntoIterator<Item = Option<&'a [u8]>>) -> ArrayRef {
    Arc::new(values.into_iter().collect::<BinaryArray>())
}

/// A `FLOAT[]` column: one list per row, `None` for NULL.
pub fn float_lists<'a>(rows: impl IntoIterator<Item = Option<&'a [f32]>>) -> ArrayRef {
    Arc::new(ListArray::from_iter_primitive::<Float32Type, _, _>(
        rows.into_iter().map(|row| row.map(|v| v.iter().map(|x| Some(*x)).collect::<Vec<_>>())),
    ))
}

/// Lists of strings (`VARCHAR[]`), one per row.
pub fn string_lists<'a>(rows: impl IntoIterator<Item = &'a [String]>) -> ArrayRef {
    use duckdb::arrow::array::{ListBuilder, StringBuilder};
    let mut builder = ListBuilder::new(StringBuilder::new());
    for row in rows {
        row.iter().for_each(|s| builder.values().append_value(s));
        builder.append(true);
    }
    Arc::new(builder.finish())
}

/// Column `i` of `VARCHAR[]`, each row's strings (a NULL list: none).
pub fn string_lists_of(batch: &RecordBatch, i: usize) -> Result<Vec<Vec<String>>> {
    let lists: ListArray = column(batch, i, DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))))?;
    (0..lists.len())
        .map(|row| {
            if lists.is_null(row) {
                return Ok(Vec::new());
            }
            let values = lists.value(row);
            let strings = values.as_any().downcast_ref::<StringArray>().ok_or_else(|| anyhow!("not VARCHAR[]"))?;
            Ok(strings.iter().map(|s| s.unwrap_or_default().to_string()).collect())
        })
        .collect()
}

/// Column `i` of a batch as `FLOAT[]` lists (`None` for NULL).
pub fn float_lists_of(batch: &RecordBatch, i: usize) -> Result<Vec<Option<Vec<f32>>>> {
    let lists: ListArray = column(batch, i, DataType::List(Arc::new(Field::new("item", DataType::Float32, true))))?;
    (0..lists.len())
        .map(|row| {
            if lists.is_null(row) {
                return Ok(None);
            }
            let values = lists.value(row);
            let floats = values.as_any().downcast_ref::<Float32Array>().ok_or_else(|| anyhow!("not FLOAT[]"))?;
            Ok(Some(floats.values().to_vec()))
        })
        .collect()
}

/// Column `i` of a batch read back, as the Arrow type asked for (DuckDB may
/// hand out an equivalent type, such as a string view).
pub fn column<T: Array + Clone + 'static>(batch: &RecordBatch, i: usize, as_type: DataType) -> Result<T> {
    let column = batch.column(i);
    let converted = if column.data_type() == &as_type { column.clone() } else { cast(column, &as_type)? };
    converted.as_any().downcast_ref::<T>().cloned().ok_or_else(|| anyhow!("column {i} is not {as_type}"))
}
