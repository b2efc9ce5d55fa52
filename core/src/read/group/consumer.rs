//! The member of a group ([`Consumer`]): its public receive methods, its assignment and
//! committed positions, its wait registrations (on its partitions' wait lists and on
//! the group's list of idle members), and leaving the group when dropped. The receive
//! paths themselves are in [`super::receive`] and [`super::pooled`].
//!
//! Layer: on the group's shared state ([`super::shared`]) and the partitions' logs.

use alloc::vec::Vec;
use core::fmt;
use core::task::{Poll, Waker};

use super::accept::TakeIf;
use super::futures::{GroupRecv, GroupRecvIf, GroupRecvMany};
use super::receive::pass_on_wakeup;
use super::shared::{assignment, GroupShared};
use super::wake::wake_idle;
use crate::error::{Error, TryRecvError, TryRecvIfError};
use crate::message::Message;
use crate::partition::Shared;
use crate::sync::{Arc, Ordering};
use crate::wait::{SpentWakers, WaitKey, WakeList};

/// A member of a consumer group: receives the messages of its assigned partitions that
/// no other member received.
///
/// Made by [`Topic::group`](crate::Topic::group). Dropping it leaves the group (its
/// partitions are rebalanced to the other members); the group and its position remain.
pub struct Consumer<T> {
    pub(crate) shared: Arc<Shared<T>>,
    pub(crate) group: Arc<GroupShared<T>>,
    pub(crate) id: u64,
    pub(super) epoch: usize,
    pub(crate) assigned: Vec<usize>,
    /// Wait registration per partition, indexed by partition.
    pub(crate) keys: Vec<Option<WaitKey>>,
    pub(super) idle_key: Option<WaitKey>,
    pub(crate) next: usize,
    pub(crate) waiting: bool,
    pub(super) deleted: bool,
    /// The last wake position this member took the lock for after taking from the
    /// group's pool (see [`Shared::ahead_consumed`]); 0 for none, and again with every
    /// refill of the pool (`Pool::refills` as of `pool_refill`).
    pub(super) pool_acted: usize,
    pub(super) pool_refill: usize,
    /// Set while the member is polled as a `Stream`: its wait registrations are then
    /// extra ones (see `WaiterList::register_extra`), since a dropped `next()` cannot
    /// cancel them.
    pub(super) as_stream: bool,
    /// Its readers of the group's positions, one per partition, on a topic on the ring
    /// engine (empty on the locked log).
    #[cfg(target_has_atomic = "64")]
    pub(super) ring: Vec<super::ring::RingMember<T>>,
}

// Nothing in a member is pinned.
impl<T> Unpin for Consumer<T> {}

impl<T> fmt::Debug for Consumer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("group", &self.group.name)
            .field("member", &self.id)
            .field("assigned", &self.assigned)
            .finish_non_exhaustive()
    }
}

impl<T> Consumer<T> {
    /// A new member `id` of `group`, which has just joined it; its assignment is read at
    /// its first receive.
    pub(super) fn new(shared: Arc<Shared<T>>, group: Arc<GroupShared<T>>, id: u64) -> Self {
        let partitions = shared.parts.len();
        Self {
            shared,
            group,
            id,
            epoch: usize::MAX,
            assigned: Vec::new(),
            keys: (0..partitions).map(|_| None).collect(),
            idle_key: None,
            next: 0,
            waiting: false,
            deleted: false,
            pool_acted: 0,
            pool_refill: 0,
            as_stream: false,
            #[cfg(target_has_atomic = "64")]
            ring: Vec::new(),
        }
    }

    /// The group's name.
    pub fn group_name(&self) -> &str {
        &self.group.name
    }

