//! The store against real SQLite files in a temporary folder.

use super::credits::{self, Change, Kind, Posted};
use super::*;

/// A fresh folder, removed when the test ends, and the store's path in it.
fn temp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new().prefix(&format!("almanac-store-{name}-")).tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    (dir, path)
}

fn change(account: &str, kind: Kind, credits: i64, key: &str) -> Change {
    Change {
        account: account.into(),
        kind,
        credits,
        idempotency_key: key.into(),
        reason: "test".into(),
        reference: None,
    }
}

async fn post(store: &Store, c: Change) -> Posted {
    store.write(move |conn| credits::post(conn, &c, now_ms())).await.unwrap()
}

#[tokio::test]
async fn a_balance_is_the_sum_of_its_transactions_and_never_negative() {
    let (_dir, path) = temp("sum");
    let store = Store::open(&path, Settings::default()).unwrap();
    assert!(matches!(post(&store, change("0.0.1", Kind::Grant, 10, "g")).await, Posted::Done { balance: 10, .. }));
    assert!(matches!(post(&store, change("0.0.1", Kind::Debit, 4, "d1")).await, Posted::Done { balance: 6, .. }));
    assert_eq!(post(&store, change("0.0.1", Kind::Debit, 7, "d2")).await, Posted::Short { balance: 6, shortfall: 1 });
    // Retried: the first outcome, nothing posted twice.
    let again = post(&store, change("0.0.1", Kind::Debit, 4, "d1")).await;
    assert!(matches!(again, Posted::Done { balance: 6, replayed: true, .. }), "{again:?}");
    // The key reused for another change: refused.
    assert!(matches!(post(&store, change("0.0.1", Kind::Debit, 5, "d1")).await, Posted::Conflict { .. }));
    let (balance, sum) =
        store.read(|conn| Ok((credits::balance(conn, "0.0.1")?, credits::ledger_sum(conn, "0.0.1")?))).await.unwrap();
    assert_eq!((balance, sum), (6, 6));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_debits_never_overspend() {
    let (_dir, path) = temp("race");
    let store = Store::open(&path, Settings::default()).unwrap();
    post(&store, change("0.0.2", Kind::Grant, 1000, "g")).await;
    let tasks: Vec<_> = (0..1500)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move { post(&store, change("0.0.2", Kind::Debit, 1, &format!("d{i}"))).await })
        })
        .collect();
    let mut done = 0;
    for task in tasks {
        match task.await.unwrap() {
            Posted::Done { .. } => done += 1,
            Posted::Short { balance: 0, shortfall: 1 } => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(done, 1000);
    let balance = store.read(|conn| credits::ledger_sum(conn, "0.0.2")).await.unwrap();
    assert_eq!(balance, 0);
}

/// Reads run on the store's reader threads, no more of them than
/// configured however many ask at once; a read that panics costs its
/// answer, not its thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reads_share_the_reader_threads_and_outlive_a_panic() {
    let settings = Settings { readers: 2, ..Settings::default() };
    let (_dir, path) = temp("readers");
    let store = Store::open(&path, settings).unwrap();
    post(&store, change("0.0.3", Kind::Grant, 7, "g")).await;
    let reads: Vec<_> = (0..200)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .read(|conn| {
                        let thread = std::thread::current();
                        Ok((thread.id(), thread.name().map(str::to_owned), credits::balance(conn, "0.0.3")?))
                    })
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut threads = std::collections::HashSet::new();
    for read in reads {
        let (id, name, balance) = read.await.unwrap();
        assert_eq!((name.as_deref(), balance), (Some("store-reader"), 7));
        threads.insert(id);
    }
    assert!(threads.len() <= 2, "{} threads read", threads.len());
    let panicked = store.read(|_| -> Result<(), Failure> { panic!("on purpose") }).await;
    assert!(matches!(panicked, Err(Failure::Closed)), "{panicked:?}");
    for _ in 0..4 {
        assert_eq!(store.read(|conn| credits::balance(conn, "0.0.3")).await.unwrap(), 7);
    }
}

#[tokio::test]
async fn a_failing_job_leaves_the_others_in_its_transaction() {
    let (_dir, path) = temp("savepoint");
    let store = Store::open(&path, Settings::default()).unwrap();
    let failing = store.write(|conn| {
        conn.execute("INSERT INTO accounts (account_id, balance, created_at) VALUES ('a', 1, 0)", [])?;
        Err::<(), _>(Failure::Corrupt("on purpose".into()))
    });
    let passing = post(&store, change("b", Kind::Grant, 1, "g"));
    let (failing, _) = tokio::join!(failing, passing);
    assert!(failing.is_err());
    let names: Vec<String> = store
        .read(|conn| {
            let mut s = conn.prepare("SELECT account_id FROM accounts ORDER BY 1")?;
            let rows = s.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
            Ok(rows)
        })
        .await
        .unwrap();
    assert_eq!(names, ["b"]);
}

#[test]
fn a_store_from_a_newer_version_is_refused_and_left_alone() {
    let (_dir, path) = temp("newer");
    drop(Store::open(&path, Settings::default()).unwrap());
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(&format!("PRAGMA user_version = {}", MIGRATIONS.len() + 1)).unwrap();
    drop(conn);
    let Err(error) = Store::open(&path, Settings::default()) else { panic!("opened") };
    assert!(matches!(error, OpenError::Newer { .. }), "{error}");
    assert!(error.to_string().contains("newer almanac"), "{error}");
    let conn = Connection::open(&path).unwrap();
    assert_eq!(version(&conn).unwrap(), MIGRATIONS.len() as i64 + 1);
}

#[test]
fn opening_twice_migrates_once_and_keeps_the_data() {
    let (_dir, path) = temp("reopen");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let store = Store::open(&path, Settings::default()).unwrap();
    runtime.block_on(post(&store, change("c", Kind::Grant, 3, "g")));
    drop(store);
    let store = Store::open(&path, Settings::default()).unwrap();
    let balance = runtime.block_on(store.read(|conn| credits::balance(conn, "c"))).unwrap();
    assert_eq!(balance, 3);
    let conn = Connection::open(&path).unwrap();
    assert_eq!(version(&conn).unwrap(), MIGRATIONS.len() as i64);
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
}
