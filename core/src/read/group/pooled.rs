//! The receive path of a group whose members share a [`Pool`]: an automatic-commit
//! group on a one-partition topic without a TTL or `DropOldest`, where every member
//! reads the one partition.
//!
//! # Locks
//!
//! Lock order: the pool, then the partition. A poll takes the pool's lock and hands over
//! what the pool holds without the partition's lock. Only when the pool runs out does it
//! take the partition's lock too, the pool's still held, so that refills go into the
//! pool in offset order and nobody registers to wait while the pool has messages: a
//! member registers only with both held and the pool empty, and a member that refills
//! the pool wakes every waiting member with both held. Nothing is woken or dropped
//! (wakers, a deleted group's leftovers) until both are released.
//!
//! # How a poll ends
//!
//! [`PoolExit`] names each way out and why it is taken; the decision is made under the
//! locks and carried out by [`Consumer::finish_pooled`] after them.
//!
//! Layer: on the group's [`Pool`] and the partition's log, sharing the read loop and the
//! wait bookkeeping of the plain path ([`super::receive`]).

use alloc::collections::VecDeque;
use core::task::{Poll, Waker};

use super::accept::Accept;
use super::consumer::Consumer;
use super::receive::{
    note_lag, pass_on_wakeup, read_run, register, GroupCursor, Received, Run, Taken,
};
use super::shared::Pool;
use crate::error::RecvError;
use crate::log::{Dest, Entry};
use crate::partition::Shared;
use crate::partition::{Fetcher, GroupId, PartLog};
use crate::read::to_message;
use crate::sync::Mutex;
use crate::wait::{SpentWakers, WaitKey, WakeList};

/// How many messages a member fetches into its group's [`Pool`] per visit.
pub(super) const READ_AHEAD: usize = 32;

/// How a pooled poll ends: decided with the pool's lock (and perhaps the partition's)
/// held, carried out by [`Consumer::finish_pooled`] once both are released.
enum PoolExit<T> {
    /// The receive's [`Accept`] declined the next message, which stays where it was (at
    /// the front of the pool, or in the partition with the pool empty) for the next
    /// receive of any member. A wake-up this member used goes on: under the partition's
    /// lock if the poll `visited` it, else as the member's wait ends.
    Declined { visited: bool },
    /// The group was deleted: its cell was revoked, or its position is gone from the
    /// partition. What was taken before is handed over and reported, else `Closed`;
    /// what the pool still held (`stale`) is dropped outside every lock.
    Deleted { stale: VecDeque<Entry<T>> },
    /// The pool alone served the receive, without the partition's lock. `next` is the
    /// offset after the last message taken (for [`Shared::ahead_consumed`]); `emptied`
    /// if that left the pool empty, which may finish the group's drain after close.
    FromPool { next: u64, emptied: bool },
    /// The poll visited the partition and took messages (from the pool before it, from
    /// the partition, or both). `unwoken` if waiting members remain that one
    /// [`WakeList`] could not hold; `drained_closed` if the partition is closed and read
    /// to its end.
    Refilled { unwoken: bool, drained_closed: bool },
    /// The group's position was behind the retained window: only where the group
    /// started inside what a reader had fetched ahead out of a releasing log (pools
    /// exist only without a TTL or `DropOldest`); reported as everywhere else.
    Lagged(u64),
    /// Closed, the pool empty and the partition read to its end: the group (which reads
    /// only this partition) is drained.
    Drained,
    /// Nothing to take now; the member registered to wait on the partition if it waits
    /// (`registered`).
    Wait { registered: bool },
}

/// What a pooled poll uses of its member while it holds the pool's lock, borrowed apart
/// from the group (whose pool is locked).
struct PoolVisit<'m, T> {
    shared: &'m Shared<T>,
    id: GroupId,
    /// The member's wait registration on the partition.
    key: &'m mut Option<WaitKey>,
    /// See `Consumer::pool_acted` and `Consumer::pool_refill`.
    acted: &'m mut usize,
    refill: &'m mut usize,
    as_stream: bool,
}

