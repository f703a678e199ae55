//! The pages for people end to end: the datasets built with every section,
//! served by the api; every page's links followed, and the main pages read
//! in headless Chromium (their content against the JSON routes, their
//! structure for assistive technology, a phone's width, and that no request
//! leaves the site).

use std::collections::BTreeSet;
use std::sync::OnceLock;

use serde_json::{json, Value};
use tests::browser::Browser;
use tests::process::{build, Api};
use tests::{shared_folder, unpooled_client, workspace_root};

const HTML: &str = "text/html; charset=utf-8";

struct Site {
    api: Api,
    manifest: Value,
}

/// One build of the datasets and its api for the whole test binary.
fn site() -> &'static Site {
    static SITE: OnceLock<Site> = OnceLock::new();
    SITE.get_or_init(|| {
        let dir = shared_folder("pages");
        let datasets = workspace_root().join("datasets");
        let (site, data) = (dir.join("site"), dir.join("data"));
        let paths = ["ledger", "broker", "guard"].map(|d| datasets.join(d).to_str().unwrap().to_string());
        build(
            &site,
            &data,
            &[
                "--ledger-dir",
                &paths[0],
                "--broker-dir",
                &paths[1],
                "--guard-dir",
                &paths[2],
                "--guard-date",
                "2026-11-21",
            ],
        );
        let manifest = serde_json::from_slice(&std::fs::read(site.join("current/_manifest.json")).unwrap()).unwrap();
        let api = Api::start_shared(&site, &data, &["--guard-rate", "1000000", "--guard-burst", "1000000"]);
        Site { api, manifest }
    })
}

impl Site {
    fn pages(&self) -> impl Iterator<Item = &str> {
        let routes = self.manifest["routes"].as_array().unwrap().iter();
        routes.filter(|e| e["contentType"] == HTML).map(|e| e["route"].as_str().unwrap())
    }

    async fn json(&self, route: &str) -> Value {
        let reply = unpooled_client().get(self.api.url(route)).send().await.unwrap();
        assert_eq!(reply.status(), 200, "{route}");
        reply.json().await.unwrap()
    }
}

