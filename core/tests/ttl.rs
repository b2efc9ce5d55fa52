//! Time to live, measured by a user-supplied clock.

extern crate alloc;

use alloc::sync::Arc;
use core::future::Future;
use core::time::Duration;

use futures_executor::block_on;
#[cfg(feature = "std")]
use memq_core::StdClock;
use memq_core::{
    Clock, Error, ManualClock, Overflow, RecvError, StartAt, Topic, TopicConfig, TryRecvError,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn clocked(cap: usize, ttl: Option<Duration>) -> (Arc<ManualClock>, Topic<u32>) {
    clocked_from(Duration::ZERO, cap, ttl)
}

/// A topic on a manual clock that reads `start` when the topic is made.
fn clocked_from(
    start: Duration,
    cap: usize,
    ttl: Option<Duration>,
) -> (Arc<ManualClock>, Topic<u32>) {
    let clock = Arc::new(ManualClock::new());
    clock.set(start);
    let mut cfg = TopicConfig::new(cap).clock(clock.clone());
    if let Some(ttl) = ttl {
        cfg = cfg.ttl(ttl);
    }
    (clock, Topic::new(cfg).unwrap())
}

#[test]
fn ttl_without_clock_is_an_error() {
    let err = Topic::<u8>::new(TopicConfig::new(4).ttl(ms(10))).unwrap_err();
    assert_eq!(err, Error::TtlWithoutClock);
}

#[test]
fn a_zero_ttl_is_an_error() {
    // A message would expire as it is published: a mistake (C's "0 means none", say).
    let clock = Arc::new(ManualClock::new());
    let err = Topic::<u8>::new(TopicConfig::new(4).clock(clock).ttl(Duration::ZERO)).unwrap_err();
    assert_eq!(err, Error::ZeroTtl);
    assert_eq!(err.to_string(), "a ttl must be longer than zero");
}

#[test]
fn manual_clock_moves_only_forward() {
    let c = ManualClock::new();
    assert_eq!(c.now(), Duration::ZERO);
    c.advance(ms(5));
    assert_eq!(c.now(), ms(5));
    c.set(ms(3));
    assert_eq!(c.now(), ms(5), "set never goes backwards");
    c.set(ms(9));
    assert_eq!(c.now(), ms(9));
}

#[test]
fn expired_messages_are_skipped_and_reported_as_lagged() {
    let (clock, t) = clocked(16, Some(ms(10)));
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    t.try_publish(0).unwrap();
    t.try_publish(1).unwrap();
    clock.advance(ms(5));
    t.try_publish(2).unwrap();
    clock.advance(ms(6)); // now 11: ages 11, 11, 6
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Lagged(2));
    let m = sub.try_recv().unwrap();
    assert_eq!((m.offset(), m.into_value()), (2, 2));
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Empty);
    let s = t.stats();
    assert_eq!(s.expired, 2);
    assert_eq!(s.evicted, 0);
    assert_eq!(s.partitions[0].low, 2);
    assert_eq!(s.depth, 1);
}

#[test]
fn a_reader_that_had_read_them_sees_no_lag() {
    let (clock, t) = clocked(16, Some(ms(10)));
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    t.try_publish(0).unwrap();
    t.try_publish(1).unwrap();
    assert_eq!(sub.try_recv().unwrap().into_value(), 0);
    assert_eq!(sub.try_recv().unwrap().into_value(), 1);
    clock.advance(ms(50));
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Empty);
    t.try_publish(2).unwrap();
    assert_eq!(sub.try_recv().unwrap().into_value(), 2);
    assert_eq!(t.stats().expired, 2);
}

#[test]
fn young_messages_are_kept() {
    let (clock, t) = clocked(16, Some(ms(10)));
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    t.try_publish(0).unwrap();
    clock.advance(ms(9));
    assert_eq!(sub.try_recv().unwrap().into_value(), 0);
    assert_eq!(t.stats().expired, 0);
}

#[test]
fn async_recv_reports_expiry_as_lagged() {
    let (clock, t) = clocked(16, Some(ms(1)));
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    for i in 0..3 {
        t.try_publish(i).unwrap();
    }
    clock.advance(ms(2));
    t.try_publish(3).unwrap();
    block_on(async {
        assert_eq!(sub.recv().await.unwrap_err(), RecvError::Lagged(3));
        assert_eq!(sub.recv().await.unwrap().into_value(), 3);
    });
}

