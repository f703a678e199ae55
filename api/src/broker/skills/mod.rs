//! The skills registry (the hosted broker's `/skills` operations; the
//! reference client's `broker-live.md` section 11): packages of skill
//! files, named and versioned by the account that first published them.
//!
//! [`package`] reads and checks what a publisher sends;
//! `crate::store::skills` holds who owns each name and which versions it
//! has.

pub mod package;
