//! The plugin catalog (`crate::broker::plugins`): repositories and the
//! accounts that own them, plugins and their versions, and import jobs.
//!
//! Ownership is decided here, in the writer's transaction: a repository
//! is its first importer's ([`claim_repository`]), and so is a slug
//! ([`store_version`]), so two accounts importing at once cannot both
//! own one. A version is one commit of one plugin: the same commit again
//! stores nothing and answers the version already there. A new version
//! is journaled in the same transaction (a `plugin` event with the
//! plugin's listing), so the next build publishes it.

use crate::params;
use crate::sql::{Conn, Dialect, Optional, Row};
use broker_model::catalog::PluginEntry;
use broker_model::journal::Event;
use plugins::catalog::Listing;

use super::{outbox, rfc3339, Failure};

/// Whether an account may import a repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Claimed now, or already the account's.
    Yours,
    /// Another account's.
    Others,
}

/// `repository` (`owner/repo`, lowercase) for `account`, unless another
/// account has it.
pub fn claim_repository(conn: &Conn, repository: &str, account: &str, now: i64) -> Result<Claim, Failure> {
    conn.execute(
        "INSERT INTO plugin_repositories (repository, account, claimed_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (repository) DO NOTHING",
        params![repository, account, now],
    )?;
    let owner: String =
        conn.query_row("SELECT account FROM plugin_repositories WHERE repository = ?1", [repository], |r| r.get(0))?;
    Ok(if owner == account { Claim::Yours } else { Claim::Others })
}

/// An import job as stored; `request`, `progress` and `results` are the
/// JSON the broker module reads and writes.
#[derive(Clone, Debug)]
pub struct Import {
    pub id: String,
    pub account: String,
    pub request: String,
    pub status: String,
    pub progress: String,
    pub results: String,
    pub error: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

const IMPORT: &str = "SELECT id, account, request, status, progress, results, error, created_at, updated_at
                      FROM plugin_imports";

fn import_row(r: &Row<'_>) -> Result<Import, Failure> {
    Ok(Import {
        id: r.get(0)?,
        account: r.get(1)?,
        request: r.get(2)?,
        status: r.get(3)?,
        progress: r.get(4)?,
        results: r.get(5)?,
        error: r.get(6)?,
        created_at: r.get(7)?,
        updated_at: r.get(8)?,
    })
}

pub fn insert_import(conn: &Conn, job: &Import) -> Result<(), Failure> {
    conn.execute(
        "INSERT INTO plugin_imports (id, account, request, status, progress, results, error, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            job.id,
            job.account,
            job.request,
            job.status,
            job.progress,
            job.results,
            job.error,
            job.created_at,
            job.updated_at
        ],
    )?;
    Ok(())
}

pub fn import(conn: &Conn, id: &str) -> Result<Option<Import>, Failure> {
    conn.query_row(&format!("{IMPORT} WHERE id = ?1"), [id], import_row).optional()
}

/// Jobs not yet ended, oldest first: what a start resumes.
pub fn open_imports(conn: &Conn) -> Result<Vec<Import>, Failure> {
    let rows = conn.query_map(
        &format!("{IMPORT} WHERE status IN ('pending', 'running') ORDER BY created_at, id"),
        [],
        import_row,
    )?;
    Ok(rows)
}

/// A job's new state.
pub fn update_import(
    conn: &Conn,
    id: &str,
    status: &str,
    progress: &str,
    results: &str,
    error: Option<&str>,
    at: i64,
) -> Result<(), Failure> {
    conn.execute(
        "UPDATE plugin_imports SET status = ?2, progress = ?3, results = ?4, error = ?5, updated_at = ?6 WHERE id = ?1",
        params![id, status, progress, results, error, at],
    )?;
    Ok(())
}

/// A version an import found, to store.
#[derive(Clone, Debug)]
pub struct NewVersion {
    pub slug: String,
    pub account: String,
    pub repository: String,
    pub subpath: String,
    pub ecosystem: String,
    pub commit: String,
    pub digest: String,
    /// The version's record (JSON), its `revision` filled in by the store.
    pub record: serde_json::Value,
    pub at: i64,
}

/// What storing a version did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stored {
    /// A new version, numbered `revision` (1 for a new plugin), journaled
    /// as the outbox's `seq`.
    Created { revision: i64, seq: i64 },
    /// That commit of the plugin is stored already.
    Unchanged { revision: i64 },
    /// The slug is another account's.
    NotYours,
}

