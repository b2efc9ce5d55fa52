//! Consumer groups: competing consumers sharing one position per partition.
//!
//! A group is created by the first [`Topic::group`] call with its name and outlives its
//! members: its position stays attached to every partition (holding back `Block`
//! retention) until [`Topic::delete_group`]. Each message goes to exactly one member.
//! On a one-partition topic all members compete for every message; on a partitioned
//! topic each partition is assigned to one member (partition `i` to the member at
//! `i % members` in join order) and the assignment is rebalanced whenever a member joins
//! or leaves, so order within a partition holds for the member reading it.
//!
//! With automatic commit (groups joined with [`Topic::group`]) a delivery commits: the
//! group's position moves past the message as it is handed out. Groups joined with
//! [`Topic::group_acked`](crate::Topic::group_acked) commit on acknowledgement instead
//! (see [`AckConsumer`](crate::AckConsumer)).
//!
//! After the topic closes, a member's receive returns `Closed` once the whole group has
//! drained, not just the member's own partitions: until then a member that finished
//! early waits, because a rebalance may still hand it a partition with messages.

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

use crate::config::StartAt;
use crate::error::{Error, RecvError, RecvIfError, TryRecvError, TryRecvIfError};
use crate::log::{Dest, Entry, Fetcher, GroupId, Log, Read, REVOKED};
use crate::message::Message;
use crate::partition::Shared;
use crate::subscriber::{start_position, to_message};
use crate::sync::{Arc, AtomicUsize, Mutex, Ordering, Padded};
use crate::topic::Topic;
use crate::wait::{SpentWakers, WaitKey, WaiterList, WakeList};

/// A group's membership, guarded by the group's own lock.
#[derive(Debug)]
struct Members {
    next_id: u64,
    /// Member ids in join order.
    list: Vec<u64>,
    /// Members with no partition assigned, waiting for a rebalance.
    idle: WaiterList,
    deleted: bool,
}

/// State of one group shared by its members and the topic's registry.
pub(crate) struct GroupShared<T> {
    pub(crate) name: String,
    /// The group's id in each partition's log, indexed by partition.
    pub(crate) ids: Vec<GroupId>,
    members: Mutex<Members>,
    /// Bumped on every membership change; members compare it to refresh assignments.
    epoch: AtomicUsize,
    /// Settings of an explicit-ack group; `None` for automatic commit.
    pub(crate) acks: Option<crate::ack::AckSettings<T>>,
    /// Messages fetched ahead for all members, on a one-partition topic (see [`Pool`]).
    pool: Option<Mutex<Pool<T>>>,
}

/// Messages fetched ahead for every member of an automatic-commit group on a
/// one-partition topic, where all members compete for the same messages.
///
/// A member that finds the pool empty reads under the partition's lock and fetches up
/// to [`READ_AHEAD`] more into the pool; members then take from the pool under its own
/// lock, without the partition's, so that publishers and members no longer take turns
/// on one lock for every message, and `T::clone` runs once per batch in the
/// partition's critical section instead of once per receive. Taking from the pool is in
/// offset order, so the members see the messages in the same order as without it, each
/// member's in increasing offsets, and each message goes to exactly one member.
///
/// The cell, attached to the group's cursor, counts what is in the pool: the group's
/// committed position, its lag, the delivered counts and `Block` retention count only
/// what was handed to a member (as with a subscriber's read-ahead). A member takes a
/// message by storing the cell's count less one, and deleting the group swaps the cell
/// for `REVOKED`, so a message is handed over only while the group exists. Every write
/// to the cell (a take, a refill, the deletion) is made with the pool's lock held, so
/// the store cannot overwrite a `REVOKED`; the partition's lock holders only read it.
///
/// Lock order: the pool, then the partition. A member registers to wait only with both
/// held and the pool empty, and a member that fills the pool wakes every waiting member
/// with both held, so no member sleeps while the pool has messages.
struct Pool<T> {
    buf: VecDeque<Entry<T>>,
    cell: Arc<Padded<AtomicUsize>>,
    /// Refills so far: a member's memory of acted-on wake positions lasts one refill
    /// (see [`Shared::ahead_consumed`]; on 32-bit targets encoded positions repeat).
    refills: usize,
}

impl<T> Pool<T> {
    /// Takes the next pooled message; `Err` with what was left once the group was
    /// deleted (to be dropped after the pool's lock is released).
    fn take(&mut self) -> Result<Option<Entry<T>>, VecDeque<Entry<T>>> {
        // The caller holds the pool's lock (`&mut self`), as every writer of the cell
        // does: nothing changes it between this load and the store.
        let cur = self.cell.0.load(Ordering::Acquire);
        if cur == REVOKED {
            return Err(core::mem::take(&mut self.buf));
        }
        if cur == 0 {
            return Ok(None);
        }
        self.cell.0.store(cur - 1, Ordering::Release);
        // The cell counts the pool, so this is the next one.
        Ok(self.buf.pop_front())
    }
}

