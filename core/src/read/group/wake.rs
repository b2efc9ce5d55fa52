//! Waking a group's members: all of them to re-read their assignment, those parked on
//! one partition, or those with no partition to wait on.
//!
//! Layer: on the topic's shared state and the group's; used by the group's members and
//! registry and by the topic's close.

use alloc::vec::Vec;

use super::shared::GroupShared;
use crate::partition::Shared;
use crate::sync::Arc;
use crate::wait::WakeList;

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
        #[cfg(target_has_atomic = "64")]
        if let Some(rg) = group.rings.get(p) {
            super::ring::wake_members(rg);
            return;
        }
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
