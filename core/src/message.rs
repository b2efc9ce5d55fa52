//! What a reader receives: the value and where it came from.

use core::time::Duration;

/// Where a published message landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Receipt {
    /// The partition (0 on a topic with one partition).
    pub partition: u32,
    /// The message's offset in that partition (the first one, for a batch).
    pub offset: u64,
}

/// A delivered message: the value with its offset, partition and timestamp.
///
/// The value was cloned once out of the log; reading it through [`Message::value`] or
/// taking it with [`Message::into_value`] clones nothing more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message<T> {
    pub(crate) offset: u64,
    pub(crate) partition: u32,
    pub(crate) timestamp: Option<Duration>,
    pub(crate) value: T,
}

impl<T> Message<T> {
    /// The message's offset within its partition.
    #[inline]
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The partition the message was published to.
    #[inline]
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// When it was published, by the topic's clock; `None` on topics without a clock.
    #[inline]
    pub fn timestamp(&self) -> Option<Duration> {
        self.timestamp
    }

    /// The value.
    #[inline]
    pub fn value(&self) -> &T {
        &self.value
    }

    /// The value, by value.
    #[inline]
    pub fn into_value(self) -> T {
        self.value
    }
}

impl<T> core::ops::Deref for Message<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}
