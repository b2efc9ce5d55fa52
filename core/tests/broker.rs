//! The broker: a registry of named topics.

extern crate alloc;

use core::time::Duration;
use std::sync::mpsc;

use memq_core::{
    Broker, Error, Overflow, PublishError, RecvError, StartAt, TopicConfig, TryRecvError,
};

#[test]
fn create_get_list_len() {
    let b = Broker::<u32>::new();
    assert!(b.is_empty());
    assert_eq!(b.len(), 0);
    assert!(b.list().is_empty());
    let orders = b.create("orders", TopicConfig::new(8)).unwrap();
    b.create("audit", TopicConfig::new(4).partitions(2))
        .unwrap();
    assert_eq!(orders.name(), Some("orders"));
    assert_eq!(b.len(), 2);
    assert!(!b.is_empty());
    assert!(b.contains("orders"));
    assert!(!b.contains("nope"));
    assert_eq!(b.list(), ["audit", "orders"], "sorted by name");
    let got = b.get("orders").unwrap();
    assert_eq!(got.name(), Some("orders"));
    assert_eq!(b.get("audit").unwrap().partitions(), 2);
    // Handles from create and get are the same topic.
    let mut sub = got.subscribe(StartAt::Earliest).unwrap();
    orders.try_publish(42).unwrap();
    assert_eq!(sub.try_recv().unwrap().into_value(), 42);
    assert_eq!(Broker::<u8>::default().len(), 0);
}

#[test]
fn create_duplicate_is_topic_exists() {
    let b = Broker::<u8>::new();
    let t = b.create("t", TopicConfig::new(8)).unwrap();
    t.try_publish(1).unwrap();
    assert_eq!(
        b.create("t", TopicConfig::new(2)).unwrap_err(),
        Error::TopicExists("t".into())
    );
    // The original is untouched.
    let again = b.get("t").unwrap();
    assert_eq!(again.capacity(), 8);
    assert_eq!(again.stats().published, 1);
}

#[test]
fn create_with_bad_config_registers_nothing() {
    let b = Broker::<u8>::new();
    assert_eq!(
        b.create("z", TopicConfig::new(0)).unwrap_err(),
        Error::ZeroCapacity
    );
    assert_eq!(
        b.get_or_create("z", TopicConfig::new(1).partitions(0))
            .unwrap_err(),
        Error::ZeroPartitions
    );
    assert!(b.is_empty());
    assert!(!b.contains("z"));
}

#[test]
fn get_unknown_is_unknown_topic() {
    let b = Broker::<u8>::new();
    assert_eq!(
        b.get("missing").unwrap_err(),
        Error::UnknownTopic("missing".into())
    );
}

#[test]
fn get_or_create_keeps_an_existing_config() {
    let b = Broker::<u8>::new();
    let a = b
        .get_or_create("t", TopicConfig::new(8).overflow(Overflow::DropOldest))
        .unwrap();
    let c = b.get_or_create("t", TopicConfig::new(2)).unwrap();
    assert_eq!(c.capacity(), 8);
    assert_eq!(c.overflow(), Overflow::DropOldest);
    a.try_publish(1).unwrap();
    assert_eq!(c.stats().published, 1);
    assert_eq!(b.len(), 1);
}

#[test]
fn the_broker_keeps_a_topic_open() {
    let b = Broker::<u8>::new();
    let t = b.create("t", TopicConfig::new(8)).unwrap();
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    drop(t);
    // The broker's handle keeps it open.
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Empty);
    b.get("t").unwrap().try_publish(5).unwrap();
    assert_eq!(sub.try_recv().unwrap().into_value(), 5);
}

#[test]
fn delete_closes_and_unregisters() {
    let b = Broker::<String>::new();
    let t = b.create("t", TopicConfig::new(8)).unwrap();
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    t.try_publish("kept".into()).unwrap();
    b.delete("t").unwrap();
    assert!(!b.contains("t"));
    assert_eq!(b.get("t").unwrap_err(), Error::UnknownTopic("t".into()));
    assert!(t.is_closed());
    let err = t.try_publish("late".into()).unwrap_err();
    assert!(matches!(&err, PublishError::Closed(v) if v == "late"));
    assert_eq!(sub.try_recv().unwrap().into_value(), "kept");
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Closed);
    assert_eq!(b.delete("t").unwrap_err(), Error::UnknownTopic("t".into()));
    // The name is free again, for a new topic.
    let fresh = b.create("t", TopicConfig::new(2)).unwrap();
    assert!(!fresh.is_closed());
    assert_eq!(fresh.try_publish("x".into()).unwrap().offset, 0);
}

#[cfg(feature = "std")]
#[test]
fn delete_wakes_a_reader_blocked_on_another_thread() {
    let b = Broker::<u32>::new();
    let t = b.create("t", TopicConfig::new(8)).unwrap();
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    drop(t);
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        loop {
            match sub.recv_blocking() {
                Ok(m) => {
                    got.push(m.into_value());
                    if got.len() == 2 {
                        tx.send(()).unwrap();
                    }
                }
                Err(e) => return (got, e),
            }
        }
    });
    let topic = b.get("t").unwrap();
    topic.try_publish(1).unwrap();
    topic.try_publish(2).unwrap();
    rx.recv().unwrap();
    // Give the reader a moment to park in recv_blocking (the outcome is the same if
    // it has not yet).
    std::thread::sleep(Duration::from_millis(20));
    topic.try_publish(3).unwrap();
    b.delete("t").unwrap();
    let (got, err) = reader.join().unwrap();
    assert_eq!(got, [1, 2, 3], "drained before Closed");
    assert_eq!(err, RecvError::Closed);
}

