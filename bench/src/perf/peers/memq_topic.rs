//! ==================== memq: the row the peers are measured against ====================
//!
//! The seam where memq plugs into the harness: only this file knows memq's API. It uses
//! the public API of the `memq` crate (which re-exports memq-core), like any user:
//!
//! - [`Memq`] (async, on the same Tokio runtime as the async peers): `Topic::publish`,
//!   `publish_batch`, `publish_keyed`; `Subscriber::recv` / `recv_many`; group
//!   `Consumer::recv` / `recv_many`.
//! - [`MemqThreads`] (plain threads, compared with crossbeam): `publish_blocking`,
//!   `publish_batch_blocking`, `publish_keyed_blocking`; `try_recv` and, when empty,
//!   `recv_blocking_timeout` up to the run's deadline.
//!
//! - [`MemqRelease`] (async): the same as [`Memq`] on topics with
//!   `TopicConfig::release_on_read(true)`, which keep no replay: like a channel, a message
//!   leaves the log once read, moved to its reader rather than cloned.
//! - [`MemqThreadsRelease`] (plain threads): the same as [`MemqThreads`] on such topics.
//!
//! Every topic is `TopicConfig::new(capacity)` with `Overflow::Block`, the lossless default:
//! a publisher waits for the slowest reader. memq closes a topic when its last `Topic`
//! handle is dropped, so readers see the end of the stream (no idle tail, unlike
//! tokio-memq).
//!
//! Shapes: `Pair` is one topic and one subscriber; `Competing(n)` is `n` members of one
//! consumer group; `Fanout(n)` is `n` subscribers of one topic; `Partitioned(n)` is a topic
//! with `n` partitions read by an `n`-member group, published with `publish_keyed`.

use core::time::Duration;
use std::time::Instant;

use memq::{Consumer, Message, Overflow, RecvError, StartAt, Subscriber, Topic, TopicConfig};

use crate::perf::{
    drive_async, drive_threads, AsyncPeer, AsyncRx, AsyncTx, Batch, Disconnected, Msg, Outcome,
    Params, Recv, Shape, SyncRx, SyncTx, ThreadPeer, TryRecv, Wiring,
};

const GROUP: &str = "bench";

/// memq's row: async, on Tokio.
#[derive(Clone, Copy, Debug, Default)]
pub struct Memq;

/// memq's row on plain threads, with the blocking API.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemqThreads;

/// memq async on Tokio, with topics that release each message once it is read
/// (`TopicConfig::release_on_read`): queue semantics, like the channels, no replay.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemqRelease;

/// memq on plain threads with the blocking API, on release-on-read topics: the queue on
/// threads, as crossbeam's channel is.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemqThreadsRelease;

/// Runs `scenario` on memq (async). `None` only where no shape fits, which is never.
pub fn run(scenario: crate::perf::Scenario, params: &Params) -> Option<Outcome> {
    drive_async::run(&Memq, scenario, params)
}

/// Runs `scenario` on memq (async) with release-on-read topics.
pub fn run_release(scenario: crate::perf::Scenario, params: &Params) -> Option<Outcome> {
    drive_async::run(&MemqRelease, scenario, params)
}

/// Runs `scenario` on memq with plain threads and the blocking API.
pub fn run_threads(scenario: crate::perf::Scenario, params: &Params) -> Option<Outcome> {
    drive_threads::run(&MemqThreads, scenario, params)
}

/// Runs `scenario` on memq with plain threads, the blocking API and release-on-read
/// topics.
pub fn run_threads_release(scenario: crate::perf::Scenario, params: &Params) -> Option<Outcome> {
    drive_threads::run(&MemqThreadsRelease, scenario, params)
}

/// A subscriber or a group member, with a scratch buffer for `recv_many`.
#[derive(Debug)]
pub struct MemqRx {
    reader: Reader,
    scratch: Vec<Message<Msg>>,
}

#[derive(Debug)]
enum Reader {
    Sub(Subscriber<Msg>),
    Member(Consumer<Msg>),
}

impl MemqRx {
    fn new(reader: Reader) -> MemqRx {
        MemqRx {
            reader,
            scratch: Vec::new(),
        }
    }

    fn try_take(&mut self) -> TryRecv {
        let res = match &mut self.reader {
            Reader::Sub(s) => s.try_recv(),
            Reader::Member(c) => c.try_recv(),
        };
        match res {
            Ok(m) => TryRecv::Msg(m.into_value()),
            Err(memq::TryRecvError::Empty) => TryRecv::Empty,
            Err(memq::TryRecvError::Lagged(n)) => TryRecv::Lagged(n),
            Err(_) => TryRecv::Closed,
        }
    }

