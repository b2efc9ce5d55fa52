//! Deliveries: the message a member of an explicit-ack group holds ([`Delivery`]), its
//! lease on it, and how it is settled (ack, nack, touch, reject, or dropped).
//!
//! Part of the ack layer: depends on the lease state, settings and dead letters beside
//! it, the log and the topic's shared state.

use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use super::dead_letter::{move_letter, DeadLetterReason, Letter};
use super::{acks_of, release_hold, settings_of};
use crate::message::Message;
use crate::partition::Shared;
use crate::read::group::GroupShared;
use crate::sync::Arc;
use crate::time::as_nanos;
use crate::wait::WakeList;

/// Why an acknowledgement was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AckError {
    /// The lease had already run out (or its member left) and the message went back to
    /// the group; it will be, or was, delivered again.
    LeaseExpired,
    /// The group was deleted.
    GroupDeleted,
}

impl fmt::Display for AckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::LeaseExpired => "lease expired: the message was returned to the group",
            Self::GroupDeleted => "the group was deleted",
        })
    }
}

impl core::error::Error for AckError {}

/// What [`Delivery::ack_all`] did with the deliveries it was given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AckReport {
    /// Acknowledged: done with, not delivered again.
    pub acked: usize,
    /// Refused with [`AckError::LeaseExpired`]: the lease had run out, and the message
    /// went back to the group.
    pub expired: usize,
    /// Refused with [`AckError::GroupDeleted`].
    pub group_deleted: usize,
}

impl AckReport {
    /// Whether every delivery was acknowledged.
    pub fn all_acked(&self) -> bool {
        self.expired == 0 && self.group_deleted == 0
    }
}

/// A delivery's hold on its message: where the lease is kept.
pub(super) struct Lease<T> {
    pub(super) shared: Arc<Shared<T>>,
    pub(super) group: Arc<GroupShared<T>>,
    pub(super) partition: usize,
}

/// What to do with a lease.
#[derive(Debug, Clone, Copy)]
enum Settle {
    Ack,
    Nack(Option<Duration>),
    Touch,
    Release,
}

/// A message leased to one member of an explicit-ack group. Ack it when done.
///
/// Dropping a delivery without acking it returns the message to the group (after the
/// backoff delay), like [`Delivery::nack`]. So a loop that takes deliveries and drops
/// them (`iter::from_fn(|| consumer.try_recv().ok()).count()`) hands each one back and
/// takes it again, for ever (without `max_deliveries`): ack them, or use an
/// automatic-commit group
/// ([`Topic::group`](crate::Topic::group)) where a delivery needs no settling.
#[must_use = "dropping a delivery without acking it nacks it: the message goes back to the group and is delivered again"]
pub struct Delivery<T> {
    message: Message<T>,
    attempt: u32,
    lease: Option<Lease<T>>,
}

impl<T> Delivery<T> {
    /// Delivery `attempt` of `message`, under `lease`.
    pub(super) fn new(message: Message<T>, attempt: u32, lease: Lease<T>) -> Self {
        Self {
            message,
            attempt,
            lease: Some(lease),
        }
    }
}

/// A delivery dropped unsettled nacks: `#[must_use]` says so where a statement drops one.
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// # use memq_core as memq;
/// let topic = memq::Topic::<u8>::with_capacity(4).unwrap();
/// let mut c = topic.group_acked("g", memq::StartAt::Earliest, memq::AckConfig::new()).unwrap();
/// topic.try_publish(1).unwrap();
/// c.try_recv().unwrap(); // dropped: nacked
/// ```
///
/// ```
/// #![deny(unused_must_use)]
/// # use memq_core as memq;
/// let topic = memq::Topic::<u8>::with_capacity(4).unwrap();
/// let mut c = topic.group_acked("g", memq::StartAt::Earliest, memq::AckConfig::new()).unwrap();
/// topic.try_publish(1).unwrap();
/// c.try_recv().unwrap().ack().unwrap();
/// ```
#[cfg(all(doctest, feature = "std"))]
pub struct DeliveryIsMustUse;

impl<T: fmt::Debug> fmt::Debug for Delivery<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("message", &self.message)
            .field("deliveries", &self.attempt)
            .finish()
    }
}

impl<T> core::ops::Deref for Delivery<T> {
    type Target = Message<T>;
    fn deref(&self) -> &Message<T> {
        &self.message
    }
}

