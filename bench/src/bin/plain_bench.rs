//! A second, plainer benchmark harness for issue 36, written apart from `perf_runner` (it
//! shares no code with `bench/src/perf`): the simplest use of each peer's public API, one
//! shared `Arc<[u8]>` payload, no per-peer tuning.
//!
//! ```text
//! cargo run --release -p memq-bench --bin plain_bench -- [--rounds N] [--messages N]
//!     [--scenarios S1,S3,...] [--impls kanal,memq,...] [--timeout SECS] [--quick] [--verbose]
//! ```
//!
//! - Every message is `(u64 id, Arc<[u8]>)`, a clone of one payload allocated once: 1 KiB,
//!   or 1 MiB in S5. With `PLAIN_BENCH_DISTINCT=1` in the environment (a measurement of
//!   payloads that are not shared, not the issue's harness), message `id` carries payload
//!   `id % 4096` of 4096 distinct 1 KiB payloads allocated before the clock starts (S5
//!   keeps its one shared 1 MiB payload): messages in flight together never share a
//!   reference count.
//! - Async rows run on a Tokio runtime with 2 worker threads; crossbeam, memq-threads,
//!   memq-threads-release and memq-ring run on plain threads. memq-release and
//!   memq-threads-release read topics with `release_on_read` (a queue, as a channel is);
//!   memq and memq-threads keep every message for replay.
//! - Each cell (one scenario, one row, one round) runs in a fresh child process (this
//!   program with `--cell`), under a deadline: a hang ends the child, not the run.
//! - Rounds are interleaved (round 1 runs every scenario and every row, then round 2, ...),
//!   and the order of the rows rotates from one round to the next.
//! - Every delivery is counted by id: lost and duplicated messages are printed for every
//!   cell. A memq row (memq, memq-release, memq-threads, memq-threads-release, memq-ring)
//!   that loses or duplicates a message, or whose run fails, makes the program exit
//!   non-zero.
//!
//! Rates are distinct deliveries per second, from the first publish to the last delivery
//! (S3 counts each subscriber's deliveries); S6 is 1e9 / the median round trip in ns.

use std::future::Future;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What every row sends: an id and a clone of the shared payload.
type Msg = (u64, Arc<[u8]>);

/// Channel capacity in every scenario.
const CAPACITY: usize = 1024;
/// Publishers, consumers, subscribers or partitions in S2, S3 and S7.
const FAN: usize = 4;
/// Batch size in S4.
const BATCH: usize = 100;

const USAGE: &str = "\
usage: plain_bench [options]
  --rounds N          interleaved rounds (default 5; quick 1)
  --messages N        messages in S1-S4 and S7 (default 1,000,000; quick 10,000);
                      S5 sends N/100 (at most 10,000) 1 MiB messages, S6 makes N/10
                      (at most 100,000) round trips
  --scenarios LIST    e.g. S1,S3 (default all: S1..S7)
  --impls LIST        e.g. kanal,memq (default all)
  --timeout SECS      deadline of one cell (default 60; quick 20)
  --quick             smoke run: 10,000 messages, 1 round
  --verbose           also print every run's figure
  --cell S,IMPL       (used by plain_bench itself) run one cell in this process
  -h, --help          this text";

// ---------------------------------------------------------------------------------------
// Scenarios and rows
// ---------------------------------------------------------------------------------------

/// The scenarios S1–S7.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    S1,
    S2,
    S3,
    S4,
    S5,
    S6,
    S7,
}

impl Scenario {
    const ALL: [Scenario; 7] = [
        Scenario::S1,
        Scenario::S2,
        Scenario::S3,
        Scenario::S4,
        Scenario::S5,
        Scenario::S6,
        Scenario::S7,
    ];

    fn id(self) -> &'static str {
        match self {
            Scenario::S1 => "S1",
            Scenario::S2 => "S2",
            Scenario::S3 => "S3",
            Scenario::S4 => "S4",
            Scenario::S5 => "S5",
            Scenario::S6 => "S6",
            Scenario::S7 => "S7",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Scenario::S1 => "S1 1 pub / 1 sub",
            Scenario::S2 => "S2 4 pub / 4 competing",
            Scenario::S3 => "S3 1 pub / 4 subscribers",
            Scenario::S4 => "S4 batches of 100",
            Scenario::S5 => "S5 1 MiB payloads",
            Scenario::S6 => "S6 ping-pong (1e9/RTT)",
            Scenario::S7 => "S7 4 partitions keyed",
        }
    }

    fn parse(text: &str) -> Result<Scenario, String> {
        Scenario::ALL
            .into_iter()
            .find(|s| s.id().eq_ignore_ascii_case(text.trim()))
            .ok_or_else(|| format!("unknown scenario `{text}`"))
    }
}

/// The rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Impl {
    Kanal,
    Flume,
    AsyncChannel,
    TokioMpsc,
    TokioBroadcast,
    Crossbeam,
    Memq,
    MemqRelease,
    MemqThreads,
    MemqThreadsRelease,
    MemqRing,
}

impl Impl {
    const ALL: [Impl; 11] = [
        Impl::Kanal,
        Impl::Flume,
        Impl::AsyncChannel,
        Impl::TokioMpsc,
        Impl::TokioBroadcast,
        Impl::Crossbeam,
        Impl::Memq,
        Impl::MemqRelease,
        Impl::MemqThreads,
        Impl::MemqThreadsRelease,
        Impl::MemqRing,
    ];

