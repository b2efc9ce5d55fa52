//! Groups: members that share one position, each message to exactly one of them.
//!
//! A member clones offset `c`, then claims it with a CAS on the group's position (a
//! member that loses the CAS to another drops its clone and tries the next offset; one
//! whose clone panics has claimed nothing). Once another member's CAS moved the group's
//! position past `c`, that position no longer holds writers back from `c`, so the member
//! first publishes `c` as its hazard, an entry among the readers' positions:
//! it stores the hazard, then checks that the group's position is still `c` (both
//! sequentially consistent). A rescan loads the groups' positions before the hazards, so
//! one that sees the position past `c` sees the hazard too, and the floor stays at most
//! `c` until the member clears it.
//!
//! In a ring that drops the oldest, the hazard is a pin (see the ring's notes): the member
//! pins `c`, and if writers have claimed past `c + capacity` it moves the group's position
//! to the oldest message held (a CAS: one member does it) and reports the gap.

use core::fmt;

use crate::reader::TryRecvError;
use crate::ring::{Ring, RingError, SlotState, Start, Waiters, DETACHED, RESERVED};
use crate::sync::{Arc, Ordering};

struct Shared<T, W: Waiters> {
    ring: Arc<Ring<T, W>>,
    claim: usize,
}

impl<T, W: Waiters> Drop for Shared<T, W> {
    fn drop(&mut self) {
        self.ring.detach_reader(self.ring.claim_entry(self.claim));
    }
}

/// A group reading a [`Ring`]: its members ([`Member`]) share its position. It is
/// attached as long as the group or one of its members lives, or until
/// [`Group::detach`].
pub struct Group<T, W: Waiters = crate::NoWaiters> {
    shared: Arc<Shared<T, W>>,
    /// Messages between the start asked for and the position given (gone already).
    missed: u64,
}

impl<T, W: Waiters> fmt::Debug for Group<T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Group")
            .field("position", &self.position())
            .finish_non_exhaustive()
    }
}

impl<T, W: Waiters> Group<T, W> {
    /// Attaches a group to `ring` at `start` (clamped to the oldest message held).
    pub fn new(ring: &Arc<Ring<T, W>>, start: Start) -> Result<Self, RingError> {
        let (claim, at) = ring.attach_group(start)?;
        Ok(Self {
            shared: Arc::new(Shared {
                ring: ring.clone(),
                claim,
            }),
            missed: at.missed,
        })
    }

    /// How many messages the group missed when it was made: between the offset its
    /// start asked for and the oldest one the ring still had (0 unless it asked for an
    /// offset already gone). memq reports them to the group as lagged.
    pub fn missed(&self) -> u64 {
        self.missed
    }

    /// The ring the group reads.
    pub fn ring(&self) -> &Arc<Ring<T, W>> {
        &self.shared.ring
    }

    /// The offset of the next message the group hands out (once detached: where it
    /// stopped).
    pub fn position(&self) -> u64 {
        self.shared
            .ring
            .claim_entry(self.shared.claim)
            .load(Ordering::Acquire)
            & !(RESERVED | DETACHED)
    }

    /// Detaches the group from the ring while its members may live on, as memq does
    /// when a group is deleted: its position no longer holds writers back, and every
    /// member's receive, from now on, returns [`TryRecvError::Closed`] (a member in the
    /// middle of a receive finishes it, holding the one offset it reads until then).
    /// Waiting writers and readers are woken. A member made after this is closed too.
    /// Detaching twice does nothing more.
    ///
    /// In a ring whose receives move messages out ([`RingConfig::take`](crate::RingConfig::take)),
    /// another reader or group may attach only once this group and its members are
    /// dropped.
    pub fn detach(&self) {
        let ring = &self.shared.ring;
        ring.detach_group(ring.claim_entry(self.shared.claim));
    }

    /// Whether the group was detached ([`Group::detach`]).
    pub fn is_detached(&self) -> bool {
        self.shared
            .ring
            .claim_entry(self.shared.claim)
            .load(Ordering::Acquire)
            & DETACHED
            != 0
    }

    /// A new member.
    pub fn member(&self) -> Result<Member<T, W>, RingError> {
        let hazard = self.shared.ring.attach_member()?;
        Ok(Member {
            shared: self.shared.clone(),
            hazard,
        })
    }
}

/// One member of a [`Group`]: receives the messages no other member received.
pub struct Member<T, W: Waiters = crate::NoWaiters> {
    shared: Arc<Shared<T, W>>,
    hazard: usize,
}

