//! A topic's partitions and the state its readers and publishers share ([`Shared`]).
//!
//! Owns each partition's lock and [`Log`], the lock-free cells beside it (the wake
//! position of parked publishers, the published tail), the topic's settings, clock and
//! TTL, expiry, closing, and the wake-position protocol: readers that free room wake the
//! publishers parked for it ([`Shared::rearm`], [`Shared::ahead_consumed`]), paired by
//! fences with a publisher that parks ([`Shared::park_publisher`]).
//!
//! Layer: above the log, the wait lists, sync and time; below the readers (`subscriber`,
//! `group`, `ack`), the publish path (`publish`) and the facade (`topic`), which use it.
//! It names a group's shared state only as the type the topic's registry holds, and the
//! timer type a topic with a TTL keeps.
//!
//! [`Log`]: crate::log::Log

mod state;

pub(crate) use state::{Fetcher, GroupId, GroupPart, PartLog};

#[cfg(target_has_atomic = "64")]
pub(crate) use crate::log::ring::PartRing;

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use crate::config::{Overflow, TopicConfig};
use crate::error::Error;
use crate::read::group::GroupShared;
use crate::time::{as_nanos, Clock};

use crate::route::Router;
use crate::sync::{Arc, AtomicUsize, Mutex, Ordering, Padded};
use crate::wait::WakeList;

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
    pub(crate) fn note_tail(&self, _tail: u64) {
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
    pub(crate) origin: core::time::Duration,
    /// Wakes publishers parked on a full log when its oldest message expires (topics
    /// with a TTL; see `TopicConfig::timer`).
    pub(crate) timer: Option<alloc::sync::Arc<dyn crate::time::Timer>>,
    pub(crate) router: Option<Router>,
    /// Live [`Topic`] handles; the topic closes when the last one goes.
    ///
    /// [`Topic`]: crate::Topic
    pub(crate) publishers: AtomicUsize,
    /// The next partition of an unkeyed publish (see `Topic::route`).
    pub(crate) round_robin: AtomicUsize,
    /// Groups by name. Lock order: this registry, then a group's members, then a
    /// partition. Nothing that holds a partition lock takes either of the others.
    pub(crate) groups: Mutex<Vec<Arc<GroupShared<T>>>>,
    /// Live subscribers (one per `Subscriber`, whatever partitions it reads).
    pub(crate) subscribers: AtomicUsize,
    /// 1 once [`Shared::close_partitions`] has closed every partition (see
    /// [`Shared::is_closed`]).
    closed: Padded<AtomicUsize>,
    /// One ring per partition when the topic runs on the lock-free ring engine
    /// (`TopicConfig::ring_engine`), which then holds its messages and readers'
    /// positions (the partitions' logs stay empty); empty on the locked log. Readers and
    /// publishers look here first: on a locked topic that costs one length test.
    #[cfg(target_has_atomic = "64")]
    pub(crate) rings: Vec<Arc<PartRing<T>>>,
    /// Explicit-ack groups of a topic on the ring engine: while there are any, a publish
    /// on a ring partition wakes their waiting members under the partition's lock, where
    /// they wait (see `Shared::notify_explicit_on_ring`).
    #[cfg(target_has_atomic = "64")]
    pub(crate) explicit_on_ring: AtomicUsize,
}

