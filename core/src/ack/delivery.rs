//! Deliveries: the message a member of an explicit-ack group holds ([`Delivery`]), its
//! lease on it, and how it is settled (ack, nack, touch, reject, or dropped).
//!
//! Part of the ack layer: depends on the lease state, settings and dead letters beside
//! it, the log and the topic's shared state.

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