impl<T> Delivery<T> {
    /// The message.
    pub fn message(&self) -> &Message<T> {
        &self.message
    }

    /// How many times this message has been delivered, this delivery included.
    pub fn deliveries(&self) -> u32 {
        self.attempt
    }

    fn settle(&mut self, action: Settle) -> Result<(), AckError> {
        let Some(lease) = self.lease.as_ref() else {
            return Err(AckError::LeaseExpired);
        };
        let settings = settings_of(&lease.group);
        let now = settings.now();
        let offset = self.message.offset;
        let p = lease.partition;
        let mut wl = WakeList::new();
        let mut log = lease.shared.parts[p].log.lock();
        let Some(g) = log.group(lease.group.ids[p]) else {
            return Err(AckError::GroupDeleted);
        };
        let (acks, waiters) = acks_of(g);
        if !acks.is_leased(offset, self.attempt) {
            return Err(AckError::LeaseExpired);
        }
        // Whether a waiting member may now take something it could not before, and is
        // woken to look: the message is back (at once, or with a delay a timer keeps),
        // or an ack opened a slot under `max_in_flight`. An ack below that limit gives
        // the members nothing new (they wait for publishes, redeliveries, the drain,
        // which wake them themselves), and waking one per ack made a worker that acks a
        // batch wake the others once per message, to find nothing.
        let news = match action {
            Settle::Touch => {
                acks.touch(offset, now.saturating_add(settings.ack_wait));
                return Ok(());
            }
            Settle::Ack => acks.ack(offset),
            Settle::Nack(delay) => {
                let delay = delay.unwrap_or_else(|| settings.backoff.delay(self.attempt));
                acks.requeue(offset, now, as_nanos(delay));
                true
            }
            Settle::Release => {
                acks.requeue(offset, now, as_nanos(settings.backoff.delay(self.attempt)));
                true
            }
        };
        if news {
            waiters.notify_one(&mut wl);
        }
        release_hold(&lease.shared, &lease.group, p, log, &mut wl);
        self.lease = None;
        Ok(())
    }

    /// Acknowledges the message: it is done and will not be delivered again.
    ///
    /// # Errors
    ///
    /// [`AckError::LeaseExpired`] if the lease had run out and the message went back to
    /// the group; [`AckError::GroupDeleted`].
    pub fn ack(mut self) -> Result<(), AckError> {
        self.settle(Settle::Ack)
    }

