//! Agent plugins, without IO: a plugin's files as a [`tree::Tree`], and the
//! reference scanner's (`plugin-scanner` on PyPI) checks over it
//! ([`scan`]), with its report's shape and score ([`report`]), and the
//! content digest it keys a plugin by ([`digest`]).
//!
//! Nothing here reads a disk or a network: an import unpacks an archive
//! into a tree ([`archive`]), and `generator scan-plugin` reads a folder into one.

pub mod archive;
pub mod digest;
pub mod report;
pub mod scan;
pub mod tree;
