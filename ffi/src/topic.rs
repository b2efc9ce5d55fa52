//! Topics from C: configuration, creation, publishing (copying and zero-copy), closing and
//! statistics. Reading lives in `reader`, the registry in `broker`.

use core::ffi::{c_char, c_void};
use core::time::Duration;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use memq_core::{
    Clock, Error, Overflow, PublishError, Receipt, StartAt, StdClock, Topic, TopicConfig,
};

use crate::boundary::{
    borrow, bytes, get, guard, guard_void, init_default, into_handle, invalid, name, optional_out,
    out, release, slice,
};
use crate::status::{memq_status, with_detail};
use crate::wait::Wait;

/// A topic's overflow policy: what a full partition does with a new message. Passed to C
/// functions as a `uint32_t`; other values are `MEMQ_STATUS_INVALID_ARGUMENT`.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum memq_overflow {
    /// Publishing waits (or, with `timeout_ms == 0`, returns `MEMQ_STATUS_FULL`) until
    /// every attached reader (subscriber or group) has moved past the oldest message.
    /// Nothing a reader still needs is ever lost. "Full" is about readers: with none
    /// attached, nobody needs the oldest message, and a publish into a full partition
    /// evicts it (counted in `evicted`), as retention does; a subscriber made later at
    /// `MEMQ_START_EARLIEST` starts after it.
    ///
    /// A waiting publisher is woken once readers have freed a batch of slots (capacity
    /// / 16, from 1 to 64; every slot for capacities under 32), so that a publisher
    /// faster than its readers waits once per batch. New publishes use any free slot at
    /// once, and so does a publish with a time limit at its deadline (it leaves its place
    /// in line for one last try): it times out only if there is no room for it then (for
    /// a batch, for the whole batch). A publish with `timeout_ms < 0` can therefore wait for
    /// good while fewer slots than a batch are free, if its readers stop reading with
    /// messages still retained (say, until this publisher's next message arrives): give
    /// such a pipeline a capacity under 32, or publish with a time limit and retry.
    Block = 0,
    /// The oldest message is evicted; a reader that had not read it gets
    /// `MEMQ_STATUS_LAGGED` once.
    DropOldest = 1,
    /// Publishing into a full partition (one whose oldest message an attached reader
    /// still needs) returns `MEMQ_STATUS_FULL` at once. With no reader attached the
    /// oldest message is evicted instead, as for `BLOCK`.
    Reject = 2,
}

impl memq_overflow {
    fn from_c(v: u32) -> Result<Overflow, memq_status> {
        const BLOCK: u32 = memq_overflow::Block as u32;
        const DROP_OLDEST: u32 = memq_overflow::DropOldest as u32;
        const REJECT: u32 = memq_overflow::Reject as u32;
        match v {
            BLOCK => Ok(Overflow::Block),
            DROP_OLDEST => Ok(Overflow::DropOldest),
            REJECT => Ok(Overflow::Reject),
            other => Err(invalid(
                "config->overflow",
                format_args!("{other} is not a memq_overflow value"),
            )),
        }
    }

    fn to_c(o: Overflow) -> u32 {
        match o {
            Overflow::Block => Self::Block as u32,
            Overflow::DropOldest => Self::DropOldest as u32,
            Overflow::Reject => Self::Reject as u32,
            _ => u32::MAX,
        }
    }
}

/// Where a new subscriber, or a new consumer group, starts reading. Passed to C functions
/// as a `uint32_t`; other values are `MEMQ_STATUS_INVALID_ARGUMENT`.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum memq_start {
    /// The oldest retained message (replay).
    Earliest = 0,
    /// The next message to be published.
    Latest = 1,
    /// The offset given alongside (in every partition read). An offset older than the
    /// retained window reads as `MEMQ_STATUS_LAGGED` first; one past the end is
    /// `MEMQ_STATUS_OUT_OF_RANGE`.
    Offset = 2,
}

impl memq_start {
    pub(crate) fn from_c(start: u32, offset: u64) -> Result<StartAt, memq_status> {
        const EARLIEST: u32 = memq_start::Earliest as u32;
        const LATEST: u32 = memq_start::Latest as u32;
        const OFFSET: u32 = memq_start::Offset as u32;
        match start {
            EARLIEST => Ok(StartAt::Earliest),
            LATEST => Ok(StartAt::Latest),
            OFFSET => Ok(StartAt::Offset(offset)),
            other => Err(invalid(
                "start",
                format_args!("{other} is not a memq_start value"),
            )),
        }
    }
}

/// `memq_topic_config.flags`: stamp every message with the time it was published (see
/// `memq_message_timestamp`). Topics with a TTL are always stamped.
pub const MEMQ_TOPIC_TIMESTAMPS: u32 = 1;

/// `memq_topic_config.flags`: release each message as soon as every attached reader has
/// read it, instead of retaining it for replay until capacity or the TTL evicts it. A
/// queue rather than a log: the last reader gets the message without a copy, and a
/// reader that joins later at `MEMQ_START_EARLIEST` starts at the oldest message still in
/// the log (with no reader attached, messages wait for the first one). Messages a reader
/// fetched ahead and was not handed go back to the log when it is freed or seeks (one
/// kept back by `memq_subscriber_recv_into` was handed: see there). Nothing
/// is released while an explicit-ack group is attached. Counted in
/// `memq_topic_stats.released`.
pub const MEMQ_TOPIC_RELEASE_ON_READ: u32 = 2;