    /// Acknowledges every delivery in `deliveries`, as [`Delivery::ack`] on each in turn
    /// would, and empties it (its capacity is kept, for the next batch). Says how many
    /// were acknowledged and why any were not. Deliveries that follow each other from
    /// the same partition of the same group (a batch from
    /// [`AckConsumer::recv_many`](crate::AckConsumer::recv_many)) are settled under one
    /// lock, which is what makes this cheaper than acking them one by one; they may come
    /// from several partitions, groups and topics.
    ///
    /// ```
    /// # #[allow(unused_imports)] // for the cfg below
    /// # use memq_core as memq;
    /// # #[cfg(feature = "std")]
    /// # {
    /// use memq::{AckConfig, Delivery, StartAt, Topic};
    ///
    /// let topic = Topic::with_capacity(16)?;
    /// let mut member = topic.group_acked("jobs", StartAt::Earliest, AckConfig::new())?;
    /// topic.try_publish_batch(vec![1, 2, 3])?;
    /// let mut batch = Vec::new();
    /// member.try_recv_many(&mut batch, 10)?;
    /// let report = Delivery::ack_all(&mut batch);
    /// assert_eq!(report.acked, 3);
    /// assert!(report.all_acked() && batch.is_empty());
    /// assert_eq!(member.committed(0)?, 3);
    /// # }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ack_all(deliveries: &mut Vec<Delivery<T>>) -> AckReport {
        let mut report = AckReport::default();
        let mut i = 0;
        while i < deliveries.len() {
            // Taken out of each delivery settled here, so that dropping it does not
            // settle it again (a delivery without a lease was settled already).
            let Some(lease) = deliveries[i].lease.take() else {
                report.expired += 1;
                i += 1;
                continue;
            };
            let p = lease.partition;
            let id = lease.group.ids[p];
            let mut wl = WakeList::new();
            let mut log = lease.shared.parts[p].log.lock();
            // Whether the partition was full under `max_in_flight` (only the run's first
            // ack can find it so), and how many slots the run opened.
            let (mut was_full, mut opened) = (false, 0);
            // This delivery, then those after it from the same partition of the group.
            loop {
                let d = &mut deliveries[i];
                match log.group(id) {
                    None => report.group_deleted += 1,
                    Some(g) => {
                        let (acks, _) = acks_of(g);
                        if acks.is_leased(d.message.offset, d.attempt) {
                            was_full |= acks.ack(d.message.offset);
                            opened += 1;
                            report.acked += 1;
                        } else {
                            report.expired += 1;
                        }
                    }
                }
                i += 1;
                let Some(next) = deliveries.get_mut(i) else {
                    break;
                };
                let same = next.lease.as_ref().is_some_and(|l| {
                    l.partition == p
                        && Arc::ptr_eq(&l.shared, &lease.shared)
                        && Arc::ptr_eq(&l.group, &lease.group)
                });
                if !same {
                    break;
                }
                // It points where `lease` does, which keeps both alive: dropping it
                // under the lock frees nothing.
                drop(next.lease.take());
            }
            let Some(g) = log.group(id) else {
                continue;
            };
            // As `ack` does: acks that open slots under a full `max_in_flight` wake
            // waiting members, one for each slot (each takes one, and wakes the next
            // while there is more, see `Acks::keep_watch`); below that limit they give
            // the members nothing new.
            if was_full {
                let (_, waiters) = acks_of(g);
                waiters.notify_many(opened, &mut wl);
            }
            release_hold(&lease.shared, &lease.group, p, log, &mut wl);
        }
        // The messages are dropped here, after every lock (a value's `Drop` is the
        // user's code); none has a lease left to settle.
        deliveries.clear();
        report
    }

    /// Returns the message to the group for another delivery, after the backoff delay.
    ///
    /// # Errors
    ///
    /// As [`Delivery::ack`].
    pub fn nack(mut self) -> Result<(), AckError> {
        self.settle(Settle::Nack(None))
    }

    /// Returns the message to the group, to be delivered again after `delay`.
    ///
    /// # Errors
    ///
    /// As [`Delivery::ack`].
    pub fn nack_after(mut self, delay: Duration) -> Result<(), AckError> {
        self.settle(Settle::Nack(Some(delay)))
    }

    /// Extends the lease by the group's `ack_wait`, from now.
    ///
    /// # Errors
    ///
    /// As [`Delivery::ack`].
    pub fn touch(&mut self) -> Result<(), AckError> {
        self.settle(Settle::Touch)
    }

    /// Rejects the message: it goes to the dead-letter topic (or, without one, is dropped
    /// and counted as dead-lettered) and is not delivered again. If the dead-letter topic
    /// is full, the message stays in the group until it can be moved there; if it is
    /// closed, the message is delivered again (see [`AckConfig::dead_letter`](crate::AckConfig::dead_letter)).
    ///
    /// # Errors
    ///
    /// As [`Delivery::ack`].
    pub fn reject(mut self) -> Result<(), AckError>
    where
        T: Clone,
    {
        let Some(lease) = self.lease.as_ref() else {
            return Err(AckError::LeaseExpired);
        };
        // The value goes to the dead-letter topic from here, not from the log (which may
        // have evicted it meanwhile). Cloned first: a `T::clone` that panics changes
        // nothing.
        let held = settings_of(&lease.group)
            .dead_letter
            .is_some()
            .then(|| self.message.value.clone());
        let offset = self.message.offset;
        let p = lease.partition;
        {
            let mut log = lease.shared.parts[p].log.lock();
            let Some(g) = log.group(lease.group.ids[p]) else {
                return Err(AckError::GroupDeleted);
            };
            let (acks, _) = acks_of(g);
            if !acks.is_leased(offset, self.attempt) {
                return Err(AckError::LeaseExpired);
            }
            acks.hold_for_dead_letter(offset);
        }
        let Some(lease) = self.lease.take() else {
            return Err(AckError::LeaseExpired);
        };
        let letter = Letter {
            partition: p,
            offset,
            deliveries: self.attempt,
            reason: DeadLetterReason::Rejected,
        };
        move_letter(&lease.shared, &lease.group, letter, held);
        Ok(())
    }
}

impl<T> Drop for Delivery<T> {
    fn drop(&mut self) {
        if self.lease.is_some() {
            // Already returned if the lease ran out; either way nothing is lost.
            let _ = self.settle(Settle::Release);
        }
    }
}
