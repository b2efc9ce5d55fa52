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
    /// again), then announces itself to the ring, which looks for room once more.
    ///
    /// Parked publishers keep memq's line, as on the locked log: room that frees wakes
    /// the first in line ([`RingWaits`](crate::log::ring::RingWaits)), a publisher in line
    /// polled out of turn stays parked (it may go only as the first waiting, into room
    /// beyond what was promised to those woken before it), and one that gets on wakes the
    /// next in line, which tries and parks again if the room is gone. A publish that never
    /// waited may take free room first (as a mutex lets a newcomer in).
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
        if let Some(w) = waker {
            if key.is_some() && Self::out_of_turn_on_ring(ring, *key, n as u64) {
                // Stays in its place (it is waiting, so it gives nothing back), with its
                // waker refreshed.
                Self::wait_on_ring(ring, key, w, n);
                return Attempt::Parked(value);
            }
        }
        let mut value = value;
        loop {
            match value.publish_on(ring) {
                Ok(offset) => {
                    Self::got_on_ring(ring, key);
                    self.notify_explicit_on_ring(p, n);
                    return Attempt::Done(Ok(receipt(offset, n)));
                }
                Err(memq_ring::TryPublishError::Closed(back)) => {
                    Self::leave_ring_line(ring, key);
                    return Attempt::Done(Err(PublishError::Closed(back)));
                }
                Err(memq_ring::TryPublishError::Full(back)) => match waker {
                    Some(w) if self.overflow == Overflow::Block => {
                        if Self::wait_on_ring(ring, key, w, n) {
                            // Woken, and waiting again: the room promised to it goes
                            // back, which may be all the first in line waited for.
                            Self::wake_those_in_front(ring);
                        }
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

    /// Whether a publisher in line (`key`) needing `n` slots must stay parked: it is not
    /// the first waiting, or the room free is not beyond what was promised to the
    /// publishers woken before it. One that was woken, or is not in line, may go.
    #[cold]
    fn out_of_turn_on_ring(ring: &PartRing<T>, key: Option<WaitKey>, n: u64) -> bool {
        if ring.is_closed() {
            // Nothing to wait for: the attempt says so.
            return false;
        }
        let want = {
            let lists = ring.waiters().lists.lock();
            if !lists.pubs.is_waiting(key) {
                return false;
            }
            if !lists.pubs.is_first_waiting(key) {
                return true;
            }
            lists.pubs.promised().saturating_add(n)
        };
        // The lists' lock is let go of before the ring is asked (see `RingWaits`).
        want > ring.capacity() || !ring.has_room(want as usize)
    }

    /// Registers (or refreshes) a publisher's place in line, needing `n` slots. Returns
    /// whether it gave back room promised to it (it had been woken).
    fn wait_on_ring(
        ring: &PartRing<T>,
        key: &mut Option<WaitKey>,
        waker: &Waker,
        n: usize,
    ) -> bool {
        let mut spent = SpentWakers::new();
        let mut lists = ring.waiters().lists.lock();
        let promised = lists.pubs.promised();
        lists
            .pubs
            .register_needing(key, waker, n as u64, &mut spent);
        let gave_back = lists.pubs.promised() < promised;
        drop(lists);
        drop(spent);
        gave_back
    }

    /// Wakes the publishers in front of the line whose room is free, or announces the
    /// first of them to the ring (see `RingWaits::wake_publishers`).
    #[cold]
    fn wake_those_in_front(ring: &PartRing<T>) {
        ring.waiters().wake_publishers(
            || ring.free_slots(),
            |n| ring.prepare_batch_publisher_wait(n),
        );
    }

    /// After a publish: a publisher that was in line leaves it (see
    /// [`Shared::leave_ring_line`]).
    #[inline]
    fn got_on_ring(ring: &PartRing<T>, key: &mut Option<WaitKey>) {
        Self::leave_ring_line(ring, key);
    }

    /// Takes a publisher that waited off the ring partition's line (it got on, gave up,
    /// failed, or was dropped), then wakes those now in front whose room is free, or
    /// announces the first of them to the ring again: room promised to it, or left over,
    /// is not left waiting for the ring's next wake-up. One test for a publish that
    /// never waited.
    #[inline]
    pub(super) fn leave_ring_line(ring: &PartRing<T>, key: &mut Option<WaitKey>) {
        if key.is_some() {
            Self::leave_line_and_wake(ring, key);
        }
    }

    #[cold]
    fn leave_line_and_wake(ring: &PartRing<T>, key: &mut Option<WaitKey>) {
        let (waker, others) = {
            let mut lists = ring.waiters().lists.lock();
            let (_, waker) = lists.pubs.remove(key);
            (waker, lists.pubs.waiting() > 0)
        };
        drop(waker);
        if others {
            Self::wake_those_in_front(ring);
        }
    }
}
