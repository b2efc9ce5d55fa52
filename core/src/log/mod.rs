//! One partition's log: the ring of retained messages, with its offsets, retention
//! (capacity, `DropOldest`, TTL), release on read, and the positions of the readers
//! attached to it ([`cursors`]).
//!
//! The log knows nothing of who its readers are (subscribers, consumer groups and their
//! explicit acks live above it, in [`partition`](crate::partition)), nor of who waits for
//! it: it reads, appends, evicts and counts. Everything here runs inside the partition's
//! critical section, so it never calls user code other than `T::clone` (reading), and
//! never drops a value it could hand back instead: evicted and released values are
//! returned to the caller, who lets go of them after the lock is released.
//!
//! Layer: above `sync` and `config` only.

mod cursors;
#[cfg(target_has_atomic = "64")]
pub(crate) mod ring;

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use crate::config::Overflow;
use crate::sync::{AtomicUsize, Ordering};

pub(crate) use cursors::{AheadCell, REVOKED};
use cursors::{Cursors, UNUSED};

/// A retained message.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    pub(crate) offset: u64,
    /// Nanoseconds on the topic's clock; 0 without a clock.
    pub(crate) ts: u64,
    pub(crate) value: T,
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

/// Where a message read from the log goes, which decides whether a releasing log may
/// move it out instead of cloning it (see [`Log::may_release`]).
///
/// Readers of a log that does not release always pass [`Dest::Copy`], decided from the
/// topic's settings outside the lock: then a read touches nothing of the release state
/// (which would cost a cache line under the lock for nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dest {
    /// Straight into the reader's user's hands: may be moved, and the reader has read it.
    User,
    /// Into a buffer of messages fetched ahead whose owner either hands them over or
    /// gives back what it did not ([`Log::give_back`]): a subscriber's read-ahead, or a
    /// group's shared pool (which lives as long as the group). May be moved, but the
    /// message is not read until it is handed over, so its slot stays reserved (counted
    /// against the capacity, `low` does not pass it) until then.
    Held,
    /// Cloned: the log does not release.
    Copy,
}

/// Where messages fetched ahead go ([`Log::fetch_ahead`]): the [`Dest`] of the reads,
/// and a counter each read also counts in (a group's `delivered`), if any.
#[derive(Debug)]
pub(crate) struct FetchInto<'a> {
    pub(crate) dest: Dest,
    pub(crate) reads: Option<&'a mut u64>,
}

/// A broken invariant of the log: a bug in memq, which stops here rather than lose or
/// invent a message. Out of line and cold, so that the checks cost the hot paths one
/// branch and no code.
#[cold]
#[inline(never)]
#[track_caller]
fn broken(what: &str, at: u64) -> ! {
    panic!("memq bug: {what} {at}")
}

/// What [`Log::retained_as_of`] counts: the log as a visit at that time would leave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retained {
    /// The oldest message a reader could read ([`Log::first`]).
    pub(crate) first: u64,
    /// [`Log::expired`], with the messages the TTL would remove.
    pub(crate) expired: u64,
    /// [`Log::released`], with the messages every reader has read.
    pub(crate) released: u64,
}

/// One partition's ring of retained messages and the positions of its readers.
#[derive(Debug)]
pub(crate) struct Log<T> {
    /// The slots, `capacity` of them once the first lap is written. Only their memory
    /// is reserved up front: a slot is added by the first publish that reaches it, so a
    /// log uses memory for what it has held, not for its capacity (and creating many
    /// large partitions touches no pages). Every offset below `high` has its slot.
    ring: Vec<Option<Entry<T>>>,
    capacity: u64,
    /// Oldest retained offset.
    pub(crate) low: u64,
    /// Next offset to publish.
    pub(crate) high: u64,
    pub(crate) closed: bool,
    /// Release on read (see `TopicConfig::release_on_read`): a message every attached
    /// reader has read leaves the log at once, moved to the reader that read it last.
    release: bool,
    /// How many readers hold release on read back (explicit-ack groups, whose leases are
    /// delivered again from the log): while there are any, nothing is released on read.
    release_holds: usize,
    /// End of what a releasing log moved out to readers. Slots from `low` up to here may
    /// be empty: moved into a subscriber's read-ahead or a group's pool and not handed
    /// over yet, they still count against the capacity (`low` passes them once every
    /// reader's true position does), so they can be given back. No reader reads there
    /// (see [`Log::first`]).
    released_to: u64,
    /// Positions of every attached reader: subscribers and groups.
    cursors: Cursors,
    last_ts: u64,
    pub(crate) published: u64,
    pub(crate) delivered: u64,
    pub(crate) evicted: u64,
    pub(crate) expired: u64,
    /// Messages a releasing log let go of once every reader had read them.
    pub(crate) released: u64,
    /// Messages readers were told they missed: the sum of every `Lagged(n)` found here.
    pub(crate) lagged: u64,
}