    /// The partitions assigned to this member now, by the group's current membership: a
    /// member that joined or left a moment ago has changed it already, and this member
    /// reads these partitions from its next receive on. Empty once the group is deleted,
    /// or while the group has more members than the topic has partitions and this one
    /// got none.
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// use memq::{StartAt, Topic, TopicConfig};
    ///
    /// let topic = Topic::<u32>::new(TopicConfig::new(8).partitions(2))?;
    /// let first = topic.group("g", StartAt::Earliest)?;
    /// assert_eq!(first.assignment(), [0, 1]);
    /// let second = topic.group("g", StartAt::Earliest)?;
    /// assert_eq!((first.assignment(), second.assignment()), (vec![0], vec![1]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn assignment(&self) -> Vec<u32> {
        let members = self.group.members.lock();
        if members.deleted {
            return Vec::new();
        }
        assignment(&members.list, self.id, self.shared.parts.len())
            .into_iter()
            .map(|p| p as u32)
            .collect()
    }

    /// The group's committed position (next offset to deliver) in `partition`.
    ///
    /// # Errors
    ///
    /// [`Error::PartitionOutOfRange`], or [`Error::UnknownGroup`] if it was deleted.
    pub fn committed(&self, partition: u32) -> Result<u64, Error> {
        let p = self.shared.check_partition(partition)?;
        #[cfg(target_has_atomic = "64")]
        if let Some(rg) = self.group.rings.get(p) {
            if rg.group.is_detached() {
                return Err(Error::UnknownGroup(self.group.name.clone()));
            }
            return Ok(rg.position());
        }
        let log = self.shared.parts[p].log.lock();
        match log.group_ref(self.group.ids[p]) {
            // An explicit-ack group's position in the log may be past an unacknowledged
            // message a TTL evicted; its committed position is not.
            Some(g) => Ok(g
                .acks
                .as_ref()
                .map_or_else(|| log.cursor(g.cursor), crate::ack::Acks::committed)),
            None => Err(Error::UnknownGroup(self.group.name.clone())),
        }
    }

    /// Whether the assignment this member last read still holds (no rebalance since).
    #[inline]
    pub(crate) fn assignment_current(&self) -> bool {
        self.group.epoch.load(Ordering::Acquire) == self.epoch
    }

    /// Re-reads the assignment after a rebalance; returns whether the group is deleted.
    #[inline]
    pub(crate) fn refresh(&mut self) -> bool {
        let epoch = self.group.epoch.load(Ordering::Acquire);
        if epoch == self.epoch {
            return self.deleted;
        }
        let (assigned, deleted) = {
            let members = self.group.members.lock();
            (
                assignment(&members.list, self.id, self.shared.parts.len()),
                members.deleted,
            )
        };
        // Leave the wait lists of partitions that moved to another member.
        for p in 0..self.keys.len() {
            if !assigned.contains(&p) && self.keys[p].is_some() {
                self.unregister(p);
            }
        }
        self.assigned = assigned;
        self.epoch = epoch;
        self.deleted = deleted;
        deleted
    }

    pub(super) fn unregister(&mut self, p: usize) {
        let mut spent = SpentWakers::new();
        let mut wl = WakeList::new();
        #[cfg(target_has_atomic = "64")]
        if let Some(rg) = self.group.rings.get(p) {
            let mut lists = rg.ring().waiters().lists.lock();
            match lists.group(rg.slot) {
                Some(g) => g.waiters.unregister(&mut self.keys[p], &mut wl, &mut spent),
                None => self.keys[p] = None,
            }
            if let Some(m) = self.ring.get_mut(p) {
                m.registered = false;
            }
            return;
        }
        let mut log = self.shared.parts[p].log.lock();
        let high = self.shared.ack_bounds(p, &log).high;
        if let Some(g) = log.group(self.group.ids[p]) {
            g.waiters.unregister(&mut self.keys[p], &mut wl, &mut spent);
            g.keep_watch(high, &mut wl);
        } else {
            self.keys[p] = None;
        }
    }

    /// Wakes every member of this group parked on partition `p`, for those a first
    /// [`WakeList`] could not hold.
    pub(super) fn wake_group_members(&self, p: usize) {
        self.shared.wake_group_waiters(&self.group, p);
    }

    /// Whether a receive may find something: members cannot tell without the lock, so
    /// always `true` (see `Subscriber::may_have_news`).
    #[cfg(feature = "std")]
    #[inline]
    pub(crate) fn may_have_news(&self) -> bool {
        true
    }

    /// Called by a member about to wait on its partitions, registered on each: if the
    /// assignment changed since it looked (a member joined or left), wakes it to look
    /// again. A rebalance wakes the waiters it finds, and this member may have registered
    /// only after that; the epoch is bumped before those wake-ups and read here after the
    /// registrations, under the same partition locks, so one of the two sees the other.
    pub(crate) fn recheck_assignment(&self, waker: &Waker) {
        if self.group.epoch.load(Ordering::Acquire) != self.epoch {
            waker.wake_by_ref();
        }
    }

    /// Parks a member that has nothing to read on its partitions until a rebalance or
    /// the group's drain; returns `true` if it should poll again at once.
    pub(crate) fn park_idle(&mut self, waker: &Waker) -> bool {
        let mut spent = SpentWakers::new();
        self.group
            .members
            .lock()
            .idle
            .register(&mut self.idle_key, waker, &mut spent);
        self.group.epoch.load(Ordering::Acquire) != self.epoch || self.group_done()
    }

    /// Whether this member's receives are over for good: the topic is closed and the
    /// whole group has drained (see [`Consumer::group_drained`]).
    pub(super) fn group_done(&self) -> bool {
        self.shared.is_closed() && self.group_drained()
    }

    /// Whether the group has delivered everything published on every partition.
    pub(crate) fn group_drained(&self) -> bool {
        #[cfg(target_has_atomic = "64")]
        if !self.group.rings.is_empty() {
            return self
                .group
                .rings
                .iter()
                .all(|rg| rg.group.is_detached() || rg.position() >= rg.ring().end());
        }
        self.shared.parts.iter().enumerate().all(|(p, part)| {
            let log = part.log.lock();
            let high = self.shared.ack_bounds(p, &log).high;
            log.group_ref(self.group.ids[p])
                .is_none_or(|g| match &g.acks {
                    None => log.cursor(g.cursor) >= high,
                    Some(a) => a.next >= high && a.unacked.is_empty(),
                })
        })
    }

    /// Wakes members waiting for work elsewhere in the group (see
    /// [`Consumer::wait_for_group`]).
    pub(crate) fn wake_idle(&self) {
        wake_idle(&self.group);
    }

    /// Forgets the registrations of a wait that ended (served on another partition, or
    /// abandoned), passing unconsumed wake-ups on to other members.
    #[inline]
    pub(crate) fn cancel_wait(&mut self) {
        self.cancel_wait_except(None);
    }

    /// [`Consumer::cancel_wait`] for a poll that already settled its registration on
    /// partition `settled` under that partition's lock: that lock is not taken again
    /// (members that wait between messages would otherwise lock twice per message).
    #[inline]
    pub(super) fn cancel_wait_except(&mut self, settled: Option<usize>) {
        // Inline, so that a poll that did not wait pays one test.
        if self.waiting {
            self.end_registrations(settled);
        }
    }

    /// [`Consumer::cancel_wait_except`] for a member that was waiting.
    fn end_registrations(&mut self, settled: Option<usize>) {
        self.waiting = false;
        let mut spent = SpentWakers::new();
        if self.idle_key.is_some() {
            self.group
                .members
                .lock()
                .idle
                .settle(self.idle_key, &mut spent);
        }
        for p in 0..self.keys.len() {
            #[cfg(target_has_atomic = "64")]
            if let Some(rg) = self.group.rings.get(p) {
                if self.keys[p].is_some() && settled != Some(p) {
                    super::ring::pass_on(rg, &mut self.keys[p], &mut self.ring[p], &mut spent);
                }
                continue;
            }
            if self.keys[p].is_some() && settled != Some(p) {
                let mut wl = WakeList::new();
                let mut log = self.shared.parts[p].log.lock();
                let high = self.shared.ack_bounds(p, &log).high;
                if let Some(g) = log.group(self.group.ids[p]) {
                    pass_on_wakeup(&mut g.waiters, self.keys[p], true, &mut spent, &mut wl);
                    g.keep_watch(high, &mut wl);
                }
            }
        }
    }

    /// Receives the next message for this member, waiting for one if needed.
    ///
    /// # Errors
    ///
    /// [`RecvError::Lagged`](crate::RecvError::Lagged) if the group fell behind the
    /// retained window (policy `DropOldest` or TTL);
    /// [`RecvError::Closed`](crate::RecvError::Closed) when the topic is closed and the
    /// whole group has drained (every partition read to its end, not only this member's: a
    /// rebalance may still hand it a partition with messages left), or the group was
    /// deleted.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a message is taken only in the poll that returns it, and if the
    /// future is dropped after being woken for a message, the wake-up passes to another
    /// waiting member.
    #[inline]
    pub fn recv(&mut self) -> GroupRecv<'_, T> {
        GroupRecv { consumer: self }
    }

    /// Receives the next message if one is available now.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if there is none; otherwise as [`Consumer::recv`].
    pub fn try_recv(&mut self) -> Result<Message<T>, TryRecvError>
    where
        T: Clone,
    {
        match self.poll_inner(None, 1, None) {
            Poll::Ready(Ok((_, Some(m)))) => Ok(m),
            Poll::Ready(Ok((_, None))) | Poll::Pending => Err(TryRecvError::Empty),
            Poll::Ready(Err(e)) => Err(e.into()),
        }
    }

    /// Receives the next message for this member if one is available now and `f`
    /// returns `true` for its value. If `f` returns `false` the message is not taken: it
    /// stays exactly where it was, next in line for the next receive of any member (this
    /// one or another), and nothing shows that it was looked at (the group's position,
    /// its `delivered` count, `Block` room and stats are unchanged).
    ///
    /// For a caller that can take only some messages: a fixed-size buffer (`f` compares
    /// the length, and can note it for the caller), a filter that hands the rest to
    /// other members. `f` is called at most once, and only when there is a message. It
    /// runs inside the critical section that holds the message (the partition's, or the
    /// group's shared pool's), as `T::clone` does: keep it to a look at the value, and
    /// never call into the same topic from it.
    ///
    /// # Errors
    ///
    /// [`TryRecvIfError::Declined`] if `f` declined the next message;
    /// [`TryRecvIfError::Empty`] if there is none; otherwise as [`Consumer::recv`]
    /// (`Lagged` and `Closed` are reported before any message is shown to `f`).
    ///
    /// # Panics
    ///
    /// If `f` panics; the message is then left where it was, as if declined.
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// use memq::{StartAt, Topic, TryRecvIfError};
    ///
    /// let topic = Topic::with_capacity(16)?;
    /// let mut small = topic.group("workers", StartAt::Earliest)?;
    /// let mut any = topic.group("workers", StartAt::Earliest)?;
    /// topic.try_publish(vec![0u8; 100])?;
    /// let mut needed = 0;
    /// let fits = |v: &Vec<u8>| {
    ///     needed = v.len();
    ///     v.len() <= 64
    /// };
    /// assert_eq!(small.try_recv_if(fits), Err(TryRecvIfError::Declined));
    /// assert_eq!(needed, 100);
    /// // Still the group's: the next receive of any member gets it.
    /// assert_eq!(any.try_recv()?.value().len(), 100);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_recv_if(&mut self, f: impl FnOnce(&T) -> bool) -> Result<Message<T>, TryRecvIfError>
    where
        T: Clone,
    {
        let mut accept = TakeIf::new(f);
        match self.poll_with(None, 1, None, &mut accept) {
            Poll::Ready(Ok((_, Some(m)))) => Ok(m),
            Poll::Ready(Ok((_, None))) if accept.declined => Err(TryRecvIfError::Declined),
            Poll::Ready(Ok((_, None))) | Poll::Pending => Err(TryRecvIfError::Empty),
            Poll::Ready(Err(e)) => Err(e.into()),
        }
    }

    /// Waits for the next message for this member, then takes it if `f` returns `true` for
    /// its value, as [`Consumer::try_recv_if`]: if `f` returns `false` the future completes
    /// with [`RecvIfError::Declined`](crate::RecvIfError::Declined) and the message stays
    /// in the group, exactly where it was, for the next receive of any member. `f` is
    /// called at most once, inside the critical section that holds the message (see
    /// [`Consumer::try_recv_if`]).
    ///
    /// # Errors
    ///
    /// [`RecvIfError::Declined`](crate::RecvIfError::Declined) if `f` declined the message;
    /// otherwise as [`Consumer::recv`].
    ///
    /// # Panics
    ///
    /// If `f` panics; the message is then left where it was, as if declined.
    ///
    /// # Cancel safety
    ///
    /// As [`Consumer::recv`]. A member that was woken for a message and declines it
    /// passes the wake-up on to another waiting member, as a dropped future does, so no
    /// member sleeps while the declined message waits.
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// # use futures_executor::block_on;
    /// use memq::{RecvIfError, StartAt, Topic};
    ///
    /// let topic = Topic::with_capacity(16)?;
    /// let mut member = topic.group("workers", StartAt::Earliest)?;
    /// topic.try_publish("a long message")?;
    /// topic.try_publish("short")?;
    /// let fits = |v: &&str| v.len() <= 8;
    /// assert_eq!(block_on(member.recv_if(fits)), Err(RecvIfError::Declined));
    /// // The long one is still next: a receive that can take it gets it first.
    /// assert_eq!(block_on(member.recv())?.into_value(), "a long message");
    /// assert_eq!(block_on(member.recv_if(fits))?.into_value(), "short");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recv_if<F: FnOnce(&T) -> bool>(&mut self, f: F) -> GroupRecvIf<'_, T, F> {
        GroupRecvIf {
            consumer: self,
            accept: TakeIf::new(f),
        }
    }

    /// Waits for at least one message, then appends up to `limit` to `buf`. Returns
    /// `Ok(0)` only when closed and drained (or `limit` is 0).
    ///
    /// # Errors
    ///
    /// As [`Consumer::recv`].
    ///
    /// # Cancel safety
    ///
    /// As [`Consumer::recv`].
    #[inline]
    pub fn recv_many<'a>(
        &'a mut self,
        buf: &'a mut Vec<Message<T>>,
        limit: usize,
    ) -> GroupRecvMany<'a, T> {
        GroupRecvMany {
            consumer: self,
            buf,
            limit,
        }
    }

    /// Appends up to `limit` messages available now to `buf`.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if none is available; otherwise as [`Consumer::recv`].
    #[inline]
    pub fn try_recv_many(
        &mut self,
        buf: &mut Vec<Message<T>>,
        limit: usize,
    ) -> Result<usize, TryRecvError>
    where
        T: Clone,
    {
        if limit == 0 {
            return Ok(0);
        }
        match self.poll_inner(Some(buf), limit, None) {
            Poll::Ready(Ok((n, _))) => Ok(n),
            Poll::Pending => Err(TryRecvError::Empty),
            Poll::Ready(Err(e)) => Err(e.into()),
        }
    }
}

impl<T> Drop for Consumer<T> {
    fn drop(&mut self) {
        for p in 0..self.keys.len() {
            if self.keys[p].is_some() {
                self.unregister(p);
            }
        }
        // The idle waker is the user's: it is dropped after the members lock.
        let (deleted, waker) = {
            let mut members = self.group.members.lock();
            let (_, waker) = members.idle.remove(&mut self.idle_key);
            members.list.retain(|&m| m != self.id);
            (members.deleted, waker)
        };
        drop(waker);
        if !deleted {
            self.group.epoch.fetch_add(1, Ordering::AcqRel);
            self.shared.wake_group(&self.group);
        }
    }
}