    fn batch_result(&mut self, res: Result<usize, RecvError>, buf: &mut Vec<Msg>) -> Batch {
        match res {
            Ok(0) => Batch::Closed,
            Ok(_) => {
                buf.extend(self.scratch.drain(..).map(Message::into_value));
                Batch::Got
            }
            Err(RecvError::Lagged(n)) => Batch::Lagged(n),
            Err(_) => Batch::Closed,
        }
    }
}

fn recv_result(res: Result<Message<Msg>, RecvError>) -> Recv {
    match res {
        Ok(m) => Recv::Msg(m.into_value()),
        Err(RecvError::Lagged(n)) => Recv::Lagged(n),
        Err(_) => Recv::Closed,
    }
}

impl AsyncTx for Topic<Msg> {
    async fn send(&self, msg: Msg) -> Result<(), Disconnected> {
        self.publish(msg).await.map(drop).map_err(|_| Disconnected)
    }

    async fn send_batch(&self, batch: Vec<Msg>) -> Result<(), Disconnected> {
        self.publish_batch(batch)
            .await
            .map(drop)
            .map_err(|_| Disconnected)
    }

    async fn send_keyed(&self, key: u64, msg: Msg) -> Result<(), Disconnected> {
        self.publish_keyed(key.to_le_bytes(), msg)
            .await
            .map(drop)
            .map_err(|_| Disconnected)
    }
}

impl AsyncRx for MemqRx {
    async fn recv(&mut self) -> Recv {
        recv_result(match &mut self.reader {
            Reader::Sub(s) => s.recv().await,
            Reader::Member(c) => c.recv().await,
        })
    }

    fn try_recv(&mut self) -> TryRecv {
        self.try_take()
    }

    async fn recv_batch(&mut self, buf: &mut Vec<Msg>, limit: usize) -> Batch {
        let res = match &mut self.reader {
            Reader::Sub(s) => s.recv_many(&mut self.scratch, limit).await,
            Reader::Member(c) => c.recv_many(&mut self.scratch, limit).await,
        };
        self.batch_result(res, buf)
    }
}

impl SyncTx for Topic<Msg> {
    fn send(&self, msg: Msg) -> Result<(), Disconnected> {
        self.publish_blocking(msg)
            .map(drop)
            .map_err(|_| Disconnected)
    }

    fn send_batch(&self, batch: Vec<Msg>) -> Result<(), Disconnected> {
        self.publish_batch_blocking(batch)
            .map(drop)
            .map_err(|_| Disconnected)
    }

    fn send_keyed(&self, key: u64, msg: Msg) -> Result<(), Disconnected> {
        self.publish_keyed_blocking(key.to_le_bytes(), msg)
            .map(drop)
            .map_err(|_| Disconnected)
    }
}

fn until(deadline: Instant) -> Option<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    (!left.is_zero()).then_some(left)
}

impl SyncRx for MemqRx {
    fn recv_deadline(&mut self, deadline: Instant) -> Option<Recv> {
        // Take what is there without reading the clock; block only when empty.
        match self.try_take() {
            TryRecv::Msg(m) => return Some(Recv::Msg(m)),
            TryRecv::Lagged(n) => return Some(Recv::Lagged(n)),
            TryRecv::Closed => return Some(Recv::Closed),
            TryRecv::Empty => {}
        }
        let timeout = until(deadline)?;
        let res = match &mut self.reader {
            Reader::Sub(s) => s.recv_blocking_timeout(timeout),
            Reader::Member(c) => c.recv_blocking_timeout(timeout),
        };
        match res {
            Ok(m) => Some(Recv::Msg(m.into_value())),
            Err(memq::RecvTimeoutError::Timeout) => None,
            Err(memq::RecvTimeoutError::Lagged(n)) => Some(Recv::Lagged(n)),
            Err(_) => Some(Recv::Closed),
        }
    }

    fn try_recv(&mut self) -> TryRecv {
        self.try_take()
    }

