//! Scenario code shared by `perf_runner`, `large_object_test` and the criterion benches.
//!
//! Owns the scenarios (S1–S7), the message type and its id, the [`Tally`] that counts every
//! delivery, and one runner per implementation ([`Impl`]). A runner only uses the public API
//! of the channel it measures, like any user would; it never reaches into memq's internals.
//!
//! Adding an implementation is one row: a variant of [`Impl`], and an [`AsyncPeer`] or
//! [`ThreadPeer`] that says how to wire the four shapes the scenarios need ([`Shape`]).
//! The generic drivers do the rest: spawn publishers and consumers, bound every wait with
//! the run's deadline, and count what arrived.

pub mod drive_async;
pub mod drive_threads;
pub mod peers;
pub mod report;

use core::fmt;
use core::time::Duration;
use std::time::Instant;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

pub use drive_async::{AsyncPeer, AsyncRx, AsyncTx};
pub use drive_threads::{SyncRx, SyncTx, ThreadPeer};

/// One measured scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scenario {
    /// 1 publisher, 1 consumer, 1 KiB shared payload, capacity 1024.
    S1OneToOne,
    /// 4 publishers, 4 competing consumers: each message reaches exactly one of them.
    S2Competing,
    /// 1 publisher, 4 broadcast subscribers; the rate counts deliveries (messages × 4).
    S3Fanout,
    /// 1 publisher, 1 consumer, batches of 100 on both sides.
    S4Batches,
    /// 1 MiB shared payloads (few messages).
    S5Large1MiB,
    /// 100 MiB shared payloads (as many messages as with 1 MiB).
    S5Large100MiB,
    /// Ping-pong over two channels; the rate is 1e9 / median round trip in ns.
    S6PingPong,
    /// 4-partition keyed topic consumed by a 4-member group (peers: 4 channels, key hashed).
    S7Partitioned,
}

impl Scenario {
    /// Every scenario, in the order the runner prints them.
    pub const ALL: [Scenario; 8] = [
        Scenario::S1OneToOne,
        Scenario::S2Competing,
        Scenario::S3Fanout,
        Scenario::S4Batches,
        Scenario::S5Large1MiB,
        Scenario::S5Large100MiB,
        Scenario::S6PingPong,
        Scenario::S7Partitioned,
    ];

    /// Short stable id, used in CSV output and on the command line.
    pub fn id(self) -> &'static str {
        match self {
            Scenario::S1OneToOne => "S1",
            Scenario::S2Competing => "S2",
            Scenario::S3Fanout => "S3",
            Scenario::S4Batches => "S4",
            Scenario::S5Large1MiB => "S5-1MiB",
            Scenario::S5Large100MiB => "S5-100MiB",
            Scenario::S6PingPong => "S6",
            Scenario::S7Partitioned => "S7",
        }
    }

    /// Human-readable label for the table.
    pub fn label(self) -> &'static str {
        match self {
            Scenario::S1OneToOne => "S1 1P/1C 1 KiB, cap 1024",
            Scenario::S2Competing => "S2 4P/4C competing",
            Scenario::S3Fanout => "S3 1P/4 subscribers (deliveries/s)",
            Scenario::S4Batches => "S4 batches of 100",
            Scenario::S5Large1MiB => "S5 1 MiB shared",
            Scenario::S5Large100MiB => "S5 100 MiB shared",
            Scenario::S6PingPong => "S6 ping-pong (1e9/median RTT)",
            Scenario::S7Partitioned => "S7 4 partitions, keyed, 4-member group",
        }
    }

    /// The implementation every other row of this scenario is compared with.
    pub fn baseline(self) -> Impl {
        match self {
            Scenario::S3Fanout => Impl::TokioBroadcast,
            _ => Impl::TokioMpsc,
        }
    }

    /// Parses an id as printed by [`Scenario::id`] (case-insensitive; `S5` means both S5 rows).
    pub fn parse_list(text: &str) -> Result<Vec<Scenario>, String> {
        let mut out = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let matched: Vec<Scenario> = Scenario::ALL
                .into_iter()
                .filter(|s| {
                    s.id().eq_ignore_ascii_case(part)
                        || s.id().split('-').next() == Some(&*part.to_ascii_uppercase())
                })
                .collect();
            if matched.is_empty() {
                return Err(format!("unknown scenario `{part}`"));
            }
            out.extend(matched);
        }
        Ok(out)
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One implementation under test: a row of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Impl {
    /// `tokio::sync::mpsc` (S2: the single receiver shared behind a tokio `Mutex`).
    TokioMpsc,
    /// `tokio::sync::broadcast` (S1 and S3 only; it drops messages for slow receivers).
    TokioBroadcast,
    /// `async-channel` (MPMC, async).
    AsyncChannel,
    /// `flume`, used through its async API.
    Flume,
    /// `kanal`, used through its async API.
    Kanal,
    /// `crossbeam-channel` on plain threads with blocking calls.
    Crossbeam,
    /// `tokio-memq` 1.0.0, the in-memory MQ that memq replaces.
    TokioMemq,
    /// memq, async on Tokio (see [`peers::memq_topic`], the seam).
    Memq,
    /// memq on plain threads with its blocking API (compare with crossbeam).
    MemqThreads,
    /// memq async on Tokio with release-on-read topics: no replay, like a channel.
    MemqRelease,
    /// memq on plain threads with release-on-read topics: the queue on threads (compare
    /// with crossbeam, as memq-release with the async channels).
    MemqThreadsRelease,
    /// memq-ring, the lock-free ring of issue 36, alone (memq's topics run on it when asked),
    /// on plain threads with its blocking front: how fast the ring itself goes.
    MemqRing,
    /// memq-ring alone with its async front, on Tokio like the async peers.
    MemqRingAsync,
}

