//! How an explicit-ack group is set up: [`Backoff`], [`AckConfig`] as a member gives it,
//! and [`AckSettings`] as the group keeps them.
//!
//! Part of the ack layer: depends on the time layer, the sync facade, the errors, and the
//! dead-letter sink beside it.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use super::dead_letter::DeadLetterSink;
use super::state::AckPart;
use crate::error::Error;
use crate::time::{as_nanos, Clock, Timer};

/// Delays before a message is delivered again, by attempt.
///
/// Applied when a delivery is nacked without an explicit delay, dropped without an ack, or
/// its lease runs out. The delay after attempt `n` (1-based) is the `n`-th entry of the
/// schedule, or its last entry past the end. An empty schedule redelivers at once.
///
/// # Examples
///
/// ```
/// # use memq_core as memq;
/// use core::time::Duration;
/// use memq::Backoff;
///
/// let b = Backoff::exponential(Duration::from_millis(10), Duration::from_millis(50));
/// assert_eq!(b.delay(1), Duration::from_millis(10));
/// assert_eq!(b.delay(2), Duration::from_millis(20));
/// assert_eq!(b.delay(9), Duration::from_millis(50));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Backoff {
    delays: Vec<Duration>,
}

impl Backoff {
    /// Redeliver at once.
    pub fn none() -> Self {
        Self::default()
    }

    /// The same delay before every redelivery.
    pub fn fixed(delay: Duration) -> Self {
        Self {
            delays: alloc::vec![delay],
        }
    }

    /// Delays doubling from `initial` up to `max`, then `max` for every later attempt. An
    /// `initial` of zero redelivers the first time at once, then waits `max`.
    pub fn exponential(initial: Duration, max: Duration) -> Self {
        let mut delays = Vec::new();
        let mut d = initial;
        // A non-zero delay reaches `max` (at worst `Duration::MAX`) in under 100 doublings.
        while d < max && delays.len() < 128 {
            delays.push(d);
            if d.is_zero() {
                break;
            }
            d = d.saturating_mul(2);
        }
        delays.push(max);
        Self { delays }
    }

    /// An explicit schedule: the delay after attempt 1, 2, 3, … (the last repeats).
    pub fn schedule(delays: Vec<Duration>) -> Self {
        Self { delays }
    }

    /// The delay before redelivering a message that has been delivered `attempt` times.
    pub fn delay(&self, attempt: u32) -> Duration {
        let i = (attempt.max(1) - 1) as usize;
        self.delays
            .get(i)
            .or(self.delays.last())
            .copied()
            .unwrap_or(Duration::ZERO)
    }
}

/// Settings of an explicit-ack group, given by the member that creates it.
///
/// # Examples
///
/// ```
/// # #[allow(unused_imports)] // for the cfg below
/// # use memq_core as memq;
/// # // Leases need a clock: `std`'s, or one given with `AckConfig::clock` on bare metal.
/// # #[cfg(feature = "std")]
/// # {
/// use core::time::Duration;
/// use memq::{AckConfig, Backoff, DeadLetter, StartAt, Topic};
///
/// let dlq = Topic::<DeadLetter<u32>>::with_capacity(64)?;
/// let topic = Topic::<u32>::with_capacity(64)?;
/// let config = AckConfig::new()
///     .ack_wait(Duration::from_secs(5))
///     .max_deliveries(3)
///     .backoff(Backoff::fixed(Duration::from_millis(100)))
///     .dead_letter(dlq.clone());
/// let mut worker = topic.group_acked("jobs", StartAt::Earliest, config)?;
/// topic.try_publish(7)?;
/// let job = worker.try_recv()?;
/// assert_eq!(*job.value(), 7);
/// job.ack()?;
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct AckConfig<T> {
    ack_wait: Duration,
    max_deliveries: Option<u32>,
    backoff: Backoff,
    max_in_flight: usize,
    pub(crate) dead_letter: Option<alloc::sync::Arc<dyn DeadLetterSink<T> + Send + Sync>>,
    clock: Option<alloc::sync::Arc<dyn Clock>>,
    timer: Option<alloc::sync::Arc<dyn Timer>>,
}

