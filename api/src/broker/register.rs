//! Registration (spec section 4, Registration; wire shapes in
//! `broker-live.md` section 5): quote, register, update, delete, status,
//! progress and the messaging-network helper.
//!
//! A registration is billed, stored, journaled and visible in the live
//! overlay in one step; its additional registries are delivered by the
//! [`super::registrar`] in the background. The answer waits a bounded
//! time for them (`--registration-wait-ms`): all delivered is 200, one
//! failed is 207, still going is 202 with the attempt to poll.
//!
//! Retries are recognised by content: registering a UAID the same account
//! holds is `duplicate`, sending an update already applied changes nothing;
//! neither is billed again. Credits of an additional registry that fails
//! for good are refunded.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use broker_model::registration::{self, Invalid, Owner, Request as Registration};
use broker_model::{Agent, Verification};
use broker_site::render;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use warp::http::StatusCode;

use crate::reply::{self, Answer, Error};
use crate::request::{parse_body, Request};
use crate::store::registry::{self as stored, Attempt, Delivery, Mode, Outcome, Plan, Write};
use crate::store::{self, credits};

/// The agent of `uaid` as of now (overlay, then build); `None` when not
/// indexed or deleted; an error when the build's record of it is damaged.
pub fn lookup<'a>(
    request: &'a Request,
    view: &'a super::overlay::View,
    uaid: &str,
) -> Result<Option<Cow<'a, Agent>>, Error> {
    let Some(broker) = request.build.as_deref().and_then(|b| b.broker.as_deref()) else { return Ok(None) };
    view.current(broker, uaid).map_err(|e| Error::damaged_record(&e))
}

/// The account that registered `uaid` here, if one did (and has not
/// deleted it).
pub async fn registrant(request: &Request, uaid: &str) -> Result<Option<String>, Error> {
    let key = uaid.to_string();
    Ok(request.app.store.read(move |conn| stored::registrant(conn, &key)).await?)
}

/// 403 `destination_not_allowed` when an endpoint the broker would call
/// (an http or https URL) is one the egress gate refuses by its text: an
/// inside address, `localhost`. Names are judged again, by their
/// addresses, whenever the broker calls them; a special-use name of no
/// network (`agent.example`) is kept, and never called. A model
/// provider's origin the operator named is called as configured.
fn callable(request: &Request, agent: &Agent) -> Result<(), Error> {
    let chat = &request.app.chat;
    let web = agent.endpoints.values().filter(|url| web_scheme(url));
    for url in web.filter(|url| !chat.providers.lists(url)) {
        if chat.gate.judge_registered(url).is_err() {
            return Err(crate::egress::refusal().naming("endpoint"));
        }
    }
    Ok(())
}

/// Whether `url` names http or https as the gate reads it (the URL
/// standard's parser: any case, spaces around and tabs within dropped, so
/// `HTTP://…` is called like `http://…`).
fn web_scheme(url: &str) -> bool {
    url::Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https"))
}

fn refused(invalid: Invalid) -> Error {
    let problem = crate::wording::serde_rule(&invalid.problem);
    Error::invalid_body(format!("{}: {problem}", invalid.field)).naming(invalid.field)
}

/// The body, read as a registration request against the build's catalog.
fn read(request: &Request) -> Result<(Value, Registration), Error> {
    let body: Value = parse_body(&request.body)?;
    let read = read_value(request, &body)?;
    Ok((body, read))
}

fn read_value(request: &Request, body: &Value) -> Result<Registration, Error> {
    let (_, broker) = super::agents(request)?;
    registration::read(body, &broker.catalog).map_err(refused)
}