impl<T> Log<T> {
    /// A log of `capacity` slots, or `None` if that much memory cannot be had.
    pub(crate) fn new(capacity: usize, release: bool) -> Option<Self> {
        let mut ring = Vec::new();
        ring.try_reserve_exact(capacity).ok()?;
        Some(Self {
            ring,
            capacity: capacity as u64,
            low: 0,
            high: 0,
            closed: false,
            release,
            release_holds: 0,
            released_to: 0,
            cursors: Cursors::new(),
            last_ts: 0,
            published: 0,
            delivered: 0,
            evicted: 0,
            expired: 0,
            released: 0,
            lagged: 0,
        })
    }

    /// Makes an empty log start at `offset` (its first message gets it): for a topic
    /// that goes on from a log kept elsewhere. The ring's slots below `offset`'s are
    /// filled with nothing, so that every offset from `low` on has its slot.
    pub(crate) fn start_at(&mut self, offset: u64) {
        debug_assert!(self.high == 0 && self.ring.is_empty());
        self.low = offset;
        self.high = offset;
        self.released_to = offset;
        let first_slot = self.index(offset);
        self.ring.resize_with(first_slot, || None);
    }

    /// How many messages the log holds at most.
    #[inline]
    pub(crate) fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Slots in use: retained messages, and on a releasing log also those moved into a
    /// group's pool and not yet taken from it.
    #[inline]
    pub(crate) fn len(&self) -> u64 {
        self.high - self.low
    }

    /// The oldest message a reader can still read: `low`, or past what a releasing log
    /// moved out.
    #[inline]
    pub(crate) fn first(&self) -> u64 {
        self.low.max(self.released_to)
    }

    #[inline]
    fn index(&self, offset: u64) -> usize {
        (offset % self.capacity) as usize
    }

    /// The message in slot `i`, if any (a slot not written yet holds none).
    #[inline]
    fn slot(&self, i: usize) -> Option<&Entry<T>> {
        self.ring.get(i).and_then(Option::as_ref)
    }

    /// Takes the message out of slot `i`, if any.
    #[inline]
    fn take_slot(&mut self, i: usize) -> Option<Entry<T>> {
        self.ring.get_mut(i).and_then(Option::take)
    }

    /// A reader that holds release on read back attaches (see `release_holds`).
    pub(crate) fn hold_release(&mut self) {
        self.release_holds += 1;
    }

    /// A reader that held release on read back left.
    pub(crate) fn unhold_release(&mut self) {
        self.release_holds -= 1;
    }

    // ----- readers' positions -------------------------------------------------------

    /// Attaches a reader at `pos` and returns its cursor index.
    pub(crate) fn add_cursor(&mut self, pos: u64) -> usize {
        self.cursors.add(pos, None)
    }

    /// Attaches a reader at `pos` with an optional read-ahead cell (see [`Cursors`]).
    pub(crate) fn add_reader(&mut self, pos: u64, ahead: Option<AheadCell>) -> usize {
        self.cursors.add(pos, ahead)
    }

    /// Messages a cursor fetched but has not handed over yet (0 without read-ahead).
    #[inline]
    pub(crate) fn unread(&self, cursor: usize) -> u64 {
        self.cursors.unread(cursor)
    }

    /// Takes back a cursor's read-ahead: the messages it fetched and had not handed over
    /// are not delivered after all, and the cursor's next read is its true position
    /// again (see [`Cursors::revoke_ahead`]).
    pub(crate) fn revoke_ahead(&mut self, cursor: usize) {
        self.delivered -= self.cursors.revoke_ahead(cursor);
    }

    /// Attaches a read-ahead cell to `cursor` (a subscriber's, again after a seek, or a
    /// group's pool); any previous one must have been revoked.
    pub(crate) fn attach_ahead(&mut self, cursor: usize, cell: AheadCell) {
        self.cursors.attach_ahead(cursor, cell);
    }