#[test]
fn late_subscriber_starts_at_the_oldest_unexpired() {
    let (clock, t) = clocked(16, Some(ms(10)));
    t.try_publish(0).unwrap();
    clock.advance(ms(8));
    t.try_publish(1).unwrap();
    clock.advance(ms(4)); // 0 is 12 old, 1 is 4 old
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    let m = sub.try_recv().unwrap();
    assert_eq!((m.offset(), m.into_value()), (1, 1));
}

#[test]
fn stats_apply_expiry_without_any_reader() {
    let (clock, t) = clocked(16, Some(ms(10)));
    for i in 0..4 {
        t.try_publish(i).unwrap();
    }
    assert_eq!(t.stats().depth, 4);
    clock.advance(ms(10) + Duration::from_nanos(1)); // older than the ttl
    let s = t.stats();
    assert_eq!((s.depth, s.expired, s.published), (0, 4, 4));
}

#[test]
fn expiry_frees_room_under_block() {
    let (clock, t) = clocked(2, Some(ms(10)));
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    t.try_publish(0).unwrap();
    t.try_publish(1).unwrap();
    assert!(t.try_publish(2).unwrap_err().is_full());
    clock.advance(ms(11));
    // The subscriber never read 0 and 1, but they expired.
    assert_eq!(t.try_publish(2).unwrap().offset, 2);
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Lagged(2));
    assert_eq!(sub.try_recv().unwrap().into_value(), 2);
}

#[test]
fn group_sees_expiry_as_lagged() {
    let (clock, t) = clocked(8, Some(ms(10)));
    let mut c = t.group("g", StartAt::Earliest).unwrap();
    t.try_publish(0).unwrap();
    clock.advance(ms(10) + Duration::from_nanos(1));
    t.try_publish(1).unwrap();
    assert_eq!(c.try_recv().unwrap_err(), TryRecvError::Lagged(1));
    assert_eq!(c.try_recv().unwrap().into_value(), 1);
}

#[test]
fn expired_and_evicted_are_counted_apart() {
    let clock = Arc::new(ManualClock::new());
    let t = Topic::new(
        TopicConfig::new(2)
            .overflow(Overflow::DropOldest)
            .ttl(ms(10))
            .clock(clock.clone()),
    )
    .unwrap();
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    for i in 0..5 {
        t.try_publish(i).unwrap(); // 3 evicted
    }
    clock.advance(ms(20)); // the 2 retained expire
    t.try_publish(5).unwrap();
    let s = t.stats();
    assert_eq!((s.evicted, s.expired), (3, 2));
    // The reader missed all five, once.
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Lagged(5));
    assert_eq!(sub.try_recv().unwrap().into_value(), 5);
}

#[test]
fn timestamps_are_present_with_a_clock() {
    let (clock, t) = clocked(8, None);
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    t.try_publish(0).unwrap();
    clock.advance(ms(5));
    t.try_publish(1).unwrap();
    clock.advance(ms(1000));
    // Without a TTL nothing expires, however old.
    assert_eq!(sub.try_recv().unwrap().timestamp(), Some(Duration::ZERO));
    assert_eq!(sub.try_recv().unwrap().timestamp(), Some(ms(5)));
    assert_eq!(t.stats().expired, 0);
}

#[test]
fn timestamps_are_present_on_group_deliveries_and_batches() {
    let (clock, t) = clocked(8, Some(ms(100)));
    let mut c = t.group("g", StartAt::Earliest).unwrap();
    clock.advance(ms(7));
    t.try_publish_batch(vec![1, 2]).unwrap();
    let mut buf = Vec::new();
    assert_eq!(c.try_recv_many(&mut buf, 10).unwrap(), 2);
    assert!(buf.iter().all(|m| m.timestamp() == Some(ms(7))));
}

#[test]
fn timestamps_are_absent_without_a_clock() {
    let t = Topic::with_capacity(4).unwrap();
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    let mut c = t.group("g", StartAt::Earliest).unwrap();
    t.try_publish(1).unwrap();
    assert_eq!(sub.try_recv().unwrap().timestamp(), None);
    assert_eq!(c.try_recv().unwrap().timestamp(), None);
}