impl<T> Pool<T> {
    /// The message [`Pool::take`] would take next, left in the pool; `None` if the pool
    /// is empty or the group was deleted.
    fn front(&self) -> Option<&Entry<T>> {
        match self.cell.0.load(Ordering::Acquire) {
            0 | REVOKED => None,
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
    pub(crate) fn member_count(&self) -> usize {
        self.members.lock().list.len()
    }
}

/// The partitions member `id` reads, given the membership and the partition count.
fn assignment(list: &[u64], id: u64, partitions: usize) -> Vec<usize> {
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

impl<T> Shared<T> {
    /// Wakes every member of `group` everywhere so that each re-reads its assignment.
    pub(crate) fn wake_group(&self, group: &GroupShared<T>) {
        wake_idle(group);
        for p in 0..self.parts.len() {
            self.wake_group_waiters(group, p);
        }
    }

    /// Wakes every member of `group` waiting on partition `p`.
    pub(crate) fn wake_group_waiters(&self, group: &GroupShared<T>, p: usize) {
        let mut wl = WakeList::new();
        loop {
            let more = {
                let mut log = self.parts[p].log.lock();
                match log.group(group.ids[p]) {
                    Some(g) => g.waiters.notify_all(&mut wl),
                    None => false,
                }
            };
            wl.wake_all();
            if !more {
                break;
            }
        }
    }

    /// Wakes the members of `group` that may be done now that partition `p`, closed, is
    /// drained: those waiting on it (for a message that would only come back if a
    /// delivery did) and those waiting on no partition (for the whole group to drain).
    pub(crate) fn wake_drained(&self, group: &GroupShared<T>, p: usize) {
        self.wake_group_waiters(group, p);
        wake_idle(group);
    }

    /// Wakes members with no partition (they only wait for a rebalance or close).
    pub(crate) fn wake_idle_members(&self) {
        let groups: Vec<Arc<GroupShared<T>>> = self.groups.lock().clone();
        for g in groups {
            wake_idle(&g);
        }
    }
}

/// Wakes the members of `group` that have no partition to wait on: they wait for a
/// rebalance or for the whole group to drain after close.
pub(crate) fn wake_idle<T>(group: &GroupShared<T>) {
    let mut wl = WakeList::new();
    loop {
        let more = group.members.lock().idle.notify_all(&mut wl);
        wl.wake_all();
        if !more {
            break;
        }
    }
}

impl<T> Topic<T> {
    /// Joins the consumer group `name`, creating it at `start` if it does not exist yet.
    /// An existing group keeps its committed position and `start` is ignored.
    ///
    /// # Errors
    ///
    /// [`Error::OffsetOutOfRange`] if a new group would start past the end of a partition;
    /// [`Error::GroupModeMismatch`] if `name` is an explicit-ack group (joined with
    /// [`Topic::group_acked`](crate::Topic::group_acked)).
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// use memq::{StartAt, Topic};
    ///
    /// let topic = Topic::with_capacity(16)?;
    /// let mut a = topic.group("workers", StartAt::Earliest)?;
    /// let mut b = topic.group("workers", StartAt::Earliest)?;
    /// topic.try_publish(1)?;
    /// topic.try_publish(2)?;
    /// let got = [a.try_recv()?.into_value(), b.try_recv()?.into_value()];
    /// assert_eq!(got, [1, 2]); // each message to exactly one member
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn group(&self, name: &str, start: StartAt) -> Result<Consumer<T>, Error> {
        self.join_group(name, start, None)
    }

    /// Joins (creating if needed) a group; `acks` is `Some` for an explicit-ack group.
    pub(crate) fn join_group(
        &self,
        name: &str,
        start: StartAt,
        acks: Option<crate::ack::AckSettings<T>>,
    ) -> Result<Consumer<T>, Error> {
        let shared = &self.shared;
        // Declared before the registry's guard, so dropped after it: the user's settings
        // if the creation fails, and what creating the group let go of in each partition
        // (values expired or released, publishers to wake), which runs user code.
        let mut acks = acks;
        let mut spent: Vec<(WakeList, Vec<T>)> = Vec::new();
        let explicit = acks.is_some();
        // The topic's clock (the user's code) is read before any lock is taken.
        let now = shared.expiry_now();
        let group = {
            let mut registry = shared.groups.lock();
            match registry.iter().find(|g| g.name == name) {
                Some(g) if g.acks.is_some() != explicit => {
                    return Err(Error::GroupModeMismatch(name.into()))
                }
                Some(g) => g.clone(),
                None => {
                    let g = create_group(shared, name, start, &mut acks, now, &mut spent)?;
                    let g = Arc::new(g);
                    registry.push(g.clone());
                    g
                }
            }
        };
        let id = {
            let mut members = group.members.lock();
            let id = members.next_id;
            members.next_id += 1;
            members.list.push(id);
            group.epoch.fetch_add(1, Ordering::AcqRel);
            id
        };
        shared.wake_group(&group);
        Ok(Consumer {
            shared: shared.clone(),
            group,
            id,
            epoch: usize::MAX,
            assigned: Vec::new(),
            keys: (0..shared.parts.len()).map(|_| None).collect(),
            idle_key: None,
            next: 0,
            waiting: false,
            deleted: false,
            pool_acted: 0,
            pool_refill: 0,
            as_stream: false,
        })
    }

    /// Deletes the group `name`: its position no longer holds back retention, and its
    /// members' receives return `Closed`.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownGroup`] if there is no such group.
    pub fn delete_group(&self, name: &str) -> Result<(), Error> {
        let shared = &self.shared;
        let group = {
            let mut registry = shared.groups.lock();
            let Some(i) = registry.iter().position(|g| g.name == name) else {
                return Err(Error::UnknownGroup(name.into()));
            };
            registry.swap_remove(i)
        };
        group.members.lock().deleted = true;
        group.epoch.fetch_add(1, Ordering::AcqRel);
        shared.wake_group(&group);
        // The pool first (the lock order is pool, then partition): what it holds moved out
        // of a releasing log goes back to the log, for the readers to come. Wake-ups and
        // released values wait until the pool's lock is released too: no waker and no
        // user `Drop` runs under a lock of memq's.
        let mut pool = group.pool.as_ref().map(|pool| pool.lock());
        let mut wake = Vec::with_capacity(shared.parts.len());
        let mut released = Vec::new();
        for (p, part) in shared.parts.iter().enumerate() {
            let mut wl = WakeList::new();
            let mut log = part.log.lock();
            if let Some(pool) = pool.as_deref_mut() {
                log.give_back(&mut pool.buf);
            }
            let waiters = log.remove_group(group.ids[p]);
            // The group may have been the slowest reader, or the only explicit-ack one.
            log.release_read(&mut released);
            shared.reader_advanced(&mut log, &mut wl);
            drop(log);
            wake.push((wl, waiters));
        }
        drop(pool);
        for (mut wl, waiters) in wake {
            wl.wake_all();
            // Members that registered after `wake_group` passed: all of them, however many.
            if let Some(mut waiters) = waiters {
                while waiters.notify_all(&mut wl) {
                    wl.wake_all();
                }
                wl.wake_all();
            }
        }
        drop(released);
        Ok(())
    }

    /// Names of the groups on this topic.
    pub fn groups(&self) -> Vec<String> {
        self.shared
            .groups
            .lock()
            .iter()
            .map(|g| g.name.clone())
            .collect()
    }
}

fn create_group<T>(
    shared: &Shared<T>,
    name: &str,
    start: StartAt,
    acks: &mut Option<crate::ack::AckSettings<T>>,
    now: u64,
    spent: &mut Vec<(WakeList, Vec<T>)>,
) -> Result<GroupShared<T>, Error> {
    // Check every partition first so that a failure leaves nothing attached. Offsets
    // only grow, so a start valid now stays valid below.
    if let StartAt::Offset(_) = start {
        for (p, part) in shared.parts.iter().enumerate() {
            start_position(&part.log.lock(), p, start)?;
        }
    }
    // Members share a pool of messages fetched ahead where they all read one partition
    // and retention can never pass an unread message (see `Pool`).
    let pooled = acks.is_none()
        && shared.parts.len() == 1
        && shared.ttl.is_none()
        && shared.overflow != crate::Overflow::DropOldest;
    let cell = Arc::new(Padded(AtomicUsize::new(0)));
    let mut ids = Vec::with_capacity(shared.parts.len());
    for (p, part) in shared.parts.iter().enumerate() {
        let mut wl = WakeList::new();
        let mut released = Vec::new();
        let mut log = part.log.lock();
        shared.expire(&mut log, now, &mut wl, &mut released);
        // A new group never sees what every reader attached so far has read.
        log.release_read(&mut released);
        let pos = start_position(&log, p, start).unwrap_or(log.high);
        let id = log.add_group(pos, acks.as_ref().map(|a| a.part(shared.clock.as_ref())));
        if pooled {
            if let Some(cursor) = log.group_ref(id).map(|g| g.cursor) {
                log.attach_ahead(cursor, cell.clone());
            }
        }
        ids.push(id);
        drop(log);
        // The caller drops them after the registry's lock too.
        if !wl.is_empty() || !released.is_empty() {
            spent.push((wl, released));
        }
    }
    Ok(GroupShared {
        name: name.into(),
        ids,
        members: Mutex::new(Members {
            next_id: 0,
            list: Vec::new(),
            idle: WaiterList::new(),
            deleted: false,
        }),
        epoch: AtomicUsize::new(0),
        acks: acks.take(),
        pool: pooled.then(|| {
            Mutex::new(Pool {
                buf: VecDeque::new(),
                cell,
                refills: 0,
            })
        }),
    })
}

/// How many messages one poll took, and the message itself when no buffer was given.
type Taken<T> = (usize, Option<Message<T>>);

/// What a receive asks of the next message before it takes it (see
/// [`Consumer::try_recv_if`]). A poll that declines a message returns `Ok((0, None))`
/// with nothing changed.
trait Accept<T> {
    /// `true` for receives that take any message: their checks compile away, so a plain
    /// receive costs what it did before receives could decline.
    const ALL: bool;

    /// Whether to take the message whose value is `value`. Called at most once per
    /// poll, inside the critical section that holds the message.
    fn accept(&mut self, value: &T) -> bool;
}

/// A plain receive: takes any message.
struct TakeAny;

impl<T> Accept<T> for TakeAny {
    const ALL: bool = true;

    #[inline(always)]
    fn accept(&mut self, _: &T) -> bool {
        true
    }
}

/// A receive that takes the next message only if the user's predicate holds for it.
struct TakeIf<F> {
    /// The predicate, until it is asked.
    f: Option<F>,
    /// Whether it declined the message it was asked about.
    declined: bool,
}

impl<F> TakeIf<F> {
    fn new(f: F) -> Self {
        Self {
            f: Some(f),
            declined: false,
        }
    }
}

impl<T, F: FnOnce(&T) -> bool> Accept<T> for TakeIf<F> {
    const ALL: bool = false;

    fn accept(&mut self, value: &T) -> bool {
        // Asked once: the poll that asks it returns either way (a second question would
        // be a bug, answered by taking nothing).
        let ok = self.f.take().is_some_and(|f| f(value));
        self.declined = !ok;
        ok
    }
}

/// A member of a consumer group: receives the messages of its assigned partitions that
/// no other member received.
///
/// Made by [`Topic::group`]. Dropping it leaves the group (its partitions are rebalanced
/// to the other members); the group and its position remain.
pub struct Consumer<T> {
    pub(crate) shared: Arc<Shared<T>>,
    pub(crate) group: Arc<GroupShared<T>>,
    pub(crate) id: u64,
    epoch: usize,
    pub(crate) assigned: Vec<usize>,
    /// Wait registration per partition, indexed by partition.
    pub(crate) keys: Vec<Option<WaitKey>>,
    idle_key: Option<WaitKey>,
    pub(crate) next: usize,
    pub(crate) waiting: bool,
    deleted: bool,
    /// The last wake position this member took the lock for after taking from the
    /// group's pool (see [`Shared::ahead_consumed`]); 0 for none, and again with every
    /// refill of the pool (`Pool::refills` as of `pool_refill`).
    pool_acted: usize,
    pool_refill: usize,
    /// Set while the member is polled as a `Stream`: its wait registrations are then
    /// extra ones (see `WaiterList::register_extra`), since a dropped `next()` cannot
    /// cancel them.
    as_stream: bool,
}

/// How many messages a member fetches into its group's [`Pool`] per visit.
const READ_AHEAD: usize = 32;

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

    /// Re-reads the assignment after a rebalance; returns whether the group is deleted.
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

    fn unregister(&mut self, p: usize) {
        let mut spent = SpentWakers::new();
        let mut wl = WakeList::new();
        let mut log = self.shared.parts[p].log.lock();
        let high = log.high;
        if let Some(g) = log.group(self.group.ids[p]) {
            Log::<T>::unregister(&mut g.waiters, &mut self.keys[p], &mut wl, &mut spent);
            g.keep_watch(high, &mut wl);
        } else {
            self.keys[p] = None;
        }
    }

    /// One attempt to read up to `limit` messages (`buf` gets them; `one` receives a
    /// single message without a buffer). Registers `waker` if nothing was read.
    #[inline]
    fn poll_inner(
        &mut self,
        buf: Option<&mut Vec<Message<T>>>,
        limit: usize,
        waker: Option<&Waker>,
    ) -> Poll<Result<Taken<T>, RecvError>>
    where
        T: Clone,
    {
        self.poll_with(buf, limit, waker, &mut TakeAny)
    }

    /// [`Consumer::poll_inner`], taking the first message only if `accept` accepts it
    /// (single receives only, `limit` 1 without a buffer). A declined message stays
    /// exactly where it was: the poll returns `Ok((0, None))`, having taken nothing, and
    /// passes on any wake-up this member used (the message waits for another member).
    fn poll_with<A: Accept<T>>(
        &mut self,
        mut buf: Option<&mut Vec<Message<T>>>,
        limit: usize,
        waker: Option<&Waker>,
        accept: &mut A,
    ) -> Poll<Result<Taken<T>, RecvError>>
    where
        T: Clone,
    {
        debug_assert!(A::ALL || (buf.is_none() && limit == 1));
        if self.refresh() {
            self.waiting = false;
            return Poll::Ready(Err(RecvError::Closed));
        }
        if self.group.pool.is_some() && self.assigned == [0] {
            return self.poll_pooled(buf, limit, waker, accept);
        }
        let shared = &*self.shared;
        let clocked = shared.stamp();
        let now = shared.expiry_now();
        let n = self.assigned.len();
        let mut got = 0;
        let mut single = None;
        let mut all_closed = true;
        let mut drained_closed = false;
        // The partition whose registration this poll settled under its lock, if any.
        let mut settled = None;
        for k in 0..n {
            if got == limit {
                break;
            }
            let idx = (self.next + k) % n;
            let p = self.assigned[idx];
            let mut dead = Vec::new();
            let mut spent = SpentWakers::new();
            let mut wl = WakeList::new();
            let mut log = shared.parts[p].log.lock_for(buf.is_some());
            shared.expire(&mut log, now, &mut wl, &mut dead);
            let id = self.group.ids[p];
            let Some(cursor) = log.group_ref(id).map(|g| g.cursor) else {
                continue; // deleted: reported once `refresh` sees it
            };
            let old = log.cursor(cursor);
            let release = shared.release_on_read;
            let first = if release { log.first() } else { log.low };
            if old < first && got > 0 {
                all_closed = false;
                break;
            }
            let dest = if release { Dest::User } else { Dest::Copy };
            while got < limit {
                if !A::ALL && got == 0 {
                    if let Some(v) = log.peek(cursor, dest) {
                        if !accept.accept(v) {
                            // Left in the partition, nothing counted; a wake-up this
                            // member used goes on, since the message waits.
                            if let Some(g) = log.group(id) {
                                if g.waiters.settle(self.keys[p], &mut spent) {
                                    g.waiters.notify_one(&mut wl);
                                }
                            }
                            drop(log);
                            self.cancel_wait_except(Some(p));
                            return Poll::Ready(Ok((0, None)));
                        }
                    }
                }
                match log.read(cursor, dest) {
                    Read::Message(e) => {
                        // Counted as read, so that a `T::clone` that panics on a later
                        // read of this batch leaves the count in step with the position.
                        if let Some(g) = log.group(id) {
                            g.delivered += 1;
                        }
                        let m = to_message(p, e, clocked);
                        match buf.as_deref_mut() {
                            Some(b) => b.push(m),
                            None => single = Some(m),
                        }
                        got += 1;
                    }
                    Read::Lagged(missed) => {
                        let more = log.fetched(cursor) < log.high;
                        if let Some(g) = log.group(self.group.ids[p]) {
                            g.lagged += missed;
                            // A wake-up this member used goes on to the next waiting one
                            // when messages remain past the lag.
                            if g.waiters.settle(self.keys[p], &mut spent) && more {
                                g.waiters.notify_one(&mut wl);
                            }
                        }
                        shared.reader_advanced(&mut log, &mut wl);
                        // Skipping to the end of a closed partition may finish the
                        // group's drain, as taking its last message does.
                        let drained_closed = log.finished(cursor);
                        drop(log);
                        self.cancel_wait();
                        if drained_closed {
                            self.wake_idle();
                        }
                        return Poll::Ready(Err(RecvError::Lagged(missed)));
                    }
                    Read::Empty => break,
                }
            }
            let taken = log.cursor(cursor) - old;
            if taken > 0 {
                if let Some(g) = log.group(id) {
                    g.waiters.settle(self.keys[p], &mut spent);
                    settled = Some(p);
                    // More remain and others wait: pass the baton so nobody sleeps on
                    // a non-empty partition.
                    if log.fetched(cursor) < log.high {
                        if let Some(g) = log.group(id) {
                            g.waiters.notify_one(&mut wl);
                        }
                    }
                }
                shared.reader_advanced(&mut log, &mut wl);
                drained_closed |= log.finished(cursor);
                self.next = idx + 1;
                all_closed = false;
            } else if !log.closed {
                all_closed = false;
                if got == 0 {
                    if let Some(w) = waker {
                        if let Some(g) = log.group(self.group.ids[p]) {
                            register(
                                &mut g.waiters,
                                &mut self.keys[p],
                                w,
                                self.as_stream,
                                &mut spent,
                            );
                            // Cancelled by whatever this poll returns, even a message
                            // from a later partition: a registration left behind would
                            // take a wake-up meant for the member that gets this
                            // partition in a rebalance.
                            self.waiting = true;
                        }
                    }
                }
            }
        }
        if got > 0 {
            self.cancel_wait_except(settled);
            if drained_closed {
                // Members waiting for the whole group to drain may be done now.
                self.wake_idle();
            }
            return Poll::Ready(Ok((got, single)));
        }
        if n > 0 && !all_closed {
            if let Some(w) = waker {
                self.recheck_assignment(w);
            }
            self.waiting |= waker.is_some();
            return Poll::Pending;
        }
        // Nothing assigned, or every assigned partition is closed and drained. The member
        // is done only when the whole group is: until then a rebalance (another member
        // leaving) may still hand it a partition with messages in it.
        if shared.is_closed() && self.group_drained() {
            self.cancel_wait();
            return Poll::Ready(Err(RecvError::Closed));
        }
        if let Some(w) = waker {
            let mut spent = SpentWakers::new();
            self.group
                .members
                .lock()
                .idle
                .register(&mut self.idle_key, w, &mut spent);
            // Re-check after registering: a rebalance or the last drain may have just
            // happened, and its wake-up would have missed us.
            if self.group.epoch.load(Ordering::Acquire) != self.epoch
                || (shared.is_closed() && self.group_drained())
            {
                w.wake_by_ref();
            }
        }
        self.waiting |= waker.is_some();
        Poll::Pending
    }

    /// [`Consumer::poll_inner`] for a group whose members share a [`Pool`] (one
    /// partition, which every member reads).
    fn poll_pooled<A: Accept<T>>(
        &mut self,
        mut buf: Option<&mut Vec<Message<T>>>,
        limit: usize,
        waker: Option<&Waker>,
        accept: &mut A,
    ) -> Poll<Result<Taken<T>, RecvError>>
    where
        T: Clone,
    {
        let shared = &*self.shared;
        let clocked = shared.stamp();
        let Some(pool) = self.group.pool.as_ref() else {
            return Poll::Ready(Err(RecvError::Closed));
        };
        let id = self.group.ids[0];
        let mut got = 0;
        let mut single = None;
        // No clock reading: a pool is only used without a TTL, so nothing here expires
        // (and the clock must not be read under the pool's lock anyway).
        // Wakers let go of under either lock, dropped after both.
        let mut spent = SpentWakers::new();
        let mut pool = pool.lock_for(buf.is_some());
        if pool.refills != self.pool_refill {
            self.pool_refill = pool.refills;
            self.pool_acted = 0;
        }
        // First what the pool holds, without the partition's lock.
        let mut last = None;
        while got < limit {
            if !A::ALL && got == 0 {
                if let Some(e) = pool.front() {
                    if !accept.accept(&e.value) {
                        // Left at the front of the pool, for the next receive of any
                        // member; a wake-up this member used goes on.
                        drop(pool);
                        self.cancel_wait();
                        return Poll::Ready(Ok((0, None)));
                    }
                }
            }
            match pool.take() {
                Ok(Some(e)) => {
                    last = Some(e.offset);
                    let m = to_message(0, e, clocked);
                    match buf.as_deref_mut() {
                        Some(b) => b.push(m),
                        None => single = Some(m),
                    }
                    got += 1;
                }
                Ok(None) => break,
                Err(stale) => {
                    // The group was deleted: what it fetched goes, outside every lock.
                    drop(pool);
                    drop(stale);
                    self.cancel_wait();
                    return Poll::Ready(if got > 0 {
                        // Taken before the deletion: handed over, and reported.
                        Ok((got, single))
                    } else {
                        Err(RecvError::Closed)
                    });
                }
            }
        }
        if let (Some(last), true) = (last, got == limit) {
            let emptied = pool.buf.is_empty();
            drop(pool);
            shared.ahead_consumed(0, last + 1, &mut self.pool_acted);
            // Handing over the last pooled message may finish the group's drain after
            // close, without the partition's lock: members waiting for it must hear.
            let drained_closed = emptied && shared.closed_after_handover();
            self.cancel_wait();
            if drained_closed {
                self.wake_idle();
            }
            return Poll::Ready(Ok((got, single)));
        }
        // The pool is empty (a batch may want more than it held): read under the
        // partition's lock, the pool's still held so that refills go in order and
        // nobody registers while the pool has messages.
        let mut wl = WakeList::new();
        let mut log = shared.parts[0].log.lock_for(buf.is_some());
        // A visit under the lock ends the memory of acted-on wake positions (see
        // `Shared::ahead_consumed`).
        self.pool_acted = 0;
        let cursor = match log.group_ref(id).map(|g| g.cursor) {
            Some(c) if log.ahead_is(c, &pool.cell) => c,
            // Deleted (its cell taken back with its position): `refresh` reports it.
            _ => {
                drop(log);
                drop(pool);
                self.cancel_wait();
                return Poll::Ready(if got > 0 {
                    // Taken from the pool before the deletion: handed over, and reported.
                    Ok((got, single))
                } else {
                    Err(RecvError::Closed)
                });
            }
        };
        let old = log.cursor(cursor);
        // A batch goes straight to the user; a single receive fetches into the pool.
        let dest = match (shared.release_on_read, buf.is_some()) {
            (false, _) => Dest::Copy,
            (true, true) => Dest::User,
            (true, false) => Dest::Held,
        };
        // Messages taken from the pool are not followed by a gap in the same batch: the
        // gap is the next receive's to report (a batch holds messages or reports a gap).
        let gap_after_pooled = got > 0 && log.gap_at(cursor, dest);
        while got < limit && !gap_after_pooled {
            if !A::ALL && got == 0 {
                if let Some(v) = log.peek(cursor, dest) {
                    if !accept.accept(v) {
                        // Left in the log (the pool is empty), nothing fetched or
                        // counted; a wake-up this member used goes on.
                        if let Some(g) = log.group(id) {
                            if g.waiters.settle(self.keys[0], &mut spent) {
                                g.waiters.notify_one(&mut wl);
                            }
                        }
                        drop(log);
                        drop(pool);
                        wl.wake_all();
                        self.cancel_wait_except(Some(0));
                        return Poll::Ready(Ok((0, None)));
                    }
                }
            }
            match log.read(cursor, dest) {
                Read::Message(e) => {
                    let e = if buf.is_none() {
                        // Counted in the group's `delivered` as it is fetched.
                        let Pool {
                            buf: pooled, cell, ..
                        } = &mut *pool;
                        let max = READ_AHEAD + 1;
                        match log.hold_and_read_ahead(
                            cursor,
                            e,
                            &cell.0,
                            max,
                            pooled,
                            Fetcher::Pool {
                                group: id,
                                release: shared.release_on_read,
                            },
                        ) {
                            Some(e) => e,
                            None => break,
                        }
                    } else {
                        // Counted as read, so that a `T::clone` that panics on a later
                        // read of this batch leaves the count in step with the position.
                        if let Some(g) = log.group(id) {
                            g.delivered += 1;
                        }
                        e
                    };
                    let m = to_message(0, e, clocked);
                    match buf.as_deref_mut() {
                        Some(b) => b.push(m),
                        None => single = Some(m),
                    }
                    got += 1;
                }
                Read::Lagged(missed) => {
                    // Only where the group started inside what a reader had fetched
                    // ahead out of a releasing log (pools exist only without a TTL or
                    // `DropOldest`); reported as everywhere else.
                    let more = log.fetched(cursor) < log.high;
                    if let Some(g) = log.group(id) {
                        g.lagged += missed;
                        // A wake-up this member used goes on when messages remain.
                        if g.waiters.settle(self.keys[0], &mut spent) && more {
                            g.waiters.notify_one(&mut wl);
                        }
                    }
                    shared.reader_advanced(&mut log, &mut wl);
                    drop(log);
                    drop(pool);
                    self.cancel_wait_except(Some(0));
                    return Poll::Ready(Err(RecvError::Lagged(missed)));
                }
                Read::Empty => break,
            }
        }
        let taken = log.cursor(cursor) - old;
        if taken > 0 || got > 0 {
            if buf.is_some() {
                // After a batch, fetch what the members will most likely ask for next.
                let by = Fetcher::Pool {
                    group: id,
                    release: shared.release_on_read,
                };
                log.read_ahead(cursor, READ_AHEAD, &mut pool.buf, by);
            }
            if !pool.buf.is_empty() {
                pool.refills = pool.refills.wrapping_add(1);
            }
            let more = !pool.buf.is_empty() || log.fetched(cursor) < log.high;
            let mut unwoken = false;
            if let Some(g) = log.group(id) {
                g.waiters.settle(self.keys[0], &mut spent);
                if more && g.waiters.waiting() > 0 {
                    // The pool has messages again: every member waiting may take one.
                    unwoken = g.waiters.notify_all(&mut wl);
                }
            }
            shared.reader_advanced(&mut log, &mut wl);
            let drained_closed = log.finished(cursor);
            drop(log);
            drop(pool);
            wl.wake_all();
            if unwoken {
                self.wake_group_members(0);
            }
            self.cancel_wait_except(Some(0));
            if drained_closed {
                self.wake_idle();
            }
            return Poll::Ready(Ok((got, single)));
        }
        if log.closed {
            // Closed, the pool empty and the partition read to its end: the group (which
            // reads only this partition) is drained.
            drop(log);
            drop(pool);
            self.cancel_wait();
            return Poll::Ready(Err(RecvError::Closed));
        }
        if let Some(w) = waker {
            if let Some(g) = log.group(id) {
                register(
                    &mut g.waiters,
                    &mut self.keys[0],
                    w,
                    self.as_stream,
                    &mut spent,
                );
            }
        }
        drop(log);
        drop(pool);
        self.waiting |= waker.is_some();
        Poll::Pending
    }

    /// Wakes every member of this group parked on partition `p`, for those a first
    /// [`WakeList`] could not hold.
    fn wake_group_members(&self, p: usize) {
        self.shared.wake_group_waiters(&self.group, p);
    }

    /// Whether a receive may find something: members cannot tell without the lock, so
    /// always `true` (see `Subscriber::may_have_news`).
    #[cfg(feature = "std")]
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
        self.group.epoch.load(Ordering::Acquire) != self.epoch
            || (self.shared.is_closed() && self.group_drained())
    }

    /// Whether the group has delivered everything published on every partition.
    pub(crate) fn group_drained(&self) -> bool {
        self.shared.parts.iter().enumerate().all(|(p, part)| {
            let log = part.log.lock();
            log.group_ref(self.group.ids[p])
                .is_none_or(|g| match &g.acks {
                    None => log.cursor(g.cursor) >= log.high,
                    Some(a) => a.next >= log.high && a.unacked.is_empty(),
                })
        })
    }

    /// Wakes members waiting for work elsewhere in the group (see `poll_inner`).
    pub(crate) fn wake_idle(&self) {
        wake_idle(&self.group);
    }

    /// Forgets the registrations of a wait that ended (served on another partition, or
    /// abandoned), passing unconsumed wake-ups on to other members.
    pub(crate) fn cancel_wait(&mut self) {
        self.cancel_wait_except(None);
    }

    /// [`Consumer::cancel_wait`] for a poll that already settled its registration on
    /// partition `settled` under that partition's lock: that lock is not taken again
    /// (members that wait between messages would otherwise lock twice per message).
    fn cancel_wait_except(&mut self, settled: Option<usize>) {
        if !self.waiting {
            return;
        }
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
            if self.keys[p].is_some() && settled != Some(p) {
                let mut wl = WakeList::new();
                let mut log = self.shared.parts[p].log.lock();
                let high = log.high;
                if let Some(g) = log.group(self.group.ids[p]) {
                    if g.waiters.settle(self.keys[p], &mut spent) {
                        g.waiters.notify_one(&mut wl);
                    }
                    g.keep_watch(high, &mut wl);
                }
            }
        }
    }

