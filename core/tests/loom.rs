//! Loom models of memq-core's wake-ups: every interleaving of the threads below, up to
//! `LOOM_MAX_PREEMPTIONS` preemptions, must deliver every message exactly once and leave no
//! task asleep with work to do (loom reports a lost wake-up as a deadlock).
//!
//! Run with:
//!
//! ```text
//! LOOM_MAX_PREEMPTIONS=2 RUSTFLAGS="--cfg loom" \
//!     cargo test -p memq-core --test loom --release --target-dir target/loom
//! ```
//!
//! Under `cfg(loom)` memq-core's locks and atomics come from loom (`src/sync.rs`), so loom
//! sees every critical section. Waiting futures run under `loom::future::block_on`, whose
//! waker is loom-aware; a future that must be dropped half way is stepped by hand.
#![cfg(loom)]

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;

use loom::future::block_on;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use memq_core::{
    AckConfig, AckError, Consumer, ManualClock, Overflow, PublishError, RecvError, RecvIfError,
    StartAt, Timer, Topic, TopicConfig, TryRecvError,
};

/// A topic's settings for a model: on the locked log, whose wake-up protocol (read-ahead,
/// wake positions, the pool) these models were written for, or, with `MEMQ_LOOM_RING=1`
/// in the environment, on the lock-free ring engine with memq's wait lists in front of
/// it (the ring's own protocol has models of its own, `ring/tests/loom.rs`).
fn topic_config(capacity: usize) -> TopicConfig {
    TopicConfig::new(capacity)
        .ring_engine(std::env::var_os("MEMQ_LOOM_RING").is_some_and(|v| v == "1"))
}

/// Polls `fut` once with a waker that does nothing: for a future that is dropped rather
/// than awaited, so nobody needs to be woken.
fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    Pin::new(fut).poll(&mut Context::from_waker(Waker::noop()))
}

/// Runs `f` under loom and prints how many interleavings it explored, so a run that
/// explores suspiciously few shows up in the log.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    // Keep runs bounded when the caller did not say otherwise.
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = runs.clone();
    builder.check(move || {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f();
    });
    println!(
        "explored {} interleavings (preemption bound {:?})",
        runs.load(std::sync::atomic::Ordering::Relaxed),
        builder.preemption_bound
    );
}

#[test]
fn publish_wakes_a_waiting_subscriber() {
    model(|| {
        let topic = Topic::<u32>::new(topic_config(2)).unwrap();
        let mut sub = topic.subscribe(StartAt::Latest).unwrap();
        let reader = thread::spawn(move || block_on(sub.recv()).map(|m| m.into_value()));
        topic.try_publish(7).unwrap();
        assert_eq!(reader.join().unwrap(), Ok(7));
    });
}

#[test]
fn publish_wakes_a_waiting_recv_many() {
    model(|| {
        let topic = Topic::<u32>::new(topic_config(2)).unwrap();
        let mut sub = topic.subscribe(StartAt::Latest).unwrap();
        let reader = thread::spawn(move || {
            let mut buf = Vec::new();
            let n = block_on(sub.recv_many(&mut buf, 4)).unwrap();
            assert!(n >= 1);
            buf[0].offset()
        });
        topic.try_publish(1).unwrap();
        assert_eq!(reader.join().unwrap(), 0);
    });
}

#[test]
fn each_message_goes_to_exactly_one_waiting_member() {
    model(|| {
        let topic = Topic::<u32>::new(topic_config(4)).unwrap();
        let members: Vec<_> = (0..2)
            .map(|_| topic.group("g", StartAt::Latest).unwrap())
            .collect();
        let readers: Vec<_> = members
            .into_iter()
            .map(|mut m| thread::spawn(move || block_on(m.recv()).unwrap().into_value()))
            .collect();
        topic.try_publish(1).unwrap();
        topic.try_publish(2).unwrap();
        let mut got: Vec<u32> = readers.into_iter().map(|r| r.join().unwrap()).collect();
        got.sort_unstable();
        assert_eq!(got, [1, 2]);
    });
}

#[test]
fn one_message_one_member_the_other_sees_closed() {
    model(|| {
        let topic = Topic::<u32>::new(topic_config(4)).unwrap();
        let members: Vec<_> = (0..2)
            .map(|_| topic.group("g", StartAt::Latest).unwrap())
            .collect();
        let readers: Vec<_> = members
            .into_iter()
            .map(|mut m| thread::spawn(move || block_on(m.recv()).map(|m| m.into_value())))
            .collect();
        topic.try_publish(5).unwrap();
        topic.close();
        let got: Vec<_> = readers.into_iter().map(|r| r.join().unwrap()).collect();
        let delivered = got.iter().filter(|r| **r == Ok(5)).count();
        let closed = got.iter().filter(|r| **r == Err(RecvError::Closed)).count();
        assert_eq!((delivered, closed), (1, 1), "{got:?}");
    });
}

#[test]
fn dropped_waiting_member_passes_its_wakeup_on() {
    model(|| {
        let topic = Topic::<u32>::new(topic_config(4)).unwrap();
        let mut a = topic.group("g", StartAt::Latest).unwrap();
        let mut b = topic.group("g", StartAt::Latest).unwrap();
        // `a` parks first, so it is first in line for the next message.
        let mut ra = a.recv();
        assert!(poll_once(&mut ra).is_pending());
        let reader = thread::spawn(move || block_on(b.recv()).map(|m| m.into_value()));
        let publisher = {
            let topic = topic.clone();
            thread::spawn(move || topic.try_publish(9).unwrap().offset)
        };
        // Dropped before, while or after it is notified: `b` must get the message.
        drop(ra);
        assert_eq!(publisher.join().unwrap(), 0);
        assert_eq!(reader.join().unwrap(), Ok(9));
        assert_eq!(a.try_recv().unwrap_err(), TryRecvError::Empty);
    });
}

