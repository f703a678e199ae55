//! Writes to the adapter registry: categories, adapter submissions and the
//! adapters they publish. Categories and adapters are outbox events, so
//! the next build's catalog holds them.

use crate::params;
use crate::sql::{Conn, Optional};
use broker_model::catalog::{Category, RegistryEntry};
use broker_model::journal::Event;

use super::{closed, outbox, Failure};

fn json<T: serde::Serialize>(value: &T) -> Result<String, Failure> {
    serde_json::to_string(value).map_err(|e| Failure::Corrupt(e.to_string()))
}

fn parse<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> Result<T, Failure> {
    serde_json::from_str(text).map_err(|e| Failure::Corrupt(format!("{what}: {e}")))
}

/// How creating a category went.
#[derive(Debug, PartialEq)]
pub enum Created {
    /// New, as outbox event `seq`.
    Done { seq: i64, category: Box<Category> },
    /// The slug's category has this name and type already.
    Same(Box<Category>),
    /// The slug is another category's.
    Taken,
}

/// The stored category with `slug`.
pub fn category_by_slug(conn: &Conn, slug: &str) -> Result<Option<Category>, Failure> {
    let text: Option<String> =
        conn.query_row("SELECT category FROM adapter_categories WHERE slug = ?1", [slug], |r| r.get(0)).optional()?;
    text.map(|t| parse("a stored category", &t)).transpose()
}

/// Creates `category` (its id is set here: one past both the catalog's
/// `catalog_max` and the stored ones), unless its slug is taken.
pub fn create_category(conn: &Conn, mut category: Category, catalog_max: u64, now: i64) -> Result<Created, Failure> {
    if let Some(held) = category_outcome(category_by_slug(conn, &category.slug)?, &category) {
        return Ok(held);
    }
    let stored_max: u64 = conn.query_row("SELECT COALESCE(MAX(id), 0) FROM adapter_categories", [], |r| r.get(0))?;
    category.id = catalog_max.max(stored_max) + 1;
    let seq = outbox::push(conn, now, &Event::Category { category: Box::new(category.clone()) })?;
    conn.execute(
        "INSERT INTO adapter_categories (id, slug, category, seq, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![category.id, category.slug, json(&category)?, seq, now],
    )?;
    Ok(Created::Done { seq, category: Box::new(category) })
}

/// What a request for `wanted` comes to when `held` has its slug.
pub fn category_outcome(held: Option<Category>, wanted: &Category) -> Option<Created> {
    let held = held?;
    Some(match held.name == wanted.name && held.kind == wanted.kind {
        true => Created::Same(Box::new(held)),
        false => Created::Taken,
    })
}

/// Categories and adapters stored after `seq` (a build's journal point).
pub fn after(conn: &Conn, seq: i64) -> Result<(Vec<Category>, Vec<RegistryEntry>), Failure> {
    let mut categories = Vec::new();
    for text in conn.query_map("SELECT category FROM adapter_categories WHERE seq > ?1 ORDER BY seq", [seq], |r| {
        r.get::<String>(0)
    })? {
        categories.push(parse("a stored category", &text)?);
    }
    let mut adapters = Vec::new();
    for text in
        conn.query_map("SELECT entry FROM adapter_entries WHERE seq > ?1 ORDER BY seq", [seq], |r| r.get::<String>(0))?
    {
        adapters.push(parse("a stored adapter", &text)?);
    }
    Ok((categories, adapters))
}

/// The largest `seq` of a stored category or adapter (0: none).
pub fn newest(conn: &Conn) -> Result<i64, Failure> {
    let sql = format!(
        "SELECT {}(COALESCE((SELECT MAX(seq) FROM adapter_categories), 0),
                   COALESCE((SELECT MAX(seq) FROM adapter_entries), 0))",
        conn.dialect().greatest()
    );
    conn.query_row(&sql, [], |r| r.get(0))
}

