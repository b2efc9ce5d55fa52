//! A subscriber of a topic on the lock-free ring engine (`TopicConfig::ring_engine`):
//! one ring reader per partition ([`RingPart`]), which receives without any lock; a
//! subscriber that waits registers on the partition's wait list (`RingWaits`), then
//! announces itself to the ring, which looks once more before it may sleep.
//!
//! The same public behaviour as on the locked log (`part.rs`): the round over the
//! partitions, `Lagged` before any message of a batch, a registration on every open
//! partition withdrawn once the wait ends, positions and lag as the user sees them.
//!
//! Layer: on the rings of the topic's shared state and their wait lists.

use alloc::vec::Vec;
use core::task::{Poll, Waker};

use memq_ring::{Reader, Start, TryRecvError as RingRecvError};

use super::part::{Batch, Found};
use super::Subscriber;
use crate::config::StartAt;
use crate::error::{Error, RecvError};
use crate::log::ring::{ReaderCounts, RingWaits, WaitLists};
use crate::log::Entry;
use crate::message::Message;
use crate::partition::PartRing;
use crate::read::to_message;
use crate::sync::Arc;
use crate::sync::MutexGuard;
use crate::wait::{SpentWakers, WaitKey};

/// How many messages a ring subscriber clones ahead of its position at most, as the
/// locked log's read-ahead (`part.rs`).
const READ_AHEAD: usize = super::part::READ_AHEAD;

/// A subscriber's reader of one partition on the ring.
#[derive(Debug)]
pub(super) struct RingPart<T> {
    pub(super) p: usize,
    reader: Reader<T, RingWaits>,
    /// Its registration on the partition's wait list.
    key: Option<WaitKey>,
    /// Whether `key` waits (so a receive settles it; one that did not wait takes no
    /// lock).
    registered: bool,
    /// What this reader delivered and missed, for `stats`.
    counts: Arc<ReaderCounts>,
    /// Messages missed that a batch receive met after it had taken messages: reported
    /// by the next receive, before anything else (the ring moved the reader on already).
    lagged: u64,
}

impl<T> RingPart<T> {
    /// A reader of ring partition `p` at `start`.
    pub(super) fn attach(ring: &Arc<PartRing<T>>, p: usize, start: StartAt) -> Result<Self, Error> {
        let at = ring_start(ring, p, start)?;
        let reader = Reader::new(ring, at).map_err(|e| ring_error(e, p, ring.capacity()))?;
        let counts = ring.waiters().lists.lock().attach_counts();
        Ok(Self {
            p,
            reader,
            key: None,
            registered: false,
            counts,
            lagged: 0,
        })
    }

    /// Where the user sees this reader: where it asked to start while what it missed
    /// there is not reported yet.
    pub(super) fn position(&self) -> u64 {
        self.reader.position() - self.reader.missed() - self.lagged
    }

    /// Messages published that this reader has neither received nor been told it missed
    /// (claimed offsets count as published: the ring's end).
    pub(super) fn lag(&self) -> u64 {
        self.reader.ring().end().saturating_sub(self.position())
    }

    /// Moves the reader to `start` (checked first by [`ring_start`]).
    pub(super) fn seek(&mut self, start: StartAt) -> Result<(), Error> {
        let ring = self.reader.ring();
        let at = ring_start(ring, self.p, start)?;
        let capacity = ring.capacity();
        let p = self.p;
        self.reader
            .seek(at)
            .map_err(|e| ring_error(e, p, capacity))?;
        // What it missed before the seek is not reported after it.
        self.lagged = 0;
        Ok(())
    }

    /// Whether a receive may find a message or the end (a hint, without a lock).
    #[inline]
    fn may_have_news(&self) -> bool {
        let ring = self.reader.ring();
        self.lagged > 0 || ring.end() != self.reader.position() || ring.is_closed()
    }

    /// Reports the gap a batch met after it had taken messages: counted now.
    fn report_gap(&mut self) -> u64 {
        // What was evicted since joins the same report, as on the locked log, where the
        // position stays before the gap until it is told.
        let missed = core::mem::take(&mut self.lagged) + self.reader.skip_evicted();
        self.counts.lagged(missed);
        missed
    }