/// Two members wait, one of them in `recv_if` with a predicate that declines the only
/// message: whether it is woken first, and declines and returns, or the other takes the
/// message first, the other member must get it (a decline passes its wake-up on). The
/// decliner then ends with the topic's close. With the group's shared pool and without
/// (`DropOldest`: members read under the partition's lock).
#[test]
fn a_member_that_declines_passes_its_wakeup_on() {
    for overflow in [Overflow::Block, Overflow::DropOldest] {
        model(move || {
            let topic = Topic::<u32>::new(topic_config(4).overflow(overflow)).unwrap();
            let mut a = topic.group("g", StartAt::Latest).unwrap();
            let mut b = topic.group("g", StartAt::Latest).unwrap();
            // The decliner stays a member until joined: leaving the group would wake
            // every member, hiding a wake-up that was not passed on.
            let decliner = thread::spawn(move || {
                let got = block_on(a.recv_if(|v: &u32| *v != 9)).map(|m| m.into_value());
                (got, a)
            });
            let taker = thread::spawn(move || block_on(b.recv()).map(|m| m.into_value()));
            topic.try_publish(9).unwrap();
            assert_eq!(taker.join().unwrap(), Ok(9));
            topic.close();
            let (declined, _a) = decliner.join().unwrap();
            assert!(
                matches!(declined, Err(RecvIfError::Declined | RecvIfError::Closed)),
                "{declined:?}"
            );
        });
    }
}

#[test]
fn a_subscriber_receiving_in_a_loop_stays_registered_and_misses_nothing() {
    // The topic's only subscriber, receiving asynchronously: each receive that takes the
    // last message leaves it registered, and the next one waits without visiting the
    // partition. Every publish and the close racing that must still reach it.
    model(|| {
        let topic = Topic::<u32>::new(topic_config(4)).unwrap();
        let mut sub = topic.subscribe(StartAt::Latest).unwrap();
        let reader = thread::spawn(move || {
            block_on(async move {
                let mut got = Vec::new();
                while let Ok(m) = sub.recv().await {
                    got.push(m.into_value());
                }
                got
            })
        });
        topic.try_publish(1).unwrap();
        topic.try_publish(2).unwrap();
        topic.close();
        assert_eq!(reader.join().unwrap(), [1, 2]);
    });
}

#[test]
fn close_wakes_a_waiting_subscriber() {
    model(|| {
        let topic = Topic::<u32>::new(topic_config(2)).unwrap();
        let mut sub = topic.subscribe(StartAt::Latest).unwrap();
        let reader = thread::spawn(move || block_on(sub.recv()).map(|m| m.into_value()));
        topic.close();
        assert_eq!(reader.join().unwrap(), Err(RecvError::Closed));
    });
}

#[test]
fn close_wakes_a_waiting_member_after_it_drains() {
    model(|| {
        let topic = Topic::<u32>::new(topic_config(2)).unwrap();
        let mut member = topic.group("g", StartAt::Latest).unwrap();
        let reader = thread::spawn(move || {
            let first = block_on(member.recv()).map(|m| m.into_value());
            let second = block_on(member.recv()).map(|m| m.into_value());
            (first, second)
        });
        topic.try_publish(3).unwrap();
        // Dropping the last handle closes the topic.
        drop(topic);
        assert_eq!(reader.join().unwrap(), (Ok(3), Err(RecvError::Closed)));
    });
}

#[test]
fn close_wakes_a_member_with_no_partition() {
    // Three members, two partitions: the third has nothing to read and waits for a
    // rebalance or the group's drain. Closing the (empty, drained) topic must reach it,
    // wherever its re-check after registering falls in the close.
    model(|| {
        let topic = Topic::<u32>::new(topic_config(2).partitions(2)).unwrap();
        let a = topic.group("g", StartAt::Latest).unwrap();
        let b = topic.group("g", StartAt::Latest).unwrap();
        let mut idle = topic.group("g", StartAt::Latest).unwrap();
        let reader = thread::spawn(move || block_on(idle.recv()).map(|m| m.into_value()));
        topic.close();
        assert_eq!(reader.join().unwrap(), Err(RecvError::Closed));
        drop((a, b));
    });
}

#[test]
fn close_wakes_a_blocked_publisher_with_its_message() {
    model(|| {
        let topic = Topic::<u32>::new(topic_config(1)).unwrap();
        let _sub = topic.subscribe(StartAt::Earliest).unwrap();
        topic.try_publish(0).unwrap();
        let publisher = {
            let topic = topic.clone();
            thread::spawn(move || block_on(topic.publish(1)))
        };
        topic.close();
        assert!(matches!(
            publisher.join().unwrap(),
            Err(PublishError::Closed(1))
        ));
    });
}

#[test]
fn block_publisher_is_woken_when_the_reader_advances() {
    model(|| {
        let topic = Topic::<u32>::new(topic_config(1)).unwrap();
        let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
        topic.try_publish(0).unwrap();
        let publisher = {
            let topic = topic.clone();
            thread::spawn(move || block_on(topic.publish(1)).unwrap().offset)
        };
        assert_eq!(sub.try_recv().unwrap().into_value(), 0);
        assert_eq!(publisher.join().unwrap(), 1);
        assert_eq!(sub.try_recv().unwrap().into_value(), 1);
        assert_eq!(topic.stats().evicted, 1);
    });
}

