//! How the skills registry runs, from the flags (apart from the handlers,
//! so that the app's state can hold it without naming them). The registry
//! writes through content inscription's network and account: it is on
//! when they are.

use std::sync::OnceLock;
use std::time::Duration;

use shared::entity::EntityId;
use tokio::sync::{Mutex, Notify};

use super::package::Bounds;

pub struct Settings {
    /// Files and bytes a package may have.
    pub bounds: Bounds,
    /// Publish jobs an account may have open at once.
    pub max_open: usize,
    /// How long a quote holds.
    pub quote_ttl: Duration,
    /// What a verification request costs, in credits, by tier.
    pub verification_credits: VerificationCredits,
    /// The directory topic the operator named (`--skills-directory-topic`);
    /// without one, the registry creates its own at its first start.
    pub configured_directory: Option<EntityId>,
    /// The directory topic, once it is known.
    pub directory: OnceLock<EntityId>,
    /// Why it is not known yet, as the worker last found (a refused
    /// publish says it).
    pub directory_problem: std::sync::Mutex<Option<String>>,
    /// Held while a skill's version topic and directory entry are made,
    /// so that two versions of a new skill do not both make them.
    pub registry: Mutex<()>,
    /// Wakes the worker when a publish job is created.
    pub wake: Notify,
}

#[derive(Clone, Copy, Debug)]
pub struct VerificationCredits {
    pub basic: i64,
    pub express: i64,
}