    /// Whether the log is closed and the reader at `cursor` has been handed everything.
    pub(crate) fn finished(&self, cursor: usize) -> bool {
        self.closed && self.cursor(cursor) >= self.high
    }

    /// Whether `cell` is the read-ahead cell attached to `cursor`.
    pub(crate) fn ahead_is(&self, cursor: usize, cell: &AheadCell) -> bool {
        self.cursors
            .ahead(cursor)
            .is_some_and(|c| crate::sync::Arc::ptr_eq(c, cell))
    }

    /// Detaches a reader. Its hold on the log is released.
    pub(crate) fn remove_cursor(&mut self, cursor: usize) {
        self.revoke_ahead(cursor);
        self.cursors.remove(cursor);
    }

    /// Where a reader's next read from the log starts (its true position plus what it
    /// fetched ahead).
    #[inline]
    pub(crate) fn fetched(&self, cursor: usize) -> u64 {
        self.cursors.fetched(cursor)
    }

    /// A reader's true position: the next offset its user receives.
    #[inline]
    pub(crate) fn cursor(&self, cursor: usize) -> u64 {
        self.cursors.position(cursor)
    }

    /// Moves a reader to `pos` (a seek: may go backwards), taking back its read-ahead
    /// (see [`Log::revoke_ahead`]); the reader empties its own buffer and attaches its
    /// cell again on its next read.
    pub(crate) fn set_cursor(&mut self, cursor: usize, pos: u64) {
        self.revoke_ahead(cursor);
        self.cursors.lower_hint(pos);
        self.cursors.set_fetched(cursor, pos);
    }

    /// Reads up to `max` messages after a reader's fetched end into `buf`, for a reader
    /// with a read-ahead cell, and records how many it now holds unread; each message
    /// read also counts in `reads` (a group's `delivered`, as every read of it does).
    /// Only called where retention cannot pass the reader (no TTL, no `DropOldest`),
    /// right after a read at that cursor succeeded, so the reads cannot lag.
    pub(crate) fn fetch_ahead(
        &mut self,
        cursor: usize,
        max: usize,
        buf: &mut VecDeque<Entry<T>>,
        into: FetchInto<'_>,
    ) where
        T: Clone,
    {
        let FetchInto { dest, mut reads } = into;
        let Some(cell) = self.cursors.ahead(cursor).cloned() else {
            return;
        };
        if self.gap_at(cursor, dest) {
            // Left for the reader's next read to report: reading it here would skip the
            // gap unreported. (Nothing under this lock opens a gap later in the loop.)
            return;
        }
        while buf.len() < max && self.cursors.fetched(cursor) < self.high {
            match self.read(cursor, dest) {
                Read::Message(e) => {
                    buf.push_back(e);
                    // Counted at once: a `T::clone` that panics on a later read leaves
                    // the cell, the cursor, the buffer and `reads` in step.
                    cell.0.store(buf.len(), Ordering::Relaxed);
                    if let Some(n) = reads.as_deref_mut() {
                        *n += 1;
                    }
                }
                Read::Lagged(_) | Read::Empty => break,
            }
        }
    }

    /// A single receive that reads ahead: `first`, just read at `cursor`, is held in `buf`
    /// (counted by `cell`, and in `reads`, as every fetched message is) while more are
    /// fetched, up to `max` in all, so that a `T::clone` that panics while fetching loses
    /// nothing: the next receive hands `first` over. Returns the first buffered message,
    /// to hand over now (`first` itself unless `buf` held older ones).
    #[inline]
    pub(crate) fn hold_and_fetch_ahead(
        &mut self,
        cursor: usize,
        first: Entry<T>,
        cell: &AtomicUsize,
        max: usize,
        buf: &mut VecDeque<Entry<T>>,
        into: FetchInto<'_>,
    ) -> Entry<T>
    where
        T: Clone,
    {
        if buf.is_empty() && self.cursors.fetched(cursor) >= self.high {
            // Nothing to fetch behind `first` (the loop of `fetch_ahead` would not run):
            // it goes straight back, counted, the buffer left empty and the cell saying so.
            if let Some(n) = into.reads {
                *n += 1;
            }
            cell.store(0, Ordering::Relaxed);
            return first;
        }
        self.hold_and_fetch_more(cursor, first, cell, max, buf, into)
    }

