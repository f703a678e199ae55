//! The route table: every route the api answers, in one place, as data.
//!
//! An [`Endpoint`] is a path pattern (`/api/v1/agents/{uaid}`) with what is
//! true of every method on it: its rate class, its CORS preflight, and the
//! form its errors take. Each [`Operation`] on it is a method with its
//! handler, body bound, authentication requirement and cache policy. The
//! pipeline reads nothing else: 404, 405 with `Allow`, preflights, quotas and
//! body bounds all come from here, so an OpenAPI document or `docs/broker.md`'s
//! route list can be generated from [`table`] and cannot disagree with it.
//!
//! Patterns are matched against the path's normal form ([`crate::path`]);
//! a parameter is one segment, percent-decoded once, here ([`Params`]).

use std::future::Future;
use std::pin::Pin;

use broker_site::render;
use pages::routes as pages;
use shared::http::Cache;
use warp::http::{HeaderValue, Method};

pub use crate::auth::Auth;
use crate::broker::plugins;
use crate::broker::secrets;
use crate::broker::skills;
use crate::broker::verification;
use crate::reply::Answer;
use crate::request::{Params, Request};
use crate::{broker, hcs20, service};

/// What every handler is: a request in, an answer out, asynchronously.
pub type Handler = fn(Request) -> Pin<Box<dyn Future<Output = Answer> + Send>>;

/// An `async fn(Request) -> Answer` as a [`Handler`].
macro_rules! handler {
    ($f:path) => {{
        fn boxed(request: Request) -> Pin<Box<dyn Future<Output = Answer> + Send>> {
            Box::pin($f(request))
        }
        boxed as Handler
    }};
}

/// Which per-client quota a request spends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rate {
    Unlimited,
    /// The guard's JSON files (spec section 7).
    Guard,
    /// The MCP endpoint.
    Mcp,
    /// Ledger sign-in (challenge and verify).
    SignIn,
    /// Ownership verification (each may query DNS, call an agent or check
    /// a signature).
    Verification,
    /// Relays to agents: chat messages and routing by UAID (each calls an
    /// agent).
    Relay,
}

/// How much of a request body is read, by which configured bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyLimit {
    /// The body is not read.
    None,
    /// Broker searches (`--search-max-body`).
    Search,
    /// The broker's live calls (`--live-max-body`).
    Live,
    /// MCP requests (`--mcp-max-body`).
    Mcp,
    /// Content to inscribe, in base64 (`--inscription-max-bytes` and a
    /// third more, with room for the rest of the body).
    Content,
    /// A skill package's files, in base64 (`--skills-max-total-bytes` and
    /// a third more, with room for the rest of the body).
    Package,
    /// A Programmable Secrets publication: a ciphertext in base64 or hex
    /// (`--secrets-max-ciphertext-bytes`, twice, and room for the rest).
    Secrets,
}

/// Which request headers a preflight allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cors {
    /// Whatever the page asks for (the data is public and no route uses
    /// cookies).
    Public,
    /// Exactly these.
    Headers(&'static str),
}

/// The form of an endpoint's errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// `{"error", "code"[, "parameter"]}`.
    Json,
    /// A JSON-RPC 2.0 error object (the MCP endpoint).
    JsonRpc,
}

pub struct Operation {
    pub method: Method,
    /// A stable name (an OpenAPI operation id).
    pub name: &'static str,
    pub handler: Handler,
    pub body: BodyLimit,
    pub auth: Auth,
    /// The `Cache-Control` of its successful answers: a published file
    /// carries the same policy in the manifest; a live answer gets it from
    /// here.
    pub cache: Cache,
}

pub struct Endpoint {
    pub pattern: &'static str,
    pub rate: Rate,
    pub cors: Cors,
    pub errors: Dialect,
    pub operations: Vec<Operation>,
    /// The `Allow` header: the operations' methods, `HEAD` with `GET`, and
    /// `OPTIONS`.
    pub allow: HeaderValue,
}

impl Endpoint {
    fn new(pattern: &'static str) -> Endpoint {
        Endpoint {
            pattern,
            rate: Rate::Unlimited,
            cors: Cors::Public,
            errors: Dialect::Json,
            operations: Vec::new(),
            allow: HeaderValue::from_static("OPTIONS"),
        }
    }

    fn get(self, name: &'static str, handler: Handler, cache: Cache) -> Endpoint {
        self.operation(Method::GET, name, handler, BodyLimit::None, cache)
    }

    fn post(self, name: &'static str, handler: Handler, body: BodyLimit, cache: Cache) -> Endpoint {
        self.operation(Method::POST, name, handler, body, cache)
    }

    fn put(self, name: &'static str, handler: Handler, body: BodyLimit, cache: Cache) -> Endpoint {
        self.operation(Method::PUT, name, handler, body, cache)
    }

    fn patch(self, name: &'static str, handler: Handler, body: BodyLimit, cache: Cache) -> Endpoint {
        self.operation(Method::PATCH, name, handler, body, cache)
    }

