//! Leases: work that must run on one api at a time, among replicas
//! sharing the store, is done by the holder of its lease. A holder renews
//! its lease well before it runs out; one that stops renewing (killed, cut
//! off from the store) loses it when it runs out, and another takes it.
//! Times are the holders' clocks (ms): replicas' clocks must agree to well
//! within a lease's length.

use crate::params;
use crate::sql::{Conn, Optional};
use crate::Failure;

/// Takes or renews lease `name` for `holder` until `until` (ms): true when
/// `holder` holds it now, false when another does and its lease has not
/// run out at `now`.
pub fn take(conn: &Conn, name: &str, holder: &str, now: i64, until: i64) -> Result<bool, Failure> {
    debug_assert!(until > now, "a lease ends after it is taken");
    let held = conn
        .query_row(
            "INSERT INTO leases (name, holder, until) VALUES (?1, ?2, ?3)
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until
             WHERE leases.holder = excluded.holder OR leases.until <= ?4
             RETURNING holder",
            params![name, holder, until, now],
            |r| r.get::<String>(0),
        )
        .optional()?;
    Ok(held.is_some())
}

/// Gives lease `name` up if `holder` holds it, so that another may take
/// it at once (a replica stopping).
pub fn give_up(conn: &Conn, name: &str, holder: &str) -> Result<(), Failure> {
    conn.execute("DELETE FROM leases WHERE name = ?1 AND holder = ?2", [name, holder])?;
    Ok(())
}

/// Who holds lease `name` and until when, if anyone ever took it.
pub fn holder(conn: &Conn, name: &str) -> Result<Option<(String, i64)>, Failure> {
    conn.query_row("SELECT holder, until FROM leases WHERE name = ?1", [name], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_held_by_one_until_it_runs_out_or_is_given_up() {
        for engine in crate::testing::ENGINES {
            let (_scratch, conn) = crate::testing::migrated(engine);
            // (holder, now, until) -> held
            let steps = [
                ("a", 0, 100, true),
                ("b", 50, 150, false),
                ("a", 90, 190, true),
                ("b", 189, 289, false),
                ("b", 190, 290, true),
                ("a", 200, 300, false),
            ];
            for (who, now, until, held) in steps {
                assert_eq!(take(&conn, "duties", who, now, until).unwrap(), held, "{engine:?}: {who} at {now}");
            }
            assert_eq!(holder(&conn, "duties").unwrap(), Some(("b".into(), 290)));
            give_up(&conn, "duties", "a").unwrap();
            assert_eq!(holder(&conn, "duties").unwrap().map(|(h, _)| h).as_deref(), Some("b"), "not a's to give");
            give_up(&conn, "duties", "b").unwrap();
            assert!(take(&conn, "duties", "a", 201, 301).unwrap(), "given up: taken at once");
        }
    }
}