impl Impl {
    /// Every implementation, in the order the runner prints them.
    pub const ALL: [Impl; 13] = [
        Impl::TokioMpsc,
        Impl::TokioBroadcast,
        Impl::AsyncChannel,
        Impl::Flume,
        Impl::Kanal,
        Impl::Crossbeam,
        Impl::TokioMemq,
        Impl::Memq,
        Impl::MemqThreads,
        Impl::MemqRelease,
        Impl::MemqThreadsRelease,
        Impl::MemqRing,
        Impl::MemqRingAsync,
    ];

    /// Whether this row is memq's own: every memq topic here is `Block`, so it must deliver
    /// every message exactly once, and perf_runner fails if it does not.
    pub fn is_memq(self) -> bool {
        matches!(
            self,
            Impl::Memq
                | Impl::MemqThreads
                | Impl::MemqRelease
                | Impl::MemqThreadsRelease
                | Impl::MemqRing
                | Impl::MemqRingAsync
        )
    }

    /// Name printed in the table and accepted on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Impl::TokioMpsc => "tokio-mpsc",
            Impl::TokioBroadcast => "tokio-broadcast",
            Impl::AsyncChannel => "async-channel",
            Impl::Flume => "flume",
            Impl::Kanal => "kanal",
            Impl::Crossbeam => "crossbeam",
            Impl::TokioMemq => "tokio-memq",
            Impl::Memq => "memq",
            Impl::MemqThreads => "memq-threads",
            Impl::MemqRelease => "memq-release",
            Impl::MemqThreadsRelease => "memq-threads-release",
            Impl::MemqRing => "memq-ring",
            Impl::MemqRingAsync => "memq-ring-async",
        }
    }

    /// Parses a comma-separated list of names as printed by [`Impl::name`].
    pub fn parse_list(text: &str) -> Result<Vec<Impl>, String> {
        text.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                Impl::ALL
                    .into_iter()
                    .find(|i| i.name().eq_ignore_ascii_case(p))
                    .ok_or_else(|| format!("unknown implementation `{p}`"))
            })
            .collect()
    }

    /// Whether this implementation has a meaningful way to run `scenario`.
    ///
    /// `false` prints as "–". tokio broadcast is a fan-out channel only, so it runs S1 and S3.
    pub fn supports(self, scenario: Scenario) -> bool {
        match self {
            Impl::TokioBroadcast => {
                matches!(scenario, Scenario::S1OneToOne | Scenario::S3Fanout)
            }
            _ => true,
        }
    }

    /// How this row runs a scenario, when that differs from the obvious (printed as a note).
    pub fn note(self, scenario: Scenario) -> Option<&'static str> {
        match (self, scenario) {
            (Impl::TokioMpsc, Scenario::S2Competing) => Some("1 receiver behind a tokio Mutex"),
            (
                Impl::TokioMpsc | Impl::AsyncChannel | Impl::Flume | Impl::Kanal | Impl::Crossbeam,
                Scenario::S3Fanout,
            ) => Some("4 channels"),
            (
                Impl::TokioMpsc | Impl::AsyncChannel | Impl::Flume | Impl::Kanal | Impl::Crossbeam,
                Scenario::S7Partitioned,
            ) => Some("4 channels, key hashed"),
            (Impl::AsyncChannel | Impl::Crossbeam, Scenario::S4Batches) => {
                Some("no batch API: recv + try_recv loop")
            }
            (Impl::Flume | Impl::Kanal, Scenario::S4Batches) => {
                Some("no batch API: send loop; recv + try_recv loop")
            }
            (Impl::TokioMpsc, Scenario::S4Batches) => Some("reserve_many + recv_many"),
            (Impl::TokioMemq, Scenario::S2Competing) => Some("consumer group; unbounded"),
            (Impl::TokioMemq, Scenario::S4Batches) => Some("publish_batch + recv_batch; unbounded"),
            (Impl::TokioMemq, Scenario::S7Partitioned) => {
                Some("partitioned topic, Hash routing; unbounded")
            }
            (
                Impl::Memq | Impl::MemqThreads | Impl::MemqRelease | Impl::MemqThreadsRelease,
                Scenario::S2Competing,
            ) => Some("consumer group"),
            (Impl::Memq | Impl::MemqRelease, Scenario::S4Batches) => {
                Some("publish_batch + recv_many")
            }
            (Impl::MemqThreads | Impl::MemqThreadsRelease, Scenario::S4Batches) => {
                Some("publish_batch_blocking + recv_many_blocking")
            }
            (
                Impl::Memq | Impl::MemqThreads | Impl::MemqRelease | Impl::MemqThreadsRelease,
                Scenario::S7Partitioned,
            ) => Some("4-partition topic, publish_keyed"),
            (Impl::TokioMemq, _) => Some("unbounded (no bounded lossless mode)"),
            (Impl::MemqRing | Impl::MemqRingAsync, Scenario::S2Competing) => {
                Some("the ring alone; a group")
            }
            (Impl::MemqRing | Impl::MemqRingAsync, Scenario::S7Partitioned) => {
                Some("the ring alone; 4 rings, key hashed")
            }
            (Impl::MemqRing | Impl::MemqRingAsync, _) => {
                Some("the ring alone, without memq's topics")
            }
            _ => None,
        }
    }
}

