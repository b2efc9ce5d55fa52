//! The publish path: one attempt to append a message or a batch to a partition, and what
//! a publisher that finds no room does: park in the partition's line, hold its turn when
//! polled early, arm a TTL alarm for when the oldest message expires, and leave the line
//! when it gets on, gives up or is dropped. The [`Publish`] and [`PublishBatch`] futures.
//!
//! Layer: above the partitions' shared state (`partition`: the log, the wake position and
//! waking publishers when readers free room), the wait lists and the alarms; used by the
//! facade (`topic`) and the blocking publishes (`blocking`).

use alloc::vec::Vec;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

use crate::config::Overflow;
use crate::error::PublishError;
use crate::message::Receipt;
use crate::partition::PartLog;
use crate::partition::Shared;
use crate::sync::{MutexGuard, Ordering};
use crate::time::{Alarm, Arm};
use crate::wait::{SpentWakers, WaitKey, WakeList};

mod payload;
#[cfg(target_has_atomic = "64")]
mod ring;

pub(crate) use payload::Payload;

impl<T> Shared<T> {
    /// Whether a publisher parked on a partition (`log`, locked) and polled again before it
    /// was woken (a spurious poll, a `select!`, its own TTL alarm) must stay parked: it
    /// may take only its turn. Publishers parked before it go first, and the room promised
    /// to publishers woken before it is theirs; so it goes only as the first in line, into
    /// room beyond what was promised. A publisher that was woken, or never parked, is not
    /// held back here.
    ///
    /// Only the test of `key` is inline: most publishes never parked.
    #[inline]
    fn out_of_turn(&self, log: &mut PartLog<T>, key: Option<WaitKey>, need: u64) -> bool {
        key.is_some() && self.behind_others(log, key, need)
    }

    /// [`Shared::out_of_turn`] for a publisher that parked.
    #[inline(never)]
    fn behind_others(&self, log: &mut PartLog<T>, key: Option<WaitKey>, need: u64) -> bool {
        if !log.pubs.is_waiting(key) {
            return false;
        }
        if !log.pubs.is_first_waiting(key) {
            return true;
        }
        let want = log.pubs.promised().saturating_add(need);
        log.free_slots(self.overflow, want) < want
    }

    /// For a publisher that [`Shared::out_of_turn`] holds back: it stays parked in its
    /// place, with its waker refreshed and its TTL alarm armed; `log` is unlocked before
    /// the alarm is asked for. Out of line, as the rest of the parked-publisher work.
    #[cold]
    #[inline(never)]
    fn stay_parked(
        &self,
        mut log: MutexGuard<'_, PartLog<T>>,
        key: &mut Option<WaitKey>,
        need: u64,
        waker: &Waker,
        now: u64,
    ) {
        let mut spent = SpentWakers::new();
        log.pubs.register_needing(key, waker, need, &mut spent);
        let alarm = self.expiry_alarm(&mut log, now, waker, *key);
        drop(log);
        self.arm_expiry_alarm(alarm);
    }

