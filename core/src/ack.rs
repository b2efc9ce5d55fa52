//! Explicit acknowledgements: at-least-once consumer groups.
//!
//! In an explicit-ack group a delivery is a lease. The member [`ack`](Delivery::ack)s it
//! when done, [`nack`](Delivery::nack)s it to have it delivered again (at once or after a
//! delay), [`reject`](Delivery::reject)s it to send it to the dead-letter topic, or
//! [`touch`](Delivery::touch)es it to extend the lease. A delivery dropped without any of
//! these, a lease that runs out (`ack_wait`), and the leases of a member that leaves all
//! return the message to the group. After `max_deliveries` attempts a message is published
//! to the dead-letter topic with its origin, and only then removed from the group: while
//! that topic is full the message waits in the group, and once it is closed messages are
//! delivered again instead, so none is lost.
//!
//! The group's committed position on a partition is its lowest unacknowledged offset;
//! under `Block` retention never passes it (a TTL may: then the acknowledged messages
//! after the evicted one are not held back for it). At most `max_in_flight` messages per partition
//! are unacknowledged at a time, which is also flow control.
//!
//! State lives per partition in the log ([`Acks`]), under the partition's lock. This module
//! owns it; the group module owns membership and assignment.

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;

use crate::alarm::Alarm;
use crate::clock::{as_nanos, Clock};
use crate::config::StartAt;
use crate::error::{Error, RecvError, TryRecvError};
use crate::group::Consumer;
use crate::message::Message;
use crate::partition::Shared;
use crate::subscriber::to_message;
use crate::sync::Arc;
use crate::topic::Topic;
use crate::wait::{SpentWakers, WaiterList, WakeList};

// ----- configuration -------------------------------------------------------------------

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

/// Wakes a waiting task later: how leases that run out and delayed redeliveries reach
/// members that are parked.
///
/// With `std`, [`ThreadTimer`] is used unless the config names another; runtime adapters
/// provide their own. Without any timer, deadlines are still honoured whenever a member
/// polls, but a parked member is not woken by the clock alone.
///
// Without `std` the item does not exist here: the link goes to the crate's list of
// features.
#[cfg_attr(feature = "std", doc = "[`ThreadTimer`]: crate::ThreadTimer")]
#[cfg_attr(not(feature = "std"), doc = "[`ThreadTimer`]: crate#features")]
pub trait Timer: Send + Sync {
    /// Wakes `waker` once `delay` has passed.
    fn wake_after(&self, delay: Duration, waker: Waker);

    /// Wakes `waker` once `delay` has passed, unless the returned entry is dropped first:
    /// dropping it withdraws the wake-up. memq asks for every wake-up this way and drops
    /// the entry as soon as nobody waits for it any more (the wait ended, the member or
    /// the publisher gave up, the topic is gone), so that a long lease or TTL does not
    /// keep the wake-up, or a thread or task to serve it, until its time.
    ///
    /// memq drops entries outside its locks, on any thread, and may drop one while the
    /// wake-up is running on another thread or after it ran: withdrawing must then do
    /// nothing. It never withdraws from inside the wake-up call itself (an entry whose
    /// waker was woken is let go of without withdrawing).
    ///
    /// The default cannot withdraw: it calls [`Timer::wake_after`] and returns `None`.
    /// Such a wake-up still comes at its time, and then wakes nothing (memq's waker no
    /// longer reaches a task that stopped waiting); until then the timer holds only that
    /// small waker.
    fn wake_after_cancellable(&self, delay: Duration, waker: Waker) -> Option<TimerEntry> {
        self.wake_after(delay, waker);
        None
    }
}

/// A wake-up a [`Timer`] can withdraw, returned by [`Timer::wake_after_cancellable`]:
/// dropping it runs the withdrawal the timer gave it, once.
///
/// # Examples
///
/// ```
/// # use memq_core as memq;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
///
/// use memq::TimerEntry;
///
/// let withdrawn = Arc::new(AtomicBool::new(false));
/// let flag = withdrawn.clone();
/// let entry = TimerEntry::new(move || flag.store(true, Ordering::SeqCst));
/// drop(entry);
/// assert!(withdrawn.load(Ordering::SeqCst));
/// ```
#[must_use = "dropping a timer entry withdraws its wake-up at once"]
pub struct TimerEntry {
    withdraw: Option<alloc::boxed::Box<dyn FnOnce() + Send + Sync>>,
}

impl TimerEntry {
    /// An entry that runs `withdraw` when it is dropped.
    pub fn new(withdraw: impl FnOnce() + Send + Sync + 'static) -> Self {
        Self {
            withdraw: Some(alloc::boxed::Box::new(withdraw)),
        }
    }

    /// Lets go of the entry without withdrawing: its wake-up has run.
    pub(crate) fn disarm(mut self) {
        drop(self.withdraw.take());
    }
}

impl Drop for TimerEntry {
    fn drop(&mut self) {
        if let Some(withdraw) = self.withdraw.take() {
            withdraw();
        }
    }
}

impl fmt::Debug for TimerEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerEntry").finish_non_exhaustive()
    }
}

/// Where messages that will not be delivered again go.
trait DeadLetterSink<T> {
    /// Publishes `letter`, or hands it back with why not.
    fn send(&self, letter: DeadLetter<T>) -> Result<(), (SinkError, DeadLetter<T>)>;
}

/// Why a dead letter was not published.
enum SinkError {
    /// Not now (the dead-letter topic is full, or its router refused): try again later.
    Later,
    /// Never: the dead-letter topic is closed.
    Closed,
}

impl<T> DeadLetterSink<T> for Topic<DeadLetter<T>> {
    fn send(&self, letter: DeadLetter<T>) -> Result<(), (SinkError, DeadLetter<T>)> {
        match self.try_publish(letter) {
            Ok(_) => Ok(()),
            Err(crate::PublishError::Closed(letter)) => Err((SinkError::Closed, letter)),
            Err(e) => Err((SinkError::Later, e.into_inner())),
        }
    }
}

/// How long a message waits before its move to a full dead-letter topic is retried: this,
/// or the group's `ack_wait` if shorter, but never less than [`DEAD_LETTER_RETRY_MIN`].
const DEAD_LETTER_RETRY: u64 = 10_000_000;

/// The shortest wait before a move to a full dead-letter topic is retried (1 ms): long
/// enough that one receive never meets the same message again, so a receive with a
/// tiny `ack_wait` does not spin while the dead-letter topic stays full.
const DEAD_LETTER_RETRY_MIN: u64 = 1_000_000;

/// Why a message went to the dead-letter topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeadLetterReason {
    /// It was delivered `max_deliveries` times without an ack.
    MaxDeliveries,
    /// A member rejected it.
    Rejected,
}

