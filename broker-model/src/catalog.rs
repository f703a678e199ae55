//! The broker's catalogs (`datasets/broker/catalog.json`) and ERC-8004
//! feedback (`datasets/broker/feedback.json`): source records, read with
//! unknown fields refused and checked against the agent index, so that a
//! catalog naming an adapter or registry nobody knows fails the build.
//!
//! Field names are the wire names of `../shared/contracts/broker.md`; a
//! catalog entry is published as it is read.

use std::collections::BTreeSet;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Agent;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Catalog {
    /// When the catalog was last reviewed: Last-Modified of its routes.
    pub updated_at: String,
    pub registries: Vec<RegistryInfo>,
    pub protocols: Vec<ProtocolInfo>,
    pub adapters: Vec<AdapterDetail>,
    pub adapter_registry: AdapterRegistry,
    pub additional_registries: Vec<AdditionalRegistry>,
    pub federation: Federation,
    pub credit_providers: Vec<CreditProvider>,
    /// Seed searches; the journal's search counts come first.
    pub popular_searches: Vec<String>,
    /// Search facets, without their options (computed from the agents).
    pub facets: Vec<Facet>,
    /// Programmable Secrets policies published or indexed by the api, as
    /// its journal last described them; never in the source file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_policies: Vec<SecretPolicy>,
    /// Plugins imported by the api, as its journal last described them
    /// (newest first import first); never in the source file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plugins: Vec<PluginEntry>,
}

/// A plugin as the catalog publishes it: its slug, its place in the order
/// of first imports, and its listing (`plugins::catalog::Listing`, which
/// this crate does not know: the catalog's answers are made from it by
/// that crate). One per slug, highest `seq` first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginEntry {
    pub slug: String,
    pub seq: i64,
    pub listing: Value,
}

impl PluginEntry {
    /// Puts `entry` in `entries`, replacing the one of its slug, and keeps
    /// them in the catalog's order. O(n log n).
    pub fn upsert(entries: &mut Vec<PluginEntry>, entry: PluginEntry) {
        entries.retain(|e| e.slug != entry.slug);
        entries.push(entry);
        entries.sort_by(|a, b| b.seq.cmp(&a.seq).then(a.slug.cmp(&b.slug)));
    }
}

/// A Programmable Secrets policy as the catalog publishes it: its chain and
/// on-chain id, and the public view the api answers for it (no key, no
/// ciphertext). The catalog keeps one per chain and policy, newest on
/// chain first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretPolicy {
    pub chain_id: u64,
    pub policy_id: u64,
    /// When it was made on chain (Unix seconds): the catalog's order.
    pub listed_at: i64,
    pub view: Value,
}

impl SecretPolicy {
    /// Puts `policy` in `policies`, replacing the one of its chain and id,
    /// and keeps them newest on chain first.
    pub fn upsert(policies: &mut Vec<SecretPolicy>, policy: SecretPolicy) {
        policies.retain(|p| (p.chain_id, p.policy_id) != (policy.chain_id, policy.policy_id));
        policies.push(policy);
        SecretPolicy::order(policies);
    }

    /// When the policy last changed: its `updatedAt` (a deactivation or a
    /// new price changes it), and never before it was made on chain.
    pub fn last_modified(&self) -> shared::timestamp::Timestamp {
        let listed = self.listed_at.max(0) as u64 * 1_000_000_000;
        let updated = self.view["updatedAt"]
            .as_str()
            .and_then(|text| chrono::DateTime::parse_from_rfc3339(text).ok())
            .and_then(|at| at.timestamp_nanos_opt())
            .map_or(0, |nanos| nanos.max(0) as u64);
        shared::timestamp::Timestamp(listed.max(updated))
    }