    /// For a publisher (`waker`, registered at `key`) that just parked on a full log
    /// (`log`, still locked): the timer wake-up to ask for when the oldest retained
    /// message expires and frees its slot, if the topic has a TTL and a timer to wake it
    /// then, and this publisher has no wake-up pending for that time or earlier. Each
    /// parked publisher has at most one, so one that parks again and again (a slow
    /// reader, a clock that does not move) arms no more; one whose alarm rang before the
    /// clock showed the expiry is armed again (see [`Alarm`]). Alarms that are spent
    /// (their time passed and they rang) or replaced go into the result too, to be
    /// dropped after the lock.
    fn expiry_alarm(
        &self,
        log: &mut PartLog<T>,
        now: u64,
        waker: &Waker,
        key: Option<WaitKey>,
    ) -> Expiry {
        let mut out = Expiry::default();
        let (Some(ttl), Some(key)) = (self.ttl, key) else {
            return out;
        };
        if self.timer.is_none() {
            return out;
        }
        // Expired once `now - ts > ttl`. With no message to expire (a publisher held back
        // by room promised to others, in a log they have not published to yet), the first
        // that can: one published from now on.
        let oldest = log.oldest_ts().unwrap_or(now);
        let at = oldest.saturating_add(ttl).saturating_add(1);
        let alarms = &mut log.expiry_alarms;
        // Spent: its time has come and it rang. One whose time the clock shows but that
        // the timer has not rung yet still has a task to wake (the clock may be ahead of
        // the timer), and dropping it would withdraw that wake-up.
        let mut i = 0;
        while i < alarms.len() {
            if alarms[i].1.at() > now || !alarms[i].1.rung() {
                i += 1;
            } else {
                out.spent.push(alarms.swap_remove(i).1);
            }
        }
        let old = alarms.iter().position(|(k, _)| *k == key);
        if old.is_some_and(|i| alarms[i].1.covers(waker, at)) {
            return out;
        }
        let old = old.map(|i| alarms.swap_remove(i).1);
        let (alarm, arm) = Alarm::new(waker, at, now, old.as_ref());
        alarms.push((key, alarm));
        out.spent.extend(old);
        out.arm = Some(arm);
        out
    }

    /// Asks the timer for the alarm [`Shared::expiry_alarm`] made, and drops the alarms it
    /// took off (withdrawing their wake-ups); outside the lock. The publisher then finds
    /// the room expiry freed, or parks again.
    fn arm_expiry_alarm(&self, expiry: Expiry) {
        if let (Some(arm), Some(timer)) = (expiry.arm, &self.timer) {
            arm.set(&**timer);
        }
        drop(expiry.spent);
    }

    /// After the wait of the publisher registered at `key` on a log ended (it got on,
    /// gave up, or found the log closed): takes its TTL alarm off the log, into `spent`,
    /// to be dropped after the lock, which withdraws its wake-up. Once nobody waits there,
    /// every alarm left goes too. Out of line: it runs only where alarms are kept, on
    /// topics with a TTL and a timer.
    #[cold]
    #[inline(never)]
    fn drop_expiry_alarm(log: &mut PartLog<T>, key: WaitKey, spent: &mut Vec<Alarm>) {
        if log.pubs.waiting() == 0 {
            spent.extend(log.expiry_alarms.drain(..).map(|(_, a)| a));
        } else if let Some(i) = log.expiry_alarms.iter().position(|(k, _)| *k == key) {
            spent.push(log.expiry_alarms.swap_remove(i).1);
        }
    }

    /// Takes the registration of a publisher that got on (if it had parked) off the wait
    /// list; the caller then runs [`Shared::after_publish`], which stores the wake
    /// position of whoever is first in line now, or here none if nobody waits any more.
    ///
    /// Its TTL alarm goes into `spent` (see [`Shared::drop_expiry_alarm`]), and so does
    /// the waker it registered, both to be dropped after the lock.
    #[inline]
    fn leave_publishers(
        &self,
        p: usize,
        log: &mut PartLog<T>,
        key: &mut Option<WaitKey>,
        spent: &mut Spent,
    ) {
        if key.is_some() {
            self.leave_parked(p, log, key, spent);
        }
    }

    /// [`Shared::leave_publishers`] for a publisher that parked. Out of line, as the rest
    /// of the parked-publisher work (see `docs/PERF-NOTES.md`).
    #[cold]
    #[inline(never)]
    fn leave_parked(
        &self,
        p: usize,
        log: &mut PartLog<T>,
        key: &mut Option<WaitKey>,
        spent: &mut Spent,
    ) {
        let place = *key;
        let (_, registered) = log.pubs.remove(key);
        if log.pubs.waiting() == 0 {
            self.parts[p].wake_at.0.store(0, Ordering::Relaxed);
        }
        if let (Some(place), false) = (place, log.expiry_alarms.is_empty()) {
            Self::drop_expiry_alarm(log, place, &mut spent.alarms);
        }
        spent.wakers.keep(registered);
    }

