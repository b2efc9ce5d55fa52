//! The topic facade: the [`Topic`] handle, its constructors and accessors, closing,
//! routing (round-robin, by key, or to a partition), and the publish entry points, which
//! hand a routed message or batch to the publish path.
//!
//! Data flows one way: a [`Topic`] routes each message to a partition and appends it to
//! that partition's log (`publish`, over `partition`); readers ([`Subscriber`],
//! [`Consumer`]) hold positions in the logs (`subscriber`, `group`).
//!
//! Layer: the top of memq-core, beside `broker`, `blocking` and the codecs; it depends on
//! the publish path and the partitions' shared state, and nothing below names it.
//!
//! [`Subscriber`]: crate::Subscriber
//! [`Consumer`]: crate::Consumer

mod readers;

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use crate::config::{Overflow, TopicConfig};
use crate::error::{Error, PublishError};
use crate::message::Receipt;
use crate::partition::Shared;
use crate::publish::{Payload, Publish, PublishBatch, Route};
use crate::route::key_partition;
use crate::sync::{Arc, Ordering};

/// A handle to a topic: publishes to it, and makes subscribers and group consumers.
///
/// Cloning a `Topic` makes another publishing handle to the same topic. The topic closes
/// when [`Topic::close`] is called or the last handle is dropped: publishers then get
/// [`PublishError::Closed`], and readers drain what is retained before they see `Closed`.
///
/// # Values are cloned under the partition's lock
///
/// A reader gets its own copy of each message (`T::clone`; values that are large are
/// shared, `Arc` or `bytes::Bytes`, so a copy is a reference count). Those copies are
/// made inside the partition's critical section, where the log's slots are: so `T`'s
/// `Clone` must not call into the same topic (publish to it, read it, subscribe to it,
/// ask its stats). If it does, on the partition being read, it waits for a lock its own
/// thread holds, for ever. The same goes for a waker's clone: a reader or publisher that
/// waits has its waker cloned into the wait list (or a TTL alarm) under the lock, which
/// for every runtime's waker is a reference count; a hand-made `RawWaker` whose clone
/// calls into the topic would deadlock. Every other piece of user code memq calls
/// (wake-ups and drops of wakers, clocks, timers, routers, `Drop` of values it lets go
/// of) runs outside memq's locks.
///
/// # Examples
///
/// ```
/// # use memq_core as memq;
/// use memq::{StartAt, Topic, TopicConfig};
///
/// let topic = Topic::new(TopicConfig::new(16))?;
/// let mut sub = topic.subscribe(StartAt::Earliest)?;
/// topic.try_publish("hello")?;
/// assert_eq!(*sub.try_recv()?.value(), "hello");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Topic<T> {
    pub(crate) shared: Arc<Shared<T>>,
}

impl<T> fmt::Debug for Topic<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.fmt(f)
    }
}

impl<T> Clone for Topic<T> {
    fn clone(&self) -> Self {
        self.shared.publishers.fetch_add(1, Ordering::Relaxed);
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Topic<T> {
    fn drop(&mut self) {
        if self.shared.publishers.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.close();
        }
    }
}

impl<T> Topic<T> {
    /// Creates a topic.
    ///
    /// # Errors
    ///
    /// [`Error::ZeroCapacity`], [`Error::ZeroPartitions`], [`Error::TtlWithoutClock`];
    /// [`Error::CapacityTooLarge`] if a ring cannot be allocated, or
    /// [`Error::TooManyPartitions`] if the partition table cannot.
    pub fn new(config: TopicConfig) -> Result<Self, Error> {
        Self::build(None, config)
    }

    /// Creates a topic with `capacity` and otherwise default settings.
    ///
    /// # Errors
    ///
    /// [`Error::ZeroCapacity`] if `capacity` is 0; [`Error::CapacityTooLarge`] if the
    /// ring cannot be allocated.
    pub fn with_capacity(capacity: usize) -> Result<Self, Error> {
        Self::new(TopicConfig::new(capacity))
    }

