//! The member of an explicit-ack group ([`AckConsumer`]): its receive, which takes a
//! lease on a partition's next message (or moves it to the dead-letter topic, or reports
//! a lag), its waiting, and its futures ([`AckRecv`], [`AckRecvMany`]).
//!
//! Part of the ack layer: drives the lease state beside it, and depends on the group's
//! member ([`Consumer`]) for membership and waiting, on the log and on the topic's shared
//! state; the time layer's alarms wake it when a lease or delay runs out.

use alloc::vec::Vec;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;

use super::config::{AckConfig, AckSettings};
use super::dead_letter::move_letter;
use super::delivery::{Delivery, Lease};
use super::state::{earlier, PState};
use super::visit::{Picking, Take, Visit, Wait};
use super::{acks_of, release_hold, settings_of};
use crate::config::StartAt;
use crate::error::{Error, RecvError, TryRecvError};
use crate::partition::Shared;
use crate::read::group::{Consumer, GroupShared};
use crate::sync::Arc;
use crate::time::Alarm;
use crate::wait::{SpentWakers, WakeList};

/// An explicit-ack group's hold on the ring of partition `p` (a topic on the ring
/// engine), locked (under the partition's lock); `None` on the locked log. Its content is
/// `None` once the group is deleted.
#[cfg(target_has_atomic = "64")]
fn hold_of<T>(
    group: &GroupShared<T>,
    p: usize,
) -> Option<crate::sync::MutexGuard<'_, Option<super::visit::RingHold<T>>>> {
    group.holds.get(p).map(|h| h.lock())
}

/// On the locked log (a target without 64-bit atomics), there is no hold.
#[cfg(not(target_has_atomic = "64"))]
fn hold_of<'a, T>(
    _group: &'a GroupShared<T>,
    _p: usize,
) -> Option<&'a mut Option<super::visit::RingHold<T>>> {
    None
}

/// Lets the ring's writers have what comes before `to`, without waking them (the caller
/// holds memq's locks: `Shared::wake_ring_writers` after them); whether it moved.
#[cfg(target_has_atomic = "64")]
fn advance_quietly<T>(hold: &mut super::visit::RingHold<T>, to: u64) -> bool {
    hold.advance_quietly(to)
}

#[cfg(not(target_has_atomic = "64"))]
fn advance_quietly<T>(_hold: &mut super::visit::RingHold<T>, _to: u64) -> bool {
    false
}

/// How a poll's sweep over the member's partitions ended ([`AckConsumer::sweep`]).
enum Sweep<T> {
    /// A delivery, or an error, for the caller.
    Ready(Result<Delivery<T>, RecvError>),
    /// A message was moved to the dead-letter topic: sweep again.
    Again,
    /// Nothing to take now.
    Empty {
        /// Some partition is not done with: the member waits there.
        pending: bool,
        /// The earliest lease end or redelivery time among them.
        earliest: Option<u64>,
    },
}

/// A member of an explicit-ack group: each [`Delivery`] is a lease to ack, nack, reject
/// or touch.
///
/// Made by [`Topic::group_acked`](crate::Topic::group_acked). Dropping it leaves the group and returns its leases to
/// the group at once.
pub struct AckConsumer<T> {
    inner: Consumer<T>,
    /// The timer wake-up last scheduled: its deadline, its task, whether it rang.
    scheduled: Option<Alarm>,
    /// A lag met by a batch receive after it had deliveries to return: reported by the
    /// next receive, before anything else.
    lagged: Option<u64>,
}

impl<T> fmt::Debug for AckConsumer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AckConsumer")
            .field("member", &self.inner)
            .finish()
    }
}

/// One unacknowledged message of a group, for inspection.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PendingInfo {
    /// Its partition.
    pub partition: u32,
    /// Its offset.
    pub offset: u64,
    /// The member it was last delivered to.
    pub member: u64,
    /// How many times it was delivered.
    pub deliveries: u32,
    /// Time since its first delivery.
    pub age: Duration,
    /// Whether a member holds it now (`true`) or it waits for redelivery.
    pub leased: bool,
}