    fn name(self) -> &'static str {
        match self {
            Impl::Kanal => "kanal",
            Impl::Flume => "flume",
            Impl::AsyncChannel => "async-channel",
            Impl::TokioMpsc => "tokio-mpsc",
            Impl::TokioBroadcast => "tokio-broadcast",
            Impl::Crossbeam => "crossbeam",
            Impl::Memq => "memq",
            Impl::MemqRelease => "memq-release",
            Impl::MemqThreads => "memq-threads",
            Impl::MemqThreadsRelease => "memq-threads-release",
            Impl::MemqRing => "memq-ring",
        }
    }

    fn parse(text: &str) -> Result<Impl, String> {
        Impl::ALL
            .into_iter()
            .find(|i| i.name().eq_ignore_ascii_case(text.trim()))
            .ok_or_else(|| format!("unknown implementation `{text}`"))
    }

    /// memq's own rows must be exact: no loss, no duplicate, no failed run.
    fn is_memq(self) -> bool {
        matches!(
            self,
            Impl::Memq
                | Impl::MemqRelease
                | Impl::MemqThreads
                | Impl::MemqThreadsRelease
                | Impl::MemqRing
        )
    }

    /// tokio broadcast is a broadcast channel only (S1, S3); tokio mpsc has a single
    /// receiver, so no competing consumers (S2).
    fn runs(self, s: Scenario) -> bool {
        match self {
            Impl::TokioBroadcast => matches!(s, Scenario::S1 | Scenario::S3),
            Impl::TokioMpsc => s != Scenario::S2,
            _ => true,
        }
    }
}

/// How the senders and receivers of a scenario are wired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// One channel, one receiver (S1, S4, S5, each direction of S6).
    Pair,
    /// One channel, `FAN` receivers, each message to exactly one (S2).
    Competing,
    /// Every receiver gets every message (S3): one broadcast channel, or `FAN` channels
    /// that the publisher sends to in turn.
    Fanout,
    /// `FAN` partitions, one receiver each (S7): one keyed memq topic, or `FAN` channels
    /// chosen by a hash of the key.
    Partitioned,
}

/// The senders (one, or one per channel) and receivers of a shape.
struct Wiring<T, R> {
    txs: Vec<T>,
    rxs: Vec<R>,
}

/// What a receive gave.
enum Status {
    /// One message or more were pushed to the caller's buffer.
    Got,
    /// Messages were dropped for this receiver (tokio broadcast); their ids count as lost.
    Lagged,
    /// The channel is closed and drained.
    Closed,
}

/// Which partition a key goes to, for the rows that route keys themselves (S7).
fn partition(key: u64) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize % FAN
}

// ---------------------------------------------------------------------------------------
// Async rows (Tokio, 2 workers)
// ---------------------------------------------------------------------------------------

/// An async sender.
trait ATx: Clone + Send + Sync + 'static {
    /// Sends one message; `false` if the channel is closed.
    fn send(&self, m: Msg) -> impl Future<Output = bool> + Send;
    /// Sends a batch (S4): a loop of sends unless the API has batches.
    fn send_batch(&self, batch: Vec<Msg>) -> impl Future<Output = bool> + Send {
        async move {
            for m in batch {
                if !self.send(m).await {
                    return false;
                }
            }
            true
        }
    }
    /// Sends with a key (S7), where the API routes keys itself.
    fn send_keyed(&self, _key: u64, m: Msg) -> impl Future<Output = bool> + Send {
        self.send(m)
    }
}

/// An async receiver; `batch` asks for up to `BATCH` at once where the API has batches.
trait ARx: Send + 'static {
    /// Receives one message or more into `out`.
    fn recv(&mut self, batch: bool, out: &mut Vec<Msg>) -> impl Future<Output = Status> + Send;
}

impl ATx for kanal::AsyncSender<Msg> {
    async fn send(&self, m: Msg) -> bool {
        kanal::AsyncSender::send(self, m).await.is_ok()
    }
}
impl ARx for kanal::AsyncReceiver<Msg> {
    async fn recv(&mut self, _batch: bool, out: &mut Vec<Msg>) -> Status {
        match kanal::AsyncReceiver::recv(self).await {
            Ok(m) => {
                out.push(m);
                Status::Got
            }
            Err(_) => Status::Closed,
        }
    }
}

impl ATx for flume::Sender<Msg> {
    async fn send(&self, m: Msg) -> bool {
        self.send_async(m).await.is_ok()
    }
}
impl ARx for flume::Receiver<Msg> {
    async fn recv(&mut self, _batch: bool, out: &mut Vec<Msg>) -> Status {
        match self.recv_async().await {
            Ok(m) => {
                out.push(m);
                Status::Got
            }
            Err(_) => Status::Closed,
        }
    }
}

impl ATx for async_channel::Sender<Msg> {
    async fn send(&self, m: Msg) -> bool {
        async_channel::Sender::send(self, m).await.is_ok()
    }
}
impl ARx for async_channel::Receiver<Msg> {
    async fn recv(&mut self, _batch: bool, out: &mut Vec<Msg>) -> Status {
        match async_channel::Receiver::recv(self).await {
            Ok(m) => {
                out.push(m);
                Status::Got
            }
            Err(_) => Status::Closed,
        }
    }
}

impl ATx for tokio::sync::mpsc::Sender<Msg> {
    async fn send(&self, m: Msg) -> bool {
        tokio::sync::mpsc::Sender::send(self, m).await.is_ok()
    }
}
impl ARx for tokio::sync::mpsc::Receiver<Msg> {
    async fn recv(&mut self, _batch: bool, out: &mut Vec<Msg>) -> Status {
        match tokio::sync::mpsc::Receiver::recv(self).await {
            Some(m) => {
                out.push(m);
                Status::Got
            }
            None => Status::Closed,
        }
    }
}

impl ATx for tokio::sync::broadcast::Sender<Msg> {
    async fn send(&self, m: Msg) -> bool {
        // Never waits: a slow receiver loses the oldest messages (counted as lost).
        tokio::sync::broadcast::Sender::send(self, m).is_ok()
    }
}
impl ARx for tokio::sync::broadcast::Receiver<Msg> {
    async fn recv(&mut self, _batch: bool, out: &mut Vec<Msg>) -> Status {
        use tokio::sync::broadcast::error::RecvError;
        match tokio::sync::broadcast::Receiver::recv(self).await {
            Ok(m) => {
                out.push(m);
                Status::Got
            }
            Err(RecvError::Lagged(_)) => Status::Lagged,
            Err(RecvError::Closed) => Status::Closed,
        }
    }
}

impl ATx for memq::Topic<Msg> {
    async fn send(&self, m: Msg) -> bool {
        self.publish(m).await.is_ok()
    }
    async fn send_batch(&self, batch: Vec<Msg>) -> bool {
        self.publish_batch(batch).await.is_ok()
    }
    async fn send_keyed(&self, key: u64, m: Msg) -> bool {
        self.publish_keyed(key.to_le_bytes(), m).await.is_ok()
    }
}

