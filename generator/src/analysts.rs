//! What an analyst finds in a snapshot: views named for what they hold
//! (`ticks`, `balances`, `holders`, `agents`, `feedback`, beside the
//! tables and the `events`, `operations_at` and `events_at` views) and a
//! comment on each (`COMMENT ON`, listed by `duckdb_tables()` and
//! `duckdb_views()`). Written into the warehouse before each snapshot is
//! copied, so every snapshot carries them; `docs/hcs20.md`'s schema section
//! says the same.

use anyhow::{Context, Result};
use duckdb_files::sql::Connection;

/// The views over section C's tables.
const LEDGER_VIEWS: &str = "
CREATE OR REPLACE VIEW ticks AS
    SELECT topic, tick, name, max, lim, supply, minted, burned, mints, burns, transfers, holders,
           make_timestamp((deployed_ns // 1000)::BIGINT) AS deployed_at,
           make_timestamp((last_change_ns // 1000)::BIGINT) AS last_change_at
    FROM tokens;
CREATE OR REPLACE VIEW balances AS
    SELECT topic, tick, account, balance, make_timestamp((updated_ns // 1000)::BIGINT) AS updated_at FROM holdings;
CREATE OR REPLACE VIEW holders AS SELECT * FROM balances WHERE balance > 0;
";

/// The views over section A's tables (when the build has them).
const BROKER_VIEWS: &str = "
CREATE OR REPLACE VIEW agents AS
    SELECT id, uaid, registry, name, adapter, type, verification_status, trust_score, available,
           protocols[1] AS protocol, chattable,
           created_at, updated_at
    FROM broker_agents;
CREATE OR REPLACE VIEW feedback AS
    SELECT uaid, client, feedback_index, score, revoked, created_at FROM broker_feedback;
";

/// What each table and view holds.
const COMMENTS: &[(&str, &str, &str)] = &[
    (
        "TABLE",
        "messages",
        "Every HCS-20 topic message ingested, as the mirror node gave it (base64 payload, consensus time in ns).",
    ),
    (
        "TABLE",
        "operations",
        "Every HCS-20 operation read from the messages, valid or not; `reason` says why an invalid one was rejected.",
    ),
    ("TABLE", "tokens", "Deployed HCS-20 tokens (tick per topic) with their supply and counters, as of the build."),
    (
        "TABLE",
        "holdings",
        "Balances per token and account, zero balances included (an account that once held keeps its row).",
    ),
    ("TABLE", "recent_events", "The newest valid mints, burns and transfers per token, as the API lists them."),
    ("TABLE", "build", "The snapshot's build id and layout version (key, value)."),
    ("VIEW", "events", "Valid mints, burns and transfers (a projection of operations)."),
    ("VIEW", "operations_at", "operations with consensus_at as a timestamp."),
    ("VIEW", "events_at", "events with consensus_at as a timestamp."),
    ("VIEW", "ticks", "tokens with their times as timestamps."),
    ("VIEW", "balances", "holdings with updated_at as a timestamp."),
    ("VIEW", "holders", "balances above zero."),
];

const BROKER_COMMENTS: &[(&str, &str, &str)] = &[
    (
        "TABLE",
        "broker_agents",
        "The agent index of the build: one row per agent, its capabilities as a bit mask (bit n: capability code n), \
         its full record as JSON in `record`.",
    ),
    ("TABLE", "broker_feedback", "ERC-8004 feedback entries per agent, their full record as JSON in `record`."),
    ("VIEW", "agents", "broker_agents with their first protocol and whether this deployment can chat with them."),
    ("VIEW", "feedback", "broker_feedback without the raw records."),
];

/// Writes the views and comments (the broker's when `broker`).
pub fn document(conn: &Connection, broker: bool) -> Result<()> {
    conn.execute_batch(LEDGER_VIEWS).context("the analysts' views")?;
    let mut comments: Vec<&(&str, &str, &str)> = COMMENTS.iter().collect();
    if broker {
        conn.execute_batch(BROKER_VIEWS).context("the analysts' broker views")?;
        comments.extend(BROKER_COMMENTS);
    }
    for (kind, name, comment) in comments {
        conn.execute(&format!("COMMENT ON {kind} {name} IS '{}'", comment.replace('\'', "''")), [])
            .with_context(|| format!("commenting on {name}"))?;
    }
    Ok(())
}

/// One Parquet export of the build: a file at `/exports/<name>.parquet`
/// written from a view, in a stable order.
struct Export {
    name: &'static str,
    query: &'static str,
    /// Whether it comes from section A's tables (else section C's).
    broker: bool,
    /// What it holds, for the manifest.
    what: &'static str,
}

const EXPORTS: &[Export] = &[
    Export {
        name: "ticks",
        query: "SELECT * FROM ticks ORDER BY topic, tick",
        broker: false,
        what: "Deployed HCS-20 tokens (tick per topic): supply, limits, counters, first and last change.",
    },
    Export {
        name: "holders",
        query: "SELECT * FROM holders ORDER BY topic, tick, balance DESC, account",
        broker: false,
        what: "Balances above zero per token and account, largest first.",
    },
    Export {
        name: "events",
        query: "SELECT * FROM events_at ORDER BY consensus_ns, topic, sequence",
        broker: false,
        what: "Valid mints, burns and transfers in consensus order.",
    },
    Export {
        name: "operations",
        query: "SELECT * FROM operations_at ORDER BY consensus_ns, topic, sequence",
        broker: false,
        what: "Every HCS-20 operation read, valid or not; `reason` says why an invalid one was rejected.",
    },
    Export {
        name: "agents",
        query: "SELECT * FROM agents ORDER BY id",
        broker: true,
        what:
            "The agent index: registry, adapter, first protocol, trust score, whether this deployment can chat with it.",
    },
    Export {
        name: "feedback",
        query: "SELECT * FROM feedback ORDER BY uaid, client, feedback_index",
        broker: true,
        what: "ERC-8004 feedback entries per agent (score, revoked).",
    },
];

/// Where the exports are published.
pub const EXPORTS_PREFIX: &str = "/exports/";

/// Whether `route` is one of the exports (derived from the tables every
/// run, like the snapshot).
pub fn is_export(route: &str) -> bool {
    route.starts_with(EXPORTS_PREFIX)
}

/// DuckDB held to one thread while this lives: an export's bytes must
/// not depend on how threads met (DuckDB's parallel writer may cut row
/// groups where they did). The setting is the database's, every
/// connection's: one is held while any export runs.
pub struct OneThread<'a>(&'a Connection);

impl<'a> OneThread<'a> {
    pub fn hold(conn: &'a Connection) -> Result<OneThread<'a>> {
        conn.execute_batch("SET threads = 1").context("one thread for the exports")?;
        Ok(OneThread(conn))
    }
}

impl Drop for OneThread<'_> {
    fn drop(&mut self) {
        if let Err(error) = self.0.execute_batch("RESET threads") {
            tracing::warn!(%error, "resetting DuckDB's threads");
        }
    }
}

/// An export written: its file and its entry for the manifest.
pub type Written = (shared::site::File, shared::manifest::Export);

/// The names of section C's exports (`broker` false) or section A's.
pub fn names(broker: bool) -> Vec<&'static str> {
    EXPORTS.iter().filter(|e| e.broker == broker).map(|e| e.name).collect()
}

/// Exports `names`, each on a connection and a thread of its own in
/// `scope` (section A's are the longest by far: the agents' reads every
/// agent), dated `last_modified`; [`OneThread`] must be held until they
/// are joined.
pub fn start<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    conn: &Connection,
    scratch: &'scope std::path::Path,
    names: Vec<&'static str>,
    last_modified: shared::timestamp::Timestamp,
) -> Result<Vec<std::thread::ScopedJoinHandle<'scope, Result<Written>>>> {
    let span = tracing::Span::current();
    names
        .into_iter()
        .map(|name| {
            let own = conn.try_clone().context("a connection for an export")?;
            let span = span.clone();
            Ok(scope.spawn(move || span.in_scope(|| export(&own, scratch, name, last_modified))))
        })
        .collect()
}

/// The exports [`start`]ed, joined.
pub fn join(started: Vec<std::thread::ScopedJoinHandle<'_, Result<Written>>>) -> Result<Vec<Written>> {
    started.into_iter().map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
}

/// Exports in the order the manifest lists them: files and entries.
pub fn in_order(mut written: Vec<Written>) -> (Vec<shared::site::File>, Vec<shared::manifest::Export>) {
    written.sort_by_key(|(file, _)| {
        EXPORTS.iter().position(|e| file.route == format!("{EXPORTS_PREFIX}{}.parquet", e.name))
    });
    written.into_iter().unzip()
}

/// Writes the export `name` from its view, read from the views
/// [`document`] wrote, on `conn` (with [`OneThread`] held), and reads it
/// back: its file, dated `last_modified`, and its entry. `scratch` holds
/// DuckDB's output until it is read back.
pub fn export(
    conn: &Connection,
    scratch: &std::path::Path,
    name: &str,
    last_modified: shared::timestamp::Timestamp,
) -> Result<Written> {
    let export = EXPORTS.iter().find(|e| e.name == name).with_context(|| format!("no export is named {name}"))?;
    std::fs::create_dir_all(scratch).with_context(|| format!("creating {}", scratch.display()))?;
    use shared::http::{Cache, Representation, PARQUET};
    let _span = tracing::debug_span!("export", name = export.name).entered();
    let path = scratch.join(format!("{}.parquet", export.name));
    let copy = format!(
        "COPY ({}) TO {} (FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1, ROW_GROUP_SIZE 100000)",
        export.query,
        quoted(&path)
    );
    conn.execute_batch(&copy).with_context(|| format!("exporting {}", export.name))?;
    let body = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let route = format!("{EXPORTS_PREFIX}{}.parquet", export.name);
    let schema = schema(conn, &path, route.clone(), export.what);
    let _ = std::fs::remove_file(&path);
    let file = shared::site::File {
        path: route.trim_start_matches('/').to_string(),
        route,
        representation: Representation { body, last_modified, content_type: PARQUET, cache: Cache::Catalog },
    };
    Ok((file, schema?))
}

/// The routes of the broker's exports and what each holds: a layer keeps
/// the live build's files of them (its agents did not change).
pub fn broker_exports() -> impl Iterator<Item = (String, &'static str)> {
    EXPORTS.iter().filter(|e| e.broker).map(|e| (format!("{EXPORTS_PREFIX}{}.parquet", e.name), e.what))
}

/// The manifest's entry of an export kept from the live build, read from
/// its `file` there.
pub fn kept(conn: &Connection, file: &std::path::Path, route: String, what: &str) -> Result<shared::manifest::Export> {
    schema(conn, file, route, what).with_context(|| format!("reading {}", file.display()))
}

/// An export's columns and row count as the manifest lists them, read
/// from the written file (what readers will see; the count is in its
/// footer, so the query is not run again).
fn schema(conn: &Connection, file: &std::path::Path, route: String, what: &str) -> Result<shared::manifest::Export> {
    let read = format!("read_parquet({})", quoted(file));
    let mut describe = conn.prepare(&format!("DESCRIBE SELECT * FROM {read}"))?;
    let columns = describe
        .query_map([], |row| {
            Ok(shared::manifest::Column { name: row.get::<_, String>(0)?, kind: row.get::<_, String>(1)? })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let rows: u64 = conn.query_row(&format!("SELECT count(*) FROM {read}"), [], |row| row.get(0))?;
    Ok(shared::manifest::Export { route, description: what.to_string(), rows, columns })
}

/// A path as an SQL string literal.
fn quoted(path: &std::path::Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "''"))
}
