//! Topics on the lock-free ring engine (`TopicConfig::ring_engine(true)`, for a topic whose
//! settings allow it; the locked log is the default): publishes, subscribers, consumer
//! groups and explicit-ack groups on it keep memq's semantics, with every message counted.
//! memq-core's whole suite runs on both engines (stage 30 of `scripts/check`, the second
//! time built with `--cfg memq_ring_default`, which puts every eligible topic on the ring).
#![cfg(target_has_atomic = "64")]

extern crate alloc;

use alloc::sync::Arc;
use alloc::task::Wake;
use core::future::Future;
use core::pin::pin;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use core::task::{Context, Poll, Waker};
use std::thread;

use memq_core::{
    AckConfig, Error, Overflow, PublishError, RecvError, StartAt, Topic, TopicConfig, TryRecvError,
};

#[derive(Default)]
struct CountWaker(AtomicUsize);

impl Wake for CountWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counting_waker() -> (Arc<CountWaker>, Waker) {
    let c = Arc::new(CountWaker::default());
    (c.clone(), Waker::from(c))
}

fn woken(c: &CountWaker) -> usize {
    c.0.load(Ordering::SeqCst)
}

fn ring(capacity: usize) -> TopicConfig {
    TopicConfig::new(capacity).ring_engine(true)
}

/// Two publishers and two subscribers on threads, through a ring of 8 that holds the
/// publishers back (`Block`): each subscriber receives every message once, each
/// publisher's in its order, and the counters add up.
#[test]
fn a_topic_is_on_the_ring_only_when_it_asks_and_its_settings_allow_it() {
    let on = |c: TopicConfig| Topic::<u32>::new(c).unwrap().is_on_ring();
    // The default is the locked log (unless built with `--cfg memq_ring_default`).
    assert_eq!(on(TopicConfig::new(4)), cfg!(memq_ring_default));
    assert!(!on(TopicConfig::new(4).ring_engine(false)));
    assert!(on(ring(4)));
    assert!(on(ring(4).partitions(3).overflow(Overflow::DropOldest)));
    assert!(on(ring(4).overflow(Overflow::Reject)));
    assert!(on(ring(4).next_offsets(alloc::vec![1 << 40])));
    // Settings the ring cannot keep leave the topic on the locked log.
    let clock = Arc::new(memq_core::ManualClock::new());
    assert!(!on(ring(4).clock(clock.clone())));
    assert!(!on(ring(4)
        .clock(clock)
        .ttl(core::time::Duration::from_secs(1))));
    assert!(!on(ring(4).release_on_read(true)));
    assert!(!on(ring(4).next_offsets(alloc::vec![u64::MAX / 2])));
}

#[cfg(feature = "std")]
#[test]
fn threads_through_a_small_ring_count_every_message() {
    const EACH: u64 = 20_000;
    let topic = Topic::<(usize, u64)>::new(ring(8)).unwrap();
    let subs: Vec<_> = (0..2)
        .map(|_| {
            let mut s = topic.subscribe(StartAt::Earliest).unwrap();
            thread::spawn(move || {
                let mut next = [0u64; 2];
                let mut offset = 0;
                loop {
                    match s.recv_blocking() {
                        Ok(m) => {
                            assert_eq!(m.offset(), offset);
                            offset += 1;
                            let (who, n) = *m.value();
                            assert_eq!(n, next[who], "publisher {who} out of order");
                            next[who] += 1;
                        }
                        Err(RecvError::Closed) => return next,
                        Err(e) => panic!("{e:?}"),
                    }
                }
            })
        })
        .collect();
    let pubs: Vec<_> = (0..2)
        .map(|who| {
            let topic = topic.clone();
            thread::spawn(move || {
                for n in 0..EACH {
                    topic.publish_blocking((who, n)).unwrap();
                }
            })
        })
        .collect();
    for p in pubs {
        p.join().unwrap();
    }
    topic.close();
    for s in subs {
        assert_eq!(s.join().unwrap(), [EACH, EACH]);
    }
    let stats = topic.stats();
    assert_eq!(stats.published, 2 * EACH);
    assert_eq!(stats.delivered, 4 * EACH);
    assert_eq!((stats.lagged, stats.depth), (0, 8));
    assert_eq!(stats.evicted, 2 * EACH - 8);
}

