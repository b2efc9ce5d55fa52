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
    /// The counters of the readers attached, summed by `stats`.
    counts: Vec<Arc<ReaderCounts>>,
    /// What readers that detached counted.
    gone: (u64, u64),
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
    /// Counters for a reader that attaches.
    pub(crate) fn attach_counts(&mut self) -> Arc<ReaderCounts> {
        let c = Arc::new(ReaderCounts::default());
        self.counts.push(c.clone());
        c
    }

    /// Folds a detaching reader's counters into the partition's.
    pub(crate) fn detach_counts(&mut self, c: &Arc<ReaderCounts>) {
        if let Some(i) = self.counts.iter().position(|x| Arc::ptr_eq(x, c)) {
            self.counts.swap_remove(i);
            let (d, l) = c.get();
            self.gone.0 += d;
            self.gone.1 += l;
        }
    }

    /// Messages delivered and messages readers were told they missed, over every reader
    /// the partition had; and how many readers are attached.
    pub(crate) fn counted(&self) -> (u64, u64, usize) {
        let (mut d, mut l) = self.gone;
        for c in &self.counts {
            let (cd, cl) = c.get();
            d += cd;
            l += cl;
        }
        (d, l, self.counts.len())
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
                counts: Vec::new(),
                gone: (0, 0),
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
    fn wake_readers(&self, _rearm: Rearm<'_>) {
        // Every subscriber is woken, so nobody is left waiting: the flag stays clear.
        self.wake_all(|l| &mut l.subs);
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
