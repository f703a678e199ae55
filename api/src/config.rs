//! The api's settings: every flag, with its environment variable and
//! default, parsed at the edge (the binary) and turned into an [`App`] here,
//! so that tests build the same application from the same defaults.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use hcs20::routes::Limits;
use shared::entity::EntityId;
use shared::site::Layout;

use crate::app::{App, GuardLimits, Journal};
use crate::auth::{
    self,
    ledger::{self, KeySource, Network},
};
use crate::broker::payments::{Card, Redemption, Treasury};
use crate::broker::pricing::{self, Pricing};
use crate::broker::provider::Vectors;
use crate::broker::registrar;
use crate::connection::{self, Connections};
use crate::guard::mcp;
use crate::limit;
use crate::published::Live;
use crate::store::{self, Store};

#[derive(Parser)]
#[command(name = "api", version, about = "almanac's api: the published site and the live routes")]
pub struct Config {
    /// Instead of serving, a helper command.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Address to listen on.
    #[arg(long, env = "ALMANAC_BIND", default_value = "127.0.0.1:4000")]
    pub bind: SocketAddr,
    /// Folder of the build directories and the `current` link.
    #[arg(long, env = "ALMANAC_SITE_DIR", default_value = "site")]
    pub site_dir: PathBuf,
    /// Folder of the snapshots.
    #[arg(long, env = "ALMANAC_DATA_DIR", default_value = "data")]
    pub data_dir: PathBuf,
    /// Follow the builds `generator publish` uploads to this bucket
    /// (`s3://bucket/prefix`, reached as the AWS environment variables
    /// say) instead of the site folder's `current`: the site and data
    /// folders then cache what the api has read of it.
    #[arg(long, env = "ALMANAC_SITE_BUCKET")]
    pub site_bucket: Option<String>,
    /// Longest one request to the site bucket may take, in milliseconds.
    #[arg(long, env = "ALMANAC_SITE_BUCKET_TIMEOUT_MS", default_value_t = 30_000)]
    pub site_bucket_timeout_ms: u64,
    /// How often to look for a newly published build, in milliseconds.
    #[arg(long, env = "ALMANAC_RELOAD_MS", default_value_t = 1000)]
    pub reload_ms: u64,
    /// Largest pageSize of holders and transactions (the generator's
    /// --max-page-size or less).
    #[arg(long, env = "ALMANAC_MAX_PAGE_SIZE", default_value_t = 100)]
    pub max_page_size: usize,
    /// Host names (any port) the MCP endpoint answers to, besides the
    /// loopback names; DNS-rebinding protection (comma-separated).
    #[arg(long = "mcp-host", env = "ALMANAC_MCP_HOSTS", value_delimiter = ',')]
    pub mcp_hosts: Vec<String>,
    /// Origins allowed to call the MCP endpoint from a browser, besides
    /// pages of an allowed host (comma-separated).
    #[arg(long = "mcp-origin", env = "ALMANAC_MCP_ORIGINS", value_delimiter = ',')]
    pub mcp_origins: Vec<String>,
    /// The provider that embeds search queries; with the build's agent
    /// embeddings (same model) it turns on hybrid `POST /api/v1/search`.
    #[command(flatten)]
    pub embeddings: embeddings::ProviderArgs,
    /// Time allowed for embedding one query, in milliseconds.
    #[arg(long, env = "ALMANAC_EMBEDDINGS_TIMEOUT_MS", default_value_t = 5_000)]
    pub embeddings_timeout_ms: u64,
    /// Largest body of a broker search request, in bytes (413 above).
    #[arg(long, env = "ALMANAC_SEARCH_MAX_BODY", default_value_t = 65_536)]
    pub search_max_body: usize,
    /// Largest MCP request body, in bytes (413 above).
    #[arg(long, env = "ALMANAC_MCP_MAX_BODY", default_value_t = 65_536)]
    pub mcp_max_body: usize,
    /// MCP tool results kept per build, in bytes (calls and results
    /// together); what is asked often stays.
    #[arg(long, env = "ALMANAC_MCP_CACHE_BYTES", default_value_t = 16 << 20)]
    pub mcp_cache_bytes: u64,
    /// Published files kept in memory once read, in bytes, per build (the
    /// most asked stay; the rest are read again from the page cache).
    #[arg(long, env = "ALMANAC_FILE_CACHE_BYTES", default_value_t = 256 << 20)]
    pub file_cache_bytes: u64,
    /// Longest MCP tool call (name and arguments as JSON, in bytes) whose
    /// result is kept.
    #[arg(long, env = "ALMANAC_MCP_CACHE_KEY_BYTES", default_value_t = 1024)]
    pub mcp_cache_key_bytes: usize,
    /// Guard JSON routes: requests per minute per client.
    #[arg(long, env = "ALMANAC_GUARD_RATE", default_value_t = 600)]
    pub guard_rate: u32,
    /// Guard JSON routes: burst above that pace.
    #[arg(long, env = "ALMANAC_GUARD_BURST", default_value_t = 120)]
    pub guard_burst: u32,
    /// MCP endpoint: requests per minute per client.
    #[arg(long, env = "ALMANAC_MCP_RATE", default_value_t = 600)]
    pub mcp_rate: u32,
    /// MCP endpoint: burst above that pace.
    #[arg(long, env = "ALMANAC_MCP_BURST", default_value_t = 240)]
    pub mcp_burst: u32,
    /// Clients tracked per limiter; beyond it, new clients share one bucket
    /// until the next cleanup.
    #[arg(long, env = "ALMANAC_LIMIT_CLIENTS", default_value_t = 100_000)]
    pub limit_clients: usize,
    /// Seconds between cleanups of idle clients' buckets.
    #[arg(long, env = "ALMANAC_LIMIT_CLEANUP", default_value_t = 60)]
    pub limit_cleanup: u64,
    /// Threads that run searches, one queue in arrival order before them
    /// (0: one per CPU the process may use).
    #[arg(long, env = "ALMANAC_SEARCH_THREADS", default_value_t = 0)]
    pub search_threads: usize,
    /// Threads that read requests and write answers (the async runtime's
    /// workers; 0: half the CPUs the process may use, at least one).
    #[arg(long, env = "ALMANAC_IO_THREADS", default_value_t = 0)]
    pub io_threads: usize,
    /// Searches that may wait for a thread; past it a search is answered
    /// 503 with `Retry-After` at once.
    #[arg(long, env = "ALMANAC_SEARCH_QUEUE", default_value_t = 1024)]
    pub search_queue: usize,
    /// Milliseconds live changes must pause before the overlay's agents
    /// are indexed again as one segment (searches read each segment).
    #[arg(long, env = "ALMANAC_OVERLAY_SETTLE_MS", default_value_t = 1000)]
    pub overlay_settle_ms: u64,
    /// How much lower than the rest of the api the search threads run, in
    /// `nice` steps (0 to 19; 0: the same).
    #[arg(long, env = "ALMANAC_SEARCH_NICE", default_value_t = 10, value_parser = clap::value_parser!(u8).range(0..=19))]
    pub search_nice: u8,
    /// Most connections open at once; past it a new connection takes the
    /// place of the one idle longest, or is answered 503 and closed. Keep
    /// it below the process's file-descriptor limit.
    #[arg(long, env = "ALMANAC_MAX_CONNECTIONS", default_value_t = 10_000)]
    pub max_connections: usize,
    /// Time a client has to send a whole request head, counted from the
    /// connection or from its first byte after idle, in milliseconds.
    #[arg(long, env = "ALMANAC_HEADER_TIMEOUT_MS", default_value_t = 10_000)]
    pub header_timeout_ms: u64,
    /// Time a keep-alive connection may wait between requests, in
    /// milliseconds.
    #[arg(long, env = "ALMANAC_IDLE_TIMEOUT_MS", default_value_t = 60_000)]
    pub idle_timeout_ms: u64,
    /// Time a client has to send a whole request body, in milliseconds
    /// (408 past it).
    #[arg(long, env = "ALMANAC_BODY_TIMEOUT_MS", default_value_t = 10_000)]
    pub body_timeout_ms: u64,
    /// Time a write may wait for a client that does not read, in
    /// milliseconds.
    #[arg(long, env = "ALMANAC_SEND_TIMEOUT_MS", default_value_t = 30_000)]
    pub send_timeout_ms: u64,
    /// Largest request head (request line and header fields), in bytes;
    /// 431 above (8192 at least).
    #[arg(long, env = "ALMANAC_MAX_HEAD_BYTES", default_value_t = 16_384)]
    pub max_head_bytes: usize,
    /// The live store: a SQLite file (default:
    /// `<data-dir>/live/store.sqlite`), or a PostgreSQL database
    /// (`postgres://user:password@host:port/database`) that api replicas
    /// share.
    #[arg(long, env = "ALMANAC_STORE")]
    pub store: Option<String>,
    /// SQLite: writes the live store gathers into one transaction (one
    /// disk sync).
    #[arg(long, env = "ALMANAC_STORE_MAX_BATCH", default_value_t = 512)]
    pub store_max_batch: usize,
    /// Connections (each a thread) that read the live store.
    #[arg(long, env = "ALMANAC_STORE_READERS", default_value_t = 4)]
    pub store_readers: usize,
    /// PostgreSQL: connections (each a thread) that write at once.
    #[arg(long, env = "ALMANAC_STORE_WRITERS", default_value_t = 8)]
    pub store_writers: usize,
    /// PostgreSQL: how long opening a connection may take, in
    /// milliseconds; while the database cannot be reached, requests that
    /// need it are answered 503 after this long.
    #[arg(long, env = "ALMANAC_STORE_CONNECT_TIMEOUT_MS", default_value_t = 2_000)]
    pub store_connect_timeout_ms: u64,
    /// PostgreSQL: how many times a write that collided with concurrent
    /// ones (on this replica or another) is run again before it is
    /// answered 503.
    #[arg(long, env = "ALMANAC_STORE_RETRIES", default_value_t = 50)]
    pub store_retries: u32,
    /// Where the journal of live changes for the next build is written
    /// (default: `<data-dir>/journal`, where the generator reads it).
    #[arg(long, env = "ALMANAC_JOURNAL_DIR")]
    pub journal_dir: Option<PathBuf>,
    /// A journal file is closed and a new one begun past this size, in
    /// bytes.
    #[arg(long, env = "ALMANAC_JOURNAL_ROTATE_BYTES", default_value_t = 64 << 20)]
    pub journal_rotate_bytes: u64,
    /// How long the lease of the background duties lasts, in
    /// milliseconds: among api replicas sharing a store on PostgreSQL, one
    /// runs the background work and renews its lease every third of this;
    /// if it stops, another takes the work over within this long.
    #[arg(long, env = "ALMANAC_DUTIES_LEASE_MS", default_value_t = 10_000)]
    pub duties_lease_ms: u64,
    /// The Hedera network whose accounts sign in (mainnet, testnet,
    /// previewnet).
    #[arg(long, env = "ALMANAC_LEDGER_NETWORK", default_value = "testnet")]
    pub ledger_network: String,
    /// A mirror node of that network, where account keys are looked up
    /// (`GET {url}/api/v1/accounts/{id}`). Without it, keys come from
    /// --ledger-accounts.
    #[arg(long, env = "ALMANAC_MIRROR_URL")]
    pub mirror_url: Option<String>,
    /// Time allowed for one mirror node lookup, in milliseconds.
    #[arg(long, env = "ALMANAC_MIRROR_TIMEOUT_MS", default_value_t = 5_000)]
    pub mirror_timeout_ms: u64,
    /// An accounts file (account id to key, as datasets/live/dev-accounts.json)
    /// used when no mirror node is configured; default: those dev accounts.
    #[arg(long, env = "ALMANAC_LEDGER_ACCOUNTS")]
    pub ledger_accounts: Option<PathBuf>,
    /// How long a sign-in challenge may be answered, in seconds.
    #[arg(long, env = "ALMANAC_CHALLENGE_TTL_SECS", default_value_t = 300)]
    pub challenge_ttl_secs: u64,
    /// Longest (and default) lifetime of an API key, in minutes.
    #[arg(long, env = "ALMANAC_API_KEY_MAX_MINUTES", default_value_t = 10_080)]
    pub api_key_max_minutes: u64,
    /// API keys kept in memory after a lookup, at most.
    #[arg(long, env = "ALMANAC_KEY_CACHE_ENTRIES", default_value_t = 100_000)]
    pub key_cache_entries: usize,
    /// How long a key found in the store is believed without asking it
    /// again, in seconds (0: ask every time). A key revoked in the store
    /// stops working within it; an expired one at once.
    #[arg(long, env = "ALMANAC_KEY_CACHE_SECS", default_value_t = 30)]
    pub key_cache_secs: u64,
    /// Sign-in (challenge and verify): requests per minute per client.
    #[arg(long, env = "ALMANAC_SIGN_IN_RATE", default_value_t = 120)]
    pub sign_in_rate: u32,
    /// Sign-in: burst above that pace.
    #[arg(long, env = "ALMANAC_SIGN_IN_BURST", default_value_t = 60)]
    pub sign_in_burst: u32,
    /// Ownership verification (challenges, proofs, DNS re-checks):
    /// requests per minute per client.
    #[arg(long, env = "ALMANAC_VERIFICATION_RATE", default_value_t = 60)]
    pub verification_rate: u32,
    /// Ownership verification: burst above that pace.
    #[arg(long, env = "ALMANAC_VERIFICATION_BURST", default_value_t = 20)]
    pub verification_burst: u32,
    /// How long a verification challenge may be used, in seconds.
    #[arg(long, env = "ALMANAC_VERIFICATION_CHALLENGE_TTL_SECS", default_value_t = 3_600)]
    pub verification_challenge_ttl_secs: u64,
    /// Unused, unexpired verification challenges an account may hold.
    #[arg(long, env = "ALMANAC_VERIFICATION_MAX_PENDING", default_value_t = 20)]
    pub verification_max_pending: usize,
    /// How often each verified ownership's proof is looked at again, in
    /// seconds (0: never). A proof gone revokes the ownership.
    #[arg(long, env = "ALMANAC_VERIFICATION_RECHECK_EVERY_SECS", default_value_t = 86_400)]
    pub verification_recheck_every_secs: u64,
    /// How long an ownership whose proof cannot be read (no answer) stays
    /// verified since it was last found, in seconds; then it expires.
    #[arg(long, env = "ALMANAC_VERIFICATION_LIFETIME_SECS", default_value_t = 604_800)]
    pub verification_lifetime_secs: u64,
    /// Nameservers (`IP:PORT`, comma-separated) DNS TXT proofs are read
    /// from; none: the system's (`/etc/resolv.conf`).
    #[arg(long = "verification-dns", env = "ALMANAC_VERIFICATION_DNS", value_delimiter = ',')]
    pub verification_dns: Vec<SocketAddr>,
    /// Time one DNS query of a TXT proof may take, in milliseconds.
    #[arg(long, env = "ALMANAC_VERIFICATION_DNS_TIMEOUT_MS", default_value_t = 5_000)]
    pub verification_dns_timeout_ms: u64,
    /// Chat sessions opened without a key: per minute per client.
    #[arg(long, env = "ALMANAC_CHAT_ANONYMOUS_RATE", default_value_t = 30)]
    pub chat_anonymous_rate: u32,
    /// Chat sessions opened without a key: burst above that pace.
    #[arg(long, env = "ALMANAC_CHAT_ANONYMOUS_BURST", default_value_t = 30)]
    pub chat_anonymous_burst: u32,
    /// Relays to agents (chat messages and routing by UAID): requests per
    /// minute per client, signed in or not.
    #[arg(long, env = "ALMANAC_RELAY_RATE", default_value_t = 300)]
    pub relay_rate: u32,
    /// Relays to agents: burst above that pace.
    #[arg(long, env = "ALMANAC_RELAY_BURST", default_value_t = 60)]
    pub relay_burst: u32,
    /// The operator's key, for operator-only calls (adapter registry
    /// categories). Prefer the environment variable to the flag.
    #[arg(long, env = "ALMANAC_OPERATOR_KEY", hide_env_values = true)]
    pub operator_key: Option<String>,
    /// A pricing file (as datasets/live/pricing.json, the default).
    #[arg(long, env = "ALMANAC_PRICING")]
    pub pricing: Option<PathBuf>,
    /// Largest body of a live broker call (sign-in, registration, keys,
    /// feedback), in bytes (413 above).
    #[arg(long, env = "ALMANAC_LIVE_MAX_BODY", default_value_t = 262_144)]
    pub live_max_body: usize,
    /// Additional registries' endpoints: a JSON file mapping catalog
    /// network keys (`erc-8004:base-mainnet`) to URLs the registrar POSTs
    /// registrations to. A key without one fails its deliveries.
    #[arg(long, env = "ALMANAC_REGISTRY_ENDPOINTS")]
    pub registry_endpoints: Option<PathBuf>,
    /// Time allowed for one call to an additional registry, in ms.
    #[arg(long, env = "ALMANAC_REGISTRY_TIMEOUT_MS", default_value_t = 10_000)]
    pub registry_timeout_ms: u64,
    /// Calls per delivery to an additional registry, at most.
    #[arg(long, env = "ALMANAC_REGISTRY_TRIES", default_value_t = 5)]
    pub registry_tries: u32,
    /// Wait before the second call to a registry (doubling after), in ms.
    #[arg(long, env = "ALMANAC_REGISTRY_BACKOFF_MS", default_value_t = 1_000)]
    pub registry_backoff_ms: u64,
    /// How long a registration's answer waits for its additional
    /// registries before answering 202, in ms.
    #[arg(long, env = "ALMANAC_REGISTRATION_WAIT_MS", default_value_t = 2_000)]
    pub registration_wait_ms: u64,
    /// Messages a chat session needs before it may give ERC-8004 feedback.
    #[arg(long, env = "ALMANAC_FEEDBACK_MIN_MESSAGES", default_value_t = 4)]
    pub feedback_min_messages: u64,
    /// The treasury account HBAR purchases pay (0.0.N on --ledger-network);
    /// needs --mirror-url, where the transfers are seen. Without it,
    /// `/credits/payments/hbar/intent` answers 503.
    #[arg(long, env = "ALMANAC_TREASURY_ACCOUNT")]
    pub treasury_account: Option<String>,
    /// Nodes a wallet may submit a purchase transfer to (comma-separated).
    #[arg(long = "ledger-node", env = "ALMANAC_LEDGER_NODES", value_delimiter = ',', default_value = "0.0.3")]
    pub ledger_nodes: Vec<String>,
    /// Consensus nodes the broker submits its own transactions to
    /// (inscriptions), as the SDKs' network map: `0.0.3=127.0.0.1:50211`,
    /// comma-separated; plaintext HAPI over gRPC.
    #[arg(long = "hapi-node", env = "ALMANAC_HAPI_NODES", value_delimiter = ',')]
    pub hapi_nodes: Vec<String>,
    /// Time one call to a consensus node may take, in milliseconds.
    #[arg(long, env = "ALMANAC_HAPI_TIMEOUT_MS", default_value_t = 10_000)]
    pub hapi_timeout_ms: u64,
    /// The broker's account that pays for inscriptions (0.0.N on
    /// --ledger-network); needs --hapi-node, --inscription-key and
    /// --mirror-url. Without it, inscription is off (its routes answer
    /// 503).
    #[arg(long, env = "ALMANAC_INSCRIPTION_ACCOUNT")]
    pub inscription_account: Option<String>,
    /// That account's private key (DER hex). Prefer the environment
    /// variable to the flag.
    #[arg(long, env = "ALMANAC_INSCRIPTION_KEY", hide_env_values = true)]
    pub inscription_key: Option<String>,
    /// Or a keys file holding it (as datasets/live/dev-keys.json).
    #[arg(long, env = "ALMANAC_INSCRIPTION_KEYS_FILE", conflicts_with = "inscription_key")]
    pub inscription_keys_file: Option<PathBuf>,
    /// The mirror node inscriptions are confirmed and read back on
    /// (default: --mirror-url).
    #[arg(long, env = "ALMANAC_INSCRIPTION_MIRROR_URL")]
    pub inscription_mirror_url: Option<String>,
    /// The largest content inscribed, in bytes.
    #[arg(long, env = "ALMANAC_INSCRIPTION_MAX_BYTES", default_value_t = 262_144)]
    pub inscription_max_bytes: usize,
    /// Inscriptions an account may have running at once.
    #[arg(long, env = "ALMANAC_INSCRIPTION_MAX_OPEN", default_value_t = 4)]
    pub inscription_max_open: usize,
    /// Inscriptions run at once.
    #[arg(long, env = "ALMANAC_INSCRIPTION_CONCURRENCY", default_value_t = 4)]
    pub inscription_concurrency: usize,
    /// How long an inscription quote holds, in seconds.
    #[arg(long, env = "ALMANAC_INSCRIPTION_QUOTE_TTL_SECS", default_value_t = 900)]
    pub inscription_quote_ttl_secs: u64,
    /// How long a transaction is looked for on the mirror node before it
    /// is sent again, in milliseconds.
    #[arg(long, env = "ALMANAC_INSCRIPTION_CONFIRM_TIMEOUT_MS", default_value_t = 60_000)]
    pub inscription_confirm_timeout_ms: u64,
    /// How soon an inscription that had to wait (a node or the mirror node
    /// unavailable) is tried again, in milliseconds.
    #[arg(long, env = "ALMANAC_INSCRIPTION_RETRY_MS", default_value_t = 2_000)]
    pub inscription_retry_ms: u64,
    /// The network's fee for creating a topic, as quotes estimate it, in
    /// tinybars.
    #[arg(long, env = "ALMANAC_INSCRIPTION_TOPIC_FEE", default_value_t = 6_000_000)]
    pub inscription_topic_fee: u64,
    /// The network's fee for one message, as quotes estimate it, in
    /// tinybars.
    #[arg(long, env = "ALMANAC_INSCRIPTION_MESSAGE_FEE", default_value_t = 60_000)]
    pub inscription_message_fee: u64,
    /// The skills registry's HCS-26 directory topic; without it, the
    /// registry creates one at its first start (with --inscription-account).
    #[arg(long, env = "ALMANAC_SKILLS_DIRECTORY_TOPIC")]
    pub skills_directory_topic: Option<String>,
    /// A Programmable Secrets chain: a deployments manifest (`chainId`,
    /// `network`, `rpcUrl`, `blockNumber`, `entrypoints` with the vault's,
    /// payment module's, receipt's, built-in evaluators' and identity
    /// registry's addresses). Repeat for more chains; the first is the
    /// default. Without one the group answers 503.
    #[arg(long = "secrets-chain", env = "ALMANAC_SECRETS_CHAINS", value_delimiter = ',')]
    pub secrets_chains: Vec<PathBuf>,
    /// A file holding the master key content keys are wrapped under: one
    /// key (64 hex digits or base64), or `version:key` lines to rotate
    /// (the highest version wraps). Never logged.
    #[arg(long, env = "ALMANAC_SECRETS_MASTER_KEY_FILE")]
    pub secrets_master_key_file: Option<PathBuf>,
    /// The master key itself, as the file would hold it (prefer the file
    /// or the environment: a command line is visible to other users).
    #[arg(long, env = "ALMANAC_SECRETS_MASTER_KEY", hide_env_values = true)]
    pub secrets_master_key: Option<String>,
    /// The largest ciphertext a policy may hold, in bytes.
    #[arg(long, env = "ALMANAC_SECRETS_MAX_CIPHERTEXT_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub secrets_max_ciphertext_bytes: usize,
    /// How long a key-release nonce lives, in seconds.
    #[arg(long, env = "ALMANAC_SECRETS_NONCE_TTL_SECS", default_value_t = 300)]
    pub secrets_nonce_ttl_secs: u64,
    /// How long a key request whose nonce expired unused is kept, in
    /// seconds (released and refused requests are kept; every refusal is
    /// recorded apart).
    #[arg(long, env = "ALMANAC_SECRETS_REQUEST_RETENTION_SECS", default_value_t = 86_400)]
    pub secrets_request_retention_secs: u64,
    /// The largest answer read from a chain's node, in bytes.
    #[arg(long, env = "ALMANAC_SECRETS_RPC_MAX_BYTES", default_value_t = 8 * 1024 * 1024)]
    pub secrets_rpc_max_bytes: usize,
    /// How often the indexer looks for new blocks, in milliseconds.
    #[arg(long, env = "ALMANAC_SECRETS_INDEX_EVERY_MS", default_value_t = 2_000)]
    pub secrets_index_every_ms: u64,
    /// The most blocks the indexer reads logs of at once.
    #[arg(long, env = "ALMANAC_SECRETS_INDEX_BLOCK_RANGE", default_value_t = 2_000)]
    pub secrets_index_block_range: u64,
    /// Checkpoints the indexer keeps per chain: the deepest reorganisation
    /// it undoes without reading from the deployment again.
    #[arg(long, env = "ALMANAC_SECRETS_INDEX_DEPTH", default_value_t = 128)]
    pub secrets_index_depth: usize,
    /// The longest the indexer waits between tries while a node cannot be
    /// reached, in milliseconds.
    #[arg(long, env = "ALMANAC_SECRETS_INDEX_BACKOFF_MAX_MS", default_value_t = 60_000)]
    pub secrets_index_backoff_max_ms: u64,
    /// Where a GitHub repository's archive at a commit is fetched for a
    /// plugin import: `{host}/{owner}/{repo}/tar.gz/{commit}`.
    #[arg(long, env = "ALMANAC_PLUGINS_ARCHIVE_HOST", default_value = "https://codeload.github.com")]
    pub plugins_archive_host: String,
    /// The largest repository archive a plugin import fetches, compressed, in bytes.
    #[arg(long, env = "ALMANAC_PLUGINS_MAX_ARCHIVE_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub plugins_max_archive_bytes: usize,
    /// Entries (files, folders) a repository archive may hold.
    #[arg(long, env = "ALMANAC_PLUGINS_MAX_ENTRIES", default_value_t = 20_000)]
    pub plugins_max_entries: usize,
    /// Bytes a repository archive may expand to, against archive bombs.
    #[arg(long, env = "ALMANAC_PLUGINS_MAX_EXPANDED_BYTES", default_value_t = 128 * 1024 * 1024)]
    pub plugins_max_expanded_bytes: u64,
    /// Sources one plugin import may fetch, a marketplace's entries included.
    #[arg(long, env = "ALMANAC_PLUGINS_MAX_SOURCES", default_value_t = 50)]
    pub plugins_max_sources: usize,
    /// Files a skill package may have.
    #[arg(long, env = "ALMANAC_SKILLS_MAX_FILES", default_value_t = 20)]
    pub skills_max_files: usize,
    /// Bytes a skill package's files may have in all.
    #[arg(long, env = "ALMANAC_SKILLS_MAX_TOTAL_BYTES", default_value_t = 1_048_576)]
    pub skills_max_total_bytes: usize,
    /// Skill publish jobs an account may have open at once.
    #[arg(long, env = "ALMANAC_SKILLS_MAX_OPEN", default_value_t = 2)]
    pub skills_max_open: usize,
    /// How long a skill publish quote holds, in seconds.
    #[arg(long, env = "ALMANAC_SKILLS_QUOTE_TTL_SECS", default_value_t = 900)]
    pub skills_quote_ttl_secs: u64,
    /// What a basic skill verification request costs, in credits.
    #[arg(long, env = "ALMANAC_SKILLS_VERIFICATION_BASIC_CREDITS", default_value_t = 500)]
    pub skills_verification_basic_credits: i64,
    /// What an express skill verification request costs, in credits.
    #[arg(long, env = "ALMANAC_SKILLS_VERIFICATION_EXPRESS_CREDITS", default_value_t = 2_000)]
    pub skills_verification_express_credits: i64,
    /// The most a purchase transfer may pay in fees, in tinybars.
    #[arg(long, env = "ALMANAC_PURCHASE_MAX_FEE", default_value_t = 100_000_000)]
    pub purchase_max_fee: u64,
    /// How long a purchase transfer may be submitted, in seconds (1 to
    /// 180, the network's bound).
    #[arg(long, env = "ALMANAC_PURCHASE_VALID_SECS", default_value_t = 180)]
    pub purchase_valid_secs: i64,
    /// How often pending purchase transfers are looked up, in milliseconds.
    #[arg(long, env = "ALMANAC_PURCHASE_WATCH_MS", default_value_t = 5_000)]
    pub purchase_watch_ms: u64,
    /// How long past its window a transfer is still looked for, in seconds.
    #[arg(long, env = "ALMANAC_PURCHASE_GRACE_SECS", default_value_t = 300)]
    pub purchase_grace_secs: u64,
    /// A card payment provider's API (Stripe's is https://api.stripe.com).
    /// Without it, `/credits/payments/intent` answers 503.
    #[arg(long, env = "ALMANAC_CARD_PROVIDER_URL")]
    pub card_provider_url: Option<String>,
    /// The provider's name as answered.
    #[arg(long, env = "ALMANAC_CARD_PROVIDER", default_value = "stripe")]
    pub card_provider: String,
    /// The provider's secret key. Prefer the environment variable.
    #[arg(long, env = "ALMANAC_CARD_SECRET_KEY", hide_env_values = true)]
    pub card_secret_key: Option<String>,
    /// The provider's publishable key, given to clients.
    #[arg(long, env = "ALMANAC_CARD_PUBLISHABLE_KEY", default_value = "")]
    pub card_publishable_key: String,
    /// The secret the provider signs webhooks with. Prefer the environment
    /// variable.
    #[arg(long, env = "ALMANAC_CARD_WEBHOOK_SECRET", hide_env_values = true)]
    pub card_webhook_secret: Option<String>,
    /// Smallest card purchase, in cents.
    #[arg(long, env = "ALMANAC_CARD_MIN_AMOUNT", default_value_t = 50)]
    pub card_min_amount: i64,
    /// Time allowed for one call to the card provider, in milliseconds.
    #[arg(long, env = "ALMANAC_CARD_TIMEOUT_MS", default_value_t = 10_000)]
    pub card_timeout_ms: u64,
    /// The HCS-20 token whose balances are points redeemable for credits,
    /// as TOPIC:TICK (`0.0.5000001:luna0`). Without it, the redemption
    /// routes answer 503.
    #[arg(long, env = "ALMANAC_REDEEM_TOKEN")]
    pub redeem_token: Option<String>,
    /// Credits one point pays.
    #[arg(long, env = "ALMANAC_CREDITS_PER_POINT", default_value_t = 1)]
    pub credits_per_point: i64,
    /// Time allowed to connect to an agent, in milliseconds.
    #[arg(long, env = "ALMANAC_AGENT_CONNECT_TIMEOUT_MS", default_value_t = 5_000)]
    pub agent_connect_timeout_ms: u64,
    /// Time an agent may stay silent while answering (between two reads),
    /// in milliseconds.
    #[arg(long, env = "ALMANAC_AGENT_READ_TIMEOUT_MS", default_value_t = 60_000)]
    pub agent_read_timeout_ms: u64,
    /// Time from a call to an agent until its answer's head, in milliseconds.
    #[arg(long, env = "ALMANAC_AGENT_FIRST_BYTE_TIMEOUT_MS", default_value_t = 60_000)]
    pub agent_first_byte_timeout_ms: u64,
    /// Time a whole call to an agent may take, redirects and body
    /// included, in milliseconds.
    #[arg(long, env = "ALMANAC_AGENT_DEADLINE_MS", default_value_t = 90_000)]
    pub agent_deadline_ms: u64,
    /// Time an answer relayed as it streams may take, in milliseconds.
    #[arg(long, env = "ALMANAC_AGENT_STREAM_DEADLINE_MS", default_value_t = 600_000)]
    pub agent_stream_deadline_ms: u64,
    /// How often each chattable agent's availability is checked, in
    /// seconds; 0: never (availability stays `unknown`).
    #[arg(long, env = "ALMANAC_AVAILABILITY_EVERY_S", default_value_t = 300)]
    pub availability_every_s: u64,
    /// Availability checks started a second, at most.
    #[arg(long, env = "ALMANAC_AVAILABILITY_RATE", default_value_t = 100)]
    pub availability_rate: u32,
    /// Availability checks in flight at once, at most (one per host).
    #[arg(long, env = "ALMANAC_AVAILABILITY_CONCURRENCY", default_value_t = 16)]
    pub availability_concurrency: usize,
    /// Time one availability check may take, in milliseconds.
    #[arg(long, env = "ALMANAC_AVAILABILITY_TIMEOUT_MS", default_value_t = 10_000)]
    pub availability_timeout_ms: u64,
    /// Longest wait before a host that did not answer is checked again, in
    /// seconds.
    #[arg(long, env = "ALMANAC_AVAILABILITY_BACKOFF_MAX_S", default_value_t = 3_600)]
    pub availability_backoff_max_s: u64,
    /// Availability changes shown through the live overlay per build; more
    /// wait for the next build.
    #[arg(long, env = "ALMANAC_AVAILABILITY_LIVE_MAX", default_value_t = 10_000)]
    pub availability_live_max: usize,
    /// Redirects a call to an agent follows, each judged by the egress gate.
    #[arg(long, env = "ALMANAC_EGRESS_MAX_REDIRECTS", default_value_t = 3)]
    pub egress_max_redirects: usize,
    /// Destinations the egress gate lets through although they are not
    /// public (comma-separated): ranges (`10.1.0.0/16`), addresses
    /// (`10.1.2.3`), an address or a name on one port (`127.0.0.1:4101`,
    /// `agents.internal:8443`). Loopback, private, link-local and the
    /// other special ranges are refused otherwise.
    #[arg(long = "egress-allow", env = "ALMANAC_EGRESS_ALLOW", value_delimiter = ',')]
    pub egress_allow: Vec<String>,
    /// A DNS server (`IP:PORT`) that resolves the names of agents,
    /// instead of the system's resolver.
    #[arg(long, env = "ALMANAC_EGRESS_DNS")]
    pub egress_dns: Option<SocketAddr>,
    /// Largest chat message a client may send, in bytes.
    #[arg(long, env = "ALMANAC_CHAT_MAX_MESSAGE_BYTES", default_value_t = 65_536)]
    pub chat_max_message_bytes: usize,
    /// Largest answer read from an agent (a card, a reply, a whole
    /// stream), in bytes.
    #[arg(long, env = "ALMANAC_CHAT_MAX_ANSWER_BYTES", default_value_t = 4 << 20)]
    pub chat_max_answer_bytes: usize,
    /// Keep and answer chat history (`false`: the history route is 503).
    #[arg(long, env = "ALMANAC_CHAT_HISTORY", default_value_t = true, action = clap::ArgAction::Set)]
    pub chat_history: bool,
    /// How long a session's authentication for its agent is held unused,
    /// in seconds; after it, messages must carry `auth` again.
    #[arg(long, env = "ALMANAC_CHAT_AUTH_IDLE_SECS", default_value_t = 3_600)]
    pub chat_auth_idle_secs: u64,
    /// Headers a session's `auth` may make, at most (400 past it).
    #[arg(long, env = "ALMANAC_CHAT_MAX_AUTH_HEADERS", default_value_t = 32)]
    pub chat_max_auth_headers: usize,
    /// Bytes of header names and values a session's `auth` may make, at
    /// most (400 past it).
    #[arg(long, env = "ALMANAC_CHAT_MAX_AUTH_BYTES", default_value_t = 8_192)]
    pub chat_max_auth_bytes: usize,
    /// Bytes of authentication held for all sessions together, at most;
    /// past it, `auth` is refused (503 `auth_store_full`) until sessions
    /// end or go idle.
    #[arg(long, env = "ALMANAC_CHAT_MAX_HELD_AUTH_BYTES", default_value_t = 64 << 20)]
    pub chat_max_held_auth_bytes: usize,
    /// Allow encrypted chat sessions (`false`: the encryption routes are 503).
    #[arg(long, env = "ALMANAC_CHAT_ENCRYPTION", default_value_t = true, action = clap::ArgAction::Set)]
    pub chat_encryption: bool,
    /// History a session keeps for free, in seconds (its default window).
    #[arg(long, env = "ALMANAC_CHAT_HISTORY_TTL_SECS", default_value_t = 86_400)]
    pub chat_history_ttl_secs: u64,
    /// The longest window a session may ask for (billed past the free one).
    #[arg(long, env = "ALMANAC_CHAT_MAX_HISTORY_TTL_SECS", default_value_t = 30 * 86_400)]
    pub chat_max_history_ttl_secs: u64,
    /// Messages a history answers, a plain HTTP agent is sent, and a
    /// session keeps, at most (and keyed sends whose answers it keeps).
    #[arg(long, env = "ALMANAC_CHAT_MAX_HISTORY", default_value_t = 200)]
    pub chat_max_history: usize,
    /// Chat sessions one signed-in account may have open.
    #[arg(long, env = "ALMANAC_CHAT_MAX_SESSIONS", default_value_t = 100)]
    pub chat_max_sessions: i64,
    /// Calls to agents in flight at once (503 past it).
    #[arg(long, env = "ALMANAC_CHAT_MAX_UPSTREAM", default_value_t = 10_000)]
    pub chat_max_upstream: usize,
    /// An OpenAI-compatible API (`…/v1`) that summarises histories for
    /// `POST /chat/session/{id}/compact`; without it compaction is 503.
    #[arg(long, env = "ALMANAC_SUMMARIZER_URL")]
    pub summarizer_url: Option<String>,
    /// The model it summarises with.
    #[arg(long, env = "ALMANAC_SUMMARIZER_MODEL", default_value = "gpt-4o-mini")]
    pub summarizer_model: String,
    /// Its API key. Prefer the environment variable.
    #[arg(long, env = "ALMANAC_SUMMARIZER_KEY", hide_env_values = true)]
    pub summarizer_key: Option<String>,
    /// The key sent to model-routing providers (agents with an
    /// `openrouter` endpoint: an OpenAI-compatible API). Prefer the environment variable.
    #[arg(long, env = "ALMANAC_PROVIDER_KEY", hide_env_values = true)]
    pub provider_key: Option<String>,
    /// The origins of the model-routing providers the deployment pays
    /// (comma-separated): only an `openrouter` endpoint there is sent the
    /// provider key.
    #[arg(
        long = "provider-origin",
        env = "ALMANAC_PROVIDER_ORIGINS",
        value_delimiter = ',',
        default_value = "https://openrouter.ai"
    )]
    pub provider_origins: Vec<String>,
    /// Agent connections routing keeps open (`/uaids/connections`).
    #[arg(long, env = "ALMANAC_ROUTE_CONNECTIONS", default_value_t = 10_000)]
    pub route_connections: usize,
    /// How long an unused agent connection stays open, in seconds.
    #[arg(long, env = "ALMANAC_ROUTE_IDLE_SECS", default_value_t = 300)]
    pub route_idle_secs: u64,
    /// Also serve the demo agents (an A2A agent and a plain HTTP agent) on
    /// loopback, where `datasets/broker/demo-agents.json` says they are.
    #[arg(long, env = "ALMANAC_DEMO_AGENTS")]
    pub demo_agents: bool,
    /// The demo A2A agent's address.
    #[arg(long, env = "ALMANAC_DEMO_A2A_BIND", default_value = crate::demo::A2A_ADDR)]
    pub demo_a2a_bind: SocketAddr,
    /// The demo HTTP agent's address.
    #[arg(long, env = "ALMANAC_DEMO_HTTP_BIND", default_value = crate::demo::HTTP_ADDR)]
    pub demo_http_bind: SocketAddr,
    /// Proxies whose X-Forwarded-For is trusted (comma-separated addresses).
    #[arg(long = "trusted-proxy", env = "ALMANAC_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<std::net::IpAddr>,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum Command {
    /// Sign in to a running api with a dev key (or a keys file) and print
    /// the API key it issues.
    Login(crate::auth::login::LoginArgs),
    /// Print the OpenAPI 3.1 document of every route (what
    /// `/api/v1/openapi.json` serves), for the build and static hosts.
    Openapi,
}

