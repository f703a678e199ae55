//! A throwaway PostgreSQL cluster on loopback, for the tests and the
//! benchmarks that need a real one.
//!
//! [`Cluster::start`] runs Debian's `initdb` into a temporary folder and
//! starts `postgres` listening on 127.0.0.1 at a free port and on a socket
//! in that folder, with trust authentication for the one user `almanac`.
//! It is ready when the server says so on its log, not after a guessed
//! time. A supervising shell owns the server: when the [`Cluster`] is
//! dropped, or its process exits however it exits, the shell's standard
//! input closes, and it stops the server (fast shutdown) and removes the
//! folder. Nothing outlives the run.
//!
//! The server refuses to run as root: as root, `initdb` and `postgres` run
//! as the `postgres` user the Debian package creates (through `setpriv`).
//!
//! Where the binaries are: `ALMANAC_POSTGRES_BIN`, else the newest
//! `/usr/lib/postgresql/<version>/bin` (the Makefile installs the package
//! where it is missing).

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How much the cluster keeps on disk; the server's `fsync`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Every commit synced, as a deployment runs it (benchmarks).
    Synced,
    /// Nothing synced: fast, and lost with the machine (tests).
    Unsynced,
}

/// A running throwaway cluster.
pub struct Cluster {
    port: u16,
    socket_dir: PathBuf,
    supervisor: Child,
    /// Closed on drop: the supervisor then stops the server.
    stdin: Option<ChildStdin>,
}

/// The role every connection uses.
pub const USER: &str = "almanac";

/// The longest the server may take to say it is ready.
const READY_WITHIN: Duration = Duration::from_secs(60);

impl Cluster {
    pub fn start(durability: Durability) -> std::io::Result<Cluster> {
        let bin = bin_dir()?;
        let root = tempfile::Builder::new().prefix("almanac-pg-").tempdir()?.keep();
        let data = root.join("data");
        let as_server = server_user()?;
        if let Some((uid, gid)) = as_server {
            std::os::unix::fs::chown(&root, Some(uid), Some(gid))?;
        }
        let initdb = run_as(as_server, &bin.join("initdb"))
            .args(["--auth=trust", "--username", USER, "--encoding=UTF8", "--locale=C", "--no-sync", "-D"])
            .arg(&data)
            .stdout(Stdio::null())
            .output()?;
        if !initdb.status.success() {
            let _ = std::fs::remove_dir_all(&root);
            return Err(failed("initdb", &String::from_utf8_lossy(&initdb.stderr)));
        }
        let port = free_port()?;
        let fsync = match durability {
            Durability::Synced => "on",
            Durability::Unsynced => "off",
        };
        let server = format!(
            "{} -D {} -h 127.0.0.1 -p {port} -k {} -c fsync={fsync} -c full_page_writes={fsync} \
             -c max_connections=300 -c shared_buffers=64MB -c logging_collector=off",
            shell_word(&bin.join("postgres")),
            shell_word(&data),
            shell_word(&root),
        );
        let prefix = match as_server {
            Some((uid, gid)) => format!("setpriv --reuid={uid} --regid={gid} --clear-groups "),
            None => String::new(),
        };
        // The server's stdin is closed; the shell's is this process's pipe.
        let script = format!(
            "{prefix}{server} <&- & pid=$!; read -r _; kill -INT $pid; wait $pid; rm -rf {}",
            shell_word(&root)
        );
        let mut supervisor = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stdin = supervisor.stdin.take();
        let log = supervisor.stderr.take().expect("the supervisor's stderr is piped");
        let (ready, told) = mpsc::channel();
        std::thread::spawn(move || {
            let mut said = Vec::new();
            for line in BufReader::new(log).lines().map_while(Result::ok) {
                if line.contains("ready to accept connections") {
                    let _ = ready.send(Ok(()));
                } else if said.len() < 50 {
                    said.push(line);
                }
            }
            let _ = ready.send(Err(said.join("\n")));
        });
        let cluster = Cluster { port, socket_dir: root, supervisor, stdin };
        match told.recv_timeout(READY_WITHIN) {
            Ok(Ok(())) => Ok(cluster),
            Ok(Err(log)) => Err(failed("postgres", &log)),
            Err(_) => Err(failed("postgres", "did not say it was ready within a minute")),
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The folder of the server's socket.
    pub fn socket_dir(&self) -> &Path {
        &self.socket_dir
    }

    /// The URL of database `name` over TCP on loopback.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/{name}", self.port)
    }

    /// Creates database `name` (a letter, then letters, digits and `_`)
    /// and answers its URL. On a thread of its own, so that async code may
    /// call it: the blocking client runs a runtime of its own.
    pub fn create_database(&self, name: &str) -> Result<String, postgres::Error> {
        assert!(
            name.starts_with(|c: char| c.is_ascii_lowercase())
                && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
            "a database name of letters, digits and _: {name:?}"
        );
        let admin = self.url("postgres");
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut client = postgres::Client::connect(&admin, postgres::NoTls)?;
                client.batch_execute(&format!("CREATE DATABASE {name}"))
            })
            .join()
            .expect("creating a database does not panic")
        })?;
        Ok(self.url(name))
    }

    /// Stops the server now (fast shutdown) and waits until it has and
    /// its folder is gone.
    pub fn stop(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"stop\n");
        }
        let _ = self.supervisor.wait();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.shut();
    }
}

