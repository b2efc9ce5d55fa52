//! The topic: its shared state, the publishing handle and the publish futures.
//!
//! Data flows one way: a [`Topic`] routes each message to a partition and appends it to
//! that partition's [`Log`]; readers ([`Subscriber`], [`Consumer`]) hold positions in the
//! logs. This module owns routing, publishing and closing; reading lives in `subscriber`
//! and `group`.
//!
//! [`Subscriber`]: crate::Subscriber
//! [`Consumer`]: crate::Consumer

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

use crate::config::{Overflow, TopicConfig};
use crate::error::{Error, PublishError};
use crate::message::Receipt;
use crate::partition::PartLog;
use crate::read::group::GroupShared;
use crate::route::{key_partition, Router};
use crate::sync::{Arc, AtomicUsize, Mutex, MutexGuard, Ordering, Padded};
use crate::time::{as_nanos, Alarm, Arm, Clock, Timer};
use crate::wait::{SpentWakers, WaitKey, WakeList};

/// Encodes a wake position for [`Partition::wake_at`] as its low bits plus one, never 0
/// (the one position that would wrap to 0 is stored one lower, which is only earlier).
/// Comparisons are by wrapping difference, exact while positions are within
/// `isize::MAX` of each other, which retained positions always are.
#[inline]
fn encode_wake(pos: u64) -> usize {
    match (pos as usize).wrapping_add(1) {
        0 => usize::MAX,
        e => e,
    }
}

pub(crate) struct Partition<T> {
    pub(crate) log: Mutex<PartLog<T>>,
    /// Non-zero while a publisher may be parked on this partition: the position (plus
    /// one, see [`encode_wake`]) the slowest reader must reach for its room to be free,
    /// or a lower one. Written under the lock by a parking publisher and by readers that
    /// find publishers still waiting; readers that hand over read-ahead messages without
    /// the lock (subscribers, members taking from their group's pool) read it (see
    /// [`Shared::ahead_consumed`]). On its own cache line: it is read for every such
    /// message and must not share a line with the lock word.
    pub(crate) wake_at: Padded<AtomicUsize>,
    /// The log's `high` as of its last publish, or `u64::MAX` once it is closed: a reader
    /// that has fetched everything can see without the lock that nothing new arrived
    /// (`try_recv` answers `Empty` without locking, and a thread about to wait watches
    /// it for a moment before it registers). Written under the lock; read by readers.
    /// Only where 64-bit atomics exist: elsewhere readers always take the lock.
    #[cfg(target_has_atomic = "64")]
    pub(crate) tail: Padded<crate::sync::AtomicU64>,
}

impl<T> Partition<T> {
    /// Whether a reader whose fetched end is `fetched` may find something new here
    /// (`true` where that cannot be told without the lock).
    #[inline]
    pub(crate) fn may_have_news(&self, fetched: Option<u64>) -> bool {
        #[cfg(target_has_atomic = "64")]
        {
            fetched != Some(self.tail.0.load(Ordering::Acquire))
        }
        #[cfg(not(target_has_atomic = "64"))]
        {
            let _ = fetched;
            true
        }
    }

    /// Publishes the log's new end for [`Partition::may_have_news`] (under the lock).
    #[inline]
    fn note_tail(&self, _tail: u64) {
        #[cfg(target_has_atomic = "64")]
        self.tail.0.store(_tail, Ordering::Release);
    }
}

/// Everything readers and publishers of one topic share.
pub(crate) struct Shared<T> {
    pub(crate) name: Option<String>,
    pub(crate) parts: Vec<Partition<T>>,
    pub(crate) capacity: usize,
    pub(crate) overflow: Overflow,
    /// Messages leave the log once read by all (see `TopicConfig::release_on_read`).
    pub(crate) release_on_read: bool,
    pub(crate) ttl: Option<u64>,
    /// The topic's clock as memq reads it (see `clock::anchored`).
    pub(crate) clock: Option<alloc::sync::Arc<dyn Clock>>,
    /// What to add to `clock`'s readings to give the user's clock's (zero unless that
    /// clock's epoch is centuries back).
    origin: core::time::Duration,
    /// Wakes publishers parked on a full log when its oldest message expires (topics
    /// with a TTL; see `TopicConfig::timer`).
    timer: Option<alloc::sync::Arc<dyn Timer>>,
    pub(crate) router: Option<Router>,
    /// Live [`Topic`] handles; the topic closes when the last one goes.
    publishers: AtomicUsize,
    round_robin: AtomicUsize,
    /// Groups by name. Lock order: this registry, then a group's members, then a
    /// partition. Nothing that holds a partition lock takes either of the others.
    pub(crate) groups: Mutex<Vec<Arc<GroupShared<T>>>>,
    /// Live subscribers (one per `Subscriber`, whatever partitions it reads).
    pub(crate) subscribers: AtomicUsize,
    /// 1 once [`Shared::close`] has closed every partition (see [`Shared::is_closed`]).
    closed: Padded<AtomicUsize>,
}

impl<T> fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Topic")
            .field("name", &self.name)
            .field("partitions", &self.parts.len())
            .field("capacity", &self.capacity)
            .field("overflow", &self.overflow)
            .finish_non_exhaustive()
    }
}

