//! Waiter lists: who is parked on a partition, and who gets woken.
//!
//! A [`WaiterList`] lives inside a partition's critical section. Futures own a
//! [`WaitKey`] into it, so registering again after a spurious wake-up reuses the same slot:
//! the list allocates only when it grows past its largest size so far, never per wait.
//! Waking is split in two: under the lock, wakers are *taken* into a [`WakeList`]; after the
//! guard is dropped, the caller wakes them. No waker runs under a lock.
//!
//! This module knows nothing about messages or offsets.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::task::Waker;

/// Handle to a slot in a [`WaiterList`], owned by exactly one future or handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WaitKey(usize);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    /// Not in use; on the free list.
    Free,
    /// Allocated, not waiting (e.g. its owner was served without parking).
    Idle,
    /// Parked with a waker, queued for notification.
    Waiting,
    /// Taken off the queue and woken; the owner has not run yet.
    Notified,
}

#[derive(Debug)]
struct Slot {
    state: SlotState,
    waker: Option<Waker>,
    /// Woken by every notification, without taking anyone's turn (see
    /// [`WaiterList::register_extra`]).
    extra: bool,
    /// How much the waiter waits for (a publisher: slots), for
    /// [`WaiterList::notify_fitting`]; 1 unless registered with
    /// [`WaiterList::register_needing`].
    need: u64,
    /// Counts the slot's turns in the queue: a queue entry stands for the slot only while
    /// the numbers agree (the slot may have been freed and reused by another waiter
    /// since the entry was queued, and must not take the place of that stale entry).
    turn: u32,
    /// When it started waiting, in the list's count of waits: its place in line, which it
    /// keeps when woken and waiting again.
    since: u64,
    /// The clock time by which a timer of its own wakes the waiter, if it has one (see
    /// [`WaiterList::register_timed`]).
    alarm: Option<u64>,
}

impl Slot {
    /// Whether a queue entry of `turn` stands for this slot.
    fn is_queued(&self, turn: u32) -> bool {
        self.state == SlotState::Waiting && self.turn == turn
    }
}

/// Registered wakers of one kind (subscribers, group members or publishers) on one
/// partition, served in FIFO order.
#[derive(Debug, Default)]
pub(crate) struct WaiterList {
    slots: Vec<Slot>,
    free: Vec<usize>,
    /// FIFO of keys that were `Waiting` when pushed, with the slot's turn then. Entries
    /// whose slot is no longer `Waiting`, or is waiting in a later turn, are stale and
    /// skipped; the queue is compacted when stale entries dominate.
    queue: VecDeque<(usize, u32)>,
    waiting: usize,
    /// The needs of the registrations woken and not yet back (`Notified`), added up: room
    /// [`WaiterList::notify_fitting`] has promised them, which it does not give again.
    promised: u64,
    /// Waits started so far (see `Slot::since`).
    waits: u64,
    /// At least the latest alarm of any waiting registration (`u64::MAX` for one without
    /// an alarm): raised by every registration, made exact again by a scan of
    /// [`WaiterList::notify_uncovered`] that saw the whole queue. While it is at or
    /// before a deadline, every waiter is covered, and the scan is skipped: a publish to
    /// a partition at its `max_in_flight` costs the same however many members wait there.
    alarm_bound: u64,
}

