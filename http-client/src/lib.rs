//! Every HTTP client almanac builds comes from here: reqwest over rustls,
//! with ring as rustls's cryptography.
//!
//! rustls's default provider, aws-lc, is a C library that took about a
//! twentieth of a first build's compile time; ring is a fraction of that.
//! With a provider other than the default, rustls needs one installed for
//! the process before the first client is built, or reqwest panics. Every
//! constructor here installs it first (once; a provider installed earlier
//! is kept), so no binary, tool or test has to remember to. The codemap
//! test finds any client built elsewhere.

use std::sync::Once;

/// Installs ring as the process's rustls provider, once.
fn install_provider() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        // An error means another provider was installed first: kept.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A builder of an async client.
pub fn builder() -> reqwest::ClientBuilder {
    install_provider();
    reqwest::Client::builder()
}

/// An async client with reqwest's defaults.
pub fn client() -> reqwest::Client {
    builder().build().expect("an HTTP client with the defaults builds")
}

/// A GET with a client of its own (one request, no pool kept).
pub async fn get(url: impl reqwest::IntoUrl) -> reqwest::Result<reqwest::Response> {
    client().get(url).send().await
}

/// Blocking clients, for synchronous callers (tools and tests).
#[cfg(feature = "blocking")]
pub mod blocking {
    /// A builder of a blocking client.
    pub fn builder() -> reqwest::blocking::ClientBuilder {
        super::install_provider();
        reqwest::blocking::Client::builder()
    }

    /// A blocking client with reqwest's defaults.
    pub fn client() -> reqwest::blocking::Client {
        builder().build().expect("an HTTP client with the defaults builds")
    }

    /// A GET with a client of its own.
    pub fn get(url: impl reqwest::IntoUrl) -> reqwest::Result<reqwest::blocking::Response> {
        client().get(url).send()
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    /// A client built here works with no provider installed beforehand:
    /// it reaches a server on loopback (plain HTTP), and building a client
    /// for https (which needs the provider) does not panic.
    #[tokio::test]
    async fn a_client_builds_and_asks_without_a_provider_installed_first() {
        assert!(rustls::crypto::CryptoProvider::get_default().is_none(), "nothing installed yet");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request).unwrap();
            stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok").unwrap();
        });
        let body = super::get(format!("http://{address}/")).await.unwrap().text().await.unwrap();
        assert_eq!(body, "ok");
        server.join().unwrap();
        let provider = rustls::crypto::CryptoProvider::get_default().expect("installed by the first client");
        assert!(provider.cipher_suites.iter().any(|suite| format!("{suite:?}").contains("TLS13")));
        super::builder().https_only(true).build().unwrap();
    }
}
