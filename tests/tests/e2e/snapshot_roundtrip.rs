//! The api answers from a model loaded out of the snapshot; the generator
//! renders from the model the rules built. Every route, at default and other
//! parameters, must give the same bytes both ways.

use hcs20::analytics::Analytics;
use hcs20::routes::{Limits, Route};
use hcs20::tables;
use hcs20::{replay, Message, Topics};
use tests::datagen::random_corpus;

#[test]
fn snapshot_model_renders_every_route_identically() {
    let topics = Topics::MAINNET;
    let corpus = random_corpus(8_000, 42, topics);
    let messages: Vec<Message> = corpus.topic_messages().values().flatten().map(|m| m.to_message().unwrap()).collect();
    let (ledger, operations) = replay(&messages, topics);
    assert!(operations.iter().any(|o| o.rejection.is_some()), "the corpus has invalid messages");
    let limits = Limits::default();
    let built = Analytics::from_ledger(&ledger, limits.max_page_size);

    let dir = std::env::temp_dir().join(format!("almanac-snapshot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("test.duckdb");
    let meta = tables::Meta {
        build: String::new(),
        topics,
        recent_limit: limits.max_page_size,
        last_applied: ledger.last_applied,
        applied: Default::default(),
    };
    {
        let conn = duckdb_files::database::open(&path, duckdb_files::database::Access::ReadWrite).unwrap();
        tables::write_operations(&conn, &operations).unwrap();
        tables::write_full(&conn, &ledger, built.recent_events(), &meta).unwrap();
    }
    let snapshot = duckdb_files::snapshot::open_read_only(&path).unwrap();
    let loaded = tables::load_analytics(&snapshot, limits.max_page_size).unwrap();
    drop(snapshot);
    std::fs::remove_dir_all(&dir).unwrap();

    let mut routes = Route::all_static(&built);
    assert!(routes.len() > 300, "{} routes", routes.len());
    for token in built.tokens.iter().take(20) {
        for page_size in [1, 7, 100] {
            routes.push(Route::Holders { topic: token.topic, tick: token.tick.clone(), page: 2, page_size });
            routes.push(Route::Transactions { token: Some((token.topic, token.tick.clone())), page_size });
        }
    }
    routes.push(Route::Transactions { token: None, page_size: 100 });
    routes.push(Route::Account("0.0.1".parse().unwrap()));
    for route in &routes {
        let a = route.render(&built).unwrap();
        let b = route.render(&loaded).unwrap();
        assert_eq!(a, b, "{} differs between the rules' model and the snapshot's", route.canonical());
    }
    assert_eq!(built, loaded);
}
