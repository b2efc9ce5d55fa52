//! What one publish carries ([`Payload`]): one message or a batch, and how each is
//! appended to a partition's locked log or published on its ring.
//!
//! Layer: as `publish.rs`.

use alloc::vec::Vec;

use crate::config::Overflow;
use crate::partition::PartLog;
#[cfg(target_has_atomic = "64")]
use crate::partition::PartRing;

/// What one publish carries: one message (`T` itself), or a batch (`Vec<T>`) published
/// whole or not at all. The publish path ([`Shared::attempt_publish`]), the futures and
/// the blocking publishes are written once over it; what only a batch needs folds away
/// for one message ([`Payload::BATCH`], a count of 1, no vector of overwritten values).
///
/// Its methods have names no other type in memq uses: every `T` implements it, so a
/// method named like a common one (`len`) would be found first on whatever is in scope.
pub(crate) trait Payload<T>: Sized {
    /// Whether this is a batch: it may be larger than the capacity (and could never
    /// fit), or empty, and its visit takes the lock without backing off (see
    /// [`Mutex::lock_now`](crate::sync::Mutex::lock_now)).
    const BATCH: bool;
    /// The values a publish overwrites in the ring or finds expired, let go of after
    /// the lock.
    type Olds;
    /// How many messages it publishes, and so how many slots it needs.
    fn messages(&self) -> usize;
    /// Room for the values it lets go of, reserved before the lock.
    fn reserve_olds(&self) -> Self::Olds;
    /// Where the values that expire during the visit go.
    fn expired_into(olds: &mut Self::Olds) -> &mut Vec<T>;
    /// Drops them, after the lock.
    fn let_go(olds: Self::Olds);
    /// Appends all of it at `now` if the overflow policy allows it now, returning the
    /// (first) offset; otherwise nothing changes and it is handed back.
    fn append_to(
        self,
        log: &mut PartLog<T>,
        now: u64,
        overflow: Overflow,
        olds: &mut Self::Olds,
    ) -> Result<u64, Self>;
    /// Publishes all of it on a ring partition if it fits now, returning the (first)
    /// offset; otherwise it comes back in the error. What it evicts is dropped here (no
    /// lock is held).
    #[cfg(target_has_atomic = "64")]
    fn publish_on(self, ring: &PartRing<T>) -> Result<u64, memq_ring::TryPublishError<Self>>;
}

impl<T> Payload<T> for T {
    const BATCH: bool = false;
    /// Those that expired, and the one it overwrote (none allocated unless some expire).
    type Olds = (Vec<T>, Option<T>);

    #[inline]
    fn messages(&self) -> usize {
        1
    }

    #[inline]
    fn reserve_olds(&self) -> Self::Olds {
        (Vec::new(), None)
    }

    #[inline]
    fn expired_into(olds: &mut Self::Olds) -> &mut Vec<T> {
        &mut olds.0
    }

    /// Inline, and nothing but two tests when there is nothing to drop (the tuple's own
    /// drop is a call).
    #[inline]
    fn let_go((expired, old): Self::Olds) {
        // In the tuple's order: those that expired, then the one overwritten.
        if expired.capacity() == 0 {
            // Nothing allocated, so nothing held: forgetting it drops nothing.
            core::mem::forget(expired);
        } else {
            drop(expired);
        }
        drop(old);
    }

    #[inline]
    fn append_to(
        self,
        log: &mut PartLog<T>,
        now: u64,
        overflow: Overflow,
        olds: &mut Self::Olds,
    ) -> Result<u64, Self> {
        let (offset, old) = log.append(self, now, overflow)?;
        olds.1 = old;
        Ok(offset)
    }

    #[cfg(target_has_atomic = "64")]
    #[inline]
    fn publish_on(self, ring: &PartRing<T>) -> Result<u64, memq_ring::TryPublishError<Self>> {
        ring.try_publish(self).map(|published| published.offset)
    }
}

impl<T> Payload<T> for Vec<T> {
    const BATCH: bool = true;
    /// Those that expired and those it overwrote, in room reserved for the batch.
    type Olds = Vec<T>;

    #[inline]
    fn messages(&self) -> usize {
        Vec::len(self)
    }

    #[inline]
    fn reserve_olds(&self) -> Self::Olds {
        Vec::with_capacity(Vec::len(self))
    }

    #[inline]
    fn expired_into(olds: &mut Self::Olds) -> &mut Vec<T> {
        olds
    }

    #[inline]
    fn let_go(olds: Self::Olds) {
        drop(olds);
    }

    #[inline]
    fn append_to(
        mut self,
        log: &mut PartLog<T>,
        now: u64,
        overflow: Overflow,
        olds: &mut Self::Olds,
    ) -> Result<u64, Self> {
        match log.append_batch(&mut self, now, overflow, olds) {
            Some(first) => Ok(first),
            None => Err(self),
        }
    }

    #[cfg(target_has_atomic = "64")]
    fn publish_on(mut self, ring: &PartRing<T>) -> Result<u64, memq_ring::TryPublishError<Self>> {
        use memq_ring::TryPublishError;
        // Allocates only if the batch evicts something.
        let mut evicted = Vec::new();
        match ring.try_publish_batch(&mut self, &mut evicted) {
            Ok(first) => Ok(first),
            Err(TryPublishError::Full(())) => Err(TryPublishError::Full(self)),
            Err(TryPublishError::Closed(())) => Err(TryPublishError::Closed(self)),
        }
    }
}