impl Config {
    /// The published site's folders.
    pub fn layout(&self) -> Layout {
        Layout::new(&self.site_dir, &self.data_dir)
    }

    /// Where builds come from: a bucket's route objects are kept in the
    /// data folder's `objects/`. Must be called on the async runtime.
    fn builds_from(&self) -> Result<crate::published::Source> {
        let Some(url) = &self.site_bucket else { return Ok(crate::published::Source::Folder) };
        let transfer = build_store::Transfer {
            request_timeout: Duration::from_millis(self.site_bucket_timeout_ms),
            ..build_store::Transfer::default()
        };
        let bucket = Arc::new(build_store::Bucket::open(url, transfer)?);
        let objects = build_store::ObjectCache::new(
            bucket.clone(),
            self.data_dir.join("objects"),
            tokio::runtime::Handle::current(),
        )?;
        Ok(crate::published::Source::Bucket { bucket, objects: Arc::new(objects) })
    }

    /// The application these settings describe, with no build loaded yet.
    pub fn app(&self) -> Result<Arc<App>> {
        let limits = Limits { max_page_size: self.max_page_size.max(hcs20::analytics::DEFAULT_PAGE_SIZE) };
        let mut access = mcp::Access::loopback();
        access.hosts.extend(self.mcp_hosts.iter().cloned());
        access.origins = self.mcp_origins.clone();
        let limiter = |per_minute, burst| limit::Limiter::new(limit::Rate { per_minute, burst }, self.limit_clients);
        let guard = GuardLimits {
            access,
            max_body: self.mcp_max_body,
            mcp_cache: mcp::CacheBounds { bytes: self.mcp_cache_bytes, key_bytes: self.mcp_cache_key_bytes },
            json: limiter(self.guard_rate, self.guard_burst),
            mcp: limiter(self.mcp_rate, self.mcp_burst),
            proxies: self.trusted_proxies.clone(),
        };
        let vectors = match self.embeddings.clone().config(Duration::from_millis(self.embeddings_timeout_ms), 1) {
            Some(provider) => Some(Vectors::new(embeddings::Provider::new(provider)?)),
            None => None,
        };
        let location = match self.store.as_deref() {
            Some(text) => store::Location::parse(text),
            None => store::Location::File(self.data_dir.join("live").join("store.sqlite")),
        };
        if let store::Location::File(path) = &location {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
            }
        }
        let settings = store::Settings {
            max_batch: self.store_max_batch,
            readers: self.store_readers,
            writers: self.store_writers,
            connect_timeout: Duration::from_millis(self.store_connect_timeout_ms.max(1)),
            retries: self.store_retries,
            ..store::Settings::default()
        };
        let store = Store::open(location, settings)?;
        let network =
            Network::parse(&self.ledger_network).filter(|n| matches!(n, Network::Hedera(_))).with_context(|| {
                format!("--ledger-network {:?}: expected mainnet, testnet or previewnet", self.ledger_network)
            })?;
        let keys = match (&self.mirror_url, &self.ledger_accounts) {
            (Some(url), _) => KeySource::mirror(url, Duration::from_millis(self.mirror_timeout_ms.max(1)))?,
            (None, Some(path)) => read(path, |text| KeySource::accounts(text, &network))?,
            (None, None) => {
                tracing::warn!("no --mirror-url: accounts sign in with the checked-in dev keys only");
                KeySource::accounts(ledger::DEV_ACCOUNTS, &network)?
            }
        };
        let operator = self.operator_key.as_deref().map(str::trim).filter(|k| !k.is_empty()).map(|k| {
            use sha2::Digest as _;
            sha2::Sha256::digest(k.as_bytes()).into()
        });
        let pricing = match &self.pricing {
            Some(path) => read(path, Pricing::parse)?,
            None => Pricing::parse(pricing::BUILT_IN)?,
        };
        let endpoints = match &self.registry_endpoints {
            Some(path) => read(path, registrar::Settings::endpoints)?,
            None => Default::default(),
        };
        let registrar = registrar::Settings::new(
            endpoints,
            Duration::from_millis(self.registry_timeout_ms.max(1)),
            self.registry_tries,
            Duration::from_millis(self.registry_backoff_ms),
            Duration::from_millis(self.registration_wait_ms),
        )?;
        let treasury = self.treasury(&network)?.map(Arc::new);
        let inscriptions = self.inscriptions(&network)?.map(Arc::new);
        let skills = self.skills(inscriptions.is_some())?.map(Arc::new);
        let secrets = self.secrets()?.map(Arc::new);
        let card = self.card()?.map(Arc::new);
        let redemption = self.redemption()?;
        let overlay = Arc::new(crate::broker::overlay::Overlay::default());
        let quiet = Duration::from_millis(self.overlay_settle_ms.max(1));
        let overlay_writer = crate::broker::overlay::Writer::start(overlay.clone(), quiet)
            .context("starting the live overlay's thread")?;
        let chat = crate::chat::sessions::Chat::new(crate::chat::sessions::Settings {
            egress: self.egress()?,
            max_message_bytes: self.chat_max_message_bytes.max(1),
            max_answer_bytes: self.chat_max_answer_bytes.max(1024),
            history_enabled: self.chat_history,
            encryption_enabled: self.chat_encryption,
            auth_idle: Duration::from_secs(self.chat_auth_idle_secs.max(1)),
            auth_bounds: crate::chat::relay::AuthBounds {
                max_headers: self.chat_max_auth_headers.max(1),
                max_bytes: self.chat_max_auth_bytes.max(64),
                max_held_bytes: self.chat_max_held_auth_bytes,
            },
            history_ttl: Duration::from_secs(self.chat_history_ttl_secs.max(1)),
            max_history_ttl: Duration::from_secs(self.chat_max_history_ttl_secs),
            max_history_entries: self.chat_max_history,
            max_sessions: self.chat_max_sessions,
            max_upstream: self.chat_max_upstream,
            max_connections: self.route_connections,
            connection_idle: Duration::from_secs(self.route_idle_secs),
            summarizer: self.summarizer_url.as_ref().map(|url| crate::chat::openai::Provider {
                base: url.trim_end_matches('/').to_string(),
                key: self.summarizer_key.clone().filter(|k| !k.is_empty()),
                model: self.summarizer_model.clone(),
                trust: crate::egress::Trust::Configured,
            }),
            providers: self.providers()?,
        })?;
        Ok(Arc::new(App {
            store,
            treasury,
            card,
            redemption,
            chat,
            overlay,
            overlay_writer,
            availability: crate::broker::availability::Settings {
                every: Duration::from_secs(self.availability_every_s),
                rate: self.availability_rate,
                concurrency: self.availability_concurrency,
                timeout: Duration::from_millis(self.availability_timeout_ms),
                backoff_max: Duration::from_secs(self.availability_backoff_max_s),
                max_answer_bytes: self.chat_max_answer_bytes,
                live_max: self.availability_live_max,
            },
            availability_soon: Default::default(),
            availability_shown: crate::broker::availability::Shown::new(self.availability_live_max),
            feedback_min_messages: self.feedback_min_messages,
            feedback_changes: crate::store::Newest::default(),
            catalog_changes: crate::store::Newest::default(),
            secrets_changes: crate::store::Newest::default(),
            plugin_changes: crate::store::Newest::default(),
            registrar: Arc::new(registrar),
            auth: auth::Settings {
                network,
                keys,
                challenge_ttl: Duration::from_secs(self.challenge_ttl_secs.max(1)),
                key_max_minutes: self.api_key_max_minutes.max(1),
                operator,
                cache: auth::KeyCache::new(self.key_cache_entries, Duration::from_secs(self.key_cache_secs)),
            },
            sign_in_limit: limiter(self.sign_in_rate, self.sign_in_burst),
            verification: crate::broker::verification::settings::Settings {
                challenge_ttl: Duration::from_secs(self.verification_challenge_ttl_secs.max(1)),
                max_pending: self.verification_max_pending.max(1),
                recheck_every: Duration::from_secs(self.verification_recheck_every_secs),
                lifetime: Duration::from_secs(self.verification_lifetime_secs.max(1)),
                txt: crate::broker::verification::dns::Txt::new(
                    &self.verification_dns,
                    Duration::from_millis(self.verification_dns_timeout_ms.max(1)),
                )
                .context("the verification DNS resolver")?,
            },
            verification_limit: limiter(self.verification_rate, self.verification_burst),
            skills,
            plugins: crate::broker::plugins::Settings {
                archive_host: self.plugins_archive_host.clone(),
                max_archive_bytes: self.plugins_max_archive_bytes.max(1),
                limits: plugins::archive::Limits {
                    max_entries: self.plugins_max_entries.max(1),
                    max_expanded_bytes: self.plugins_max_expanded_bytes.max(1),
                },
                max_sources: self.plugins_max_sources.max(1),
                wake: Default::default(),
            },
            secrets,
            secrets_max_body: self.secrets_max_ciphertext_bytes.saturating_mul(2).saturating_add(262_144),
            inscriptions,
            content_max_body: self.inscription_max_bytes / 3 * 4 + 65_536,
            package_max_body: self.skills_max_total_bytes / 3 * 4 + 65_536,
            anonymous_chat_limit: limiter(self.chat_anonymous_rate, self.chat_anonymous_burst),
            relay_limit: limiter(self.relay_rate, self.relay_burst),
            pricing,
            journal: Journal {
                dir: self.journal_dir.clone().unwrap_or_else(|| self.data_dir.join("journal")),
                rotate_bytes: self.journal_rotate_bytes,
                wake: Arc::new(tokio::sync::Notify::new()),
            },
            replicas: crate::replicas::settings::Settings::new(Duration::from_millis(self.duties_lease_ms)),
            live_max_body: self.live_max_body,
            live: Arc::new(Live::default()),
            layout: self.layout(),
            builds_from: Arc::new(self.builds_from()?),
            reload_every: Duration::from_millis(self.reload_ms.max(10)),
            cleanup_every: Duration::from_secs(self.limit_cleanup.max(1)),
            limits,
            file_cache_bytes: self.file_cache_bytes,
            guard,
            broker_max_body: self.search_max_body,
            vectors,
            searches: crate::pool::Pool::new("search", self.search_threads(), self.search_queue, self.search_nice)
                .context("starting the search threads")?,
            connections: Connections::new(connection::Limits {
                max_connections: self.max_connections.max(1),
                header_timeout: Duration::from_millis(self.header_timeout_ms.max(1)),
                idle_timeout: Duration::from_millis(self.idle_timeout_ms.max(1)),
                send_timeout: Duration::from_millis(self.send_timeout_ms.max(1)),
                body_timeout: Duration::from_millis(self.body_timeout_ms.max(1)),
                max_head_bytes: self.max_head_bytes,
            }),
        }))
    }
}

