//! Error types. Publishing errors hand the message back; none of them needs `T: Debug`.

use core::fmt;

/// Why a publish did not happen. The message is handed back: see
/// [`PublishError::into_inner`].
#[derive(PartialEq, Eq, Clone)]
#[non_exhaustive]
pub enum PublishError<T> {
    /// The partition is full and its overflow policy does not evict (`Block` from
    /// `try_publish`, or `Reject`), or the batch is larger than the capacity.
    Full(T),
    /// The topic is closed.
    Closed(T),
    /// An explicit partition, or the one a user router chose, does not exist.
    InvalidPartition(T),
}

impl<T> PublishError<T> {
    /// The message that was not published.
    pub fn into_inner(self) -> T {
        match self {
            Self::Full(v) | Self::Closed(v) | Self::InvalidPartition(v) => v,
        }
    }

    /// Whether the topic was closed.
    pub fn is_closed(&self) -> bool {
        matches!(self, Self::Closed(_))
    }

    /// Whether the partition was full.
    pub fn is_full(&self) -> bool {
        matches!(self, Self::Full(_))
    }
}

impl<T> fmt::Debug for PublishError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full(_) => f.write_str("Full(..)"),
            Self::Closed(_) => f.write_str("Closed(..)"),
            Self::InvalidPartition(_) => f.write_str("InvalidPartition(..)"),
        }
    }
}

impl<T> fmt::Display for PublishError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Full(_) => "topic partition is full",
            Self::Closed(_) => "topic is closed",
            Self::InvalidPartition(_) => "partition does not exist",
        })
    }
}

/// Why an awaiting or blocking receive returned without a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecvError {
    /// The reader fell behind the retained window: this many messages were evicted or
    /// expired before it read them. The next receive continues at the oldest retained one.
    Lagged(u64),
    /// The topic is closed and everything retained for this reader has been read.
    Closed,
}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Lagged(n) => write!(f, "reader lagged behind and missed {n} messages"),
            Self::Closed => f.write_str("topic is closed and drained"),
        }
    }
}

/// Why a non-waiting receive returned without a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TryRecvError {
    /// Nothing to read right now.
    Empty,
    /// See [`RecvError::Lagged`].
    Lagged(u64),
    /// See [`RecvError::Closed`].
    Closed,
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("no message available"),
            Self::Lagged(n) => write!(f, "reader lagged behind and missed {n} messages"),
            Self::Closed => f.write_str("topic is closed and drained"),
        }
    }
}

impl From<RecvError> for TryRecvError {
    fn from(e: RecvError) -> Self {
        match e {
            RecvError::Lagged(n) => Self::Lagged(n),
            RecvError::Closed => Self::Closed,
        }
    }
}

/// Why a group member's conditional receive ([`Consumer::recv_if`]) returned without a
/// message.
///
/// [`Consumer::recv_if`]: crate::Consumer::recv_if
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecvIfError {
    /// The predicate declined the next message: it was not taken, and stays in the group
    /// for the next receive of any member, as if this receive had not happened.
    Declined,
    /// See [`RecvError::Lagged`].
    Lagged(u64),
    /// See [`RecvError::Closed`].
    Closed,
}

impl fmt::Display for RecvIfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Declined => f.write_str("the next message was declined and left in the group"),
            Self::Lagged(n) => write!(f, "reader lagged behind and missed {n} messages"),
            Self::Closed => f.write_str("topic is closed and drained"),
        }
    }
}

impl From<RecvError> for RecvIfError {
    fn from(e: RecvError) -> Self {
        match e {
            RecvError::Lagged(n) => Self::Lagged(n),
            RecvError::Closed => Self::Closed,
        }
    }
}

/// Why a group member's non-waiting conditional receive
/// ([`Consumer::try_recv_if`]) returned without a message.
///
/// [`Consumer::try_recv_if`]: crate::Consumer::try_recv_if
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TryRecvIfError {
    /// See [`RecvIfError::Declined`].
    Declined,
    /// Nothing to read right now.
    Empty,
    /// See [`RecvError::Lagged`].
    Lagged(u64),
    /// See [`RecvError::Closed`].
    Closed,
}

