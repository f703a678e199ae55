//! Availability measured against the real api binary on loopback: the
//! checked-in datasets' agents at hosts a DNS server on loopback does not
//! know (as unreachable as a dead host, without leaving this machine),
//! and agents registered at peers on loopback, one of which goes away.
//! What search, the detail route, the badge, the next build and its pages
//! say comes from the checks; an agent listed online opens a session.

use std::collections::HashSet;
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

#[tokio::test(flavor = "multi_thread")]
async fn availability_is_what_the_checks_find() {
    let echo = Agent::start(Kind::Echo).await;
    let mcp = Agent::start(Kind::Mcp).await;
    let plain = Agent::start(Kind::Plain).await;
    let plain_url = format!("{}/chat", plain.url());
    let dns = DnsServer::start(&[]).await;
    let allowed = tests::allowing(&[&echo.url(), &mcp.url(), &plain_url]);
    let dns_addr = dns.addr.to_string();
    let gate = ["--egress-allow", allowed.as_str(), "--egress-dns", dns_addr.as_str()];
    let mut broker = Broker::start("availability", &[&gate[..], &["--availability-every-s", "0"]].concat());

    // Never checked: a chattable agent is `unknown`, whatever its
    // registry said; the registry's claim stands, marked, for the rest.
    let key = broker.sign_in("0.0.1001").await;
    let echo_uaid = register(&broker, &key, "Lamp Lighter", "a2a", &echo.url()).await;
    let mcp_uaid = register(&broker, &key, "Tool Smith", "mcp", &mcp.url()).await;
    let plain_uaid = register(&broker, &key, "Town Crier", "http", &plain_url).await;
    let hits = everyone(&broker, "").await;
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
    let online = everyone(&broker, "online=true").await;
    assert!(!online.is_empty() && online.iter().all(|h| h["availabilitySource"] == "registry"));
    assert_eq!(badge(&broker, &echo_uaid).await, "unknown");

    // Checked: a round at the start, the next an hour later.
    broker.flags = [&gate[..], &["--availability-every-s", "3600"]].concat().iter().map(|f| f.to_string()).collect();
    broker.restart(&[]);
    let mine = [echo_uaid.clone(), mcp_uaid.clone(), plain_uaid.clone()];
    let hits = until(&broker, "every chattable agent checked and the peers online", |hits| {
        hits.iter().filter(|h| chattable(h)).all(|h| h["availabilityStatus"] != "unknown")
            && mine.iter().all(|uaid| by_uaid(hits, uaid)["availabilityStatus"] == "online")
    })
    .await;
    for hit in hits.iter().filter(|h| chattable(h) && !mine.contains(&h["uaid"].as_str().unwrap().to_string())) {
        assert_eq!(hit["availabilityStatus"], "offline", "{}", hit["name"]);
        assert_eq!(hit["available"], false);
        assert!(hit["availabilityCheckedAt"].is_string());
        assert!(hit.get("lastSeen").is_none(), "never reached");
    }
    for uaid in &mine {
        let hit = by_uaid(&hits, uaid);
        assert_eq!(hit["available"], true);
        assert_eq!(hit["availabilitySource"], "broker");
        assert!(hit["lastSeen"].is_string() && hit["availabilityLatencyMs"].is_u64(), "{hit}");
        assert_eq!(hit["trustSignals"]["uptime"], 100.0);
    }
    // Every chattable agent listed online opens a session.
    let online = everyone(&broker, "online=true").await;
    let online_chattable: Vec<&Value> = online.iter().filter(|h| chattable(h)).collect();
    assert_eq!(online_chattable.len(), 3, "only the peers on loopback answer");
    for hit in online_chattable {
        let (status, body) =
            broker.send("POST", "/api/v1/chat/session", None, Some(json!({"uaid": hit["uaid"]}))).await;
        assert_eq!(status, 200, "{}: {body}", hit["name"]);
    }
    // Most available first: the online ones, then the rest.
    let sorted = everyone(&broker, "sortBy=most-available").await;
    let first_not = sorted.iter().position(|h| h["available"] != true).unwrap();
    assert_eq!(first_not, online.len());
    assert!(sorted[first_not..].iter().all(|h| h["available"] != true));
    // The detail route and the badge say the same.
    let dead = hits.iter().find(|h| chattable(h) && h["registry"] == "erc-8004").unwrap();
    let dead_uaid = dead["uaid"].as_str().unwrap();
    assert_eq!(agent(&broker, dead_uaid).await["availabilityStatus"], "offline");
    assert_eq!(badge(&broker, dead_uaid).await, "offline");
    assert_eq!(badge(&broker, &echo_uaid).await, "online");
    // So does the agent's page, before any build has it.
    for (uaid, says) in [(dead_uaid, "(offline, checked "), (echo_uaid.as_str(), "(online, checked ")] {
        let (route, _) = pages::routes::agent(uaid);
        let answer = broker.client.get(broker.api.url(&route)).send().await.unwrap();
        assert_eq!(answer.status(), 200);
        assert_eq!(answer.headers()["cache-control"], "no-cache", "a live page is revalidated");
        assert!(answer.text().await.unwrap().contains(says), "{uaid}'s page says {says}");
    }

    // A silent host is called once; its other agents wait for it.
    let hosts: HashSet<String> = hits
        .iter()
        .filter(|h| chattable(h) && !mine.contains(&h["uaid"].as_str().unwrap().to_string()))
        .map(|h| {
            let agent: broker_model::Agent = serde_json::from_value(h.clone()).unwrap();
            let url = broker_model::availability::checked_endpoint(&agent).unwrap();
            reqwest::Url::parse(url).unwrap().host_str().unwrap().to_string()
        })
        .collect();
    let outcomes: Vec<(String, i64)> = {
        let store = broker.store();
        let mut statement = store.prepare("SELECT outcome, COUNT(*) FROM availability GROUP BY outcome").unwrap();
        statement.query_map([], |r| Ok((r.get(0).unwrap(), r.get(1).unwrap()))).unwrap().map(Result::unwrap).collect()
    };
    let count = |outcome: &str| outcomes.iter().find(|(o, _)| o == outcome).map_or(0, |(_, n)| *n);
    assert!(count("unreachable") as usize <= hosts.len(), "{outcomes:?} over {} hosts", hosts.len());
    assert!(count("host_down") > 100, "{outcomes:?}");
    assert_eq!(count("reached"), 3, "{outcomes:?}");

    // An agent registered is checked at once, not when the next round
    // comes.
    let late_uaid = register(&broker, &key, "Late Comer", "a2a", &echo.url()).await;
    until(&broker, "the agent registered after the round online", |hits| {
        by_uaid(hits, &late_uaid)["availabilityStatus"] == "online"
    })
    .await;

    // A peer that goes away is offline at its next check (rounds every
    // second now); it was last seen at the check before.
    let seen = by_uaid(&hits, &plain_uaid)["lastSeen"].clone();
    drop(plain);
    broker.flags = [&gate[..], &["--availability-every-s", "1"]].concat().iter().map(|f| f.to_string()).collect();
    broker.restart(&[]);
    let hits = until(&broker, "the stopped peer offline", |hits| {
        by_uaid(hits, &plain_uaid)["availabilityStatus"] == "offline"
    })
    .await;
    let gone = by_uaid(&hits, &plain_uaid);
    let (last_seen, checked) = (gone["lastSeen"].as_str().unwrap(), gone["availabilityCheckedAt"].as_str().unwrap());
    assert!(seen.as_str().unwrap() <= last_seen && last_seen < checked, "{gone}");
    assert!(gone["trustSignals"]["uptime"].as_f64().unwrap() < 100.0);
    // The stopped peer is gone from the online agents; the late one joined.
    assert_eq!(broker.total("online=true").await as usize, online.len());

    // The next build holds what was measured (the journal), and so do
    // its pages.
    broker.journaled().await;
    let sources = Broker::sources();
    broker.rebuild(&sources.iter().map(String::as_str).collect::<Vec<_>>()).await;
    broker.flags = [&gate[..], &["--availability-every-s", "0"]].concat().iter().map(|f| f.to_string()).collect();
    broker.restart(&[]);
    let rebuilt = everyone(&broker, "").await;
    assert_eq!(by_uaid(&rebuilt, dead_uaid)["availabilityStatus"], "offline");
    assert_eq!(by_uaid(&rebuilt, &echo_uaid)["availabilityStatus"], "online");
    assert_eq!(by_uaid(&rebuilt, &plain_uaid)["availabilityStatus"], "offline");
    let (route, _) = pages::routes::agent(dead_uaid);
    let page = broker.client.get(broker.api.url(&route)).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("(offline, checked "), "the page says when it was checked");
}