/// `memq_topic_config.flags`: run the topic's partitions on memq's lock-free ring instead
/// of the locked log, where the topic allows it: no TTL, no `MEMQ_TOPIC_TIMESTAMPS`, no
/// `MEMQ_TOPIC_RELEASE_ON_READ` (a topic with any of them stays on the locked log, and
/// the flag is not an error). The behaviour is the same on both; the speed differs. The
/// ring is faster where one reader per partition keeps up with the publishers (one
/// publisher and one subscriber: about 1.8 times as fast on a 2-core machine, since each
/// message here is a buffer of its own), slower where several members of a group
/// compete for one partition (see `TopicConfig::ring_engine` in memq-core's docs).
pub const MEMQ_TOPIC_RING_ENGINE: u32 = 4;

/// Every flag this version knows; other bits are `MEMQ_STATUS_INVALID_ARGUMENT`.
const KNOWN_FLAGS: u32 =
    MEMQ_TOPIC_TIMESTAMPS | MEMQ_TOPIC_RELEASE_ON_READ | MEMQ_TOPIC_RING_ENGINE;

/// How a topic is set up. Fill it with `memq_topic_config_init`, then change fields.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct memq_topic_config {
    /// Messages retained per partition, at least 1, reported exactly as given.
    pub capacity: usize,
    /// Number of partitions, at least 1, fixed for the topic's life.
    pub partitions: u32,
    /// A `memq_overflow` value.
    pub overflow: u32,
    /// Messages older than this many milliseconds are skipped by readers and evicted;
    /// 0 keeps messages until capacity evicts them.
    pub ttl_ms: u64,
    /// `MEMQ_TOPIC_*` flags, or 0.
    pub flags: u32,
}

impl Default for memq_topic_config {
    fn default() -> Self {
        Self {
            capacity: 1024,
            partitions: 1,
            overflow: memq_overflow::Block as u32,
            ttl_ms: 0,
            flags: 0,
        }
    }
}

/// A clock for one topic. Every topic's clock has the same epoch (the first time the
/// library needed a clock), so timestamps of all topics are comparable; each topic owns
/// its copy, so nothing stays allocated once the topics are gone.
fn clock() -> Arc<dyn Clock> {
    static EPOCH: OnceLock<StdClock> = OnceLock::new();
    Arc::new(*EPOCH.get_or_init(StdClock::new))
}

impl memq_topic_config {
    pub(crate) fn to_core(self) -> Result<TopicConfig, memq_status> {
        let overflow = memq_overflow::from_c(self.overflow)?;
        if self.flags & !KNOWN_FLAGS != 0 {
            return Err(invalid(
                "config->flags",
                format_args!("unknown flags {:#x}", self.flags & !KNOWN_FLAGS),
            ));
        }
        let mut config = TopicConfig::new(self.capacity)
            .overflow(overflow)
            .partitions(self.partitions)
            .release_on_read(self.flags & MEMQ_TOPIC_RELEASE_ON_READ != 0)
            .ring_engine(self.flags & MEMQ_TOPIC_RING_ENGINE != 0);
        if self.ttl_ms > 0 || self.flags & MEMQ_TOPIC_TIMESTAMPS != 0 {
            config = config.clock(clock());
        }
        if self.ttl_ms > 0 {
            config = config.ttl(Duration::from_millis(self.ttl_ms));
        }
        Ok(config)
    }
}

/// Where a published message landed.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct memq_receipt {
    /// The message's offset in its partition (the first message's, for a batch).
    pub offset: u64,
    /// The partition (0 on a topic with one partition).
    pub partition: u32,
}

impl From<Receipt> for memq_receipt {
    fn from(r: Receipt) -> Self {
        Self {
            offset: r.offset,
            partition: r.partition,
        }
    }
}

/// A borrowed payload: `len` bytes at `data` (`data` may be NULL when `len` is 0).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct memq_slice {
    /// The first byte.
    pub data: *const u8,
    /// How many bytes.
    pub len: usize,
}

/// Releases a payload handed over by a `memq_topic_publish_owned` that returned
/// `MEMQ_STATUS_OK` (a failed one leaves the buffer with its caller): called exactly once with
/// the `user_data`, `data` and `len` given there, from whichever thread lets go of the
/// payload last. It must not call back into memq, and must not throw a C++ exception (or
/// otherwise unwind): one that reaches memq aborts the process. NULL: nothing to release.
///
/// It runs synchronously, on the caller's thread, inside whichever memq call lets go of
/// the payload last: any publish (an eviction, an expired TTL); any receive (an expired
/// TTL, a topic that releases on read); the stats getters and the calls that make a
/// reader (`memq_topic_get_stats`, `memq_subscriber_new`, `memq_consumer_new`, ...), which
/// may apply the TTL first; `memq_delivery_reject`, whose move to a `DROP_OLDEST`
/// dead-letter topic may evict an older dead letter; the calls that remove a topic
/// (`memq_broker_delete_topic`, `memq_broker_free`, when the broker held its last handle);
/// and every `*_free` of a handle that holds it (a topic, subscriber, consumer, message,
/// delivery, dead letter or dead-letter topic). No memq
/// lock is held while it runs, other than the calling handle's own serialisation (so a
/// slow `free_fn` holds up only calls on that handle), but do not call those functions
/// while holding a lock that `free_fn` takes.
pub type memq_free_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, data: *const u8, len: usize)>;

/// A topic: a set of bounded logs (one per partition) of byte messages. Also a publishing
/// handle: the topic closes when `memq_topic_close` is called or when its last handle
/// (every `memq_topic` of it, and its broker entry) is freed.
#[derive(Debug)]
pub struct memq_topic {
    pub(crate) topic: Topic<Bytes>,
}