impl fmt::Display for TryRecvIfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Declined => RecvIfError::Declined.fmt(f),
            Self::Empty => f.write_str("no message available"),
            Self::Lagged(n) => write!(f, "reader lagged behind and missed {n} messages"),
            Self::Closed => f.write_str("topic is closed and drained"),
        }
    }
}

impl From<RecvError> for TryRecvIfError {
    fn from(e: RecvError) -> Self {
        match e {
            RecvError::Lagged(n) => Self::Lagged(n),
            RecvError::Closed => Self::Closed,
        }
    }
}

impl From<RecvIfError> for TryRecvIfError {
    fn from(e: RecvIfError) -> Self {
        match e {
            RecvIfError::Declined => Self::Declined,
            RecvIfError::Lagged(n) => Self::Lagged(n),
            RecvIfError::Closed => Self::Closed,
        }
    }
}

/// Why a receive with a time limit returned without a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecvTimeoutError {
    /// The time ran out with nothing to read.
    Timeout,
    /// See [`RecvError::Lagged`].
    Lagged(u64),
    /// See [`RecvError::Closed`].
    Closed,
}

impl fmt::Display for RecvTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Timeout => f.write_str("timed out waiting for a message"),
            Self::Lagged(n) => write!(f, "reader lagged behind and missed {n} messages"),
            Self::Closed => f.write_str("topic is closed and drained"),
        }
    }
}

impl From<RecvError> for RecvTimeoutError {
    fn from(e: RecvError) -> Self {
        match e {
            RecvError::Lagged(n) => Self::Lagged(n),
            RecvError::Closed => Self::Closed,
        }
    }
}

/// A subscriber stream's error item: messages were missed (see [`RecvError::Lagged`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lagged(pub u64);

impl fmt::Display for Lagged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "reader lagged behind and missed {} messages", self.0)
    }
}

/// The largest offset [`TopicConfig::next_offsets`](crate::TopicConfig::next_offsets)
/// may give a partition's first message: 2^63. Offsets go on from there for longer than
/// any program runs, and never reach the values at the top of the range that memq keeps
/// for itself.
pub const MAX_NEXT_OFFSET: u64 = 1 << 63;