    /// Puts `policies` (one per chain and id) in the catalog's order.
    /// O(n log n).
    pub fn order(policies: &mut [SecretPolicy]) {
        policies.sort_by(|a, b| {
            b.listed_at.cmp(&a.listed_at).then(a.chain_id.cmp(&b.chain_id)).then(b.policy_id.cmp(&a.policy_id))
        });
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegistryInfo {
    pub id: String,
    pub name: String,
    pub description: String,
    pub url: String,
    /// web2, web3 or hybrid.
    pub kind: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProtocolInfo {
    pub id: String,
    pub name: String,
    pub description: String,
    /// Whether the broker can route messages over it.
    pub routable: bool,
}

/// An adapter descriptor, as `GET /adapters/details` lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdapterDetail {
    pub id: String,
    pub name: String,
    pub version: String,
    pub author: String,
    pub description: String,
    pub supported_protocols: Vec<String>,
    pub registry_type: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub chat_profile: Option<ChatProfile>,
    pub capabilities: AdapterCapabilities,
    pub enabled: bool,
    pub priority: u32,
    pub status: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChatProfile {
    pub supports_chat: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub delivery: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub transport: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub streaming: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub requires_auth: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub notes: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdapterCapabilities {
    pub discovery: bool,
    pub routing: bool,
    pub communication: bool,
    pub translation: bool,
    pub protocols: Vec<String>,
}

/// The HCS-21 adapter registry: categories and published adapters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdapterRegistry {
    pub network: String,
    pub categories: Vec<Category>,
    pub adapters: Vec<RegistryEntry>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Category {
    pub id: u64,
    pub network: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub slug: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub description: Option<String>,
    pub topic_id: String,
    pub version_topic_id: String,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistryEntry {
    pub adapter_id: String,
    pub adapter_name: String,
    pub entity: String,
    /// The id of its category; the category itself is added when published.
    pub category_id: u64,
    pub version: String,
    pub description: String,
    pub keywords: Vec<String>,
    pub manifest_topic_id: String,
    pub created_at: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdditionalRegistry {
    pub id: String,
    pub label: String,
    pub networks: Vec<Network>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Network {
    pub key: String,
    pub registry_id: String,
    pub network_id: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub chain_id: Option<u64>,
    pub label: String,
    pub estimated_credits: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Federation {
    pub enabled: bool,
    /// The topic registries are announced on.
    pub channel: String,
    pub registries: Vec<FederatedRegistry>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FederatedRegistry {
    pub id: String,
    pub name: String,
    pub url: String,
    pub protocols: Vec<String>,
    pub announced_at: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreditProvider {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub publishable_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub currency: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cents_per_hbar: Option<u64>,
}

/// A search facet. `adapters` and `options` are filled in per build.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Facet {
    pub key: String,
    pub label: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub description: Option<String>,
    /// string, boolean or number.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub adapters: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub options: Option<Vec<FacetOption>>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FacetOption {
    pub value: String,
    pub label: String,
}

/// One ERC-8004 reputation entry (`giveFeedback`, maybe revoked later).
/// Field names are the reference client's (`agentFeedbackEntrySchema`);
/// `registry` is added when published.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeedbackEntry {
    /// The agent the feedback is about.
    pub uaid: String,
    /// The chain's network name, such as `base-mainnet`.
    pub network: String,
    pub chain_id: u64,
    /// The agent's ERC-8004 token id.
    pub agent_id: u64,
    /// The address that gave the feedback.
    pub client: String,
    /// Per client, from 1.
    pub feedback_index: u64,
    /// 0 to 100.
    pub score: u8,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tag1: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tag2: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub file_uri: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub file_hash: Option<String>,
    pub revoked: bool,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub revoked_at: Option<String>,
    /// The chain transaction; none for feedback recorded by the broker
    /// itself (given through the api), which has no chain writer.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tx_hash: Option<String>,
}

/// ERC-8004 networks by chain id.
pub const NETWORKS: [(u64, &str); 3] =
    [(1, "ethereum-mainnet"), (8453, "base-mainnet"), (11155111, "ethereum-sepolia")];

/// The registry whose agents carry ERC-8004 feedback.
pub const FEEDBACK_REGISTRY: &str = "erc-8004";

/// Whether `value` is an RFC 3339 time.
pub fn rfc3339(value: &str) -> bool {
    chrono::DateTime::parse_from_rfc3339(value).is_ok()
}

fn unique<'a>(what: &str, ids: impl Iterator<Item = &'a str>) -> Result<BTreeSet<&'a str>> {
    let mut seen = BTreeSet::new();
    for id in ids {
        if !seen.insert(id) {
            bail!("{what} {id:?} is listed twice");
        }
    }
    Ok(seen)
}

/// Checks the catalog on its own and against the agents: every agent's
/// registry, adapter and protocols are catalogued, ids are unique, entries
/// name existing categories, times are RFC 3339.
pub fn validate(catalog: &Catalog, agents: &[Agent]) -> Result<()> {
    let registries = unique("catalog: registry", catalog.registries.iter().map(|r| r.id.as_str()))?;
    let adapters = unique("catalog: adapter", catalog.adapters.iter().map(|a| a.id.as_str()))?;
    let protocols = unique("catalog: protocol", catalog.protocols.iter().map(|p| p.id.as_str()))?;
    unique("catalog: adapter registry category", catalog.adapter_registry.categories.iter().map(|c| c.slug.as_str()))?;
    unique("catalog: adapter registry entry", catalog.adapter_registry.adapters.iter().map(|a| a.adapter_id.as_str()))?;
    unique("catalog: facet", catalog.facets.iter().map(|f| f.key.as_str()))?;
    let mut times = vec![("updatedAt", catalog.updated_at.as_str())];
    for r in &catalog.registries {
        if !matches!(r.kind.as_str(), "web2" | "web3" | "hybrid") {
            bail!("catalog: registry {:?}: kind {:?} is not web2, web3 or hybrid", r.id, r.kind);
        }
    }
    for a in &catalog.adapters {
        if !matches!(a.registry_type.as_str(), "web2" | "web3" | "hybrid") {
            bail!("catalog: adapter {:?}: registryType {:?} is not web2, web3 or hybrid", a.id, a.registry_type);
        }
        if !matches!(a.status.as_str(), "running" | "stopped") {
            bail!("catalog: adapter {:?}: status {:?} is not running or stopped", a.id, a.status);
        }
        if let Some(p) = a.supported_protocols.iter().find(|p| !protocols.contains(p.as_str())) {
            bail!("catalog: adapter {:?}: protocol {p:?} is not in protocols", a.id);
        }
    }
    let mut category_ids = BTreeSet::new();
    for c in &catalog.adapter_registry.categories {
        if !category_ids.insert(c.id) {
            bail!("catalog: adapter registry category id {} is listed twice", c.id);
        }
        times.extend([("category createdAt", c.created_at.as_str()), ("category updatedAt", c.updated_at.as_str())]);
    }
    for e in &catalog.adapter_registry.adapters {
        if !category_ids.contains(&e.category_id) {
            bail!("catalog: adapter registry entry {:?}: category {} does not exist", e.adapter_id, e.category_id);
        }
        times.push(("entry createdAt", e.created_at.as_str()));
    }
    for r in &catalog.additional_registries {
        for n in &r.networks {
            if n.registry_id != r.id || !n.key.starts_with(&format!("{}:", r.id)) {
                bail!("catalog: additional registry {:?}: network {:?} belongs to another registry", r.id, n.key);
            }
        }
    }
    for r in &catalog.federation.registries {
        times.push(("federation announcedAt", r.announced_at.as_str()));
    }
    for f in &catalog.facets {
        if !matches!(f.kind.as_str(), "string" | "boolean" | "number") {
            bail!("catalog: facet {:?}: type {:?} is not string, boolean or number", f.key, f.kind);
        }
        if f.adapters.is_some() || f.options.is_some() {
            bail!("catalog: facet {:?}: adapters and options are computed, not written", f.key);
        }
    }
    if let Some((what, t)) = times.iter().find(|(_, t)| !rfc3339(t)) {
        bail!("catalog: {what} {t:?} is not an RFC 3339 time");
    }
    for agent in agents {
        if !registries.contains(agent.registry.as_str()) {
            bail!("agent {:?}: field \"registry\": {:?} is not in the catalog's registries", agent.id, agent.registry);
        }
        if !adapters.contains(agent.adapter.as_str()) {
            bail!("agent {:?}: field \"adapter\": {:?} is not in the catalog's adapters", agent.id, agent.adapter);
        }
        if let Some(p) = agent.protocols.iter().find(|p| !protocols.contains(p.as_str())) {
            bail!("agent {:?}: field \"protocols\": {p:?} is not in the catalog's protocols", agent.id);
        }
    }
    Ok(())
}

/// What a feedback entry is checked against: its agent.
#[derive(Clone, Copy, Debug)]
pub struct Subject<'a> {
    pub id: &'a str,
    pub registry: &'a str,
    pub original_id: &'a str,
}

impl<'a> Subject<'a> {
    pub fn of(agent: &'a Agent) -> Subject<'a> {
        Subject { id: &agent.id, registry: &agent.registry, original_id: &agent.original_id }
    }
}

/// Checks feedback entries: each names an ERC-8004 agent of the index by
/// UAID and token id, scores are 0 to 100, a revoked entry says when, and
/// (client, index) is unique per agent.
pub fn validate_feedback(feedback: &[FeedbackEntry], agents: &[Agent]) -> Result<()> {
    let by_uaid: std::collections::HashMap<&str, Subject> =
        agents.iter().map(|a| (a.uaid.as_str(), Subject::of(a))).collect();
    validate_feedback_by(feedback, |uaid| by_uaid.get(uaid).copied(), &|_| None)
}

/// [`validate_feedback`] with each entry's agent found by `subject`; an
/// error names entry `n` as `origin(n)` says (the journal line that added
/// it), else by its place.
pub fn validate_feedback_by<'a>(
    feedback: &[FeedbackEntry],
    subject: impl Fn(&str) -> Option<Subject<'a>>,
    origin: &dyn Fn(usize) -> Option<String>,
) -> Result<()> {
    let mut seen = BTreeSet::new();
    for (n, f) in feedback.iter().enumerate() {
        let fail = |field: &str, problem: String| -> Result<()> {
            let name = origin(n).map_or_else(|| format!("feedback #{n}"), |at| format!("{at}: feedback"));
            bail!("{name}: field {field:?}: {problem}")
        };
        match subject(f.uaid.as_str()) {
            None => fail("uaid", format!("{:?} is not an indexed agent", f.uaid))?,
            Some(a) if a.registry != FEEDBACK_REGISTRY => {
                fail("uaid", format!("agent {:?} is not in the {FEEDBACK_REGISTRY} registry", a.id))?
            }
            Some(a) if a.original_id != f.agent_id.to_string() => {
                fail("agentId", format!("{} is not the agent's token id {:?}", f.agent_id, a.original_id))?
            }
            Some(_) => {}
        }
        if f.score > 100 {
            fail("score", format!("{} is above 100", f.score))?;
        }
        if !rfc3339(&f.created_at) {
            fail("createdAt", format!("{:?} is not an RFC 3339 time", f.created_at))?;
        }
        match (&f.revoked_at, f.revoked) {
            (Some(at), true) if rfc3339(at) && at.as_str() >= f.created_at.as_str() => {}
            (None, false) => {}
            _ => fail("revokedAt", "must be an RFC 3339 time after createdAt exactly when revoked".into())?,
        }
        if !NETWORKS.contains(&(f.chain_id, f.network.as_str())) {
            fail("network", format!("{:?} is not the network of chain {}", f.network, f.chain_id))?;
        }
        if !seen.insert((f.uaid.as_str(), f.client.as_str(), f.feedback_index)) {
            fail("feedbackIndex", format!("{} is used twice by {}", f.feedback_index, f.client))?;
        }
    }
    Ok(())
}

/// The value at a dot-separated metadata path.
pub fn metadata_at<'a>(metadata: &'a serde_json::Map<String, Value>, path: &str) -> Option<&'a Value> {
    let mut parts = path.split('.');
    let mut value = metadata.get(parts.next()?)?;
    for part in parts {
        value = value.as_object()?.get(part)?;
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Policies put one after another, and the catalog's order after each:
    /// newest on chain first, then by chain, then the higher id first; a
    /// policy put again replaces its chain's and id's.
    #[test]
    fn secret_policies_are_one_per_chain_and_id_newest_first() {
        let policy = |chain_id, policy_id, listed_at| SecretPolicy {
            chain_id,
            policy_id,
            listed_at,
            view: serde_json::json!({"policyId": policy_id, "listedAt": listed_at}),
        };
        let steps = [
            (policy(1, 1, 100), vec![(1, 1)]),
            (policy(1, 2, 100), vec![(1, 2), (1, 1)]),
            (policy(2, 1, 100), vec![(1, 2), (1, 1), (2, 1)]),
            (policy(1, 3, 200), vec![(1, 3), (1, 2), (1, 1), (2, 1)]),
            (policy(1, 1, 300), vec![(1, 1), (1, 3), (1, 2), (2, 1)]),
        ];
        let mut policies = Vec::new();
        for (put, order) in steps {
            SecretPolicy::upsert(&mut policies, put);
            let got: Vec<(u64, u64)> = policies.iter().map(|p| (p.chain_id, p.policy_id)).collect();
            assert_eq!(got, order);
        }
    }

    /// A policy's time is the later of when it was made on chain and when
    /// the broker last changed it; a view without a readable `updatedAt`
    /// has the first.
    #[test]
    fn a_policy_changed_after_listing_is_modified_then() {
        let cases = [
            (100, serde_json::json!({"updatedAt": "1970-01-01T00:03:20.500Z"}), 200_500_000_000),
            (100, serde_json::json!({"updatedAt": "1970-01-01T00:00:50Z"}), 100_000_000_000),
            (100, serde_json::json!({"updatedAt": "yesterday"}), 100_000_000_000),
            (100, serde_json::json!({}), 100_000_000_000),
            (-5, serde_json::json!({}), 0),
        ];
        for (listed_at, view, nanos) in cases {
            let policy = SecretPolicy { chain_id: 1, policy_id: 1, listed_at, view: view.clone() };
            assert_eq!(policy.last_modified().0, nanos, "{view}");
        }
    }
}
