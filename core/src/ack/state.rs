//! The lease state machine of an explicit-ack group on one partition ([`Acks`]): which
//! messages are out, to whom and until when, which wait to be delivered again, and the
//! group's committed position. Kept in the log, changed under the partition's lock.
//!
//! Pure bookkeeping: it knows nothing of members, delivery handles, values or the
//! dead-letter topic's publishing; the consumer and the deliveries drive it. Every timed
//! set (`ready`, `delayed`, `leases`) is private here and changed only together with the
//! state of its message, so that an entry there always has its pending message.
//!
//! Part of the ack layer: depends on the time layer (nanosecond readings), the wait lists
//! (to keep watch over a partition's waiting members) and the settings beside it.

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::vec::Vec;

use super::config::Backoff;
use super::dead_letter::DeadLetterReason;
use crate::time::as_nanos;
use crate::wait::{WaiterList, WakeList};

/// Where an unacknowledged message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PState {
    /// Delivered to `member`, until `deadline`.
    Leased { deadline: u64 },
    /// Waiting to be delivered again at `at`.
    Delayed { at: u64 },
    /// Waiting in `ready` to be delivered again.
    Ready,
    /// Being published to the dead-letter topic (outside the lock).
    DeadLettering,
}

/// One unacknowledged message of a group on a partition.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub(crate) member: u64,
    pub(crate) deliveries: u32,
    pub(crate) state: PState,
    pub(crate) first_delivered: u64,
    /// Set once the message is bound for the dead-letter topic: if that topic was full,
    /// the next attempt moves it there again instead of delivering it.
    dead: Option<DeadLetterReason>,
}

/// An explicit group's bookkeeping on one partition.
#[derive(Debug)]
pub(crate) struct Acks {
    /// Next offset never delivered yet.
    pub(crate) next: u64,
    /// Delivered and not acknowledged, by offset.
    pub(crate) unacked: BTreeMap<u64, Pending>,
    ready: VecDeque<u64>,
    delayed: BTreeSet<(u64, u64)>,
    leases: BTreeSet<(u64, u64)>,
    pub(crate) redelivered: u64,
    pub(crate) dead_lettered: u64,
    pub(crate) acked: u64,
    /// Unacknowledged messages evicted (`DropOldest`, TTL) before they were acked.
    pub(crate) evicted_unacked: u64,
    /// What the partition needs to know of the group's settings.
    part: AckPart,
}

/// What a partition's [`Acks`] keeps of its group's settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AckPart {
    /// The group's `max_in_flight`.
    max_in_flight: usize,
    /// Whether the group has a timer: its waiting members then set alarms for the
    /// partition's deadlines (see [`Acks::keep_watch`]).
    timed: bool,
    /// Whether leases are measured with the topic's own clock, whose reading a publish
    /// has at hand (see [`Acks::full_until`]).
    topic_clock: bool,
}

impl AckPart {
    pub(super) fn new(max_in_flight: usize, timed: bool, topic_clock: bool) -> Self {
        Self {
            max_in_flight,
            timed,
            topic_clock,
        }
    }
}

impl Acks {
    /// The state of a group attached at `start`.
    pub(crate) fn new(start: u64, part: AckPart) -> Self {
        Self {
            part,
            next: start,
            unacked: BTreeMap::new(),
            ready: VecDeque::new(),
            delayed: BTreeSet::new(),
            leases: BTreeSet::new(),
            redelivered: 0,
            dead_lettered: 0,
            acked: 0,
            evicted_unacked: 0,
        }
    }

    /// While no member can take anything here (`max_in_flight` messages are out, none
    /// is ready to be delivered again), the clock time by which something will be: the
    /// earliest lease end or redelivery time. `None` while a member can take something,
    /// or nothing is timed (every message out is on its way to the dead-letter topic;
    /// the member moving it wakes another when done). `ready` may hold stale entries,
    /// which only make this `None` for a while.
    ///
    /// `now` is the topic's clock reading, if the publish that asks read one: when leases
    /// are measured with that clock and a deadline has passed by it, the partition is
    /// not full any more (the next member to look takes the message again), whether or
    /// not a timer has rung yet. A group with a clock of its own counts on its timer to
    /// keep time with it.
    pub(crate) fn full_until(&self, now: u64) -> Option<u64> {
        if self.unacked.len() < self.part.max_in_flight || !self.ready.is_empty() {
            return None;
        }
        let by = self.next_deadline()?;
        if self.part.topic_clock && by <= now {
            return None;
        }
        Some(by)
    }

