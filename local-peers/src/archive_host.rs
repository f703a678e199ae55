//! A repository archive host on loopback, strict as GitHub's codeload:
//! `GET /{owner}/{repo}/tar.gz/{commit}` answers the archive of that
//! commit (a `.tar.gz` whose one top folder is `{repo}-{commit}`), and
//! anything else 404. Archives are written here from folders, or entry by
//! entry with headers set by hand, so hostile ones (links, `..`, devices)
//! are written as an attacker would write them.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};

use warp::Filter as _;

/// One entry of an archive, its header written as given.
pub struct Entry {
    pub path: String,
    pub kind: tar::EntryType,
    pub data: Vec<u8>,
    pub link: String,
}

impl Entry {
    pub fn file(path: impl Into<String>, data: impl Into<Vec<u8>>) -> Entry {
        Entry { path: path.into(), kind: tar::EntryType::Regular, data: data.into(), link: String::new() }
    }

    pub fn symlink(path: impl Into<String>, target: impl Into<String>) -> Entry {
        Entry { path: path.into(), kind: tar::EntryType::Symlink, data: Vec::new(), link: target.into() }
    }
}

/// `entries` as a `.tar.gz`, each header's name and link set byte for
/// byte (names up to 100 bytes).
pub fn tar_gz(entries: &[Entry]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for entry in entries {
        let mut header = tar::Header::new_ustar();
        let old = header.as_old_mut();
        old.name[..entry.path.len()].copy_from_slice(entry.path.as_bytes());
        old.linkname[..entry.link.len()].copy_from_slice(entry.link.as_bytes());
        header.set_entry_type(entry.kind);
        header.set_size(entry.data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append(&header, entry.data.as_slice()).expect("an entry appended");
    }
    let tar = builder.into_inner().expect("the tar stream");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&tar).expect("compressing");
    gz.finish().expect("compressing")
}

/// The regular files under `dir`, as entries under `top/`, in path order.
pub fn entries_of(dir: &Path, top: &str) -> Vec<Entry> {
    let mut files = crate::files_under(dir);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let relative = path.strip_prefix(dir).expect("under the folder").to_string_lossy().replace('\\', "/");
            Entry::file(format!("{top}/{relative}"), std::fs::read(&path).expect("reading a fixture file"))
        })
        .collect()
}

/// The host's archives by `owner/repo/commit`, added to while it runs.
#[derive(Clone, Default)]
pub struct Archives(Arc<Mutex<HashMap<String, Vec<u8>>>>);

impl Archives {
    pub fn put(&self, owner: &str, repo: &str, commit: &str, archive: Vec<u8>) {
        self.0.lock().unwrap().insert(format!("{owner}/{repo}/{commit}"), archive);
    }

    /// `dir`'s files as the archive of `owner/repo` at `commit`.
    pub fn put_folder(&self, owner: &str, repo: &str, commit: &str, dir: &Path) {
        self.put(owner, repo, commit, tar_gz(&entries_of(dir, &format!("{repo}-{commit}"))));
    }
}

/// The host, serving until dropped.
pub struct ArchiveHost {
    pub url: String,
    pub archives: Archives,
    /// How many archives it has sent.
    pub served: Arc<std::sync::atomic::AtomicUsize>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl ArchiveHost {
    /// On a free loopback port.
    pub async fn start() -> ArchiveHost {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
        ArchiveHost::start_on(listener).await
    }

    /// On `listener`.
    pub async fn start_on(listener: tokio::net::TcpListener) -> ArchiveHost {
        let archives = Archives::default();
        let served = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (held, count) = (archives.clone(), served.clone());
        let route = warp::get().and(warp::path!(String / String / "tar.gz" / String)).map(
            move |owner: String, repo: String, commit: String| match held
                .0
                .lock()
                .unwrap()
                .get(&format!("{owner}/{repo}/{commit}"))
                .cloned()
            {
                Some(bytes) => {
                    count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    warp::http::Response::builder()
                        .header("content-type", "application/x-gzip")
                        .body(bytes)
                        .expect("a response")
                }
                None => warp::http::Response::builder().status(404).body(b"Not Found".to_vec()).expect("a response"),
            },
        );
        let (addr, stop) = crate::serve_listener(listener, route);
        ArchiveHost { url: format!("http://{addr}"), archives, served, _stop: stop }
    }
}
