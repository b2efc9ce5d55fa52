//! Consumer groups of a topic on the lock-free ring engine (`TopicConfig::ring_engine`):
//! the group's position on each partition is a claim cursor in the ring
//! ([`memq_ring::Group`]), and each member takes the next offset there with one
//! compare-and-swap ([`memq_ring::Member`]), without a lock, so each message goes to
//! exactly one member. A member that waits registers on its group's wait list in the
//! partition's wait lists (`RingWaits`), then announces itself to the ring, which looks
//! once more before it may sleep. A publish wakes one waiting member per group; the
//! member woken wakes the next while messages are left (the ring's flag, which
//! `RingWaits` keeps set while members wait), and a member that stops waiting without
//! taking what it was woken for passes the wake-up on, as on the locked log.
//!
//! The same public behaviour as on the locked log (`receive.rs`): the round over the
//! assigned partitions, `Lagged` before any message of a batch, `recv_if` asking its
//! predicate once on the message in place (the ring reserves the position while it
//! runs), rebalances, deletion, drain after close. Groups on the ring do not share a pool
//! of messages fetched ahead (`pooled.rs`): members take from the ring itself.
//!
//! Layer: on the rings of the topic's shared state and their wait lists; beside the
//! locked receive path, whose round ([`Consumer::round`]) and outcomes it shares.

use alloc::vec::Vec;
use core::task::{Poll, Waker};

use memq_ring::{Member, TryRecvError as RingRecvError};

use super::accept::Accept;
use super::consumer::Consumer;
use super::receive::{pass_on_wakeup, register, Received, Taken, Visit};
use super::shared::{GroupShared, RingGroup};
use crate::config::StartAt;
use crate::error::{Error, RecvError};
use crate::log::ring::{ReaderCounts, RingWaits};
use crate::message::Message;
use crate::partition::Shared;
use crate::read::subscriber::{ring_error, ring_start};
use crate::sync::{Arc, AtomicU64, Mutex, Ordering};
use crate::wait::{SpentWakers, WaitKey, WakeList};

/// A member's reader of its group's position on one ring partition.
#[derive(Debug)]
pub(crate) struct RingMember<T> {
    member: Member<T, RingWaits>,
    /// The group's id in the partition's wait lists.
    slot: u64,
    /// What this member delivered and was told it missed there, for `stats`.
    counts: Arc<ReaderCounts>,
    /// Whether the member's registration there waits (so a receive settles it; one that
    /// did not wait takes no lock).
    pub(super) registered: bool,
}

impl<T> RingMember<T> {
    /// A reader of each partition's group position for a member about to join `group`
    /// (every partition: a rebalance then moves nothing but the assignment).
    pub(super) fn for_each_partition(group: &GroupShared<T>) -> Result<Vec<Self>, Error> {
        let mut out = Vec::with_capacity(group.rings.len());
        for (p, rg) in group.rings.iter().enumerate() {
            let member = rg
                .group
                .member()
                .map_err(|e| ring_error(e, p, rg.ring().capacity()))?;
            let counts = rg
                .ring()
                .waiters()
                .lists
                .lock()
                .group(rg.slot)
                .map_or_else(Default::default, |g| g.attach_counts());
            out.push(Self {
                member,
                slot: rg.slot,
                counts,
                registered: false,
            });
        }
        Ok(out)
    }

    /// Settles this member's registration, if it waits (the wait it was for is served).
    #[inline]
    fn settle(&mut self, key: Option<WaitKey>) {
        if self.registered {
            self.registered = false;
            let mut spent = SpentWakers::new();
            if let Some(g) = self.member.ring().waiters().lists.lock().group(self.slot) {
                g.waiters.settle(key, &mut spent);
            }
        }
    }
}

impl<T> Drop for RingMember<T> {
    fn drop(&mut self) {
        // The counts stay in the group's (the reader itself detaches when it drops).
        if let Some(g) = self.member.ring().waiters().lists.lock().group(self.slot) {
            g.detach_counts(&self.counts);
        }
    }
}

impl<T> RingGroup<T> {
    /// Whether the partition is closed and the group has read it to its end.
    fn finished(&self) -> bool {
        let ring = self.ring();
        ring.is_closed() && self.group.position() >= ring.end()
    }
}

/// Makes group `name` at `start` on a topic on the ring: a position in every partition's
/// ring (every partition is checked first, so that a failure leaves nothing attached).
pub(super) fn create_group<T>(
    shared: &Shared<T>,
    name: &str,
    start: StartAt,
) -> Result<GroupShared<T>, Error> {
    let mut starts = Vec::with_capacity(shared.rings.len());
    for (p, ring) in shared.rings.iter().enumerate() {
        starts.push(ring_start(ring, p, start)?);
    }
    let mut rings = Vec::with_capacity(shared.rings.len());
    for ((p, ring), at) in shared.rings.iter().enumerate().zip(starts) {
        let group =
            memq_ring::Group::new(ring, at).map_err(|e| ring_error(e, p, ring.capacity()))?;
        let slot = ring.waiters().lists.lock().add_group();
        rings.push(RingGroup {
            unreported: AtomicU64::new(group.missed()),
            group,
            slot,
            partition: p as u32,
        });
    }
    Ok(GroupShared {
        rings,
        ..GroupShared::new(name, Vec::new(), None, None)
    })
}