/// A publisher parked on a full ring is woken when the subscriber reads, and gets on;
/// a subscriber parked on an empty ring is woken by a publish, and by a close.
#[test]
fn parked_publishers_and_subscribers_are_woken() {
    let topic = Topic::new(ring(2)).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish(0u32).unwrap();
    topic.try_publish(1).unwrap();
    let (pc, pw) = counting_waker();
    {
        let mut publish = pin!(topic.publish(2));
        let mut cx = Context::from_waker(&pw);
        assert!(publish.as_mut().poll(&mut cx).is_pending());
        assert_eq!(topic.stats().partitions[0].waiting_publishers, 1);
        assert_eq!(woken(&pc), 0);
        assert_eq!(sub.try_recv().unwrap().into_value(), 0);
        assert_eq!(woken(&pc), 1, "the read woke the publisher");
        match publish.as_mut().poll(&mut cx) {
            Poll::Ready(Ok(r)) => assert_eq!(r.offset, 2),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(topic.stats().partitions[0].waiting_publishers, 0);
    for n in 1..3 {
        assert_eq!(sub.try_recv().unwrap().into_value(), n);
    }

    let (sc, sw) = counting_waker();
    let mut cx = Context::from_waker(&sw);
    {
        let mut recv = pin!(sub.recv());
        assert!(recv.as_mut().poll(&mut cx).is_pending());
        topic.try_publish(3).unwrap();
        assert_eq!(woken(&sc), 1, "the publish woke the subscriber");
        match recv.as_mut().poll(&mut cx) {
            Poll::Ready(Ok(m)) => assert_eq!((m.offset(), m.into_value()), (3, 3)),
            other => panic!("{other:?}"),
        }
    }
    let mut recv = pin!(sub.recv());
    assert!(recv.as_mut().poll(&mut cx).is_pending());
    topic.close();
    assert_eq!(woken(&sc), 2, "the close woke the subscriber");
    assert!(matches!(
        recv.as_mut().poll(&mut cx),
        Poll::Ready(Err(RecvError::Closed))
    ));
}

/// A publish future dropped while parked leaves the wait list; a parked publisher is
/// woken by a close and told the topic is closed; a batch is all or nothing.
#[test]
fn dropped_closed_and_batch_publishes() {
    let topic = Topic::new(ring(2)).unwrap();
    let _sub = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish_batch(vec![0u8, 1]).unwrap();
    let (_c, w) = counting_waker();
    let mut cx = Context::from_waker(&w);
    {
        let mut publish = pin!(topic.publish(2));
        assert!(publish.as_mut().poll(&mut cx).is_pending());
    }
    assert_eq!(topic.stats().partitions[0].waiting_publishers, 0);
    let err = topic.try_publish_batch(vec![2, 3]).unwrap_err();
    assert!(matches!(&err, PublishError::Full(v) if *v == [2, 3]));
    let err = topic.try_publish_batch(vec![2, 3, 4]).unwrap_err();
    assert!(
        err.is_full(),
        "larger than the capacity: it could never fit"
    );
    assert_eq!(topic.try_publish_batch(Vec::new()).unwrap().count, 0);

    let (pc, pw) = counting_waker();
    let mut publish = pin!(topic.publish(9));
    assert!(publish
        .as_mut()
        .poll(&mut Context::from_waker(&pw))
        .is_pending());
    topic.close();
    assert_eq!(woken(&pc), 1);
    assert!(matches!(
        publish.as_mut().poll(&mut Context::from_waker(&pw)),
        Poll::Ready(Err(PublishError::Closed(9)))
    ));
    assert!(topic.try_publish_batch(Vec::new()).unwrap_err().is_closed());
    assert!(topic
        .try_publish_batch(vec![1, 2, 3])
        .unwrap_err()
        .is_closed());
}

/// `DropOldest` on the ring: a slow subscriber is told what it missed, once, and the
/// counters say so; `Reject` refuses at once while a subscriber holds every slot.
#[test]
fn drop_oldest_and_reject() {
    let topic = Topic::new(ring(2).overflow(Overflow::DropOldest)).unwrap();
    let mut slow = topic.subscribe(StartAt::Earliest).unwrap();
    for n in 0..5u32 {
        topic.try_publish(n).unwrap();
    }
    assert_eq!(slow.lag(), 5);
    assert_eq!(slow.try_recv().unwrap_err(), TryRecvError::Lagged(3));
    let mut got = Vec::new();
    assert_eq!(slow.try_recv_many(&mut got, 10).unwrap(), 2);
    assert_eq!(got.iter().map(|m| *m.value()).collect::<Vec<_>>(), [3, 4]);
    let stats = topic.stats();
    assert_eq!((stats.published, stats.evicted, stats.lagged), (5, 3, 3));
    assert_eq!((stats.delivered, stats.depth), (2, 2));

    let topic = Topic::new(ring(2).overflow(Overflow::Reject)).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish(0u32).unwrap();
    topic.try_publish(1).unwrap();
    assert!(futures_executor::block_on(topic.publish(2))
        .unwrap_err()
        .is_full());
    assert_eq!(sub.try_recv().unwrap().into_value(), 0);
    topic.try_publish(2).unwrap();
}

/// A subscriber of two partitions parked on both is woken by a publish to either, and
/// the registration it did not use is withdrawn: a later publish there wakes nobody.
#[test]
fn a_subscriber_of_two_partitions_waits_on_both() {
    let topic = Topic::new(ring(4).partitions(2)).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    let (c, w) = counting_waker();
    let mut cx = Context::from_waker(&w);
    {
        let mut recv = pin!(sub.recv());
        assert!(recv.as_mut().poll(&mut cx).is_pending());
        topic.try_publish_to(1, 7u8).unwrap();
        assert_eq!(woken(&c), 1);
        match recv.as_mut().poll(&mut cx) {
            Poll::Ready(Ok(m)) => assert_eq!((m.partition(), m.into_value()), (1, 7)),
            other => panic!("{other:?}"),
        }
    }
    topic.try_publish_to(0, 8).unwrap();
    assert_eq!(woken(&c), 1, "a finished wait is not woken again");
    assert_eq!(sub.try_recv().unwrap().into_value(), 8);
    assert_eq!(sub.position(0), Some(1));
    sub.seek_partition(0, 0).unwrap();
    assert_eq!(sub.try_recv().unwrap().into_value(), 8);
    assert!(matches!(
        sub.seek_partition(0, 5),
        Err(Error::OffsetOutOfRange {
            offset: 5,
            partition: 0,
            high: 1
        })
    ));
}

/// Explicit-ack groups on the ring: an unacknowledged message holds `Block` publishers
/// back (the group's hold on the ring) until it is acknowledged; a nacked one comes back;
/// the committed position follows the lowest unsettled offset; stats count it all.
#[cfg(feature = "std")]
#[test]
fn explicit_ack_groups_hold_the_ring_until_acknowledged() {
    let topic = Topic::<u8>::new(ring(2)).unwrap();
    let mut m = topic
        .group_acked("g", StartAt::Earliest, AckConfig::new())
        .unwrap();
    topic.try_publish(1).unwrap();
    topic.try_publish(2).unwrap();
    let first = m.try_recv().unwrap();
    let second = m.try_recv().unwrap();
    assert_eq!((*first.value(), *second.value()), (1, 2));
    assert!(matches!(topic.try_publish(3), Err(PublishError::Full(3))));
    second.ack().unwrap();
    // Offset 0 is still unacknowledged: the ring stays full.
    assert!(matches!(topic.try_publish(3), Err(PublishError::Full(3))));
    assert_eq!(m.committed(0).unwrap(), 0);
    first.nack().unwrap();
    let again = m.try_recv().unwrap();
    assert_eq!((*again.value(), again.deliveries()), (1, 2));
    again.ack().unwrap();
    assert_eq!(m.committed(0).unwrap(), 2);
    topic.try_publish(3).unwrap();
    assert_eq!(*m.try_recv().unwrap().value(), 3);
    let stats = topic.stats();
    let g = &stats.groups[0];
    assert_eq!(
        (g.delivered, g.acked, g.redelivered, g.in_flight),
        (4, 2, 1, 1)
    );
    assert_eq!(stats.delivered, 4);
    // Offset 2 unacknowledged and the ring full: deleting the group lets go of it.
    topic.try_publish(4).unwrap();
    assert!(matches!(topic.try_publish(5), Err(PublishError::Full(5))));
    topic.delete_group("g").unwrap();
    topic.try_publish(5).unwrap();
    assert!(matches!(m.try_recv(), Err(TryRecvError::Closed)));
}

/// Members of an explicit-ack group on a ring, on threads, with publishers that wait
/// for room: every message is acknowledged exactly once, none is lost, and a waiting
/// member is woken by a ring publish (its wait is on the partition's lock).
#[cfg(feature = "std")]
#[test]
fn explicit_ack_members_on_threads_ack_every_message_once() {
    const EACH: u64 = 5_000;
    let topic = Topic::<u64>::new(ring(8)).unwrap();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let mut m = topic
                .group_acked("g", StartAt::Earliest, AckConfig::new())
                .unwrap();
            thread::spawn(move || {
                let mut got = Vec::new();
                loop {
                    match m.recv_blocking() {
                        Ok(d) => {
                            got.push(*d.value());
                            d.ack().unwrap();
                        }
                        Err(RecvError::Closed) => return got,
                        Err(e) => panic!("{e:?}"),
                    }
                }
            })
        })
        .collect();
    let publishers: Vec<_> = (0..2)
        .map(|p| {
            let t = topic.clone();
            thread::spawn(move || {
                for i in 0..EACH {
                    t.publish_blocking(p * EACH + i).unwrap();
                }
            })
        })
        .collect();
    for p in publishers {
        p.join().unwrap();
    }
    topic.close();
    let mut all: Vec<u64> = readers
        .into_iter()
        .flat_map(|r| r.join().unwrap())
        .collect();
    all.sort_unstable();
    assert_eq!(all, (0..2 * EACH).collect::<Vec<_>>());
    let g = &topic.stats().groups[0];
    assert_eq!((g.acked, g.in_flight, g.lag), (2 * EACH, 0, 0));
}

