//! memq never drops a waker under its locks: a waker's last drop runs its owner's code,
//! and code that calls back into the same topic would deadlock on the partition's lock.
//!
//! Each test leaves memq holding the only reference to a waker whose drop asks the topic
//! for its stats (which takes every partition's lock), then makes memq let go of it: by
//! polling the same future from another task (the stored waker is replaced), by dropping
//! the future (its registration is settled), or by dropping the reader (its registration
//! is removed). A watchdog turns a deadlock into a failure.

use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Wake, Waker};
use std::thread;
use std::time::Duration;

use futures_core::Stream;
use memq_core::{AckConfig, Clock, Consumer, ManualClock, StartAt, Timer, Topic, TopicConfig};

/// A waker whose last drop reads the topic's stats, taking its partitions' locks.
struct CallsBack(Mutex<Option<Topic<u32>>>);

impl Wake for CallsBack {
    fn wake(self: Arc<Self>) {}
}

impl Drop for CallsBack {
    fn drop(&mut self) {
        if let Some(topic) = self.0.lock().unwrap().take() {
            let _ = topic.stats();
        }
    }
}

struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// Polls `fut` once with a [`CallsBack`] waker, which is then memq's alone; asserts that
/// the future waits.
fn park_with_calling_back_waker<F: Future + Unpin>(fut: &mut F, topic: &Topic<u32>) {
    let waker = Waker::from(Arc::new(CallsBack(Mutex::new(Some(topic.clone())))));
    let pending = Pin::new(fut)
        .poll(&mut Context::from_waker(&waker))
        .is_pending();
    assert!(pending, "the future was expected to wait");
}

/// Polls `fut` again from "another task": memq replaces the waker it stored.
fn poll_from_another_task<F: Future + Unpin>(fut: &mut F) -> bool {
    let waker = Waker::from(Arc::new(Noop));
    Pin::new(fut)
        .poll(&mut Context::from_waker(&waker))
        .is_ready()
}

/// Makes a receive future with `$recv` twice: the first is parked with a [`CallsBack`]
/// waker, polled from another task (memq replaces the waker) and dropped; the second is
/// parked and dropped while memq still holds its calling-back waker (a cancellation).
macro_rules! replace_then_cancel {
    ($topic:expr, $recv:expr) => {{
        let mut recv = $recv;
        park_with_calling_back_waker(&mut recv, $topic);
        assert!(!poll_from_another_task(&mut recv));
        drop(recv);
        let mut recv = $recv;
        park_with_calling_back_waker(&mut recv, $topic);
        drop(recv);
    }};
}

/// Runs `f` on a thread and fails if it does not finish (a deadlock).
fn bounded(f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("deadlocked: a user value was dropped while memq held one of its locks");
}

#[test]
fn a_subscribers_replaced_waker_is_dropped_after_the_lock() {
    bounded(|| {
        let topic = Topic::<u32>::with_capacity(4).unwrap();
        let mut sub = topic.subscribe(StartAt::Latest).unwrap();
        let mut recv = sub.recv();
        park_with_calling_back_waker(&mut recv, &topic);
        assert!(!poll_from_another_task(&mut recv));
    });
}

#[test]
fn a_cancelled_receives_waker_is_dropped_after_the_lock() {
    bounded(|| {
        let topic = Topic::<u32>::with_capacity(4).unwrap();
        let mut sub = topic.subscribe(StartAt::Latest).unwrap();
        let mut recv = sub.recv();
        park_with_calling_back_waker(&mut recv, &topic);
        drop(recv); // a timeout, a lost `select!`
    });
}

#[test]
fn a_served_receives_waker_is_dropped_after_the_lock() {
    bounded(|| {
        let topic = Topic::<u32>::with_capacity(4).unwrap();
        let mut sub = topic.subscribe(StartAt::Latest).unwrap();
        let mut recv = sub.recv();
        park_with_calling_back_waker(&mut recv, &topic);
        topic.try_publish(7).unwrap();
        // Served while polled from another task: the registration is settled.
        assert!(poll_from_another_task(&mut recv));
    });
}

#[test]
fn a_multi_partition_subscribers_cancelled_waker_is_dropped_after_the_lock() {
    bounded(|| {
        let topic = Topic::<u32>::new(TopicConfig::new(4).partitions(3)).unwrap();
        let mut sub = topic.subscribe(StartAt::Latest).unwrap();
        let mut recv = sub.recv();
        park_with_calling_back_waker(&mut recv, &topic);
        drop(recv);
    });
}

