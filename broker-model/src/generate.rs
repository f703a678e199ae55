//! Deterministic agent indexes: `datasets/broker/agents.json` and the
//! 100k-agent benchmark index come from here. Registries, protocols and
//! capabilities follow a skewed popularity, as real indexes do; every UAID
//! is derived as HCS-14 says from the agent's own data.

use std::collections::BTreeMap;

use serde_json::json;

use crate::catalog::{FeedbackEntry, FEEDBACK_REGISTRY, NETWORKS};
use crate::{Agent, AiAgent, Profile, PROFILE_AI_AGENT, PROFILE_MCP_SERVER};
use shared::uaid::{self, AgentData};

pub use crate::CAPABILITIES;

/// A source registry: its name, protocol, adapter, share of the index (out
/// of 100) and whether its agents are MCP servers.
struct Registry {
    name: &'static str,
    protocol: &'static str,
    adapter: &'static str,
    share: u64,
    mcp: bool,
}

const REGISTRIES: [Registry; 7] = [
    Registry { name: "hashgraph-online", protocol: "hcs-10", adapter: "hcs10-adapter", share: 30, mcp: false },
    Registry { name: "erc-8004", protocol: "erc-8004", adapter: "erc8004-adapter", share: 18, mcp: false },
    Registry { name: "a2a-registry", protocol: "a2a", adapter: "a2a-adapter", share: 16, mcp: false },
    Registry { name: "mcp-registry", protocol: "mcp", adapter: "mcp-adapter", share: 15, mcp: true },
    Registry { name: "nanda", protocol: "a2a", adapter: "nanda-adapter", share: 9, mcp: false },
    Registry { name: "virtuals", protocol: "acp-virtuals", adapter: "virtuals-adapter", share: 8, mcp: false },
    Registry { name: "olas", protocol: "olas", adapter: "olas-adapter", share: 4, mcp: false },
];

const ADJECTIVES: [&str; 24] = [
    "Ledger", "Swift", "Quiet", "Atlas", "Copper", "Nimbus", "Harbor", "Signal", "Granite", "Lumen", "Orbit", "Prism",
    "Sable", "Tidal", "Vector", "Willow", "Cinder", "Beacon", "Keystone", "Meridian", "Summit", "Relay", "Cobalt",
    "Juniper",
];

/// A noun per capability: what an agent good at it is called.
const NOUNS: [&str; 19] = [
    "Writer",
    "Painter",
    "Voice",
    "Director",
    "Coder",
    "Translator",
    "Digest",
    "Librarian",
    "Bridge",
    "Analyst",
    "Tracker",
    "Auditor",
    "Steward",
    "Sentinel",
    "Compliance",
    "Watchdog",
    "Conductor",
    "Connector",
    "Automator",
];

const MODELS: [&str; 6] =
    ["gpt-4.1", "claude-sonnet-4", "gemini-2.5-pro", "llama-3.3-70b", "mistral-large", "qwen3-32b"];

/// Hosts of the generated agents: under `.example`, which never resolves
/// (RFC 2606), so that the api's availability checks of a generated index
/// call no one's real host.
const DOMAINS: [&str; 8] = [
    "agents.example",
    "ai.acme.example",
    "labs.northwind.example",
    "bots.contoso.example",
    "api.fabrikam.example",
    "mesh.initech.example",
    "tools.globex.example",
    "svc.umbrella.example",
];

/// The words agents of this generator are named and described by, and
/// their registries and protocols: what a benchmark's queries draw from.
pub fn vocabulary() -> (Vec<&'static str>, Vec<&'static str>, Vec<&'static str>) {
    let words = ADJECTIVES.iter().chain(NOUNS.iter()).copied().collect();
    let registries = REGISTRIES.iter().map(|r| r.name).collect();
    let mut protocols: Vec<&str> = REGISTRIES.iter().map(|r| r.protocol).collect();
    protocols.dedup();
    (words, registries, protocols)
}