    /// Makes sure that, while members wait on this partition, one of them looks when
    /// there is something to take: now, a message ready to be delivered again (one that
    /// a member's visit found due, next to the one it took) or a new one (below `high`,
    /// the log's end) with a slot free under `max_in_flight`; later, the next lease or
    /// delay to run out, for which one of them has its timer set. A member woken and not
    /// back yet counts for all of these. If none is (the member woken for it used the
    /// wake-up on something else; the member whose timer it was took a message, gave up
    /// or moved; the lease is new), the first waiting member (for a deadline: the first
    /// without a timer for it) is woken into `out`, to look. Without a timer, deadlines
    /// are left to publishes.
    // Out of line: it runs on every receive of an explicit-ack member, and must not grow
    // the paths of other readers it is reached from.
    #[inline(never)]
    pub(crate) fn keep_watch(&self, waiters: &mut WaiterList, high: u64, out: &mut WakeList) {
        if waiters.waiting() == 0 || waiters.any_notified() {
            return;
        }
        let fresh = self.next < high && self.unacked.len() < self.part.max_in_flight;
        if fresh || !self.ready.is_empty() {
            // `ready` may hold stale entries: a wake-up for nothing at worst.
            waiters.notify_one(out);
            return;
        }
        if !self.part.timed {
            return;
        }
        if let Some(by) = self.next_deadline() {
            if !waiters.has_timer_by(by) {
                waiters.notify_uncovered(1, by, out);
            }
        }
    }

    /// The lowest offset not yet acknowledged: the group's committed position.
    pub(crate) fn committed(&self) -> u64 {
        self.unacked
            .keys()
            .next()
            .map_or(self.next, |&o| o.min(self.next))
    }

    /// Where the group's position in the log, which holds back retention, goes, with
    /// `low` the oldest offset the log still has: the lowest unacknowledged offset still
    /// retained, else the next one to deliver, never below `low`. It is the committed
    /// position unless a TTL (or `DropOldest`) evicted an unacknowledged message: that
    /// one is gone, and must not keep holding the acknowledged messages after it. Its
    /// delivery may still be acked, and it is counted in `evicted_unacked` if it comes
    /// back to the group.
    pub(crate) fn holds_from(&self, low: u64) -> u64 {
        self.unacked
            .range(low..)
            .next()
            .map_or(self.next, |(&o, _)| o.min(self.next))
            .max(low)
    }

    /// The earliest lease end or redelivery time, if any.
    pub(super) fn next_deadline(&self) -> Option<u64> {
        let lease = self.leases.first().map(|&(d, _)| d);
        let delay = self.delayed.first().map(|&(d, _)| d);
        earlier(lease, delay)
    }

    /// Whether any message is leased here now.
    pub(super) fn has_leases(&self) -> bool {
        !self.leases.is_empty()
    }

    /// Takes `offset` out of whatever timed set its state puts it in.
    fn untime(&mut self, offset: u64) {
        if let Some(p) = self.unacked.get(&offset) {
            match p.state {
                PState::Leased { deadline } => {
                    self.leases.remove(&(deadline, offset));
                }
                PState::Delayed { at } => {
                    self.delayed.remove(&(at, offset));
                }
                PState::Ready | PState::DeadLettering => {}
            }
        }
    }

    /// Returns `offset` to the group, after `delay` nanoseconds (0: at once).
    pub(super) fn requeue(&mut self, offset: u64, now: u64, delay: u64) {
        self.untime(offset);
        let Some(p) = self.unacked.get_mut(&offset) else {
            return;
        };
        if delay == 0 {
            p.state = PState::Ready;
            self.ready.push_back(offset);
        } else {
            let at = now.saturating_add(delay);
            p.state = PState::Delayed { at };
            self.delayed.insert((at, offset));
        }
    }

