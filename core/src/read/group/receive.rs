//! The plain receive path of a group member, and what it shares with the pooled one.
//!
//! A poll ([`Consumer::poll_with`]) first re-reads the member's assignment; a member of
//! a group with a shared pool goes to [`super::pooled`], every other member visits its
//! assigned partitions in turn, starting after the one it last took from, under one
//! partition's lock at a time (never two), until it has what it asked for.
//!
//! How a plain poll ends, and why:
//!
//! - `Closed` at once: the group was deleted (the assignment says so, or a visit finds the
//!   group's position gone).
//! - A message, or a batch: taken from one or more partitions; the wait ends.
//! - `Declined` (`recv_if`): the first message was not accepted and stays where it was;
//!   a wake-up the member used goes on to the next waiting member.
//! - `Lagged`: the group's position was behind the retained window on a partition;
//!   the gap is reported before any message of a batch, never after one.
//! - `Pending`, registered on each open partition: nothing to take yet.
//! - Nothing assigned, or every assigned partition closed and read to its end: the
//!   member waits for the whole group ([`Consumer::wait_for_group`]), `Closed` once it
//!   has drained.
//!
//! Shared with the pooled path: where a poll puts what it takes ([`Received`]), the
//! read loop under a partition's lock ([`read_run`]), the bookkeeping of a gap
//! ([`note_lag`]), a wake-up passed on ([`pass_on_wakeup`]) and a wait registered
//! ([`register`]), and the end of a served wait ([`Consumer::end_wait`]).
//!
//! Layer: on the partitions' logs and wait lists, through the topic's shared state.

use alloc::vec::Vec;
use core::task::{Poll, Waker};

use super::accept::{Accept, TakeAny};
use super::consumer::Consumer;
use super::pooled::READ_AHEAD;
use super::shared::Pool;
use crate::error::RecvError;
use crate::log::{Dest, Entry, Read};
use crate::message::Message;
use crate::partition::Shared;
use crate::partition::{Fetcher, GroupId, PartLog};
use crate::read::to_message;
use crate::wait::{SpentWakers, WaitKey, WaiterList, WakeList};

/// How many messages one poll took, and the message itself when no buffer was given.
pub(super) type Taken<T> = (usize, Option<Message<T>>);

/// Where a poll puts what it takes: the caller's buffer for a batch, or one message.
pub(super) struct Received<'b, T> {
    buf: Option<&'b mut Vec<Message<T>>>,
    single: Option<Message<T>>,
    /// Messages taken so far in this poll.
    pub(super) got: usize,
    limit: usize,
}

impl<'b, T> Received<'b, T> {
    #[inline]
    fn new(buf: Option<&'b mut Vec<Message<T>>>, limit: usize) -> Self {
        Self {
            buf,
            single: None,
            got: 0,
            limit,
        }
    }

    /// Whether the poll is a batch receive (`recv_many`): it locks without backoff and
    /// its messages go straight to the caller's buffer.
    #[inline]
    pub(super) fn is_batch(&self) -> bool {
        self.buf.is_some()
    }

    /// Whether the poll has taken all it asked for.
    #[inline]
    pub(super) fn is_full(&self) -> bool {
        self.got == self.limit
    }

    #[inline]
    pub(super) fn push(&mut self, m: Message<T>) {
        match self.buf.as_deref_mut() {
            Some(b) => b.push(m),
            None => self.single = Some(m),
        }
        self.got += 1;
    }

    /// What the poll took, to return.
    #[inline]
    pub(super) fn finish(&mut self) -> Taken<T> {
        (self.got, self.single.take())
    }
}

/// The group's position on one partition, as a read under that partition's lock uses it.
#[derive(Clone, Copy)]
pub(super) struct GroupCursor {
    /// The partition.
    pub(super) p: usize,
    /// The group's id in the partition's log.
    pub(super) id: GroupId,
    /// The index of the group's position in the log.
    pub(super) cursor: usize,
    /// Where the messages read go (decides whether a releasing log moves them out).
    pub(super) dest: Dest,
    /// The topic's `release_on_read`.
    pub(super) release: bool,
}

/// How a [`read_run`] ended.
pub(super) enum Run {
    /// The receive has all it asked for, or the partition has nothing more now.
    Read,
    /// The receive's [`Accept`] declined the first message: nothing was read.
    Declined,
    /// The group's position was behind the retained window: it moved to the oldest
    /// retained message, and this many messages were missed (and counted by the log).
    Lagged(u64),
}