    /// After a publish: if publishers are parked, the next one gets its turn when room is
    /// left, and the wake position moves with the new end of the log and whoever is
    /// first in line now (it must never be left lower than what that publisher needs;
    /// see [`Shared::ahead_consumed`]).
    #[inline]
    fn after_publish(&self, p: usize, log: &mut PartLog<T>, wl: &mut WakeList) {
        self.parts[p].note_tail(log.high);
        if log.pubs.waiting() > 0 {
            self.rearm(p, log, wl);
        }
    }

    /// One attempt to publish `value` (a message or a batch, see [`Payload`]) to
    /// partition `p`, for a future: what it hands back when it parks goes back into
    /// `value`, so that the future keeps it. `Pending` if it was published already.
    #[inline]
    pub(crate) fn poll_publish<V: Payload<T>>(
        &self,
        p: usize,
        value: &mut Option<V>,
        key: &mut Option<WaitKey>,
        waker: Option<&Waker>,
    ) -> Poll<Result<Receipt, PublishError<V>>> {
        let Some(v) = value.take() else {
            // Polled again after completion: nothing left to publish.
            return Poll::Pending;
        };
        match self.attempt_publish(p, v, key, waker) {
            Attempt::Done(r) => Poll::Ready(r),
            Attempt::Parked(v) => {
                *value = Some(v);
                Poll::Pending
            }
        }
    }

    /// Publishes `value` now or fails; never parks. `key` is the place in line of a
    /// publish that waited and gives up (see [`Shared::last_try`]), else `None`.
    #[inline]
    pub(crate) fn try_publish_now<V: Payload<T>>(
        &self,
        p: usize,
        value: V,
        key: &mut Option<WaitKey>,
    ) -> Result<Receipt, PublishError<V>> {
        // The attempt is inlined here with no waker, so that everything it does for a
        // publisher that parks falls away: a `try_publish` is as small as it can be.
        match self.attempt(p, value, key, None) {
            Attempt::Done(r) => r,
            // Only a caller with a waker is ever parked; without one, a publish that
            // finds no room fails with `Full`, and so would this.
            Attempt::Parked(v) => Err(PublishError::Full(v)),
        }
    }

    /// One attempt to append `value` (a message, or a batch: all of it or nothing) to
    /// partition `p`. Without a waker (`try_*`) a full partition fails at once; with one,
    /// a `Block` topic parks the caller under `key`.
    ///
    /// Written once for both: for one message, what only a batch needs (a batch larger
    /// than the capacity, an empty batch, a vector for the values it overwrites) folds
    /// away, and the code is that of a plain one-message publish.
    ///
    /// The futures' and the blocking publishes' attempt; see [`Shared::attempt`].
    #[inline]
    pub(crate) fn attempt_publish<V: Payload<T>>(
        &self,
        p: usize,
        value: V,
        key: &mut Option<WaitKey>,
        waker: Option<&Waker>,
    ) -> Attempt<V, Receipt> {
        self.attempt(p, value, key, waker)
    }