    /// The partition's wait lists, locked (never held across a call into the ring).
    fn lists(reader: &Reader<T, RingWaits>) -> MutexGuard<'_, WaitLists> {
        reader.ring().waiters().lists.lock()
    }

    /// Settles this reader's registration on the wait list, if it waited.
    #[inline]
    fn settle(&mut self) {
        if self.registered {
            self.settle_registration();
        }
    }

    #[cold]
    fn settle_registration(&mut self) {
        self.registered = false;
        let mut spent = SpentWakers::new();
        Self::lists(&self.reader).subs.settle(self.key, &mut spent);
    }

    /// Registers `waker` on the wait list, then announces the wait to the ring: `true`
    /// if it may sleep (nothing arrived meanwhile).
    fn register(&mut self, waker: &Waker) -> bool {
        let mut spent = SpentWakers::new();
        Self::lists(&self.reader)
            .subs
            .register(&mut self.key, waker, &mut spent);
        drop(spent);
        self.registered = true;
        self.reader.prepare_wait()
    }

    /// Leaves the wait list and folds the counters into the partition's (the reader
    /// itself detaches from the ring when it drops).
    fn leave(&mut self) {
        let waker = {
            let mut lists = Self::lists(&self.reader);
            lists.detach_counts(&self.counts);
            lists.subs.remove(&mut self.key).1
        };
        drop(waker);
    }
}

impl<T: Clone> RingPart<T> {
    /// A single receive's visit: no lock unless it waits (`waker`).
    #[inline]
    fn visit(&mut self, waker: Option<&Waker>) -> Found<T> {
        if self.lagged > 0 {
            return Found::Lagged(self.report_gap());
        }
        loop {
            match self.reader.try_recv() {
                Ok((offset, value)) => {
                    if self.reader.ahead() == 0 {
                        // Clones what else is published now in one burst (handed over by
                        // the next receives, the position moving only then): a payload
                        // shared by every message (one `Arc`) then has its count touched
                        // by this core for the burst, not in turns with the publisher's.
                        self.reader.read_ahead(READ_AHEAD);
                    }
                    self.counts.delivered();
                    self.settle();
                    return Found::Message(Entry {
                        offset,
                        ts: 0,
                        value,
                    });
                }
                Err(RingRecvError::Lagged(missed)) => {
                    self.counts.lagged(missed);
                    self.settle();
                    return Found::Lagged(missed);
                }
                Err(RingRecvError::Closed) => {
                    // A registration made just before the close is not needed any more.
                    self.settle();
                    return Found::Closed;
                }
                Err(RingRecvError::Empty) => match waker {
                    Some(w) if !self.register(w) => {} // arrived meanwhile: look again
                    _ => return Found::Open,
                },
            }
        }
    }

    /// A batch receive's visit: takes into `buf` until the batch holds `limit`
    /// messages (`got` so far) or there is nothing more; registers `waker` if the batch
    /// is still empty.
    fn visit_many(
        &mut self,
        buf: &mut Vec<Message<T>>,
        got: &mut usize,
        limit: usize,
        waker: Option<&Waker>,
    ) -> Batch {
        if self.lagged > 0 {
            if *got > 0 {
                return Batch::GapAhead;
            }
            return Batch::Lagged(self.report_gap());
        }
        let before = *got;
        loop {
            while *got < limit {
                match self.reader.try_recv() {
                    Ok((offset, value)) => {
                        buf.push(Message {
                            offset,
                            partition: self.p as u32,
                            timestamp: None,
                            value,
                        });
                        *got += 1;
                    }
                    Err(RingRecvError::Lagged(missed)) => {
                        self.counts.delivered_many((*got - before) as u64);
                        self.settle();
                        if *got > 0 {
                            // Reported (and counted) by the next receive; until then the
                            // position and lag are as before the gap, as on the locked log.
                            self.lagged = missed;
                            return Batch::GapAhead;
                        }
                        self.counts.lagged(missed);
                        return Batch::Lagged(missed);
                    }
                    Err(RingRecvError::Closed) if *got == before => {
                        self.settle();
                        return Batch::Closed;
                    }
                    Err(RingRecvError::Closed | RingRecvError::Empty) => break,
                }
            }
            if *got > before {
                self.counts.delivered_many((*got - before) as u64);
                self.settle();
                return Batch::Took;
            }
            match waker {
                Some(w) if *got == 0 && !self.register(w) => {} // arrived: look again
                _ => return Batch::Open,
            }
        }
    }
}

impl<T> Subscriber<T> {
    /// [`Subscriber::attach`] on a topic on the ring: a reader per partition.
    pub(super) fn attach_ring(
        sub: &mut Self,
        rings: &[Arc<PartRing<T>>],
        ps: Vec<usize>,
        start: StartAt,
    ) -> Result<(), Error> {
        for p in ps {
            sub.ring.push(RingPart::attach(&rings[p], p, start)?);
        }
        Ok(())
    }

    /// [`Subscriber::seek_to`] on the ring: every partition checked first, then moved.
    pub(super) fn seek_ring_to(&mut self, start: StartAt) -> Result<(), Error> {
        for r in &self.ring {
            ring_start(r.reader.ring(), r.p, start)?;
        }
        self.ring.iter_mut().try_for_each(|r| r.seek(start))
    }

