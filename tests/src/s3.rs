//! An S3-compatible object store on loopback: moto's server (PyPI, pinned
//! and installed by the Makefile, named by `ALMANAC_MOTO`), as strict as S3
//! about who asks. Its first few requests need no signature (moto's
//! `INITIAL_NO_AUTH_ACTION_COUNT`): they make an IAM user, its access key
//! and policy, and the bucket; every later request must be signed with
//! that key (SigV4), or moto refuses it as S3 would.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The variable naming moto's `moto_server`.
pub const MOTO: &str = "ALMANAC_MOTO";

/// A running moto server with one bucket and a user that may use it;
/// stopped on drop.
pub struct S3 {
    child: Child,
    pub endpoint: String,
    pub bucket: String,
    access_key: String,
    secret_key: String,
}

/// The unsigned requests setting the server up: the user, its key, its
/// policy, the bucket.
const UNSIGNED_SETUP: usize = 4;

impl S3 {
    /// Starts moto on a free loopback port with `bucket` in it.
    pub fn start(bucket: &str) -> S3 {
        let moto = std::env::var(MOTO).expect("ALMANAC_MOTO names moto_server (`make test` installs it and sets it)");
        let mut child = Command::new(&moto)
            .args(["-H", "127.0.0.1", "-p", "0"])
            .env("INITIAL_NO_AUTH_ACTION_COUNT", UNSIGNED_SETUP.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {moto}: {e}"));
        let stderr = child.stderr.take().expect("a piped stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // Werkzeug says where it listens, then logs each request: read
            // every line, so the pipe never fills.
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(at) = line.find("Running on http://") {
                    let _ = tx.send(line[at + "Running on ".len()..].trim().to_string());
                }
            }
        });
        let endpoint = rx.recv_timeout(Duration::from_secs(60)).expect("moto says where it listens");
        let client = http_client::blocking::client();
        // moto routes a request to a service by its credential scope: the
        // IAM calls name `iam`, unsigned.
        let iam = |form: &[(&str, &str)]| {
            let scope = "AWS4-HMAC-SHA256 Credential=setup/20260101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0";
            let encode = |text: &str| {
                percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
            };
            let body: Vec<String> = [form, &[("Version", "2010-05-08")]]
                .concat()
                .iter()
                .map(|(name, value)| format!("{name}={}", encode(value)))
                .collect();
            let answer = client
                .post(&endpoint)
                .header("Authorization", scope)
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(body.join("&"))
                .send()
                .expect("asking moto's IAM");
            assert!(answer.status().is_success(), "{form:?}: {}", answer.status());
            answer.text().unwrap()
        };
        iam(&[("Action", "CreateUser"), ("UserName", "almanac")]);
        let key = iam(&[("Action", "CreateAccessKey"), ("UserName", "almanac")]);
        let field = |name: &str| {
            let open = format!("<{name}>");
            let start = key.find(&open).expect("moto's key answer") + open.len();
            key[start..start + key[start..].find('<').unwrap()].to_string()
        };
        let policy = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}"#;
        iam(&[("Action", "PutUserPolicy"), ("UserName", "almanac"), ("PolicyName", "s3"), ("PolicyDocument", policy)]);
        let created = client.put(format!("{endpoint}/{bucket}")).send().expect("creating the bucket");
        assert!(created.status().is_success(), "creating the bucket: {}", created.status());
        S3 {
            child,
            endpoint,
            bucket: bucket.to_string(),
            access_key: field("AccessKeyId"),
            secret_key: field("SecretAccessKey"),
        }
    }

    /// The bucket's URL with `prefix`, as `--to` and `--site-bucket` take it.
    pub fn url(&self, prefix: &str) -> String {
        format!("s3://{}/{prefix}", self.bucket)
    }

    /// `generator publish` (or `program`, its test build) of the build
    /// in `site` and `data` to this bucket under `prefix`, reaching it
    /// with the user's key; its output piped.
    pub fn publish_command(&self, program: &str, prefix: &str, site: &Path, data: &Path) -> Command {
        let mut command = Command::new(crate::process::binary(program));
        command
            .args(["publish", "--to", &self.url(prefix)])
            .arg("--site-dir")
            .arg(site)
            .arg("--data-dir")
            .arg(data)
            .env("RUST_LOG", "warn")
            .envs(self.env())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// The environment that reaches this server with the user's key.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        self.env_with_secret(&self.secret_key)
    }

    /// [`S3::env`] with another secret: every request is refused.
    pub fn env_with_secret(&self, secret: &str) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", self.access_key.clone()),
            ("AWS_SECRET_ACCESS_KEY", secret.to_string()),
        ]
    }
}

impl Drop for S3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
