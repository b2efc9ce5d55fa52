//! Creating, joining and deleting groups (for the group methods of `Topic`), and the
//! attachment of a new group's position to every partition.
//!
//! Layer: on the topic's registry of groups and the partitions' logs; makes members
//! ([`Consumer`]) and the group's shared state ([`GroupShared`]).

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;

use super::consumer::Consumer;
use super::shared::{GroupShared, Pool};
use crate::config::StartAt;
use crate::error::Error;
use crate::partition::Shared;
use crate::read::start_position;
use crate::sync::{Arc, AtomicUsize, Mutex, Ordering, Padded};
use crate::wait::WakeList;

/// Joins (creating if needed) a group; `acks` is `Some` for an explicit-ack group.
pub(crate) fn join<T>(
    shared: &Arc<Shared<T>>,
    name: &str,
    start: StartAt,
    acks: Option<crate::ack::AckSettings<T>>,
) -> Result<Consumer<T>, Error> {
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
    // The member's readers of the group's ring positions, made before it joins: a
    // failure leaves the membership as it was.
    #[cfg(target_has_atomic = "64")]
    let ring = super::ring::RingMember::for_each_partition(&group)?;
    let id = {
        let mut members = group.members.lock();
        let id = members.next_id;
        members.next_id += 1;
        members.list.push(id);
        group.epoch.fetch_add(1, Ordering::AcqRel);
        id
    };
    shared.wake_group(&group);
    #[allow(unused_mut)]
    let mut member = Consumer::new(shared.clone(), group, id);
    #[cfg(target_has_atomic = "64")]
    {
        member.ring = ring;
    }
    Ok(member)
}

/// Deletes the group `name` of the topic (see `Topic::delete_group`).
pub(crate) fn delete<T>(shared: &Shared<T>, name: &str) -> Result<(), Error> {
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
    #[cfg(target_has_atomic = "64")]
    if !group.rings.is_empty() {
        super::ring::delete(&group);
        return Ok(());
    }
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
    #[cfg(target_has_atomic = "64")]
    super::ring::release_holds(shared, &group);
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

/// Names of the topic's groups.
pub(crate) fn names<T>(shared: &Shared<T>) -> Vec<String> {
    shared
        .groups
        .lock()
        .iter()
        .map(|g| g.name.clone())
        .collect()
}

/// Makes the group `name` at `start`, attached to every partition (none if it fails).
fn create_group<T>(
    shared: &Shared<T>,
    name: &str,
    start: StartAt,
    acks: &mut Option<crate::ack::AckSettings<T>>,
    now: u64,
    spent: &mut Vec<(WakeList, Vec<T>)>,
) -> Result<GroupShared<T>, Error> {
    #[cfg(target_has_atomic = "64")]
    if !shared.rings.is_empty() {
        return match acks.is_some() {
            true => super::ring::create_acked_group(shared, name, start, acks),
            false => super::ring::create_group(shared, name, start),
        };
    }
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
    let pool = pooled.then(|| {
        Mutex::new(Pool {
            buf: VecDeque::new(),
            cell,
            refills: 0,
        })
    });
    Ok(GroupShared::new(name, ids, acks.take(), pool))
}
