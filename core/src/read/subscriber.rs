//! Broadcast subscribers: each has its own position in every partition it reads and sees
//! every message published there.
//!
//! A subscriber's positions live in the partitions' logs (so `Block` retention can see
//! them); the subscriber itself holds only indexes into them and its waiter keys. What
//! a receive does under one partition's lock is in [`part`]; here are the subscriber's
//! public methods, the round over its partitions, and its futures.
//!
//! Layer: on the partitions' logs and wait lists, through the topic's shared state;
//! nothing of groups or acks.

mod part;
#[cfg(target_has_atomic = "64")]
mod ring;
#[cfg(target_has_atomic = "64")]
pub(crate) use ring::{ring_error, ring_start};

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

use self::part::{Batch, Found, SubPart};
use super::{start_position, to_message};
use crate::config::StartAt;
use crate::error::{Error, Lagged, RecvError, TryRecvError};
use crate::message::Message;

use crate::partition::Shared;
use crate::sync::{Arc, AtomicUsize, Ordering, Padded};
use crate::wait::{SpentWakers, WakeList};

/// A broadcast reader: receives every message published to the partitions it reads,
/// from its own position, independently of other readers.
///
/// Made by [`Topic::subscribe`](crate::Topic::subscribe) (every partition) or
/// [`Topic::subscribe_partition`](crate::Topic::subscribe_partition).
/// Messages stay in the log after a subscriber reads them (unless the topic releases
/// them once every reader has, see [`TopicConfig::release_on_read`]); under `Block` a
/// subscriber that does not read holds publishers back, so drop subscribers you no longer
/// read.
///
/// [`TopicConfig::release_on_read`]: crate::TopicConfig::release_on_read
///
/// It is also a [`Stream`](futures_core::Stream) of `Result<Message<T>, Lagged>` that ends
/// when the topic is closed and drained.
///
/// A topic's only subscriber, reading one partition with async receives, stays
/// registered for the next message when a receive takes the last one: its next receive
/// then waits without taking the partition's lock. Until a publish wakes it, a later
/// receive visits the partition, or the subscriber is dropped, the topic keeps a clone of
/// the waker of the task that read last.
pub struct Subscriber<T> {
    shared: Arc<Shared<T>>,
    parts: Vec<SubPart<T>>,
    /// Its readers of the partitions, on a topic on the ring engine (then `parts` is
    /// empty; on the locked log this is).
    #[cfg(target_has_atomic = "64")]
    ring: Vec<ring::RingPart<T>>,
    next: usize,
    waiting: bool,
    /// Who the last registration a visit left in place wakes (see `SubPart::armed`), by
    /// [`waker_identity`]: a receive polled with a waker of the same identity may wait
    /// without the lock.
    armed_with: (usize, usize),
}

// Nothing in a subscriber is pinned: its buffered values are plain owned data.
impl<T> Unpin for Subscriber<T> {}

impl<T> fmt::Debug for Subscriber<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscriber")
            .field("topic", &self.shared)
            .field("partitions", &self.parts.len())
            .finish_non_exhaustive()
    }
}

impl<T> Subscriber<T> {
    /// A subscriber of partitions `ps` of the topic, starting at `start` in each.
    pub(crate) fn attach(
        shared: &Arc<Shared<T>>,
        ps: Vec<usize>,
        start: StartAt,
    ) -> Result<Self, Error> {
        let mut sub = Self {
            shared: shared.clone(),
            parts: Vec::new(),
            #[cfg(target_has_atomic = "64")]
            ring: Vec::new(),
            next: 0,
            waiting: false,
            armed_with: (0, 0),
        };
        // Counted from here; `Drop` uncounts it, also when attaching fails half way.
        shared
            .subscribers
            .fetch_add(1, crate::sync::Ordering::Relaxed);
        #[cfg(target_has_atomic = "64")]
        if !shared.rings.is_empty() {
            sub.ring.reserve_exact(ps.len());
            Self::attach_ring(&mut sub, &shared.rings, ps, start)?;
            return Ok(sub);
        }
        sub.parts.reserve_exact(ps.len());
        let now = shared.expiry_now();
        let read_ahead = shared.ttl.is_none() && shared.overflow != crate::Overflow::DropOldest;
        for p in ps {
            let mut wl = WakeList::new();
            let mut released = Vec::new();
            let mut log = shared.parts[p].log.lock();
            shared.expire(&mut log, now, &mut wl, &mut released);
            // A new reader never sees what every reader attached so far has read.
            log.release_read(&mut released);
            // On error, `sub` is dropped and detaches from the partitions done so far.
            let pos = start_position(&log, p, start)?;
            let ahead = read_ahead.then(|| Arc::new(Padded(AtomicUsize::new(0))));
            let cursor = log.add_reader(pos, ahead.clone());
            log.subscribers += 1;
            sub.parts.push(SubPart {
                p,
                cursor,
                key: None,
                buf: VecDeque::new(),
                ahead,
                acted: 0,
                armed: false,
                fetched: Some(pos),
                released: Vec::new(),
            });
        }
        Ok(sub)
    }

