//! Availability measured against the real api binary on loopback: the
//! checked-in datasets' agents at special-use names (`.example`), which
//! the egress gate refuses without asking the DNS server on loopback, a
//! host on loopback that never answers, and agents registered at peers on
//! loopback, one of which goes away.
//! What search, the detail route, the badge, the next build and its pages
//! say comes from the checks; an agent listed online opens a session.

use std::time::Duration;

use serde_json::{json, Value};
use tests::agents::{Agent, Kind};
use tests::dns::DnsServer;
use tests::live::{register, Broker};

/// Every agent search lists, in one page.
async fn everyone(broker: &Broker, query: &str) -> Vec<Value> {
    let (status, body) = broker.send("GET", &format!("/api/v1/search?limit=500&{query}"), None, None).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["total"].as_u64().unwrap() <= 500, "one page holds them all");
    body["hits"].as_array().unwrap().clone()
}

async fn agent(broker: &Broker, uaid: &str) -> Value {
    let (status, body) = broker.send("GET", &format!("/api/v1/agents/{}", urlencoding(uaid)), None, None).await;
    assert_eq!(status, 200, "{body}");
    body.get("agent").cloned().unwrap_or(body)
}

async fn badge(broker: &Broker, uaid: &str) -> String {
    let path = format!("/api/v1/agents/badge?metric=availability&uaid={}", urlencoding(uaid));
    let (status, body) = broker.send("GET", &path, None, None).await;
    assert_eq!(status, 200, "{body}");
    body["message"].as_str().unwrap().to_string()
}

fn urlencoding(text: &str) -> String {
    broker_site::render::segment(text)
}

/// Waits until `done` holds of the agents search lists (each check is an
/// event the api makes on its own schedule: a bounded number of looks).
async fn until(broker: &Broker, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let mut hits = Vec::new();
    tests::wait::until(what, 600, Duration::from_millis(50), async || {
        hits = everyone(broker, "").await;
        done(&hits)
    })
    .await;
    hits
}

fn by_uaid<'a>(hits: &'a [Value], uaid: &str) -> &'a Value {
    hits.iter().find(|h| h["uaid"] == uaid).unwrap_or_else(|| panic!("{uaid} listed"))
}

fn chattable(hit: &Value) -> bool {
    hit["communicationSupported"] == true
}

/// A host on loopback that takes each connection and closes it unanswered.
struct SilentHost {
    url: String,
}

impl SilentHost {
    fn start() -> SilentHost {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || listener.incoming().for_each(drop));
        SilentHost { url }
    }
}

/// Three peers on loopback (A2A, MCP and plain HTTP) registered by
/// 0.0.1001 beside the datasets' agents; a silent host the gate allows;
/// the DNS server the gate asks; an api with checks off until
/// [`Peers::round`].
struct Peers {
    echo: Agent,
    _mcp: Agent,
    plain: Option<Agent>,
    silent: SilentHost,
    dns: DnsServer,
    gate: Vec<String>,
    broker: Broker,
    key: String,
    echo_uaid: String,
    plain_uaid: String,
    /// The three peers' UAIDs.
    mine: [String; 3],
}

impl Peers {
    async fn start(label: &str) -> Peers {
        let (echo, mcp, plain) =
            (Agent::start(Kind::Echo).await, Agent::start(Kind::Mcp).await, Agent::start(Kind::Plain).await);
        let plain_url = format!("{}/chat", plain.url());
        let dns = DnsServer::start(&[]).await;
        let silent = SilentHost::start();
        let allowed = tests::allowing(&[&echo.url(), &mcp.url(), &plain_url, &silent.url]);
        let gate = vec!["--egress-allow".to_string(), allowed, "--egress-dns".into(), dns.addr.to_string()];
        let broker =
            Broker::start(label, &tests::strs(&[&gate[..], &["--availability-every-s".into(), "0".into()]].concat()));
        let key = broker.sign_in("0.0.1001").await;
        let echo_uaid = register(&broker, &key, "Lamp Lighter", "a2a", &echo.url()).await;
        let mcp_uaid = register(&broker, &key, "Tool Smith", "mcp", &mcp.url()).await;
        let plain_uaid = register(&broker, &key, "Town Crier", "http", &plain_url).await;
        let mine = [echo_uaid.clone(), mcp_uaid, plain_uaid.clone()];
        Peers { echo, _mcp: mcp, plain: Some(plain), silent, dns, gate, broker, key, echo_uaid, plain_uaid, mine }
    }