#[test]
fn a_group_members_replaced_and_cancelled_wakers_are_dropped_after_the_lock() {
    bounded(|| {
        // One partition: the group's members share a pool.
        let topic = Topic::<u32>::with_capacity(4).unwrap();
        let mut m = topic.group("g", StartAt::Latest).unwrap();
        replace_then_cancel!(&topic, m.recv());
    });
}

#[test]
fn a_partitioned_group_members_wakers_are_dropped_after_the_lock() {
    bounded(|| {
        let topic = Topic::<u32>::new(TopicConfig::new(4).partitions(3)).unwrap();
        let mut m = topic.group("g", StartAt::Latest).unwrap();
        let mut recv = m.recv();
        park_with_calling_back_waker(&mut recv, &topic);
        assert!(!poll_from_another_task(&mut recv));
        drop(recv);
        let mut recv = m.recv();
        park_with_calling_back_waker(&mut recv, &topic);
        // The registration stays; dropping the member removes it.
        std::mem::forget(recv);
        drop(m);
    });
}

#[test]
fn an_ack_members_replaced_and_cancelled_wakers_are_dropped_after_the_lock() {
    bounded(|| {
        let clock = Arc::new(ManualClock::new());
        let topic = Topic::<u32>::new(TopicConfig::new(4).clock(clock)).unwrap();
        let mut m = topic
            .group_acked("g", StartAt::Latest, AckConfig::new())
            .unwrap();
        replace_then_cancel!(&topic, m.recv());
    });
}

#[test]
fn a_parked_publishers_replaced_waker_is_dropped_after_the_lock() {
    bounded(|| {
        let topic = Topic::<u32>::with_capacity(1).unwrap();
        let _slow = topic.subscribe(StartAt::Earliest).unwrap();
        topic.try_publish(0).unwrap();
        let mut publish = topic.publish(1);
        park_with_calling_back_waker(&mut publish, &topic);
        assert!(!poll_from_another_task(&mut publish));
        let mut batch = topic.publish_batch(vec![2]);
        park_with_calling_back_waker(&mut batch, &topic);
        assert!(!poll_from_another_task(&mut batch));
    });
}

#[test]
fn a_parked_publishers_waker_is_dropped_after_the_lock_when_it_finds_the_topic_closed() {
    bounded(|| {
        let topic = Topic::<u32>::with_capacity(1).unwrap();
        let _slow = topic.subscribe(StartAt::Earliest).unwrap();
        topic.try_publish(0).unwrap();
        let mut publish = topic.publish(1);
        park_with_calling_back_waker(&mut publish, &topic);
        topic.close();
        assert!(poll_from_another_task(&mut publish));
    });
}

/// A topic of 2 partitions and a group of 3 members on it: one member has no partition
/// and waits on the group's idle list.
fn three_members_on_two_partitions() -> (Topic<u32>, Vec<Consumer<u32>>) {
    let topic = Topic::<u32>::new(TopicConfig::new(4).partitions(2)).unwrap();
    let members = (0..3)
        .map(|_| topic.group("g", StartAt::Latest).unwrap())
        .collect();
    (topic, members)
}

/// Drops the member without a partition first (a member leaving wakes, and so empties,
/// the idle list).
fn drop_the_idle_member(members: &mut Vec<Consumer<u32>>) {
    let idle = members
        .iter_mut()
        .position(|m| m.assignment().is_empty())
        .unwrap();
    drop(members.remove(idle));
}

/// Polled as a stream (whose registration outlives the `next()` call), the idle member's
/// waker stays on the idle list until the member leaves.
#[test]
fn an_idle_stream_members_waker_is_dropped_after_the_members_lock() {
    bounded(|| {
        let (topic, mut members) = three_members_on_two_partitions();
        for m in &mut members {
            let waker = Waker::from(Arc::new(CallsBack(Mutex::new(Some(topic.clone())))));
            let polled = Pin::new(m).poll_next(&mut Context::from_waker(&waker));
            assert!(polled.is_pending());
        }
        drop_the_idle_member(&mut members);
    });
}

