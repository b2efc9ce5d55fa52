//! A subscriber of a durable topic: reads from memory while it keeps up, from disk when
//! it falls behind the in-memory cache or starts before it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use memq_core::{Message, RecvError, RecvTimeoutError, StartAt, Subscriber, TryRecvError};

use crate::topic::{read_log, Inner, Stored};
use crate::StoreError;

/// Records read from disk at a time.
const DISK_BATCH: usize = 256;

/// A message of a durable topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurableMessage {
    /// Its partition.
    pub partition: u32,
    /// Its offset in the partition.
    pub offset: u64,
    /// When it was published, in milliseconds since the UNIX epoch.
    pub timestamp: u64,
    /// The key it was published with, if any.
    pub key: Option<Bytes>,
    /// Its bytes.
    pub payload: Bytes,
}

/// Why a receive from a durable topic returned without a message.
#[derive(Debug)]
#[non_exhaustive]
pub enum DurableRecvError {
    /// Nothing to read now (only from `try_recv`).
    Empty,
    /// Nothing arrived in time (only from `recv_blocking_timeout`).
    Timeout,
    /// Retention deleted this many messages before the subscriber read them (under
    /// `Overflow::DropOldest`, or for a start before the oldest kept). The next receive
    /// goes on with the oldest message kept.
    Lagged(u64),
    /// The topic is closed and everything was read.
    Closed,
    /// Reading the log failed (see [`StoreError`]); the subscriber stays where it was
    /// and the next receive tries again.
    Store(StoreError),
}

impl std::fmt::Display for DurableRecvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Empty => f.write_str("nothing to read now"),
            Self::Timeout => f.write_str("nothing arrived in time"),
            Self::Lagged(n) => write!(f, "retention deleted {n} messages before they were read"),
            Self::Closed => f.write_str("topic is closed and drained"),
            Self::Store(e) => write!(f, "durable log: {e}"),
        }
    }
}

impl std::error::Error for DurableRecvError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Store(e) => Some(e),
            _ => None,
        }
    }
}

/// What the subscriber hands over next, in the order it learned of it: a range of a
/// partition to read from disk, or a message the in-memory topic gave it (behind such a
/// range of its partition). Per partition the order is the offsets' order.
#[derive(Debug)]
enum Next {
    Disk { partition: u32, from: u64, to: u64 },
    Memory(Message<Stored>),
}

/// A subscriber of a [`DurableTopic`](crate::DurableTopic), reading every partition. It reads the in-memory
/// topic while it keeps up, and the log on disk for what the memory no longer (or never)
/// held: a subscriber can replay everything retention kept, however much that is.
///
/// Under `Overflow::Block` its position holds back the log's retention (publishers wait
/// rather than delete what it has not read); dropping it lets go.
#[derive(Debug)]
pub struct DurableSubscriber {
    /// Not a [`DurableTopic`](crate::DurableTopic) handle: a subscriber does not keep the topic open.
    topic: Arc<Inner>,
    sub: Subscriber<Stored>,
    /// Per partition: the next offset handed to the user...
    next: Vec<u64>,
    /// ...shared with the partition for its retention floor...
    positions: Vec<Arc<AtomicU64>>,
    /// ...and the next offset expected from the in-memory subscriber.
    expect: Vec<u64>,
    queue: VecDeque<Next>,
    ready: VecDeque<DurableMessage>,
}

impl DurableSubscriber {
    pub(crate) fn attach(inner: &Arc<Inner>, start: StartAt) -> Result<Self, memq_core::Error> {
        let sub = inner.topic.subscribe(StartAt::Latest)?;
        let n = inner.parts.len();
        let mut s = DurableSubscriber {
            topic: inner.clone(),
            sub,
            next: vec![0; n],
            positions: Vec::with_capacity(n),
            expect: vec![0; n],
            queue: VecDeque::new(),
            ready: VecDeque::new(),
        };
        for (p, part) in inner.parts.iter().enumerate() {
            // Everything before the in-memory subscriber's start is in the log already.
            let pos = s.sub.position(p as u32).expect("reads every partition");
            // The log lock (read) is held from reading where the log starts until this
            // position holds retention back, so that no publish deletes it between.
            let log = read_log(part);
            let from = match start {
                StartAt::Latest => pos,
                StartAt::Earliest => log.start(),
                StartAt::Offset(o) if o > pos => {
                    return Err(memq_core::Error::OffsetOutOfRange {
                        offset: o,
                        partition: p as u32,
                        high: pos,
                    })
                }
                StartAt::Offset(o) => o,
            };
            if from < pos {
                s.queue.push_back(Next::Disk {
                    partition: p as u32,
                    from,
                    to: pos,
                });
            }
            s.next[p] = from;
            s.expect[p] = pos;
            let at = Arc::new(AtomicU64::new(from));
            part.readers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(at.clone());
            drop(log);
            s.positions.push(at);
        }
        Ok(s)
    }

