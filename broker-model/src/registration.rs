//! Self-registration (spec section 4, Registration): a request read and
//! checked as an HCS-11 profile, and the agent record it makes, for a new
//! agent or as an update of one. Pure: the caller supplies the owner, the
//! catalog and the time, and stores the result.
//!
//! **The UAID** is HCS-14's `uaid:aid:` of the agent's own data: registry,
//! display name, profile version, protocol, native id and skills (the AI
//! capability codes). The native id is CAIP-10 where one applies (the
//! owner's account for HCS-10 agents, and for agents without an endpoint),
//! else the endpoint's host. A profile may bring its own `uaid:did:`
//! (the agent already has a DID): it is kept as given. An update keeps the
//! UAID, the id, the registry, the protocol and the creation time: the
//! fields that define the identity stay put while the profile changes.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::catalog::{Catalog, Network};
use crate::{validate, Agent, AgentKind, Profile, Verification, CAPABILITIES, PROFILE_AI_AGENT, PROFILE_MCP_SERVER};
use shared::entity::EntityId;
use shared::uaid::{self, AgentData, Target, Uaid};

/// The registry an agent joins when the request names none.
pub const DEFAULT_REGISTRY: &str = "hashgraph-online";

/// Bounds on the profile's free text, in characters.
const MAX_NAME: usize = 200;
const MAX_ALIAS: usize = 100;
const MAX_BIO: usize = 4000;
const MAX_URL: usize = 2048;
/// Most additional registries one request may name.
pub const MAX_ADDITIONAL: usize = 16;

/// A refusal: the field (a dotted path into the body) and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    pub field: String,
    pub problem: String,
}

impl Invalid {
    fn new(field: impl Into<String>, problem: impl Into<String>) -> Invalid {
        Invalid { field: field.into(), problem: problem.into() }
    }
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.problem)
    }
}

/// A registration or update request, read and checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The profile; `uaid` is empty unless the profile brought one.
    pub profile: Profile,
    pub endpoint: Option<String>,
    /// `communicationProtocol` (or `protocol`), lower case.
    pub protocol: Option<String>,
    pub registry: Option<String>,
    /// Catalog network keys, in the order asked, each once.
    pub additional: Vec<String>,
    pub metadata: Map<String, Value>,
}

/// Who registers: the ledger account and its CAIP-10 form
/// (`hedera:testnet:0.0.1001`, `eip155:1:0xab…`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub account: String,
    pub caip10: String,
}

/// Reads a request body (`AgentRegistrationRequest`). Unknown top-level
/// fields are ignored (the hosted schema allows them); the profile is read
/// strictly as HCS-11.
pub fn read(body: &Value, catalog: &Catalog) -> Result<Request, Invalid> {
    let object = body.as_object().ok_or_else(|| Invalid::new("body", "expected a JSON object"))?;
    let text = |field: &str| -> Result<Option<String>, Invalid> {
        match object.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
            Some(_) => Err(Invalid::new(field, "expected a string")),
        }
    };
    let profile = match object.get("profile") {
        Some(Value::Object(profile)) => read_profile(profile)?,
        Some(_) => return Err(Invalid::new("profile", "expected an HCS-11 profile object")),
        None => return Err(Invalid::new("profile", "is required (an HCS-11 profile)")),
    };
    let endpoint = text("endpoint")?;
    if let Some(endpoint) = &endpoint {
        check_url("endpoint", endpoint, &["http", "https", "ws", "wss"])?;
    }
    let protocol = match text("communicationProtocol")? {
        Some(p) => Some(p),
        None => text("protocol")?,
    }
    .map(|p| p.to_lowercase());
    if let Some(p) = &protocol {
        if !catalog.protocols.iter().any(|known| known.id == *p) {
            let known: Vec<&str> = catalog.protocols.iter().map(|p| p.id.as_str()).collect();
            return Err(Invalid::new("communicationProtocol", format!("{p:?} is not one of {}", known.join(", "))));
        }
    }
    let registry = text("registry")?.map(|r| r.to_lowercase());
    if let Some(r) = &registry {
        if !catalog.registries.iter().any(|known| known.id == *r) {
            let known: Vec<&str> = catalog.registries.iter().map(|r| r.id.as_str()).collect();
            return Err(Invalid::new("registry", format!("{r:?} is not one of {}", known.join(", "))));
        }
    }
    let additional = match object.get("additionalRegistries") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => additional(items, catalog)?,
        Some(_) => return Err(Invalid::new("additionalRegistries", "expected an array of registry network keys")),
    };
    let metadata = match object.get("metadata") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(Invalid::new("metadata", "expected an object")),
    };
    Ok(Request { profile, endpoint, protocol, registry, additional, metadata })
}

