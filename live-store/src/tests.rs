//! The store on each engine: real SQLite files in a temporary folder, and
//! real databases of a throwaway PostgreSQL cluster.

use super::credits::{self, Change, Kind, Posted};
use super::testing::{location, ENGINES};
use super::*;

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
    for engine in ENGINES {
        let (_scratch, at) = location(engine, "sum");
        let store = Store::open(at, Settings::default()).unwrap();
        assert!(matches!(post(&store, change("0.0.1", Kind::Grant, 10, "g")).await, Posted::Done { balance: 10, .. }));
        assert!(matches!(post(&store, change("0.0.1", Kind::Debit, 4, "d1")).await, Posted::Done { balance: 6, .. }));
        assert_eq!(
            post(&store, change("0.0.1", Kind::Debit, 7, "d2")).await,
            Posted::Short { balance: 6, shortfall: 1 }
        );
        // Retried: the first outcome, nothing posted twice.
        let again = post(&store, change("0.0.1", Kind::Debit, 4, "d1")).await;
        assert!(matches!(again, Posted::Done { balance: 6, replayed: true, .. }), "{again:?}");
        // The key reused for another change: refused.
        assert!(matches!(post(&store, change("0.0.1", Kind::Debit, 5, "d1")).await, Posted::Conflict { .. }));
        let (balance, sum) = store
            .read(|conn| Ok((credits::balance(conn, "0.0.1")?, credits::ledger_sum(conn, "0.0.1")?)))
            .await
            .unwrap();
        assert_eq!((balance, sum), (6, 6), "{engine:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_debits_never_overspend() {
    for engine in ENGINES {
        let (_scratch, at) = location(engine, "race");
        let store = Store::open(at, Settings::default()).unwrap();
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
        assert_eq!(done, 1000, "{engine:?}");
        let balance = store.read(|conn| credits::ledger_sum(conn, "0.0.2")).await.unwrap();
        assert_eq!(balance, 0, "{engine:?}");
    }
}

/// Reads run on the store's reader threads, no more of them than
/// configured however many ask at once; a read that panics costs its
/// answer, not its thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reads_share_the_reader_threads_and_outlive_a_panic() {
    for engine in ENGINES {
        let settings = Settings { readers: 2, ..Settings::default() };
        let (_scratch, at) = location(engine, "readers");
        let store = Store::open(at, settings).unwrap();
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
}

#[tokio::test]
async fn a_failing_write_leaves_the_others() {
    for engine in ENGINES {
        let (_scratch, at) = location(engine, "savepoint");
        let store = Store::open(at, Settings::default()).unwrap();
        let failing = store.write(|conn| {
            conn.execute("INSERT INTO accounts (account_id, balance, created_at) VALUES ('a', 1, 0)", [])?;
            Err::<(), _>(Failure::Corrupt("on purpose".into()))
        });
        let passing = post(&store, change("b", Kind::Grant, 1, "g"));
        let (failing, _) = tokio::join!(failing, passing);
        assert!(failing.is_err());
        let names: Vec<String> = store
            .read(|conn| conn.query_map("SELECT account_id FROM accounts ORDER BY 1", [], |r| r.get(0)))
            .await
            .unwrap();
        assert_eq!(names, ["b"], "{engine:?}");
    }
}

/// The version a store records, read past the store.
fn recorded_version(at: &Location) -> i64 {
    match at {
        Location::File(path) => sqlite::version(&rusqlite::Connection::open(path).unwrap()).unwrap(),
        Location::Postgres(url) => pg::version(&mut postgres::Client::connect(url, postgres::NoTls).unwrap()).unwrap(),
    }
}

fn record_version(at: &Location, version: i64) {
    match at {
        Location::File(path) => rusqlite::Connection::open(path)
            .unwrap()
            .execute_batch(&format!("PRAGMA user_version = {version}"))
            .unwrap(),
        Location::Postgres(url) => {
            let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
            client.execute("UPDATE almanac_schema SET version = $1", &[&version]).unwrap();
        }
    }
}

#[test]
fn a_store_from_a_newer_version_is_refused_and_left_alone() {
    for engine in ENGINES {
        let (_scratch, at) = location(engine, "newer");
        drop(Store::open(at.clone(), Settings::default()).unwrap());
        let newer = MIGRATIONS.len() as i64 + 1;
        record_version(&at, newer);
        let Err(error) = Store::open(at.clone(), Settings::default()) else { panic!("opened") };
        assert!(matches!(error, OpenError::Newer { .. }), "{error}");
        assert!(error.to_string().contains("newer almanac"), "{error}");
        assert_eq!(recorded_version(&at), newer);
    }
}

#[test]
fn opening_twice_migrates_once_and_keeps_the_data() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for engine in ENGINES {
        let (_scratch, at) = location(engine, "reopen");
        let store = Store::open(at.clone(), Settings::default()).unwrap();
        runtime.block_on(post(&store, change("c", Kind::Grant, 3, "g")));
        drop(store);
        let store = Store::open(at.clone(), Settings::default()).unwrap();
        let balance = runtime.block_on(store.read(|conn| credits::balance(conn, "c"))).unwrap();
        assert_eq!(balance, 3);
        assert_eq!(recorded_version(&at), MIGRATIONS.len() as i64);
        if let Location::File(path) = &at {
            let mode: String =
                rusqlite::Connection::open(path).unwrap().query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
            assert_eq!(mode, "wal");
        }
    }
}

