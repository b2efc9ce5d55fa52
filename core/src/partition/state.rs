//! The state of one partition under its lock: its [`Log`], and who reads and waits on
//! it: the broadcast subscribers parked for news, the publishers parked for room (and
//! their TTL alarms), and the consumer groups reading it, each with its cursor, its
//! parked members and, for an explicit-ack group, its lease book ([`Acks`]).
//!
//! Layer: above the log, the wait lists, the alarms and the acks' lease book; below the
//! readers (subscriber, group, ack consumer) and the publish path, which all work on a
//! [`PartLog`] under the partition's lock.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::ops::{Deref, DerefMut};

use crate::ack::{AckPart, Acks};
use crate::config::Overflow;
use crate::log::{Dest, Entry, FetchInto, Log};
use crate::sync::AtomicUsize;
use crate::time::Alarm;
use crate::wait::{WaitKey, WaiterList, WakeList};

/// A consumer group's id on one partition's log: the slot its state is kept in, and the
/// generation that slot was at when the group took it. A deleted group's slot is taken by
/// the next group attached, at the next generation, so that a log keeps as many slots as
/// it has ever had groups at once, not one per group ever attached; and a member of a
/// deleted group, whose id names the old generation, never reaches the new group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GroupId {
    slot: usize,
    generation: u64,
}

/// A slot of [`Log::groups`].
#[derive(Debug)]
pub(crate) struct GroupSlot {
    generation: u64,
    part: Option<GroupPart>,
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
    /// Messages the group's members were told they missed ([`Read::Lagged`]).
    pub(crate) lagged: u64,
    /// Lease bookkeeping of an explicit-ack group; `None` for automatic commit.
    pub(crate) acks: Option<crate::ack::Acks>,
}

impl GroupPart {
    /// [`Log::notify_readers`] for an explicit-ack group. Out of line: the publish path
    /// of every other topic stays as small as it was.
    #[inline(never)]
    fn notify_explicit(&mut self, n: usize, now: u64, out: &mut WakeList) -> bool {
        match self.acks.as_ref().and_then(|a| a.full_until(now)) {
            Some(by) => {
                let woken = self.waiters.notify_uncovered(n, by, out);
                woken < n && out.is_full()
            }
            None => {
                let woken = self.waiters.notify_many(n, out);
                woken < n && self.waiters.waiting() > 0
            }
        }
    }

    /// For an explicit-ack group, [`Acks::keep_watch`](crate::ack::Acks::keep_watch)
    /// after a member stopped waiting here; `high` is the log's end.
    #[inline]
    pub(crate) fn keep_watch(&mut self, high: u64, out: &mut WakeList) {
        if let Some(acks) = self.acks.as_ref() {
            acks.keep_watch(&mut self.waiters, high, out);
        }
    }
}

/// Who fetches messages ahead of its user, and so where they wait to be handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
///
/// `release` is the topic's `release_on_read`, passed in from the topic's settings so that
/// a retaining log's hot path never looks at its own release state (see [`Dest`]).
pub(crate) enum Fetcher {
    /// A subscriber's own buffer: on `seek` and on drop, what it moved out of a releasing
    /// log goes back ([`Log::give_back`]).
    Subscriber { release: bool },
    /// The shared pool of the group with this id (see `group::Pool`): never taken back
    /// while the group lives, so a fetch may move messages out of a releasing log.
    Pool { group: GroupId, release: bool },
}

impl Fetcher {
    fn group(self) -> Option<GroupId> {
        match self {
            Fetcher::Subscriber { .. } => None,
            Fetcher::Pool { group: id, .. } => Some(id),
        }
    }

    fn dest(self) -> Dest {
        match self {
            Fetcher::Subscriber { release: true } | Fetcher::Pool { release: true, .. } => {
                Dest::Held
            }
            _ => Dest::Copy,
        }
    }
}