    fn delete(self, name: &'static str, handler: Handler, cache: Cache) -> Endpoint {
        self.operation(Method::DELETE, name, handler, BodyLimit::None, cache)
    }

    fn operation(
        mut self,
        method: Method,
        name: &'static str,
        handler: Handler,
        body: BodyLimit,
        cache: Cache,
    ) -> Self {
        self.operations.push(Operation { method, name, handler, body, auth: Auth::Public, cache });
        let mut methods = Vec::new();
        for op in &self.operations {
            methods.push(op.method.as_str());
            if op.method == Method::GET {
                methods.push("HEAD");
            }
        }
        methods.push("OPTIONS");
        self.allow = HeaderValue::from_str(&methods.join(", ")).expect("method names are header-safe");
        self
    }

    /// The last operation added needs `auth`.
    fn auth(mut self, auth: Auth) -> Endpoint {
        self.operations.last_mut().expect("an operation to restrict").auth = auth;
        self
    }

    fn rate(mut self, rate: Rate) -> Endpoint {
        self.rate = rate;
        self
    }

    fn cors(mut self, cors: Cors) -> Endpoint {
        self.cors = cors;
        self
    }

    fn errors(mut self, errors: Dialect) -> Endpoint {
        self.errors = errors;
        self
    }

    /// The operation answering `method`; `HEAD` is answered by `GET`.
    pub fn operation_for(&self, method: &Method) -> Option<&Operation> {
        let method = if method == Method::HEAD { &Method::GET } else { method };
        self.operations.iter().find(|op| op.method == *method)
    }
}

/// A published file with no parameters: the same handler everywhere.
fn file(pattern: &'static str, name: &'static str, cache: Cache) -> Endpoint {
    Endpoint::new(pattern).get(name, handler!(service::file), cache)
}

/// A page for people: a published HTML file, however its path is spelled.
fn page(pattern: &'static str, name: &'static str, cache: Cache) -> Endpoint {
    Endpoint::new(pattern).get(name, handler!(service::page), cache)
}

