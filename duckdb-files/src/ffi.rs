//! The part of DuckDB's C API (`duckdb.h`, stable since the release each
//! function names) that almanac calls, declared here rather than through a
//! generated binding crate: the functions are few, and the binding crates
//! bring a build-time downloader and Arrow with them.
//!
//! Every handle is an opaque pointer the library allocates and frees; the
//! safe wrappers in [`crate::sql`] and [`crate::columnar`] own them. Linked
//! against `libduckdb.so` from `DUCKDB_LIB_DIR` (duckdb/rpath.rs), or, with
//! the `bundled` feature, against the static library `libduckdb-sys`
//! compiles.

#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_void};

pub type idx_t = u64;
pub type duckdb_state = u32;
pub const SUCCESS: duckdb_state = 0;

pub type duckdb_database = *mut c_void;
pub type duckdb_connection = *mut c_void;
pub type duckdb_config = *mut c_void;
pub type duckdb_prepared_statement = *mut c_void;
pub type duckdb_appender = *mut c_void;
pub type duckdb_logical_type = *mut c_void;
pub type duckdb_data_chunk = *mut c_void;
pub type duckdb_vector = *mut c_void;

/// `DUCKDB_TYPE`: the type ids the wrappers read and write.
pub type duckdb_type = u32;
pub const TYPE_BOOLEAN: duckdb_type = 1;
pub const TYPE_TINYINT: duckdb_type = 2;
pub const TYPE_SMALLINT: duckdb_type = 3;
pub const TYPE_INTEGER: duckdb_type = 4;
pub const TYPE_BIGINT: duckdb_type = 5;
pub const TYPE_UTINYINT: duckdb_type = 6;
pub const TYPE_USMALLINT: duckdb_type = 7;
pub const TYPE_UINTEGER: duckdb_type = 8;
pub const TYPE_UBIGINT: duckdb_type = 9;
pub const TYPE_FLOAT: duckdb_type = 10;
pub const TYPE_DOUBLE: duckdb_type = 11;
pub const TYPE_TIMESTAMP: duckdb_type = 12;
pub const TYPE_HUGEINT: duckdb_type = 16;
pub const TYPE_VARCHAR: duckdb_type = 17;
pub const TYPE_BLOB: duckdb_type = 18;
pub const TYPE_LIST: duckdb_type = 24;
pub const TYPE_UHUGEINT: duckdb_type = 32;

/// A query's result. Its fields are the library's; only its size matters
/// here (it is passed by value to `duckdb_fetch_chunk`).
#[repr(C)]
pub struct duckdb_result {
    deprecated_column_count: idx_t,
    deprecated_row_count: idx_t,
    deprecated_rows_changed: idx_t,
    deprecated_columns: *mut c_void,
    deprecated_error_message: *mut c_char,
    internal_data: *mut c_void,
}

impl duckdb_result {
    pub fn empty() -> duckdb_result {
        duckdb_result {
            deprecated_column_count: 0,
            deprecated_row_count: 0,
            deprecated_rows_changed: 0,
            deprecated_columns: std::ptr::null_mut(),
            deprecated_error_message: std::ptr::null_mut(),
            internal_data: std::ptr::null_mut(),
        }
    }
}

/// A `VARCHAR` or `BLOB` value in a vector: 16 bytes, the length first;
/// up to 12 bytes inline after it, longer ones behind a pointer at offset 8.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct duckdb_string_t {
    pub length: u32,
    pub prefix: [u8; 4],
    pub pointer: *const u8,
}

impl duckdb_string_t {
    /// The value's bytes. The vector holding `self` must outlive them.
    pub fn bytes(&self) -> &[u8] {
        const INLINE: usize = 12;
        let length = self.length as usize;
        // SAFETY: the layout above; an inline value's bytes start right
        // after the length and run into the pointer's place.
        unsafe {
            if length <= INLINE {
                std::slice::from_raw_parts((self as *const Self as *const u8).add(4), length)
            } else {
                std::slice::from_raw_parts(self.pointer, length)
            }
        }
    }
}

/// A list's place in its child vector.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct duckdb_list_entry {
    pub offset: u64,
    pub length: u64,
}

/// `HUGEINT`: `upper * 2^64 + lower`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct duckdb_hugeint {
    pub lower: u64,
    pub upper: i64,
}

