//! The skills registry (`crate::broker::skills`): names, versions,
//! publish jobs, votes and verification requests.
//!
//! A name is owned by the account that first claimed it, and its versions
//! only increase ([`claim`], one step in the store's single writer, so two
//! publishers cannot both take a name). A version is claimed when its
//! publish job is created ([`publish`]: claimed, charged and stored with
//! its parts in one transaction) and given back if the job fails
//! ([`fail`]: refunded in the same transaction). Each network step's
//! progress is stored on the row of what it makes (the directory topic,
//! a name's version topic and directory entry, a version's entry), before
//! the step is taken, so a restart resumes it and nothing is written twice.

use crate::params;
use crate::sql::{Conn, Optional, Row, Value};

use super::credits::{self, Billed, Short};
use super::inscriptions::{self, Job as Part};
use super::{closed, idempotency, Failure};

pub use super::inscriptions::Status;

/// What [`may_publish`] and [`claim`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The name is the account's now (new, or already its own) and the
    /// version is recorded.
    Taken,
    /// Another account owns the name.
    NotOwner { owner: String },
    /// The version is not above the latest one published.
    NotNewer { latest: String },
}

/// Who owns `name`, if anyone.
pub fn owner(conn: &Conn, name: &str) -> Result<Option<String>, Failure> {
    conn.query_row("SELECT owner FROM skill_names WHERE name = ?1", [name], |r| r.get(0)).optional()
}

