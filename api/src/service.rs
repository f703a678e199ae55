//! Handlers every surface shares: a published file by its path, and health.

use serde_json::json;

use crate::reply::{self, Answer, Error};
use crate::request::Request;

/// A route whose answer is one published file, found by its path.
pub async fn file(request: Request) -> Answer {
    let build = request.build()?;
    let representation = build.routes.get(&request.path).ok_or_else(|| Error::not_found(&request.path))?;
    Ok(reply::representation(&request.method, &request.headers, representation))
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
