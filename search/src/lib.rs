//! Search over agents: a build's agents as a folder of files written once
//! and mapped (text index, columns, records), small indexes built in memory
//! (the api's live overlay), queries over either (filters, relevance, sorts,
//! pages, aggregations) and the merge of several as one index.
//!
//! Knows nothing of HTTP, DuckDB or an async runtime: the generator writes
//! the folder, the api parses a request into a [`query::SearchQuery`] and
//! searches; both call the same functions.

pub mod bits;
pub mod columns;
pub mod folder;
pub mod fusion;
pub mod query;
pub mod records;
pub mod segments;
pub mod text;
