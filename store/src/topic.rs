//! A durable topic: a memq topic with a segment log under each partition.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock, RwLockWriteGuard, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use memq_core::{Overflow, StartAt, Topic, TopicConfig};

use crate::commit::{CommitQueue, Entry, Outcome, Payloads, Request, Turn};
use crate::group::GroupShared;
use crate::{DurableConfig, SegmentLog, StoreError, SyncPolicy};

/// What the in-memory topic holds for each message: what the disk holds too.
#[derive(Clone, Debug)]
pub(crate) struct Stored {
    pub(crate) key: Option<Bytes>,
    pub(crate) payload: Bytes,
    /// Milliseconds since the UNIX epoch.
    pub(crate) timestamp: u64,
}

/// Where a publish of a durable topic landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DurableReceipt {
    /// The partition.
    pub partition: u32,
    /// The offset of the (first) message.
    pub offset: u64,
    /// How many messages were published.
    pub count: u32,
    /// Whether the messages were on the disk when the publish completed: always under
    /// [`SyncPolicy::Always`], never under the others (their records are in the OS page
    /// cache, safe from a crash of the process but not from a power loss, until synced).
    pub durable: bool,
}

/// A snapshot of a durable topic (see [`DurableTopic::stats`]).
#[derive(Clone, Debug)]
pub struct DurableStats {
    /// Each partition's log.
    pub partitions: Vec<DurablePartitionStats>,
    /// The in-memory cache (its `low..high` is what memory holds).
    pub memory: memq_core::TopicStats,
}

/// One partition's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DurablePartitionStats {
    /// The partition.
    pub partition: u32,
    /// The oldest offset kept on disk.
    pub start: u64,
    /// The offset the next message gets.
    pub next: u64,
    /// Bytes of its segment files.
    pub bytes: u64,
    /// Its segment files.
    pub segments: usize,
    /// The offset after the last message known to be on the disk.
    pub synced: u64,
    /// `fdatasync` calls made since it was opened.
    pub syncs: u64,
}

/// Why a publish to a durable topic failed. Every variant hands the message back.
#[derive(Debug)]
#[non_exhaustive]
pub enum DurablePublishError<T> {
    /// The log is at its retention limit and its oldest segment is still being read:
    /// from `try_publish` under `Overflow::Block`, or under `Overflow::Reject`.
    Full(T),
    /// The topic is closed.
    Closed(T),
    /// No such partition.
    InvalidPartition(T),
    /// The disk refused the record (disk full, I/O error, a record too large): nothing
    /// was published. After a failed sync nothing more is published until the topic is
    /// reopened (see [`Durability`](crate::Durability)).
    Store(StoreError, T),
}

impl<T> DurablePublishError<T> {
    /// The same error, with what it hands back changed by `f`.
    pub(crate) fn map<U>(self, f: impl FnOnce(T) -> U) -> DurablePublishError<U> {
        match self {
            Self::Full(v) => DurablePublishError::Full(f(v)),
            Self::Closed(v) => DurablePublishError::Closed(f(v)),
            Self::InvalidPartition(v) => DurablePublishError::InvalidPartition(f(v)),
            Self::Store(e, v) => DurablePublishError::Store(e, f(v)),
        }
    }

    /// The message that was not published.
    pub fn into_inner(self) -> T {
        match self {
            Self::Full(v) | Self::Closed(v) | Self::InvalidPartition(v) | Self::Store(_, v) => v,
        }
    }
}

impl<T> std::fmt::Display for DurablePublishError<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Full(_) => f.write_str("durable topic is at its retention limit"),
            Self::Closed(_) => f.write_str("topic is closed"),
            Self::InvalidPartition(_) => f.write_str("no such partition"),
            Self::Store(e, _) => write!(f, "durable log: {e}"),
        }
    }
}

impl<T: std::fmt::Debug> std::error::Error for DurablePublishError<T> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Store(e, _) => Some(e),
            _ => None,
        }
    }
}

/// Why [`DurableTopic::open`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum OpenError {
    /// The topic's configuration cannot be used for a durable topic, or memq refused it.
    Config(String),
    /// A partition's log could not be opened (see [`SegmentLog::open`]).
    Store(StoreError),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Config(why) => write!(f, "durable topic configuration: {why}"),
            Self::Store(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Store(e) => Some(e),
            Self::Config(_) => None,
        }
    }
}

impl From<StoreError> for OpenError {
    fn from(e: StoreError) -> Self {
        OpenError::Store(e)
    }
}

/// One partition: its log, and what publishers and readers share about it.
#[derive(Debug)]
pub(crate) struct Part {
    /// Appends (and the in-memory publish that follows) take it for writing; reads from
    /// disk for reading.
    pub(crate) log: RwLock<SegmentLog>,
    /// The next offset of each subscriber reading this partition (for the retention
    /// floor under `Block`).
    pub(crate) readers: Mutex<Vec<Arc<AtomicU64>>>,
    /// Async publishers wait here for a subscriber to move on (under `Block`).
    pub(crate) room: Mutex<Vec<Waker>>,
    /// Blocked publishers wait here, with `room` locked.
    pub(crate) room_changed: Condvar,
    /// Blocked publishers waiting, and whether async ones are registered: a reader that
    /// moves on wakes them only then. Each side stores its own fact and then loads the
    /// other's, all `SeqCst`, so that a reader moving while a publisher goes to sleep
    /// either sees the publisher or is seen by its last look at the positions.
    pub(crate) waiting: AtomicUsize,
    pub(crate) wakers_pending: AtomicBool,
    /// The offset after the last message published into the in-memory topic: what
    /// readers may see. Stored (`SeqCst`) after each publish, under the log lock.
    pub(crate) published: AtomicU64,
    /// The oldest offset the log keeps, stored (`SeqCst`) under the log lock whenever
    /// retention deletes: groups move past what is gone without taking the log lock.
    pub(crate) start: AtomicU64,
    /// Publishes waiting for a round of group writes under [`SyncPolicy::Always`].
    pub(crate) commit: Arc<CommitQueue>,
}

impl Part {
    /// The lowest offset a reader of this partition still needs.
    fn floor(&self) -> Option<u64> {
        let readers = self.readers.lock().unwrap_or_else(|p| p.into_inner());
        readers.iter().map(|r| r.load(Ordering::SeqCst)).min()
    }