/// Members of one group on one ring partition, on threads, compete for every message of
/// several publishers: each message reaches exactly one member, none is lost, a member
/// that waits is woken, and the group's counts add up.
#[cfg(feature = "std")]
#[test]
fn group_members_on_threads_share_every_message_exactly_once() {
    const PUBLISHERS: u64 = 2;
    const EACH: u64 = 20_000;
    const MEMBERS: usize = 3;
    let topic = Topic::<u64>::new(ring(8)).unwrap();
    let members: Vec<_> = (0..MEMBERS)
        .map(|_| topic.group("g", StartAt::Earliest).unwrap())
        .collect();
    let readers: Vec<_> = members
        .into_iter()
        .map(|mut m| {
            thread::spawn(move || {
                let mut got = Vec::new();
                loop {
                    match m.recv_blocking() {
                        Ok(msg) => got.push(msg.into_value()),
                        Err(RecvError::Closed) => return got,
                        Err(e) => panic!("{e:?}"),
                    }
                }
            })
        })
        .collect();
    let publishers: Vec<_> = (0..PUBLISHERS)
        .map(|p| {
            let t = topic.clone();
            thread::spawn(move || {
                for i in 0..EACH {
                    t.publish_blocking(p * EACH + i).unwrap();
                }
            })
        })
        .collect();
    for p in publishers {
        p.join().unwrap();
    }
    topic.close();
    let mut all: Vec<u64> = readers
        .into_iter()
        .flat_map(|r| r.join().unwrap())
        .collect();
    all.sort_unstable();
    assert_eq!(all, (0..PUBLISHERS * EACH).collect::<Vec<_>>());
    let stats = topic.stats();
    assert_eq!(stats.groups[0].delivered, PUBLISHERS * EACH);
    assert_eq!(stats.groups[0].committed, [PUBLISHERS * EACH]);
    assert_eq!(stats.groups[0].lag, 0);
    assert_eq!(stats.delivered, PUBLISHERS * EACH);
}

