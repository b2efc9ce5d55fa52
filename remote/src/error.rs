//! Errors of the Redis topics: what failed ([`Error`]), and a failed publish that hands
//! its messages back ([`PublishError`]). Values only: nothing here panics.

use std::fmt;

/// Why an operation on a Redis topic failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Redis answered with an error, or the connection failed (the connection reconnects
    /// with backoff on its own; the operation that failed is not retried).
    Redis(redis::RedisError),
    /// A bad argument: an empty or ill-formed topic or group name, zero partitions, a zero
    /// `ack_wait`, a delivery operation on an automatic-commit group.
    InvalidArgument(&'static str),
    /// A partition index past the topic's partition count.
    PartitionOutOfRange {
        /// The partition asked for.
        partition: u32,
        /// The topic's partition count.
        partitions: u32,
    },
    /// A start (`StartAt::Offset`) or seek past the end of a partition, refused as memq
    /// refuses it: offsets up to `high` are valid (`high` is the next offset to be
    /// published there, so a reader may wait at the end, never past it).
    OffsetOutOfRange {
        /// The offset asked for.
        offset: u64,
        /// The partition whose end it is past.
        partition: u32,
        /// The next offset to be published on that partition.
        high: u64,
    },
    /// The topic exists in Redis with another partition count.
    PartitionMismatch {
        /// The count recorded in Redis.
        existing: u32,
        /// The count asked for.
        requested: u32,
    },
    /// The lease of a delivery ran out and the message went back to the group (another
    /// member may hold it now), or it was settled already.
    LeaseExpired,
    /// Redis answered with something memq-redis did not expect (for example an entry ID
    /// that memq-redis did not write, in a stream it owns).
    Protocol(String),
    /// The reader is closed (its tasks ended).
    Closed,
    /// No runtime to run a reader's or a bridge's tasks on: memq-redis runs them on the
    /// Tokio runtime it is called from, or, with the `smol` feature, on smol.
    NoRuntime,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Redis(e) => write!(f, "redis: {e}"),
            Error::InvalidArgument(why) => write!(f, "invalid argument: {why}"),
            Error::PartitionOutOfRange {
                partition,
                partitions,
            } => write!(
                f,
                "partition {partition} out of range (the topic has {partitions})"
            ),
            Error::OffsetOutOfRange {
                offset,
                partition,
                high,
            } => write!(
                f,
                "offset {offset} is past the end of partition {partition} (next offset is {high})"
            ),
            Error::PartitionMismatch {
                existing,
                requested,
            } => write!(
                f,
                "the topic exists with {existing} partitions, not {requested}"
            ),
            Error::LeaseExpired => f.write_str("the lease ran out or the delivery was settled"),
            Error::Protocol(what) => write!(f, "unexpected reply from redis: {what}"),
            Error::Closed => f.write_str("closed"),
            Error::NoRuntime => f.write_str(
                "no runtime: call from a Tokio runtime, or enable memq-redis's smol feature",
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Redis(e) => Some(e),
            _ => None,
        }
    }
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        Error::Redis(e)
    }
}

/// A publish that failed, with its message (or its whole batch) handed back, never
/// dropped. Whether Redis stored it is unknown when the connection failed after the
/// command was sent: publishing it again is at-least-once (it may then be stored twice).
/// A batch sent as one `MULTI`/`EXEC` transaction ([`BatchMode::Atomic`], the default)
/// was stored whole or not at all; a pipelined one ([`BatchMode::Pipelined`]) may have
/// been stored in part.
///
/// [`BatchMode::Atomic`]: crate::BatchMode::Atomic
/// [`BatchMode::Pipelined`]: crate::BatchMode::Pipelined
pub struct PublishError<T> {
    /// What failed.
    pub error: Error,
    /// The message or batch that was being published.
    pub messages: T,
}

impl<T> PublishError<T> {
    /// The message or batch, to publish again or keep.
    pub fn into_inner(self) -> T {
        self.messages
    }
}

impl<T> fmt::Debug for PublishError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PublishError")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<T> fmt::Display for PublishError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "publish failed: {}", self.error)
    }
}

impl<T> std::error::Error for PublishError<T> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// Why a receive returned without a message.
#[derive(Debug)]
#[non_exhaustive]
pub enum RecvError {
    /// Retention (`MAXLEN`/`MINID`) trimmed this many messages before the subscriber
    /// read them; the next receive goes on with the oldest message kept (as memq's
    /// `RecvError::Lagged`).
    Lagged(u64),
    /// The reader is closed.
    Closed,
    /// A Redis operation failed in a way retrying cannot mend (see [`Error`]).
    Error(Error),
}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvError::Lagged(n) => write!(f, "lagged: {n} messages were trimmed unread"),
            RecvError::Closed => f.write_str("closed"),
            RecvError::Error(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for RecvError {}
