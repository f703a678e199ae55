//! Headless Chromium driven over WebDriver (W3C, by Debian's `chromedriver`)
//! with plain HTTP: open a page, run a script in it, resize the window,
//! take a screenshot, and read every request the page made from Chrome's
//! own network log. For the pages' end-to-end test and `make screenshots`.
//!
//! Chromium starts as this machine's closed network wants it (no
//! background networking, no component updates, a new profile) and with
//! every host name but 127.0.0.1 resolving to nothing: a page that reaches
//! outside fails here as it would leak elsewhere, and the network log
//! still names the request.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use base64::Engine;
use serde_json::{json, Value};

/// Where Debian puts them; `ALMANAC_CHROMIUM` and `ALMANAC_CHROMEDRIVER`
/// name others.
fn program(variable: &str, default: &str) -> String {
    std::env::var(variable).unwrap_or_else(|_| default.to_string())
}

/// URL schemes served inside the browser.
const INTERNAL: [&str; 4] = ["data:", "chrome:", "chrome-untrusted:", "about:"];

/// A chromedriver with one Chromium session; both end on [`Browser::quit`]
/// (the driver also on drop).
pub struct Browser {
    driver: Child,
    /// `http://127.0.0.1:<port>/session/<id>`.
    session: String,
    client: reqwest::Client,
    _profile: crate::TempDir,
}

impl Browser {
    /// Starts chromedriver on a free port and a headless Chromium session
    /// `width` by `height` pixels; narrower than a desktop window can be
    /// (500), as a phone: Chrome's device emulation, touch and all.
    pub async fn start(width: u32, height: u32) -> Result<Browser> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let driver = Command::new(program("ALMANAC_CHROMEDRIVER", "/usr/bin/chromedriver"))
            .args([format!("--port={port}"), "--allowed-ips=127.0.0.1".into(), "--silent".into()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting chromedriver (Debian's chromium-driver; `make debian` installs it)")?;
        let client = http_client::builder().timeout(Duration::from_secs(60)).build()?;
        let base = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        loop {
            let ready = client.get(format!("{base}/status")).send().await.ok();
            let ready = match ready {
                Some(r) => r.json::<Value>().await.ok().is_some_and(|v| v["value"]["ready"] == true),
                None => false,
            };
            if ready {
                break;
            }
            if started.elapsed() > Duration::from_secs(20) {
                bail!("chromedriver did not start on port {port}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = crate::TempDir::new("chromium-profile");
        let mut capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"performance": "ALL"},
            "goog:chromeOptions": {
                "binary": program("ALMANAC_CHROMIUM", "/usr/bin/chromium"),
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--disable-default-apps", "--hide-scrollbars", "--force-device-scale-factor=1",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", profile.path().display()),
                    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                ],
            },
        }}});
        if width < 500 {
            capabilities["capabilities"]["alwaysMatch"]["goog:chromeOptions"]["mobileEmulation"] = json!({
                "deviceMetrics": {"width": width, "height": height, "pixelRatio": 1.0, "touch": true, "mobile": true}
            });
        }
        let mut browser = Browser { driver, session: String::new(), client, _profile: profile };
        let created = browser.call(reqwest::Method::POST, &format!("{base}/session"), Some(capabilities)).await?;
        let id = created["sessionId"].as_str().context("no session id")?;
        browser.session = format!("{base}/session/{id}");
        // What Chromium asked for before any page (its own new tab page)
        // is not a page's doing.
        browser.requests().await?;
        Ok(browser)
    }

    async fn call(&self, method: reqwest::Method, url: &str, body: Option<Value>) -> Result<Value> {
        let mut request = self.client.request(method, url);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let reply: Value = request.send().await?.json().await.context("chromedriver's answer")?;
        if let Some(error) = reply["value"]["error"].as_str() {
            bail!("WebDriver {error}: {}", reply["value"]["message"]);
        }
        Ok(reply["value"].clone())
    }

    async fn post(&self, path: &str, body: Value) -> Result<Value> {
        self.call(reqwest::Method::POST, &format!("{}{path}", self.session), Some(body)).await
    }

    /// Opens `url` and waits until it has loaded.
    pub async fn open(&self, url: &str) -> Result<()> {
        self.post("/url", json!({"url": url})).await.map(drop)
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the
    /// page and returns what it returns.
    pub async fn script(&self, script: &str, args: Value) -> Result<Value> {
        self.post("/execute/sync", json!({"script": script, "args": args})).await
    }

    /// Sets the window's outer size.
    pub async fn resize(&self, width: u32, height: u32) -> Result<()> {
        self.post("/window/rect", json!({"width": width, "height": height})).await.map(drop)
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Result<Vec<u8>> {
        let png = self.call(reqwest::Method::GET, &format!("{}/screenshot", self.session), None).await?;
        Ok(base64::engine::general_purpose::STANDARD.decode(png.as_str().context("no screenshot")?)?)
    }

    /// A PNG of the whole page: the window is made as tall as the page
    /// first (at most `most` pixels), then put back.
    pub async fn full_page(&self, width: u32, most: u32) -> Result<Vec<u8>> {
        let height = self.script("return document.documentElement.scrollHeight;", json!([])).await?;
        let height = (height.as_u64().unwrap_or(900) as u32 + 140).min(most);
        self.resize(width, height).await?;
        let png = self.screenshot().await;
        self.resize(width, 900).await?;
        png
    }

    /// The URL of every request Chrome sent since the last call (its
    /// `Network.requestWillBeSent` events), navigations included. URLs
    /// that reach no network are left out: `data:`, and the browser's own
    /// `chrome:` pages (its new tab page loads while a session starts).
    pub async fn requests(&self) -> Result<Vec<String>> {
        let entries = self.post("/se/log", json!({"type": "performance"})).await?;
        let mut urls = Vec::new();
        for entry in entries.as_array().context("a log")? {
            let message: Value = serde_json::from_str(entry["message"].as_str().unwrap_or("{}"))?;
            let url = message["message"]["params"]["request"]["url"].as_str().unwrap_or_default();
            if message["message"]["method"] == "Network.requestWillBeSent"
                && !INTERNAL.iter().any(|s| url.starts_with(s))
            {
                urls.push(url.to_string());
            }
        }
        Ok(urls)
    }

    /// Ends the session (and Chromium with it), then the driver.
    pub async fn quit(mut self) {
        let _ = self.call(reqwest::Method::DELETE, &self.session.clone(), None).await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
