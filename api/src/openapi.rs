//! The OpenAPI 3.1 document of every route the api answers, made from the
//! route table ([`crate::routes::table`]): each endpoint's pattern and
//! path parameters, each operation's method, id, body bound, auth and cache
//! policy, and the error form of its endpoint. What the table does not hold
//! (query parameters, request bodies, success statuses and the shape of a
//! success) is said here per operation id ([`describe`]); the shapes of
//! the generator's typed answers (section C, the guard files, the catalog
//! records) are their Rust types' own JSON Schemas (`schemars`), the
//! others are written down from the contracts, required fields first and
//! other fields allowed, as the reference client reads them.
//!
//! Served at `/api/v1/openapi.json` (made once per process) and printed by
//! `api openapi` for the build; `tests/tests/openapi.rs` keeps it true.

use serde_json::{json, Map, Value};

use crate::routes::{Auth, BodyLimit, Dialect, Endpoint};

/// What this module says of an operation beyond the table.
#[derive(Default)]
struct Doc {
    tag: &'static str,
    query: Vec<Value>,
    body: Option<Value>,
    /// Success statuses with their JSON schema (unused when `media` is set).
    ok: Vec<(u16, Value)>,
    /// The body may be left out.
    optional_body: bool,
    /// The success's media type when it is not JSON.
    media: Option<&'static str>,
    /// Also answered as server-sent events (`Accept: text/event-stream`).
    events: bool,
}

/// The document for `endpoints`.
pub fn document(endpoints: &[Endpoint]) -> Value {
    let mut schemas = Schemas::new();
    let mut paths = Map::new();
    for endpoint in endpoints {
        let mut item = Map::new();
        for op in &endpoint.operations {
            let doc = describe(op.name, &mut schemas);
            item.insert(op.method.as_str().to_ascii_lowercase(), operation(endpoint, op, doc));
        }
        paths.insert(endpoint.pattern.to_string(), Value::Object(item));
    }
    let mut components = schemas.finish();
    components.insert("Error".into(), error_schema());
    components.insert("JsonRpcError".into(), json_rpc_error_schema());
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "almanac",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "An agent registry broker (/api/v1), guard data and its MCP endpoint (/guard, \
                            /api/guard/public-mcp), and HCS-20 token analytics (/hcs20). GET answers carry a \
                            strong ETag and Last-Modified and answer conditional requests with 304."
        },
        "servers": [{"url": "/"}],
        "tags": [
            {"name": "HCS-20", "description": "Token analytics computed from Hedera consensus topic messages."},
            {"name": "Guard", "description": "Guard data and the stateless MCP endpoint."},
            {"name": "Broker", "description": "The agent registry broker: search, agents, catalogs."},
            {"name": "Broker live", "description": "Sign-in, credits, registration, chat, keys, feedback."},
            {"name": "Content", "description": "Content inscribed on a Hedera consensus topic as an HCS-1 \
                                                file, paid in credits."},
            {"name": "Verification", "description": "Ownership of agents, proven by a DNS TXT record, a ledger \
                                                     signature or a code served at the agent's endpoint."},
            {"name": "Plugins", "description": "Agent plugins imported from repositories at pinned commits, \
                                                scanned as the reference plugin scanner scans them, and their \
                                                trust, also through the Guard trust routes."},
            {"name": "Service", "description": "Health and this document."},
            {"name": "Exports", "description": "Parquet exports of the build for analysts."},
            {"name": "Pages", "description": "HTML pages of the build for people: tokens, accounts, guard \
                                              data, the agent directory and profiles, skills, \
                                              Programmable Secrets' policies and plugins."}
        ],
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "ApiKey": {"type": "apiKey", "in": "header", "name": "x-api-key",
                           "description": "A key issued by ledger sign-in, or the operator key."},
                "LedgerApiKey": {"type": "apiKey", "in": "header", "name": "x-ledger-api-key"},
                "Bearer": {"type": "http", "scheme": "bearer"}
            }
        }
    })
}

/// One operation: the table's facts and `doc`.
fn operation(endpoint: &Endpoint, op: &crate::routes::Operation, doc: Doc) -> Value {
    let mut parameters: Vec<Value> = path_parameters(endpoint.pattern)
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect();
    parameters.extend(doc.query.iter().cloned());
    if op.auth != Auth::Public {
        parameters.push(json!({"name": "x-account-id", "in": "header", "required": false,
            "description": "Act for this account (one the key's holder controls).", "schema": {"type": "string"}}));
    }
    let mut responses = Map::new();
    for (status, schema) in &doc.ok {
        let mut content = Map::new();
        match doc.media {
            Some(media) => {
                let schema = match media.starts_with("text/") {
                    true => json!({"type": "string"}),
                    false => json!({"type": "string", "format": "binary"}),
                };
                content.insert(media.into(), json!({"schema": schema}));
            }
            None => {
                content.insert("application/json".into(), json!({"schema": schema}));
            }
        }
        if doc.events {
            content.insert("text/event-stream".into(), json!({"schema": {"type": "string"}}));
        }
        let mut response = json!({"description": reason(*status), "content": content});
        if op.method == warp::http::Method::GET {
            response["headers"] = json!({
                "ETag": {"schema": {"type": "string"}},
                "Last-Modified": {"schema": {"type": "string"}},
                "Cache-Control": {"schema": {"type": "string", "const": op.cache.header()}}
            });
        }
        responses.insert(status.to_string(), response);
    }
    if op.method == warp::http::Method::GET {
        responses.insert("304".into(), json!({"description": "Not Modified (If-None-Match or If-Modified-Since)"}));
    }
    let error = match endpoint.errors {
        Dialect::Json => json!({"$ref": "#/components/schemas/Error"}),
        Dialect::JsonRpc => json!({"$ref": "#/components/schemas/JsonRpcError"}),
    };
    let mut refusals = vec![(429, "Too Many Requests"), (503, "Service Unavailable (no build loaded yet)")];
    if !doc.query.is_empty() || op.body != BodyLimit::None || endpoint.pattern.contains('{') {
        refusals.push((400, "Bad Request: the body names the parameter or field at fault"));
    }
    if endpoint.pattern.contains('{') {
        refusals.push((404, "Not Found"));
    }
    if op.body != BodyLimit::None {
        refusals.extend([
            (408, "Request Timeout (the body)"),
            (413, "Content Too Large"),
            (415, "Unsupported Media Type"),
        ]);
    }
    match op.auth {
        Auth::Public => {}
        Auth::Optional => refusals.extend([
            (401, "Unauthorized: a key was sent and is not valid, or this use needs one"),
            (403, "Forbidden: x-account-id names an account the key does not control"),
        ]),
        Auth::Key | Auth::Operator => {
            refusals.extend([(401, "Unauthorized: no valid key"), (403, "Forbidden")]);
        }
    }
    refusals.extend(named_refusals(op.name));
    for (status, description) in refusals {
        responses.entry(status.to_string()).or_insert_with(
            || json!({"description": description, "content": {"application/json": {"schema": error.clone()}}}),
        );
    }
    responses.insert(
        "default".into(),
        json!({"description": "Any other refusal, in the endpoint's error form",
               "content": {"application/json": {"schema": error}}}),
    );
    let mut out = json!({
        "operationId": op.name,
        "tags": [doc.tag],
        "responses": responses,
    });
    if !parameters.is_empty() {
        out["parameters"] = Value::Array(parameters);
    }
    if let Some(body) = doc.body {
        out["requestBody"] = json!({"required": !doc.optional_body, "content": {"application/json": {"schema": body}}});
    }
    match op.auth {
        Auth::Public => {}
        // No key, or a valid one.
        Auth::Optional => out["security"] = json!([{}, {"ApiKey": []}, {"LedgerApiKey": []}, {"Bearer": []}]),
        Auth::Key | Auth::Operator => out["security"] = json!([{"ApiKey": []}, {"LedgerApiKey": []}, {"Bearer": []}]),
    }
    if op.auth == Auth::Operator {
        out["description"] = json!("Needs the operator key.");
    }
    out
}