/// Counters and positions of a topic, summed over its partitions.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct memq_topic_stats {
    /// Capacity per partition.
    pub capacity: usize,
    /// Number of partitions.
    pub partitions: u32,
    /// The `memq_overflow` policy.
    pub overflow: u32,
    /// Whether the topic is closed.
    pub closed: bool,
    /// Messages published.
    pub published: u64,
    /// Deliveries to subscribers and group members.
    pub delivered: u64,
    /// Messages evicted to make room.
    pub evicted: u64,
    /// Messages removed because their TTL ran out.
    pub expired: u64,
    /// Messages retained now.
    pub depth: u64,
    /// Live subscribers.
    pub subscribers: usize,
    /// Consumer groups on the topic.
    pub groups: usize,
    /// Publishers waiting for room.
    pub waiting_publishers: usize,
    /// Messages removed because every attached reader had read them or started past them
    /// (`MEMQ_TOPIC_RELEASE_ON_READ`). `published == depth + evicted + expired + released`.
    pub released: u64,
    /// Messages readers were told they missed: the sum of every `*lagged_out` of a
    /// `MEMQ_STATUS_LAGGED` given to the topic's subscribers and group members (two
    /// subscribers that each miss 5 add 10). Summed over partitions.
    pub lagged: u64,
}

impl memq_topic_stats {
    /// A snapshot of any topic's counters (byte topics and dead-letter topics alike).
    pub(crate) fn of<T>(topic: &Topic<T>) -> Self {
        let s = topic.stats();
        Self {
            capacity: s.capacity,
            partitions: s.partitions.len() as u32,
            overflow: memq_overflow::to_c(s.overflow),
            closed: s.closed,
            published: s.published,
            delivered: s.delivered,
            evicted: s.evicted,
            expired: s.expired,
            depth: s.depth,
            subscribers: s.subscribers,
            groups: s.groups.len(),
            waiting_publishers: s.partitions.iter().map(|p| p.waiting_publishers).sum(),
            released: s.released,
            lagged: s.lagged,
        }
    }
}

/// Counters and positions of one partition.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct memq_partition_stats {
    /// Oldest retained offset.
    pub low: u64,
    /// Next offset to be published.
    pub high: u64,
    /// Messages retained (`high - low`).
    pub depth: u64,
    /// Messages published.
    pub published: u64,
    /// Deliveries to subscribers and group members.
    pub delivered: u64,
    /// Messages evicted to make room.
    pub evicted: u64,
    /// Messages removed because their TTL ran out.
    pub expired: u64,
    /// Subscribers reading this partition.
    pub subscribers: usize,
    /// Publishers waiting for room.
    pub waiting_publishers: usize,
    /// Messages removed because every attached reader had read them or started past them
    /// (`MEMQ_TOPIC_RELEASE_ON_READ`), as in `memq_topic_stats`:
    /// `published == depth + evicted + expired + released`.
    pub released: u64,
    /// Messages readers of this partition were told they missed (as in
    /// `memq_topic_stats`).
    pub lagged: u64,
}

/// Counters of one consumer group.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct memq_group_stats {
    /// Current members.
    pub members: usize,
    /// Messages past the group's committed position, over all partitions: not yet
    /// delivered, and in an explicit-ack group also delivered but not yet settled.
    pub lag: u64,
    /// Messages delivered to the group.
    pub delivered: u64,
    /// Messages the group missed (new messages evicted or expired before it read them):
    /// the sum of the lag counts its members were given.
    pub lagged: u64,
}

/// Fills `config` with the defaults: capacity 1024, one partition, `MEMQ_OVERFLOW_BLOCK`,
/// no TTL, no flags.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if `config` is NULL.
///
/// Thread safety: may be called from any thread.
///
/// # Safety
///
/// `config` is NULL or valid for writing a `memq_topic_config`.
#[no_mangle]
pub unsafe extern "C" fn memq_topic_config_init(config: *mut memq_topic_config) -> memq_status {
    // SAFETY: the caller passes NULL or a pointer valid for writes.
    unsafe { init_default(config, "config") }
}

/// Creates a topic and writes its handle to `*topic_out`; free it with `memq_topic_free`.
///
/// Returns `MEMQ_STATUS_INVALID_ARGUMENT` for a capacity or partition count of 0, an
/// unknown overflow policy or unknown flags; `MEMQ_STATUS_ALLOC_FAILED` if the capacity
/// cannot be allocated; `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: may be called from any thread.
///
/// # Safety
///
/// `config` is NULL or points to a `memq_topic_config`; `topic_out` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_topic_new(
    config: *const memq_topic_config,
    topic_out: *mut *mut memq_topic,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a valid config.
        let config = unsafe { borrow(config, "config") }?;
        let topic_out = out(topic_out, "topic_out")?;
        let topic = Topic::new(config.to_core()?)?;
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { topic_out.write(into_handle(memq_topic { topic })) };
        Ok(())
    })
}

/// Makes another handle to the same topic and writes it to `*topic_out`. Each handle is
/// freed on its own; the topic closes when the last one is freed.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: may be called from any thread, concurrently with any call on `topic`
/// except `memq_topic_free(topic)`.
///
/// # Safety
///
/// `topic` is NULL or a live topic handle; `topic_out` is NULL or valid for writing a
/// pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_topic_clone(
    topic: *const memq_topic,
    topic_out: *mut *mut memq_topic,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let topic = unsafe { borrow(topic, "topic") }?;
        let topic_out = out(topic_out, "topic_out")?;
        let handle = into_handle(memq_topic {
            topic: topic.topic.clone(),
        });
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { topic_out.write(handle) };
        Ok(())
    })
}

