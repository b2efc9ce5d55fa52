//! Broadcast readers: each reads every message from its own position, with no
//! read-modify-write on its path (per message, a store of its position and a fence,
//! after which it looks whether a writer waits for the room it freed).

use alloc::collections::VecDeque;
use core::fmt;

use crate::ring::{Attached, Ring, RingError, Scanned, SlotState, Start, Waiters};
use crate::sync::{Arc, Ordering};

/// Why a receive returned no message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryRecvError {
    /// Nothing published at the reader's position yet.
    Empty,
    /// The ring is closed and the reader received everything published before.
    Closed,
    /// The reader was behind what the ring still holds and moved to its oldest message;
    /// this many messages were missed. In a ring that waits for its readers, only a
    /// reader that attached or sought to a position already gone sees it; in one that
    /// drops the oldest ([`RingConfig::drop_oldest`](crate::RingConfig::drop_oldest)),
    /// also a reader (or group) that fell more than `capacity` messages behind.
    Lagged(u64),
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("nothing to receive yet"),
            TryRecvError::Closed => f.write_str("the ring is closed"),
            TryRecvError::Lagged(n) => write!(f, "the reader missed {n} messages"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for TryRecvError {}

/// A reader of every message of a [`Ring`], from its own position. While it is attached,
/// writers do not overwrite what it has not read, unless the ring drops the oldest
/// ([`RingConfig::drop_oldest`](crate::RingConfig::drop_oldest)): then a reader that falls
/// more than `capacity` messages behind moves on to the oldest message held and reports
/// what it missed.
pub struct Reader<T, W: Waiters = crate::NoWaiters> {
    ring: Arc<Ring<T, W>>,
    index: usize,
    pos: u64,
    /// Messages missed at attachment or a seek, reported by the next receive.
    missed: u64,
    /// Messages cloned ahead of the position ([`Reader::read_ahead`]), in offset order
    /// from `pos`: handed over by the next receives.
    ahead: VecDeque<(u64, T)>,
    /// Its last scan for parked writers (see `Ring::reader_moved`).
    scanned: Scanned,
}

impl<T, W: Waiters> fmt::Debug for Reader<T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader")
            .field("position", &self.pos)
            .finish_non_exhaustive()
    }
}

impl<T, W: Waiters> Reader<T, W> {
    /// Attaches a reader to `ring` at `start`. A start before the oldest message the
    /// ring holds begins at that message, and the first receive reports what was missed.
    pub fn new(ring: &Arc<Ring<T, W>>, start: Start) -> Result<Self, RingError> {
        let (index, Attached { pos, missed }) = ring.attach_reader(start)?;
        Ok(Self {
            ring: ring.clone(),
            index,
            pos,
            missed,
            ahead: VecDeque::new(),
            scanned: Scanned::NONE,
        })
    }