/// A message sent to a dead-letter topic, with where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadLetter<T> {
    /// The origin topic's name, if it belongs to a broker.
    pub topic: Option<String>,
    /// The group that gave up on it.
    pub group: String,
    /// The origin partition.
    pub partition: u32,
    /// The origin offset.
    pub offset: u64,
    /// How many times it was delivered.
    pub deliveries: u32,
    /// Why it was dead-lettered.
    pub reason: DeadLetterReason,
    /// The message.
    pub value: T,
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
    dead_letter: Option<alloc::sync::Arc<dyn DeadLetterSink<T> + Send + Sync>>,
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

    /// The topic dead letters are published to.
    ///
    /// While it is full, a message bound there stays in the group (unacknowledged, not
    /// delivered again) and the move is retried every few milliseconds. Once it is
    /// closed, nothing more can go there: messages are delivered again instead, as if
    /// `max_deliveries` were not set, so that none is lost.
    ///
    /// The group keeps `topic`, a publishing handle, for as long as the group lives (until
    /// it is deleted and its last member and delivery are gone): dropping every other
    /// handle does not close the dead-letter topic, and its readers wait for more. Close
    /// it with [`Topic::close`] to end them; deleting the group may close it, when the
    /// group held its last handle.
    pub fn dead_letter(mut self, topic: Topic<DeadLetter<T>>) -> Self
    where
        T: Send + 'static,
    {
        self.dead_letter =
            Some(alloc::sync::Arc::new(topic)
                as alloc::sync::Arc<dyn DeadLetterSink<T> + Send + Sync>);
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
    ack_wait: u64,
    max_deliveries: Option<u32>,
    backoff: Backoff,
    max_in_flight: usize,
    dead_letter: Option<alloc::sync::Arc<dyn DeadLetterSink<T> + Send + Sync>>,
    /// 1 once a publish to the dead-letter topic found it closed (it never reopens).
    dead_letter_closed: crate::sync::AtomicUsize,
    /// The values of messages whose move to the dead-letter topic found it full, by
    /// partition and offset, kept for the retry: the log may evict a message meanwhile
    /// (`DropOldest`, TTL), and the move must not then be lost. Taken under a
    /// partition's lock (never the other way round); what is let go of is dropped after
    /// both.
    parcels: crate::sync::Mutex<BTreeMap<(usize, u64), T>>,
    clock: alloc::sync::Arc<dyn Clock>,
    timer: Option<alloc::sync::Arc<dyn Timer>>,
}

impl<T> AckSettings<T> {
    fn resolve(
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
            (Some(c), _) => crate::clock::anchored(c).0,
            (None, Some(c)) => c.clone(),
            #[cfg(feature = "std")]
            (None, None) => alloc::sync::Arc::new(crate::clock::StdClock::new()),
            #[cfg(not(feature = "std"))]
            (None, None) => return Err(Error::ClockRequired),
        };
        #[cfg(feature = "std")]
        let timer = config
            .timer
            .or_else(|| Some(alloc::sync::Arc::new(ThreadTimer::global()) as _));
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

    fn now(&self) -> u64 {
        as_nanos(self.clock.now())
    }

    /// What each partition keeps of these settings; `topic_clock` is the topic's clock.
    pub(crate) fn part(&self, topic_clock: Option<&alloc::sync::Arc<dyn Clock>>) -> AckPart {
        AckPart {
            max_in_flight: self.max_in_flight,
            timed: self.timer.is_some(),
            topic_clock: topic_clock.is_some_and(|c| {
                core::ptr::addr_eq(
                    alloc::sync::Arc::as_ptr(c),
                    alloc::sync::Arc::as_ptr(&self.clock),
                )
            }),
        }
    }

    /// Whether messages that reach `max_deliveries` are still moved out of the group:
    /// not once the dead-letter topic is closed (they are delivered again instead).
    fn dead_letters_move(&self) -> bool {
        self.dead_letter.is_none()
            || self.dead_letter_closed.load(crate::sync::Ordering::Acquire) == 0
    }
}

// ----- per-partition state -------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PState {
    /// Delivered to `member`, until `deadline`.
    Leased { deadline: u64 },
    /// Waiting to be delivered again at `at`.
    Delayed { at: u64 },
    /// Waiting in `ready` to be delivered again.
    Ready,
    /// Being published to the dead-letter topic (outside the lock).
    DeadLettering,
}

#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub(crate) member: u64,
    pub(crate) deliveries: u32,
    pub(crate) state: PState,
    first_delivered: u64,
    /// Set once the message is bound for the dead-letter topic: if that topic was full,
    /// the next attempt moves it there again instead of delivering it.
    dead: Option<DeadLetterReason>,
}

/// An explicit group's bookkeeping on one partition.
#[derive(Debug)]
pub(crate) struct Acks {
    /// Next offset never delivered yet.
    pub(crate) next: u64,
    /// Delivered and not acknowledged, by offset.
    pub(crate) unacked: BTreeMap<u64, Pending>,
    ready: VecDeque<u64>,
    delayed: BTreeSet<(u64, u64)>,
    leases: BTreeSet<(u64, u64)>,
    pub(crate) redelivered: u64,
    pub(crate) dead_lettered: u64,
    pub(crate) acked: u64,
    /// Unacknowledged messages evicted (`DropOldest`, TTL) before they were acked.
    pub(crate) evicted_unacked: u64,
    /// What the partition needs to know of the group's settings.
    part: AckPart,
}

/// What a partition's [`Acks`] keeps of its group's settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AckPart {
    /// The group's `max_in_flight`.
    max_in_flight: usize,
    /// Whether the group has a timer: its waiting members then set alarms for the
    /// partition's deadlines (see [`Acks::keep_watch`]).
    timed: bool,
    /// Whether leases are measured with the topic's own clock, whose reading a publish
    /// has at hand (see [`Acks::full_until`]).
    topic_clock: bool,
}

impl Acks {
    pub(crate) fn new(start: u64, part: AckPart) -> Self {
        Self {
            part,
            next: start,
            unacked: BTreeMap::new(),
            ready: VecDeque::new(),
            delayed: BTreeSet::new(),
            leases: BTreeSet::new(),
            redelivered: 0,
            dead_lettered: 0,
            acked: 0,
            evicted_unacked: 0,
        }
    }

    /// While no member can take anything here (`max_in_flight` messages are out, none
    /// is ready to be delivered again), the clock time by which something will be: the
    /// earliest lease end or redelivery time. `None` while a member can take something,
    /// or nothing is timed (every message out is on its way to the dead-letter topic;
    /// the member moving it wakes another when done). `ready` may hold stale entries,
    /// which only make this `None` for a while.
    ///
    /// `now` is the topic's clock reading, if the publish that asks read one: when leases
    /// are measured with that clock and a deadline has passed by it, the partition is
    /// not full any more (the next member to look takes the message again), whether or
    /// not a timer has rung yet. A group with a clock of its own counts on its timer to
    /// keep time with it.
    pub(crate) fn full_until(&self, now: u64) -> Option<u64> {
        if self.unacked.len() < self.part.max_in_flight || !self.ready.is_empty() {
            return None;
        }
        let by = self.next_deadline()?;
        if self.part.topic_clock && by <= now {
            return None;
        }
        Some(by)
    }

    /// Makes sure that, while members wait on this partition, one of them looks when
    /// there is something to take: now, a message ready to be delivered again (one that
    /// a member's visit found due, next to the one it took) or a new one (below `high`,
    /// the log's end) with a slot free under `max_in_flight`; later, the next lease or
    /// delay to run out, for which one of them has its timer set. A member woken and not
    /// back yet counts for all of these. If none is (the member woken for it used the
    /// wake-up on something else; the member whose timer it was took a message, gave up
    /// or moved; the lease is new), the first waiting member (for a deadline: the first
    /// without a timer for it) is woken into `out`, to look. Without a timer, deadlines
    /// are left to publishes.
    // Out of line: it runs on every receive of an explicit-ack member, and must not grow
    // the paths of other readers it is reached from.
    #[inline(never)]
    pub(crate) fn keep_watch(&self, waiters: &mut WaiterList, high: u64, out: &mut WakeList) {
        if waiters.waiting() == 0 || waiters.any_notified() {
            return;
        }
        let fresh = self.next < high && self.unacked.len() < self.part.max_in_flight;
        if fresh || !self.ready.is_empty() {
            // `ready` may hold stale entries: a wake-up for nothing at worst.
            waiters.notify_one(out);
            return;
        }
        if !self.part.timed {
            return;
        }
        if let Some(by) = self.next_deadline() {
            if !waiters.has_timer_by(by) {
                waiters.notify_uncovered(1, by, out);
            }
        }
    }

    /// The lowest offset not yet acknowledged: the group's committed position.
    pub(crate) fn committed(&self) -> u64 {
        self.unacked
            .keys()
            .next()
            .map_or(self.next, |&o| o.min(self.next))
    }

