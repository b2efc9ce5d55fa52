//! One API over the kinds of topic: [`AnyTopic`] is a memq topic in memory, a durable
//! memq topic on disk (`AnyTopic::Durable`, with the `durable` feature: memq-store's
//! `DurableTopic`), or a [`RedisTopic`], with the subscriber ([`AnySubscriber`]),
//! consumer ([`AnyConsumer`]) and delivery ([`AnyDelivery`]) to match. Code written
//! against it moves from memory to disk to many processes by changing only how the topic
//! is made (`examples/redis_worker.rs` runs one worker program on all three).
//!
//! The methods read as memq's and memq-store's do: `publish`, `publish_keyed`,
//! `publish_to`, `subscribe(start)`, `seek`, `seek_to`, `group_acked(name, start,
//! config)`, `recv`, `ack`, `nack`, `nack_after`, `reject`. They are async here because
//! Redis is a network away; the in-memory and durable sides await memq's and
//! memq-store's own futures.
//!
//! Where the kinds differ, the difference is in the docs of the method: dead letters go
//! to a topic of the same kind ([`AnyDeadLetters`]); a durable group always keeps its
//! dead letters in its own dead-letter log (memq-store's `DurableTopic::dead_letters`).

use std::time::Duration;

use bytes::Bytes;
use memq_core::{AckConfig, Backoff, DeadLetter, StartAt, Topic};
#[cfg(feature = "durable")]
use memq_store::{DurablePublishError, DurableRecvError, DurableTopic, StoreError};

use crate::{
    Error, GroupConfig, RecvError, RedisConsumer, RedisDelivery, RedisMessage, RedisSubscriber,
    RedisTopic,
};

/// A topic in memory, on disk (with the `durable` feature) or on Redis.
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
#[non_exhaustive]
pub enum AnyTopic {
    /// A memq topic of this process.
    Memory(Topic<Bytes>),
    /// A durable memq topic of this process: a segment log in a directory, whose
    /// messages, group positions and acks survive a restart (memq-store).
    #[cfg(feature = "durable")]
    Durable(DurableTopic),
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
    /// A start or seek past the end of a partition (offsets up to `high`, the next one
    /// to be published, are valid), refused alike by every kind.
    OffsetOutOfRange {
        /// The offset asked for.
        offset: u64,
        /// The partition whose end it is past.
        partition: u32,
        /// The next offset to be published on that partition.
        high: u64,
    },
    /// A dead-letter topic of the other kind than the topic.
    KindMismatch,
    /// A setting this kind of topic does not have (said, rather than ignored).
    Unsupported(&'static str),
    /// An error of the in-memory topic.
    Memory(memq_core::Error),
    /// An error of the durable topic (its disk, its group state).
    #[cfg(feature = "durable")]
    Durable(StoreError),
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
            AnyError::OffsetOutOfRange {
                offset,
                partition,
                high,
            } => write!(
                f,
                "offset {offset} is past the end of partition {partition} (next offset is {high})"
            ),
            AnyError::Unsupported(what) => write!(f, "not supported by this kind of topic: {what}"),
            AnyError::KindMismatch => {
                f.write_str("the dead-letter topic is not of the same kind as the topic")
            }
            AnyError::Memory(e) => e.fmt(f),
            #[cfg(feature = "durable")]
            AnyError::Durable(e) => e.fmt(f),
            AnyError::Redis(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for AnyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AnyError::Memory(e) => Some(e),
            #[cfg(feature = "durable")]
            AnyError::Durable(e) => Some(e),
            AnyError::Redis(e) => Some(e),
            _ => None,
        }
    }
}

impl From<memq_core::Error> for AnyError {
    fn from(e: memq_core::Error) -> Self {
        match e {
            memq_core::Error::OffsetOutOfRange {
                offset,
                partition,
                high,
            } => AnyError::OffsetOutOfRange {
                offset,
                partition,
                high,
            },
            memq_core::Error::PartitionOutOfRange { .. } => AnyError::InvalidPartition,
            e => AnyError::Memory(e),
        }
    }
}

#[cfg(feature = "durable")]
impl From<StoreError> for AnyError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::LeaseExpired => AnyError::LeaseExpired,
            e => AnyError::Durable(e),
        }
    }
}

#[cfg(feature = "durable")]
impl From<DurableRecvError> for AnyError {
    fn from(e: DurableRecvError) -> Self {
        match e {
            DurableRecvError::Lagged(n) => AnyError::Lagged(n),
            DurableRecvError::Store(e) => e.into(),
            // The async receives used here return neither `Empty` nor `Timeout`.
            _ => AnyError::Closed,
        }
    }
}