/// A partitioned ring topic: each member reads its partitions in order; a member that
/// joins later takes partitions over where the group stopped, and one that leaves hands
/// them back; a deleted group's members end `Closed` and hold no publisher back.
#[test]
fn group_partitions_rebalance_and_deletion_on_the_ring() {
    let topic = Topic::<u64>::new(ring(4).partitions(2)).unwrap();
    let mut first = topic.group("g", StartAt::Earliest).unwrap();
    for k in 0..4 {
        topic.try_publish_to(k % 2, u64::from(k)).unwrap();
    }
    let m = first.try_recv().unwrap();
    assert_eq!((m.partition(), m.offset()), (0, 0));
    let mut second = topic.group("g", StartAt::Earliest).unwrap();
    assert_eq!(
        (first.assignment(), second.assignment()),
        (vec![0], vec![1])
    );
    // The second takes partition 1 from its start (nothing of it was taken yet).
    let m = second.try_recv().unwrap();
    assert_eq!((m.partition(), m.offset(), m.into_value()), (1, 0, 1));
    let m = first.try_recv().unwrap();
    assert_eq!((m.partition(), m.offset(), m.into_value()), (0, 1, 2));
    assert_eq!(first.try_recv().unwrap_err(), TryRecvError::Empty);
    drop(second);
    // Partition 1 is the first's again, from where the group stopped.
    let m = first.try_recv().unwrap();
    assert_eq!((m.partition(), m.offset(), m.into_value()), (1, 1, 3));
    assert_eq!(first.committed(0).unwrap(), 2);
    assert_eq!(first.committed(1).unwrap(), 2);
    // A full partition holds publishers back for the group, until it is deleted.
    for k in 0..4 {
        topic.try_publish_to(0, 10 + k).unwrap();
    }
    assert!(matches!(
        topic.try_publish_to(0, 99),
        Err(PublishError::Full(99))
    ));
    topic.delete_group("g").unwrap();
    topic.try_publish_to(0, 99).unwrap();
    assert_eq!(first.try_recv().unwrap_err(), TryRecvError::Closed);
    assert!(first.assignment().is_empty());
    assert!(matches!(first.committed(0), Err(Error::UnknownGroup(_))));
}