    /// Moves to `start` on every partition: the oldest message kept on disk
    /// (`Earliest`), the end now (`Latest`), or an offset (`Offset(n)`); the next receives
    /// go on from there. All or nothing: a refused seek leaves the subscriber where it
    /// was.
    ///
    /// ```
    /// use memq_core::{StartAt, TopicConfig};
    /// use memq_store::{DurableConfig, DurableTopic, SyncPolicy};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let topic = DurableTopic::open(dir.path(), TopicConfig::new(8), DurableConfig::new(SyncPolicy::Never))?;
    /// for i in 0..3u8 {
    ///     topic.publish_blocking(vec![i])?;
    /// }
    /// let mut sub = topic.subscribe(StartAt::Latest)?;
    /// sub.seek_to(StartAt::Offset(1))?;
    /// assert_eq!(sub.recv_blocking()?.offset, 1);
    /// assert!(sub.seek_to(StartAt::Offset(4)).is_err()); // past the end
    /// assert_eq!(sub.recv_blocking()?.offset, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`memq_core::Error::OffsetOutOfRange`] for an offset past the end of a partition.
    pub fn seek_to(&mut self, start: StartAt) -> Result<(), memq_core::Error> {
        // The new position holds retention back before the old one lets it go.
        *self = DurableSubscriber::attach(&self.topic, start)?;
        Ok(())
    }

    /// The next offset this subscriber reads in `partition`.
    pub fn position(&self, partition: u32) -> Option<u64> {
        self.next.get(partition as usize).copied()
    }

    /// Takes the next message if one can be had without waiting.
    ///
    /// # Errors
    ///
    /// `Empty`, `Lagged`, `Closed` or `Store` (see [`DurableRecvError`]).
    pub fn try_recv(&mut self) -> Result<DurableMessage, DurableRecvError> {
        loop {
            if let Some(r) = self.take_ready()? {
                return Ok(r);
            }
            match self.sub.try_recv() {
                Ok(m) => self.take_memory(m),
                Err(TryRecvError::Lagged(_)) => self.note_lag(),
                Err(TryRecvError::Empty) => return Err(DurableRecvError::Empty),
                Err(_) => return Err(DurableRecvError::Closed),
            }
        }
    }

    /// Waits for the next message, on this thread.
    ///
    /// # Errors
    ///
    /// `Lagged`, `Closed` or `Store` (see [`DurableRecvError`]).
    pub fn recv_blocking(&mut self) -> Result<DurableMessage, DurableRecvError> {
        loop {
            if let Some(r) = self.take_ready()? {
                return Ok(r);
            }
            let got = self.sub.recv_blocking();
            self.take_core(got)?;
        }
    }