/// The profile object as HCS-11: typed fields, unknown ones refused.
fn read_profile(profile: &Map<String, Value>) -> Result<Profile, Invalid> {
    let mut value = profile.clone();
    value.entry("uaid").or_insert_with(|| Value::String(String::new()));
    let profile: Profile = serde_path_to_error::deserialize(Value::Object(value)).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "profile".to_string() } else { format!("profile.{path}") };
        Invalid::new(field, e.into_inner().to_string())
    })?;
    check_profile(&profile)?;
    Ok(profile)
}

/// HCS-11's rules beyond the types.
fn check_profile(p: &Profile) -> Result<(), Invalid> {
    let bounded = |field: &str, value: &str, max: usize, required: bool| -> Result<(), Invalid> {
        if required && value.trim().is_empty() {
            return Err(Invalid::new(field, "must not be empty"));
        }
        if value.chars().count() > max {
            return Err(Invalid::new(field, format!("is longer than {max} characters")));
        }
        Ok(())
    };
    bounded("profile.version", &p.version, 20, true)?;
    bounded("profile.display_name", &p.display_name, MAX_NAME, true)?;
    bounded("profile.alias", p.alias.as_deref().unwrap_or(""), MAX_ALIAS, false)?;
    bounded("profile.bio", p.bio.as_deref().unwrap_or(""), MAX_BIO, false)?;
    for (field, topic) in
        [("profile.inboundTopicId", &p.inbound_topic_id), ("profile.outboundTopicId", &p.outbound_topic_id)]
    {
        if let Some(topic) = topic {
            topic.parse::<EntityId>().map_err(|_| Invalid::new(field, "expected a topic id (0.0.1234)"))?;
        }
    }
    for (i, social) in p.socials.iter().flatten().enumerate() {
        if social.platform.trim().is_empty() || social.handle.trim().is_empty() {
            return Err(Invalid::new(format!("profile.socials[{i}]"), "platform and handle must not be empty"));
        }
    }
    if let Some(image) = &p.profile_image {
        check_url("profile.profileImage", image, &["hcs", "https", "http", "ipfs", "ar", "data"])?;
    }
    match p.kind {
        PROFILE_AI_AGENT => {
            let ai = p.ai_agent.as_ref().ok_or_else(|| Invalid::new("profile.aiAgent", "is required for type 1"))?;
            if ai.kind > 1 {
                return Err(Invalid::new("profile.aiAgent.type", "must be 0 (manual) or 1 (autonomous)"));
            }
            bounded("profile.aiAgent.model", &ai.model, MAX_NAME, true)?;
            if let Some(code) = ai.capabilities.iter().find(|c| usize::from(**c) >= CAPABILITIES.len()) {
                return Err(Invalid::new(
                    "profile.aiAgent.capabilities",
                    format!("{code} is not a capability (0 to 18)"),
                ));
            }
        }
        PROFILE_MCP_SERVER => {
            let mcp =
                p.mcp_server.as_ref().ok_or_else(|| Invalid::new("profile.mcpServer", "is required for type 2"))?;
            bounded("profile.mcpServer.version", &mcp.version, 40, true)?;
            bounded("profile.mcpServer.description", &mcp.description, MAX_BIO, true)?;
            let transport = mcp.connection_info.transport.as_str();
            if !matches!(transport, "stdio" | "sse" | "streamable-http") {
                let problem = "must be stdio, sse or streamable-http";
                return Err(Invalid::new("profile.mcpServer.connectionInfo.transport", problem));
            }
            bounded("profile.mcpServer.connectionInfo.url", &mcp.connection_info.url, MAX_URL, true)?;
        }
        0 => {
            return Err(Invalid::new(
                "profile.type",
                "personal profiles (0) are not agents: use 1 (AI agent) or 2 (MCP server)",
            ))
        }
        other => return Err(Invalid::new("profile.type", format!("{other} is not 1 (AI agent) or 2 (MCP server)"))),
    }
    if !p.uaid.is_empty() {
        p.uaid.parse::<Uaid>().map_err(|e| Invalid::new("profile.uaid", e.to_string()))?;
    }
    Ok(())
}