impl<T> Consumer<T> {
    /// [`Consumer::poll_inner`] for a member of a group with a [`Pool`]; `None` if the
    /// group has none (the member then takes the plain path).
    #[inline]
    pub(super) fn poll_pooled<A: Accept<T>>(
        &mut self,
        out: &mut Received<'_, T>,
        waker: Option<&Waker>,
        accept: &mut A,
    ) -> Option<Poll<Result<Taken<T>, RecvError>>>
    where
        T: Clone,
    {
        // Wakers let go of under either lock, dropped after both; wake-ups found under
        // the partition's lock, woken after both.
        let mut spent = SpentWakers::new();
        let mut wl = WakeList::new();
        let Consumer {
            shared,
            group,
            keys,
            pool_acted,
            pool_refill,
            as_stream,
            ..
        } = self;
        let pool = group.pool.as_ref()?;
        let mut visit = PoolVisit {
            shared,
            id: group.ids[0],
            key: &mut keys[0],
            acted: pool_acted,
            refill: pool_refill,
            as_stream: *as_stream,
        };
        let exit = visit.run(pool, out, waker, accept, &mut spent, &mut wl);
        wl.wake_all();
        Some(self.finish_pooled(exit, out))
    }

    /// Carries out `exit` with no lock held (see [`PoolExit`] for each).
    #[inline]
    fn finish_pooled(
        &mut self,
        exit: PoolExit<T>,
        out: &mut Received<'_, T>,
    ) -> Poll<Result<Taken<T>, RecvError>> {
        match exit {
            PoolExit::Declined { visited } => {
                self.cancel_wait_except(visited.then_some(0));
                Poll::Ready(Ok((0, None)))
            }
            PoolExit::Deleted { stale } => {
                drop(stale);
                self.cancel_wait();
                Poll::Ready(if out.got > 0 {
                    // Taken before the deletion: handed over, and reported.
                    Ok(out.finish())
                } else {
                    Err(RecvError::Closed)
                })
            }
            PoolExit::FromPool { next, emptied } => {
                self.shared.ahead_consumed(0, next, &mut self.pool_acted);
                // Handing over the last pooled message may finish the group's drain after
                // close, without the partition's lock: members waiting for it must hear.
                let drained_closed = emptied && self.shared.closed_after_handover();
                self.end_wait(None, drained_closed);
                Poll::Ready(Ok(out.finish()))
            }
            PoolExit::Refilled {
                unwoken,
                drained_closed,
            } => {
                if unwoken {
                    self.wake_group_members(0);
                }
                self.end_wait(Some(0), drained_closed);
                Poll::Ready(Ok(out.finish()))
            }
            PoolExit::Lagged(missed) => {
                self.cancel_wait_except(Some(0));
                Poll::Ready(Err(RecvError::Lagged(missed)))
            }
            PoolExit::Drained => {
                self.cancel_wait();
                Poll::Ready(Err(RecvError::Closed))
            }
            PoolExit::Wait { registered } => {
                self.waiting |= registered;
                Poll::Pending
            }
        }
    }
}