/// The statuses the spec names for one operation beyond the common ones.
fn named_refusals(name: &str) -> Vec<(u16, &'static str)> {
    match name {
        "createChatSession" | "sendChatMessage" => vec![
            (402, "Payment Required: not enough credits"),
            (409, "send_in_progress or idempotency_key_reused: the idempotency key is taken"),
            (403, "destination_not_allowed: the broker does not call the agent's address"),
            (422, "The agent speaks no protocol this broker can chat in"),
            (500, "The agent cannot be reached"),
        ],
        "endChatSession" | "chatHistory" | "chatEncryptionStatus" => {
            vec![(403, "Forbidden: the session is another account's")]
        }
        "chatEncryptionHandshake" => vec![
            (403, "Forbidden: the key is submitted by the party its role names"),
            (409, "handshake_key_set: that party's key is already set"),
        ],
        "routeToAgent" => vec![
            (403, "destination_not_allowed: the broker does not call the agent's address"),
            (422, "routing_not_supported"),
            (500, "routing_failed"),
        ],
        "vectorSearch" => vec![(501, "Vector search is off on this deployment")],
        "compactChatHistory" => {
            vec![
                (402, "Payment Required"),
                (403, "Forbidden: the session is another account's"),
                (502, "The summariser failed"),
                (503, "Compaction is off"),
            ]
        }
        "prepareProgrammableSecretPolicy" | "importProgrammableSecretPolicy" => vec![
            (409, "chain_mismatch or policy_already_published: the chain's commitments differ, or the policy's key is held"),
            (503, "not_configured, krs_not_configured or chain_unavailable"),
        ],
        "confirmProgrammableSecretPolicy" => vec![
            (409, "chain_mismatch (the staging is failed), transaction_not_found, policy_not_prepared or policy_already_published"),
            (503, "not_configured, krs_not_configured or chain_unavailable"),
        ],
        "issueProgrammableSecretNonce" => vec![
            (409, "policy_not_ready: no key is held for the policy"),
            (503, "not_configured or krs_not_configured"),
        ],
        "requestProgrammableSecretKey" => vec![
            (401, "invalid_signature: the challenge was not signed by the buyer's wallet (nothing changes)"),
            (403, "access_not_found: the buyer holds no access now (the request is denied)"),
            (409, "nonce_consumed or policy_not_ready"),
            (410, "nonce_expired: the nonce outlived its five minutes"),
            (503, "not_configured, krs_not_configured or chain_unavailable"),
        ],
        "listProgrammableSecretPolicies"
        | "getProgrammableSecretPolicy"
        | "getProgrammableSecretCiphertext"
        | "getProgrammableSecretKeyRequest"
        | "getProgrammableSecretProviderIdentity" => vec![(503, "not_configured: no chain is named")],
        "registerAgent" | "updateAgent" => vec![
            (402, "Payment Required: not enough credits"),
            (403, "destination_not_allowed: the endpoint is an address the broker does not call"),
        ],
        "getRegistrationQuote" => vec![(402, "Payment Required: not enough credits")],
        _ => Vec::new(),
    }
}

/// `{name}` segments of a pattern.
fn path_parameters(pattern: &str) -> impl Iterator<Item = &str> {
    pattern.split('/').filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted: work goes on in the background",
        207 => "Multi-Status: the primary registration succeeded, some additional registries did not",
        308 => "Permanent Redirect: the page's own path is in Location",
        _ => "Success",
    }
}

/// `{"error", "code"[, "parameter"]}`.
fn error_schema() -> Value {
    json!({
        "type": "object",
        "required": ["error", "code"],
        "properties": {
            "error": {"type": "string", "description": "What went wrong, in plain words."},
            "code": {"type": "string", "description": "A stable code to match on."},
            "parameter": {"type": "string", "description": "The parameter or field at fault."}
        }
    })
}