    /// Where the group's position in the log, which holds back retention, goes, with
    /// `low` the oldest offset the log still has: the lowest unacknowledged offset still
    /// retained, else the next one to deliver, never below `low`. It is the committed
    /// position unless a TTL (or `DropOldest`) evicted an unacknowledged message: that
    /// one is gone, and must not keep holding the acknowledged messages after it. Its
    /// delivery may still be acked, and it is counted in `evicted_unacked` if it comes
    /// back to the group.
    pub(crate) fn holds_from(&self, low: u64) -> u64 {
        self.unacked
            .range(low..)
            .next()
            .map_or(self.next, |(&o, _)| o.min(self.next))
            .max(low)
    }

    /// The earliest lease end or redelivery time, if any.
    fn next_deadline(&self) -> Option<u64> {
        let lease = self.leases.first().map(|&(d, _)| d);
        let delay = self.delayed.first().map(|&(d, _)| d);
        match (lease, delay) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Takes `offset` out of whatever timed set its state puts it in.
    fn untime(&mut self, offset: u64) {
        if let Some(p) = self.unacked.get(&offset) {
            match p.state {
                PState::Leased { deadline } => {
                    self.leases.remove(&(deadline, offset));
                }
                PState::Delayed { at } => {
                    self.delayed.remove(&(at, offset));
                }
                PState::Ready | PState::DeadLettering => {}
            }
        }
    }

    /// Returns `offset` to the group, after `delay` nanoseconds (0: at once).
    fn requeue(&mut self, offset: u64, now: u64, delay: u64) {
        self.untime(offset);
        let Some(p) = self.unacked.get_mut(&offset) else {
            return;
        };
        if delay == 0 {
            p.state = PState::Ready;
            self.ready.push_back(offset);
        } else {
            let at = now.saturating_add(delay);
            p.state = PState::Delayed { at };
            self.delayed.insert((at, offset));
        }
    }

    /// Moves leases that ran out and delays that passed into `ready`.
    fn promote(&mut self, now: u64, backoff: &Backoff) {
        while let Some(&(deadline, offset)) = self.leases.first() {
            if deadline > now {
                break;
            }
            let attempt = self.unacked.get(&offset).map_or(0, |p| p.deliveries);
            self.requeue(offset, now, as_nanos(backoff.delay(attempt)));
        }
        while let Some(&(at, offset)) = self.delayed.first() {
            if at > now {
                break;
            }
            self.delayed.remove(&(at, offset));
            if let Some(p) = self.unacked.get_mut(&offset) {
                p.state = PState::Ready;
                self.ready.push_back(offset);
            }
        }
    }

    /// Returns every lease held by `member` to the group at once.
    fn release_member(&mut self, member: u64, now: u64) -> usize {
        let held: Vec<u64> = self
            .unacked
            .iter()
            .filter(|(_, p)| p.member == member && matches!(p.state, PState::Leased { .. }))
            .map(|(&o, _)| o)
            .collect();
        for &o in &held {
            self.requeue(o, now, 0);
        }
        held.len()
    }
}

/// What the next delivery attempt found on a partition.
enum Take<T> {
    Delivered(Message<T>, u32),
    DeadLetter {
        offset: u64,
        deliveries: u32,
        reason: DeadLetterReason,
        /// A copy of the message for the dead-letter topic (`None` without one).
        value: Option<T>,
    },
    Lagged(u64),
    Nothing,
}

/// What [`AckConsumer::take`] found to do on a partition, before it changes anything.
#[derive(Debug, Clone, Copy)]
enum Choice {
    /// Deliver this ready message again.
    Redeliver(u64),
    /// Deliver this message for the first time.
    Fresh(u64),
    /// Move this message to the dead-letter topic (deliveries so far, why).
    DeadLetter(u64, u32, DeadLetterReason),
    /// The group fell behind the retained window by this many.
    Lag(u64),
    Nothing,
}

// ----- the member ----------------------------------------------------------------------

impl<T> Topic<T> {
    /// Joins the explicit-ack group `name`, creating it with `config` at `start` if it does
    /// not exist (an existing group keeps its own settings and position).
    ///
    /// # Errors
    ///
    /// [`Error::GroupModeMismatch`] if `name` is an automatic-commit group;
    /// [`Error::ZeroInFlight`], [`Error::ZeroAckWait`] or [`Error::ZeroMaxDeliveries`]
    /// for a zero in `config`; [`Error::ClockRequired`] (without `std` and without a
    /// clock); or [`Error::OffsetOutOfRange`] for a start past the end.
    pub fn group_acked(
        &self,
        name: &str,
        start: StartAt,
        config: AckConfig<T>,
    ) -> Result<AckConsumer<T>, Error> {
        let settings = AckSettings::resolve(config, self.shared.clock.as_ref())?;
        let inner = self.join_group(name, start, Some(settings))?;
        Ok(AckConsumer {
            inner,
            scheduled: None,
            lagged: None,
        })
    }
}

/// A member of an explicit-ack group: each [`Delivery`] is a lease to ack, nack, reject
/// or touch.
///
/// Made by [`Topic::group_acked`]. Dropping it leaves the group and returns its leases to
/// the group at once.
pub struct AckConsumer<T> {
    inner: Consumer<T>,
    /// The timer wake-up last scheduled: its deadline, its task, whether it rang.
    scheduled: Option<Alarm>,
    /// A lag met by a batch receive after it had deliveries to return: reported by the
    /// next receive, before anything else.
    lagged: Option<u64>,
}

impl<T> fmt::Debug for AckConsumer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AckConsumer")
            .field("member", &self.inner)
            .finish()
    }
}

/// One unacknowledged message of a group, for inspection.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PendingInfo {
    /// Its partition.
    pub partition: u32,
    /// Its offset.
    pub offset: u64,
    /// The member it was last delivered to.
    pub member: u64,
    /// How many times it was delivered.
    pub deliveries: u32,
    /// Time since its first delivery.
    pub age: Duration,
    /// Whether a member holds it now (`true`) or it waits for redelivery.
    pub leased: bool,
}

impl<T> AckConsumer<T> {
    /// The group's settings (always present: `group_acked` only joins groups created
    /// with them).
    fn settings(&self) -> Option<&AckSettings<T>> {
        self.inner.group.acks.as_ref()
    }

    /// This member's id within the group.
    pub fn member_id(&self) -> u64 {
        self.inner.id
    }

    /// The group's name.
    pub fn group_name(&self) -> &str {
        self.inner.group_name()
    }

    /// The partitions assigned to this member now (as [`Consumer::assignment`]).
    ///
    /// [`Consumer::assignment`]: crate::Consumer::assignment
    pub fn assignment(&self) -> Vec<u32> {
        self.inner.assignment()
    }

    /// The group's committed position (lowest unacknowledged offset) in `partition`.
    ///
    /// # Errors
    ///
    /// [`Error::PartitionOutOfRange`], or [`Error::UnknownGroup`] if it was deleted.
    pub fn committed(&self, partition: u32) -> Result<u64, Error> {
        self.inner.committed(partition)
    }

    /// Every unacknowledged message of the group, on every partition.
    pub fn pending(&self) -> Vec<PendingInfo> {
        let Some(settings) = self.settings() else {
            return Vec::new();
        };
        let now = settings.now();
        let shared = &self.inner.shared;
        let mut out = Vec::new();
        for (p, part) in shared.parts.iter().enumerate() {
            let log = part.log.lock();
            let Some(acks) = log
                .group_ref(self.inner.group.ids[p])
                .and_then(|g| g.acks.as_ref())
            else {
                continue;
            };
            out.extend(acks.unacked.iter().map(|(&offset, pe)| PendingInfo {
                partition: p as u32,
                offset,
                member: pe.member,
                deliveries: pe.deliveries,
                age: Duration::from_nanos(now.saturating_sub(pe.first_delivered)),
                leased: matches!(pe.state, PState::Leased { .. }),
            }));
        }
        out
    }