/// Every route the api answers.
pub fn table() -> Vec<Endpoint> {
    let mcp_headers = "Content-Type, MCP-Protocol-Version, Mcp-Method, Mcp-Name";
    let mut endpoints = vec![
        // The service itself.
        Endpoint::new("/health").get("health", handler!(service::health), Cache::NoStore),
        Endpoint::new("/health/live").get("liveness", handler!(service::live), Cache::NoStore),
        Endpoint::new("/api/v1/health").get("brokerHealth", handler!(service::health), Cache::NoStore),
        Endpoint::new(shared::http::OPENAPI_ROUTE).get("openapi", handler!(service::openapi), Cache::Catalog),
        // Section C: HCS-20 analytics. Each is a file for the parameter
        // sets the generator pre-renders and computed for the others.
        Endpoint::new("/hcs20").get("hcs20Ticks", handler!(hcs20::ticks), Cache::TokenLists),
        Endpoint::new("/hcs20/stats").get("hcs20Stats", handler!(hcs20::stats), Cache::EcosystemStats),
        Endpoint::new("/hcs20/ecosystem-stats").get(
            "hcs20EcosystemStats",
            handler!(hcs20::ecosystem_stats),
            Cache::EcosystemStats,
        ),
        Endpoint::new("/hcs20/holders").get("hcs20Holders", handler!(hcs20::holders), Cache::Balances),
        Endpoint::new("/hcs20/transactions").get(
            "hcs20Transactions",
            handler!(hcs20::transactions),
            Cache::Transactions,
        ),
        Endpoint::new("/hcs20/account/{accountId}").get("hcs20Account", handler!(hcs20::account), Cache::Balances),
        // Section B: the guard's files and the MCP endpoint.
        file(guard_data::FACTS, "guardFacts", Cache::Catalog).rate(Rate::Guard),
        file(guard_data::CAMPAIGNS, "guardCampaigns", Cache::Catalog).rate(Rate::Guard),
        file(guard_data::COVERAGE, "guardCoverage", Cache::Catalog).rate(Rate::Guard),
        file(guard_data::POLICIES, "guardPolicies", Cache::Catalog).rate(Rate::Guard),
        file(guard_data::BENCHMARK, "guardBenchmark", Cache::Catalog).rate(Rate::Guard),
        // The analysts' Parquet exports.
        file("/exports/{file}", "export", Cache::Catalog),
        // Pages for people: published HTML files.
        page(pages::LANDING, "landingPage", Cache::EcosystemStats),
        page(pages::TOKENS, "tokensPage", Cache::TokenLists),
        page("/tokens/{topic}/{tick}", "tokenPage", Cache::Balances),
        page("/tokens/{topic}/{tick}/holders/{page}", "tokenHoldersPage", Cache::Balances),
        page("/accounts/{accountId}", "accountPage", Cache::Balances),
        page(pages::GUARD, "guardPage", Cache::Catalog).rate(Rate::Guard),
        page(pages::CAMPAIGNS, "guardCampaignsPage", Cache::Catalog).rate(Rate::Guard),
        page(pages::COVERAGE, "guardCoveragePage", Cache::Catalog).rate(Rate::Guard),
        page(pages::BENCHMARK, "guardBenchmarkPage", Cache::Catalog).rate(Rate::Guard),
        Endpoint::new(pages::AGENTS).get("agentsPage", handler!(broker::directory::directory_page), Cache::Agent),
        Endpoint::new("/agents/page/{page}").get(
            "agentsNextPage",
            handler!(broker::directory::directory_page),
            Cache::Agent,
        ),
        Endpoint::new(pages::AGENT_SEARCH).get(
            "agentSearchPage",
            handler!(broker::directory::search_page),
            Cache::NoStore,
        ),
        Endpoint::new("/agents/{uaid}").get("agentPage", handler!(broker::agent_page), Cache::Agent),
        Endpoint::new(pages::SKILLS).get("skillsPage", handler!(skills::pages::list), Cache::NoStore),
        Endpoint::new("/skills/{name}").get("skillPage", handler!(skills::pages::page), Cache::NoStore),
        Endpoint::new(pages::SECRETS).get("secretPoliciesPage", handler!(secrets::pages::list), Cache::Catalog),
        Endpoint::new("/secrets/page/{page}").get(
            "secretPoliciesNextPage",
            handler!(secrets::pages::list),
            Cache::Catalog,
        ),
        Endpoint::new("/secrets/{chainId}/{policyId}").get(
            "secretPolicyPage",
            handler!(secrets::pages::policy),
            Cache::Catalog,
        ),
        Endpoint::new(crate::guard::mcp::PATH)
            .post("guardMcp", handler!(crate::guard::mcp_endpoint), BodyLimit::Mcp, Cache::NoStore)
            .rate(Rate::Mcp)
            .cors(Cors::Headers(mcp_headers))
            .errors(Dialect::JsonRpc),
        // Section A: the broker's read side.
        Endpoint::new("/api/v1/search").get("search", handler!(broker::search), Cache::Search).post(
            "vectorSearch",
            handler!(broker::vectors::search),
            BodyLimit::Search,
            Cache::NoStore,
        ),
        Endpoint::new("/api/v1/search/capabilities").post(
            "searchCapabilities",
            handler!(broker::capability_search),
            BodyLimit::Search,
            Cache::Search,
        ),
        Endpoint::new("/api/v1/search/status").get("searchStatus", handler!(broker::vectors::status), Cache::NoStore),
        Endpoint::new(render::FACETS).get("facets", handler!(broker::facets), Cache::Catalog),
        Endpoint::new("/api/v1/registries/{registry}/search").get(
            "registrySearch",
            handler!(broker::registry_search),
            Cache::Search,
        ),
        Endpoint::new("/api/v1/agents/badge").get("badge", handler!(broker::badge::badge), Cache::Badge),
        Endpoint::new("/api/v1/agents/{uaid}").get("agent", handler!(broker::agent), Cache::Agent),
        Endpoint::new("/api/v1/agents/{uaid}/similar").get("similarAgents", handler!(broker::similar), Cache::Agent),
        Endpoint::new("/api/v1/agents/{uaid}/feedback")
            .get("agentFeedback", handler!(broker::agent_feedback), Cache::Agent)
            .post("submitAgentFeedback", handler!(broker::feedback::submit), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Optional),
        Endpoint::new("/api/v1/agents/{uaid}/feedback/eligibility")
            .post("agentFeedbackEligibility", handler!(broker::feedback::eligibility), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Optional),
        Endpoint::new("/api/v1/resolve/{uaid}").get("resolveUaid", handler!(broker::resolve), Cache::Agent),
        Endpoint::new("/api/v1/uaids/validate/{uaid}").get(
            "validateUaid",
            handler!(broker::validate_uaid),
            Cache::Pure,
        ),
        Endpoint::new(render::REGISTRY_ADAPTERS)
            .get("registryAdapters", handler!(broker::adapter_registry::adapters), Cache::Catalog)
            .post(
                "submitAdapterRegistryAdapter",
                handler!(broker::adapter_registry::submit),
                BodyLimit::Live,
                Cache::NoStore,
            )
            .auth(Auth::Key),
        Endpoint::new(render::CATEGORIES)
            .get("adapterCategories", handler!(broker::adapter_registry::categories), Cache::Catalog)
            .post(
                "createAdapterRegistryCategory",
                handler!(broker::adapter_registry::create_category),
                BodyLimit::Live,
                Cache::NoStore,
            )
            .auth(Auth::Operator),
        Endpoint::new("/api/v1/adapters/registry/submissions/{submissionId}")
            .get("adapterRegistrySubmission", handler!(broker::adapter_registry::submission), Cache::NoStore)
            .auth(Auth::Key),
        // Section A: the broker's live side.
        Endpoint::new("/api/v1/auth/ledger/challenge")
            .post("createLedgerChallenge", handler!(crate::auth::signin::challenge), BodyLimit::Live, Cache::NoStore)
            .rate(Rate::SignIn),
        Endpoint::new("/api/v1/auth/ledger/verify")
            .post("verifyLedgerChallenge", handler!(crate::auth::signin::verify), BodyLimit::Live, Cache::NoStore)
            .rate(Rate::SignIn),
        Endpoint::new("/api/v1/register/quote")
            .post("getRegistrationQuote", handler!(broker::register::quote), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Optional),
        Endpoint::new("/api/v1/register")
            .post("registerAgent", handler!(broker::register::register), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Key),
        Endpoint::new("/api/v1/register/{uaid}")
            .put("updateAgent", handler!(broker::register::update), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Key)
            .delete("deleteAgent", handler!(broker::register::delete), Cache::NoStore)
            .auth(Auth::Key),
        Endpoint::new("/api/v1/register/status/{uaid}").get(
            "registrationStatus",
            handler!(broker::register::status),
            Cache::NoStore,
        ),
        Endpoint::new("/api/v1/register/progress/{attemptId}")
            .get("registrationProgress", handler!(broker::register::progress), Cache::NoStore)
            .auth(Auth::Key),
        Endpoint::new("/api/v1/register/{uaid}/messaging-network").post(
            "messagingNetwork",
            handler!(broker::register::messaging_network),
            BodyLimit::Live,
            Cache::NoStore,
        ),
        Endpoint::new("/api/v1/register/{uaid}/openconvai").post(
            "openConvai",
            handler!(broker::register::messaging_network),
            BodyLimit::Live,
            Cache::NoStore,
        ),
        Endpoint::new("/api/v1/credits/balance")
            .get("creditBalance", handler!(broker::credits::balance), Cache::NoStore)
            .auth(Auth::Optional),
        Endpoint::new("/api/v1/credits/transactions")
            .get("creditTransactions", handler!(broker::credits::transactions), Cache::NoStore)
            .auth(Auth::Key),
        Endpoint::new("/api/v1/credits/purchase").post(
            "purchaseCredits",
            handler!(broker::credits::purchase),
            BodyLimit::Live,
            Cache::NoStore,
        ),
        Endpoint::new("/api/v1/credits/payments/native/intent")
            .post("nativePaymentIntent", handler!(broker::intents::native), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Key),
        Endpoint::new("/api/v1/chat/session")
            .post("createChatSession", handler!(crate::chat::create), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Optional),
        Endpoint::new("/api/v1/chat/message")
            .post("sendChatMessage", handler!(crate::chat::message), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Optional)
            .rate(Rate::Relay),
        Endpoint::new("/api/v1/chat/session/{sessionId}")
            .delete("endChatSession", handler!(crate::chat::end), Cache::NoStore)
            .auth(Auth::Optional)
            .patch("updateChatVisibility", handler!(crate::chat::members::visibility), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Optional),
        Endpoint::new("/api/v1/chat/session/{sessionId}/meta")
            .get("chatSessionMeta", handler!(crate::chat::members::meta), Cache::NoStore)
            .auth(Auth::Optional),
        Endpoint::new("/api/v1/chat/session/{sessionId}/invite")
            .post("inviteToChat", handler!(crate::chat::members::invite), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Optional),
        Endpoint::new("/api/v1/route/{uaid}")
            .post("routeToAgent", handler!(crate::chat::routing::route), BodyLimit::Live, Cache::NoStore)
            .rate(Rate::Relay),
        Endpoint::new("/api/v1/uaids/connections/{uaid}/status").get(
            "uaidConnectionStatus",
            handler!(crate::chat::routing::status),
            Cache::NoStore,
        ),
        Endpoint::new("/api/v1/uaids/connections/{uaid}").delete(
            "closeUaidConnection",
            handler!(crate::chat::routing::close),
            Cache::NoStore,
        ),
        Endpoint::new("/api/v1/chat/session/{sessionId}/encryption")
            .get("chatEncryptionStatus", handler!(crate::chat::encryption::status), Cache::NoStore)
            .auth(Auth::Optional),
        Endpoint::new("/api/v1/chat/session/{sessionId}/encryption-handshake")
            .post(
                "chatEncryptionHandshake",
                handler!(crate::chat::encryption::handshake),
                BodyLimit::Live,
                Cache::NoStore,
            )
            .auth(Auth::Optional),
        Endpoint::new("/api/v1/chat/session/{sessionId}/compact")
            .post("compactChatHistory", handler!(crate::chat::compact::compact), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Optional),
        Endpoint::new("/api/v1/chat/public").get(
            "publicChatSessions",
            handler!(crate::chat::members::public),
            Cache::NoStore,
        ),
        Endpoint::new("/api/v1/chat/session/{sessionId}/history")
            .get("chatHistory", handler!(crate::chat::history), Cache::NoStore)
            .auth(Auth::Optional),
        Endpoint::new("/api/v1/credits/redeem-points/quote")
            .get("redeemPointsQuote", handler!(broker::credits::redeem_quote), Cache::NoStore)
            .auth(Auth::Key),
        Endpoint::new("/api/v1/credits/redeem-points")
            .post("redeemPoints", handler!(broker::credits::redeem), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Key),
        Endpoint::new("/api/v1/credits/payments/webhook").post(
            "cardPaymentWebhook",
            handler!(broker::intents::webhook),
            BodyLimit::Live,
            Cache::NoStore,
        ),
        Endpoint::new("/api/v1/credits/providers").get(
            "creditProviders",
            handler!(broker::intents::providers),
            Cache::NoStore,
        ),
        Endpoint::new("/api/v1/encryption/keys")
            .post("registerEncryptionKey", handler!(broker::encryption::register), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Key),
        Endpoint::new("/api/v1/credits/payments/hbar/intent")
            .post("hbarPaymentIntent", handler!(broker::intents::native), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Key),
        // Verification: ownership proven by DNS, ledger signature or endpoint.
        Endpoint::new("/api/v1/verification/challenge")
            .post(
                "createVerificationChallenge",
                handler!(verification::create_challenge),
                BodyLimit::Live,
                Cache::NoStore,
            )
            .auth(Auth::Key)
            .rate(Rate::Verification),
        Endpoint::new("/api/v1/verification/challenge/{challengeId}")
            .get("verificationChallenge", handler!(verification::challenge), Cache::NoStore)
            .auth(Auth::Key)
            .rate(Rate::Verification),
        Endpoint::new("/api/v1/verification/verify")
            .post("verifyVerificationChallenge", handler!(verification::verify), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Key)
            .rate(Rate::Verification),
        Endpoint::new("/api/v1/verification/status/{uaid}").get(
            "verificationStatus",
            handler!(verification::status),
            Cache::NoStore,
        ),
        Endpoint::new("/api/v1/verification/ownership/{uaid}").get(
            "verificationOwnership",
            handler!(verification::ownership),
            Cache::NoStore,
        ),
        Endpoint::new("/api/v1/verification/verify-sender")
            .post("verifySenderOwnership", handler!(verification::verify_sender), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Key)
            .rate(Rate::Verification),
        Endpoint::new("/api/v1/verification/dns/status/{uaid}").get(
            "dnsVerificationStatus",
            handler!(verification::dns_status),
            Cache::NoStore,
        ),
        Endpoint::new("/api/v1/verification/dns/verify")
            .post("dnsVerify", handler!(verification::dns_verify), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Key)
            .rate(Rate::Verification),
        // Content inscription: HCS-1 files written by the broker's account.
        Endpoint::new("/api/v1/inscribe/content/config").get(
            "contentInscriptionConfig",
            handler!(broker::inscription::config),
            Cache::NoStore,
        ),
        Endpoint::new("/api/v1/inscribe/content/quote")
            .post("quoteContentInscription", handler!(broker::inscription::quote), BodyLimit::Content, Cache::NoStore)
            .auth(Auth::Key),
        Endpoint::new("/api/v1/inscribe/content")
            .post("createContentInscription", handler!(broker::inscription::create), BodyLimit::Content, Cache::NoStore)
            .auth(Auth::Key)
            .get("listContentInscriptions", handler!(broker::inscription::list), Cache::NoStore)
            .auth(Auth::Key),
        Endpoint::new("/api/v1/inscribe/content/{jobId}")
            .get("contentInscriptionJob", handler!(broker::inscription::job), Cache::NoStore)
            .auth(Auth::Key),
        // The skills registry: packages published as HCS-26 by the broker's account.
        Endpoint::new("/api/v1/skills/config").get("skillsConfig", handler!(skills::config), Cache::NoStore),
        Endpoint::new("/api/v1/skills").get("listSkills", handler!(skills::list), Cache::NoStore),
        Endpoint::new("/api/v1/skills/versions").get("listSkillVersions", handler!(skills::versions), Cache::NoStore),
        Endpoint::new("/api/v1/skills/mine")
            .get("listMySkills", handler!(skills::mine), Cache::NoStore)
            .auth(Auth::Key),
        Endpoint::new("/api/v1/skills/my-list")
            .get("getMySkillsList", handler!(skills::my_list), Cache::NoStore)
            .auth(Auth::Key),
        Endpoint::new("/api/v1/skills/quote")
            .post("quoteSkillPublish", handler!(skills::quote), BodyLimit::Package, Cache::NoStore)
            .auth(Auth::Key),
        Endpoint::new("/api/v1/skills/publish")
            .post("publishSkill", handler!(skills::publish), BodyLimit::Package, Cache::NoStore)
            .auth(Auth::Key),
        Endpoint::new("/api/v1/skills/jobs/{jobId}")
            .get("getSkillPublishJob", handler!(skills::job), Cache::NoStore)
            .auth(Auth::Key),
        Endpoint::new("/api/v1/skills/ownership")
            .get("getSkillOwnership", handler!(skills::ownership), Cache::NoStore)
            .auth(Auth::Optional),
        Endpoint::new("/api/v1/skills/vote")
            .get("getSkillVoteStatus", handler!(skills::vote_status), Cache::NoStore)
            .auth(Auth::Optional)
            .post("setSkillVote", handler!(skills::vote), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Key),
        Endpoint::new("/api/v1/skills/verification/request")
            .post("requestSkillVerification", handler!(skills::request_verification), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Key),
        Endpoint::new("/api/v1/skills/verification/status").get(
            "getSkillVerificationStatus",
            handler!(skills::verification_status),
            Cache::NoStore,
        ),
        Endpoint::new("/api/v1/skills/verification/{requestId}/decision")
            .post("decideSkillVerification", handler!(skills::decide), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Operator),
        // Programmable Secrets: policies published and indexed, keys released
        // to whoever holds access. Only `provider/prepare` and `provider/confirm`
        // are evidenced on the hosted broker; the rest mirror the protocol's
        // public server under the same prefix.
        Endpoint::new("/api/v1/programmable-secrets/health").get(
            "programmableSecretsHealth",
            handler!(secrets::health),
            Cache::NoStore,
        ),
        Endpoint::new("/api/v1/programmable-secrets/catalog").get(
            "getProgrammableSecretsCatalog",
            handler!(secrets::catalog),
            Cache::Catalog,
        ),
        Endpoint::new("/api/v1/programmable-secrets/policies").get(
            "listProgrammableSecretPolicies",
            handler!(secrets::list),
            Cache::NoStore,
        ),
        Endpoint::new("/api/v1/programmable-secrets/policies/{id}").get(
            "getProgrammableSecretPolicy",
            handler!(secrets::policy),
            Cache::NoStore,
        ),
        Endpoint::new("/api/v1/programmable-secrets/policies/{id}/ciphertext").get(
            "getProgrammableSecretCiphertext",
            handler!(secrets::ciphertext),
            Cache::NoStore,
        ),
        Endpoint::new("/api/v1/programmable-secrets/provider/prepare")
            .post(
                "prepareProgrammableSecretPolicy",
                handler!(secrets::publication::prepare),
                BodyLimit::Secrets,
                Cache::NoStore,
            )
            .auth(Auth::Key),
        Endpoint::new("/api/v1/programmable-secrets/provider/confirm")
            .post(
                "confirmProgrammableSecretPolicy",
                handler!(secrets::publication::confirm),
                BodyLimit::Live,
                Cache::NoStore,
            )
            .auth(Auth::Key),
        Endpoint::new("/api/v1/programmable-secrets/provider/import")
            .post(
                "importProgrammableSecretPolicy",
                handler!(secrets::publication::import),
                BodyLimit::Secrets,
                Cache::NoStore,
            )
            .auth(Auth::Key),
        Endpoint::new("/api/v1/programmable-secrets/provider-identity").get(
            "getProgrammableSecretProviderIdentity",
            handler!(secrets::provider_identity),
            Cache::NoStore,
        ),
        Endpoint::new("/api/v1/programmable-secrets/nonces")
            .post("issueProgrammableSecretNonce", handler!(secrets::release::nonce), BodyLimit::Live, Cache::NoStore)
            .rate(Rate::SignIn),
        Endpoint::new("/api/v1/programmable-secrets/keys/request")
            .post(
                "requestProgrammableSecretKey",
                handler!(secrets::release::request_key),
                BodyLimit::Live,
                Cache::NoStore,
            )
            .rate(Rate::SignIn),
        Endpoint::new("/api/v1/programmable-secrets/keys/{requestId}").get(
            "getProgrammableSecretKeyRequest",
            handler!(secrets::release::key_request),
            Cache::NoStore,
        ),
        Endpoint::new("/api/v1/credits/payments/intent")
            .post("cardPaymentIntent", handler!(broker::intents::card), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Key),
        // Plugins: imported from repositories, scanned, answered with their trust.
        Endpoint::new("/api/v1/plugins/import")
            .post("importPlugins", handler!(plugins::import::import), BodyLimit::Live, Cache::NoStore)
            .auth(Auth::Key),
        Endpoint::new("/api/v1/plugins/import/{jobId}")
            .get("getPluginImport", handler!(plugins::import::job), Cache::NoStore)
            .auth(Auth::Key),
        Endpoint::new("/api/v1/plugins/catalog").get("getPluginCatalog", handler!(plugins::catalog), Cache::NoStore),
        Endpoint::new(::plugins::catalog::PLUGINS_JSON).get(
            "getPluginsJson",
            handler!(plugins::export),
            Cache::Catalog,
        ),
        Endpoint::new(::plugins::catalog::MARKETPLACE).get(
            "getPluginMarketplace",
            handler!(plugins::export),
            Cache::Catalog,
        ),
        Endpoint::new(pages::PLUGINS).get("pluginsPage", handler!(plugins::list_page), Cache::Catalog),
        Endpoint::new("/registry/plugins/{owner}/{name}").get(
            "pluginPage",
            handler!(plugins::plugin_page),
            Cache::Catalog,
        ),
        Endpoint::new("/registry/plugins/{slug}").get("pluginPageBySlug", handler!(plugins::slug_page), Cache::NoStore),
        Endpoint::new("/api/v1/plugins/{slug}").get("getPlugin", handler!(plugins::plugin), Cache::NoStore),
        Endpoint::new("/api/registry/badges/plugin").get("pluginBadge", handler!(plugins::badge), Cache::Badge),
    ];
    // The Guard trust routes, under the broker's prefix and the portal's
    // (the reference client tries the second on a 404 or 501).
    for (broker_path, portal_path, name, portal_name) in GUARD_TRUST_GETS {
        let handler = guard_trust_get(name);
        endpoints.push(Endpoint::new(broker_path).get(name, handler, Cache::NoStore).auth(Auth::Optional));
        endpoints.push(Endpoint::new(portal_path).get(portal_name, handler, Cache::NoStore).auth(Auth::Optional));
    }
    for (broker_path, portal_path, name, portal_name) in GUARD_VERDICTS {
        let handler = handler!(crate::guard::trust::verdict);
        endpoints
            .push(Endpoint::new(broker_path).post(name, handler, BodyLimit::Live, Cache::NoStore).auth(Auth::Optional));
        endpoints.push(
            Endpoint::new(portal_path).post(portal_name, handler, BodyLimit::Live, Cache::NoStore).auth(Auth::Optional),
        );
    }
    for (pattern, name) in [
        (render::STATS, "stats"),
        (render::REGISTRIES, "registries"),
        (render::ADAPTERS, "adapters"),
        (render::ADAPTER_DETAILS, "adapterDetails"),
        (render::PROVIDERS, "providers"),
        (render::POPULAR, "popularSearches"),
        (render::PROTOCOLS, "protocols"),
        (render::ADDITIONAL_REGISTRIES, "additionalRegistries"),
        (render::FEDERATION, "federatedRegistries"),
    ] {
        endpoints.push(file(pattern, name, Cache::Catalog));
    }
    endpoints
}