    /// Moves leases that ran out and delays that passed into `ready`.
    pub(super) fn promote(&mut self, now: u64, backoff: &Backoff) {
        while let Some(&(deadline, offset)) = self.leases.first() {
            if deadline > now {
                break;
            }
            // Taken off here, not left to `requeue`: a lease whose message is not
            // pending (which `Acks` never makes) cannot keep this loop going.
            self.leases.pop_first();
            let attempt = self.unacked.get(&offset).map_or(0, |p| p.deliveries);
            self.requeue(offset, now, as_nanos(backoff.delay(attempt)));
        }
        while let Some(&(at, offset)) = self.delayed.first() {
            if at > now {
                break;
            }
            self.delayed.remove(&(at, offset));
            if let Some(p) = self.unacked.get_mut(&offset) {
                p.state = PState::Ready;
                self.ready.push_back(offset);
            }
        }
    }

    /// Whether the partition is done with: closed (`closed`, its end at `high`), every
    /// message delivered and settled.
    pub(super) fn is_drained(&self, closed: bool, high: u64) -> bool {
        closed && self.next >= high && self.unacked.is_empty()
    }

    /// What a member's visit finds to do here, chosen without changing anything but
    /// dropping stale and evicted entries of `ready`: the caller copies the value next,
    /// and a `T::clone` that panics must leave the message where it was (no delivery
    /// attempt used up, nothing counted).
    ///
    /// `low` and `high` bound the messages the log still has; `limit` is the group's
    /// `max_deliveries` while messages that reach it are moved out (else `None`); `kept`
    /// tells whether the value of an evicted message bound for the dead-letter topic was
    /// kept for its move (it is then still moved).
    pub(super) fn choose(
        &mut self,
        low: u64,
        high: u64,
        limit: Option<u32>,
        kept: impl Fn(u64) -> bool,
    ) -> Choice {
        loop {
            let Some(&offset) = self.ready.front() else {
                return if self.unacked.len() >= self.part.max_in_flight {
                    Choice::Nothing
                } else if self.next < low {
                    Choice::Lag(low - self.next)
                } else if self.next < high {
                    Choice::Fresh(self.next)
                } else {
                    Choice::Nothing
                };
            };
            let Some(pe) = self.unacked.get(&offset) else {
                self.ready.pop_front();
                continue;
            };
            if pe.state != PState::Ready {
                self.ready.pop_front();
                continue; // stale queue entry
            }
            // Evicted before it was settled, unless it is bound for the dead-letter topic
            // and its value was kept for that (see `AckSettings::parcels`).
            if offset < low && !(pe.dead.is_some() && kept(offset)) {
                self.ready.pop_front();
                self.unacked.remove(&offset);
                self.evicted_unacked += 1;
                continue;
            }
            if let Some(reason) = pe.dead {
                return Choice::DeadLetter(offset, pe.deliveries, reason);
            }
            if limit.is_some_and(|m| pe.deliveries >= m) {
                return Choice::DeadLetter(offset, pe.deliveries, DeadLetterReason::MaxDeliveries);
            }
            return Choice::Redeliver(offset);
        }
    }

    /// Takes the message [`Acks::choose`] chose from the front of `ready`: it must still
    /// be there, as nothing may change between the choice and this.
    fn take_chosen(&mut self, offset: u64) -> &mut Pending {
        assert_eq!(
            self.ready.pop_front(),
            Some(offset),
            "memq: the message chosen to take is no longer the first ready one"
        );
        match self.unacked.get_mut(&offset) {
            Some(pe) => pe,
            None => panic!("memq: the message chosen to take is not pending"),
        }
    }

    /// Leases the ready message `offset` (chosen by [`Acks::choose`]) to `member` again,
    /// until `deadline`; returns its deliveries so far, this one included.
    pub(super) fn lease_again(&mut self, offset: u64, member: u64, deadline: u64) -> u32 {
        let pe = self.take_chosen(offset);
        pe.deliveries = pe.deliveries.saturating_add(1);
        pe.member = member;
        pe.state = PState::Leased { deadline };
        let attempt = pe.deliveries;
        self.leases.insert((deadline, offset));
        self.redelivered += 1;
        attempt
    }

    /// Leases the next new message, `offset` (chosen by [`Acks::choose`]), to `member`
    /// from `now` until `deadline`; returns its deliveries (1).
    pub(super) fn lease_fresh(&mut self, offset: u64, member: u64, now: u64, deadline: u64) -> u32 {
        assert_eq!(
            offset, self.next,
            "memq: the new message chosen is not the next one"
        );
        self.next += 1;
        self.unacked.insert(
            offset,
            Pending {
                member,
                deliveries: 1,
                state: PState::Leased { deadline },
                first_delivered: now,
                dead: None,
            },
        );
        self.leases.insert((deadline, offset));
        1
    }