    /// A reader moved on (its position was stored, `SeqCst`): wakes publishers waiting
    /// for room, if any.
    pub(crate) fn reader_moved(&self) {
        if self.waiting.load(Ordering::SeqCst) > 0 || self.wakers_pending.load(Ordering::SeqCst) {
            let wakers = {
                let mut room = self.room.lock().unwrap_or_else(|p| p.into_inner());
                self.wakers_pending.store(false, Ordering::SeqCst);
                self.room_changed.notify_all();
                std::mem::take(&mut *room)
            };
            for w in wakers {
                w.wake();
            }
        }
    }
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) topic: Topic<Stored>,
    pub(crate) parts: Vec<Part>,
    overflow: Overflow,
    sync: SyncPolicy,
    pub(crate) dir: PathBuf,
    /// Messages the in-memory cache holds per partition.
    capacity: usize,
    /// The next partition of an unkeyed publish.
    next_partition: AtomicU64,
    /// The durable groups open in this process, by name.
    pub(crate) groups: Mutex<HashMap<String, Weak<GroupShared>>>,
    /// Group members waiting for something to claim: a generation bumped by every
    /// publish (while anyone waits), nack, member change and close.
    news: Mutex<u64>,
    news_changed: Condvar,
    news_waiters: AtomicUsize,
    /// Async members waiting for news.
    news_wakers: Mutex<Vec<Waker>>,
    /// How the partitions' logs were opened (the dead-letter logs are opened alike).
    pub(crate) durable: DurableConfig,
    /// The groups' dead-letter logs opened so far, by group name (see
    /// [`crate::dead_letter`]); closed with the topic.
    pub(crate) dead_letter_topics: Mutex<HashMap<String, DurableTopic>>,
}

/// A member's registration to wait for news (see [`Inner::news_ticket`]).
pub(crate) struct NewsTicket<'a> {
    inner: &'a Inner,
    generation: u64,
}

