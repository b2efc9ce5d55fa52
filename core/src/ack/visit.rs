//! One visit of an explicit-ack member to a partition, in the steps
//! `AckConsumer::take` runs under the partition's lock: bring the lease state up to the
//! group's clock and choose what to take ([`Picking`]), copy its value ([`Pick`]) before
//! anything changes, record it ([`Picked`]), answer the member's waiting there
//! ([`Wait`]), and hand over what was taken ([`Take`]).
//!
//! Part of the ack layer: drives the lease state beside it; depends on the log, the
//! wait lists and the topic's shared state (to stamp a message).

use core::task::Waker;

use super::acks_of;
use super::config::AckSettings;
use super::dead_letter::{DeadLetterReason, Letter};
use super::state::{Acks, Choice};
use crate::log::Entry;
use crate::message::Message;
use crate::partition::Shared;
use crate::partition::{AckBounds, GroupId, GroupPart, PartLog};
use crate::read::to_message;
use crate::wait::{SpentWakers, WaitKey, WakeList};

/// An explicit-ack group's hold on a ring partition (a topic on the ring engine), which
/// its visits read messages through. A stand-in type elsewhere, never made.
#[cfg(target_has_atomic = "64")]
pub(super) type RingHold<T> = memq_ring::Hold<T, crate::log::ring::RingWaits>;
#[cfg(not(target_has_atomic = "64"))]
pub(super) type RingHold<T> = core::marker::PhantomData<T>;

/// What a visit to a partition found (`AckConsumer::take`).
pub(super) struct Visit<T> {
    pub(super) taken: Take<T>,
    /// The partition is done with: closed, drained (or the group is gone from it).
    pub(super) done: bool,
    /// The earliest lease end or redelivery time there, if any.
    pub(super) deadline: Option<u64>,
    /// The group is gone from the partition: it was deleted.
    pub(super) gone: bool,
}

impl<T> Visit<T> {
    /// The group is gone from the partition: nothing there, ever.
    pub(super) const GONE: Self = Self {
        taken: Take::Nothing,
        done: true,
        deadline: None,
        gone: true,
    };
}

/// What the next delivery attempt found on a partition.
pub(super) enum Take<T> {
    Delivered(Message<T>, u32),
    DeadLetter(Letter, Option<T>),
    Lagged(u64),
    Nothing,
}

/// A [`Choice`] with the value it needs, copied under the lock before anything changes:
/// a lease is only ever recorded for a message whose value is in hand.
pub(super) enum Pick<T> {
    /// Deliver this message again.
    Redeliver(Entry<T>),
    /// Deliver this message for the first time.
    Fresh(Entry<T>),
    /// Move this message to the dead-letter topic (deliveries so far, why), from this
    /// copy if any (`None` without a dead-letter topic, or if the log has lost it).
    DeadLetter(u64, u32, DeadLetterReason, Option<T>),
    /// The group fell behind the retained window by this many.
    Lag(u64),
    Nothing,
}

impl<T: Clone> Pick<T> {
    /// Copies what `choice` on partition `p` needs from `log` (or, for a dead letter, the
    /// copy an earlier try kept). A message chosen for delivery is always in the log:
    /// `choose` saw it within the retained window under the same lock, and a log that
    /// releases on read moves nothing out while an explicit-ack group is attached. One
    /// missing there is a broken invariant, and fails loudly before any lease is taken.
    pub(super) fn copy(
        choice: Choice,
        log: &PartLog<T>,
        mut ring: Option<&mut RingHold<T>>,
        settings: &AckSettings<T>,
        p: usize,
    ) -> Self {
        // On a ring partition, a message chosen may be claimed and not written yet, or
        // overwritten since (`DropOldest`): nothing is taken now, and a later visit sees
        // it written, or the partition moved on (the publish that did either wakes the
        // waiting members).
        let mut entry = |offset: u64| -> Option<Entry<T>> {
            #[cfg(target_has_atomic = "64")]
            if let Some(hold) = ring.as_deref_mut() {
                return hold.read(offset).ok().map(|value| Entry {
                    offset,
                    ts: 0,
                    value,
                });
            }
            #[cfg(not(target_has_atomic = "64"))]
            let _ = &mut ring;
            match log.entry_at(offset) {
                Some(e) => Some(e),
                None => panic!("memq: message {offset}, chosen for delivery, is not in the log"),
            }
        };
        match choice {
            Choice::Redeliver(offset) => entry(offset).map_or(Pick::Nothing, Pick::Redeliver),
            Choice::Fresh(offset) => entry(offset).map_or(Pick::Nothing, Pick::Fresh),
            Choice::DeadLetter(offset, deliveries, reason) => {
                let value = settings.dead_letter.as_ref().and_then(|_| {
                    // The copy kept by an earlier try, if any: the log may have evicted it.
                    let kept = settings.parcels.lock().get(&(p, offset)).cloned();
                    kept.or_else(|| entry(offset).map(|e| e.value))
                });
                Pick::DeadLetter(offset, deliveries, reason, value)
            }
            Choice::Lag(missed) => Pick::Lag(missed),
            Choice::Nothing => Pick::Nothing,
        }
    }
}