/// `name`'s versions, in semantic-version order.
pub fn versions(conn: &Conn, name: &str) -> Result<Vec<semver::Version>, Failure> {
    let texts = conn.query_map("SELECT version FROM skill_versions WHERE name = ?1", [name], |r| r.get::<String>(0))?;
    let mut versions = texts
        .iter()
        .map(|t| semver::Version::parse(t).map_err(|e| Failure::Corrupt(format!("skill {name} version {t}: {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    versions.sort();
    Ok(versions)
}

/// Whether `account` may publish `name` at `version`: the name is new or
/// the account's, and the version is above every one published. Versions
/// compare by SemVer precedence (section 11), where build metadata counts
/// for nothing: `1.0.0+build2` is not above `1.0.0`.
pub fn may_publish(conn: &Conn, name: &str, version: &semver::Version, account: &str) -> Result<Claim, Failure> {
    if let Some(owner) = owner(conn, name)?.filter(|owner| owner != account) {
        return Ok(Claim::NotOwner { owner });
    }
    let latest = versions(conn, name)?.pop();
    if let Some(latest) = latest.filter(|latest| latest.cmp_precedence(version).is_ge()) {
        return Ok(Claim::NotNewer { latest: latest.to_string() });
    }
    Ok(Claim::Taken)
}

/// Claims `name` at `version` for `account` at `now` (ms), when
/// [`may_publish`] allows it.
pub fn claim(conn: &Conn, name: &str, version: &semver::Version, account: &str, now: i64) -> Result<Claim, Failure> {
    let verdict = may_publish(conn, name, version, account)?;
    if verdict != Claim::Taken {
        return Ok(verdict);
    }
    conn.execute(
        "INSERT INTO skill_names (name, owner, created_at) VALUES (?1, ?2, ?3) ON CONFLICT (name) DO NOTHING",
        params![name, account, now],
    )?;
    conn.execute(
        "INSERT INTO skill_versions (name, version, account, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![name, version.to_string(), account, now],
    )?;
    Ok(Claim::Taken)
}

/// Sets whether `account` upvotes `name` at `now` (ms).
pub fn vote(conn: &Conn, name: &str, account: &str, upvoted: bool, now: i64) -> Result<(), Failure> {
    match upvoted {
        true => conn.execute(
            "INSERT INTO skill_votes (name, account, at) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
            params![name, account, now],
        )?,
        false => conn.execute("DELETE FROM skill_votes WHERE name = ?1 AND account = ?2", params![name, account])?,
    };
    Ok(())
}

/// `name`'s upvotes, and whether `account` is among them.
pub fn votes(conn: &Conn, name: &str, account: Option<&str>) -> Result<(u64, bool), Failure> {
    let count: i64 = conn.query_row("SELECT COUNT(*) FROM skill_votes WHERE name = ?1", [name], |r| r.get(0))?;
    let mine = match account {
        Some(account) => conn
            .query_row("SELECT 1 FROM skill_votes WHERE name = ?1 AND account = ?2", params![name, account], |_| Ok(()))
            .optional()?
            .is_some(),
        None => false,
    };
    Ok((count as u64, mine))
}

/// Takes `name` back from a version that was not published: the version
/// is free again, and so is the name if nothing of it reached the
/// network.
fn release(conn: &Conn, name: &str, version: &str) -> Result<(), Failure> {
    conn.execute("DELETE FROM skill_versions WHERE name = ?1 AND version = ?2", params![name, version])?;
    conn.execute(
        "DELETE FROM skill_names WHERE name = ?1 AND topic_tx IS NULL
         AND NOT EXISTS (SELECT 1 FROM skill_versions v WHERE v.name = skill_names.name)",
        [name],
    )?;
    Ok(())
}

/// A name's row: who owns it and how far its registration on the network
/// went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Name {
    pub name: String,
    pub owner: String,
    /// The version topic's creation, then the topic.
    pub topic_tx: Option<String>,
    pub version_topic: Option<String>,
    /// Its entry in the directory, then the entry's sequence number (the
    /// skill's uid, as HCS-26 numbers skills).
    pub register_tx: Option<String>,
    pub skill_uid: Option<i64>,
    pub verified: bool,
    pub created_at: i64,
}

const NAME: &str =
    "SELECT name, owner, topic_tx, version_topic, register_tx, skill_uid, verified, created_at FROM skill_names";

fn name_row(r: &Row<'_>) -> Result<Name, Failure> {
    Ok(Name {
        name: r.get(0)?,
        owner: r.get(1)?,
        topic_tx: r.get(2)?,
        version_topic: r.get(3)?,
        register_tx: r.get(4)?,
        skill_uid: r.get(5)?,
        verified: r.get::<i64>(6)? != 0,
        created_at: r.get(7)?,
    })
}

pub fn name(conn: &Conn, name: &str) -> Result<Option<Name>, Failure> {
    conn.query_row(&format!("{NAME} WHERE name = ?1"), [name], name_row).optional()
}

/// A step of a name's registration, stored before (`Creating…`,
/// `Registering`) or after it is taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NameStep {
    CreatingTopic { tx: String },
    TopicCreated { topic: String },
    Registering { tx: String },
    Registered { uid: i64 },
}

pub fn name_step(conn: &Conn, name: &str, step: &NameStep) -> Result<(), Failure> {
    let changed = match step {
        NameStep::CreatingTopic { tx } => {
            conn.execute("UPDATE skill_names SET topic_tx = ?2 WHERE name = ?1", params![name, tx])?
        }
        NameStep::TopicCreated { topic } => {
            conn.execute("UPDATE skill_names SET version_topic = ?2 WHERE name = ?1", params![name, topic])?
        }
        NameStep::Registering { tx } => {
            conn.execute("UPDATE skill_names SET register_tx = ?2 WHERE name = ?1", params![name, tx])?
        }
        NameStep::Registered { uid } => {
            conn.execute("UPDATE skill_names SET skill_uid = ?2 WHERE name = ?1", params![name, uid])?
        }
    };
    if changed != 1 {
        return Err(Failure::Corrupt(format!("skill name {name} is not stored")));
    }
    Ok(())
}

/// The registry's directory topic: its creation, then the topic.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Directory {
    pub topic_tx: Option<String>,
    pub topic_id: Option<String>,
}

pub fn directory(conn: &Conn) -> Result<Directory, Failure> {
    Ok(conn
        .query_row("SELECT topic_tx, topic_id FROM skill_directory WHERE id = 1", [], |r| {
            Ok(Directory { topic_tx: r.get(0)?, topic_id: r.get(1)? })
        })
        .optional()?
        .unwrap_or_default())
}

/// Stores `directory` as the registry's.
pub fn set_directory(conn: &Conn, directory: &Directory) -> Result<(), Failure> {
    conn.execute(
        "INSERT INTO skill_directory (id, topic_tx, topic_id) VALUES (1, ?1, ?2)
         ON CONFLICT (id) DO UPDATE SET topic_tx = excluded.topic_tx, topic_id = excluded.topic_id",
        params![directory.topic_tx, directory.topic_id],
    )?;
    Ok(())
}

/// A price given for a package, for a while.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quote {
    pub id: String,
    pub account: String,
    /// SHA-256 over the package's files (`crate::broker::skills`).
    pub package_hash: String,
    pub name: String,
    pub version: String,
    pub credits: i64,
    pub usd_cents: i64,
    pub created_at: i64,
    pub expires_at: i64,
}

