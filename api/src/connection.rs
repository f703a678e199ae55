//! Open connections: how many there may be, and how long each may spend on
//! each part of an exchange, so that slow or idle clients cannot hold the
//! server's sockets and memory.
//!
//! Every connection has a [`Watch`]: the phase it is in and the instant
//! (on a coarse clock) by which that phase must end.
//!
//! | phase | begins | deadline |
//! | --- | --- | --- |
//! | head | accepted, or the first byte after idle | `header_timeout` for the whole head |
//! | busy | the head is parsed (the request is handed on) | none here: the body reader has its own deadline, handlers their own |
//! | idle | the answer's body is done | `idle_timeout`, pushed on by each write |
//!
//! and in any phase a write the client does not take for `send_timeout`
//! ends the connection.
//!
//! One sweeper task ([`Connections::sweep`]) advances the clock and ends
//! connections past their deadline, so a request costs a few relaxed
//! atomic stores, not a timer of its own. At the cap, a new connection
//! takes the place of the connection idle longest; when none is idle it is
//! answered 503 and closed at once.

use std::io::IoSlice;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rustc_hash::FxHashMap;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// The bounds on connections (see the module's table).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub send_timeout: Duration,
    /// Time allowed for a whole request body (the body reader's deadline;
    /// 408 past it).
    pub body_timeout: Duration,
    /// Largest request head (request line and header fields), in bytes:
    /// 431 above. At least 8 KiB, hyper's smallest read buffer.
    pub max_head_bytes: usize,
}

/// No deadline.
const NEVER: u64 = u64::MAX;

const HEAD: u8 = 0;
const BUSY: u8 = 1;
const IDLE: u8 = 2;

/// What every watch reads: the limits in milliseconds and the coarse
/// clock, which the sweeper advances.
struct Clock {
    started: Instant,
    now_ms: AtomicU64,
    header_ms: u64,
    idle_ms: u64,
    send_ms: u64,
}

impl Clock {
    fn now(&self) -> u64 {
        self.now_ms.load(Relaxed)
    }

    fn advance(&self) -> u64 {
        let now = self.started.elapsed().as_millis() as u64;
        self.now_ms.store(now, Relaxed);
        now
    }
}

/// One connection's phase and deadline.
pub struct Watch {
    clock: Arc<Clock>,
    phase: AtomicU8,
    deadline: AtomicU64,
    /// When a write began to wait for the client (`NEVER` when none waits).
    blocked_since: AtomicU64,
    /// Fired by the sweeper (or an eviction): the connection's task drops
    /// the connection, which closes the socket.
    end: Notify,
}

impl Watch {
    fn new(clock: Arc<Clock>) -> Watch {
        let deadline = clock.now().saturating_add(clock.header_ms);
        Watch {
            clock,
            phase: AtomicU8::new(HEAD),
            deadline: AtomicU64::new(deadline),
            blocked_since: AtomicU64::new(NEVER),
            end: Notify::new(),
        }
    }

    /// Bytes arrived: after idle, a new head begins.
    fn read(&self) {
        if self.phase.load(Relaxed) == IDLE {
            self.phase.store(HEAD, Relaxed);
            self.deadline.store(self.clock.now().saturating_add(self.clock.header_ms), Relaxed);
        }
    }

    /// The head is parsed and the request handed on.
    pub fn busy(&self) {
        self.phase.store(BUSY, Relaxed);
        self.deadline.store(NEVER, Relaxed);
    }

    /// The answer's body is done: the connection waits for the next head.
    pub fn idle(&self) {
        self.phase.store(IDLE, Relaxed);
        self.deadline.store(self.clock.now().saturating_add(self.clock.idle_ms), Relaxed);
    }

    fn write_waits(&self) {
        if self.blocked_since.load(Relaxed) == NEVER {
            self.blocked_since.store(self.clock.now(), Relaxed);
        }
    }

    fn wrote(&self) {
        self.blocked_since.store(NEVER, Relaxed);
        if self.phase.load(Relaxed) == IDLE {
            self.deadline.store(self.clock.now().saturating_add(self.clock.idle_ms), Relaxed);
        }
    }