/// What a visit changed in a partition's lease state ([`Pick::record`]).
pub(super) enum Picked<T> {
    /// Leased: this message, its deliveries so far.
    Leased(Entry<T>, u32),
    /// Bound for the dead-letter topic.
    DeadLetter(Letter, Option<T>),
    Lagged(u64),
    Nothing,
}

impl<T> Pick<T> {
    /// Whether the pick is a delivery (again or for the first time).
    pub(super) fn is_lease(&self) -> bool {
        matches!(self, Pick::Redeliver(_) | Pick::Fresh(_))
    }

    /// Records the pick in `acks` (partition `p`), for `member`, as of `now`.
    pub(super) fn record(
        self,
        acks: &mut Acks,
        p: usize,
        member: u64,
        now: u64,
        ack_wait: u64,
        low: u64,
    ) -> Picked<T> {
        let deadline = now.saturating_add(ack_wait);
        match self {
            Pick::Redeliver(e) => {
                let attempt = acks.lease_again(e.offset, member, deadline);
                Picked::Leased(e, attempt)
            }
            Pick::Fresh(e) => {
                let attempt = acks.lease_fresh(e.offset, member, now, deadline);
                Picked::Leased(e, attempt)
            }
            Pick::DeadLetter(offset, deliveries, reason, value) => {
                acks.start_dead_letter(offset);
                let letter = Letter {
                    partition: p,
                    offset,
                    deliveries,
                    reason,
                };
                Picked::DeadLetter(letter, value)
            }
            Pick::Lag(missed) => {
                acks.skip_to(low);
                Picked::Lagged(missed)
            }
            Pick::Nothing => Picked::Nothing,
        }
    }
}

impl<T> Picked<T> {
    /// Counts the visit in the group's totals on the partition (`g`).
    pub(super) fn count(&self, g: &mut GroupPart) {
        match self {
            Picked::Leased(..) => g.delivered += 1,
            Picked::Lagged(missed) => g.lagged += missed,
            Picked::DeadLetter(..) | Picked::Nothing => {}
        }
    }

    /// What the visit hands the member, counted in the log's totals.
    pub(super) fn hand_over(self, log: &mut PartLog<T>, shared: &Shared<T>, p: usize) -> Take<T> {
        match self {
            Picked::Leased(e, attempt) => {
                log.delivered += 1;
                // Stamped only if the topic has a clock: the group's own clock (for
                // leases) does not stamp messages.
                Take::Delivered(to_message(p, e, shared.stamp()), attempt)
            }
            Picked::DeadLetter(letter, value) => Take::DeadLetter(letter, value),
            Picked::Lagged(missed) => {
                log.lagged += missed;
                Take::Lagged(missed)
            }
            Picked::Nothing => Take::Nothing,
        }
    }
}

/// What a visit picked on a partition, and what it saw there before changing anything.
pub(super) struct Picking<T> {
    pub(super) pick: Pick<T>,
    /// The partition was done with already.
    pub(super) was_done: bool,
    /// No message was leased there.
    pub(super) unleased: bool,
}