    /// [`Shared::attempt_publish`]'s work, always inlined: into it, and into
    /// [`Shared::try_publish_now`] with no waker, where the parking paths fall away (the
    /// publish path of every `try_publish`, whichever codegen unit its caller is in).
    ///
    /// Long: one function of about 80 lines, as every step between the lock and the
    /// receipt runs under the one guard, which only the parking exits let go of early.
    #[inline(always)]
    fn attempt<V: Payload<T>>(
        &self,
        p: usize,
        value: V,
        key: &mut Option<WaitKey>,
        waker: Option<&Waker>,
    ) -> Attempt<V, Receipt> {
        #[cfg(target_has_atomic = "64")]
        if let Some(ring) = self.rings.get(p) {
            return self.attempt_on_ring(ring, p, value, key, waker);
        }
        let n = value.messages();
        if V::BATCH && n as u64 > self.capacity as u64 {
            return self.never_fits(p, value, key);
        }
        let now = self.now();
        // The values it overwrites in the ring, and those it finds expired, reserved
        // outside the lock so that they can be dropped after it.
        let mut olds = value.reserve_olds();
        let mut wl = WakeList::new();
        // What the publisher's wait left behind, dropped after the lock.
        let mut spent = Spent::default();
        let (offset, more) = {
            let mut log = self.parts[p].log.lock_for(V::BATCH);
            self.expire(&mut log, now, &mut wl, V::expired_into(&mut olds));
            if log.closed {
                log.pubs.unregister(key, &mut wl, &mut spent.wakers);
                return Attempt::Done(Err(PublishError::Closed(value)));
            }
            if n == 0 {
                // Nothing to publish, and nothing to wait for: an empty receipt.
                return Attempt::Done(Ok(Receipt {
                    partition: p as u32,
                    offset: log.high,
                    count: 0,
                }));
            }
            if let Some(w) = waker {
                if self.out_of_turn(&mut log, *key, n as u64) {
                    self.stay_parked(log, key, n as u64, w, now);
                    return Attempt::Parked(value);
                }
            }
            let mut value = value;
            loop {
                match value.append_to(&mut log, now, self.overflow, &mut olds) {
                    Ok(offset) => {
                        // Our notification (if any) is consumed by this publish; if room
                        // is left, the next waiting publisher gets its turn.
                        self.leave_publishers(p, &mut log, key, &mut spent);
                        self.after_publish(p, &mut log, &mut wl);
                        let more = log.notify_readers(n, now, &mut wl);
                        break (offset, more);
                    }
                    Err(back) => match waker {
                        Some(w) if self.overflow == Overflow::Block => {
                            log.pubs
                                .register_needing(key, w, n as u64, &mut spent.wakers);
                            if self.park_publisher(p, &mut log, n as u64, &mut wl) {
                                let alarm = self.expiry_alarm(&mut log, now, w, *key);
                                drop(log);
                                self.arm_expiry_alarm(alarm);
                                return Attempt::Parked(back);
                            }
                            value = back;
                        }
                        _ => {
                            log.pubs.unregister(key, &mut wl, &mut spent.wakers);
                            return Attempt::Done(Err(PublishError::Full(back)));
                        }
                    },
                }
            }
        };
        wl.wake_all();
        V::let_go(olds);
        if more {
            self.wake_remaining_readers(p, n, now);
        }
        spent.let_go();
        Attempt::Done(Ok(Receipt {
            partition: p as u32,
            offset,
            count: u32::try_from(n).unwrap_or(u32::MAX),
        }))
    }

    /// [`Shared::attempt_publish`] for a batch larger than the capacity: it could never
    /// fit, and fails with `Full`; but a closed topic says so first, as for any publish.
    #[cold]
    #[inline(never)]
    fn never_fits<V>(&self, p: usize, batch: V, key: &mut Option<WaitKey>) -> Attempt<V, Receipt> {
        let mut spent = SpentWakers::new();
        let mut log = self.parts[p].log.lock_now();
        if log.closed {
            let mut wl = WakeList::new();
            log.pubs.unregister(key, &mut wl, &mut spent);
            drop(log);
            wl.wake_all();
            return Attempt::Done(Err(PublishError::Closed(batch)));
        }
        Attempt::Done(Err(PublishError::Full(batch)))
    }

    /// A waiting publish's last try on its partition (`Publish::try_now`,
    /// `PublishBatch::try_now`): out of the line first, as a dropped publish leaves it
    /// (the next in line is woken if its room is free), then one attempt without a waker,
    /// which never parks. `None` if `value` was published already.
    pub(crate) fn last_try<V: Payload<T>>(
        &self,
        route: Route,
        value: &mut Option<V>,
        key: &mut Option<WaitKey>,
    ) -> Option<Result<Receipt, PublishError<V>>> {
        let Route::Partition(p) = route else {
            return value.take().map(|v| Err(PublishError::InvalidPartition(v)));
        };
        let v = value.take()?;
        self.cancel_publish(p, key);
        Some(self.try_publish_now(p, v, key))
    }