    /// One attempt to take a delivery from partition `p` (locked inside).
    fn take(&mut self, p: usize, now: u64, waker: Option<&Waker>) -> (Take<T>, bool, Option<u64>)
    where
        T: Clone,
    {
        let shared = self.inner.shared.clone();
        let group = self.inner.group.clone();
        let Some(settings) = group.acks.as_ref() else {
            return (Take::Nothing, true, None);
        };
        let (ack_wait, max_deliveries, max_in_flight) = (
            settings.ack_wait,
            settings.max_deliveries,
            settings.max_in_flight,
        );
        let backoff = &settings.backoff;
        let dead_letters_move = settings.dead_letters_move();
        let timed = settings.timer.is_some();
        let member = self.inner.id;
        // Wakers let go of under the lock, dropped after it.
        let mut spent = SpentWakers::new();
        let mut wl = WakeList::new();
        // Wake-ups of other members, kept apart: `expire` may fill `wl` with publishers.
        let mut watch = WakeList::new();
        // Expired values, dropped after the lock.
        let mut dead = Vec::new();
        // The topic's clock (the user's code) is read before the lock is taken.
        let topic_now = shared.expiry_now();
        let mut log = shared.parts[p].log.lock();
        shared.expire(&mut log, topic_now, &mut wl, &mut dead);
        // The oldest message still in the log: on a releasing topic, messages a reader
        // had fetched ahead before this group attached may be out of it.
        let (low, high, closed) = (log.first(), log.high, log.closed);
        let retained_from = log.low;
        let Some(g) = log.group(group.ids[p]) else {
            return (Take::Nothing, true, None);
        };
        let Some(acks) = g.acks.as_mut() else {
            return (Take::Nothing, true, None);
        };
        acks.promote(now, backoff);
        let was_done = closed && acks.next >= high && acks.unacked.is_empty();
        // Whether the partition had no lease before this visit (see the delivery below).
        let unleased = acks.leases.is_empty();
        // What to hand out, chosen without changing anything but dropping stale and
        // evicted entries: the value is cloned next, and a `T::clone` that panics must
        // leave the message where it was (no delivery attempt used up, nothing counted).
        let choice = loop {
            let Some(&offset) = acks.ready.front() else {
                break if acks.unacked.len() >= max_in_flight {
                    Choice::Nothing
                } else if acks.next < low {
                    Choice::Lag(low - acks.next)
                } else if acks.next < high {
                    Choice::Fresh(acks.next)
                } else {
                    Choice::Nothing
                };
            };
            let Some(pe) = acks.unacked.get_mut(&offset) else {
                acks.ready.pop_front();
                continue;
            };
            if pe.state != PState::Ready {
                acks.ready.pop_front();
                continue; // stale queue entry
            }
            // Evicted before it was settled, unless it is bound for the dead-letter topic
            // and its value was kept for that (see `AckSettings::parcels`).
            if offset < low
                && !(pe.dead.is_some() && settings.parcels.lock().contains_key(&(p, offset)))
            {
                acks.ready.pop_front();
                acks.unacked.remove(&offset);
                acks.evicted_unacked += 1;
                continue;
            }
            if let Some(reason) = pe.dead {
                break Choice::DeadLetter(offset, pe.deliveries, reason);
            }
            if dead_letters_move && max_deliveries.is_some_and(|m| pe.deliveries >= m) {
                break Choice::DeadLetter(offset, pe.deliveries, DeadLetterReason::MaxDeliveries);
            }
            break Choice::Redeliver(offset);
        };
        // The value, cloned while nothing has changed: a message to deliver, or one bound
        // for the dead-letter topic (published from this copy after the lock).
        let value = match choice {
            Choice::Redeliver(offset) | Choice::Fresh(offset) => log.entry_at(offset),
            Choice::DeadLetter(offset, ..) if settings.dead_letter.is_some() => {
                // The copy kept by an earlier try, if any: the log may have evicted it.
                let kept = settings.parcels.lock().get(&(p, offset)).cloned();
                match kept {
                    Some(value) => Some(crate::log::Entry {
                        offset,
                        ts: 0,
                        value,
                    }),
                    None => log.entry_at(offset),
                }
            }
            _ => None,
        };
        let Some(g) = log.group(group.ids[p]) else {
            return (Take::Nothing, true, None);
        };
        let Some(acks) = g.acks.as_mut() else {
            return (Take::Nothing, true, None);
        };
        let mut lagged = 0;
        let picked = match choice {
            Choice::DeadLetter(offset, deliveries, reason) => {
                acks.ready.pop_front();
                if let Some(pe) = acks.unacked.get_mut(&offset) {
                    pe.state = PState::DeadLettering;
                }
                Err((offset, deliveries, reason))
            }
            Choice::Redeliver(offset) => {
                acks.ready.pop_front();
                let deadline = now.saturating_add(ack_wait);
                let attempt = match acks.unacked.get_mut(&offset) {
                    Some(pe) => {
                        pe.deliveries = pe.deliveries.saturating_add(1);
                        pe.member = member;
                        pe.state = PState::Leased { deadline };
                        pe.deliveries
                    }
                    None => 0,
                };
                acks.leases.insert((deadline, offset));
                acks.redelivered += 1;
                Ok(Some((offset, attempt)))
            }
            Choice::Fresh(offset) => {
                acks.next += 1;
                let deadline = now.saturating_add(ack_wait);
                acks.unacked.insert(
                    offset,
                    Pending {
                        member,
                        deliveries: 1,
                        state: PState::Leased { deadline },
                        first_delivered: now,
                        dead: None,
                    },
                );
                acks.leases.insert((deadline, offset));
                Ok(Some((offset, 1)))
            }
            Choice::Lag(missed) => {
                lagged = missed;
                acks.next = low;
                Ok(None)
            }
            Choice::Nothing => Ok(None),
        };
        let holds_from = acks.holds_from(retained_from);
        let done = closed && acks.next >= high && acks.unacked.is_empty();
        let deadline = acks.next_deadline();
        let cursor = g.cursor;
        let key = &mut self.inner.keys[p];
        let mut registered = false;
        let outcome = match picked {
            Err((offset, deliveries, reason)) => {
                g.waiters.settle(*key, &mut spent);
                Take::DeadLetter {
                    offset,
                    deliveries,
                    reason,
                    value: value.map(|e| e.value),
                }
            }
            Ok(Some((offset, attempt))) => {
                g.delivered += 1;
                g.waiters.settle(*key, &mut spent);
                // Without a timer, the partition's first lease wakes one waiting member
                // to look (with one, every visit that does not end waiting here is
                // followed by `keep_watch` below).
                if unleased && !timed {
                    g.waiters.notify_one(&mut watch);
                }
                log.delivered += 1;
                match value {
                    Some(e) => {
                        debug_assert_eq!(e.offset, offset);
                        // Stamped only if the topic has a clock: the group's own clock
                        // (for leases) does not stamp messages.
                        let clocked = shared.stamp();
                        Take::Delivered(to_message(p, e, clocked), attempt)
                    }
                    // Checked `offset >= low` above under the same lock.
                    None => Take::Nothing,
                }
            }
            Ok(None) if lagged > 0 => {
                g.lagged += lagged;
                // A wake-up this member used goes on to the next waiting one when
                // messages remain past the lag.
                if g.waiters.settle(*key, &mut spent) && acks.next < high {
                    g.waiters.notify_one(&mut watch);
                }
                Take::Lagged(lagged)
            }
            Ok(None) => {
                if let (Some(w), false) = (waker, done) {
                    // With a timer, the caller arms this member's alarm for the earliest
                    // deadline of its partitions, this one's or sooner (`schedule`).
                    let alarm = if timed { deadline } else { None };
                    g.waiters.register_timed(key, w, alarm, &mut spent);
                    registered = true;
                }
                Take::Nothing
            }
        };
        if !registered {
            // This member no longer waits here: if it was the one the others counted on
            // to look (woken, or with its timer set), another does.
            if let Some(g) = log.group(group.ids[p]) {
                g.keep_watch(high, &mut watch);
            }
        }
        log.lagged += lagged;
        log.set_cursor(cursor, holds_from);
        shared.reader_advanced(&mut log, &mut wl);
        drop(log);
        // A registration made here is cancelled by whatever this poll returns, even a
        // delivery from another partition (see `Consumer::cancel_wait_except`).
        self.inner.waiting |= registered;
        if done && !was_done {
            // This visit finished a closed partition (skipping a lag, dropping evicted
            // unacked messages): members waiting on it or for the group to drain may be
            // done.
            shared.wake_drained(&group, p);
        }
        (outcome, done, deadline)
    }

