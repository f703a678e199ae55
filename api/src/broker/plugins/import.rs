//! Imports: `POST /plugins/import` and the job that runs it.
//!
//! A request names what to import, one of:
//! - `repository` (`owner/repo` or its GitHub URL) with `commit` and an
//!   optional `path` inside it;
//! - `archiveUrl`, a `.tar.gz` of the repository at `commit`, with the
//!   `repository` it is of (fetched as a client's destination: judged);
//! - `source`, one marketplace entry's source object (`url`,
//!   `git-subdir`, `github`) with its `sha`;
//! - `marketplace`, a marketplace file whose entries have such sources.
//!
//! Every repository named is claimed for the account before the 202, all
//! or none (403 `not_plugin_owner` for one another account holds). The
//! job then takes each source in turn: the archive fetched through the
//! egress gate within `--plugins-max-archive-bytes` and the gate's
//! deadline, unpacked in memory within the entry and expansion bounds
//! (`plugins::archive`), its plugins found (`plugins::locate`), each one
//! scanned, digested and stored as a version of `<owner>/<name>`. A
//! marketplace file inside a fetched repository adds its remote sources,
//! up to `--plugins-max-sources` in all. A failed source is a result with
//! its reason and does not stop the others; a job none of whose sources
//! stored anything is `failed`. Jobs left open by a stop run again at the
//! next start: storing a commit twice stores nothing.

use std::future::Future;
use std::sync::Arc;

use plugins::locate::{self, Ecosystem, Located};
use plugins::source::{self, Repository, Source};
use plugins::tree::Tree;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use warp::http::StatusCode;

use super::Settings;
use crate::app::App;
use crate::egress::Trust;
use crate::reply::{self, Answer, Error};
use crate::request::{parse_body, Request};
use crate::store::plugins::{self as stored, Claim, Import, NewVersion, Stored};
use crate::store::{now_ms, rfc3339};

/// `POST /plugins/import`'s body.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Input {
    repository: Option<String>,
    commit: Option<String>,
    path: Option<String>,
    archive_url: Option<String>,
    source: Option<Value>,
    marketplace: Option<Map<String, Value>>,
}

/// One archive to fetch and where in it to look.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    pub owner: String,
    pub repo: String,
    pub commit: String,
    /// The folder the plugins are at or under (`""`: anywhere).
    pub path: String,
    /// The archive's URL when the client gave it; else the archive host's.
    pub archive_url: Option<String>,
    /// A marketplace entry's name and category.
    pub listed_name: Option<String>,
    pub category: Option<String>,
}

impl Target {
    fn repository(&self) -> Repository {
        Repository { owner: self.owner.clone(), repo: self.repo.clone() }
    }

    fn of_source(source: Source, entry: Option<&source::Entry>) -> Result<Target, String> {
        match source {
            Source::Local(path) => {
                Err(format!("{path:?} is a path inside a marketplace's repository, not a repository"))
            }
            Source::Remote { repository, commit, path } => Ok(Target {
                owner: repository.owner,
                repo: repository.repo,
                commit,
                path,
                archive_url: None,
                listed_name: entry.and_then(|e| e.name.clone()),
                category: entry.and_then(|e| e.category.clone()),
            }),
        }
    }
}

fn bad(field: &'static str, message: impl Into<String>) -> Error {
    Error::invalid_body(message).naming(field)
}