/// What an explicit-ack group's visit sees of a partition's messages (see
/// [`Shared::ack_bounds`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct AckBounds {
    /// The oldest message a visit can read.
    pub(crate) low: u64,
    /// The partition's end.
    pub(crate) high: u64,
    pub(crate) closed: bool,
    /// The oldest message retained (what the group's hold on retention starts from).
    pub(crate) retained_from: u64,
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
    /// The shared state of a new topic named `name` (a broker's topics have one), with a
    /// log per partition.
    ///
    /// # Errors
    ///
    /// As [`Topic::new`](crate::Topic::new).
    pub(crate) fn new(name: Option<String>, config: TopicConfig) -> Result<Self, Error> {
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
        for p in 0..config.partitions as usize {
            let mut log = PartLog::new(config.capacity, config.release_on_read, p)
                .ok_or_else(|| too_large.clone())?;
            let start = config.next_offsets.get(p).copied().unwrap_or(0);
            log.start_at(start);
            parts.push(Partition {
                log: Mutex::new(log),
                wake_at: Padded(AtomicUsize::new(0)),
                #[cfg(target_has_atomic = "64")]
                tail: Padded(crate::sync::AtomicU64::new(start)),
            });
        }
        // After the partitions' reservation, which refuses a count that cannot be had.
        #[cfg(target_has_atomic = "64")]
        let rings = Self::rings_for(&config)?;
        let (clock, origin) = match config.clock {
            Some(c) => {
                let (c, origin) = crate::time::anchored(c);
                (Some(c), origin)
            }
            None => (None, core::time::Duration::ZERO),
        };
        Ok(Shared {
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
                (Some(_), None) => Some(alloc::sync::Arc::new(crate::time::ThreadTimer::global())
                    as alloc::sync::Arc<dyn crate::time::Timer>),
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
            #[cfg(target_has_atomic = "64")]
            rings,
            #[cfg(target_has_atomic = "64")]
            explicit_on_ring: AtomicUsize::new(0),
        })
    }

    /// After a publish of `n` messages on ring partition `p`: wakes the members of the
    /// topic's explicit-ack groups waiting there, if it has any. They wait under the
    /// partition's lock with their lease state (as on the locked log), which a ring
    /// publish does not take otherwise. The count is read after the message is written
    /// and the ring's sequentially consistent fence that follows (`after_write` in
    /// memq-ring, which this relies on), against a visit's fence before it reads the
    /// ring (`Shared::ack_bounds`): a member that missed the message registered before
    /// this takes the lock.
    #[cfg(target_has_atomic = "64")]
    #[inline]
    pub(crate) fn notify_explicit_on_ring(&self, p: usize, n: usize) {
        if self.explicit_on_ring.load(Ordering::SeqCst) > 0 {
            self.wake_remaining_readers(p, n, self.now());
        }
    }

    /// Wakes the writers waiting for room on ring partition `p`, after an explicit-ack
    /// group's hold moved there under memq's locks (`Hold::advance_quietly`): called once
    /// they are let go of, so that no waker runs under them.
    pub(crate) fn wake_ring_writers(&self, p: usize) {
        #[cfg(target_has_atomic = "64")]
        if let Some(ring) = self.rings.get(p) {
            ring.wake_writers_if_waiting();
        }
        #[cfg(not(target_has_atomic = "64"))]
        let _ = p;
    }

    /// What an explicit-ack group's visit to partition `p` (`log`, locked) sees of its
    /// messages: the oldest one it can read, the end, whether the partition is closed,
    /// and where retention stands. From the ring on a topic on the ring engine (its log
    /// holds no message), else from the log.
    #[inline]
    pub(crate) fn ack_bounds(&self, p: usize, log: &PartLog<T>) -> AckBounds {
        #[cfg(target_has_atomic = "64")]
        if let Some(ring) = self.rings.get(p) {
            // The other half of the fence a ring publish makes after writing its message
            // (`after_write` in memq-ring), before its look at `explicit_on_ring`: either
            // this visit sees the message written, or that publish sees the group and
            // wakes the members waiting here, under this lock (see
            // `Shared::notify_explicit_on_ring`).
            crate::sync::fence(Ordering::SeqCst);
            let first = ring.first();
            return AckBounds {
                low: first,
                high: ring.end(),
                closed: ring.is_closed(),
                retained_from: first,
            };
        }
        #[cfg(not(target_has_atomic = "64"))]
        let _ = p;
        AckBounds {
            low: log.first(),
            high: log.high,
            closed: log.closed,
            retained_from: log.low,
        }
    }

    /// The rings of a topic's partitions, if it asked for the ring engine and the ring
    /// keeps its semantics: no TTL, no clock (the ring keeps no time per message), no
    /// `release_on_read` (the ring moves messages out for one reader only), first offsets
    /// within the ring's bound. Empty otherwise: the topic keeps the locked log. A topic
    /// is on one engine or the other, all its partitions alike.
    #[cfg(target_has_atomic = "64")]
    fn rings_for(config: &TopicConfig) -> Result<Vec<Arc<PartRing<T>>>, Error> {
        let first = |p: usize| config.next_offsets.get(p).copied().unwrap_or(0);
        let parts = config.partitions as usize;
        if !config.ring
            || config.ttl.is_some()
            || config.clock.is_some()
            || config.release_on_read
            || (0..parts).any(|p| first(p) > crate::log::ring::MAX_FIRST_OFFSET)
        {
            return Ok(Vec::new());
        }
        let drop_oldest = config.overflow == Overflow::DropOldest;
        let too_large = || Error::CapacityTooLarge {
            capacity: config.capacity,
        };
        let mut rings = Vec::new();
        rings.try_reserve_exact(parts).map_err(|_| too_large())?;
        for p in 0..parts {
            let ring = crate::log::ring::new_ring(config.capacity, drop_oldest, first(p));
            rings.push(Arc::new(ring.ok_or_else(too_large)?));
        }
        Ok(rings)
    }

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

    #[inline]
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

    /// Closes every partition, one after the other, waking whoever waits on each, then
    /// marks the topic closed. The facade then wakes the groups' idle members
    /// (`Topic::close`), which must come after the mark.
    pub(crate) fn close_partitions(&self) {
        for p in 0..self.parts.len() {
            #[cfg(target_has_atomic = "64")]
            if let Some(ring) = self.rings.get(p) {
                // Wakes its readers and publishers through its wait lists.
                ring.waiters().closing();
                ring.close();
                // The ring wakes writers only if one announced itself since the last
                // wake-up; one parked behind a publisher woken before (and not back yet)
                // did not, and must learn of the close too.
                ring.waiters().wake_every_publisher();
            }
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
    }

    /// Whether the topic is closed: every partition closed, by [`Shared::close_partitions`].
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.0.load(Ordering::Acquire) != 0
    }

    /// [`Shared::is_closed`] for a reader that just handed over a message without the
    /// partition's lock (from a group's pool) and so may have finished the group's drain:
    /// if this says no, the members a close wakes afterwards (`Topic::close`) see the handover.
    /// Both sides make a read-modify-write of `closed`, and such operations on one atomic
    /// happen in one order: either this one reads close's 1, or close's reads this one's
    /// value and so synchronizes with it (both acquire and release). A plain load would
    /// not do: the handover (a store) and this read could pass close's store and the
    /// woken members' read of the handover.
    pub(crate) fn closed_after_handover(&self) -> bool {
        self.closed.0.fetch_add(0, Ordering::AcqRel) != 0
    }
}