impl<T> AckConsumer<T> {
    /// Joins the explicit-ack group `name` of the topic (see `Topic::group_acked`).
    pub(crate) fn join(
        shared: &Arc<Shared<T>>,
        name: &str,
        start: StartAt,
        config: AckConfig<T>,
    ) -> Result<Self, Error> {
        let settings = AckSettings::resolve(config, shared.clock.as_ref())?;
        let inner = crate::read::group::join(shared, name, start, Some(settings))?;
        Ok(AckConsumer {
            inner,
            scheduled: None,
            lagged: None,
        })
    }
}

impl<T> AckConsumer<T> {
    /// The group's settings (always present: `group_acked` only joins groups created
    /// with them).
    fn settings(&self) -> &AckSettings<T> {
        settings_of(&self.inner.group)
    }

    /// This member's id within the group.
    pub fn member_id(&self) -> u64 {
        self.inner.id
    }

    /// The group's name.
    pub fn group_name(&self) -> &str {
        self.inner.group_name()
    }

    /// The partitions assigned to this member now (as [`Consumer::assignment`]).
    ///
    /// [`Consumer::assignment`]: crate::Consumer::assignment
    pub fn assignment(&self) -> Vec<u32> {
        self.inner.assignment()
    }

    /// The group's committed position (lowest unacknowledged offset) in `partition`.
    ///
    /// # Errors
    ///
    /// [`Error::PartitionOutOfRange`], or [`Error::UnknownGroup`] if it was deleted.
    pub fn committed(&self, partition: u32) -> Result<u64, Error> {
        self.inner.committed(partition)
    }

    /// Every unacknowledged message of the group, on every partition.
    pub fn pending(&self) -> Vec<PendingInfo> {
        let now = self.settings().now();
        let shared = &self.inner.shared;
        let mut out = Vec::new();
        for (p, part) in shared.parts.iter().enumerate() {
            let log = part.log.lock();
            let Some(acks) = log
                .group_ref(self.inner.group.ids[p])
                .and_then(|g| g.acks.as_ref())
            else {
                continue;
            };
            out.extend(acks.unacked.iter().map(|(&offset, pe)| PendingInfo {
                partition: p as u32,
                offset,
                member: pe.member,
                deliveries: pe.deliveries,
                age: Duration::from_nanos(now.saturating_sub(pe.first_delivered)),
                leased: matches!(pe.state, PState::Leased { .. }),
            }));
        }
        out
    }

    /// One attempt to take a delivery from partition `p` (locked inside), as of the
    /// group's clock reading `now`: expires what the topic's TTL drops, chooses what to
    /// take and copies its value, records the lease, answers the member's waiting, and
    /// moves the group's hold on the log.
    ///
    /// Long: one critical section, whose steps' order is the point (the registration,
    /// which runs the user's `clone`, comes after every change to the group's state).
    fn take(&mut self, p: usize, now: u64, waker: Option<&Waker>) -> Visit<T>
    where
        T: Clone,
    {
        let shared = self.inner.shared.clone();
        let group = self.inner.group.clone();
        let settings = settings_of(&group);
        let mut spent = SpentWakers::new();
        // Wake-ups of other members, kept apart: `expire` may fill `wl` with publishers.
        let mut watch = WakeList::new();
        let mut wl = WakeList::new();
        // Expired values, dropped after the lock.
        let mut dead = Vec::new();
        // The writers of a ring partition to wake after the lock (declared before it).
        let mut writers = RingWriters(None);
        // The topic's clock (the user's code) is read before the lock is taken.
        let topic_now = shared.expiry_now();
        let mut log = shared.parts[p].log.lock();
        shared.expire(&mut log, topic_now, &mut wl, &mut dead);
        // As `Picking::on` sees them.
        let bounds = shared.ack_bounds(p, &log);
        let (low, high, closed) = (bounds.low, bounds.high, bounds.closed);
        let retained_from = bounds.retained_from;
        let mut holding = hold_of(&group, p); // On a ring partition, under the lock.
        let mut hold = holding.as_deref_mut().and_then(Option::as_mut);
        let id = group.ids[p];
        let Some(Picking {
            pick,
            was_done,
            unleased,
        }) = Picking::on(&mut log, hold.as_deref_mut(), bounds, settings, id, p, now)
        else {
            return Visit::GONE;
        };
        let g = log.group_found(id);
        let cursor = g.cursor;
        let (acks, _) = acks_of(g);
        let picked = pick.record(acks, p, self.inner.id, now, settings.ack_wait, low);
        let holds_from = acks.holds_from(retained_from);
        let done = acks.is_drained(closed, high);
        let deadline = acks.next_deadline();
        let wait = Wait {
            waker,
            timed: settings.timer.is_some(),
            first_lease: unleased,
            more: acks.next < high,
            done,
            deadline,
        };
        picked.count(g);
        let waits = wait.answer(g, &mut self.inner.keys[p], &picked, &mut spent, &mut watch);
        if waits.is_none() {
            // This member no longer waits here: if it was the one the others counted on
            // to look (woken, or with its timer set), another does.
            g.keep_watch(high, &mut watch);
        }
        let taken = picked.hand_over(&mut log, &shared, p);
        log.set_cursor(cursor, holds_from);
        // Lets the ring's writers have what every member settled (woken after the locks,
        // by `writers` when it is dropped, even by a panic below).
        if hold.is_some_and(|hold| advance_quietly(hold, holds_from)) {
            writers.0 = Some((&shared, p));
        }
        shared.reader_advanced(&mut log, &mut wl);
        if let Some(waits) = waits {
            // Last: the registration clones the member's waker (user code, which may
            // panic; every change above is made by then). `waiting` is set first, so a
            // registration a panic leaves in place is cancelled with the next poll's
            // answer, whatever it is, even a delivery from another partition (see
            // `Consumer::cancel_wait_except`).
            self.inner.waiting = true;
            waits.register(&mut log, id, &mut self.inner.keys[p], &mut spent);
        }
        drop((holding, log, writers));
        if done && !was_done {
            // This visit finished a closed partition (skipped a lag, dropped evicted unacked
            // messages): members waiting on it or for the group to drain may be done.
            shared.wake_drained(&group, p);
        }
        Visit {
            taken,
            done,
            deadline,
            gone: false,
        }
    }