/// What a request costs: the base price and each additional registry's.
fn plan(request: &Request, read: &Registration, mode: Mode) -> Result<Plan, Error> {
    let (_, broker) = super::agents(request)?;
    let pricing = &request.app.pricing;
    let base = match mode {
        Mode::Register => pricing.registration.base,
        Mode::Update => pricing.update.base,
    };
    let additional = registration::networks(&broker.catalog, &read.additional)
        .into_iter()
        .map(|n| (n.key.clone(), n.registry_id.clone(), n.estimated_credits as i64))
        .collect();
    Ok(Plan::new(mode, base, additional))
}

/// The owner: the billing account in CAIP-10.
fn owner(request: &Request) -> Result<Owner, Error> {
    let principal = request.principal()?;
    let account = principal.billing(&request.headers)?;
    let network = match principal.network.as_str() {
        "" => request.app.auth.network.canonical(),
        own => own.to_string(),
    };
    Ok(Owner { caip10: format!("{network}:{account}"), account })
}

fn digest(body: &Value) -> Vec<u8> {
    // serde_json's maps are sorted: equal requests, equal bytes.
    Sha256::digest(body.to_string().as_bytes()).to_vec()
}

fn now() -> (i64, String) {
    let ms = store::now_ms();
    (ms, store::rfc3339(ms))
}

/// `POST /register/quote`: what a registration would cost, and (signed
/// in) whether the account's balance covers it.
pub async fn quote(request: Request) -> Answer {
    let (_, read) = read(&request)?;
    let (_, broker) = super::agents(&request)?;
    let plan = plan(&request, &read, Mode::Register)?;
    let networks = registration::networks(&broker.catalog, &read.additional);
    let account = match &request.principal {
        Some(principal) => Some(principal.billing(&request.headers)?),
        None => None,
    };
    let required = plan.total();
    let available = match account.clone() {
        Some(a) => Some(request.app.store.read(move |conn| credits::balance(conn, &a)).await?),
        None => None,
    };
    let per_hbar = request.app.pricing.credits_per_hbar;
    let mut body = json!({
        "requiredCredits": required,
        "baseCredits": plan.base,
        "additionalCredits": required - plan.base,
        "additionalRegistryCount": networks.len(),
        "additionalRegistries": networks.iter().map(|n| json!({
            "key": n.key, "registry": n.registry_id, "networkId": n.network_id, "networkName": n.name,
            "estimatedCredits": n.estimated_credits,
        })).collect::<Vec<_>>(),
        "registry": read.registry.as_deref().unwrap_or(registration::DEFAULT_REGISTRY),
        "protocol": read.protocol.as_deref().unwrap_or("a2a"),
        "accountId": account,
        "availableCredits": available,
        "shortfallCredits": available.map_or(0, |a| (required - a).max(0)),
        "creditsPerHbar": per_hbar,
        "estimatedHbar": required as f64 / per_hbar,
    });
    if let Some(account) = &account {
        body["creditAccountId"] = json!(account);
    }
    Ok(reply::json(&body))
}

/// `POST /register`.
pub async fn register(request: Request) -> Answer {
    let (body, read) = read(&request)?;
    let owner = owner(&request)?;
    let (_, broker) = super::agents(&request)?;
    let (ms, at) = now();
    let agent = registration::agent(&read, &owner, &broker.catalog, &at).map_err(refused)?;
    callable(&request, &agent)?;
    let uaid = agent.uaid.to_string();
    // An agent indexed from another source is not this account's to claim.
    let key = uaid.clone();
    let mine = request.app.store.read(move |conn| stored::find(conn, &key)).await?;
    let view = request.app.overlay.view();
    if mine.is_none_or(|r| r.deleted_at.is_some()) && lookup(&request, &view, &uaid)?.is_some() {
        let message = format!("{uaid} is already indexed from another source");
        return Err(Error::new(StatusCode::CONFLICT, "already_indexed", message));
    }
    let plan = plan(&request, &read, Mode::Register)?;
    let outcome = save(&request, &agent, owner.account, &body, plan.clone(), ms).await?;
    finish(&request, outcome, agent, &plan).await
}