    /// Publishes a dead letter (from `value`, copied under the lock) outside every lock,
    /// then settles the message.
    fn dead_letter(
        &self,
        p: usize,
        offset: u64,
        deliveries: u32,
        reason: DeadLetterReason,
        value: Option<T>,
    ) where
        T: Clone,
    {
        let shared = &self.inner.shared;
        let group = &self.inner.group;
        dead_letter(shared, group, p, offset, deliveries, reason, value);
    }

    fn poll_delivery(&mut self, waker: Option<&Waker>) -> Poll<Result<Delivery<T>, RecvError>>
    where
        T: Clone,
    {
        if let Some(missed) = self.lagged.take() {
            self.inner.cancel_wait();
            return Poll::Ready(Err(RecvError::Lagged(missed)));
        }
        // One clock reading for the whole poll: a message that a move to a full
        // dead-letter topic put back for later is then not met again by this poll,
        // however slowly it runs.
        let Some(now) = self.settings().map(AckSettings::now) else {
            return Poll::Ready(Err(RecvError::Closed));
        };
        loop {
            if self.inner.refresh() {
                self.inner.cancel_wait();
                return Poll::Ready(Err(RecvError::Closed));
            }
            let n = self.inner.assigned.len();
            let mut all_done = true;
            let mut earliest: Option<u64> = None;
            let mut retry = false;
            for k in 0..n {
                let idx = (self.inner.next + k) % n;
                let p = self.inner.assigned[idx];
                let (take, done, deadline) = self.take(p, now, waker);
                all_done &= done;
                earliest = match (earliest, deadline) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                match take {
                    Take::Delivered(message, attempt) => {
                        self.inner.next = idx + 1;
                        self.inner.cancel_wait();
                        return Poll::Ready(Ok(Delivery {
                            message,
                            attempt,
                            lease: Some(Lease {
                                shared: self.inner.shared.clone(),
                                group: self.inner.group.clone(),
                                partition: p,
                            }),
                        }));
                    }
                    Take::Lagged(missed) => {
                        self.inner.cancel_wait();
                        return Poll::Ready(Err(RecvError::Lagged(missed)));
                    }
                    Take::DeadLetter {
                        offset,
                        deliveries,
                        reason,
                        value,
                    } => {
                        self.dead_letter(p, offset, deliveries, reason, value);
                        retry = true;
                        break;
                    }
                    Take::Nothing => {}
                }
            }
            if retry {
                continue;
            }
            if n > 0 && !all_done {
                if let Some(w) = waker {
                    if let Some(at) = earliest {
                        self.schedule(w, at, now);
                    }
                    self.inner.recheck_assignment(w);
                }
                self.inner.waiting |= waker.is_some();
                return Poll::Pending;
            }
            if self.inner.shared.is_closed() && self.inner.group_drained() {
                self.inner.cancel_wait();
                return Poll::Ready(Err(RecvError::Closed));
            }
            if let Some(w) = waker {
                if self.inner.park_idle(w) {
                    w.wake_by_ref();
                }
            }
            self.inner.waiting |= waker.is_some();
            return Poll::Pending;
        }
    }

    /// Asks the timer to wake `waker` at clock time `at` unless a wake-up of the same task
    /// at or before then is already scheduled and has not rung. One scheduled for another
    /// waker (the member was polled from another task, or by a blocking call after a
    /// timed-out async one) does not count: it would wake the wrong task. One that rang
    /// before the clock showed its time does not either (see [`Alarm`]).
    fn schedule(&mut self, waker: &Waker, at: u64, now: u64) {
        if self
            .scheduled
            .as_ref()
            .is_some_and(|a| a.at() > now && a.covers(waker, at))
        {
            return;
        }
        if let Some(timer) = self.settings().and_then(|s| s.timer.clone()) {
            let (alarm, arm) = Alarm::new(waker, at, now, self.scheduled.as_ref());
            // The replaced alarm goes first, withdrawing its wake-up (no lock is held).
            self.scheduled = Some(alarm);
            arm.set(&*timer);
        }
    }

    /// Receives the next delivery (a redelivery first, else the next new message),
    /// waiting for one if needed.
    ///
    /// # Errors
    ///
    /// [`RecvError::Lagged`] if new messages were evicted before the group read them;
    /// [`RecvError::Closed`] when the topic is closed and every message was acknowledged
    /// or dead-lettered, or the group was deleted.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a lease is taken only in the poll that returns it, and a wake-up the
    /// dropped future had received passes to another waiting member.
    pub fn recv(&mut self) -> AckRecv<'_, T> {
        AckRecv { consumer: self }
    }

    /// Receives a delivery if one is available now.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if none is; otherwise as [`AckConsumer::recv`].
    pub fn try_recv(&mut self) -> Result<Delivery<T>, TryRecvError>
    where
        T: Clone,
    {
        match self.poll_delivery(None) {
            Poll::Ready(r) => r.map_err(TryRecvError::from),
            Poll::Pending => Err(TryRecvError::Empty),
        }
    }

    /// Waits for at least one delivery, then appends up to `limit` to `buf` (redeliveries
    /// first, as [`AckConsumer::recv`] takes them) and returns how many. Each is leased
    /// and settled on its own. Returns `Ok(0)` only when the topic is closed and every
    /// message was acknowledged or dead-lettered, or the group was deleted (or `limit`
    /// is 0). Fewer than `limit`
    /// come back when no more are available now or `max_in_flight` is reached.
    ///
    /// # Errors
    ///
    /// As [`AckConsumer::recv`]. A lag met after some deliveries were taken ends the
    /// batch, and the next receive reports it.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: deliveries are taken and appended to `buf` only in the poll that
    /// returns them.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[allow(unused_imports)] // for the cfg below
    /// # use memq_core as memq;
    /// # // Leases need a clock: `std`'s, or one given with `AckConfig::clock`.
    /// # #[cfg(feature = "std")]
    /// # {
    /// use memq::{AckConfig, StartAt, Topic};
    ///
    /// let topic = Topic::with_capacity(16)?;
    /// let mut member = topic.group_acked("jobs", StartAt::Earliest, AckConfig::new())?;
    /// topic.try_publish_batch(vec![1, 2, 3])?;
    /// let mut batch = Vec::new();
    /// let n = futures_executor::block_on(member.recv_many(&mut batch, 10))?;
    /// assert_eq!(n, 3);
    /// for d in batch {
    ///     d.ack()?;
    /// }
    /// assert_eq!(member.committed(0)?, 3);
    /// # }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recv_many<'a>(
        &'a mut self,
        buf: &'a mut Vec<Delivery<T>>,
        limit: usize,
    ) -> AckRecvMany<'a, T> {
        AckRecvMany {
            consumer: self,
            buf,
            limit,
        }
    }

    /// Appends up to `limit` deliveries available now to `buf` and returns how many.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if none is available; otherwise as
    /// [`AckConsumer::recv_many`].
    pub fn try_recv_many(
        &mut self,
        buf: &mut Vec<Delivery<T>>,
        limit: usize,
    ) -> Result<usize, TryRecvError>
    where
        T: Clone,
    {
        if limit == 0 {
            return Ok(0);
        }
        match self.poll_many(buf, limit, None) {
            Poll::Ready(Ok(n)) => Ok(n),
            Poll::Ready(Err(e)) => Err(e.into()),
            Poll::Pending => Err(TryRecvError::Empty),
        }
    }

    /// One delivery as [`AckConsumer::recv`] polls for it, then as many more as are
    /// available now, up to `limit` (at least 1). `Closed` is returned as an error.
    fn poll_many(
        &mut self,
        buf: &mut Vec<Delivery<T>>,
        limit: usize,
        waker: Option<&Waker>,
    ) -> Poll<Result<usize, RecvError>>
    where
        T: Clone,
    {
        match self.poll_delivery(waker) {
            Poll::Ready(Ok(d)) => buf.push(d),
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
        let mut got = 1;
        while got < limit {
            match self.poll_delivery(None) {
                Poll::Ready(Ok(d)) => {
                    buf.push(d);
                    got += 1;
                }
                Poll::Ready(Err(RecvError::Lagged(missed))) => {
                    self.lagged = Some(missed);
                    break;
                }
                // `Closed` comes back to the next receive by itself.
                Poll::Ready(Err(RecvError::Closed)) | Poll::Pending => break,
            }
        }
        Poll::Ready(Ok(got))
    }
}