impl From<Error> for AnyError {
    fn from(e: Error) -> Self {
        match e {
            Error::LeaseExpired => AnyError::LeaseExpired,
            Error::PartitionOutOfRange { .. } => AnyError::InvalidPartition,
            Error::OffsetOutOfRange {
                offset,
                partition,
                high,
            } => AnyError::OffsetOutOfRange {
                offset,
                partition,
                high,
            },
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
#[non_exhaustive]
pub enum AnyDeadLetters {
    /// A memq topic of dead letters.
    Memory(Topic<DeadLetter<Bytes>>),
    /// The durable group's own dead-letter log, in the topic's directory (read it with
    /// memq-store's `DurableTopic::dead_letters(group, start)`; each carries its origin).
    /// A durable group keeps its dead letters there whether this is given or not.
    #[cfg(feature = "durable")]
    Durable,
    /// A Redis topic (each entry carries its origin, [`crate::DeadLetterOrigin`]).
    Redis(RedisTopic),
}

/// The settings of an explicit-ack group, for either kind.
#[derive(Clone, Debug)]
pub struct AnyGroupConfig {
    ack_wait: Duration,
    max_deliveries: Option<u32>,
    dead_letter: Option<AnyDeadLetters>,
    max_in_flight: Option<usize>,
    backoff: Option<Backoff>,
}

impl AnyGroupConfig {
    /// Leases of `ack_wait`, unlimited deliveries, no dead-letter topic.
    pub fn new(ack_wait: Duration) -> Self {
        AnyGroupConfig {
            ack_wait,
            max_deliveries: None,
            dead_letter: None,
            max_in_flight: None,
            backoff: None,
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

    /// At most `n` deliveries out and not settled per partition: memq's
    /// `AckConfig::max_in_flight` (per partition of the group), memq-redis's
    /// [`GroupConfig::max_in_flight`] (per member and partition). A durable group has no
    /// such bound: joining one with this set is [`AnyError::Unsupported`].
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = Some(n);
        self
    }

    /// Delays before redeliveries, by delivery count: memq's `AckConfig::backoff`,
    /// memq-redis's [`GroupConfig::backoff`] (on nacks and drops, each delay cut to
    /// `ack_wait`). A durable group redelivers at once: joining one with this set is
    /// [`AnyError::Unsupported`] (use `nack_after` there).
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = Some(backoff);
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

#[cfg(feature = "durable")]
fn durable_publish_error(e: DurablePublishError<Bytes>) -> AnyPublishError {
    let (error, message) = match e {
        DurablePublishError::Full(m) => (AnyError::Full, m),
        DurablePublishError::InvalidPartition(m) => (AnyError::InvalidPartition, m),
        DurablePublishError::Store(e, m) => (AnyError::Durable(e), m),
        other => (AnyError::Closed, other.into_inner()),
    };
    AnyPublishError { error, message }
}

fn receipt(partition: u32, offset: u64) -> AnyReceipt {
    AnyReceipt { partition, offset }
}

impl AnyTopic {
    /// Its partition count.
    pub fn partitions(&self) -> u32 {
        match self {
            AnyTopic::Memory(t) => t.partitions(),
            #[cfg(feature = "durable")]
            AnyTopic::Durable(t) => t.partitions(),
            AnyTopic::Redis(t) => t.partitions(),
        }
    }

    /// Publishes `payload` (round-robin over the partitions).
    ///
    /// # Errors
    ///
    /// [`AnyPublishError`], with the payload.
    ///
    /// # Cancel safety
    ///
    /// As the kind's own publish: dropped before it completes, the message may or may
    /// not be published (memq in memory: not published while it waits for room).
    pub async fn publish(&self, payload: impl Into<Bytes>) -> Result<AnyReceipt, AnyPublishError> {
        match self {
            AnyTopic::Memory(t) => t
                .publish(payload.into())
                .await
                .map(|r| receipt(r.partition, r.offset))
                .map_err(memory_publish_error),
            #[cfg(feature = "durable")]
            AnyTopic::Durable(t) => t
                .publish(payload)
                .await
                .map(|r| receipt(r.partition, r.offset))
                .map_err(durable_publish_error),
            AnyTopic::Redis(t) => t
                .publish(payload)
                .await
                .map(|r| receipt(r.partition, r.offset))
                .map_err(redis_publish_error),
        }
    }

    /// Publishes `payload` with `key`, to the partition memq's key hash gives it (the
    /// same index for every kind).
    ///
    /// # Errors
    ///
    /// [`AnyPublishError`], with the payload.
    ///
    /// # Cancel safety
    ///
    /// As [`AnyTopic::publish`].
    pub async fn publish_keyed(
        &self,
        key: impl Into<Bytes>,
        payload: impl Into<Bytes>,
    ) -> Result<AnyReceipt, AnyPublishError> {
        match self {
            AnyTopic::Memory(t) => t
                .publish_keyed(key.into(), payload.into())
                .await
                .map(|r| receipt(r.partition, r.offset))
                .map_err(memory_publish_error),
            #[cfg(feature = "durable")]
            AnyTopic::Durable(t) => t
                .publish_keyed(key, payload)
                .await
                .map(|r| receipt(r.partition, r.offset))
                .map_err(durable_publish_error),
            AnyTopic::Redis(t) => t
                .publish_keyed(key, payload)
                .await
                .map(|r| receipt(r.partition, r.offset))
                .map_err(redis_publish_error),
        }
    }

    /// Publishes `payload` to `partition`.
    ///
    /// # Errors
    ///
    /// [`AnyPublishError`], with the payload ([`AnyError::InvalidPartition`] for a
    /// partition out of range).
    ///
    /// # Cancel safety
    ///
    /// As [`AnyTopic::publish`].
    pub async fn publish_to(
        &self,
        partition: u32,
        payload: impl Into<Bytes>,
    ) -> Result<AnyReceipt, AnyPublishError> {
        match self {
            AnyTopic::Memory(t) => t
                .publish_to(partition, payload.into())
                .await
                .map(|r| receipt(r.partition, r.offset))
                .map_err(memory_publish_error),
            #[cfg(feature = "durable")]
            AnyTopic::Durable(t) => t
                .publish_to(partition, payload)
                .await
                .map(|r| receipt(r.partition, r.offset))
                .map_err(durable_publish_error),
            AnyTopic::Redis(t) => t
                .publish_to(partition, payload)
                .await
                .map(|r| receipt(r.partition, r.offset))
                .map_err(redis_publish_error),
        }
    }

    /// A broadcast subscriber reading every partition from `start`.
    ///
    /// # Errors
    ///
    /// [`AnyError::OffsetOutOfRange`] for `StartAt::Offset(n)` past the end of a
    /// partition (every kind refuses it); the errors of the kind's own `subscribe`.
    pub async fn subscribe(&self, start: StartAt) -> Result<AnySubscriber, AnyError> {
        let kind = match self {
            AnyTopic::Memory(t) => SubscriberKind::Memory(t.subscribe(start)?),
            #[cfg(feature = "durable")]
            AnyTopic::Durable(t) => SubscriberKind::Durable(t.subscribe(start)?),
            AnyTopic::Redis(t) => SubscriberKind::Redis(t.subscribe(start).await?),
        };
        Ok(AnySubscriber { kind })
    }

    /// Joins the explicit-ack group `name` (created at `start` if new).
    ///
    /// On a durable topic the group's positions and acks survive a restart, and its dead
    /// letters always go to its own dead-letter log (`AnyDeadLetters::Durable`).
    ///
    /// # Errors
    ///
    /// [`AnyError::KindMismatch`] for a dead-letter topic of another kind;
    /// [`AnyError::Unsupported`] for `max_in_flight` or a backoff on a durable topic; the
    /// errors of memq's `group_acked`, of memq-store's `DurableTopic::group` and of
    /// [`RedisTopic::group`].
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
                if let Some(n) = config.max_in_flight {
                    ack = ack.max_in_flight(n);
                }
                if let Some(b) = config.backoff {
                    ack = ack.backoff(b);
                }
                match config.dead_letter {
                    Some(AnyDeadLetters::Memory(dlq)) => ack = ack.dead_letter(dlq),
                    Some(_) => return Err(AnyError::KindMismatch),
                    None => {}
                }
                Ok(AnyConsumer::Memory(t.group_acked(name, start, ack)?))
            }
            #[cfg(feature = "durable")]
            AnyTopic::Durable(t) => {
                if config.max_in_flight.is_some() {
                    return Err(AnyError::Unsupported("max_in_flight on a durable group"));
                }
                if config.backoff.is_some() {
                    return Err(AnyError::Unsupported(
                        "a backoff schedule on a durable group",
                    ));
                }
                let mut group = memq_store::GroupConfig::acked(config.ack_wait);
                if let Some(n) = config.max_deliveries {
                    group = group.max_deliveries(n);
                }
                match config.dead_letter {
                    Some(AnyDeadLetters::Durable) | None => {}
                    Some(_) => return Err(AnyError::KindMismatch),
                }
                Ok(AnyConsumer::Durable(t.group(name, start, group)?))
            }
            AnyTopic::Redis(t) => {
                let mut group = GroupConfig::acked(config.ack_wait);
                if let Some(n) = config.max_deliveries {
                    group = group.max_deliveries(n);
                }
                if let Some(n) = config.max_in_flight {
                    group = group.max_in_flight(n);
                }
                if let Some(b) = config.backoff {
                    group = group.backoff(b);
                }
                match config.dead_letter {
                    Some(AnyDeadLetters::Redis(dlq)) => group = group.dead_letter(dlq),
                    Some(_) => return Err(AnyError::KindMismatch),
                    None => {}
                }
                Ok(AnyConsumer::Redis(t.group(name, start, group).await?))
            }
        }
    }
}

/// A message read by an [`AnySubscriber`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AnyMessage {
    /// Its partition.
    pub partition: u32,
    /// Its offset in the partition.
    pub offset: u64,
    /// Its bytes.
    pub value: Bytes,
}

impl AnyMessage {
    /// Its bytes.
    pub fn value(&self) -> &Bytes {
        &self.value
    }