/// The targets a request names.
fn targets(input: Input, settings: &Settings) -> Result<Vec<Target>, Error> {
    let named = [
        input.repository.is_some() || input.archive_url.is_some(),
        input.source.is_some(),
        input.marketplace.is_some(),
    ];
    if named.iter().filter(|n| **n).count() != 1 {
        return Err(Error::invalid_body("name one of: repository (with commit), archiveUrl, source, marketplace"));
    }
    if let Some(value) = input.source {
        let source = Source::parse(&value).map_err(|e| bad("source", format!("source: {e}")))?;
        return Ok(vec![Target::of_source(source, None).map_err(|e| bad("source", e))?]);
    }
    if let Some(marketplace) = input.marketplace {
        let entries = source::marketplace_entries(&marketplace).map_err(|e| bad("marketplace", e.to_string()))?;
        if entries.len() > settings.max_sources {
            let message = format!(
                "the marketplace lists {} plugins; an import takes {} at most",
                entries.len(),
                settings.max_sources
            );
            return Err(bad("marketplace.plugins", message));
        }
        return entries
            .iter()
            .enumerate()
            .map(|(i, entry)| {
                let field = format!("marketplace.plugins[{i}].source");
                let refused = |why: String| Error::invalid_body(format!("{field}: {why}")).naming(field.clone());
                let source = entry.source.clone().map_err(|e| refused(e.to_string()))?;
                Target::of_source(source, Some(entry)).map_err(refused)
            })
            .collect();
    }
    let repository = input.repository.ok_or_else(|| bad("repository", "repository (owner/repo) is required"))?;
    let repository = Repository::parse(&repository)
        .ok_or_else(|| bad("repository", format!("{repository:?} is not a GitHub repository (owner/repo)")))?;
    let commit = input
        .commit
        .filter(|c| source::is_commit(c))
        .ok_or_else(|| bad("commit", "commit must be a commit id (40 or 64 hex digits): a branch moves"))?;
    let path = match input.path.as_deref() {
        None | Some("") | Some(".") | Some("./") => String::new(),
        Some(path) => {
            let path = path.strip_prefix("./").unwrap_or(path);
            match path.starts_with('/') || path.split('/').any(|p| p == "..") {
                true => return Err(bad("path", "path must stay inside the repository")),
                false => plugins::tree::normalize(path).unwrap_or_default(),
            }
        }
    };
    if let Some(url) = &input.archive_url {
        let parsed = url::Url::parse(url).map_err(|e| bad("archiveUrl", format!("archiveUrl: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(bad("archiveUrl", "archiveUrl must be http or https"));
        }
    }
    Ok(vec![Target {
        owner: repository.owner,
        repo: repository.repo,
        commit: commit.to_ascii_lowercase(),
        path,
        archive_url: input.archive_url,
        listed_name: None,
        category: None,
    }])
}

fn job_not_found(id: &str) -> Error {
    Error::new(StatusCode::NOT_FOUND, "import_not_found", format!("no plugin import {id}"))
}

/// `POST /plugins/import`: 202 with the job, its repositories claimed.
pub async fn import(request: Request) -> Answer {
    let settings = &request.app.plugins;
    let account = request.principal()?.billing(&request.headers)?;
    let input: Input = parse_body(&request.body)?;
    let targets = targets(input, settings)?;
    for target in &targets {
        if let Some(url) = &target.archive_url {
            request.app.chat.gate.judge(url).map_err(|_| crate::egress::refusal())?;
        }
    }
    let id = crate::chat::new_id("pli_");
    let now = now_ms();
    let job = Import {
        id: id.clone(),
        account: account.clone(),
        request: serde_json::to_string(&targets).expect("targets serialize"),
        status: "pending".into(),
        progress: json!({"step": "queued", "done": 0, "total": targets.len()}).to_string(),
        results: "[]".into(),
        error: None,
        created_at: now,
        updated_at: now,
    };
    let mut repositories: Vec<String> = targets.iter().map(|t| t.repository().key()).collect();
    repositories.sort_unstable();
    repositories.dedup();
    let stored_job = job.clone();
    let refused = request
        .app
        .store
        .write(move |conn| {
            // All or none: a repository another account holds leaves no claim behind.
            for repository in &repositories {
                if stored::repository_owner(conn, repository)?.is_some_and(|owner| owner != stored_job.account) {
                    return Ok(Some(repository.clone()));
                }
            }
            for repository in &repositories {
                let claim = stored::claim_repository(conn, repository, &stored_job.account, stored_job.created_at)?;
                debug_assert_eq!(claim, Claim::Yours, "checked just before, in the same transaction");
            }
            stored::insert_import(conn, &stored_job)?;
            Ok(None)
        })
        .await?;
    if let Some(repository) = refused {
        let message = format!("{repository}'s plugins are another account's");
        return Err(Error::new(StatusCode::FORBIDDEN, "not_plugin_owner", message).naming("repository"));
    }
    settings.wake.notify_one();
    Ok(reply::json_with(StatusCode::ACCEPTED, &status(&job)))
}

/// `GET /plugins/import/{jobId}`: the job's state, progress and results
/// (its account's, or the operator's).
pub async fn job(request: Request) -> Answer {
    let principal = request.principal()?;
    let account = principal.billing(&request.headers)?;
    let id = request.params.get("jobId").to_string();
    let key = id.clone();
    let job = request.app.store.read(move |conn| stored::import(conn, &key)).await?;
    let job = job.filter(|j| j.account == account || principal.operator).ok_or_else(|| job_not_found(&id))?;
    Ok(reply::json(&status(&job)))
}

fn status(job: &Import) -> Value {
    let read = |text: &str| serde_json::from_str::<Value>(text).unwrap_or(Value::Null);
    json!({
        "jobId": job.id,
        "status": job.status,
        "progress": read(&job.progress),
        "results": read(&job.results),
        "error": job.error,
        "createdAt": rfc3339(job.created_at),
        "updatedAt": rfc3339(job.updated_at),
    })
}

/// Runs import jobs until `shutdown` resolves: those a stop left open,
/// then each as it is created.
pub async fn run(app: Arc<App>, shutdown: impl Future<Output = ()>) {
    let passes = async {
        loop {
            // Registered before the read, so a job stored meanwhile wakes the next pass.
            let woken = app.plugins.wake.notified();
            match app.store.read(stored::open_imports).await {
                Ok(open) => {
                    for job in open {
                        run_job(&app, job).await;
                    }
                }
                Err(e) => tracing::error!(error = %e, "plugins: open imports cannot be read"),
            }
            woken.await;
        }
    };
    tokio::select! {
        () = shutdown => {}
        () = passes => {}
    }
}

/// A failure in `target` (at `path` in it), as the job's results list it.
fn failed(target: &Target, path: &str, code: &str, why: impl std::fmt::Display) -> Value {
    json!({"repository": target.repository().key(), "commit": target.commit,
        "path": path, "status": "failed", "code": code, "error": why.to_string()})
}

async fn run_job(app: &Arc<App>, job: Import) {
    let id = job.id.clone();
    let mut targets: Vec<Target> = match serde_json::from_str(&job.request) {
        Ok(targets) => targets,
        Err(e) => {
            let why = format!("the stored request does not read: {e}");
            save(app, &id, "failed", json!({"step": "failed"}), &[], Some(&why)).await;
            return;
        }
    };
    let mut results: Vec<Value> = Vec::new();
    let mut index = 0;
    while index < targets.len() {
        let target = targets[index].clone();
        let progress = json!({"step": "fetching", "done": index, "total": targets.len(),
            "current": format!("{}/{}@{}", target.owner, target.repo, target.commit)});
        save(app, &id, "running", progress, &results, None).await;
        match import_target(app, &job, &target).await {
            Ok((stored, more)) => {
                results.extend(stored);
                for entry in more {
                    let source = entry.source.clone().expect("only remote sources are handed back");
                    let Ok(next) = Target::of_source(source, Some(&entry)) else { continue };
                    if targets.len() >= app.plugins.max_sources {
                        results.push(failed(
                            &next,
                            &next.path,
                            "too_many_sources",
                            "past the sources one import takes",
                        ));
                    } else if claim(app, &job.account, &next).await {
                        targets.push(next);
                    } else {
                        results.push(failed(
                            &next,
                            &next.path,
                            "not_plugin_owner",
                            "the repository's plugins are another account's",
                        ));
                    }
                }
            }
            Err((code, why)) => results.push(failed(&target, &target.path, code, why)),
        }
        index += 1;
    }
    let stored_any = results.iter().any(|r| r["status"] == "created" || r["status"] == "unchanged");
    // A job that stored nothing says why: its first failure's reason.
    let error = (!stored_any)
        .then(|| results.iter().find_map(|r| r["error"].as_str()).unwrap_or("no plugin was found").to_string());
    let status = if stored_any { "completed" } else { "failed" };
    let progress = json!({"step": status, "done": targets.len(), "total": targets.len()});
    save(app, &id, status, progress, &results, error.as_deref()).await;
    tracing::info!(job = id, status, sources = targets.len(), "plugins: an import ended");
}

async fn save(app: &App, id: &str, status: &str, progress: Value, results: &[Value], error: Option<&str>) {
    let (key, status, progress, results, error, at) = (
        id.to_string(),
        status.to_string(),
        progress.to_string(),
        Value::from(results.to_vec()).to_string(),
        error.map(str::to_string),
        now_ms(),
    );
    let saved = app
        .store
        .write(move |conn| stored::update_import(conn, &key, &status, &progress, &results, error.as_deref(), at))
        .await;
    if let Err(e) = saved {
        tracing::error!(job = id, error = %e, "plugins: an import's state cannot be stored");
    }
}

/// Whether `account` holds (or now claims) `target`'s repository.
async fn claim(app: &App, account: &str, target: &Target) -> bool {
    let (repository, account) = (target.repository().key(), account.to_string());
    let claimed = app.store.write(move |conn| stored::claim_repository(conn, &repository, &account, now_ms())).await;
    matches!(claimed, Ok(Claim::Yours))
}

type Refusal = (&'static str, String);

/// One source: fetched, unpacked, its plugins stored; the results, and the
/// remote sources its marketplace files list.
async fn import_target(
    app: &Arc<App>,
    job: &Import,
    target: &Target,
) -> Result<(Vec<Value>, Vec<source::Entry>), Refusal> {
    let settings = &app.plugins;
    let bytes = fetch(app, settings, target).await?;
    let limits = settings.limits;
    let (target_owned, account, job_id) = (target.clone(), job.account.clone(), job.id.clone());
    // Unpacking and scanning are CPU work, off the async threads.
    let unpacked = tokio::task::spawn_blocking(move || unpack(&bytes, limits, &target_owned, &account, &job_id))
        .await
        .map_err(|e| ("import_failed", format!("the import stopped: {e}")))??;
    let Unpacked { versions, remote, refused: mut results } = unpacked;
    if versions.is_empty() && results.is_empty() {
        return Err(("no_plugin", "no plugin manifest or marketplace entry was found".into()));
    }
    for version in versions {
        let shown = json!({"slug": version.slug, "path": version.subpath, "repository": version.repository,
            "commit": version.commit, "digest": version.digest});
        let stored = app.store.write(move |conn| stored::store_version(conn, &version)).await;
        let mut result = shown;
        match stored {
            Ok(Stored::Created { revision, seq }) => {
                app.plugin_changes.saw(seq);
                app.journal.wake.notify_one();
                (result["status"], result["revision"]) = ("created".into(), revision.into())
            }
            Ok(Stored::Unchanged { revision }) => {
                (result["status"], result["revision"]) = ("unchanged".into(), revision.into())
            }
            Ok(Stored::NotYours) => {
                (result["status"], result["code"]) = ("failed".into(), "not_plugin_owner".into());
                result["error"] = "the slug is another account's".into();
            }
            Err(e) => {
                tracing::error!(error = %e, "plugins: a version cannot be stored");
                (result["status"], result["code"]) = ("failed".into(), "store_failed".into());
                result["error"] = "the live store failed".into();
            }
        }
        results.push(result);
    }
    Ok((results, remote))
}

/// What one archive holds: the versions to store, the remote sources its
/// marketplace files list, and the results of what was refused in it.
struct Unpacked {
    versions: Vec<NewVersion>,
    remote: Vec<source::Entry>,
    refused: Vec<Value>,
}

/// The archive `bytes` unpacked within `limits`, and its plugins at or
/// under the target's path made into versions. O(expanded bytes).
fn unpack(
    bytes: &[u8],
    limits: plugins::archive::Limits,
    target: &Target,
    account: &str,
    job: &str,
) -> Result<Unpacked, Refusal> {
    let tree = plugins::archive::unpack_tar_gz(bytes, &limits).map_err(|e| ("archive_refused", e.to_string()))?;
    let tree = locate::strip_top_folder(tree);
    if !target.path.is_empty() && !tree.is_dir(&target.path) {
        return Err(("path_not_found", format!("the repository has no folder {:?}", target.path)));
    }
    let found = locate::plugins(&tree, &target.path);
    let mut refused: Vec<Value> =
        found.refused.iter().map(|(name, why)| failed(target, name, "source_refused", why)).collect();
    let workflow = scanner_workflow(&tree);
    let mut versions = Vec::new();
    for mut located in found.plugins {
        if located.listed_name.is_none() {
            located.listed_name.clone_from(&target.listed_name);
        }
        if located.listed_category.is_none() {
            located.listed_category.clone_from(&target.category);
        }
        match version(&tree, &located, target, account, job, workflow.as_deref()) {
            Ok(version) => versions.push(version),
            Err(why) => refused.push(failed(target, &located.root, "plugin_unnamed", why)),
        }
    }
    Ok(Unpacked { versions, remote: found.remote, refused })
}

/// The archive's bytes, through the egress gate, within the size bound.
async fn fetch(app: &App, settings: &Settings, target: &Target) -> Result<Vec<u8>, Refusal> {
    let gate = &app.chat.gate;
    let call = match &target.archive_url {
        Some(url) => gate.get(url),
        None => {
            let url = format!(
                "{}/{}/{}/tar.gz/{}",
                settings.archive_host.trim_end_matches('/'),
                target.owner,
                target.repo,
                target.commit
            );
            gate.call(warp::http::Method::GET, &url, Trust::Configured)
        }
    };
    let response = call.send().await.map_err(|e| match e {
        crate::egress::Error::NotAllowed => ("destination_not_allowed", e.to_string()),
        _ => ("archive_unreachable", format!("the archive host: {e}")),
    })?;
    if !response.status().is_success() {
        return Err(("archive_unavailable", format!("the archive host answered {}", response.status())));
    }
    let max = settings.max_archive_bytes;
    // The bounded read every answer through the gate gets: `Garbage` is its
    // body past `max`; anything else, a body cut off or too slow.
    let body = crate::chat::turn::read_bounded(response, max).await.map_err(|failure| match failure {
        crate::chat::turn::Failure::Garbage(_) => {
            ("archive_too_large", format!("the archive is larger than {max} bytes"))
        }
        _ => ("archive_unreachable", "the archive was cut off or came too slowly".to_string()),
    })?;
    Ok(body.to_vec())
}

/// The workflow of the repository that runs the plugin scanner, if one does.
fn scanner_workflow(tree: &Tree) -> Option<String> {
    tree.under(".github/workflows")
        .filter(|(path, _)| path.ends_with(".yml") || path.ends_with(".yaml"))
        .find(|(_, bytes)| {
            let text = String::from_utf8_lossy(bytes);
            // `ai-plugin-scanner-action` too.
            text.contains("plugin-scanner")
        })
        .map(|(path, _)| path.to_string())
}

/// The version `located` makes: its files, scan, digest and record.
fn version(
    tree: &Tree,
    located: &Located,
    target: &Target,
    account: &str,
    job: &str,
    workflow: Option<&str>,
) -> Result<NewVersion, String> {
    let repository = target.repository();
    let name = located.name(&target.repo);
    let part = locate::slug_part(&name).ok_or_else(|| format!("{name:?} gives no slug"))?;
    let owner = locate::slug_part(&repository.owner).ok_or_else(|| format!("{:?} gives no slug", repository.owner))?;
    let slug = format!("{owner}/{part}");
    let files = locate::subtree(tree, &located.root);
    let digest = plugins::digest::digest(&files);
    let manifest = located.manifest.clone().map(Value::Object).unwrap_or(Value::Null);
    let (scan, note) = match located.ecosystem {
        Ecosystem::Codex => {
            let root = if located.root.is_empty() { repository.repo.clone() } else { located.root.clone() };
            (serde_json::to_value(plugins::scan::report(&files, &root)).unwrap_or(Value::Null), Value::Null)
        }
        other => (
            Value::Null,
            format!("not scanned: the scanner checks Codex plugins, and this is a {} plugin", other.as_str()).into(),
        ),
    };
    let interface = &manifest["interface"];
    let text = |value: &Value| value.as_str().map(str::trim).filter(|s| !s.is_empty()).map(str::to_string);
    let description = text(&manifest["description"])
        .or_else(|| text(&interface["shortDescription"]))
        .or_else(|| text(&interface["longDescription"]));
    let category = located.listed_category.clone().or_else(|| text(&interface["category"]));
    let listed: Vec<Value> = files
        .files()
        .map(|(path, bytes)| json!({"path": path, "size": bytes.len(), "sha256": shared::http::hex(&Sha256::digest(bytes))}))
        .collect();
    let manifest_path = match located.manifest {
        Some(_) => Value::from(plugins::tree::join(&located.root, located.ecosystem.manifest()).unwrap_or_default()),
        None => Value::Null,
    };
    let key = repository.key();
    let subpath = located.root.clone();
    let raw_manifest = manifest_path.as_str().map(|path| {
        format!("https://raw.githubusercontent.com/{}/{}/{}/{path}", repository.owner, repository.repo, target.commit)
    });
    let at = now_ms();
    let record = json!({
        "slug": slug,
        "name": name,
        "displayName": text(&interface["displayName"]).unwrap_or_else(|| name.clone()),
        "description": description,
        "category": category,
        "ecosystem": located.ecosystem.as_str(),
        "version": text(&manifest["version"]),
        "repository": key,
        "sourceRepo": key,
        "repositoryUrl": format!("https://github.com/{}/{}", repository.owner, repository.repo),
        "subpath": subpath,
        "commit": target.commit,
        "digest": digest.value,
        "href": pages::routes::plugin(&slug).0,
        "installUrl": raw_manifest,
        "manifestPath": manifest_path,
        "manifest": manifest,
        "components": components(&files, &located.manifest),
        "files": listed,
        "scan": scan,
        "scanNote": note,
        "scannerWorkflow": workflow,
        "importedAt": rfc3339(at),
        "importJob": job,
    });
    Ok(NewVersion {
        slug,
        account: account.to_string(),
        repository: key,
        subpath,
        ecosystem: located.ecosystem.as_str().to_string(),
        commit: target.commit.clone(),
        digest: digest.value,
        record,
        at,
    })
}

/// What a plugin bundles: skills (folders with a `SKILL.md`), commands and
/// agents (Markdown files in those folders), MCP servers by name (from
/// `.mcp.json` or the manifest's inline object), hooks and apps.
fn components(files: &Tree, manifest: &Option<Map<String, Value>>) -> Value {
    let count_md = |dir: &str| files.under(dir).filter(|(p, _)| p.ends_with(".md")).count();
    let skills = files.files().filter(|(p, _)| plugins::tree::file_name(p) == "SKILL.md").count();
    let mut servers: Vec<String> = Vec::new();
    let mcp = manifest.as_ref().and_then(|m| m.get("mcpServers"));
    let inline = mcp.and_then(Value::as_object).cloned();
    let file = match mcp.and_then(Value::as_str) {
        Some(path) => source::relative_path(path).ok(),
        None => Some(".mcp.json".to_string()),
    };
    let from_file = file
        .and_then(|path| files.file(&path))
        .and_then(|bytes| serde_json::from_slice::<Value>(bytes).ok())
        .and_then(|v| v.get("mcpServers").and_then(Value::as_object).cloned());
    for map in [inline, from_file].into_iter().flatten() {
        servers.extend(map.keys().cloned());
    }
    servers.sort_unstable();
    servers.dedup();
    let has =
        |key: &str, default: &str| manifest.as_ref().is_some_and(|m| m.get(key).is_some()) || files.exists(default);
    json!({
        "skills": skills,
        "commands": count_md("commands"),
        "agents": count_md("agents"),
        "mcpServers": servers,
        "hooks": has("hooks", "hooks/hooks.json"),
        "apps": has("apps", ".app.json"),
    })
}