fn json_rpc_error_schema() -> Value {
    json!({
        "type": "object",
        "required": ["jsonrpc", "error"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "id": {"type": ["string", "integer", "null"]},
            "error": {"type": "object", "required": ["code", "message"],
                      "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {}}}
        }
    })
}

/// The components' schemas: the Rust types' (by `schemars`, referenced
/// under `#/components/schemas/`) and the ones written here.
struct Schemas {
    generator: schemars::SchemaGenerator,
}

impl Schemas {
    fn new() -> Schemas {
        let settings = schemars::generate::SchemaSettings::draft2020_12().with(|s| {
            s.definitions_path = "/components/schemas".into();
        });
        Schemas { generator: settings.into_generator() }
    }

    /// A reference to `T`'s schema, which is added to the components.
    fn of<T: schemars::JsonSchema>(&mut self) -> Value {
        self.generator.subschema_for::<T>().to_value()
    }

    fn finish(mut self) -> Map<String, Value> {
        self.generator.take_definitions(true).into_iter().collect()
    }
}

// Small builders for the schemas written here.

fn string() -> Value {
    json!({"type": "string"})
}

fn integer() -> Value {
    json!({"type": "integer"})
}

fn number() -> Value {
    json!({"type": "number"})
}

fn boolean() -> Value {
    json!({"type": "boolean"})
}

fn array(items: Value) -> Value {
    json!({"type": "array", "items": items})
}

/// An object with these fields, the first `required` of them required;
/// other fields allowed.
fn object(fields: &[(&str, Value)], required: usize) -> Value {
    let properties: Map<String, Value> = fields.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    let required: Vec<&str> = fields.iter().take(required).map(|(k, _)| *k).collect();
    json!({"type": "object", "required": required, "properties": properties})
}

fn any_object() -> Value {
    json!({"type": "object"})
}

/// A query parameter.
fn query(name: &str, schema: Value, required: bool) -> Value {
    json!({"name": name, "in": "query", "required": required, "schema": schema})
}

fn page_query(max: usize, size_name: &str) -> Vec<Value> {
    vec![
        query("page", json!({"type": "integer", "minimum": 1}), false),
        query(size_name, json!({"type": "integer", "minimum": 1, "maximum": max}), false),
    ]
}

/// An agent as search hits and profiles carry it (broker.md).
fn agent() -> Value {
    object(
        &[
            ("id", string()),
            ("uaid", string()),
            ("registry", string()),
            ("name", string()),
            ("capabilities", array(json!({"type": ["string", "number"]}))),
            ("trustScore", number()),
            ("description", string()),
            ("protocols", array(string())),
            ("adapter", string()),
            ("communicationSupported", boolean()),
            ("routingSupported", boolean()),
            ("available", boolean()),
        ],
        6,
    )
}

fn search_answer() -> Value {
    object(&[("hits", array(agent())), ("total", integer()), ("page", integer()), ("limit", integer())], 4)
}

fn search_query() -> Vec<Value> {
    vec![
        query("q", string(), false),
        query("page", json!({"type": "integer", "minimum": 1}), false),
        query("limit", json!({"type": "integer", "minimum": 1, "maximum": search::query::MAX_LIMIT}), false),
        query("registries", string(), false),
        query("adapters", string(), false),
        query("capabilities", string(), false),
        query("protocols", string(), false),
        query("minTrust", json!({"type": "number", "minimum": 0, "maximum": 100}), false),
        query("verified", json!({"enum": ["true", "false"]}), false),
        query("online", json!({"enum": ["true", "false"]}), false),
        query("includeAggregations", json!({"enum": ["true", "false"]}), false),
        query("type", json!({"enum": ["ai-agents", "mcp-servers"]}), false),
        query("sortBy", json!({"enum": ["most-recent", "oldest", "name", "most-available", "trust-score"]}), false),
        query("sortOrder", json!({"enum": ["asc", "desc"]}), false),
        query("verificationStatus", json!({"enum": ["verified", "unverified", "pending"]}), false),
    ]
}

/// `doc` with its body optional.
fn optional(doc: Doc) -> Doc {
    Doc { optional_body: true, ..doc }
}

/// What is said of each operation, by its id.
fn describe(name: &str, s: &mut Schemas) -> Doc {
    use broker_model::catalog;
    use guard_data::public;
    use hcs20::analytics;
    let json = |tag: &'static str, schema: Value| Doc { tag, ok: vec![(200, schema)], ..Doc::default() };
    let with_body =
        |tag: &'static str, body: Value, ok: Vec<(u16, Value)>| Doc { tag, body: Some(body), ok, ..Doc::default() };
    let live = "Broker live";
    let uaid_body = || object(&[("uaid", string())], 1);
    let verification = "Verification";
    let content = "Content";
    let modes = json!({"enum": ["file", "upload", "hashinal", "hashinal-collection"]});
    let inscription_input = object(
        &[
            ("inputType", json!({"enum": ["url", "base64"]})),
            ("url", string()),
            ("base64", string()),
            ("fileName", string()),
            ("mimeType", string()),
            ("mode", modes.clone()),
            ("metadata", any_object()),
            ("tags", array(string())),
            ("fileStandard", string()),
            ("chunkSize", json!({"type": "integer", "minimum": 1})),
        ],
        1,
    );
    let nullable = |kind: &str| json!({"type": [kind, "null"]});
    let inscription_job = object(
        &[
            ("jobId", string()),
            ("status", json!({"enum": ["pending", "in_progress", "completed", "failed"]})),
            ("mode", modes.clone()),
            ("createdAt", string()),
            ("updatedAt", string()),
            ("network", string()),
            ("hrl", nullable("string")),
            ("topicId", nullable("string")),
            ("transactionId", nullable("string")),
            ("failureReason", nullable("string")),
            ("sizeBytes", nullable("integer")),
            ("fileName", nullable("string")),
            ("mimeType", nullable("string")),
            ("quoteCredits", nullable("integer")),
            ("quoteUsdCents", nullable("integer")),
            ("reservationId", nullable("string")),
        ],
        6,
    );
    let skills = "Skills";
    let plugins = "Plugins";
    let plugin_import = object(
        &[
            ("jobId", string()),
            ("status", json!({"enum": ["pending", "running", "completed", "failed"]})),
            ("progress", any_object()),
            ("results", array(any_object())),
            ("error", json!({"type": ["string", "null"]})),
            ("createdAt", string()),
            ("updatedAt", string()),
        ],
        7,
    );
    let recommendation = json!({"enum": ["monitor", "review", "block"]});
    let plugin_item = object(
        &[
            ("slug", string()),
            ("name", string()),
            ("ecosystem", string()),
            ("repository", string()),
            ("sourceRepo", string()),
            ("commit", string()),
            ("digest", string()),
            ("ownerVerified", boolean()),
            ("trustScore", integer()),
            ("recommendation", recommendation.clone()),
            ("safetyScore", json!({"type": ["integer", "null"]})),
            ("description", json!({"type": ["string", "null"]})),
            ("category", json!({"type": ["string", "null"]})),
            ("version", json!({"type": ["string", "null"]})),
        ],
        10,
    );
    let trust_match = object(
        &[
            ("artifactId", string()),
            ("artifactName", string()),
            ("artifactType", json!({"enum": ["skill", "plugin"]})),
            ("artifactSlug", string()),
            ("recommendation", recommendation.clone()),
            ("verified", boolean()),
            ("safetyScore", json!({"type": ["number", "null"]})),
            ("trustScore", json!({"type": ["number", "null"]})),
            ("href", string()),
            ("ecosystem", string()),
        ],
        6,
    );
    let advisory = object(
        &[
            ("id", string()),
            ("artifactId", string()),
            ("artifactName", string()),
            ("reason", string()),
            ("severity", json!({"enum": ["low", "medium", "high"]})),
            ("publishedAt", string()),
        ],
        6,
    );
    let secrets = "Programmable Secrets";
    let secret_policy = object(
        &[
            ("id", string()),
            ("network", string()),
            ("chainId", integer()),
            ("status", json!({"enum": ["staged", "prepared", "finalized", "indexed", "failed"]})),
            ("policyId", nullable("integer")),
            ("priceWei", string()),
            ("active", boolean()),
            ("keyReleaseReady", boolean()),
            ("conditions", array(any_object())),
            ("ciphertextHash", string()),
            ("keyCommitment", string()),
            ("metadataHash", string()),
            ("providerUaidHash", string()),
            ("paymentModuleAddress", string()),
            ("policyVaultAddress", string()),
            ("accessReceiptAddress", string()),
        ],
        8,
    );
    let key_request = object(
        &[
            ("id", string()),
            ("policyId", integer()),
            ("buyerAddress", string()),
            ("status", json!({"enum": ["nonce-issued", "pending", "issued", "denied", "expired"]})),
            ("challengeMessage", string()),
            ("nonceIssuedAt", string()),
            ("nonceExpiresAt", string()),
            ("encryptedKey", nullable("string")),
            ("ciphertextUrl", nullable("string")),
            ("errorCode", nullable("string")),
            ("receiptTokenId", nullable("integer")),
        ],
        7,
    );
    let statuses = json!({"enum": ["pending", "in_progress", "completed", "failed"]});
    let skill_file = object(
        &[
            ("name", string()),
            ("mimeType", string()),
            ("role", json!({"enum": ["skill-md", "skill-json", "skill-icon", "file"]})),
            ("topicId", nullable("string")),
            ("hrl", nullable("string")),
            ("packageSequenceNumber", nullable("integer")),
        ],
        3,
    );
    let skill_input = object(
        &[
            (
                "files",
                array(object(
                    &[
                        ("name", string()),
                        ("base64", string()),
                        ("mimeType", nullable("string")),
                        ("role", json!({"enum": ["skill-md", "skill-json", "skill-icon", "file", null]})),
                    ],
                    2,
                )),
            ),
            ("directoryTopicId", nullable("string")),
            ("accountId", nullable("string")),
        ],
        1,
    );
    let skill_summary = object(
        &[
            ("jobId", string()),
            ("network", string()),
            ("name", string()),
            ("version", string()),
            ("createdAt", string()),
            ("directoryTopicId", string()),
            ("packageTopicId", string()),
            ("skillJsonHrl", string()),
            ("description", nullable("string")),
            ("skillUid", nullable("integer")),
            ("manifestHrl", nullable("string")),
            ("iconHcs1", nullable("string")),
            ("tags", array(string())),
            ("verified", boolean()),
            ("upvotes", integer()),
            ("files", array(skill_file.clone())),
        ],
        8,
    );
    let skill_mine = object(
        &[
            ("name", string()),
            ("latestVersion", string()),
            ("latestCreatedAt", string()),
            ("versions", array(string())),
            ("verified", boolean()),
            ("iconHcs1", nullable("string")),
        ],
        4,
    );
    let vote = object(&[("name", string()), ("upvotes", integer()), ("hasUpvoted", boolean())], 3);
    let verification_request = object(
        &[
            ("id", string()),
            ("network", string()),
            ("name", string()),
            ("tier", json!({"enum": ["basic", "express"]})),
            ("status", json!({"enum": ["pending", "approved", "rejected"]})),
            ("usdCents", number()),
            ("creditsCharged", number()),
            ("createdAt", string()),
            ("updatedAt", string()),
        ],
        9,
    );
    let methods = json!({"enum": broker_model::ownership::METHODS});
    let ownership = object(
        &[("ownerType", string()), ("ownerId", string()), ("verifiedAt", string()), ("method", methods.clone())],
        4,
    );
    let dns_status = object(
        &[
            ("uaid", string()),
            ("method", string()),
            ("recordName", string()),
            ("verified", boolean()),
            ("state", json!({"type": ["string", "null"]})),
            ("checkedAt", json!({"type": ["string", "null"]})),
            ("lastError", json!({"type": ["string", "null"]})),
        ],
        4,
    );
    match name {
        // The service.
        "health" | "brokerHealth" | "liveness" => {
            json("Service", object(&[("status", string()), ("ready", boolean()), ("build", json!({}))], 1))
        }
        "openapi" => json("Service", json!({"type": "object", "required": ["openapi", "paths"]})),
        "export" => {
            Doc { tag: "Exports", ok: vec![(200, Value::Null)], media: Some(shared::http::PARQUET), ..Doc::default() }
        }
        // Pages for people.
        "landingPage"
        | "tokensPage"
        | "tokenPage"
        | "tokenHoldersPage"
        | "accountPage"
        | "guardPage"
        | "guardCampaignsPage"
        | "guardCoveragePage"
        | "guardBenchmarkPage"
        | "agentsPage"
        | "agentsNextPage"
        | "agentPage"
        | "agentSearchPage"
        | "skillsPage"
        | "skillPage"
        | "secretPoliciesPage"
        | "secretPoliciesNextPage"
        | "secretPolicyPage"
        | "pluginsPage"
        | "pluginPage" => {
            Doc { tag: "Pages", ok: vec![(200, Value::Null)], media: Some("text/html"), ..Doc::default() }
        }
        "pluginPageBySlug" => {
            Doc { tag: "Pages", ok: vec![(308, object(&[("location", string())], 1))], ..Doc::default() }
        }
        // Section C.
        "hcs20Ticks" => json("HCS-20", array(s.of::<analytics::Tick>())),
        "hcs20Stats" => json("HCS-20", s.of::<analytics::Stats>()),
        "hcs20EcosystemStats" => json("HCS-20", s.of::<analytics::EcosystemStats>()),
        "hcs20Account" => json("HCS-20", s.of::<analytics::AccountBalances>()),
        "hcs20Holders" => {
            let mut doc = json("HCS-20", s.of::<analytics::HoldersPage>());
            doc.query = vec![query("tick", string(), true), query("topic", string(), true)];
            doc.query.extend(page_query(100, "pageSize"));
            doc
        }
        "hcs20Transactions" => {
            let mut doc = json("HCS-20", s.of::<analytics::Transactions>());
            doc.query = vec![
                query("tick", string(), false),
                query("topic", string(), false),
                query("pageSize", json!({"type": "integer", "minimum": 1, "maximum": 100}), false),
            ];
            doc
        }
        // Section B.
        "guardFacts" => json("Guard", s.of::<public::Facts>()),
        "guardCampaigns" => json("Guard", s.of::<public::Campaigns>()),
        "guardCoverage" => json("Guard", s.of::<public::Coverage>()),
        "guardPolicies" => json("Guard", s.of::<public::Policies>()),
        "guardBenchmark" => json("Guard", s.of::<public::Benchmark>()),
        "guardMcp" => with_body(
            "Guard",
            object(
                &[
                    ("jsonrpc", json!({"const": "2.0"})),
                    ("method", string()),
                    ("id", json!({})),
                    ("params", any_object()),
                ],
                2,
            ),
            vec![(200, object(&[("jsonrpc", json!({"const": "2.0"}))], 1)), (202, json!({}))],
        ),
        // Section A, the read side.
        "search" => Doc { query: search_query(), ..json("Broker", search_answer()) },
        "registrySearch" => Doc { query: search_query(), ..json("Broker", search_answer()) },
        "vectorSearch" => with_body(
            "Broker",
            object(&[("query", string()), ("limit", integer()), ("offset", integer()), ("filter", any_object())], 1),
            vec![(
                200,
                object(
                    &[("hits", array(object(&[("agent", agent())], 1))), ("total", integer()), ("took", number())],
                    3,
                ),
            )],
        ),
        "searchCapabilities" => with_body(
            "Broker",
            object(&[("capabilities", array(json!({"type": ["string", "integer"]})))], 1),
            vec![(200, search_answer())],
        ),
        "searchStatus" => json("Broker", object(&[("storageMode", string()), ("vectorStatus", any_object())], 2)),
        "facets" => json(
            "Broker",
            object(&[("facets", array(object(&[("key", string()), ("label", string()), ("type", string())], 3)))], 1),
        ),
        "agent" => json("Broker", object(&[("agent", agent())], 1)),
        "similarAgents" => {
            json("Broker", object(&[("uaid", string()), ("hits", array(agent())), ("total", integer())], 3))
        }
        "agentFeedback" => Doc {
            query: vec![query("includeRevoked", boolean(), false)],
            ..json(
                "Broker",
                object(&[("uaid", string()), ("summary", any_object()), ("entries", array(any_object()))], 3),
            )
        },
        "resolveUaid" => json("Broker", object(&[("agent", agent())], 1)),
        "validateUaid" => {
            json("Broker", object(&[("uaid", string()), ("valid", boolean()), ("formats", array(string()))], 3))
        }
        "badge" => Doc {
            query: vec![
                query("uaid", string(), true),
                query("metric", string(), false),
                query("style", string(), false),
            ],
            ..json("Broker", object(&[("schemaVersion", integer()), ("label", string()), ("message", string())], 3))
        },
        "stats" => json(
            "Broker",
            object(
                &[
                    ("totalAgents", integer()),
                    ("registries", any_object()),
                    ("capabilities", any_object()),
                    ("status", string()),
                    ("lastUpdate", string()),
                ],
                5,
            ),
        ),
        "registries" => json("Broker", object(&[("registries", array(string()))], 1)),
        "adapters" => json("Broker", object(&[("adapters", array(string()))], 1)),
        "adapterDetails" => json("Broker", object(&[("adapters", array(s.of::<catalog::AdapterDetail>()))], 1)),
        "providers" => {
            json("Broker", object(&[("providers", array(any_object())), ("protocols", array(any_object()))], 2))
        }
        "popularSearches" => json("Broker", object(&[("searches", array(string()))], 1)),
        "protocols" => json("Broker", object(&[("protocols", array(string()))], 1)),
        "additionalRegistries" => {
            json("Broker", object(&[("registries", array(s.of::<catalog::AdditionalRegistry>()))], 1))
        }
        "federatedRegistries" => json("Broker", object(&[("registries", array(any_object()))], 1)),
        "adapterCategories" => json("Broker", object(&[("categories", array(s.of::<catalog::Category>()))], 1)),
        "registryAdapters" => Doc {
            query: vec![
                query("limit", integer(), false),
                query("offset", integer(), false),
                query("category", string(), false),
            ],
            ..json("Broker", object(&[("network", string()), ("adapters", array(any_object()))], 2))
        },
        // Section A, the live side.
        "createLedgerChallenge" => with_body(
            live,
            object(&[("accountId", string()), ("network", string())], 2),
            vec![(200, object(&[("challengeId", string()), ("message", string()), ("expiresAt", string())], 3))],
        ),
        "verifyLedgerChallenge" => with_body(
            live,
            object(
                &[("challengeId", string()), ("accountId", string()), ("network", string()), ("signature", string())],
                4,
            ),
            vec![(
                200,
                object(
                    &[("key", string()), ("apiKey", any_object()), ("accountId", string()), ("network", string())],
                    4,
                ),
            )],
        ),
        "getRegistrationQuote" => with_body(live, object(&[("profile", any_object())], 1), vec![(200, any_object())]),
        "registerAgent" => {
            let answer = object(&[("success", boolean()), ("status", string()), ("uaid", string())], 3);
            with_body(
                live,
                object(&[("profile", any_object())], 1),
                vec![(200, answer.clone()), (202, answer.clone()), (207, answer)],
            )
        }
        "updateAgent" => {
            let answer = object(&[("success", boolean()), ("uaid", string())], 2);
            with_body(live, any_object(), vec![(200, answer.clone()), (202, answer.clone()), (207, answer)])
        }
        "deleteAgent" => json(live, object(&[("success", boolean()), ("uaid", string()), ("message", string())], 3)),
        "registrationStatus" => json(live, object(&[("registered", boolean())], 1)),
        "registrationProgress" => json(live, object(&[("progress", any_object())], 1)),
        "messagingNetwork" | "openConvai" => with_body(live, any_object(), vec![(200, any_object())]),
        "creditBalance" => Doc {
            query: vec![query("accountId", string(), false)],
            ..json(live, object(&[("accountId", string()), ("balance", integer()), ("timestamp", string())], 3))
        },
        "creditTransactions" => Doc {
            query: vec![
                query("accountId", string(), false),
                query("limit", integer(), false),
                query("cursor", string(), false),
            ],
            ..json(
                live,
                object(&[("accountId", string()), ("transactions", array(any_object())), ("timestamp", string())], 3),
            )
        },
        "purchaseCredits" => with_body(live, any_object(), vec![(200, any_object())]),
        "nativePaymentIntent" => optional(with_body(
            live,
            object(&[("credits", number()), ("hbarAmount", number())], 0),
            vec![(200, any_object())],
        )),
        "hbarPaymentIntent" => optional(with_body(
            live,
            object(&[("credits", number()), ("hbarAmount", number())], 0),
            vec![(200, any_object())],
        )),
        "createVerificationChallenge" => with_body(
            verification,
            uaid_body(),
            vec![(
                200,
                object(
                    &[
                        ("challengeId", string()),
                        ("code", string()),
                        ("expiresAt", string()),
                        ("expectedHandle", string()),
                        ("instructions", string()),
                        ("methods", array(string())),
                        ("existingOwnership", ownership.clone()),
                    ],
                    5,
                ),
            )],
        ),
        "verificationChallenge" => json(
            verification,
            object(
                &[
                    ("challengeId", string()),
                    ("uaid", string()),
                    ("code", string()),
                    ("expiresAt", string()),
                    ("status", json!({"enum": ["pending", "verified", "expired"]})),
                    ("method", string()),
                    ("message", string()),
                ],
                5,
            ),
        ),
        "verifyVerificationChallenge" => with_body(
            verification,
            object(
                &[
                    ("challengeId", string()),
                    ("method", methods.clone()),
                    ("accountId", string()),
                    ("signature", string()),
                    ("signatureKind", string()),
                    ("publicKey", string()),
                ],
                2,
            ),
            vec![(
                200,
                object(
                    &[
                        ("verified", boolean()),
                        ("uaid", string()),
                        ("ownerType", string()),
                        ("ownerId", string()),
                        ("method", methods.clone()),
                        ("verifiedAt", string()),
                        ("reason", string()),
                    ],
                    4,
                ),
            )],
        ),
        "verificationStatus" => json(
            verification,
            object(
                &[
                    ("uaid", string()),
                    ("verified", boolean()),
                    ("chain", json!({"type": ["string", "null"]})),
                    ("state", string()),
                    ("method", methods.clone()),
                ],
                3,
            ),
        ),
        "verificationOwnership" => json(verification, {
            let mut owned = ownership.clone();
            owned["required"] = json!(["uaid", "ownerType", "ownerId", "chain", "verifiedAt", "method"]);
            owned["properties"]["uaid"] = string();
            owned["properties"]["chain"] = string();
            owned
        }),
        "verifySenderOwnership" => with_body(
            verification,
            uaid_body(),
            vec![(
                200,
                object(
                    &[("verified", boolean()), ("uaid", string()), ("ownerType", string()), ("ownerId", string())],
                    4,
                ),
            )],
        ),
        "dnsVerificationStatus" => json(verification, dns_status.clone()),
        "dnsVerify" => with_body(
            verification,
            object(&[("uaid", string()), ("challengeId", string())], 1),
            vec![(200, dns_status)],
        ),
        "contentInscriptionConfig" => json(
            content,
            object(
                &[
                    ("enabled", boolean()),
                    ("maxSizeBytes", json!({"type": ["integer", "null"]})),
                    ("allowedMimeTypes", json!({"type": ["array", "null"], "items": {"type": "string"}})),
                ],
                1,
            ),
        ),
        "quoteContentInscription" => with_body(
            content,
            inscription_input.clone(),
            vec![(
                200,
                object(
                    &[
                        ("quoteId", string()),
                        ("contentHash", string()),
                        ("totalCostHbar", number()),
                        ("credits", integer()),
                        ("usdCents", integer()),
                        ("expiresAt", string()),
                        ("mode", modes.clone()),
                        ("sizeBytes", integer()),
                        ("rawQuote", any_object()),
                    ],
                    7,
                ),
            )],
        ),
        "createContentInscription" => {
            let mut input = inscription_input.clone();
            input["properties"]["quoteId"] = string();
            input["properties"]["waitForConfirmation"] = boolean();
            with_body(content, input, vec![(202, inscription_job.clone())])
        }
        "listContentInscriptions" => Doc {
            query: vec![
                query("limit", json!({"type": "integer", "minimum": 1, "maximum": 100}), false),
                query("offset", json!({"type": "integer", "minimum": 0}), false),
                query("status", json!({"enum": ["pending", "in_progress", "completed", "failed"]}), false),
            ],
            ..json(
                content,
                object(
                    &[
                        ("inscriptions", array(inscription_job.clone())),
                        ("total", integer()),
                        ("limit", integer()),
                        ("offset", integer()),
                    ],
                    2,
                ),
            )
        },
        "contentInscriptionJob" => json(content, inscription_job),
        "programmableSecretsHealth" => json(
            secrets,
            object(
                &[
                    ("enabled", boolean()),
                    ("krsConfigured", boolean()),
                    ("chains", array(any_object())),
                    ("network", string()),
                    ("chainId", integer()),
                    ("rpcUrl", nullable("string")),
                    ("paymentModuleAddress", string()),
                    ("policyVaultAddress", string()),
                    ("accessReceiptAddress", string()),
                ],
                3,
            ),
        ),
        "getProgrammableSecretsCatalog" => {
            json(secrets, object(&[("policies", array(secret_policy.clone())), ("total", integer())], 2))
        }
        "listProgrammableSecretPolicies" => Doc {
            query: vec![
                query("limit", json!({"type": "integer", "minimum": 1, "maximum": 200}), false),
                query("page", json!({"type": "integer", "minimum": 1, "maximum": 1_000_000}), false),
                query("chainId", json!({"type": "integer", "minimum": 1}), false),
            ],
            ..json(
                secrets,
                object(
                    &[
                        ("policies", array(secret_policy.clone())),
                        ("total", integer()),
                        ("page", integer()),
                        ("limit", integer()),
                    ],
                    4,
                ),
            )
        },
        "getProgrammableSecretPolicy" => Doc {
            query: vec![query("chainId", json!({"type": "integer", "minimum": 1}), false)],
            ..json(secrets, object(&[("policy", secret_policy.clone())], 1))
        },
        "getProgrammableSecretCiphertext" => Doc {
            query: vec![query("chainId", json!({"type": "integer", "minimum": 1}), false)],
            media: Some("application/octet-stream"),
            ..json(secrets, any_object())
        },
        "prepareProgrammableSecretPolicy" => with_body(
            secrets,
            object(
                &[
                    ("providerAddress", string()),
                    ("providerUaid", string()),
                    ("priceWei", string()),
                    ("metadata", any_object()),
                    ("ciphertextBase64", string()),
                    ("contentKeyB64", string()),
                    ("chainId", json!({"type": "integer", "minimum": 1})),
                    ("payoutAddress", string()),
                    ("paymentToken", string()),
                    ("expiresAtUnix", json!({"type": "integer", "minimum": 0})),
                ],
                6,
            ),
            vec![(
                200,
                object(
                    &[
                        ("stagedPolicyId", string()),
                        ("policyId", json!({"type": "null"})),
                        ("chainId", integer()),
                        ("network", string()),
                        ("onchainInputs", any_object()),
                        ("contractAddress", string()),
                        ("paymentModuleAddress", string()),
                        ("policyVaultAddress", string()),
                        ("accessReceiptAddress", string()),
                    ],
                    5,
                ),
            )],
        ),
        "confirmProgrammableSecretPolicy" => with_body(
            secrets,
            object(
                &[
                    ("stagedPolicyId", string()),
                    ("policyId", json!({"type": "integer", "minimum": 1})),
                    ("createdTxHash", string()),
                    ("createdBlockNumber", json!({"type": "integer", "minimum": 0})),
                    ("createdBlockHash", string()),
                    ("createdLogIndex", json!({"type": "integer", "minimum": 0})),
                ],
                3,
            ),
            vec![(200, object(&[("policy", secret_policy.clone())], 1))],
        ),
        "importProgrammableSecretPolicy" => with_body(
            secrets,
            object(
                &[
                    ("policyId", json!({"type": "integer", "minimum": 1})),
                    (
                        "bundle",
                        object(
                            &[("contentKeyHex", string()), ("ciphertextHex", string()), ("providerUaid", string())],
                            3,
                        ),
                    ),
                    ("chainId", json!({"type": "integer", "minimum": 1})),
                    ("createdTxHash", string()),
                    ("createdBlockNumber", json!({"type": "integer", "minimum": 0})),
                    ("createdLogIndex", json!({"type": "integer", "minimum": 0})),
                ],
                2,
            ),
            vec![(200, object(&[("policy", secret_policy.clone())], 1))],
        ),
        "getProgrammableSecretProviderIdentity" => Doc {
            query: vec![
                query("providerAddress", string(), true),
                query("chainId", json!({"type": "integer", "minimum": 1}), true),
                query("policyProviderUaid", string(), false),
            ],
            ..json(
                secrets,
                object(
                    &[
                        ("uaid", nullable("string")),
                        ("source", json!({"enum": ["policy-uaid", "registry-search", "none"]})),
                        ("reason", string()),
                        ("agent", any_object()),
                    ],
                    2,
                ),
            )
        },
        "issueProgrammableSecretNonce" => with_body(
            secrets,
            object(
                &[
                    ("policyId", json!({"type": "integer", "minimum": 1})),
                    ("buyerAddress", string()),
                    ("chainId", json!({"type": "integer", "minimum": 1})),
                ],
                2,
            ),
            vec![(
                200,
                object(
                    &[
                        ("requestId", string()),
                        ("policyId", integer()),
                        ("buyerAddress", string()),
                        ("nonce", string()),
                        ("challengeMessage", string()),
                        ("expiresAt", string()),
                    ],
                    6,
                ),
            )],
        ),
        "requestProgrammableSecretKey" => with_body(
            secrets,
            object(
                &[
                    ("requestId", string()),
                    ("policyId", json!({"type": "integer", "minimum": 1})),
                    ("buyerAddress", string()),
                    ("nonce", string()),
                    ("signature", string()),
                    ("buyerRsaPublicKeyPem", string()),
                    ("buyerPublicKeyFingerprint", string()),
                ],
                7,
            ),
            vec![(200, key_request.clone())],
        ),
        "getProgrammableSecretKeyRequest" => json(secrets, key_request.clone()),
        "skillsConfig" => json(
            skills,
            object(
                &[
                    ("enabled", boolean()),
                    ("directoryTopicId", nullable("string")),
                    ("maxFiles", nullable("integer")),
                    ("maxTotalSizeBytes", nullable("integer")),
                    ("allowedMimeTypes", json!({"type": ["array", "null"], "items": {"type": "string"}})),
                    ("network", nullable("string")),
                ],
                1,
            ),
        ),
        "listSkills" => Doc {
            query: vec![
                query("name", string(), false),
                query("version", string(), false),
                query("accountId", string(), false),
                query("q", string(), false),
                query("limit", json!({"type": "integer", "minimum": 1, "maximum": 50}), false),
                query("cursor", string(), false),
                query("includeFiles", json!({"enum": ["true", "false"]}), false),
            ],
            ..json(skills, object(&[("items", array(skill_summary.clone())), ("nextCursor", nullable("string"))], 2))
        },
        "listSkillVersions" => Doc {
            query: vec![query("name", string(), true)],
            ..json(
                skills,
                object(
                    &[
                        (
                            "items",
                            array(object(
                                &[
                                    ("jobId", string()),
                                    ("version", string()),
                                    ("createdAt", string()),
                                    ("verified", boolean()),
                                ],
                                3,
                            )),
                        ),
                        ("name", string()),
                    ],
                    2,
                ),
            )
        },
        "listMySkills" => Doc {
            query: vec![query("limit", json!({"type": "integer", "minimum": 1, "maximum": 100}), false)],
            ..json(skills, object(&[("items", array(skill_mine.clone()))], 1))
        },
        "getMySkillsList" => Doc {
            query: vec![
                query("limit", json!({"type": "integer", "minimum": 1, "maximum": 100}), false),
                query("cursor", string(), false),
            ],
            ..json(
                skills,
                object(
                    &[
                        ("owned", object(&[("items", array(skill_mine))], 1)),
                        (
                            "upvoted",
                            object(&[("items", array(skill_summary.clone())), ("nextCursor", nullable("string"))], 2),
                        ),
                    ],
                    2,
                ),
            )
        },
        "quoteSkillPublish" => with_body(
            skills,
            skill_input.clone(),
            vec![(
                200,
                object(
                    &[
                        ("quoteId", string()),
                        ("name", string()),
                        ("version", string()),
                        ("directoryTopicId", string()),
                        ("expiresAt", string()),
                        ("estimatedCostHbar", number()),
                        ("credits", integer()),
                        ("usdCents", integer()),
                        (
                            "files",
                            array(object(
                                &[("name", string()), ("mimeType", string()), ("estimatedCostHbar", number())],
                                3,
                            )),
                        ),
                    ],
                    9,
                ),
            )],
        ),
        "publishSkill" => {
            let mut input = skill_input;
            input["properties"]["quoteId"] = nullable("string");
            input["properties"]["publisher"] = nullable("string");
            let job = object(
                &[
                    ("jobId", string()),
                    ("status", statuses.clone()),
                    ("createdAt", string()),
                    ("updatedAt", string()),
                    ("network", string()),
                    ("credits", nullable("integer")),
                    ("usdCents", nullable("integer")),
                    ("quoteId", nullable("string")),
                ],
                5,
            );
            with_body(skills, input, vec![(201, job.clone()), (200, job)])
        }
        "getSkillPublishJob" => json(
            skills,
            object(
                &[
                    ("jobId", string()),
                    ("status", statuses),
                    ("network", string()),
                    ("name", string()),
                    ("version", string()),
                    ("directoryTopicId", string()),
                    ("createdAt", string()),
                    ("updatedAt", string()),
                    ("packageTopicId", nullable("string")),
                    ("skillJsonHrl", nullable("string")),
                    ("files", array(skill_file.clone())),
                    ("failureReason", nullable("string")),
                ],
                8,
            ),
        ),
        "getSkillOwnership" => Doc {
            query: vec![query("name", string(), true), query("accountId", string(), false)],
            ..json(skills, object(&[("name", string()), ("exists", boolean()), ("isOwner", boolean())], 3))
        },
        "getSkillVoteStatus" => Doc { query: vec![query("name", string(), true)], ..json(skills, vote.clone()) },
        "setSkillVote" => {
            with_body(skills, object(&[("name", string()), ("upvoted", boolean())], 2), vec![(200, vote)])
        }
        "requestSkillVerification" => with_body(
            skills,
            object(&[("name", string()), ("tier", json!({"enum": ["basic", "express"]}))], 2),
            vec![(200, object(&[("request", verification_request.clone())], 1))],
        ),
        "getSkillVerificationStatus" => Doc {
            query: vec![query("name", string(), true)],
            ..json(
                skills,
                object(
                    &[
                        ("name", string()),
                        ("verified", boolean()),
                        ("previouslyVerified", boolean()),
                        ("pendingRequest", json!({"oneOf": [verification_request.clone(), {"type": "null"}]})),
                    ],
                    3,
                ),
            )
        },
        "decideSkillVerification" => with_body(
            skills,
            object(&[("status", json!({"enum": ["approved", "rejected"]}))], 1),
            vec![(200, object(&[("request", verification_request)], 1))],
        ),
        "cardPaymentIntent" => with_body(live, object(&[("amount", integer())], 1), vec![(200, any_object())]),
        "cardPaymentWebhook" => with_body(live, any_object(), vec![(200, any_object())]),
        "creditProviders" => json(live, object(&[("providers", array(any_object()))], 1)),
        "redeemPointsQuote" => json(live, any_object()),
        "redeemPoints" => optional(with_body(live, any_object(), vec![(200, any_object())])),
        "registerEncryptionKey" => with_body(
            live,
            object(&[("keyType", string()), ("publicKey", string()), ("uaid", string())], 2),
            vec![(201, object(&[("id", string()), ("keyType", string()), ("publicKey", string())], 3))],
        ),
        "submitAgentFeedback" => {
            with_body(live, object(&[("sessionId", string()), ("score", number())], 2), vec![(200, any_object())])
        }
        "agentFeedbackEligibility" => with_body(live, object(&[("sessionId", string())], 1), vec![(200, any_object())]),
        "submitAdapterRegistryAdapter" => {
            with_body(live, any_object(), vec![(202, object(&[("submissionId", string()), ("status", string())], 2))])
        }
        "createAdapterRegistryCategory" => {
            with_body(live, object(&[("name", string())], 1), vec![(201, object(&[("category", any_object())], 1))])
        }
        "adapterRegistrySubmission" => json(live, object(&[("submission", any_object())], 1)),
        "createChatSession" => with_body(
            live,
            object(&[("uaid", string()), ("agentUrl", string())], 0),
            vec![(
                200,
                object(&[("sessionId", string()), ("agent", any_object()), ("history", array(any_object()))], 3),
            )],
        ),
        "sendChatMessage" => Doc {
            events: true,
            ..with_body(
                live,
                object(
                    &[
                        ("message", string()),
                        ("sessionId", string()),
                        ("uaid", string()),
                        ("agentUrl", string()),
                        ("streaming", boolean()),
                    ],
                    1,
                ),
                vec![(200, object(&[("sessionId", string()), ("message", string()), ("timestamp", string())], 3))],
            )
        },
        "endChatSession" => json(live, object(&[("message", string()), ("sessionId", string())], 2)),
        "updateChatVisibility" => with_body(
            live,
            object(&[("visibility", json!({"enum": ["private", "public"]}))], 1),
            vec![(200, any_object())],
        ),
        "chatSessionMeta" => json(
            live,
            object(&[("sessionId", string()), ("visibility", string()), ("members", array(any_object()))], 3),
        ),
        "inviteToChat" => with_body(live, uaid_body(), vec![(200, any_object())]),
        "publicChatSessions" => Doc {
            query: vec![
                query("limit", json!({"type": "integer", "minimum": 1, "maximum": 100}), false),
                query("cursor", string(), false),
                query("q", string(), false),
            ],
            ..json(live, object(&[("sessions", array(any_object()))], 1))
        },
        "chatHistory" => json(live, object(&[("sessionId", string()), ("history", array(any_object()))], 2)),
        "chatEncryptionStatus" => json(live, object(&[("sessionId", string())], 1)),
        "chatEncryptionHandshake" => with_body(
            live,
            any_object(),
            vec![(200, object(&[("sessionId", string()), ("handshake", any_object())], 2))],
        ),
        "compactChatHistory" => optional(with_body(
            live,
            any_object(),
            vec![(200, object(&[("sessionId", string()), ("history", array(any_object()))], 2))],
        )),
        "routeToAgent" => with_body(
            live,
            object(&[("message", json!({"type": ["string", "object", "array"]}))], 1),
            vec![(200, any_object())],
        ),
        "uaidConnectionStatus" => json(live, object(&[("connected", boolean())], 1)),
        "closeUaidConnection" => json(live, object(&[("success", boolean()), ("message", string())], 2)),
        "importPlugins" => {
            let source = object(
                &[("source", string()), ("url", string()), ("repo", string()), ("path", string()), ("sha", string())],
                1,
            );
            let input = object(
                &[
                    ("repository", string()),
                    ("commit", json!({"type": "string", "pattern": "^([0-9a-fA-F]{40}|[0-9a-fA-F]{64})$"})),
                    ("path", string()),
                    ("archiveUrl", string()),
                    ("source", source),
                    ("marketplace", object(&[("name", string()), ("plugins", array(any_object()))], 1)),
                ],
                0,
            );
            with_body(plugins, input, vec![(202, plugin_import.clone())])
        }
        "getPluginImport" => json(plugins, plugin_import),
        "getPluginsJson" => json(
            plugins,
            object(
                &[
                    ("name", string()),
                    ("version", string()),
                    ("total", integer()),
                    ("categories", array(string())),
                    ("plugins", array(any_object())),
                ],
                5,
            ),
        ),
        "getPluginMarketplace" => json(
            plugins,
            object(&[("name", string()), ("interface", any_object()), ("plugins", array(any_object()))], 3),
        ),
        "getPluginCatalog" => Doc {
            query: vec![
                query("limit", json!({"type": "integer", "minimum": 1, "maximum": 100}), false),
                query("cursor", string(), false),
                query("category", string(), false),
                query("ecosystem", json!({"enum": ["codex", "claude-code", "agent-plugins"]}), false),
                query("ownerVerified", json!({"enum": ["true", "false"]}), false),
                query("q", string(), false),
            ],
            ..json(plugins, object(&[("items", array(plugin_item.clone())), ("nextCursor", nullable("string"))], 2))
        },
        "getPlugin" => json(plugins, plugin_item),
        "pluginBadge" => Doc {
            query: vec![
                query("slug", string(), true),
                query("metric", json!({"enum": ["trust", "security"]}), false),
                query("style", json!({"enum": ["flat", "flat-square", "plastic", "for-the-badge", "social"]}), false),
                query("label", string(), false),
            ],
            ..json(
                plugins,
                object(
                    &[("schemaVersion", integer()), ("label", string()), ("message", string()), ("color", string())],
                    4,
                ),
            )
        },
        "guardTrustByHash" | "guardTrustByHashPortal" => json(
            plugins,
            object(
                &[
                    ("generatedAt", string()),
                    ("query", object(&[("sha256", string())], 1)),
                    ("match", json!({"oneOf": [trust_match.clone(), {"type": "null"}]})),
                    ("evidence", array(string())),
                ],
                4,
            ),
        ),
        "guardTrustResolve" | "guardTrustResolvePortal" => Doc {
            query: vec![
                query("ecosystem", string(), false),
                query("name", string(), false),
                query("version", string(), false),
            ],
            ..json(
                plugins,
                object(&[("generatedAt", string()), ("query", any_object()), ("items", array(trust_match.clone()))], 3),
            )
        },
        "guardFeed" | "guardFeedPortal" => Doc {
            query: vec![query("limit", json!({"type": "integer", "minimum": 1, "maximum": 100}), false)],
            ..json(
                plugins,
                object(
                    &[
                        ("generatedAt", string()),
                        ("items", array(any_object())),
                        (
                            "summary",
                            object(
                                &[
                                    ("total", integer()),
                                    ("monitorCount", integer()),
                                    ("reviewCount", integer()),
                                    ("blockCount", integer()),
                                ],
                                4,
                            ),
                        ),
                    ],
                    3,
                ),
            )
        },
        "guardAdvisories" | "guardAdvisoriesPortal" | "guardRevocations" | "guardRevocationsPortal" => {
            json(plugins, object(&[("generatedAt", string()), ("items", array(advisory))], 2))
        }
        "guardPreInstallVerdict"
        | "guardPreInstallVerdictPortal"
        | "guardPreExecutionVerdict"
        | "guardPreExecutionVerdictPortal" => {
            let request = object(
                &[
                    ("harness", string()),
                    ("artifactName", string()),
                    ("artifactType", json!({"enum": ["skill", "plugin"]})),
                    ("artifactId", string()),
                    ("artifactSlug", string()),
                    ("artifactHash", string()),
                    ("publisher", string()),
                    ("domain", string()),
                    ("launchSummary", string()),
                    ("capabilities", array(string())),
                    ("workspacePath", string()),
                ],
                3,
            );
            let verdict = object(
                &[
                    ("generatedAt", string()),
                    ("principal", any_object()),
                    ("decision", json!({"enum": ["allow", "review", "block"]})),
                    ("recommendation", recommendation.clone()),
                    ("rationale", string()),
                    ("scope", json!({"enum": ["artifact", "publisher", "domain", "policy"]})),
                    (
                        "matchedEvidence",
                        array(object(&[("category", string()), ("source", string()), ("detail", string())], 3)),
                    ),
                    ("matchedException", json!({"type": "null"})),
                    ("trustMatch", json!({"oneOf": [trust_match, {"type": "null"}]})),
                ],
                9,
            );
            with_body(plugins, request, vec![(200, verdict)])
        }
        // Not described: the unit test below names it.
        _ => Doc::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_of_the_table_is_in_the_document_and_every_operation_is_described() {
        let table = crate::routes::table();
        let document = document(&table);
        let mut schemas = Schemas::new();
        for endpoint in &table {
            for op in &endpoint.operations {
                let method = op.method.as_str().to_ascii_lowercase();
                let documented = &document["paths"][endpoint.pattern][&method];
                assert_eq!(documented["operationId"], op.name, "{method} {} is in the document", endpoint.pattern);
                assert!(!describe(op.name, &mut schemas).tag.is_empty(), "{} is described", op.name);
                for name in path_parameters(endpoint.pattern) {
                    let declared = documented["parameters"].as_array().unwrap().iter().any(|p| p["name"] == name);
                    assert!(declared, "{} declares its path parameter {name}", op.name);
                }
            }
        }
        let operations: usize =
            document["paths"].as_object().unwrap().values().map(|p| p.as_object().unwrap().len()).sum();
        assert_eq!(operations, table.iter().map(|e| e.operations.len()).sum::<usize>(), "nothing else is documented");
    }

    #[test]
    fn every_reference_names_a_component() {
        let document = document(&crate::routes::table());
        let text = document.to_string();
        let schemas = document["components"]["schemas"].as_object().unwrap();
        for reference in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = &reference[..reference.find('"').unwrap()];
            assert!(schemas.contains_key(name), "{name} is a component");
        }
    }
}
