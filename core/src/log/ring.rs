//! A partition on memq's lock-free ring ([`memq_ring::Ring`]) instead of the locked
//! [`Log`](super::Log): the ring holds the messages and every reader's position, and
//! publishes and reads take no lock; the lists of who waits stay memq's own
//! ([`WaiterList`]), under a small mutex of their own ([`RingWaits`]) that is never held
//! across a call into the ring (the ring calls [`Waiters`] from inside its operations).
//!
//! Only topics whose semantics the ring keeps run here (see
//! `TopicConfig::ring_engine`); which reader kinds do so far is in docs/ENGINE-PLAN.md.
//!
//! Layer: with the log, above `sync` and `wait`.

use alloc::vec::Vec;

use memq_ring::{Rearm, Ring, RingConfig, Room, Waiters};

use crate::sync::{Arc, AtomicBool, AtomicU64, Mutex, Ordering};
use crate::wait::{WaiterList, WakeList};

/// The wait lists of a partition on the ring, and its readers' counters.
#[derive(Debug)]
pub(crate) struct WaitLists {
    /// Subscribers waiting for a message.
    pub(crate) subs: WaiterList,
    /// Publishers waiting for room (`Block`).
    pub(crate) pubs: WaiterList,
    /// The subscribers' counters.
    counts: Counters,
    /// Each consumer group's members waiting, and their counters, by the id the group
    /// was given here ([`WaitLists::add_group`]; ids are never reused, so a member of a
    /// deleted group cannot reach the lists of a group made after it).
    groups: Vec<(u64, GroupWaits)>,
    /// The id of the next group added.
    next_group: u64,
    /// What groups deleted since counted.
    gone_groups: (u64, u64),
}

/// The counters of a kind of reader on one partition: those attached, and what those
/// that detached counted.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    counts: Vec<Arc<ReaderCounts>>,
    gone: (u64, u64),
}

impl Counters {
    fn attach(&mut self) -> Arc<ReaderCounts> {
        let c = Arc::new(ReaderCounts::default());
        self.counts.push(c.clone());
        c
    }

    fn detach(&mut self, c: &Arc<ReaderCounts>) {
        if let Some(i) = self.counts.iter().position(|x| Arc::ptr_eq(x, c)) {
            self.counts.swap_remove(i);
            let (d, l) = c.get();
            self.gone.0 += d;
            self.gone.1 += l;
        }
    }

    /// Delivered and lagged, over every reader counted here.
    fn counted(&self) -> (u64, u64) {
        let (mut d, mut l) = self.gone;
        for c in &self.counts {
            let (cd, cl) = c.get();
            d += cd;
            l += cl;
        }
        (d, l)
    }
}

/// One consumer group on a ring partition: its members waiting for a message there, and
/// each member's counters (members of a group may compete for one partition, so each
/// counts in cells of its own).
#[derive(Debug)]
pub(crate) struct GroupWaits {
    pub(crate) waiters: WaiterList,
    counts: Counters,
}

/// One reader's counters on a ring partition: messages handed over, and messages it was
/// told it missed. Written by that reader only (a load and a store, no read-modify-write
/// on the message path), read by `stats`.
#[derive(Debug, Default)]
pub(crate) struct ReaderCounts {
    delivered: AtomicU64,
    lagged: AtomicU64,
}

impl ReaderCounts {
    /// One message handed over.
    #[inline]
    pub(crate) fn delivered(&self) {
        let n = self.delivered.load(Ordering::Relaxed);
        self.delivered.store(n + 1, Ordering::Relaxed);
    }

    /// `n` messages handed over.
    #[inline]
    pub(crate) fn delivered_many(&self, n: u64) {
        let d = self.delivered.load(Ordering::Relaxed);
        self.delivered.store(d + n, Ordering::Relaxed);
    }

    /// A gap of `n` messages reported.
    pub(crate) fn lagged(&self, n: u64) {
        let l = self.lagged.load(Ordering::Relaxed);
        self.lagged.store(l + n, Ordering::Relaxed);
    }

    fn get(&self) -> (u64, u64) {
        (
            self.delivered.load(Ordering::Relaxed),
            self.lagged.load(Ordering::Relaxed),
        )
    }
}

impl WaitLists {
    /// Counters for a subscriber that attaches.
    pub(crate) fn attach_counts(&mut self) -> Arc<ReaderCounts> {
        self.counts.attach()
    }

    /// Folds a detaching subscriber's counters into the partition's.
    pub(crate) fn detach_counts(&mut self, c: &Arc<ReaderCounts>) {
        self.counts.detach(c);
    }