/// Stores `version` under its slug: a new plugin is the account's, a new
/// commit a new revision.
pub fn store_version(conn: &Conn, version: &NewVersion) -> Result<Stored, Failure> {
    let owner: Option<String> =
        conn.query_row("SELECT account FROM plugins WHERE slug = ?1", [&version.slug], |r| r.get(0)).optional()?;
    match owner {
        Some(owner) if owner != version.account => return Ok(Stored::NotYours),
        Some(_) => {
            let held: Option<i64> = conn
                .query_row(
                    "SELECT revision FROM plugin_versions WHERE slug = ?1 AND commit_sha = ?2",
                    params![version.slug, version.commit],
                    |r| r.get(0),
                )
                .optional()?;
            if let Some(revision) = held {
                return Ok(Stored::Unchanged { revision });
            }
            conn.execute(
                "UPDATE plugins SET updated_at = ?2, repository = ?3, subpath = ?4, ecosystem = ?5 WHERE slug = ?1",
                params![version.slug, version.at, version.repository, version.subpath, version.ecosystem],
            )?;
        }
        None => {
            conn.execute(
                "INSERT INTO plugins (slug, account, repository, subpath, ecosystem, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
                params![
                    version.slug,
                    version.account,
                    version.repository,
                    version.subpath,
                    version.ecosystem,
                    version.at
                ],
            )?;
        }
    }
    let revision: i64 = conn.query_row(
        "SELECT COALESCE(MAX(revision), 0) + 1 FROM plugin_versions WHERE slug = ?1",
        [&version.slug],
        |r| r.get(0),
    )?;
    let mut record = version.record.clone();
    record["revision"] = revision.into();
    conn.execute(
        "INSERT INTO plugin_versions (slug, revision, commit_sha, digest, record, imported_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![version.slug, revision, version.commit, version.digest, record.to_string(), version.at],
    )?;
    let plugin = plugin(conn, &version.slug)?.ok_or_else(|| Failure::Corrupt(format!("{} vanished", version.slug)))?;
    let (slug, order) = (plugin.slug.clone(), plugin.seq);
    let listing = serde_json::to_value(listing(conn, plugin)?).map_err(|e| Failure::Corrupt(e.to_string()))?;
    let event = Event::Plugin { plugin: Box::new(PluginEntry { slug, seq: order, listing }) };
    let seq = outbox::push(conn, version.at, &event)?;
    conn.execute(
        "INSERT INTO plugin_catalog_changes (id, seq) VALUES (1, ?1) ON CONFLICT (id) DO UPDATE SET seq = excluded.seq",
        params![seq],
    )?;
    Ok(Stored::Created { revision, seq })
}

/// The `seq` of the catalog's newest journaled change (0: none).
pub fn catalog_newest(conn: &Conn) -> Result<i64, Failure> {
    conn.query_row("SELECT coalesce(max(seq), 0) FROM plugin_catalog_changes", [], |r| r.get(0))
}

/// `plugin` as the catalog knows it: with its publisher's proof and each
/// version's summary.
pub fn listing(conn: &Conn, plugin: Plugin) -> Result<Listing, Failure> {
    let proof = publisher_proof(conn, &plugin.account)?
        .map(|(uaid, method)| format!("the publisher proved ownership of {uaid} ({method})"));
    // The summaries are read by the database from each record, not parsed
    // whole: a record holds every file's entry and the scan.
    let summary = match conn.dialect() {
        Dialect::Sqlite => {
            "json_object('revision', revision, 'version', record ->> '$.version', 'commit', commit_sha,
                         'digest', digest, 'importedAt', record ->> '$.importedAt',
                         'score', record ->> '$.scan.score', 'grade', record ->> '$.scan.grade')"
        }
        Dialect::Postgres => {
            "json_build_object('revision', revision, 'version', record::json -> 'version', 'commit', commit_sha,
                               'digest', digest, 'importedAt', record::json -> 'importedAt',
                               'score', record::json #> '{scan,score}', 'grade', record::json #> '{scan,grade}')::text"
        }
    };
    let sql = format!("SELECT {summary} FROM plugin_versions WHERE slug = ?1 ORDER BY revision DESC");
    let history = conn
        .query_map(&sql, [&plugin.slug], |r| r.get::<String>(0))?
        .into_iter()
        .map(|text| serde_json::from_str(&text).map_err(|e| Failure::Corrupt(format!("plugin {}: {e}", plugin.slug))))
        .collect::<Result<Vec<serde_json::Value>, Failure>>()?;
    Ok(Listing {
        slug: plugin.slug,
        seq: plugin.seq,
        created_at: rfc3339(plugin.created_at),
        updated_at: rfc3339(plugin.updated_at),
        versions: plugin.versions as u32,
        publisher_proof: proof,
        record: plugin.record,
        history,
    })
}