    /// Its offset.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Its partition.
    pub fn partition(&self) -> u32 {
        self.partition
    }
}

/// A broadcast subscriber of an [`AnyTopic`], reading every partition from its own
/// position: memq's `Subscriber`, memq-store's `DurableSubscriber` or a
/// [`RedisSubscriber`], with one `recv`/`seek` shape.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use memq_core::{StartAt, Topic, TopicConfig};
/// use memq_redis::any::{AnyError, AnyTopic};
///
/// let topic = AnyTopic::Memory(Topic::new(TopicConfig::new(64))?);
/// topic.publish("a").await?;
/// topic.publish("b").await?;
/// let mut sub = topic.subscribe(StartAt::Earliest).await?;
/// assert_eq!(sub.recv().await?.value().as_ref(), b"a");
/// sub.seek(1).await?; // replay from offset 1
/// assert_eq!(sub.recv().await?.value().as_ref(), b"b");
/// // Past the end is refused, on every kind.
/// assert!(matches!(sub.seek(3).await, Err(AnyError::OffsetOutOfRange { high: 2, .. })));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct AnySubscriber {
    kind: SubscriberKind,
}

#[derive(Debug)]
enum SubscriberKind {
    Memory(memq_core::Subscriber<Bytes>),
    #[cfg(feature = "durable")]
    Durable(memq_store::DurableSubscriber),
    Redis(RedisSubscriber),
}

