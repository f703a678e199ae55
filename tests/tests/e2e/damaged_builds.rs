//! Published files are not trusted blindly. The api reads a build's files
//! when they are first asked for: a file that is not what the build's index
//! says (truncated, edited, replaced by a link out of the build) is never
//! served; its route answers 500 naming the damage (304 to a client that
//! holds the bytes the index names: that needs no file), every other
//! route serves, and once repaired the file is served. A build paired with
//! another build's snapshot is refused whole: the api keeps serving the
//! build it has, and loads it once repaired. The generator takes nothing
//! from a damaged live build: it writes every file anew, so damage never
//! reaches a later build.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hcs20::Topics;
use shared::manifest::{Entry, Manifest};
use shared::site::Layout;
use tests::datagen::random_corpus_scaled;
use tests::process::{build, Api};
use tests::TempDir;

fn live(site: &Path) -> (PathBuf, Manifest) {
    let dir = std::fs::canonicalize(site.join("current")).unwrap();
    let manifest = Manifest::load(&dir).unwrap();
    (dir, manifest)
}

/// Waits until the log holds `text`.
fn logged(log: &Path, text: &str) {
    tests::wait::until_blocking(&format!("the api logging {text:?}"), 500, Duration::from_millis(20), || {
        std::fs::read_to_string(log).unwrap_or_default().contains(text)
    });
}

/// The ledger at `corpus` grown to `messages`, built: the live build.
fn grown(corpus: &Path, site: &Path, data: &Path, messages: usize) -> (PathBuf, Manifest) {
    random_corpus_scaled(messages, 5_000, 11, Topics::MAINNET).write_pages(corpus, false).unwrap();
    build(site, data, &["--ledger-dir", corpus.to_str().unwrap()]);
    live(site)
}

/// A file of the build with enough bytes to damage, and its route.
fn victim(manifest: &Manifest) -> &Entry {
    manifest.routes.iter().find(|e| e.route() == "/hcs20/stats").expect("a stats file")
}

/// Two builds of a growing ledger; the second's stats file is the one
/// damaged (`file`, whose bytes as built are `pristine`).
struct Builds {
    root: TempDir,
    corpus: PathBuf,
    site: PathBuf,
    data: PathBuf,
    first: Manifest,
    second: Manifest,
    entry: Entry,
    file: PathBuf,
    pristine: Vec<u8>,
}

impl Builds {
    fn new(label: &str) -> Builds {
        let root = TempDir::new(label);
        let corpus = root.path().join("corpus");
        let (site, data) = (root.path().join("site"), root.path().join("data"));
        let (_, first) = grown(&corpus, &site, &data, 10_000);
        let (second_dir, second) = grown(&corpus, &site, &data, 12_000);
        let entry = victim(&second).clone();
        let file = second_dir.join(entry.file());
        let pristine = std::fs::read(&file).unwrap();
        Builds { root, corpus, site, data, first, second, entry, file, pristine }
    }

    /// The ledger grown to `messages`, built: the live build.
    fn grow(&self, messages: usize) -> (PathBuf, Manifest) {
        grown(&self.corpus, &self.site, &self.data, messages)
    }

    fn layout(&self) -> Layout {
        Layout::new(&self.site, &self.data)
    }

    fn snapshot(&self, manifest: &Manifest) -> PathBuf {
        self.layout().snapshots().join(&manifest.snapshot)
    }

    /// An api serving the first build, then the second published after
    /// `damage`: the api, and its log.
    fn serve_damaged(&self, name: &str, damage: impl FnOnce()) -> (Api, PathBuf) {
        shared::site::publish(&self.layout(), &self.first).unwrap();
        let log = self.root.path().join(format!("api-{}.log", name.replace(' ', "-")));
        let api = Api::start_logged(&self.site, &self.data, &[], &log);
        assert_eq!(api.served_build(&self.first.build), self.first.build, "{name}");
        damage();
        shared::site::publish(&self.layout(), &self.second).unwrap();
        (api, log)
    }

    /// The stats file put back as built: the api serves it.
    fn repaired(&self, api: &Api, name: &str) {
        let _ = std::fs::remove_file(&self.file);
        std::fs::write(&self.file, &self.pristine).unwrap();
        assert_eq!(api.served_build(&self.second.build), self.second.build, "{name}: retried once repaired");
        let stats = http_client::blocking::get(api.url("/hcs20/stats")).unwrap();
        assert_eq!(stats.headers()["etag"].to_str().unwrap(), self.entry.etag, "{name}: the repaired bytes");
    }
}