/// A memq subscriber or group member, and a buffer for `recv_many`.
struct MemqRx {
    reader: MemqReader,
    buf: Vec<memq::Message<Msg>>,
}

/// The two kinds of memq reader.
enum MemqReader {
    Sub(memq::Subscriber<Msg>),
    Member(memq::Consumer<Msg>),
}

fn memq_status(r: Result<memq::Message<Msg>, memq::RecvError>, out: &mut Vec<Msg>) -> Status {
    match r {
        Ok(m) => {
            out.push(m.into_value());
            Status::Got
        }
        Err(memq::RecvError::Lagged(_)) => Status::Lagged,
        Err(_) => Status::Closed,
    }
}

fn memq_many_status(
    r: Result<usize, memq::RecvError>,
    buf: &mut Vec<memq::Message<Msg>>,
    out: &mut Vec<Msg>,
) -> Status {
    match r {
        Ok(0) => Status::Closed,
        Ok(_) => {
            out.extend(buf.drain(..).map(memq::Message::into_value));
            Status::Got
        }
        Err(memq::RecvError::Lagged(_)) => Status::Lagged,
        Err(_) => Status::Closed,
    }
}

impl ARx for MemqRx {
    async fn recv(&mut self, batch: bool, out: &mut Vec<Msg>) -> Status {
        if batch {
            let r = match &mut self.reader {
                MemqReader::Sub(s) => s.recv_many(&mut self.buf, BATCH).await,
                MemqReader::Member(c) => c.recv_many(&mut self.buf, BATCH).await,
            };
            return memq_many_status(r, &mut self.buf, out);
        }
        let r = match &mut self.reader {
            MemqReader::Sub(s) => s.recv().await,
            MemqReader::Member(c) => c.recv().await,
        };
        memq_status(r, out)
    }
}

/// memq's wiring, for the async rows and memq-threads alike: one topic (capacity 1024,
/// `Block`, the default) read by subscribers (pair, fan-out) or a group (competing,
/// partitioned).
///
/// memq's topics run on its default engine, the locked log. With `MEMQ_BENCH_RING_ENGINE=1`
/// in the environment, topics whose settings allow it run on the lock-free ring
/// (`TopicConfig::ring_engine(true)`; releasing topics stay on the locked log), to compare
/// the two engines in one binary.
fn memq_wire(shape: Shape, release: bool) -> Wiring<memq::Topic<Msg>, MemqRx> {
    let ring = std::env::var_os("MEMQ_BENCH_RING_ENGINE").is_some_and(|v| v == "1");
    let config = memq::TopicConfig::new(CAPACITY)
        .release_on_read(release)
        .ring_engine(ring);
    let config = if shape == Shape::Partitioned {
        config.partitions(FAN as u32)
    } else {
        config
    };
    let topic = memq::Topic::new(config).expect("a topic");
    let reader = |r| MemqRx {
        reader: r,
        buf: Vec::new(),
    };
    let rxs = match shape {
        Shape::Pair => vec![reader(MemqReader::Sub(
            topic
                .subscribe(memq::StartAt::Earliest)
                .expect("a subscriber"),
        ))],
        Shape::Fanout => (0..FAN)
            .map(|_| {
                reader(MemqReader::Sub(
                    topic
                        .subscribe(memq::StartAt::Earliest)
                        .expect("a subscriber"),
                ))
            })
            .collect(),
        Shape::Competing | Shape::Partitioned => (0..FAN)
            .map(|_| {
                reader(MemqReader::Member(
                    topic
                        .group("bench", memq::StartAt::Earliest)
                        .expect("a member"),
                ))
            })
            .collect(),
    };
    Wiring {
        txs: vec![topic],
        rxs,
    }
}

/// `n` channels made by `make`, one receiver each (fan-out and partitions of the rows
/// without broadcast or keys), or one channel with `FAN` receivers (competing).
fn channels<T: Clone, R: Clone>(shape: Shape, make: impl Fn() -> (T, R)) -> Wiring<T, R> {
    match shape {
        Shape::Pair => {
            let (tx, rx) = make();
            Wiring {
                txs: vec![tx],
                rxs: vec![rx],
            }
        }
        Shape::Competing => {
            let (tx, rx) = make();
            Wiring {
                txs: vec![tx],
                rxs: vec![rx; FAN],
            }
        }
        Shape::Fanout | Shape::Partitioned => {
            let (txs, rxs) = (0..FAN).map(|_| make()).unzip();
            Wiring { txs, rxs }
        }
    }
}

/// Like [`channels`] for tokio mpsc, whose receiver cannot be cloned (no competing shape).
fn tokio_mpsc(
    shape: Shape,
) -> Wiring<tokio::sync::mpsc::Sender<Msg>, tokio::sync::mpsc::Receiver<Msg>> {
    let n = if shape == Shape::Pair { 1 } else { FAN };
    assert!(shape != Shape::Competing, "tokio mpsc has one receiver");
    let (txs, rxs) = (0..n).map(|_| tokio::sync::mpsc::channel(CAPACITY)).unzip();
    Wiring { txs, rxs }
}

/// tokio broadcast: one channel, one receiver per subscriber.
fn tokio_broadcast(
    shape: Shape,
) -> Wiring<tokio::sync::broadcast::Sender<Msg>, tokio::sync::broadcast::Receiver<Msg>> {
    let (tx, rx) = tokio::sync::broadcast::channel(CAPACITY);
    let n = if shape == Shape::Fanout { FAN } else { 1 };
    let mut rxs = vec![rx];
    while rxs.len() < n {
        rxs.push(tx.subscribe());
    }
    Wiring { txs: vec![tx], rxs }
}

// ---------------------------------------------------------------------------------------
// Thread rows
// ---------------------------------------------------------------------------------------