#[test]
fn block_publisher_is_woken_when_the_reader_hands_over_read_ahead() {
    // The subscriber fetches 0 and 1 in one visit; the publisher of 3 parks on the full
    // log while the subscriber hands 1 over without the lock. Either the publisher's
    // count after raising its flag sees the room, or the subscriber sees the flag.
    model(|| handing_over_read_ahead_wakes_the_publisher(false));
}

#[test]
fn block_publisher_is_woken_when_the_reader_hands_over_read_ahead_it_moved_out() {
    // The same on a topic that releases on read: the subscriber moved 0 and 1 out of the
    // log; 1's slot stays taken until it is handed over, which must free the publisher.
    model(|| handing_over_read_ahead_wakes_the_publisher(true));
}

fn two_slots(release: bool) -> Topic<u32> {
    Topic::new(topic_config(2).release_on_read(release)).unwrap()
}

fn handing_over_read_ahead_wakes_the_publisher(release: bool) {
    let topic = two_slots(release);
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish(0).unwrap();
    topic.try_publish(1).unwrap();
    assert_eq!(sub.try_recv().unwrap().into_value(), 0);
    topic.try_publish(2).unwrap();
    let publisher = {
        let topic = topic.clone();
        thread::spawn(move || block_on(topic.publish(3)).unwrap().offset)
    };
    assert_eq!(sub.try_recv().unwrap().into_value(), 1);
    assert_eq!(publisher.join().unwrap(), 3);
    assert_eq!(sub.try_recv().unwrap().into_value(), 2);
    assert_eq!(sub.try_recv().unwrap().into_value(), 3);
}

#[test]
fn dropping_a_subscriber_gives_back_what_it_moved_out_and_frees_the_publisher() {
    // The subscriber moved 0 and 1 out of a releasing log and was handed 0; the publisher
    // of 3 waits for 1's slot. The subscriber is dropped instead of reading: 1 goes back
    // to the log, and with no reader left the publisher may evict it.
    model(|| {
        let topic = two_slots(true);
        let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
        topic.try_publish(0).unwrap();
        topic.try_publish(1).unwrap();
        assert_eq!(sub.try_recv().unwrap().into_value(), 0);
        topic.try_publish(2).unwrap();
        let publisher = {
            let topic = topic.clone();
            thread::spawn(move || block_on(topic.publish(3)).unwrap().offset)
        };
        drop(sub);
        assert_eq!(publisher.join().unwrap(), 3);
        let stats = topic.stats();
        assert_eq!((stats.released, stats.evicted, stats.depth), (1, 1, 2));
        let mut late = topic.subscribe(StartAt::Earliest).unwrap();
        assert_eq!(late.try_recv().unwrap().into_value(), 2);
        assert_eq!(late.try_recv().unwrap().into_value(), 3);
    });
}

#[test]
fn block_publisher_is_woken_by_the_last_of_two_readers_handing_over_read_ahead() {
    // Two subscribers hold read-ahead; the publisher needs both to move. Whichever hands
    // over last must find the room, wherever the publisher's parking falls.
    model(|| the_last_of_two_readers_wakes_the_publisher(false));
}

#[test]
fn block_publisher_is_woken_by_the_last_of_two_readers_of_a_releasing_topic() {
    // The same where B moved 0 out (A had copied it already) and copied 1.
    model(|| the_last_of_two_readers_wakes_the_publisher(true));
}

fn the_last_of_two_readers_wakes_the_publisher(release: bool) {
    let topic = two_slots(release);
    let mut a = topic.subscribe(StartAt::Earliest).unwrap();
    let mut b = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish(0).unwrap();
    topic.try_publish(1).unwrap();
    assert_eq!(a.try_recv().unwrap().into_value(), 0);
    assert_eq!(b.try_recv().unwrap().into_value(), 0);
    topic.try_publish(2).unwrap();
    let publisher = {
        let topic = topic.clone();
        thread::spawn(move || block_on(topic.publish(3)).unwrap().offset)
    };
    let reader = thread::spawn(move || a.try_recv().unwrap().into_value());
    assert_eq!(b.try_recv().unwrap().into_value(), 1);
    assert_eq!(reader.join().unwrap(), 1);
    assert_eq!(publisher.join().unwrap(), 3);
}

#[test]
fn block_publishers_parked_in_turn_are_each_woken_by_a_reader_handing_over() {
    // Two publishers park on a full log of 2 slots read by one subscriber that reads
    // ahead. The first one woken publishes and moves the position the other needs; the
    // subscriber, which may already have taken the lock for the old position, must act
    // on the new one (a publish while others stay parked re-arms the wake position).
    model(|| publishers_parked_in_turn_are_each_woken(false));
}

#[test]
fn block_publishers_parked_in_turn_on_a_releasing_topic_are_each_woken() {
    // The same where the subscriber moves what it fetches out of the log.
    model(|| publishers_parked_in_turn_are_each_woken(true));
}

fn publishers_parked_in_turn_are_each_woken(release: bool) {
    let topic = two_slots(release);
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish(0).unwrap();
    topic.try_publish(1).unwrap();
    let publishers: Vec<_> = (0..2)
        .map(|i| {
            let topic = topic.clone();
            thread::spawn(move || block_on(topic.publish(10 + i)).unwrap().offset)
        })
        .collect();
    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(block_on(sub.recv()).unwrap().into_value());
    }
    let mut offsets: Vec<_> = publishers.into_iter().map(|p| p.join().unwrap()).collect();
    offsets.sort_unstable();
    assert_eq!(offsets, [2, 3]);
    assert_eq!(got[..2], [0, 1]);
    got[2..].sort_unstable();
    assert_eq!(got[2..], [10, 11]);
}