    /// The partitions this subscriber reads.
    pub fn partitions(&self) -> impl Iterator<Item = u32> + '_ {
        let locked = self.parts.iter().map(|sp| sp.p);
        #[cfg(target_has_atomic = "64")]
        let locked = locked.chain(self.ring.iter().map(|r| r.p));
        locked.map(|p| p as u32)
    }

    /// The next offset this subscriber reads in `partition`, or `None` if it does not
    /// read that partition.
    pub fn position(&self, partition: u32) -> Option<u64> {
        #[cfg(target_has_atomic = "64")]
        if !self.ring.is_empty() {
            let r = self.ring.iter().find(|r| r.p == partition as usize)?;
            return Some(r.position());
        }
        let sp = self.parts.iter().find(|sp| sp.p == partition as usize)?;
        Some(self.shared.parts[sp.p].log.lock().cursor(sp.cursor))
    }

    /// Messages published that this subscriber has neither read nor been told it missed,
    /// summed over its partitions.
    pub fn lag(&self) -> u64 {
        #[cfg(target_has_atomic = "64")]
        if !self.ring.is_empty() {
            return self.ring.iter().map(ring::RingPart::lag).sum();
        }
        self.parts
            .iter()
            .map(|sp| {
                let log = self.shared.parts[sp.p].log.lock();
                log.high.saturating_sub(log.cursor(sp.cursor))
            })
            .sum()
    }

    /// Moves to `offset`. Only for a subscriber of a single partition; see
    /// [`Subscriber::seek_partition`]. Seeking before the retained window reads as
    /// [`RecvError::Lagged`] first.
    ///
    /// # Errors
    ///
    /// [`Error::PartitionRequired`] on a subscriber of several partitions,
    /// [`Error::OffsetOutOfRange`] if `offset` is past the end.
    pub fn seek(&mut self, offset: u64) -> Result<(), Error> {
        #[cfg(target_has_atomic = "64")]
        if !self.ring.is_empty() {
            return match self.ring.as_mut_slice() {
                [r] => r.seek(StartAt::Offset(offset)),
                _ => Err(Error::PartitionRequired),
            };
        }
        match self.parts.as_slice() {
            [sp] => self.seek_partition(sp.p as u32, offset),
            _ => Err(Error::PartitionRequired),
        }
    }

    /// Moves to `offset` in `partition`.
    ///
    /// # Errors
    ///
    /// [`Error::PartitionOutOfRange`] if the topic has no such partition,
    /// [`Error::PartitionNotRead`] if it has but the subscriber does not read it,
    /// [`Error::OffsetOutOfRange`] if `offset` is past the end.
    pub fn seek_partition(&mut self, partition: u32, offset: u64) -> Result<(), Error> {
        #[cfg(target_has_atomic = "64")]
        if let Some(r) = self.ring.iter_mut().find(|r| r.p == partition as usize) {
            return r.seek(StartAt::Offset(offset));
        }
        let Some(sp) = self.parts.iter_mut().find(|sp| sp.p == partition as usize) else {
            let partitions = self.shared.partition_count();
            return Err(if partition < partitions {
                Error::PartitionNotRead { partition }
            } else {
                Error::PartitionOutOfRange {
                    partition,
                    partitions,
                }
            });
        };
        let mut wl = WakeList::new();
        let mut released = Vec::new();
        let mut log = self.shared.parts[sp.p].log.lock();
        // A seek never finds what every reader has been handed.
        log.release_read(&mut released);
        let pos = start_position(&log, sp.p, StartAt::Offset(offset))?;
        sp.give_back_and_seek(&mut log, pos, &mut released);
        let stale = core::mem::take(&mut sp.buf);
        self.shared.reader_advanced(&mut log, &mut wl);
        drop(log);
        drop(stale);
        Ok(())
    }

    /// Moves to the start or the end of every partition it reads.
    ///
    /// # Errors
    ///
    /// [`Error::OffsetOutOfRange`] for an offset past the end of a partition.
    pub fn seek_to(&mut self, start: StartAt) -> Result<(), Error> {
        #[cfg(target_has_atomic = "64")]
        if !self.ring.is_empty() {
            return self.seek_ring_to(start);
        }
        // All or nothing: check every partition first (offsets only grow, so a position
        // valid now stays valid below).
        for sp in &self.parts {
            start_position(&self.shared.parts[sp.p].log.lock(), sp.p, start)?;
        }
        for sp in &mut self.parts {
            let mut wl = WakeList::new();
            let mut released = Vec::new();
            let mut log = self.shared.parts[sp.p].log.lock();
            // A seek never finds what every reader has been handed.
            log.release_read(&mut released);
            let pos = start_position(&log, sp.p, start)?;
            let pos = if start == StartAt::Earliest {
                // Including what this subscriber fetched ahead, once it is back.
                log.give_back(&mut sp.buf);
                log.first()
            } else {
                pos
            };
            sp.give_back_and_seek(&mut log, pos, &mut released);
            let stale = core::mem::take(&mut sp.buf);
            self.shared.reader_advanced(&mut log, &mut wl);
            drop(log);
            drop(stale);
        }
        Ok(())
    }

    /// Whether a receive may find a message or the end of the topic: `false` only if
    /// nothing is buffered, and no partition was published to or closed since this
    /// subscriber last fetched everything from it. Takes no lock. Always `true` on a
    /// topic with a TTL, whose reads also expire messages (lazily), which a receive
    /// answered without the lock would skip.
    #[inline]
    pub(crate) fn may_have_news(&self) -> bool {
        #[cfg(target_has_atomic = "64")]
        if !self.ring.is_empty() {
            return self.ring_may_have_news();
        }
        self.shared.ttl.is_some()
            || self
                .parts
                .iter()
                .any(|sp| !sp.buf.is_empty() || self.shared.parts[sp.p].may_have_news(sp.fetched))
    }

    /// One attempt to read; registers `waker` on every empty partition if given.
    #[inline]
    fn poll_recv_inner(&mut self, waker: Option<&Waker>) -> Poll<Result<Message<T>, RecvError>>
    where
        T: Clone,
    {
        #[cfg(target_has_atomic = "64")]
        if !self.ring.is_empty() {
            return self.poll_ring(waker);
        }
        if waker.is_none() && !self.may_have_news() {
            // Fetched everything and nothing was published since: `Empty`, unlocked.
            return Poll::Pending;
        }
        if let Some(w) = waker {
            if self.stays_registered(w) {
                self.waiting = true;
                return Poll::Pending;
            }
        }
        let shared = &*self.shared;
        let n = self.parts.len();
        // The clock is read once, and only if some partition must be visited.
        let mut now = None;
        let mut all_closed = true;
        for k in 0..n {
            let idx = (self.next + k) % n;
            let sp = &mut self.parts[idx];
            if let Some(e) = sp.pop_ahead(shared) {
                let m = to_message(sp.p, e, shared.stamp());
                self.next = idx + 1;
                self.cancel_wait();
                return Poll::Ready(Ok(m));
            }
            let now = *now.get_or_insert_with(|| shared.expiry_now());
            // The topic's only subscriber, waiting in an async receive, takes the lock
            // at once: then the holder is most likely a publisher, whose holds last one
            // message, and the fetch that follows takes everything it published
            // meanwhile. Where several subscribers share the lock, one may be holding
            // it for a read-ahead of [`READ_AHEAD`] copies, and stepping away (as
            // `try_recv` and blocking calls always do) measured better. perf_runner,
            // one binary with an environment switch, four pairs in rotated order:
            // S1 memq 6.18-6.26M -> 6.64-6.88M, memq-release 6.76-7.08M -> 7.42-8.00M
            // (one pass 6.47M), S5 1 MiB memq-release 7.17-7.27M -> 7.65-7.81M; S3 and
            // S6 unchanged. Every subscriber taking it at once cost S3 memq 5-17 %.
            let sole = waker.is_some() && shared.subscribers.load(Ordering::Relaxed) == 1;
            let p = sp.p;
            let found = sp.visit(shared, now, waker, sole, sole && arms(shared, n));
            if let (true, Some(w)) = (sp.armed, waker) {
                self.armed_with = waker_identity(w);
            }
            match found {
                Found::Message(e) => {
                    let m = to_message(p, e, shared.stamp());
                    self.next = idx + 1;
                    self.cancel_wait_except(Some(p));
                    return Poll::Ready(Ok(m));
                }
                Found::Lagged(missed) => {
                    self.cancel_wait();
                    return Poll::Ready(Err(RecvError::Lagged(missed)));
                }
                Found::Open => {
                    all_closed = false;
                    // Cancelled by whatever this poll returns, even a message from a
                    // later partition (no stray wake-up left behind).
                    self.waiting |= waker.is_some();
                }
                Found::Closed => {}
            }
        }
        if all_closed {
            self.cancel_wait();
            Poll::Ready(Err(RecvError::Closed))
        } else {
            self.waiting |= waker.is_some();
            Poll::Pending
        }
    }

    /// Whether a receive polled with `waker` may wait without visiting the partition: a
    /// subscriber of one partition whose last visit left its registration waiting there
    /// (see `SubPart::armed`) with a waker of the same identity, with nothing fetched
    /// and nothing published or closed since.
    ///
    /// The registration was made under the partition's lock, after the last read. A
    /// publish or a close takes that lock and moves the partition's end before it
    /// wakes anyone. So either none came since, and the registration still waits, with
    /// its waker, and the next one wakes it; or one came and took it, and then it woke
    /// the task after moving the end: this poll sees the new end and visits, or it
    /// runs before the wake-up and the task is polled again. Only while the
    /// registration waits can the answer be yes, and then it holds a clone of the
    /// waker, which keeps what the identity points to alive: an equal identity is the
    /// same waker, not a new one at a reused address.
    #[inline]
    fn stays_registered(&self, waker: &core::task::Waker) -> bool {
        match &self.parts[..] {
            [sp] => sp.armed && self.armed_with == waker_identity(waker) && !self.may_have_news(),
            _ => false,
        }
    }

    /// Reads up to `limit` messages into `buf`; registers `waker` if there were none.
    #[inline]
    fn poll_recv_many_inner(
        &mut self,
        buf: &mut Vec<Message<T>>,
        limit: usize,
        waker: Option<&Waker>,
    ) -> Poll<Result<usize, RecvError>>
    where
        T: Clone,
    {
        if limit == 0 {
            return Poll::Ready(Ok(0));
        }
        #[cfg(target_has_atomic = "64")]
        if !self.ring.is_empty() {
            return self.poll_ring_many(buf, limit, waker);
        }
        if waker.is_none() && !self.may_have_news() {
            return Poll::Pending;
        }
        let shared = &*self.shared;
        let mut now = None;
        let n = self.parts.len();
        let mut got = 0;
        let mut all_closed = true;
        // The partition whose registration this poll settled under its lock, if any.
        let mut settled = None;
        // Where this round starts: `next` moves as partitions yield, the round does not
        // (it once visited the first again and skipped the last).
        let start = self.next;
        for k in 0..n {
            if got == limit {
                break;
            }
            let idx = (start + k) % n;
            let sp = &mut self.parts[idx];
            let drained = !sp.buf.is_empty();
            if drained {
                // Fetched earlier: these come first, in order.
                let (took, stop) = sp.drain_ahead(shared, buf, limit - got);
                got += took;
                all_closed = false;
                self.next = idx + 1;
                if stop {
                    break;
                }
            }
            let now = *now.get_or_insert_with(|| shared.expiry_now());
            match sp.visit_many(shared, now, buf, &mut got, limit, waker, drained) {
                Batch::GapAhead => {
                    all_closed = false;
                    break;
                }
                Batch::Lagged(missed) => {
                    self.cancel_wait();
                    return Poll::Ready(Err(RecvError::Lagged(missed)));
                }
                Batch::Took => {
                    settled = Some(sp.p);
                    self.next = idx + 1;
                    all_closed = false;
                }
                Batch::Open => {
                    all_closed = false;
                    self.waiting |= got == 0 && waker.is_some();
                }
                Batch::Closed => {}
            }
        }
        if got > 0 {
            self.cancel_wait_except(settled);
            Poll::Ready(Ok(got))
        } else if all_closed {
            self.cancel_wait();
            Poll::Ready(Ok(0))
        } else {
            self.waiting |= waker.is_some();
            Poll::Pending
        }
    }

    /// Forgets the registrations of a wait that ended (served, or abandoned), so that no
    /// later publish wakes a task that is not waiting. Only a subscriber of several
    /// partitions that actually parked pays for this.
    #[inline]
    fn cancel_wait(&mut self) {
        self.cancel_wait_except(None);
    }

    /// [`Subscriber::cancel_wait`] for a poll that already settled its registration on
    /// partition `settled` under that partition's lock: that lock is not taken again.
    #[inline]
    fn cancel_wait_except(&mut self, settled: Option<usize>) {
        // Inline, so that a poll that did not wait pays one test.
        if self.waiting {
            if settled.is_some() && self.parts.len() == 1 {
                // Its only registration, settled already (a subscriber on the ring
                // engine keeps no `parts`).
                self.waiting = false;
            } else {
                self.end_registrations(settled);
            }
        }
    }

    /// [`Subscriber::cancel_wait_except`] for a subscriber that was waiting.
    fn end_registrations(&mut self, settled: Option<usize>) {
        #[cfg(target_has_atomic = "64")]
        if !self.ring.is_empty() {
            // `settled` is a partition here, an index there: a full cancel.
            let settled = settled.and_then(|p| self.ring.iter().position(|r| r.p == p));
            return self.cancel_ring_wait(settled);
        }
        self.waiting = false;
        let mut spent = SpentWakers::new();
        for sp in &mut self.parts {
            if sp.key.is_some() && settled != Some(sp.p) {
                sp.armed = false;
                self.shared.parts[sp.p]
                    .log
                    .lock()
                    .subs
                    .settle(sp.key, &mut spent);
            }
        }
    }

    /// Receives the next message, waiting for one if needed.
    ///
    /// # Errors
    ///
    /// [`RecvError::Lagged`] once if messages were evicted or expired before this
    /// subscriber read them (it then continues at the oldest retained one);
    /// [`RecvError::Closed`] when the topic is closed and everything was read.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a message is taken only in the poll that returns it, so dropping the
    /// future (for example when it loses a `select!`) loses nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// # futures_executor::block_on(async {
    /// use memq::{StartAt, Topic};
    /// let topic = Topic::with_capacity(8)?;
    /// let mut sub = topic.subscribe(StartAt::Latest)?;
    /// topic.publish(1).await?;
    /// assert_eq!(sub.recv().await?.into_value(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    #[inline]
    pub fn recv(&mut self) -> Recv<'_, T> {
        Recv { sub: self }
    }

    /// Receives the next message if one is available now.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if there is none yet; otherwise as [`Subscriber::recv`].
    #[inline]
    pub fn try_recv(&mut self) -> Result<Message<T>, TryRecvError>
    where
        T: Clone,
    {
        match self.poll_recv_inner(None) {
            Poll::Ready(r) => r.map_err(TryRecvError::from),
            Poll::Pending => Err(TryRecvError::Empty),
        }
    }

    /// Waits for at least one message, then appends up to `limit` to `buf` and returns
    /// how many. Returns `Ok(0)` only when the topic is closed and drained (or `limit` is 0).
    ///
    /// # Errors
    ///
    /// [`RecvError::Lagged`] as for [`Subscriber::recv`]; messages already read are never
    /// mixed with a gap in one batch.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`Subscriber::recv`].
    #[inline]
    pub fn recv_many<'a>(
        &'a mut self,
        buf: &'a mut Vec<Message<T>>,
        limit: usize,
    ) -> RecvMany<'a, T> {
        RecvMany {
            sub: self,
            buf,
            limit,
        }
    }

    /// Appends up to `limit` messages available now to `buf`.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if none is available, [`TryRecvError::Closed`] when closed
    /// and drained, [`TryRecvError::Lagged`] as for [`Subscriber::recv`].
    #[inline]
    pub fn try_recv_many(
        &mut self,
        buf: &mut Vec<Message<T>>,
        limit: usize,
    ) -> Result<usize, TryRecvError>
    where
        T: Clone,
    {
        match self.poll_recv_many_inner(buf, limit, None) {
            Poll::Ready(Ok(0)) if limit > 0 => Err(TryRecvError::Closed),
            Poll::Ready(r) => r.map_err(TryRecvError::from),
            Poll::Pending => Err(TryRecvError::Empty),
        }
    }
}