pub fn insert_quote(conn: &Conn, q: &Quote) -> Result<(), Failure> {
    conn.execute("DELETE FROM skill_quotes WHERE expires_at < ?1", [q.created_at - 86_400_000])?;
    conn.execute(
        "INSERT INTO skill_quotes (id, account, package_hash, name, version, credits, usd_cents, created_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![q.id, q.account, q.package_hash, q.name, q.version, q.credits, q.usd_cents, q.created_at, q.expires_at],
    )?;
    Ok(())
}

pub fn quote(conn: &Conn, id: &str) -> Result<Option<Quote>, Failure> {
    conn.query_row(
        "SELECT id, account, package_hash, name, version, credits, usd_cents, created_at, expires_at
             FROM skill_quotes WHERE id = ?1",
        [id],
        |r| {
            Ok(Quote {
                id: r.get(0)?,
                account: r.get(1)?,
                package_hash: r.get(2)?,
                name: r.get(3)?,
                version: r.get(4)?,
                credits: r.get(5)?,
                usd_cents: r.get(6)?,
                created_at: r.get(7)?,
                expires_at: r.get(8)?,
            })
        },
    )
    .optional()
}

/// A publish job: one version of a skill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    pub id: String,
    pub account: String,
    pub idempotency_key: Option<String>,
    pub quote_id: Option<String>,
    pub name: String,
    pub version: String,
    pub status: Status,
    /// The package as read, JSON (`crate::broker::skills::Listing`): its
    /// metadata and each file with the id of the part that writes it.
    pub listing: String,
    /// What a search matches (lower case).
    pub terms: String,
    pub credits: i64,
    pub usd_cents: i64,
    pub tinybars: i64,
    /// The part that writes the manifest, once the files are written.
    pub manifest_job: Option<String>,
    /// The version's entry on the version topic: its transaction, then
    /// its sequence number.
    pub version_tx: Option<String>,
    pub version_seq: Option<i64>,
    pub failure: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

const JOB: &str = "SELECT id, account, idempotency_key, quote_id, name, version, status, listing, terms, credits,
                          usd_cents, tinybars, manifest_job, version_tx, version_seq, failure, created_at, updated_at
                   FROM skill_jobs";

fn job_row(r: &Row<'_>) -> Result<Job, Failure> {
    Ok(Job {
        id: r.get(0)?,
        account: r.get(1)?,
        idempotency_key: r.get(2)?,
        quote_id: r.get(3)?,
        name: r.get(4)?,
        version: r.get(5)?,
        status: closed(r, 6)?,
        listing: r.get(7)?,
        terms: r.get(8)?,
        credits: r.get(9)?,
        usd_cents: r.get(10)?,
        tinybars: r.get(11)?,
        manifest_job: r.get(12)?,
        version_tx: r.get(13)?,
        version_seq: r.get(14)?,
        failure: r.get(15)?,
        created_at: r.get(16)?,
        updated_at: r.get(17)?,
    })
}

pub fn job(conn: &Conn, id: &str) -> Result<Option<Job>, Failure> {
    conn.query_row(&format!("{JOB} WHERE id = ?1"), [id], job_row).optional()
}

/// The publish jobs not yet completed or failed, oldest first.
pub fn open_jobs(conn: &Conn) -> Result<Vec<Job>, Failure> {
    let rows = conn.query_map(
        &format!("{JOB} WHERE status IN ('pending', 'in_progress') ORDER BY created_at, id"),
        [],
        job_row,
    )?;
    Ok(rows)
}

/// What [`publish`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum Published {
    /// Claimed, charged and stored.
    Done(Box<Job>),
    /// A request with the same idempotency key made this job already.
    Replayed(Box<Job>),
    NotOwner {
        owner: String,
    },
    NotNewer {
        latest: String,
    },
    /// The balance does not cover it.
    Short {
        balance: i64,
        shortfall: i64,
    },
    /// The account has this many publish jobs open already.
    Busy(usize),
    /// The quote was used by another job.
    QuoteUsed,
    /// The idempotency key was used with another request: nothing stored.
    KeyReused,
}