impl<T> Shared<T> {
    /// What the messages handed out are stamped with: `None` without a clock, else the
    /// origin to add to their stored times (see `subscriber::to_message`).
    pub(crate) fn stamp(&self) -> Option<core::time::Duration> {
        self.clock.as_ref().map(|_| self.origin)
    }

    /// The clock's reading in nanoseconds (0 without a clock). Called outside any lock.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        match &self.clock {
            Some(c) => as_nanos(c.now()),
            None => 0,
        }
    }

    /// The reading readers apply the TTL with ([`Shared::expire`]): the clock's on a topic
    /// with a TTL; 0 without one, where it is not used, so that the user's clock is not
    /// called (see [`Clock`]).
    #[inline]
    pub(crate) fn expiry_now(&self) -> u64 {
        if self.ttl.is_some() {
            self.now()
        } else {
            0
        }
    }

    /// Applies the TTL to a locked log; expired messages free room, so waiting
    /// publishers are collected into `out`. The expired values go to `dead`, which the
    /// caller drops after unlocking (declared before the lock, it is dropped after it).
    #[inline]
    pub(crate) fn expire(
        &self,
        log: &mut PartLog<T>,
        now: u64,
        out: &mut WakeList,
        dead: &mut Vec<T>,
    ) {
        if let Some(ttl) = self.ttl {
            if log.evict_expired(now, ttl, dead) > 0 {
                log.rehold_acked_groups();
                self.reader_advanced(log, out);
            }
        }
    }

    pub(crate) fn partition_count(&self) -> u32 {
        self.parts.len() as u32
    }

    pub(crate) fn check_partition(&self, partition: u32) -> Result<usize, Error> {
        if (partition as usize) < self.parts.len() {
            Ok(partition as usize)
        } else {
            Err(Error::PartitionOutOfRange {
                partition,
                partitions: self.partition_count(),
            })
        }
    }

    /// Wakes the readers that did not fit into the first [`WakeList`] of a publish made
    /// at clock reading `now`.
    pub(crate) fn wake_remaining_readers(&self, p: usize, n: usize, now: u64) {
        loop {
            let mut wl = WakeList::new();
            let more = {
                let mut log = self.parts[p].log.lock();
                log.notify_readers(n, now, &mut wl)
            };
            wl.wake_all();
            if !more {
                break;
            }
        }
    }

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

    /// Parks a publisher needing `need` slots of partition `p` (its log locked, the
    /// publisher just registered on `log.pubs`); wakers of other publishers go to `wl`.
    ///
    /// Returns `false` if room appeared meanwhile (the caller retries at once): a reader
    /// may have handed over read-ahead messages without the lock. The wake position is
    /// published before the room is counted again, and the count reads the readers'
    /// cells after a full fence, paired with the one in [`Shared::ahead_consumed`]:
    /// either this count sees the room, or that reader sees the publisher parked (and
    /// wakes it once enough room is free).
    ///
    /// A woken publisher that parks again gives back the room promised to it, and that
    /// may be all the first in line (parked before it) was waiting for: whoever fits now
    /// is woken, and the wake position stored again.
    pub(crate) fn park_publisher(
        &self,
        p: usize,
        log: &mut PartLog<T>,
        need: u64,
        wl: &mut WakeList,
    ) -> bool {
        self.parts[p]
            .wake_at
            .0
            .store(encode_wake(log.wake_position()), Ordering::Relaxed);
        crate::sync::fence(Ordering::SeqCst);
        if log.free_slots(self.overflow, need) >= need {
            return false;
        }
        if log.notify_publishers(self.overflow, wl) > 0 {
            self.rearm(p, log, wl);
        }
        true
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

    /// Called by a reader after it handed over read-ahead messages without the lock (its
    /// cell already updated) and now stands at `pos` in partition `p`. `acted` is the
    /// reader's own memory of the last wake position it took the lock for (0 for none);
    /// the reader resets it whenever it moves back, gets a new cell or visits the log
    /// under the lock. The last bounds how long a memory lives to one buffer of
    /// read-ahead, so that on 32-bit targets, where encoded positions repeat every 2^32
    /// messages, an equal code always means the same position.
    ///
    /// Takes the lock only if a publisher is parked, this reader stands at or past the
    /// position at which that publisher's room would be free, and it has not already
    /// taken the lock for that same position; whichever reader is the last to get there
    /// finds the room and wakes it.
    ///
    /// Skipping a position already acted on is sound because `wake_at` always holds the
    /// current requirement, that of the first publisher in line, never a stale lower one:
    /// whatever changes it (a publisher parking, a publish, a wake-up that makes another
    /// publisher first in line, a cancelled publisher) stores the new position, fences and
    /// counts the room again (see [`Shared::rearm`]). A reader that acted stood at or past
    /// that position under the lock, so every later count sees it there; the same
    /// position needs nothing more from it.
    #[inline]
    pub(crate) fn ahead_consumed(&self, p: usize, pos: u64, acted: &mut usize) {
        crate::sync::fence(Ordering::SeqCst);
        let part = &self.parts[p];
        let at = part.wake_at.0.load(Ordering::Relaxed);
        if at == 0 {
            *acted = 0;
            return;
        }
        if at == *acted || ((pos as usize).wrapping_sub(at - 1) as isize) < 0 {
            return;
        }
        // `usize::MAX` stands for two positions (see `encode_wake`), so it is never
        // remembered: meeting it again takes the lock again.
        *acted = if at == usize::MAX { 0 } else { at };
        let mut wl = WakeList::new();
        {
            let mut log = part.log.lock();
            self.rearm(p, &mut log, &mut wl);
        }
        wl.wake_all();
    }

    /// Wakes parked publishers of partition `p` if their room is free, and publishes the
    /// wake position for those still parked (0 when none is).
    ///
    /// A new position gets the same pairing as [`Shared::park_publisher`]: stored, then a
    /// full fence, then the room counted again, so that a reader handing over without the
    /// lock at the same moment either sees the new position or is seen by the count.
    // Out of line: it runs only while publishers are parked, and inlined into the
    // readers' and publishers' hot paths it changed their code enough to cost S4 (batches)
    // a fifth of its speed.
    #[inline(never)]
    pub(crate) fn rearm(&self, p: usize, log: &mut PartLog<T>, wl: &mut WakeList) {
        let part = &self.parts[p];
        loop {
            log.notify_publishers(self.overflow, wl);
            if log.pubs.waiting() == 0 {
                part.wake_at.0.store(0, Ordering::Relaxed);
                return;
            }
            part.wake_at
                .0
                .store(encode_wake(log.wake_position()), Ordering::Relaxed);
            crate::sync::fence(Ordering::SeqCst);
            // Room for the next in line (counted exactly when short of it, so a reader
            // that handed over meanwhile without seeing the new position is seen here):
            // wake it too. Each round wakes at least one, so this ends.
            let need = log.park_need();
            if log.free_slots(self.overflow, need) < need || wl.is_full() {
                return;
            }
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

    /// After a reader moved (or left, or messages expired), wakes publishers if room may
    /// have been freed. Called with the log locked; wakers go to `out`. Costs one
    /// comparison when nobody waits.
    ///
    /// Waking the first publisher in line changes the wake position that readers handing
    /// over without the lock watch, so it is then stored again ([`Shared::rearm`]): left
    /// as it was, it could stand for a position such a reader has already acted on, and
    /// that reader would never take the lock for the next publisher. (Also where no
    /// reader reads ahead now: one that starts to later must find the position current.)
    /// Waking nobody changes nothing it depends on: the first in line, the room promised,
    /// the end of the log.
    #[inline]
    pub(crate) fn reader_advanced(&self, log: &mut PartLog<T>, out: &mut WakeList) {
        if log.pubs.waiting() > 0 && log.notify_publishers(self.overflow, out) > 0 {
            self.rearm(log.partition, log, out);
        }
    }

    pub(crate) fn close(&self) {
        for p in 0..self.parts.len() {
            loop {
                let mut wl = WakeList::new();
                let (more, alarms) = {
                    let mut log = self.parts[p].log.lock();
                    self.parts[p].note_tail(u64::MAX);
                    // Parked publishers are woken to find the log closed: their TTL
                    // alarms are not needed, and go (withdrawn) after the lock.
                    let alarms = core::mem::take(&mut log.expiry_alarms);
                    (log.close_and_notify(&mut wl), alarms)
                };
                drop(alarms);
                wl.wake_all();
                if !more {
                    break;
                }
            }
        }
        // Closed as a whole only now, every partition closed: until here a publish to a
        // later partition still succeeds, so no reader may conclude the topic is done.
        // A read-modify-write, so that a member handing over without a lock is ordered
        // with it (see `closed_after_handover`).
        self.closed.0.swap(1, Ordering::AcqRel);
        // Members with nothing to read wait for the group's drain; they re-check whether
        // the topic is closed after registering, so they are woken only once every
        // partition is marked closed (woken earlier, one could look, see an open topic
        // and park again for good).
        self.wake_idle_members();
    }

    /// Whether the topic is closed: every partition closed, by [`Shared::close`].
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.0.load(Ordering::Acquire) != 0
    }

    /// [`Shared::is_closed`] for a reader that just handed over a message without the
    /// partition's lock (from a group's pool) and so may have finished the group's drain:
    /// if this says no, the members [`Shared::close`] wakes afterwards see the handover.
    /// Both sides make a read-modify-write of `closed`, and such operations on one atomic
    /// happen in one order: either this one reads close's 1, or close's reads this one's
    /// value and so synchronizes with it (both acquire and release). A plain load would
    /// not do: the handover (a store) and this read could pass close's store and the
    /// woken members' read of the handover.
    pub(crate) fn closed_after_handover(&self) -> bool {
        self.closed.0.fetch_add(0, Ordering::AcqRel) != 0
    }

    fn route_round_robin(&self) -> usize {
        if self.parts.len() == 1 {
            0
        } else {
            self.round_robin.fetch_add(1, Ordering::Relaxed) % self.parts.len()
        }
    }

    fn route_key(&self, key: &[u8]) -> Option<usize> {
        let n = self.partition_count();
        let p = match &self.router {
            // The user's router runs here, outside every lock.
            Some(r) => (r.0)(key, n),
            None => key_partition(key, n),
        };
        (p < n).then_some(p as usize)
    }

    /// One attempt to append `value` to partition `p`. Without a waker (`try_*`) a full
    /// partition fails at once; with one, a `Block` topic parks the caller under `key`.
    pub(crate) fn poll_publish(
        &self,
        p: usize,
        value: &mut Option<T>,
        key: &mut Option<WaitKey>,
        waker: Option<&Waker>,
    ) -> Poll<Result<Receipt, PublishError<T>>> {
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

    /// Publishes `v` now or fails; never parks.
    pub(crate) fn try_publish_now(&self, p: usize, v: T) -> Result<Receipt, PublishError<T>> {
        match self.attempt_publish(p, v, &mut None, None) {
            Attempt::Done(r) => r,
            // Only a caller with a waker is ever parked.
            Attempt::Parked(v) => Err(PublishError::Full(v)),
        }
    }

    pub(crate) fn attempt_publish(
        &self,
        p: usize,
        v: T,
        key: &mut Option<WaitKey>,
        waker: Option<&Waker>,
    ) -> Attempt<T, Receipt> {
        let now = self.now();
        let mut dead = Vec::new();
        let mut wl = WakeList::new();
        // What the publisher's wait left behind, dropped after the lock.
        let mut spent = Spent::default();
        let (offset, old, more) = {
            let mut log = self.parts[p].log.lock();
            self.expire(&mut log, now, &mut wl, &mut dead);
            if log.closed {
                log.pubs.unregister(key, &mut wl, &mut spent.wakers);
                return Attempt::Done(Err(PublishError::Closed(v)));
            }
            if let Some(w) = waker {
                if self.out_of_turn(&mut log, *key, 1) {
                    self.stay_parked(log, key, 1, w, now);
                    return Attempt::Parked(v);
                }
            }
            let mut v = v;
            loop {
                match log.append(v, now, self.overflow) {
                    Ok((offset, old)) => {
                        // Our notification (if any) is consumed by this publish; if room
                        // is left, the next waiting publisher gets its turn.
                        self.leave_publishers(p, &mut log, key, &mut spent);
                        self.after_publish(p, &mut log, &mut wl);
                        let more = log.notify_readers(1, now, &mut wl);
                        break (offset, old, more);
                    }
                    Err(back) => match waker {
                        Some(w) if self.overflow == Overflow::Block => {
                            log.pubs.register_needing(key, w, 1, &mut spent.wakers);
                            if self.park_publisher(p, &mut log, 1, &mut wl) {
                                let alarm = self.expiry_alarm(&mut log, now, w, *key);
                                drop(log);
                                self.arm_expiry_alarm(alarm);
                                return Attempt::Parked(back);
                            }
                            v = back;
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
        drop(old);
        if more {
            self.wake_remaining_readers(p, 1, now);
        }
        Attempt::Done(Ok(Receipt {
            partition: p as u32,
            offset,
            count: 1,
        }))
    }

    /// One attempt to append a whole batch to partition `p`, all or nothing.
    pub(crate) fn poll_publish_batch(
        &self,
        p: usize,
        values: &mut Option<Vec<T>>,
        key: &mut Option<WaitKey>,
        waker: Option<&Waker>,
    ) -> Poll<Result<Receipt, PublishError<Vec<T>>>> {
        let Some(batch) = values.take() else {
            return Poll::Pending;
        };
        match self.attempt_publish_batch(p, batch, key, waker) {
            Attempt::Done(r) => Poll::Ready(r),
            Attempt::Parked(b) => {
                *values = Some(b);
                Poll::Pending
            }
        }
    }

    pub(crate) fn attempt_publish_batch(
        &self,
        p: usize,
        mut batch: Vec<T>,
        key: &mut Option<WaitKey>,
        waker: Option<&Waker>,
    ) -> Attempt<Vec<T>, Receipt> {
        let n = batch.len();
        if n as u64 > self.capacity as u64 {
            // It could never fit; but a closed topic says so first, as for any publish.
            let mut spent = SpentWakers::new();
            let mut log = self.parts[p].log.lock_now();
            if log.closed {
                let mut wl = WakeList::new();
                log.pubs.unregister(key, &mut wl, &mut spent);
                drop(log);
                wl.wake_all();
                return Attempt::Done(Err(PublishError::Closed(batch)));
            }
            return Attempt::Done(Err(PublishError::Full(batch)));
        }
        let now = self.now();
        // Room for the values the batch overwrites in the ring, reserved outside the lock
        // so that they can be dropped after it.
        let mut olds = Vec::with_capacity(n);
        let mut wl = WakeList::new();
        // What the publisher's wait left behind, dropped after the lock.
        let mut spent = Spent::default();
        let (first, more) = {
            let mut log = self.parts[p].log.lock_now();
            self.expire(&mut log, now, &mut wl, &mut olds);
            if log.closed {
                log.pubs.unregister(key, &mut wl, &mut spent.wakers);
                return Attempt::Done(Err(PublishError::Closed(batch)));
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
                    return Attempt::Parked(batch);
                }
            }
            loop {
                match log.append_batch(&mut batch, now, self.overflow, &mut olds) {
                    Some(first) => {
                        self.leave_publishers(p, &mut log, key, &mut spent);
                        self.after_publish(p, &mut log, &mut wl);
                        let more = log.notify_readers(n, now, &mut wl);
                        break (first, more);
                    }
                    None => match waker {
                        Some(w) if self.overflow == Overflow::Block => {
                            log.pubs
                                .register_needing(key, w, n as u64, &mut spent.wakers);
                            if self.park_publisher(p, &mut log, n as u64, &mut wl) {
                                let alarm = self.expiry_alarm(&mut log, now, w, *key);
                                drop(log);
                                self.arm_expiry_alarm(alarm);
                                return Attempt::Parked(batch);
                            }
                        }
                        _ => {
                            log.pubs.unregister(key, &mut wl, &mut spent.wakers);
                            return Attempt::Done(Err(PublishError::Full(batch)));
                        }
                    },
                }
            }
        };
        wl.wake_all();
        drop(olds);
        if more {
            self.wake_remaining_readers(p, n, now);
        }
        Attempt::Done(Ok(Receipt {
            partition: p as u32,
            offset: first,
            count: u32::try_from(n).unwrap_or(u32::MAX),
        }))
    }

    /// A waiting publish's last try on its partition (`Publish::try_now`,
    /// `PublishBatch::try_now`): out of the line first, as a dropped publish leaves it
    /// (the next in line is woken if its room is free), then one attempt by `poll`
    /// without a waker, which never parks. `None` if `value` was published already.
    pub(crate) fn last_try<V>(
        &self,
        route: Route,
        value: &mut Option<V>,
        key: &mut Option<WaitKey>,
        poll: PollPublish<T, V>,
    ) -> Option<Result<Receipt, PublishError<V>>> {
        let Route::Partition(p) = route else {
            return value.take().map(|v| Err(PublishError::InvalidPartition(v)));
        };
        value.as_ref()?;
        self.cancel_publish(p, key);
        match poll(self, p, value, key, None) {
            Poll::Ready(r) => Some(r),
            Poll::Pending => None,
        }
    }

    /// Drops a publish future's registration, passing an unconsumed wake-up on.
    pub(crate) fn cancel_publish(&self, p: usize, key: &mut Option<WaitKey>) {
        if key.is_none() {
            return;
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

/// A handle to a topic: publishes to it, and makes subscribers and group consumers.
///
/// Cloning a `Topic` makes another publishing handle to the same topic. The topic closes
/// when [`Topic::close`] is called or the last handle is dropped: publishers then get
/// [`PublishError::Closed`], and readers drain what is retained before they see `Closed`.
///
/// # Values are cloned under the partition's lock
///
/// A reader gets its own copy of each message (`T::clone`; values that are large are
/// shared, `Arc` or `bytes::Bytes`, so a copy is a reference count). Those copies are
/// made inside the partition's critical section, where the log's slots are: so `T`'s
/// `Clone` must not call into the same topic (publish to it, read it, subscribe to it,
/// ask its stats). If it does, on the partition being read, it waits for a lock its own
/// thread holds, for ever. The same goes for a waker's clone: a reader or publisher that
/// waits has its waker cloned into the wait list (or a TTL alarm) under the lock, which
/// for every runtime's waker is a reference count; a hand-made `RawWaker` whose clone
/// calls into the topic would deadlock. Every other piece of user code memq calls
/// (wake-ups and drops of wakers, clocks, timers, routers, `Drop` of values it lets go
/// of) runs outside memq's locks.
///
/// # Examples
///
/// ```
/// # use memq_core as memq;
/// use memq::{StartAt, Topic, TopicConfig};
///
/// let topic = Topic::new(TopicConfig::new(16))?;
/// let mut sub = topic.subscribe(StartAt::Earliest)?;
/// topic.try_publish("hello")?;
/// assert_eq!(*sub.try_recv()?.value(), "hello");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Topic<T> {
    pub(crate) shared: Arc<Shared<T>>,
}

impl<T> fmt::Debug for Topic<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.fmt(f)
    }
}

impl<T> Clone for Topic<T> {
    fn clone(&self) -> Self {
        self.shared.publishers.fetch_add(1, Ordering::Relaxed);
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Topic<T> {
    fn drop(&mut self) {
        if self.shared.publishers.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.close();
        }
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

/// [`Shared::poll_publish`] or [`Shared::poll_publish_batch`], for code shared by both.
type PollPublish<T, V> = fn(
    &Shared<T>,
    usize,
    &mut Option<V>,
    &mut Option<WaitKey>,
    Option<&Waker>,
) -> Poll<Result<Receipt, PublishError<V>>>;

/// The outcome of one publish attempt.
pub(crate) enum Attempt<T, R> {
    /// Finished, successfully or not.
    Done(Result<R, PublishError<T>>),
    /// Parked until woken; the value is handed back to the future that keeps it.
    Parked(T),
}

/// Where a publish goes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Route {
    Partition(usize),
    Invalid,
}

impl<T> Topic<T> {
    /// Creates a topic.
    ///
    /// # Errors
    ///
    /// [`Error::ZeroCapacity`], [`Error::ZeroPartitions`], [`Error::TtlWithoutClock`];
    /// [`Error::CapacityTooLarge`] if a ring cannot be allocated, or
    /// [`Error::TooManyPartitions`] if the partition table cannot.
    pub fn new(config: TopicConfig) -> Result<Self, Error> {
        Self::build(None, config)
    }

    /// Creates a topic with `capacity` and otherwise default settings.
    ///
    /// # Errors
    ///
    /// [`Error::ZeroCapacity`] if `capacity` is 0; [`Error::CapacityTooLarge`] if the
    /// ring cannot be allocated.
    pub fn with_capacity(capacity: usize) -> Result<Self, Error> {
        Self::new(TopicConfig::new(capacity))
    }

    pub(crate) fn build(name: Option<String>, config: TopicConfig) -> Result<Self, Error> {
        config.validate()?;
        let too_large = Error::CapacityTooLarge {
            capacity: config.capacity,
        };
        let mut parts = Vec::new();
        parts
            .try_reserve_exact(config.partitions as usize)
            .map_err(|_| Error::TooManyPartitions {
                partitions: config.partitions,
            })?;
        for _ in 0..config.partitions {
            let log = PartLog::new(config.capacity, config.release_on_read, parts.len())
                .ok_or_else(|| too_large.clone())?;
            parts.push(Partition {
                log: Mutex::new(log),
                wake_at: Padded(AtomicUsize::new(0)),
                #[cfg(target_has_atomic = "64")]
                tail: Padded(crate::sync::AtomicU64::new(0)),
            });
        }
        let (clock, origin) = match config.clock {
            Some(c) => {
                let (c, origin) = crate::time::anchored(c);
                (Some(c), origin)
            }
            None => (None, core::time::Duration::ZERO),
        };
        Ok(Self {
            shared: Arc::new(Shared {
                name,
                parts,
                capacity: config.capacity,
                overflow: config.overflow,
                ttl: config.ttl.map(as_nanos),
                release_on_read: config.release_on_read,
                timer: match (config.ttl, config.timer) {
                    (None, _) => None,
                    (Some(_), Some(timer)) => Some(timer),
                    #[cfg(feature = "std")]
                    (Some(_), None) => {
                        Some(alloc::sync::Arc::new(crate::time::ThreadTimer::global())
                            as alloc::sync::Arc<dyn Timer>)
                    }
                    #[cfg(not(feature = "std"))]
                    (Some(_), None) => None,
                },
                clock,
                origin,
                router: config.router,
                publishers: AtomicUsize::new(1),
                round_robin: AtomicUsize::new(0),
                groups: Mutex::new(Vec::new()),
                subscribers: AtomicUsize::new(0),
                closed: Padded(AtomicUsize::new(0)),
            }),
        })
    }

    /// The topic's name, if it was created by a [`Broker`](crate::Broker).
    pub fn name(&self) -> Option<&str> {
        self.shared.name.as_deref()
    }

    /// How many messages each partition retains, exactly as configured.
    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }

    /// The number of partitions.
    pub fn partitions(&self) -> u32 {
        self.shared.partition_count()
    }

    /// The overflow policy.
    pub fn overflow(&self) -> Overflow {
        self.shared.overflow
    }

    /// Closes the topic: publishing fails from now on; readers drain what is retained and
    /// then get `Closed`. Every waiting task is woken.
    pub fn close(&self) {
        self.shared.close();
    }

    /// Whether the topic is closed: [`Topic::close`] (or dropping the last handle) has
    /// closed every partition. While a close is under way, partitions it has reached
    /// already refuse publishes, but the topic is not reported closed yet.
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }

    pub(crate) fn route(&self, partition: Option<u32>, key: Option<&[u8]>) -> Route {
        let s = &self.shared;
        match (partition, key) {
            (Some(p), _) => match s.check_partition(p) {
                Ok(p) => Route::Partition(p),
                Err(_) => Route::Invalid,
            },
            (None, Some(k)) => s.route_key(k).map_or(Route::Invalid, Route::Partition),
            (None, None) => Route::Partition(s.route_round_robin()),
        }
    }

    fn publish_with(&self, route: Route, value: T) -> Publish<'_, T> {
        Publish {
            topic: self,
            route,
            value: Some(value),
            key: None,
        }
    }

    /// Publishes `value`, waiting for room if the topic is full and its policy is `Block`.
    /// Unkeyed messages go to partitions in turn (round-robin).
    ///
    /// # Errors
    ///
    /// [`PublishError::Closed`] if the topic is closed; [`PublishError::Full`] on a full
    /// `Reject` topic. The message is handed back in both cases.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it completes publishes nothing, and a wake-up it had
    /// received is passed on to the next waiting publisher.
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// # futures_executor::block_on(async {
    /// let topic = memq::Topic::with_capacity(4)?;
    /// let receipt = topic.publish(7u8).await?;
    /// assert_eq!(receipt.offset, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn publish(&self, value: T) -> Publish<'_, T> {
        self.publish_with(self.route(None, None), value)
    }

    /// Publishes `value` to the partition its key routes to (see [`key_partition`] or the
    /// topic's [`Router`]). Messages with the same key keep their order. The key routes
    /// only: it is not stored with the message (see [`Message`](crate::Message)).
    ///
    /// # Errors
    ///
    /// As [`Topic::publish`], and [`PublishError::InvalidPartition`] if a user router
    /// returns a partition that does not exist.
    ///
    /// # Cancel safety
    ///
    /// As [`Topic::publish`].
    pub fn publish_keyed(&self, key: impl AsRef<[u8]>, value: T) -> Publish<'_, T> {
        self.publish_with(self.route(None, Some(key.as_ref())), value)
    }

    /// Publishes `value` to `partition`.
    ///
    /// # Errors
    ///
    /// As [`Topic::publish`], and [`PublishError::InvalidPartition`] if `partition` does
    /// not exist.
    ///
    /// # Cancel safety
    ///
    /// As [`Topic::publish`].
    pub fn publish_to(&self, partition: u32, value: T) -> Publish<'_, T> {
        self.publish_with(self.route(Some(partition), None), value)
    }

    /// Publishes `value` if there is room now.
    ///
    /// # Errors
    ///
    /// [`PublishError::Full`] if the partition is full and nothing can be evicted (policy
    /// `Block` or `Reject`), [`PublishError::Closed`] if the topic is closed.
    pub fn try_publish(&self, value: T) -> Result<Receipt, PublishError<T>> {
        self.try_route(self.route(None, None), value)
    }

    /// [`Topic::publish_keyed`] without waiting.
    ///
    /// # Errors
    ///
    /// As [`Topic::try_publish`] and [`Topic::publish_keyed`].
    pub fn try_publish_keyed(
        &self,
        key: impl AsRef<[u8]>,
        value: T,
    ) -> Result<Receipt, PublishError<T>> {
        self.try_route(self.route(None, Some(key.as_ref())), value)
    }

    /// [`Topic::publish_to`] without waiting.
    ///
    /// # Errors
    ///
    /// As [`Topic::try_publish`] and [`Topic::publish_to`].
    pub fn try_publish_to(&self, partition: u32, value: T) -> Result<Receipt, PublishError<T>> {
        self.try_route(self.route(Some(partition), None), value)
    }

    fn try_route(&self, route: Route, value: T) -> Result<Receipt, PublishError<T>> {
        let Route::Partition(p) = route else {
            return Err(PublishError::InvalidPartition(value));
        };
        self.shared.try_publish_now(p, value)
    }

    /// Publishes every value of `batch` with contiguous offsets in one partition, or none
    /// of them. Waits (policy `Block`) until there is room for the whole batch.
    ///
    /// Returns the first message's offset and the batch's length (see [`Receipt`]). An
    /// empty batch publishes nothing and does not wait: its receipt has a `count` of 0.
    ///
    /// # Errors
    ///
    /// [`PublishError::Full`] if the batch is larger than the capacity (it could never
    /// fit) or the topic is full under `Reject`; [`PublishError::Closed`] if the topic is
    /// closed. The batch is handed back whole.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it completes publishes nothing.
    pub fn publish_batch(&self, batch: Vec<T>) -> PublishBatch<'_, T> {
        PublishBatch {
            topic: self,
            route: self.route(None, None),
            values: Some(batch),
            key: None,
        }
    }

    /// [`Topic::publish_batch`] to an explicit partition.
    ///
    /// # Errors
    ///
    /// As [`Topic::publish_batch`], and [`PublishError::InvalidPartition`].
    ///
    /// # Cancel safety
    ///
    /// As [`Topic::publish_batch`].
    pub fn publish_batch_to(&self, partition: u32, batch: Vec<T>) -> PublishBatch<'_, T> {
        PublishBatch {
            topic: self,
            route: self.route(Some(partition), None),
            values: Some(batch),
            key: None,
        }
    }

    /// [`Topic::publish_batch`] to the partition `key` routes to (as
    /// [`Topic::publish_keyed`]): every value of `batch` goes there under that one key, in
    /// order, with contiguous offsets, or none does. One visit to the partition for the
    /// whole batch: a keyed producer that gathers a key's messages (Kafka's producers batch
    /// per partition) publishes at batch speed. To batch messages with different keys, group
    /// them by [`key_partition`] (on a topic with the default router) and use
    /// [`Topic::publish_batch_to`].
    ///
    /// # Errors
    ///
    /// As [`Topic::publish_batch`], and [`PublishError::InvalidPartition`] if a user router
    /// returns a partition that does not exist. The batch is handed back whole.
    ///
    /// # Cancel safety
    ///
    /// As [`Topic::publish_batch`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// use memq::{key_partition, StartAt, Topic, TopicConfig};
    /// # futures_executor::block_on(async {
    /// let topic = Topic::new(TopicConfig::new(64).partitions(4))?;
    /// let mut orders = topic.subscribe(StartAt::Earliest)?;
    /// let receipt = topic.publish_batch_keyed("order-17", vec!["placed", "paid", "shipped"]).await?;
    /// assert_eq!(receipt.partition, key_partition(b"order-17", 4));
    /// let got: Vec<_> = (0..3).map(|_| *orders.try_recv().unwrap().value()).collect();
    /// assert_eq!(got, ["placed", "paid", "shipped"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn publish_batch_keyed(&self, key: impl AsRef<[u8]>, batch: Vec<T>) -> PublishBatch<'_, T> {
        PublishBatch {
            topic: self,
            route: self.route(None, Some(key.as_ref())),
            values: Some(batch),
            key: None,
        }
    }

    /// [`Topic::publish_batch`] without waiting. An empty batch succeeds with an empty
    /// receipt (a `count` of 0; see [`Receipt`]).
    ///
    /// # Errors
    ///
    /// [`PublishError::Full`] if the whole batch does not fit now (or is larger than the
    /// capacity), [`PublishError::Closed`] if the topic is closed. The batch is handed
    /// back whole.
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// let topic = memq::Topic::with_capacity(4)?;
    /// // A reader that holds on to what it has not read yet keeps a `Block` topic full.
    /// let _reader = topic.subscribe(memq::StartAt::Earliest)?;
    /// let receipt = topic.try_publish_batch(vec![1, 2, 3])?;
    /// assert_eq!(receipt.offsets(), 0..3);
    /// assert!(topic.try_publish_batch(vec![4, 5]).unwrap_err().is_full());
    /// assert_eq!(topic.try_publish_batch(Vec::new())?.count, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_publish_batch(&self, batch: Vec<T>) -> Result<Receipt, PublishError<Vec<T>>> {
        self.try_route_batch(self.route(None, None), batch)
    }

    /// [`Topic::publish_batch_keyed`] without waiting.
    ///
    /// # Errors
    ///
    /// As [`Topic::try_publish_batch`] and [`Topic::publish_batch_keyed`].
    pub fn try_publish_batch_keyed(
        &self,
        key: impl AsRef<[u8]>,
        batch: Vec<T>,
    ) -> Result<Receipt, PublishError<Vec<T>>> {
        self.try_route_batch(self.route(None, Some(key.as_ref())), batch)
    }

    /// [`Topic::publish_batch_to`] without waiting.
    ///
    /// # Errors
    ///
    /// As [`Topic::try_publish_batch`] and [`Topic::publish_batch_to`].
    pub fn try_publish_batch_to(
        &self,
        partition: u32,
        batch: Vec<T>,
    ) -> Result<Receipt, PublishError<Vec<T>>> {
        self.try_route_batch(self.route(Some(partition), None), batch)
    }

    fn try_route_batch(
        &self,
        route: Route,
        batch: Vec<T>,
    ) -> Result<Receipt, PublishError<Vec<T>>> {
        let Route::Partition(p) = route else {
            return Err(PublishError::InvalidPartition(batch));
        };
        match self.shared.attempt_publish_batch(p, batch, &mut None, None) {
            Attempt::Done(r) => r,
            Attempt::Parked(b) => Err(PublishError::Full(b)),
        }
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
#[must_use = "futures do nothing unless polled"]
pub struct Publish<'a, T> {
    topic: &'a Topic<T>,
    route: Route,
    value: Option<T>,
    key: Option<WaitKey>,
}

