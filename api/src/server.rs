//! Running the api: [`serve`] takes a bound listener and a shutdown
//! future, so the binary wires the real address and signals and a test
//! binds port 0 and stops it when it likes.
//!
//! The connection loop is ours, not warp's: HTTP/1.1 through hyper's
//! connection builder (where the size of a request head is bounded), each
//! connection watched by [`crate::connection`] (how many, and how long
//! each part of an exchange may take). Each request is handed whole to
//! [`pipeline::handle`]; the route table does the routing.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};

use crate::app::App;
use crate::connection::{Connections, Tracked, Watched, OVER_CAPACITY};
use crate::pipeline;
use crate::published::Settings;
use crate::reload::{Outcome, Watcher};
use crate::reply::Reply;
use crate::routes::{self, Table};

/// Loads the published build (if any), then answers on `listener` until
/// `shutdown` resolves; requests in flight then finish. New builds are
/// picked up every `app.reload_every` meanwhile.
pub async fn serve(listener: TcpListener, app: Arc<App>, shutdown: impl Future<Output = ()> + Send + 'static) {
    let settings =
        Settings { limits: app.limits, mcp_cache: app.guard.mcp_cache, file_cache_bytes: app.file_cache_bytes };
    let mut watcher = Watcher::new(app.layout.clone(), app.builds_from.clone(), settings, app.live.clone());
    if watcher.check().await == Outcome::NoBuild {
        let site = app.layout.site.display().to_string();
        tracing::warn!(site, "no build published yet; serving health only until one is");
    }
    let watching = tokio::spawn(watcher.run(app.reload_every));
    // The live overlay: the stored changes the build does not hold; those
    // a later build holds are dropped after each swap.
    let build = app.live.get().as_ref().and_then(|b| b.broker.clone());
    let held = build.as_ref().map_or(0, |broker| broker.journal_seq);
    let shown = &app.availability_shown;
    // What other apis sharing the store write later is followed from the
    // newest change loaded here.
    let mut loaded = held;
    match crate::broker::availability::live::overlay_after(&app.store, build.as_deref(), held, shown).await {
        Ok(changes) => {
            loaded = changes.iter().map(|(seq, _, _)| *seq).max().unwrap_or(held);
            if app.overlay_writer.apply(changes).await.is_err() {
                tracing::error!("the live overlay cannot be loaded; registrations stay hidden");
            }
        }
        Err(e) => tracing::error!(error = %e, "the live overlay cannot be loaded; registrations stay hidden"),
    }
    crate::replicas::note_newest_changes(&app).await;
    let cleaner = app.clone();
    let cleaning = tokio::spawn(async move {
        let mut tick = tokio::time::interval(cleaner.cleanup_every);
        loop {
            tick.tick().await;
            cleaner.guard.json.clean();
            cleaner.guard.mcp.clean();
            cleaner.sign_in_limit.clean();
            cleaner.verification_limit.clean();
            cleaner.anonymous_chat_limit.clean();
            cleaner.relay_limit.clean();
            cleaner.chat.forget_idle(cleaner.chat.auth_idle);
            crate::broker::secrets::release::prune(&cleaner).await;
            if let Some(broker) = cleaner.live.get().as_ref().and_then(|b| b.broker.clone()) {
                // Only a panic ends the writer; it logged why.
                let _ = cleaner.overlay_writer.prune(broker.journal_seq);
            }
        }
    });
    // The background duties, held by one api among those sharing the
    // store, and the others' writes followed.
    let (stop_duties, duties_stopped) = tokio::sync::oneshot::channel::<()>();
    let duties = tokio::spawn(crate::replicas::hold_duties(app.clone(), async move {
        let _ = duties_stopped.await;
    }));
    let (stop_following, following_stopped) = tokio::sync::oneshot::channel::<()>();
    let following = tokio::spawn(crate::replicas::follow(app.clone(), loaded, async move {
        let _ = following_stopped.await;
    }));
    let table = Arc::new(Table::new(routes::table()));
    crate::service::OPENAPI.get_or_init(|| {
        let made = shared::http::Representation::openapi(&crate::openapi::document(table.endpoints()));
        crate::reply::Representation::computed(made).expect("the document's headers are header-safe")
    });
    let connections = app.connections.clone();
    let answer = move |request, peer| {
        let (app, table) = (app.clone(), table.clone());
        async move { pipeline::handle(&table, app, request, peer).await }
    };
    accept(listener, connections, shutdown, answer).await;
    watching.abort();
    cleaning.abort();
    let _ = stop_following.send(());
    let _ = following.await;
    let _ = stop_duties.send(());
    let _ = duties.await;
}