impl<T: Clone> PoolVisit<'_, T> {
    /// The poll under the locks: the pool first, then (if it ran out) the partition;
    /// both are released when this returns.
    #[inline]
    fn run<A: Accept<T>>(
        &mut self,
        pool: &Mutex<Pool<T>>,
        out: &mut Received<'_, T>,
        waker: Option<&Waker>,
        accept: &mut A,
        spent: &mut SpentWakers,
        wl: &mut WakeList,
    ) -> PoolExit<T> {
        // No clock reading: a pool is only used without a TTL, so nothing here expires
        // (and the clock must not be read under the pool's lock anyway).
        let mut pool = pool.lock_for(out.is_batch());
        if pool.refills != *self.refill {
            *self.refill = pool.refills;
            *self.acted = 0;
        }
        if let Some(exit) = self.take_from_pool(&mut pool, out, accept) {
            return exit;
        }
        // The pool is empty (a batch may want more than it held): read under the
        // partition's lock, the pool's still held.
        let mut log = self.shared.parts[0].log.lock_for(out.is_batch());
        // A visit under the lock ends the memory of acted-on wake positions (see
        // `Shared::ahead_consumed`).
        *self.acted = 0;
        self.visit_partition(&mut log, &mut pool, out, waker, accept, spent, wl)
    }

    /// Hands over what the pool holds, under its lock only. `None` if the pool ran out
    /// before the receive had all it asked for: the poll goes on to the partition.
    #[inline]
    fn take_from_pool<A: Accept<T>>(
        &mut self,
        pool: &mut Pool<T>,
        out: &mut Received<'_, T>,
        accept: &mut A,
    ) -> Option<PoolExit<T>> {
        let clocked = self.shared.stamp();
        let mut last = None;
        while !out.is_full() {
            if !A::ALL && out.got == 0 {
                if let Some(e) = pool.front() {
                    if !accept.accept(&e.value) {
                        return Some(PoolExit::Declined { visited: false });
                    }
                }
            }
            match pool.take() {
                Ok(Some(e)) => {
                    last = Some(e.offset);
                    out.push(to_message(0, e, clocked));
                }
                Ok(None) => break,
                Err(stale) => return Some(PoolExit::Deleted { stale }),
            }
        }
        let next = last.filter(|_| out.is_full())? + 1;
        Some(PoolExit::FromPool {
            next,
            emptied: pool.buf.is_empty(),
        })
    }

    /// Reads from the partition, both locks held and the pool empty: into the pool for a
    /// single receive, straight to the caller for a batch.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn visit_partition<A: Accept<T>>(
        &mut self,
        log: &mut PartLog<T>,
        pool: &mut Pool<T>,
        out: &mut Received<'_, T>,
        waker: Option<&Waker>,
        accept: &mut A,
        spent: &mut SpentWakers,
        wl: &mut WakeList,
    ) -> PoolExit<T> {
        let id = self.id;
        let cursor = match log.group_ref(id).map(|g| g.cursor) {
            Some(c) if log.ahead_is(c, &pool.cell) => c,
            // Deleted (its cell taken back with its position): the pool is empty.
            _ => {
                return PoolExit::Deleted {
                    stale: VecDeque::new(),
                }
            }
        };
        let release = self.shared.release_on_read;
        // A batch goes straight to the user; a single receive fetches into the pool.
        let dest = match (release, out.is_batch()) {
            (false, _) => Dest::Copy,
            (true, true) => Dest::User,
            (true, false) => Dest::Held,
        };
        let at = GroupCursor {
            p: 0,
            id,
            cursor,
            dest,
            release,
        };
        let old = log.cursor(cursor);
        // Messages taken from the pool are not followed by a gap in the same batch: the
        // gap is the next receive's to report (a batch holds messages or reports a gap).
        if out.got == 0 || !log.gap_at(cursor, dest) {
            let hold = (!out.is_batch()).then_some(&mut *pool);
            match read_run(log, at, out, accept, hold, self.shared.stamp()) {
                Run::Read => {}
                Run::Declined => {
                    // Left in the log (the pool is empty), nothing fetched or counted; a
                    // wake-up this member used goes on.
                    if let Some(g) = log.group(id) {
                        pass_on_wakeup(&mut g.waiters, *self.key, true, spent, wl);
                    }
                    return PoolExit::Declined { visited: true };
                }
                Run::Lagged(missed) => {
                    note_lag(self.shared, log, at, *self.key, missed, spent, wl);
                    return PoolExit::Lagged(missed);
                }
            }
        }
        if log.cursor(cursor) > old || out.got > 0 {
            return self.refilled(log, pool, cursor, out.is_batch(), spent, wl);
        }
        if log.closed {
            return PoolExit::Drained;
        }
        if let (Some(w), Some(g)) = (waker, log.group(id)) {
            register(&mut g.waiters, self.key, w, self.as_stream, spent);
        }
        PoolExit::Wait {
            registered: waker.is_some(),
        }
    }

    /// Ends a visit that took messages: after a batch, fetches into the pool what the
    /// members will most likely ask for next; wakes every waiting member if the pool or
    /// the partition has more; lets in publishers the move made room for.
    #[inline(always)]
    fn refilled(
        &mut self,
        log: &mut PartLog<T>,
        pool: &mut Pool<T>,
        cursor: usize,
        batch: bool,
        spent: &mut SpentWakers,
        wl: &mut WakeList,
    ) -> PoolExit<T> {
        if batch {
            let by = Fetcher::Pool {
                group: self.id,
                release: self.shared.release_on_read,
            };
            log.read_ahead(cursor, READ_AHEAD, &mut pool.buf, by);
        }
        if !pool.buf.is_empty() {
            pool.refills = pool.refills.wrapping_add(1);
        }
        let more = !pool.buf.is_empty() || log.fetched(cursor) < log.high;
        let mut unwoken = false;
        if let Some(g) = log.group(self.id) {
            g.waiters.settle(*self.key, spent);
            if more && g.waiters.waiting() > 0 {
                // The pool has messages again: every member waiting may take one.
                unwoken = g.waiters.notify_all(wl);
            }
        }
        self.shared.reader_advanced(log, wl);
        PoolExit::Refilled {
            unwoken,
            drained_closed: log.finished(cursor),
        }
    }
}