    /// The api started again with a round of checks every `every_s`
    /// seconds (0: none), the first at its start.
    fn restart_checking_every(&mut self, every_s: u32) {
        let every = ["--availability-every-s".to_string(), every_s.to_string()];
        self.broker.flags = [&self.gate[..], &every[..]].concat();
        self.broker.restart(&[]);
    }

    /// A round at the start, the next an hour later: the agents search
    /// lists once every chattable agent is checked and the peers online.
    async fn round(&mut self) -> Vec<Value> {
        self.restart_checking_every(3600);
        let mine = self.mine.clone();
        until(&self.broker, "every chattable agent checked and the peers online", |hits| {
            hits.iter().filter(|h| chattable(h)).all(|h| h["availabilityStatus"] != "unknown")
                && mine.iter().all(|uaid| by_uaid(hits, uaid)["availabilityStatus"] == "online")
        })
        .await
    }

    fn is_mine(&self, hit: &Value) -> bool {
        self.mine.iter().any(|uaid| hit["uaid"] == uaid.as_str())
    }

    /// A chattable agent of the datasets: its host never answers.
    fn dead<'a>(&self, hits: &'a [Value]) -> &'a str {
        hits.iter().find(|h| chattable(h) && h["registry"] == "erc-8004").unwrap()["uaid"].as_str().unwrap()
    }
}

/// Never checked: a chattable agent is `unknown`, whatever its registry
/// said; the registry's claim stands, marked, for the rest.
#[tokio::test(flavor = "multi_thread")]
async fn an_agent_never_checked_is_unknown_and_the_rest_keep_their_registrys_claim() {
    let peers = Peers::start("availability-unchecked").await;
    let hits = everyone(&peers.broker, "").await;
    assert!(hits.iter().filter(|h| chattable(h)).count() > 100);
    for hit in &hits {
        match chattable(hit) {
            true => {
                assert_eq!(hit["availabilityStatus"], "unknown", "{}", hit["name"]);
                assert_eq!(hit["availabilitySource"], "broker");
                assert_eq!(hit["available"], false);
                assert!(hit.get("availabilityCheckedAt").is_none());
            }
            false => assert_eq!(hit["availabilitySource"], "registry", "{}", hit["name"]),
        }
    }
    let online = everyone(&peers.broker, "online=true").await;
    assert!(!online.is_empty() && online.iter().all(|h| h["availabilitySource"] == "registry"));
    assert_eq!(badge(&peers.broker, &peers.echo_uaid).await, "unknown");
}

/// After a round the peers are online and the datasets' chattable agents
/// offline, never seen; every chattable agent listed online opens a
/// session; the most available come first.
#[tokio::test(flavor = "multi_thread")]
async fn after_a_round_only_the_agents_that_answered_are_online() {
    let mut peers = Peers::start("availability-round").await;
    let hits = peers.round().await;
    for hit in hits.iter().filter(|h| chattable(h) && !peers.is_mine(h)) {
        assert_eq!(hit["availabilityStatus"], "offline", "{}", hit["name"]);
        assert_eq!(hit["available"], false);
        assert!(hit["availabilityCheckedAt"].is_string());
        assert!(hit.get("lastSeen").is_none(), "never reached");
    }
    for uaid in &peers.mine {
        let hit = by_uaid(&hits, uaid);
        assert_eq!(hit["available"], true);
        assert_eq!(hit["availabilitySource"], "broker");
        assert!(hit["lastSeen"].is_string() && hit["availabilityLatencyMs"].is_u64(), "{hit}");
        assert_eq!(hit["trustSignals"]["uptime"], 100.0);
    }
    let broker = &peers.broker;
    let online = everyone(broker, "online=true").await;
    let online_chattable: Vec<&Value> = online.iter().filter(|h| chattable(h)).collect();
    assert_eq!(online_chattable.len(), 3, "only the peers on loopback answer");
    for hit in online_chattable {
        let (status, body) =
            broker.send("POST", "/api/v1/chat/session", None, Some(json!({"uaid": hit["uaid"]}))).await;
        assert_eq!(status, 200, "{}: {body}", hit["name"]);
    }
    let sorted = everyone(broker, "sortBy=most-available").await;
    let first_not = sorted.iter().position(|h| h["available"] != true).unwrap();
    assert_eq!(first_not, online.len());
    assert!(sorted[first_not..].iter().all(|h| h["available"] != true));
}