/// The Guard trust reads: the broker's path, the portal's, and their
/// operation ids.
const GUARD_TRUST_GETS: [(&str, &str, &str, &str); 5] = [
    (
        "/api/v1/guard/trust/by-hash/{sha256}",
        "/api/guard/trust/by-hash/{sha256}",
        "guardTrustByHash",
        "guardTrustByHashPortal",
    ),
    ("/api/v1/guard/trust/resolve", "/api/guard/trust/resolve", "guardTrustResolve", "guardTrustResolvePortal"),
    ("/api/v1/guard/feed", "/api/guard/feed", "guardFeed", "guardFeedPortal"),
    ("/api/v1/guard/advisories", "/api/guard/advisories", "guardAdvisories", "guardAdvisoriesPortal"),
    ("/api/v1/guard/revocations", "/api/guard/revocations", "guardRevocations", "guardRevocationsPortal"),
];

const GUARD_VERDICTS: [(&str, &str, &str, &str); 2] = [
    (
        "/api/v1/guard/verdict/pre-install",
        "/api/guard/verdict/pre-install",
        "guardPreInstallVerdict",
        "guardPreInstallVerdictPortal",
    ),
    (
        "/api/v1/guard/verdict/pre-execution",
        "/api/guard/verdict/pre-execution",
        "guardPreExecutionVerdict",
        "guardPreExecutionVerdictPortal",
    ),
];