/// One partition's log and everyone who reads or waits on it. It derefs to its [`Log`]:
/// readers and publishers read, append and move cursors through it, and this type adds
/// what concerns the groups and the waiters.
#[derive(Debug)]
pub(crate) struct PartLog<T> {
    log: Log<T>,
    /// Broadcast subscribers parked here: all woken per publish.
    pub(crate) subs: WaiterList,
    /// Publishers parked on a full partition: woken by the number of slots freed.
    pub(crate) pubs: WaiterList,
    /// Timer wake-ups pending for publishers parked on this full partition of a topic
    /// with a TTL, by the publisher's place in `pubs`: when (clock time) and whom. One per
    /// parked publisher, so parking again does not pile up timer entries, and taken off
    /// when its wait ends (see `Shared::expiry_alarm`).
    pub(crate) expiry_alarms: Vec<(WaitKey, Alarm)>,
    /// Groups reading this partition, in the slots their [`GroupId`]s name.
    groups: Vec<GroupSlot>,
    /// Slots of deleted groups, for the next groups attached.
    free_groups: Vec<usize>,
    /// Attached explicit-ack groups (each holds the log's release on read back).
    explicit_groups: usize,
    pub(crate) subscribers: usize,
    /// The number of the partition this is the log of.
    pub(crate) partition: usize,
}

/// The state of group `id` in `groups`, if the slot still holds that group (see
/// [`GroupId`]). A free function, so that a caller can borrow the log beside it.
#[inline]
fn group_in(groups: &mut [GroupSlot], id: GroupId) -> Option<&mut GroupPart> {
    match groups.get_mut(id.slot) {
        Some(s) if s.generation == id.generation => s.part.as_mut(),
        _ => None,
    }
}

impl<T> Deref for PartLog<T> {
    type Target = Log<T>;

    #[inline]
    fn deref(&self) -> &Log<T> {
        &self.log
    }
}

impl<T> DerefMut for PartLog<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Log<T> {
        &mut self.log
    }
}

impl<T> PartLog<T> {
    /// Partition `partition`'s state with a log of `capacity` slots, or `None` if that
    /// much memory cannot be had.
    pub(crate) fn new(capacity: usize, release: bool, partition: usize) -> Option<Self> {
        Some(Self {
            log: Log::new(capacity, release)?,
            subs: WaiterList::new(),
            pubs: WaiterList::new(),
            expiry_alarms: Vec::new(),
            groups: Vec::new(),
            free_groups: Vec::new(),
            explicit_groups: 0,
            subscribers: 0,
            partition,
        })
    }

    // ----- reading ahead ------------------------------------------------------------

    /// [`Log::fetch_ahead`] for `by`: what a group's pool fetches counts in the group's
    /// `delivered`, as every read of it does.
    #[inline]
    pub(crate) fn read_ahead(
        &mut self,
        cursor: usize,
        max: usize,
        buf: &mut VecDeque<Entry<T>>,
        by: Fetcher,
    ) where
        T: Clone,
    {
        let (log, into) = self.log_and_into(by);
        log.fetch_ahead(cursor, max, buf, into);
    }

    /// [`Log::hold_and_fetch_ahead`] for `by` (see [`PartLog::read_ahead`]).
    #[inline]
    pub(crate) fn hold_and_read_ahead(
        &mut self,
        cursor: usize,
        first: Entry<T>,
        cell: &AtomicUsize,
        max: usize,
        buf: &mut VecDeque<Entry<T>>,
        by: Fetcher,
    ) -> Entry<T>
    where
        T: Clone,
    {
        let (log, into) = self.log_and_into(by);
        log.hold_and_fetch_ahead(cursor, first, cell, max, buf, into)
    }

    /// The log, and where `by`'s reads go: their [`Dest`], and the `delivered` counter
    /// of the group whose pool it is.
    #[inline]
    fn log_and_into(&mut self, by: Fetcher) -> (&mut Log<T>, FetchInto<'_>) {
        let reads = by
            .group()
            .and_then(|id| group_in(&mut self.groups, id))
            .map(|g| &mut g.delivered);
        let into = FetchInto {
            dest: by.dest(),
            reads,
        };
        (&mut self.log, into)
    }

    // ----- writing ------------------------------------------------------------------

    /// [`Log::append`], counted for the lock's tuning ([`crate::sync::count_published`]).
    #[inline]
    pub(crate) fn append(
        &mut self,
        value: T,
        ts: u64,
        overflow: Overflow,
    ) -> Result<(u64, Option<T>), T> {
        let appended = self.log.append(value, ts, overflow)?;
        crate::sync::count_published(1);
        Ok(appended)
    }

    /// [`Log::append_batch`], counted for the lock's tuning.
    pub(crate) fn append_batch(
        &mut self,
        values: &mut Vec<T>,
        ts: u64,
        overflow: Overflow,
        olds: &mut Vec<T>,
    ) -> Option<u64> {
        let n = values.len();
        let first = self.log.append_batch(values, ts, overflow, olds)?;
        crate::sync::count_published(n);
        Some(first)
    }

    // ----- retention ----------------------------------------------------------------

