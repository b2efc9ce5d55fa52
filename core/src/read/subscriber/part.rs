//! One partition as a subscriber reads it ([`SubPart`]): its position's index in the
//! log, its wait registration, what it fetched ahead, and the visits a receive makes to
//! the partition under its lock.
//!
//! Layer: on the partition's log and wait lists, through the topic's shared state.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::task::Waker;

use crate::log::{Dest, Entry, Read};
use crate::message::Message;
use crate::partition::Shared;
use crate::partition::{Fetcher, PartLog};
use crate::read::to_message;
use crate::sync::{Arc, AtomicUsize, Ordering, Padded};
use crate::wait::{SpentWakers, WaitKey, WakeList};

/// How many messages a subscriber fetches per visit to a partition, at most.
///
/// Fetching several per lock is what lets one publisher and several subscribers share a
/// partition without taking turns on its lock for every message. It is invisible to
/// users: the subscriber's position, its lag, `Block`/`Reject` retention and the
/// `delivered` counters all count only what was handed to the user (see `Log::ahead`).
pub(super) const READ_AHEAD: usize = 32;

#[derive(Debug)]
pub(super) struct SubPart<T> {
    pub(super) p: usize,
    pub(super) cursor: usize,
    pub(super) key: Option<WaitKey>,
    /// Messages fetched and not yet handed over, in offset order (read-ahead only).
    pub(super) buf: VecDeque<Entry<T>>,
    /// How many of them there are, shared with the log; `None` where the topic's
    /// retention could drop a message a reader has not taken (a TTL or `DropOldest`):
    /// there every message is read under the lock, so that nothing fetched early is
    /// handed over after the log would have reported it missed.
    pub(super) ahead: Option<Arc<Padded<AtomicUsize>>>,
    /// The last wake position this reader took the lock for (see
    /// [`Shared::ahead_consumed`]); 0 for none, and again after every seek.
    pub(super) acted: usize,
    /// Whether its last visit read the partition to its end and left its registration
    /// waiting there, with the waker whose identity the subscriber keeps (`armed_with`):
    /// an async receive reading one partition registers as it takes the last message,
    /// so that the next receive can wait without taking the lock again.
    pub(super) armed: bool,
    /// Where this reader's next read from the log starts, as of its last visit under the
    /// lock (`None` if unknown). Never ahead of the truth (only reads move the cursor
    /// forward, and a seek sets this again), so [`Partition::may_have_news`] answering
    /// "nothing new" for it is always right.
    ///
    /// [`Partition::may_have_news`]: crate::topic::Partition::may_have_news
    pub(super) fetched: Option<u64>,
    /// Values a releasing log let go of during this reader's visit (see
    /// [`Log::release_read`]), dropped as soon as the visit has let go of the lock; kept
    /// empty, for its capacity, in between.
    pub(super) released: Vec<T>,
}

impl<T> SubPart<T> {
    /// Moves this reader to `pos`: what it fetched ahead and moved out of a releasing log
    /// goes back first, and afterwards the log lets go of what no reader needs any more
    /// (into `released`, to be dropped after unlocking), as the reader may have been the
    /// slowest.
    pub(super) fn give_back_and_seek(
        &mut self,
        log: &mut PartLog<T>,
        pos: u64,
        released: &mut Vec<T>,
    ) {
        log.give_back(&mut self.buf);
        log.set_cursor(self.cursor, pos);
        self.reattach(log);
        log.release_read(released);
    }

    /// After a seek took back the read-ahead: the cell starts again, empty.
    pub(super) fn reattach(&mut self, log: &mut PartLog<T>) {
        self.acted = 0;
        self.armed = false;
        self.fetched = Some(log.fetched(self.cursor));
        if let Some(cell) = &self.ahead {
            cell.0.store(0, Ordering::Relaxed);
            log.attach_ahead(self.cursor, cell.clone());
        }
    }

    /// Hands over the next fetched message, if any, without the lock.
    #[inline]
    pub(super) fn pop_ahead(&mut self, shared: &Shared<T>) -> Option<Entry<T>> {
        let e = self.buf.pop_front()?;
        if let Some(cell) = &self.ahead {
            cell.0.store(self.buf.len(), Ordering::Relaxed);
            shared.ahead_consumed(self.p, e.offset + 1, &mut self.acted);
        }
        Some(e)
    }

