//! One API over the two kinds of topic: [`AnyTopic`] is a memq topic in memory or a
//! [`RedisTopic`], with the consumer ([`AnyConsumer`]) and delivery ([`AnyDelivery`]) to
//! match. Code written against it moves from one process to many by changing only how
//! the topic is made (`examples/redis_worker.rs` runs one worker program on both).
//!
//! The methods read as memq's and memq-store's do: `publish`, `publish_keyed`,
//! `publish_to`, `group_acked(name, start, config)`, `recv`, `ack`, `nack`,
//! `nack_after`, `reject`. They are async here because Redis is a network away; the
//! in-memory side awaits memq's own futures.

use std::time::Duration;

use bytes::Bytes;
use memq_core::{AckConfig, DeadLetter, StartAt, Topic};

use crate::{Error, GroupConfig, RecvError, RedisConsumer, RedisDelivery, RedisTopic};

/// A topic in memory or on Redis.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use memq_core::{StartAt, Topic, TopicConfig};
/// use memq_redis::any::{AnyGroupConfig, AnyTopic};
///
/// // In memory; `AnyTopic::Redis(RedisTopic::open(..).await?)` runs the same code on Redis.
/// let topic = AnyTopic::Memory(Topic::new(TopicConfig::new(64).partitions(2))?);
/// let mut worker = topic
///     .group_acked("jobs", StartAt::Earliest, AnyGroupConfig::new(Duration::from_secs(30)))
///     .await?;
/// topic.publish_keyed("user-7", "resize 1.png").await?;
/// let job = worker.recv().await?;
/// assert_eq!(job.value().as_ref(), b"resize 1.png");
/// job.ack().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub enum AnyTopic {
    /// A memq topic of this process.
    Memory(Topic<Bytes>),
    /// A topic on Redis Streams.
    Redis(RedisTopic),
}

/// Where a publish landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnyReceipt {
    /// The partition.
    pub partition: u32,
    /// The offset.
    pub offset: u64,
}

/// Why an operation on an [`AnyTopic`] failed, in the same words for both kinds.
#[derive(Debug)]
#[non_exhaustive]
pub enum AnyError {
    /// No room (an in-memory topic under `Reject`).
    Full,
    /// The topic (or the reader) is closed.
    Closed,
    /// The reader missed this many messages (evicted or trimmed).
    Lagged(u64),
    /// The lease ran out, or the delivery was settled.
    LeaseExpired,
    /// A partition out of range.
    InvalidPartition,
    /// A dead-letter topic of the other kind than the topic.
    KindMismatch,
    /// An error of the in-memory topic.
    Memory(memq_core::Error),
    /// An error of the Redis topic.
    Redis(Error),
}

impl std::fmt::Display for AnyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AnyError::Full => f.write_str("full"),
            AnyError::Closed => f.write_str("closed"),
            AnyError::Lagged(n) => write!(f, "lagged: {n} messages missed"),
            AnyError::LeaseExpired => f.write_str("the lease ran out or the delivery was settled"),
            AnyError::InvalidPartition => f.write_str("partition out of range"),
            AnyError::KindMismatch => {
                f.write_str("the dead-letter topic is not of the same kind as the topic")
            }
            AnyError::Memory(e) => e.fmt(f),
            AnyError::Redis(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for AnyError {}

impl From<Error> for AnyError {
    fn from(e: Error) -> Self {
        match e {
            Error::LeaseExpired => AnyError::LeaseExpired,
            Error::PartitionOutOfRange { .. } => AnyError::InvalidPartition,
            Error::Closed => AnyError::Closed,
            e => AnyError::Redis(e),
        }
    }
}

impl From<RecvError> for AnyError {
    fn from(e: RecvError) -> Self {
        match e {
            RecvError::Lagged(n) => AnyError::Lagged(n),
            RecvError::Closed => AnyError::Closed,
            RecvError::Error(e) => e.into(),
        }
    }
}

impl From<memq_core::RecvError> for AnyError {
    fn from(e: memq_core::RecvError) -> Self {
        match e {
            memq_core::RecvError::Lagged(n) => AnyError::Lagged(n),
            _ => AnyError::Closed,
        }
    }
}

impl From<memq_core::AckError> for AnyError {
    fn from(e: memq_core::AckError) -> Self {
        match e {
            memq_core::AckError::LeaseExpired => AnyError::LeaseExpired,
            _ => AnyError::Closed,
        }
    }
}

/// A failed publish, with its message handed back.
#[derive(Debug)]
pub struct AnyPublishError {
    /// What failed.
    pub error: AnyError,
    /// The message.
    pub message: Bytes,
}

impl std::fmt::Display for AnyPublishError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "publish failed: {}", self.error)
    }
}

impl std::error::Error for AnyPublishError {}