    /// Messages delivered and messages readers were told they missed, over every
    /// subscriber and group the partition had; and how many subscribers are attached.
    pub(crate) fn counted(&self) -> (u64, u64, usize) {
        let (mut d, mut l) = self.counts.counted();
        d += self.gone_groups.0;
        l += self.gone_groups.1;
        for (_, g) in &self.groups {
            let (gd, gl) = g.counts.counted();
            d += gd;
            l += gl;
        }
        (d, l, self.counts.counts.len())
    }

    /// A new consumer group's wait list and counters; returns the group's id here.
    pub(crate) fn add_group(&mut self) -> u64 {
        let id = self.next_group;
        self.next_group += 1;
        let g = GroupWaits {
            waiters: WaiterList::new(),
            counts: Counters::default(),
        };
        self.groups.push((id, g));
        id
    }

    /// The group `id`, unless it was removed. (A partition has a few groups: a look
    /// through them is made by waits, not by each message.)
    pub(crate) fn group(&mut self, id: u64) -> Option<&mut GroupWaits> {
        self.groups
            .iter_mut()
            .find(|(g, _)| *g == id)
            .map(|(_, g)| g)
    }

    /// Removes the group `id` (deleted): its counts stay in the partition's, and its
    /// wait list is handed back, for the caller to wake everyone on it after the lock.
    pub(crate) fn remove_group(&mut self, id: u64) -> Option<WaiterList> {
        let i = self.groups.iter().position(|(g, _)| *g == id)?;
        let (_, g) = self.groups.swap_remove(i);
        let (d, l) = g.counts.counted();
        self.gone_groups.0 += d;
        self.gone_groups.1 += l;
        Some(g.waiters)
    }

    /// What the members of the group `id` delivered and were told they missed.
    pub(crate) fn group_counted(&self, id: u64) -> (u64, u64) {
        self.groups
            .iter()
            .find(|(g, _)| *g == id)
            .map_or((0, 0), |(_, g)| g.counts.counted())
    }
}

impl GroupWaits {
    /// Counters for a member of the group.
    pub(crate) fn attach_counts(&mut self) -> Arc<ReaderCounts> {
        self.counts.attach()
    }

    /// Folds a leaving member's counters into the group's.
    pub(crate) fn detach_counts(&mut self, c: &Arc<ReaderCounts>) {
        self.counts.detach(c);
    }
}

/// [`Waiters`] for memq's ring partitions: wakes the tasks and threads parked on memq's
/// wait lists. The ring calls it with no lock of memq's held; it takes the lists' mutex
/// to collect wakers and wakes them after letting go of it (no user code, such as a
/// waker, runs under a lock of memq's).
#[derive(Debug)]
pub(crate) struct RingWaits {
    pub(crate) lists: Mutex<WaitLists>,
    /// Set before the ring closes: a close wakes every waiting publisher, not the first
    /// in line only.
    closing: AtomicBool,
    /// The ring's first offset (what `published` counts from).
    pub(crate) base: u64,
    /// The ring's capacity.
    capacity: u64,
}

impl RingWaits {
    fn new(base: u64, capacity: u64) -> Self {
        Self {
            lists: Mutex::new(WaitLists {
                subs: WaiterList::new(),
                pubs: WaiterList::new(),
                counts: Counters::default(),
                groups: Vec::new(),
                next_group: 0,
                gone_groups: (0, 0),
            }),
            base,
            capacity,
            closing: AtomicBool::new(false),
        }
    }

    /// Wakes the publishers in front of the line for as long as their room is free
    /// (`free()` slots, less what was promised to publishers woken before and not back
    /// yet), as memq's line of parked publishers on the locked log: in order, and a
    /// large batch is not overtaken by small ones behind it. If publishers are left
    /// waiting, the first one's need (with the room promised before it) is announced to
    /// the ring again (`announce(n)`, the ring's wake position having been cleared to
    /// wake them): `false` if that room is free by now, and then this looks again. Once the
    /// partition is closing, every publisher is woken.
    ///
    /// Called by the ring (room freed) and by publishers that leave the line (got on,
    /// gave up, dropped), with no lock held; the lists' lock is let go of before the ring
    /// is asked anything.
    pub(crate) fn wake_publishers(&self, free: impl Fn() -> u64, announce: impl Fn(usize) -> bool) {
        loop {
            if self.closing.load(Ordering::SeqCst) {
                self.wake_all(|l| &mut l.pubs);
                return;
            }
            let room = free();
            let mut wl = WakeList::new();
            // What the first left waiting needs: its own slots and those promised to the
            // publishers woken before it.
            let want = {
                let mut lists = self.lists.lock();
                let pubs = &mut lists.pubs;
                pubs.notify_fitting(room, &mut wl);
                (pubs.waiting() > 0).then(|| pubs.promised().saturating_add(pubs.head_need()))
            };
            let full = wl.is_full();
            wl.wake_all();
            if full {
                // More may fit than one list of wakers holds.
                continue;
            }
            match want {
                // More than the ring holds: it waits for those woken before it to come
                // back (each that does calls this again).
                Some(n) if n > self.capacity => return,
                Some(n) if !announce(n as usize) => continue,
                _ => return,
            }
        }
    }

