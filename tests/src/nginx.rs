//! Debian's nginx on loopback, every path it writes inside a test's
//! folder: the static host the build configures, and the load balancer in
//! front of api replicas.

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

/// A free port of 127.0.0.1 (free when asked: nginx binds it later).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// nginx, with every path it writes inside `dir`, including the build's
/// `_nginx.conf`; stopped on drop.
pub struct Nginx {
    child: Child,
    conf: std::path::PathBuf,
}

impl Nginx {
    /// Starts nginx with `site_conf` included in its `http` block, and
    /// waits until it accepts on `port` of 127.0.0.1 (the port the
    /// configuration listens on).
    pub fn start(dir: &Path, site_conf: &Path, port: u16) -> Nginx {
        let temp = |name: &str| {
            let path = dir.join(name);
            std::fs::create_dir_all(&path).unwrap();
            path.display().to_string()
        };
        let conf = dir.join("nginx.conf");
        std::fs::write(
            &conf,
            format!(
                "worker_processes 1;\ndaemon off;\npid {pid};\nerror_log {log} warn;\nevents {{ worker_connections 256; }}\n\
                 http {{\n    access_log off;\n    client_body_temp_path {body};\n    proxy_temp_path {proxy};\n    \
                 fastcgi_temp_path {fastcgi};\n    uwsgi_temp_path {uwsgi};\n    scgi_temp_path {scgi};\n    \
                 include {site};\n}}\n",
                pid = dir.join("nginx.pid").display(),
                log = dir.join("error.log").display(),
                body = temp("body"),
                proxy = temp("proxy"),
                fastcgi = temp("fastcgi"),
                uwsgi = temp("uwsgi"),
                scgi = temp("scgi"),
                site = site_conf.display(),
            ),
        )
        .unwrap();
        let nginx = std::env::var("ALMANAC_NGINX").unwrap_or_else(|_| "/usr/sbin/nginx".into());
        let error_log = dir.join("error.log").display().to_string();
        let test = Command::new(&nginx).args(["-t", "-q", "-e", &error_log, "-c"]).arg(&conf).output().unwrap();
        assert!(test.status.success(), "nginx -t: {}", String::from_utf8_lossy(&test.stderr));
        let child =
            Command::new(&nginx).args(["-e", &error_log, "-c"]).arg(&conf).spawn().expect("nginx (make debian)");
        crate::wait::until_blocking("nginx listening", 500, Duration::from_millis(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Nginx { child, conf }
    }

    /// Makes nginx read its configuration again, and waits until the
    /// reload is done: a new worker runs and every old one has exited (until
    /// then, an old worker may still accept a connection and answer with the
    /// old configuration).
    pub fn reload(&self) {
        let before = self.workers();
        let nginx = std::env::var("ALMANAC_NGINX").unwrap_or_else(|_| "/usr/sbin/nginx".into());
        let status = Command::new(nginx).args(["-s", "reload", "-c"]).arg(&self.conf).status().unwrap();
        assert!(status.success());
        crate::wait::until_blocking("nginx's reload ending", 1000, Duration::from_millis(20), || {
            let now = self.workers();
            now.iter().any(|w| !before.contains(w)) && !now.iter().any(|w| before.contains(w))
        });
    }

    /// The master's child processes, its workers, from `/proc`.
    fn workers(&self) -> Vec<u32> {
        let master = self.child.id();
        let parent = |stat: &str| -> Option<u32> {
            // `pid (comm) state ppid ...`: the name may hold spaces.
            stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
        };
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().and_then(|s| parent(&s)) == Some(master)
            })
            .collect()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGQUIT) };
        let _ = self.child.wait();
    }
}