impl Config {
    /// `--search-threads`, 0 read as one per CPU this process may use.
    fn search_threads(&self) -> usize {
        match self.search_threads {
            0 => cpus(),
            n => n,
        }
    }

    /// `--io-threads`, 0 read as half the CPUs this process may use (at
    /// least one).
    ///
    /// Why not one per CPU, as the runtime would have it: the workers only
    /// read and write, and each answer a search thread gives back wakes a
    /// parked worker. With a worker per CPU beside the search threads, the
    /// CPUs spend their time switching between them. Measured at a million
    /// agents on two CPUs (10k agents in the overlay, wrk -t2 beside the
    /// api), one worker against two: searches at 32 connections 4.0k-4.3k
    /// against 3.3k-4.0k a second (p99 10.5-11.4 against 11.2-14.1 ms),
    /// at 8 connections 3.8k-4.2k against 3.6k-3.9k; static agent routes
    /// (wrk -t1 -c64, files kept) 200 88k-89k against 73k, 304 93k-100k
    /// against 74k-78k, where nginx served 77k and 82k-84k. A file not
    /// kept is read on the blocking threads (`service::published`), so a
    /// read waiting on the disk holds no worker.
    pub fn io_threads(&self) -> usize {
        match self.io_threads {
            0 => (cpus() / 2).max(1),
            n => n,
        }
    }

