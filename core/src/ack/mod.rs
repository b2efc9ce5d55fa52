//! Explicit acknowledgements: at-least-once consumer groups.
//!
//! In an explicit-ack group a delivery is a lease. The member [`ack`](Delivery::ack)s it
//! when done, [`nack`](Delivery::nack)s it to have it delivered again (at once or after a
//! delay), [`reject`](Delivery::reject)s it to send it to the dead-letter topic, or
//! [`touch`](Delivery::touch)es it to extend the lease. A delivery dropped without any of
//! these, a lease that runs out (`ack_wait`), and the leases of a member that leaves all
//! return the message to the group. After `max_deliveries` attempts a message is published
//! to the dead-letter topic with its origin, and only then removed from the group: while
//! that topic is full the message waits in the group, and once it is closed messages are
//! delivered again instead, so none is lost.
//!
//! The group's committed position on a partition is its lowest unacknowledged offset;
//! under `Block` retention never passes it (a TTL may: then the acknowledged messages
//! after the evicted one are not held back for it). At most `max_in_flight` messages per
//! partition are unacknowledged at a time, which is also flow control.
//!
//! State lives per partition in the log ([`Acks`]), under the partition's lock. This module
//! owns it; the group module owns membership and assignment.
//!
//! The layer above consumer groups: it may use the time and sync layers, the log, the
//! group's member ([`Consumer`](crate::Consumer)) and the topic's shared state; nothing
//! below it names anything here but the per-partition state the log keeps
//! ([`Acks`], [`AckPart`]) and the settings a group keeps ([`AckSettings`]).
//!
//! - `config`: [`Backoff`], [`AckConfig`] and the settings as a group keeps them;
//! - `state`: the lease state machine of one partition, which knows nothing of members,
//!   deliveries or the dead-letter topic's publishing;
//! - `consumer`: [`AckConsumer`], its receive and its futures;
//! - `visit`: one visit of a member to a partition, the steps of its receive under the
//!   partition's lock;
//! - `delivery`: [`Delivery`], the lease a member holds, and how it is settled;
//! - `dead_letter`: [`DeadLetter`], the sink it is published to, and the move of a
//!   message there (with its retry while the dead-letter topic is full).

mod config;
mod consumer;
mod dead_letter;
mod delivery;
mod state;
mod visit;

pub(crate) use config::AckSettings;
pub use config::{AckConfig, Backoff};
pub use consumer::{AckConsumer, AckRecv, AckRecvMany, PendingInfo};
pub use dead_letter::{DeadLetter, DeadLetterReason};
pub(crate) use dead_letter::{DeadLetterSink, SinkError};
pub use delivery::{AckError, AckReport, Delivery};
pub(crate) use state::{AckPart, Acks};

use crate::partition::Shared;
use crate::partition::{GroupPart, PartLog};
use crate::read::group::GroupShared;
use crate::sync::MutexGuard;
use crate::wait::{WaiterList, WakeList};

/// An explicit-ack group's settings: present in every group an [`AckConsumer`], a
/// [`Delivery`] or a dead letter comes from (`Topic::group_acked` joins only groups
/// made with them). A group without them here is a broken invariant, and fails loudly.
fn settings_of<T>(group: &GroupShared<T>) -> &AckSettings<T> {
    group
        .acks
        .as_ref()
        .expect("memq: an explicit-ack member's group has no ack settings")
}

/// A group part's lease state, split from its waiters. Every part of an explicit-ack
/// group has it (`PartLog::add_group`); one without it is a broken invariant, and fails
/// loudly.
fn acks_of(g: &mut GroupPart) -> (&mut Acks, &mut WaiterList) {
    let Some(acks) = g.acks.as_mut() else {
        panic!("memq: an explicit-ack group's partition has no lease state");
    };
    (acks, &mut g.waiters)
}

/// The end of every change to a group's leases on partition `p` outside a receive's
/// first visit (a settled delivery, a moved dead letter, a batch's further leases), with
/// `log` still locked since the group was
/// found there: the group's hold on the log follows its lowest unacknowledged message,
/// retention may move on, and, once the lock is released, the members waiting for the
/// closed partition to drain are woken if it now is.
fn release_hold<T>(
    shared: &Shared<T>,
    group: &GroupShared<T>,
    p: usize,
    mut log: MutexGuard<'_, PartLog<T>>,
    wl: &mut WakeList,
) {
    let bounds = shared.ack_bounds(p, &log);
    let g = log.group_found(group.ids[p]);
    let cursor = g.cursor;
    let (acks, _) = acks_of(g);
    let drained = acks.is_drained(bounds.closed, bounds.high);
    let holds_from = acks.holds_from(bounds.retained_from);
    log.set_cursor(cursor, holds_from);
    // Lets the ring's writers have what every member settled, woken once no lock of
    // memq's is held (a waker is the user's code).
    #[cfg(target_has_atomic = "64")]
    let moved = group.holds.get(p).is_some_and(|hold| {
        hold.lock()
            .as_mut()
            .is_some_and(|h| h.advance_quietly(holds_from))
    });
    shared.reader_advanced(&mut log, wl);
    drop(log);
    #[cfg(target_has_atomic = "64")]
    if moved {
        shared.wake_ring_writers(p);
    }
    if drained {
        // The last message of a closed partition is settled: members waiting on it
        // (one was woken by the caller, as for a message to take) or for the whole
        // group to drain may be done now, all of them.
        shared.wake_drained(group, p);
    }
}