/// Frees a topic handle. If it was the topic's last handle the topic closes: readers
/// drain what is retained and then get `MEMQ_STATUS_CLOSED`. Subscribers, consumers and
/// messages stay valid and are freed on their own. NULL does nothing.
///
/// Thread safety: no other call may use this handle during or after this one.
///
/// # Safety
///
/// `topic` is NULL or a live topic handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn memq_topic_free(topic: *mut memq_topic) {
    // SAFETY: the caller passes NULL or a handle from `memq_topic_new`/`_clone`/a broker,
    // and gives it up.
    guard_void(|| unsafe { release(topic) });
}

/// Closes the topic: publishing returns `MEMQ_STATUS_CLOSED` from now on; readers drain
/// what is retained and then get `MEMQ_STATUS_CLOSED`. Every waiting call is woken.
/// Closing a closed topic does nothing.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if `topic` is NULL.
///
/// Thread safety: may be called from any thread, concurrently with any call on `topic`
/// except `memq_topic_free(topic)`.
///
/// # Safety
///
/// `topic` is NULL or a live topic handle.
#[no_mangle]
pub unsafe extern "C" fn memq_topic_close(topic: *const memq_topic) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let topic = unsafe { borrow(topic, "topic") }?;
        topic.topic.close();
        Ok(())
    })
}

/// Writes whether the topic is closed to `*closed_out`.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_topic_close`.
///
/// # Safety
///
/// `topic` is NULL or a live topic handle; `closed_out` is NULL or valid for writing a
/// `bool`.
#[no_mangle]
pub unsafe extern "C" fn memq_topic_is_closed(
    topic: *const memq_topic,
    closed_out: *mut bool,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(["topic", "closed_out"], topic, closed_out, |topic| {
            Ok(topic.topic.is_closed())
        })
    }
}