/// Reads at `at` into `out`, with the partition's lock held (`log`), until `out` is
/// full or the partition has nothing more; the poll's first message only if `accept`
/// takes it. Each message is counted in the group's `delivered` as it is read, so that
/// a `T::clone` that panics on a later read of a batch leaves the count in step with
/// the position.
///
/// With `hold` (a single receive of a pooled group), a message read is held in the pool
/// while up to [`READ_AHEAD`] more are fetched behind it, and the pool's first message is
/// the one handed over (see [`Log::hold_and_read_ahead`], which counts what it fetches).
#[inline(always)]
pub(super) fn read_run<T: Clone, A: Accept<T>>(
    log: &mut PartLog<T>,
    at: GroupCursor,
    out: &mut Received<'_, T>,
    accept: &mut A,
    mut hold: Option<&mut Pool<T>>,
    clocked: Option<core::time::Duration>,
) -> Run {
    while !out.is_full() {
        if !A::ALL && out.got == 0 {
            if let Some(v) = log.peek(at.cursor, at.dest) {
                if !accept.accept(v) {
                    return Run::Declined;
                }
            }
        }
        let e = match log.read(at.cursor, at.dest) {
            Read::Message(e) => e,
            Read::Lagged(missed) => return Run::Lagged(missed),
            Read::Empty => break,
        };
        let e = match hold.as_deref_mut() {
            Some(pool) => hold_in_pool(log, at, e, pool),
            None => {
                if let Some(g) = log.group(at.id) {
                    g.delivered += 1;
                }
                e
            }
        };
        out.push(to_message(at.p, e, clocked));
    }
    Run::Read
}

/// Holds `first`, just read at `at`, in the group's pool and fetches more behind it;
/// returns the pool's first message, to hand over now.
#[inline]
fn hold_in_pool<T: Clone>(
    log: &mut PartLog<T>,
    at: GroupCursor,
    first: Entry<T>,
    pool: &mut Pool<T>,
) -> Entry<T> {
    let Pool { buf, cell, .. } = pool;
    let by = Fetcher::Pool {
        group: at.id,
        release: at.release,
    };
    log.hold_and_read_ahead(at.cursor, first, &cell.0, READ_AHEAD + 1, buf, by)
}

/// Records, under the partition's lock, that the group's read at `at` found a gap of
/// `missed` messages: counts it in the group's `lagged`, passes on a wake-up this member
/// used when messages remain past the gap, and lets in publishers the move made room
/// for. Returns whether the skip read a closed partition to its end (which may finish
/// the group's drain, as taking its last message does).
pub(super) fn note_lag<T>(
    shared: &Shared<T>,
    log: &mut PartLog<T>,
    at: GroupCursor,
    key: Option<WaitKey>,
    missed: u64,
    spent: &mut SpentWakers,
    wl: &mut WakeList,
) -> bool {
    let more = log.fetched(at.cursor) < log.high;
    if let Some(g) = log.group(at.id) {
        g.lagged += missed;
        pass_on_wakeup(&mut g.waiters, key, more, spent, wl);
    }
    shared.reader_advanced(log, wl);
    log.finished(at.cursor)
}

/// Ends a visit that took messages at `at`, under the partition's lock: settles this
/// member's registration there (`key`) and, if more messages remain, wakes the next
/// waiting member (passing the baton, so nobody sleeps on a non-empty partition); lets
/// in publishers the move made room for. Returns whether the partition is closed and
/// now read to its end.
#[inline]
fn settle_taken<T>(
    shared: &Shared<T>,
    log: &mut PartLog<T>,
    at: GroupCursor,
    key: Option<WaitKey>,
    spent: &mut SpentWakers,
    wl: &mut WakeList,
) -> bool {
    let more = log.fetched(at.cursor) < log.high;
    if let Some(g) = log.group(at.id) {
        g.waiters.settle(key, spent);
        if more {
            g.waiters.notify_one(wl);
        }
    }
    shared.reader_advanced(log, wl);
    log.finished(at.cursor)
}

/// Ends this member's registration `key` on a partition's wait list, under the
/// partition's lock. If a wake-up had reached it and `more` (messages remain for another
/// member), the wake-up goes on to the next waiting member, since this one is not taking
/// those messages: nobody sleeps while they wait.
pub(super) fn pass_on_wakeup(
    waiters: &mut WaiterList,
    key: Option<WaitKey>,
    more: bool,
    spent: &mut SpentWakers,
    wl: &mut WakeList,
) {
    if waiters.settle(key, spent) && more {
        waiters.notify_one(wl);
    }
}

/// Registers a member's wait on one partition (see `Consumer::as_stream`).
#[inline]
pub(super) fn register(
    waiters: &mut WaiterList,
    key: &mut Option<WaitKey>,
    waker: &Waker,
    as_stream: bool,
    spent: &mut SpentWakers,
) {
    if as_stream {
        waiters.register_extra(key, waker, spent);
    } else {
        waiters.register(key, waker, spent);
    }
}