#[cfg(feature = "std")]
#[test]
fn std_clock_timestamps_do_not_go_backwards() {
    let t = Topic::new(TopicConfig::new(64).clock(Arc::new(StdClock::new()))).unwrap();
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    for i in 0..50 {
        t.try_publish(i).unwrap();
    }
    let mut last = Duration::ZERO;
    for _ in 0..50 {
        let ts = sub.try_recv().unwrap().timestamp().expect("clocked");
        assert!(ts >= last);
        last = ts;
    }
}

#[test]
fn user_clock_is_used() {
    struct Fixed;
    impl Clock for Fixed {
        fn now(&self) -> Duration {
            Duration::from_secs(42)
        }
    }
    let t = Topic::new(TopicConfig::new(4).clock(Arc::new(Fixed)).ttl(ms(1))).unwrap();
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    t.try_publish(1).unwrap();
    let m = sub.try_recv().unwrap();
    assert_eq!(m.timestamp(), Some(Duration::from_secs(42)));
}

/// A timer that keeps what it was asked to wake, with the delay; `fire` wakes all of it.
#[derive(Default)]
struct RecordingTimer(std::sync::Mutex<Vec<(Duration, core::task::Waker)>>);

impl memq_core::Timer for RecordingTimer {
    fn wake_after(&self, delay: Duration, waker: core::task::Waker) {
        self.0.lock().unwrap().push((delay, waker));
    }
}

#[derive(Default)]
struct CountingWake(std::sync::atomic::AtomicUsize);