/// Writes whether the topic runs on the lock-free ring engine to `*ring_out`: it was made
/// with `MEMQ_TOPIC_RING_ENGINE` and none of the settings that keep a topic on the locked
/// log (a TTL, `MEMQ_TOPIC_TIMESTAMPS`, `MEMQ_TOPIC_RELEASE_ON_READ`).
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_topic_close`.
///
/// # Safety
///
/// `topic` is NULL or a live topic handle; `ring_out` is NULL or valid for writing a
/// `bool`.
#[no_mangle]
pub unsafe extern "C" fn memq_topic_is_on_ring(
    topic: *const memq_topic,
    ring_out: *mut bool,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(["topic", "ring_out"], topic, ring_out, |topic| {
            Ok(topic.topic.is_on_ring())
        })
    }
}

/// Where a single message goes.
#[derive(Debug, Clone, Copy)]
enum Route<'a> {
    /// Partitions in turn.
    Next,
    Key(&'a [u8]),
    Partition(u32),
}

fn publish(
    topic: &Topic<Bytes>,
    route: Route<'_>,
    value: Bytes,
    wait: Wait,
) -> Result<Receipt, memq_status> {
    publish_or_hand_back(topic, route, value, wait).map_err(|(status, _)| status)
}

/// [`publish`], handing the message back with the status if it was not published.
fn publish_or_hand_back(
    topic: &Topic<Bytes>,
    route: Route<'_>,
    value: Bytes,
    wait: Wait,
) -> Result<Receipt, (memq_status, Bytes)> {
    let result = match (wait, route) {
        (Wait::Try, Route::Next) => topic.try_publish(value),
        (Wait::Try, Route::Key(key)) => topic.try_publish_keyed(key, value),
        (Wait::Try, Route::Partition(p)) => topic.try_publish_to(p, value),
        (Wait::Forever, Route::Next) => topic.publish_blocking(value),
        (Wait::Forever, Route::Key(key)) => topic.publish_keyed_blocking(key, value),
        (Wait::Forever, Route::Partition(p)) => topic.publish_to_blocking(p, value),
        // The core's timed publishes make one last try at the deadline, so a slot freed
        // while this one waited is not missed.
        (Wait::For(d), Route::Next) => topic.publish_blocking_timeout(value, d),
        (Wait::For(d), Route::Key(key)) => topic.publish_keyed_blocking_timeout(key, value, d),
        (Wait::For(d), Route::Partition(p)) => topic.publish_to_blocking_timeout(p, value, d),
    };
    result.map_err(|e| (waited_status(topic, wait, &e), e.into_inner()))
}

/// The status of a failed publish: a full `BLOCK` partition after a wait with a time
/// limit is `MEMQ_STATUS_TIMEOUT` (the core says `Full`: no room in time).
fn waited_status<V>(topic: &Topic<Bytes>, wait: Wait, e: &PublishError<V>) -> memq_status {
    match (e, wait) {
        (PublishError::Full(_), Wait::For(_)) if topic.overflow() == Overflow::Block => {
            memq_status::Timeout
        }
        (e, _) => e.into(),
    }
}

fn publish_batch(
    topic: &Topic<Bytes>,
    route: Route<'_>,
    values: Vec<Bytes>,
    wait: Wait,
) -> Result<Receipt, memq_status> {
    if values.len() > topic.capacity() {
        // It could never fit: `Full`, as the core says (without waiting for room that
        // cannot come).
        return Err(with_detail(
            memq_status::Full,
            format_args!(
                "batch of {} messages can never fit in a partition of capacity {}",
                values.len(),
                topic.capacity()
            ),
        ));
    }
    let result = match (wait, route) {
        (Wait::Try, Route::Next) => topic.try_publish_batch(values),
        (Wait::Try, Route::Key(key)) => topic.try_publish_batch_keyed(key, values),
        (Wait::Try, Route::Partition(p)) => topic.try_publish_batch_to(p, values),
        (Wait::Forever, Route::Next) => topic.publish_batch_blocking(values),
        (Wait::Forever, Route::Key(key)) => topic.publish_batch_keyed_blocking(key, values),
        (Wait::Forever, Route::Partition(p)) => topic.publish_batch_to_blocking(p, values),
        (Wait::For(d), Route::Next) => topic.publish_batch_blocking_timeout(values, d),
        (Wait::For(d), Route::Key(key)) => {
            topic.publish_batch_keyed_blocking_timeout(key, values, d)
        }
        (Wait::For(d), Route::Partition(p)) => {
            topic.publish_batch_to_blocking_timeout(p, values, d)
        }
    };
    result.map_err(|e| waited_status(topic, wait, &e))
}

/// Where a message or a batch goes, as the caller of an export gave it.
#[derive(Debug, Clone, Copy)]
enum RawRoute {
    Next,
    /// The key's bytes: NULL or readable for the length.
    Key(*const u8, usize),
    Partition(u32),
}

/// The body the copying publish exports share: borrows the topic, reads the route's key,
/// runs `publish_with` (which copies the caller's data and publishes it), and writes the
/// receipt, all under [`guard`]. The topic and the key are checked before the data, so
/// every export reports the same error for the same bad argument.
///
/// # Safety
///
/// `topic` is NULL or a live topic handle; a [`RawRoute::Key`]'s pointer is NULL or points
/// to that many readable bytes; `receipt_out` is NULL or valid for writing a
/// `memq_receipt`; `publish_with` may be run once (it reads the caller's data).
unsafe fn publish_export(
    topic: *const memq_topic,
    route: RawRoute,
    receipt_out: *mut memq_receipt,
    publish_with: impl FnOnce(&Topic<Bytes>, Route<'_>) -> Result<Receipt, memq_status>,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let topic = unsafe { borrow(topic, "topic") }?;
        let route = match route {
            RawRoute::Next => Route::Next,
            // SAFETY: the caller passes NULL or `len` readable bytes.
            RawRoute::Key(key, len) => Route::Key(unsafe { bytes(key, len, "key") }?),
            RawRoute::Partition(p) => Route::Partition(p),
        };
        let receipt = publish_with(&topic.topic, route)?;
        // SAFETY: the caller passes NULL or a pointer valid for writes.
        unsafe { give_receipt(receipt_out, receipt) };
        Ok(())
    })
}

/// The body of `memq_topic_publish`, `_keyed` and `_to`: publishes a copy of `len` bytes
/// at `data` along `route`.
///
/// # Safety
///
/// As [`publish_export`]; `data` is NULL or points to `len` readable bytes.
unsafe fn publish_copy(
    topic: *const memq_topic,
    route: RawRoute,
    data: *const u8,
    len: usize,
    timeout_ms: i64,
    receipt_out: *mut memq_receipt,
) -> memq_status {
    // SAFETY: this function's contract is `publish_export`'s, and `data` is NULL or
    // readable for `len` bytes.
    unsafe {
        publish_export(topic, route, receipt_out, |topic, route| {
            let value = Bytes::copy_from_slice(bytes(data, len, "data")?);
            publish(topic, route, value, Wait::from_ms(timeout_ms))
        })
    }
}

/// The body of `memq_topic_publish_batch`, `_batch_to` and `_batch_keyed`: publishes
/// copies of `count` items along `route`.
///
/// # Safety
///
/// As [`publish_export`]; `items` is NULL or points to `count` `memq_slice`s, each of
/// whose `data` is NULL or points to `len` readable bytes.
unsafe fn publish_batch_copy(
    topic: *const memq_topic,
    route: RawRoute,
    items: *const memq_slice,
    count: usize,
    timeout_ms: i64,
    receipt_out: *mut memq_receipt,
) -> memq_status {
    // SAFETY: this function's contract is `publish_export`'s, and the items are valid.
    unsafe {
        publish_export(topic, route, receipt_out, |topic, route| {
            let values = copy_batch(items, count)?;
            publish_batch(topic, route, values, Wait::from_ms(timeout_ms))
        })
    }
}

/// Writes a receipt if the caller asked for one.
///
/// # Safety
///
/// `receipt_out` is NULL or valid for writing a `memq_receipt`.
unsafe fn give_receipt(receipt_out: *mut memq_receipt, receipt: Receipt) {
    if let Some(receipt_out) = optional_out(receipt_out) {
        // SAFETY: non-NULL, and valid for writes by this function's contract.
        unsafe { receipt_out.write(receipt.into()) };
    }
}

/// Publishes a copy of `len` bytes at `data` to the next partition in turn, waiting for
/// room up to `timeout_ms` on a full `MEMQ_OVERFLOW_BLOCK` topic (0: do not wait,
/// negative: wait as long as it takes). On success, writes where it landed to
/// `*receipt_out` unless `receipt_out` is NULL.
///
/// Returns `MEMQ_STATUS_FULL` (no room now, or a full `REJECT` topic),
/// `MEMQ_STATUS_TIMEOUT` (no room in time), `MEMQ_STATUS_CLOSED`, or
/// `MEMQ_STATUS_NULL_POINTER` (`topic` NULL, or `data` NULL with `len` > 0). The caller
/// keeps `data` and may reuse it at once.
///
/// Thread safety: may be called from any number of threads at once on the same topic,
/// concurrently with any call on it except `memq_topic_free(topic)`.
///
/// # Safety
///
/// `topic` is NULL or a live topic handle; `data` is NULL or points to `len` readable
/// bytes; `receipt_out` is NULL or valid for writing a `memq_receipt`.
#[no_mangle]
pub unsafe extern "C" fn memq_topic_publish(
    topic: *const memq_topic,
    data: *const u8,
    len: usize,
    timeout_ms: i64,
    receipt_out: *mut memq_receipt,
) -> memq_status {
    // SAFETY: passed on from this function's caller, under the same contract.
    unsafe { publish_copy(topic, RawRoute::Next, data, len, timeout_ms, receipt_out) }
}

/// Publishes a copy of the message to the partition `key` routes to: 64-bit FNV-1a of the
/// key's bytes modulo the partition count (see `memq_key_partition`), the same in every
/// process and binding. Messages with the same key keep their order. `key` may be NULL
/// when `key_len` is 0 (the empty key).
///
/// Returns as `memq_topic_publish`.
///
/// Thread safety: as `memq_topic_publish`.
///
/// # Safety
///
/// As `memq_topic_publish`; `key` is NULL or points to `key_len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn memq_topic_publish_keyed(
    topic: *const memq_topic,
    key: *const u8,
    key_len: usize,
    data: *const u8,
    len: usize,
    timeout_ms: i64,
    receipt_out: *mut memq_receipt,
) -> memq_status {
    // SAFETY: passed on from this function's caller, under the same contract.
    unsafe {
        publish_copy(
            topic,
            RawRoute::Key(key, key_len),
            data,
            len,
            timeout_ms,
            receipt_out,
        )
    }
}