/// Where an [`AnyTopic`]'s dead letters go: a topic of the same kind.
#[derive(Clone, Debug)]
pub enum AnyDeadLetters {
    /// A memq topic of dead letters.
    Memory(Topic<DeadLetter<Bytes>>),
    /// A Redis topic (each entry carries its origin, [`crate::DeadLetterOrigin`]).
    Redis(RedisTopic),
}

/// The settings of an explicit-ack group, for either kind.
#[derive(Clone, Debug)]
pub struct AnyGroupConfig {
    ack_wait: Duration,
    max_deliveries: Option<u32>,
    dead_letter: Option<AnyDeadLetters>,
}

impl AnyGroupConfig {
    /// Leases of `ack_wait`, unlimited deliveries, no dead-letter topic.
    pub fn new(ack_wait: Duration) -> Self {
        AnyGroupConfig {
            ack_wait,
            max_deliveries: None,
            dead_letter: None,
        }
    }

    /// Dead-letters a message after `n` deliveries.
    pub fn max_deliveries(mut self, n: u32) -> Self {
        self.max_deliveries = Some(n);
        self
    }

    /// Where dead letters go.
    pub fn dead_letter(mut self, to: AnyDeadLetters) -> Self {
        self.dead_letter = Some(to);
        self
    }
}

fn memory_publish_error(e: memq_core::PublishError<Bytes>) -> AnyPublishError {
    let error = match &e {
        memq_core::PublishError::Full(_) => AnyError::Full,
        memq_core::PublishError::InvalidPartition(_) => AnyError::InvalidPartition,
        _ => AnyError::Closed,
    };
    AnyPublishError {
        error,
        message: e.into_inner(),
    }
}

fn redis_publish_error(e: crate::PublishError<Bytes>) -> AnyPublishError {
    AnyPublishError {
        error: e.error.into(),
        message: e.messages,
    }
}

impl AnyTopic {
    /// Its partition count.
    pub fn partitions(&self) -> u32 {
        match self {
            AnyTopic::Memory(t) => t.partitions(),
            AnyTopic::Redis(t) => t.partitions(),
        }
    }

    /// Publishes `payload` (round-robin over the partitions).
    ///
    /// # Errors
    ///
    /// [`AnyPublishError`], with the payload.
    pub async fn publish(&self, payload: impl Into<Bytes>) -> Result<AnyReceipt, AnyPublishError> {
        match self {
            AnyTopic::Memory(t) => t
                .publish(payload.into())
                .await
                .map(|r| AnyReceipt {
                    partition: r.partition,
                    offset: r.offset,
                })
                .map_err(memory_publish_error),
            AnyTopic::Redis(t) => t
                .publish(payload)
                .await
                .map(|r| AnyReceipt {
                    partition: r.partition,
                    offset: r.offset,
                })
                .map_err(redis_publish_error),
        }
    }

    /// Publishes `payload` with `key`, to the partition memq's key hash gives it (the
    /// same index for both kinds).
    ///
    /// # Errors
    ///
    /// [`AnyPublishError`], with the payload.
    pub async fn publish_keyed(
        &self,
        key: impl Into<Bytes>,
        payload: impl Into<Bytes>,
    ) -> Result<AnyReceipt, AnyPublishError> {
        match self {
            AnyTopic::Memory(t) => t
                .publish_keyed(key.into(), payload.into())
                .await
                .map(|r| AnyReceipt {
                    partition: r.partition,
                    offset: r.offset,
                })
                .map_err(memory_publish_error),
            AnyTopic::Redis(t) => t
                .publish_keyed(key, payload)
                .await
                .map(|r| AnyReceipt {
                    partition: r.partition,
                    offset: r.offset,
                })
                .map_err(redis_publish_error),
        }
    }

    /// Publishes `payload` to `partition`.
    ///
    /// # Errors
    ///
    /// [`AnyPublishError`], with the payload.
    pub async fn publish_to(
        &self,
        partition: u32,
        payload: impl Into<Bytes>,
    ) -> Result<AnyReceipt, AnyPublishError> {
        match self {
            AnyTopic::Memory(t) => t
                .publish_to(partition, payload.into())
                .await
                .map(|r| AnyReceipt {
                    partition: r.partition,
                    offset: r.offset,
                })
                .map_err(memory_publish_error),
            AnyTopic::Redis(t) => t
                .publish_to(partition, payload)
                .await
                .map(|r| AnyReceipt {
                    partition: r.partition,
                    offset: r.offset,
                })
                .map_err(redis_publish_error),
        }
    }