/// The cluster this process shares among its tests (unsynced), started at
/// first use and gone when the process ends, however it ends.
pub fn shared() -> &'static Cluster {
    static CLUSTER: std::sync::OnceLock<Cluster> = std::sync::OnceLock::new();
    CLUSTER.get_or_init(|| Cluster::start(Durability::Unsynced).expect("a throwaway PostgreSQL cluster"))
}

fn failed(what: &str, said: &str) -> std::io::Error {
    std::io::Error::other(format!("{what} failed: {}", said.trim()))
}

/// `ALMANAC_POSTGRES_BIN`, else the newest Debian PostgreSQL's.
fn bin_dir() -> std::io::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("ALMANAC_POSTGRES_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("/usr/lib/postgresql: {e}; install Debian's postgresql (make debian)"),
            )
        })?
        .filter_map(Result::ok)
        .filter_map(|entry| Some((entry.file_name().to_str()?.parse().ok()?, entry.path().join("bin"))))
        .filter(|(_, bin)| bin.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no /usr/lib/postgresql/*/bin/initdb; install Debian's postgresql (make debian)",
        )
    })
}

/// As root, the `postgres` user's ids (the server refuses root).
fn server_user() -> std::io::Result<Option<(u32, u32)>> {
    let me = Command::new("id").arg("-u").output()?;
    if String::from_utf8_lossy(&me.stdout).trim() != "0" {
        return Ok(None);
    }
    let id = |flag: &str| -> std::io::Result<u32> {
        let out = Command::new("id").args([flag, "postgres"]).output()?;
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|_| failed("id", "no postgres user to run the server as (root may not)"))
    };
    Ok(Some((id("-u")?, id("-g")?)))
}

fn run_as(user: Option<(u32, u32)>, program: &Path) -> Command {
    match user {
        Some((uid, gid)) => {
            let mut command = Command::new("setpriv");
            command.args([format!("--reuid={uid}"), format!("--regid={gid}"), "--clear-groups".into()]).arg(program);
            command
        }
        None => Command::new(program),
    }
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port())
}

fn shell_word(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_serves_its_databases_and_leaves_nothing() {
        let cluster = Cluster::start(Durability::Unsynced).unwrap();
        let url = cluster.create_database("scratch_test").unwrap();
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let row = client.query_one("SELECT current_database(), current_user", &[]).unwrap();
        assert_eq!((row.get::<_, String>(0), row.get::<_, String>(1)), ("scratch_test".into(), USER.into()));
        let folder = cluster.socket_dir().to_path_buf();
        assert!(folder.join("data").exists());
        cluster.stop();
        assert!(!folder.exists(), "{} is left", folder.display());
    }
}