/// A group of two members, A and B, on a one-partition topic of `capacity` slots: 0 and 1
/// are published, A's receive reads 0 and fetches 1 into the group's pool, then 2 is
/// published (into the log).
fn pooled_pair(capacity: usize, release: bool) -> (Topic<u32>, Consumer<u32>, Consumer<u32>) {
    let config = topic_config(capacity).release_on_read(release);
    let topic = Topic::<u32>::new(config).unwrap();
    let mut a = topic.group("g", StartAt::Earliest).unwrap();
    let b = topic.group("g", StartAt::Earliest).unwrap();
    topic.try_publish(0).unwrap();
    topic.try_publish(1).unwrap();
    assert_eq!(a.try_recv().unwrap().into_value(), 0);
    topic.try_publish(2).unwrap();
    (topic, a, b)
}

#[test]
fn a_member_taking_from_the_pool_frees_a_waiting_publisher() {
    // A group on a one-partition topic: A's receive reads 0 and fetches 1 into the
    // group's pool. The publisher of 3 waits on the full log until 1 is taken; B takes
    // it from the pool, without the partition's lock, and nobody reads anything after:
    // that alone must free the publisher, wherever its parking falls.
    model(|| taking_from_the_pool_frees_a_waiting_publisher(false));
}

#[test]
fn a_member_taking_from_a_releasing_pool_frees_a_waiting_publisher() {
    // The same on a topic that releases on read: 0 and 1 were moved out of the log (0 to
    // A's user, 1 into the pool), but 1's slot still counts until B takes it, so the
    // publisher of 3 waits just the same, and taking 1 from the pool must free it.
    model(|| taking_from_the_pool_frees_a_waiting_publisher(true));
}

fn taking_from_the_pool_frees_a_waiting_publisher(release: bool) {
    let (topic, mut a, mut b) = pooled_pair(2, release);
    let publisher = {
        let topic = topic.clone();
        thread::spawn(move || block_on(topic.publish(3)).unwrap().offset)
    };
    let other = thread::spawn(move || block_on(b.recv()).unwrap().into_value());
    assert_eq!(other.join().unwrap(), 1);
    assert_eq!(publisher.join().unwrap(), 3);
    assert_eq!(a.try_recv().unwrap().into_value(), 2);
    assert_eq!(a.try_recv().unwrap().into_value(), 3);
    assert_eq!(topic.stats().released, u64::from(release) * 4);
}

#[test]
fn members_sharing_a_pool_take_each_message_once() {
    // A and B race for what A's first receive fetched into the pool and for what is
    // still in the log; each message goes to exactly one of them.
    model(|| sharing_a_pool_takes_each_message_once(false));
}

#[test]
fn members_sharing_a_releasing_pool_take_each_message_once() {
    // The same where the pool holds the log's own values, moved out of it.
    model(|| sharing_a_pool_takes_each_message_once(true));
}

fn sharing_a_pool_takes_each_message_once(release: bool) {
    let (topic, mut a, mut b) = pooled_pair(4, release);
    let other = thread::spawn(move || block_on(b.recv()).unwrap().into_value());
    let mine = block_on(a.recv()).unwrap().into_value();
    let mut got = [mine, other.join().unwrap()];
    got.sort_unstable();
    assert_eq!(got, [1, 2]);
    let stats = topic.stats();
    assert_eq!(
        (stats.delivered, stats.released),
        (3, u64::from(release) * 3)
    );
}

#[test]
fn a_batch_reports_what_it_took_from_the_pool_when_the_group_is_deleted() {
    // A's first receive fetched 1 and 2 into the group's pool; A then asks for a batch
    // while the group is deleted on another thread. Whatever the batch appended to its
    // buffer before it saw the deletion is reported as received, never as `Closed`.
    model(|| {
        let topic = Topic::<u32>::new(topic_config(4)).unwrap();
        let mut a = topic.group("g", StartAt::Earliest).unwrap();
        for i in 0..3 {
            topic.try_publish(i).unwrap();
        }
        assert_eq!(a.try_recv().unwrap().into_value(), 0);
        let deleter = delete_group_on_a_thread(&topic);
        let mut buf = Vec::new();
        let n = match a.try_recv_many(&mut buf, 10) {
            Ok(n) => n,
            Err(TryRecvError::Closed) => 0,
            Err(e) => panic!("{e:?}"),
        };
        assert_eq!(n, buf.len());
        let got: Vec<u32> = buf.iter().map(|m| *m.value()).collect();
        // A prefix of what was pooled: the deletion may fall between two takes.
        assert!([&[][..], &[1], &[1, 2]].contains(&&got[..]), "{got:?}");
        deleter.join().unwrap();
    });
}

/// Deletes group "g" of `topic` on a thread of the model's own.
fn delete_group_on_a_thread(topic: &Topic<u32>) -> thread::JoinHandle<()> {
    let topic = topic.clone();
    thread::spawn(move || topic.delete_group("g").unwrap())
}

#[test]
fn a_try_recv_racing_a_deletion_delivers_or_says_closed() {
    // A member of a group on two partitions (so the plain round, not the pool) tries to
    // receive while the group is deleted: it gets the message (taken before the
    // deletion) or `Closed`, never `Empty` with a message there (a visit that found the
    // group gone after the poll's `refresh` once left `Closed` to the next poll).
    model(|| {
        let topic = Topic::<u32>::new(topic_config(4).partitions(2)).unwrap();
        let mut a = topic.group("g", StartAt::Earliest).unwrap();
        topic.try_publish_to(0, 7).unwrap();
        topic.try_publish_to(1, 8).unwrap();
        let deleter = delete_group_on_a_thread(&topic);
        match a.try_recv() {
            Ok(m) => assert!([7, 8].contains(m.value())),
            Err(TryRecvError::Closed) => {}
            Err(e) => panic!("{e:?}"),
        }
        deleter.join().unwrap();
    });
}

