//! Holds: a position that keeps writers off every message from it on, from which any of
//! those messages can be read again, in any order. memq's groups that acknowledge
//! explicitly need one: a message whose lease ran out is delivered again from the log,
//! so the group holds the log at its oldest message not yet acknowledged.

use core::fmt;

use crate::reader::Unpin;
use crate::ring::{Ring, RingError, SlotState, Start, Waiters, IDLE};
use crate::sync::{Arc, Ordering};

/// Why [`Hold::read`] returned no message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldReadError {
    /// The offset is before the hold's position: the ring may have let it go.
    Released,
    /// Not published yet: past the end, or claimed by a writer that has not written it.
    NotYet,
    /// In a ring that drops the oldest: writers overwrote it (a hold does not keep them
    /// back there).
    Gone,
}

impl fmt::Display for HoldReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HoldReadError::Released => "the offset is before the hold's position",
            HoldReadError::NotYet => "the offset is not published yet",
            HoldReadError::Gone => "the offset was overwritten",
        })
    }
}

#[cfg(feature = "std")]
impl std::error::Error for HoldReadError {}

/// A position in a [`Ring`] that keeps writers from overwriting (or evicting) any message
/// at or after it, unless the ring drops the oldest; [`Hold::read`] reads any message
/// from the position to the end again. It holds the ring until it moves on
/// ([`Hold::advance`]) or drops.
pub struct Hold<T, W: Waiters = crate::NoWaiters> {
    ring: Arc<Ring<T, W>>,
    /// Its position, among the groups' claim positions (scanned for the floor).
    entry: usize,
    /// An entry among the readers', for the pins of a ring that drops the oldest.
    pin: usize,
    /// Messages between the start asked for and the position given (gone already).
    missed: u64,
}

impl<T, W: Waiters> fmt::Debug for Hold<T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hold")
            .field("position", &self.position())
            .finish_non_exhaustive()
    }
}

impl<T, W: Waiters> Hold<T, W> {
    /// Holds `ring` from `start` (clamped to the oldest message held, as a reader's
    /// start is). A ring whose receives move messages out keeps nothing to read again:
    /// [`RingError::TakingRing`].
    pub fn new(ring: &Arc<Ring<T, W>>, start: Start) -> Result<Self, RingError> {
        if ring.takes() {
            return Err(RingError::TakingRing);
        }
        let pin = ring.attach_member()?;
        let (entry, missed) = match ring.attach_hold(start) {
            Ok((entry, at)) => (entry, at.missed),
            Err(e) => {
                ring.detach(ring.cursor(pin));
                return Err(e);
            }
        };
        Ok(Self {
            ring: ring.clone(),
            entry,
            pin,
            missed,
        })
    }

    /// How many messages the hold missed when it was made: between the offset its start
    /// asked for and the oldest one the ring still had (0 unless it asked for an offset
    /// already gone). memq reports them to the group as lagged.
    pub fn missed(&self) -> u64 {
        self.missed
    }

    /// For a front that parks a reader of this hold waiting for `offset` to be
    /// published (an explicit-ack member that has read everything): announces it, as
    /// [`Reader::prepare_wait`](crate::Reader::prepare_wait) does, then looks again.
    /// Returns whether it may sleep: `offset` is still not published and the ring is
    /// open. The front registers the reader with its waiters before calling this.
    pub fn prepare_wait(&self, offset: u64) -> bool {
        self.ring.reader_may_sleep(offset)
    }

    /// The oldest offset held.
    #[inline]
    pub fn position(&self) -> u64 {
        self.ring.claim_entry(self.entry).load(Ordering::Acquire)
    }

    /// The ring held.
    pub fn ring(&self) -> &Arc<Ring<T, W>> {
        &self.ring
    }

    /// Lets go of every message before `to` (at most the ring's end); a `to` at or before
    /// the position changes nothing. Writers waiting for the room are woken.
    pub fn advance(&mut self, to: u64) {
        if self.advance_quietly(to) {
            self.ring.wake_writers_if_waiting();
        }
    }

    /// [`Hold::advance`] without waking the writers it makes room for, for a front that
    /// moves the hold under a lock of its own and wakes them once it has let go of it
    /// (with [`Ring::wake_writers_if_waiting`], which it must call then: a writer
    /// waiting for this room is woken by nothing else). Returns whether the hold moved.
    pub fn advance_quietly(&mut self, to: u64) -> bool {
        let to = to.min(self.ring.end());
        let entry = self.ring.claim_entry(self.entry);
        if to > entry.load(Ordering::Relaxed) {
            entry.store(to, Ordering::Release);
            true
        } else {
            false
        }
    }

    /// Moves the hold to `start`, backwards too, within what the ring still holds (as a
    /// reader's seek).
    pub fn seek(&mut self, start: Start) -> Result<(), RingError> {
        self.ring.place(self.ring.claim_entry(self.entry), start)?;
        self.ring.wake_writers_if_waiting();
        Ok(())
    }

    /// The message at `offset`, which must be at or after the hold's position.
    pub fn read(&mut self, offset: u64) -> Result<T, HoldReadError>
    where
        T: Clone,
    {
        if offset < self.position() {
            return Err(HoldReadError::Released);
        }
        let state = if self.ring.drops_oldest() {
            let pin = self.ring.cursor(self.pin);
            if self.ring.pin(pin, offset).is_some() {
                pin.store(IDLE, Ordering::Release);
                return Err(HoldReadError::Gone);
            }
            // Unpins when the read ends, a panicking clone included.
            let _unpin = Unpin::new(pin, IDLE);
            self.ring.read_at(offset)
        } else {
            self.ring.read_at(offset)
        };
        match state {
            SlotState::Ready(value) => Ok(value),
            SlotState::Empty => Err(HoldReadError::NotYet),
            SlotState::Gone => Err(HoldReadError::Gone),
        }
    }
}

impl<T, W: Waiters> Drop for Hold<T, W> {
    fn drop(&mut self) {
        self.ring.detach(self.ring.cursor(self.pin));
        self.ring.detach(self.ring.claim_entry(self.entry));
    }
}
