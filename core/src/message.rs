//! What a reader receives: the value and where it came from.

use core::time::Duration;

/// Where a publish put its messages: `count` messages at offsets
/// `offset..offset + count` of `partition` (see [`Receipt::offsets`]).
///
/// A single publish has a `count` of 1. A batch publish gives the first message's offset
/// and the batch's length; an empty batch publishes nothing and succeeds with a `count`
/// of 0, its `offset` the one the partition's next message will get (so the range is
/// empty) and its `partition` where the batch was routed. It does not wait for room, but
/// fails like any publish on a closed topic or a partition that does not exist.
///
/// # Examples
///
/// ```
/// # use memq_core as memq;
/// use memq::Topic;
///
/// let topic = Topic::with_capacity(8)?;
/// assert_eq!(topic.try_publish("a")?.offsets(), 0..1);
/// let batch = topic.try_publish_batch(vec!["b", "c"])?;
/// assert_eq!((batch.offset, batch.count), (1, 2));
/// let empty = topic.try_publish_batch(Vec::new())?;
/// assert!(empty.is_empty());
/// assert_eq!(empty.offsets(), 3..3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Receipt {
    /// The partition (0 on a topic with one partition).
    pub partition: u32,
    /// The offset of the (first) message published; for an empty batch, the offset the
    /// partition's next message will get.
    pub offset: u64,
    /// How many messages were published: 1 for a single message, the batch's length for
    /// a batch (0 for an empty one). A batch is never longer than the topic's capacity,
    /// so this saturates at `u32::MAX` only for a ring of more than 4 billion slots.
    pub count: u32,
}

impl Receipt {
    /// The offsets of the messages published: `offset..offset + count`.
    #[inline]
    pub fn offsets(&self) -> core::ops::Range<u64> {
        self.offset..self.offset + u64::from(self.count)
    }

    /// Whether nothing was published (an empty batch).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// A delivered message: the value with its offset, partition and timestamp.
///
/// The value was cloned once out of the log; reading it through [`Message::value`] or
/// taking it with [`Message::into_value`] clones nothing more.
///
/// A message does not carry the key it was published with: a key only chooses the
/// partition ([`Topic::publish_keyed`](crate::Topic::publish_keyed)), and the topic stores
/// nothing of it, so unkeyed and keyed publishes cost the same per message. To read the
/// key back, publish it in the value (a `Topic<(K, V)>`, or a struct with a key field).
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