impl<T, W: Waiters> fmt::Debug for Member<T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Member").finish_non_exhaustive()
    }
}

/// Clears a member's hazard when its receive ends, a panicking clone included, and
/// looks for writers it held back (see `Ring::hazard_cleared`; a receive that claimed
/// cleared it already, in `Ring::member_moved`).
struct Hazard<'a, T, W: Waiters> {
    ring: &'a Ring<T, W>,
    hazard: &'a crate::sync::AtomicU64,
    claim: &'a crate::sync::AtomicU64,
}

impl<T, W: Waiters> Drop for Hazard<'_, T, W> {
    fn drop(&mut self) {
        self.ring.hazard_cleared(self.hazard, self.claim);
    }
}

/// Undoes a reservation of offset `at` when dropped: stores `to` (`at`, so that the
/// message stays the group's next, or the one after it), detached still if the group
/// was detached meanwhile (the one change another thread makes to a reserved position).
struct Reservation<'a> {
    claim: &'a crate::sync::AtomicU64,
    at: u64,
    to: u64,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self
            .claim
            .compare_exchange(
                self.at | RESERVED,
                self.to,
                Ordering::SeqCst,
                Ordering::Relaxed,
            )
            .is_err()
        {
            self.claim.store(self.to | DETACHED, Ordering::SeqCst);
        }
    }
}

impl<T, W: Waiters> Member<T, W> {
    /// Protects the group's next offset with this member's hazard (or pin) and returns
    /// it if it is published; else why not (`Lagged` when writers overtook the group in
    /// a ring that drops the oldest, which moved it on; `Closed` once the ring is closed
    /// and drained, or the group detached). Waits out another member's reservation
    /// ([`RESERVED`]), which lasts a predicate and a clone.
    #[inline]
    fn next_ready(
        ring: &Ring<T, W>,
        claim: &crate::sync::AtomicU64,
        hazard: &crate::sync::AtomicU64,
    ) -> Result<u64, TryRecvError> {
        let mut spins = 0;
        loop {
            let c = claim.load(Ordering::Acquire);
            if c & DETACHED != 0 {
                // A close for this member: pass on a wake-up it may have been given.
                ring.pass_wake_on();
                return Err(TryRecvError::Closed);
            }
            if c & RESERVED != 0 {
                crate::sync::pause(&mut spins);
                continue;
            }
            if ring.drops_oldest() {
                // A pin (see the ring's notes): either the writer that overwrites `c`
                // waits for it, or the group moves on past what was overwritten.
                if let Some(to) = ring.pin(hazard, c) {
                    if claim
                        .compare_exchange(c, to, Ordering::SeqCst, Ordering::Relaxed)
                        .is_ok()
                    {
                        ring.member_moved(hazard, claim);
                        return Err(TryRecvError::Lagged(to - c));
                    }
                    continue;
                }
            } else {
                hazard.store(c, Ordering::SeqCst);
                // The other half of a rescan's claim loads then hazard loads.
                crate::sync::loom_sc_fence();
            }
            if claim.load(Ordering::SeqCst) != c {
                continue;
            }
            if !ring.is_ready(c) {
                return Err(if ring.finished_at(c) {
                    ring.pass_wake_on();
                    TryRecvError::Closed
                } else {
                    TryRecvError::Empty
                });
            }
            return Ok(c);
        }
    }

