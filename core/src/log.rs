//! One partition's log: the ring of retained messages, the positions of every attached
//! reader, the waiter lists, and the partition's counters.
//!
//! Everything here runs inside the partition's critical section, so it never calls user
//! code other than `T::clone` (reading) and never wakes or drops anything it could hand
//! back instead: evicted values and wakers are returned to the caller, who lets go of them
//! after the lock is released.

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::config::Overflow;
use crate::wait::{WaitKey, WaiterList, WakeList};

/// A retained message.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    pub(crate) offset: u64,
    /// Nanoseconds on the topic's clock; 0 without a clock.
    pub(crate) ts: u64,
    pub(crate) value: T,
}

/// A consumer group's state on one partition.
#[derive(Debug)]
pub(crate) struct GroupPart {
    /// Index of the group's position in [`Log::cursors`].
    pub(crate) cursor: usize,
    /// Members parked on this partition, woken one per message in FIFO order.
    pub(crate) waiters: WaiterList,
    /// Messages delivered to the group from this partition.
    pub(crate) delivered: u64,
    /// Lease bookkeeping of an explicit-ack group; `None` for automatic commit.
    pub(crate) acks: Option<crate::ack::Acks>,
}

/// What a reader found at its position.
#[derive(Debug)]
pub(crate) enum Read<T> {
    /// A message (value cloned out of the ring).
    Message(Entry<T>),
    /// The reader was behind the retained window; its position moved to `low`.
    Lagged(u64),
    /// Nothing at or after the position.
    Empty,
}

/// Position value marking an unused cursor slot: never the minimum of anything retained.
const UNUSED: u64 = u64::MAX;

#[derive(Debug)]
pub(crate) struct Log<T> {
    ring: Box<[Option<Entry<T>>]>,
    capacity: u64,
    /// Oldest retained offset.
    pub(crate) low: u64,
    /// Next offset to publish.
    pub(crate) high: u64,
    pub(crate) closed: bool,
    /// Positions of every attached reader: subscribers and groups. `UNUSED` when free.
    cursors: Vec<u64>,
    cursor_free: Vec<usize>,
    /// A lower bound of the smallest position in `cursors`.
    min_hint: u64,
    /// Broadcast subscribers parked here: all woken per publish.
    pub(crate) subs: WaiterList,
    /// Publishers parked on a full partition: woken by the number of slots freed.
    pub(crate) pubs: WaiterList,
    /// Groups reading this partition, indexed by the group's id on this partition.
    pub(crate) groups: Vec<Option<GroupPart>>,
    pub(crate) subscribers: usize,
    last_ts: u64,
    pub(crate) published: u64,
    pub(crate) delivered: u64,
    pub(crate) evicted: u64,
    pub(crate) expired: u64,
}

impl<T> Log<T> {
    /// A log of `capacity` slots, or `None` if that much memory cannot be had.
    pub(crate) fn new(capacity: usize) -> Option<Self> {
        let mut ring = Vec::new();
        ring.try_reserve_exact(capacity).ok()?;
        ring.resize_with(capacity, || None);
        Some(Self {
            ring: ring.into_boxed_slice(),
            capacity: capacity as u64,
            low: 0,
            high: 0,
            closed: false,
            cursors: Vec::new(),
            cursor_free: Vec::new(),
            min_hint: UNUSED,
            subs: WaiterList::new(),
            pubs: WaiterList::new(),
            groups: Vec::new(),
            subscribers: 0,
            last_ts: 0,
            published: 0,
            delivered: 0,
            evicted: 0,
            expired: 0,
        })
    }

    #[inline]
    pub(crate) fn len(&self) -> u64 {
        self.high - self.low
    }

    #[inline]
    fn index(&self, offset: u64) -> usize {
        (offset % self.capacity) as usize
    }

    // ----- readers' positions -------------------------------------------------------

    /// Attaches a reader at `pos` and returns its cursor index.
    pub(crate) fn add_cursor(&mut self, pos: u64) -> usize {
        self.min_hint = self.min_hint.min(pos);
        match self.cursor_free.pop() {
            Some(i) => {
                self.cursors[i] = pos;
                i
            }
            None => {
                self.cursors.push(pos);
                self.cursors.len() - 1
            }
        }
    }