    /// Up to `max` more leases on partition `p`, in one visit (the partition locked once),
    /// appended to `buf`: for a batch receive that took a delivery there just now. Takes
    /// only what a receive would deliver next (a redelivery that is due, else the next
    /// new message), and stops at anything else (a lag, a dead letter, nothing), which is
    /// left to the batch's next receive; it changes nothing about the member's waiting
    /// (the delivery before it ended that). Returns how many it took.
    fn take_more(&mut self, p: usize, now: u64, buf: &mut Vec<Delivery<T>>, max: usize) -> usize
    where
        T: Clone,
    {
        let shared = self.inner.shared.clone();
        let group = self.inner.group.clone();
        let settings = settings_of(&group);
        let mut watch = WakeList::new();
        let mut wl = WakeList::new();
        let mut dead = Vec::new();
        // The pick that ended the batch, if it was not a lease: a dead letter's copy is
        // the user's value, dropped after the lock (declared before it).
        let mut left = None;
        let topic_now = shared.expiry_now();
        let mut log = shared.parts[p].log.lock();
        shared.expire(&mut log, topic_now, &mut wl, &mut dead);
        let bounds = shared.ack_bounds(p, &log);
        let mut holding = hold_of(&group, p);
        let mut hold = holding.as_deref_mut().and_then(Option::as_mut);
        let id = group.ids[p];
        let mut took = 0;
        while took < max {
            let Some(picking) =
                Picking::on(&mut log, hold.as_deref_mut(), bounds, settings, id, p, now)
            else {
                // The group is gone: the next receive says so.
                return took;
            };
            if !picking.pick.is_lease() {
                left = Some(picking);
                break;
            }
            let g = log.group_found(id);
            let (acks, _) = acks_of(g);
            let picked =
                picking
                    .pick
                    .record(acks, p, self.inner.id, now, settings.ack_wait, bounds.low);
            picked.count(g);
            if let Take::Delivered(message, attempt) = picked.hand_over(&mut log, &shared, p) {
                let lease = Lease {
                    shared: shared.clone(),
                    group: group.clone(),
                    partition: p,
                };
                buf.push(Delivery::new(message, attempt, lease));
                took += 1;
            }
        }
        // As after any change to the lease book, even a visit that took nothing: choosing
        // may have changed it (leases that ran out, evicted messages let go of), and may
        // have drained a closed partition. The hold is let go of first: `release_hold`
        // moves it.
        log.group_found(id).keep_watch(bounds.high, &mut watch);
        drop(holding);
        release_hold(&shared, &group, p, log, &mut wl);
        drop(left);
        took
    }