impl fmt::Display for Impl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Sizes and limits of one run. The same values go to every implementation.
#[derive(Clone, Debug)]
pub struct Params {
    /// Messages published in S1–S4 and S7 (`--messages`).
    pub messages: u64,
    /// Channel / topic capacity, in messages.
    pub capacity: usize,
    /// Payload size for S1–S4, S6, S7, in bytes (shared, never copied).
    pub payload_size: usize,
    /// Publishers in S2.
    pub publishers: usize,
    /// Consumers in S2, subscribers in S3, partitions and group members in S7.
    pub consumers: usize,
    /// Batch size in S4.
    pub batch: usize,
    /// Messages in S5 with 1 MiB payloads.
    pub large_messages: u64,
    /// Messages in S5 with 100 MiB payloads.
    pub huge_messages: u64,
    /// Round trips in S6 (at most; see `pingpong_budget`).
    pub round_trips: u64,
    /// S6 stops after this much time even if fewer round trips were made.
    pub pingpong_budget: Duration,
    /// Wall-clock cap of one run: every wait is bounded by it, so a peer that loses
    /// messages cannot hang the run.
    pub deadline: Duration,
    /// How long a consumer of a peer that cannot signal "closed" waits, once every
    /// publisher is done, before it decides nothing more will arrive.
    pub idle: Duration,
    /// Tokio worker threads.
    pub workers: usize,
}

impl Params {
    /// Parameters of a full run with `messages` messages per scenario.
    pub fn full(messages: u64) -> Params {
        let messages = messages.max(100);
        Params {
            messages,
            capacity: 1024,
            payload_size: 1024,
            publishers: 4,
            consumers: 4,
            batch: 100,
            large_messages: (messages / 100).clamp(10, 10_000),
            // As many as with 1 MiB: the payload is shared, so its size costs nothing
            // per message, and 100 messages (the former count) took well under a
            // millisecond, too short to measure (medians over 5 rounds ranged 3x).
            huge_messages: (messages / 100).clamp(10, 10_000),
            round_trips: (messages / 10).clamp(100, 100_000),
            pingpong_budget: Duration::from_secs(3),
            deadline: Duration::from_secs(60),
            idle: Duration::from_millis(200),
            workers: 2,
        }
    }