/// A damaged file is never served: its route answers 500 naming the
/// damage (304 to a client holding the indexed bytes), every other route
/// serves.
#[test]
fn a_damaged_file_is_refused_alone() {
    let builds = Builds::new("damaged-file");
    let outside = builds.root.path().join("outside.json");
    std::fs::write(&outside, &builds.pristine).unwrap();
    let (file, pristine) = (&builds.file, &builds.pristine);
    let edited = || {
        let mut edited = pristine.clone();
        edited[pristine.len() / 2] ^= 0x20;
        edited
    };
    // Each damage, and what the api logs and answers.
    type Damage<'a> = Box<dyn Fn() + 'a>;
    let cases: [(&str, Damage, &str); 3] = [
        (
            "truncated",
            Box::new(|| std::fs::write(file, &pristine[..pristine.len() / 2]).unwrap()),
            "bytes, the manifest says",
        ),
        ("edited, same length", Box::new(|| std::fs::write(file, edited()).unwrap()), "does not hash to its ETag"),
        (
            "a link out of the build",
            Box::new(|| {
                std::fs::remove_file(file).unwrap();
                std::os::unix::fs::symlink(&outside, file).unwrap();
            }),
            "is not a regular file",
        ),
    ];
    for (name, damage, says) in cases {
        let (api, log) = builds.serve_damaged(name, damage);
        assert_eq!(api.served_build(&builds.second.build), builds.second.build, "{name}: the build loads");
        let stats = http_client::blocking::get(api.url("/hcs20/stats")).unwrap();
        assert_eq!(stats.status(), 500, "{name}: the damaged file is not served");
        // Whether a copy of the indexed bytes is current needs only the
        // index: the file is read (and found damaged) only to be sent.
        let asked = http_client::blocking::client().get(api.url("/hcs20/stats"));
        let current = asked.header("if-none-match", builds.entry.etag.as_str()).send().unwrap();
        assert_eq!(current.status(), 304, "{name}: a client holding the indexed bytes");
        assert_eq!(current.headers()["etag"].to_str().unwrap(), builds.entry.etag, "{name}");
        let body: serde_json::Value = stats.json().unwrap();
        assert_eq!(body["code"], "damaged_file", "{name}");
        assert!(body["error"].as_str().unwrap().contains(says), "{name}: {body}");
        logged(&log, says);
        let other = http_client::blocking::get(api.url("/hcs20")).unwrap();
        assert_eq!(other.status(), 200, "{name}: the other routes serve");
        builds.repaired(&api, name);
    }
}

/// A build paired with another build's snapshot is refused whole: the api
/// keeps serving the build it has, and loads it once repaired.
#[test]
fn a_build_with_another_builds_snapshot_is_refused_whole() {
    let builds = Builds::new("damaged-snapshot");
    let (first_snapshot, second_snapshot) = (builds.snapshot(&builds.first), builds.snapshot(&builds.second));
    let second_snapshot_bytes = std::fs::read(&second_snapshot).unwrap();
    let (api, log) = builds.serve_damaged("snapshot", || {
        std::fs::copy(&first_snapshot, &second_snapshot).unwrap();
    });
    logged(&log, "could not load the published build");
    logged(&log, "not to build");
    assert_eq!(api.served_build(&builds.first.build), builds.first.build, "the previous build still serves");
    let stats = http_client::blocking::get(api.url("/hcs20/stats")).unwrap();
    assert_eq!(stats.headers()["etag"].to_str().unwrap(), victim(&builds.first).etag, "the previous bytes");
    std::fs::write(&second_snapshot, second_snapshot_bytes).unwrap();
    builds.repaired(&api, "snapshot");
}

/// Damage in the live build is not linked into the next one: a run with
/// nothing new writes the damaged build anew, and so does a run with
/// something new (its kept files are linked only from a sound build).
#[test]
fn damage_in_the_live_build_is_never_carried_forward() {
    let builds = Builds::new("damaged-forward");
    std::fs::write(&builds.file, &builds.pristine[..10]).unwrap();
    build(&builds.site, &builds.data, &["--ledger-dir", builds.corpus.to_str().unwrap()]);
    let (dir, manifest) = live(&builds.site);
    assert_eq!(manifest.build, builds.second.build, "the same data gives the same build");
    assert!(shared::site::damaged(&dir, &manifest).is_empty(), "every file is what the manifest says");
    assert_eq!(std::fs::read(dir.join(builds.entry.file())).unwrap(), builds.pristine);
    std::fs::write(dir.join(builds.entry.file()), &builds.pristine[..10]).unwrap();
    let (dir, manifest) = builds.grow(13_000);
    assert!(shared::site::damaged(&dir, &manifest).is_empty());
}

/// The agents' search folder is checked as its build loads: with records
/// cut short or a file missing, the build is not served and the api says
/// why; repaired, it is served at the next try.
#[test]
fn a_damaged_search_folder_is_refused_until_repaired() {
    let root = TempDir::new("damaged-search");
    let (site, data) = (root.path().join("site"), root.path().join("data"));
    let (ledger, broker) =
        (tests::workspace_root().join("datasets/ledger"), tests::workspace_root().join("datasets/broker"));
    build(&site, &data, &["--ledger-dir", ledger.to_str().unwrap(), "--broker-dir", broker.to_str().unwrap()]);
    let (_, manifest) = live(&site);
    let folder = data.join("search").join(&manifest.build);
    type Damage = fn(&Path);
    let cases: &[(&str, &str, Damage)] = &[
        ("records cut short", "no header or footer", |folder| {
            let path = folder.join(search::records::RECORDS);
            let bytes = std::fs::read(&path).unwrap();
            std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        }),
        ("feedback missing", "feedback.bin", |folder| {
            std::fs::remove_file(folder.join(search::records::FEEDBACK)).unwrap();
        }),
    ];
    let pristine = root.path().join("pristine");
    std::fs::create_dir_all(&pristine).unwrap();
    for entry in std::fs::read_dir(&folder).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), pristine.join(entry.file_name())).unwrap();
    }
    for (name, says, damage) in cases {
        damage(&folder);
        let log = root.path().join(format!("api-{}.log", name.replace(' ', "-")));
        let api = Api::start_logged(&site, &data, &[], &log);
        logged(&log, "could not load the published build");
        logged(&log, says);
        assert_ne!(api.served_build(""), manifest.build, "{name}: the damaged build is not served");
        for entry in std::fs::read_dir(&pristine).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), folder.join(entry.file_name())).unwrap();
        }
        assert_eq!(api.served_build(&manifest.build), manifest.build, "{name}: served once repaired");
        let search = http_client::blocking::get(api.url("/api/v1/search?q=translator")).unwrap();
        assert_eq!(search.status(), 200, "{name}");
        let body: serde_json::Value = search.json().unwrap();
        assert!(body["total"].as_u64().unwrap() > 0, "{name}: {body}");
    }
}