/// Publishes a dead letter for `offset` outside every lock, with `held` (the value a
/// member rejected) or else the value still in the log; then settles the message:
/// - published (or there is no dead-letter topic): removed and counted dead-lettered;
/// - no value left (evicted from the log since it was picked): removed and counted as
///   evicted unacknowledged, as any evicted message is;
/// - the dead-letter topic is full: kept in the group, bound for the dead-letter topic,
///   and the move is tried again shortly (without spinning), not delivered again;
/// - the dead-letter topic is closed: delivered again (under the backoff), and from
///   then on the group delivers messages past `max_deliveries` again instead of moving
///   them, so that none is lost.
fn dead_letter<T: Clone>(
    shared: &Arc<Shared<T>>,
    group: &Arc<crate::group::GroupShared<T>>,
    p: usize,
    offset: u64,
    deliveries: u32,
    reason: DeadLetterReason,
    held: Option<T>,
) {
    let Some(settings) = group.acks.as_ref() else {
        return;
    };
    let sent = match &settings.dead_letter {
        None => Ok(true),
        Some(sink) => {
            let value =
                held.or_else(|| shared.parts[p].log.lock().entry_at(offset).map(|e| e.value));
            match value {
                Some(value) => sink
                    .send(DeadLetter {
                        topic: shared.name.clone(),
                        group: group.name.clone(),
                        partition: p as u32,
                        offset,
                        deliveries,
                        reason,
                        value,
                    })
                    .map(|()| true),
                None => Ok(false),
            }
        }
    };
    // A move that must wait keeps its value for the retry; one that is over (made, or
    // never to be made: the topic closed) lets go of what an earlier try kept. Dropped
    // here, outside every lock.
    let (sent, spent) = match sent {
        Err((SinkError::Later, letter)) => (
            Err(SinkError::Later),
            settings.parcels.lock().insert((p, offset), letter.value),
        ),
        Err((SinkError::Closed, letter)) => {
            let kept = settings.parcels.lock().remove(&(p, offset));
            drop(letter);
            (Err(SinkError::Closed), kept)
        }
        Ok(moved) => (Ok(moved), settings.parcels.lock().remove(&(p, offset))),
    };
    drop(spent);
    let now = settings.now();
    let mut wl = WakeList::new();
    let mut log = shared.parts[p].log.lock();
    let (closed, high, retained_from) = (log.closed, log.high, log.low);
    let Some(g) = log.group(group.ids[p]) else {
        return;
    };
    let Some(acks) = g.acks.as_mut() else {
        return;
    };
    match sent {
        Ok(moved) => {
            acks.untime(offset);
            acks.unacked.remove(&offset);
            if moved {
                acks.dead_lettered += 1;
            } else {
                acks.evicted_unacked += 1;
            }
        }
        Err(SinkError::Later) => {
            if let Some(pe) = acks.unacked.get_mut(&offset) {
                pe.dead = Some(reason);
            }
            let retry = DEAD_LETTER_RETRY
                .min(settings.ack_wait)
                .max(DEAD_LETTER_RETRY_MIN);
            acks.requeue(offset, now, retry);
        }
        Err(SinkError::Closed) => {
            settings
                .dead_letter_closed
                .store(1, crate::sync::Ordering::Release);
            if let Some(pe) = acks.unacked.get_mut(&offset) {
                pe.dead = None;
            }
            let delay = settings.backoff.delay(deliveries);
            acks.requeue(offset, now, as_nanos(delay));
        }
    }
    let drained = closed && acks.next >= high && acks.unacked.is_empty();
    let holds_from = acks.holds_from(retained_from);
    let cursor = g.cursor;
    g.waiters.notify_one(&mut wl);
    log.set_cursor(cursor, holds_from);
    shared.reader_advanced(&mut log, &mut wl);
    drop(log);
    if drained {
        // As when the last message of a closed partition is acknowledged.
        shared.wake_drained(group, p);
    }
}

impl<T> Drop for AckConsumer<T> {
    fn drop(&mut self) {
        // Give every lease back before leaving, so the others can take them at once.
        let Some(now) = self.settings().map(AckSettings::now) else {
            return;
        };
        let shared = self.inner.shared.clone();
        for (p, part) in shared.parts.iter().enumerate() {
            let mut wl = WakeList::new();
            let mut log = part.log.lock();
            let Some(g) = log.group(self.inner.group.ids[p]) else {
                continue;
            };
            if let Some(acks) = g.acks.as_mut() {
                let released = acks.release_member(self.inner.id, now);
                g.waiters.notify_many(released, &mut wl);
            }
        }
        // `inner` leaves the group (and rebalances) when it drops.
    }
}

/// Future of [`AckConsumer::recv`].
#[must_use = "futures do nothing unless polled"]
pub struct AckRecv<'a, T> {
    consumer: &'a mut AckConsumer<T>,
}

impl<T> fmt::Debug for AckRecv<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AckRecv").finish_non_exhaustive()
    }
}

impl<T: Clone> Future for AckRecv<'_, T> {
    type Output = Result<Delivery<T>, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().consumer.poll_delivery(Some(cx.waker()))
    }
}

impl<T> Drop for AckRecv<'_, T> {
    fn drop(&mut self) {
        self.consumer.inner.cancel_wait();
    }
}

/// Future of [`AckConsumer::recv_many`].
#[must_use = "futures do nothing unless polled"]
pub struct AckRecvMany<'a, T> {
    consumer: &'a mut AckConsumer<T>,
    buf: &'a mut Vec<Delivery<T>>,
    limit: usize,
}

impl<T> fmt::Debug for AckRecvMany<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AckRecvMany")
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl<T: Clone> Future for AckRecvMany<'_, T> {
    type Output = Result<usize, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.limit == 0 {
            return Poll::Ready(Ok(0));
        }
        match this
            .consumer
            .poll_many(this.buf, this.limit, Some(cx.waker()))
        {
            Poll::Ready(Err(RecvError::Closed)) => Poll::Ready(Ok(0)),
            other => other,
        }
    }
}

impl<T> Drop for AckRecvMany<'_, T> {
    fn drop(&mut self) {
        self.consumer.inner.cancel_wait();
    }
}

// ----- deliveries ----------------------------------------------------------------------

/// Why an acknowledgement was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AckError {
    /// The lease had already run out (or its member left) and the message went back to
    /// the group; it will be, or was, delivered again.
    LeaseExpired,
    /// The group was deleted.
    GroupDeleted,
}

