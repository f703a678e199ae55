//! `GET /api/v1/agents/badge`: a shields.io endpoint badge for one agent.

use std::collections::HashMap;

use serde_json::json;

use super::agents;
use crate::reply::{self, Answer, Error};
use crate::request::Request;

pub const BADGE_STYLES: [&str; 5] = ["flat", "flat-square", "for-the-badge", "plastic", "social"];
pub const BADGE_METRICS: [&str; 5] = ["status", "trust", "registry", "protocol", "availability"];
const BADGE_CACHE_SECONDS: u64 = 300;

/// `GET /agents/badge`: a shields.io endpoint badge for one agent.
pub async fn badge(request: Request) -> Answer {
    agents(&request)?;
    let params: HashMap<String, String> =
        form_urlencoded::parse(request.query.as_bytes()).map(|(k, v)| (k.into_owned(), v.trim().to_string())).collect();
    let Some(uaid) = params.get("uaid").filter(|u| !u.is_empty()) else {
        return Err(Error::parameter("uaid", "uaid is required"));
    };
    let metric = params.get("metric").map_or("status", String::as_str);
    if !BADGE_METRICS.contains(&metric) {
        return Err(Error::parameter("metric", format!("metric must be one of {}", BADGE_METRICS.join(", "))));
    }
    let style = params.get("style").map(String::as_str);
    if style.is_some_and(|s| !BADGE_STYLES.contains(&s)) {
        return Err(Error::parameter("style", format!("style must be one of {}", BADGE_STYLES.join(", "))));
    }
    // As of now: the live overlay's agent where it changed since the build.
    let view = request.app.overlay.view();
    let (default_label, message, color, is_error) = match super::register::lookup(&request, &view, uaid)? {
        None => (metric.to_string(), "not found".to_string(), "lightgrey", true),
        Some(a) => match metric {
            "trust" => (
                "trust".into(),
                format!("{}", a.trust_score),
                match a.trust_score {
                    s if s >= 80.0 => "brightgreen",
                    s if s >= 60.0 => "green",
                    s if s >= 40.0 => "yellow",
                    s if s >= 20.0 => "orange",
                    _ => "red",
                },
                false,
            ),
            "registry" => ("registry".into(), a.registry.clone(), "blue", false),
            "protocol" => ("protocol".into(), a.protocols.join(" | "), "informational", false),
            "availability" => (
                "availability".into(),
                a.availability_status.clone(),
                if a.available { "brightgreen" } else { "lightgrey" },
                false,
            ),
            _ => (
                "status".into(),
                a.verification_status.as_str().to_string(),
                match a.verification_status.as_str() {
                    "registered" => "brightgreen",
                    "indexed" => "blue",
                    _ => "yellow",
                },
                false,
            ),
        },
    };
    let label = params.get("label").filter(|l| !l.is_empty()).cloned().unwrap_or(default_label);
    let mut body = json!({"schemaVersion": 1, "label": label, "message": message, "color": color,
        "cacheSeconds": BADGE_CACHE_SECONDS});
    if let Some(style) = style {
        body["style"] = json!(style);
    }
    if is_error {
        body["isError"] = json!(true);
    }
    Ok(reply::json(&body))
}