impl<T> fmt::Debug for AckConfig<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AckConfig")
            .field("ack_wait", &self.ack_wait)
            .field("max_deliveries", &self.max_deliveries)
            .field("backoff", &self.backoff)
            .field("max_in_flight", &self.max_in_flight)
            .field("dead_letter", &self.dead_letter.is_some())
            .finish_non_exhaustive()
    }
}

impl<T> Default for AckConfig<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> AckConfig<T> {
    /// Leases of 30 s, unlimited deliveries, immediate redelivery, 1024 in flight per
    /// partition, no dead-letter topic, the topic's clock.
    pub fn new() -> Self {
        Self {
            ack_wait: Duration::from_secs(30),
            max_deliveries: None,
            backoff: Backoff::none(),
            max_in_flight: 1024,
            dead_letter: None,
            clock: None,
            timer: None,
        }
    }

    /// How long a delivery may stay unacknowledged before it returns to the group. Must
    /// be longer than zero ([`Error::ZeroAckWait`] on joining the group).
    pub fn ack_wait(mut self, ack_wait: Duration) -> Self {
        self.ack_wait = ack_wait;
        self
    }

    /// After this many deliveries a message goes to the dead-letter topic (or, without
    /// one, is dropped and counted as dead-lettered). If the dead-letter topic is full,
    /// the message stays in the group and the move is retried every 10 ms (or every
    /// `ack_wait` if shorter, at least 1 ms; see [`AckConfig::dead_letter`] for a closed
    /// one).
    ///
    /// Messages to deliver again come before messages not delivered yet. Without a limit
    /// here and without a [`backoff`](AckConfig::backoff), a message that always fails
    /// (nacked, or its lease run out) is therefore delivered again and again ahead of
    /// everything behind it in its partition: set one of the two where a handler can
    /// fail for good.
    ///
    /// At least 1 ([`Error::ZeroMaxDeliveries`] on joining the group); no limit unless
    /// set.
    pub fn max_deliveries(mut self, max: u32) -> Self {
        self.max_deliveries = Some(max);
        self
    }

    /// Delays before redeliveries.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// At most this many unacknowledged messages per partition (default 1024; joining
    /// with 0 fails with [`Error::ZeroInFlight`]).
    ///
    /// It is flow control: while a partition has this many out, a receive there waits
    /// for one of them to be acked, nacked, rejected or to run out its lease (or for a
    /// redelivery that falls due), and new messages wait in the log. Publishes to a
    /// partition at the limit do not wake such a receive once its timer is set for the
    /// next lease or delay to run out (they wake it once if not, so that it sets one):
    /// members waiting behind slow work cost no CPU however busy the topic. While
    /// members wait, one of them always has its timer set for that deadline. With the
    /// topic's clock (the default), a publish made after a deadline passed by that clock
    /// wakes a member even if no timer has rung yet; a group with a clock of its own
    /// counts on its timer to keep time with that clock. Without a timer (possible only
    /// without `std`), publishes wake them as for any group, as they are then what
    /// brings a member back to look at its deadlines.
    pub fn max_in_flight(mut self, max: usize) -> Self {
        self.max_in_flight = max;
        self
    }

