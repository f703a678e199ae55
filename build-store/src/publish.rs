//! Uploading a build: its routes' objects, its search folder and snapshot,
//! its index and host configurations, its manifest, then the pointer.
//!
//! What the bucket already holds is listed once (`objects/`: O(N / 1000)
//! requests) and not sent again. Route files are read through
//! [`shared::site::BuildFiles`] and checked against the manifest before
//! they leave: a damaged local file is never published.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use anyhow::{Context, Result};
use futures_util::{StreamExt, TryStreamExt};
use object_store::{Attribute, Attributes, PutOptions, PutPayload};
use shared::manifest::{self, Manifest};
use shared::site::{BuildFiles, Layout};

use crate::{entry_key, Bucket};

/// What a publish did.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Published {
    pub build: String,
    /// Distinct route objects of the builds sent (none when the bucket
    /// held the build already).
    pub objects: usize,
    /// Those sent; the rest were in the bucket already.
    pub uploaded: usize,
    pub uploaded_bytes: u64,
    /// Builds sent whole (a layer's base first, if missing).
    pub builds: Vec<String>,
}

/// Text objects the bucket's pointer and build files are.
const POINTER_TYPE: &str = "text/plain; charset=utf-8";
const NO_CACHE: &str = "no-cache";

impl Bucket {
    /// Uploads build `id` of `layout` (and its base, for a layer, when
    /// missing), then points `current` at it.
    pub async fn publish(&self, layout: &Layout, id: &str) -> Result<Published> {
        let mut report = Published { build: id.to_string(), ..Published::default() };
        let manifest = Manifest::load(&layout.build_dir(id))?;
        anyhow::ensure!(manifest.build == id, "the manifest in builds/{id} names build {}", manifest.build);
        let mut present = self.names_under("objects").await?;
        let mut order = Vec::new();
        if let Some(base) = &manifest.base {
            order.push((base.clone(), Manifest::load(&layout.build_dir(base))?));
        }
        order.push((id.to_string(), manifest));
        for (build, manifest) in &order {
            if self.has_build(build).await? {
                continue;
            }
            self.upload_build(layout, manifest, &mut present, &mut report).await?;
            report.builds.push(build.clone());
        }
        self.put("current", bytes::Bytes::from(id.to_string()), headers(POINTER_TYPE, NO_CACHE))
            .await
            .context("pointing current at the build")?;
        Ok(report)
    }