    /// The partition the last delivery came from (the sweep's last stop), while the
    /// assignment it was made under holds: after a rebalance, the next receive reads the
    /// new one first.
    fn last_partition(&self) -> Option<usize> {
        let n = self.inner.assigned.len();
        (n > 0 && self.inner.assignment_current())
            .then(|| self.inner.assigned[(self.inner.next + n - 1) % n])
    }

    fn poll_delivery(&mut self, waker: Option<&Waker>) -> Poll<Result<Delivery<T>, RecvError>>
    where
        T: Clone,
    {
        // One clock reading for the whole poll: a message that a move to a full
        // dead-letter topic put back for later is then not met again by this poll,
        // however slowly it runs.
        let now = self.settings().now();
        self.poll_delivery_at(waker, now)
    }

    /// [`Self::poll_delivery`] as of the group's clock reading `now`.
    fn poll_delivery_at(
        &mut self,
        waker: Option<&Waker>,
        now: u64,
    ) -> Poll<Result<Delivery<T>, RecvError>>
    where
        T: Clone,
    {
        if let Some(missed) = self.lagged.take() {
            return self.finish(Err(RecvError::Lagged(missed)));
        }
        loop {
            if self.inner.refresh() {
                return self.finish(Err(RecvError::Closed));
            }
            match self.sweep(now, waker) {
                Sweep::Ready(r) => return self.finish(r),
                // The move may have opened a slot, or closed the partition.
                Sweep::Again => continue,
                Sweep::Empty { pending, earliest } => {
                    return self.wait(waker, now, pending, earliest);
                }
            }
        }
    }

    /// Ends a poll with `r`: the member no longer waits anywhere.
    fn finish<R>(&mut self, r: R) -> Poll<R> {
        self.inner.cancel_wait();
        Poll::Ready(r)
    }

    /// Visits the member's partitions once, in turn from where the last delivery came
    /// from, until one has something for it.
    fn sweep(&mut self, now: u64, waker: Option<&Waker>) -> Sweep<T>
    where
        T: Clone,
    {
        let n = self.inner.assigned.len();
        let mut all_done = true;
        let mut gone = false;
        let mut earliest: Option<u64> = None;
        for k in 0..n {
            let idx = (self.inner.next + k) % n;
            let p = self.inner.assigned[idx];
            let visit = self.take(p, now, waker);
            all_done &= visit.done;
            gone |= visit.gone;
            earliest = earlier(earliest, visit.deadline);
            match visit.taken {
                Take::Delivered(message, attempt) => {
                    self.inner.next = idx + 1;
                    let lease = Lease {
                        shared: self.inner.shared.clone(),
                        group: self.inner.group.clone(),
                        partition: p,
                    };
                    return Sweep::Ready(Ok(Delivery::new(message, attempt, lease)));
                }
                Take::Lagged(missed) => return Sweep::Ready(Err(RecvError::Lagged(missed))),
                Take::DeadLetter(letter, value) => {
                    move_letter(&self.inner.shared, &self.inner.group, letter, value);
                    return Sweep::Again;
                }
                Take::Nothing => {}
            }
        }
        if gone {
            // The group was deleted meanwhile (after this poll's `refresh`): `Closed` now,
            // as a plain member's round says it, not `Empty` until the next poll (a
            // `try_recv` racing `delete_group` once said `Empty`; found in review).
            return Sweep::Ready(Err(RecvError::Closed));
        }
        Sweep::Empty {
            pending: n > 0 && !all_done,
            earliest,
        }
    }

    /// Ends a poll that found nothing: waits on its partitions (`pending`: some are not
    /// done with) with the timer set for the `earliest` deadline among them, or, with
    /// none to wait on, for the group to drain or for a partition; `Closed` once the
    /// topic is closed and the group drained.
    fn wait(
        &mut self,
        waker: Option<&Waker>,
        now: u64,
        pending: bool,
        earliest: Option<u64>,
    ) -> Poll<Result<Delivery<T>, RecvError>> {
        if pending {
            if let Some(w) = waker {
                if let Some(at) = earliest {
                    self.schedule(w, at, now);
                }
                self.inner.recheck_assignment(w);
            }
            self.inner.waiting |= waker.is_some();
            return Poll::Pending;
        }
        if self.inner.shared.is_closed() && self.inner.group_drained() {
            return self.finish(Err(RecvError::Closed));
        }
        if let Some(w) = waker {
            if self.inner.park_idle(w) {
                w.wake_by_ref();
            }
        }
        self.inner.waiting |= waker.is_some();
        Poll::Pending
    }