/// A group's member parked on an empty ring partition is woken by a publish; one woken
/// for a message it no longer waits for (its future dropped) passes the wake-up on to
/// another member, which then gets the message.
#[test]
fn a_woken_member_that_stops_waiting_passes_the_wake_up_on() {
    let topic = Topic::<u8>::new(ring(4)).unwrap();
    let mut a = topic.group("g", StartAt::Earliest).unwrap();
    let mut b = topic.group("g", StartAt::Earliest).unwrap();
    let (wa, wb) = (
        Arc::new(CountWaker::default()),
        Arc::new(CountWaker::default()),
    );
    let (waker_a, waker_b) = (Waker::from(wa.clone()), Waker::from(wb.clone()));
    {
        // Boxed, so that `drop` ends the future (a pinned reference would not).
        let mut fa = Box::pin(a.recv());
        assert!(fa
            .as_mut()
            .poll(&mut Context::from_waker(&waker_a))
            .is_pending());
        let mut fb = Box::pin(b.recv());
        assert!(fb
            .as_mut()
            .poll(&mut Context::from_waker(&waker_b))
            .is_pending());
        topic.try_publish(7).unwrap();
        // One message: one member is woken.
        assert_eq!(wa.0.load(Ordering::SeqCst) + wb.0.load(Ordering::SeqCst), 1);
        if wa.0.load(Ordering::SeqCst) == 1 {
            // `a` was woken; its future goes without taking the message.
            drop(fa);
            assert_eq!(wb.0.load(Ordering::SeqCst), 1, "the wake-up went on to b");
            match fb.as_mut().poll(&mut Context::from_waker(&waker_b)) {
                Poll::Ready(Ok(m)) => assert_eq!(m.into_value(), 7),
                other => panic!("{other:?}"),
            }
        } else {
            drop(fb);
            assert_eq!(wa.0.load(Ordering::SeqCst), 1, "the wake-up went on to a");
            match fa.as_mut().poll(&mut Context::from_waker(&waker_a)) {
                Poll::Ready(Ok(m)) => assert_eq!(m.into_value(), 7),
                other => panic!("{other:?}"),
            }
        }
    }
    assert_eq!(topic.stats().groups[0].delivered, 1);
}