/// The handler of a Guard trust read, by its operation id.
fn guard_trust_get(name: &str) -> Handler {
    use crate::guard::trust;
    match name {
        "guardTrustByHash" => handler!(trust::by_hash),
        "guardTrustResolve" => handler!(trust::resolve),
        "guardFeed" => handler!(trust::feed),
        "guardAdvisories" => handler!(trust::advisories),
        "guardRevocations" => handler!(trust::revocations),
        other => unreachable!("{other} is not a Guard trust read"),
    }
}

/// The table, indexed for matching.
pub struct Table {
    router: matchit::Router<usize>,
    endpoints: Vec<Endpoint>,
}

/// A matched request: its endpoint, its parameters, and the path as
/// matched (without the trailing `/` that was ignored).
pub struct Found<'t> {
    pub endpoint: &'t Endpoint,
    pub params: Params,
    pub path: String,
}

impl Table {
    /// Indexes `endpoints`. A pattern that is malformed or claimed twice
    /// is a programming error: it panics when the api starts (and in the
    /// tests).
    pub fn new(endpoints: Vec<Endpoint>) -> Table {
        let mut router = matchit::Router::new();
        for (i, endpoint) in endpoints.iter().enumerate() {
            if let Err(e) = router.insert(endpoint.pattern, i) {
                panic!("route {}: {e}", endpoint.pattern);
            }
        }
        Table { router, endpoints }
    }

    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// The endpoint for `path` (in normal form). A trailing `/` is
    /// ignored, so `/hcs20/` is `/hcs20`.
    pub fn find(&self, path: &str) -> Option<Found<'_>> {
        // One trailing `/` is the same resource; `//` is not `/`.
        let trimmed = path.strip_suffix('/').filter(|p| !p.is_empty() && !p.ends_with('/'));
        let (matched, path) = match self.router.at(path) {
            Ok(m) => (m, path),
            Err(_) => {
                let path = trimmed?;
                (self.router.at(path).ok()?, path)
            }
        };
        let params =
            matched.params.iter().map(|(k, v)| (k.to_string(), crate::path::decode_segment(v).into_owned())).collect();
        Some(Found { endpoint: &self.endpoints[*matched.value], params: Params::new(params), path: path.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pattern and its parameters, or no match.
    type Expected = Option<(&'static str, &'static [(&'static str, &'static str)])>;

    fn check(table: &Table, path: &str, expected: Expected) {
        let found = table.find(path);
        let got = found.as_ref().map(|f| (f.endpoint.pattern, f.params.clone()));
        let expected = expected.map(|(pattern, params)| {
            (pattern, Params::new(params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()))
        });
        assert_eq!(got, expected, "{path}");
    }

    #[test]
    fn paths_find_their_endpoint_and_decoded_parameters() {
        let table = Table::new(table());
        let cases: &[(&str, Expected)] = &[
            ("/hcs20", Some(("/hcs20", &[]))),
            ("/hcs20/", Some(("/hcs20", &[]))),
            ("/hcs20/account/0.0.1", Some(("/hcs20/account/{accountId}", &[("accountId", "0.0.1")]))),
            ("/hcs20/account/0.0.1/", Some(("/hcs20/account/{accountId}", &[("accountId", "0.0.1")]))),
            // An encoded `/` stays inside its segment and is decoded once.
            ("/hcs20/account/..%2F..%2Fetc", Some(("/hcs20/account/{accountId}", &[("accountId", "../../etc")]))),
            ("/hcs20/account/a%252F", Some(("/hcs20/account/{accountId}", &[("accountId", "a%2F")]))),
            ("/hcs20/account/a/b", None),
            ("/hcs20x", None),
            ("/", Some(("/", &[]))),
            ("//", None),
            ("/agents/page/00ff", Some(("/agents/page/{page}", &[("page", "00ff")]))),
            ("/agents/uaid:aid:x", Some(("/agents/{uaid}", &[("uaid", "uaid:aid:x")]))),
            // A static segment wins over a parameter.
            ("/api/v1/agents/badge", Some(("/api/v1/agents/badge", &[]))),
            ("/api/v1/agents/uaid:aid:x%2Fy", Some(("/api/v1/agents/{uaid}", &[("uaid", "uaid:aid:x/y")]))),
            ("/api/v1/agents/u/similar", Some(("/api/v1/agents/{uaid}/similar", &[("uaid", "u")]))),
            ("/api/v1/agents/u/other", None),
            ("/api/v1/registries/a b/search", Some(("/api/v1/registries/{registry}/search", &[("registry", "a b")]))),
            ("/guard/facts.json", Some((guard_data::FACTS, &[]))),
            ("/guard%2Ffacts.json", None),
            ("/api/guard/public-mcp", Some(("/api/guard/public-mcp", &[]))),
        ];
        for (path, expected) in cases {
            check(&table, path, *expected);
        }
    }

    #[test]
    fn allow_lists_every_method_with_head_and_options() {
        let table = Table::new(table());
        let allow = |path: &str| table.find(path).unwrap().endpoint.allow.to_str().unwrap().to_string();
        assert_eq!(allow("/hcs20/stats"), "GET, HEAD, OPTIONS");
        assert_eq!(allow("/api/v1/search"), "GET, HEAD, POST, OPTIONS");
        assert_eq!(allow("/api/v1/search/capabilities"), "POST, OPTIONS");
        assert_eq!(allow("/api/guard/public-mcp"), "POST, OPTIONS");
    }

    #[test]
    fn head_is_answered_by_get_and_nothing_else_is_invented() {
        let table = Table::new(table());
        let stats = table.find("/hcs20/stats").unwrap().endpoint;
        assert_eq!(stats.operation_for(&Method::HEAD).unwrap().method, Method::GET);
        assert!(stats.operation_for(&Method::POST).is_none());
        assert!(stats.operation_for(&Method::OPTIONS).is_none());
    }

    #[test]
    fn names_are_unique_and_guard_routes_are_limited() {
        let table = Table::new(table());
        let mut names: Vec<&str> = table.endpoints().iter().flat_map(|e| e.operations.iter().map(|o| o.name)).collect();
        let count = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count, "operation names are unique");
        for endpoint in table.endpoints() {
            // The guard's files, and the pages made of them.
            let guarded = endpoint.pattern == pages::GUARD || endpoint.pattern.starts_with("/guard/");
            assert_eq!(endpoint.rate == Rate::Guard, guarded, "{}", endpoint.pattern);
        }
    }

    #[test]
    #[should_panic(expected = "route /hcs20")]
    fn a_pattern_claimed_twice_is_refused_at_start() {
        let twice = |_: usize| Endpoint::new("/hcs20").get("x", handler!(service::health), Cache::NoStore);
        Table::new(vec![twice(0), twice(1)]);
    }
}
