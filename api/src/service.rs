//! Handlers every surface shares: a published file by its path, and health.

use serde_json::json;

use crate::published::Build;
use crate::reply::{self, Answer, Error, Reply};
use crate::request::Request;

/// The build's file for manifest route `route`, answered under the
/// request's preconditions; `None` when the build has no such file.
pub fn published(request: &Request, build: &Build, route: &str) -> Option<Reply> {
    build.routes.get(route).map(|r| reply::representation(&request.method, &request.headers, r))
}

/// A route whose answer is one published file, found by its path.
pub async fn file(request: Request) -> Answer {
    let build = request.build()?;
    published(&request, build, &request.path).ok_or_else(|| Error::not_found(&request.path))
}

/// `/health`: whether a build is loaded, which, and the quotas' load.
pub async fn health(request: Request) -> Answer {
    let app = &request.app;
    let build = request.build.as_ref();
    let body = json!({
        "status": "ok",
        "ready": build.is_some(),
        "build": build.map(|b| b.id.clone()),
        "rateLimit": {"guardClients": app.guard.json.tracked(), "mcpClients": app.guard.mcp.tracked()},
        "broker": build.and_then(|b| b.broker.as_ref()).map(|b| json!({
            "agents": b.index.agents.len(), "loadedAt": b.loaded_at, "fingerprint": b.fingerprint,
        })),
    });
    Ok(reply::json(&body))
}