    fn recv_batch_deadline(
        &mut self,
        buf: &mut Vec<Msg>,
        limit: usize,
        deadline: Instant,
    ) -> Option<Batch> {
        let res = match &mut self.reader {
            Reader::Sub(s) => s.try_recv_many(&mut self.scratch, limit),
            Reader::Member(c) => c.try_recv_many(&mut self.scratch, limit),
        };
        let res = match res {
            Ok(n) => Ok(n),
            Err(memq::TryRecvError::Lagged(n)) => Err(RecvError::Lagged(n)),
            Err(memq::TryRecvError::Empty) => {
                let timeout = until(deadline)?;
                let res = match &mut self.reader {
                    Reader::Sub(s) => {
                        s.recv_many_blocking_timeout(&mut self.scratch, limit, timeout)
                    }
                    Reader::Member(c) => {
                        c.recv_many_blocking_timeout(&mut self.scratch, limit, timeout)
                    }
                };
                match res {
                    Ok(n) => Ok(n),
                    Err(memq::RecvTimeoutError::Timeout) => return None,
                    Err(memq::RecvTimeoutError::Lagged(n)) => Err(RecvError::Lagged(n)),
                    Err(_) => Ok(0),
                }
            }
            Err(_) => Ok(0),
        };
        Some(self.batch_result(res, buf))
    }
}

/// Wires `shape` with memq topics. Readers are attached before returning, so nothing the
/// drivers publish afterwards can be missed.
///
/// Topics run on memq's default engine, the locked log. With `MEMQ_BENCH_RING_ENGINE=1` in
/// the environment, topics whose settings allow it run on the lock-free ring
/// (`TopicConfig::ring_engine(true)`; releasing topics stay on the locked log), to compare
/// the two engines in one binary, as in plain_bench.
fn wire_memq(shape: Shape, capacity: usize, release: bool) -> Option<Wiring<Topic<Msg>, MemqRx>> {
    let ring = std::env::var_os("MEMQ_BENCH_RING_ENGINE").is_some_and(|v| v == "1");
    let config = TopicConfig::new(capacity)
        .overflow(Overflow::Block)
        .release_on_read(release)
        .ring_engine(ring);
    let (topic, rxs) = match shape {
        Shape::Pair => {
            let topic = Topic::new(config).ok()?;
            let sub = topic.subscribe(StartAt::Earliest).ok()?;
            (topic, vec![MemqRx::new(Reader::Sub(sub))])
        }
        Shape::Fanout(n) => {
            let topic = Topic::new(config).ok()?;
            let subs = (0..n)
                .map(|_| {
                    topic
                        .subscribe(StartAt::Earliest)
                        .map(|s| MemqRx::new(Reader::Sub(s)))
                })
                .collect::<Result<Vec<_>, _>>()
                .ok()?;
            (topic, subs)
        }
        Shape::Competing(n) | Shape::Partitioned(n) => {
            let config = match shape {
                Shape::Partitioned(_) => config.partitions(u32::try_from(n).ok()?),
                _ => config,
            };
            let topic = Topic::new(config).ok()?;
            let members = (0..n)
                .map(|_| {
                    topic
                        .group(GROUP, StartAt::Earliest)
                        .map(|c| MemqRx::new(Reader::Member(c)))
                })
                .collect::<Result<Vec<_>, _>>()
                .ok()?;
            (topic, members)
        }
    };
    Some(Wiring {
        txs: vec![topic],
        rxs,
    })
}

impl AsyncPeer for Memq {
    type Tx = Topic<Msg>;
    type Rx = MemqRx;

    async fn wire(&self, shape: Shape, capacity: usize) -> Option<Wiring<Self::Tx, Self::Rx>> {
        wire_memq(shape, capacity, false)
    }
}

impl AsyncPeer for MemqRelease {
    type Tx = Topic<Msg>;
    type Rx = MemqRx;

    async fn wire(&self, shape: Shape, capacity: usize) -> Option<Wiring<Self::Tx, Self::Rx>> {
        wire_memq(shape, capacity, true)
    }
}

impl ThreadPeer for MemqThreads {
    type Tx = Topic<Msg>;
    type Rx = MemqRx;

    fn wire(&self, shape: Shape, capacity: usize) -> Option<Wiring<Self::Tx, Self::Rx>> {
        wire_memq(shape, capacity, false)
    }
}

impl ThreadPeer for MemqThreadsRelease {
    type Tx = Topic<Msg>;
    type Rx = MemqRx;

    fn wire(&self, shape: Shape, capacity: usize) -> Option<Wiring<Self::Tx, Self::Rx>> {
        wire_memq(shape, capacity, true)
    }
}