    /// A small smoke run (CI): every scenario, a few thousand messages.
    pub fn quick() -> Params {
        Params {
            pingpong_budget: Duration::from_millis(300),
            // Healthy runs of this size take milliseconds; a stalled one costs this much.
            deadline: Duration::from_secs(3),
            idle: Duration::from_millis(100),
            ..Params::full(10_000)
        }
    }

    /// Deliveries a lossless implementation makes in `scenario`.
    pub fn expected(&self, scenario: Scenario) -> u64 {
        match scenario {
            Scenario::S3Fanout => self.messages * self.consumers as u64,
            Scenario::S5Large1MiB => self.large_messages,
            Scenario::S5Large100MiB => self.huge_messages,
            Scenario::S6PingPong => self.round_trips,
            _ => self.messages,
        }
    }

    /// Size of the payload that `scenario` shares between all its messages.
    pub fn payload_size_of(&self, scenario: Scenario) -> usize {
        match scenario {
            Scenario::S5Large1MiB => 1 << 20,
            Scenario::S5Large100MiB => 100 << 20,
            _ => self.payload_size,
        }
    }
}

/// What one run measured. Every count is counted from what arrived, never assumed.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Distinct deliveries per second (S6: 1e9 / median round trip in ns).
    pub msgs_per_s: f64,
    /// Deliveries that should have happened and did not.
    pub lost: u64,
    /// Deliveries of a message id a consumer (or, for competing consumers, any consumer)
    /// had already received.
    pub duplicated: u64,
    /// Distinct deliveries counted.
    pub delivered: u64,
    /// Deliveries a lossless implementation makes.
    pub expected: u64,
    /// From the first publish to the last delivery.
    pub elapsed: Duration,
    /// Whether some wait hit the run's deadline.
    pub timed_out: bool,
    /// Deliveries of an id outside the ids published (corrupted or foreign messages).
    pub out_of_range: u64,
    /// S7: messages a consumer received after a later message of the same key.
    pub out_of_order: u64,
    /// S7: keys whose messages went to more than one consumer.
    pub split_keys: u64,
    /// Deliveries whose payload pointer or length differed from what was published
    /// (the payload was copied or replaced on the way).
    pub payload_mismatch: u64,
    /// Messages the peer itself said it skipped (tokio broadcast's `Lagged(n)`).
    pub lag_reported: u64,
    /// S6 only: the median round trip.
    pub median_rtt: Option<Duration>,
}

impl Outcome {
    /// One line of `key=value` fields: how a run in a child process reports to
    /// perf_runner (see [`Outcome::from_line`]).
    pub fn to_line(&self) -> String {
        format!(
            "msgs_per_s={} lost={} duplicated={} delivered={} expected={} elapsed_ns={} \
             timed_out={} out_of_range={} out_of_order={} split_keys={} \
             payload_mismatch={} lag_reported={} median_rtt_ns={}",
            self.msgs_per_s,
            self.lost,
            self.duplicated,
            self.delivered,
            self.expected,
            self.elapsed.as_nanos(),
            self.timed_out,
            self.out_of_range,
            self.out_of_order,
            self.split_keys,
            self.payload_mismatch,
            self.lag_reported,
            self.median_rtt
                .map_or_else(|| "-".to_owned(), |d| d.as_nanos().to_string()),
        )
    }