/// Stores publish `job` with its `parts` (each file's inscription job and
/// content): the version claimed for the account, the quote used, the
/// credits debited; nothing of it when any of those is refused.
pub fn publish(
    conn: &Conn,
    job: &Job,
    parts: &[(Part, Vec<u8>)],
    key: Option<&idempotency::Key>,
    max_open: usize,
) -> Result<Published, Failure> {
    if let Some(key) = key {
        if idempotency::judge(conn, key)? == idempotency::Claimed::Reused {
            return Ok(Published::KeyReused);
        }
        let found = conn
            .query_row(
                &format!("{JOB} WHERE account = ?1 AND idempotency_key = ?2"),
                params![job.account, key.key],
                job_row,
            )
            .optional()?;
        if let Some(found) = found {
            return Ok(Published::Replayed(Box::new(found)));
        }
    }
    let open: i64 = conn.query_row(
        "SELECT COUNT(*) FROM skill_jobs WHERE account = ?1 AND status IN ('pending', 'in_progress')",
        [&job.account],
        |r| r.get(0),
    )?;
    if open as usize >= max_open {
        return Ok(Published::Busy(open as usize));
    }
    // The steps below write as they go: a refusal undoes them all.
    let steps = || {
        let outcome = publish_steps(conn, job, parts)?;
        if let (Published::Done(_), Some(key)) = (&outcome, key) {
            idempotency::record(conn, key, job.created_at)?;
        }
        Ok(outcome)
    };
    super::all_or_nothing(conn, steps, |p| matches!(p, Published::Done(_)))
}

fn publish_steps(conn: &Conn, job: &Job, parts: &[(Part, Vec<u8>)]) -> Result<Published, Failure> {
    let version = semver::Version::parse(&job.version)
        .map_err(|e| Failure::Corrupt(format!("skill {} version {}: {e}", job.name, job.version)))?;
    match claim(conn, &job.name, &version, &job.account, job.created_at)? {
        Claim::Taken => {}
        Claim::NotOwner { owner } => return Ok(Published::NotOwner { owner }),
        Claim::NotNewer { latest } => return Ok(Published::NotNewer { latest }),
    }
    if let Some(quote) = &job.quote_id {
        let used = conn.execute(
            "UPDATE skill_quotes SET used_by = ?2 WHERE id = ?1 AND used_by IS NULL",
            params![quote, job.id],
        )?;
        if used == 0 {
            return Ok(Published::QuoteUsed);
        }
    }
    if let Err(Short { balance, shortfall }) = credits::charge(conn, billed(job), job.created_at)? {
        return Ok(Published::Short { balance, shortfall });
    }
    conn.execute(
        "INSERT INTO skill_jobs
         (id, account, idempotency_key, quote_id, name, version, status, listing, terms, credits, usd_cents, tinybars,
          created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13)",
        params![
            job.id,
            job.account,
            job.idempotency_key,
            job.quote_id,
            job.name,
            job.version,
            job.status.as_str(),
            job.listing,
            job.terms,
            job.credits,
            job.usd_cents,
            job.tinybars,
            job.created_at
        ],
    )?;
    for (part, content) in parts {
        inscriptions::create_part(conn, part, content)?;
    }
    Ok(Published::Done(Box::new(job.clone())))
}

/// A step of a publish job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// The files are written; `part` writes the manifest.
    Manifest { part: String },
    /// The version's entry is about to be sent as transaction `tx`.
    Registering { tx: String },
    /// The version's entry reached consensus as message `seq`: published.
    Completed { seq: i64 },
}

pub fn step(conn: &Conn, id: &str, step: &Step, at: i64) -> Result<(), Failure> {
    let changed = match step {
        Step::Manifest { part } => conn.execute(
            "UPDATE skill_jobs SET manifest_job = ?2, status = 'in_progress', updated_at = ?3 WHERE id = ?1",
            params![id, part, at],
        )?,
        Step::Registering { tx } => conn.execute(
            "UPDATE skill_jobs SET version_tx = ?2, status = 'in_progress', updated_at = ?3 WHERE id = ?1",
            params![id, tx, at],
        )?,
        Step::Completed { seq } => conn.execute(
            "UPDATE skill_jobs SET version_seq = ?2, status = 'completed', updated_at = ?3 WHERE id = ?1",
            params![id, seq, at],
        )?,
    };
    if changed != 1 {
        return Err(Failure::Corrupt(format!("skill job {id} is not stored")));
    }
    Ok(())
}