    /// [`Log::hold_and_fetch_ahead`] where there may be more to fetch, or `buf` holds
    /// older messages.
    fn hold_and_fetch_more(
        &mut self,
        cursor: usize,
        first: Entry<T>,
        cell: &AtomicUsize,
        max: usize,
        buf: &mut VecDeque<Entry<T>>,
        into: FetchInto<'_>,
    ) -> Entry<T>
    where
        T: Clone,
    {
        let FetchInto { dest, mut reads } = into;
        buf.push_back(first);
        cell.store(buf.len(), Ordering::Relaxed);
        if let Some(n) = reads.as_deref_mut() {
            *n += 1;
        }
        self.fetch_ahead(cursor, max, buf, FetchInto { dest, reads });
        // `buf` holds at least `first`, pushed above; fetching only adds to it.
        let Some(first) = buf.pop_front() else {
            broken("a read-ahead lost the message it was given", 0);
        };
        cell.store(buf.len(), Ordering::Relaxed);
        first
    }

    /// Messages handed to readers (read-ahead not yet handed over is not counted).
    pub(crate) fn delivered(&self) -> u64 {
        self.delivered - self.cursors.unread_total()
    }

    /// How many of the oldest messages no attached reader still needs, recomputing the
    /// minimum position only if the cached bound does not already show `need` of them.
    /// Readers' read-ahead cells may be stale here, which only understates the room; a
    /// publisher about to park counts again after a fence (`Shared::park_publisher`).
    fn evictable(&mut self, need: u64) -> u64 {
        let min = self.cursors.min_at_least(self.low.saturating_add(need));
        min.min(self.high).saturating_sub(self.low)
    }

    /// How many messages could be published right now without waiting: exact when it is
    /// below `need`, else perhaps fewer than are free (from a cached bound on the readers'
    /// positions). `u64::MAX` asks for an exact count.
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

    /// The timestamp of the oldest message still in the log, if any.
    pub(crate) fn oldest_ts(&self) -> Option<u64> {
        (self.low < self.high)
            .then(|| self.slot(self.index(self.low)).map(|e| e.ts))
            .flatten()
    }

    /// What this log would retain after a visit that applies the TTL (`ttl`, as of the
    /// clock reading `now`; see [`Log::evict_expired`]) and then lets go of what every
    /// reader has read ([`Log::release_read`]), counted without doing either: nothing
    /// changes. For `Topic::stats`, which reports the log as a reader's visit would find
    /// it, and is a read.
    pub(crate) fn retained_as_of(&self, now: u64, ttl: Option<u64>) -> Retained {
        let mut low = self.low;
        let mut expired = self.expired;
        if let Some(ttl) = ttl {
            // As `evict_expired`: the prefix of stamped messages older than `ttl`.
            while low < self.high {
                match self.slot(self.index(low)) {
                    Some(e) if now.saturating_sub(e.ts) > ttl => low += 1,
                    _ => break,
                }
            }
            expired += low - self.low;
        }
        let mut released = self.released;
        if self.releasing() && low < self.high {
            // As `release_read`: up to the slowest reader; empty slots were moved out
            // (and counted) already.
            let min = self.cursors.min_position();
            if min != UNUSED {
                let end = min.min(self.high);
                while low < end {
                    released += u64::from(self.slot(self.index(low)).is_some());
                    low += 1;
                }
            }
        }
        Retained {
            first: low.max(self.released_to),
            expired,
            released,
        }
    }