/// Picks an index with weights `shares`.
fn weighted(rng: &mut Rng, shares: &[u64]) -> usize {
    let total: u64 = shares.iter().sum();
    let mut pick = rng.below(total);
    for (i, share) in shares.iter().enumerate() {
        if pick < *share {
            return i;
        }
        pick -= share;
    }
    shares.len() - 1
}

/// `YYYY-MM-DDTHH:MM:SSZ`, `days` after 2025-01-01.
fn time(days: u64, seconds: u64) -> String {
    let start = chrono::NaiveDate::from_ymd_opt(2025, 1, 1).expect("date");
    let at = start.and_hms_opt(0, 0, 0).expect("midnight")
        + chrono::Duration::days(days as i64)
        + chrono::Duration::seconds(seconds as i64);
    at.and_utc().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `n` agents from `seed`; the same arguments give the same index.
/// The checked-in catalog (`datasets/broker/catalog.json`): every registry
/// and protocol the generated agents name is in it.
pub fn checked_in_catalog() -> crate::catalog::Catalog {
    let text = std::fs::read(shared::checkout::path("datasets/broker/catalog.json")).expect("the checked-in catalog");
    serde_json::from_slice(&text).expect("the checked-in catalog reads")
}

pub fn agents(n: usize, seed: u64) -> Vec<Agent> {
    let mut rng = Rng::new(seed ^ 0xa6e7_1d3c);
    let shares: Vec<u64> = REGISTRIES.iter().map(|r| r.share).collect();
    // Capability popularity: text generation and retrieval lead.
    let capability_shares: Vec<u64> = (0..CAPABILITIES.len() as u64).map(|c| 40 / (c + 1) + 3).collect();
    (0..n).map(|i| agent(&mut rng, i, &shares, &capability_shares)).collect()
}

fn agent(rng: &mut Rng, i: usize, shares: &[u64], capability_shares: &[u64]) -> Agent {
    let registry = &REGISTRIES[weighted(rng, shares)];
    let mut capabilities: Vec<u8> = Vec::new();
    for _ in 0..1 + rng.below(4) {
        let c = weighted(rng, capability_shares) as u8;
        if !capabilities.contains(&c) {
            capabilities.push(c);
        }
    }
    capabilities.sort_unstable();
    let lead = capabilities[rng.below(capabilities.len() as u64) as usize];
    let name = format!("{} {}", ADJECTIVES[rng.below(ADJECTIVES.len() as u64) as usize], NOUNS[lead as usize]);
    let name = if i >= ADJECTIVES.len() * NOUNS.len() { format!("{name} {}", i / 100) } else { name };
    let slug = format!("{}-{i}", name.to_lowercase().replace(' ', "-"));
    let domain = DOMAINS[rng.below(DOMAINS.len() as u64) as usize];
    let account = 4_000_000 + i as u64 * 7 + rng.below(7);
    let (native_id, uid, original_id) = match registry.name {
        "hashgraph-online" => {
            let inbound = account + 1;
            (format!("hedera:mainnet:0.0.{account}"), format!("0.0.{inbound}@0.0.{account}"), format!("0.0.{account}"))
        }
        "erc-8004" => {
            let chain = [1u64, 8453, 11155111][rng.below(3) as usize];
            (format!("eip155:{chain}:{}", 1000 + i), format!("{chain}:{}", 1000 + i), format!("{}", 1000 + i))
        }
        "virtuals" => (
            format!("eip155:8453:0x{:040x}", rng.next_u64() as u128 * 7919 + i as u128),
            "0".into(),
            format!("virtuals-{i}"),
        ),
        "olas" => (format!("100:{}", 300 + i), "0".into(), format!("service-{}", 300 + i)),
        "mcp-registry" => (format!("{domain}/mcp/{slug}"), "0".into(), slug.clone()),
        _ => (domain.to_string(), slug.clone(), slug.clone()),
    };
    let version = format!("1.{}.{}", rng.below(4), rng.below(10));
    let data = AgentData {
        registry: registry.name.into(),
        name: name.clone(),
        version,
        protocol: registry.protocol.into(),
        native_id: native_id.clone(),
        skills: capabilities.iter().map(|c| u64::from(*c)).collect(),
    };
    let uaid = uaid::aid(&data, Some(&uid)).expect("generated agents are valid");
    let labels: Vec<String> = capabilities.iter().map(|c| CAPABILITIES[*c as usize].to_string()).collect();
    let description = format!(
        "{name} offers {} for {} users, reachable over {}.",
        labels.join(", ").to_lowercase(),
        ["developer", "trading", "research", "support", "operations", "community"][rng.below(6) as usize],
        registry.protocol
    );
    let uptime = 60.0 + rng.below(401) as f64 / 10.0;
    let feedback = rng.below(1001) as f64 / 10.0;
    let verified_owner = if rng.chance(55) { 100.0 } else { 0.0 };
    let age = (rng.below(670) as f64 / 670.0 * 100.0).round();
    let trust_signals: BTreeMap<String, f64> =
        [("age", age), ("feedback", feedback), ("uptime", uptime), ("verifiedOwner", verified_owner)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
    let trust_score = ((uptime * 0.35 + feedback * 0.3 + verified_owner * 0.2 + age * 0.15) * 10.0).round() / 10.0;
    let available = rng.chance(82);
    let created_days = rng.below(640);
    let created_at = time(created_days, rng.below(86_400));
    let updated_at = time(created_days + rng.below(30), 86_399);
    let mut endpoints = BTreeMap::new();
    match registry.protocol {
        "hcs-10" => {
            endpoints.insert("inboundTopic".into(), format!("hcs://0.0.{}", account + 1));
        }
        "mcp" => {
            endpoints.insert("mcp".into(), format!("https://{domain}/mcp/{slug}"));
        }
        _ => {
            endpoints.insert("a2a".into(), format!("https://{domain}/agents/{slug}"));
        }
    }
    let is_free = rng.chance(45);
    let pricing = if is_free { "free" } else { ["per-call", "subscription"][rng.below(2) as usize] };
    let category =
        ["finance", "developer-tools", "research", "productivity", "security", "media"][rng.below(6) as usize];
    let languages: &[&str] = [&["en"][..], &["en", "es"], &["en", "de", "fr"]][rng.below(3) as usize];
    let region = ["us-east", "eu-west", "ap-south"][rng.below(3) as usize];
    let runtime = ["node", "python", "rust"][rng.below(3) as usize];
    let metadata = json!({
        "isFree": is_free,
        "pricing": {"model": pricing, "currency": "USD"},
        "category": category,
        "languages": languages,
        "deployment": {"region": region, "runtime": runtime},
    });
    let serde_json::Value::Object(metadata) = metadata else { unreachable!("an object literal") };
    let (inbound, outbound) = match registry.protocol {
        "hcs-10" => (Some(format!("0.0.{}", account + 1)), Some(format!("0.0.{}", account + 2))),
        _ => (None, None),
    };
    Agent {
        id: format!("{}:{original_id}", registry.name),
        uaid: uaid.clone(),
        registry: registry.name.into(),
        name: name.clone(),
        description: description.clone(),
        capabilities: capabilities.clone(),
        capability_labels: labels,
        protocols: vec![registry.protocol.to_string()],
        adapter: registry.adapter.into(),
        original_id,
        endpoints,
        trust_score,
        trust_signals,
        available,
        availability_status: if available { "online" } else { "offline" }.into(),
        availability_source: None,
        availability_checked_at: None,
        availability_latency_ms: None,
        last_seen: None,
        verification_status: {
            use super::Verification::*;
            [Registered, Indexed, Indexed, Pending][rng.below(4) as usize]
        },
        kind: if registry.mcp { super::AgentKind::McpServers } else { super::AgentKind::AiAgents },
        communication_supported: registry.protocol != "olas",
        routing_supported: matches!(registry.protocol, "hcs-10" | "a2a" | "mcp"),
        created_at,
        updated_at,
        metadata,
        profile: Profile {
            version: "1.0".into(),
            kind: if registry.mcp { PROFILE_MCP_SERVER } else { PROFILE_AI_AGENT },
            display_name: name,
            alias: Some(slug),
            bio: Some(description),
            inbound_topic_id: inbound,
            outbound_topic_id: outbound,
            ai_agent: (!registry.mcp).then(|| AiAgent {
                kind: rng.below(2) as u8,
                model: MODELS[rng.below(MODELS.len() as u64) as usize].into(),
                capabilities,
                creator: None,
            }),
            socials: None,
            profile_image: None,
            properties: None,
            mcp_server: None,
            uaid: uaid.to_string(),
        },
    }
}

/// The demo agents the api serves on loopback with `--demo-agents`
/// (`api::demo`): an A2A agent and a plain HTTP agent, at the addresses
/// given (`datasets/broker/demo-agents.json` has the defaults).
pub fn demo_agents(a2a: &str, http: &str) -> Vec<Agent> {
    let demo = |slug: &str, name: &str, protocol: &str, adapter: &str, endpoint: (&str, String), bio: &str| {
        let data = AgentData {
            registry: "almanac".into(),
            name: name.into(),
            version: "1.0.0".into(),
            protocol: protocol.into(),
            native_id: slug.into(),
            skills: vec![0],
        };
        let uaid = uaid::aid(&data, Some(slug)).expect("the demo agents are valid");
        let metadata = json!({"isFree": true, "pricing": {"model": "free", "currency": "USD"}, "category": "demo"});
        let serde_json::Value::Object(metadata) = metadata else { unreachable!("an object literal") };
        let signals: BTreeMap<String, f64> =
            [("age", 0.0), ("feedback", 0.0), ("uptime", 100.0), ("verifiedOwner", 100.0)]
                .map(|(k, v)| (k.into(), v))
                .into();
        Agent {
            id: format!("almanac:{slug}"),
            uaid: uaid.clone(),
            registry: "almanac".into(),
            name: name.into(),
            description: bio.into(),
            capabilities: vec![0],
            capability_labels: vec![CAPABILITIES[0].to_string()],
            protocols: vec![protocol.into()],
            adapter: adapter.into(),
            original_id: slug.into(),
            endpoints: [(endpoint.0.to_string(), endpoint.1)].into(),
            trust_score: 55.0,
            trust_signals: signals,
            available: true,
            availability_status: "online".into(),
            availability_source: None,
            availability_checked_at: None,
            availability_latency_ms: None,
            last_seen: None,
            verification_status: super::Verification::Registered,
            kind: super::AgentKind::AiAgents,
            communication_supported: true,
            routing_supported: true,
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: "2026-01-01T00:00:00Z".into(),
            metadata,
            profile: Profile {
                version: "1.0".into(),
                kind: PROFILE_AI_AGENT,
                display_name: name.into(),
                alias: Some(slug.into()),
                bio: Some(bio.into()),
                inbound_topic_id: None,
                outbound_topic_id: None,
                ai_agent: Some(AiAgent { kind: 0, model: "rule-based".into(), capabilities: vec![0], creator: None }),
                socials: None,
                profile_image: None,
                properties: None,
                mcp_server: None,
                uaid: uaid.to_string(),
            },
        }
    };
    vec![
        demo(
            "almanac-echo",
            "Almanac Echo",
            "a2a",
            "a2a-adapter",
            ("a2a", format!("http://{a2a}")),
            "A demo A2A agent run by the api on loopback: it says back what it is told, streaming word by word.",
        ),
        demo(
            "almanac-counter",
            "Almanac Counter",
            "http",
            "http-adapter",
            ("http", format!("http://{http}/chat")),
            "A demo plain HTTP agent run by the api on loopback: it counts the words it is told.",
        ),
    ]
}

const TAGS: [&str; 6] = ["quality", "latency", "accuracy", "support", "pricing", "reliability"];

/// ERC-8004 feedback for the ERC-8004 agents of `agents`: a few entries
/// each from distinct clients, scores around the agent's feedback signal,
/// about one in ten revoked later. Deterministic in `seed`.
pub fn feedback(agents: &[Agent], seed: u64) -> Vec<FeedbackEntry> {
    let mut rng = Rng::new(seed ^ 0x005e_edfb);
    let mut out = Vec::new();
    for agent in agents.iter().filter(|a| a.registry == FEEDBACK_REGISTRY) {
        let signal = agent.trust_signals.get("feedback").copied().unwrap_or(50.0);
        let chain_id: u64 = agent
            .uaid
            .split("nativeId=eip155:")
            .nth(1)
            .and_then(|r| r.split(':').next()?.parse().ok())
            .expect("ERC-8004 agents have an eip155 nativeId");
        let network = NETWORKS.iter().find(|(id, _)| *id == chain_id).expect("a known chain").1;
        let created = chrono::DateTime::parse_from_rfc3339(&agent.created_at).expect("validated time");
        for n in 0..weighted(&mut rng, &[3, 4, 3, 2, 1, 1]) {
            let score = (signal * 0.6 + 40.0 * rng.below(101) as f64 / 100.0).round().min(100.0) as u8;
            let at = created + chrono::Duration::hours(1 + rng.below(24 * 120) as i64);
            let revoked = rng.chance(10);
            let revoked_at = revoked.then(|| at + chrono::Duration::hours(1 + rng.below(24 * 30) as i64));
            // An off-chain file with details, and its hash, for half the entries.
            let file = rng.chance(50).then(|| {
                let words: Vec<u64> = (0..4).map(|_| rng.next_u64()).collect();
                let hash: String = words.iter().map(|w| format!("{w:016x}")).collect();
                (format!("ipfs://bafy{}", &hash[..32]), format!("0x{hash}"))
            });
            let stamp = |t: chrono::DateTime<chrono::FixedOffset>| t.to_utc().format("%Y-%m-%dT%H:%M:%SZ").to_string();
            out.push(FeedbackEntry {
                uaid: agent.uaid.to_string(),
                network: network.to_string(),
                chain_id,
                agent_id: agent.original_id.parse().expect("ERC-8004 token ids are numbers"),
                client: format!("0x{:016x}{:016x}{:08x}", rng.next_u64(), rng.next_u64(), n),
                feedback_index: 1,
                score,
                tag1: Some(TAGS[rng.below(TAGS.len() as u64) as usize].to_string()),
                tag2: rng.chance(40).then(|| TAGS[rng.below(TAGS.len() as u64) as usize].to_string()),
                file_uri: file.as_ref().map(|(uri, _)| uri.clone()),
                file_hash: file.map(|(_, hash)| hash),
                revoked,
                created_at: stamp(at),
                revoked_at: revoked_at.map(stamp),
                tx_hash: Some(format!(
                    "0x{:016x}{:016x}{:016x}{:016x}",
                    rng.next_u64(),
                    rng.next_u64(),
                    rng.next_u64(),
                    rng.next_u64()
                )),
            });
        }
    }
    out
}

/// A small, fast, seedable generator (SplitMix64): stable across platforms
/// and crate versions, which a corpus on disk needs.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_are_deterministic_valid_and_varied() {
        let a = agents(600, 7);
        assert_eq!(a, agents(600, 7));
        assert_ne!(a, agents(600, 8));
        crate::validate_index(&a).unwrap();
        let registries: std::collections::BTreeSet<&str> = a.iter().map(|x| x.registry.as_str()).collect();
        assert_eq!(registries.len(), REGISTRIES.len());
        assert!(a.iter().any(|x| x.kind.as_str() == "mcp-servers") && a.iter().any(|x| x.kind.as_str() == "ai-agents"));
        for status in crate::VERIFICATION {
            assert!(a.iter().any(|x| x.verification_status.as_str() == *status), "{status}");
        }
        let f = feedback(&a, 7);
        assert_eq!(f, feedback(&a, 7));
        crate::catalog::validate_feedback(&f, &a).unwrap();
        assert!(f.iter().any(|e| e.revoked) && f.iter().any(|e| !e.revoked));
        // Each UAID is the HCS-14 id of the agent's own data.
        for agent in a.iter().take(50) {
            let parsed: shared::uaid::Uaid = agent.uaid.parse().unwrap();
            assert_eq!(parsed.param("registry"), Some(agent.registry.as_str()));
        }
    }
}