impl<T> fmt::Debug for Publish<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Publish")
            .field("route", &self.route)
            .field("waiting", &self.key.is_some())
            .finish_non_exhaustive()
    }
}

impl<T> Unpin for Publish<'_, T> {}

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
        if let Route::Partition(p) = self.route {
            self.topic.shared.cancel_publish(p, &mut self.key);
        }
        self.value.take()
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
    pub fn try_now(mut self) -> Option<Result<Receipt, PublishError<T>>> {
        let shared = &self.topic.shared;
        shared.last_try(
            self.route,
            &mut self.value,
            &mut self.key,
            Shared::poll_publish,
        )
    }
}

impl<T> PublishBatch<'_, T> {
    /// Cancels the batch publish and hands the batch back, or `None` if it was already
    /// published.
    pub fn into_inner(mut self) -> Option<Vec<T>> {
        if let Route::Partition(p) = self.route {
            self.topic.shared.cancel_publish(p, &mut self.key);
        }
        self.values.take()
    }

    /// Stops waiting with one last try: publishes the whole batch now if the partition
    /// has room for it, or hands it back whole, as [`Publish::try_now`] does for one
    /// message. `None` if the batch was published already.
    pub fn try_now(mut self) -> Option<Result<Receipt, PublishError<Vec<T>>>> {
        let shared = &self.topic.shared;
        let poll = Shared::poll_publish_batch;
        shared.last_try(self.route, &mut self.values, &mut self.key, poll)
    }
}

