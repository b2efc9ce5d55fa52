//! The publish path on a topic on the lock-free ring engine (`TopicConfig::ring_engine`):
//! a publish that finds room takes no lock; a `Block` publisher that finds none waits on
//! the partition's wait list, announced to the ring (see `RingWaits`).
//!
//! Layer: as `publish.rs`, whose attempt dispatches here.

use core::task::Waker;

use super::{Attempt, Payload};
use crate::config::Overflow;
use crate::error::PublishError;
use crate::message::Receipt;
use crate::partition::{PartRing, Shared};
use crate::wait::{SpentWakers, WaitKey};

impl<T> Shared<T> {
    /// [`Shared::attempt`] on a partition that runs on the ring: no lock on the way of a
    /// publish that finds room. A `Block` publisher that finds none registers on the
    /// partition's wait list (under the lists' mutex, let go of before the ring is asked
    /// again), then announces itself to the ring, which looks for room once more: a
    /// reader that frees room after the announcement wakes every waiting publisher, and
    /// the woken race for it (the ring keeps no line; see docs/ENGINE-PLAN.md).
    ///
    /// Out of line, so that the locked engine's attempt stays as it was.
    #[inline(never)]
    pub(super) fn attempt_on_ring<V: Payload<T>>(
        &self,
        ring: &PartRing<T>,
        p: usize,
        value: V,
        key: &mut Option<WaitKey>,
        waker: Option<&Waker>,
    ) -> Attempt<V, Receipt> {
        let n = value.messages();
        let receipt = |offset, count: usize| Receipt {
            partition: p as u32,
            offset,
            count: u32::try_from(count).unwrap_or(u32::MAX),
        };
        if n == 0 || (V::BATCH && n > ring.capacity() as usize) {
            // Nothing to publish, or a batch that could never fit: the topic's state
            // decides, and a closed topic says so first.
            let r = if ring.is_closed() {
                Err(PublishError::Closed(value))
            } else if n == 0 {
                Ok(receipt(ring.end(), 0))
            } else {
                Err(PublishError::Full(value))
            };
            Self::leave_ring_line(ring, key);
            return Attempt::Done(r);
        }
        let mut value = value;
        loop {
            match value.publish_on(ring) {
                Ok(offset) => {
                    Self::leave_ring_line(ring, key);
                    return Attempt::Done(Ok(receipt(offset, n)));
                }
                Err(memq_ring::TryPublishError::Closed(back)) => {
                    Self::leave_ring_line(ring, key);
                    return Attempt::Done(Err(PublishError::Closed(back)));
                }
                Err(memq_ring::TryPublishError::Full(back)) => match waker {
                    Some(w) if self.overflow == Overflow::Block => {
                        let mut spent = SpentWakers::new();
                        ring.waiters()
                            .lists
                            .lock()
                            .pubs
                            .register_needing(key, w, n as u64, &mut spent);
                        drop(spent);
                        if ring.prepare_batch_publisher_wait(n) {
                            return Attempt::Parked(back);
                        }
                        value = back;
                    }
                    _ => {
                        Self::leave_ring_line(ring, key);
                        return Attempt::Done(Err(PublishError::Full(back)));
                    }
                },
            }
        }
    }

    /// Takes a publisher that waited off the ring partition's wait list (one test for
    /// a publish that never waited).
    #[inline]
    pub(super) fn leave_ring_line(ring: &PartRing<T>, key: &mut Option<WaitKey>) {
        if key.is_some() {
            let (_, waker) = ring.waiters().lists.lock().pubs.remove(key);
            drop(waker);
        }
    }
}