/// Stores a registration or an update (by the plan's mode), billed and
/// journaled in one write.
async fn save(
    request: &Request,
    agent: &Agent,
    account: String,
    body: &Value,
    plan: Plan,
    now: i64,
) -> Result<Outcome, Error> {
    // The write judges the key (nothing is fetched before it).
    let key = crate::idempotency::for_route(request, "registration", &account, None)?;
    let write = Write { agent: agent.clone(), account, request_hash: digest(body), plan, key, now };
    Ok(request
        .app
        .store
        .write(move |conn| match write.plan.mode {
            Mode::Register => stored::register(conn, &write),
            Mode::Update => stored::update(conn, &write),
        })
        .await?)
}

/// `PUT /register/{uaid}`: an update (`profile`), or the ownership body
/// (`registered`, no `profile`).
pub async fn update(request: Request) -> Answer {
    let body: Value = parse_body(&request.body)?;
    let has = |field: &str| body.get(field).is_some_and(|v| !v.is_null());
    match (has("profile"), has("registered")) {
        (true, _) => update_profile(request, body).await,
        (false, true) => ownership(request, body).await,
        (false, false) => {
            Err(Error::invalid_body("the body needs profile (an update) or registered (ownership)").naming("profile"))
        }
    }
}

/// The registration of `uaid` the billing account owns: 404 when nobody
/// registered it here, 403 when another account did (or it was indexed
/// from another source).
async fn owned(request: &Request, uaid: &str, account: &str) -> Result<stored::Registration, Error> {
    let key = uaid.to_string();
    let found = request.app.store.read(move |conn| stored::find(conn, &key)).await?;
    match found.filter(|r| r.deleted_at.is_none()) {
        Some(r) if r.account == account => Ok(r),
        Some(_) => Err(Error::forbidden(format!("{uaid} was registered by another account"))),
        None => {
            let view = request.app.overlay.view();
            match lookup(request, &view, uaid)? {
                Some(_) => Err(Error::forbidden(format!("{uaid} was not registered here; it cannot be changed here"))),
                None => {
                    Err(Error::new(StatusCode::NOT_FOUND, "agent_not_found", format!("no registered agent {uaid}")))
                }
            }
        }
    }
}

async fn update_profile(request: Request, body: Value) -> Answer {
    let read = read_value(&request, &body)?;
    let owner = owner(&request)?;
    let uaid = request.params.get("uaid").to_string();
    let existing = owned(&request, &uaid, &owner.account).await?;
    let (_, broker) = super::agents(&request)?;
    let (ms, at) = now();
    let agent = registration::updated(&existing.agent, &read, &broker.catalog, &at).map_err(refused)?;
    callable(&request, &agent)?;
    let plan = plan(&request, &read, Mode::Update)?;
    let outcome = save(&request, &agent, owner.account, &body, plan.clone(), ms).await?;
    finish(&request, outcome, agent, &plan).await
}