/// Publishes a copy of the message to `partition`.
///
/// Returns `MEMQ_STATUS_OUT_OF_RANGE` if the topic has no such partition; otherwise as
/// `memq_topic_publish`.
///
/// Thread safety: as `memq_topic_publish`.
///
/// # Safety
///
/// As `memq_topic_publish`.
#[no_mangle]
pub unsafe extern "C" fn memq_topic_publish_to(
    topic: *const memq_topic,
    partition: u32,
    data: *const u8,
    len: usize,
    timeout_ms: i64,
    receipt_out: *mut memq_receipt,
) -> memq_status {
    // SAFETY: passed on from this function's caller, under the same contract.
    unsafe {
        publish_copy(
            topic,
            RawRoute::Partition(partition),
            data,
            len,
            timeout_ms,
            receipt_out,
        )
    }
}

/// A caller's buffer handed over to memq without a copy. `free_fn` runs when it drops,
/// unless the buffer went back to the caller.
struct ForeignBuffer {
    data: *const u8,
    len: usize,
    user_data: *mut c_void,
    free_fn: memq_free_fn,
    /// Set when a publish fails and hands the buffer back: it is the caller's again, and
    /// not released. `None` without a `free_fn`.
    with_caller: Option<Arc<AtomicBool>>,
}

// SAFETY: the caller of `memq_topic_publish_owned` promises that the buffer may be read
// from any thread and released (by `free_fn`) from any thread, and does not change it
// while memq holds it; the pointers are only read through `as_ref` and passed to `free_fn`.
unsafe impl Send for ForeignBuffer {}
// SAFETY: shared access only reads the immutable buffer (see `Send` above).
unsafe impl Sync for ForeignBuffer {}

impl AsRef<[u8]> for ForeignBuffer {
    fn as_ref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        debug_assert!(!self.data.is_null() && self.len <= isize::MAX as usize);
        // SAFETY: non-NULL and at most isize::MAX bytes, checked in
        // `memq_topic_publish_owned` before the buffer is made; the caller guarantees the bytes stay valid and
        // unchanged until `free_fn` runs, which is after the last borrow ends.
        unsafe { core::slice::from_raw_parts(self.data, self.len) }
    }
}

impl Drop for ForeignBuffer {
    fn drop(&mut self) {
        if let Some(with_caller) = &self.with_caller {
            if with_caller.load(Ordering::Acquire) {
                return; // the caller keeps it: not ours to release
            }
        }
        if let Some(free_fn) = self.free_fn {
            // SAFETY: `free_fn` is the caller's release function for exactly these
            // arguments; `Drop` runs once, so it is called exactly once.
            unsafe { free_fn(self.user_data, self.data, self.len) };
        }
    }
}

