//! A group's shared state: its membership, its ids in the partitions' logs, the pool of
//! messages its members share on a one-partition topic, the assignment of partitions to
//! members, and the wake-ups that reach members of the group.
//!
//! Layer: above the log and the wait lists; the members ([`super::consumer`]), the
//! registry ([`super::registry`]) and the explicit-ack layer read it.

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use crate::log::{Entry, REVOKED};
use crate::partition::GroupId;
use crate::sync::{Arc, AtomicUsize, Mutex, Ordering, Padded};
use crate::wait::WaiterList;

/// A group's membership, guarded by the group's own lock.
#[derive(Debug)]
pub(super) struct Members {
    pub(super) next_id: u64,
    /// Member ids in join order.
    pub(super) list: Vec<u64>,
    /// Members with no partition assigned, waiting for a rebalance.
    pub(super) idle: WaiterList,
    pub(super) deleted: bool,
}

/// State of one group shared by its members and the topic's registry.
pub(crate) struct GroupShared<T> {
    pub(crate) name: String,
    /// The group's id in each partition's log, indexed by partition.
    pub(crate) ids: Vec<GroupId>,
    pub(super) members: Mutex<Members>,
    /// Bumped on every membership change; members compare it to refresh assignments.
    pub(super) epoch: AtomicUsize,
    /// Settings of an explicit-ack group; `None` for automatic commit.
    pub(crate) acks: Option<crate::ack::AckSettings<T>>,
    /// Messages fetched ahead for all members, on a one-partition topic (see [`Pool`]).
    pub(super) pool: Option<Mutex<Pool<T>>>,
    /// The group's position on each partition of a topic on the ring engine, indexed by
    /// partition (empty on the locked log, where `ids` holds it).
    #[cfg(target_has_atomic = "64")]
    pub(crate) rings: Vec<RingGroup<T>>,
    /// An explicit-ack group's hold on each partition's ring (the messages from its
    /// lowest unsettled one on), indexed by partition, on a topic on the ring engine;
    /// `None` once the group is deleted. Taken under the partition's lock (its lease
    /// state is there). Empty otherwise.
    #[cfg(target_has_atomic = "64")]
    pub(crate) holds: Vec<Mutex<Option<memq_ring::Hold<T, crate::log::ring::RingWaits>>>>,
}

/// A group's position on one ring partition: its claim cursor in the ring, where each
/// member takes the next offset with one compare-and-swap, and its slot in the
/// partition's wait lists (its waiting members and their counters).
#[cfg(target_has_atomic = "64")]
pub(crate) struct RingGroup<T> {
    pub(crate) group: memq_ring::Group<T, crate::log::ring::RingWaits>,
    /// The group's id in the partition's wait lists.
    pub(crate) slot: u64,
    /// The partition.
    pub(crate) partition: u32,
    /// Messages the group missed there and was not told yet: those a start at an offset
    /// already gone missed, and a gap a member's batch met after it had taken messages.
    /// Reported once, as `Lagged`, by the next receive of a member there (the ring moved
    /// the position on already; the group's position as the user sees it is before
    /// them until then).
    pub(crate) unreported: crate::sync::AtomicU64,
}

#[cfg(target_has_atomic = "64")]
impl<T> RingGroup<T> {
    /// The group's position as the user sees it: where it started while what it missed
    /// there is not reported yet.
    pub(crate) fn position(&self) -> u64 {
        self.group.position() - self.unreported.load(Ordering::Acquire)
    }

    /// The partition's ring.
    pub(crate) fn ring(&self) -> &crate::log::ring::PartRing<T> {
        self.group.ring()
    }
}