extern "C" {
    pub fn duckdb_library_version() -> *const c_char;
    pub fn duckdb_free(ptr: *mut c_void);
    pub fn duckdb_vector_size() -> idx_t;

    pub fn duckdb_create_config(out_config: *mut duckdb_config) -> duckdb_state;
    pub fn duckdb_set_config(config: duckdb_config, name: *const c_char, option: *const c_char) -> duckdb_state;
    pub fn duckdb_destroy_config(config: *mut duckdb_config);
    pub fn duckdb_open_ext(
        path: *const c_char,
        out_database: *mut duckdb_database,
        config: duckdb_config,
        out_error: *mut *mut c_char,
    ) -> duckdb_state;
    pub fn duckdb_close(database: *mut duckdb_database);
    pub fn duckdb_connect(database: duckdb_database, out_connection: *mut duckdb_connection) -> duckdb_state;
    pub fn duckdb_disconnect(connection: *mut duckdb_connection);

    pub fn duckdb_query(connection: duckdb_connection, query: *const c_char, out: *mut duckdb_result) -> duckdb_state;
    pub fn duckdb_destroy_result(result: *mut duckdb_result);
    pub fn duckdb_result_error(result: *mut duckdb_result) -> *const c_char;
    pub fn duckdb_rows_changed(result: *mut duckdb_result) -> idx_t;
    pub fn duckdb_fetch_chunk(result: duckdb_result) -> duckdb_data_chunk;

    pub fn duckdb_prepare(
        connection: duckdb_connection,
        query: *const c_char,
        out: *mut duckdb_prepared_statement,
    ) -> duckdb_state;
    pub fn duckdb_prepare_error(statement: duckdb_prepared_statement) -> *const c_char;
    pub fn duckdb_destroy_prepare(statement: *mut duckdb_prepared_statement);
    pub fn duckdb_nparams(statement: duckdb_prepared_statement) -> idx_t;
    pub fn duckdb_bind_boolean(statement: duckdb_prepared_statement, index: idx_t, value: bool) -> duckdb_state;
    pub fn duckdb_bind_int64(statement: duckdb_prepared_statement, index: idx_t, value: i64) -> duckdb_state;
    pub fn duckdb_bind_uint64(statement: duckdb_prepared_statement, index: idx_t, value: u64) -> duckdb_state;
    pub fn duckdb_bind_double(statement: duckdb_prepared_statement, index: idx_t, value: f64) -> duckdb_state;
    pub fn duckdb_bind_varchar_length(
        statement: duckdb_prepared_statement,
        index: idx_t,
        value: *const c_char,
        length: idx_t,
    ) -> duckdb_state;
    pub fn duckdb_bind_blob(
        statement: duckdb_prepared_statement,
        index: idx_t,
        data: *const c_void,
        length: idx_t,
    ) -> duckdb_state;
    pub fn duckdb_bind_null(statement: duckdb_prepared_statement, index: idx_t) -> duckdb_state;
    pub fn duckdb_execute_prepared(statement: duckdb_prepared_statement, out: *mut duckdb_result) -> duckdb_state;
    pub fn duckdb_execute_prepared_streaming(
        statement: duckdb_prepared_statement,
        out: *mut duckdb_result,
    ) -> duckdb_state;

    pub fn duckdb_create_logical_type(type_id: duckdb_type) -> duckdb_logical_type;
    pub fn duckdb_create_list_type(child: duckdb_logical_type) -> duckdb_logical_type;
    pub fn duckdb_get_type_id(logical_type: duckdb_logical_type) -> duckdb_type;
    pub fn duckdb_destroy_logical_type(logical_type: *mut duckdb_logical_type);

    pub fn duckdb_create_data_chunk(types: *mut duckdb_logical_type, column_count: idx_t) -> duckdb_data_chunk;
    pub fn duckdb_destroy_data_chunk(chunk: *mut duckdb_data_chunk);
    pub fn duckdb_data_chunk_get_size(chunk: duckdb_data_chunk) -> idx_t;
    pub fn duckdb_data_chunk_set_size(chunk: duckdb_data_chunk, size: idx_t);
    pub fn duckdb_data_chunk_get_column_count(chunk: duckdb_data_chunk) -> idx_t;
    pub fn duckdb_data_chunk_get_vector(chunk: duckdb_data_chunk, column: idx_t) -> duckdb_vector;

    pub fn duckdb_vector_get_column_type(vector: duckdb_vector) -> duckdb_logical_type;
    pub fn duckdb_vector_get_data(vector: duckdb_vector) -> *mut c_void;
    pub fn duckdb_vector_get_validity(vector: duckdb_vector) -> *mut u64;
    pub fn duckdb_vector_ensure_validity_writable(vector: duckdb_vector);
    pub fn duckdb_validity_set_row_invalid(validity: *mut u64, row: idx_t);
    pub fn duckdb_vector_assign_string_element_len(
        vector: duckdb_vector,
        index: idx_t,
        value: *const c_char,
        length: idx_t,
    );
    pub fn duckdb_list_vector_get_child(vector: duckdb_vector) -> duckdb_vector;
    pub fn duckdb_list_vector_set_size(vector: duckdb_vector, size: idx_t) -> duckdb_state;
    pub fn duckdb_list_vector_reserve(vector: duckdb_vector, capacity: idx_t) -> duckdb_state;

    pub fn duckdb_appender_create(
        connection: duckdb_connection,
        schema: *const c_char,
        table: *const c_char,
        out: *mut duckdb_appender,
    ) -> duckdb_state;
    pub fn duckdb_appender_error(appender: duckdb_appender) -> *const c_char;
    pub fn duckdb_appender_column_count(appender: duckdb_appender) -> idx_t;
    pub fn duckdb_append_data_chunk(appender: duckdb_appender, chunk: duckdb_data_chunk) -> duckdb_state;
    pub fn duckdb_appender_flush(appender: duckdb_appender) -> duckdb_state;
    pub fn duckdb_appender_destroy(appender: *mut duckdb_appender) -> duckdb_state;
}

/// A NUL-terminated string the library returned, as text (`None` for a
/// null pointer). The library keeps ownership.
///
/// # Safety
/// `text` is null or points to a NUL-terminated string that lives as long
/// as the call.
pub unsafe fn text(text: *const c_char) -> Option<String> {
    (!text.is_null()).then(|| std::ffi::CStr::from_ptr(text).to_string_lossy().into_owned())
}