    /// Hands over what this reader fetched earlier, in order, up to `room` messages into
    /// `buf`, without the lock. Returns how many, and whether the batch is done with
    /// this partition (it is full, or the read-ahead holds more): the wake position is
    /// then acted on here, as no visit under the lock follows.
    #[inline]
    pub(super) fn drain_ahead(
        &mut self,
        shared: &Shared<T>,
        buf: &mut Vec<Message<T>>,
        room: usize,
    ) -> (usize, bool) {
        let clocked = shared.stamp();
        let take = self.buf.len().min(room);
        buf.extend(
            self.buf
                .drain(..take)
                .map(|e| to_message(self.p, e, clocked)),
        );
        if let Some(cell) = &self.ahead {
            cell.0.store(self.buf.len(), Ordering::Relaxed);
        }
        let stop = take == room || !self.buf.is_empty();
        if stop {
            let pos = buf.last().map_or(0, |m| m.offset + 1);
            shared.ahead_consumed(self.p, pos, &mut self.acted);
        }
        (take, stop)
    }

    /// Ends a visit that took a message or found a gap, under the lock: records where the
    /// next read from the log starts, ends this reader's registration here, and lets in
    /// publishers its move made room for.
    #[inline]
    pub(super) fn end_visit(
        &mut self,
        shared: &Shared<T>,
        log: &mut PartLog<T>,
        spent: &mut SpentWakers,
        wl: &mut WakeList,
    ) {
        self.fetched = Some(log.fetched(self.cursor));
        self.armed = false;
        log.subs.settle(self.key, spent);
        shared.reader_advanced(log, wl);
    }
}

/// What a single receive's visit to a partition found, its lock released again.
pub(super) enum Found<T> {
    /// The next message (for a reader with read-ahead, more were fetched behind it).
    Message(Entry<T>),
    /// The reader was behind the retained window: this many messages were missed.
    Lagged(u64),
    /// Nothing now; the reader registered to wait there if it waits.
    Open,
    /// Nothing, and the partition is closed.
    Closed,
}

/// What a batch receive's visit to a partition found, its lock released again.
pub(super) enum Batch {
    /// The reader's next read there is a gap and the batch holds messages already: the
    /// gap is reported by the next receive, not mixed into this batch.
    GapAhead,
    /// A gap of this many messages, reported before any message of the batch.
    Lagged(u64),
    /// The batch took messages there (or from what the reader fetched earlier).
    Took,
    /// Nothing now; the reader registered to wait there if the batch is empty.
    Open,
    /// Nothing, and the partition is closed.
    Closed,
}

impl<T: Clone> SubPart<T> {
    /// A single receive's visit to this reader's partition, under its lock: expires what
    /// a TTL ends, lets go of what every reader has (a releasing log), and reads the next
    /// message, fetching more behind it for a reader with read-ahead; registers `waker`
    /// if there is nothing and the partition is open. `sole`: take the lock at once (see
    /// `Subscriber::poll_recv_inner`). What the visit lets go of is dropped after the
    /// lock.
    #[inline]
    pub(super) fn visit(
        &mut self,
        shared: &Shared<T>,
        now: u64,
        waker: Option<&Waker>,
        sole: bool,
        arm: bool,
    ) -> Found<T> {
        let release = shared.release_on_read;
        if release {
            self.released.clear();
        }
        // Declared before the lock: what it keeps is dropped after it.
        let mut spent = SpentWakers::new();
        let mut wl = WakeList::new();
        let mut stay: Option<Waker> = None;
        let mut log = shared.parts[self.p].log.lock_at_once_if(sole);
        // A visit under the lock ends the memory of acted-on wake positions (see
        // `Shared::ahead_consumed`).
        self.acted = 0;
        // Expired values join what the reader lets go of, dropped after the lock.
        shared.expire(&mut log, now, &mut wl, &mut self.released);
        if release && self.ahead.is_some() {
            // What this reader was handed since its last visit, a releasing log lets
            // go of now if every reader has it (copies fetched past a slower reader).
            log.release_read(&mut self.released);
        }
        let dest = match (release, self.ahead.is_some()) {
            (false, _) => Dest::Copy,
            (true, true) => Dest::Held,
            (true, false) => Dest::User,
        };
        // A reader about to take the partition's last message stays registered for the
        // next (see `Subscriber::stays_registered`), its waker cloned before the read (a
        // `clone` that panics must not lose the message); never at the last offset,
        // whose end looks like the `tail` a close stores.
        let arm = arm && log.high < u64::MAX;
        let last = arm && !log.closed && log.fetched(self.cursor) + 1 == log.high;
        if let Some(w) = waker.filter(|_| last) {
            stay = Some(w.clone());
        }
        let found = match log.read(self.cursor, dest) {
            Read::Message(e) => {
                let e = self.hold_and_read_ahead(&mut log, e, release);
                match stay.take() {
                    Some(w) if self.buf.is_empty() && log.fetched(self.cursor) == log.high => {
                        self.fetched = Some(log.high);
                        log.subs.register_cloned(&mut self.key, w, &mut spent);
                        self.armed = true;
                        shared.reader_advanced(&mut log, &mut wl);
                    }
                    other => {
                        spent.keep(other);
                        self.end_visit(shared, &mut log, &mut spent, &mut wl);
                    }
                }
                Found::Message(e)
            }
            Read::Lagged(missed) => {
                self.end_visit(shared, &mut log, &mut spent, &mut wl);
                Found::Lagged(missed)
            }
            Read::Empty => {
                self.fetched = Some(log.fetched(self.cursor));
                if log.closed {
                    self.armed = false;
                    Found::Closed
                } else {
                    if let Some(w) = waker {
                        log.subs.register(&mut self.key, w, &mut spent);
                    }
                    self.armed = waker.is_some() && arm;
                    Found::Open
                }
            }
        };
        drop(log);
        self.released.clear();
        found
    }

