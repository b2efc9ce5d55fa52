//! Dead letters: what a group gives up on ([`DeadLetter`], [`DeadLetterReason`]), the
//! sink they are published to, and the move of a message there, with its retry while
//! the dead-letter topic is full. Every retry of a move comes through [`move_letter`]:
//! a move that must wait puts the message back in the group, bound for the dead-letter
//! topic, and the next receive to meet it moves it again.
//!
//! Part of the ack layer: depends on the lease state and settings beside it, the log,
//! the group's shared state and the topic (the sink is a topic).

use alloc::string::String;

use super::state::Acks;
use super::{acks_of, release_hold, settings_of, AckSettings};
use crate::partition::Shared;
use crate::read::group::GroupShared;
use crate::time::as_nanos;
use crate::wait::WakeList;

/// Where messages that will not be delivered again go.
pub(crate) trait DeadLetterSink<T> {
    /// Publishes `letter`, or hands it back with why not.
    fn send(&self, letter: DeadLetter<T>) -> Result<(), (SinkError, DeadLetter<T>)>;
}

/// Why a dead letter was not published.
pub(crate) enum SinkError {
    /// Not now (the dead-letter topic is full, or its router refused): try again later.
    Later,
    /// Never: the dead-letter topic is closed.
    Closed,
}

/// How long a message waits before its move to a full dead-letter topic is retried: this,
/// or the group's `ack_wait` if shorter, but never less than [`DEAD_LETTER_RETRY_MIN`].
const DEAD_LETTER_RETRY: u64 = 10_000_000;

/// The shortest wait before a move to a full dead-letter topic is retried (1 ms): long
/// enough that one receive never meets the same message again, so a receive with a
/// tiny `ack_wait` does not spin while the dead-letter topic stays full.
const DEAD_LETTER_RETRY_MIN: u64 = 1_000_000;

/// Why a message went to the dead-letter topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeadLetterReason {
    /// It was delivered `max_deliveries` times without an ack.
    MaxDeliveries,
    /// A member rejected it.
    Rejected,
}

/// A message sent to a dead-letter topic, with where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadLetter<T> {
    /// The origin topic's name, if it belongs to a broker.
    pub topic: Option<String>,
    /// The group that gave up on it.
    pub group: String,
    /// The origin partition.
    pub partition: u32,
    /// The origin offset.
    pub offset: u64,
    /// How many times it was delivered.
    pub deliveries: u32,
    /// Why it was dead-lettered.
    pub reason: DeadLetterReason,
    /// The message.
    pub value: T,
}

impl<T> DeadLetter<T> {
    /// A dead letter of `value`, which `group` gave up on after `deliveries` deliveries
    /// for `reason`, from `partition` and `offset` of the topic named `topic` (None for a
    /// topic without a name). Groups make their own; this is for code that relays dead
    /// letters kept elsewhere (a durable group's dead-letter log, say) to a dead-letter
    /// topic.
    ///
    /// # Examples
    ///
    /// ```
    /// use memq_core::{DeadLetter, DeadLetterReason};
    ///
    /// let letter = DeadLetter::new(None, "workers".into(), 0, 7, 3, DeadLetterReason::MaxDeliveries, "job 7");
    /// assert_eq!((letter.offset, letter.deliveries, letter.value), (7, 3, "job 7"));
    /// ```
    pub fn new(
        topic: Option<String>,
        group: String,
        partition: u32,
        offset: u64,
        deliveries: u32,
        reason: DeadLetterReason,
        value: T,
    ) -> Self {
        DeadLetter {
            topic,
            group,
            partition,
            offset,
            deliveries,
            reason,
            value,
        }
    }
}

/// A letter, published or not, identified as the group knows it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Letter {
    /// The partition it comes from.
    pub(super) partition: usize,
    pub(super) offset: u64,
    pub(super) deliveries: u32,
    pub(super) reason: DeadLetterReason,
}

/// How a try to publish a dead letter ended.
enum Sent {
    /// Published (`true`), or nothing to publish: no dead-letter topic (`true`), or the
    /// value is gone from the log (`false`).
    Over(bool),
    /// The dead-letter topic is full: try again later.
    Later,
    /// The dead-letter topic is closed: never.
    Closed,
}