impl fmt::Display for AckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::LeaseExpired => "lease expired: the message was returned to the group",
            Self::GroupDeleted => "the group was deleted",
        })
    }
}

impl core::error::Error for AckError {}

struct Lease<T> {
    shared: Arc<Shared<T>>,
    group: Arc<crate::group::GroupShared<T>>,
    partition: usize,
}

/// What to do with a lease.
#[derive(Debug, Clone, Copy)]
enum Settle {
    Ack,
    Nack(Option<Duration>),
    Touch,
    Release,
}

/// A message leased to one member of an explicit-ack group. Ack it when done.
///
/// Dropping a delivery without acking it returns the message to the group (after the
/// backoff delay), like [`Delivery::nack`]. So a loop that takes deliveries and drops
/// them (`iter::from_fn(|| consumer.try_recv().ok()).count()`) hands each one back and
/// takes it again, for ever (without `max_deliveries`): ack them, or use an
/// automatic-commit group
/// ([`Topic::group`](crate::Topic::group)) where a delivery needs no settling.
#[must_use = "dropping a delivery without acking it nacks it: the message goes back to the group and is delivered again"]
pub struct Delivery<T> {
    message: Message<T>,
    attempt: u32,
    lease: Option<Lease<T>>,
}

/// A delivery dropped unsettled nacks: `#[must_use]` says so where a statement drops one.
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// # use memq_core as memq;
/// let topic = memq::Topic::<u8>::with_capacity(4).unwrap();
/// let mut c = topic.group_acked("g", memq::StartAt::Earliest, memq::AckConfig::new()).unwrap();
/// topic.try_publish(1).unwrap();
/// c.try_recv().unwrap(); // dropped: nacked
/// ```
///
/// ```
/// #![deny(unused_must_use)]
/// # use memq_core as memq;
/// let topic = memq::Topic::<u8>::with_capacity(4).unwrap();
/// let mut c = topic.group_acked("g", memq::StartAt::Earliest, memq::AckConfig::new()).unwrap();
/// topic.try_publish(1).unwrap();
/// c.try_recv().unwrap().ack().unwrap();
/// ```
#[cfg(all(doctest, feature = "std"))]
pub struct DeliveryIsMustUse;

impl<T: fmt::Debug> fmt::Debug for Delivery<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("message", &self.message)
            .field("deliveries", &self.attempt)
            .finish()
    }
}

impl<T> core::ops::Deref for Delivery<T> {
    type Target = Message<T>;
    fn deref(&self) -> &Message<T> {
        &self.message
    }
}

impl<T> Delivery<T> {
    /// The message.
    pub fn message(&self) -> &Message<T> {
        &self.message
    }

    /// How many times this message has been delivered, this delivery included.
    pub fn deliveries(&self) -> u32 {
        self.attempt
    }

    fn settle(&mut self, action: Settle) -> Result<(), AckError> {
        let Some(lease) = self.lease.as_ref() else {
            return Err(AckError::LeaseExpired);
        };
        let Some(settings) = lease.group.acks.as_ref() else {
            return Err(AckError::GroupDeleted);
        };
        let now = settings.now();
        let offset = self.message.offset;
        let p = lease.partition;
        let shared = &lease.shared;
        let mut wl = WakeList::new();
        let mut log = shared.parts[p].log.lock();
        let (closed, high, retained_from) = (log.closed, log.high, log.low);
        let Some(g) = log.group(lease.group.ids[p]) else {
            return Err(AckError::GroupDeleted);
        };
        let Some(acks) = g.acks.as_mut() else {
            return Err(AckError::GroupDeleted);
        };
        match acks.unacked.get(&offset) {
            Some(pe)
                if pe.deliveries == self.attempt && matches!(pe.state, PState::Leased { .. }) => {}
            _ => return Err(AckError::LeaseExpired),
        }
        match action {
            Settle::Ack => {
                acks.untime(offset);
                acks.unacked.remove(&offset);
                acks.acked += 1;
                // A slot under `max_in_flight` opened.
                g.waiters.notify_one(&mut wl);
            }
            Settle::Nack(delay) => {
                let delay = delay.unwrap_or_else(|| settings.backoff.delay(self.attempt));
                acks.requeue(offset, now, as_nanos(delay));
                g.waiters.notify_one(&mut wl);
            }
            Settle::Release => {
                acks.requeue(offset, now, as_nanos(settings.backoff.delay(self.attempt)));
                g.waiters.notify_one(&mut wl);
            }
            Settle::Touch => {
                acks.untime(offset);
                let deadline = now.saturating_add(settings.ack_wait);
                if let Some(pe) = acks.unacked.get_mut(&offset) {
                    pe.state = PState::Leased { deadline };
                }
                acks.leases.insert((deadline, offset));
                return Ok(());
            }
        }
        let drained = closed && acks.next >= high && acks.unacked.is_empty();
        let holds_from = acks.holds_from(retained_from);
        let cursor = g.cursor;
        log.set_cursor(cursor, holds_from);
        shared.reader_advanced(&mut log, &mut wl);
        drop(log);
        if drained {
            // The last message of a closed partition is settled: members waiting on it
            // (one was woken above, as for a message to take) or for the whole group to
            // drain may be done now, all of them.
            shared.wake_drained(&lease.group, p);
        }
        if !matches!(action, Settle::Touch) {
            self.lease = None;
        }
        Ok(())
    }

    /// Acknowledges the message: it is done and will not be delivered again.
    ///
    /// # Errors
    ///
    /// [`AckError::LeaseExpired`] if the lease had run out and the message went back to
    /// the group; [`AckError::GroupDeleted`].
    pub fn ack(mut self) -> Result<(), AckError> {
        self.settle(Settle::Ack)
    }

    /// Returns the message to the group for another delivery, after the backoff delay.
    ///
    /// # Errors
    ///
    /// As [`Delivery::ack`].
    pub fn nack(mut self) -> Result<(), AckError> {
        self.settle(Settle::Nack(None))
    }

    /// Returns the message to the group, to be delivered again after `delay`.
    ///
    /// # Errors
    ///
    /// As [`Delivery::ack`].
    pub fn nack_after(mut self, delay: Duration) -> Result<(), AckError> {
        self.settle(Settle::Nack(Some(delay)))
    }

    /// Extends the lease by the group's `ack_wait`, from now.
    ///
    /// # Errors
    ///
    /// As [`Delivery::ack`].
    pub fn touch(&mut self) -> Result<(), AckError> {
        self.settle(Settle::Touch)
    }

    /// Rejects the message: it goes to the dead-letter topic (or, without one, is dropped
    /// and counted as dead-lettered) and is not delivered again. If the dead-letter topic
    /// is full, the message stays in the group until it can be moved there; if it is
    /// closed, the message is delivered again (see [`AckConfig::dead_letter`]).
    ///
    /// # Errors
    ///
    /// As [`Delivery::ack`].
    pub fn reject(mut self) -> Result<(), AckError>
    where
        T: Clone,
    {
        let Some(lease) = self.lease.as_ref() else {
            return Err(AckError::LeaseExpired);
        };
        // The value goes to the dead-letter topic from here, not from the log (which may
        // have evicted it meanwhile). Cloned first: a `T::clone` that panics changes
        // nothing.
        let held = lease
            .group
            .acks
            .as_ref()
            .is_some_and(|s| s.dead_letter.is_some())
            .then(|| self.message.value.clone());
        let offset = self.message.offset;
        let p = lease.partition;
        {
            let mut log = lease.shared.parts[p].log.lock();
            let Some(acks) = log.group(lease.group.ids[p]).and_then(|g| g.acks.as_mut()) else {
                return Err(AckError::GroupDeleted);
            };
            match acks.unacked.get(&offset) {
                Some(pe)
                    if pe.deliveries == self.attempt
                        && matches!(pe.state, PState::Leased { .. }) => {}
                _ => return Err(AckError::LeaseExpired),
            }
            acks.untime(offset);
            if let Some(pe) = acks.unacked.get_mut(&offset) {
                pe.state = PState::DeadLettering;
            }
        }
        let Some(lease) = self.lease.take() else {
            return Err(AckError::LeaseExpired);
        };
        dead_letter(
            &lease.shared,
            &lease.group,
            p,
            offset,
            self.attempt,
            DeadLetterReason::Rejected,
            held,
        );
        Ok(())
    }
}