impl WaiterList {
    pub(crate) const fn new() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            queue: VecDeque::new(),
            waiting: 0,
            promised: 0,
            waits: 0,
            alarm_bound: 0,
        }
    }

    /// How many registrations are waiting to be woken.
    #[inline]
    pub(crate) fn waiting(&self) -> usize {
        self.waiting
    }

    /// Parks `waker` under `key` (allocating a slot the first time) and queues it.
    ///
    /// Registering a key that is already waiting only refreshes its waker, keeping its
    /// place in the queue.
    ///
    /// A waker it replaces goes to `spent`, to be dropped after the lock.
    #[inline]
    pub(crate) fn register(
        &mut self,
        key: &mut Option<WaitKey>,
        waker: &Waker,
        spent: &mut SpentWakers,
    ) {
        self.register_as(key, Fresh::Borrowed(waker), false, 1, None, spent);
    }

    /// [`WaiterList::register`] for a waiter that its own timer wakes by clock time
    /// `alarm` (if `Some`), whatever happens on the list: an explicit-ack group member
    /// waiting on a partition at its `max_in_flight`, whose lease deadlines its timer
    /// covers. [`WaiterList::notify_uncovered`] passes over it.
    pub(crate) fn register_timed(
        &mut self,
        key: &mut Option<WaitKey>,
        waker: &Waker,
        alarm: Option<u64>,
        spent: &mut SpentWakers,
    ) {
        self.register_as(key, Fresh::Borrowed(waker), false, 1, alarm, spent);
    }

    /// [`WaiterList::register`] for a waiter that waits for `need` of something (a
    /// publisher for `need` free slots): see [`WaiterList::notify_fitting`].
    pub(crate) fn register_needing(
        &mut self,
        key: &mut Option<WaitKey>,
        waker: &Waker,
        need: u64,
        spent: &mut SpentWakers,
    ) {
        self.register_as(key, Fresh::Borrowed(waker), false, need, None, spent);
    }

    /// [`WaiterList::register`] for a waiter that may stop waiting without telling: a
    /// group member polled as a `Stream`, whose `next()` future can be dropped (under a
    /// timeout, say) while the member stays registered. Such a registration is woken by
    /// every notification that reaches its place in the queue (while the wake list has a
    /// place to spare for the waiter whose turn it is), but takes nobody's turn:
    /// [`WaiterList::notify_one`] goes on to the next waiter as well, so a wake-up meant
    /// for one member never ends with one that is no longer listening. Once woken it is
    /// [`SlotState::Idle`], holding no notification to pass on.
    pub(crate) fn register_extra(
        &mut self,
        key: &mut Option<WaitKey>,
        waker: &Waker,
        spent: &mut SpentWakers,
    ) {
        self.register_as(key, Fresh::Borrowed(waker), true, 1, None, spent);
    }

    /// [`WaiterList::register`] with `waker` cloned already, before the caller changed
    /// anything a panic in the clone would leave half done (a subscriber about to read
    /// the message it stays registered after). No user code runs in here.
    pub(crate) fn register_cloned(
        &mut self,
        key: &mut Option<WaitKey>,
        waker: Waker,
        spent: &mut SpentWakers,
    ) {
        self.register_as(key, Fresh::Cloned(waker), false, 1, None, spent);
    }

    fn register_as(
        &mut self,
        key: &mut Option<WaitKey>,
        waker: Fresh<'_>,
        extra: bool,
        need: u64,
        alarm: Option<u64>,
        spent: &mut SpentWakers,
    ) {
        let index = match *key {
            Some(WaitKey(i)) => i,
            None => {
                let i = match self.free.pop() {
                    Some(i) => i,
                    None => {
                        self.slots.push(Slot {
                            state: SlotState::Free,
                            waker: None,
                            extra: false,
                            need: 1,
                            turn: 0,
                            since: 0,
                            alarm: None,
                        });
                        self.slots.len() - 1
                    }
                };
                self.slots[i].state = SlotState::Idle;
                *key = Some(WaitKey(i));
                i
            }
        };
        let slot = &mut self.slots[index];
        // The waker is cloned before anything changes: a `clone` that panics (user code)
        // leaves the registration as it was.
        let fresh = match (&slot.waker, waker) {
            (Some(w), Fresh::Borrowed(new)) if w.will_wake(new) => None,
            (Some(w), Fresh::Cloned(new)) if w.will_wake(&new) => {
                spent.keep(Some(new));
                None
            }
            (_, Fresh::Borrowed(new)) => Some(new.clone()),
            (_, Fresh::Cloned(new)) => Some(new),
        };
        let was = slot.state;
        if was == SlotState::Notified {
            self.promised -= slot.need;
        }
        slot.extra = extra;
        slot.need = need;
        slot.alarm = alarm;
        self.alarm_bound = self.alarm_bound.max(alarm.unwrap_or(u64::MAX));
        if let Some(w) = fresh {
            spent.keep(slot.waker.replace(w));
        }
        if was != SlotState::Waiting {
            debug_assert_ne!(was, SlotState::Free);
            slot.state = SlotState::Waiting;
            slot.turn = slot.turn.wrapping_add(1);
            self.waiting += 1;
            let entry = (index, slot.turn);
            if was == SlotState::Notified {
                // Woken and waiting again (what it was woken for was taken first): it
                // keeps its place, before everyone who started waiting after it. Those
                // woken before it that wait again are at the front too, in their order.
                let since = slot.since;
                let slots = &self.slots;
                let at = self
                    .queue
                    .iter()
                    .position(|&(i, turn)| slots[i].is_queued(turn) && slots[i].since > since)
                    .unwrap_or(self.queue.len());
                self.queue.insert(at, entry);
            } else {
                self.waits += 1;
                slot.since = self.waits;
                self.queue.push_back(entry);
            }
        }
    }

    /// Marks the registration as served (no longer waiting, notification consumed),
    /// keeping the slot for the next wait. Returns whether it had been notified.
    ///
    /// The stored waker is released so that a finished wait keeps no task alive. It goes
    /// to `spent`: it may be the last reference (a future polled last by another task, a
    /// waker of the user's own making), and its drop must not run under the lock.
    #[inline]
    pub(crate) fn settle(&mut self, key: Option<WaitKey>, spent: &mut SpentWakers) -> bool {
        // Inline, so that a caller that did not register pays one test.
        match key {
            Some(WaitKey(i)) => self.settle_slot(i, spent),
            None => false,
        }
    }

    /// [`WaiterList::settle`] for the registration in slot `i`.
    fn settle_slot(&mut self, i: usize, spent: &mut SpentWakers) -> bool {
        let slot = &mut self.slots[i];
        let was = slot.state;
        match was {
            SlotState::Waiting => self.waiting -= 1,
            SlotState::Notified => self.promised -= slot.need,
            _ => {}
        }
        slot.state = SlotState::Idle;
        spent.keep(slot.waker.take());
        self.maybe_compact();
        was == SlotState::Notified
    }

    /// Removes a wait registration, passing an unconsumed notification on to the next
    /// waiter of the list (into `out`). The removed waker goes to `spent`, to be dropped
    /// after unlocking.
    #[inline]
    pub(crate) fn unregister(
        &mut self,
        key: &mut Option<WaitKey>,
        out: &mut WakeList,
        spent: &mut SpentWakers,
    ) {
        let (notified, waker) = self.remove(key);
        spent.keep(waker);
        if notified {
            self.notify_one(out);
        }
    }

    /// Frees the slot of `key`. Returns whether it held an unconsumed notification, which
    /// the caller must pass on (see [`WaiterList::notify_one`]) where one waiter per event
    /// is woken.
    pub(crate) fn remove(&mut self, key: &mut Option<WaitKey>) -> (bool, Option<Waker>) {
        let Some(WaitKey(i)) = key.take() else {
            return (false, None);
        };
        let slot = &mut self.slots[i];
        let was = slot.state;
        match was {
            SlotState::Waiting => self.waiting -= 1,
            SlotState::Notified => self.promised -= slot.need,
            _ => {}
        }
        slot.state = SlotState::Free;
        // The waker is handed back so that it is dropped after the lock is released.
        let waker = slot.waker.take();
        self.free.push(i);
        self.maybe_compact();
        (was == SlotState::Notified, waker)
    }

    fn maybe_compact(&mut self) {
        if self.queue.len() > 2 * self.waiting + 32 {
            let slots = &self.slots;
            self.queue.retain(|&(i, turn)| slots[i].is_queued(turn));
        }
    }

    /// Takes the oldest waiting registration's waker into `out`, and the wakers of the
    /// extra registrations queued before it (see [`WaiterList::register_extra`]) as long
    /// as they leave a place in `out` for it: extras that do not fit stay queued, so a
    /// turn handed on is never lost behind them. Returns `false` if no registration that
    /// takes a turn was taken: nobody else was waiting, or `out` is full.
    #[inline]
    pub(crate) fn notify_one(&mut self, out: &mut WakeList) -> bool {
        // Inline, so that a list nobody waits on (every publish asks) costs one test.
        self.waiting > 0 && self.take_turn(out)
    }

    /// [`WaiterList::notify_one`] on a list where someone waits.
    fn take_turn(&mut self, out: &mut WakeList) -> bool {
        // Stale entries are dropped; a first in line that is no extra is taken here.
        while !out.is_full() {
            let Some(&(i, turn)) = self.queue.front() else {
                return false;
            };
            let slot = &mut self.slots[i];
            if !slot.is_queued(turn) {
                self.queue.pop_front();
                continue;
            }
            if slot.extra {
                return self.take_turn_past_extras(out);
            }
            self.queue.pop_front();
            self.take(i, out);
            return true;
        }
        false
    }

    /// Takes waiting registration `i`, off the queue already: notified, its waker into
    /// `out`, its need promised.
    fn take(&mut self, i: usize, out: &mut WakeList) {
        let slot = &mut self.slots[i];
        self.waiting -= 1;
        self.promised += slot.need;
        slot.state = SlotState::Notified;
        if let Some(w) = slot.waker.take() {
            out.push(w);
        }
    }

    /// [`WaiterList::take_turn`] with an extra registration first in line.
    fn take_turn_past_extras(&mut self, out: &mut WakeList) -> bool {
        // Extras passed over for want of room in `out`, to be queued again in front.
        let mut kept: Vec<(usize, u32)> = Vec::new();
        let mut taken = false;
        while self.waiting > kept.len() && !out.is_full() {
            let Some((i, turn)) = self.queue.pop_front() else {
                break;
            };
            let slot = &mut self.slots[i];
            if !slot.is_queued(turn) {
                continue;
            }
            if slot.extra {
                if out.room() < 2 {
                    kept.push((i, turn));
                    continue;
                }
                self.waiting -= 1;
                slot.state = SlotState::Idle;
                if let Some(w) = slot.waker.take() {
                    out.push(w);
                }
                continue;
            }
            self.take(i, out);
            taken = true;
            break;
        }
        if !kept.is_empty() {
            for entry in kept.into_iter().rev() {
                self.queue.push_front(entry);
            }
        }
        taken
    }

    /// Wakes waiters in FIFO order for as long as their needs, added up, fit in `room`
    /// less what was promised to those woken before and not back yet, and stops at the
    /// first that does not fit: it keeps its place, and those behind it wait for it (a
    /// large batch is not overtaken for ever by small ones). Returns how many were taken.
    pub(crate) fn notify_fitting(&mut self, room: u64, out: &mut WakeList) -> usize {
        let mut room = room.saturating_sub(self.promised);
        let mut done = 0;
        while self.waiting > 0 && !out.is_full() {
            let Some(&(i, turn)) = self.queue.front() else {
                break;
            };
            let slot = &mut self.slots[i];
            if !slot.is_queued(turn) {
                self.queue.pop_front();
                continue;
            }
            if slot.need > room {
                break;
            }
            room -= slot.need;
            self.queue.pop_front();
            self.take(i, out);
            done += 1;
        }
        done
    }

    /// Whether `key` is waiting to be woken: a registration that parked and has not been
    /// woken since (one that was woken is `Notified`).
    #[inline]
    pub(crate) fn is_waiting(&self, key: Option<WaitKey>) -> bool {
        matches!(key, Some(WaitKey(i)) if self.slots[i].state == SlotState::Waiting)
    }

    /// Whether the waiting registration `key` is the first in line.
    pub(crate) fn is_first_waiting(&self, key: Option<WaitKey>) -> bool {
        let Some(WaitKey(k)) = key else {
            return false;
        };
        self.queue
            .iter()
            .find(|&&(i, turn)| self.slots[i].is_queued(turn))
            .is_some_and(|&(i, _)| i == k)
    }

    /// Room promised to registrations woken and not back yet (see
    /// [`WaiterList::notify_fitting`]).
    pub(crate) fn promised(&self) -> u64 {
        self.promised
    }

    /// The need of the first registration in line (0 if none is waiting): what
    /// [`WaiterList::notify_fitting`] waits for, beyond what it promised, before it wakes
    /// anyone.
    pub(crate) fn head_need(&self) -> u64 {
        if self.waiting == 0 {
            return 0;
        }
        self.queue
            .iter()
            .find(|&&(i, turn)| self.slots[i].is_queued(turn))
            .map_or(0, |&(i, _)| self.slots[i].need)
    }

    /// [`WaiterList::notify_many`] for waiters that nothing but a deadline can serve now:
    /// wakes up to `n` of those whose own timer does not wake them by clock time `by`
    /// (registered without an alarm, or with a later one), in FIFO order, and leaves the
    /// others in their places. Returns how many were taken (extras, woken as by
    /// [`WaiterList::notify_one`], do not count).
    pub(crate) fn notify_uncovered(&mut self, n: usize, by: u64, out: &mut WakeList) -> usize {
        // A bound of `u64::MAX` may stand for a waiter without an alarm, which no
        // deadline covers: then the scan decides.
        if (self.alarm_bound <= by && self.alarm_bound < u64::MAX) || self.waiting == 0 {
            return 0;
        }
        let mut done = 0;
        let mut j = 0;
        // The latest alarm among those passed over and left in line.
        let mut kept = 0;
        while done < n && j < self.queue.len() && !out.is_full() {
            let (i, turn) = self.queue[j];
            let slot = &mut self.slots[i];
            if !slot.is_queued(turn) {
                self.queue.remove(j);
                continue;
            }
            if slot.alarm.is_some_and(|at| at <= by) || (slot.extra && out.room() < 2) {
                kept = kept.max(slot.alarm.unwrap_or(u64::MAX));
                j += 1;
                continue;
            }
            self.queue.remove(j);
            self.waiting -= 1;
            if slot.extra {
                slot.state = SlotState::Idle;
            } else {
                slot.state = SlotState::Notified;
                self.promised += slot.need;
                done += 1;
            }
            if let Some(w) = slot.waker.take() {
                out.push(w);
            }
        }
        if j >= self.queue.len() {
            // Every registration still in line was seen.
            self.alarm_bound = kept;
        }
        done
    }

    /// Whether some registration was woken and has not come back yet, on a list whose
    /// registrations each need at least 1 (group members always need 1).
    pub(crate) fn any_notified(&self) -> bool {
        self.promised > 0
    }

    /// Whether some waiter will look by clock time `by` without being notified: its own
    /// timer wakes it by then (see [`WaiterList::register_timed`]), or it was notified
    /// already and has not come back.
    pub(crate) fn has_timer_by(&self, by: u64) -> bool {
        self.slots.iter().any(|s| match s.state {
            SlotState::Notified => true,
            SlotState::Waiting => s.alarm.is_some_and(|at| at <= by),
            SlotState::Free | SlotState::Idle => false,
        })
    }

    /// Wakes up to `n` waiters in FIFO order; returns how many were taken.
    pub(crate) fn notify_many(&mut self, n: usize, out: &mut WakeList) -> usize {
        let mut done = 0;
        while done < n && self.notify_one(out) {
            done += 1;
        }
        done
    }

    /// Takes every waiting waker that fits into `out`. Returns `true` if some are still
    /// waiting (the caller wakes what it has, then calls again).
    pub(crate) fn notify_all(&mut self, out: &mut WakeList) -> bool {
        while self.notify_one(out) {}
        self.waiting > 0
    }
}