#[test]
fn an_acked_try_recv_racing_a_deletion_delivers_or_says_closed() {
    // The same for an explicit-ack member (it said `Empty` too; found in review).
    model(|| {
        let topic = Topic::<u32>::new(topic_config(4)).unwrap();
        let config = AckConfig::new()
            .ack_wait(Duration::from_secs(60))
            .clock(std::sync::Arc::new(ManualClock::new()))
            .timer(std::sync::Arc::new(ManualTimer::default()));
        let mut a = topic.group_acked("g", StartAt::Earliest, config).unwrap();
        topic.try_publish(7).unwrap();
        let deleter = delete_group_on_a_thread(&topic);
        match a.try_recv() {
            Ok(d) => assert_eq!(*d.message().value(), 7),
            Err(TryRecvError::Closed) => {}
            Err(e) => panic!("{e:?}"),
        }
        deleter.join().unwrap();
    });
}

#[test]
fn a_member_waiting_on_two_partitions_is_told_of_a_deletion() {
    // A member waits on both partitions of its group while the group is deleted: the
    // deletion removes the partitions one at a time, so a poll may find one gone and wait
    // on the other; whichever way it falls, the wait ends in `Closed`.
    model(|| {
        let topic = Topic::<u32>::new(topic_config(4).partitions(2)).unwrap();
        let mut a = topic.group("g", StartAt::Earliest).unwrap();
        let deleter = delete_group_on_a_thread(&topic);
        assert!(matches!(block_on(a.recv()), Err(RecvError::Closed)));
        deleter.join().unwrap();
    });
}

#[test]
fn an_acked_member_waiting_on_two_partitions_is_told_of_a_deletion() {
    model(|| {
        let (topic, config) = acked_two_partitions(4);
        let mut a = topic.group_acked("g", StartAt::Earliest, config()).unwrap();
        let deleter = delete_group_on_a_thread(&topic);
        assert!(matches!(block_on(a.recv()), Err(RecvError::Closed)));
        deleter.join().unwrap();
    });
}

#[test]
fn a_rebalance_mid_stream_delivers_each_message_once() {
    // A reads partition 1 alone; B joins and is given partition 1. Whether A still reads
    // it (a stale view, before it sees the rebalance) or B does, each message is
    // received exactly once.
    model(|| {
        let topic = Topic::<u32>::new(topic_config(4).partitions(2)).unwrap();
        let mut a = topic.group("g", StartAt::Earliest).unwrap();
        for v in 0..3 {
            topic.try_publish_to(1, v).unwrap();
        }
        assert_eq!(a.try_recv().unwrap().into_value(), 0);
        let joiner = {
            let topic = topic.clone();
            thread::spawn(move || {
                let mut b = topic.group("g", StartAt::Earliest).unwrap();
                let got: Vec<u32> = (0..2)
                    .filter_map(|_| b.try_recv().ok())
                    .map(|m| m.into_value())
                    .collect();
                (b, got)
            })
        };
        let mut got: Vec<u32> = a
            .try_recv()
            .ok()
            .map(|m| m.into_value())
            .into_iter()
            .collect();
        let (mut b, from_b) = joiner.join().unwrap();
        got.extend(from_b);
        for _ in 0..2 {
            got.extend(a.try_recv().ok().map(|m| m.into_value()));
            got.extend(b.try_recv().ok().map(|m| m.into_value()));
        }
        got.sort_unstable();
        assert_eq!(got, [1, 2]);
        assert_eq!(topic.stats().groups[0].delivered, 3);
    });
}

#[test]
fn block_publisher_is_woken_when_the_reader_leaves() {
    model(|| {
        let topic = Topic::<u32>::new(topic_config(1)).unwrap();
        let sub = topic.subscribe(StartAt::Earliest).unwrap();
        topic.try_publish(0).unwrap();
        let publisher = {
            let topic = topic.clone();
            thread::spawn(move || block_on(topic.publish(1)).unwrap().offset)
        };
        drop(sub);
        assert_eq!(publisher.join().unwrap(), 1);
    });
}

#[test]
fn block_publisher_is_woken_when_a_group_member_receives() {
    model(|| {
        let topic = Topic::<u32>::new(topic_config(1)).unwrap();
        let mut member = topic.group("g", StartAt::Earliest).unwrap();
        topic.try_publish(0).unwrap();
        let publisher = {
            let topic = topic.clone();
            thread::spawn(move || block_on(topic.publish(1)).unwrap().offset)
        };
        let reader = thread::spawn(move || {
            let a = block_on(member.recv()).unwrap().into_value();
            let b = block_on(member.recv()).unwrap().into_value();
            (a, b)
        });
        assert_eq!(publisher.join().unwrap(), 1);
        assert_eq!(reader.join().unwrap(), (0, 1));
    });
}

#[test]
fn dropped_blocked_publisher_passes_its_wakeup_on() {
    model(|| {
        let topic = Topic::<u32>::new(topic_config(1)).unwrap();
        let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
        topic.try_publish(0).unwrap();
        // The first publisher parks first, so the freed slot is offered to it.
        let mut first = topic.publish(1);
        assert!(poll_once(&mut first).is_pending());
        let second = {
            let topic = topic.clone();
            thread::spawn(move || block_on(topic.publish(2)).unwrap().offset)
        };
        let reader = thread::spawn(move || {
            let v = sub.try_recv().unwrap().into_value();
            (v, sub)
        });
        drop(first);
        let (v, mut sub) = reader.join().unwrap();
        assert_eq!(v, 0);
        assert_eq!(second.join().unwrap(), 1);
        assert_eq!(
            sub.try_recv().unwrap().into_value(),
            2,
            "the dropped one published nothing"
        );
    });
}