/// A blocking sender.
trait STx: Clone + Send + 'static {
    /// Sends one message; `false` if the channel is closed.
    fn send(&self, m: Msg) -> bool;
    /// Sends a batch (S4): a loop of sends unless the API has batches.
    fn send_batch(&self, batch: Vec<Msg>) -> bool {
        batch.into_iter().all(|m| self.send(m))
    }
    /// Sends with a key (S7), where the API routes keys itself.
    fn send_keyed(&self, _key: u64, m: Msg) -> bool {
        self.send(m)
    }
}

/// A blocking receiver.
trait SRx: Send + 'static {
    /// Receives one message or more into `out`.
    fn recv(&mut self, batch: bool, out: &mut Vec<Msg>) -> Status;
}

impl STx for crossbeam_channel::Sender<Msg> {
    fn send(&self, m: Msg) -> bool {
        crossbeam_channel::Sender::send(self, m).is_ok()
    }
}
impl SRx for crossbeam_channel::Receiver<Msg> {
    fn recv(&mut self, _batch: bool, out: &mut Vec<Msg>) -> Status {
        match crossbeam_channel::Receiver::recv(self) {
            Ok(m) => {
                out.push(m);
                Status::Got
            }
            Err(_) => Status::Closed,
        }
    }
}

impl STx for memq::Topic<Msg> {
    fn send(&self, m: Msg) -> bool {
        self.publish_blocking(m).is_ok()
    }
    fn send_batch(&self, batch: Vec<Msg>) -> bool {
        self.publish_batch_blocking(batch).is_ok()
    }
    fn send_keyed(&self, key: u64, m: Msg) -> bool {
        self.publish_keyed_blocking(key.to_le_bytes(), m).is_ok()
    }
}
impl SRx for MemqRx {
    fn recv(&mut self, batch: bool, out: &mut Vec<Msg>) -> Status {
        if batch {
            let r = match &mut self.reader {
                MemqReader::Sub(s) => s.recv_many_blocking(&mut self.buf, BATCH),
                MemqReader::Member(c) => c.recv_many_blocking(&mut self.buf, BATCH),
            };
            return memq_many_status(r, &mut self.buf, out);
        }
        let r = match &mut self.reader {
            MemqReader::Sub(s) => s.recv_blocking(),
            MemqReader::Member(c) => c.recv_blocking(),
        };
        memq_status(r, out)
    }
}

type Ring = memq_ring::Ring<Msg, memq_ring::blocking::Parking>;