    /// Receives the next message for this member, waiting for one if needed.
    ///
    /// # Errors
    ///
    /// [`RecvError::Lagged`] if the group fell behind the retained window (policy
    /// `DropOldest` or TTL); [`RecvError::Closed`] when the topic is closed and the
    /// whole group has drained (every partition read to its end, not only this
    /// member's: a rebalance may still hand it a partition with messages left), or the
    /// group was deleted.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a message is taken only in the poll that returns it, and if the
    /// future is dropped after being woken for a message, the wake-up passes to another
    /// waiting member.
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

    /// Waits for the next message for this member, then takes it if `f` returns `true`
    /// for its value, as [`Consumer::try_recv_if`]: if `f` returns `false` the future
    /// completes with [`RecvIfError::Declined`] and the message stays in the group,
    /// exactly where it was, for the next receive of any member. `f` is called at most
    /// once, inside the critical section that holds the message (see
    /// [`Consumer::try_recv_if`]).
    ///
    /// # Errors
    ///
    /// [`RecvIfError::Declined`] if `f` declined the message; otherwise as
    /// [`Consumer::recv`].
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

/// Registers a member's wait on one partition (see `Consumer::as_stream`).
fn register(
    waiters: &mut crate::wait::WaiterList,
    key: &mut Option<WaitKey>,
    waker: &Waker,
    as_stream: bool,
    spent: &mut SpentWakers,
) {
    if as_stream {
        waiters.register_extra(key, waker, spent);
    } else {
        waiters.register(key, waker, spent);
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

/// Future of [`Consumer::recv`].
#[must_use = "futures do nothing unless polled"]
pub struct GroupRecv<'a, T> {
    consumer: &'a mut Consumer<T>,
}

impl<T> fmt::Debug for GroupRecv<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupRecv").finish_non_exhaustive()
    }
}