#[test]
fn a_batch_wakes_as_many_members_as_it_has_messages() {
    model(|| {
        let topic = Topic::<u32>::new(topic_config(4)).unwrap();
        let members: Vec<_> = (0..2)
            .map(|_| topic.group("g", StartAt::Latest).unwrap())
            .collect();
        let readers: Vec<_> = members
            .into_iter()
            .map(|mut m| thread::spawn(move || block_on(m.recv()).unwrap().into_value()))
            .collect();
        topic.try_publish_batch(vec![1, 2]).unwrap();
        let mut got: Vec<u32> = readers.into_iter().map(|r| r.join().unwrap()).collect();
        got.sort_unstable();
        assert_eq!(got, [1, 2]);
    });
}

#[test]
fn a_subscriber_of_two_partitions_is_woken_by_either() {
    model(|| {
        let topic = Topic::<u32>::new(topic_config(2).partitions(2)).unwrap();
        let mut sub = topic.subscribe(StartAt::Latest).unwrap();
        let reader = thread::spawn(move || {
            let m = block_on(sub.recv()).unwrap();
            (m.partition(), m.into_value())
        });
        topic.try_publish_to(1, 4).unwrap();
        assert_eq!(reader.join().unwrap(), (1, 4));
    });
}

/// A receive that registered on an empty partition and then took a message from another
/// leaves no registration behind. Here `a` reads both partitions until `b` joins and takes
/// partition 1: if `a` registered there (its view still had both) after the join's
/// wake-up, a stale registration ahead of `b` would take the wake-up of the publish meant
/// for `b`, and `b` would sleep with a message waiting.
#[test]
fn a_receive_served_by_another_partition_leaves_no_registration_behind() {
    model(|| {
        let topic = Topic::<u32>::new(topic_config(4).partitions(2)).unwrap();
        let mut a = topic.group("g", StartAt::Earliest).unwrap();
        topic.try_publish_to(0, 10).unwrap();
        topic.try_publish_to(0, 11).unwrap();
        // Taken from partition 0: `a`'s next receive starts at partition 1.
        assert_eq!(a.try_recv().unwrap().into_value(), 10);
        let reader_a = thread::spawn(move || {
            let got = poll_once(&mut a.recv()).map(|r| r.map(|m| m.into_value()));
            (a, got)
        });
        let mut b = topic.group("g", StartAt::Earliest).unwrap();
        let reader_b = thread::spawn(move || {
            assert_eq!(b.assignment(), [1]);
            block_on(b.recv()).map(|m| m.into_value())
        });
        let (a, got) = reader_a.join().unwrap();
        assert_eq!(got, Poll::Ready(Ok(11)));
        topic.try_publish_to(1, 20).unwrap();
        assert_eq!(reader_b.join().unwrap(), Ok(20));
        drop(a);
    });
}

/// A member waiting on its own partition gains another, with a message in it, when a
/// member leaves: it is woken even if the leave's wake-up came between its look at the
/// assignment and its registration.
#[test]
fn a_waiting_member_is_woken_for_a_partition_a_leaver_hands_it() {
    model(|| {
        let topic = Topic::<u32>::new(topic_config(2).partitions(2)).unwrap();
        let a = topic.group("g", StartAt::Earliest).unwrap();
        let mut b = topic.group("g", StartAt::Earliest).unwrap();
        assert_eq!(b.assignment(), [1]);
        topic.try_publish_to(0, 10).unwrap();
        let reader = thread::spawn(move || {
            let m = block_on(b.recv()).unwrap();
            (m.partition(), m.into_value())
        });
        drop(a);
        assert_eq!(reader.join().unwrap(), (0, 10));
    });
}

/// [`a_waiting_member_is_woken_for_a_partition_a_leaver_hands_it`] for members of an
/// explicit-ack group.
#[test]
fn a_waiting_acked_member_is_woken_for_a_partition_a_leaver_hands_it() {
    model(|| {
        let (topic, config) = acked_two_partitions(2);
        let a = topic.group_acked("g", StartAt::Earliest, config()).unwrap();
        let mut b = topic.group_acked("g", StartAt::Earliest, config()).unwrap();
        assert_eq!(b.assignment(), [1]);
        topic.try_publish_to(0, 10).unwrap();
        let reader = thread::spawn(move || {
            let d = block_on(b.recv()).unwrap();
            let got = (d.partition(), *d.value());
            d.ack().unwrap();
            got
        });
        drop(a);
        assert_eq!(reader.join().unwrap(), (0, 10));
    });
}

#[test]
fn an_idle_member_is_woken_by_a_rebalance() {
    model(|| {
        let topic = Topic::<u32>::new(topic_config(2).partitions(2)).unwrap();
        let a = topic.group("g", StartAt::Latest).unwrap();
        let _b = topic.group("g", StartAt::Latest).unwrap();
        // Three members, two partitions: `c` has none until `a` leaves.
        let mut c = topic.group("g", StartAt::Latest).unwrap();
        let reader = thread::spawn(move || {
            let m = block_on(c.recv()).unwrap();
            (m.partition(), m.into_value())
        });
        let leaver = thread::spawn(move || drop(a));
        topic.try_publish_to(1, 8).unwrap();
        leaver.join().unwrap();
        // Members in join order are now [b, c]: partition 1 is `c`'s.
        assert_eq!(reader.join().unwrap(), (1, 8));
    });
}