    /// The next message of the group and its offset, if one is published.
    ///
    /// A `T::clone` that panics loses nothing: the message stays the group's next.
    #[inline]
    pub fn try_recv(&mut self) -> Result<(u64, T), TryRecvError>
    where
        T: Clone,
    {
        let ring = &self.shared.ring;
        let claim = ring.claim_entry(self.shared.claim);
        let hazard = ring.cursor(self.hazard);
        let _clear = Hazard {
            ring,
            hazard,
            claim,
        };
        loop {
            let c = Self::next_ready(ring, claim, hazard)?;
            if ring.takes() {
                // A move cannot panic, and only the member whose claim succeeded may make
                // it: claim, then move.
                if claim
                    .compare_exchange(c, c + 1, Ordering::SeqCst, Ordering::Relaxed)
                    .is_err()
                {
                    continue;
                }
                let read = ring.read_at(c);
                ring.member_moved(hazard, claim);
                return match read {
                    SlotState::Ready(value) => Ok((c, value)),
                    // Ruled out by the hazard: counted, not lost, if it ever happened.
                    SlotState::Empty | SlotState::Gone => Err(TryRecvError::Lagged(1)),
                };
            }
            // Clone, then claim: a clone that panics leaves the message to the group's
            // next receive, and a member that loses the claim to another drops its clone.
            // The hazard keeps writers off `c` throughout.
            let value = match ring.read_at(c) {
                SlotState::Ready(value) => Some(value),
                // Ruled out by the hazard and by `is_ready`: claimed and counted, not
                // lost, if it ever happened.
                SlotState::Empty | SlotState::Gone => None,
            };
            if claim
                .compare_exchange(c, c + 1, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
            {
                ring.member_moved(hazard, claim);
                return value.map(|v| (c, v)).ok_or(TryRecvError::Lagged(1));
            }
        }
    }

    /// The group's next message and its offset if `accept` takes it: `Ok(None)` if it
    /// declines, and then the message stays the group's next (for any member's next
    /// receive). `accept` is asked at most once, on a reference to the message in the
    /// ring (no clone unless it takes it).
    ///
    /// While `accept` runs the member *reserves* the group's position: the group's other
    /// members wait for it (a predicate should be short, as memq's `recv_if` asks). A
    /// panic in `accept` or in the clone leaves the message the group's next.
    pub fn try_recv_if(
        &mut self,
        accept: impl FnOnce(&T) -> bool,
    ) -> Result<Option<(u64, T)>, TryRecvError>
    where
        T: Clone,
    {
        let ring = &self.shared.ring;
        let claim = ring.claim_entry(self.shared.claim);
        let hazard = ring.cursor(self.hazard);
        let _clear = Hazard {
            ring,
            hazard,
            claim,
        };
        loop {
            let c = Self::next_ready(ring, claim, hazard)?;
            if claim
                .compare_exchange(c, c | RESERVED, Ordering::SeqCst, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            // Stores `c` back if `accept` or the clone panics, or `accept` declines.
            let mut reservation = Reservation {
                claim,
                at: c,
                to: c,
            };
            if ring.peek(c, accept) != Some(true) {
                drop(reservation);
                // Another waiting member may take what this one declined.
                ring.pass_wake_on();
                return Ok(None);
            }
            let read = ring.read_at(c);
            reservation.to = c + 1;
            drop(reservation);
            ring.member_moved(hazard, claim);
            return match read {
                SlotState::Ready(value) => Ok(Some((c, value))),
                // Ruled out by the hazard and the reservation: counted, not lost.
                SlotState::Empty | SlotState::Gone => Err(TryRecvError::Lagged(1)),
            };
        }
    }

    /// The ring read.
    pub fn ring(&self) -> &Arc<Ring<T, W>> {
        &self.shared.ring
    }

    /// In a ring that drops the oldest: moves the group's position past the messages
    /// writers evicted before any member took them, and returns how many (0 in other
    /// rings, if none were, or if another member moved it first). For a front that
    /// reports a gap it knows of already (the start's [`Group::missed`], or one a batch
    /// met after it had taken messages): what was evicted since joins the same report
    /// instead of making a second one.
    pub fn skip_evicted(&mut self) -> u64 {
        let ring = &self.shared.ring;
        if !ring.drops_oldest() {
            return 0;
        }
        let claim = ring.claim_entry(self.shared.claim);
        loop {
            let c = claim.load(Ordering::Acquire);
            if c & (RESERVED | DETACHED) != 0 {
                return 0;
            }
            let Some(to) = ring.overtaken(c) else {
                return 0;
            };
            if claim
                .compare_exchange(c, to, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
            {
                // As a member that moves past a gap while reading: wakes who may go on.
                ring.member_moved(ring.cursor(self.hazard), claim);
                return to - c;
            }
        }
    }

    /// For a front that parks members: as [`Reader::prepare_wait`](crate::Reader::prepare_wait).
    /// A member of a detached group never sleeps ([`Group::detach`]).
    pub fn prepare_wait(&self) -> bool {
        let ring = &self.shared.ring;
        let claim = ring.claim_entry(self.shared.claim);
        let c = claim.load(Ordering::SeqCst);
        // The second look at the mark comes after the readers' flag is set and fenced
        // (in `reader_may_sleep`): a detach that found the flag clear marked the group
        // before it, so this sees the mark.
        c & DETACHED == 0
            && ring.reader_may_sleep(c & !RESERVED)
            && claim.load(Ordering::SeqCst) & DETACHED == 0
    }
}

impl<T, W: Waiters> Drop for Member<T, W> {
    fn drop(&mut self) {
        let ring = &self.shared.ring;
        ring.detach(ring.cursor(self.hazard));
    }
}