/// The waker a registration is made with: the caller's, to clone, or a clone it made.
enum Fresh<'a> {
    Borrowed(&'a Waker),
    Cloned(Waker),
}

/// How many wakers a [`WakeList`] holds.
const WAKE_LIST: usize = 32;

/// Wakers let go of under a lock, to be dropped after it is released.
///
/// A waker's last drop runs code of its owner's (a custom [`Wake`](alloc::task::Wake)
/// type's `Drop`, a task's deallocation), and memq runs no user code under its locks: a
/// `Drop` that calls back into the same topic would deadlock on it. Declare the bin before
/// the lock's guard, so that it is dropped after the guard. The first waker is kept inline
/// (a served wait lets go of one on every wake-up): only a second one allocates.
#[derive(Default)]
pub(crate) struct SpentWakers {
    first: Option<Waker>,
    more: Vec<Waker>,
}

impl core::fmt::Debug for SpentWakers {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let len = usize::from(self.first.is_some()) + self.more.len();
        f.debug_struct("SpentWakers").field("len", &len).finish()
    }
}

impl SpentWakers {
    pub(crate) const fn new() -> Self {
        Self {
            first: None,
            more: Vec::new(),
        }
    }

    /// Whether it holds no waker and no allocation.
    #[inline]
    pub(crate) fn holds_nothing(&self) -> bool {
        self.first.is_none() && self.more.capacity() == 0
    }

