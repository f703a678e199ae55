//! The api's embedding provider for hybrid search, and how its last call
//! went (what `GET /search/status` reports).

use std::sync::Mutex;

use embeddings::Provider;

pub struct Vectors {
    pub provider: Provider,
    last_error: Mutex<Option<String>>,
}

impl Vectors {
    pub fn new(provider: Provider) -> Vectors {
        Vectors { provider, last_error: Mutex::default() }
    }

    /// Why the last call failed, if it did.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().expect("lock poisoned").clone()
    }

    /// The outcome of a call: `None` when it succeeded.
    pub fn record(&self, error: Option<String>) {
        *self.last_error.lock().expect("lock poisoned") = error;
    }
}