    /// HBAR purchases, if a treasury is configured.
    fn treasury(&self, network: &Network) -> Result<Option<Treasury>> {
        let Some(account) = &self.treasury_account else { return Ok(None) };
        let entity = |flag: &str, text: &str| -> Result<EntityId> {
            text.trim().parse().map_err(|_| anyhow::anyhow!("{flag} {text:?}: expected an account id (0.0.N)"))
        };
        let account = entity("--treasury-account", account)?;
        let Some(mirror) = &self.mirror_url else {
            anyhow::bail!("--treasury-account needs --mirror-url: purchases are seen on the mirror node");
        };
        let nodes = self.ledger_nodes.iter().map(|n| entity("--ledger-node", n)).collect::<Result<Vec<_>>>()?;
        if nodes.is_empty() {
            anyhow::bail!("--ledger-node: name at least one node");
        }
        if !(1..=180).contains(&self.purchase_valid_secs) {
            anyhow::bail!("--purchase-valid-secs {}: expected 1 to 180", self.purchase_valid_secs);
        }
        let timeout = Duration::from_millis(self.mirror_timeout_ms.max(1));
        Ok(Some(Treasury {
            account,
            network: network.wire(),
            nodes,
            max_fee: self.purchase_max_fee,
            valid_seconds: self.purchase_valid_secs,
            watch_every: Duration::from_millis(self.purchase_watch_ms.max(10)),
            grace: Duration::from_secs(self.purchase_grace_secs),
            mirror: http_client::builder().timeout(timeout).build().context("the mirror node client")?,
            mirror_base: mirror.trim_end_matches('/').to_string(),
        }))
    }