    /// Asks the timer to wake `waker` at clock time `at` unless a wake-up of the same task
    /// at or before then is already scheduled and has not rung. One scheduled for another
    /// waker (the member was polled from another task, or by a blocking call after a
    /// timed-out async one) does not count: it would wake the wrong task. One that rang
    /// before the clock showed its time does not either (see [`Alarm`]).
    fn schedule(&mut self, waker: &Waker, at: u64, now: u64) {
        if self
            .scheduled
            .as_ref()
            .is_some_and(|a| a.at() > now && a.covers(waker, at))
        {
            return;
        }
        if let Some(timer) = self.settings().timer.clone() {
            let (alarm, arm) = Alarm::new(waker, at, now, self.scheduled.as_ref());
            // The replaced alarm goes first, withdrawing its wake-up (no lock is held).
            self.scheduled = Some(alarm);
            arm.set(&*timer);
        }
    }

    /// Receives the next delivery (a redelivery first, else the next new message),
    /// waiting for one if needed.
    ///
    /// # Errors
    ///
    /// [`RecvError::Lagged`] if new messages were evicted before the group read them;
    /// [`RecvError::Closed`] when the topic is closed and every message was acknowledged
    /// or dead-lettered, or the group was deleted.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a lease is taken only in the poll that returns it, and a wake-up the
    /// dropped future had received passes to another waiting member.
    pub fn recv(&mut self) -> AckRecv<'_, T> {
        AckRecv { consumer: self }
    }

    /// Receives a delivery if one is available now.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if none is; otherwise as [`AckConsumer::recv`].
    pub fn try_recv(&mut self) -> Result<Delivery<T>, TryRecvError>
    where
        T: Clone,
    {
        match self.poll_delivery(None) {
            Poll::Ready(r) => r.map_err(TryRecvError::from),
            Poll::Pending => Err(TryRecvError::Empty),
        }
    }

    /// Waits for at least one delivery, then appends up to `limit` to `buf` (redeliveries
    /// first, as [`AckConsumer::recv`] takes them) and returns how many. Each is leased
    /// and settled on its own. Returns `Ok(0)` only when the topic is closed and every
    /// message was acknowledged or dead-lettered, or the group was deleted (or `limit`
    /// is 0). Fewer than `limit`
    /// come back when no more are available now or `max_in_flight` is reached.
    ///
    /// A partition is visited once for all it has for the batch (its lock taken once),
    /// then the next: a batch takes from one partition after another, not in turns.
    ///
    /// # Errors
    ///
    /// As [`AckConsumer::recv`]. A lag met after some deliveries were taken ends the
    /// batch, and the next receive reports it.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: deliveries are taken and appended to `buf` only in the poll that
    /// returns them.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[allow(unused_imports)] // for the cfg below
    /// # use memq_core as memq;
    /// # // Leases need a clock: `std`'s, or one given with `AckConfig::clock`.
    /// # #[cfg(feature = "std")]
    /// # {
    /// use memq::{AckConfig, StartAt, Topic};
    ///
    /// let topic = Topic::with_capacity(16)?;
    /// let mut member = topic.group_acked("jobs", StartAt::Earliest, AckConfig::new())?;
    /// topic.try_publish_batch(vec![1, 2, 3])?;
    /// let mut batch = Vec::new();
    /// let n = futures_executor::block_on(member.recv_many(&mut batch, 10))?;
    /// assert_eq!(n, 3);
    /// for d in batch {
    ///     d.ack()?;
    /// }
    /// assert_eq!(member.committed(0)?, 3);
    /// # }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recv_many<'a>(
        &'a mut self,
        buf: &'a mut Vec<Delivery<T>>,
        limit: usize,
    ) -> AckRecvMany<'a, T> {
        AckRecvMany {
            consumer: self,
            buf,
            limit,
        }
    }

    /// Appends up to `limit` deliveries available now to `buf` and returns how many.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if none is available; otherwise as
    /// [`AckConsumer::recv_many`].
    pub fn try_recv_many(
        &mut self,
        buf: &mut Vec<Delivery<T>>,
        limit: usize,
    ) -> Result<usize, TryRecvError>
    where
        T: Clone,
    {
        if limit == 0 {
            return Ok(0);
        }
        match self.poll_many(buf, limit, None) {
            Poll::Ready(Ok(n)) => Ok(n),
            Poll::Ready(Err(e)) => Err(e.into()),
            Poll::Pending => Err(TryRecvError::Empty),
        }
    }

    /// One delivery as [`AckConsumer::recv`] polls for it, then as many more as are
    /// available now, up to `limit` (at least 1). `Closed` is returned as an error.
    fn poll_many(
        &mut self,
        buf: &mut Vec<Delivery<T>>,
        limit: usize,
        waker: Option<&Waker>,
    ) -> Poll<Result<usize, RecvError>>
    where
        T: Clone,
    {
        // One clock reading for the whole batch, as for one delivery.
        let now = self.settings().now();
        match self.poll_delivery_at(waker, now) {
            Poll::Ready(Ok(d)) => buf.push(d),
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
        let mut got = 1;
        while got < limit {
            // What else the partition of the last delivery has, in one visit.
            if let Some(p) = self.last_partition() {
                got += self.take_more(p, now, buf, limit - got);
                if got == limit {
                    break;
                }
            }
            match self.poll_delivery_at(None, now) {
                Poll::Ready(Ok(d)) => {
                    buf.push(d);
                    got += 1;
                }
                Poll::Ready(Err(RecvError::Lagged(missed))) => {
                    self.lagged = Some(missed);
                    break;
                }
                // `Closed` comes back to the next receive by itself.
                Poll::Ready(Err(RecvError::Closed)) | Poll::Pending => break,
            }
        }
        Poll::Ready(Ok(got))
    }
}

