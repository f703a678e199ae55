//! Waiting for an event a test cannot be told of: a condition looked at
//! every so often, a bounded number of times, the test failing with what
//! it waited for once they are spent. Tests wait for the event, never for
//! time to pass; the bound only keeps a broken build from hanging them.

use std::time::Duration;

/// Looks at `happened` up to `looks` times, `every` apart, until it holds;
/// panics naming `what` when it never does.
pub async fn until(what: &str, looks: u32, every: Duration, mut happened: impl AsyncFnMut() -> bool) {
    for _ in 0..looks {
        if happened().await {
            return;
        }
        tokio::time::sleep(every).await;
    }
    panic!("{what}: not within {looks} looks {every:?} apart");
}

/// [`until`] for a test without a runtime.
pub fn until_blocking(what: &str, looks: u32, every: Duration, mut happened: impl FnMut() -> bool) {
    for _ in 0..looks {
        if happened() {
            return;
        }
        std::thread::sleep(every);
    }
    panic!("{what}: not within {looks} looks {every:?} apart");
}
