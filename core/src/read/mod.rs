//! Readers: everything that takes messages out of a partition's log for a user.
//!
//! - [`subscriber`]: broadcast readers, each with its own position and read-ahead.
//! - [`group`]: consumer groups, whose members share one position per partition (and,
//!   on a one-partition topic, a pool of messages fetched ahead).
//!
//! This module itself holds what both kinds of reader share: turning a log entry into
//! the user's [`Message`], and resolving a [`StartAt`] on a locked log.
//!
//! Layer: above the log ([`crate::log`]), the wait lists ([`crate::wait`]) and the sync
//! facade ([`crate::sync`]); below the explicit-ack layer ([`crate::ack`]), which builds
//! on groups. Readers reach a partition through the topic's shared state
//! ([`crate::partition::Shared`]): its locks, clock and wake-ups of publishers.

use crate::config::StartAt;
use crate::error::Error;
use crate::log::Entry;
use crate::message::Message;
use crate::partition::PartLog;

pub(crate) mod group;
pub(crate) mod subscriber;

/// The user's [`Message`] for entry `e` of partition `p`; `stamp` is the topic clock's
/// origin, to which the entry's stored time is added (`None` without a clock).
pub(crate) fn to_message<T>(
    p: usize,
    e: Entry<T>,
    stamp: Option<core::time::Duration>,
) -> Message<T> {
    Message {
        offset: e.offset,
        partition: p as u32,
        timestamp: stamp
            .map(|origin| origin.saturating_add(core::time::Duration::from_nanos(e.ts))),
        value: e.value,
    }
}

/// Resolves a start position on a locked log.
pub(crate) fn start_position<T>(log: &PartLog<T>, p: usize, start: StartAt) -> Result<u64, Error> {
    match start {
        StartAt::Earliest => Ok(log.first()),
        StartAt::Latest => Ok(log.high),
        StartAt::Offset(offset) if offset <= log.high => Ok(offset),
        StartAt::Offset(offset) => Err(Error::OffsetOutOfRange {
            offset,
            partition: p as u32,
            high: log.high,
        }),
    }
}