    /// The clock leases are measured with (default: the topic's; with `std`, else a
    /// [`StdClock`]).
    ///
    // Without `std` the item does not exist here: the link goes to the crate's list of
    // features.
    #[cfg_attr(feature = "std", doc = "[`StdClock`]: crate::StdClock")]
    #[cfg_attr(not(feature = "std"), doc = "[`StdClock`]: crate#features")]
    pub fn clock(mut self, clock: alloc::sync::Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The timer that wakes parked members when a lease or a delay runs out (default with
    /// `std`: [`ThreadTimer`]).
    ///
    // Without `std` the item does not exist here: the link goes to the crate's list of
    // features.
    #[cfg_attr(feature = "std", doc = "[`ThreadTimer`]: crate::ThreadTimer")]
    #[cfg_attr(not(feature = "std"), doc = "[`ThreadTimer`]: crate#features")]
    pub fn timer(mut self, timer: alloc::sync::Arc<dyn Timer>) -> Self {
        self.timer = Some(timer);
        self
    }
}

/// An explicit group's settings as the group keeps them.
pub(crate) struct AckSettings<T> {
    pub(super) ack_wait: u64,
    pub(super) max_deliveries: Option<u32>,
    pub(super) backoff: Backoff,
    pub(super) max_in_flight: usize,
    pub(super) dead_letter: Option<alloc::sync::Arc<dyn DeadLetterSink<T> + Send + Sync>>,
    /// 1 once a publish to the dead-letter topic found it closed (it never reopens).
    pub(super) dead_letter_closed: crate::sync::AtomicUsize,
    /// The values of messages whose move to the dead-letter topic found it full, by
    /// partition and offset, kept for the retry: the log may evict a message meanwhile
    /// (`DropOldest`, TTL), and the move must not then be lost. Taken under a
    /// partition's lock (never the other way round); what is let go of is dropped after
    /// both.
    pub(super) parcels: crate::sync::Mutex<BTreeMap<(usize, u64), T>>,
    pub(super) clock: alloc::sync::Arc<dyn Clock>,
    pub(super) timer: Option<alloc::sync::Arc<dyn Timer>>,
}

impl<T> AckSettings<T> {
    pub(super) fn resolve(
        config: AckConfig<T>,
        topic_clock: Option<&alloc::sync::Arc<dyn Clock>>,
    ) -> Result<Self, Error> {
        if config.max_in_flight == 0 {
            return Err(Error::ZeroInFlight);
        }
        if config.ack_wait.is_zero() {
            return Err(Error::ZeroAckWait);
        }
        if config.max_deliveries == Some(0) {
            return Err(Error::ZeroMaxDeliveries);
        }
        let clock = match (config.clock, topic_clock) {
            // A clock of the group's own is anchored here; the topic's (next arm) was
            // anchored when the topic was made, and must stay the same `Arc`.
            (Some(c), _) => crate::time::anchored(c).0,
            (None, Some(c)) => c.clone(),
            #[cfg(feature = "std")]
            (None, None) => alloc::sync::Arc::new(crate::time::StdClock::new()),
            #[cfg(not(feature = "std"))]
            (None, None) => return Err(Error::ClockRequired),
        };
        #[cfg(feature = "std")]
        let timer = config
            .timer
            .or_else(|| Some(alloc::sync::Arc::new(crate::time::ThreadTimer::global()) as _));
        #[cfg(not(feature = "std"))]
        let timer = config.timer;
        Ok(Self {
            ack_wait: as_nanos(config.ack_wait),
            max_deliveries: config.max_deliveries,
            backoff: config.backoff,
            max_in_flight: config.max_in_flight,
            dead_letter: config.dead_letter,
            dead_letter_closed: crate::sync::AtomicUsize::new(0),
            parcels: crate::sync::Mutex::new(BTreeMap::new()),
            clock,
            timer,
        })
    }

    /// The group's clock, read now (the user's code: outside every lock).
    pub(super) fn now(&self) -> u64 {
        as_nanos(self.clock.now())
    }

    /// What each partition keeps of these settings; `topic_clock` is the topic's clock.
    pub(crate) fn part(&self, topic_clock: Option<&alloc::sync::Arc<dyn Clock>>) -> AckPart {
        let topic_clock = topic_clock.is_some_and(|c| {
            core::ptr::addr_eq(
                alloc::sync::Arc::as_ptr(c),
                alloc::sync::Arc::as_ptr(&self.clock),
            )
        });
        AckPart::new(self.max_in_flight, self.timer.is_some(), topic_clock)
    }

    /// Whether messages that reach `max_deliveries` are still moved out of the group:
    /// not once the dead-letter topic is closed (they are delivered again instead).
    pub(super) fn dead_letters_move(&self) -> bool {
        self.dead_letter.is_none()
            || self.dead_letter_closed.load(crate::sync::Ordering::Acquire) == 0
    }
}
