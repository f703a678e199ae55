//! Handlers every surface shares: a published file by its path, a page,
//! the OpenAPI document, and health.

use serde_json::json;

use shared::manifest::Damage;

use crate::reply::{self, Answer, Error, Reply};
use crate::request::Request;

/// The file of the request's build for manifest route `route`, answered
/// under the request's preconditions; `None` when the build has no such
/// file (or the request no build: the handlers ask for one first).
pub async fn published(request: &Request, route: &str) -> Option<Reply> {
    let build = request.build.as_ref()?;
    let found = match build.routes.kept(route) {
        Some(kept) => Ok(kept),
        None => {
            // Whether a copy is current needs the index's validators only:
            // the file is read (and hashed, to check it) only to be sent.
            if reply::asks_if_modified(&request.headers) {
                if let Some(Ok(head)) = build.routes.head(route) {
                    if let Some(not_modified) = reply::not_modified(&request.headers, &head) {
                        return Some(not_modified);
                    }
                }
            }
            read(build, route).await?
        }
    };
    Some(match found {
        Ok(r) => reply::representation(&request.method, &request.headers, &r),
        Err(damage) => {
            tracing::error!(build = %build.id, %damage, "a file of the build is damaged; not served");
            Error::damaged(&damage).into_reply()
        }
    })
}

/// `build`'s file for `route`, kept or read; `None` when it has none. A
/// file not kept may wait on the disk: it is read on the blocking threads,
/// so that the async workers (few: see `Config::io_threads`) go on
/// answering meanwhile.
pub async fn read(
    build: &std::sync::Arc<crate::published::Build>,
    route: &str,
) -> Option<Result<std::sync::Arc<reply::Representation>, Damage>> {
    if let Some(kept) = build.routes.kept(route) {
        return Some(Ok(kept));
    }
    let (build, owned) = (build.clone(), route.to_string());
    match tokio::task::spawn_blocking(move || build.routes.load(&owned)).await {
        Ok(loaded) => loaded,
        Err(failed) => Some(Err(Damage { file: route.to_string(), problem: format!("its read failed: {failed}") })),
    }
}

/// A route whose answer is one published file, found by its path.
pub async fn file(request: Request) -> Answer {
    request.build()?;
    published(&request, &request.path).await.ok_or_else(|| Error::not_found(&request.path))
}

/// A page for people (`pages`): the build's file for the page's
/// route, the path spelled as the generator spells it whatever spelling
/// the request used.
pub async fn page(request: Request) -> Answer {
    request.build()?;
    let route = pages::routes::canonical(&request.path);
    published(&request, &route).await.ok_or_else(|| Error::not_found(&request.path))
}

/// The OpenAPI document's representation, made once from the route table
/// when the server starts ([`crate::server::serve`] sets it: the table
/// names this module's handlers, so this module cannot read the table).
pub static OPENAPI: std::sync::OnceLock<crate::reply::Representation> = std::sync::OnceLock::new();

/// `/api/v1/openapi.json`: the document of this api's routes
/// (`shared::http::Representation::openapi`).
pub async fn openapi(request: Request) -> Answer {
    let document = OPENAPI.get().ok_or_else(|| Error::not_found(&request.path))?;
    Ok(crate::reply::representation(&request.method, &request.headers, document))
}

/// `/health`: readiness, what a load balancer asks. 200 with `"status":
/// "ok"` while a build is served; 503 with `"status": "starting"` until
/// one is loaded. The body also tells which build, the quotas' load and the
/// MCP result cache's size.
pub async fn health(request: Request) -> Answer {
    let app = &request.app;
    let build = request.build.as_ref();
    let (held_sessions, held_bytes) = app.chat.held();
    let body = json!({
        "status": if build.is_some() { "ok" } else { "starting" },
        "ready": build.is_some(),
        "build": build.map(|b| b.id.clone()),
        "connections": app.connections.count(),
        "rateLimit": {"guardClients": app.guard.json.tracked(), "mcpClients": app.guard.mcp.tracked()},
        "chatAuth": {"sessions": held_sessions, "bytes": held_bytes, "boundBytes": app.chat.auth_bounds.max_held_bytes},
        "mcpCache": build.and_then(|b| b.guard.as_ref()).map(|g| json!({
            "bytes": g.cached_bytes(), "boundBytes": app.guard.mcp_cache.bytes,
        })),
        "broker": build.and_then(|b| b.broker.as_ref()).map(|b| json!({
            "agents": b.index.len(), "loadedAt": b.loaded_at, "fingerprint": b.fingerprint,
        })),
    });
    let mut reply = reply::json(&body);
    if build.is_none() {
        *reply.status_mut() = warp::http::StatusCode::SERVICE_UNAVAILABLE;
    }
    Ok(reply)
}

/// `/health/live`: liveness, what a supervisor asks before restarting the
/// process. 200 whenever the api answers at all, build or not.
pub async fn live(_: Request) -> Answer {
    Ok(reply::json(&json!({"status": "ok"})))
}
