//! Running the api: [`serve`] takes a bound listener and a shutdown
//! future, so the binary wires the real address and signals and a test
//! binds port 0 and stops it when it likes.

use std::future::Future;
use std::sync::Arc;

use crate::app::App;
use crate::pipeline;
use crate::reload::{Outcome, Watcher};

/// Loads the published build (if any), then answers on `listener` until
/// `shutdown` resolves; requests in flight then finish. New builds are
/// picked up every `app.reload_every` meanwhile.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Arc<App>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let mut watcher = Watcher::new(app.layout.clone(), app.limits, app.live.clone());
    if watcher.check().await == Outcome::NoBuild {
        let site = app.layout.site.display().to_string();
        tracing::warn!(site, "no build published yet; serving health only until one is");
    }
    let watching = tokio::spawn(watcher.run(app.reload_every));
    let cleaner = app.clone();
    let cleaning = tokio::spawn(async move {
        let mut tick = tokio::time::interval(cleaner.cleanup_every);
        loop {
            tick.tick().await;
            cleaner.guard.json.clean();
            cleaner.guard.mcp.clean();
        }
    });
    warp::serve(pipeline::filter(app)).incoming(listener).graceful(shutdown).run().await;
    watching.abort();
    cleaning.abort();
}
