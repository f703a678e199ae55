//! Agent plugins, without IO: a plugin's files as a [`tree::Tree`], and the
//! reference scanner's (`plugin-scanner` on PyPI) checks over it
//! ([`scan`]), with its report's shape and score ([`report`]), and the
//! content digest it keys a plugin by ([`digest`]); where a repository's
//! plugins are ([`locate`]) and where marketplaces say they come from
//! ([`source`]); and the trust answer made of a scan and what else is
//! known ([`trust`]); the catalog's answers made of a plugin's listing
//! ([`catalog`]), the same for the api and a build.
//!
//! Nothing here reads a disk or a network: an import unpacks an archive
//! into a tree ([`archive`]), and `generator scan-plugin` reads a folder into one.

pub mod archive;
pub mod catalog;
pub mod digest;
pub mod locate;
pub mod report;
pub mod scan;
pub mod source;
pub mod tree;
pub mod trust;