    /// Uploads one build whole, its manifest last.
    async fn upload_build(
        &self,
        layout: &Layout,
        manifest: &Manifest,
        present: &mut HashSet<String>,
        report: &mut Published,
    ) -> Result<()> {
        let id = &manifest.build;
        let dir = layout.build_dir(id);
        self.upload_objects(&dir, manifest, present, report).await?;
        self.upload_folder(&layout.search(id), &format!("search/{id}")).await?;
        let snapshot = format!("snapshots/{}", manifest.snapshot);
        if !self.exists(&snapshot).await? {
            self.upload_file(&layout.snapshot(manifest), &snapshot, Attributes::new()).await?;
        }
        // The build's own files besides the routes': its index and host
        // configurations, then its manifest.
        let route_files: HashSet<&str> = manifest.routes.iter().map(|e| e.file()).collect();
        for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
            let name = entry?.file_name().to_string_lossy().to_string();
            let path = dir.join(&name);
            if name == manifest::FILE_NAME || route_files.contains(name.as_str()) || !path.is_file() {
                continue;
            }
            self.upload_file(&path, &format!("builds/{id}/{name}"), Attributes::new()).await?;
        }
        let bytes = bytes::Bytes::from(manifest.to_bytes());
        let key = format!("builds/{id}/{}", manifest::FILE_NAME);
        self.put(&key, bytes, headers("application/json", NO_CACHE)).await
    }

    /// Uploads the route objects of `manifest` that the bucket lacks, at
    /// most `concurrency` at once.
    async fn upload_objects(
        &self,
        dir: &Path,
        manifest: &Manifest,
        present: &mut HashSet<String>,
        report: &mut Published,
    ) -> Result<()> {
        let files = BuildFiles::open(dir, manifest)?;
        // One entry per key: routes with the same bytes and headers share it.
        let mut wanted = BTreeMap::new();
        for entry in &manifest.routes {
            wanted.entry(entry_key(entry)).or_insert(entry);
        }
        report.objects += wanted.len();
        let missing: Vec<_> = wanted.into_iter().filter(|(key, _)| !present.contains(key)).collect();
        let half = missing.len() / 2;
        let mut sent = 0;
        let files = &files;
        let mut uploads = futures_util::stream::iter(missing)
            .map(|(key, entry)| async move {
                let bytes = files.read(entry)?;
                let length = bytes.len() as u64;
                let mut attributes = headers(entry.content_type, entry.cache_control);
                attributes.insert(Attribute::Metadata("etag".into()), entry.etag.as_str().to_string().into());
                self.put(&format!("objects/{key}"), bytes::Bytes::from(bytes), attributes).await?;
                anyhow::Ok((key, length))
            })
            .buffer_unordered(self.transfer.concurrency.max(1));
        while let Some((key, length)) = uploads.try_next().await? {
            present.insert(key);
            report.uploaded += 1;
            report.uploaded_bytes += length;
            sent += 1;
            if sent == half {
                shared::fault::point("uploaded-half");
            }
        }
        Ok(())
    }

    /// Uploads the files of the flat folder `dir`, if there is one, under
    /// `under/` that the bucket lacks (a search folder: its files are never rewritten under
    /// one build's id).
    async fn upload_folder(&self, dir: &Path, under: &str) -> Result<()> {
        if !dir.exists() {
            // A build without agents has no search folder.
            return Ok(());
        }
        let present = self.names_under(under).await?;
        for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let path = entry?.path();
            let name = path.file_name().expect("an entry has a name").to_string_lossy().to_string();
            if path.is_file() && !present.contains(&name) {
                self.upload_file(&path, &format!("{under}/{name}"), Attributes::new()).await?;
            }
        }
        Ok(())
    }

    /// Streams the file at `path` to `relative`, in parts when large.
    async fn upload_file(&self, path: &Path, relative: &str, attributes: Attributes) -> Result<()> {
        use tokio::io::AsyncReadExt;
        let mut file = tokio::fs::File::open(path).await.with_context(|| format!("opening {}", path.display()))?;
        let mut writer = object_store::buffered::BufWriter::new(self.store.clone(), self.key(relative))
            .with_attributes(attributes)
            .with_max_concurrency(self.transfer.concurrency.max(1));
        let mut buffer = vec![0; 1 << 20];
        loop {
            let read = file.read(&mut buffer).await.with_context(|| format!("reading {}", path.display()))?;
            if read == 0 {
                break;
            }
            writer.put(bytes::Bytes::copy_from_slice(&buffer[..read])).await?;
        }
        tokio::io::AsyncWriteExt::shutdown(&mut writer)
            .await
            .with_context(|| format!("uploading {relative} to {}", self.url))
    }

    async fn put(&self, relative: &str, bytes: bytes::Bytes, attributes: Attributes) -> Result<()> {
        let options = PutOptions { attributes, ..PutOptions::default() };
        self.store
            .put_opts(&self.key(relative), PutPayload::from_bytes(bytes), options)
            .await
            .with_context(|| format!("uploading {relative} to {}", self.url))?;
        Ok(())
    }
}

fn headers(content_type: &str, cache_control: &str) -> Attributes {
    let mut attributes = Attributes::new();
    attributes.insert(Attribute::ContentType, content_type.to_string().into());
    attributes.insert(Attribute::CacheControl, cache_control.to_string().into());
    attributes
}