/// Marks job `id` started (its files being written) at `at`.
pub fn start(conn: &Conn, id: &str, at: i64) -> Result<(), Failure> {
    conn.execute(
        "UPDATE skill_jobs SET status = 'in_progress', updated_at = ?2 WHERE id = ?1 AND status = 'pending'",
        params![id, at],
    )?;
    Ok(())
}

/// Stores the manifest's `part` and its content, and records it as job
/// `parent`'s manifest, in one step.
pub fn add_manifest(conn: &Conn, parent: &str, part: &Part, content: &[u8], at: i64) -> Result<(), Failure> {
    inscriptions::create_part(conn, part, content)?;
    step(conn, parent, &Step::Manifest { part: part.id.clone() }, at)
}

/// Fails job `id` for `why`, once: refunded, its open parts failed, its
/// version given back.
pub fn fail(conn: &Conn, id: &str, why: &str, at: i64) -> Result<(), Failure> {
    let Some(job) = job(conn, id)? else { return Err(Failure::Corrupt(format!("skill job {id} is not stored"))) };
    if matches!(job.status, Status::Completed | Status::Failed) {
        return Ok(());
    }
    conn.execute(
        "UPDATE skill_jobs SET status = 'failed', failure = ?2, updated_at = ?3 WHERE id = ?1",
        params![id, why, at],
    )?;
    conn.execute(
        "UPDATE inscription_jobs SET status = 'failed', failure = ?2, updated_at = ?3
         WHERE parent = ?1 AND status IN ('pending', 'in_progress')",
        params![id, format!("the skill publish failed: {why}"), at],
    )?;
    release(conn, &job.name, &job.version)?;
    credits::refund(conn, billed(&job), at)
}

/// How publish job `job` is charged.
fn billed(job: &Job) -> Billed<'_> {
    Billed { kind: "skill-publish", id: &job.id, reason: "skill publish", account: &job.account, credits: job.credits }
}

/// Which published versions a listing holds.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// One skill's versions (all of them), or the latest of each.
    pub name: Option<String>,
    pub version: Option<String>,
    /// Published by this account.
    pub account: Option<String>,
    /// Words each found in the name, description or tags (lower case).
    pub words: Vec<String>,
}

/// Where a page of a listing starts: after the version created at
/// `.0` with job id `.1` (newest first).
pub type Cursor = (i64, String);

/// Published versions matching `filter`, newest first, after `cursor`, at
/// most `limit`; O(log n + limit) on the name index with a name, a scan of
/// the completed jobs without.
pub fn published(conn: &Conn, filter: &Filter, after: Option<&Cursor>, limit: usize) -> Result<Vec<Job>, Failure> {
    let mut sql = format!("{JOB} j WHERE status = 'completed'");
    let mut values: Vec<Value> = Vec::new();
    let mut bind = |sql: &mut String, clause: &str, value: Value| {
        values.push(value);
        sql.push_str(&clause.replace('?', &format!("?{}", values.len())));
    };
    match &filter.name {
        Some(name) => bind(&mut sql, " AND name = ?", name.clone().into()),
        None => sql.push_str(
            " AND NOT EXISTS (SELECT 1 FROM skill_jobs k WHERE k.name = j.name AND k.status = 'completed'
               AND (k.created_at > j.created_at OR (k.created_at = j.created_at AND k.id > j.id)))",
        ),
    }
    if let Some(version) = &filter.version {
        bind(&mut sql, " AND version = ?", version.clone().into());
    }
    if let Some(account) = &filter.account {
        bind(&mut sql, " AND account = ?", account.clone().into());
    }
    for word in &filter.words {
        let escaped = word.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
        let clause = format!(" AND terms {} ? ESCAPE '\\'", conn.dialect().like());
        bind(&mut sql, &clause, format!("%{escaped}%").into());
    }
    if let Some((at, id)) = after {
        values.push((*at).into());
        values.push(id.clone().into());
        let (a, b) = (values.len() - 1, values.len());
        sql.push_str(&format!(" AND (created_at < ?{a} OR (created_at = ?{a} AND id < ?{b}))"));
    }
    values.push((limit as i64).into());
    sql.push_str(&format!(" ORDER BY created_at DESC, id DESC LIMIT ?{}", values.len()));
    conn.query_map(&sql, values.as_slice(), job_row)
}