/// The detail route, the badge and the agent's page say what the checks
/// found, before any build has it.
#[tokio::test(flavor = "multi_thread")]
async fn the_detail_the_badge_and_the_page_say_what_the_checks_found() {
    let mut peers = Peers::start("availability-shown").await;
    let hits = peers.round().await;
    let (broker, dead) = (&peers.broker, peers.dead(&hits));
    assert_eq!(agent(broker, dead).await["availabilityStatus"], "offline");
    assert_eq!(badge(broker, dead).await, "offline");
    assert_eq!(badge(broker, &peers.echo_uaid).await, "online");
    for (uaid, says) in [(dead, "(offline, checked "), (peers.echo_uaid.as_str(), "(online, checked ")] {
        let (route, _) = pages::routes::agent(uaid);
        let answer = broker.client.get(broker.api.url(&route)).send().await.unwrap();
        assert_eq!(answer.status(), 200);
        assert_eq!(answer.headers()["cache-control"], "no-cache", "a live page is revalidated");
        assert!(answer.text().await.unwrap().contains(says), "{uaid}'s page says {says}");
    }
}

/// A silent host is called once (its other agents wait for it); the
/// datasets' agents, at special-use names, are refused unresolved (no
/// question reaches the DNS server); an agent registered is checked at
/// once, not when the next round comes.
#[tokio::test(flavor = "multi_thread")]
async fn a_silent_host_is_called_once_and_a_new_agent_checked_at_once() {
    let mut peers = Peers::start("availability-hosts").await;
    let at_silent_host = 6;
    for i in 0..at_silent_host {
        let url = format!("{}/agent-{i}", peers.silent.url);
        register(&peers.broker, &peers.key, &format!("Quiet One {i}"), "a2a", &url).await;
    }
    let hits = peers.round().await;
    let quiet = |h: &Value| h["name"].as_str().unwrap().starts_with("Quiet One");
    let elsewhere = hits.iter().filter(|h| chattable(h) && !peers.is_mine(h) && !quiet(h)).count();
    let outcomes: Vec<(String, i64)> = {
        let sql = "SELECT outcome, COUNT(*) FROM availability GROUP BY outcome";
        peers.broker.with_store(|s| s.query_map(sql, [], |r| Ok((r.get(0)?, r.get(1)?)))).unwrap()
    };
    let count = |outcome: &str| outcomes.iter().find(|(o, _)| o == outcome).map_or(0, |(_, n)| *n as usize);
    assert_eq!(count("unreachable"), 1, "the silent host is called once: {outcomes:?}");
    assert_eq!(count("host_down"), at_silent_host - 1, "{outcomes:?}");
    assert_eq!(count("reached"), 3, "{outcomes:?}");
    assert!(elsewhere > 100);
    assert_eq!(count("not_allowed"), elsewhere, "the datasets' agents, refused: {outcomes:?}");
    assert_eq!(peers.dns.queries.load(std::sync::atomic::Ordering::SeqCst), 0, "no name was looked up");

    let late_uaid = register(&peers.broker, &peers.key, "Late Comer", "a2a", &peers.echo.url()).await;
    until(&peers.broker, "the agent registered after the round online", |hits| {
        by_uaid(hits, &late_uaid)["availabilityStatus"] == "online"
    })
    .await;
}