/// Publishes `len` bytes at `data` without copying them: memq keeps the buffer and every
/// reader borrows it. When the last reference goes (the message evicted from the log;
/// every `memq_message`, `memq_delivery` and `memq_dead_letter` of it freed; and, once it
/// was dead-lettered, the dead-letter topic's log letting go of it too: it is not copied
/// there), memq calls `free_fn(user_data, data, len)` exactly once, from whichever thread
/// lets go last (see `memq_free_fn` for which calls may run it). `free_fn` may be NULL for a buffer
/// that needs no release (static data).
///
/// Ownership passes to memq only with `MEMQ_STATUS_OK`. With any other status (a full
/// partition, a timeout, a closed topic, a bad argument) the message was not published,
/// `free_fn` is not called for it, and the buffer is the caller's again: retry, publish
/// it elsewhere or release it. The one exception is `MEMQ_STATUS_PANIC` (a bug in memq),
/// after which `free_fn` may or may not run.
///
/// Returns as `memq_topic_publish`.
///
/// Thread safety: as `memq_topic_publish`; `free_fn` may run on any thread.
///
/// # Safety
///
/// `topic` is NULL or a live topic handle; `data` is NULL or points to `len` bytes that
/// stay readable and unchanged until `free_fn` is called (or forever, without `free_fn`),
/// or, if the call returns a status other than `MEMQ_STATUS_OK`, until it returns;
/// `free_fn`, if not NULL, may be called from any thread with these arguments, and must
/// not call back into memq; `receipt_out` is NULL or valid for writing a `memq_receipt`.
#[no_mangle]
pub unsafe extern "C" fn memq_topic_publish_owned(
    topic: *const memq_topic,
    data: *const u8,
    len: usize,
    free_fn: memq_free_fn,
    user_data: *mut c_void,
    timeout_ms: i64,
    receipt_out: *mut memq_receipt,
) -> memq_status {
    guard(move || {
        // SAFETY: the caller passes NULL or a live handle.
        let topic = unsafe { borrow(topic, "topic") }?;
        // SAFETY: the caller passes NULL or `len` readable bytes; this only validates.
        unsafe { bytes(data, len, "data") }?;
        // The caller's until the topic has it; memq's from then on (it may be read, and
        // let go of, on other threads at once), and the caller's again if it comes back.
        let with_caller = free_fn.map(|_| Arc::new(AtomicBool::new(false)));
        let buffer = ForeignBuffer {
            data,
            len,
            user_data,
            free_fn,
            with_caller: with_caller.clone(),
        };
        let value = Bytes::from_owner(buffer);
        let receipt =
            publish_or_hand_back(&topic.topic, Route::Next, value, Wait::from_ms(timeout_ms))
                .map_err(|(status, back)| {
                    if let Some(with_caller) = &with_caller {
                        with_caller.store(true, Ordering::Release);
                    }
                    drop(back);
                    status
                })?;
        // SAFETY: the caller passes NULL or a pointer valid for writes.
        unsafe { give_receipt(receipt_out, receipt) };
        Ok(())
    })
}

/// Copies `items` into owned messages.
///
/// # Safety
///
/// As [`slice`] and [`bytes`] for the array and each item.
unsafe fn copy_batch(items: *const memq_slice, count: usize) -> Result<Vec<Bytes>, memq_status> {
    // SAFETY: the caller passes NULL or `count` readable items.
    let items = unsafe { slice(items, count, "items") }?;
    items
        .iter()
        .map(|item| {
            // SAFETY: the caller passes NULL or `len` readable bytes in each item.
            let payload = unsafe { bytes(item.data, item.len, "items[i].data") }?;
            Ok(Bytes::copy_from_slice(payload))
        })
        .collect()
}

/// Publishes copies of `count` messages (`items[0]` .. `items[count - 1]`) with
/// contiguous offsets in one partition (the next in turn), all or none: with
/// `MEMQ_OVERFLOW_BLOCK` it waits up to `timeout_ms` until the whole batch fits. On
/// success `*receipt_out` (unless NULL) gets the first message's receipt. `items` may be
/// NULL when `count` is 0: an empty batch publishes nothing and succeeds at once (its
/// receipt's offset is the partition's next), as in Rust.
///
/// Returns `MEMQ_STATUS_FULL` at once if `count` exceeds the capacity (it could never
/// fit, however long it waited: Rust's `PublishError::Full`), `MEMQ_STATUS_NULL_POINTER` if `items` or an item's data is NULL with a nonzero
/// length; otherwise as `memq_topic_publish`.
///
/// Thread safety: as `memq_topic_publish`.
///
/// # Safety
///
/// `topic` is NULL or a live topic handle; `items` is NULL or points to `count`
/// `memq_slice`s, each of whose `data` is NULL or points to `len` readable bytes;
/// `receipt_out` is NULL or valid for writing a `memq_receipt`.
#[no_mangle]
pub unsafe extern "C" fn memq_topic_publish_batch(
    topic: *const memq_topic,
    items: *const memq_slice,
    count: usize,
    timeout_ms: i64,
    receipt_out: *mut memq_receipt,
) -> memq_status {
    // SAFETY: passed on from this function's caller, under the same contract.
    unsafe { publish_batch_copy(topic, RawRoute::Next, items, count, timeout_ms, receipt_out) }
}

/// `memq_topic_publish_batch` to an explicit partition.
///
/// Returns `MEMQ_STATUS_OUT_OF_RANGE` if the topic has no such partition; otherwise as
/// `memq_topic_publish_batch`.
///
/// Thread safety: as `memq_topic_publish`.
///
/// # Safety
///
/// As `memq_topic_publish_batch`.
#[no_mangle]
pub unsafe extern "C" fn memq_topic_publish_batch_to(
    topic: *const memq_topic,
    partition: u32,
    items: *const memq_slice,
    count: usize,
    timeout_ms: i64,
    receipt_out: *mut memq_receipt,
) -> memq_status {
    // SAFETY: passed on from this function's caller, under the same contract.
    unsafe {
        publish_batch_copy(
            topic,
            RawRoute::Partition(partition),
            items,
            count,
            timeout_ms,
            receipt_out,
        )
    }
}