    /// After a TTL eviction: an explicit-ack group whose position was a message just
    /// evicted while unacknowledged moves to what it still holds (see
    /// [`crate::ack::Acks::holds_from`]), so that it does not keep holding back the
    /// acknowledged messages after it. Other readers' positions below `low` need
    /// everything from `low` on, and stay.
    #[inline(never)]
    pub(crate) fn rehold_acked_groups(&mut self) {
        if self.explicit_groups == 0 {
            return;
        }
        let low = self.low;
        for i in 0..self.groups.len() {
            let (cursor, pos) = match &self.groups[i].part {
                Some(GroupPart {
                    cursor,
                    acks: Some(acks),
                    ..
                }) if self.log.fetched(*cursor) < low => (*cursor, acks.holds_from(low)),
                _ => continue,
            };
            self.log.set_cursor(cursor, pos);
        }
    }

    // ----- waking -------------------------------------------------------------------

    /// Collects the wakers of readers interested in `n` new messages: every subscriber,
    /// and up to `n` members of each group. Returns `true` if some did not fit in `out`.
    ///
    /// An explicit-ack group with `max_in_flight` messages out here and none due again
    /// ([`Acks::full_until`](crate::ack::Acks::full_until)) can take nothing new: only
    /// those of its waiting members whose own timer will not wake them for the next lease
    /// or delay to run out are woken (to look, and arm one). The others would look and
    /// wait again, once per publish, for as long as the partition stays full; an ack,
    /// nack or reject, a member leaving, or their timer wakes them.
    ///
    /// `now` is the topic's clock reading (0 without a clock), taken before the lock.
    #[inline]
    pub(crate) fn notify_readers(&mut self, n: usize, now: u64, out: &mut WakeList) -> bool {
        let mut more = false;
        if self.subs.waiting() > 0 {
            more |= self.subs.notify_all(out);
        }
        for g in self.groups.iter_mut().filter_map(|s| s.part.as_mut()) {
            if g.waiters.waiting() > 0 {
                if g.acks.is_some() {
                    more |= g.notify_explicit(n, now, out);
                } else {
                    let woken = g.waiters.notify_many(n, out);
                    more |= woken < n && g.waiters.waiting() > 0;
                }
            }
        }
        more
    }

    /// How much room must be free before another parked publisher is woken: what the
    /// first in line needs on top of the room promised to those woken and not back yet,
    /// but at least `wake_batch` (see [`Log::wake_batch`]).
    #[inline]
    pub(crate) fn park_need(&self) -> u64 {
        (self.pubs.promised() + self.pubs.head_need()).max(self.wake_batch())
    }

    /// Back-pressure is released in batches: a publisher parked on a full `Block`
    /// partition is woken once readers have freed `capacity / 16` slots (1 to 64), not for
    /// every slot, so that a publisher faster than its readers parks once per batch
    /// instead of once per message. Small logs (under 32 slots) wake for every slot.
    #[inline]
    pub(crate) fn wake_batch(&self) -> u64 {
        (self.log.capacity() / 16).clamp(1, 64)
    }

    /// The smallest position the slowest reader must reach for the room of the first
    /// parked publisher in line to be free: `high + park_need - capacity`. It changes
    /// whenever the first in line does (woken, gone, or the first to park), and each time
    /// it is stored again for readers that hand over without the lock (see
    /// [`Shared::rearm`](crate::partition::Shared)).
    pub(crate) fn wake_position(&self) -> u64 {
        (self.high + self.park_need()).saturating_sub(self.log.capacity())
    }

    /// Collects publishers' wakers once enough room is free (see [`Log::wake_batch`]);
    /// returns how many it took.
    ///
    /// Called after anything that may free room (a reader moving, a reader leaving, TTL
    /// expiry) and after a publish that left room: as long as publishers wait while the
    /// room they wait for is free, they are woken, in the order they parked, as many as
    /// the free slots hold (see [`WaiterList::notify_fitting`]). A woken publisher that
    /// finds the room taken by a faster one parks again and is woken by the next such
    /// event.
    #[inline(never)]
    pub(crate) fn notify_publishers(&mut self, overflow: Overflow, out: &mut WakeList) -> usize {
        if self.pubs.waiting() > 0 {
            let need = self.park_need();
            // Exact below `need`; at or above it, enough for the first in line at least
            // (`Shared::rearm` comes back for the others if more is free).
            let free = self.free_slots(overflow, need);
            if free >= need {
                return self.pubs.notify_fitting(free, out);
            }
        }
        0
    }