/// A peer that goes away is offline at its next check (rounds every
/// second now), last seen at the check before, and gone from the online
/// agents; the next build holds what was measured (the journal), and so
/// do its pages.
#[tokio::test(flavor = "multi_thread")]
async fn a_peer_that_goes_away_is_offline_and_the_next_build_says_so() {
    let mut peers = Peers::start("availability-gone").await;
    let hits = peers.round().await;
    let online = peers.broker.total("online=true").await;
    let (dead, plain_uaid) = (peers.dead(&hits).to_string(), peers.plain_uaid.clone());
    let seen = by_uaid(&hits, &plain_uaid)["lastSeen"].clone();
    drop(peers.plain.take());
    peers.restart_checking_every(1);
    let hits = until(&peers.broker, "the stopped peer offline", |hits| {
        by_uaid(hits, &plain_uaid)["availabilityStatus"] == "offline"
    })
    .await;
    let gone = by_uaid(&hits, &plain_uaid);
    let (last_seen, checked) = (gone["lastSeen"].as_str().unwrap(), gone["availabilityCheckedAt"].as_str().unwrap());
    assert!(seen.as_str().unwrap() <= last_seen && last_seen < checked, "{gone}");
    assert!(gone["trustSignals"]["uptime"].as_f64().unwrap() < 100.0);
    assert_eq!(peers.broker.total("online=true").await, online - 1);

    peers.broker.journaled().await;
    let sources = Broker::sources();
    peers.broker.rebuild(&tests::strs(&sources)).await;
    peers.restart_checking_every(0);
    let rebuilt = everyone(&peers.broker, "").await;
    assert_eq!(by_uaid(&rebuilt, &dead)["availabilityStatus"], "offline");
    assert_eq!(by_uaid(&rebuilt, &peers.echo_uaid)["availabilityStatus"], "online");
    assert_eq!(by_uaid(&rebuilt, &plain_uaid)["availabilityStatus"], "offline");
    let (route, _) = pages::routes::agent(&dead);
    let page = peers.broker.client.get(peers.broker.api.url(&route)).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("(offline, checked "), "the page says when it was checked");
}

/// At most `--availability-live-max` changes a build are shown through the
/// overlay; the rest wait for the next build. A restarted api shows no
/// more than the one before it did: it loads only as many of the stored
/// changes.
#[tokio::test(flavor = "multi_thread")]
async fn the_overlay_shows_at_most_the_live_bound_of_changes_across_a_restart() {
    let dns = DnsServer::start(&[]).await;
    let gate = ["--egress-dns".to_string(), dns.addr.to_string(), "--availability-live-max".into(), "5".into()];
    let every = |s: &str| [&gate[..], &["--availability-every-s".to_string(), s.to_string()]].concat();
    let mut broker = Broker::start("availability-bound", &tests::strs(&every("3600")));
    let chattable_agents = everyone(&broker, "").await.iter().filter(|h| chattable(h)).count();
    assert!(chattable_agents > 100);
    let recorded = |broker: &Broker| -> usize {
        let sql = "SELECT COUNT(*) FROM availability";
        broker.with_store(|s| s.query_row(sql, [], |r| r.get::<i64>(0))).unwrap() as usize
    };
    tests::wait::until("every chattable agent checked", 600, Duration::from_millis(50), async || {
        recorded(&broker) == chattable_agents
    })
    .await;
    let shown = |hits: &[Value]| hits.iter().filter(|h| chattable(h) && h["availabilityStatus"] != "unknown").count();
    until(&broker, "the first changes shown", |hits| shown(hits) >= 5).await;
    assert_eq!(shown(&everyone(&broker, "").await), 5, "the live bound");
    broker.flags = every("0");
    broker.restart(&[]);
    assert_eq!(shown(&everyone(&broker, "").await), 5, "after a restart");
}