    fn expired(&self, now: u64) -> bool {
        let blocked = self.blocked_since.load(Relaxed);
        now >= self.deadline.load(Relaxed) || (blocked != NEVER && now.saturating_sub(blocked) >= self.clock.send_ms)
    }

    /// Resolves when the connection must end.
    pub async fn ended(&self) {
        self.end.notified().await
    }
}

/// The open connections.
pub struct Connections {
    limits: Limits,
    clock: Arc<Clock>,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    next: u64,
    watches: FxHashMap<u64, Arc<Watch>>,
}

/// A connection's place among the open ones; dropping it frees the place.
pub struct Admitted {
    id: u64,
    pub watch: Arc<Watch>,
    connections: Arc<Connections>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.connections.open.lock().expect("connections lock").watches.remove(&self.id);
    }
}

impl Connections {
    pub fn new(limits: Limits) -> Arc<Connections> {
        let ms = |d: Duration| d.as_millis().min(u64::MAX as u128 / 2) as u64;
        let clock = Arc::new(Clock {
            started: Instant::now(),
            now_ms: AtomicU64::new(0),
            header_ms: ms(limits.header_timeout),
            idle_ms: ms(limits.idle_timeout),
            send_ms: ms(limits.send_timeout),
        });
        Arc::new(Connections { limits, clock, open: Mutex::default() })
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// How many connections are open.
    pub fn count(&self) -> usize {
        self.open.lock().expect("connections lock").watches.len()
    }

    /// How many connections are in the middle of an exchange (a head
    /// read and its answer not yet sent).
    pub fn busy_count(&self) -> usize {
        self.open.lock().expect("connections lock").watches.values().filter(|w| w.phase.load(Relaxed) == BUSY).count()
    }

    /// A place for a new connection: a free one, or the place of the
    /// connection idle longest (which is ended); `None` when every place
    /// is taken by a connection in the middle of an exchange.
    pub fn admit(self: &Arc<Self>) -> Option<Admitted> {
        let mut open = self.open.lock().expect("connections lock");
        if open.watches.len() >= self.limits.max_connections {
            let idlest = open
                .watches
                .iter()
                .filter(|(_, w)| w.phase.load(Relaxed) == IDLE)
                // The earliest idle deadline: the longest without a byte
                // either way; within one tick of the coarse clock, the
                // oldest connection (the map's order is no order).
                .min_by_key(|(id, w)| (w.deadline.load(Relaxed), **id))
                .map(|(id, _)| *id)?;
            if let Some(evicted) = open.watches.remove(&idlest) {
                evicted.end.notify_one();
            }
        }
        let id = open.next;
        open.next += 1;
        let watch = Arc::new(Watch::new(self.clock.clone()));
        open.watches.insert(id, watch.clone());
        Some(Admitted { id, watch, connections: self.clone() })
    }

    /// Ends connections past their deadline, forever; the clock advances
    /// with each tick, a quarter of the shortest timeout (10 ms to 1 s).
    pub async fn sweep(self: Arc<Self>) {
        let shortest = self.limits.header_timeout.min(self.limits.idle_timeout).min(self.limits.send_timeout);
        let every = (shortest / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let now = self.clock.advance();
            let open = self.open.lock().expect("connections lock");
            for watch in open.watches.values().filter(|w| w.expired(now)) {
                watch.end.notify_one();
            }
        }
    }
}

/// The answer to a connection over the cap, written before it is closed.
pub const OVER_CAPACITY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\nContent-Length: 68\r\nConnection: close\r\n\r\n{\"error\":\"too many open connections; retry\",\"code\":\"over_capacity\"}";

/// A socket that tells its watch when bytes arrive and when writes wait.
pub struct Watched<T> {
    inner: T,
    watch: Arc<Watch>,
}

impl<T> Watched<T> {
    pub fn new(inner: T, watch: Arc<Watch>) -> Watched<T> {
        Watched { inner, watch }
    }

    fn after_write<R>(&self, poll: Poll<std::io::Result<R>>) -> Poll<std::io::Result<R>> {
        match &poll {
            Poll::Pending => self.watch.write_waits(),
            Poll::Ready(_) => self.watch.wrote(),
        }
        poll
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.watch.read();
        }
        poll
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.after_write(poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.after_write(poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.after_write(poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// An answer's body that marks its connection idle when it is done (read
/// to its end, or dropped: written, or abandoned with the connection).
pub struct Tracked<B> {
    inner: B,
    watch: Arc<Watch>,
}

impl<B> Tracked<B> {
    pub fn new(inner: B, watch: Arc<Watch>) -> Tracked<B> {
        Tracked { inner, watch }
    }
}

impl<B> Drop for Tracked<B> {
    fn drop(&mut self) {
        self.watch.idle();
    }
}

impl<B: http_body::Body<Data = Bytes> + Unpin> http_body::Body for Tracked<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, B::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_connections: usize) -> Limits {
        Limits {
            max_connections,
            header_timeout: Duration::from_millis(100),
            idle_timeout: Duration::from_millis(300),
            send_timeout: Duration::from_millis(200),
            body_timeout: Duration::from_millis(200),
            max_head_bytes: 8192,
        }
    }

    fn at(connections: &Connections, ms: u64) -> u64 {
        connections.clock.now_ms.store(ms, Relaxed);
        ms
    }

    /// (events, then the clock) → whether the connection is past its
    /// deadline.
    #[test]
    fn deadlines_follow_the_phase() {
        type Case = (&'static str, &'static [(u64, &'static str)], u64, bool);
        let cases: &[Case] = &[
            ("a head has header_timeout", &[], 99, false),
            ("a head past header_timeout", &[], 100, true),
            ("more bytes of the head do not extend it", &[(50, "read"), (90, "read")], 100, true),
            ("busy has no deadline", &[(50, "busy")], 1_000_000, false),
            ("idle has idle_timeout", &[(50, "busy"), (60, "idle")], 359, false),
            ("idle past idle_timeout", &[(50, "busy"), (60, "idle")], 360, true),
            ("a write pushes idle on", &[(50, "busy"), (60, "idle"), (200, "wrote")], 499, false),
            ("a byte after idle starts a head", &[(50, "busy"), (60, "idle"), (70, "read")], 170, true),
            ("a blocked write has send_timeout", &[(50, "busy"), (60, "waits")], 259, false),
            ("a write blocked past send_timeout", &[(50, "busy"), (60, "waits")], 260, true),
            ("a write that went through clears it", &[(50, "busy"), (60, "waits"), (250, "wrote")], 1_000, false),
        ];
        for (name, events, then, expired) in cases {
            let connections = Connections::new(limits(4));
            let watch = connections.admit().unwrap().watch.clone();
            for (ms, event) in *events {
                at(&connections, *ms);
                match *event {
                    "read" => watch.read(),
                    "busy" => watch.busy(),
                    "idle" => watch.idle(),
                    "waits" => watch.write_waits(),
                    "wrote" => watch.wrote(),
                    other => unreachable!("{other}"),
                }
            }
            assert_eq!(watch.expired(*then), *expired, "{name}");
        }
    }

    #[test]
    fn at_the_cap_the_longest_idle_connection_makes_room() {
        let connections = Connections::new(limits(2));
        let first = connections.admit().unwrap();
        let second = connections.admit().unwrap();
        assert!(connections.admit().is_none(), "both in a head: no room");
        at(&connections, 10);
        second.watch.busy();
        second.watch.idle();
        at(&connections, 20);
        first.watch.busy();
        first.watch.idle();
        let third = connections.admit().expect("an idle connection makes room");
        assert_eq!(connections.count(), 2);
        // The one idle since 10 was told to end; the other was not.
        let told = |w: &Watch| futures_util::FutureExt::now_or_never(w.ended()).is_some();
        assert!(told(&second.watch));
        assert!(!told(&first.watch));
        drop(second);
        assert_eq!(connections.count(), 2, "an evicted connection's place is already taken");
        drop(third);
        assert_eq!(connections.count(), 1);
    }
}