impl AnySubscriber {
    /// Receives the next message of any partition (in offset order within one).
    ///
    /// # Errors
    ///
    /// [`AnyError::Lagged`] once when the subscriber fell behind retention (it goes on
    /// with the oldest message kept); [`AnyError::Closed`] when the topic is closed and
    /// drained (memory, durable) or the reader ended (Redis).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as memq's, memq-store's and memq-redis's receives: a receive dropped
    /// before it completes loses no message.
    pub async fn recv(&mut self) -> Result<AnyMessage, AnyError> {
        match &mut self.kind {
            SubscriberKind::Memory(s) => {
                let m = s.recv().await?;
                Ok(AnyMessage {
                    partition: m.partition(),
                    offset: m.offset(),
                    value: m.into_value(),
                })
            }
            #[cfg(feature = "durable")]
            SubscriberKind::Durable(s) => {
                let m = s.recv().await?;
                Ok(AnyMessage {
                    partition: m.partition,
                    offset: m.offset,
                    value: m.payload,
                })
            }
            SubscriberKind::Redis(s) => {
                let m: RedisMessage = s.recv().await?;
                Ok(AnyMessage {
                    partition: m.partition,
                    offset: m.offset,
                    value: m.payload,
                })
            }
        }
    }

    /// Moves every partition's position to `start`: the oldest message kept
    /// (`Earliest`), the end now (`Latest`) or an offset (`Offset(n)`), all or nothing.
    ///
    /// # Errors
    ///
    /// [`AnyError::OffsetOutOfRange`] for an offset past the end of a partition (the
    /// subscriber stays where it was); on Redis, [`AnyError::Redis`] if the ends cannot
    /// be read.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped before it completes, it moves nothing.
    pub async fn seek_to(&mut self, start: StartAt) -> Result<(), AnyError> {
        match &mut self.kind {
            SubscriberKind::Memory(s) => Ok(s.seek_to(start)?),
            #[cfg(feature = "durable")]
            SubscriberKind::Durable(s) => Ok(s.seek_to(start)?),
            SubscriberKind::Redis(s) => Ok(s.seek_to(start).await?),
        }
    }