/// `memq_topic_publish_batch` to the partition `key` routes to (as
/// `memq_topic_publish_keyed`): every message of the batch goes there under that one key,
/// in order, with contiguous offsets, or none does. `key` may be NULL when `key_len` is 0
/// (the empty key).
///
/// Returns as `memq_topic_publish_batch`.
///
/// Thread safety: as `memq_topic_publish`.
///
/// # Safety
///
/// As `memq_topic_publish_batch`; `key` is NULL or points to `key_len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn memq_topic_publish_batch_keyed(
    topic: *const memq_topic,
    key: *const u8,
    key_len: usize,
    items: *const memq_slice,
    count: usize,
    timeout_ms: i64,
    receipt_out: *mut memq_receipt,
) -> memq_status {
    // SAFETY: passed on from this function's caller, under the same contract.
    unsafe {
        publish_batch_copy(
            topic,
            RawRoute::Key(key, key_len),
            items,
            count,
            timeout_ms,
            receipt_out,
        )
    }
}

/// Writes the partition `key` is routed to on a topic with `partitions` partitions to
/// `*partition_out`: 64-bit FNV-1a over the key's bytes (offset basis
/// 0xcbf29ce484222325, prime 0x100000001b3) modulo `partitions`. Stable across versions,
/// platforms and language bindings.
///
/// Returns `MEMQ_STATUS_INVALID_ARGUMENT` if `partitions` is 0,
/// `MEMQ_STATUS_NULL_POINTER` if `partition_out` is NULL or `key` is NULL with
/// `key_len` > 0.
///
/// Thread safety: may be called from any thread.
///
/// # Safety
///
/// `key` is NULL or points to `key_len` readable bytes; `partition_out` is NULL or valid
/// for writing a `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_key_partition(
    key: *const u8,
    key_len: usize,
    partitions: u32,
    partition_out: *mut u32,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or `key_len` readable bytes.
        let key = unsafe { bytes(key, key_len, "key") }?;
        let partition_out = out(partition_out, "partition_out")?;
        if partitions == 0 {
            return Err(Error::ZeroPartitions.into());
        }
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { partition_out.write(memq_core::key_partition(key, partitions)) };
        Ok(())
    })
}

/// Writes a snapshot of the topic's counters to `*stats_out`.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_topic_close`.
///
/// # Safety
///
/// `topic` is NULL or a live topic handle; `stats_out` is NULL or valid for writing a
/// `memq_topic_stats`.
#[no_mangle]
pub unsafe extern "C" fn memq_topic_get_stats(
    topic: *const memq_topic,
    stats_out: *mut memq_topic_stats,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(["topic", "stats_out"], topic, stats_out, |topic| {
            Ok(memq_topic_stats::of(&topic.topic))
        })
    }
}

/// Writes a snapshot of one partition's counters to `*stats_out`.
///
/// Returns `MEMQ_STATUS_OUT_OF_RANGE` if there is no such partition,
/// `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_topic_close`.
///
/// # Safety
///
/// `topic` is NULL or a live topic handle; `stats_out` is NULL or valid for writing a
/// `memq_partition_stats`.
#[no_mangle]
pub unsafe extern "C" fn memq_topic_get_partition_stats(
    topic: *const memq_topic,
    partition: u32,
    stats_out: *mut memq_partition_stats,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let topic = unsafe { borrow(topic, "topic") }?;
        let stats_out = out(stats_out, "stats_out")?;
        if partition >= topic.topic.partitions() {
            return Err(Error::PartitionOutOfRange {
                partition,
                partitions: topic.topic.partitions(),
            }
            .into());
        }
        let s = topic.topic.stats();
        let p = s
            .partitions
            .iter()
            .find(|p| p.partition == partition)
            .ok_or(memq_status::OutOfRange)?;
        let stats = memq_partition_stats {
            low: p.low,
            high: p.high,
            depth: p.depth,
            published: p.published,
            delivered: p.delivered,
            evicted: p.evicted,
            expired: p.expired,
            subscribers: p.subscribers,
            waiting_publishers: p.waiting_publishers,
            released: p.released,
            lagged: p.lagged,
        };
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { stats_out.write(stats) };
        Ok(())
    })
}

/// Writes a snapshot of the counters of the consumer group `group` to `*stats_out`.
///
/// Returns `MEMQ_STATUS_UNKNOWN_GROUP` if the topic has no such group,
/// `MEMQ_STATUS_INVALID_ARGUMENT` if `group` is not UTF-8, `MEMQ_STATUS_NULL_POINTER` if
/// a pointer is NULL.
///
/// Thread safety: as `memq_topic_close`.
///
/// # Safety
///
/// `topic` is NULL or a live topic handle; `group` is NULL or a NUL-terminated string;
/// `stats_out` is NULL or valid for writing a `memq_group_stats`.
#[no_mangle]
pub unsafe extern "C" fn memq_topic_get_group_stats(
    topic: *const memq_topic,
    group: *const c_char,
    stats_out: *mut memq_group_stats,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let topic = unsafe { borrow(topic, "topic") }?;
        // SAFETY: the caller passes NULL or a NUL-terminated string.
        let group = unsafe { name(group, "group") }?;
        let stats_out = out(stats_out, "stats_out")?;
        let s = topic.topic.stats();
        let g = s
            .groups
            .iter()
            .find(|g| g.name == group)
            .ok_or_else(|| memq_status::from(Error::UnknownGroup(group.into())))?;
        let stats = memq_group_stats {
            members: g.members,
            lag: g.lag,
            delivered: g.delivered,
            lagged: g.lagged,
        };
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { stats_out.write(stats) };
        Ok(())
    })
}
