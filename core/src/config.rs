//! How a topic is set up: capacity, overflow policy, TTL, partitions, clock, router.

use alloc::sync::Arc;
use core::time::Duration;

use crate::error::Error;
use crate::route::Router;
use crate::time::{Clock, Timer};

/// What a full partition does with a new message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Overflow {
    /// `publish` waits until every attached reader (subscribers and groups) has moved
    /// past the oldest message; `try_publish` returns [`PublishError::Full`]. Nothing is
    /// ever lost.
    ///
    /// A publisher that had to wait is woken once readers have freed a batch of slots
    /// (`capacity / 16`, from 1 to 64; every slot for logs under 32), so that a publisher
    /// faster than its readers waits once per batch rather than once per message. New
    /// publishes use any free room at once, and so does a publish with a time limit when
    /// its time is up (the `*_blocking_timeout` publishes, `memq`'s `with_timeout`, or
    /// [`Publish::try_now`]): it leaves its place in line and makes one last try, as a
    /// new publish, and fails only if there is no room for it then (a batch: for the
    /// whole batch).
    ///
    /// So a waiting publisher can stay parked while fewer slots than a batch are free.
    /// A reader that reads all it can always frees a whole batch, but one that stops
    /// reading, with messages still retained, until that same publisher gets on (say it
    /// waits for a reply the publisher sends after its next message) can wait for good:
    /// give such a pipeline a log under 32 slots, or have the publisher use
    /// `try_publish` and retry.
    ///
    /// Waiting publishers are woken in the order they started waiting, each once its own
    /// room is free: a `publish_batch` waits for room for the whole batch, and those that
    /// started waiting after it wait for it, so small publishes cannot hold a batch back
    /// for ever. The room a woken publisher was woken for is kept for it from the others
    /// that wait (not from new publishes, nor from a timed publish's last try, which use
    /// any free room); if one of those took it first, the woken publisher waits again in
    /// its old place. A waiting publish
    /// polled again before it is woken (by a `select!`, a timeout's check, or its own TTL
    /// alarm) keeps waiting unless it is the first in line and its room is free beyond
    /// what was promised. So a woken publish
    /// future should be polled again or dropped: one kept for good without either (leaked
    /// with `mem::forget`, say) keeps its room from the publishers waiting behind it, as a
    /// fair semaphore's waiter keeps the permits it was given.
    ///
    /// [`PublishError::Full`]: crate::PublishError::Full
    /// [`Publish::try_now`]: crate::Publish::try_now
    #[default]
    Block,
    /// The oldest message is evicted. A reader that had not read it gets
    /// [`RecvError::Lagged`] once, then continues at the oldest retained message.
    ///
    /// [`RecvError::Lagged`]: crate::RecvError::Lagged
    DropOldest,
    /// Publishing into a full partition (one whose oldest message some reader still needs)
    /// fails at once with [`PublishError::Full`], handing the message back.
    ///
    /// [`PublishError::Full`]: crate::PublishError::Full
    Reject,
}

/// Where a new subscriber or a new consumer group starts reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StartAt {
    /// The oldest retained message (replay).
    Earliest,
    /// The next message to be published.
    #[default]
    Latest,
    /// A given offset (in every partition the reader reads). An offset older than the
    /// retained window reads as [`RecvError::Lagged`] first; one past the end is an error.
    ///
    /// [`RecvError::Lagged`]: crate::RecvError::Lagged
    Offset(u64),
}

/// A topic's configuration.
///
/// # Examples
///
/// ```
/// # use memq_core as memq;
/// use memq::{Overflow, Topic, TopicConfig};
///
/// let topic = Topic::<u32>::new(TopicConfig::new(1024).overflow(Overflow::DropOldest).partitions(4))?;
/// assert_eq!(topic.capacity(), 1024);
/// assert_eq!(topic.partitions(), 4);
/// # Ok::<(), memq::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct TopicConfig {
    pub(crate) capacity: usize,
    pub(crate) overflow: Overflow,
    pub(crate) ttl: Option<Duration>,
    pub(crate) partitions: u32,
    pub(crate) clock: Option<Arc<dyn Clock>>,
    pub(crate) router: Option<Router>,
    pub(crate) release_on_read: bool,
    pub(crate) timer: Option<Arc<dyn Timer>>,
    /// The first offset of each partition (empty: all start at 0).
    pub(crate) next_offsets: alloc::vec::Vec<u64>,
    /// Put the partitions on the lock-free ring where the topic's settings allow it (see
    /// [`TopicConfig::ring_engine`]).
    pub(crate) ring: bool,
}

impl core::fmt::Debug for dyn Timer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Timer(..)")
    }
}

impl core::fmt::Debug for dyn Clock {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Clock(..)")
    }
}