/// The ownership body: `{registered, name?, description?, endpoint?,
/// metadata?}` on an agent the account registered. Not billed.
async fn ownership(request: Request, body: Value) -> Answer {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Claim {
        registered: bool,
        name: Option<String>,
        description: Option<String>,
        endpoint: Option<String>,
        metadata: Option<serde_json::Map<String, Value>>,
    }
    let claim: Claim = parse_body(&request.body)?;
    let owner = owner(&request)?;
    let uaid = request.params.get("uaid").to_string();
    let existing = owned(&request, &uaid, &owner.account).await?;
    let mut agent = existing.agent.clone();
    let (ms, at) = now();
    if let Some(name) = claim.name.map(|n| n.trim().to_string()).filter(|n| !n.is_empty()) {
        agent.profile.display_name = name.clone();
        agent.name = name;
    }
    if let Some(description) = claim.description {
        agent.profile.bio = Some(description.clone());
        agent.description = description;
    }
    if let Some(endpoint) = claim.endpoint.map(|e| e.trim().to_string()) {
        if !(endpoint.starts_with("https://") || endpoint.starts_with("http://")) || endpoint.contains(' ') {
            return Err(Error::invalid_body("endpoint: expected an absolute http(s) URL").naming("endpoint"));
        }
        let protocol = agent.protocols.first().cloned().unwrap_or_else(|| "a2a".into());
        agent.endpoints.insert(protocol, endpoint);
    }
    if let Some(metadata) = claim.metadata {
        agent.metadata = metadata;
    }
    agent.verification_status = if claim.registered { Verification::Registered } else { Verification::Indexed };
    agent.updated_at = at;
    broker_model::validate(&agent).map_err(|e| Error::invalid_body(format!("{e:#}")))?;
    callable(&request, &agent)?;
    let outcome = save(&request, &agent, owner.account, &body, Plan::new(Mode::Update, 0, Vec::new()), ms).await?;
    let agent = match outcome {
        Outcome::Done { seq, .. } => {
            changed(&request, seq, &uaid, Some(agent.clone())).await;
            agent
        }
        Outcome::Same { registration, .. } => registration.agent,
        other => return Err(unexpected(other)),
    };
    Ok(reply::json(&json!({
        "ok": true,
        "uaid": uaid,
        "registered": agent.verification_status == Verification::Registered,
        "registeredAt": agent.created_at,
        "agent": summary(&agent),
    })))
}

/// `DELETE /register/{uaid}`: the owner only.
pub async fn delete(request: Request) -> Answer {
    let owner = owner(&request)?;
    let uaid = request.params.get("uaid").to_string();
    owned(&request, &uaid, &owner.account).await?;
    let (key, account) = (uaid.clone(), owner.account.clone());
    let outcome = request.app.store.write(move |conn| stored::delete(conn, &key, &account, store::now_ms())).await?;
    match outcome {
        Outcome::Done { seq, .. } => changed(&request, seq, &uaid, None).await,
        other => return Err(unexpected(other)),
    }
    Ok(reply::json(&json!({"success": true, "uaid": uaid, "message": "the agent was removed from the index"})))
}

/// `GET /register/status/{uaid}`: whether the agent is indexed now.
pub async fn status(request: Request) -> Answer {
    let uaid = request.params.get("uaid");
    let view = request.app.overlay.view();
    let agent = lookup(&request, &view, uaid)?
        .ok_or_else(|| Error::new(StatusCode::NOT_FOUND, "agent_not_found", format!("{uaid} is not indexed")))?;
    let mut agent_body = summary(&agent);
    agent_body["uaid"] = json!(agent.uaid);
    Ok(reply::json(&json!({"registered": true, "agent": agent_body})))
}

/// `GET /register/progress/{attemptId}`: the signed-in account's own
/// attempts (403 for another's; the operator sees all).
pub async fn progress(request: Request) -> Answer {
    let principal = request.principal()?.clone();
    let id = request.params.get("attemptId").to_string();
    let key = id.clone();
    let attempt = request.app.store.read(move |conn| stored::attempt(conn, &key)).await?.ok_or_else(|| {
        Error::new(StatusCode::NOT_FOUND, "attempt_not_found", format!("no registration attempt {id}"))
    })?;
    if !principal.operator && principal.billing(&request.headers)? != attempt.account {
        return Err(Error::forbidden("the attempt belongs to another account"));
    }
    Ok(reply::json(&json!({"progress": progress_record(&attempt)})))
}