    /// Drops a publish future's registration, passing an unconsumed wake-up on. Inline,
    /// so that a publish that never parked pays one test.
    #[inline]
    pub(crate) fn cancel_publish(&self, p: usize, key: &mut Option<WaitKey>) {
        if key.is_some() {
            self.leave_line(p, key);
        }
    }

    /// [`Shared::cancel_publish`] for a publish that parked.
    fn leave_line(&self, p: usize, key: &mut Option<WaitKey>) {
        #[cfg(target_has_atomic = "64")]
        if let Some(ring) = self.rings.get(p) {
            // Every waiting publisher is woken at once on the ring: no turn to pass on.
            return Self::leave_ring_line(ring, key);
        }
        let mut wl = WakeList::new();
        let mut log = self.parts[p].log.lock();
        // A wake-up it had not used (and the room promised with it) goes to whoever is
        // first in line now, if that one's room is free; and that one's wake position is
        // stored.
        let place = *key;
        let (_, waker) = log.pubs.remove(key);
        self.rearm(p, &mut log, &mut wl);
        // Its TTL alarm is not wanted any more either.
        let mut spent = Vec::new();
        if let (Some(place), false) = (place, log.expiry_alarms.is_empty()) {
            Self::drop_expiry_alarm(&mut log, place, &mut spent);
        }
        drop(log);
        drop(waker);
        drop(spent);
        wl.wake_all();
    }
}

/// A TTL alarm asked for by a parking publisher, and the alarms it took off the log: all
/// to be handled after the lock ([`Shared::arm_expiry_alarm`]).
#[derive(Default)]
struct Expiry {
    arm: Option<Arm>,
    spent: Vec<Alarm>,
}

/// What a publish leaves behind under the lock, dropped after it: the TTL alarm of a
/// publisher that got on after parking (which withdraws its timer wake-up then), and the
/// wakers let go of (its own, one it replaced).
#[derive(Default)]
struct Spent {
    alarms: Vec<Alarm>,
    wakers: SpentWakers,
}

impl Spent {
    /// Drops what it holds: inline, and nothing but a few tests when it holds nothing
    /// (its own drop is a call).
    #[inline]
    fn let_go(self) {
        if self.alarms.capacity() == 0 && self.wakers.holds_nothing() {
            // Nothing allocated and no waker: forgetting it drops nothing.
            core::mem::forget(self);
        } else {
            drop(self);
        }
    }
}

/// Where a publish goes: the partition the topic routed it to, or nowhere (a partition
/// that does not exist, named by the caller or by a user's router).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Route {
    Partition(usize),
    Invalid,
}

/// The outcome of one publish attempt.
pub(crate) enum Attempt<T, R> {
    /// Finished, successfully or not.
    Done(Result<R, PublishError<T>>),
    /// Parked until woken; the value is handed back to the future that keeps it.
    Parked(T),
}

/// A publish future's state, the same for one message and a batch: where it goes, what
/// it carries until it is published (`None` after), and its place in the partition's
/// line once it parked. Dropping it leaves the line, passing on a wake-up it had not
/// used.
struct InLine<'a, T, V> {
    /// The topic's shared state, borrowed from the `Topic` the publish was made by (as
    /// `&Topic` would: the same lifetime, variance and auto traits).
    shared: &'a Shared<T>,
    route: Route,
    value: Option<V>,
    key: Option<WaitKey>,
}

impl<'a, T, V: Payload<T>> InLine<'a, T, V> {
    #[inline]
    fn new(shared: &'a Shared<T>, route: Route, value: V) -> Self {
        Self {
            shared,
            route,
            value: Some(value),
            key: None,
        }
    }