// ----- explicit acknowledgements ----------------------------------------------------------

/// A timer that fires only when the model says time has passed: `fire` wakes everything
/// scheduled so far.
#[derive(Default)]
struct ManualTimer {
    wakers: loom::sync::Mutex<Vec<Waker>>,
}

impl Timer for ManualTimer {
    fn wake_after(&self, _delay: Duration, waker: Waker) {
        self.wakers.lock().unwrap().push(waker);
    }
}

impl ManualTimer {
    fn fire(&self) {
        let due = core::mem::take(&mut *self.wakers.lock().unwrap());
        due.into_iter().for_each(Waker::wake);
    }
}

/// [`a_receive_served_by_another_partition_leaves_no_registration_behind`] for members of
/// an explicit-ack group.
#[test]
fn an_acked_receive_served_by_another_partition_leaves_no_registration_behind() {
    model(|| {
        let (topic, config) = acked_two_partitions(4);
        let mut a = topic.group_acked("g", StartAt::Earliest, config()).unwrap();
        topic.try_publish_to(0, 10).unwrap();
        topic.try_publish_to(0, 11).unwrap();
        a.try_recv().unwrap().ack().unwrap();
        let reader_a = thread::spawn(move || {
            let got = poll_once(&mut a.recv()).map(|r| {
                r.map(|d| {
                    let v = *d.value();
                    d.ack().unwrap();
                    v
                })
            });
            (a, got)
        });
        let mut b = topic.group_acked("g", StartAt::Earliest, config()).unwrap();
        let reader_b = thread::spawn(move || {
            assert_eq!(b.assignment(), [1]);
            let d = block_on(b.recv()).unwrap();
            let v = *d.value();
            d.ack().unwrap();
            v
        });
        let (a, got) = reader_a.join().unwrap();
        assert_eq!(got, Poll::Ready(Ok(11)));
        topic.try_publish_to(1, 20).unwrap();
        assert_eq!(reader_b.join().unwrap(), 20);
        drop(a);
    });
}

/// A topic of two partitions with `capacity` slots each on a manual clock, and a maker of
/// explicit-ack configurations whose leases (60 s) never run out in a model.
fn acked_two_partitions(capacity: usize) -> (Topic<u32>, impl Fn() -> AckConfig<u32>) {
    let clock = std::sync::Arc::new(ManualClock::new());
    let topic =
        Topic::<u32>::new(topic_config(capacity).partitions(2).clock(clock.clone())).unwrap();
    let config = move || {
        AckConfig::new()
            .ack_wait(Duration::from_secs(60))
            .clock(clock.clone())
            .timer(std::sync::Arc::new(ManualTimer::default()))
    };
    (topic, config)
}

/// A one-partition topic on a manual clock, and an explicit-ack configuration with
/// 10 ms leases on the same clock and a manual timer.
fn acked(
    max_in_flight: usize,
) -> (
    std::sync::Arc<ManualClock>,
    std::sync::Arc<ManualTimer>,
    Topic<u32>,
    AckConfig<u32>,
) {
    let clock = std::sync::Arc::new(ManualClock::new());
    let timer = std::sync::Arc::new(ManualTimer::default());
    let topic = Topic::new(topic_config(4).clock(clock.clone())).unwrap();
    let config = AckConfig::new()
        .ack_wait(Duration::from_millis(10))
        .max_in_flight(max_in_flight)
        .clock(clock.clone())
        .timer(timer.clone());
    (clock, timer, topic, config)
}

#[test]
fn a_dropped_delivery_goes_back_to_a_waiting_member() {
    model(|| {
        let (_clock, _timer, topic, config) = acked(8);
        let mut a = topic.group_acked("g", StartAt::Earliest, config).unwrap();
        let mut b = topic
            .group_acked("g", StartAt::Earliest, AckConfig::new())
            .unwrap();
        topic.try_publish(5).unwrap();
        let leased = a.try_recv().unwrap();
        let reader = thread::spawn(move || {
            let d = block_on(b.recv()).unwrap();
            let got = (d.offset(), *d.value(), d.deliveries());
            d.ack().unwrap();
            got
        });
        // Dropped without an ack: the message returns to the group at once.
        drop(leased);
        assert_eq!(reader.join().unwrap(), (0, 5, 2));
        assert_eq!(a.try_recv().unwrap_err(), TryRecvError::Empty);
    });
}

#[test]
fn an_ack_under_max_in_flight_wakes_a_waiting_member() {
    model(|| {
        let (_clock, _timer, topic, config) = acked(1);
        let mut a = topic.group_acked("g", StartAt::Earliest, config).unwrap();
        let mut b = topic
            .group_acked("g", StartAt::Earliest, AckConfig::new())
            .unwrap();
        topic.try_publish(0).unwrap();
        topic.try_publish(1).unwrap();
        let first = a.try_recv().unwrap();
        let reader = thread::spawn(move || {
            let d = block_on(b.recv()).unwrap();
            let got = (d.offset(), d.deliveries());
            d.ack().unwrap();
            got
        });
        // One in flight: `b` waits until this ack opens the slot.
        first.ack().unwrap();
        assert_eq!(reader.join().unwrap(), (1, 1));
        assert_eq!(a.committed(0).unwrap(), 2);
    });
}