    pub(crate) fn build(name: Option<String>, config: TopicConfig) -> Result<Self, Error> {
        Ok(Self {
            shared: Arc::new(Shared::new(name, config)?),
        })
    }

    /// The topic's name, if it was created by a [`Broker`](crate::Broker).
    pub fn name(&self) -> Option<&str> {
        self.shared.name.as_deref()
    }

    /// How many messages each partition retains, exactly as configured.
    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }

    /// The number of partitions.
    pub fn partitions(&self) -> u32 {
        self.shared.partition_count()
    }

    /// The overflow policy.
    pub fn overflow(&self) -> Overflow {
        self.shared.overflow
    }

    /// Whether the topic runs on the lock-free ring engine: it asked for it
    /// ([`TopicConfig::ring_engine`](crate::TopicConfig::ring_engine)) and its settings
    /// allow it. `false` on the locked log, the default.
    pub fn is_on_ring(&self) -> bool {
        #[cfg(target_has_atomic = "64")]
        {
            !self.shared.rings.is_empty()
        }
        #[cfg(not(target_has_atomic = "64"))]
        {
            false
        }
    }

    /// Closes the topic: publishing fails from now on; readers drain what is retained and
    /// then get `Closed`. Every waiting task is woken.
    pub fn close(&self) {
        self.shared.close();
    }