impl Drop for NewsTicket<'_> {
    fn drop(&mut self) {
        self.inner.news_waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Inner {
    /// Registers to wait for news before looking for something to claim. A publish
    /// stores its partition's `published` and then loads the count of waiters; a member
    /// counts itself and then loads `published` (all `SeqCst`): either the publisher
    /// sees the member and bumps the generation, or the member sees the message.
    pub(crate) fn news_ticket(&self) -> NewsTicket<'_> {
        self.news_waiters.fetch_add(1, Ordering::SeqCst);
        let generation = *self.news.lock().unwrap_or_else(|e| e.into_inner());
        NewsTicket {
            inner: self,
            generation,
        }
    }

    /// Sleeps until news after `ticket` was taken, or until `until`.
    pub(crate) fn wait_news(&self, ticket: NewsTicket<'_>, until: Option<std::time::Instant>) {
        let mut g = self.news.lock().unwrap_or_else(|e| e.into_inner());
        while *g == ticket.generation {
            match until {
                None => g = self.news_changed.wait(g).unwrap_or_else(|e| e.into_inner()),
                Some(u) => {
                    let left = u.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    g = self
                        .news_changed
                        .wait_timeout(g, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
    }

    /// Ready once news came after `ticket` was taken; else registers `cx`'s waker.
    pub(crate) fn poll_news(&self, ticket: &NewsTicket<'_>, cx: &mut Context<'_>) -> Poll<()> {
        let g = self.news.lock().unwrap_or_else(|e| e.into_inner());
        if *g != ticket.generation {
            return Poll::Ready(());
        }
        let mut wakers = self.news_wakers.lock().unwrap_or_else(|e| e.into_inner());
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Wakes members waiting for news.
    pub(crate) fn notify_news(&self) {
        let wakers = {
            let mut g = self.news.lock().unwrap_or_else(|e| e.into_inner());
            *g += 1;
            self.news_changed.notify_all();
            std::mem::take(&mut *self.news_wakers.lock().unwrap_or_else(|e| e.into_inner()))
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// After a publish to a partition: wakes waiting members, if any.
    fn published(&self) {
        if self.news_waiters.load(Ordering::SeqCst) > 0 {
            self.notify_news();
        }
    }
}

/// A topic whose messages, offsets and retention live on disk.
///
/// A publish appends its record to the partition's [`SegmentLog`] and then publishes it
/// into the in-memory topic, both under the partition's log lock, so the two hold the
/// same offsets in the same order. The in-memory topic is a cache of the newest
/// `capacity` messages per partition (it evicts, `Overflow::DropOldest`, whatever the
/// user's policy): a reader that falls behind it reads from the log on disk instead (see
/// [`DurableSubscriber`](crate::DurableSubscriber)). The user's overflow policy applies to the log's retention
/// limit: under `Block` a publish waits while the log is at its limit and its oldest
/// segment is still needed by a subscriber; under `Reject` it fails; under `DropOldest`
/// the oldest segment goes.
///
/// Visibility and durability: a record is in the segment file (the OS page cache) before
/// any reader can see it, so a crash of the process loses nothing a reader saw. Under
/// [`SyncPolicy::Always`] a publish completes once its record is on the disk; a reader may
/// see it a little earlier, while the sync runs, so after a power loss (not a process
/// crash) a message a reader saw may be gone, though its publisher never heard success.
///
/// Clones are handles to the same topic; the topic closes when the last is dropped (or
/// on [`DurableTopic::close`]): its subscribers read what was published, then see the
/// end. Each partition's log is synced and closed when the subscribers are gone too.
#[derive(Clone, Debug)]
pub struct DurableTopic {
    // Held for its `Drop`: the last handle closes the topic.
    _handle: Arc<Handle>,
    pub(crate) inner: Arc<Inner>,
}

/// Shared by the [`DurableTopic`] handles only (not by subscribers): the last one gone
/// closes the topic.
#[derive(Debug)]
struct Handle(Arc<Inner>);

impl Drop for Handle {
    fn drop(&mut self) {
        self.0.close();
    }
}

impl Inner {
    fn close(&self) {
        self.topic.close();
        self.notify_news();
        let dead_letters: Vec<DurableTopic> = self
            .dead_letter_topics
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        for t in dead_letters {
            t.close();
        }
        // Publishers waiting for room find the topic closed; the commit threads end.
        for part in &self.parts {
            part.commit.stop();
            let wakers = {
                let mut room = part.room.lock().unwrap_or_else(|e| e.into_inner());
                part.room_changed.notify_all();
                std::mem::take(&mut *room)
            };
            wakers.into_iter().for_each(Waker::wake);
        }
    }
}

impl DurableTopic {
    /// Opens the durable topic in `dir` (created if missing), one segment log per
    /// partition in `dir/partition-N`. Offsets go on where the logs end. The in-memory
    /// cache holds `config`'s capacity per partition; `config`'s overflow policy applies
    /// to the logs' retention limit ([`DurableConfig::retention`]).
    ///
    /// # Errors
    ///
    /// [`OpenError::Config`] for a TTL (use [`Retention::max_age`](crate::Retention)),
    /// release on read or a user router, none of which a durable topic supports yet; or
    /// a partition count that differs from the one the directory was created with.
    /// [`OpenError::Store`] as [`SegmentLog::open`] (a directory already open among them).
    pub fn open(
        dir: impl AsRef<Path>,
        config: TopicConfig,
        durable: DurableConfig,
    ) -> Result<DurableTopic, OpenError> {
        if config.get_ttl().is_some() {
            return Err(OpenError::Config(
                "a TTL is not supported on a durable topic; use Retention::max_age".into(),
            ));
        }
        if config.get_release_on_read() {
            return Err(OpenError::Config(
                "release_on_read is not supported on a durable topic".into(),
            ));
        }
        if config.has_router() {
            return Err(OpenError::Config(
                "a user router is not supported on a durable topic (keys are routed with \
                 memq's key hash)"
                    .into(),
            ));
        }
        let dir = dir.as_ref().to_path_buf();
        let partitions = config.get_partitions();
        check_partition_count(&dir, partitions)?;
        let mut parts = Vec::new();
        for p in 0..partitions {
            let log = SegmentLog::open(dir.join(format!("partition-{p}")), durable)?;
            parts.push(Part {
                log: RwLock::new(log),
                readers: Mutex::new(Vec::new()),
                room: Mutex::new(Vec::new()),
                room_changed: Condvar::new(),
                waiting: AtomicUsize::new(0),
                wakers_pending: AtomicBool::new(false),
                published: AtomicU64::new(0),
                start: AtomicU64::new(0),
                commit: Arc::default(),
            });
        }
        let next: Vec<u64> = parts
            .iter()
            .map(|p| {
                p.log
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .next_offset()
            })
            .collect();
        crate::group::fit_groups_to_log(&dir, &next)?;
        for (part, &n) in parts.iter().zip(&next) {
            part.published.store(n, Ordering::SeqCst);
            let start = part.log.read().unwrap_or_else(|e| e.into_inner()).start();
            part.start.store(start, Ordering::SeqCst);
        }
        let overflow = config.get_overflow();
        let capacity = config.get_capacity();
        let cache = config.overflow(Overflow::DropOldest).next_offsets(next);
        let topic = Topic::new(cache).map_err(|e| OpenError::Config(e.to_string()))?;
        let inner = Arc::new(Inner {
            topic,
            parts,
            overflow,
            sync: durable.sync,
            dir,
            capacity,
            next_partition: AtomicU64::new(0),
            groups: Mutex::new(HashMap::new()),
            news: Mutex::new(0),
            news_changed: Condvar::new(),
            news_waiters: AtomicUsize::new(0),
            news_wakers: Mutex::new(Vec::new()),
            durable,
            dead_letter_topics: Mutex::new(HashMap::new()),
        });
        Ok(DurableTopic {
            _handle: Arc::new(Handle(inner.clone())),
            inner,
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The number of partitions.
    pub fn partitions(&self) -> u32 {
        self.inner.parts.len() as u32
    }

    /// The offset the next message of `partition` gets, or `None` for no such partition.
    pub fn next_offset(&self, partition: u32) -> Option<u64> {
        let part = self.inner.parts.get(partition as usize)?;
        Some(read_log(part).next_offset())
    }

    /// The oldest offset `partition` keeps on disk, or `None` for no such partition.
    pub fn start_offset(&self, partition: u32) -> Option<u64> {
        let part = self.inner.parts.get(partition as usize)?;
        Some(read_log(part).start())
    }

    /// A snapshot of each partition's log, and of the in-memory cache.
    pub fn stats(&self) -> DurableStats {
        let partitions = self
            .inner
            .parts
            .iter()
            .enumerate()
            .map(|(p, part)| {
                let log = read_log(part);
                DurablePartitionStats {
                    partition: p as u32,
                    start: log.start(),
                    next: log.next_offset(),
                    bytes: log.bytes(),
                    segments: log.segment_count(),
                    synced: log.durability().synced(),
                    syncs: log.durability().syncs(),
                }
            })
            .collect();
        DurableStats {
            partitions,
            memory: self.inner.topic.stats(),
        }
    }

    /// Closes the topic: publishes fail with `Closed`; subscribers read what was
    /// published, then see the end.
    pub fn close(&self) {
        self.inner.close();
    }

    /// Whether the topic is closed.
    pub fn is_closed(&self) -> bool {
        self.inner.topic.is_closed()
    }

    /// A subscriber reading every partition from `start`: `Earliest` is the oldest
    /// message kept on disk, however old.
    ///
    /// # Errors
    ///
    /// [`memq_core::Error::OffsetOutOfRange`] for an offset past the end.
    pub fn subscribe(&self, start: StartAt) -> Result<crate::DurableSubscriber, memq_core::Error> {
        crate::DurableSubscriber::attach(&self.inner, start)
    }

    /// Publishes `payload`, waiting for room under `Overflow::Block` and, under
    /// [`SyncPolicy::Always`], for the disk.
    ///
    /// # Errors
    ///
    /// See [`DurablePublishError`]; the payload is handed back.
    pub fn publish_blocking(
        &self,
        payload: impl Into<Bytes>,
    ) -> Result<DurableReceipt, DurablePublishError<Bytes>> {
        let p = self.round_robin();
        self.publish_to_blocking_inner(p, None, payload.into(), RoomWait::Forever)
    }

    /// Publishes `payload` with `key`, to the partition memq's key hash gives it (the
    /// same partition as in an in-memory topic, in C and in Python).
    ///
    /// # Errors
    ///
    /// As [`DurableTopic::publish_blocking`].
    pub fn publish_keyed_blocking(
        &self,
        key: impl Into<Bytes>,
        payload: impl Into<Bytes>,
    ) -> Result<DurableReceipt, DurablePublishError<Bytes>> {
        let key = key.into();
        let p = memq_core::key_partition(&key, self.partitions());
        self.publish_to_blocking_inner(p, Some(key), payload.into(), RoomWait::Forever)
    }

    /// Publishes `payload` to `partition`.
    ///
    /// # Errors
    ///
    /// As [`DurableTopic::publish_blocking`], and `InvalidPartition`.
    pub fn publish_to_blocking(
        &self,
        partition: u32,
        payload: impl Into<Bytes>,
    ) -> Result<DurableReceipt, DurablePublishError<Bytes>> {
        self.publish_to_blocking_inner(partition, None, payload.into(), RoomWait::Forever)
    }

    /// [`DurableTopic::publish_blocking`], waiting at most `timeout` for room under
    /// `Overflow::Block`. The time limit is on the wait for room only: once the record is
    /// written, a publish under [`SyncPolicy::Always`] still waits for the disk (the
    /// message is published by then, and cannot be withdrawn).
    ///
    /// ```
    /// use std::time::Duration;
    /// use memq_core::{StartAt, TopicConfig};
    /// use memq_store::{DurableConfig, DurablePublishError, DurableTopic, Retention, SyncPolicy};
    ///
    /// let dir = tempfile::tempdir()?;
    /// // A log of at most two 4 KiB segments, and a subscriber that reads nothing.
    /// let retention = Retention { max_bytes: Some(8192), ..Retention::default() };
    /// let durable = DurableConfig::new(SyncPolicy::Never).segment_bytes(4096).retention(retention);
    /// let topic = DurableTopic::open(dir.path(), TopicConfig::new(8), durable)?;
    /// let _slow = topic.subscribe(StartAt::Earliest)?;
    /// let full = loop {
    ///     match topic.publish_blocking_timeout(vec![0u8; 500], Duration::from_millis(10)) {
    ///         Ok(_) => continue,
    ///         Err(e) => break e,
    ///     }
    /// };
    /// assert!(matches!(full, DurablePublishError::Full(p) if p.len() == 500));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`DurablePublishError::Full`] if there was no room before the time ran out;
    /// otherwise as [`DurableTopic::publish_blocking`]. The payload is handed back.
    pub fn publish_blocking_timeout(
        &self,
        payload: impl Into<Bytes>,
        timeout: Duration,
    ) -> Result<DurableReceipt, DurablePublishError<Bytes>> {
        let p = self.round_robin();
        self.publish_to_blocking_inner(p, None, payload.into(), RoomWait::within(timeout))
    }

    /// [`DurableTopic::publish_keyed_blocking`], waiting at most `timeout` for room (see
    /// [`DurableTopic::publish_blocking_timeout`]).
    ///
    /// # Errors
    ///
    /// As [`DurableTopic::publish_blocking_timeout`].
    pub fn publish_keyed_blocking_timeout(
        &self,
        key: impl Into<Bytes>,
        payload: impl Into<Bytes>,
        timeout: Duration,
    ) -> Result<DurableReceipt, DurablePublishError<Bytes>> {
        let key = key.into();
        let p = memq_core::key_partition(&key, self.partitions());
        self.publish_to_blocking_inner(p, Some(key), payload.into(), RoomWait::within(timeout))
    }

    /// [`DurableTopic::publish_to_blocking`], waiting at most `timeout` for room (see
    /// [`DurableTopic::publish_blocking_timeout`]).
    ///
    /// # Errors
    ///
    /// As [`DurableTopic::publish_blocking_timeout`], and `InvalidPartition`.
    pub fn publish_to_blocking_timeout(
        &self,
        partition: u32,
        payload: impl Into<Bytes>,
        timeout: Duration,
    ) -> Result<DurableReceipt, DurablePublishError<Bytes>> {
        self.publish_to_blocking_inner(partition, None, payload.into(), RoomWait::within(timeout))
    }

    /// Publishes `payload` if there is room now; never waits for room (under `Block`, a
    /// full log is `Full`), but does wait for the disk under [`SyncPolicy::Always`].
    ///
    /// # Errors
    ///
    /// As [`DurableTopic::publish_blocking`].
    pub fn try_publish(
        &self,
        payload: impl Into<Bytes>,
    ) -> Result<DurableReceipt, DurablePublishError<Bytes>> {
        let p = self.round_robin();
        self.try_publish_inner(p, None, payload.into())
    }

    /// [`DurableTopic::publish_keyed_blocking`] if there is room now: never waits for
    /// room, as [`DurableTopic::try_publish`].
    ///
    /// # Errors
    ///
    /// As [`DurableTopic::publish_blocking`].
    pub fn try_publish_keyed(
        &self,
        key: impl Into<Bytes>,
        payload: impl Into<Bytes>,
    ) -> Result<DurableReceipt, DurablePublishError<Bytes>> {
        let key = key.into();
        let p = memq_core::key_partition(&key, self.partitions());
        self.try_publish_inner(p, Some(key), payload.into())
    }

    /// [`DurableTopic::publish_to_blocking`] if there is room now: never waits for room,
    /// as [`DurableTopic::try_publish`].
    ///
    /// # Errors
    ///
    /// As [`DurableTopic::publish_blocking`], and `InvalidPartition`.
    pub fn try_publish_to(
        &self,
        partition: u32,
        payload: impl Into<Bytes>,
    ) -> Result<DurableReceipt, DurablePublishError<Bytes>> {
        self.try_publish_inner(partition, None, payload.into())
    }

    fn try_publish_inner(
        &self,
        p: u32,
        key: Option<Bytes>,
        payload: Bytes,
    ) -> Result<DurableReceipt, DurablePublishError<Bytes>> {
        let request = Request {
            key,
            payloads: Payloads::One(payload),
        };
        self.publish_blocking_request(p, request, RoomWait::No)
            .map_err(|e| e.map(|r| r.payloads.into_one()))
    }

    /// The async [`DurableTopic::publish_blocking`]: waits for room and for the disk
    /// without blocking the thread. Under [`SyncPolicy::Always`] the partition's commit
    /// thread writes and syncs the record (with every other publish waiting at the same
    /// time) and wakes the task; under the other policies writing the record to the file
    /// is a system call made in the poll.
    ///
    /// Dropped before it completes, the publish either did not happen or happened (and,
    /// under `Always`, is durable) without a receipt.
    ///
    /// # Errors
    ///
    /// As [`DurableTopic::publish_blocking`].
    pub async fn publish(
        &self,
        payload: impl Into<Bytes>,
    ) -> Result<DurableReceipt, DurablePublishError<Bytes>> {
        let p = self.round_robin();
        self.publish_async(p, None, payload.into()).await
    }

    /// The async [`DurableTopic::publish_keyed_blocking`].
    ///
    /// # Errors
    ///
    /// As [`DurableTopic::publish_blocking`].
    pub async fn publish_keyed(
        &self,
        key: impl Into<Bytes>,
        payload: impl Into<Bytes>,
    ) -> Result<DurableReceipt, DurablePublishError<Bytes>> {
        let key = key.into();
        let p = memq_core::key_partition(&key, self.partitions());
        self.publish_async(p, Some(key), payload.into()).await
    }

    /// The async [`DurableTopic::publish_to_blocking`].
    ///
    /// # Errors
    ///
    /// As [`DurableTopic::publish_blocking`], and `InvalidPartition`.
    pub async fn publish_to(
        &self,
        partition: u32,
        payload: impl Into<Bytes>,
    ) -> Result<DurableReceipt, DurablePublishError<Bytes>> {
        self.publish_async(partition, None, payload.into()).await
    }

    fn round_robin(&self) -> u32 {
        match self.partitions() {
            1 => 0,
            n => (self.inner.next_partition.fetch_add(1, Ordering::Relaxed) % n as u64) as u32,
        }
    }

    fn publish_to_blocking_inner(
        &self,
        p: u32,
        key: Option<Bytes>,
        payload: Bytes,
        room: RoomWait,
    ) -> Result<DurableReceipt, DurablePublishError<Bytes>> {
        let request = Request {
            key,
            payloads: Payloads::One(payload),
        };
        self.publish_blocking_request(p, request, room)
            .map_err(|e| e.map(|r| r.payloads.into_one()))
    }

    /// Publishes `request` to partition `p`, waiting for the disk under
    /// [`SyncPolicy::Always`] and, as `room` says, for room under `Overflow::Block`.
    fn publish_blocking_request(
        &self,
        p: u32,
        mut request: Request,
        room: RoomWait,
    ) -> Result<DurableReceipt, DurablePublishError<Request>> {
        loop {
            let outcome = if self.inner.sync == SyncPolicy::Always {
                self.commit_blocking(p, request)
            } else {
                self.inner.write_one(p, request)
            };
            match outcome {
                Err(DurablePublishError::Full(back))
                    if self.inner.overflow == Overflow::Block && room != RoomWait::No =>
                {
                    let until = match room {
                        RoomWait::Until(t) if Instant::now() >= t => {
                            return Err(DurablePublishError::Full(back))
                        }
                        RoomWait::Until(t) => Some(t),
                        _ => None,
                    };
                    request = back;
                    self.wait_for_room_blocking(p, until);
                }
                other => return other.map(|offsets| self.receipt(p, offsets)),
            }
        }
    }

    fn receipt(&self, p: u32, offsets: Range<u64>) -> DurableReceipt {
        DurableReceipt {
            partition: p,
            offset: offsets.start,
            count: u32::try_from(offsets.end - offsets.start).unwrap_or(u32::MAX),
            durable: self.inner.sync == SyncPolicy::Always,
        }
    }

    /// A publish under `Always` from a blocked thread: its own round when it is alone,
    /// else queued for the partition's commit thread (see [`crate::commit`]).
    fn commit_blocking(&self, p: u32, request: Request) -> Outcome {
        let Some(part) = self.inner.parts.get(p as usize) else {
            return Err(DurablePublishError::InvalidPartition(request));
        };
        let entry = Entry::blocking(request);
        match part.commit.enter(&entry, true) {
            Turn::Own => {
                let mut round = part.commit.own_round();
                let request = entry.take_request().expect("not queued, so not taken");
                let outcome = self.inner.write_one(p, request);
                round.syncing();
                self.inner.sync_outcome(p, outcome)
            }
            Turn::Queued { start_thread } => {
                if start_thread {
                    self.start_commit_thread(p);
                }
                entry.wait()
            }
            Turn::Closed => {
                let request = entry.take_request().expect("not queued, so not taken");
                Err(DurablePublishError::Closed(request))
            }
        }
    }

    /// Starts partition `p`'s commit thread; if the system refuses a thread, fails the
    /// publishes queued so far (the next one to queue tries again).
    fn start_commit_thread(&self, p: u32) {
        let part = &self.inner.parts[p as usize];
        let weak = Arc::downgrade(&self.inner);
        let queue = Arc::clone(&part.commit);
        let started = std::thread::Builder::new()
            .name(format!("memq-store-commit-{p}"))
            .spawn(move || run_commit_thread(&weak, &queue, p));
        match started {
            Ok(handle) => part.commit.started(handle),
            Err(e) => self.commit_thread_failed(p, e),
        }
    }

    fn commit_thread_failed(&self, p: u32, e: std::io::Error) {
        let part = &self.inner.parts[p as usize];
        let path = self.inner.dir.join(format!("partition-{p}"));
        let err = StoreError::io("start the commit thread for", path, e);
        for entry in part.commit.thread_failed() {
            if let Some(request) = entry.take_request() {
                entry.complete(Err(DurablePublishError::Store(err.duplicate(), request)));
            }
        }
    }

    async fn publish_async(
        &self,
        p: u32,
        key: Option<Bytes>,
        payload: Bytes,
    ) -> Result<DurableReceipt, DurablePublishError<Bytes>> {
        let mut request = Request {
            key,
            payloads: Payloads::One(payload),
        };
        loop {
            let outcome = if self.inner.sync == SyncPolicy::Always {
                self.commit_async(p, request).await
            } else {
                // Ready at once: give the runtime its thread back now and then.
                crate::coop::yield_sometimes().await;
                self.inner.write_one(p, request)
            };
            match outcome {
                Err(DurablePublishError::Full(back)) if self.inner.overflow == Overflow::Block => {
                    request = back;
                    std::future::poll_fn(|cx| {
                        if self.register_for_room(p, cx) {
                            Poll::Ready(())
                        } else {
                            Poll::Pending
                        }
                    })
                    .await;
                }
                other => {
                    return other
                        .map(|offsets| self.receipt(p, offsets))
                        .map_err(|e| e.map(|r| r.payloads.into_one()))
                }
            }
        }
    }

    /// A publish under `Always` from an async task: always queued for the partition's
    /// commit thread, which writes, syncs and wakes the task. If the task gives up (the
    /// future is dropped) before a round took its request, nothing is published; after,
    /// the message is published, and durable, without a receipt.
    async fn commit_async(&self, p: u32, request: Request) -> Outcome {
        let Some(part) = self.inner.parts.get(p as usize) else {
            return Err(DurablePublishError::InvalidPartition(request));
        };
        /// Cancels the queued publish if the future is dropped first.
        struct Queued(Option<Arc<Entry>>);
        impl Drop for Queued {
            fn drop(&mut self) {
                if let Some(entry) = self.0.take() {
                    entry.cancel();
                }
            }
        }
        let mut request = Some(request);
        let mut queued = Queued(None);
        std::future::poll_fn(|cx| {
            if let Some(entry) = &queued.0 {
                return match entry.poll(cx.waker()) {
                    Some(outcome) => {
                        queued.0 = None;
                        Poll::Ready(outcome)
                    }
                    None => Poll::Pending,
                };
            }
            let request = request.take().expect("polled after completion");
            let entry = Entry::with_waker(request, cx.waker().clone());
            match part.commit.enter(&entry, false) {
                Turn::Queued { start_thread } => {
                    if start_thread {
                        self.start_commit_thread(p);
                    }
                    queued.0 = Some(entry);
                    Poll::Pending
                }
                Turn::Closed | Turn::Own => {
                    let request = entry.take_request().expect("not queued, so not taken");
                    Poll::Ready(Err(DurablePublishError::Closed(request)))
                }
            }
        })
        .await
    }

    /// Publishes `batch` to the next partition in one write, all of it or none, waiting
    /// for room under `Overflow::Block` and, under [`SyncPolicy::Always`], for one sync
    /// of the whole batch.
    ///
    /// # Errors
    ///
    /// As [`DurableTopic::publish_blocking`]; the batch is handed back.
    pub fn publish_batch_blocking(
        &self,
        batch: Vec<Bytes>,
    ) -> Result<DurableReceipt, DurablePublishError<Vec<Bytes>>> {
        let p = self.round_robin();
        self.publish_batch_inner(p, None, batch, RoomWait::Forever)
    }

    /// [`DurableTopic::publish_batch_blocking`] with one key for every message, to the
    /// key's partition.
    ///
    /// # Errors
    ///
    /// As [`DurableTopic::publish_batch_blocking`].
    pub fn publish_batch_keyed_blocking(
        &self,
        key: impl Into<Bytes>,
        batch: Vec<Bytes>,
    ) -> Result<DurableReceipt, DurablePublishError<Vec<Bytes>>> {
        let key = key.into();
        let p = memq_core::key_partition(&key, self.partitions());
        self.publish_batch_inner(p, Some(key), batch, RoomWait::Forever)
    }

    /// [`DurableTopic::publish_batch_blocking`] to `partition`.
    ///
    /// # Errors
    ///
    /// As [`DurableTopic::publish_batch_blocking`], and `InvalidPartition`.
    pub fn publish_batch_to_blocking(
        &self,
        partition: u32,
        batch: Vec<Bytes>,
    ) -> Result<DurableReceipt, DurablePublishError<Vec<Bytes>>> {
        self.publish_batch_inner(partition, None, batch, RoomWait::Forever)
    }

    /// [`DurableTopic::publish_batch_blocking`], waiting at most `timeout` for room (see
    /// [`DurableTopic::publish_blocking_timeout`]).
    ///
    /// # Errors
    ///
    /// As [`DurableTopic::publish_blocking_timeout`]; the batch is handed back.
    pub fn publish_batch_blocking_timeout(
        &self,
        batch: Vec<Bytes>,
        timeout: Duration,
    ) -> Result<DurableReceipt, DurablePublishError<Vec<Bytes>>> {
        let p = self.round_robin();
        self.publish_batch_inner(p, None, batch, RoomWait::within(timeout))
    }

    /// [`DurableTopic::publish_batch_keyed_blocking`], waiting at most `timeout` for room
    /// (see [`DurableTopic::publish_blocking_timeout`]).
    ///
    /// # Errors
    ///
    /// As [`DurableTopic::publish_blocking_timeout`]; the batch is handed back.
    pub fn publish_batch_keyed_blocking_timeout(
        &self,
        key: impl Into<Bytes>,
        batch: Vec<Bytes>,
        timeout: Duration,
    ) -> Result<DurableReceipt, DurablePublishError<Vec<Bytes>>> {
        let key = key.into();
        let p = memq_core::key_partition(&key, self.partitions());
        self.publish_batch_inner(p, Some(key), batch, RoomWait::within(timeout))
    }

    /// [`DurableTopic::publish_batch_to_blocking`], waiting at most `timeout` for room
    /// (see [`DurableTopic::publish_blocking_timeout`]).
    ///
    /// # Errors
    ///
    /// As [`DurableTopic::publish_blocking_timeout`], and `InvalidPartition`.
    pub fn publish_batch_to_blocking_timeout(
        &self,
        partition: u32,
        batch: Vec<Bytes>,
        timeout: Duration,
    ) -> Result<DurableReceipt, DurablePublishError<Vec<Bytes>>> {
        self.publish_batch_inner(partition, None, batch, RoomWait::within(timeout))
    }

    fn publish_batch_inner(
        &self,
        p: u32,
        key: Option<Bytes>,
        batch: Vec<Bytes>,
        room: RoomWait,
    ) -> Result<DurableReceipt, DurablePublishError<Vec<Bytes>>> {
        let request = Request {
            key,
            payloads: Payloads::Many(batch),
        };
        self.publish_blocking_request(p, request, room)
            .map_err(|e| e.map(|r| r.payloads.into_many()))
    }

    /// Sleeps until a reader of `p` moves on (or the topic closes), unless one did since
    /// the failed append. The caller appends again and finds out.
    fn wait_for_room_blocking(&self, p: u32, until: Option<Instant>) {
        let part = &self.inner.parts[p as usize];
        let room = part.room.lock().unwrap_or_else(|e| e.into_inner());
        part.waiting.fetch_add(1, Ordering::SeqCst);
        // With `room` held, a reader that moves from here on must take it to wake us,
        // which it can only do once we sleep.
        if !self.room_now(p) && !self.inner.topic.is_closed() {
            match until {
                None => drop(
                    part.room_changed
                        .wait(room)
                        .unwrap_or_else(|e| e.into_inner()),
                ),
                Some(t) => drop(
                    part.room_changed
                        .wait_timeout(room, t.saturating_duration_since(Instant::now()))
                        .unwrap_or_else(|e| e.into_inner()),
                ),
            }
        }
        part.waiting.fetch_sub(1, Ordering::SeqCst);
    }

    /// Registers `cx`'s waker for room; returns whether there is room already.
    fn register_for_room(&self, p: u32, cx: &mut Context<'_>) -> bool {
        let part = &self.inner.parts[p as usize];
        {
            let mut room = part.room.lock().unwrap_or_else(|e| e.into_inner());
            if !room.iter().any(|w| w.will_wake(cx.waker())) {
                room.push(cx.waker().clone());
            }
            part.wakers_pending.store(true, Ordering::SeqCst);
        }
        self.room_now(p) || self.inner.topic.is_closed()
    }

    /// Whether an append to `p` would find room now (the floor moved past the oldest
    /// segment).
    fn room_now(&self, p: u32) -> bool {
        let part = &self.inner.parts[p as usize];
        let floor = part.floor();
        let log = read_log(part);
        match floor {
            None => true,
            Some(f) => log.oldest_segment_end().is_none_or(|end| end <= f),
        }
    }
}

/// How long a blocking publish waits for room under `Overflow::Block`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RoomWait {
    No,
    Forever,
    Until(Instant),
}

impl RoomWait {
    fn within(timeout: Duration) -> RoomWait {
        // A timeout too long to add to now is as good as forever.
        Instant::now()
            .checked_add(timeout)
            .map_or(RoomWait::Forever, RoomWait::Until)
    }
}

/// Why [`Inner::lock_log`] could not lock a partition's log for an append.
enum LockFail {
    InvalidPartition,
    Closed,
    Store(StoreError),
}

impl LockFail {
    fn error<V>(&self, value: V) -> DurablePublishError<V> {
        match self {
            LockFail::InvalidPartition => DurablePublishError::InvalidPartition(value),
            LockFail::Closed => DurablePublishError::Closed(value),
            LockFail::Store(e) => DurablePublishError::Store(e.duplicate(), value),
        }
    }
}

impl Inner {
    /// What every append does first: finds partition `p`, refuses a closed topic, takes
    /// the log lock, sets the retention floor (under `Block`/`Reject` with a size or count
    /// limit) and applies retention (age limits go as the log grows). Returns the
    /// partition, the lock and the time to stamp the records with.
    fn lock_log(&self, p: u32) -> Result<(&Part, RwLockWriteGuard<'_, SegmentLog>, u64), LockFail> {
        let Some(part) = self.parts.get(p as usize) else {
            return Err(LockFail::InvalidPartition);
        };
        if self.topic.is_closed() {
            return Err(LockFail::Closed);
        }
        let now = now_ms();
        let mut log = write_log(part);
        if self.overflow != Overflow::DropOldest && log.has_size_limits() {
            log.set_floor(part.floor());
        }
        if let Err(e) = log.enforce_retention(now) {
            return Err(LockFail::Store(e));
        }
        Ok((part, log, now))
    }

    /// Writes one publish (see [`Inner::write_group`]).
    fn write_one(&self, p: u32, request: Request) -> Outcome {
        self.write_group(p, vec![request])
            .pop()
            .expect("one outcome for each request")
    }

    /// Appends `requests` to partition `p`'s log in one write, each all or none, and
    /// publishes them into the in-memory topic in order, under the log lock; returns each
    /// one's offsets, or why not. A group that the log refuses as a whole for its size
    /// (the retention limit, a record too large) is appended one request at a time, so
    /// that each gets its own answer; any other failure is every request's.
    fn write_group(&self, p: u32, requests: Vec<Request>) -> Vec<Outcome> {
        let (part, mut log, now) = match self.lock_log(p) {
            Ok(locked) => locked,
            Err(fail) => return requests.into_iter().map(|r| Err(fail.error(r))).collect(),
        };
        let appended = log.append_batch(records(&requests, now));
        let mut offsets: Vec<Result<Range<u64>, StoreError>> = Vec::with_capacity(requests.len());
        match appended {
            Ok(all) => {
                let mut at = all.start;
                for r in &requests {
                    let n = r.payloads.as_slice().len() as u64;
                    offsets.push(Ok(at..at + n));
                    at += n;
                }
            }
            Err(StoreError::Full | StoreError::TooLarge { .. }) if requests.len() > 1 => {
                for r in &requests {
                    offsets.push(log.append_batch(records(std::slice::from_ref(r), now)));
                }
            }
            Err(e) => {
                offsets.extend(requests.iter().skip(1).map(|_| Err(e.duplicate())));
                offsets.insert(0, Err(e));
            }
        }
        part.start.store(log.start(), Ordering::SeqCst);
        // Into the cache, in offset order (the appended requests' offsets follow one
        // another: a failed append appends nothing).
        let mut outcomes = Vec::with_capacity(requests.len());
        let mut cached: Vec<Stored> = Vec::new();
        let mut first = None;
        let mut end = None;
        for (r, o) in requests.into_iter().zip(offsets) {
            match o {
                Ok(range) => {
                    first.get_or_insert(range.start);
                    if !range.is_empty() {
                        end = Some(range.end);
                    }
                    let key = r.key;
                    cached.extend(r.payloads.into_many().into_iter().map(|payload| Stored {
                        key: key.clone(),
                        payload,
                        timestamp: now,
                    }));
                    outcomes.push(Ok(range));
                }
                Err(StoreError::Full) => outcomes.push(Err(DurablePublishError::Full(r))),
                Err(e) => outcomes.push(Err(DurablePublishError::Store(e, r))),
            }
        }
        if let (Some(first), Some(end)) = (first, end) {
            self.cache(p, first, cached);
            part.published.store(end, Ordering::SeqCst);
            drop(log);
            self.published();
        }
        outcomes
    }

    /// Publishes `values`, the records at offsets `first..`, into the in-memory topic
    /// (under the log lock). The cache takes at most its capacity at once; more go in
    /// parts (the cache evicts, and readers behind it read the rest from disk).
    fn cache(&self, p: u32, first: u64, values: Vec<Stored>) {
        if values.len() == 1 {
            let value = values.into_iter().next().expect("one value");
            match self.topic.try_publish_to(p, value) {
                Ok(r) => debug_assert_eq!(r.offset, first, "the cache and the log disagree"),
                // Closed since the check: the record is on disk (it will be read after a
                // restart) but no reader of this process sees it. It is published, durably.
                Err(memq_core::PublishError::Closed(_)) => {}
                // DropOldest never fills, and the partition exists.
                Err(e) => unreachable_publish(&e),
            }
            return;
        }
        let mut values = values.into_iter();
        let mut at = first;
        loop {
            let chunk: Vec<Stored> = values.by_ref().take(self.capacity).collect();
            if chunk.is_empty() {
                return;
            }
            let len = chunk.len() as u64;
            match self.topic.try_publish_batch_to(p, chunk) {
                Ok(r) => debug_assert_eq!(r.offset, at, "the cache and the log disagree"),
                Err(memq_core::PublishError::Closed(_)) => return,
                Err(e) => unreachable_publish_batch(&e),
            }
            at += len;
        }
    }

    /// Under [`SyncPolicy::Always`], waits until what `outcome` appended is on the disk.
    /// The messages are published (readers may have them): a failed sync cannot take
    /// them back, so the error says the disk failed, with nothing handed back.
    fn sync_outcome(&self, p: u32, outcome: Outcome) -> Outcome {
        let range = outcome?;
        if range.is_empty() {
            return Ok(range);
        }
        let d = read_log(&self.parts[p as usize]).durability().clone();
        match d.wait_synced(range.end - 1) {
            Ok(()) => Ok(range),
            Err(e) => Err(DurablePublishError::Store(e, Request::empty())),
        }
    }
}

/// The records of `requests`, stamped `now`, as [`SegmentLog::append_batch`] takes them.
fn records(
    requests: &[Request],
    now: u64,
) -> impl Iterator<Item = (Option<u64>, Option<&[u8]>, &[u8])> {
    requests.iter().flat_map(move |r| {
        r.payloads
            .as_slice()
            .iter()
            .map(move |b| (Some(now), r.key.as_deref(), b.as_ref()))
    })
}

/// Partition `p`'s commit thread (see [`crate::commit`]): rounds of the publishes queued
/// under [`SyncPolicy::Always`], each one write and one sync, until the topic closes.
fn run_commit_thread(inner: &Weak<Inner>, queue: &CommitQueue, p: u32) {
    // Marks the thread gone if it ends by a panic the rounds do not catch, so that the
    // next publisher to queue starts another.
    struct Gone<'a>(&'a CommitQueue);
    impl Drop for Gone<'_> {
        fn drop(&mut self) {
            if std::thread::panicking() {
                self.0.thread_gone();
            }
        }
    }
    let _gone = Gone(queue);
    while let Some(entries) = queue.next_round() {
        let count = entries.len();
        let round = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            commit_round(inner, queue, p, &entries)
        }));
        if round.is_err() {
            // Whatever the round did not answer is answered now: it may or may not have
            // been written (the panic came somewhere in the round).
            for entry in &entries {
                entry.complete_if_pending(|request| {
                    let why = std::io::Error::other(
                        "the commit round panicked; the message may or may not be in the log",
                    );
                    Err(DurablePublishError::Store(
                        StoreError::io("commit", inner_dir(inner, p), why),
                        request.unwrap_or_else(Request::empty),
                    ))
                });
            }
            queue.round_done(count, Duration::ZERO);
        }
    }
}

fn inner_dir(inner: &Weak<Inner>, p: u32) -> PathBuf {
    inner
        .upgrade()
        .map(|i| i.dir.join(format!("partition-{p}")))
        .unwrap_or_default()
}

/// One round of the commit thread: writes the queued publishes in one write, syncs once,
/// and answers each.
fn commit_round(inner: &Weak<Inner>, queue: &CommitQueue, p: u32, entries: &[Arc<Entry>]) {
    let count = entries.len();
    let Some(inner) = inner.upgrade() else {
        // The topic is gone: nothing more is written.
        for entry in entries {
            if let Some(request) = entry.take_request() {
                entry.complete(Err(DurablePublishError::Closed(request)));
            }
        }
        queue.round_done(count, Duration::ZERO);
        return;
    };
    // Requests whose async publisher gave up are not written.
    let (live, requests): (Vec<_>, Vec<_>) = entries
        .iter()
        .filter_map(|e| e.take_request().map(|r| (e, r)))
        .unzip();
    let outcomes = inner.write_group(p, requests);
    let last = outcomes
        .iter()
        .filter_map(|o| o.as_ref().ok())
        .filter(|r| !r.is_empty())
        .map(|r| r.end - 1)
        .max();
    let began = Instant::now();
    let synced = match last {
        Some(last) => {
            let d = read_log(&inner.parts[p as usize]).durability().clone();
            d.wait_synced(last)
        }
        None => Ok(()),
    };
    queue.round_done(count, began.elapsed());
    crate::commit::complete_all(
        live.into_iter()
            .cloned()
            .zip(outcomes)
            .map(|(entry, outcome)| {
                let outcome = match (&synced, outcome) {
                    (Err(e), Ok(range)) if !range.is_empty() => {
                        Err(DurablePublishError::Store(e.duplicate(), Request::empty()))
                    }
                    (_, outcome) => outcome,
                };
                (entry, outcome)
            }),
    );
}

fn unreachable_publish(e: &memq_core::PublishError<Stored>) {
    debug_assert!(false, "in-memory publish of a durable topic failed: {e}");
}

fn unreachable_publish_batch(e: &memq_core::PublishError<Vec<Stored>>) {
    debug_assert!(false, "in-memory publish of a durable topic failed: {e}");
}

pub(crate) fn read_log(part: &Part) -> std::sync::RwLockReadGuard<'_, SegmentLog> {
    part.log.read().unwrap_or_else(|e| e.into_inner())
}

fn write_log(part: &Part) -> RwLockWriteGuard<'_, SegmentLog> {
    part.log.write().unwrap_or_else(|e| e.into_inner())
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Records the partition count in `dir/PARTITIONS` on first open, and refuses another
/// count later (the keys' partitions would change).
fn check_partition_count(dir: &Path, partitions: u32) -> Result<(), OpenError> {
    crate::log::create_dir_durably(dir)?;
    let path = dir.join("PARTITIONS");
    match std::fs::read_to_string(&path) {
        Ok(s) => match s.trim().parse::<u32>() {
            Ok(n) if n == partitions => Ok(()),
            Ok(n) => Err(OpenError::Config(format!(
                "{} holds a topic of {n} partitions, not {partitions}",
                dir.display()
            ))),
            Err(_) => Err(OpenError::Store(StoreError::Format {
                file: path,
                reason: format!("not a partition count: {s:?}"),
            })),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            crate::group::write_atomically(&path, format!("{partitions}\n").as_bytes())?;
            Ok(())
        }
        Err(e) => Err(OpenError::Store(StoreError::io("read", &path, e))),
    }
}