/// `recv_if` on the ring: a declined message stays the group's next, for either member,
/// exactly once; and a group that starts at an offset already gone is told what it
/// missed, once, before any message.
#[test]
fn a_declined_message_and_a_missed_start_on_the_ring() {
    let topic = Topic::<u8>::new(ring(2).overflow(Overflow::DropOldest)).unwrap();
    for v in 0..4 {
        topic.try_publish(v).unwrap();
    }
    let mut a = topic.group("g", StartAt::Offset(0)).unwrap();
    let mut b = topic.group("g", StartAt::Offset(0)).unwrap();
    assert_eq!(a.committed(0).unwrap(), 0);
    assert_eq!(b.try_recv().unwrap_err(), TryRecvError::Lagged(2));
    assert_eq!(a.committed(0).unwrap(), 2);
    assert_eq!(
        a.try_recv_if(|v| *v != 2).unwrap_err(),
        memq_core::TryRecvIfError::Declined
    );
    assert_eq!(b.try_recv().unwrap().into_value(), 2);
    assert_eq!(a.try_recv_if(|v| *v == 3).unwrap().into_value(), 3);
    assert_eq!(a.try_recv().unwrap_err(), TryRecvError::Empty);
    let stats = topic.stats();
    assert_eq!((stats.groups[0].delivered, stats.groups[0].lagged), (2, 2));
}

/// P1 (a batch of 2) and P2 (one message) park on a full topic of 2; the subscriber frees
/// both slots, which wakes P1 (the room is promised to it) but not P2 (behind it); then
/// the topic closes, with P1 not polled again (a task busy elsewhere). Returns how often
/// the close woke P2, and P2's poll after it.
fn close_behind_a_woken_batch(
    config: TopicConfig,
) -> (usize, Poll<Result<memq_core::Receipt, PublishError<u32>>>) {
    let topic = Topic::new(config).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish(0u32).unwrap();
    topic.try_publish(1).unwrap();
    let (c1, w1) = counting_waker();
    let (c2, w2) = counting_waker();
    let mut p1 = pin!(topic.publish_batch(vec![2, 3]));
    assert!(p1.as_mut().poll(&mut Context::from_waker(&w1)).is_pending());
    let mut p2 = pin!(topic.publish(4));
    assert!(p2.as_mut().poll(&mut Context::from_waker(&w2)).is_pending());
    assert_eq!(sub.try_recv().unwrap().into_value(), 0);
    assert_eq!(sub.try_recv().unwrap().into_value(), 1);
    assert_eq!(
        (woken(&c1), woken(&c2)),
        (1, 0),
        "P1's room is free, not P2's"
    );
    topic.close();
    let woke = woken(&c2);
    (woke, p2.as_mut().poll(&mut Context::from_waker(&w2)))
}

/// A close wakes a publisher parked behind one woken before it, and that publisher is
/// told the topic is closed, on both engines (found by review: on the ring the close
/// woke nobody, the ring's wake position being cleared, and the publisher, polled, stayed
/// parked behind the room promised to the other).
#[test]
fn a_close_reaches_a_publisher_behind_a_woken_batch() {
    for config in [TopicConfig::new(2), ring(2)] {
        let (woke, polled) = close_behind_a_woken_batch(config);
        assert!(woke >= 1, "the close did not wake it");
        assert!(
            matches!(polled, Poll::Ready(Err(PublishError::Closed(4)))),
            "{polled:?}"
        );
    }
}