/// The same with `recv()` futures that are leaked, so that no cancellation settles them.
#[test]
fn an_idle_members_leaked_recv_waker_is_dropped_after_the_members_lock() {
    bounded(|| {
        let (topic, mut members) = three_members_on_two_partitions();
        for m in &mut members {
            let mut recv = m.recv();
            park_with_calling_back_waker(&mut recv, &topic);
            std::mem::forget(recv);
        }
        drop_the_idle_member(&mut members);
    });
}

/// A clock whose drop lists the topic's groups (the group registry's lock).
struct ListsGroupsOnDrop(Mutex<Option<Topic<u32>>>);

impl Clock for ListsGroupsOnDrop {
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl Drop for ListsGroupsOnDrop {
    fn drop(&mut self) {
        if let Some(topic) = self.0.lock().unwrap().take() {
            let _ = topic.groups();
        }
    }
}

/// A group that cannot be created gives back the user's settings (clock, timer,
/// dead-letter topic) after the registry's lock, not under it.
#[test]
fn a_failed_group_creation_drops_the_users_settings_after_the_registry_lock() {
    bounded(|| {
        let topic = Topic::<u32>::with_capacity(4).unwrap();
        let clock: Arc<dyn Clock> = Arc::new(ListsGroupsOnDrop(Mutex::new(Some(topic.clone()))));
        let r = topic.group_acked("g", StartAt::Offset(100), AckConfig::new().clock(clock));
        assert!(r.is_err(), "offset 100 of an empty topic is out of range");
    });
}

/// A message whose drop lists the topic's groups (the group registry's lock).
struct ValueListsGroups(Arc<Mutex<Option<Topic<ValueListsGroups>>>>);

impl Drop for ValueListsGroups {
    fn drop(&mut self) {
        let topic = self.0.lock().unwrap().take();
        if let Some(topic) = topic {
            let _ = topic.groups();
        }
    }
}

/// A waker whose wake-up lists the topic's groups.
struct WakeListsGroups(Mutex<Option<Topic<u32>>>);

impl Wake for WakeListsGroups {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let topic = self.0.lock().unwrap().take();
        if let Some(topic) = topic {
            let _ = topic.groups();
        }
    }
}

/// A topic with a 1 s TTL on `clock`, whose timer never rings (the test moves the clock).
fn ttl_topic<T>(capacity: usize, clock: &Arc<ManualClock>) -> Topic<T> {
    struct NoTimer;
    impl Timer for NoTimer {
        fn wake_after(&self, _delay: Duration, _waker: Waker) {}
    }
    let clock: Arc<dyn Clock> = clock.clone();
    let config = TopicConfig::new(capacity)
        .ttl(Duration::from_secs(1))
        .clock(clock)
        .timer(Arc::new(NoTimer));
    Topic::new(config).unwrap()
}

/// Creating a group applies the TTL first: the values it expires are dropped after the
/// registry's lock, not under it.
#[test]
fn a_value_expired_by_a_new_groups_creation_is_dropped_after_the_registry_lock() {
    bounded(|| {
        let clock = Arc::new(ManualClock::new());
        let topic = ttl_topic::<ValueListsGroups>(4, &clock);
        let slot = Arc::new(Mutex::new(Some(topic.clone())));
        topic.try_publish(ValueListsGroups(slot)).unwrap();
        clock.advance(Duration::from_secs(2));
        let _m = topic.group("g", StartAt::Earliest).unwrap();
    });
}

/// The same expiry frees room: the publisher parked on the full log is woken after the
/// registry's lock.
#[test]
fn a_publisher_woken_by_a_new_groups_expiry_is_woken_after_the_registry_lock() {
    bounded(|| {
        let clock = Arc::new(ManualClock::new());
        let topic = ttl_topic::<u32>(1, &clock);
        let _slow = topic.subscribe(StartAt::Earliest).unwrap();
        topic.try_publish(0).unwrap();
        let waker = Waker::from(Arc::new(WakeListsGroups(Mutex::new(Some(topic.clone())))));
        let mut publish = topic.publish(1);
        let parked = Pin::new(&mut publish)
            .poll(&mut Context::from_waker(&waker))
            .is_pending();
        assert!(parked, "the log is full: the publish was expected to wait");
        clock.advance(Duration::from_secs(2));
        let _m = topic.group("g", StartAt::Latest).unwrap();
        drop(publish);
    });
}