    /// Reads back what [`Outcome::to_line`] wrote.
    pub fn from_line(line: &str) -> Result<Outcome, String> {
        fn num<T: core::str::FromStr>(key: &str, v: &str) -> Result<T, String> {
            v.parse().map_err(|_| format!("bad value of {key}: `{v}`"))
        }
        let mut out = Outcome::default();
        let mut seen = 0;
        for field in line.split_whitespace() {
            let (key, v) = field
                .split_once('=')
                .ok_or_else(|| format!("not a key=value field: `{field}`"))?;
            match key {
                "msgs_per_s" => out.msgs_per_s = num(key, v)?,
                "lost" => out.lost = num(key, v)?,
                "duplicated" => out.duplicated = num(key, v)?,
                "delivered" => out.delivered = num(key, v)?,
                "expected" => out.expected = num(key, v)?,
                "elapsed_ns" => out.elapsed = Duration::from_nanos(num(key, v)?),
                "timed_out" => out.timed_out = num(key, v)?,
                "out_of_range" => out.out_of_range = num(key, v)?,
                "out_of_order" => out.out_of_order = num(key, v)?,
                "split_keys" => out.split_keys = num(key, v)?,
                "payload_mismatch" => out.payload_mismatch = num(key, v)?,
                "lag_reported" => out.lag_reported = num(key, v)?,
                "median_rtt_ns" => {
                    out.median_rtt = match v {
                        "-" => None,
                        v => Some(Duration::from_nanos(num(key, v)?)),
                    }
                }
                other => return Err(format!("unknown field `{other}`")),
            }
            seen += 1;
        }
        if seen != 13 {
            return Err(format!("{seen} of 13 fields in `{line}`"));
        }
        Ok(out)
    }
}

/// The message every scenario sends: an id to count it by, and a shared payload.
///
/// `Serialize`/`Deserialize` are only there because tokio-memq's API demands them; its
/// native mode moves the value without serializing it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Msg {
    /// Unique within a run, `0..expected` (S2: disjoint ranges per publisher).
    pub id: u64,
    /// Shared payload: every message points at the same allocation.
    pub payload: Bytes,
}

/// How the senders and receivers of one run are connected; each scenario asks for one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// One sender, one receiver (S1, S4, S5, each direction of S6).
    Pair,
    /// `n` receivers competing for messages: each message reaches exactly one (S2).
    Competing(usize),
    /// `n` receivers that each get every message (S3). The wiring has either one sender
    /// that reaches all of them (a real broadcast), or one sender per receiver (the
    /// publisher sends a clone to each).
    Fanout(usize),
    /// `n` partitions, each consumed by one group member (S7). The wiring has either one
    /// sender that routes keys itself (`send_keyed`), or one sender per partition (the
    /// harness routes with [`partition_of`]).
    Partitioned(usize),
}

/// The senders and receivers of one run, as an implementation wired them for a [`Shape`].
#[derive(Debug)]
pub struct Wiring<Tx, Rx> {
    /// Senders: one, or one per receiver / partition (see [`Shape`]).
    pub txs: Vec<Tx>,
    /// Receivers, one per consumer task or thread.
    pub rxs: Vec<Rx>,
}

/// What a receive returned.
#[derive(Debug)]
pub enum Recv {
    /// A message.
    Msg(Msg),
    /// The peer says it skipped this many messages for this receiver.
    Lagged(u64),
    /// Every sender is gone and nothing is left.
    Closed,
}

/// What a non-blocking receive returned.
#[derive(Debug)]
pub enum TryRecv {
    /// A message.
    Msg(Msg),
    /// Nothing right now.
    Empty,
    /// The peer says it skipped this many messages for this receiver.
    Lagged(u64),
    /// Every sender is gone and nothing is left.
    Closed,
}

/// What a batch receive returned.
#[derive(Debug)]
pub enum Batch {
    /// Messages were appended to the buffer (at least one).
    Got,
    /// The peer says it skipped this many messages for this receiver.
    Lagged(u64),
    /// Every sender is gone and nothing is left.
    Closed,
}

/// A send failed because every receiver is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Disconnected;

/// Number of distinct keys in S7.
pub const KEYS: u64 = 256;

/// The key of message `id` in S7.
pub fn key_of(id: u64) -> u64 {
    id % KEYS
}

/// The partition a key maps to when the harness routes keys itself (peers without
/// partitions). A fixed mixer, so routing costs the same for every peer.
pub fn partition_of(key: u64, partitions: usize) -> usize {
    // splitmix64 finalizer: cheap, and spreads consecutive keys evenly.
    let mut z = key.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z % partitions as u64) as usize
}

/// A payload of `size` bytes, filled with printable ASCII (tokio-memq's message preview
/// for logs slices payloads longer than 256 bytes as text and panics inside a multi-byte
/// character; in the native mode these scenarios use it does not read the payload, so
/// this only keeps a run in another mode from failing on what it does not measure).
pub fn make_payload(size: usize) -> Bytes {
    let mut v = Vec::with_capacity(size);
    v.extend((0..size).map(|i| b'a' + (i % 26) as u8));
    Bytes::from(v)
}