/// A batch receive takes a message from partition 0, then meets a gap in partition 2:
/// the gap is reported by the next receive, and until then the position, the lag and
/// the counters are those before it, on both engines alike (found by review).
#[test]
fn a_gap_met_by_a_batch_shows_when_it_is_reported() {
    let gap_mid_batch = |config: TopicConfig| {
        let topic = Topic::new(config.partitions(3).overflow(Overflow::DropOldest)).unwrap();
        let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
        topic.try_publish_to(0, 100u32).unwrap();
        for n in 0..5 {
            topic.try_publish_to(2, n).unwrap();
        }
        let mut buf = Vec::new();
        assert_eq!(sub.try_recv_many(&mut buf, 10).unwrap(), 1);
        let before = (sub.position(2), sub.lag(), topic.stats().lagged);
        assert_eq!(
            sub.try_recv_many(&mut buf, 10),
            Err(TryRecvError::Lagged(3))
        );
        let after = (sub.position(2), sub.lag(), topic.stats().lagged);
        (before, after)
    };
    let locked = gap_mid_batch(TopicConfig::new(2));
    assert_eq!(locked, ((Some(0), 5, 0), (Some(3), 2, 3)));
    assert_eq!(gap_mid_batch(ring(2)), locked);
}

/// A batch receive over two partitions with one message each takes both, on both
/// engines (found by review: the round moved its start as partitions yielded, visited
/// the first again and skipped the last).
#[test]
fn a_batch_receive_visits_every_partition_once() {
    for config in [TopicConfig::new(4), ring(4)] {
        let topic = Topic::new(config.partitions(2)).unwrap();
        let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
        topic.try_publish_to(0, 1u32).unwrap();
        topic.try_publish_to(1, 2u32).unwrap();
        let mut buf = Vec::new();
        assert_eq!(sub.try_recv_many(&mut buf, 10).unwrap(), 2);
    }
}

/// Stats of a ring partition taken while three publishers overwrite a ring of one agree
/// with each other: one message held, every other one evicted (found by review: two
/// reads of the end gave an empty or, in principle, underflowing depth).
#[test]
fn ring_stats_agree_with_themselves_under_publishers() {
    let topic = Topic::<u64>::new(ring(1)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let pubs: Vec<_> = (0..3)
        .map(|_| {
            let (topic, stop) = (topic.clone(), stop.clone());
            thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    topic.try_publish(n).unwrap();
                    n += 1;
                }
            })
        })
        .collect();
    for _ in 0..20_000 {
        let p = &topic.stats().partitions[0];
        assert!(p.published == 0 || p.depth == 1, "{p:?}");
        assert_eq!(p.evicted + p.depth, p.published, "{p:?}");
    }
    stop.store(true, Ordering::Relaxed);
    for p in pubs {
        p.join().unwrap();
    }
}

/// On a `DropOldest` ring, a gap known at a start (or a seek) and what writers evicted
/// after it are one report, as on the locked log, where the position stays before the
/// gap until the reader is told: for a group's member and for a subscriber.
#[test]
fn a_missed_start_and_what_was_evicted_since_are_one_gap() {
    let topic = Topic::<u8>::new(ring(2).overflow(Overflow::DropOldest)).unwrap();
    for v in 0..4 {
        topic.try_publish(v).unwrap();
    }
    let mut member = topic.group("g", StartAt::Offset(0)).unwrap();
    let mut sub = topic.subscribe(StartAt::Offset(0)).unwrap();
    // Offsets 2 and 3 are evicted too before either reads.
    topic.try_publish(4).unwrap();
    topic.try_publish(5).unwrap();
    assert_eq!(member.try_recv().unwrap_err(), TryRecvError::Lagged(4));
    assert_eq!(member.try_recv().unwrap().into_value(), 4);
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Lagged(4));
    assert_eq!(sub.try_recv().unwrap().into_value(), 4);
    let stats = topic.stats();
    assert_eq!(stats.groups[0].lagged, 4);
    assert_eq!(stats.lagged, 8);
}