impl<T> Drop for Subscriber<T> {
    fn drop(&mut self) {
        #[cfg(target_has_atomic = "64")]
        self.leave_rings();
        let shared = &*self.shared;
        shared
            .subscribers
            .fetch_sub(1, crate::sync::Ordering::Relaxed);
        for sp in &mut self.parts {
            let mut wl = WakeList::new();
            let mut released = Vec::new();
            let mut log = shared.parts[sp.p].log.lock();
            let (_, waker) = log.subs.remove(&mut sp.key);
            // What every reader, this one included, has been handed leaves a releasing
            // log now: once this one is gone, nothing would count it as read.
            log.release_read(&mut released);
            log.give_back(&mut sp.buf);
            log.remove_cursor(sp.cursor);
            // This subscriber may have been the slowest reader.
            log.release_read(&mut released);
            log.subscribers -= 1;
            // Our position may have been the one holding publishers back.
            shared.reader_advanced(&mut log, &mut wl);
            drop(log);
            drop(waker);
        }
    }
}

/// Future of [`Subscriber::recv`].
#[must_use = "futures do nothing unless polled"]
pub struct Recv<'a, T> {
    sub: &'a mut Subscriber<T>,
}

impl<T> fmt::Debug for Recv<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recv").finish_non_exhaustive()
    }
}