    /// [`DurableSubscriber::recv_blocking`], giving up after `timeout`.
    ///
    /// # Errors
    ///
    /// As [`DurableSubscriber::recv_blocking`], and `Timeout`.
    pub fn recv_blocking_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<DurableMessage, DurableRecvError> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(r) = self.take_ready()? {
                return Ok(r);
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.sub.recv_blocking_timeout(left) {
                Ok(m) => self.take_memory(m),
                Err(RecvTimeoutError::Timeout) => return Err(DurableRecvError::Timeout),
                Err(RecvTimeoutError::Lagged(_)) => self.note_lag(),
                Err(_) => return Err(DurableRecvError::Closed),
            }
        }
    }

    /// Waits for the next message (async, any runtime). Reads from disk are made in the
    /// poll (from the page cache, for a subscriber keeping up).
    ///
    /// # Errors
    ///
    /// As [`DurableSubscriber::recv_blocking`].
    pub async fn recv(&mut self) -> Result<DurableMessage, DurableRecvError> {
        // Often ready at once (a backlog on disk): give the runtime its thread back now
        // and then.
        crate::coop::yield_sometimes().await;
        loop {
            if let Some(r) = self.take_ready()? {
                return Ok(r);
            }
            let got = self.sub.recv().await;
            self.take_core(got)?;
        }
    }

    fn take_core(
        &mut self,
        got: Result<Message<Stored>, RecvError>,
    ) -> Result<(), DurableRecvError> {
        match got {
            Ok(m) => self.take_memory(m),
            Err(RecvError::Lagged(_)) => self.note_lag(),
            Err(_) => return Err(DurableRecvError::Closed),
        }
        Ok(())
    }

    /// A message from the in-memory subscriber: anything of its partition it skipped
    /// (evicted before it read it) is read from disk first.
    fn take_memory(&mut self, m: Message<Stored>) {
        let p = m.partition() as usize;
        let off = m.offset();
        if off < self.expect[p] {
            return;
        }
        if off > self.expect[p] {
            self.queue.push_back(Next::Disk {
                partition: p as u32,
                from: self.expect[p],
                to: off,
            });
        }
        self.expect[p] = off + 1;
        self.queue.push_back(Next::Memory(m));
    }

    /// The in-memory subscriber skipped what the cache evicted: those ranges are read
    /// from disk.
    fn note_lag(&mut self) {
        for p in 0..self.expect.len() {
            let pos = self.sub.position(p as u32).expect("reads every partition");
            if pos > self.expect[p] {
                self.queue.push_back(Next::Disk {
                    partition: p as u32,
                    from: self.expect[p],
                    to: pos,
                });
                self.expect[p] = pos;
            }
        }
    }

    /// The next message to hand over, reading from disk if that is what comes next;
    /// `None` if only the in-memory subscriber can tell.
    fn take_ready(&mut self) -> Result<Option<DurableMessage>, DurableRecvError> {
        loop {
            if let Some(m) = self.ready.pop_front() {
                self.handed(m.partition, m.offset);
                return Ok(Some(m));
            }
            match self.queue.pop_front() {
                None => return Ok(None),
                Some(Next::Memory(m)) => {
                    let stored = m.value().clone();
                    self.ready.push_back(DurableMessage {
                        partition: m.partition(),
                        offset: m.offset(),
                        timestamp: stored.timestamp,
                        key: stored.key,
                        payload: stored.payload,
                    });
                }
                Some(Next::Disk {
                    partition,
                    from,
                    to,
                }) => {
                    if let Some(lagged) = self.read_disk(partition, from, to)? {
                        return Err(DurableRecvError::Lagged(lagged));
                    }
                }
            }
        }
    }

    /// Reads the next batch of `partition`'s range `from..to` into `ready`, putting the
    /// rest of the range back at the front. Returns the number of messages retention
    /// deleted from the range's start, if any.
    fn read_disk(
        &mut self,
        partition: u32,
        from: u64,
        to: u64,
    ) -> Result<Option<u64>, DurableRecvError> {
        let part = &self.topic.parts[partition as usize];
        let want = ((to - from) as usize).min(DISK_BATCH);
        let batch = match read_log(part).read(from, want) {
            Ok(b) => b,
            Err(e) => {
                self.queue.push_front(Next::Disk {
                    partition,
                    from,
                    to,
                });
                return Err(DurableRecvError::Store(e));
            }
        };
        let mut at = from + batch.skipped;
        for r in batch.records {
            if r.offset >= to {
                break;
            }
            at = r.offset + 1;
            self.ready.push_back(DurableMessage {
                partition,
                offset: r.offset,
                timestamp: r.timestamp.unwrap_or(0),
                key: r.key.map(Bytes::from),
                payload: Bytes::from(r.payload),
            });
        }
        if at < to {
            if at == from {
                // Nothing read and nothing skipped: the log does not hold what the
                // in-memory topic says was published. Never expected; an error rather
                // than a receive that spins.
                self.queue.push_front(Next::Disk {
                    partition,
                    from,
                    to,
                });
                return Err(DurableRecvError::Store(StoreError::Format {
                    file: self.topic.dir.clone(),
                    reason: format!(
                        "partition {partition}: offsets {from}..{to} missing from the log"
                    ),
                }));
            }
            self.queue.push_front(Next::Disk {
                partition,
                from: at,
                to,
            });
        }
        // What retention deleted of this range (later offsets are read from the next
        // part of the queue: the in-memory topic may still hold them).
        let skipped = batch.skipped.min(to - from);
        if skipped > 0 {
            let p = partition as usize;
            self.next[p] = self.next[p].max(from + skipped);
            self.positions[p].store(self.next[p], Ordering::SeqCst);
            return Ok(Some(skipped));
        }
        Ok(None)
    }

    fn handed(&mut self, partition: u32, offset: u64) {
        let p = partition as usize;
        self.next[p] = offset + 1;
        self.positions[p].store(offset + 1, Ordering::SeqCst);
        self.topic.parts[p].reader_moved();
    }
}

impl Drop for DurableSubscriber {
    fn drop(&mut self) {
        for (p, at) in self.positions.iter().enumerate() {
            let part = &self.topic.parts[p];
            part.readers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|r| !Arc::ptr_eq(r, at));
            part.reader_moved();
        }
    }
}
