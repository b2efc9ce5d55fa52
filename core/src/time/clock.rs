//! Time, as memq-core sees it: a monotonic reading from a [`Clock`] the user supplies.
//!
//! The core owns no clock. `std` adds `StdClock`; the runtime adapters in `memq` add
//! their own; tests use [`ManualClock`] to move time by hand.
//!
//! Part of the time layer: depends only on the sync facade.

use core::time::Duration;

use crate::sync::Mutex;

/// A monotonic clock: `now` never goes backwards. The epoch is the clock's own choice.
///
/// `now` is always called outside memq's locks. A topic's clock
/// ([`TopicConfig::clock`](crate::TopicConfig::clock)) is read:
/// - once when the topic is made (a clock whose readings are near the end of what 64-bit
///   nanoseconds hold is then read from that first reading on);
/// - once per publish, single or batch, to stamp the messages;
/// - on topics with a TTL only: once per receive (one reading for all the partitions a
///   receive visits), per subscribe and per group join, to drop what has expired, and
///   per [`Topic::stats`](crate::Topic::stats), to count it. Without a TTL these never
///   call it.
///
/// The clock an explicit-ack group keeps its leases by (its own
/// [`AckConfig::clock`](crate::AckConfig::clock), else the topic's) is read too: when
/// that group's members receive, when a delivery is settled (ack, nack, reject, touch,
/// or dropped), when a dead letter is moved, and by
/// [`AckConsumer::pending`](crate::AckConsumer::pending).
pub trait Clock: Send + Sync {
    /// The time elapsed since the clock's epoch.
    fn now(&self) -> Duration;
}

/// A clock that moves only when told to: for tests and simulations.
///
/// # Examples
///
/// ```
/// # use memq_core as memq;
/// use memq::{Clock, ManualClock};
/// use core::time::Duration;
///
/// let clock = ManualClock::new();
/// clock.advance(Duration::from_millis(5));
/// assert_eq!(clock.now(), Duration::from_millis(5));
/// ```
#[derive(Debug, Default)]
pub struct ManualClock {
    // A mutex rather than an `AtomicU64`: 32-bit targets such as thumbv7em have no 64-bit
    // atomics.
    now: Mutex<Duration>,
}

impl ManualClock {
    /// A clock reading zero.
    pub fn new() -> Self {
        Self {
            now: Mutex::new(Duration::ZERO),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock();
        *now = now.saturating_add(by);
    }

    /// Sets the reading to `to`, if that is not earlier than the current one (the clock
    /// stays monotonic).
    pub fn set(&self, to: Duration) {
        let mut now = self.now.lock();
        *now = (*now).max(to);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        *self.now.lock()
    }
}

/// The operating system's monotonic clock, counted from the moment this value was made.
#[cfg(feature = "std")]
#[derive(Debug, Clone, Copy)]
pub struct StdClock {
    epoch: std::time::Instant,
}

#[cfg(feature = "std")]
impl StdClock {
    /// A clock whose epoch is now.
    pub fn new() -> Self {
        Self {
            epoch: std::time::Instant::now(),
        }
    }
}

#[cfg(feature = "std")]
impl Default for StdClock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "std")]
impl Clock for StdClock {
    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }
}

pub(crate) fn as_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// memq keeps times as `u64` nanoseconds, which run out 584 years after a clock's epoch.
/// A clock whose first reading is already this far (2^62 ns, about 146 years) from its
/// epoch, such as one counting from the year 1, is read from an origin instead (see
/// [`anchored`]).
const FAR: u64 = 1 << 62;

/// Where a far clock's readings start from, seen through [`Anchored`]: 2^61 ns (about 73
/// years), which leaves more than 400 years before the readings run out.
const ANCHOR: u64 = 1 << 61;

/// A far clock (see [`FAR`]), read from `origin`.
struct Anchored {
    clock: alloc::sync::Arc<dyn Clock>,
    origin: Duration,
}

impl Clock for Anchored {
    fn now(&self) -> Duration {
        self.clock.now().saturating_sub(self.origin)
    }
}

/// `clock` as memq reads it, and the origin to add to those readings to give the clock's
/// own (for timestamps). A clock whose first reading fits comfortably is kept as it is,
/// with origin zero: only a far one (see [`FAR`]) is read through [`Anchored`], so that
/// its readings neither saturate nor all look the same.
pub(crate) fn anchored(
    clock: alloc::sync::Arc<dyn Clock>,
) -> (alloc::sync::Arc<dyn Clock>, Duration) {
    let first = clock.now();
    if as_nanos(first) < FAR {
        return (clock, Duration::ZERO);
    }
    let origin = first.saturating_sub(Duration::from_nanos(ANCHOR));
    (alloc::sync::Arc::new(Anchored { clock, origin }), origin)
}