impl TopicConfig {
    /// A topic retaining up to `capacity` messages per partition, `Block` overflow, one
    /// partition, no TTL, no clock, on the locked log ([`TopicConfig::ring_engine`]). A
    /// capacity of 0 is reported by [`Topic::new`].
    ///
    /// [`Topic::new`] reserves each partition's ring of `capacity` slots (and reports
    /// [`Error::CapacityTooLarge`](crate::Error::CapacityTooLarge) if it cannot); the
    /// ring's memory is then used as the first `capacity` messages arrive.
    ///
    /// [`Topic::new`]: crate::Topic::new
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            overflow: Overflow::Block,
            ttl: None,
            partitions: 1,
            clock: None,
            router: None,
            release_on_read: false,
            timer: None,
            next_offsets: alloc::vec::Vec::new(),
            ring: cfg!(memq_ring_default),
        }
    }

    /// Chooses the engine under the topic's partitions. Off (the default), they run on the
    /// locked log: one lock per partition, under which readers take messages in bursts.
    /// On, they run on memq's lock-free ring wherever the topic's settings allow it
    /// (64-bit atomics, no TTL, no clock, no `release_on_read`, first offsets below
    /// `2^61`); other topics use the locked log whatever this says.
    ///
    /// Both engines keep the same semantics (memq-core's whole suite runs on each); they
    /// differ in speed. On the ring a publisher and its readers run at once with no lock
    /// between them; under the lock they take turns. Measured on a 2-vCPU machine
    /// (`docs/ENGINE-PLAN.md`, "Measured"), the ring wins where each message has a
    /// payload of its own and one reader or one member per partition keeps up: one
    /// publisher and one subscriber 1.8 × as fast, one publisher and four subscribers
    /// 1.26 ×, batches and a group reading four partitions 1.3 × as fast. It loses where
    /// every message shares one reference-counted payload (one `Arc` or `Bytes` cloned
    /// into each message: both cores then touch the one count for every message,
    /// 0.4–1.0 ×), and where several
    /// members of a group compete for one partition (each takes one offset per
    /// compare-and-swap; blocking members on threads ran 0.5 × as fast).
    ///
    /// [`Topic::is_on_ring`](crate::Topic::is_on_ring) says which engine a topic got.
    /// Built with `--cfg memq_ring_default`, memq-core puts every eligible topic on the
    /// ring (for running test suites there).
    pub fn ring_engine(mut self, on: bool) -> Self {
        self.ring = on;
        self
    }

    /// Sets the overflow policy.
    pub fn overflow(mut self, overflow: Overflow) -> Self {
        self.overflow = overflow;
        self
    }

    /// Sets how long a message is retained; readers skip older ones. Needs a clock, and
    /// must be longer than zero ([`Error::ZeroTtl`] when the topic is made).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Sets the timer that wakes a publisher parked on a full `Block` topic with a TTL when
    /// the oldest message expires and frees its slot (default with `std`:
    /// [`ThreadTimer`], started only for topics with a TTL). Expiry is applied whenever the
    /// log is visited; without a timer (no `std`), a parked publisher waits for the next
    /// visit (a read, another publish) to find the room.
    ///
    // Without `std` the item does not exist here: the link goes to the crate's list of
    // features.
    #[cfg_attr(feature = "std", doc = "[`ThreadTimer`]: crate::ThreadTimer")]
    #[cfg_attr(not(feature = "std"), doc = "[`ThreadTimer`]: crate#features")]
    pub fn timer(mut self, timer: Arc<dyn Timer>) -> Self {
        self.timer = Some(timer);
        self
    }

    /// Sets the number of partitions (fixed for the topic's life).
    pub fn partitions(mut self, partitions: u32) -> Self {
        self.partitions = partitions;
        self
    }

    /// Sets the clock used to timestamp messages and to apply the TTL.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Sets the router used for keyed publishes (default: [`key_partition`]).
    ///
    /// [`key_partition`]: crate::key_partition
    pub fn router(mut self, router: Router) -> Self {
        self.router = Some(router);
        self
    }

    /// Releases each message from the log as soon as every attached reader has read it,
    /// instead of retaining it until capacity or the TTL evicts it (off by default).
    ///
    /// This makes the topic a queue rather than a replayable log. The reader that reads a
    /// message last receives the log's own value, moved instead of cloned, and its slot is
    /// free for the next publish at once. A topic read by one subscriber or one
    /// automatic-commit group then costs one `T::clone` less per message, and a publish
    /// that reuses the slot has no old value to drop. Checking "last" looks at every
    /// attached reader, once per message.
    ///
    /// What changes for readers:
    /// - A message has left the log once every attached reader has been handed it. It
    ///   may leave earlier, when the readers fetch it ahead of their users (a subscriber
    ///   fetches up to 32 per visit; see below): it is then in the hands of the one that
    ///   fetched it, not in the log. So:
    ///   - a subscriber or a group that joins later at [`StartAt::Earliest`] starts at the
    ///     oldest message still in the log;
    ///   - a `seek` back to an offset that has left reads as [`RecvError::Lagged`] there,
    ///     like an evicted one.
    ///
    ///   With no reader attached, messages are retained as usual (up to capacity and TTL)
    ///   for the first reader to come.
    /// - Nothing is lost when a subscriber is dropped or seeks, or a group rebalances:
    ///   - what a subscriber fetched ahead keeps its slot (and its place in the `Block` and
    ///     `Reject` room) until it is handed over, and goes back to the log when the
    ///     subscriber seeks or is dropped; what it fetched past a slower reader it copies,
    ///     and the log lets go of that once every reader has been handed it;
    ///   - the members of an automatic-commit group on a one-partition topic share a pool
    ///     of messages fetched ahead, which lives as long as the group: the log moves
    ///     messages into it, and their slots count against the capacity until a member
    ///     takes them;
    ///   - members of groups on partitioned topics do not fetch ahead at all.
    /// - Nothing is released while an explicit-ack group is attached: its leases are
    ///   delivered again from the log.
    /// - Messages that left the log this way are counted in [`TopicStats::released`] (a
    ///   message given back is uncounted), and as delivered once handed over.
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// use memq::{StartAt, Topic, TopicConfig};
    ///
    /// let topic = Topic::new(TopicConfig::new(64).release_on_read(true))?;
    /// let mut worker = topic.subscribe(StartAt::Earliest)?;
    /// topic.try_publish(String::from("job 1"))?;
    /// topic.try_publish(String::from("job 2"))?;
    /// let mut jobs = Vec::new();
    /// worker.try_recv_many(&mut jobs, 10)?; // moved out of the log, not cloned
    /// assert_eq!(jobs.len(), 2);
    /// assert_eq!(topic.stats().released, 2);
    /// // A late reader does not see what was already read.
    /// let mut late = topic.subscribe(StartAt::Earliest)?;
    /// assert!(late.try_recv().is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// [`StartAt::Earliest`]: crate::StartAt::Earliest
    /// [`RecvError::Lagged`]: crate::RecvError::Lagged
    /// [`TopicStats::released`]: crate::TopicStats::released
    pub fn release_on_read(mut self, release: bool) -> Self {
        self.release_on_read = release;
        self
    }

    /// The offset each partition's first message gets, one per partition in order,
    /// instead of 0: for a topic that goes on from a log kept elsewhere, such as a
    /// durable topic reopened, so that its offsets stay the same across restarts. The
    /// topic starts empty at those offsets ([`StartAt::Earliest`] reads from there).
    /// Their number must be the partition count, else [`Topic::new`] reports
    /// [`Error::OffsetsPerPartition`](crate::Error::OffsetsPerPartition); each at most
    /// [`MAX_NEXT_OFFSET`](crate::MAX_NEXT_OFFSET), else
    /// [`Error::NextOffsetTooLarge`](crate::Error::NextOffsetTooLarge) (a durable topic
    /// whose files name a larger one is damaged: the next offsets stay far below the
    /// values memq reserves at the top of the range).
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// use memq::{StartAt, Topic, TopicConfig};
    ///
    /// let topic = Topic::new(TopicConfig::new(16).partitions(2).next_offsets([500, 7]))?;
    /// let mut sub = topic.subscribe(StartAt::Earliest)?;
    /// let receipt = topic.try_publish_to(1, "x")?;
    /// assert_eq!(receipt.offsets(), 7..8);
    /// assert_eq!(sub.try_recv()?.offset(), 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// [`StartAt::Earliest`]: crate::StartAt::Earliest
    /// [`Topic::new`]: crate::Topic::new
    pub fn next_offsets(mut self, offsets: impl IntoIterator<Item = u64>) -> Self {
        self.next_offsets = offsets.into_iter().collect();
        self
    }

    /// The configured capacity per partition.
    pub fn get_capacity(&self) -> usize {
        self.capacity
    }

    /// The configured overflow policy.
    pub fn get_overflow(&self) -> Overflow {
        self.overflow
    }

    /// The configured number of partitions.
    pub fn get_partitions(&self) -> u32 {
        self.partitions
    }

    /// The configured time to live, if any.
    pub fn get_ttl(&self) -> Option<Duration> {
        self.ttl
    }

    /// Whether messages leave the log once read by all (see
    /// [`TopicConfig::release_on_read`]).
    pub fn get_release_on_read(&self) -> bool {
        self.release_on_read
    }

    /// Whether a user [`Router`](crate::Router) is set.
    pub fn has_router(&self) -> bool {
        self.router.is_some()
    }

    pub(crate) fn validate(&self) -> Result<(), Error> {
        if self.capacity == 0 {
            return Err(Error::ZeroCapacity);
        }
        if self.partitions == 0 {
            return Err(Error::ZeroPartitions);
        }
        if self.ttl.is_some() && self.clock.is_none() {
            return Err(Error::TtlWithoutClock);
        }
        if self.ttl == Some(Duration::ZERO) {
            return Err(Error::ZeroTtl);
        }
        if !self.next_offsets.is_empty() && self.next_offsets.len() != self.partitions as usize {
            return Err(Error::OffsetsPerPartition {
                given: self.next_offsets.len(),
                partitions: self.partitions,
            });
        }
        if let Some((p, &offset)) = (self.next_offsets.iter().enumerate())
            .find(|&(_, &offset)| offset > crate::error::MAX_NEXT_OFFSET)
        {
            return Err(Error::NextOffsetTooLarge {
                partition: p as u32,
                offset,
            });
        }
        Ok(())
    }
}