/// Counts what one consumer received: which ids, how many times, and whether each
/// payload is the very allocation that was published.
#[derive(Debug)]
pub struct Tally {
    seen: Vec<u64>,
    range: u64,
    payload_ptr: usize,
    payload_len: usize,
    /// Messages received, duplicates included.
    pub received: u64,
    /// Distinct ids received.
    pub distinct: u64,
    /// Ids received more than once by this consumer.
    pub duplicated: u64,
    /// Ids outside `0..range` (corrupted or foreign messages).
    pub out_of_range: u64,
    /// Payloads whose pointer or length changed on the way.
    pub payload_mismatch: u64,
    /// Messages the peer reported as skipped.
    pub lag_reported: u64,
    /// Whether the consumer gave up at the deadline.
    pub timed_out: bool,
    /// When the consumer saw its last message, or noticed the end of the stream.
    pub end: Option<Instant>,
    /// S7 only: what each key's messages looked like to this consumer.
    keys: Option<Box<KeyOrder>>,
    /// S7 only: messages that came after a later message of the same key.
    pub out_of_order: u64,
    /// S7 only (after [`Tally::merge`]): keys whose messages went to more than one
    /// consumer.
    pub split_keys: u64,
}

/// Per-key order as one consumer sees it (S7: every key goes to one member, in order).
#[derive(Debug)]
struct KeyOrder {
    /// Per key, the last id received plus one (0: none yet).
    next: Vec<u64>,
    /// Keys received, as a bitset.
    seen: Vec<u64>,
}

impl Tally {
    /// A tally for ids `0..range`, expecting every payload to be `payload`.
    pub fn new(range: u64, payload: &Bytes) -> Tally {
        let words = usize::try_from(range.div_ceil(64)).expect("id range fits in memory");
        Tally {
            seen: vec![0; words],
            range,
            payload_ptr: payload.as_ptr() as usize,
            payload_len: payload.len(),
            received: 0,
            distinct: 0,
            duplicated: 0,
            out_of_range: 0,
            payload_mismatch: 0,
            lag_reported: 0,
            timed_out: false,
            end: None,
            keys: None,
            out_of_order: 0,
            split_keys: 0,
        }
    }

    /// [`Tally::new`] that also checks S7's keys: each key's messages in increasing ids,
    /// and (once merged) all of them at one consumer.
    pub fn keyed(range: u64, payload: &Bytes) -> Tally {
        let keys = KEYS as usize;
        Tally {
            keys: Some(Box::new(KeyOrder {
                next: vec![0; keys],
                seen: vec![0; keys.div_ceil(64)],
            })),
            ..Tally::new(range, payload)
        }
    }

    /// Records one delivery.
    #[inline]
    pub fn record(&mut self, msg: &Msg) {
        self.received += 1;
        if msg.payload.as_ptr() as usize != self.payload_ptr
            || msg.payload.len() != self.payload_len
        {
            self.payload_mismatch += 1;
        }
        if msg.id >= self.range {
            self.out_of_range += 1;
            return;
        }
        let word = (msg.id / 64) as usize;
        let bit = 1u64 << (msg.id % 64);
        if self.seen[word] & bit != 0 {
            self.duplicated += 1;
        } else {
            self.seen[word] |= bit;
            self.distinct += 1;
            if let Some(k) = &mut self.keys {
                let key = key_of(msg.id) as usize;
                if msg.id < k.next[key] {
                    self.out_of_order += 1;
                } else {
                    k.next[key] = msg.id + 1;
                }
                k.seen[key / 64] |= 1 << (key % 64);
            }
        }
    }

    /// Folds tallies of consumers that share one id space (competing consumers,
    /// partitions): an id seen by two consumers is a duplicate too.
    pub fn merge(tallies: Vec<Tally>) -> Tally {
        let mut iter = tallies.into_iter();
        let mut acc = iter.next().expect("at least one consumer");
        for t in iter {
            acc.received += t.received;
            acc.duplicated += t.duplicated;
            acc.out_of_range += t.out_of_range;
            acc.payload_mismatch += t.payload_mismatch;
            acc.lag_reported += t.lag_reported;
            acc.timed_out |= t.timed_out;
            acc.end = acc.end.max(t.end);
            acc.out_of_order += t.out_of_order;
            if let (Some(a), Some(b)) = (&mut acc.keys, &t.keys) {
                for (a, b) in a.seen.iter_mut().zip(&b.seen) {
                    acc.split_keys += u64::from((*a & *b).count_ones());
                    *a |= *b;
                }
            }
            for (a, b) in acc.seen.iter_mut().zip(&t.seen) {
                acc.duplicated += u64::from((*a & *b).count_ones());
                *a |= *b;
            }
        }
        acc.distinct = acc.seen.iter().map(|w| u64::from(w.count_ones())).sum();
        acc
    }
}