/// `POST /register/{uaid}/messaging-network` (and the hosted broker's
/// `/openconvai`): what an agent needs to join the HCS-10 network.
pub async fn messaging_network(request: Request) -> Answer {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Bridge {
        operator_id: Option<String>,
        #[serde(default, rename = "submitToHCS")]
        submit_to_hcs: bool,
    }
    let bridge: Bridge = parse_body(&request.body)?;
    let operator = bridge.operator_id.as_deref().map(str::trim).filter(|o| !o.is_empty());
    let operator = operator.ok_or_else(|| Error::invalid_body("operatorId: is required").naming("operatorId"))?;
    let operator = crate::auth::ledger::account(&request.app.auth.network, operator).ok_or_else(|| {
        Error::invalid_body("operatorId: expected a Hedera account id (0.0.1234)").naming("operatorId")
    })?;
    let uaid = request.params.get("uaid");
    let view = request.app.overlay.view();
    let agent = lookup(&request, &view, uaid)?
        .ok_or_else(|| Error::new(StatusCode::NOT_FOUND, "agent_not_found", format!("{uaid} is not indexed")))?;
    if bridge.submit_to_hcs {
        let message = "this deployment has no ledger client to submit with; submit the profile yourself";
        return Err(Error::new(StatusCode::SERVICE_UNAVAILABLE, "not_configured", message));
    }
    let mut profile = serde_json::to_value(&agent.profile).expect("profiles serialise");
    profile["properties"] = json!({"operatorId": operator, "uaid": agent.uaid});
    Ok(reply::json(&json!({
        "success": true,
        "message": "HCS-10 onboarding data for this agent",
        "openConvAIData": {
            "operatorId": operator,
            "profile": profile,
            "submitToHCS": false,
            "registrationSource": "registry-broker",
            "instructions": {
                "steps": [
                    "create an inbound and an outbound topic for the agent (HCS-10)",
                    "inscribe this profile with inboundTopicId and outboundTopicId set (HCS-11)",
                    "set the operator account's memo to hcs-11:<profile HRL>",
                    "update the registration with PUT /api/v1/register/{uaid} to record the topics",
                ],
            },
        },
    })))
}

/// After a stored change: the overlay shows it, the journal writer is
/// woken.
async fn changed(request: &Request, seq: i64, uaid: &str, agent: Option<Agent>) {
    let agent = match agent {
        Some(agent) => Some(super::availability::live::as_shown(&request.app.store, agent).await),
        None => None,
    };
    let check = agent.is_some();
    // Only a panic ends the overlay's writer (it logged why): the change
    // is stored and journaled, and shows from the next build.
    let _ = request.app.overlay_writer.apply(vec![(seq, uaid.to_string(), agent)]).await;
    if check {
        request.app.availability_soon.ask(uaid);
    }
    request.app.journal.wake.notify_one();
}

fn unexpected(outcome: Outcome) -> Error {
    match outcome {
        Outcome::NotFound => Error::new(StatusCode::NOT_FOUND, "agent_not_found", "no such registered agent"),
        Outcome::NotOwner => Error::forbidden("the agent was registered by another account"),
        Outcome::Taken => Error::new(StatusCode::CONFLICT, "uaid_taken", "another account registered this UAID"),
        Outcome::Short { balance, shortfall } => short(0, balance, shortfall),
        Outcome::KeyReused => crate::idempotency::reused(),
        Outcome::Done { .. } | Outcome::Same { .. } => {
            Error::new(StatusCode::INTERNAL_SERVER_ERROR, "store_failed", "unexpected store outcome")
        }
    }
}

/// 402 `insufficient_credits` with what is short.
pub fn short(required: i64, balance: i64, shortfall: i64) -> Error {
    let message = format!("not enough credits: {shortfall} more needed (balance {balance})");
    Error::new(StatusCode::PAYMENT_REQUIRED, "insufficient_credits", message)
        .with_fields(json!({"shortfallCredits": shortfall, "availableCredits": balance, "requiredCredits": required}))
}