    /// Whether the topic is closed: [`Topic::close`] (or dropping the last handle) has
    /// closed every partition. While a close is under way, partitions it has reached
    /// already refuse publishes, but the topic is not reported closed yet.
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }

    #[inline]
    pub(crate) fn route(&self, partition: Option<u32>, key: Option<&[u8]>) -> Route {
        let s = &self.shared;
        match (partition, key) {
            (Some(p), _) => match s.check_partition(p) {
                Ok(p) => Route::Partition(p),
                Err(_) => Route::Invalid,
            },
            (None, Some(k)) => s.route_key(k).map_or(Route::Invalid, Route::Partition),
            (None, None) => Route::Partition(s.route_round_robin()),
        }
    }

    #[inline]
    pub(crate) fn publish_with(&self, route: Route, value: T) -> Publish<'_, T> {
        Publish::new(&self.shared, route, value)
    }

    /// Publishes `value`, waiting for room if the topic is full and its policy is `Block`.
    /// Unkeyed messages go to partitions in turn (round-robin).
    ///
    /// # Errors
    ///
    /// [`PublishError::Closed`] if the topic is closed; [`PublishError::Full`] on a full
    /// `Reject` topic. The message is handed back in both cases.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it completes publishes nothing, and a wake-up it had
    /// received is passed on to the next waiting publisher.
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// # futures_executor::block_on(async {
    /// let topic = memq::Topic::with_capacity(4)?;
    /// let receipt = topic.publish(7u8).await?;
    /// assert_eq!(receipt.offset, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    #[inline]
    pub fn publish(&self, value: T) -> Publish<'_, T> {
        self.publish_with(self.route(None, None), value)
    }

    /// Publishes `value` to the partition its key routes to (see [`key_partition`] or the
    /// topic's [`Router`]). Messages with the same key keep their order. The key routes
    /// only: it is not stored with the message (see [`Message`](crate::Message)).
    ///
    /// # Errors
    ///
    /// As [`Topic::publish`], and [`PublishError::InvalidPartition`] if a user router
    /// returns a partition that does not exist.
    ///
    /// # Cancel safety
    ///
    /// As [`Topic::publish`].
    ///
    /// [`Router`]: crate::Router
    #[inline]
    pub fn publish_keyed(&self, key: impl AsRef<[u8]>, value: T) -> Publish<'_, T> {
        self.publish_with(self.route(None, Some(key.as_ref())), value)
    }

    /// Publishes `value` to `partition`.
    ///
    /// # Errors
    ///
    /// As [`Topic::publish`], and [`PublishError::InvalidPartition`] if `partition` does
    /// not exist.
    ///
    /// # Cancel safety
    ///
    /// As [`Topic::publish`].
    #[inline]
    pub fn publish_to(&self, partition: u32, value: T) -> Publish<'_, T> {
        self.publish_with(self.route(Some(partition), None), value)
    }

    /// Publishes `value` if there is room now.
    ///
    /// # Errors
    ///
    /// [`PublishError::Full`] if the partition is full and nothing can be evicted (policy
    /// `Block` or `Reject`), [`PublishError::Closed`] if the topic is closed.
    #[inline]
    pub fn try_publish(&self, value: T) -> Result<Receipt, PublishError<T>> {
        self.try_route(self.route(None, None), value)
    }

    /// [`Topic::publish_keyed`] without waiting.
    ///
    /// # Errors
    ///
    /// As [`Topic::try_publish`] and [`Topic::publish_keyed`].
    #[inline]
    pub fn try_publish_keyed(
        &self,
        key: impl AsRef<[u8]>,
        value: T,
    ) -> Result<Receipt, PublishError<T>> {
        self.try_route(self.route(None, Some(key.as_ref())), value)
    }

    /// [`Topic::publish_to`] without waiting.
    ///
    /// # Errors
    ///
    /// As [`Topic::try_publish`] and [`Topic::publish_to`].
    #[inline]
    pub fn try_publish_to(&self, partition: u32, value: T) -> Result<Receipt, PublishError<T>> {
        self.try_route(self.route(Some(partition), None), value)
    }

    /// The `try_publish*` methods, for a message or a batch: one attempt that never
    /// waits.
    #[inline]
    fn try_route<V: Payload<T>>(&self, route: Route, value: V) -> Result<Receipt, PublishError<V>> {
        let Route::Partition(p) = route else {
            return Err(PublishError::InvalidPartition(value));
        };
        self.shared.try_publish_now(p, value, &mut None)
    }

    /// Publishes every value of `batch` with contiguous offsets in one partition, or none
    /// of them. Waits (policy `Block`) until there is room for the whole batch.
    ///
    /// Returns the first message's offset and the batch's length (see [`Receipt`]). An
    /// empty batch publishes nothing and does not wait: its receipt has a `count` of 0.
    ///
    /// # Errors
    ///
    /// [`PublishError::Full`] if the batch is larger than the capacity (it could never
    /// fit) or the topic is full under `Reject`; [`PublishError::Closed`] if the topic is
    /// closed. The batch is handed back whole.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it completes publishes nothing.
    pub fn publish_batch(&self, batch: Vec<T>) -> PublishBatch<'_, T> {
        PublishBatch::new(&self.shared, self.route(None, None), batch)
    }

    /// [`Topic::publish_batch`] to an explicit partition.
    ///
    /// # Errors
    ///
    /// As [`Topic::publish_batch`], and [`PublishError::InvalidPartition`].
    ///
    /// # Cancel safety
    ///
    /// As [`Topic::publish_batch`].
    pub fn publish_batch_to(&self, partition: u32, batch: Vec<T>) -> PublishBatch<'_, T> {
        PublishBatch::new(&self.shared, self.route(Some(partition), None), batch)
    }

    /// [`Topic::publish_batch`] to the partition `key` routes to (as
    /// [`Topic::publish_keyed`]): every value of `batch` goes there under that one key, in
    /// order, with contiguous offsets, or none does. One visit to the partition for the
    /// whole batch: a keyed producer that gathers a key's messages (Kafka's producers batch
    /// per partition) publishes at batch speed. To batch messages with different keys, group
    /// them by [`key_partition`] (on a topic with the default router) and use
    /// [`Topic::publish_batch_to`].
    ///
    /// # Errors
    ///
    /// As [`Topic::publish_batch`], and [`PublishError::InvalidPartition`] if a user router
    /// returns a partition that does not exist. The batch is handed back whole.
    ///
    /// # Cancel safety
    ///
    /// As [`Topic::publish_batch`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// use memq::{key_partition, StartAt, Topic, TopicConfig};
    /// # futures_executor::block_on(async {
    /// let topic = Topic::new(TopicConfig::new(64).partitions(4))?;
    /// let mut orders = topic.subscribe(StartAt::Earliest)?;
    /// let receipt = topic.publish_batch_keyed("order-17", vec!["placed", "paid", "shipped"]).await?;
    /// assert_eq!(receipt.partition, key_partition(b"order-17", 4));
    /// let got: Vec<_> = (0..3).map(|_| *orders.try_recv().unwrap().value()).collect();
    /// assert_eq!(got, ["placed", "paid", "shipped"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn publish_batch_keyed(&self, key: impl AsRef<[u8]>, batch: Vec<T>) -> PublishBatch<'_, T> {
        PublishBatch::new(&self.shared, self.route(None, Some(key.as_ref())), batch)
    }

    /// [`Topic::publish_batch`] without waiting. An empty batch succeeds with an empty
    /// receipt (a `count` of 0; see [`Receipt`]).
    ///
    /// # Errors
    ///
    /// [`PublishError::Full`] if the whole batch does not fit now (or is larger than the
    /// capacity), [`PublishError::Closed`] if the topic is closed. The batch is handed
    /// back whole.
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// let topic = memq::Topic::with_capacity(4)?;
    /// // A reader that holds on to what it has not read yet keeps a `Block` topic full.
    /// let _reader = topic.subscribe(memq::StartAt::Earliest)?;
    /// let receipt = topic.try_publish_batch(vec![1, 2, 3])?;
    /// assert_eq!(receipt.offsets(), 0..3);
    /// assert!(topic.try_publish_batch(vec![4, 5]).unwrap_err().is_full());
    /// assert_eq!(topic.try_publish_batch(Vec::new())?.count, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_publish_batch(&self, batch: Vec<T>) -> Result<Receipt, PublishError<Vec<T>>> {
        self.try_route(self.route(None, None), batch)
    }

    /// [`Topic::publish_batch_keyed`] without waiting.
    ///
    /// # Errors
    ///
    /// As [`Topic::try_publish_batch`] and [`Topic::publish_batch_keyed`].
    pub fn try_publish_batch_keyed(
        &self,
        key: impl AsRef<[u8]>,
        batch: Vec<T>,
    ) -> Result<Receipt, PublishError<Vec<T>>> {
        self.try_route(self.route(None, Some(key.as_ref())), batch)
    }

    /// [`Topic::publish_batch_to`] without waiting.
    ///
    /// # Errors
    ///
    /// As [`Topic::try_publish_batch`] and [`Topic::publish_batch_to`].
    pub fn try_publish_batch_to(
        &self,
        partition: u32,
        batch: Vec<T>,
    ) -> Result<Receipt, PublishError<Vec<T>>> {
        self.try_route(self.route(Some(partition), None), batch)
    }
}

impl<T> Shared<T> {
    /// Closes the topic (see [`Topic::close`]): every partition, then the groups' idle
    /// members are woken.
    pub(crate) fn close(&self) {
        self.close_partitions();
        // Members with nothing to read wait for the group's drain; they re-check whether
        // the topic is closed after registering, so they are woken only once every
        // partition is marked closed (woken earlier, one could look, see an open topic
        // and park again for good).
        self.wake_idle_members();
    }

    /// The partition of an unkeyed publish: each in turn.
    #[inline]
    fn route_round_robin(&self) -> usize {
        if self.parts.len() == 1 {
            0
        } else {
            self.round_robin.fetch_add(1, Ordering::Relaxed) % self.parts.len()
        }
    }

    /// The partition `key` routes to (the topic's router's, or [`key_partition`]'s), or
    /// `None` if a user router named one that does not exist.
    #[inline]
    fn route_key(&self, key: &[u8]) -> Option<usize> {
        let n = self.partition_count();
        let p = match &self.router {
            // The user's router runs here, outside every lock.
            Some(r) => (r.0)(key, n),
            None => key_partition(key, n),
        };
        (p < n).then_some(p as usize)
    }
}