    /// Marks the ready message `offset` (chosen by [`Acks::choose`]) as on its way to
    /// the dead-letter topic.
    pub(super) fn start_dead_letter(&mut self, offset: u64) {
        self.take_chosen(offset).state = PState::DeadLettering;
    }

    /// Skips the messages the group missed: the next new one is `low`.
    pub(super) fn skip_to(&mut self, low: u64) {
        self.next = low;
    }

    /// Whether delivery `attempt` of `offset` still holds its lease.
    pub(super) fn is_leased(&self, offset: u64, attempt: u32) -> bool {
        self.unacked
            .get(&offset)
            .is_some_and(|pe| pe.deliveries == attempt && matches!(pe.state, PState::Leased { .. }))
    }

    /// Acknowledges `offset`: done with, counted. Returns whether that opened a slot
    /// under `max_in_flight` that was full, so that a member may take something it could
    /// not before.
    pub(super) fn ack(&mut self, offset: u64) -> bool {
        let was_full = self.unacked.len() >= self.part.max_in_flight;
        self.untime(offset);
        self.unacked.remove(&offset);
        self.acked += 1;
        was_full
    }

    /// Extends the lease of `offset` to `deadline`.
    pub(super) fn touch(&mut self, offset: u64, deadline: u64) {
        self.untime(offset);
        if let Some(pe) = self.unacked.get_mut(&offset) {
            pe.state = PState::Leased { deadline };
            self.leases.insert((deadline, offset));
        }
    }

    /// Takes the lease of `offset` back for its move to the dead-letter topic (a member
    /// rejected it).
    pub(super) fn hold_for_dead_letter(&mut self, offset: u64) {
        self.untime(offset);
        if let Some(pe) = self.unacked.get_mut(&offset) {
            pe.state = PState::DeadLettering;
        }
    }

    /// `offset` left the group for the dead-letter topic (`moved`), or its value was
    /// gone from the log (evicted since it was picked): removed, and counted as
    /// dead-lettered or as evicted unacknowledged.
    pub(super) fn dead_letter_done(&mut self, offset: u64, moved: bool) {
        self.untime(offset);
        self.unacked.remove(&offset);
        if moved {
            self.dead_lettered += 1;
        } else {
            self.evicted_unacked += 1;
        }
    }

    /// The dead-letter topic was full: `offset` stays bound there (for `reason`), and
    /// its move is tried again `retry` nanoseconds after `now`.
    pub(super) fn dead_letter_later(
        &mut self,
        offset: u64,
        reason: DeadLetterReason,
        now: u64,
        retry: u64,
    ) {
        if let Some(pe) = self.unacked.get_mut(&offset) {
            pe.dead = Some(reason);
        }
        self.requeue(offset, now, retry);
    }

    /// The dead-letter topic is closed: `offset` is delivered again, `delay` nanoseconds
    /// after `now`, instead of moved.
    pub(super) fn dead_letter_refused(&mut self, offset: u64, now: u64, delay: u64) {
        if let Some(pe) = self.unacked.get_mut(&offset) {
            pe.dead = None;
        }
        self.requeue(offset, now, delay);
    }

    /// Returns every lease held by `member` to the group at once.
    pub(super) fn release_member(&mut self, member: u64, now: u64) -> usize {
        let held: Vec<u64> = self
            .unacked
            .iter()
            .filter(|(_, p)| p.member == member && matches!(p.state, PState::Leased { .. }))
            .map(|(&o, _)| o)
            .collect();
        for &o in &held {
            self.requeue(o, now, 0);
        }
        held.len()
    }
}

/// What a member's visit found to do on a partition ([`Acks::choose`]), before it changes
/// anything.
#[derive(Debug, Clone, Copy)]
pub(super) enum Choice {
    /// Deliver this ready message again.
    Redeliver(u64),
    /// Deliver this message for the first time.
    Fresh(u64),
    /// Move this message to the dead-letter topic (deliveries so far, why).
    DeadLetter(u64, u32, DeadLetterReason),
    /// The group fell behind the retained window by this many.
    Lag(u64),
    Nothing,
}

/// The earlier of two times, either of which may be missing.
pub(super) fn earlier(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