/// Builds an [`Outcome`] from the tallies of a throughput scenario.
///
/// `groups` are the consumer tallies, already merged where consumers share an id space;
/// each group is expected to see every id in `0..per_group` once.
pub fn outcome_from(start: Instant, groups: Vec<Tally>, per_group: u64) -> Outcome {
    let mut out = Outcome::default();
    let mut end = start;
    for t in &groups {
        out.expected += per_group;
        out.delivered += t.distinct;
        out.lost += per_group.saturating_sub(t.distinct);
        out.duplicated += t.duplicated;
        out.out_of_range += t.out_of_range;
        out.out_of_order += t.out_of_order;
        out.split_keys += t.split_keys;
        out.payload_mismatch += t.payload_mismatch;
        out.lag_reported += t.lag_reported;
        out.timed_out |= t.timed_out;
        if let Some(e) = t.end {
            end = end.max(e);
        }
    }
    out.elapsed = end.saturating_duration_since(start);
    let secs = out.elapsed.as_secs_f64();
    out.msgs_per_s = if secs > 0.0 {
        out.delivered as f64 / secs
    } else {
        0.0
    };
    out
}

/// Runs `scenario` on `imp`. `None`: the implementation does not fit the scenario.
pub fn run(scenario: Scenario, imp: Impl, params: &Params) -> Option<Outcome> {
    if !imp.supports(scenario) {
        return None;
    }
    let outcome = run_cell(scenario, imp, params);
    settle_heap();
    outcome
}

/// Hands the allocator's deferred work back now, between runs, so that no run pays for
/// the frees of the one before it.
///
/// glibc keeps small freed blocks in "fast bins" and merges them only when a later
/// request needs it, all at once. A run that frees millions of small blocks at its end
/// (tokio-memq, which retains every message it was given) otherwise leaves that merge
/// to whichever run next asks for a larger block, in the middle of its measurement: the
/// run after tokio-memq, memq's own, showed 26 % of its samples in glibc's
/// `malloc_consolidate` and 15 % in `unlink_chunk`, and fell from 5.2M to 2.3M msgs/s
/// (S7) in about a third of the rounds.
fn settle_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes no pointers and may be called at any time; it only
    // merges and returns free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// One run of `scenario` on `imp`.
fn run_cell(scenario: Scenario, imp: Impl, params: &Params) -> Option<Outcome> {
    match imp {
        Impl::TokioMpsc => drive_async::run(&peers::tokio_mpsc::TokioMpsc, scenario, params),
        Impl::TokioBroadcast => {
            drive_async::run(&peers::tokio_broadcast::TokioBroadcast, scenario, params)
        }
        Impl::AsyncChannel => drive_async::run(&peers::async_chan::AsyncChannel, scenario, params),
        Impl::Flume => drive_async::run(&peers::flume_chan::Flume, scenario, params),
        Impl::Kanal => drive_async::run(&peers::kanal_chan::Kanal, scenario, params),
        Impl::Crossbeam => drive_threads::run(&peers::crossbeam_chan::Crossbeam, scenario, params),
        Impl::TokioMemq => drive_async::run(
            &peers::tokio_memq_topic::TokioMemq::new(params),
            scenario,
            params,
        ),
        // ---- memq: the seam. Only `peers/memq_topic.rs` knows memq's API. ----
        Impl::Memq => peers::memq_topic::run(scenario, params),
        Impl::MemqThreads => peers::memq_topic::run_threads(scenario, params),
        Impl::MemqRelease => peers::memq_topic::run_release(scenario, params),
        Impl::MemqThreadsRelease => peers::memq_topic::run_threads_release(scenario, params),
        Impl::MemqRing => drive_threads::run(&peers::memq_ring::MemqRing, scenario, params),
        Impl::MemqRingAsync => drive_async::run(&peers::memq_ring::MemqRingAsync, scenario, params),
    }
}