    /// Whether a receive may find something (see `Subscriber::may_have_news`).
    ///
    /// Out of line, as the other entries from `Subscriber`'s methods: inlined, they grew
    /// the locked engine's receive and cost it speed (plain_bench S1, see
    /// docs/ENGINE-PLAN.md).
    #[inline(never)]
    pub(super) fn ring_may_have_news(&self) -> bool {
        self.ring.iter().any(RingPart::may_have_news)
    }

    /// [`Subscriber::poll_recv_inner`] on the ring.
    #[inline(never)]
    pub(super) fn poll_ring(&mut self, waker: Option<&Waker>) -> Poll<Result<Message<T>, RecvError>>
    where
        T: Clone,
    {
        if waker.is_none() && !self.ring_may_have_news() {
            return Poll::Pending;
        }
        let n = self.ring.len();
        let mut all_closed = true;
        for k in 0..n {
            let idx = (self.next + k) % n;
            match self.ring[idx].visit(waker) {
                Found::Message(e) => {
                    self.next = idx + 1;
                    // This partition's registration is settled already.
                    self.cancel_ring_wait(Some(idx));
                    return Poll::Ready(Ok(to_message(self.ring[idx].p, e, None)));
                }
                Found::Lagged(missed) => {
                    self.cancel_ring_wait(Some(idx));
                    return Poll::Ready(Err(RecvError::Lagged(missed)));
                }
                Found::Open => {
                    all_closed = false;
                    self.waiting |= waker.is_some();
                }
                Found::Closed => {}
            }
        }
        if all_closed {
            self.cancel_ring_wait(None);
            Poll::Ready(Err(RecvError::Closed))
        } else {
            Poll::Pending
        }
    }

    /// [`Subscriber::poll_recv_many_inner`] on the ring.
    #[inline(never)]
    pub(super) fn poll_ring_many(
        &mut self,
        buf: &mut Vec<Message<T>>,
        limit: usize,
        waker: Option<&Waker>,
    ) -> Poll<Result<usize, RecvError>>
    where
        T: Clone,
    {
        if waker.is_none() && !self.ring_may_have_news() {
            return Poll::Pending;
        }
        let n = self.ring.len();
        let mut got = 0;
        let mut all_closed = true;
        // Where this round starts: `next` moves as partitions yield, the round does not.
        let start = self.next;
        for k in 0..n {
            if got == limit {
                break;
            }
            let idx = (start + k) % n;
            match self.ring[idx].visit_many(buf, &mut got, limit, waker) {
                Batch::GapAhead => {
                    all_closed = false;
                    break;
                }
                Batch::Lagged(missed) => {
                    self.cancel_ring_wait(Some(idx));
                    return Poll::Ready(Err(RecvError::Lagged(missed)));
                }
                Batch::Took => {
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
            self.cancel_ring_wait(None);
            Poll::Ready(Ok(got))
        } else if all_closed {
            self.cancel_ring_wait(None);
            Poll::Ready(Ok(0))
        } else {
            Poll::Pending
        }
    }

    /// Withdraws the registrations of a wait that ended (but that of partition index
    /// `settled`, done already), so that no later publish wakes a task that is not
    /// waiting.
    #[inline]
    pub(super) fn cancel_ring_wait(&mut self, settled: Option<usize>) {
        if self.waiting {
            self.waiting = false;
            for (i, r) in self.ring.iter_mut().enumerate() {
                if Some(i) != settled {
                    r.settle();
                }
            }
        }
    }

    /// [`Drop`] on the ring: leaves every partition's wait list.
    pub(super) fn leave_rings(&mut self) {
        self.ring.iter_mut().for_each(RingPart::leave);
    }
}

/// Where a reader of ring partition `p` starts for `start`: as `start_position` on the
/// locked log (an offset past the end is an error; one already gone reads as lagged).
pub(crate) fn ring_start<T>(ring: &PartRing<T>, p: usize, start: StartAt) -> Result<Start, Error> {
    Ok(match start {
        StartAt::Earliest => Start::Earliest,
        StartAt::Latest => Start::Latest,
        StartAt::Offset(offset) if offset <= ring.end() => Start::Offset(offset),
        StartAt::Offset(offset) => {
            return Err(Error::OffsetOutOfRange {
                offset,
                partition: p as u32,
                high: ring.end(),
            })
        }
    })
}

/// The ring's errors at a registration or seek, as memq's.
pub(crate) fn ring_error(e: memq_ring::RingError, p: usize, capacity: u64) -> Error {
    match e {
        memq_ring::RingError::PastEnd { asked, end } => Error::OffsetOutOfRange {
            offset: asked,
            partition: p as u32,
            high: end,
        },
        // No entry for another reader could be allocated.
        _ => Error::CapacityTooLarge {
            capacity: capacity as usize,
        },
    }
}
