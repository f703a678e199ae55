//! Section B's live route: the stateless MCP endpoint ([`mcp`]) and its
//! seven tools ([`tools`]), and the trust routes of the plugin catalog
//! ([`trust`]). The guard's JSON files are published files (see the route
//! table).

pub mod mcp;
pub mod tools;
pub mod trust;

use crate::reply::Answer;
use crate::request::Request;

/// `POST /api/guard/public-mcp`: the body is already read up to its bound
/// and the quota spent; access rules and the JSON-RPC exchange are
/// [`mcp::respond`]'s.
pub async fn mcp_endpoint(request: Request) -> Answer {
    let datasets = request.build.as_ref().and_then(|b| b.guard.as_ref());
    Ok(mcp::respond(&request.app.guard.access, datasets, &request.headers, &request.body))
}