impl<T> Drop for AckConsumer<T> {
    fn drop(&mut self) {
        // Give every lease back before leaving, so the others can take them at once.
        let now = self.settings().now();
        let shared = self.inner.shared.clone();
        for (p, part) in shared.parts.iter().enumerate() {
            let mut wl = WakeList::new();
            let mut log = part.log.lock();
            let Some(g) = log.group(self.inner.group.ids[p]) else {
                continue;
            };
            if let Some(acks) = g.acks.as_mut() {
                let released = acks.release_member(self.inner.id, now);
                g.waiters.notify_many(released, &mut wl);
            }
        }
        // `inner` leaves the group (and rebalances) when it drops.
    }
}

/// Future of [`AckConsumer::recv`].
#[must_use = "futures do nothing unless polled"]
pub struct AckRecv<'a, T> {
    consumer: &'a mut AckConsumer<T>,
}

impl<T> fmt::Debug for AckRecv<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AckRecv").finish_non_exhaustive()
    }
}

impl<T: Clone> Future for AckRecv<'_, T> {
    type Output = Result<Delivery<T>, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().consumer.poll_delivery(Some(cx.waker()))
    }
}

impl<T> Drop for AckRecv<'_, T> {
    fn drop(&mut self) {
        self.consumer.inner.cancel_wait();
    }
}

/// Future of [`AckConsumer::recv_many`].
#[must_use = "futures do nothing unless polled"]
pub struct AckRecvMany<'a, T> {
    consumer: &'a mut AckConsumer<T>,
    buf: &'a mut Vec<Delivery<T>>,
    limit: usize,
}

impl<T> fmt::Debug for AckRecvMany<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AckRecvMany")
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl<T: Clone> Future for AckRecvMany<'_, T> {
    type Output = Result<usize, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.limit == 0 {
            return Poll::Ready(Ok(0));
        }
        match this
            .consumer
            .poll_many(this.buf, this.limit, Some(cx.waker()))
        {
            Poll::Ready(Err(RecvError::Closed)) => Poll::Ready(Ok(0)),
            other => other,
        }
    }
}

impl<T> Drop for AckRecvMany<'_, T> {
    fn drop(&mut self) {
        self.consumer.inner.cancel_wait();
    }
}

/// Wakes the writers parked on ring partition `.1` of topic `.0` when dropped, if set: an
/// explicit-ack visit that moved its group's hold there (`Hold::advance_quietly`) drops
/// it after letting go of its locks, or while a panic unwinds from the waker's clone.
struct RingWriters<'a, T>(Option<(&'a Shared<T>, usize)>);

impl<T> Drop for RingWriters<'_, T> {
    fn drop(&mut self) {
        if let Some((shared, p)) = self.0 {
            shared.wake_ring_writers(p);
        }
    }
}