    /// Content inscription, if the broker's account is configured.
    fn inscriptions(&self, network: &Network) -> Result<Option<crate::broker::inscription::Settings>> {
        use crate::broker::inscription::ledger::{Fees, Ledger};
        let Some(account) = &self.inscription_account else { return Ok(None) };
        let account: EntityId = account
            .trim()
            .parse()
            .map_err(|_| anyhow::anyhow!("--inscription-account {account:?}: expected an account id (0.0.N)"))?;
        let key = match (self.inscription_key.as_deref().filter(|k| !k.trim().is_empty()), &self.inscription_keys_file)
        {
            (Some(key), _) => crate::auth::signature::SigningKey::from_der_hex(key.trim())
                .map_err(|e| anyhow::anyhow!("--inscription-key: {}", e.0))?,
            (None, Some(file)) => read(file, |text| crate::auth::login::key_for(text, &account.to_string()))?,
            (None, None) => anyhow::bail!(
                "--inscription-account needs --inscription-key (ALMANAC_INSCRIPTION_KEY) or --inscription-keys-file"
            ),
        };
        let Some(mirror) = self.inscription_mirror_url.as_ref().or(self.mirror_url.as_ref()) else {
            anyhow::bail!("--inscription-account needs --mirror-url: inscriptions are confirmed on the mirror node");
        };
        let nodes = self
            .hapi_nodes
            .iter()
            .map(|n| crate::broker::hapi::node::Node::parse(n).map_err(|e| anyhow::anyhow!("--hapi-node {e}")))
            .collect::<Result<Vec<_>>>()?;
        if nodes.is_empty() {
            anyhow::bail!("--inscription-account needs --hapi-node: the nodes inscriptions are submitted to");
        }
        let fees = Fees { topic: self.inscription_topic_fee, message: self.inscription_message_fee };
        let timeout = Duration::from_millis(self.hapi_timeout_ms.max(1));
        let ledger = Ledger::new(network.wire(), nodes, account, key, fees, timeout, mirror.clone())
            .context("the inscription clients")?;
        Ok(Some(crate::broker::inscription::Settings {
            ledger,
            max_bytes: self.inscription_max_bytes.max(1),
            max_open: self.inscription_max_open.max(1),
            concurrency: self.inscription_concurrency.max(1),
            quote_ttl: Duration::from_secs(self.inscription_quote_ttl_secs.max(1)),
            confirm_timeout: Duration::from_millis(self.inscription_confirm_timeout_ms.max(1)),
            retry_every: Duration::from_millis(self.inscription_retry_ms.max(10)),
            wake: tokio::sync::Notify::new(),
        }))
    }