#[test]
fn an_expired_lease_wakes_a_waiting_member_through_the_timer() {
    model(|| {
        let (clock, timer, topic, config) = acked(8);
        let mut a = topic.group_acked("g", StartAt::Earliest, config).unwrap();
        let mut b = topic
            .group_acked("g", StartAt::Earliest, AckConfig::new())
            .unwrap();
        topic.try_publish(5).unwrap();
        let leased = a.try_recv().unwrap();
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let reader = {
            let done = done.clone();
            thread::spawn(move || {
                let d = block_on(b.recv()).unwrap();
                done.store(true, Ordering::Release);
                let got = (d.offset(), d.deliveries());
                d.ack().unwrap();
                got
            })
        };
        // Time passes, and the timer fires what is due, until the member has its message.
        while !done.load(Ordering::Acquire) {
            clock.advance(Duration::from_millis(20));
            timer.fire();
            thread::yield_now();
        }
        assert_eq!(reader.join().unwrap(), (0, 2));
        assert_eq!(leased.ack(), Err(AckError::LeaseExpired));
    });
}

#[test]
fn an_ack_racing_lease_expiry_either_commits_or_redelivers() {
    model(|| {
        let (clock, timer, topic, config) = acked(8);
        let mut a = topic.group_acked("g", StartAt::Earliest, config).unwrap();
        let mut b = topic
            .group_acked("g", StartAt::Earliest, AckConfig::new())
            .unwrap();
        topic.try_publish(5).unwrap();
        let leased = a.try_recv().unwrap();
        let reader = thread::spawn(move || {
            block_on(b.recv()).map(|d| {
                let got = (d.offset(), d.deliveries());
                d.ack().unwrap();
                got
            })
        });
        let ticker = thread::spawn(move || {
            clock.advance(Duration::from_millis(20));
            timer.fire();
        });
        let acked = leased.ack();
        ticker.join().unwrap();
        topic.close();
        // A successful ack is final; a refused one means the message went back.
        match acked {
            Ok(()) => assert_eq!(reader.join().unwrap(), Err(RecvError::Closed)),
            Err(e) => {
                assert_eq!(e, AckError::LeaseExpired);
                assert_eq!(reader.join().unwrap(), Ok((0, 2)));
            }
        }
    });
}

// ----- parked batches and single publishers (from review, 2026-11-30) ---------------

/// A full log of 3 (messages 1 to 3) and a subscriber that took 0 and fetched 1 and 2
/// ahead, to hand over without the lock.
fn full_log_read_ahead() -> (Topic<u32>, memq_core::Subscriber<u32>) {
    let topic = Topic::<u32>::new(topic_config(3)).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    for v in 0..3 {
        topic.try_publish(v).unwrap();
    }
    assert_eq!(sub.try_recv().unwrap().into_value(), 0);
    topic.try_publish(3).unwrap();
    (topic, sub)
}

/// A read-ahead subscriber hands over 1 and 2 without the lock while a batch publisher
/// (2 slots) and a single publisher park on the full log of 3, in either order. Every
/// message must arrive; a publisher left parked shows up as a loom deadlock.
#[test]
fn a_batch_and_a_single_parked_while_a_reader_hands_over() {
    model(|| {
        let (topic, mut sub) = full_log_read_ahead();
        let single = {
            let topic = topic.clone();
            thread::spawn(move || block_on(topic.publish(10)).unwrap().offset)
        };
        let batch = {
            let topic = topic.clone();
            thread::spawn(move || block_on(topic.publish_batch(vec![20, 21])).unwrap().offset)
        };
        let mut got = Vec::new();
        for _ in 0..6 {
            got.push(block_on(sub.recv()).unwrap().into_value());
        }
        single.join().unwrap();
        batch.join().unwrap();
        got.sort_unstable();
        assert_eq!(got, [1, 2, 3, 10, 20, 21]);
    });
}

/// A batch of 2 parked first (stepped by hand) is dropped while a single publisher parks
/// behind it and the subscriber hands over without the lock: the cancel stores the wake
/// position of the single (lower), and the single must still be woken.
#[test]
fn a_cancelled_batch_lets_the_single_behind_it_on() {
    model(|| {
        let (topic, mut sub) = full_log_read_ahead();
        let mut batch = topic.publish_batch(vec![20, 21]);
        assert!(poll_once(&mut batch).is_pending());
        let single = {
            let topic = topic.clone();
            thread::spawn(move || block_on(topic.publish(10)).unwrap().offset)
        };
        let reader = thread::spawn(move || {
            let mut got = Vec::new();
            for _ in 0..4 {
                got.push(block_on(sub.recv()).unwrap().into_value());
            }
            got
        });
        drop(batch);
        single.join().unwrap();
        let got = reader.join().unwrap();
        assert_eq!(got, [1, 2, 3, 10]);
    });
}

/// A woken single publisher (never polled again) is dropped while a batch of 2 waits
/// behind it and the subscriber hands over without the lock: the cancel hands the turn
/// to the batch once its room is free, and re-arms; the batch must get on.
#[test]
fn a_dropped_woken_single_hands_its_turn_to_a_batch() {
    model(|| {
        let (topic, mut sub) = full_log_read_ahead();
        let mut single = topic.publish(10);
        assert!(poll_once(&mut single).is_pending());
        let batch = {
            let topic = topic.clone();
            thread::spawn(move || block_on(topic.publish_batch(vec![20, 21])).unwrap().offset)
        };
        let reader = thread::spawn(move || {
            let mut got = Vec::new();
            for _ in 0..5 {
                got.push(block_on(sub.recv()).unwrap().into_value());
            }
            got
        });
        drop(single);
        batch.join().unwrap();
        assert_eq!(reader.join().unwrap(), [1, 2, 3, 20, 21]);
    });
}