    /// Keeps `waker` (if any) until the bin is dropped.
    #[inline]
    pub(crate) fn keep(&mut self, waker: Option<Waker>) {
        if let Some(w) = waker {
            if self.first.is_none() {
                self.first = Some(w);
            } else {
                self.keep_more(w);
            }
        }
    }

    /// [`SpentWakers::keep`] past the inline place: out of line, no `Vec` growth inline.
    #[cold]
    #[inline(never)]
    fn keep_more(&mut self, waker: Waker) {
        self.more.push(waker);
    }
}

/// Wakers taken under a lock, to be woken after it is released.
///
/// Fixed capacity on the stack: a caller that fills it releases the lock, wakes, and
/// comes back for the rest. The storage is set up by the first waker pushed: most lists
/// are made on hot paths (every publish, every receive) and stay empty, and setting up
/// 32 slots there cost a 520-byte `memset` each time (6 % of a keyed, partitioned run).
pub(crate) struct WakeList {
    wakers: Option<heapless::Vec<Waker, WAKE_LIST>>,
}

impl core::fmt::Debug for WakeList {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WakeList")
            .field("len", &self.wakers.as_ref().map_or(0, |w| w.len()))
            .finish()
    }
}

impl WakeList {
    pub(crate) const fn new() -> Self {
        Self { wakers: None }
    }

    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.wakers.as_ref().is_some_and(heapless::Vec::is_full)
    }

    /// Whether it holds no waker.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.wakers.as_ref().is_none_or(heapless::Vec::is_empty)
    }

    /// How many more wakers fit.
    #[inline]
    fn room(&self) -> usize {
        WAKE_LIST - self.wakers.as_ref().map_or(0, |w| w.len())
    }

    fn push(&mut self, waker: Waker) {
        // `notify_one` checks `is_full` before taking a waker, so this cannot fail; if it
        // ever did, waking at once is still correct (just under the lock).
        if let Err(w) = self
            .wakers
            .get_or_insert_with(heapless::Vec::new)
            .push(waker)
        {
            w.wake();
        }
    }

    /// Wakes everything collected. Must be called with no lock held.
    #[inline]
    pub(crate) fn wake_all(&mut self) {
        // Inline, so that a list never used (most of them) costs one test.
        if let Some(wakers) = &mut self.wakers {
            Self::wake_each(wakers);
        }
    }

    /// [`WakeList::wake_all`] once the storage is set up.
    fn wake_each(wakers: &mut heapless::Vec<Waker, WAKE_LIST>) {
        while let Some(w) = wakers.pop() {
            w.wake();
        }
    }
}

impl Drop for WakeList {
    #[inline]
    fn drop(&mut self) {
        self.wake_all();
    }
}

#[cfg(test)]
mod tests;