impl<T: Clone> Future for GroupRecv<'_, T> {
    type Output = Result<Message<T>, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self
            .get_mut()
            .consumer
            .poll_inner(None, 1, Some(cx.waker()))
        {
            Poll::Ready(Ok((_, Some(m)))) => Poll::Ready(Ok(m)),
            Poll::Ready(Ok((_, None))) => Poll::Ready(Err(RecvError::Closed)),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T> Drop for GroupRecv<'_, T> {
    fn drop(&mut self) {
        self.consumer.cancel_wait();
    }
}

/// Future of [`Consumer::recv_if`].
#[must_use = "futures do nothing unless polled"]
pub struct GroupRecvIf<'a, T, F> {
    consumer: &'a mut Consumer<T>,
    accept: TakeIf<F>,
}

// The predicate is never pinned: it is moved out to be called.
impl<T, F> Unpin for GroupRecvIf<'_, T, F> {}

impl<T, F> fmt::Debug for GroupRecvIf<'_, T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupRecvIf").finish_non_exhaustive()
    }
}

impl<T: Clone, F: FnOnce(&T) -> bool> Future for GroupRecvIf<'_, T, F> {
    type Output = Result<Message<T>, RecvIfError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        match this
            .consumer
            .poll_with(None, 1, Some(cx.waker()), &mut this.accept)
        {
            Poll::Ready(Ok((_, Some(m)))) => Poll::Ready(Ok(m)),
            Poll::Ready(Ok((_, None))) if this.accept.declined => {
                Poll::Ready(Err(RecvIfError::Declined))
            }
            Poll::Ready(Ok((_, None))) => Poll::Ready(Err(RecvIfError::Closed)),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e.into())),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T, F> Drop for GroupRecvIf<'_, T, F> {
    fn drop(&mut self) {
        self.consumer.cancel_wait();
    }
}

