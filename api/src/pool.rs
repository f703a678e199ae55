//! A fixed set of threads for answers that are CPU work and nothing else
//! (searches), fed from one bounded queue in arrival order.
//!
//! Why not on the async workers: a search is 0.1 to a few milliseconds of
//! CPU with no await in it. Run inline, it holds its worker, and a worker
//! looks for newly readable connections only when its own run queue is
//! empty (or every few dozen tasks). Requests are then taken in batches,
//! and one waits anywhere between one batch and two: with 32 connections
//! asking the same query, p99 was 1.9 times p50. From one queue in arrival
//! order each request waits about as long as the work ahead of it, and the
//! async workers, which now only read and write, stay free to answer the
//! cheap routes (static files, health) without waiting behind searches.
//!
//! The threads run at a lower CPU priority than the rest of the process
//! (`nice`, 10 by default): when the CPUs are busy, a thread that reads a
//! request or writes an answer runs as soon as it is ready, ahead of the
//! searches. Measured at a million agents with 32 connections, p99 went
//! from 13.3 ms to 12.1 ms with it, at the same throughput; at 8, from 5.0
//! to 3.8 ms. (The generator lowers its own priority as much, by default,
//! so a build running beside the api does not take the searches' turn.)
//!
//! Handing an answer back, the thread yields its CPU. Sending the answer
//! wakes the async worker that writes it, but the scheduler lets a thread
//! it has just picked run out its slice first (EEVDF protects the slice
//! from wake-up preemption, whatever the niceness): 1% of answers then
//! waited 2.5 to 4 ms for their worker while the search thread went on
//! with the next search, that worker's other answers and requests with
//! them. Measured at a million agents with 32 connections (and the 10k
//! overlay): that wait's p99 went from 2.5-2.7 ms to 0.1 ms, and the
//! searches' p99 from 9.5-9.7 ms to 8.5-8.6 ms, at the same throughput. A
//! yield with nothing else ready to run returns at once.
//!
//! A full queue refuses at once (503, `Retry-After`) rather than letting
//! waits grow without bound; a job that panics loses its answer (500), not
//! its thread.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use warp::http::{HeaderValue, StatusCode};

use crate::reply::Error;

type Job = Box<dyn FnOnce() + Send>;

/// The threads and their queue. Dropping the pool lets each thread finish
/// the job it holds and stop.
pub struct Pool {
    queue: SyncSender<Job>,
}

impl Pool {
    /// `threads` threads (at least one) named `name` at niceness `nice`
    /// (0 to 19: 0 is the process's own), with room for `queued` jobs
    /// waiting beyond those running.
    pub fn new(name: &str, threads: usize, queued: usize, nice: u8) -> std::io::Result<Pool> {
        let (queue, jobs) = sync_channel::<Job>(queued);
        let jobs = Arc::new(Mutex::new(jobs));
        for _ in 0..threads.max(1) {
            let jobs = jobs.clone();
            std::thread::Builder::new().name(name.to_string()).spawn(move || {
                if let Err(error) = shared::priority::lower(nice) {
                    tracing::warn!(%error, "a search thread runs at the api's priority");
                }
                work(&jobs)
            })?;
        }
        Ok(Pool { queue })
    }

    /// Runs `job` on one of the pool's threads after those queued before
    /// it, and gives back its result.
    pub async fn run<T: Send + 'static>(&self, job: impl FnOnce() -> T + Send + 'static) -> Result<T, Error> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            // The asker may have gone (its connection closed): nothing to do.
            let _ = answer.send(job());
        });
        match self.queue.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => return Err(busy()),
            Err(TrySendError::Disconnected(_)) => return Err(lost()),
        }
        answered.await.map_err(|_| lost())
    }
}

/// One thread's loop: the next job in arrival order, until the pool is
/// dropped. The lock is held only while waiting for a job, never while one
/// runs.
fn work(jobs: &Mutex<Receiver<Job>>) {
    // The job's end, answered or panicked, woke the async worker that
    // writes its answer; let it run now (see the module's comment on
    // handing back).
    crate::store::run_each(|| jobs.lock().ok()?.recv().ok(), "a pooled job", std::thread::yield_now);
}

fn busy() -> Error {
    Error::new(StatusCode::SERVICE_UNAVAILABLE, "overloaded", "too many searches waiting; retry shortly")
        .with(warp::http::header::RETRY_AFTER, HeaderValue::from_static("1"))
}

fn lost() -> Error {
    Error::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", "the search failed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn jobs_run_in_arrival_order_and_answer() {
        let pool = Pool::new("test", 1, 16, 0).unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let runs = (0..8).map(|i| {
            let order = order.clone();
            pool.run(move || {
                order.lock().unwrap().push(i);
                i * 2
            })
        });
        let answers = futures_util::future::join_all(runs).await;
        assert_eq!(answers.into_iter().map(Result::unwrap).collect::<Vec<_>>(), [0, 2, 4, 6, 8, 10, 12, 14]);
        assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3, 4, 5, 6, 7]);
    }

    #[tokio::test]
    async fn a_full_queue_refuses_at_once_and_a_panic_costs_one_answer() {
        let pool = Arc::new(Pool::new("test", 1, 1, 0).unwrap());
        let (started, busy_now) = tokio::sync::oneshot::channel();
        let (release, held) = std::sync::mpsc::channel::<()>();
        let running = tokio::spawn({
            let pool = pool.clone();
            async move {
                let job = move || {
                    started.send(()).unwrap();
                    held.recv().unwrap();
                    1
                };
                pool.run(job).await
            }
        });
        busy_now.await.unwrap();
        // The one thread is held; one more job fills the queue.
        let mut waiting = Box::pin(pool.run(|| 2));
        assert!(futures_util::poll!(&mut waiting).is_pending());
        let refused = pool.run(|| 3).await.unwrap_err();
        assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
        release.send(()).unwrap();
        assert_eq!(running.await.unwrap().unwrap(), 1);
        assert_eq!(waiting.await.unwrap(), 2);
        let panicked = pool.run(|| -> u8 { panic!("on purpose") }).await.unwrap_err();
        assert_eq!(panicked.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(pool.run(|| 4).await.unwrap(), 4, "the thread outlives the panic");
    }
}