#[cfg(feature = "std")]
#[test]
fn delete_wakes_a_group_member_blocked_on_another_thread() {
    let b = Broker::<u32>::new();
    let t = b.create("jobs", TopicConfig::new(8)).unwrap();
    let mut c = t.group("w", StartAt::Earliest).unwrap();
    let reader = std::thread::spawn(move || c.recv_blocking());
    std::thread::sleep(Duration::from_millis(20));
    b.delete("jobs").unwrap();
    drop(t);
    assert_eq!(reader.join().unwrap().unwrap_err(), RecvError::Closed);
}

#[test]
fn stats_of_every_topic_sorted_by_name() {
    let b = Broker::<u8>::new();
    let z = b.create("zeta", TopicConfig::new(4)).unwrap();
    let a = b
        .create("alpha", TopicConfig::new(16).partitions(2))
        .unwrap();
    z.try_publish(1).unwrap();
    for i in 0..3 {
        a.try_publish(i).unwrap();
    }
    let stats = b.stats();
    let names: Vec<_> = stats.iter().map(|s| s.name.clone()).collect();
    assert_eq!(names, [Some("alpha".into()), Some("zeta".into())]);
    assert_eq!((stats[0].published, stats[0].capacity), (3, 16));
    assert_eq!(stats[0].partitions.len(), 2);
    assert_eq!((stats[1].published, stats[1].capacity), (1, 4));
    b.delete("zeta").unwrap();
    assert_eq!(b.stats().len(), 1);
}

#[cfg(feature = "std")]
#[test]
fn shared_across_threads() {
    let b = alloc::sync::Arc::new(Broker::<u32>::new());
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let b = b.clone();
            std::thread::spawn(move || {
                let t = b.get_or_create("shared", TopicConfig::new(1024)).unwrap();
                for n in 0..100 {
                    t.publish_blocking(i * 100 + n).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(b.len(), 1);
    assert_eq!(b.get("shared").unwrap().stats().published, 400);
}

#[test]
fn debug_lists_topics() {
    struct Opaque;
    let b = Broker::<Opaque>::new();
    b.create("one", TopicConfig::new(1)).unwrap();
    let s = format!("{b:?}");
    assert!(s.contains("Broker") && s.contains("one"), "{s}");
}

#[test]
fn a_topic_closed_through_a_handle_stays_registered_until_deleted() {
    // From review: the docs said a registered topic stays open. Any handle can close it;
    // it stays listed (closed) and keeps its name until `delete`.
    let b = Broker::<u32>::new();
    let t = b.create("x", TopicConfig::new(4)).unwrap();
    t.close();
    assert!(b.contains("x"));
    assert!(b.get("x").unwrap().is_closed());
    assert!(matches!(
        b.create("x", TopicConfig::new(4)),
        Err(Error::TopicExists(_))
    ));
    b.delete("x").unwrap();
    assert!(!b.contains("x"));
    assert!(!b.create("x", TopicConfig::new(4)).unwrap().is_closed());
}

/// A clock that looks at the broker its topic is being made in: the topic's clock (user
/// code) is read while the topic is built, which must not be under the broker's lock.
struct LookingClock(std::sync::Arc<std::sync::OnceLock<std::sync::Arc<Broker<u32>>>>);

impl memq_core::Clock for LookingClock {
    fn now(&self) -> Duration {
        if let Some(broker) = self.0.get() {
            let _ = broker.len();
        }
        Duration::from_secs(1)
    }
}

/// From review: `create` and `get_or_create` built the topic with the registry locked,
/// so a clock that looks at the broker (or a router or timer dropped with a bad config)
/// ran under that lock, and the first deadlocked.
#[test]
fn a_topics_clock_may_look_at_its_broker_while_the_topic_is_made() {
    let cell = std::sync::Arc::new(std::sync::OnceLock::new());
    let broker = std::sync::Arc::new(Broker::<u32>::new());
    cell.set(broker.clone()).ok().unwrap();
    let (tx, rx) = mpsc::channel();
    let clock = || std::sync::Arc::new(LookingClock(cell.clone()));
    let (a, b) = (clock(), clock());
    let made = broker.clone();
    std::thread::spawn(move || {
        let first = made.create("a", TopicConfig::new(4).clock(a)).is_ok();
        let second = made
            .get_or_create("b", TopicConfig::new(4).clock(b))
            .is_ok();
        let _ = tx.send((first, second));
    });
    let done = rx.recv_timeout(Duration::from_secs(10));
    assert_eq!(done, Ok((true, true)), "making a topic deadlocked");
    assert_eq!(broker.len(), 2);
    assert!(matches!(
        broker.create("a", TopicConfig::new(4).clock(clock())),
        Err(Error::TopicExists(_))
    ));
    assert_eq!(
        broker
            .get_or_create("a", TopicConfig::new(8))
            .unwrap()
            .capacity(),
        4
    );
}