/// What a visit to one assigned partition found, its lock released again.
pub(super) enum Visit {
    /// The group's position there is gone: the group was deleted. A poll that took
    /// nothing reports `Closed` at once, as the pool does (a `try_recv` racing the
    /// deletion once said `Empty`, found by core's loom models on the ring engine).
    Deleted,
    /// The group's next read there is a gap, and this poll has taken messages already:
    /// a batch holds messages or reports a gap, so the gap is the next poll's to report.
    GapAhead,
    /// Took messages; `finished` if that read a closed partition to its end.
    Took { finished: bool },
    /// Nothing there now; the member registered to wait on it if it waits.
    Open,
    /// Nothing there, and the partition is closed.
    Closed,
    /// The receive's [`Accept`] declined the first message, which stays where it was;
    /// a wake-up this member used there went on.
    Declined,
    /// A gap of `missed` messages; `finished` as for `Took`.
    Lagged { missed: u64, finished: bool },
}

impl<T> Consumer<T> {
    /// One attempt to read up to `limit` messages (`buf` gets them; without a buffer
    /// one message is received). Registers `waker` if nothing was read.
    #[inline]
    pub(super) fn poll_inner(
        &mut self,
        buf: Option<&mut Vec<Message<T>>>,
        limit: usize,
        waker: Option<&Waker>,
    ) -> Poll<Result<Taken<T>, RecvError>>
    where
        T: Clone,
    {
        self.poll_with(buf, limit, waker, &mut TakeAny)
    }

    /// [`Consumer::poll_inner`], taking the first message only if `accept` accepts it
    /// (single receives only, `limit` 1 without a buffer). A declined message stays
    /// exactly where it was: the poll returns `Ok((0, None))`, having taken nothing, and
    /// passes on any wake-up this member used (the message waits for another member).
    #[inline]
    pub(super) fn poll_with<A: Accept<T>>(
        &mut self,
        buf: Option<&mut Vec<Message<T>>>,
        limit: usize,
        waker: Option<&Waker>,
        accept: &mut A,
    ) -> Poll<Result<Taken<T>, RecvError>>
    where
        T: Clone,
    {
        debug_assert!(A::ALL || (buf.is_none() && limit == 1));
        if self.refresh() {
            self.waiting = false;
            return Poll::Ready(Err(RecvError::Closed));
        }
        let out = Received::new(buf, limit);
        #[cfg(target_has_atomic = "64")]
        if !self.ring.is_empty() {
            return self.poll_ring(out, waker, accept);
        }
        let mut out = out;
        if self.assigned == [0] {
            if let Some(polled) = self.poll_pooled(&mut out, waker, accept) {
                return polled;
            }
        }
        self.poll_partitions(out, waker, accept)
    }

    /// The plain receive: visits the assigned partitions in turn from `next` (see the
    /// module's documentation for how it ends).
    #[inline]
    fn poll_partitions<A: Accept<T>>(
        &mut self,
        out: Received<'_, T>,
        waker: Option<&Waker>,
        accept: &mut A,
    ) -> Poll<Result<Taken<T>, RecvError>>
    where
        T: Clone,
    {
        let now = self.shared.expiry_now();
        self.round(out, waker, accept, |c, p, out, waker, accept| {
            c.visit(p, now, out, waker, accept)
        })
    }