    /// Detaches a reader. Its hold on the log is released.
    pub(crate) fn remove_cursor(&mut self, cursor: usize) {
        debug_assert_ne!(self.cursors[cursor], UNUSED);
        self.cursors[cursor] = UNUSED;
        self.cursor_free.push(cursor);
    }

    #[inline]
    pub(crate) fn cursor(&self, cursor: usize) -> u64 {
        self.cursors[cursor]
    }

    /// Moves a reader to `pos` (a seek: may go backwards).
    pub(crate) fn set_cursor(&mut self, cursor: usize, pos: u64) {
        self.min_hint = self.min_hint.min(pos);
        self.cursors[cursor] = pos;
    }

    /// How many of the oldest messages no attached reader still needs, recomputing the
    /// minimum position only if the cached bound does not already show `need` of them.
    fn evictable(&mut self, need: u64) -> u64 {
        let bound = self.min_hint.min(self.high).saturating_sub(self.low);
        if bound >= need {
            return bound;
        }
        self.min_hint = self.cursors.iter().copied().min().unwrap_or(UNUSED);
        self.min_hint.min(self.high).saturating_sub(self.low)
    }

    /// How many messages could be published right now without waiting.
    pub(crate) fn free_slots(&mut self, overflow: Overflow, need: u64) -> u64 {
        let room = self.capacity - self.len();
        match overflow {
            Overflow::DropOldest => self.capacity,
            Overflow::Block | Overflow::Reject => {
                if room >= need {
                    room
                } else {
                    room + self.evictable(need - room)
                }
            }
        }
    }

    // ----- retention ----------------------------------------------------------------

    /// Evicts messages older than `ttl` as of `now`. Messages are stamped in offset
    /// order with a non-decreasing clock, so expired ones always form a prefix.
    /// Returns how many were removed.
    pub(crate) fn evict_expired(&mut self, now: u64, ttl: u64) -> u64 {
        let start = self.low;
        while self.low < self.high {
            let i = self.index(self.low);
            match &self.ring[i] {
                Some(e) if now.saturating_sub(e.ts) > ttl => self.low += 1,
                _ => break,
            }
        }
        let n = self.low - start;
        self.expired += n;
        n
    }

    // ----- writing ------------------------------------------------------------------

    /// Appends `value` if the overflow policy allows it now; returns its offset and the
    /// value it overwrote in the ring (to be dropped by the caller after unlocking).
    pub(crate) fn append(
        &mut self,
        value: T,
        ts: u64,
        overflow: Overflow,
    ) -> Result<(u64, Option<T>), T> {
        if self.len() == self.capacity {
            if overflow != Overflow::DropOldest && self.evictable(1) == 0 {
                return Err(value);
            }
            self.low += 1;
            self.evicted += 1;
        }
        Ok(self.push(value, ts))
    }

    /// Appends after the caller made sure there is room (`len < capacity` or evictable).
    fn push(&mut self, value: T, ts: u64) -> (u64, Option<T>) {
        debug_assert!(self.len() < self.capacity);
        let offset = self.high;
        let ts = ts.max(self.last_ts);
        self.last_ts = ts;
        let i = self.index(offset);
        let old = self.ring[i].replace(Entry { offset, ts, value });
        debug_assert!(old.as_ref().is_none_or(|e| e.offset < self.low));
        self.high += 1;
        self.published += 1;
        (offset, old.map(|e| e.value))
    }

    /// Appends every value or none. `olds` receives the values overwritten in the ring.
    pub(crate) fn append_batch(
        &mut self,
        values: &mut Vec<T>,
        ts: u64,
        overflow: Overflow,
        olds: &mut Vec<T>,
    ) -> Option<u64> {
        let n = values.len() as u64;
        if n > self.capacity || self.free_slots(overflow, n) < n {
            return None;
        }
        let first = self.high;
        for value in values.drain(..) {
            if self.len() == self.capacity {
                self.low += 1;
                self.evicted += 1;
            }
            let (_, old) = self.push(value, ts);
            if let Some(old) = old {
                olds.push(old);
            }
        }
        Some(first)
    }

    /// Collects the wakers of readers interested in `n` new messages: every subscriber,
    /// and up to `n` members of each group. Returns `true` if some did not fit in `out`.
    pub(crate) fn notify_readers(&mut self, n: usize, out: &mut WakeList) -> bool {
        let mut more = false;
        if self.subs.waiting() > 0 {
            more |= self.subs.notify_all(out);
        }
        for g in self.groups.iter_mut().flatten() {
            if g.waiters.waiting() > 0 {
                let woken = g.waiters.notify_many(n, out);
                more |= woken < n && g.waiters.waiting() > 0;
            }
        }
        more
    }

