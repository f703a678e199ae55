//! `screenshots`: PNGs of the main pages of a running api (`make
//! screenshots`), each at a desktop's width (the whole page) and a phone's
//! (the first screen), taken in headless Chromium. The pages are found
//! through the JSON routes, so any build will do.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde_json::Value;
use tests::browser::Browser;

#[derive(Parser)]
#[command(name = "screenshots", about = "PNGs of the main pages of a running api")]
struct Args {
    /// The api's address.
    #[arg(long, default_value = "http://127.0.0.1:4600")]
    base: String,
    /// Folder for the PNGs.
    #[arg(long, default_value = "screenshots")]
    out: PathBuf,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let base = args.base.trim_end_matches('/');
    let client = http_client::client();
    let get = |route: String| {
        let client = client.clone();
        async move {
            let reply = client.get(format!("{base}{route}")).send().await?;
            anyhow::ensure!(reply.status().is_success(), "{route}: {}", reply.status());
            Ok::<Value, anyhow::Error>(reply.json().await?)
        }
    };
    let started = Instant::now();
    while get("/health".into()).await.is_err() {
        if started.elapsed() > Duration::from_secs(60) {
            bail!("the api at {base} did not become ready");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut pages: Vec<(String, String)> = ["/", "/tokens", "/guard", "/guard/campaigns", "/guard/coverage"]
        .iter()
        .chain(&["/guard/benchmark", "/agents"])
        .map(|r| (name(r), r.to_string()))
        .collect();
    let ticks = get("/hcs20".into()).await?;
    if let Some(tick) = ticks.as_array().and_then(|t| t.iter().max_by_key(|t| t["holders"].as_u64())) {
        let (topic, tick) = (tick["topic"].as_str().context("topic")?, tick["tick"].as_str().context("tick")?);
        pages.push(("token".into(), format!("/tokens/{topic}/{tick}")));
        let holders = get(format!("/hcs20/holders?tick={tick}&topic={topic}")).await?;
        if let Some(account) = holders["holders"][0]["holderId"].as_str() {
            pages.push(("account".into(), format!("/accounts/{account}")));
        }
    }
    if let Ok(search) = get("/api/v1/search?limit=1".into()).await {
        if let Some(uaid) = search["hits"][0]["uaid"].as_str() {
            let segment: String = form_urlencoded::byte_serialize(uaid.as_bytes()).collect();
            pages.push(("agent".into(), format!("/agents/{}", segment.replace('+', "%20"))));
        }
    }
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    for (width, height, suffix) in [(1280, 900, "desktop"), (390, 844, "phone")] {
        let browser = Browser::start(width, height).await?;
        for (name, route) in &pages {
            browser.open(&format!("{base}{route}")).await?;
            let png = match suffix {
                "desktop" => browser.full_page(width, 6000).await?,
                _ => browser.screenshot().await?,
            };
            let path = args.out.join(format!("{name}-{suffix}.png"));
            std::fs::write(&path, png).with_context(|| format!("writing {}", path.display()))?;
            println!("{}  {route}", path.display());
        }
        browser.quit().await;
    }
    Ok(())
}

/// A file name for a fixed route.
fn name(route: &str) -> String {
    match route.trim_matches('/') {
        "" => "landing".into(),
        r => r.replace('/', "-"),
    }
}