/// An absolute URL with one of `schemes`.
fn check_url(field: &str, value: &str, schemes: &[&str]) -> Result<(), Invalid> {
    if value.len() > MAX_URL {
        return Err(Invalid::new(field, format!("is longer than {MAX_URL} bytes")));
    }
    let scheme = value.split_once(':').map(|(s, _)| s.to_ascii_lowercase());
    let fine = match scheme.as_deref() {
        Some(s) if schemes.contains(&s) && matches!(s, "http" | "https" | "ws" | "wss") => {
            host(value).is_some_and(|h| !h.is_empty())
        }
        Some(s) => schemes.contains(&s) && value.len() > s.len() + 1,
        None => false,
    };
    if !fine || value.chars().any(char::is_whitespace) {
        return Err(Invalid::new(field, format!("expected an absolute URL ({})", schemes.join(", "))));
    }
    Ok(())
}

/// The host of an `http(s)://` or `ws(s)://` URL, lower case.
fn host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => authority.split(':').next()?,
    };
    Some(host.to_ascii_lowercase())
}

/// `additionalRegistries`: network keys (`erc-8004:base-mainnet`), objects
/// with a `key`, or `{registry, networkId}`; a bare registry id stands for
/// its only network.
fn additional(items: &[Value], catalog: &Catalog) -> Result<Vec<String>, Invalid> {
    if items.len() > MAX_ADDITIONAL {
        return Err(Invalid::new("additionalRegistries", format!("at most {MAX_ADDITIONAL} registries")));
    }
    let networks: Vec<&Network> = catalog.additional_registries.iter().flat_map(|r| &r.networks).collect();
    let mut out: Vec<String> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let field = format!("additionalRegistries[{i}]");
        let found = match item {
            Value::String(text) => {
                let text = text.trim();
                networks.iter().find(|n| n.key == text).copied().or_else(|| {
                    let of: Vec<&&Network> = networks.iter().filter(|n| n.registry_id == text).collect();
                    (of.len() == 1).then(|| *of[0])
                })
            }
            Value::Object(o) => {
                let get = |k: &str| o.get(k).and_then(Value::as_str).map(str::trim);
                match (get("key"), get("registry"), get("networkId")) {
                    (Some(key), _, _) => networks.iter().find(|n| n.key == key).copied(),
                    (None, Some(registry), Some(network)) => {
                        networks.iter().find(|n| n.registry_id == registry && n.network_id == network).copied()
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        let network = found.ok_or_else(|| {
            let keys: Vec<&str> = networks.iter().map(|n| n.key.as_str()).collect();
            Invalid::new(
                field,
                format!("not a registry network of GET /register/additional-registries ({})", keys.join(", ")),
            )
        })?;
        if !out.contains(&network.key) {
            out.push(network.key.clone());
        }
    }
    Ok(out)
}

/// The catalog network of each key of `request.additional`.
pub fn networks<'a>(catalog: &'a Catalog, keys: &[String]) -> Vec<&'a Network> {
    let all: BTreeMap<&str, &Network> =
        catalog.additional_registries.iter().flat_map(|r| &r.networks).map(|n| (n.key.as_str(), n)).collect();
    keys.iter().filter_map(|k| all.get(k.as_str()).copied()).collect()
}

/// The protocol the agent speaks: as asked, else what its profile implies.
fn protocol(request: &Request) -> String {
    if let Some(p) = &request.protocol {
        return p.clone();
    }
    match (&request.profile.mcp_server, &request.profile.inbound_topic_id, &request.endpoint) {
        (Some(_), _, _) => "mcp",
        (None, Some(_), None) => "hcs-10",
        _ => "a2a",
    }
    .to_string()
}

/// A new agent from `request`, owned by `owner`, registered at `now`
/// (RFC 3339).
pub fn agent(request: &Request, owner: &Owner, catalog: &Catalog, now: &str) -> Result<Agent, Invalid> {
    let registry = request.registry.clone().unwrap_or_else(|| DEFAULT_REGISTRY.to_string());
    let protocol = protocol(request);
    let account = owner.caip10.rsplit(':').next().unwrap_or(&owner.account);
    let native_id = match (&request.endpoint, protocol.as_str()) {
        (Some(endpoint), p) if p != "hcs-10" => host(endpoint).unwrap_or_else(|| owner.caip10.clone()),
        _ => owner.caip10.clone(),
    };
    let uid = match (&request.profile.inbound_topic_id, protocol.as_str()) {
        (Some(inbound), "hcs-10") => format!("{inbound}@{account}"),
        _ => "0".to_string(),
    };
    let data = AgentData {
        registry: registry.clone(),
        name: request.profile.display_name.clone(),
        version: request.profile.version.clone(),
        protocol: protocol.clone(),
        native_id,
        skills: skills(&request.profile).into_iter().map(u64::from).collect(),
    };
    let computed = uaid::aid(&data, Some(&uid)).map_err(|e| Invalid::new("profile", e.to_string()))?;
    let uaid = match request.profile.uaid.parse::<Uaid>() {
        Ok(given) if given.target == Target::Did => given,
        Ok(given) if given != computed => {
            return Err(Invalid::new("profile.uaid", format!("is not this agent's UAID {computed} (HCS-14)")));
        }
        _ => computed,
    };
    let aid_id = uaid::aid_id(&data).map_err(|e| Invalid::new("profile", e.to_string()))?;
    let id = match uid.as_str() {
        "0" => format!("{registry}:{aid_id}"),
        uid => format!("{registry}:{aid_id}@{uid}"),
    };
    let base = Base { id, uaid, registry, protocol, original_id: aid_id, created_at: now.to_string() };
    record(request, base, catalog, now)
}

/// `existing` changed by `request` at `now`: the identity fields are kept.
pub fn updated(existing: &Agent, request: &Request, catalog: &Catalog, now: &str) -> Result<Agent, Invalid> {
    let base = Base {
        id: existing.id.clone(),
        uaid: existing.uaid.clone(),
        registry: existing.registry.clone(),
        protocol: existing.protocols.first().cloned().unwrap_or_else(|| protocol(request)),
        original_id: existing.original_id.clone(),
        created_at: existing.created_at.clone(),
    };
    let mut agent = record(request, base, catalog, now)?;
    agent.verification_status = existing.verification_status;
    Ok(agent)
}

/// What stays an agent's through its updates.
struct Base {
    id: String,
    uaid: Uaid,
    registry: String,
    protocol: String,
    original_id: String,
    created_at: String,
}

fn skills(profile: &Profile) -> Vec<u8> {
    match (&profile.ai_agent, &profile.mcp_server) {
        (Some(ai), _) => ai.capabilities.clone(),
        (None, Some(mcp)) => mcp.services.clone(),
        (None, None) => Vec::new(),
    }
}

fn record(request: &Request, base: Base, catalog: &Catalog, now: &str) -> Result<Agent, Invalid> {
    let profile = &request.profile;
    let adapter = catalog
        .adapters
        .iter()
        .filter(|a| a.enabled && a.supported_protocols.contains(&base.protocol))
        // Priority 1 comes before 2.
        .min_by_key(|a| a.priority)
        .ok_or_else(|| {
            Invalid::new("communicationProtocol", format!("no adapter of this broker speaks {}", base.protocol))
        })?;
    let mut endpoints = BTreeMap::new();
    if let Some(endpoint) = &request.endpoint {
        endpoints.insert(base.protocol.clone(), endpoint.clone());
    }
    if let Some(mcp) = &profile.mcp_server {
        endpoints.entry("mcp".to_string()).or_insert_with(|| mcp.connection_info.url.clone());
    }
    if let Some(inbound) = &profile.inbound_topic_id {
        endpoints.insert("inboundTopic".into(), format!("hcs://{inbound}"));
    }
    let chattable = super::chat::adapter_for(endpoints.keys().map(String::as_str)).is_some();
    let mut capabilities = skills(profile);
    if profile.mcp_server.is_some() && profile.ai_agent.is_none() {
        capabilities.clear();
    }
    capabilities.sort_unstable();
    capabilities.dedup();
    let description = match (&profile.bio, &profile.mcp_server) {
        (Some(bio), _) => bio.clone(),
        (None, Some(mcp)) => mcp.description.clone(),
        (None, None) => String::new(),
    };
    let mut profile = profile.clone();
    profile.uaid = base.uaid.to_string();
    let mut agent = Agent {
        id: base.id,
        uaid: base.uaid,
        registry: base.registry,
        name: profile.display_name.trim().to_string(),
        description,
        capability_labels: capabilities.iter().map(|c| CAPABILITIES[usize::from(*c)].to_string()).collect(),
        capabilities,
        protocols: vec![base.protocol],
        adapter: adapter.id.clone(),
        original_id: base.original_id,
        endpoints,
        trust_score: 0.0,
        trust_signals: BTreeMap::new(),
        available: false,
        availability_status: "unknown".into(),
        availability_source: None,
        availability_checked_at: None,
        availability_latency_ms: None,
        last_seen: None,
        verification_status: Verification::Registered,
        kind: if profile.kind == PROFILE_MCP_SERVER { AgentKind::McpServers } else { AgentKind::AiAgents },
        communication_supported: chattable,
        routing_supported: chattable,
        created_at: base.created_at,
        updated_at: now.to_string(),
        metadata: request.metadata.clone(),
        profile,
    };
    super::availability::settle(&mut agent, None);
    validate(&agent).map_err(|e| Invalid::new("profile", format!("{e:#}")))?;
    super::catalog::validate(catalog, std::slice::from_ref(&agent))
        .map_err(|e| Invalid::new("registry", format!("{e:#}")))?;
    Ok(agent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn catalog() -> Catalog {
        crate::generate::checked_in_catalog()
    }

    fn owner() -> Owner {
        Owner { account: "0.0.1001".into(), caip10: "hedera:testnet:0.0.1001".into() }
    }

    fn body() -> Value {
        json!({
            "profile": {
                "version": "1.0", "type": 1, "display_name": "Tide Reader", "bio": "Reads tides",
                "aiAgent": {"type": 1, "model": "gpt-4o", "capabilities": [7, 0]}
            },
            "endpoint": "https://tides.example/a2a",
            "communicationProtocol": "A2A",
            "metadata": {"category": "weather"}
        })
    }

    /// `body` with `path` (dotted) set to `value`, or removed when `None`.
    fn with(path: &str, value: Option<Value>) -> Value {
        let mut body = body();
        let mut parts: Vec<&str> = path.split('.').collect();
        let last = parts.pop().unwrap();
        let mut at = &mut body;
        for part in parts {
            at = at.get_mut(part).unwrap();
        }
        match value {
            Some(v) => at[last] = v,
            None => {
                at.as_object_mut().unwrap().remove(last);
            }
        }
        body
    }

    /// Reads `body`: accepted, or refused naming `field`.
    fn check(body: Value, field: Option<&str>) {
        let got = read(&body, &catalog()).and_then(|r| agent(&r, &owner(), &catalog(), "2026-11-23T10:00:00.000Z"));
        match (got, field) {
            (Ok(_), None) => {}
            (Err(e), Some(field)) => assert_eq!(e.field, field, "{body}: {e}"),
            (got, field) => panic!("{body}: got {got:?}, expected a refusal naming {field:?}"),
        }
    }

    #[test]
    fn requests_are_read_as_hcs11_and_refused_naming_the_field() {
        check(body(), None);
        check(json!([]), Some("body"));
        check(with("profile", None), Some("profile"));
        check(with("profile", Some(json!("x"))), Some("profile"));
        check(with("profile.display_name", Some(json!("  "))), Some("profile.display_name"));
        check(with("profile.display_name", None), Some("profile"));
        check(with("profile.version", Some(json!(1))), Some("profile.version"));
        check(with("profile.type", Some(json!(0))), Some("profile.type"));
        check(with("profile.type", Some(json!(3))), Some("profile.type"));
        check(with("profile.type", Some(json!("1"))), Some("profile.type"));
        check(with("profile.aiAgent", None), Some("profile.aiAgent"));
        check(with("profile.aiAgent.type", Some(json!(2))), Some("profile.aiAgent.type"));
        check(with("profile.aiAgent.model", Some(json!(""))), Some("profile.aiAgent.model"));
        check(with("profile.aiAgent.capabilities", Some(json!([19]))), Some("profile.aiAgent.capabilities"));
        check(with("profile.aiAgent.capabilities", Some(json!([-1]))), Some("profile.aiAgent.capabilities[0]"));
        check(with("profile.inboundTopicId", Some(json!("topic"))), Some("profile.inboundTopicId"));
        check(with("profile.socials", Some(json!([{"platform": "x", "handle": ""}]))), Some("profile.socials[0]"));
        check(with("profile.socials", Some(json!([{"platform": "x"}]))), Some("profile.socials[0]"));
        check(with("profile.profileImage", Some(json!("not a url"))), Some("profile.profileImage"));
        check(with("profile.profileImage", Some(json!("hcs://1/0.0.12345"))), None);
        check(with("profile.colour", Some(json!("red"))), Some("profile.colour"));
        check(with("profile.uaid", Some(json!("uaid:aid:x"))), Some("profile.uaid"));
        check(with("profile.uaid", Some(json!("uaid:did:z6Mk;uid=0"))), None);
        check(with("profile.bio", Some(json!("b".repeat(MAX_BIO + 1)))), Some("profile.bio"));
        check(with("endpoint", Some(json!("tides.example"))), Some("endpoint"));
        check(with("endpoint", Some(json!("ftp://tides.example"))), Some("endpoint"));
        check(with("endpoint", Some(json!("https://"))), Some("endpoint"));
        check(with("endpoint", Some(json!(7))), Some("endpoint"));
        check(with("communicationProtocol", Some(json!("smoke-signals"))), Some("communicationProtocol"));
        check(with("communicationProtocol", Some(json!("olas"))), None);
        check(with("registry", Some(json!("nowhere"))), Some("registry"));
        check(with("metadata", Some(json!([1]))), Some("metadata"));
        check(with("additionalRegistries", Some(json!("erc-8004"))), Some("additionalRegistries"));
        check(with("additionalRegistries", Some(json!(["erc-8004:mars"]))), Some("additionalRegistries[0]"));
        check(with("additionalRegistries", Some(json!(["erc-8004"]))), Some("additionalRegistries[0]"));
        check(with("additionalRegistries", Some(json!(["nanda", {"key": "erc-8004:base-mainnet"}]))), None);
        check(with("additionalRegistries", Some(json!([{"registry": "erc-8004", "networkId": "base-mainnet"}]))), None);
        let mcp = json!({"version": "1.0", "type": 2, "display_name": "Files", "mcpServer": {
            "version": "2025-03-26", "connectionInfo": {"url": "https://files.example/mcp", "transport": "sse"},
            "services": [0, 1], "description": "Reads files"}});
        check(json!({"profile": mcp}), None);
        let mut no_mcp = mcp.clone();
        no_mcp.as_object_mut().unwrap().remove("mcpServer");
        check(json!({"profile": no_mcp}), Some("profile.mcpServer"));
        let mut bad_transport = mcp.clone();
        bad_transport["mcpServer"]["connectionInfo"]["transport"] = json!("pigeon");
        check(json!({"profile": bad_transport}), Some("profile.mcpServer.connectionInfo.transport"));
    }

    #[test]
    fn the_uaid_is_hcs14_of_the_agents_own_data_and_an_update_keeps_it() {
        let catalog = catalog();
        let request = read(&body(), &catalog).unwrap();
        let agent = agent(&request, &owner(), &catalog, "2026-11-23T10:00:00.000Z").unwrap();
        let data = AgentData {
            registry: "hashgraph-online".into(),
            name: "Tide Reader".into(),
            version: "1.0".into(),
            protocol: "a2a".into(),
            native_id: "tides.example".into(),
            skills: vec![0, 7],
        };
        assert_eq!(agent.uaid, uaid::aid(&data, None).unwrap());
        assert_eq!(agent.profile.uaid, agent.uaid.as_str());
        assert_eq!(agent.capabilities, vec![0, 7]);
        assert_eq!(agent.capability_labels, vec!["Text Generation", "Knowledge Retrieval"]);
        assert_eq!(agent.protocols, vec!["a2a"]);
        assert_eq!(agent.adapter, "a2a-adapter");
        assert_eq!(agent.endpoints.get("a2a").map(String::as_str), Some("https://tides.example/a2a"));
        assert!(agent.communication_supported);
        // The same request registers the same UAID; another name another.
        let again = super::agent(&request, &owner(), &catalog, "2026-11-24T00:00:00.000Z").unwrap();
        assert_eq!(again.uaid, agent.uaid);
        let renamed = read(&with("profile.display_name", Some(json!("Tide Writer"))), &catalog).unwrap();
        let other = super::agent(&renamed, &owner(), &catalog, "2026-11-23T10:00:00.000Z").unwrap();
        assert_ne!(other.uaid, agent.uaid);
        // An update with a new name and registry keeps the identity.
        let mut change = renamed.clone();
        change.registry = Some("nanda".into());
        let updated = updated(&agent, &change, &catalog, "2026-11-25T00:00:00.000Z").unwrap();
        assert_eq!((&updated.uaid, &updated.id, &updated.registry), (&agent.uaid, &agent.id, &agent.registry));
        assert_eq!(updated.name, "Tide Writer");
        assert_eq!(updated.created_at, agent.created_at);
        assert_eq!(updated.updated_at, "2026-11-25T00:00:00.000Z");
        // An HCS-10 agent is the owner's account, its uid the inbound topic.
        let hcs10 = read(
            &json!({"profile": {"version": "1.0", "type": 1, "display_name": "Relay",
            "inboundTopicId": "0.0.5005", "aiAgent": {"type": 0, "model": "m", "capabilities": [16]}}}),
            &catalog,
        )
        .unwrap();
        let relay = super::agent(&hcs10, &owner(), &catalog, "2026-11-23T10:00:00.000Z").unwrap();
        assert_eq!(relay.uaid.param("proto"), Some("hcs-10"));
        assert_eq!(relay.uaid.param("nativeId"), Some("hedera:testnet:0.0.1001"));
        assert_eq!(relay.uaid.param("uid"), Some("0.0.5005@0.0.1001"));
        assert_eq!(relay.endpoints.get("inboundTopic").map(String::as_str), Some("hcs://0.0.5005"));
    }
}
