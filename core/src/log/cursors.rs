//! The positions of the readers attached to one partition's log, and their read-ahead
//! cells.
//!
//! A cursor is a reader's place in the log: a subscriber's, or a consumer group's (one per
//! group, shared by its members). The log reads at cursors and keeps, for retention and
//! back-pressure, a lower bound of the slowest of them. Nothing here knows what kind of
//! reader a cursor belongs to.
//!
//! Layer: above `sync` only.

use alloc::vec::Vec;

use crate::sync::{Arc, AtomicUsize, Ordering, Padded};

/// Position value marking an unused cursor slot: never the minimum of anything retained.
pub(crate) const UNUSED: u64 = u64::MAX;

/// Value of a read-ahead cell taken back by [`Cursors::revoke_ahead`].
pub(crate) const REVOKED: usize = usize::MAX;

/// A read-ahead cell: how many messages its reader fetched and has not handed over yet.
pub(crate) type AheadCell = Arc<Padded<AtomicUsize>>;

/// Positions of every attached reader, by cursor index.
#[derive(Debug, Default)]
pub(crate) struct Cursors {
    /// Each reader's position; `UNUSED` when the slot is free. For a reader that reads
    /// ahead this is the end of what it fetched; see `ahead`.
    pos: Vec<u64>,
    /// Per cursor, the read-ahead cell of a reader that fetches several messages per
    /// visit (a subscriber, or a group's pool): how many fetched messages it has not yet
    /// handed over. Its true position is `pos[i] - ahead`. Written by its owner (the
    /// subscriber; the group's members under the pool's lock), also outside the log's
    /// lock (it only ever shrinks there, so a stale read is a lower bound of the true
    /// position, which is what retention needs).
    ahead: Vec<Option<AheadCell>>,
    /// Free slots of `pos`, for the next reader attached.
    free: Vec<usize>,
    /// A lower bound of the smallest true position in `pos`.
    min_hint: u64,
}

impl Cursors {
    #[inline]
    pub(crate) fn new() -> Self {
        Self {
            pos: Vec::new(),
            ahead: Vec::new(),
            free: Vec::new(),
            min_hint: UNUSED,
        }
    }

    /// Attaches a reader at `pos` with an optional read-ahead cell; returns its index.
    #[inline]
    pub(crate) fn add(&mut self, pos: u64, ahead: Option<AheadCell>) -> usize {
        self.min_hint = self.min_hint.min(pos);
        match self.free.pop() {
            Some(i) => {
                self.pos[i] = pos;
                self.ahead[i] = ahead;
                i
            }
            None => {
                self.pos.push(pos);
                self.ahead.push(ahead);
                self.pos.len() - 1
            }
        }
    }

    /// Detaches a reader (after its read-ahead was taken back).
    #[inline]
    pub(crate) fn remove(&mut self, cursor: usize) {
        debug_assert_ne!(self.pos[cursor], UNUSED);
        debug_assert!(self.ahead[cursor].is_none());
        self.pos[cursor] = UNUSED;
        self.free.push(cursor);
    }

    /// How many readers are attached.
    #[cfg(test)]
    pub(crate) fn attached(&self) -> usize {
        self.pos.iter().filter(|&&p| p != UNUSED).count()
    }

    /// Where a reader's next read from the log starts (its true position plus what it
    /// fetched ahead).
    #[inline]
    pub(crate) fn fetched(&self, cursor: usize) -> u64 {
        self.pos[cursor]
    }

    /// Sets where a reader's next read starts (after a read, or a seek).
    #[inline]
    pub(crate) fn set_fetched(&mut self, cursor: usize, pos: u64) {
        self.pos[cursor] = pos;
    }

    /// Notes that a reader may be at `pos` (a seek, which may go backwards).
    #[inline]
    pub(crate) fn lower_hint(&mut self, pos: u64) {
        self.min_hint = self.min_hint.min(pos);
    }

    /// Messages a cursor fetched but has not handed over yet (0 without read-ahead).
    #[inline]
    pub(crate) fn unread(&self, cursor: usize) -> u64 {
        match &self.ahead[cursor] {
            Some(cell) => match cell.0.load(Ordering::Relaxed) {
                REVOKED => 0,
                n => n as u64,
            },
            None => 0,
        }
    }

    /// Messages fetched ahead and not handed over, by every reader.
    #[inline]
    pub(crate) fn unread_total(&self) -> u64 {
        (0..self.ahead.len()).map(|c| self.unread(c)).sum()
    }

    /// A reader's true position: the next offset its user receives.
    #[inline]
    pub(crate) fn position(&self, cursor: usize) -> u64 {
        self.pos[cursor] - self.unread(cursor)
    }

    /// The smallest true position of any attached reader, `UNUSED` with none.
    #[inline]
    pub(crate) fn min_position(&self) -> u64 {
        (0..self.pos.len())
            .map(|c| self.position(c))
            .min()
            .unwrap_or(UNUSED)
    }

    /// Whether every reader but `cursor` has a true position past `pos`.
    #[inline]
    pub(crate) fn others_past(&self, cursor: usize, pos: u64) -> bool {
        (0..self.pos.len()).all(|c| c == cursor || self.position(c) > pos)
    }

    /// A lower bound of the slowest reader's position, recomputed only if the cached one
    /// is below `want` (so that the common case reads no cursor at all). Readers'
    /// read-ahead cells may be stale here, which only understates the position.
    #[inline]
    pub(crate) fn min_at_least(&mut self, want: u64) -> u64 {
        if self.min_hint >= want {
            return self.min_hint;
        }
        self.min_hint = self.min_position();
        self.min_hint
    }

    /// Takes back a cursor's read-ahead and returns how many messages it had fetched and
    /// not handed over (0 without a cell); the cursor's next read is its true position
    /// again. The cell is marked revoked, so an owner that looks at it later (a pool's
    /// members, after their group was deleted) drops what it fetched instead of handing
    /// it over.
    #[inline]
    pub(crate) fn revoke_ahead(&mut self, cursor: usize) -> u64 {
        let Some(cell) = self.ahead[cursor].take() else {
            return 0;
        };
        let unread = match cell.0.swap(REVOKED, Ordering::AcqRel) {
            REVOKED => 0,
            n => n as u64,
        };
        self.pos[cursor] -= unread;
        unread
    }

    /// Attaches a read-ahead cell to `cursor`; any previous one must have been revoked.
    #[inline]
    pub(crate) fn attach_ahead(&mut self, cursor: usize, cell: AheadCell) {
        debug_assert!(self.ahead[cursor].is_none());
        self.ahead[cursor] = Some(cell);
    }

    /// The read-ahead cell of `cursor`, if it has one.
    #[inline]
    pub(crate) fn ahead(&self, cursor: usize) -> Option<&AheadCell> {
        self.ahead[cursor].as_ref()
    }
}