    /// The offset of the next message this reader receives.
    #[inline]
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Messages missed at attachment or at the last seek (a start before the oldest
    /// message held) that the next receive reports and has not yet: memq counts them in
    /// a reader's lag, and its position as where it asked to start.
    pub fn missed(&self) -> u64 {
        self.missed
    }

    /// The ring read.
    pub fn ring(&self) -> &Arc<Ring<T, W>> {
        &self.ring
    }

    /// Moves the reader to `start` (backwards too, within what the ring holds; in a
    /// taking ring not before what it received, which is gone).
    pub fn seek(&mut self, start: Start) -> Result<(), RingError> {
        // In a taking ring what this reader received is gone.
        self.ring.note_taken(self.pos);
        let at = self.ring.place(self.ring.cursor(self.index), start)?;
        self.pos = at.pos;
        self.missed = at.missed;
        self.ahead.clear();
        // Backwards, the reader may be behind a wake position again: it scans anew.
        self.scanned = Scanned::NONE;
        self.ring.wake_writers_if_waiting();
        Ok(())
    }

    /// The message at the reader's position and its offset, if it is published.
    #[inline]
    pub fn try_recv(&mut self) -> Result<(u64, T), TryRecvError>
    where
        T: Clone,
    {
        if self.missed != 0 {
            return Err(TryRecvError::Lagged(self.take_missed()));
        }
        let pos = self.pos;
        if let Some((offset, value)) = self.ahead.pop_front() {
            debug_assert_eq!(offset, pos, "read ahead out of step with the position");
            self.pos = pos + 1;
            self.ring
                .reader_moved(self.ring.cursor(self.index), pos + 1, &mut self.scanned);
            return Ok((offset, value));
        }
        if self.ring.drops_oldest() {
            return self.recv_pinned(pos);
        }
        match self.ring.read_at(pos) {
            SlotState::Ready(value) => {
                self.pos = pos + 1;
                self.ring
                    .reader_moved(self.ring.cursor(self.index), pos + 1, &mut self.scanned);
                Ok((pos, value))
            }
            SlotState::Empty if self.ring.finished_at(pos) => Err(TryRecvError::Closed),
            SlotState::Empty => Err(TryRecvError::Empty),
            SlotState::Gone => self.relocate(),
        }
    }

    /// Clones up to `max` published messages after those this reader holds already
    /// (from its position on), in one burst, without moving its position: they keep
    /// holding writers back until receives hand them over, one at a time, as if each
    /// were read then. Returns how many it cloned. For a front that hands messages over
    /// one at a time but would rather clone them together (a shared payload's reference
    /// count then stays in one core's cache for the burst).
    ///
    /// Nothing in a ring that drops the oldest or moves messages out (there a message
    /// ahead of the position is not held for the reader), nor while a gap is to be
    /// reported.
    pub fn read_ahead(&mut self, max: usize) -> usize
    where
        T: Clone,
    {
        if self.ring.drops_oldest() || self.ring.takes() || self.missed != 0 {
            return 0;
        }
        let mut next = self.pos + self.ahead.len() as u64;
        let mut n = 0;
        while n < max {
            // Every offset from the position on is whole while the position holds the
            // floor at or below it (see `Ring::read_at`).
            match self.ring.read_at(next) {
                SlotState::Ready(value) => self.ahead.push_back((next, value)),
                SlotState::Empty | SlotState::Gone => break,
            }
            next += 1;
            n += 1;
        }
        n
    }

    /// How many messages this reader cloned ahead and has not handed over
    /// ([`Reader::read_ahead`]).
    pub fn ahead(&self) -> usize {
        self.ahead.len()
    }

    /// What the start or seek missed, with what writers evicted since then (in a ring
    /// that drops the oldest): one gap, reported once, as if the reader had looked only
    /// now.
    #[cold]
    fn take_missed(&mut self) -> u64 {
        core::mem::take(&mut self.missed) + self.skip_evicted()
    }

    /// In a ring that drops the oldest: moves the reader past the messages writers
    /// evicted before it read them, and returns how many (0 in other rings, or if none
    /// were). For a front that reports a gap it knows of already (one a batch met after
    /// it had taken messages): what was evicted since joins the same report, as if the
    /// reader had looked only now, instead of making a second one.
    pub fn skip_evicted(&mut self) -> u64 {
        if !self.ring.drops_oldest() || !self.ahead.is_empty() {
            return 0;
        }
        let Some(to) = self.ring.overtaken(self.pos) else {
            return 0;
        };
        // Not pinned: the reader reads nothing here, it only moves on (its next read
        // pins as usual).
        self.ring.cursor(self.index).store(to, Ordering::Release);
        self.ring.note_taken(to);
        let skipped = to - self.pos;
        self.pos = to;
        skipped
    }

    /// [`Reader::try_recv`] in a ring that drops the oldest: pins `pos` while it reads
    /// (see the ring's notes), or moves on if writers overtook it.
    fn recv_pinned(&mut self, pos: u64) -> Result<(u64, T), TryRecvError>
    where
        T: Clone,
    {
        let entry = self.ring.cursor(self.index);
        if let Some(to) = self.ring.pin(entry, pos) {
            entry.store(to, Ordering::Release);
            self.ring.note_taken(to);
            self.pos = to;
            return Err(TryRecvError::Lagged(to - pos));
        }
        // Unpins at `pos` if the read does not get through (a panicking clone included).
        let mut unpin = Unpin { entry, to: pos };
        match self.ring.read_at(pos) {
            SlotState::Ready(value) => {
                unpin.to = pos + 1;
                drop(unpin);
                self.pos = pos + 1;
                Ok((pos, value))
            }
            SlotState::Empty if self.ring.finished_at(pos) => Err(TryRecvError::Closed),
            SlotState::Empty => Err(TryRecvError::Empty),
            // The pin keeps the writer of the next lap off the slot.
            SlotState::Gone => broken_pin(pos),
        }
    }

    /// A reader overtaken by the writers (which its attachment rules out): moves to the
    /// oldest message and reports the gap rather than lose track. Forwards only, so its
    /// remembered scan for parked writers (`scanned`) stands.
    #[cold]
    fn relocate(&mut self) -> Result<(u64, T), TryRecvError> {
        let asked = self.pos;
        self.ring.note_taken(asked);
        match self
            .ring
            .place(self.ring.cursor(self.index), Start::Earliest)
        {
            Ok(at) => {
                self.pos = at.pos;
                Err(TryRecvError::Lagged(at.pos.saturating_sub(asked)))
            }
            Err(_) => Err(TryRecvError::Empty),
        }
    }

    /// For a front that parks readers: announces that this reader is about to wait
    /// (the ring's next publish calls [`Waiters::wake_readers`]), then looks again.
    /// Returns whether it may sleep: nothing arrived meanwhile. The front registers the
    /// reader with its waiters before calling this, so that the wake-up finds it.
    pub fn prepare_wait(&self) -> bool {
        self.missed == 0 && self.ahead.is_empty() && self.ring.reader_may_sleep(self.pos)
    }
}

/// Stores a pinned reader's next position, which unpins it, when its read ends.
pub(crate) struct Unpin<'a> {
    entry: &'a crate::sync::AtomicU64,
    to: u64,
}

impl<'a> Unpin<'a> {
    /// Stores `to` in `entry` when dropped.
    pub(crate) fn new(entry: &'a crate::sync::AtomicU64, to: u64) -> Self {
        Self { entry, to }
    }
}

impl Drop for Unpin<'_> {
    #[inline]
    fn drop(&mut self) {
        self.entry.store(self.to, Ordering::Release);
    }
}

/// A pinned offset overwritten: a bug in the ring, which stops rather than hand out
/// something else.
#[cold]
#[inline(never)]
fn broken_pin(pos: u64) -> ! {
    panic!("memq-ring bug: offset {pos} was overwritten while a reader pinned it")
}

impl<T, W: Waiters> Drop for Reader<T, W> {
    fn drop(&mut self) {
        self.ring.detach_reader(self.ring.cursor(self.index));
    }
}