#[test]
fn both_dialects_have_every_step() {
    assert_eq!(MIGRATIONS.len(), MIGRATIONS_POSTGRES.len());
}

/// Stores sharing one PostgreSQL database (replicas) hear each other's
/// writes: what they follow the store by, instead of polling it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_through_one_replica_is_heard_by_the_other() {
    let (_scratch, at) = location(Dialect::Postgres, "notices");
    let one = Store::open(at.clone(), Settings::default()).unwrap();
    let other = Store::open(at, Settings::default()).unwrap();
    let mut heard = other.writes();
    heard.borrow_and_update();
    // The listener's first connection counts once; wait for a write's.
    post(&one, change("0.0.4", Kind::Grant, 5, "g")).await;
    loop {
        tokio::time::timeout(std::time::Duration::from_secs(10), heard.changed()).await.unwrap().unwrap();
        if other.read(|conn| credits::balance(conn, "0.0.4")).await.unwrap() == 5 {
            break;
        }
    }
    // And a store on SQLite hears its own.
    let (_folder, file) = location(Dialect::Sqlite, "notices");
    let alone = Store::open(file, Settings::default()).unwrap();
    let mut own = alone.writes();
    own.borrow_and_update();
    post(&alone, change("0.0.4", Kind::Grant, 1, "g")).await;
    assert!(own.has_changed().unwrap());
}

/// Two stores on one PostgreSQL database (two api replicas): debits of one
/// account posted through both at once spend exactly the balance, each
/// once, whatever order the database ran them in.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn debits_through_two_replicas_spend_exactly_the_balance() {
    let (_scratch, at) = location(Dialect::Postgres, "replica_debits");
    let replicas =
        [Store::open(at.clone(), Settings::default()).unwrap(), Store::open(at, Settings::default()).unwrap()];
    let (debits, granted) = (10_000, 7_500);
    post(&replicas[0], change("0.0.5", Kind::Grant, granted, "g")).await;
    let started = std::time::Instant::now();
    let tasks: Vec<_> = (0..debits)
        .map(|i| {
            let store = replicas[i % 2].clone();
            tokio::spawn(async move { post(&store, change("0.0.5", Kind::Debit, 1, &format!("d{i}"))).await })
        })
        .collect();
    let mut done = 0;
    for task in tasks {
        match task.await.unwrap() {
            Posted::Done { replayed: false, .. } => done += 1,
            Posted::Short { balance: 0, shortfall: 1 } => {}
            other => panic!("{other:?}"),
        }
    }
    eprintln!("{debits} debits through two replicas in {:?}", started.elapsed());
    assert_eq!(done, granted);
    let (balance, sum) = replicas[1]
        .read(|conn| Ok((credits::balance(conn, "0.0.5")?, credits::ledger_sum(conn, "0.0.5")?)))
        .await
        .unwrap();
    assert_eq!((balance, sum), (0, 0));
}