impl std::task::Wake for CountingWake {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A topic of `capacity` slots whose messages live 10 ms on a manual clock, with a
/// recording timer, a subscriber that never reads (returned, to be kept) and message 0.
fn expiring(
    capacity: usize,
) -> (
    Arc<ManualClock>,
    Arc<RecordingTimer>,
    Topic<u32>,
    memq_core::Subscriber<u32>,
) {
    let clock = Arc::new(ManualClock::new());
    let timer = Arc::new(RecordingTimer::default());
    let topic = Topic::<u32>::new(
        TopicConfig::new(capacity)
            .clock(clock.clone())
            .ttl(ms(10))
            .timer(timer.clone()),
    )
    .unwrap();
    let idle = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish(0).unwrap();
    (clock, timer, topic, idle)
}

/// A publisher parked on a full `Block` log is woken when the oldest message expires,
/// although nobody visits the log: expiry frees the slot it waits for. One timer wake-up
/// per parked publish, however often it parks.
#[test]
fn a_parked_publisher_is_woken_when_the_oldest_message_expires() {
    let (clock, timer, topic, _idle) = expiring(2);
    clock.advance(ms(4));
    topic.try_publish(1).unwrap();
    let woken = Arc::new(CountingWake::default());
    let waker = core::task::Waker::from(woken.clone());
    let mut cx = core::task::Context::from_waker(&waker);
    let mut publish = topic.publish(2);
    assert!(core::pin::Pin::new(&mut publish).poll(&mut cx).is_pending());
    // Parking again, with the clock not moving, asks the timer for nothing more.
    assert!(core::pin::Pin::new(&mut publish).poll(&mut cx).is_pending());
    // Another publish parked asks for its own (withdrawn when it is dropped, by a timer
    // that can withdraw; this one cannot, and wakes nothing for it).
    let mut again = topic.publish(3);
    assert!(core::pin::Pin::new(&mut again).poll(&mut cx).is_pending());
    drop(again);
    let due = core::mem::take(&mut *timer.0.lock().unwrap());
    let delays: Vec<_> = due.iter().map(|(d, _)| *d).collect();
    assert_eq!(
        delays,
        [ms(6) + Duration::from_nanos(1); 2],
        "message 0 expires 10 ms after it was published, 6 ms from now"
    );
    clock.advance(ms(7));
    due.into_iter().for_each(|(_, w)| w.wake());
    assert_eq!(woken.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    match core::pin::Pin::new(&mut publish).poll(&mut cx) {
        core::task::Poll::Ready(Ok(r)) => assert_eq!(r.offset, 2),
        other => panic!("{other:?}"),
    }
    assert_eq!(topic.stats().expired, 1);
}

/// With `std`, a TTL topic has a timer by default: a blocking publish on a full log
/// returns once the oldest message expires, with nobody reading.
#[cfg(feature = "std")]
#[test]
fn a_blocking_publish_returns_when_the_oldest_message_expires() {
    let topic = Topic::<u32>::new(
        TopicConfig::new(1)
            .clock(Arc::new(StdClock::new()))
            .ttl(ms(20)),
    )
    .unwrap();
    let _idle = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish(0).unwrap();
    publishing_1_returns(&topic);
}

/// From review: a timer measures time on its own, and a coarse (or lagging) clock may
/// not yet show the expiry when the timer goes off. The woken publisher then parks again,
/// and its spent alarm, still dated in the future by the clock, was taken for a pending
/// one: nothing was armed, and the publisher slept until some other visit to the log.
/// Now a rung alarm is armed again, at least 1 ms out, until the clock catches up.
#[test]
fn a_publisher_woken_before_the_clock_shows_the_expiry_is_woken_again() {
    let (clock, timer, topic, _idle) = expiring(1);
    let woken = Arc::new(CountingWake::default());
    let waker = core::task::Waker::from(woken.clone());
    let mut cx = core::task::Context::from_waker(&waker);
    let mut publish = topic.publish(1);
    assert!(core::pin::Pin::new(&mut publish).poll(&mut cx).is_pending());
    let due = core::mem::take(&mut *timer.0.lock().unwrap());
    assert_eq!(due.len(), 1);
    // The timer goes off; the clock shows only 4 of the 10 ms.
    clock.advance(ms(4));
    due.into_iter().for_each(|(_, w)| w.wake());
    assert_eq!(woken.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(core::pin::Pin::new(&mut publish).poll(&mut cx).is_pending());
    let due = core::mem::take(&mut *timer.0.lock().unwrap());
    let delays: Vec<_> = due.iter().map(|(d, _)| *d).collect();
    assert_eq!(delays, [ms(6) + Duration::from_nanos(1)], "armed again");
    // Again early, now 1 ns short: the next alarm is at least 1 ms out, so a clock that
    // lags the timer is never polled in a tight loop.
    clock.advance(ms(6));
    due.into_iter().for_each(|(_, w)| w.wake());
    assert!(core::pin::Pin::new(&mut publish).poll(&mut cx).is_pending());
    let due = core::mem::take(&mut *timer.0.lock().unwrap());
    let delays: Vec<_> = due.iter().map(|(d, _)| *d).collect();
    assert_eq!(delays, [ms(1)]);
    // Parking again before it rings arms nothing more.
    assert!(core::pin::Pin::new(&mut publish).poll(&mut cx).is_pending());
    assert!(timer.0.lock().unwrap().is_empty());
    clock.advance(ms(1));
    due.into_iter().for_each(|(_, w)| w.wake());
    match core::pin::Pin::new(&mut publish).poll(&mut cx) {
        core::task::Poll::Ready(Ok(r)) => assert_eq!(r.offset, 1),
        other => panic!("{other:?}"),
    }
}

/// A clock that ticks every 20 ms, as coarse clocks of small targets do.
#[cfg(feature = "std")]
struct Coarse(std::time::Instant);

#[cfg(feature = "std")]
impl memq_core::Clock for Coarse {
    fn now(&self) -> Duration {
        ms(self.0.elapsed().as_millis() as u64 / 20 * 20)
    }
}

/// The same on the default timer and a real coarse clock: a blocking publish waiting for
/// the oldest message to expire returns (it waited until some other visit to the log).
#[cfg(feature = "std")]
#[test]
fn a_blocking_publish_on_a_coarse_clock_returns_when_the_oldest_message_expires() {
    let clock = Arc::new(Coarse(std::time::Instant::now()));
    let topic = Topic::<u32>::new(TopicConfig::new(1).clock(clock.clone()).ttl(ms(1))).unwrap();
    let _idle = topic.subscribe(StartAt::Earliest).unwrap();
    // Published right after a tick, so that the timer goes off well before the next.
    let tick = clock.now();
    while memq_core::Clock::now(&*clock) == tick {
        std::thread::sleep(Duration::from_micros(200));
    }
    topic.try_publish(0).unwrap();
    publishing_1_returns(&topic);
}

/// Publishes 1 on `topic` (full, with message 0 the only one in the way) from a blocking
/// thread, and checks that it returns (a hang detector: a healthy run takes about 20 ms)
/// with offset 1.
#[cfg(feature = "std")]
fn publishing_1_returns(topic: &Topic<u32>) {
    let (done, result) = std::sync::mpsc::channel();
    let publisher = {
        let topic = topic.clone();
        std::thread::spawn(move || done.send(topic.publish_blocking(1).map(|r| r.offset)))
    };
    let offset = result
        .recv_timeout(Duration::from_secs(60))
        .expect("the blocking publish never returned");
    assert_eq!(offset.ok(), Some(1));
    publisher.join().unwrap().unwrap();
}

/// A user timer that panics while armed to: a panic out of user code inside memq.
#[derive(Default)]
struct PanickingTimer(std::sync::atomic::AtomicBool);

impl memq_core::Timer for PanickingTimer {
    fn wake_after(&self, _: Duration, _: core::task::Waker) {
        assert!(
            !self.0.load(std::sync::atomic::Ordering::SeqCst),
            "the user's timer fails"
        );
    }
}

/// A `publish_blocking_timeout` that a panic (here the user's timer, called while the
/// publisher waits) ends leaves no wait behind: its place in line was kept, woken, and
/// then held the room promised to it for ever, so the next parked publisher slept next to
/// the free slot until its own deadline (from review).
#[cfg(feature = "std")]
#[test]
fn a_panic_in_a_timed_blocking_publish_leaves_no_place_in_line_behind() {
    use std::sync::atomic::Ordering;
    use std::time::Instant;
    let timer = Arc::new(PanickingTimer::default());
    timer.0.store(true, Ordering::SeqCst);
    let topic = Topic::<u32>::new(
        TopicConfig::new(1)
            .ttl(Duration::from_secs(3600))
            .clock(Arc::new(ManualClock::new()))
            .timer(timer.clone()),
    )
    .unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish(0).unwrap();
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        topic.publish_blocking_timeout(1, Duration::from_secs(10))
    }));
    assert!(failed.is_err());
    let waiting = || topic.stats().partitions[0].waiting_publishers;
    let before = waiting();
    timer.0.store(false, Ordering::SeqCst);
    let t2 = topic.clone();
    let next = std::thread::spawn(move || {
        let start = Instant::now();
        (
            t2.publish_blocking_timeout(2, Duration::from_secs(60)),
            start.elapsed(),
        )
    });
    while waiting() == before {
        std::thread::sleep(ms(1));
    }
    assert_eq!(sub.try_recv().unwrap().into_value(), 0); // the one slot is free now
    let (published, took) = next.join().unwrap();
    assert!(published.is_ok());
    // Woken at once; without the fix it gets in only at its deadline, 60 s on.
    assert!(
        took < Duration::from_secs(30),
        "slept {took:?} next to a free slot"
    );
}

