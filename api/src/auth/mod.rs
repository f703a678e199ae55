//! Who is asking (spec section 5): ledger signatures today; challenges,
//! API keys and the principal come with the live store.

pub mod signature;