/// Makes explicit-ack group `name` at `start` on a topic on the ring: a hold on every
/// partition's ring, and the group's lease state in each partition's log, as on the
/// locked log (under the partition's lock: the ack visits run there), starting where
/// the hold asked to (an offset already gone is a lag its first visit reports). Every
/// partition is checked first, so that a failure leaves nothing attached, and `acks` (the
/// user's settings) is taken only once nothing can fail: the caller drops a failed
/// group's settings after the registry's lock (they may hold the user's clock).
pub(super) fn create_acked_group<T>(
    shared: &Shared<T>,
    name: &str,
    start: StartAt,
    acks: &mut Option<crate::ack::AckSettings<T>>,
) -> Result<GroupShared<T>, Error> {
    let mut starts = Vec::with_capacity(shared.rings.len());
    for (p, ring) in shared.rings.iter().enumerate() {
        starts.push(ring_start(ring, p, start)?);
    }
    let mut holds = Vec::with_capacity(shared.rings.len());
    for ((p, ring), at) in shared.rings.iter().enumerate().zip(starts) {
        let hold = memq_ring::Hold::new(ring, at).map_err(|e| ring_error(e, p, ring.capacity()))?;
        holds.push(hold);
    }
    let acks = acks.take();
    let mut ids = Vec::with_capacity(shared.rings.len());
    for (part, hold) in shared.parts.iter().zip(&holds) {
        let pos = hold.position() - hold.missed();
        let id = part
            .log
            .lock()
            .add_group(pos, acks.as_ref().map(|a| a.part(shared.clock.as_ref())));
        ids.push(id);
    }
    shared.explicit_on_ring.fetch_add(1, Ordering::SeqCst);
    Ok(GroupShared {
        holds: holds.into_iter().map(|h| Mutex::new(Some(h))).collect(),
        ..GroupShared::new(name, ids, acks, None)
    })
}

/// After the locked log's part of deleting an explicit-ack group on a topic on the
/// ring: lets go of its holds on the rings (the publishers they held back are woken).
pub(super) fn release_holds<T>(shared: &Shared<T>, group: &GroupShared<T>) {
    if group.holds.is_empty() {
        return;
    }
    for hold in &group.holds {
        // Dropped after the mutex: the ring wakes writers as the hold detaches.
        let gone = hold.lock().take();
        drop(gone);
    }
    shared.explicit_on_ring.fetch_sub(1, Ordering::SeqCst);
}

/// Deletes a group on the ring (marked deleted, its members woken to see it): its
/// positions stop holding publishers back at once, and its members waiting on any
/// partition are woken to find it gone.
pub(super) fn delete<T>(group: &GroupShared<T>) {
    for rg in &group.rings {
        rg.group.detach();
        let waiters = rg.ring().waiters().lists.lock().remove_group(rg.slot);
        if let Some(mut waiters) = waiters {
            let mut wl = WakeList::new();
            while waiters.notify_all(&mut wl) {
                wl.wake_all();
            }
            wl.wake_all();
        }
    }
}

/// Wakes every member of the group waiting on the ring partition of `rg` (a rebalance, a
/// deletion, a drain).
pub(super) fn wake_members<T>(rg: &RingGroup<T>) {
    let mut wl = WakeList::new();
    loop {
        let more = match rg.ring().waiters().lists.lock().group(rg.slot) {
            Some(g) => g.waiters.notify_all(&mut wl),
            None => false,
        };
        wl.wake_all();
        if !more {
            break;
        }
    }
}

/// Ends a member's registration `key` on the ring partition of `rg` for a wait that
/// ended without taking a message there: a wake-up that reached it goes on to the next
/// waiting member while messages are left.
pub(super) fn pass_on<T>(
    rg: &RingGroup<T>,
    key: &mut Option<WaitKey>,
    member: &mut RingMember<T>,
    spent: &mut SpentWakers,
) {
    member.registered = false;
    let mut wl = WakeList::new();
    {
        let mut lists = rg.ring().waiters().lists.lock();
        if let Some(g) = lists.group(rg.slot) {
            let more = rg.group.position() < rg.ring().end();
            pass_on_wakeup(&mut g.waiters, *key, more, spent, &mut wl);
        }
    }
    wl.wake_all();
}

impl<T> Consumer<T> {
    /// [`Consumer::poll_with`] on a topic on the ring: the round over the assigned
    /// partitions, each visited by [`Consumer::visit_ring`].
    #[inline(never)]
    pub(super) fn poll_ring<A: Accept<T>>(
        &mut self,
        out: Received<'_, T>,
        waker: Option<&Waker>,
        accept: &mut A,
    ) -> Poll<Result<Taken<T>, RecvError>>
    where
        T: Clone,
    {
        self.round(out, waker, accept, Self::visit_ring)
    }