    /// Leaves the line and hands the value back (`None` if it was published).
    #[inline]
    fn take_back(&mut self) -> Option<V> {
        self.leave();
        self.value.take()
    }

    /// See [`Shared::last_try`].
    #[inline]
    fn try_now(&mut self) -> Option<Result<Receipt, PublishError<V>>> {
        self.shared
            .last_try(self.route, &mut self.value, &mut self.key)
    }

    #[inline]
    fn poll(&mut self, waker: &Waker) -> Poll<Result<Receipt, PublishError<V>>> {
        match self.route {
            Route::Invalid => match self.value.take() {
                Some(v) => Poll::Ready(Err(PublishError::InvalidPartition(v))),
                None => Poll::Pending,
            },
            Route::Partition(p) => {
                self.shared
                    .poll_publish(p, &mut self.value, &mut self.key, Some(waker))
            }
        }
    }
}

impl<T, V> InLine<'_, T, V> {
    #[inline]
    fn leave(&mut self) {
        if let Route::Partition(p) = self.route {
            self.shared.cancel_publish(p, &mut self.key);
        }
    }
}

impl<T, V> Drop for InLine<'_, T, V> {
    fn drop(&mut self) {
        self.leave();
    }
}

/// Future of [`Topic::publish`], [`Topic::publish_keyed`] and [`Topic::publish_to`].
///
/// Under [`Overflow::Block`] a waiting publish holds its place in line: room that readers
/// free for it is kept for it until it is polled again or dropped, so that publishers
/// that parked after it cannot take it first. A publish that has not had to wait (a
/// `try_publish`, or a new future's first poll) is not in line and may take free room
/// before a woken publisher gets to it, as a mutex lets a newcomer in; the woken one
/// then keeps the front of the line and gets the next room. A future that is kept but
/// never polled again (or is leaked with `mem::forget`) therefore holds up the
/// publishers of its partition that parked after it; drop it to give its place and its
/// room up.
///
/// [`Topic::publish`]: crate::Topic::publish
/// [`Topic::publish_keyed`]: crate::Topic::publish_keyed
/// [`Topic::publish_to`]: crate::Topic::publish_to
#[must_use = "futures do nothing unless polled"]
pub struct Publish<'a, T> {
    inner: InLine<'a, T, T>,
}

impl<T> fmt::Debug for Publish<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Publish")
            .field("route", &self.inner.route)
            .field("waiting", &self.inner.key.is_some())
            .finish_non_exhaustive()
    }
}

impl<T> Unpin for Publish<'_, T> {}

impl<'a, T> Publish<'a, T> {
    /// A publish of `value` to `route`, not yet attempted.
    #[inline]
    pub(crate) fn new(shared: &'a Shared<T>, route: Route, value: T) -> Self {
        Self {
            inner: InLine::new(shared, route, value),
        }
    }
}