    /// The skills registry, if inscription is on.
    fn skills(&self, inscribing: bool) -> Result<Option<crate::broker::skills::Settings>> {
        use crate::broker::skills::{package::Bounds, settings::VerificationCredits};
        let configured_directory = match &self.skills_directory_topic {
            None => None,
            Some(topic) => Some(
                topic
                    .trim()
                    .parse::<EntityId>()
                    .map_err(|_| anyhow::anyhow!("--skills-directory-topic {topic:?}: expected a topic id (0.0.N)"))?,
            ),
        };
        if !inscribing {
            return Ok(None);
        }
        if self.skills_verification_basic_credits < 1 || self.skills_verification_express_credits < 1 {
            anyhow::bail!("--skills-verification-*-credits: expected 1 or more");
        }
        Ok(Some(crate::broker::skills::Settings {
            bounds: Bounds {
                max_files: self.skills_max_files.max(2),
                max_total_bytes: self.skills_max_total_bytes.max(1),
            },
            max_open: self.skills_max_open.max(1),
            quote_ttl: Duration::from_secs(self.skills_quote_ttl_secs.max(1)),
            verification_credits: VerificationCredits {
                basic: self.skills_verification_basic_credits,
                express: self.skills_verification_express_credits,
            },
            configured_directory,
            directory: std::sync::OnceLock::new(),
            directory_problem: std::sync::Mutex::new(None),
            registry: tokio::sync::Mutex::new(()),
            wake: tokio::sync::Notify::new(),
        }))
    }

