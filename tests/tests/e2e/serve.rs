//! The api as a library: `api::serve` on a listener the test bound to port
//! 0, stopped by a future the test resolves. Requests in flight when the
//! stop is asked for finish; then `serve` returns and the port is closed.

use std::time::Duration;

use api::{serve, Config};
use clap::Parser;
use tests::process::build;
use tests::{workspace_root, TempDir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_until_shutdown_and_lets_requests_in_flight_finish() {
    let root = TempDir::new("serve");
    let (site, data) = (root.path().join("site"), root.path().join("data"));
    let broker = workspace_root().join("datasets/broker");
    let ledger = workspace_root().join("datasets/ledger");
    let (site2, data2) = (site.clone(), data.clone());
    tokio::task::spawn_blocking(move || {
        build(&site2, &data2, &["--ledger-dir", ledger.to_str().unwrap(), "--broker-dir", broker.to_str().unwrap()])
    })
    .await
    .unwrap();

    let dirs = ["--site-dir", site.to_str().unwrap(), "--data-dir", data.to_str().unwrap()];
    let config =
        Config::parse_from(["api", "--reload-ms", "50", "--availability-every-s", "0"].into_iter().chain(dirs));
    let app = config.app().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let base = format!("http://{address}");
    let connections = app.connections.clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, app, async {
        let _ = stopped.await;
    }));

    let client = http_client::client();
    let stats = client.get(format!("{base}/hcs20/stats")).send().await.unwrap();
    assert_eq!(stats.status(), 200, "the published build is served at once");

    // A search whose body is still arriving when the stop is asked for.
    let (more, rest) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    let body = reqwest::Body::wrap_stream(tokio_stream_of(rest));
    let in_flight = tokio::spawn(
        client
            .post(format!("{base}/api/v1/search/capabilities"))
            .header("content-type", "application/json")
            .body(body)
            .send(),
    );
    more.send(Ok(br#"{"capabilities":"#.to_vec())).await.unwrap();
    // The events, each looked at a bounded number of times: the request
    // is in flight (its head read, its body awaited) ...
    tests::wait::until("the search reaching the server", 1000, Duration::from_millis(10), async || {
        connections.busy_count() > 0
    })
    .await;
    stop.send(()).unwrap();
    // ... and the stop is taken: no new connection is accepted.
    tests::wait::until("the listener closed", 1000, Duration::from_millis(10), async || {
        tokio::net::TcpStream::connect(&address).await.is_err()
    })
    .await;
    assert!(!server.is_finished(), "serve waits for the request in flight");
    more.send(Ok(br#"["text-generation"]}"#.to_vec())).await.unwrap();
    drop(more);
    let answer = in_flight.await.unwrap().expect("the request in flight is answered");
    assert_eq!(answer.status(), 200);

    tokio::time::timeout(Duration::from_secs(10), server).await.expect("serve returns after the stop").unwrap();
    let refused = http_client::client().get(format!("{base}/hcs20/stats")).send().await;
    assert!(refused.is_err(), "the port is closed after serve returns");
}

/// The receiving end of a channel as a stream of body chunks.
fn tokio_stream_of(
    mut rx: tokio::sync::mpsc::Receiver<Result<Vec<u8>, std::io::Error>>,
) -> impl futures_util::Stream<Item = Result<Vec<u8>, std::io::Error>> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}