    /// Joins the explicit-ack group `name` (created at `start` if new).
    ///
    /// # Errors
    ///
    /// [`AnyError::KindMismatch`] for a dead-letter topic of the other kind; the errors of
    /// memq's `group_acked` and of [`RedisTopic::group`].
    pub async fn group_acked(
        &self,
        name: &str,
        start: StartAt,
        config: AnyGroupConfig,
    ) -> Result<AnyConsumer, AnyError> {
        match self {
            AnyTopic::Memory(t) => {
                let mut ack = AckConfig::new().ack_wait(config.ack_wait);
                if let Some(n) = config.max_deliveries {
                    ack = ack.max_deliveries(n);
                }
                match config.dead_letter {
                    Some(AnyDeadLetters::Memory(dlq)) => ack = ack.dead_letter(dlq),
                    Some(AnyDeadLetters::Redis(_)) => return Err(AnyError::KindMismatch),
                    None => {}
                }
                t.group_acked(name, start, ack)
                    .map(AnyConsumer::Memory)
                    .map_err(AnyError::Memory)
            }
            AnyTopic::Redis(t) => {
                let mut group = GroupConfig::acked(config.ack_wait);
                if let Some(n) = config.max_deliveries {
                    group = group.max_deliveries(n);
                }
                match config.dead_letter {
                    Some(AnyDeadLetters::Redis(dlq)) => group = group.dead_letter(dlq),
                    Some(AnyDeadLetters::Memory(_)) => return Err(AnyError::KindMismatch),
                    None => {}
                }
                Ok(AnyConsumer::Redis(t.group(name, start, group).await?))
            }
        }
    }
}

/// A member of an explicit-ack group of an [`AnyTopic`].
#[derive(Debug)]
pub enum AnyConsumer {
    /// Of a memq topic.
    Memory(memq_core::AckConsumer<Bytes>),
    /// Of a Redis topic.
    Redis(RedisConsumer),
}

impl AnyConsumer {
    /// Receives the next delivery.
    ///
    /// # Errors
    ///
    /// [`AnyError::Closed`] when the topic is closed and drained (memory) or the reader
    /// ended (Redis); [`AnyError::Lagged`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as memq's and memq-redis's receives.
    pub async fn recv(&mut self) -> Result<AnyDelivery, AnyError> {
        match self {
            AnyConsumer::Memory(c) => Ok(AnyDelivery::Memory(c.recv().await?)),
            AnyConsumer::Redis(c) => Ok(AnyDelivery::Redis(c.recv_delivery().await?)),
        }
    }
}

/// A leased message of either kind.
#[derive(Debug)]
pub enum AnyDelivery {
    /// From a memq topic.
    Memory(memq_core::Delivery<Bytes>),
    /// From a Redis topic.
    Redis(RedisDelivery),
}

impl AnyDelivery {
    /// Its bytes.
    pub fn value(&self) -> &Bytes {
        match self {
            AnyDelivery::Memory(d) => d.message().value(),
            AnyDelivery::Redis(d) => d.value(),
        }
    }

    /// Its offset.
    pub fn offset(&self) -> u64 {
        match self {
            AnyDelivery::Memory(d) => d.message().offset(),
            AnyDelivery::Redis(d) => d.offset(),
        }
    }

    /// Its partition.
    pub fn partition(&self) -> u32 {
        match self {
            AnyDelivery::Memory(d) => d.message().partition(),
            AnyDelivery::Redis(d) => d.partition(),
        }
    }

    /// How many times it has been delivered, this time included.
    pub fn deliveries(&self) -> u32 {
        match self {
            AnyDelivery::Memory(d) => d.deliveries(),
            AnyDelivery::Redis(d) => d.deliveries(),
        }
    }

    /// Acknowledges it.
    ///
    /// # Errors
    ///
    /// [`AnyError::LeaseExpired`] if its lease ran out.
    pub async fn ack(self) -> Result<(), AnyError> {
        match self {
            AnyDelivery::Memory(d) => Ok(d.ack()?),
            AnyDelivery::Redis(d) => Ok(d.ack().await?),
        }
    }

    /// Returns it to the group for redelivery after `delay` (on Redis, at most `ack_wait`).
    ///
    /// # Errors
    ///
    /// As [`AnyDelivery::ack`].
    pub async fn nack_after(self, delay: Duration) -> Result<(), AnyError> {
        match self {
            AnyDelivery::Memory(d) => Ok(d.nack_after(delay)?),
            AnyDelivery::Redis(d) => Ok(d.nack_after(delay).await?),
        }
    }

    /// Returns it to the group for redelivery at once.
    ///
    /// # Errors
    ///
    /// As [`AnyDelivery::ack`].
    pub async fn nack(self) -> Result<(), AnyError> {
        match self {
            AnyDelivery::Memory(d) => Ok(d.nack()?),
            AnyDelivery::Redis(d) => Ok(d.nack().await?),
        }
    }

    /// Sends it to the dead-letter topic now.
    ///
    /// # Errors
    ///
    /// As [`AnyDelivery::ack`].
    pub async fn reject(self) -> Result<(), AnyError> {
        match self {
            AnyDelivery::Memory(d) => Ok(d.reject()?),
            AnyDelivery::Redis(d) => Ok(d.reject().await?),
        }
    }
}