/// Messages fetched ahead for every member of an automatic-commit group on a
/// one-partition topic, where all members compete for the same messages.
///
/// A member that finds the pool empty reads under the partition's lock and fetches up to
/// [`READ_AHEAD`](super::pooled::READ_AHEAD) more into the pool; members then take from the
/// pool under its own lock, without the partition's, so that publishers and members no
/// longer take turns on one lock for every message, and `T::clone` runs once per batch in
/// the partition's critical section instead of once per receive. Taking from the pool is in
/// offset order, so the members see the messages in the same order as without it, each
/// member's in increasing offsets, and each message goes to exactly one member.
///
/// The cell, attached to the group's cursor, counts what is in the pool: the group's
/// committed position, its lag, the delivered counts and `Block` retention count only
/// what was handed to a member (as with a subscriber's read-ahead). A member takes a
/// message by storing the pool's length after the take, and deleting the group swaps the cell
/// for `REVOKED`, so a message is handed over only while the group exists. Every write
/// to the cell (a take, a refill, the deletion) is made with the pool's lock held, so
/// the store cannot overwrite a `REVOKED`; the partition's lock holders only read it.
///
/// Lock order: the pool, then the partition. A member registers to wait only with both
/// held and the pool empty, and a member that fills the pool wakes every waiting member
/// with both held, so no member sleeps while the pool has messages.
pub(super) struct Pool<T> {
    pub(super) buf: VecDeque<Entry<T>>,
    pub(super) cell: Arc<Padded<AtomicUsize>>,
    /// Refills so far: a member's memory of acted-on wake positions lasts one refill
    /// (see [`Shared::ahead_consumed`]; on 32-bit targets encoded positions repeat).
    pub(super) refills: usize,
}

impl<T> Pool<T> {
    /// Takes the next pooled message; `Err` with what was left once the group was
    /// deleted (to be dropped after the pool's lock is released).
    ///
    /// The count stored is the pool's own length after the take: the cell cannot say
    /// there is a message the pool does not hold, or the other way round.
    pub(super) fn take(&mut self) -> Result<Option<Entry<T>>, VecDeque<Entry<T>>> {
        // The caller holds the pool's lock (`&mut self`), as every writer of the cell
        // does: nothing changes it between this load and the store.
        if self.cell.0.load(Ordering::Acquire) == REVOKED {
            return Err(core::mem::take(&mut self.buf));
        }
        let Some(e) = self.buf.pop_front() else {
            return Ok(None);
        };
        self.cell.0.store(self.buf.len(), Ordering::Release);
        Ok(Some(e))
    }

    /// The message [`Pool::take`] would take next, left in the pool; `None` if the pool
    /// is empty or the group was deleted.
    pub(super) fn front(&self) -> Option<&Entry<T>> {
        match self.cell.0.load(Ordering::Acquire) {
            REVOKED => None,
            _ => self.buf.front(),
        }
    }
}

impl<T> fmt::Debug for GroupShared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Group")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<T> GroupShared<T> {
    /// A group with no members yet, its ids in the partitions' logs (`ids`, empty for a
    /// plain group on the ring), its settings if it acknowledges explicitly, and its
    /// pool if it has one. A group on the ring sets `rings` or `holds` after this.
    pub(super) fn new(
        name: &str,
        ids: Vec<GroupId>,
        acks: Option<crate::ack::AckSettings<T>>,
        pool: Option<Mutex<Pool<T>>>,
    ) -> Self {
        GroupShared {
            name: name.into(),
            ids,
            members: Mutex::new(Members {
                next_id: 0,
                list: Vec::new(),
                idle: WaiterList::new(),
                deleted: false,
            }),
            epoch: AtomicUsize::new(0),
            acks,
            pool,
            #[cfg(target_has_atomic = "64")]
            rings: Vec::new(),
            #[cfg(target_has_atomic = "64")]
            holds: Vec::new(),
        }
    }

    pub(crate) fn member_count(&self) -> usize {
        self.members.lock().list.len()
    }
}

/// The partitions member `id` reads, given the membership and the partition count.
pub(super) fn assignment(list: &[u64], id: u64, partitions: usize) -> Vec<usize> {
    let Some(index) = list.iter().position(|&m| m == id) else {
        return Vec::new();
    };
    if partitions == 1 {
        return alloc::vec![0];
    }
    (0..partitions)
        .filter(|p| p % list.len() == index)
        .collect()
}