impl<T> Future for Publish<'_, T> {
    type Output = Result<Receipt, PublishError<T>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        match this.route {
            Route::Invalid => match this.value.take() {
                Some(v) => Poll::Ready(Err(PublishError::InvalidPartition(v))),
                None => Poll::Pending,
            },
            Route::Partition(p) => {
                this.topic
                    .shared
                    .poll_publish(p, &mut this.value, &mut this.key, Some(cx.waker()))
            }
        }
    }
}

impl<T> Drop for Publish<'_, T> {
    fn drop(&mut self) {
        if let Route::Partition(p) = self.route {
            self.topic.shared.cancel_publish(p, &mut self.key);
        }
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
#[must_use = "futures do nothing unless polled"]
pub struct PublishBatch<'a, T> {
    topic: &'a Topic<T>,
    route: Route,
    values: Option<Vec<T>>,
    key: Option<WaitKey>,
}

impl<T> fmt::Debug for PublishBatch<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PublishBatch")
            .field("route", &self.route)
            .field("len", &self.values.as_ref().map(Vec::len))
            .finish_non_exhaustive()
    }
}

impl<T> Unpin for PublishBatch<'_, T> {}

impl<T> Future for PublishBatch<'_, T> {
    type Output = Result<Receipt, PublishError<Vec<T>>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        match this.route {
            Route::Invalid => match this.values.take() {
                Some(v) => Poll::Ready(Err(PublishError::InvalidPartition(v))),
                None => Poll::Pending,
            },
            Route::Partition(p) => this.topic.shared.poll_publish_batch(
                p,
                &mut this.values,
                &mut this.key,
                Some(cx.waker()),
            ),
        }
    }
}

impl<T> Drop for PublishBatch<'_, T> {
    fn drop(&mut self) {
        if let Route::Partition(p) = self.route {
            self.topic.shared.cancel_publish(p, &mut self.key);
        }
    }
}