    /// For a reader with read-ahead, holds `first`, just read, while up to
    /// [`READ_AHEAD`] more are fetched behind it, and returns the first of them to hand
    /// over; `first` itself otherwise.
    #[inline]
    pub(super) fn hold_and_read_ahead(
        &mut self,
        log: &mut PartLog<T>,
        first: Entry<T>,
        release: bool,
    ) -> Entry<T> {
        let Some(cell) = &self.ahead else {
            return first;
        };
        let by = Fetcher::Subscriber { release };
        log.hold_and_read_ahead(self.cursor, first, &cell.0, READ_AHEAD, &mut self.buf, by)
    }

    /// A batch receive's visit to this reader's partition, under its lock: reads into
    /// `buf` until it holds `limit` messages of this poll (`got` so far) or there is
    /// nothing more; registers `waker` if the batch is still empty and the partition is
    /// open. `drained`: the batch took what this reader had fetched earlier here.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) fn visit_many(
        &mut self,
        shared: &Shared<T>,
        now: u64,
        buf: &mut Vec<Message<T>>,
        got: &mut usize,
        limit: usize,
        waker: Option<&Waker>,
        drained: bool,
    ) -> Batch {
        let release = shared.release_on_read;
        let dest = if release { Dest::User } else { Dest::Copy };
        let clocked = shared.stamp();
        // Declared before the lock: what they keep is let go of after it.
        let mut dead = Vec::new();
        let mut spent = SpentWakers::new();
        let mut wl = WakeList::new();
        let mut log = shared.parts[self.p].log.lock_now();
        self.acted = 0;
        // A batch never stays registered past its wait; a registration it makes may
        // hold another task's waker than the one the subscriber armed with.
        self.armed = false;
        shared.expire(&mut log, now, &mut wl, &mut dead);
        let old = log.cursor(self.cursor);
        let first = if release { log.first() } else { log.low };
        if old < first && *got > 0 {
            return Batch::GapAhead;
        }
        while *got < limit {
            match log.read(self.cursor, dest) {
                Read::Message(e) => {
                    buf.push(to_message(self.p, e, clocked));
                    *got += 1;
                }
                Read::Lagged(missed) => {
                    self.end_visit(shared, &mut log, &mut spent, &mut wl);
                    return Batch::Lagged(missed);
                }
                Read::Empty => break,
            }
        }
        if drained || log.cursor(self.cursor) != old {
            self.end_visit(shared, &mut log, &mut spent, &mut wl);
            return Batch::Took;
        }
        self.fetched = Some(log.fetched(self.cursor));
        if log.closed {
            return Batch::Closed;
        }
        if let (0, Some(w)) = (*got, waker) {
            log.subs.register(&mut self.key, w, &mut spent);
        }
        Batch::Open
    }
}