    /// Visits ring partition `p`: reports a gap first, then takes into `out` until it is
    /// full or the partition has nothing more, settling this member's registration there,
    /// or registers `waker` if the poll has nothing yet.
    fn visit_ring<A: Accept<T>>(
        &mut self,
        p: usize,
        out: &mut Received<'_, T>,
        waker: Option<&Waker>,
        accept: &mut A,
    ) -> Visit
    where
        T: Clone,
    {
        let before = out.got;
        loop {
            let Self {
                group,
                ring,
                keys,
                as_stream,
                waiting,
                ..
            } = &mut *self;
            let rg = &group.rings[p];
            let rm = &mut ring[p];
            if let Some(gap) = report_gap(rg, rm, keys[p], out) {
                return gap;
            }
            let closed = match take(rg, rm, &mut keys[p], out, accept) {
                Ok(closed) => closed,
                Err(ended) => return ended,
            };
            if out.got > before {
                rm.settle(keys[p]);
                return Visit::Took {
                    finished: rg.finished(),
                };
            }
            if closed {
                // A registration made just before the close (or the deletion) is not
                // needed any more.
                rm.settle(keys[p]);
                return if rg.group.is_detached() {
                    Visit::Deleted
                } else {
                    Visit::Closed
                };
            }
            let (0, Some(w)) = (out.got, waker) else {
                return Visit::Open;
            };
            {
                let mut spent = SpentWakers::new();
                let mut lists = rg.ring().waiters().lists.lock();
                let Some(g) = lists.group(rg.slot) else {
                    return Visit::Deleted;
                };
                register(&mut g.waiters, &mut keys[p], w, *as_stream, &mut spent);
            }
            rm.registered = true;
            // Cancelled by whatever this poll returns (see the locked visit).
            *waiting = true;
            if rm.member.prepare_wait() {
                return Visit::Open;
            }
            // Something arrived (or the partition closed) meanwhile: look again.
        }
    }
}

/// A gap the group's start missed, or one a member's batch met after it had taken
/// messages, reported (and counted) now by whichever member looks first: before any
/// message of the poll, never after one.
fn report_gap<T>(
    rg: &RingGroup<T>,
    rm: &mut RingMember<T>,
    key: Option<WaitKey>,
    out: &Received<'_, T>,
) -> Option<Visit> {
    if rg.unreported.load(Ordering::Acquire) == 0 {
        return None;
    }
    if out.got > 0 {
        return Some(Visit::GapAhead);
    }
    let missed = rg.unreported.swap(0, Ordering::AcqRel);
    if missed == 0 {
        return None;
    }
    // What was evicted since joins the same report, as on the locked log, where the
    // group's position stays before the gap until it is told.
    let missed = missed + rm.member.skip_evicted();
    rm.counts.lagged(missed);
    rm.settle(key);
    Some(Visit::Lagged {
        missed,
        finished: rg.finished(),
    })
}

/// Takes from the group's position on the ring into `out` until it is full or the
/// partition has nothing more now: `Ok(true)` if it found the partition closed (or the
/// group detached), `Ok(false)` if it ran out, and the visit's end if a message was
/// declined or a gap met.
fn take<T: Clone, A: Accept<T>>(
    rg: &RingGroup<T>,
    rm: &mut RingMember<T>,
    key: &mut Option<WaitKey>,
    out: &mut Received<'_, T>,
    accept: &mut A,
) -> Result<bool, Visit> {
    while !out.is_full() {
        // The predicate of `recv_if` is asked about the poll's first message only.
        let got = if A::ALL || out.got > 0 {
            rm.member.try_recv().map(Some)
        } else {
            rm.member.try_recv_if(|v| accept.accept(v))
        };
        match got {
            Ok(Some((offset, value))) => {
                out.push(Message {
                    offset,
                    partition: rg.partition,
                    timestamp: None,
                    value,
                });
                rm.counts.delivered();
            }
            Ok(None) => {
                // Declined: left where it was, nothing counted; a wake-up this member
                // used goes on, since the message waits.
                let mut spent = SpentWakers::new();
                pass_on(rg, key, rm, &mut spent);
                return Err(Visit::Declined);
            }
            Err(RingRecvError::Lagged(missed)) => {
                rm.settle(*key);
                if out.got > 0 {
                    // The ring moved the group's position past the gap: the group's next
                    // receive there reports it (whichever member makes it), and until
                    // then its position is before the gap, as on the locked log.
                    rg.unreported.fetch_add(missed, Ordering::AcqRel);
                    return Err(Visit::GapAhead);
                }
                rm.counts.lagged(missed);
                return Err(Visit::Lagged {
                    missed,
                    finished: rg.finished(),
                });
            }
            Err(RingRecvError::Closed) => return Ok(true),
            Err(RingRecvError::Empty) => return Ok(false),
        }
    }
    Ok(false)
}