impl<T: Clone> Picking<T> {
    /// Brings the lease state of group `id` on partition `p` (`log`, locked) up to `now`
    /// and picks what to take there, with its value. `None` if the group is gone.
    pub(super) fn on(
        log: &mut PartLog<T>,
        ring: Option<&mut RingHold<T>>,
        bounds: AckBounds,
        settings: &AckSettings<T>,
        id: GroupId,
        p: usize,
        now: u64,
    ) -> Option<Self> {
        // The oldest message still in the log: on a releasing topic, messages a reader
        // had fetched ahead before this group attached may be out of it.
        let AckBounds {
            low, high, closed, ..
        } = bounds;
        let limit = settings
            .max_deliveries
            .filter(|_| settings.dead_letters_move());
        let (acks, _) = acks_of(log.group(id)?);
        acks.promote(now, &settings.backoff);
        let was_done = acks.is_drained(closed, high);
        // Whether the partition had no lease before this visit (see `Wait::answer`).
        let unleased = !acks.has_leases();
        let choice = acks.choose(low, high, limit, |offset| {
            settings.parcels.lock().contains_key(&(p, offset))
        });
        Some(Self {
            pick: Pick::copy(choice, log, ring, settings, p),
            was_done,
            unleased,
        })
    }
}

/// What a visit knows when it answers the member's waiting on a partition
/// ([`Wait::answer`]).
pub(super) struct Wait<'a> {
    /// The member's task, if it waits (an async receive).
    pub(super) waker: Option<&'a Waker>,
    /// Whether the group has a timer.
    pub(super) timed: bool,
    /// Whether the partition had no lease before this visit.
    pub(super) first_lease: bool,
    /// Whether messages remain to be delivered for the first time.
    pub(super) more: bool,
    /// Whether the partition is done with.
    pub(super) done: bool,
    /// The partition's earliest lease end or redelivery time, if any.
    pub(super) deadline: Option<u64>,
}

impl<'a> Wait<'a> {
    /// The member's place among partition's waiters (`g`) after a visit that `picked`:
    /// one that took something stops waiting here; one that found nothing is to wait
    /// (if it can), with its timer set for the partition's deadline if the group has a
    /// timer. That registration is left to the caller ([`Waits::register`]), to make
    /// last: it clones the member's waker, the user's code, which may panic, and a
    /// panic must not leave the visit's other changes undone.
    pub(super) fn answer<T>(
        &self,
        g: &mut GroupPart,
        key: &mut Option<WaitKey>,
        picked: &Picked<T>,
        spent: &mut SpentWakers,
        watch: &mut WakeList,
    ) -> Option<Waits<'a>> {
        match picked {
            Picked::DeadLetter(..) => {
                g.waiters.settle(*key, spent);
                None
            }
            Picked::Leased(..) => {
                g.waiters.settle(*key, spent);
                // Without a timer, the partition's first lease wakes one waiting member
                // to look (with one, every visit that does not end waiting here is
                // followed by `keep_watch`).
                if self.first_lease && !self.timed {
                    g.waiters.notify_one(watch);
                }
                None
            }
            Picked::Lagged(_) => {
                // A wake-up this member used goes on to the next waiting one when
                // messages remain past the lag.
                if g.waiters.settle(*key, spent) && self.more {
                    g.waiters.notify_one(watch);
                }
                None
            }
            Picked::Nothing => match (self.waker, self.done) {
                (Some(waker), false) => Some(Waits {
                    waker,
                    // With a timer, the caller arms this member's alarm for the earliest
                    // deadline of its partitions, this one's or sooner (`schedule`).
                    alarm: if self.timed { self.deadline } else { None },
                }),
                _ => None,
            },
        }
    }
}

/// A member that a visit found nothing for, to be registered among the partition's
/// waiters ([`Wait::answer`]).
pub(super) struct Waits<'a> {
    waker: &'a Waker,
    alarm: Option<u64>,
}

impl Waits<'_> {
    /// Registers the member under `key` among the waiters of group `id` on a partition
    /// (`log`, locked). A `clone` of its waker that panics leaves the registration as it
    /// was.
    pub(super) fn register<T>(
        self,
        log: &mut PartLog<T>,
        id: GroupId,
        key: &mut Option<WaitKey>,
        spent: &mut SpentWakers,
    ) {
        let g = log.group_found(id);
        g.waiters.register_timed(key, self.waker, self.alarm, spent);
    }
}