/// Every plugin's listing, newest first import first. O(plugins + versions).
pub fn listings(conn: &Conn) -> Result<Vec<Listing>, Failure> {
    all(conn)?.into_iter().map(|plugin| listing(conn, plugin)).collect()
}

/// A plugin with its latest version's record.
#[derive(Clone, Debug)]
pub struct Plugin {
    pub seq: i64,
    pub slug: String,
    pub account: String,
    pub created_at: i64,
    pub updated_at: i64,
    pub versions: i64,
    /// The latest version's record.
    pub record: serde_json::Value,
}

const PLUGIN: &str = "SELECT p.seq, p.slug, p.account, p.created_at, p.updated_at,
                             (SELECT COUNT(*) FROM plugin_versions c WHERE c.slug = p.slug),
                             (SELECT v.record FROM plugin_versions v WHERE v.slug = p.slug
                              ORDER BY v.revision DESC LIMIT 1)
                      FROM plugins p";

fn plugin_row(r: &Row<'_>) -> Result<Plugin, Failure> {
    let slug: String = r.get(1)?;
    let record: String = r.get(6)?;
    let record = serde_json::from_str(&record).map_err(|e| Failure::Corrupt(format!("plugin {slug}: {e}")))?;
    Ok(Plugin {
        seq: r.get(0)?,
        slug,
        account: r.get(2)?,
        created_at: r.get(3)?,
        updated_at: r.get(4)?,
        versions: r.get(5)?,
        record,
    })
}

pub fn plugin(conn: &Conn, slug: &str) -> Result<Option<Plugin>, Failure> {
    conn.query_row(&format!("{PLUGIN} WHERE p.slug = ?1"), [slug], plugin_row).optional()
}

/// Every plugin, newest first (by `seq`, which never changes, so a cursor
/// made of it never repeats an item). O(plugins).
pub fn all(conn: &Conn) -> Result<Vec<Plugin>, Failure> {
    conn.query_map(&format!("{PLUGIN} ORDER BY p.seq DESC"), [], plugin_row)
}

/// Every version's record of `slug`, oldest first.
pub fn versions(conn: &Conn, slug: &str) -> Result<Vec<serde_json::Value>, Failure> {
    let rows = conn.query_map("SELECT record FROM plugin_versions WHERE slug = ?1 ORDER BY revision", [slug], |r| {
        r.get::<String>(0)
    })?;
    rows.into_iter()
        .map(|text| serde_json::from_str(&text).map_err(|e| Failure::Corrupt(format!("plugin {slug}: {e}"))))
        .collect()
}

/// The versions whose files have the content digest `digest`, as
/// `(slug, record)`, newest first.
pub fn by_digest(conn: &Conn, digest: &str) -> Result<Vec<(String, serde_json::Value)>, Failure> {
    let rows = conn.query_map(
        "SELECT slug, record FROM plugin_versions WHERE digest = ?1 ORDER BY imported_at DESC, slug",
        [digest],
        |r| Ok((r.get::<String>(0)?, r.get::<String>(1)?)),
    )?;
    rows.into_iter()
        .map(|row| {
            let (slug, text) = row;
            let record = serde_json::from_str(&text).map_err(|e| Failure::Corrupt(format!("plugin {slug}: {e}")))?;
            Ok((slug, record))
        })
        .collect()
}

/// How `account` proved itself, if it did: an agent whose ownership it
/// proved and still holds (`uaid`, method).
pub fn publisher_proof(conn: &Conn, account: &str) -> Result<Option<(String, String)>, Failure> {
    conn.query_row(
        "SELECT uaid, method FROM ownerships WHERE owner_id = ?1 AND state = 'verified' ORDER BY verified_at LIMIT 1",
        [account],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
}

/// The account that holds `repository`'s plugins, if one does.
pub fn repository_owner(conn: &Conn, repository: &str) -> Result<Option<String>, Failure> {
    conn.query_row("SELECT account FROM plugin_repositories WHERE repository = ?1", [repository], |r| r.get(0))
        .optional()
}