/// The values of `attribute="..."` in `html`, entities for `&` undone.
fn attributes(html: &str, attribute: &str) -> Vec<String> {
    let needle = format!(" {attribute}=\"");
    html.match_indices(&needle)
        .map(|(at, _)| {
            let rest = &html[at + needle.len()..];
            rest[..rest.find('"').unwrap()].replace("&amp;", "&")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_page_is_served_and_every_link_on_it_answers() {
    let site = site();
    let client = unpooled_client();
    let mut links = BTreeSet::new();
    let mut pages = 0;
    for route in site.pages() {
        let reply = client.get(site.api.url(route)).send().await.unwrap();
        assert_eq!(reply.status(), 200, "{route}");
        assert_eq!(reply.headers()["content-type"], HTML, "{route}");
        let html = reply.text().await.unwrap();
        // Nothing is loaded from anywhere: no script, style sheet, image,
        // frame or font, inline or not; the only markup drawn is inline SVG.
        let html_without_icon = html.replace("<link rel=\"icon\" href=\"data:", "");
        for loaded in ["<script", "<link", "<img", "<iframe", "<object", "<embed", "url(", "@import", " src=\""] {
            assert!(!html_without_icon.contains(loaded), "{route} loads something ({loaded})");
        }
        for href in attributes(&html, "href") {
            match href.strip_prefix('/') {
                Some(_) => {
                    links.insert(href.split('#').next().unwrap().to_string());
                }
                None if href.starts_with('#') || href.starts_with("data:") => {}
                // Outside links are the guard's evidence only, marked as such.
                None => assert!(href.starts_with("https://") && route.starts_with("/guard"), "{route}: {href}"),
            }
        }
        pages += 1;
    }
    for link in &links {
        let reply = client.get(site.api.url(link)).send().await.unwrap();
        assert_eq!(reply.status(), 200, "a link to {link}");
    }
    // A page per token (and per further page of holders), account and agent.
    let ticks = site.json("/hcs20").await;
    let tokens: BTreeSet<String> =
        site.pages().filter(|r| r.starts_with("/tokens/") && !r.contains("/holders/")).map(String::from).collect();
    assert_eq!(tokens.len(), ticks.as_array().unwrap().len());
    let agents = site.json("/api/v1/search?limit=1").await["total"].as_u64().unwrap() as usize;
    let profiles = site.pages().filter(|r| r.starts_with("/agents/uaid")).count();
    assert_eq!(profiles, agents);
    assert!(pages > 100 && links.len() > 100, "{pages} pages, {} links", links.len());
}

/// What a page's structure says to assistive technology and a phone.
const STRUCTURE: &str = r#"
const q = (s) => document.querySelectorAll(s);
return {
  title: document.title,
  lang: document.documentElement.lang,
  h1: Array.from(q('h1')).map(h => h.innerText),
  main: q('main').length,
  nav: q('nav').length,
  thWithoutScope: q('th:not([scope])').length,
  unlabelledCharts: Array.from(q('svg')).filter(s => s.getAttribute('role') !== 'img' || !s.getAttribute('aria-label')).length,
  headingsSkipped: (() => { let last = 0, skipped = 0; for (const h of q('h1,h2,h3,h4')) { const n = +h.tagName[1]; if (n > last + 1) skipped++; last = n; } return skipped; })(),
  width: window.innerWidth,
  overflow: document.documentElement.scrollWidth - window.innerWidth,
  resources: performance.getEntriesByType('resource').map(e => e.name),
  text: document.body.innerText,
};
"#;

#[tokio::test(flavor = "multi_thread")]
async fn pages_read_in_a_browser_without_leaving_the_site() {
    let site = site();
    let origin = site.api.url("");
    let origin = origin.trim_end_matches('/');
    let holders = site.json("/hcs20/holders?tick=ape0&topic=0.0.4350190").await;
    let top = holders["holders"][0]["holderId"].as_str().unwrap().to_string();
    let stats = site.json("/hcs20/stats").await;
    let account = site.json(&format!("/hcs20/account/{top}")).await;
    let profile = site.pages().find(|r| r.starts_with("/agents/uaid")).unwrap().to_string();
    let detail = site.json(&profile.replace("/agents/", "/api/v1/agents/")).await;
    let facts = site.json("/guard/facts.json").await;
    let total_mints = stats["data"]["totalMints"].as_u64().unwrap().to_string();
    // Each main page and what it must say, taken from the JSON routes.
    let pages: Vec<(&str, String, Vec<String>)> = vec![
        ("landing", "/".into(), vec![format!("{} mints", total_mints), "ticks.parquet".into()]),
        ("tokens", "/tokens".into(), vec!["ape0".into(), "bolt0".into()]),
        ("token", "/tokens/0.0.4350190/ape0".into(), vec![top.clone(), "Supply over time".into()]),
        ("holders-2", "/tokens/0.0.4350190/ape0/holders/2".into(), vec!["Page 2 of".into()]),
        ("account", format!("/accounts/{top}"), vec![account["balances"][0]["tick"].as_str().unwrap().into()]),
        ("guard", "/guard".into(), vec![facts["facts"][0]["claim"].as_str().unwrap().into()]),
        ("campaigns", "/guard/campaigns".into(), vec!["Policies".into()]),
        ("coverage", "/guard/coverage".into(), vec!["Risk class".into()]),
        ("benchmark", "/guard/benchmark".into(), vec!["prevented".into()]),
        ("agents", "/agents".into(), vec!["indexed from".into()]),
        (
            "agent",
            profile.clone(),
            vec![detail["agent"]["name"].as_str().unwrap().into(), detail["agent"]["uaid"].as_str().unwrap().into()],
        ),
    ];
    for (width, height) in [(1280, 900), (390, 844)] {
        let browser = Browser::start(width, height).await.expect("headless Chromium");
        for (name, route, expected) in &pages {
            let url = format!("{origin}{route}");
            browser.open(&url).await.unwrap();
            let page = browser.script(STRUCTURE, json!([])).await.unwrap();
            let context = format!("{name} at {width}px");
            let text = page["text"].as_str().unwrap();
            for words in expected {
                assert!(text.contains(words.as_str()), "{context}: no {words:?} in\n{text}");
            }
            assert_eq!(page["lang"], "en", "{context}");
            assert_eq!(page["h1"].as_array().unwrap().len(), 1, "{context}: one h1 ({})", page["h1"]);
            assert!(page["title"].as_str().unwrap().ends_with(" · almanac"), "{context}: {}", page["title"]);
            assert_eq!(
                (page["main"].as_u64(), page["nav"].as_u64().map(|n| n >= 1)),
                (Some(1), Some(true)),
                "{context}"
            );
            assert_eq!(page["thWithoutScope"], 0, "{context}: table headers name their scope");
            assert_eq!(page["unlabelledCharts"], 0, "{context}: every chart is a labelled image");
            assert_eq!(page["headingsSkipped"], 0, "{context}: heading levels are not skipped");
            assert_eq!(page["width"], width, "{context}: the window's width");
            assert!(
                page["overflow"].as_i64().unwrap() <= 0,
                "{context}: wider than the window by {}",
                page["overflow"]
            );
            assert_eq!(page["resources"], json!([]), "{context}: the page loaded resources");
            // Chrome's own log: every request went to the site.
            let requests = browser.requests().await.unwrap();
            assert!(requests.iter().any(|r| r == &url), "{context}: the log saw no navigation to {url}: {requests:?}");
            for request in &requests {
                assert!(request.starts_with(origin), "{context}: a request left the site: {request}");
            }
        }
        browser.quit().await;
    }
}