    /// Redemption of points, if a token is configured.
    fn redemption(&self) -> Result<Option<Redemption>> {
        let Some(token) = &self.redeem_token else { return Ok(None) };
        let parsed = token.split_once(':').and_then(|(topic, tick)| {
            let tick = hcs20::message::normalise_tick(tick)?;
            Some((topic.trim().parse::<EntityId>().ok()?, tick))
        });
        let Some((topic, tick)) = parsed else {
            anyhow::bail!("--redeem-token {token:?}: expected TOPIC:TICK (0.0.5000001:luna0)");
        };
        if self.credits_per_point < 1 {
            anyhow::bail!("--credits-per-point {}: expected 1 or more", self.credits_per_point);
        }
        Ok(Some(Redemption { topic, tick, credits_per_point: self.credits_per_point }))
    }

    /// The egress gate's settings: the allow list (and the demo agents
    /// when the api serves them), the resolver, the bounds of a call.
    fn egress(&self) -> Result<crate::egress::Settings> {
        let mut allow = crate::egress::Allow::parse(&self.egress_allow).map_err(anyhow::Error::msg)?;
        if self.demo_agents {
            allow.allow_socket(self.demo_a2a_bind);
            allow.allow_socket(self.demo_http_bind);
        }
        let ms = |n: u64| Duration::from_millis(n.max(1));
        Ok(crate::egress::Settings {
            policy: crate::egress::Policy { allow },
            dns: self.egress_dns,
            connect_timeout: ms(self.agent_connect_timeout_ms),
            first_byte_timeout: ms(self.agent_first_byte_timeout_ms),
            read_timeout: ms(self.agent_read_timeout_ms),
            deadline: ms(self.agent_deadline_ms),
            stream_deadline: ms(self.agent_stream_deadline_ms),
            max_redirects: self.egress_max_redirects,
        })
    }