    /// Marks the partition closed and collects every waiter it can.
    /// Returns `true` if some did not fit in `out`.
    pub(crate) fn close_and_notify(&mut self, out: &mut WakeList) -> bool {
        self.log.closed = true;
        let mut more = self.subs.notify_all(out);
        more |= self.pubs.notify_all(out);
        for g in self.groups.iter_mut().filter_map(|s| s.part.as_mut()) {
            more |= g.waiters.notify_all(out);
        }
        more
    }

    // ----- groups -------------------------------------------------------------------

    /// Attaches a new group at `start`, in the slot of a deleted group if there is one
    /// (see [`GroupId`]). `explicit` is `Some` for an explicit-ack group, with what its
    /// partitions keep of its settings.
    pub(crate) fn add_group(&mut self, start: u64, explicit: Option<AckPart>) -> GroupId {
        let cursor = self.log.add_cursor(start);
        if explicit.is_some() {
            self.explicit_groups += 1;
            self.log.hold_release();
        }
        let part = GroupPart {
            cursor,
            waiters: WaiterList::new(),
            delivered: 0,
            lagged: 0,
            acks: explicit.map(|part| Acks::new(start, part)),
        };
        if let Some(slot) = self.free_groups.pop() {
            if let Some(s) = self.groups.get_mut(slot) {
                // Generations of a slot never repeat (2^64 reuses of one slot).
                s.generation = s.generation.wrapping_add(1);
                s.part = Some(part);
                return GroupId {
                    slot,
                    generation: s.generation,
                };
            }
        }
        self.groups.push(GroupSlot {
            generation: 0,
            part: Some(part),
        });
        GroupId {
            slot: self.groups.len() - 1,
            generation: 0,
        }
    }

    pub(crate) fn group(&mut self, id: GroupId) -> Option<&mut GroupPart> {
        group_in(&mut self.groups, id)
    }

    /// Group `id`, which the caller found attached under the lock it still holds (a
    /// group leaves only under that lock, so its absence is a bug of memq's).
    pub(crate) fn group_found(&mut self, id: GroupId) -> &mut GroupPart {
        let Some(g) = self.group(id) else {
            unreachable!("memq: a group found under a partition's lock left it meanwhile");
        };
        g
    }

    pub(crate) fn group_ref(&self, id: GroupId) -> Option<&GroupPart> {
        match self.groups.get(id.slot) {
            Some(s) if s.generation == id.generation => s.part.as_ref(),
            _ => None,
        }
    }

    /// Detaches group `id`: its position no longer holds back retention, and its slot
    /// goes to the next group attached. Returns its wait list: the caller wakes every
    /// member still on it once the lock is released (there may be more than one
    /// [`WakeList`] holds).
    pub(crate) fn remove_group(&mut self, id: GroupId) -> Option<WaiterList> {
        let g = match self.groups.get_mut(id.slot) {
            Some(s) if s.generation == id.generation => s.part.take()?,
            _ => return None,
        };
        self.free_groups.push(id.slot);
        if g.acks.is_some() {
            self.explicit_groups -= 1;
            self.log.unhold_release();
        }
        self.log.remove_cursor(g.cursor);
        Some(g.waiters)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deleted groups' slots are taken by the next groups: a program that makes and
    /// deletes short-lived groups keeps as many slots as it had groups at once (each
    /// publish visits every slot; with one per group ever made, 200,000 made and deleted
    /// groups made 100,000 publishes take 84 s instead of 4 ms).
    #[test]
    fn group_slots_are_reused_and_stale_ids_reach_nothing() {
        let mut log = PartLog::<u32>::new(8, false, 0).unwrap();
        let keep = log.add_group(0, None);
        let mut stale = Vec::new();
        for _ in 0..1000 {
            let id = log.add_group(0, None);
            assert!(log.group(id).is_some());
            assert!(log.remove_group(id).is_some());
            stale.push(id);
        }
        assert_eq!(log.groups.len(), 2, "one slot kept, one reused");
        let fresh = log.add_group(0, None);
        assert_eq!(log.groups.len(), 2);
        for id in stale {
            assert_ne!(id, fresh);
            assert!(log.group(id).is_none() && log.group_ref(id).is_none());
            assert!(
                log.remove_group(id).is_none(),
                "a stale id detaches nothing"
            );
        }
        assert!(log.group(fresh).is_some() && log.group(keep).is_some());
        // Every cursor but the two groups' went back too.
        assert_eq!(log.attached(), 2);
    }
}
