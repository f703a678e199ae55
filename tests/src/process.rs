//! The project's binaries as child processes on loopback.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// The variable naming the fault point to arm (`shared::fault`). Only the
/// test builds `generator-with-faults` and `api-with-faults` read it; an
/// api started with it set is that build.
pub const FAULT: &str = "ALMANAC_FAULT";

/// Path of a workspace binary, built by `make test` before the tests run.
pub fn binary(name: &str) -> PathBuf {
    // Test executables live in <target>/<profile>/deps; binaries one up.
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe.parent().and_then(Path::parent).expect("target profile dir");
    let path = dir.join(name);
    assert!(path.exists(), "{} is missing: build the binaries first (`make test` does)", path.display());
    path
}

/// Runs `generator` with `args`, returning its output (warnings only).
pub fn generator(args: &[&str]) -> Output {
    generator_logged(args, "warn")
}

/// Runs `generator` with `args` and a log level (`RUST_LOG`).
pub fn generator_logged(args: &[&str], level: &str) -> Output {
    Command::new(binary("generator")).args(args).env("RUST_LOG", level).output().expect("running the generator")
}

/// Runs `generator build` on a site and data dir with extra args; panics
/// with its stderr when it fails. Returns its info-level log.
pub fn build(site: &Path, data: &Path, extra: &[&str]) -> String {
    let mut args = vec!["build", "--site-dir", site.to_str().unwrap(), "--data-dir", data.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = generator_logged(&args, "info");
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "generator failed: {log}");
    log
}

/// A running api, stopped on drop.
pub struct Api {
    child: Child,
    pub base: String,
}

impl Api {
    pub fn start(site: &Path, data: &Path) -> Api {
        Api::start_with(site, data, &[])
    }

    /// [`Api::start`] with more command-line flags.
    pub fn start_with(site: &Path, data: &Path, extra: &[&str]) -> Api {
        Api::spawn(site, data, extra, "warn", Stdio::inherit(), false, &[])
    }

    /// [`Api::start_with`], writing the api's info-level log to `log`.
    pub fn start_logged(site: &Path, data: &Path, extra: &[&str], log: &Path) -> Api {
        Api::start_logged_with_env(site, data, extra, log, &[])
    }

    /// [`Api::start_logged`] with environment variables set for the api.
    pub fn start_logged_with_env(site: &Path, data: &Path, extra: &[&str], log: &Path, env: &[(&str, &str)]) -> Api {
        let file = std::fs::File::create(log).expect("creating the api's log");
        Api::spawn(site, data, extra, "info", Stdio::from(file), false, env)
    }

    /// [`Api::start_with`] for a fixture shared by a whole test binary
    /// (kept in a `static`, so never dropped): the api ends when the test
    /// process does.
    pub fn start_shared(site: &Path, data: &Path, extra: &[&str]) -> Api {
        Api::spawn(site, data, extra, "warn", Stdio::inherit(), true, &[])
    }