    /// Programmable Secrets: its chains, read from their manifests, and the
    /// master key; `None` when no chain is named.
    fn secrets(&self) -> Result<Option<crate::broker::secrets::settings::Settings>> {
        use crate::broker::secrets::{
            rpc::Rpc,
            settings::{Chain, Clock, IndexSettings, Settings},
        };
        use programmable_secrets::{deployment::Deployment, envelope::MasterKeys};
        if self.secrets_chains.is_empty() {
            return Ok(None);
        }
        let gate = Arc::new(crate::egress::Gate::new(self.egress()?)?);
        let mut chains = Vec::new();
        for path in &self.secrets_chains {
            let deployment = read(path, |text| Deployment::parse(text).map_err(anyhow::Error::from))?;
            if chains.iter().any(|c: &Chain| c.deployment.chain_id == deployment.chain_id) {
                anyhow::bail!("--secrets-chain {}: chain {} is named twice", path.display(), deployment.chain_id);
            }
            let rpc = Rpc::new(gate.clone(), &deployment.rpc_url, self.secrets_rpc_max_bytes.max(1024));
            chains.push(Chain { deployment, rpc });
        }
        let text = match (&self.secrets_master_key_file, &self.secrets_master_key) {
            (Some(path), _) => Some(
                std::fs::read_to_string(path)
                    .with_context(|| format!("--secrets-master-key-file {}", path.display()))?,
            ),
            (None, Some(key)) => Some(key.clone()),
            (None, None) => {
                tracing::warn!("no master key: programmable secrets publish and release no keys");
                None
            }
        };
        // The key's text never reaches an error message.
        let master = match text {
            Some(text) => Some(MasterKeys::parse(&text).map_err(|e| anyhow::anyhow!("the master key: {e}"))?),
            None => None,
        };
        Ok(Some(Settings {
            chains,
            master,
            ciphertexts: self.data_dir.join("live").join("secrets"),
            max_ciphertext_bytes: self.secrets_max_ciphertext_bytes.max(1),
            nonce_ttl: Duration::from_secs(self.secrets_nonce_ttl_secs.max(1)),
            request_retention: Duration::from_secs(self.secrets_request_retention_secs),
            index: IndexSettings {
                every: Duration::from_millis(self.secrets_index_every_ms.max(10)),
                block_range: self.secrets_index_block_range.max(1),
                depth: self.secrets_index_depth.max(1),
                backoff_max: Duration::from_millis(self.secrets_index_backoff_max_ms),
            },
            clock: Clock::default(),
        }))
    }

    /// The model-routing providers: the key and the origins it goes to.
    fn providers(&self) -> Result<crate::chat::openai::Providers> {
        let origins = self.provider_origins.iter().map(|o| o.trim()).filter(|o| !o.is_empty());
        let origins = origins
            .map(|o| url::Url::parse(o).map(|u| u.origin()).with_context(|| format!("--provider-origin {o:?}")))
            .collect::<Result<Vec<_>>>()?;
        Ok(crate::chat::openai::Providers { key: self.provider_key.clone().filter(|k| !k.is_empty()), origins })
    }

    /// Card purchases, if a provider is configured.
    fn card(&self) -> Result<Option<Card>> {
        let Some(url) = &self.card_provider_url else { return Ok(None) };
        let secret_key = self.card_secret_key.clone().filter(|k| !k.trim().is_empty());
        let Some(secret_key) = secret_key else {
            anyhow::bail!("--card-provider-url needs --card-secret-key (ALMANAC_CARD_SECRET_KEY)");
        };
        if self.card_webhook_secret.is_none() {
            tracing::warn!("no --card-webhook-secret: card intents are made but never complete");
        }
        let timeout = Duration::from_millis(self.card_timeout_ms.max(1));
        Ok(Some(Card {
            name: self.card_provider.clone(),
            base: url.trim_end_matches('/').to_string(),
            secret_key,
            publishable_key: self.card_publishable_key.clone(),
            webhook_secret: self.card_webhook_secret.clone().filter(|s| !s.is_empty()),
            tolerance: Duration::from_secs(300),
            min_amount: self.card_min_amount.max(1),
            client: http_client::builder().timeout(timeout).build().context("the card provider client")?,
        }))
    }
}

/// A settings file read and parsed; an error names the file.
fn read<T>(path: &std::path::Path, parse: impl FnOnce(&str) -> Result<T>) -> Result<T> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse(&text).with_context(|| format!("{}", path.display()))
}

/// The CPUs this process may use.
fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