    /// Collects publishers' wakers for as many slots as are free now.
    ///
    /// Called after anything that may free room (a reader moving, a reader leaving, TTL
    /// expiry) and after a publish that left room: as long as a publisher waits while a
    /// slot is free, some waiter is woken. A woken publisher that finds the room taken by
    /// a faster one parks again and is woken by the next such event.
    pub(crate) fn notify_publishers(&mut self, overflow: Overflow, out: &mut WakeList) {
        if self.pubs.waiting() > 0 {
            let free = self.free_slots(overflow, 1);
            self.pubs
                .notify_many(free.min(usize::MAX as u64) as usize, out);
        }
    }

    /// Marks the partition closed and collects every waiter it can.
    /// Returns `true` if some did not fit in `out`.
    pub(crate) fn close_and_notify(&mut self, out: &mut WakeList) -> bool {
        self.closed = true;
        let mut more = self.subs.notify_all(out);
        more |= self.pubs.notify_all(out);
        for g in self.groups.iter_mut().flatten() {
            more |= g.waiters.notify_all(out);
        }
        more
    }

    // ----- reading ------------------------------------------------------------------

    /// Reads the message at the position held by `cursor`, advancing it.
    pub(crate) fn read(&mut self, cursor: usize) -> Read<T>
    where
        T: Clone,
    {
        let pos = self.cursors[cursor];
        if pos < self.low {
            self.cursors[cursor] = self.low;
            return Read::Lagged(self.low - pos);
        }
        if pos >= self.high {
            return Read::Empty;
        }
        let i = self.index(pos);
        let Some(entry) = &self.ring[i] else {
            debug_assert!(false, "retained slot {pos} is empty");
            return Read::Empty;
        };
        debug_assert_eq!(entry.offset, pos);
        // `T::clone` runs before any state changes, so a panicking clone leaves the log
        // as it was.
        let e = Entry {
            offset: entry.offset,
            ts: entry.ts,
            value: entry.value.clone(),
        };
        self.cursors[cursor] = pos + 1;
        self.delivered += 1;
        Read::Message(e)
    }

    /// A copy of the retained message at `offset`, if it is still retained.
    pub(crate) fn entry_at(&self, offset: u64) -> Option<Entry<T>>
    where
        T: Clone,
    {
        if offset < self.low || offset >= self.high {
            return None;
        }
        let e = self.ring[self.index(offset)].as_ref()?;
        debug_assert_eq!(e.offset, offset);
        Some(Entry {
            offset: e.offset,
            ts: e.ts,
            value: e.value.clone(),
        })
    }

    // ----- groups -------------------------------------------------------------------

    /// Attaches a new group at `start`. Group ids are never reused, so a member of a
    /// deleted group can never reach another group's state.
    pub(crate) fn add_group(&mut self, start: u64, explicit: bool) -> usize {
        let cursor = self.add_cursor(start);
        self.groups.push(Some(GroupPart {
            cursor,
            waiters: WaiterList::new(),
            delivered: 0,
            acks: explicit.then(|| crate::ack::Acks::new(start)),
        }));
        self.groups.len() - 1
    }

    pub(crate) fn group(&mut self, id: usize) -> Option<&mut GroupPart> {
        self.groups.get_mut(id).and_then(Option::as_mut)
    }

    pub(crate) fn group_ref(&self, id: usize) -> Option<&GroupPart> {
        self.groups.get(id).and_then(Option::as_ref)
    }

    /// Detaches a group: its position no longer holds back retention.
    pub(crate) fn remove_group(&mut self, id: usize, out: &mut WakeList) {
        if let Some(mut g) = self.groups[id].take() {
            self.remove_cursor(g.cursor);
            g.waiters.notify_all(out);
        }
    }

    /// Removes a wait registration from `list`, passing an unconsumed notification on to
    /// the next waiter of the same list. The removed waker goes to `out` to be dropped
    /// after unlocking (waking it is harmless: its owner is gone or not waiting).
    pub(crate) fn unregister(list: &mut WaiterList, key: &mut Option<WaitKey>, out: &mut WakeList) {
        let (notified, waker) = list.remove(key);
        drop(waker);
        if notified {
            list.notify_one(out);
        }
    }
}