/// Accepts connections until `shutdown`, each served on a task of its own
/// and watched by `connections`, and gives every request to `answer`; then
/// stops accepting and waits for the open connections to finish the
/// requests they have begun.
pub async fn accept<A, F>(
    listener: TcpListener,
    connections: Arc<Connections>,
    shutdown: impl Future<Output = ()>,
    answer: A,
) where
    A: Fn(hyper::Request<Incoming>, SocketAddr) -> F + Clone + Send + 'static,
    F: Future<Output = Reply> + Send,
{
    let sweeping = tokio::spawn(connections.clone().sweep());
    let mut http = http1::Builder::new();
    let head = connections.limits().max_head_bytes.max(8192);
    // Heads are bounded here; time is bounded by the connection's watch,
    // not by a hyper timer per request. Bodies are queued beside the head
    // and leave with it in one vectored write, not copied into hyper's
    // buffer first: a search's answer is about 30 KB, and its copy (the
    // buffer grown as it filled) was a third of the async worker's time.
    http.max_buf_size(head).max_header_size(head).writev(true);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(error) => {
                    accept_failed(error).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(admitted) = connections.admit() else {
            over_capacity(stream);
            continue;
        };
        let watch = admitted.watch.clone();
        let answer = answer.clone();
        let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            watch.busy();
            let (reply, watch) = (answer(request, peer), watch.clone());
            async move { Ok::<_, Infallible>(reply.await.map(|body| Tracked::new(body, watch))) }
        });
        let io = TokioIo::new(Watched::new(stream, admitted.watch.clone()));
        let connection = graceful.watch(http.serve_connection(io, service));
        tokio::spawn(async move {
            tokio::select! {
                ended = connection => if let Err(error) = ended {
                    tracing::debug!(%peer, %error, "connection ended with an error");
                },
                () = admitted.watch.ended() => tracing::debug!(%peer, "connection timed out"),
            }
            drop(admitted);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    sweeping.abort();
}

/// A connection over the cap: told so in one write, if the socket takes it
/// at once, and closed.
fn over_capacity(stream: TcpStream) {
    let _ = stream.try_write(OVER_CAPACITY);
    tracing::debug!("connection refused: too many open connections");
}

/// An accept that failed. A connection reset before it was accepted is
/// nothing; running out of file descriptors is, and accepting again at
/// once would spin, so the loop waits a little first. Logged at most once
/// a minute, with how many failed since.
async fn accept_failed(error: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    static FAILED: AtomicU64 = AtomicU64::new(0);
    static LOGGED_AT: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);
    if matches!(error.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset) {
        return;
    }
    let failed = FAILED.fetch_add(1, Relaxed) + 1;
    {
        let mut logged_at = LOGGED_AT.lock().expect("accept log lock");
        if logged_at.is_none_or(|at| at.elapsed() >= std::time::Duration::from_secs(60)) {
            tracing::error!(%error, failed, "accepting a connection failed");
            *logged_at = Some(std::time::Instant::now());
            FAILED.store(0, Relaxed);
        }
    }
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use tokio::io::AsyncWriteExt;

    use super::*;
    use crate::connection::Limits;

    /// A client that asks for a large answer and never reads it: the
    /// server's writes wait, and past the send timeout the connection is
    /// closed and its place freed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_that_does_not_read_is_dropped_after_the_send_timeout() {
        let minute = Duration::from_secs(60);
        let limits = Limits {
            max_connections: 16,
            header_timeout: minute,
            idle_timeout: minute,
            send_timeout: Duration::from_millis(300),
            body_timeout: minute,
            max_head_bytes: 8192,
        };
        let connections = Connections::new(limits);
        let answer = |_, _| std::future::ready(crate::reply::bytes(vec![b'x'; 64 << 20]));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(accept(listener, connections.clone(), std::future::pending(), answer));
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n").await.unwrap();
        let started = Instant::now();
        while connections.count() == 0 {
            assert!(started.elapsed() < Duration::from_secs(5), "the connection is admitted");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        while connections.count() > 0 {
            assert!(started.elapsed() < Duration::from_secs(10), "the stalled connection is closed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(started.elapsed() >= Duration::from_millis(250), "not before the send timeout");
        drop(stream);
    }
}