/// The names `account` owns with a published version, oldest first, at
/// most `limit`.
pub fn owned(conn: &Conn, account: &str, limit: usize) -> Result<Vec<Name>, Failure> {
    let rows = conn.query_map(
        &format!(
            "{NAME} WHERE owner = ?1 AND EXISTS
           (SELECT 1 FROM skill_jobs j WHERE j.name = skill_names.name AND j.status = 'completed')
         ORDER BY created_at, name LIMIT ?2"
        ),
        params![account, limit as i64],
        name_row,
    )?;
    Ok(rows)
}

/// The names `account` upvoted, newest vote first, after the vote at
/// `after` (its time and name), at most `limit`.
pub fn upvoted(
    conn: &Conn,
    account: &str,
    after: Option<&Cursor>,
    limit: usize,
) -> Result<Vec<(i64, String)>, Failure> {
    let (at, after_name) = after.cloned().unwrap_or((i64::MAX, String::new()));
    let rows = conn.query_map(
        "SELECT at, name FROM skill_votes WHERE account = ?1 AND (at < ?2 OR (at = ?2 AND name < ?3))
           AND EXISTS (SELECT 1 FROM skill_jobs j WHERE j.name = skill_votes.name AND j.status = 'completed')
         ORDER BY at DESC, name DESC LIMIT ?4",
        params![account, at, after_name, limit as i64],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok(rows)
}

/// `part`'s jobs, by id: the publish job's files and manifest.
pub fn parts(conn: &Conn, job: &str) -> Result<Vec<Part>, Failure> {
    inscriptions::parts(conn, job)
}

shared::vocabulary! {
    /// How soon a verification is reviewed (the hosted broker's tiers).
    Tier, TIERS {
        Basic = "basic",
        Express = "express",
    }
}

shared::vocabulary! {
    /// Where a verification request stands.
    Review, REVIEWS {
        Pending = "pending",
        Approved = "approved",
        Rejected = "rejected",
    }
}

/// A request that a skill be verified by the registry's operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verification {
    pub id: String,
    pub name: String,
    pub account: String,
    pub tier: Tier,
    pub status: Review,
    pub version: Option<String>,
    pub credits: i64,
    pub usd_cents: i64,
    pub decided_by: Option<String>,
    pub decided_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

const VERIFICATION: &str = "SELECT id, name, account, tier, status, version, credits, usd_cents, decided_by,
                                   decided_at, created_at, updated_at FROM skill_verifications";

fn verification_row(r: &Row<'_>) -> Result<Verification, Failure> {
    Ok(Verification {
        id: r.get(0)?,
        name: r.get(1)?,
        account: r.get(2)?,
        tier: closed(r, 3)?,
        status: closed(r, 4)?,
        version: r.get(5)?,
        credits: r.get(6)?,
        usd_cents: r.get(7)?,
        decided_by: r.get(8)?,
        decided_at: r.get(9)?,
        created_at: r.get(10)?,
        updated_at: r.get(11)?,
    })
}

/// `name`'s verification requests, newest first.
pub fn verifications(conn: &Conn, name: &str) -> Result<Vec<Verification>, Failure> {
    let rows = conn.query_map(
        &format!("{VERIFICATION} WHERE name = ?1 ORDER BY created_at DESC, id DESC"),
        [name],
        verification_row,
    )?;
    Ok(rows)
}

/// What [`request_verification`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum Requested {
    Done(Box<Verification>),
    /// A request is pending already.
    Pending(Box<Verification>),
    Short {
        balance: i64,
        shortfall: i64,
    },
}