    /// Visits the assigned partitions in turn from `next` with `visit` (the locked log's
    /// or the ring's), and ends the poll as the module's documentation says.
    #[inline(always)]
    pub(super) fn round<A: Accept<T>>(
        &mut self,
        mut out: Received<'_, T>,
        waker: Option<&Waker>,
        accept: &mut A,
        mut visit: impl FnMut(&mut Self, usize, &mut Received<'_, T>, Option<&Waker>, &mut A) -> Visit,
    ) -> Poll<Result<Taken<T>, RecvError>> {
        let n = self.assigned.len();
        let mut all_closed = true;
        let mut drained_closed = false;
        let mut deleted = false;
        // The partition whose registration this poll settled under its lock, if any.
        let mut settled = None;
        // Where this round starts: `next` moves as partitions yield, the round does not
        // (it once visited the first again and skipped the last).
        let start = self.next;
        for k in 0..n {
            if out.is_full() {
                break;
            }
            let idx = (start + k) % n;
            let p = self.assigned[idx];
            match visit(self, p, &mut out, waker, accept) {
                Visit::Deleted => deleted = true,
                Visit::Closed => {}
                Visit::Open => all_closed = false,
                Visit::GapAhead => {
                    all_closed = false;
                    break;
                }
                Visit::Took { finished } => {
                    settled = Some(p);
                    drained_closed |= finished;
                    self.next = idx + 1;
                    all_closed = false;
                }
                Visit::Declined => {
                    self.cancel_wait_except(Some(p));
                    return Poll::Ready(Ok((0, None)));
                }
                Visit::Lagged { missed, finished } => {
                    self.end_wait(Some(p), finished);
                    return Poll::Ready(Err(RecvError::Lagged(missed)));
                }
            }
        }
        if out.got > 0 {
            self.end_wait(settled, drained_closed);
            return Poll::Ready(Ok(out.finish()));
        }
        if deleted {
            self.cancel_wait();
            return Poll::Ready(Err(RecvError::Closed));
        }
        if n > 0 && !all_closed {
            if let Some(w) = waker {
                self.recheck_assignment(w);
            }
            self.waiting |= waker.is_some();
            return Poll::Pending;
        }
        self.wait_for_group(waker)
    }

    /// Visits partition `p` under its lock: expires what its TTL ends, reads into `out`,
    /// and settles this member's registration there (or registers `waker`, if the poll
    /// has nothing yet). What the visit lets go of is dropped, and woken, after the lock.
    #[inline]
    fn visit<A: Accept<T>>(
        &mut self,
        p: usize,
        now: u64,
        out: &mut Received<'_, T>,
        waker: Option<&Waker>,
        accept: &mut A,
    ) -> Visit
    where
        T: Clone,
    {
        let shared = &*self.shared;
        // Declared before the lock: what they keep is let go of after it.
        let mut dead = Vec::new();
        let mut spent = SpentWakers::new();
        let mut wl = WakeList::new();
        let mut log = shared.parts[p].log.lock_for(out.is_batch());
        shared.expire(&mut log, now, &mut wl, &mut dead);
        let id = self.group.ids[p];
        let Some(cursor) = log.group_ref(id).map(|g| g.cursor) else {
            return Visit::Deleted;
        };
        let release = shared.release_on_read;
        let old = log.cursor(cursor);
        let first = if release { log.first() } else { log.low };
        if old < first && out.got > 0 {
            return Visit::GapAhead;
        }
        let dest = if release { Dest::User } else { Dest::Copy };
        let at = GroupCursor {
            p,
            id,
            cursor,
            dest,
            release,
        };
        let key = self.keys[p];
        match read_run(&mut log, at, out, accept, None, shared.stamp()) {
            Run::Read => {}
            Run::Declined => {
                // Left in the partition, nothing counted; a wake-up this member used
                // goes on, since the message waits.
                if let Some(g) = log.group(id) {
                    pass_on_wakeup(&mut g.waiters, key, true, &mut spent, &mut wl);
                }
                return Visit::Declined;
            }
            Run::Lagged(missed) => {
                let finished = note_lag(shared, &mut log, at, key, missed, &mut spent, &mut wl);
                return Visit::Lagged { missed, finished };
            }
        }
        if log.cursor(cursor) > old {
            let finished = settle_taken(shared, &mut log, at, key, &mut spent, &mut wl);
            return Visit::Took { finished };
        }
        if log.closed {
            return Visit::Closed;
        }
        if let (0, Some(w), Some(g)) = (out.got, waker, log.group(id)) {
            register(
                &mut g.waiters,
                &mut self.keys[p],
                w,
                self.as_stream,
                &mut spent,
            );
            // Cancelled by whatever this poll returns, even a message from a later
            // partition: a registration left behind would take a wake-up meant for the
            // member that gets this partition in a rebalance.
            self.waiting = true;
        }
        Visit::Open
    }

    /// Ends the wait of a poll that is returning, after the locks are released: settles
    /// the member's other registrations (`settled`, if any, was settled under its lock,
    /// see [`Consumer::cancel_wait_except`]), and if the poll read a closed partition to
    /// its end (`drained_closed`), which may finish the group's drain, wakes the members
    /// waiting for that.
    #[inline]
    pub(super) fn end_wait(&mut self, settled: Option<usize>, drained_closed: bool) {
        self.cancel_wait_except(settled);
        if drained_closed {
            self.wake_idle();
        }
    }

    /// The end of a poll that found nothing to read because the member has no partition,
    /// or each of its partitions is closed and read to its end. The member is done only
    /// when the whole group is: until then a rebalance (another member leaving) may
    /// still hand it a partition with messages in it, so it waits among the group's idle
    /// members. The same ending as an explicit-ack member's poll in that case, which
    /// returns another `R` (its `poll_delivery` spells it out today).
    #[inline]
    pub(crate) fn wait_for_group<R>(
        &mut self,
        waker: Option<&Waker>,
    ) -> Poll<Result<R, RecvError>> {
        if self.group_done() {
            self.cancel_wait();
            return Poll::Ready(Err(RecvError::Closed));
        }
        if let Some(w) = waker {
            // Re-checked after registering: a rebalance or the last drain may have just
            // happened, and its wake-up would have missed us.
            if self.park_idle(w) {
                w.wake_by_ref();
            }
        }
        self.waiting |= waker.is_some();
        Poll::Pending
    }
}