/// Bad input to a configuration, lookup or positioning call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A topic needs room for at least one message.
    ZeroCapacity,
    /// A topic needs at least one partition.
    ZeroPartitions,
    /// A TTL was set without a clock to measure it.
    TtlWithoutClock,
    /// The ring for this capacity cannot be allocated.
    CapacityTooLarge {
        /// The capacity asked for.
        capacity: usize,
    },
    /// The table of this many partitions cannot be allocated.
    TooManyPartitions {
        /// The partition count asked for.
        partitions: u32,
    },
    /// `TopicConfig::next_offsets` gave a number of offsets other than the partition
    /// count.
    OffsetsPerPartition {
        /// How many offsets were given.
        given: usize,
        /// The partition count.
        partitions: u32,
    },
    /// `TopicConfig::next_offsets` gave a partition a first offset past
    /// [`MAX_NEXT_OFFSET`].
    NextOffsetTooLarge {
        /// The partition.
        partition: u32,
        /// The offset given for it.
        offset: u64,
    },
    /// The partition index is not below the topic's partition count.
    PartitionOutOfRange {
        /// The index asked for.
        partition: u32,
        /// How many partitions the topic has.
        partitions: u32,
    },
    /// The partition exists, but this subscriber does not read it (it was made for other
    /// partitions, with `subscribe_partition`).
    PartitionNotRead {
        /// The partition asked for.
        partition: u32,
    },
    /// The offset is past the end of the log (offsets up to `high` are valid; `high` is
    /// the next offset to be published).
    OffsetOutOfRange {
        /// The offset asked for.
        offset: u64,
        /// The partition it was asked for.
        partition: u32,
        /// The next offset to be published on that partition.
        high: u64,
    },
    /// A subscriber reading several partitions was asked for one offset; use
    /// `seek_partition`.
    PartitionRequired,
    /// No topic of that name exists in the broker.
    UnknownTopic(alloc::string::String),
    /// A topic of that name already exists in the broker.
    TopicExists(alloc::string::String),
    /// No group of that name exists on the topic.
    UnknownGroup(alloc::string::String),
    /// The group exists with the other acknowledgement mode (automatic vs explicit).
    GroupModeMismatch(alloc::string::String),
    /// Explicit acknowledgements need a clock (on the topic or in the `AckConfig`).
    ClockRequired,
    /// `max_in_flight` must be at least 1.
    ZeroInFlight,
    /// A TTL must be longer than zero (a message would expire as it is published).
    ZeroTtl,
    /// `ack_wait` must be longer than zero (every lease would have run out when handed
    /// out, and the message go to another member at once).
    ZeroAckWait,
    /// `max_deliveries` must be at least 1 (leave it unset for no limit).
    ZeroMaxDeliveries,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroCapacity => f.write_str("topic capacity must be at least 1"),
            Self::ZeroPartitions => f.write_str("topic must have at least 1 partition"),
            Self::TtlWithoutClock => f.write_str("a ttl needs a clock"),
            Self::CapacityTooLarge { capacity } => {
                write!(f, "cannot allocate a log of capacity {capacity}")
            }
            Self::TooManyPartitions { partitions } => {
                write!(f, "cannot allocate a topic of {partitions} partitions")
            }
            Self::OffsetsPerPartition { given, partitions } => write!(
                f,
                "{given} next offsets given for a topic of {partitions} partitions (one per \
                 partition)"
            ),
            Self::NextOffsetTooLarge { partition, offset } => write!(
                f,
                "next offset {offset} of partition {partition} is past the largest a topic \
                 starts at ({MAX_NEXT_OFFSET})"
            ),
            Self::PartitionOutOfRange {
                partition,
                partitions,
            } => write!(
                f,
                "partition {partition} out of range (topic has {partitions})"
            ),
            Self::PartitionNotRead { partition } => {
                write!(f, "this subscriber does not read partition {partition}")
            }
            Self::OffsetOutOfRange {
                offset,
                partition,
                high,
            } => write!(
                f,
                "offset {offset} is past the end of partition {partition} (next offset is {high})"
            ),
            Self::PartitionRequired => {
                f.write_str("subscriber reads several partitions: name the partition")
            }
            Self::UnknownTopic(name) => write!(f, "unknown topic {name:?}"),
            Self::TopicExists(name) => write!(f, "topic {name:?} already exists"),
            Self::UnknownGroup(name) => write!(f, "unknown group {name:?}"),
            Self::GroupModeMismatch(name) => {
                write!(
                    f,
                    "group {name:?} exists with the other acknowledgement mode"
                )
            }
            Self::ClockRequired => f.write_str("explicit acknowledgements need a clock"),
            Self::ZeroInFlight => f.write_str("max_in_flight must be at least 1"),
            Self::ZeroTtl => f.write_str("a ttl must be longer than zero"),
            Self::ZeroAckWait => f.write_str("ack_wait must be longer than zero"),
            Self::ZeroMaxDeliveries => {
                f.write_str("max_deliveries must be at least 1 (unset means no limit)")
            }
        }
    }
}

// `core::error::Error`, so the error types are errors without std as well.
impl<T> core::error::Error for PublishError<T> {}
impl core::error::Error for RecvError {}
impl core::error::Error for TryRecvError {}
impl core::error::Error for RecvTimeoutError {}
impl core::error::Error for RecvIfError {}
impl core::error::Error for TryRecvIfError {}
impl core::error::Error for Lagged {}
impl core::error::Error for Error {}