/// About 2025 years: a clock counting from the year 1, as calendar libraries do. memq's
/// times are `u64` nanoseconds, which run out after 584 years.
const FAR_EPOCH: Duration = Duration::from_secs(2025 * 365 * 24 * 3600);

fn far_clocked(cap: usize, ttl: Option<Duration>) -> (Arc<ManualClock>, Topic<u32>) {
    clocked_from(FAR_EPOCH, cap, ttl)
}

#[test]
fn a_clock_whose_epoch_is_centuries_back_keeps_ttls_and_timestamps() {
    // Review finding: every reading past 2^64 ns saturated to the same value, so nothing
    // expired and every timestamp read 584 years.
    let (clock, topic) = far_clocked(8, Some(Duration::from_secs(1)));
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish(1).unwrap();
    let stamped = clock.now();
    assert_eq!(sub.try_recv().unwrap().timestamp(), Some(stamped));
    clock.advance(ms(250));
    topic.try_publish(2).unwrap();
    clock.advance(Duration::from_secs(60));
    let mut late = topic.subscribe(StartAt::Earliest).unwrap();
    assert_eq!(late.try_recv().unwrap_err(), TryRecvError::Empty);
    assert_eq!(topic.stats().expired, 2, "both outlived their 1 s TTL");
    // Timestamps keep the clock's own readings, to the nanosecond.
    clock.advance(Duration::from_nanos(7));
    topic.try_publish(3).unwrap();
    assert_eq!(late.try_recv().unwrap().timestamp(), Some(clock.now()));
}

/// A waker that counts its wake-ups.
struct CountWakes(core::sync::atomic::AtomicUsize);

