//! Two api replicas sharing one live store on PostgreSQL: what one stores
//! the other answers (keys, chat sessions), a write through one is
//! followed by the other, a build published while both serve is picked up
//! by each with no failed request, and the background duties run on one
//! at a time and move when it dies.

use std::time::Duration;

use serde_json::json;
use tests::agents::{Agent, Kind};
use tests::live::{register, Broker};
use tests::process::Api;
use tests::TempDir;

/// The lease of the duties in these tests: short, so a takeover is quick.
const LEASE_MS: &str = "600";

/// `f` with a connection to the store at `url`.
fn with_store<T: Send>(url: &str, f: impl FnOnce(&live_store::Conn) -> T + Send) -> T {
    tests::process::with_store_at(&live_store::Location::Postgres(url.to_string()), f)
}

/// Who holds the duties' lease, read from the store.
fn duties_holder(url: &str) -> Option<String> {
    with_store(url, |conn| live_store::leases::holder(conn, "duties").unwrap().map(|(holder, _)| holder))
}

/// The lines of the journal files in `folder`.
fn journaled(folder: &std::path::Path) -> usize {
    let Ok(files) = std::fs::read_dir(folder) else { return 0 };
    files
        .filter_map(Result::ok)
        .filter_map(|f| std::fs::read_to_string(f.path()).ok())
        .map(|text| text.lines().count())
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn two_apis_share_one_store_follow_each_other_and_hand_the_duties_over() {
    let url = pg_scratch::shared().create_database("replicas_two").unwrap();
    // The agents registered live on a closed loopback port the gate allows
    // (nothing calls them: availability checks are off in the tests), but
    // for one that answers chat.
    let agents = "http://127.0.0.1:9";
    let echo = Agent::start(Kind::Echo).await;
    let allowed = tests::allowing(&[agents, &echo.url()]);
    let flags = ["--store", url.as_str(), "--duties-lease-ms", LEASE_MS, "--egress-allow", allowed.as_str()];
    let one = Broker::start("replicas-one", &flags);
    // The same build (its files and snapshots: a shared folder, until
    // builds come from object storage), a journal folder of its own.
    let other_dir = TempDir::new("replicas-other");
    let other_journal = other_dir.path().join("journal");
    let other_flags = [&flags[..], &["--journal-dir", other_journal.to_str().unwrap()]].concat();
    let other = Broker {
        api: Api::start_with(&one.site, &one.data, &other_flags),
        client: tests::unpooled_client(),
        dir: other_dir,
        site: one.site.clone(),
        data: one.data.clone(),
        flags: other_flags.iter().map(|f| f.to_string()).collect(),
    };
    let journals = [one.data.join("journal"), other_journal];

    // A key issued by one is known to the other: the store is one.
    let key = one.sign_in("0.0.1001").await;
    assert_eq!(other.balance(&key).await, one.balance(&key).await);

    // Registered through one, found through the other: the other follows
    // the store's notices, not a timer of its own.
    let before = other.total("q=Replica+Follower").await;
    let uaid = register(&one, &key, "Replica Follower", "a2a", &format!("{agents}/agent")).await;
    tests::wait::until("the other api finding the agent", 200, Duration::from_millis(20), async || {
        other.total("q=Replica+Follower").await > before
    })
    .await;
    let (status, agent) = other.send("GET", &format!("/api/v1/agents/{}", encode(&uaid)), None, None).await;
    assert_eq!((status, agent["agent"]["uaid"].as_str()), (200, Some(uaid.as_str())), "{agent}");

    // A chat session opened through one is its owner's through the other:
    // a turn said there is relayed, and the history holds both turns'
    // messages whichever api is asked.
    let talker = register(&one, &key, "Echo Across", "a2a", &echo.url()).await;
    let (status, session) = one.send("POST", "/api/v1/chat/session", Some(&key), Some(json!({"uaid": talker}))).await;
    assert_eq!(status, 200, "{session}");
    let id = session["sessionId"].as_str().unwrap();
    for (api, said) in [(&other, "across the replicas"), (&one, "and back again")] {
        let body = json!({"sessionId": id, "message": said});
        let (status, reply) = api.send("POST", "/api/v1/chat/message", Some(&key), Some(body)).await;
        assert_eq!(status, 200, "{reply}");
        assert!(reply.to_string().contains(said), "{reply}");
    }
    let history = format!("/api/v1/chat/session/{id}/history");
    let (status, held) = other.send("GET", &history, Some(&key), None).await;
    assert_eq!((status, held["history"].as_array().map(Vec::len)), (200, Some(4)), "{held}");
    assert_eq!(one.send("GET", &history, Some(&key), None).await.1["history"], held["history"]);

    // One of them holds the duties: its journal has the registration, the
    // other's journal nothing.
    tests::wait::until("the registration journaled", 100, Duration::from_millis(50), async || {
        journaled(&journals[0]) + journaled(&journals[1]) > 0
    })
    .await;
    let mut apis = [one, other];
    let holding = if journaled(&journals[0]) > 0 { 0 } else { 1 };
    assert_eq!(journaled(&journals[1 - holding]), 0, "only the holder of the duties writes the journal");
    let first_holder = duties_holder(&url).expect("the duties' lease is held");

    // A build published while both serve: each picks it up, and no request
    // to either fails meanwhile.
    let askers = tests::live::Askers::start(apis.iter().map(|api| api.api.url("/api/v1/search?q=agent&limit=5")));
    let before = std::fs::read_link(apis[0].site.join("current")).unwrap();
    // The holder's journal has the registrations: the build is a new one.
    tests::wait::until("the outbox journaled", 100, Duration::from_millis(50), async || {
        with_store(&url, |conn| conn.query_row("SELECT COUNT(*) FROM outbox", [], |r| r.get::<i64>(0)).unwrap()) == 0
    })
    .await;
    let sources = [Broker::sources(), vec!["--journal-dir".into(), journals[holding].display().to_string()]].concat();
    tests::process::build(&apis[0].site, &apis[0].data, &tests::strs(&sources));
    let current = std::fs::read_link(apis[0].site.join("current")).unwrap();
    assert_ne!(current, before, "a new build");
    let build = json!(current.file_name().unwrap().to_string_lossy());
    for api in &apis {
        tests::wait::until("each api serving the new build", 200, Duration::from_millis(50), async || {
            api.send("GET", "/health", None, None).await.1["build"] == build
        })
        .await;
    }
    let (answered, failed) = askers.stop().await;
    assert!(answered > 0 && failed == 0, "{answered} answered, {failed} failed across the swap");

    // The holder dies: within about a lease the other holds the duties
    // and journals what is registered next.
    apis[holding].api.kill();
    let written_before_dying = journaled(&journals[holding]);
    let survivor = &apis[1 - holding];
    register(survivor, &key, "After The Handover", "a2a", &format!("{agents}/b")).await;
    tests::wait::until("the survivor holding the duties", 100, Duration::from_millis(50), async || {
        duties_holder(&url).is_some_and(|holder| holder != first_holder)
    })
    .await;
    tests::wait::until("the survivor journaling", 100, Duration::from_millis(50), async || {
        journaled(&journals[1 - holding]) > 0
    })
    .await;
    assert_eq!(journaled(&journals[holding]), written_before_dying, "the dead api wrote nothing more");
}

/// `encodeURIComponent`, as the reference client encodes path parameters.
fn encode(uaid: &str) -> String {
    broker_site::render::segment(uaid)
}