impl<T> Drop for Delivery<T> {
    fn drop(&mut self) {
        if self.lease.is_some() {
            // Already returned if the lease ran out; either way nothing is lost.
            let _ = self.settle(Settle::Release);
        }
    }
}

// ----- the std timer -------------------------------------------------------------------

#[cfg(feature = "std")]
pub use thread_timer::ThreadTimer;

#[cfg(feature = "std")]
mod thread_timer {
    use alloc::collections::BTreeMap;
    use core::task::Waker;
    use core::time::Duration;
    use std::sync::{Condvar, Mutex, OnceLock};
    use std::time::Instant;

    /// A [`Timer`](super::Timer) on one background thread that sleeps until the earliest
    /// deadline. The thread exists only while wake-ups are scheduled: it exits when none
    /// are left and is started again by the next one, so an idle program has no timer
    /// thread at all.
    #[derive(Debug, Clone, Copy)]
    pub struct ThreadTimer {
        inner: &'static Inner,
    }

    #[derive(Debug, Default)]
    struct Inner {
        state: Mutex<State>,
        changed: Condvar,
    }

    #[derive(Debug, Default)]
    struct State {
        wakeups: BTreeMap<(Instant, u64), Waker>,
        seq: u64,
        running: bool,
    }

    impl ThreadTimer {
        /// The process-wide timer.
        pub fn global() -> Self {
            static INNER: OnceLock<Inner> = OnceLock::new();
            Self {
                inner: INNER.get_or_init(Inner::default),
            }
        }

        fn run(inner: &'static Inner) {
            let mut state = inner.state.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                let now = Instant::now();
                let mut due = Vec::new();
                while let Some((&(at, seq), _)) = state.wakeups.first_key_value() {
                    if at > now {
                        break;
                    }
                    if let Some(w) = state.wakeups.remove(&(at, seq)) {
                        due.push(w);
                    }
                }
                if !due.is_empty() {
                    drop(state);
                    for waker in due {
                        // A waker that panics must not end this thread (`running` would stay
                        // set, and no wake-up asked of the timer would ever come again).
                        let _ = std::panic::catch_unwind(core::panic::AssertUnwindSafe(|| {
                            waker.wake();
                        }));
                    }
                    state = inner.state.lock().unwrap_or_else(|e| e.into_inner());
                    continue;
                }
                let Some((&(at, _), _)) = state.wakeups.first_key_value() else {
                    state.running = false;
                    return;
                };
                state = inner
                    .changed
                    .wait_timeout(state, at.saturating_duration_since(now))
                    .map(|(s, _)| s)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
        }
    }

    impl ThreadTimer {
        /// Adds a wake-up at `delay` from now and returns its key; starts the thread if
        /// none runs.
        fn add(&self, delay: Duration, waker: Waker) -> (Instant, u64) {
            let at = Instant::now()
                .checked_add(delay)
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365));
            let mut state = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
            state.seq += 1;
            let seq = state.seq;
            state.wakeups.insert((at, seq), waker);
            if state.running {
                drop(state);
                self.inner.changed.notify_one();
            } else {
                state.running = true;
                drop(state);
                let inner = self.inner;
                if std::thread::Builder::new()
                    .name("memq-timer".into())
                    .spawn(move || Self::run(inner))
                    .is_err()
                {
                    // No thread: wake everything now rather than never (members re-check
                    // their deadlines when polled).
                    let mut state = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
                    state.running = false;
                    let all: Vec<Waker> =
                        core::mem::take(&mut state.wakeups).into_values().collect();
                    drop(state);
                    all.into_iter().for_each(Waker::wake);
                }
            }
            (at, seq)
        }

        /// Withdraws the wake-up `key` if it has not run. The thread is told when that
        /// leaves nothing to wait for, so that it ends now rather than at the withdrawn
        /// wake-up's time. The waker is dropped after the lock.
        fn withdraw(inner: &'static Inner, key: (Instant, u64)) {
            let mut state = inner.state.lock().unwrap_or_else(|e| e.into_inner());
            let waker = state.wakeups.remove(&key);
            let idle = waker.is_some() && state.wakeups.is_empty() && state.running;
            drop(state);
            drop(waker);
            if idle {
                inner.changed.notify_one();
            }
        }

        /// How many wake-ups are scheduled, and whether the thread runs (for tests).
        #[cfg(test)]
        fn pending(&self) -> (usize, bool) {
            let state = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
            (state.wakeups.len(), state.running)
        }
    }

    impl super::Timer for ThreadTimer {
        fn wake_after(&self, delay: Duration, waker: Waker) {
            self.add(delay, waker);
        }

        fn wake_after_cancellable(
            &self,
            delay: Duration,
            waker: Waker,
        ) -> Option<super::TimerEntry> {
            let key = self.add(delay, waker);
            let inner = self.inner;
            Some(super::TimerEntry::new(move || Self::withdraw(inner, key)))
        }
    }

    #[cfg(test)]
    mod tests {
        use super::{Inner, ThreadTimer};
        use crate::Timer;
        use alloc::boxed::Box;
        use alloc::sync::Arc;
        use alloc::task::Wake;
        use core::sync::atomic::{AtomicUsize, Ordering};
        use core::task::Waker;
        use core::time::Duration;
        use std::time::Instant;

        #[derive(Default)]
        struct Count(AtomicUsize);

        impl Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }

        /// A timer of its own (not the process-wide one other tests share).
        fn timer() -> ThreadTimer {
            ThreadTimer {
                inner: Box::leak(Box::new(Inner::default())),
            }
        }

        fn until(what: impl Fn() -> bool) -> bool {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !what() {
                if Instant::now() > deadline {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            true
        }

        /// A withdrawn wake-up is gone at once, with its waker, and once nothing is left
        /// the timer's thread ends rather than sleeping until the withdrawn time.
        #[test]
        fn a_withdrawn_wake_up_leaves_nothing_behind() {
            let timer = timer();
            let count = Arc::new(Count::default());
            let entry = timer
                .wake_after_cancellable(Duration::from_secs(3600), Waker::from(count.clone()))
                .expect("the thread timer can withdraw");
            assert_eq!(timer.pending(), (1, true));
            drop(entry);
            assert_eq!(timer.pending().0, 0);
            assert_eq!(Arc::strong_count(&count), 1, "the waker was kept");
            assert!(until(|| !timer.pending().1), "the thread did not end");
            assert_eq!(count.0.load(Ordering::SeqCst), 0);
        }

        /// Withdrawing one of several leaves the others to come at their time; withdrawing
        /// one that already ran does nothing.
        #[test]
        fn withdrawing_one_keeps_the_others() {
            let timer = timer();
            let (soon, late) = (Arc::new(Count::default()), Arc::new(Count::default()));
            let ran = timer
                .wake_after_cancellable(Duration::from_millis(1), Waker::from(soon.clone()))
                .unwrap();
            let later = timer
                .wake_after_cancellable(Duration::from_secs(3600), Waker::from(late.clone()))
                .unwrap();
            assert!(until(|| soon.0.load(Ordering::SeqCst) == 1));
            drop(ran);
            assert_eq!(timer.pending(), (1, true));
            drop(later);
            assert!(until(|| timer.pending() == (0, false)));
            assert_eq!(late.0.load(Ordering::SeqCst), 0);
        }
    }
}