    /// Moves every partition's position to `offset` (`seek_to(StartAt::Offset(offset))`).
    ///
    /// # Errors
    ///
    /// As [`AnySubscriber::seek_to`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped before it completes, it moves nothing.
    pub async fn seek(&mut self, offset: u64) -> Result<(), AnyError> {
        self.seek_to(StartAt::Offset(offset)).await
    }
}

/// A member of an explicit-ack group of an [`AnyTopic`].
#[derive(Debug)]
#[non_exhaustive]
pub enum AnyConsumer {
    /// Of a memq topic.
    Memory(memq_core::AckConsumer<Bytes>),
    /// Of a durable memq topic.
    #[cfg(feature = "durable")]
    Durable(memq_store::DurableConsumer),
    /// Of a Redis topic.
    Redis(RedisConsumer),
}

impl AnyConsumer {
    /// Receives the next delivery.
    ///
    /// # Errors
    ///
    /// [`AnyError::Closed`] when the topic is closed and drained (memory, durable) or
    /// the reader ended (Redis); [`AnyError::Lagged`]; `AnyError::Durable` when the
    /// durable group's log cannot be read.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as memq's, memq-store's and memq-redis's receives.
    pub async fn recv(&mut self) -> Result<AnyDelivery, AnyError> {
        match self {
            AnyConsumer::Memory(c) => Ok(AnyDelivery::Memory(c.recv().await?)),
            #[cfg(feature = "durable")]
            AnyConsumer::Durable(c) => Ok(AnyDelivery::Durable(c.recv_delivery().await?)),
            AnyConsumer::Redis(c) => Ok(AnyDelivery::Redis(c.recv_delivery().await?)),
        }
    }
}

/// A leased message of any kind.
#[derive(Debug)]
#[non_exhaustive]
pub enum AnyDelivery {
    /// From a memq topic.
    Memory(memq_core::Delivery<Bytes>),
    /// From a durable memq topic.
    #[cfg(feature = "durable")]
    Durable(memq_store::Delivery),
    /// From a Redis topic.
    Redis(RedisDelivery),
}

impl AnyDelivery {
    /// Its bytes.
    pub fn value(&self) -> &Bytes {
        match self {
            AnyDelivery::Memory(d) => d.message().value(),
            #[cfg(feature = "durable")]
            AnyDelivery::Durable(d) => &d.message().payload,
            AnyDelivery::Redis(d) => d.value(),
        }
    }

    /// Its offset.
    pub fn offset(&self) -> u64 {
        match self {
            AnyDelivery::Memory(d) => d.message().offset(),
            #[cfg(feature = "durable")]
            AnyDelivery::Durable(d) => d.message().offset,
            AnyDelivery::Redis(d) => d.offset(),
        }
    }

    /// Its partition.
    pub fn partition(&self) -> u32 {
        match self {
            AnyDelivery::Memory(d) => d.message().partition(),
            #[cfg(feature = "durable")]
            AnyDelivery::Durable(d) => d.message().partition,
            AnyDelivery::Redis(d) => d.partition(),
        }
    }

    /// How many times it has been delivered, this time included.
    pub fn deliveries(&self) -> u32 {
        match self {
            AnyDelivery::Memory(d) => d.deliveries(),
            #[cfg(feature = "durable")]
            AnyDelivery::Durable(d) => d.deliveries(),
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
            #[cfg(feature = "durable")]
            AnyDelivery::Durable(d) => Ok(d.ack()?),
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
            #[cfg(feature = "durable")]
            AnyDelivery::Durable(d) => Ok(d.nack_after(delay)?),
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
            #[cfg(feature = "durable")]
            AnyDelivery::Durable(d) => {
                d.nack();
                Ok(())
            }
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
            #[cfg(feature = "durable")]
            AnyDelivery::Durable(d) => Ok(d.reject()?),
            AnyDelivery::Redis(d) => Ok(d.reject().await?),
        }
    }
}