/// The answer to a registration or update.
async fn finish(request: &Request, outcome: Outcome, agent: Agent, plan: &Plan) -> Answer {
    let uaid = agent.uaid.to_string();
    let (attempt_id, agent, fresh) = match outcome {
        Outcome::Done { seq, attempt } => {
            changed(request, seq, &uaid, Some(agent.clone())).await;
            if !plan.additional.is_empty() {
                request.app.registrar.wake.notify_one();
            }
            (Some(attempt), agent, true)
        }
        Outcome::Same { registration, attempt } => (attempt, registration.agent, false),
        Outcome::Short { balance, shortfall } => return Err(short(plan.total(), balance, shortfall)),
        other => return Err(unexpected(other)),
    };
    let attempt = match &attempt_id {
        Some(id) if fresh => Some(settled(request, id).await?),
        Some(id) => {
            let id = id.clone();
            request.app.store.read(move |conn| stored::attempt(conn, &id)).await?
        }
        None => None,
    };
    let mode = plan.mode;
    let mut body = json!({
        "uaid": uaid,
        "agentId": agent.id,
        "agent": summary(&agent),
        "attemptId": attempt_id,
    });
    let Some(attempt) = attempt else {
        body["success"] = json!(true);
        body["status"] = json!("duplicate");
        body["message"] = json!("already registered by this account");
        return Ok(reply::json(&body));
    };
    let charged: i64 = attempt.deliveries.iter().filter(|d| d.status != Delivery::Failed).map(|d| d.credits).sum();
    body["credits"] =
        json!({"base": attempt.credits_base, "additional": charged, "total": attempt.credits_base + charged});
    body["additionalRegistries"] =
        json!(attempt.deliveries.iter().map(|d| result(d, attempt.mode)).collect::<Vec<_>>());
    let done = match mode {
        Mode::Register => "created",
        Mode::Update => "updated",
    };
    let (status, code) = match (fresh, attempt.status()) {
        (false, _) if mode == Mode::Register => ("duplicate", StatusCode::OK),
        (false, _) => ("updated", StatusCode::OK),
        (true, "pending") => ("pending", StatusCode::ACCEPTED),
        (true, "partial") => ("partial", StatusCode::MULTI_STATUS),
        (true, _) => (done, StatusCode::OK),
    };
    body["status"] = json!(status);
    body["success"] = json!(status != "partial");
    body["message"] = json!(match status {
        "duplicate" => "already registered by this account; PUT /register/{uaid} changes it",
        "pending" => "registered; additional registries are being processed: poll /register/progress/{attemptId}",
        "partial" => "registered; some additional registries failed (their credits were refunded)",
        "updated" if !fresh => "no change: the agent already has this profile",
        _ => "done",
    });
    if status == "partial" {
        let errors: Vec<Value> = attempt
            .deliveries
            .iter()
            .filter(|d| d.status == Delivery::Failed)
            .map(
                |d| json!({"registry": d.registry, "registryKey": d.key, "error": d.error.clone().unwrap_or_default()}),
            )
            .collect();
        body["errors"] = json!(errors);
    }
    Ok(reply::json_with(code, &body))
}

/// The attempt once its deliveries settle, or as it stands when the wait
/// (`--registration-wait-ms`) runs out.
async fn settled(request: &Request, id: &str) -> Result<Attempt, Error> {
    let registrar = &request.app.registrar;
    let deadline = Instant::now() + registrar.wait;
    loop {
        let notified = registrar.settled.notified();
        let key = id.to_string();
        let attempt = request.app.store.read(move |conn| stored::attempt(conn, &key)).await?;
        let attempt = attempt.ok_or_else(|| Error::from(store::Failure::Corrupt(format!("attempt {id} vanished"))))?;
        let left = deadline.saturating_duration_since(Instant::now());
        if attempt.status() != "pending" || left.is_zero() {
            return Ok(attempt);
        }
        let _ = tokio::time::timeout(left.min(Duration::from_millis(250)), notified).await;
    }
}