    /// Wakes every parked publisher (the partition closed).
    pub(crate) fn wake_every_publisher(&self) {
        self.wake_all(|l| &mut l.pubs);
    }

    /// Marks the partition as closing, before `Ring::close` wakes its waiters.
    pub(crate) fn closing(&self) {
        self.closing.store(true, Ordering::SeqCst);
    }

    /// Wakes every waiter of the list `pick` chooses, a [`WakeList`] at a time.
    fn wake_all(&self, pick: impl Fn(&mut WaitLists) -> &mut WaiterList) {
        let mut wl = WakeList::new();
        loop {
            let more = pick(&mut self.lists.lock()).notify_all(&mut wl);
            wl.wake_all();
            if !more {
                break;
            }
        }
    }
}

impl Waiters for RingWaits {
    /// Something was published: every waiting subscriber is woken, and of each group
    /// as many waiting members as messages were made ready (`rearm.ready()`: one
    /// message is for one member; a member woken wakes the next if more are ready,
    /// through the ring's flag, which `rearm` keeps set while members are left
    /// waiting), in the order they registered. A close wakes every member.
    fn wake_readers(&self, rearm: Rearm<'_>) {
        let closing = self.closing.load(Ordering::SeqCst);
        let ready = rearm.ready().max(1);
        let mut rearm = Some(rearm);
        loop {
            let mut wl = WakeList::new();
            let (more, others) = {
                let mut lists = self.lists.lock();
                let lists = &mut *lists;
                let mut more = lists.subs.notify_all(&mut wl);
                let mut others = false;
                for (_, g) in &mut lists.groups {
                    let waiters = &mut g.waiters;
                    if closing {
                        more |= waiters.notify_all(&mut wl);
                    } else if waiters.waiting() > 0 {
                        // Left waiting once these are woken (those that do not fit in
                        // the list of wakers are woken in the next round).
                        let wake = ready.min(waiters.waiting());
                        others |= waiters.waiting() > wake;
                        more |= waiters.notify_many(wake, &mut wl) < wake;
                    }
                }
                (more, others)
            };
            // Before anyone is woken, so that a member woken finds the flag set.
            if others {
                if let Some(r) = rearm.take() {
                    r.others_wait();
                }
            }
            wl.wake_all();
            if !more {
                return;
            }
        }
    }

    /// Room was freed: the publishers in front of the line whose room is free are woken
    /// ([`RingWaits::wake_publishers`]). A close wakes them all.
    fn wake_writers(&self, room: Room<'_>) {
        self.wake_publishers(|| room.free(), |n| room.wait_for(n));
    }
}

/// A partition's messages on the ring, with the lists of who waits for it.
pub(crate) type PartRing<T> = Ring<T, RingWaits>;

/// The largest first offset a ring partition starts at: the ring takes first offsets up
/// to `2^62 - 1 - 2 × capacity`; memq-core keeps topics that start beyond `2^61` (or
/// whose capacity leaves no room under that bound) on the locked log.
pub(crate) const MAX_FIRST_OFFSET: u64 = 1 << 61;

/// A ring of `capacity` messages (`drop_oldest` for `DropOldest` topics) whose first
/// offset is `first`; `None` if the ring cannot be made (its size: the topic is then
/// refused with `Error::CapacityTooLarge`, as the locked log would be).
pub(crate) fn new_ring<T>(capacity: usize, drop_oldest: bool, first: u64) -> Option<PartRing<T>> {
    if first > MAX_FIRST_OFFSET {
        return None;
    }
    let config = RingConfig {
        drop_oldest,
        first_offset: first,
        ..RingConfig::new(capacity)
    };
    Ring::with_waiters(config, RingWaits::new(first, capacity as u64)).ok()
}