impl alloc::task::Wake for CountWakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, core::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn a_publisher_parked_on_a_far_clocks_topic_is_not_woken_while_nothing_changes() {
    // Review finding: with readings saturated, the expiry alarm of a full TTL topic fell
    // due at once, every time: a parked publisher was woken and polled in a loop (3,523
    // times in 200 ms). Its alarm is an hour of (standing) clock time away.
    use core::sync::atomic::Ordering;
    use core::task::{Context, Waker};
    let (_clock, topic) = far_clocked(1, Some(Duration::from_secs(3600)));
    let _slow = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish(1).unwrap();
    let wakes = Arc::new(CountWakes(Default::default()));
    let waker = Waker::from(wakes.clone());
    let mut publish = topic.publish(2);
    assert!(core::pin::Pin::new(&mut publish)
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    std::thread::sleep(ms(100));
    assert_eq!(
        wakes.0.load(Ordering::SeqCst),
        0,
        "woken with nothing to do"
    );
}

/// Expired values are dropped when they expire (by whichever visit applies the TTL), not
/// when a later publish reuses their slot, which may be never: a topic of large payloads
/// would otherwise hold up to its capacity of dead data (found in review of the C ABI,
/// whose owned buffers were not given back).
#[test]
fn expired_values_are_dropped_by_the_visit_that_expires_them() {
    use memq_core::AckConfig;
    type Visit = fn(&Topic<Arc<u32>>);
    let visits: [(&str, Visit); 8] = [
        ("subscribe", |t| drop(t.subscribe(StartAt::Latest).unwrap())),
        ("group", |t| drop(t.group("late", StartAt::Latest).unwrap())),
        ("publish", |t| {
            t.try_publish(Arc::new(9)).unwrap();
        }),
        ("batch", |t| {
            t.try_publish_batch(vec![Arc::new(9)]).unwrap();
        }),
        ("recv", |t| {
            let _ = t.subscribe(StartAt::Earliest).unwrap().try_recv();
        }),
        ("recv_many", |t| {
            let _ = t
                .subscribe(StartAt::Earliest)
                .unwrap()
                .try_recv_many(&mut Vec::new(), 4);
        }),
        ("member", |t| {
            let _ = t.group("g", StartAt::Earliest).unwrap().try_recv();
        }),
        ("acked member", |t| {
            let mut m = t
                .group_acked("a", StartAt::Earliest, AckConfig::new())
                .unwrap();
            let _ = m.try_recv();
        }),
    ];
    for (name, visit) in visits {
        for release in [false, true] {
            let clock = Arc::new(ManualClock::new());
            let t = Topic::new(
                TopicConfig::new(4)
                    .clock(clock.clone())
                    .ttl(ms(10))
                    .release_on_read(release),
            )
            .unwrap();
            // A reader that never reads keeps a releasing topic from letting them go.
            let _idle = t.subscribe(StartAt::Earliest).unwrap();
            let value = Arc::new(7u32);
            t.try_publish(value.clone()).unwrap();
            t.try_publish(value.clone()).unwrap();
            clock.advance(ms(11));
            // `stats` is a read: it counts them as expired, and leaves them to the visit.
            assert_eq!(t.stats().expired, 2, "{name}, release {release}");
            assert_eq!(
                Arc::strong_count(&value),
                3,
                "{name}, release {release}: stats let go of values"
            );
            visit(&t);
            assert_eq!(t.stats().expired, 2, "{name}, release {release}");
            assert_eq!(
                Arc::strong_count(&value),
                1,
                "{name}, release {release}: expired values still held"
            );
        }
    }
}

/// A leased message that the TTL evicts is gone: it must not keep holding back, under
/// `Block`, the messages after it that the group has acknowledged. Its delivery may
/// still be acked.
#[test]
fn a_leased_message_the_ttl_evicts_does_not_hold_back_acknowledged_ones() {
    let (clock, topic) = clocked(2, Some(ms(100)));
    let config = || memq_core::AckConfig::new().ack_wait(Duration::from_secs(3600));
    let mut member = topic.group_acked("g", StartAt::Earliest, config()).unwrap();
    topic.try_publish(0).unwrap();
    let leased = member.try_recv().unwrap(); // leased for an hour
    clock.advance(ms(150)); // offset 0 expires
    topic.try_publish(1).unwrap();
    topic.try_publish(2).unwrap();
    for want in [1, 2] {
        let d = member.try_recv().unwrap();
        assert_eq!(d.offset(), want);
        d.ack().unwrap();
    }
    // Every retained message is acked: room for the next. The committed position is
    // still the evicted one, whose lease is out.
    topic.try_publish(3).unwrap();
    assert_eq!(member.committed(0).unwrap(), 0);
    let stats = topic.stats();
    assert_eq!(stats.groups[0].committed, [0]);
    assert_eq!(
        stats.groups[0].in_flight, 1,
        "the evicted lease is still out"
    );
    // Acking the evicted message's delivery ends its lease.
    leased.ack().unwrap();
    assert_eq!(member.committed(0).unwrap(), 3);
    let stats = topic.stats();
    assert_eq!((stats.groups[0].in_flight, stats.groups[0].acked), (0, 3));
    assert_eq!(member.try_recv().unwrap().offset(), 3);
}

/// The same when the eviction comes after the group's last visit: the publish that
/// expires the leased message moves the group's hold on at once.
#[test]
fn a_leased_message_the_ttl_evicts_after_the_groups_last_visit_holds_nothing() {
    let (clock, topic) = clocked(3, Some(ms(100)));
    let config = memq_core::AckConfig::new().ack_wait(Duration::from_secs(3600));
    let mut member = topic.group_acked("g", StartAt::Earliest, config).unwrap();
    topic.try_publish(0).unwrap();
    let leased = member.try_recv().unwrap();
    clock.advance(ms(60));
    topic.try_publish(1).unwrap();
    member.try_recv().unwrap().ack().unwrap();
    assert_eq!(
        member.committed(0).unwrap(),
        0,
        "0 is still retained and unacked"
    );
    clock.advance(ms(50)); // 0 is 110 ms old, 1 is 50 ms
    topic.try_publish(2).unwrap(); // expires 0
    topic.try_publish(3).unwrap();
    // Full: 1 (acked), 2 and 3 (not delivered). 1 may go.
    topic.try_publish(4).unwrap();
    assert!(
        topic.try_publish(5).unwrap_err().is_full(),
        "2 is not delivered yet"
    );
    assert_eq!(
        member.committed(0).unwrap(),
        0,
        "the evicted lease is still out"
    );
    let mut got = Vec::new();
    while let Ok(d) = member.try_recv() {
        got.push(*d.value());
        d.ack().unwrap();
    }
    assert_eq!(got, [2, 3, 4], "nothing lost, nothing twice");
    // Dropped unacked, the evicted message goes back to the group, which finds it gone
    // on its next visit and counts it.
    drop(leased);
    assert!(member.try_recv().is_err());
    let stats = topic.stats();
    assert_eq!(stats.partitions[0].expired, 1);
    assert_eq!(
        (stats.groups[0].in_flight, stats.groups[0].evicted_unacked),
        (0, 1)
    );
    assert_eq!(member.committed(0).unwrap(), 5);
}

/// A clock that counts how often it is read.
#[derive(Default)]
struct CountedClock(std::sync::atomic::AtomicUsize);

impl Clock for CountedClock {
    fn now(&self) -> Duration {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Duration::ZERO
    }
}

impl CountedClock {
    fn reads(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// As `Clock`'s documentation says: a topic's clock is read once when the topic is made
/// and once per publish; subscribing, joining a group, receiving and `stats()` read it
/// only on a topic with a TTL.
#[test]
fn the_clock_is_read_where_its_documentation_says() {
    for ttl in [None, Some(ms(1_000))] {
        let clock = Arc::new(CountedClock::default());
        let mut config = TopicConfig::new(16).clock(clock.clone());
        if let Some(ttl) = ttl {
            config = config.ttl(ttl);
        }
        let topic = Topic::<u32>::new(config).unwrap();
        assert_eq!(clock.reads(), 1, "made");
        topic.try_publish(1).unwrap();
        topic.try_publish_batch(vec![2, 3]).unwrap();
        assert_eq!(clock.reads(), 3, "one reading per publish");
        let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
        let mut member = topic.group("g", StartAt::Earliest).unwrap();
        assert_eq!(sub.try_recv().unwrap().into_value(), 1);
        assert_eq!(member.try_recv().unwrap().into_value(), 1);
        let _ = topic.stats();
        let readers = clock.reads() - 3;
        match ttl {
            None => assert_eq!(readers, 0, "without a TTL, readers never read the clock"),
            // Subscribe, join, a receive each, stats: at least one reading apiece.
            Some(_) => assert!(readers >= 5, "{readers} readings"),
        }
    }
}