/// Stores request `v` and charges it, unless one is pending already.
pub fn request_verification(conn: &Conn, v: &Verification) -> Result<Requested, Failure> {
    if let Some(pending) = verifications(conn, &v.name)?.into_iter().find(|p| p.status == Review::Pending) {
        return Ok(Requested::Pending(Box::new(pending)));
    }
    let billed = Billed {
        kind: "skill-verification",
        id: &v.id,
        reason: "skill verification",
        account: &v.account,
        credits: v.credits,
    };
    if let Err(Short { balance, shortfall }) = credits::charge(conn, billed, v.created_at)? {
        return Ok(Requested::Short { balance, shortfall });
    }
    conn.execute(
        "INSERT INTO skill_verifications
         (id, name, account, tier, status, version, credits, usd_cents, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
        params![
            v.id,
            v.name,
            v.account,
            v.tier.as_str(),
            v.status.as_str(),
            v.version,
            v.credits,
            v.usd_cents,
            v.created_at
        ],
    )?;
    Ok(Requested::Done(Box::new(v.clone())))
}

/// Decides pending request `id` as `status` (by the operator `by`): an
/// approval verifies the skill. `None` when there is no such pending
/// request.
pub fn decide(conn: &Conn, id: &str, status: Review, by: &str, at: i64) -> Result<Option<Verification>, Failure> {
    debug_assert!(status != Review::Pending, "a decision approves or rejects");
    let changed = conn.execute(
        "UPDATE skill_verifications SET status = ?2, decided_by = ?3, decided_at = ?4, updated_at = ?4
         WHERE id = ?1 AND status = 'pending'",
        params![id, status.as_str(), by, at],
    )?;
    if changed == 0 {
        return Ok(None);
    }
    let decided = conn.query_row(&format!("{VERIFICATION} WHERE id = ?1"), [id], verification_row)?;
    if status == Review::Approved {
        conn.execute("UPDATE skill_names SET verified = 1 WHERE name = ?1", [&decided.name])?;
    }
    Ok(Some(decided))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credits::{Change, Kind};

    #[test]
    fn a_name_is_its_first_publishers_and_its_versions_only_increase() {
        for engine in crate::testing::ENGINES {
            let (_scratch, conn) = crate::testing::migrated(engine);
            let v = |t: &str| semver::Version::parse(t).unwrap();
            // (account, version) -> what the claim finds
            let cases = [
                ("0.0.1001", "1.0.0", Claim::Taken),
                ("0.0.1002", "2.0.0", Claim::NotOwner { owner: "0.0.1001".into() }),
                ("0.0.1001", "1.0.0", Claim::NotNewer { latest: "1.0.0".into() }),
                ("0.0.1001", "1.0.0-beta.1", Claim::NotNewer { latest: "1.0.0".into() }),
                ("0.0.1001", "1.10.0", Claim::Taken),
                ("0.0.1001", "1.9.9", Claim::NotNewer { latest: "1.10.0".into() }),
                // Build metadata has no precedence (SemVer 2.0 section 10).
                ("0.0.1001", "1.10.0+build2", Claim::NotNewer { latest: "1.10.0".into() }),
                ("0.0.1001", "1.10.1+build1", Claim::Taken),
            ];
            for (account, version, found) in cases {
                assert_eq!(claim(&conn, "web-search", &v(version), account, 1).unwrap(), found, "{account} {version}");
            }
            assert_eq!(versions(&conn, "web-search").unwrap(), [v("1.0.0"), v("1.10.0"), v("1.10.1+build1")]);
            assert_eq!(owner(&conn, "web-search").unwrap().as_deref(), Some("0.0.1001"));
        }
    }

    #[test]
    fn an_account_upvotes_a_name_once() {
        for engine in crate::testing::ENGINES {
            let (_scratch, conn) = crate::testing::migrated(engine);
            for (account, upvoted) in [("a", true), ("a", true), ("b", true), ("b", false), ("c", true)] {
                vote(&conn, "web-search", account, upvoted, 1).unwrap();
            }
            assert_eq!(votes(&conn, "web-search", Some("a")).unwrap(), (2, true));
            assert_eq!(votes(&conn, "web-search", Some("b")).unwrap(), (2, false));
            assert_eq!(votes(&conn, "web-search", None).unwrap(), (2, false));
        }
    }

    fn publish_job(id: &str, account: &str, version: &str, credits: i64) -> Job {
        Job {
            id: id.into(),
            account: account.into(),
            idempotency_key: None,
            quote_id: None,
            name: "web-search".into(),
            version: version.into(),
            status: Status::Pending,
            listing: "{}".into(),
            terms: "web-search".into(),
            credits,
            usd_cents: 1,
            tinybars: 1,
            manifest_job: None,
            version_tx: None,
            version_seq: None,
            failure: None,
            created_at: 1,
            updated_at: 1,
        }
    }

    fn part_of(parent: &str, id: &str) -> (Part, Vec<u8>) {
        let part = Part {
            id: id.into(),
            account: "0.0.1001".into(),
            idempotency_key: None,
            quote_id: None,
            status: Status::Pending,
            mode: "file".into(),
            file_name: Some("SKILL.md".into()),
            mime: "text/markdown".into(),
            size_bytes: 1,
            content_hash: "h".into(),
            messages: 1,
            credits: 0,
            usd_cents: 0,
            topic_tx: None,
            topic_id: None,
            written: 0,
            pending_tx: None,
            failure: None,
            parent: Some(parent.into()),
            created_at: 1,
            updated_at: 1,
        };
        (part, b"#".to_vec())
    }

    #[test]
    fn a_publish_is_claimed_charged_and_stored_together_and_a_failure_gives_it_all_back() {
        for engine in crate::testing::ENGINES {
            let (_scratch, conn) = crate::testing::migrated(engine);
            let grant = Change {
                account: "0.0.1001".into(),
                kind: Kind::Grant,
                credits: 10,
                idempotency_key: "g".into(),
                reason: "grant".into(),
                reference: None,
            };
            credits::post(&conn, &grant, 0).unwrap();
            let other = Change { account: "0.0.1002".into(), idempotency_key: "g2".into(), ..grant };
            credits::post(&conn, &other, 0).unwrap();
            let publish_keyed = |job: Job, key: Option<&idempotency::Key>| {
                publish(&conn, &job, &[part_of(&job.id, &format!("{}-part", job.id))], key, 4).unwrap()
            };
            let publish_one = |job: Job| publish_keyed(job, None);
            // Short: nothing of it stays, not even the name.
            assert_eq!(
                publish_one(publish_job("a", "0.0.1001", "1.0.0", 11)),
                Published::Short { balance: 10, shortfall: 1 }
            );
            assert_eq!(owner(&conn, "web-search").unwrap(), None);
            assert!(parts(&conn, "a").unwrap().is_empty());
            assert!(matches!(publish_one(publish_job("b", "0.0.1001", "1.0.0", 4)), Published::Done(_)));
            assert_eq!(
                publish_one(publish_job("c", "0.0.1002", "2.0.0", 1)),
                Published::NotOwner { owner: "0.0.1001".into() }
            );
            assert_eq!(
                publish_one(publish_job("d", "0.0.1001", "1.0.0", 1)),
                Published::NotNewer { latest: "1.0.0".into() }
            );
            assert_eq!(credits::balance(&conn, "0.0.1001").unwrap(), 6);
            assert_eq!(open_jobs(&conn).unwrap().len(), 1);
            assert_eq!(inscriptions::open_jobs(&conn).unwrap(), [], "parts run with their publish job");
            fail(&conn, "b", "refused", 2).unwrap();
            fail(&conn, "b", "refused", 3).unwrap();
            assert_eq!(credits::balance(&conn, "0.0.1001").unwrap(), 10, "refunded once");
            assert_eq!(parts(&conn, "b").unwrap()[0].status, Status::Failed);
            assert_eq!(owner(&conn, "web-search").unwrap(), None, "nothing reached the network: the name is free");
            assert!(matches!(publish_one(publish_job("e", "0.0.1002", "1.0.0", 1)), Published::Done(_)));
            // A key: its request again is the job it made; another request, refused.
            let key = |digest: &str| idempotency::Key {
                account: "0.0.1002".into(),
                scope: "skill-publish",
                key: "k".into(),
                digest: digest.into(),
            };
            let keyed = |id: &str| Job { idempotency_key: Some("k".into()), ..publish_job(id, "0.0.1002", "1.1.0", 1) };
            assert!(matches!(publish_keyed(keyed("f"), Some(&key("d1"))), Published::Done(_)));
            assert!(matches!(publish_keyed(keyed("g"), Some(&key("d1"))), Published::Replayed(j) if j.id == "f"));
            assert_eq!(publish_keyed(keyed("h"), Some(&key("d2"))), Published::KeyReused);
        }
    }
}