impl<T> Publish<'_, T> {
    /// Cancels the publish and hands the value back, or `None` if it was already
    /// published (the future completed). Use it to keep a message whose publish timed out.
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// use std::task::Context;
    /// use std::future::Future;
    /// use memq::{StartAt, Topic};
    ///
    /// let topic = Topic::with_capacity(1)?;
    /// let _slow = topic.subscribe(StartAt::Earliest)?;
    /// topic.try_publish("a")?;
    /// let mut publish = topic.publish("b"); // the log is full: this waits
    /// let waker = futures_util::task::noop_waker();
    /// assert!(std::pin::Pin::new(&mut publish).poll(&mut Context::from_waker(&waker)).is_pending());
    /// assert_eq!(publish.into_inner(), Some("b")); // gave up: the message is ours again
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn into_inner(mut self) -> Option<T> {
        self.inner.take_back()
    }

    /// Stops waiting with one last try: publishes now if the partition has a free slot
    /// (as [`Topic::try_publish`] would, ahead of publishers still waiting), or hands the
    /// value back in [`PublishError::Full`] (or with the error the publish met, such as
    /// [`PublishError::Closed`]). `None` if the publish was done already.
    ///
    /// This is what a publish with a time limit does when its time is up: a waiting
    /// publisher is woken only once a batch of slots is free (see [`Overflow::Block`]),
    /// so a few may be free that it was not told of.
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// use std::task::Context;
    /// use std::future::Future;
    /// use memq::{StartAt, Topic};
    ///
    /// let topic = Topic::with_capacity(64)?;
    /// let mut slow = topic.subscribe(StartAt::Earliest)?;
    /// for n in 0..64 {
    ///     topic.try_publish(n)?;
    /// }
    /// let mut publish = topic.publish(64); // the log is full: this waits
    /// let waker = futures_util::task::noop_waker();
    /// assert!(std::pin::Pin::new(&mut publish).poll(&mut Context::from_waker(&waker)).is_pending());
    /// slow.try_recv()?; // one slot free: too few to wake a waiting publisher
    /// let receipt = publish.try_now().unwrap()?; // but the last try takes it
    /// assert_eq!(receipt.offset, 64);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// [`Overflow::Block`]: crate::Overflow::Block
    /// [`Topic::try_publish`]: crate::Topic::try_publish
    #[inline]
    pub fn try_now(mut self) -> Option<Result<Receipt, PublishError<T>>> {
        self.inner.try_now()
    }
}

impl<T> PublishBatch<'_, T> {
    /// Cancels the batch publish and hands the batch back, or `None` if it was already
    /// published.
    pub fn into_inner(mut self) -> Option<Vec<T>> {
        self.inner.take_back()
    }

    /// Stops waiting with one last try: publishes the whole batch now if the partition
    /// has room for it, or hands it back whole, as [`Publish::try_now`] does for one
    /// message. `None` if the batch was published already.
    #[inline]
    pub fn try_now(mut self) -> Option<Result<Receipt, PublishError<Vec<T>>>> {
        self.inner.try_now()
    }
}

impl<T> Future for Publish<'_, T> {
    type Output = Result<Receipt, PublishError<T>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().inner.poll(cx.waker())
    }
}

/// Future of [`Topic::publish_batch`], [`Topic::publish_batch_keyed`] and
/// [`Topic::publish_batch_to`].
///
/// Under [`Overflow::Block`] a waiting batch holds its place in line: room that readers
/// free for it is kept for it until it is polled again or dropped, so that publishers
/// that parked after it cannot take it first. A publish that has not had to wait (a
/// `try_publish`, or a new future's first poll) is not in line and may take free room
/// before a woken publisher gets to it, as a mutex lets a newcomer in; the woken one
/// then keeps the front of the line and gets the next room. A future that is kept but
/// never polled again (or is leaked with `mem::forget`) therefore holds up the
/// publishers of its partition that parked after it; drop it to give its place and its
/// room up.
///
/// [`Topic::publish_batch`]: crate::Topic::publish_batch
/// [`Topic::publish_batch_keyed`]: crate::Topic::publish_batch_keyed
/// [`Topic::publish_batch_to`]: crate::Topic::publish_batch_to
#[must_use = "futures do nothing unless polled"]
pub struct PublishBatch<'a, T> {
    inner: InLine<'a, T, Vec<T>>,
}

impl<T> fmt::Debug for PublishBatch<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PublishBatch")
            .field("route", &self.inner.route)
            .field("len", &self.inner.value.as_ref().map(Vec::len))
            .finish_non_exhaustive()
    }
}

impl<T> Unpin for PublishBatch<'_, T> {}

impl<'a, T> PublishBatch<'a, T> {
    /// A publish of `batch` to `route`, not yet attempted.
    #[inline]
    pub(crate) fn new(shared: &'a Shared<T>, route: Route, batch: Vec<T>) -> Self {
        Self {
            inner: InLine::new(shared, route, batch),
        }
    }
}

impl<T> Future for PublishBatch<'_, T> {
    type Output = Result<Receipt, PublishError<Vec<T>>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().inner.poll(cx.waker())
    }
}
