//! The skills registry's names, versions and votes
//! (`crate::broker::skills`): a name is owned by the account that first
//! claimed it, and its versions only increase ([`claim`], one step in the
//! store's single writer, so two publishers cannot both take a name).

use rusqlite::{params, Connection, OptionalExtension};

use super::Failure;

/// What [`claim`] found.
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
pub fn owner(conn: &Connection, name: &str) -> Result<Option<String>, Failure> {
    Ok(conn.query_row("SELECT owner FROM skill_names WHERE name = ?1", [name], |r| r.get(0)).optional()?)
}

/// `name`'s versions, in semantic-version order.
pub fn versions(conn: &Connection, name: &str) -> Result<Vec<semver::Version>, Failure> {
    let mut statement = conn.prepare_cached("SELECT version FROM skill_versions WHERE name = ?1")?;
    let texts = statement.query_map([name], |r| r.get::<_, String>(0))?.collect::<Result<Vec<_>, _>>()?;
    let mut versions = texts
        .iter()
        .map(|t| semver::Version::parse(t).map_err(|e| Failure::Corrupt(format!("skill {name} version {t}: {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    versions.sort();
    Ok(versions)
}

/// Claims `name` at `version` for `account` at `now` (ms): taken when the
/// name is new or the account's and the version is above every one
/// published.
pub fn claim(
    conn: &Connection,
    name: &str,
    version: &semver::Version,
    account: &str,
    now: i64,
) -> Result<Claim, Failure> {
    match owner(conn, name)? {
        Some(owner) if owner != account => return Ok(Claim::NotOwner { owner }),
        Some(_) => {}
        None => {
            conn.execute(
                "INSERT INTO skill_names (name, owner, created_at) VALUES (?1, ?2, ?3)",
                params![name, account, now],
            )?;
        }
    }
    if let Some(latest) = versions(conn, name)?.pop().filter(|latest| latest >= version) {
        return Ok(Claim::NotNewer { latest: latest.to_string() });
    }
    conn.execute(
        "INSERT INTO skill_versions (name, version, account, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![name, version.to_string(), account, now],
    )?;
    Ok(Claim::Taken)
}

/// Sets whether `account` upvotes `name` at `now` (ms).
pub fn vote(conn: &Connection, name: &str, account: &str, upvoted: bool, now: i64) -> Result<(), Failure> {
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
pub fn votes(conn: &Connection, name: &str, account: Option<&str>) -> Result<(u64, bool), Failure> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::migrated;

    #[test]
    fn a_name_is_its_first_publishers_and_its_versions_only_increase() {
        let (_dir, conn) = migrated();
        let v = |t: &str| semver::Version::parse(t).unwrap();
        // (account, version) -> what the claim finds
        let cases = [
            ("0.0.1001", "1.0.0", Claim::Taken),
            ("0.0.1002", "2.0.0", Claim::NotOwner { owner: "0.0.1001".into() }),
            ("0.0.1001", "1.0.0", Claim::NotNewer { latest: "1.0.0".into() }),
            ("0.0.1001", "1.0.0-beta.1", Claim::NotNewer { latest: "1.0.0".into() }),
            ("0.0.1001", "1.10.0", Claim::Taken),
            ("0.0.1001", "1.9.9", Claim::NotNewer { latest: "1.10.0".into() }),
        ];
        for (account, version, found) in cases {
            assert_eq!(claim(&conn, "web-search", &v(version), account, 1).unwrap(), found, "{account} {version}");
        }
        assert_eq!(versions(&conn, "web-search").unwrap(), [v("1.0.0"), v("1.10.0")]);
        assert_eq!(owner(&conn, "web-search").unwrap().as_deref(), Some("0.0.1001"));
    }

    #[test]
    fn an_account_upvotes_a_name_once() {
        let (_dir, conn) = migrated();
        for (account, upvoted) in [("a", true), ("a", true), ("b", true), ("b", false), ("c", true)] {
            vote(&conn, "web-search", account, upvoted, 1).unwrap();
        }
        assert_eq!(votes(&conn, "web-search", Some("a")).unwrap(), (2, true));
        assert_eq!(votes(&conn, "web-search", Some("b")).unwrap(), (2, false));
        assert_eq!(votes(&conn, "web-search", None).unwrap(), (2, false));
    }
}