/// Future of [`Consumer::recv_many`].
#[must_use = "futures do nothing unless polled"]
pub struct GroupRecvMany<'a, T> {
    consumer: &'a mut Consumer<T>,
    buf: &'a mut Vec<Message<T>>,
    limit: usize,
}

impl<T> fmt::Debug for GroupRecvMany<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupRecvMany")
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl<T: Clone> Future for GroupRecvMany<'_, T> {
    type Output = Result<usize, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.limit == 0 {
            return Poll::Ready(Ok(0));
        }
        match this
            .consumer
            .poll_inner(Some(this.buf), this.limit, Some(cx.waker()))
        {
            Poll::Ready(Ok((n, _))) => Poll::Ready(Ok(n)),
            Poll::Ready(Err(RecvError::Closed)) => Poll::Ready(Ok(0)),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T> Drop for GroupRecvMany<'_, T> {
    fn drop(&mut self) {
        self.consumer.cancel_wait();
    }
}

impl<T: Clone> futures_core::Stream for Consumer<T> {
    type Item = Result<Message<T>, crate::Lagged>;

    /// Unlike [`Consumer::recv`]'s future, a `next()` future that is dropped while it
    /// waits (under a timeout, in a `select!`) cannot withdraw the member from the wait:
    /// the member stays registered until it is polled again or dropped. So that no
    /// message waits for it meanwhile, a member waiting as a stream takes nobody's turn:
    /// a new message wakes the member waiting in `recv` whose turn it is, and with it the
    /// stream members queued before that one; with nobody waiting in `recv`, every stream
    /// member waiting. All but one of them find nothing and wait again.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        this.as_stream = true;
        let polled = this.poll_inner(None, 1, Some(cx.waker()));
        this.as_stream = false;
        match polled {
            Poll::Ready(Ok((_, Some(m)))) => Poll::Ready(Some(Ok(m))),
            Poll::Ready(Ok((_, None))) | Poll::Ready(Err(RecvError::Closed)) => Poll::Ready(None),
            Poll::Ready(Err(RecvError::Lagged(n))) => Poll::Ready(Some(Err(crate::Lagged(n)))),
            Poll::Pending => Poll::Pending,
        }
    }
}