/// Closes its ring when dropped: the last sender's share of it closes the ring after the
/// last publish, so that the readers end.
struct CloseOnDrop(Arc<Ring>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// A memq-ring sender: the ring, and a share of its closer.
#[derive(Clone)]
struct RingTx {
    ring: Arc<Ring>,
    _close: Arc<CloseOnDrop>,
}

impl STx for RingTx {
    fn send(&self, m: Msg) -> bool {
        self.ring.publish(m).is_ok()
    }
}

/// A memq-ring broadcast reader or group member.
enum RingRx {
    Reader(memq_ring::Reader<Msg, memq_ring::blocking::Parking>),
    Member(memq_ring::Member<Msg, memq_ring::blocking::Parking>),
}

impl SRx for RingRx {
    fn recv(&mut self, _batch: bool, out: &mut Vec<Msg>) -> Status {
        let r = match self {
            RingRx::Reader(r) => r.recv(),
            RingRx::Member(m) => m.recv(),
        };
        match r {
            Ok((_, m)) => {
                out.push(m);
                Status::Got
            }
            Err(memq_ring::TryRecvError::Lagged(_)) => Status::Lagged,
            Err(_) => Status::Closed,
        }
    }
}

/// memq-ring: one ring per channel the shape needs, `Block` (a writer waits for the
/// slowest reader); a group for competing receivers, broadcast readers otherwise. Where
/// each message goes to one receiver the ring takes (`RingConfig::take`: a receive moves
/// the message out, a queue, as memq-release is); the fan-out clones.
fn ring_wire(shape: Shape) -> Wiring<RingTx, RingRx> {
    let ring = |take: bool| {
        let config = memq_ring::RingConfig {
            take,
            ..memq_ring::RingConfig::new(CAPACITY)
        };
        let ring = Arc::new(
            Ring::with_waiters(config, memq_ring::blocking::Parking::default()).expect("a ring"),
        );
        let tx = RingTx {
            ring: ring.clone(),
            _close: Arc::new(CloseOnDrop(ring.clone())),
        };
        (ring, tx)
    };
    let reader = |r: &Arc<Ring>| {
        RingRx::Reader(memq_ring::Reader::new(r, memq_ring::Start::Earliest).expect("a reader"))
    };
    match shape {
        Shape::Pair => {
            let (r, tx) = ring(true);
            Wiring {
                txs: vec![tx],
                rxs: vec![reader(&r)],
            }
        }
        Shape::Fanout => {
            let (r, tx) = ring(false);
            Wiring {
                txs: vec![tx],
                rxs: (0..FAN).map(|_| reader(&r)).collect(),
            }
        }
        Shape::Competing => {
            let (r, tx) = ring(true);
            let group = memq_ring::Group::new(&r, memq_ring::Start::Earliest).expect("a group");
            Wiring {
                txs: vec![tx],
                rxs: (0..FAN)
                    .map(|_| RingRx::Member(group.member().expect("a member")))
                    .collect(),
            }
        }
        Shape::Partitioned => {
            let (rings, txs): (Vec<_>, Vec<_>) = (0..FAN).map(|_| ring(true)).unzip();
            Wiring {
                txs,
                rxs: rings.iter().map(reader).collect(),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Running one cell
// ---------------------------------------------------------------------------------------

/// Sizes of one run.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    messages: u64,
    large: u64,
    round_trips: u64,
}

impl Sizes {
    fn new(messages: u64) -> Sizes {
        Sizes {
            messages,
            large: (messages / 100).clamp(1, 10_000),
            round_trips: (messages / 10).clamp(1, 100_000),
        }
    }

    /// Messages published in `s` (round trips in S6).
    fn of(self, s: Scenario) -> u64 {
        match s {
            Scenario::S5 => self.large,
            Scenario::S6 => self.round_trips,
            _ => self.messages,
        }
    }
}

/// What one receiver saw: how many times each id arrived.
struct Seen {
    counts: Vec<u8>,
}

impl Seen {
    fn new(n: u64) -> Seen {
        Seen {
            counts: vec![0; n as usize],
        }
    }

    fn take(&mut self, out: &mut Vec<Msg>) {
        for (id, _) in out.drain(..) {
            let c = &mut self.counts[id as usize];
            *c = c.saturating_add(1);
        }
    }
}

/// The outcome of one run.
#[derive(Clone, Copy, Debug)]
struct Outcome {
    /// Distinct deliveries per second (S6: 1e9 / median round trip).
    rate: f64,
    /// Expected deliveries that never arrived.
    lost: u64,
    /// Deliveries beyond the first of the same id (to the same subscriber in S3).
    dup: u64,
    /// S6: the median round trip, ns.
    rtt_ns: f64,
}

impl Outcome {
    /// Counts `seen` against `n` ids: every subscriber must see every id in S3, and in the
    /// other scenarios the receivers together must see every id once.
    fn count(s: Scenario, n: u64, seen: &[Seen], elapsed: Duration) -> Outcome {
        let (mut lost, mut dup, mut distinct) = (0, 0, 0);
        let mut tally = |counts: &mut dyn Iterator<Item = u64>| {
            for c in counts {
                if c == 0 {
                    lost += 1;
                } else {
                    distinct += 1;
                    dup += c - 1;
                }
            }
        };
        if s == Scenario::S3 {
            for one in seen {
                tally(&mut one.counts.iter().map(|&c| u64::from(c)));
            }
        } else {
            tally(&mut (0..n as usize).map(|i| seen.iter().map(|x| u64::from(x.counts[i])).sum()));
        }
        Outcome {
            rate: distinct as f64 / elapsed.as_secs_f64(),
            lost,
            dup,
            rtt_ns: 0.0,
        }
    }

    fn to_line(self) -> String {
        format!("{} {} {} {}", self.rate, self.lost, self.dup, self.rtt_ns)
    }

    fn from_line(line: &str) -> Option<Outcome> {
        let mut f = line.split_whitespace();
        Some(Outcome {
            rate: f.next()?.parse().ok()?,
            lost: f.next()?.parse().ok()?,
            dup: f.next()?.parse().ok()?,
            rtt_ns: f.next()?.parse().ok()?,
        })
    }
}

fn shape_of(s: Scenario) -> Shape {
    match s {
        Scenario::S2 => Shape::Competing,
        Scenario::S3 => Shape::Fanout,
        Scenario::S7 => Shape::Partitioned,
        _ => Shape::Pair,
    }
}

/// The payloads a run sends: one shared by every message, or (`PLAIN_BENCH_DISTINCT=1`)
/// [`DISTINCT`] distinct ones, message `id` taking number `id % DISTINCT`.
#[derive(Clone)]
struct Payloads(Arc<[Arc<[u8]>]>);

/// How many distinct payloads `PLAIN_BENCH_DISTINCT=1` cycles through: four times a
/// topic's or a channel's capacity, so that no two messages alive at once share one.
const DISTINCT: usize = 4 * CAPACITY;

impl Payloads {
    /// The payload of message `id`.
    fn get(&self, id: u64) -> Arc<[u8]> {
        self.0[id as usize % self.0.len()].clone()
    }
}

fn payload(s: Scenario) -> Payloads {
    let size = if s == Scenario::S5 { 1 << 20 } else { 1 << 10 };
    let distinct =
        std::env::var_os("PLAIN_BENCH_DISTINCT").is_some_and(|v| v == "1") && s != Scenario::S5;
    let count = if distinct { DISTINCT } else { 1 };
    Payloads((0..count).map(|_| Arc::from(vec![7u8; size])).collect())
}

/// The median of `xs` (sorted in place).
fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n == 0 {
        return 0.0;
    }
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// Runs a scenario on an async row, on a Tokio runtime with 2 workers.
fn run_async<T: ATx, R: ARx>(s: Scenario, n: u64, wire: impl Fn(Shape) -> Wiring<T, R>) -> Outcome {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let data = payload(s);
    if s == Scenario::S6 {
        return rt.block_on(async move {
            let there = wire(Shape::Pair);
            let back = wire(Shape::Pair);
            let (Some(tx), Some(mut rx)) =
                (there.txs.into_iter().next(), back.rxs.into_iter().next())
            else {
                unreachable!()
            };
            let (Some(echo_tx), Some(mut echo_rx)) =
                (back.txs.into_iter().next(), there.rxs.into_iter().next())
            else {
                unreachable!()
            };
            let echo = tokio::spawn(async move {
                let mut out = Vec::new();
                while let Status::Got = echo_rx.recv(false, &mut out).await {
                    for m in out.drain(..) {
                        if !echo_tx.send(m).await {
                            return;
                        }
                    }
                }
            });
            let client = tokio::spawn(async move {
                let mut seen = Seen::new(n);
                let mut rtts = Vec::with_capacity(n as usize);
                let mut out = Vec::new();
                let start = Instant::now();
                for id in 0..n {
                    let t = Instant::now();
                    if !tx.send((id, data.get(id))).await {
                        break;
                    }
                    if !matches!(rx.recv(false, &mut out).await, Status::Got) {
                        break;
                    }
                    rtts.push(t.elapsed().as_nanos() as f64);
                    seen.take(&mut out);
                }
                (seen, rtts, start.elapsed())
            });
            let (seen, mut rtts, elapsed) = client.await.expect("the client");
            echo.await.expect("the echo");
            let mut o = Outcome::count(s, n, &[seen], elapsed);
            o.rtt_ns = median(&mut rtts);
            o.rate = 1e9 / o.rtt_ns;
            o
        });
    }
    rt.block_on(async move {
        let Wiring { txs, rxs } = wire(shape_of(s));
        let batch = s == Scenario::S4;
        let readers: Vec<_> = rxs
            .into_iter()
            .map(|mut rx| {
                tokio::spawn(async move {
                    let mut seen = Seen::new(n);
                    let mut out = Vec::new();
                    loop {
                        match rx.recv(batch, &mut out).await {
                            Status::Got => seen.take(&mut out),
                            Status::Lagged => {}
                            Status::Closed => break,
                        }
                    }
                    seen
                })
            })
            .collect();
        let start = Instant::now();
        let publishers: Vec<_> = if s == Scenario::S2 {
            // 4 publishers, each a clone of the one sender, each its share of the ids.
            (0..FAN as u64)
                .map(|p| {
                    let tx = txs[0].clone();
                    let data = data.clone();
                    tokio::spawn(async move {
                        let mut id = p;
                        while id < n {
                            tx.send((id, data.get(id))).await;
                            id += FAN as u64;
                        }
                    })
                })
                .collect()
        } else {
            let txs = txs.clone();
            vec![tokio::spawn(async move {
                if batch {
                    let mut id = 0;
                    while id < n {
                        let end = (id + BATCH as u64).min(n);
                        let b: Vec<Msg> = (id..end).map(|i| (i, data.get(i))).collect();
                        txs[0].send_batch(b).await;
                        id = end;
                    }
                    return;
                }
                for id in 0..n {
                    let m = (id, data.get(id));
                    match s {
                        Scenario::S3 => {
                            for tx in &txs {
                                tx.send(m.clone()).await;
                            }
                        }
                        Scenario::S7 if txs.len() == 1 => {
                            txs[0].send_keyed(id, m).await;
                        }
                        Scenario::S7 => {
                            txs[partition(id)].send(m).await;
                        }
                        _ => {
                            txs[0].send(m).await;
                        }
                    }
                }
            })]
        };
        drop(txs);
        for p in publishers {
            p.await.expect("a publisher");
        }
        let mut seen = Vec::new();
        for r in readers {
            seen.push(r.await.expect("a reader"));
        }
        Outcome::count(s, n, &seen, start.elapsed())
    })
}

/// Runs a scenario on a thread row.
fn run_threads<T: STx, R: SRx>(
    s: Scenario,
    n: u64,
    wire: impl Fn(Shape) -> Wiring<T, R>,
) -> Outcome {
    let data = payload(s);
    if s == Scenario::S6 {
        let there = wire(Shape::Pair);
        let back = wire(Shape::Pair);
        let (Some(tx), Some(mut rx)) = (there.txs.into_iter().next(), back.rxs.into_iter().next())
        else {
            unreachable!()
        };
        let (Some(echo_tx), Some(mut echo_rx)) =
            (back.txs.into_iter().next(), there.rxs.into_iter().next())
        else {
            unreachable!()
        };
        let echo = std::thread::spawn(move || {
            let mut out = Vec::new();
            while let Status::Got = echo_rx.recv(false, &mut out) {
                for m in out.drain(..) {
                    if !echo_tx.send(m) {
                        return;
                    }
                }
            }
        });
        let mut seen = Seen::new(n);
        let mut rtts = Vec::with_capacity(n as usize);
        let mut out = Vec::new();
        let start = Instant::now();
        for id in 0..n {
            let t = Instant::now();
            if !tx.send((id, data.get(id))) {
                break;
            }
            if !matches!(rx.recv(false, &mut out), Status::Got) {
                break;
            }
            rtts.push(t.elapsed().as_nanos() as f64);
            seen.take(&mut out);
        }
        let elapsed = start.elapsed();
        drop(tx);
        echo.join().expect("the echo");
        let mut o = Outcome::count(s, n, &[seen], elapsed);
        o.rtt_ns = median(&mut rtts);
        o.rate = 1e9 / o.rtt_ns;
        return o;
    }
    let Wiring { txs, rxs } = wire(shape_of(s));
    let batch = s == Scenario::S4;
    let readers: Vec<_> = rxs
        .into_iter()
        .map(|mut rx| {
            std::thread::spawn(move || {
                let mut seen = Seen::new(n);
                let mut out = Vec::new();
                loop {
                    match rx.recv(batch, &mut out) {
                        Status::Got => seen.take(&mut out),
                        Status::Lagged => {}
                        Status::Closed => break,
                    }
                }
                seen
            })
        })
        .collect();
    let start = Instant::now();
    let publishers: Vec<_> = if s == Scenario::S2 {
        (0..FAN as u64)
            .map(|p| {
                let tx = txs[0].clone();
                let data = data.clone();
                std::thread::spawn(move || {
                    let mut id = p;
                    while id < n {
                        tx.send((id, data.get(id)));
                        id += FAN as u64;
                    }
                })
            })
            .collect()
    } else {
        let txs = txs.clone();
        vec![std::thread::spawn(move || {
            if batch {
                let mut id = 0;
                while id < n {
                    let end = (id + BATCH as u64).min(n);
                    txs[0].send_batch((id..end).map(|i| (i, data.get(i))).collect());
                    id = end;
                }
                return;
            }
            for id in 0..n {
                let m = (id, data.get(id));
                match s {
                    Scenario::S3 => {
                        for tx in &txs {
                            tx.send(m.clone());
                        }
                    }
                    Scenario::S7 if txs.len() == 1 => {
                        txs[0].send_keyed(id, m);
                    }
                    Scenario::S7 => {
                        txs[partition(id)].send(m);
                    }
                    _ => {
                        txs[0].send(m);
                    }
                }
            }
        })]
    };
    drop(txs);
    for p in publishers {
        p.join().expect("a publisher");
    }
    let seen: Vec<Seen> = readers
        .into_iter()
        .map(|r| r.join().expect("a reader"))
        .collect();
    Outcome::count(s, n, &seen, start.elapsed())
}

/// Runs one cell in this process.
fn run_cell(s: Scenario, imp: Impl, sizes: Sizes) -> Outcome {
    let n = sizes.of(s);
    match imp {
        Impl::Kanal => run_async(s, n, |shape| {
            channels(shape, || kanal::bounded_async(CAPACITY))
        }),
        Impl::Flume => run_async(s, n, |shape| channels(shape, || flume::bounded(CAPACITY))),
        Impl::AsyncChannel => run_async(s, n, |shape| {
            channels(shape, || async_channel::bounded(CAPACITY))
        }),
        Impl::TokioMpsc => run_async(s, n, tokio_mpsc),
        Impl::TokioBroadcast => run_async(s, n, tokio_broadcast),
        Impl::Crossbeam => run_threads(s, n, |shape| {
            channels(shape, || crossbeam_channel::bounded(CAPACITY))
        }),
        Impl::Memq => run_async(s, n, |shape| memq_wire(shape, false)),
        Impl::MemqRelease => run_async(s, n, |shape| memq_wire(shape, true)),
        Impl::MemqThreads => run_threads(s, n, |shape| memq_wire(shape, false)),
        Impl::MemqThreadsRelease => run_threads(s, n, |shape| memq_wire(shape, true)),
        Impl::MemqRing => run_threads(s, n, ring_wire),
    }
}

// ---------------------------------------------------------------------------------------
// The parent: rounds, children, tables
// ---------------------------------------------------------------------------------------

/// The command line.
#[derive(Debug)]
struct Args {
    rounds: usize,
    messages: u64,
    scenarios: Vec<Scenario>,
    impls: Vec<Impl>,
    timeout: u64,
    quick: bool,
    verbose: bool,
    cell: Option<(Scenario, Impl)>,
}

fn parse_num(text: &str) -> Result<u64, String> {
    text.replace(['_', ','], "")
        .parse()
        .map_err(|_| format!("not a number: `{text}`"))
}

fn parse_args() -> Result<Option<Args>, String> {
    let mut a = Args {
        rounds: 5,
        messages: 1_000_000,
        scenarios: Scenario::ALL.to_vec(),
        impls: Impl::ALL.to_vec(),
        timeout: 60,
        quick: false,
        verbose: false,
        cell: None,
    };
    let (mut rounds, mut messages, mut timeout) = (None, None, None);
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--rounds" => rounds = Some(parse_num(&value("--rounds")?)?),
            "--messages" => messages = Some(parse_num(&value("--messages")?)?),
            "--timeout" => timeout = Some(parse_num(&value("--timeout")?)?),
            "--scenarios" => {
                a.scenarios = value("--scenarios")?
                    .split(',')
                    .map(Scenario::parse)
                    .collect::<Result<_, _>>()?;
            }
            "--impls" => {
                a.impls = value("--impls")?
                    .split(',')
                    .map(Impl::parse)
                    .collect::<Result<_, _>>()?;
            }
            "--quick" => a.quick = true,
            "--verbose" => a.verbose = true,
            "--cell" => {
                let v = value("--cell")?;
                let (s, i) = v
                    .split_once(',')
                    .ok_or_else(|| format!("--cell wants S,IMPL, not `{v}`"))?;
                a.cell = Some((Scenario::parse(s)?, Impl::parse(i)?));
            }
            "-h" | "--help" => return Ok(None),
            "--bench" => {}
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if a.quick {
        a.rounds = 1;
        a.messages = 10_000;
        a.timeout = 20;
    }
    a.rounds = rounds.map_or(a.rounds, |r| r.max(1) as usize);
    a.messages = messages.map_or(a.messages, |m| m.max(1));
    a.timeout = timeout.map_or(a.timeout, |t| t.max(1));
    Ok(Some(a))
}

const OUTCOME: &str = "plain_bench outcome: ";

/// Runs one cell in a fresh child process (this program with `--cell`).
fn run_child(a: &Args, s: Scenario, imp: Impl) -> Result<Outcome, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
    let out = std::process::Command::new(exe)
        .arg("--cell")
        .arg(format!("{},{}", s.id(), imp.name()))
        .arg("--messages")
        .arg(a.messages.to_string())
        .arg("--timeout")
        .arg(a.timeout.to_string())
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot start a child: {e}"))?;
    if !out.status.success() {
        return Err(format!("the child ended with {}", out.status));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix(OUTCOME))
        .and_then(Outcome::from_line)
        .ok_or_else(|| "the child printed no outcome".to_string())
}

/// A rate as `9.30M` or `512k`.
fn fmt_rate(r: f64) -> String {
    if r >= 1e6 {
        format!("{:.2}M", r / 1e6)
    } else {
        format!("{:.0}k", r / 1e3)
    }
}

/// One cell's runs over the rounds.
struct Cell {
    s: Scenario,
    imp: Impl,
    runs: Vec<Outcome>,
    failed: usize,
}

impl Cell {
    fn median_rate(&self) -> Option<f64> {
        if self.runs.is_empty() {
            return None;
        }
        if self.s == Scenario::S6 {
            let mut rtts: Vec<f64> = self.runs.iter().map(|o| o.rtt_ns).collect();
            return Some(1e9 / median(&mut rtts));
        }
        let mut rates: Vec<f64> = self.runs.iter().map(|o| o.rate).collect();
        Some(median(&mut rates))
    }

    fn lost(&self) -> u64 {
        self.runs.iter().map(|o| o.lost).sum()
    }

    fn dup(&self) -> u64 {
        self.runs.iter().map(|o| o.dup).sum()
    }

    fn exact(&self) -> bool {
        self.failed == 0 && self.lost() == 0 && self.dup() == 0
    }
}

fn print_tables(a: &Args, cells: &[Cell]) {
    let header = |first: &str| {
        let mut h = format!("| {first} |");
        let mut rule = String::from("|---|");
        for imp in &a.impls {
            h.push_str(&format!(" {} |", imp.name()));
            rule.push_str("---:|");
        }
        (h, rule)
    };
    let cell = |s: Scenario, imp: Impl| cells.iter().find(|c| c.s == s && c.imp == imp);

    // Medians, and the first row of each scenario.
    let (h, rule) = header("median msgs/s");
    println!("{h} first |\n{rule}---|");
    for &s in &a.scenarios {
        let mut line = format!("| {} |", s.title());
        let mut best: Option<(f64, Impl)> = None;
        let mut best_exact: Option<(f64, Impl)> = None;
        for &imp in &a.impls {
            match cell(s, imp).and_then(Cell::median_rate) {
                Some(r) => {
                    line.push_str(&format!(" {} |", fmt_rate(r)));
                    let c = cell(s, imp).expect("a cell");
                    if best.is_none_or(|(b, _)| r > b) {
                        best = Some((r, imp));
                    }
                    if c.exact() && best_exact.is_none_or(|(b, _)| r > b) {
                        best_exact = Some((r, imp));
                    }
                }
                None => line.push_str(" – |"),
            }
        }
        let first = match (best, best_exact) {
            (Some((_, b)), Some((_, e))) if b == e => b.name().to_string(),
            (Some((_, b)), Some((_, e))) => {
                format!("{} (lossy); lossless: {}", b.name(), e.name())
            }
            (Some((_, b)), None) => format!("{} (lossy)", b.name()),
            _ => "–".to_string(),
        };
        println!("{line} {first} |");
    }
    if a.scenarios.contains(&Scenario::S6) {
        let mut line = String::from("| S6 median RTT |");
        for &imp in &a.impls {
            match cell(Scenario::S6, imp).filter(|c| !c.runs.is_empty()) {
                Some(c) => {
                    let mut rtts: Vec<f64> = c.runs.iter().map(|o| o.rtt_ns).collect();
                    line.push_str(&format!(" {:.2} µs |", median(&mut rtts) / 1e3));
                }
                None => line.push_str(" – |"),
            }
        }
        println!("{line} |");
    }

    // Ranges.
    println!();
    let (h, rule) = header("min–max msgs/s");
    println!("{h}\n{rule}");
    for &s in &a.scenarios {
        let mut line = format!("| {} |", s.id());
        for &imp in &a.impls {
            match cell(s, imp).filter(|c| !c.runs.is_empty()) {
                Some(c) => {
                    let (lo, hi) = c.runs.iter().fold((f64::MAX, 0.0f64), |(lo, hi), o| {
                        (lo.min(o.rate), hi.max(o.rate))
                    });
                    line.push_str(&format!(" {}–{} |", fmt_rate(lo), fmt_rate(hi)));
                }
                None => line.push_str(" – |"),
            }
        }
        println!("{line}");
    }

    // Losses and duplicates.
    println!();
    let (h, rule) = header("lost / dup (all rounds)");
    println!("{h}\n{rule}");
    for &s in &a.scenarios {
        let mut line = format!("| {} |", s.id());
        for &imp in &a.impls {
            match cell(s, imp) {
                Some(c) if c.failed > 0 => line.push_str(&format!(
                    " {} / {} ({} failed) |",
                    c.lost(),
                    c.dup(),
                    c.failed
                )),
                Some(c) => line.push_str(&format!(" {} / {} |", c.lost(), c.dup())),
                None => line.push_str(" – |"),
            }
        }
        println!("{line}");
    }
}

fn main() -> ExitCode {
    let a = match parse_args() {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("plain_bench: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let sizes = Sizes::new(a.messages);

    if let Some((s, imp)) = a.cell {
        // A child: one run under a deadline, its outcome on stdout.
        let timeout = Duration::from_secs(a.timeout);
        std::thread::spawn(move || {
            std::thread::sleep(timeout);
            eprintln!(
                "plain_bench: {} {} missed its deadline of {timeout:?}",
                s.id(),
                imp.name()
            );
            std::process::exit(3);
        });
        if !imp.runs(s) {
            eprintln!("plain_bench: {} does not run {}", imp.name(), s.id());
            return ExitCode::from(2);
        }
        println!("{OUTCOME}{}", run_cell(s, imp, sizes).to_line());
        return ExitCode::SUCCESS;
    }

    eprintln!(
        "plain_bench: {} messages (S5: {} × 1 MiB; S6: {} round trips), capacity {CAPACITY}, \
         {} round(s), 2 Tokio workers, {} CPUs, deadline {} s a cell",
        sizes.messages,
        sizes.large,
        sizes.round_trips,
        a.rounds,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        a.timeout,
    );
    let mut cells: Vec<Cell> = a
        .scenarios
        .iter()
        .flat_map(|&s| {
            a.impls
                .iter()
                .filter(move |i| i.runs(s))
                .map(move |&imp| Cell {
                    s,
                    imp,
                    runs: Vec::new(),
                    failed: 0,
                })
        })
        .collect();
    let started = Instant::now();
    for round in 0..a.rounds {
        for &s in &a.scenarios {
            // Rotate the order of the rows from one round to the next.
            let k = a.impls.len();
            for j in 0..k {
                let imp = a.impls[(j + round) % k];
                let Some(cell) = cells.iter_mut().find(|c| c.s == s && c.imp == imp) else {
                    continue;
                };
                match run_child(&a, s, imp) {
                    Ok(o) => {
                        if a.verbose || o.lost > 0 || o.dup > 0 {
                            eprintln!(
                                "round {}/{} {} {:<16} {:>9} msgs/s lost {} dup {}",
                                round + 1,
                                a.rounds,
                                s.id(),
                                imp.name(),
                                fmt_rate(o.rate),
                                o.lost,
                                o.dup
                            );
                        }
                        cell.runs.push(o);
                    }
                    Err(e) => {
                        eprintln!(
                            "plain_bench: round {} {} {}: {e}",
                            round + 1,
                            s.id(),
                            imp.name()
                        );
                        cell.failed += 1;
                    }
                }
            }
        }
        eprintln!(
            "plain_bench: round {}/{} done ({:.1?})",
            round + 1,
            a.rounds,
            started.elapsed()
        );
    }

    println!(
        "plain_bench: median of {} interleaved round(s), {} messages (S5: {} × 1 MiB; S6: {} \
         round trips), each cell in a fresh process; distinct deliveries/s (S3: all 4 \
         subscribers; S6: 1e9/median RTT). memq-ring is the ring alone, without memq's \
         topics.\n",
        a.rounds, sizes.messages, sizes.large, sizes.round_trips
    );
    print_tables(&a, &cells);

    let broken: Vec<&Cell> = cells
        .iter()
        .filter(|c| c.imp.is_memq() && !c.exact())
        .collect();
    for c in &broken {
        eprintln!(
            "plain_bench: ERROR {} {}: {} lost, {} duplicated, {} failed run(s)",
            c.s.id(),
            c.imp.name(),
            c.lost(),
            c.dup(),
            c.failed
        );
    }
    if broken.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