    /// Evicts messages older than `ttl` as of `now`; their values go to `dead`, to be
    /// dropped after unlocking (nothing reads below `low`, and left in their slots they
    /// would live until a publish reuses the slot, which may be never). Messages are
    /// stamped in offset order with a non-decreasing clock, so expired ones always form a
    /// prefix. Returns how many were removed.
    pub(crate) fn evict_expired(&mut self, now: u64, ttl: u64, dead: &mut Vec<T>) -> u64 {
        let start = self.low;
        while self.low < self.high {
            let i = self.index(self.low);
            match self.slot(i) {
                Some(e) if now.saturating_sub(e.ts) > ttl => {
                    if let Some(e) = self.take_slot(i) {
                        dead.push(e.value);
                    }
                    self.low += 1;
                }
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
    #[inline]
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
            self.evict_oldest();
        }
        Ok(self.push(value, ts))
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
                self.evict_oldest();
            }
            let (_, old) = self.push(value, ts);
            if let Some(old) = old {
                olds.push(old);
            }
        }
        Some(first)
    }

    /// Gives up the oldest slot to make room; its value, if a releasing log has not moved
    /// it out already, is dropped by the caller when the publish overwrites the slot.
    ///
    /// A value still there in a releasing log may be a copy that every reader has been
    /// handed (fetched ahead past a slower reader, handed over without the lock since the
    /// last visit that let go of such copies): then it is counted as released, as that
    /// visit would have, not as evicted.
    // Always inlined, as `push`: it runs once per message published into a full log.
    #[inline(always)]
    fn evict_oldest(&mut self) {
        let i = self.index(self.low);
        if self.slot(i).is_some() {
            if self.read_by_every_reader(self.low) {
                self.released += 1;
            } else {
                self.evicted += 1;
            }
        }
        self.low += 1;
    }

    /// Whether release on read is on and not held back by any reader.
    #[inline]
    fn releasing(&self) -> bool {
        self.release && self.release_holds == 0
    }

    /// Whether this is a releasing log that lets go of the message at `pos` (see
    /// [`Log::release_read`]): readers are attached, none holds release back, and every
    /// one has been handed it.
    fn read_by_every_reader(&self, pos: u64) -> bool {
        if !self.releasing() {
            return false;
        }
        let min = self.cursors.min_position();
        min != UNUSED && min > pos
    }

    /// Appends after the caller made sure there is room (`len < capacity` or evictable).
    // Always inlined: a call per message of a batch cost S4 (batches) a fifth of its speed.
    #[inline(always)]
    fn push(&mut self, value: T, ts: u64) -> (u64, Option<T>) {
        debug_assert!(self.len() < self.capacity);
        let offset = self.high;
        let ts = ts.max(self.last_ts);
        self.last_ts = ts;
        let i = self.index(offset);
        let entry = Entry { offset, ts, value };
        let old = match self.ring.get_mut(i) {
            Some(slot) => slot.replace(entry),
            None => {
                // First lap: offsets are written in order, so the slot is the next one
                // (its memory was reserved by `Log::new`).
                if i != self.ring.len() {
                    broken("a ring slot was skipped: slot", i as u64);
                }
                self.ring.push(Some(entry));
                None
            }
        };
        debug_assert!(old.as_ref().is_none_or(|e| e.offset < self.low));
        self.high += 1;
        self.published += 1;
        (offset, old.map(|e| e.value))
    }

    // ----- reading ------------------------------------------------------------------

    /// The oldest position a read into `dest` can read (a copy can read what a releasing
    /// log moved out to readers ahead of their users, as long as the slot holds it).
    #[inline]
    fn first_for(&self, dest: Dest) -> u64 {
        if dest == Dest::Copy {
            self.low
        } else {
            self.first()
        }
    }

    /// Whether a read at `cursor` into `dest` would report a gap ([`Read::Lagged`]).
    /// Checked by callers that must not go on into a gap after reading messages: the gap
    /// is reported by the next read, on its own.
    pub(crate) fn gap_at(&self, cursor: usize, dest: Dest) -> bool {
        self.cursors.fetched(cursor) < self.first_for(dest)
    }

    /// The value a [`Log::read`] at `cursor` into `dest` would return, without reading
    /// it: nothing changes. `None` where the read would report a gap or find nothing.
    pub(crate) fn peek(&self, cursor: usize, dest: Dest) -> Option<&T> {
        let pos = self.cursors.fetched(cursor);
        if pos < self.first_for(dest) || pos >= self.high {
            return None;
        }
        self.slot(self.index(pos)).map(|e| &e.value)
    }

    /// Reads the message at the position held by `cursor`, advancing it.
    ///
    /// `dest` says where the message goes; a releasing log moves it out instead of
    /// cloning it where [`Log::may_release`] allows.
    pub(crate) fn read(&mut self, cursor: usize, dest: Dest) -> Read<T>
    where
        T: Clone,
    {
        let pos = self.cursors.fetched(cursor);
        debug_assert!(dest == Dest::Copy || self.release);
        let first = self.first_for(dest);
        if pos < first {
            self.cursors.set_fetched(cursor, first);
            // Every gap a read finds is reported to the reader (callers that must not go
            // into one check `gap_at` first), so it is counted here, once.
            self.lagged += first - pos;
            return Read::Lagged(first - pos);
        }
        if pos >= self.high {
            return Read::Empty;
        }
        let i = self.index(pos);
        if dest != Dest::Copy && self.may_release(cursor, pos) {
            if let Some(e) = self.take_slot(i) {
                debug_assert_eq!(e.offset, pos);
                self.cursors.set_fetched(cursor, pos + 1);
                self.released_to = pos + 1;
                if dest == Dest::User {
                    // Every other reader is past it and this one has it: its slot is free,
                    // and so is every slot up to this reader's true position (short of it
                    // only while the reader also holds messages in a pool).
                    self.low = self.low.max(self.cursor(cursor));
                }
                self.delivered += 1;
                self.released += 1;
                return Read::Message(e);
            }
        }
        // Every slot from `first` to `high` holds its message: only a releasing log
        // moves messages out, and only below `released_to`, which `first` is past.
        let Some(entry) = self.slot(i) else {
            broken("a retained slot of a log is empty: offset", pos);
        };
        debug_assert_eq!(entry.offset, pos);
        // `T::clone` runs before any state changes, so a panicking clone leaves the log
        // as it was.
        let e = Entry {
            offset: entry.offset,
            ts: entry.ts,
            value: entry.value.clone(),
        };
        self.cursors.set_fetched(cursor, pos + 1);
        self.delivered += 1;
        Read::Message(e)
    }

    /// Whether the message at `pos`, about to be read at `cursor`, may leave the log with
    /// this read: the log releases on read, `pos` is its oldest readable message, no
    /// reader holds release back, and every other reader's true position (what it
    /// fetched ahead and has not handed over, or holds in a pool, still counts as unread)
    /// is past `pos`. Costs one look at each attached reader, and only at the oldest
    /// message of a releasing log.
    fn may_release(&self, cursor: usize, pos: u64) -> bool {
        self.releasing() && pos == self.first() && self.cursors.others_past(cursor, pos)
    }

    /// Puts back into their slots the messages a reader moved out of a releasing log into
    /// its read-ahead (`Dest::Held`) and did not hand over, before a seek or a drop takes
    /// its read-ahead back ([`Log::revoke_ahead`]). Their slots are still reserved: `low`
    /// never passes a reader's true position, and nobody else reads there. What remains
    /// in `buf` (copies: the log has those) is the caller's to drop.
    pub(crate) fn give_back(&mut self, buf: &mut VecDeque<Entry<T>>) {
        let Some(start) = buf.front().map(|e| e.offset) else {
            return;
        };
        let mut given = 0;
        while let Some(e) = buf.front() {
            let (offset, i) = (e.offset, self.index(e.offset));
            if offset < self.low || offset >= self.high || self.slot(i).is_some() {
                // A copy (the log holds the message), or the window moved on.
                debug_assert!(offset >= self.low, "a held message's slot was reused");
                break;
            }
            // A held message was read from a written slot below `high`.
            let Some(slot) = self.ring.get_mut(i) else {
                broken(
                    "the slot of a held message was never written: slot",
                    i as u64,
                );
            };
            if let Some(e) = buf.pop_front() {
                *slot = Some(e);
                given += 1;
            }
        }
        if given > 0 {
            self.released -= given;
            self.released_to = self.released_to.min(start);
        }
    }

    /// Lets go of the messages every attached reader has read, for a releasing log (see
    /// [`Log::may_release`]); their values go to `out`, to be dropped after unlocking.
    /// A message read while another reader had not read it yet is copied, not moved, and
    /// stays in the log until the last reader passes it, so readers call this on their
    /// visits. With no reader attached, or one that holds release back, nothing is
    /// released.
    pub(crate) fn release_read(&mut self, out: &mut Vec<T>) {
        if !self.releasing() || self.low == self.high {
            return;
        }
        let min = self.cursors.min_position();
        if min == UNUSED {
            return; // no reader: kept for the first one to come
        }
        let end = min.min(self.high);
        while self.low < end {
            let i = self.index(self.low);
            // Empty slots were moved out (and counted) already.
            if let Some(e) = self.take_slot(i) {
                out.push(e.value);
                self.released += 1;
            }
            self.low += 1;
        }
    }

    /// A copy of the retained message at `offset`, if it is still retained.
    pub(crate) fn entry_at(&self, offset: u64) -> Option<Entry<T>>
    where
        T: Clone,
    {
        if offset < self.low || offset >= self.high {
            return None;
        }
        let e = self.slot(self.index(offset))?;
        debug_assert_eq!(e.offset, offset);
        Some(Entry {
            offset: e.offset,
            ts: e.ts,
            value: e.value.clone(),
        })
    }

    /// How many readers are attached (for tests of detaching).
    #[cfg(test)]
    pub(crate) fn attached(&self) -> usize {
        self.cursors.attached()
    }
}