/// A gap a member's batch meets after it took messages is the group's, as on the locked
/// log: the group's position stays before it until a receive reports it, whichever
/// member makes that receive (the one that met it may have left, or lost the partition
/// in a rebalance), and it is reported before the messages after it (found by review).
#[test]
fn a_gap_met_by_a_members_batch_is_the_groups_on_both_engines() {
    fn leaving(config: TopicConfig) -> (u64, Result<usize, TryRecvError>, u64, u64) {
        let topic = Topic::new(config.partitions(3).overflow(Overflow::DropOldest)).unwrap();
        let mut a = topic.group("g", StartAt::Earliest).unwrap();
        topic.try_publish_to(0, 100u32).unwrap();
        for n in 0..5 {
            topic.try_publish_to(2, n).unwrap();
        }
        let mut buf = Vec::new();
        // Takes partition 0's message, then meets partition 2's gap.
        assert_eq!(a.try_recv_many(&mut buf, 10).unwrap(), 1);
        let committed = a.committed(2).unwrap();
        drop(a);
        let mut b = topic.group("g", StartAt::Earliest).unwrap();
        let next = b.try_recv_many(&mut buf, 10);
        let stats = topic.stats();
        (committed, next, stats.lagged, stats.groups[0].lagged)
    }
    fn rebalanced(
        config: TopicConfig,
    ) -> (Result<usize, TryRecvError>, Result<usize, TryRecvError>) {
        let topic = Topic::new(config.partitions(2).overflow(Overflow::DropOldest)).unwrap();
        let mut a = topic.group("g", StartAt::Earliest).unwrap();
        topic.try_publish_to(0, 100u32).unwrap();
        for n in 0..5 {
            topic.try_publish_to(1, n).unwrap();
        }
        let mut buf = Vec::new();
        assert_eq!(a.try_recv_many(&mut buf, 10).unwrap(), 1);
        let mut b = topic.group("g", StartAt::Earliest).unwrap();
        assert_eq!(b.assignment(), [1]);
        let b_got = b.try_recv_many(&mut buf, 10);
        drop(b);
        (b_got, a.try_recv_many(&mut buf, 10))
    }
    let locked = leaving(TopicConfig::new(2));
    assert_eq!(locked, (0, Err(TryRecvError::Lagged(3)), 3, 3));
    assert_eq!(leaving(ring(2)), locked);
    let locked = rebalanced(TopicConfig::new(2));
    assert_eq!(locked, (Err(TryRecvError::Lagged(3)), Ok(2)));
    assert_eq!(rebalanced(ring(2)), locked);
}

/// A publisher parked on a ring an explicit-ack group holds full is woken by the
/// acknowledgement that frees the room, with no lock of memq's held: its waker reads the
/// topic's stats (every partition's lock), which would deadlock under the partition's
/// lock the settlement takes (found by review).
#[cfg(feature = "std")]
#[test]
fn a_settlement_wakes_a_parked_publisher_after_letting_go_of_its_locks() {
    struct StatsOnWake(std::sync::Mutex<Option<Topic<u8>>>, AtomicUsize);
    impl Wake for StatsOnWake {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.1.fetch_add(1, Ordering::SeqCst);
            if let Some(topic) = self.0.lock().unwrap().as_ref() {
                let _ = topic.stats();
            }
        }
    }
    let topic = Topic::<u8>::new(ring(1)).unwrap();
    let mut m = topic
        .group_acked("g", StartAt::Earliest, AckConfig::new())
        .unwrap();
    topic.try_publish(1).unwrap();
    let d = m.try_recv().unwrap();
    let waker = Arc::new(StatsOnWake(
        std::sync::Mutex::new(Some(topic.clone())),
        AtomicUsize::new(0),
    ));
    let w = Waker::from(waker.clone());
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let done = done.clone();
        thread::spawn(move || {
            // A deadlock shows as a test that never ends: fail it loudly instead.
            for _ in 0..600 {
                if done.load(Ordering::SeqCst) {
                    return;
                }
                thread::sleep(std::time::Duration::from_millis(100));
            }
            eprintln!("deadlock: the settlement woke the publisher under a lock");
            std::process::abort();
        })
    };
    {
        let mut publish = pin!(topic.publish(2));
        assert!(publish
            .as_mut()
            .poll(&mut Context::from_waker(&w))
            .is_pending());
        d.ack().unwrap();
        assert_eq!(waker.1.load(Ordering::SeqCst), 1, "woken by the ack");
        assert!(publish
            .as_mut()
            .poll(&mut Context::from_waker(&w))
            .is_ready());
    }
    waker.0.lock().unwrap().take();
    done.store(true, Ordering::SeqCst);
    watchdog.join().unwrap();
}