impl<T: Clone> Future for Recv<'_, T> {
    type Output = Result<Message<T>, RecvError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().sub.poll_recv_inner(Some(cx.waker()))
    }
}

impl<T> Drop for Recv<'_, T> {
    fn drop(&mut self) {
        self.sub.cancel_wait();
    }
}

/// Future of [`Subscriber::recv_many`].
#[must_use = "futures do nothing unless polled"]
pub struct RecvMany<'a, T> {
    sub: &'a mut Subscriber<T>,
    buf: &'a mut Vec<Message<T>>,
    limit: usize,
}

impl<T> fmt::Debug for RecvMany<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecvMany")
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl<T: Clone> Future for RecvMany<'_, T> {
    type Output = Result<usize, RecvError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.sub
            .poll_recv_many_inner(this.buf, this.limit, Some(cx.waker()))
    }
}

impl<T> Drop for RecvMany<'_, T> {
    fn drop(&mut self) {
        self.sub.cancel_wait();
    }
}

impl<T: Clone> futures_core::Stream for Subscriber<T> {
    type Item = Result<Message<T>, Lagged>;

    #[inline]
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.get_mut().poll_recv_inner(Some(cx.waker())) {
            Poll::Ready(Ok(m)) => Poll::Ready(Some(Ok(m))),
            Poll::Ready(Err(RecvError::Lagged(n))) => Poll::Ready(Some(Err(Lagged(n)))),
            Poll::Ready(Err(RecvError::Closed)) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Whether a subscriber of `n` partitions of the topic of `shared`, the topic's only
/// one, receiving asynchronously, stays registered as it takes the last message of its
/// partition (`SubPart::armed`): only where the next receive can find out without the
/// lock that nothing came since (one partition, no TTL, 64-bit atomics), and not
/// inside a blocking call, whose thread parks on the registration only if it must.
/// Several subscribers of one topic keep registering only when they find nothing:
/// every subscriber left registered is woken by each publish, most of them busy
/// reading still (S3 memq lost 5 % with every subscriber staying registered).
#[inline]
fn arms<T>(shared: &Shared<T>, n: usize) -> bool {
    cfg!(target_has_atomic = "64")
        && n == 1
        && shared.ttl.is_none()
        && !crate::sync::in_blocking_call()
}

/// What makes two wakers the same for [`core::task::Waker::will_wake`]: the data and the
/// vtable they point to, as addresses (kept without a reference; see
/// `Subscriber::stays_registered` for why an equal pair is the same waker).
#[inline]
fn waker_identity(waker: &core::task::Waker) -> (usize, usize) {
    (
        waker.data() as usize,
        core::ptr::from_ref(waker.vtable()) as usize,
    )
}