/// A submission as its status route shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Submission {
    pub id: String,
    pub account: String,
    pub adapter_id: String,
    pub request: String,
    pub status: Status,
    pub error: Option<String>,
    pub result: Option<String>,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub completed_at: Option<i64>,
    pub updated_at: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Pending,
    Processing,
    Completed,
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Processing => "processing",
            Status::Completed => "completed",
            Status::Failed => "failed",
        }
    }
}

impl std::str::FromStr for Status {
    type Err = ();
    fn from_str(text: &str) -> Result<Status, ()> {
        [Status::Pending, Status::Processing, Status::Completed, Status::Failed]
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or(())
    }
}

pub fn submit(conn: &Conn, id: &str, account: &str, adapter_id: &str, request: &str, now: i64) -> Result<(), Failure> {
    conn.execute(
        "INSERT INTO adapter_submissions (id, account_id, adapter_id, request, status, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?5)",
        params![id, account, adapter_id, request, now],
    )?;
    Ok(())
}

pub fn submission(conn: &Conn, id: &str) -> Result<Option<Submission>, Failure> {
    let sql = "SELECT id, account_id, adapter_id, request, status, error, result, created_at, started_at,
                      completed_at, updated_at FROM adapter_submissions WHERE id = ?1";
    conn.query_row(sql, [id], |r| {
        Ok(Submission {
            id: r.get(0)?,
            account: r.get(1)?,
            adapter_id: r.get(2)?,
            request: r.get(3)?,
            status: closed(r, 4)?,
            error: r.get(5)?,
            result: r.get(6)?,
            created_at: r.get(7)?,
            started_at: r.get(8)?,
            completed_at: r.get(9)?,
            updated_at: r.get(10)?,
        })
    })
    .optional()
}

/// Marks a pending (or, after a restart, processing) submission as being
/// processed; `false` when it is neither.
pub fn claim(conn: &Conn, id: &str, now: i64) -> Result<bool, Failure> {
    let changed = conn.execute(
        "UPDATE adapter_submissions SET status = 'processing', started_at = COALESCE(started_at, ?2), updated_at = ?2
         WHERE id = ?1 AND status IN ('pending', 'processing')",
        params![id, now],
    )?;
    Ok(changed == 1)
}

/// Submissions not yet settled: what a start processes again.
pub fn unsettled(conn: &Conn) -> Result<Vec<String>, Failure> {
    let ids = conn.query_map(
        "SELECT id FROM adapter_submissions WHERE status IN ('pending', 'processing') ORDER BY created_at",
        [],
        |r| r.get(0),
    )?;
    Ok(ids)
}

/// Fails a submission with `error`.
pub fn fail(conn: &Conn, id: &str, error: &str, now: i64) -> Result<(), Failure> {
    conn.execute(
        "UPDATE adapter_submissions SET status = 'failed', error = ?2, completed_at = ?3, updated_at = ?3 WHERE id = ?1",
        params![id, error, now],
    )?;
    Ok(())
}

/// The account that published `adapter_id` here, if any.
pub fn owner(conn: &Conn, adapter_id: &str) -> Result<Option<String>, Failure> {
    conn.query_row("SELECT account_id FROM adapter_entries WHERE adapter_id = ?1", [adapter_id], |r| r.get(0))
        .optional()
}

/// Publishes a submission's adapter: the entry stored and journaled, the
/// submission completed with `result`. Returns the event's `seq`.
pub fn publish(
    conn: &Conn,
    id: &str,
    account: &str,
    entry: &RegistryEntry,
    result: &serde_json::Value,
    now: i64,
) -> Result<i64, Failure> {
    let seq = outbox::push(conn, now, &Event::Adapter { entry: Box::new(entry.clone()) })?;
    conn.execute(
        "INSERT INTO adapter_entries (adapter_id, account_id, entry, seq) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (adapter_id) DO UPDATE SET entry = ?3, seq = ?4",
        params![entry.adapter_id, account, json(entry)?, seq],
    )?;
    conn.execute(
        "UPDATE adapter_submissions SET status = 'completed', result = ?2, completed_at = ?3, updated_at = ?3 WHERE id = ?1",
        params![id, result.to_string(), now],
    )?;
    Ok(seq)
}