/// Moves `letter` to the dead-letter topic: publishes it outside every lock, with `held`
/// (the value a member rejected, or one copied under the lock) or else the value still in
/// the log; then settles the message:
/// - published (or there is no dead-letter topic): removed and counted dead-lettered;
/// - no value left (evicted from the log since it was picked): removed and counted as
///   evicted unacknowledged, as any evicted message is;
/// - the dead-letter topic is full: kept in the group, bound for the dead-letter topic,
///   and the move is tried again shortly (without spinning), not delivered again;
/// - the dead-letter topic is closed: delivered again (under the backoff), and from
///   then on the group delivers messages past `max_deliveries` again instead of moving
///   them, so that none is lost.
pub(super) fn move_letter<T: Clone>(
    shared: &Shared<T>,
    group: &GroupShared<T>,
    letter: Letter,
    held: Option<T>,
) {
    let settings = settings_of(group);
    let sent = publish(shared, group, settings, letter, held);
    let now = settings.now();
    let mut wl = WakeList::new();
    let p = letter.partition;
    let mut log = shared.parts[p].log.lock();
    let Some(g) = log.group(group.ids[p]) else {
        return;
    };
    let (acks, waiters) = acks_of(g);
    settle(acks, settings, letter, sent, now);
    waiters.notify_one(&mut wl);
    release_hold(shared, group, p, log, &mut wl);
}

/// Publishes `letter` (with `held`, else the value still in the log) to the group's
/// dead-letter topic, if it has one, outside every lock. A move that must wait keeps its
/// value for the retry (see `AckSettings::parcels`); one that is over (made, or never to
/// be made: the topic closed) lets go of what an earlier try kept, dropped here.
fn publish<T: Clone>(
    shared: &Shared<T>,
    group: &GroupShared<T>,
    settings: &AckSettings<T>,
    letter: Letter,
    held: Option<T>,
) -> Sent {
    let Some(sink) = &settings.dead_letter else {
        return Sent::Over(true);
    };
    let (p, offset) = (letter.partition, letter.offset);
    let value = held.or_else(|| {
        // On a ring partition, through the group's hold (under the partition's lock, as
        // the hold is used).
        let log = shared.parts[p].log.lock();
        #[cfg(target_has_atomic = "64")]
        if let Some(hold) = group.holds.get(p) {
            return hold.lock().as_mut().and_then(|h| h.read(offset).ok());
        }
        log.entry_at(offset).map(|e| e.value)
    });
    let Some(value) = value else {
        drop(settings.parcels.lock().remove(&(p, offset)));
        return Sent::Over(false);
    };
    let sent = sink.send(DeadLetter {
        topic: shared.name.clone(),
        group: group.name.clone(),
        partition: p as u32,
        offset,
        deliveries: letter.deliveries,
        reason: letter.reason,
        value,
    });
    let (sent, spent) = match sent {
        Ok(()) => (
            Sent::Over(true),
            settings.parcels.lock().remove(&(p, offset)),
        ),
        Err((SinkError::Later, letter)) => (
            Sent::Later,
            settings.parcels.lock().insert((p, offset), letter.value),
        ),
        Err((SinkError::Closed, letter)) => {
            let kept = settings.parcels.lock().remove(&(p, offset));
            drop(letter);
            (Sent::Closed, kept)
        }
    };
    drop(spent);
    sent
}

/// Settles `letter` in the partition's lease state (locked) as `sent` says, as of `now`.
fn settle<T>(acks: &mut Acks, settings: &AckSettings<T>, letter: Letter, sent: Sent, now: u64) {
    match sent {
        Sent::Over(moved) => acks.dead_letter_done(letter.offset, moved),
        Sent::Later => {
            let retry = DEAD_LETTER_RETRY
                .min(settings.ack_wait)
                .max(DEAD_LETTER_RETRY_MIN);
            acks.dead_letter_later(letter.offset, letter.reason, now, retry);
        }
        Sent::Closed => {
            settings
                .dead_letter_closed
                .store(1, crate::sync::Ordering::Release);
            let delay = settings.backoff.delay(letter.deliveries);
            acks.dead_letter_refused(letter.offset, now, as_nanos(delay));
        }
    }
}