    fn spawn(
        site: &Path,
        data: &Path,
        extra: &[&str],
        level: &str,
        stderr: Stdio,
        shared: bool,
        env: &[(&str, &str)],
    ) -> Api {
        // Port 0: the system picks a free port and the api says which, so
        // no other process can take it between a choice and the bind.
        let armed = env.iter().any(|(name, _)| *name == FAULT);
        let mut command = Command::new(binary(if armed { "api-with-faults" } else { "api" }));
        command
            .args(["--bind", "127.0.0.1:0", "--reload-ms", "50"])
            .arg("--site-dir")
            .arg(site)
            .arg("--data-dir")
            .arg(data)
            .args(extra)
            .env("RUST_LOG", level)
            // Availability checks would call the datasets' agents at their
            // hosts, off this machine: a test that wants them says where
            // names resolve (`--egress-dns`) and how often to check.
            .env("ALMANAC_AVAILABILITY_EVERY_S", "0")
            // Plugin imports fetch GitHub's archives by default: here they
            // reach a closed port on loopback unless a test names its host.
            .env("ALMANAC_PLUGINS_ARCHIVE_HOST", "http://127.0.0.1:9")
            .envs(store_for(data))
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(stderr);
        let mut child = match shared {
            true => spawn_ending_with_this_process(command),
            false => command.spawn(),
        }
        .expect("starting the api");
        let stdout = child.stdout.take().expect("a piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // Read every line (the pipe must not fill); the first that names
            // the address is the one wanted.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("api listening on ") {
                    let _ = tx.send(addr.to_string());
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(base) => Api { child, base },
            Err(_) => {
                let status = child.try_wait().ok().flatten();
                let _ = child.kill();
                panic!("the api did not say where it listens (exit status: {status:?})");
            }
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// The api's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Ends the api as `kill -9` would, and waits for it to be gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// How the api exited, if it does within `within`.
    pub fn exit_within(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("polling the api") {
                return Some(status);
            }
            if std::time::Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The build `/health` names, once it names `expected` (the api looks
    /// for new builds every 50 ms), or whatever it names after 10 s.
    pub fn served_build(&self, expected: &str) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let health: serde_json::Value = http_client::blocking::get(self.url("/health")).unwrap().json().unwrap();
            let build = health["build"].as_str().unwrap_or_default().to_string();
            if build == expected || std::time::Instant::now() > deadline {
                return build;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Api {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The variable that runs the apis the tests start on a live store in
/// PostgreSQL (`postgres`) instead of a SQLite file in their data folder
/// (unset, the default). `make test` runs the tests of the store's users
/// both ways.
pub const TEST_STORE: &str = "ALMANAC_TEST_STORE";

/// Whether [`TEST_STORE`] asks for PostgreSQL.
pub fn on_postgres() -> bool {
    std::env::var(TEST_STORE).is_ok_and(|engine| engine == "postgres")
}

/// The live store of an api started on `data`: its SQLite file, or (when
/// [`TEST_STORE`] asks for PostgreSQL) a database of its own, one per data
/// folder, so an api started again on the same folder finds what the last
/// one stored.
pub fn store_location(data: &Path) -> live_store::Location {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    if !on_postgres() {
        return live_store::Location::File(data.join("live/store.sqlite"));
    }
    static DATABASES: OnceLock<Mutex<HashMap<PathBuf, String>>> = OnceLock::new();
    let mut databases = DATABASES.get_or_init(Default::default).lock().unwrap();
    let next = databases.len();
    let url = databases.entry(data.to_path_buf()).or_insert_with(|| {
        pg_scratch::shared().create_database(&format!("api_{next}")).expect("a database for the api")
    });
    live_store::Location::Postgres(url.clone())
}

/// `f` with a connection of its own to the live store of an api started
/// on `data` (see [`store_location`]), to look at or arrange what it
/// holds.
pub fn with_store<T: Send>(data: &Path, f: impl FnOnce(&live_store::Conn) -> T + Send) -> T {
    with_store_at(&store_location(data), f)
}

/// `f` with a connection of its own to the live store at `location`. On a
/// thread of its own, so that async tests may call it: the PostgreSQL
/// client runs a runtime of its own.
pub fn with_store_at<T: Send>(location: &live_store::Location, f: impl FnOnce(&live_store::Conn) -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| f(&live_store::Conn::open(location).expect("the api's live store"))).join().unwrap()
    })
}

/// The api's `--store` as an environment variable, on PostgreSQL, with a
/// short lease of the background duties: an api killed and started again
/// by a test takes them back within half a second.
fn store_for(data: &Path) -> Vec<(&'static str, String)> {
    match store_location(data) {
        live_store::Location::Postgres(url) => {
            vec![("ALMANAC_STORE", url), ("ALMANAC_DUTIES_LEASE_MS", "500".to_string())]
        }
        live_store::Location::File(_) => Vec::new(),
    }
}

type SpawnRequest = (Command, std::sync::mpsc::Sender<std::io::Result<Child>>);

/// Spawns `command` so that the child is killed when this process ends,
/// however it ends. Linux delivers `PR_SET_PDEATHSIG` when the *thread*
/// that spawned the child exits, so children are spawned by one thread
/// that lives as long as the process.
fn spawn_ending_with_this_process(mut command: Command) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    use std::sync::{mpsc, Mutex, OnceLock};
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::spawn(move || {
            // The sender lives in a static: this loop never ends.
            for (mut command, reply) in rx {
                let _ = reply.send(command.spawn());
            }
        });
        Mutex::new(tx)
    });
    // SAFETY: prctl is async-signal-safe and touches no memory of ours.
    unsafe {
        command.pre_exec(|| match libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        });
    }
    let (tx, rx) = mpsc::channel();
    spawner.lock().expect("spawner lock").send((command, tx)).expect("the spawner thread is alive");
    rx.recv().expect("the spawner answers")
}