/// An additional registry's result in a registration answer.
fn result(d: &stored::Delivered, mode: Mode) -> Value {
    let status = match (d.status, mode) {
        (Delivery::Completed, Mode::Register) => "created",
        (Delivery::Completed, Mode::Update) => "updated",
        (Delivery::Failed, _) => "error",
        (Delivery::Pending | Delivery::InProgress, _) => "pending",
    };
    let mut out = json!({"registry": d.registry, "registryKey": d.key, "status": status, "credits": d.credits});
    for (name, value) in [("agentId", &d.agent_id), ("agentUri", &d.agent_uri), ("error", &d.error)] {
        if let Some(value) = value.as_ref().filter(|_| !(name == "error" && d.status != Delivery::Failed)) {
            out[name] = json!(value);
        }
    }
    out
}

/// The progress record of an attempt.
fn progress_record(a: &Attempt) -> Value {
    let entries: serde_json::Map<String, Value> = a
        .deliveries
        .iter()
        .map(|d| {
            let mut entry = json!({
                "registryId": d.registry,
                "registryKey": d.key,
                "status": d.status.as_str(),
                "credits": d.credits,
                "lastUpdated": store::rfc3339(d.updated_at),
            });
            for (name, value) in [("error", &d.error), ("agentId", &d.agent_id), ("agentUri", &d.agent_uri)] {
                if let Some(value) = value {
                    entry[name] = json!(value);
                }
            }
            (d.key.clone(), entry)
        })
        .collect();
    let mut record = json!({
        "attemptId": a.id,
        "mode": a.mode.as_str(),
        "status": a.status(),
        "uaid": a.uaid,
        "agentId": a.agent_id,
        "registryNamespace": a.registry,
        "accountId": a.account,
        "startedAt": store::rfc3339(a.started_at),
        "primary": {"status": "completed", "finishedAt": store::rfc3339(a.started_at)},
        "additionalRegistries": entries,
    });
    if let Some(done) = a.completed_at {
        record["completedAt"] = json!(store::rfc3339(done));
    }
    let errors: Vec<String> = a
        .deliveries
        .iter()
        .filter_map(|d| d.error.as_ref().filter(|_| d.status == Delivery::Failed).map(|e| format!("{}: {e}", d.key)))
        .collect();
    if !errors.is_empty() {
        record["errors"] = json!(errors);
    }
    record
}

/// The agent as registration answers carry it.
fn summary(agent: &Agent) -> Value {
    let mut out = json!({
        "id": agent.id,
        "name": agent.name,
        "type": agent.kind.as_str(),
        "capabilities": agent.capability_labels,
        "registry": agent.registry,
        "protocol": agent.protocols.first(),
        "profile": agent.profile,
        "metadata": agent.metadata,
    });
    if let Some(endpoint) = agent.endpoints.values().next() {
        out["endpoint"] = json!(endpoint);
    }
    if let Some(native) = agent.uaid.param("nativeId") {
        out["nativeId"] = json!(native);
    }
    out
}

/// The agent's detail and resolve answers when it changed since the build.
pub fn live_detail(broker: &super::agents::Agents, agent: &Agent) -> Result<Value, Error> {
    let feedback = broker.feedback(agent.uaid.as_str()).map_err(|e| Error::damaged_record(&e))?;
    Ok(render::detail(agent, &feedback.iter().collect::<Vec<_>>()))
}

#[cfg(test)]
mod tests {
    /// Each case: an endpoint, and whether the broker would call it over
    /// the web (and so judges it at registration).
    #[test]
    fn endpoints_called_over_the_web_are_known_in_any_spelling() {
        for (url, web) in [
            ("http://agent.example/a2a", true),
            ("https://agent.example/a2a", true),
            ("HTTP://127.0.0.1:4000/", true),
            ("HtTpS://127.0.0.1/", true),
            ("  http://127.0.0.1/", true),
            ("ht\ttp://127.0.0.1/", true),
            ("0.0.1234", false),
            ("hcs-10:0.0.1234", false),
            ("wss://agent.example/", false),
            ("mailto:agent@example.com", false),
            ("", false),
        ] {
            assert_eq!(super::web_scheme(url), web, "{url:?}");
        }
    }
}
