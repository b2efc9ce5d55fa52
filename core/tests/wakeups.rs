//! Futures stepped by hand: who is woken, when, and what a dropped future leaves behind.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use memq_core::{PublishError, RecvError, StartAt, Topic, TopicConfig, TryRecvError};

#[derive(Default)]
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

struct Probe {
    count: Arc<CountingWaker>,
    waker: Waker,
}

impl Probe {
    fn new() -> Self {
        let count = Arc::new(CountingWaker::default());
        Self {
            waker: Waker::from(count.clone()),
            count,
        }
    }
    fn wakes(&self) -> usize {
        self.count.0.load(Ordering::SeqCst)
    }
    fn poll<F: Future + Unpin>(&self, f: &mut F) -> Poll<F::Output> {
        poll_with(&self.waker, f)
    }
}

#[test]
fn publish_wakes_a_waiting_subscriber_once() {
    let topic = Topic::with_capacity(4).unwrap();
    let mut sub = topic.subscribe(StartAt::Latest).unwrap();
    let probe = Probe::new();
    let mut recv = sub.recv();
    assert!(probe.poll(&mut recv).is_pending());
    assert_eq!(probe.wakes(), 0);
    topic.try_publish(1).unwrap();
    assert_eq!(probe.wakes(), 1);
    topic.try_publish(2).unwrap();
    assert_eq!(probe.wakes(), 1, "already notified: no second wake");
    match probe.poll(&mut recv) {
        Poll::Ready(Ok(m)) => assert_eq!(m.into_value(), 1),
        other => panic!("{other:?}"),
    }
}

#[test]
fn all_waiting_subscribers_are_woken() {
    let topic = Topic::with_capacity(4).unwrap();
    let mut subs: Vec<_> = (0..40)
        .map(|_| topic.subscribe(StartAt::Latest).unwrap())
        .collect();
    let probes: Vec<_> = (0..40).map(|_| Probe::new()).collect();
    for (sub, probe) in subs.iter_mut().zip(&probes) {
        let mut recv = sub.recv();
        assert!(probe.poll(&mut recv).is_pending());
        // Leave the registration in place as a waiting task would.
        std::mem::forget(recv);
    }
    topic.try_publish(7).unwrap();
    // More than one WakeList's worth (32): the rest are woken in a second round.
    assert!(probes.iter().all(|p| p.wakes() == 1));
    for sub in &mut subs {
        assert_eq!(sub.try_recv().unwrap().into_value(), 7);
    }
}

#[test]
fn dropped_recv_loses_no_message() {
    let topic = Topic::with_capacity(4).unwrap();
    let mut sub = topic.subscribe(StartAt::Latest).unwrap();
    let probe = Probe::new();
    {
        let mut recv = sub.recv();
        assert!(probe.poll(&mut recv).is_pending());
        topic.try_publish(1).unwrap();
        // Woken, but dropped before being polled again (it lost a select).
    }
    assert_eq!(probe.wakes(), 1);
    assert_eq!(sub.try_recv().unwrap().into_value(), 1);
}

#[test]
fn group_members_are_woken_one_per_message_in_fifo_order() {
    let topic = Topic::with_capacity(8).unwrap();
    let mut a = topic.group("g", StartAt::Latest).unwrap();
    let mut b = topic.group("g", StartAt::Latest).unwrap();
    let (pa, pb) = (Probe::new(), Probe::new());
    let mut ra = a.recv();
    let mut rb = b.recv();
    assert!(pa.poll(&mut ra).is_pending());
    assert!(pb.poll(&mut rb).is_pending());
    topic.try_publish(1).unwrap();
    assert_eq!((pa.wakes(), pb.wakes()), (1, 0), "first waiter first");
    topic.try_publish(2).unwrap();
    assert_eq!((pa.wakes(), pb.wakes()), (1, 1), "one member per message");
    assert!(matches!(pa.poll(&mut ra), Poll::Ready(Ok(m)) if *m.value() == 1));
    assert!(matches!(pb.poll(&mut rb), Poll::Ready(Ok(m)) if *m.value() == 2));
}

#[test]
fn notified_then_dropped_member_passes_the_wakeup_on() {
    let topic = Topic::with_capacity(8).unwrap();
    let mut a = topic.group("g", StartAt::Latest).unwrap();
    let mut b = topic.group("g", StartAt::Latest).unwrap();
    let (pa, pb) = (Probe::new(), Probe::new());
    let mut rb = b.recv();
    {
        let mut ra = a.recv();
        assert!(pa.poll(&mut ra).is_pending());
        assert!(pb.poll(&mut rb).is_pending());
        topic.try_publish(1).unwrap();
        assert_eq!((pa.wakes(), pb.wakes()), (1, 0));
        // `ra` is dropped here without taking the message.
    }
    assert_eq!(pb.wakes(), 1, "the wake-up moved to the next member");
    assert!(matches!(pb.poll(&mut rb), Poll::Ready(Ok(m)) if *m.value() == 1));
}

#[test]
fn blocked_publisher_is_woken_when_the_reader_frees_a_slot() {
    let topic = Topic::with_capacity(2).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish(0).unwrap();
    topic.try_publish(1).unwrap();
    assert!(matches!(topic.try_publish(9), Err(PublishError::Full(9))));
    let probe = Probe::new();
    let mut publish = topic.publish(2);
    assert!(probe.poll(&mut publish).is_pending());
    assert_eq!(sub.try_recv().unwrap().into_value(), 0);
    assert_eq!(probe.wakes(), 1);
    match probe.poll(&mut publish) {
        Poll::Ready(Ok(r)) => assert_eq!(r.offset, 2),
        other => panic!("{other:?}"),
    }
}

#[test]
fn dropped_publish_publishes_nothing_and_passes_its_wakeup_on() {
    let topic = Topic::with_capacity(1).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish(0).unwrap();
    let (p1, p2) = (Probe::new(), Probe::new());
    let mut second = topic.publish(2);
    {
        let mut first = topic.publish(1);
        assert!(p1.poll(&mut first).is_pending());
        assert!(p2.poll(&mut second).is_pending());
        sub.try_recv().unwrap(); // frees one slot: wakes `first` only
        assert_eq!((p1.wakes(), p2.wakes()), (1, 0));
    }
    assert_eq!(p2.wakes(), 1, "dropped publisher passed its wake-up on");
    assert!(matches!(p2.poll(&mut second), Poll::Ready(Ok(r)) if r.offset == 1));
    assert_eq!(sub.try_recv().unwrap().into_value(), 2);
    assert_eq!(sub.try_recv(), Err(TryRecvError::Empty));
    assert_eq!(topic.stats().published, 2);
}

#[test]
fn close_wakes_waiting_readers_and_publishers() {
    let topic = Topic::<u32>::with_capacity(1).unwrap();
    let mut sub = topic.subscribe(StartAt::Latest).unwrap();
    let mut member = topic.group("g", StartAt::Latest).unwrap();
    let (ps, pm) = (Probe::new(), Probe::new());
    let mut rs = sub.recv();
    let mut rm = member.recv();
    assert!(ps.poll(&mut rs).is_pending());
    assert!(pm.poll(&mut rm).is_pending());
    topic.close();
    assert_eq!((ps.wakes(), pm.wakes()), (1, 1));
    assert!(matches!(
        ps.poll(&mut rs),
        Poll::Ready(Err(RecvError::Closed))
    ));
    assert!(matches!(
        pm.poll(&mut rm),
        Poll::Ready(Err(RecvError::Closed))
    ));
}

#[test]
fn close_wakes_a_blocked_publisher_with_its_message_back() {
    let topic = Topic::with_capacity(1).unwrap();
    let _sub = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish(0).unwrap();
    let probe = Probe::new();
    let mut publish = topic.publish(5);
    assert!(probe.poll(&mut publish).is_pending());
    topic.close();
    assert_eq!(probe.wakes(), 1);
    assert!(matches!(
        probe.poll(&mut publish),
        Poll::Ready(Err(PublishError::Closed(5)))
    ));
}

#[test]
fn idle_member_without_partition_is_woken_on_rebalance() {
    let topic = Topic::new(TopicConfig::new(4).partitions(2)).unwrap();
    let a = topic.group("g", StartAt::Earliest).unwrap();
    let b = topic.group("g", StartAt::Earliest).unwrap();
    let mut c = topic.group("g", StartAt::Earliest).unwrap();
    assert!(c.assignment().is_empty(), "3 members, 2 partitions");
    let probe = Probe::new();
    let mut rc = c.recv();
    assert!(probe.poll(&mut rc).is_pending());
    drop(a);
    assert!(probe.wakes() >= 1, "rebalance wakes the idle member");
    topic.try_publish_to(0, 1).unwrap();
    topic.try_publish_to(1, 2).unwrap();
    let got = match probe.poll(&mut rc) {
        Poll::Ready(Ok(m)) => m.into_value(),
        other => panic!("{other:?}"),
    };
    assert!(got == 1 || got == 2);
    drop(rc);
    drop(b);
}

#[test]
fn waiting_subscriber_survives_many_cancelled_waits_without_growth() {
    // Cancelled waits reuse the subscriber's slot: a timeout loop on an idle topic must
    // not grow anything per iteration (checked indirectly: it keeps working).
    let topic = Topic::with_capacity(4).unwrap();
    let mut sub = topic.subscribe(StartAt::Latest).unwrap();
    let probe = Probe::new();
    for _ in 0..10_000 {
        let mut recv = sub.recv();
        assert!(probe.poll(&mut recv).is_pending());
    }
    topic.try_publish(3).unwrap();
    assert_eq!(sub.try_recv().unwrap().into_value(), 3);
}

#[test]
fn a_member_that_stopped_waiting_as_a_stream_does_not_keep_the_wake_up_from_another() {
    // From review: a member polled as a `Stream` stays registered when its `next()` is
    // dropped (under a timeout, say), which a `Stream` cannot notice. The wake-up for the
    // next message went to it alone, and a member parked in `recv` slept next to a ready
    // message. A stream's registration is now woken by every message without taking the
    // turn of a member that waits in `recv`.
    use futures_util::StreamExt;
    for partitions in [1, 3] {
        let topic = Topic::new(TopicConfig::new(8).partitions(partitions)).unwrap();
        let mut a = topic.group("g", StartAt::Latest).unwrap();
        let mut b = topic.group("g", StartAt::Latest).unwrap();
        let quitter = Probe::new();
        {
            let mut next = a.next();
            assert!(quitter.poll(&mut next).is_pending());
        }
        let (waiter, other) = (Probe::new(), Probe::new());
        // Published where b reads (with one partition both members read it).
        let p = b.assignment()[0];
        let mut recv = b.recv();
        assert!(waiter.poll(&mut recv).is_pending());
        topic.try_publish_to(p, 5).unwrap();
        assert_eq!(waiter.wakes(), 1, "{partitions} partition(s)");
        match waiter.poll(&mut recv) {
            Poll::Ready(Ok(m)) => assert_eq!(m.into_value(), 5),
            other => panic!("{other:?}"),
        }
        drop(recv);
        // The stream member, woken too, finds nothing and waits again; nothing is owed.
        let mut next = a.next();
        assert!(other.poll(&mut next).is_pending());
        drop(next);
        drop((a, b));
    }
}

#[test]
fn a_parked_batch_holds_back_only_the_publishers_that_parked_after_it() {
    // From review: the room parked publishers were woken for was the largest any of them
    // needed, so a parked batch of 3 kept a single publisher that had parked before it
    // asleep next to a free slot (the docs promise logs under 32 slots wake for every
    // slot). Parked publishers are now served in the order they parked, each once its own
    // room is free: a batch at the front waits for its room, and those behind it for it.
    let topic = Topic::<u32>::new(TopicConfig::new(4)).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    for v in 0..4 {
        topic.try_publish(v).unwrap();
    }
    let (single, batch, last) = (Probe::new(), Probe::new(), Probe::new());
    let mut p1 = topic.publish(10);
    assert!(single.poll(&mut p1).is_pending());
    let mut p2 = topic.publish_batch(vec![20, 21, 22]);
    assert!(batch.poll(&mut p2).is_pending());
    let mut p3 = topic.publish(30);
    assert!(last.poll(&mut p3).is_pending());
    assert_eq!(sub.try_recv().unwrap().into_value(), 0);
    assert_eq!((single.wakes(), batch.wakes(), last.wakes()), (1, 0, 0));
    assert!(matches!(single.poll(&mut p1), Poll::Ready(Ok(r)) if r.offset == 4));
    // Two slots free: not enough for the batch, and the last waits behind it.
    assert_eq!(sub.try_recv().unwrap().into_value(), 1);
    assert_eq!(sub.try_recv().unwrap().into_value(), 2);
    assert_eq!((batch.wakes(), last.wakes()), (0, 0));
    assert_eq!(sub.try_recv().unwrap().into_value(), 3);
    assert_eq!((batch.wakes(), last.wakes()), (1, 0));
    assert!(matches!(batch.poll(&mut p2), Poll::Ready(Ok(r)) if r.offset == 5));
    assert_eq!(sub.try_recv().unwrap().into_value(), 10);
    assert_eq!(last.wakes(), 1);
    assert!(matches!(last.poll(&mut p3), Poll::Ready(Ok(r)) if r.offset == 8));
}

#[test]
fn a_waiter_in_a_reused_slot_does_not_jump_the_queue() {
    // Found by the liveness fuzz: a cancelled publisher's slot, reused by a batch that
    // parked later, made the cancelled publisher's stale queue entry stand for the batch.
    // The batch then came first, did not fit, and held back the single publisher that had
    // parked before it, next to a free slot.
    let topic = Topic::<u32>::new(TopicConfig::new(3)).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    for v in 0..3 {
        topic.try_publish(v).unwrap();
    }
    let (cancelled, single, batch) = (Probe::new(), Probe::new(), Probe::new());
    let mut p1 = topic.publish(10);
    assert!(cancelled.poll(&mut p1).is_pending());
    let mut p2 = topic.publish(20);
    assert!(single.poll(&mut p2).is_pending());
    drop(p1);
    let mut p3 = topic.publish_batch(vec![30, 31]);
    assert!(batch.poll(&mut p3).is_pending());
    assert_eq!(sub.try_recv().unwrap().into_value(), 0);
    assert_eq!((single.wakes(), batch.wakes()), (1, 0));
    assert!(matches!(single.poll(&mut p2), Poll::Ready(Ok(r)) if r.offset == 3));
}

/// From review: 33 stream members whose `next()` was dropped sit in the wait queue between a member
/// that was notified for a message and another member waiting in `recv`. The notified
/// member's `recv` is dropped: its wake-up must pass to the member still in `recv`.
#[test]
fn pass_on_reaches_a_recv_member_behind_many_stream_registrations() {
    use futures_util::StreamExt;
    for partitions_pool in [false, true] {
        // A pooled group (1 partition, no TTL) and a non-pooled one (DropOldest).
        let cfg = if partitions_pool {
            TopicConfig::new(64)
        } else {
            TopicConfig::new(64).overflow(memq_core::Overflow::DropOldest)
        };
        let topic = Topic::<u32>::new(cfg).unwrap();
        let mut m1 = topic.group("g", StartAt::Latest).unwrap();
        let mut m3 = topic.group("g", StartAt::Latest).unwrap();
        let mut streams: Vec<_> = (0..33)
            .map(|_| topic.group("g", StartAt::Latest).unwrap())
            .collect();
        let (p1, p3) = (Probe::new(), Probe::new());
        let stream_probes: Vec<_> = (0..33).map(|_| Probe::new()).collect();
        let mut r1 = m1.recv();
        assert!(p1.poll(&mut r1).is_pending());
        for (s, probe) in streams.iter_mut().zip(&stream_probes) {
            let mut next = s.next();
            assert!(probe.poll(&mut next).is_pending());
            drop(next); // e.g. under a timeout: the registration stays
        }
        let mut r3 = m3.recv();
        assert!(p3.poll(&mut r3).is_pending());
        topic.try_publish(7).unwrap();
        assert_eq!(p1.wakes(), 1);
        // m1 gives up without taking the message: its turn goes on.
        drop(r1);
        assert_eq!(
            p3.wakes(),
            1,
            "pool={partitions_pool}: the member in recv sleeps next to a ready message"
        );
        match p3.poll(&mut r3) {
            Poll::Ready(Ok(m)) => assert_eq!(m.into_value(), 7),
            other => panic!("{other:?}"),
        }
    }
}

/// From review: a batch woken for exactly its room keeps that room: a publisher that parked after it
/// is not woken into the same room (docs of `Overflow::Block`: "those that started
/// waiting after it wait for it").
#[test]
fn a_woken_batch_keeps_its_room_when_a_later_publisher_cancels() {
    let topic = Topic::<u32>::new(TopicConfig::new(4)).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    for v in 0..4 {
        topic.try_publish(v).unwrap();
    }
    let (pb, ps, pt) = (Probe::new(), Probe::new(), Probe::new());
    let mut batch = topic.publish_batch(vec![20, 21]);
    assert!(pb.poll(&mut batch).is_pending());
    let mut single = topic.publish(30);
    assert!(ps.poll(&mut single).is_pending());
    let mut third = topic.publish(40);
    assert!(pt.poll(&mut third).is_pending());
    assert_eq!(sub.try_recv().unwrap().into_value(), 0);
    assert_eq!(sub.try_recv().unwrap().into_value(), 1);
    // Two slots free: the batch (first in line, needing 2) is woken, nobody else.
    assert_eq!((pb.wakes(), ps.wakes(), pt.wakes()), (1, 0, 0));
    // The third publisher gives up (it was only waiting, never woken).
    drop(third);
    // The single, behind the batch, should still wait: the two free slots are the batch's.
    assert_eq!(
        ps.wakes(),
        0,
        "single woken into the room of the batch woken before it"
    );
    assert!(matches!(pb.poll(&mut batch), Poll::Ready(Ok(r)) if r.offset == 4));
    assert_eq!(sub.try_recv().unwrap().into_value(), 2);
    assert_eq!(ps.wakes(), 1);
    assert!(matches!(ps.poll(&mut single), Poll::Ready(Ok(r)) if r.offset == 6));
}

/// From review: dropping a woken single passed its wake-up to the next in line even if
/// that was a batch whose room was not free; the batch then parked again at the back of
/// the line. The wake-up now goes to whoever is first in line once its room is free.
#[test]
fn a_wake_up_handed_on_goes_to_the_first_in_line_once_its_room_is_free() {
    let topic = Topic::<u32>::new(TopicConfig::new(4)).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    for v in 0..4 {
        topic.try_publish(v).unwrap();
    }
    let (p1, pb, p3) = (Probe::new(), Probe::new(), Probe::new());
    let mut first = topic.publish(10);
    assert!(p1.poll(&mut first).is_pending());
    let mut batch = topic.publish_batch(vec![20, 21, 22]);
    assert!(pb.poll(&mut batch).is_pending());
    let mut last = topic.publish(30);
    assert!(p3.poll(&mut last).is_pending());
    assert_eq!(sub.try_recv().unwrap().into_value(), 0);
    assert_eq!((p1.wakes(), pb.wakes(), p3.wakes()), (1, 0, 0));
    drop(first); // woken, gives up: 1 slot free
                 // The batch needs 3 and 1 is free: nobody is woken (the last waits behind it).
    assert_eq!(
        (pb.wakes(), p3.wakes()),
        (0, 0),
        "batch woken for a room of 1"
    );
    assert_eq!(sub.try_recv().unwrap().into_value(), 1);
    assert_eq!(sub.try_recv().unwrap().into_value(), 2);
    assert_eq!((pb.wakes(), p3.wakes()), (1, 0));
    assert!(matches!(pb.poll(&mut batch), Poll::Ready(Ok(r)) if r.offset == 4));
    assert_eq!(sub.try_recv().unwrap().into_value(), 3);
    assert_eq!(p3.wakes(), 1);
}

#[test]
fn a_batch_behind_a_woken_publisher_is_woken_when_readers_read_to_the_end() {
    // From review: the wake position that readers handing over without the lock watch
    // left out the room promised to a publisher woken and not back yet, so a reader got
    // there, found that the first in line did not fit yet, and never looked again.
    let topic = Topic::with_capacity(4).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    for i in 0..4 {
        topic.try_publish(i).unwrap();
    }
    let (pa, pb) = (Probe::new(), Probe::new());
    let mut a = topic.publish(10);
    let mut b = topic.publish_batch(vec![20, 21]);
    assert!(pa.poll(&mut a).is_pending());
    assert!(pb.poll(&mut b).is_pending());
    // Under the lock: reads 0 and fetches 1..3 ahead; 1 slot free, `a` is woken.
    assert_eq!(sub.try_recv().unwrap().into_value(), 0);
    assert_eq!((pa.wakes(), pb.wakes()), (1, 0));
    // Without the lock: 1, 2, 3. Four slots free, one of them promised to `a`.
    for i in 1..4 {
        assert_eq!(sub.try_recv().unwrap().into_value(), i);
    }
    assert_eq!(pb.wakes(), 1, "the batch of 2 fits next to `a`'s slot");
    assert!(matches!(pa.poll(&mut a), Poll::Ready(Ok(r)) if r.offset == 4));
    assert!(matches!(pb.poll(&mut b), Poll::Ready(Ok(r)) if r.offset == 5));
}

#[test]
fn woken_publishers_that_wait_again_keep_their_order() {
    // From review: a woken publisher that had to wait again (a new publish took its room)
    // went to the very front, so of two the later went before the earlier.
    let topic = Topic::with_capacity(4).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    for i in 0..4 {
        topic.try_publish(i).unwrap();
    }
    let (pa, pb, pc) = (Probe::new(), Probe::new(), Probe::new());
    let mut a = topic.publish(10);
    let mut b = topic.publish_batch(vec![20, 21]);
    let mut c = topic.publish(30);
    assert!(pa.poll(&mut a).is_pending());
    assert!(pb.poll(&mut b).is_pending());
    assert!(pc.poll(&mut c).is_pending());
    assert_eq!(sub.try_recv_many(&mut Vec::new(), 3).unwrap(), 3);
    assert_eq!((pa.wakes(), pb.wakes(), pc.wakes()), (1, 1, 0));
    // A new publisher takes the three free slots first; both wait again, in either
    // order of polls.
    for i in 4..7 {
        topic.try_publish(i).unwrap();
    }
    assert!(pa.poll(&mut a).is_pending());
    assert!(pb.poll(&mut b).is_pending());
    // One slot: `a` (first in line, before `b`) gets it; `c` waits behind `b`.
    assert_eq!(sub.try_recv_many(&mut Vec::new(), 1).unwrap(), 1);
    assert_eq!((pa.wakes(), pb.wakes(), pc.wakes()), (2, 1, 0));
    assert!(matches!(pa.poll(&mut a), Poll::Ready(Ok(r)) if r.offset == 7));
    assert_eq!(sub.try_recv_many(&mut Vec::new(), 2).unwrap(), 2);
    assert_eq!((pb.wakes(), pc.wakes()), (2, 0));
    assert!(matches!(pb.poll(&mut b), Poll::Ready(Ok(r)) if r.offset == 8));
    assert_eq!(sub.try_recv_many(&mut Vec::new(), 1).unwrap(), 1);
    assert_eq!(pc.wakes(), 1);
}

#[test]
fn a_woken_batch_that_waits_again_behind_an_earlier_publisher_wakes_it_if_its_room_is_free() {
    // From review: a woken batch that had to wait again gave back the room promised to
    // it, which lowered the room the first in line (an earlier single publisher, woken
    // and waiting again too) was waiting for; but only the batch's own room was counted
    // again, and the single slept next to two free slots.
    let topic = Topic::<u32>::new(TopicConfig::new(4)).unwrap();
    let mut d = topic.subscribe(StartAt::Earliest).unwrap();
    let mut z = topic.subscribe(StartAt::Earliest).unwrap();
    for v in 0..4 {
        topic.try_publish(v).unwrap();
    }
    let (ph, pp) = (Probe::new(), Probe::new());
    let mut h = topic.publish(10);
    assert!(ph.poll(&mut h).is_pending());
    let mut p = topic.publish_batch(vec![20, 21, 22]);
    assert!(pp.poll(&mut p).is_pending());
    for i in 0..4 {
        assert_eq!(d.try_recv().unwrap().into_value(), i);
    }
    for i in 0..4 {
        assert_eq!(z.try_recv().unwrap().into_value(), i);
    }
    assert_eq!((ph.wakes(), pp.wakes()), (1, 1), "both woken, 4 slots free");
    // Replays take the room back.
    d.seek(0).unwrap();
    z.seek(2).unwrap();
    assert!(ph.poll(&mut h).is_pending());
    for i in 0..4 {
        assert_eq!(d.try_recv().unwrap().into_value(), i);
    }
    // Two slots free: not enough for the batch, which waits again behind `h`.
    assert!(pp.poll(&mut p).is_pending());
    assert_eq!(
        ph.wakes(),
        2,
        "`h`, first in line, needs 1 of the 2 free slots"
    );
    assert!(matches!(ph.poll(&mut h), Poll::Ready(Ok(_))));
}

/// A topic on the locked log, whose sole subscriber stays registered after its last
/// read (the ring engine's subscribers do not), also in a build that defaults to the ring.
fn locked_log_topic<T>() -> Topic<T> {
    Topic::new(TopicConfig::new(4).ring_engine(false)).unwrap()
}

/// Takes the value of a ready receive, or panics.
fn ready_value<T: std::fmt::Debug>(p: Poll<Result<memq_core::Message<T>, RecvError>>) -> T {
    match p {
        Poll::Ready(Ok(m)) => m.into_value(),
        other => panic!("expected a message, got {other:?}"),
    }
}

/// A topic on the locked log and its only subscriber, which took message 1, the last,
/// polled with the probe's waker: it stays registered with that waker.
fn registered_after_its_last_read() -> (Topic<u64>, memq_core::Subscriber<u64>, Probe) {
    let topic = locked_log_topic();
    let mut sub = topic.subscribe(StartAt::Latest).unwrap();
    let probe = Probe::new();
    topic.try_publish(1).unwrap();
    assert_eq!(ready_value(probe.poll(&mut sub.recv())), 1);
    (topic, sub, probe)
}

#[test]
fn a_sole_subscriber_that_read_the_last_message_is_woken_by_the_next_publish() {
    // The receive that takes the last message leaves the subscriber registered: the next
    // receive waits without a visit, and the next publish wakes it, once.
    let (topic, mut sub, probe) = registered_after_its_last_read();
    for i in 2..5u64 {
        let mut recv = sub.recv();
        assert!(probe.poll(&mut recv).is_pending());
        assert_eq!(probe.wakes() as u64, i - 2);
        topic.try_publish(i).unwrap();
        topic.try_publish(100 + i).unwrap();
        assert_eq!(
            probe.wakes() as u64,
            i - 1,
            "one wake-up for the two publishes"
        );
        assert_eq!(ready_value(probe.poll(&mut recv)), i);
        drop(recv);
        assert_eq!(ready_value(probe.poll(&mut sub.recv())), 100 + i);
    }
    // Closing wakes it too, and the receive then says so.
    let mut recv = sub.recv();
    assert!(probe.poll(&mut recv).is_pending());
    let before = probe.wakes();
    topic.close();
    assert_eq!(probe.wakes(), before + 1);
    assert!(matches!(
        probe.poll(&mut recv),
        Poll::Ready(Err(RecvError::Closed))
    ));
}

#[test]
fn a_subscriber_that_stays_registered_is_woken_through_the_waker_it_waits_with() {
    // The registration left by a read holds task A's waker. A receive polled by another
    // task, B, must register B's, or B would sleep through the next publish.
    let topic = locked_log_topic();
    let mut sub = topic.subscribe(StartAt::Latest).unwrap();
    let (a, b) = (Probe::new(), Probe::new());
    topic.try_publish(1).unwrap();
    assert_eq!(ready_value(a.poll(&mut sub.recv())), 1);
    let mut recv = sub.recv();
    assert!(b.poll(&mut recv).is_pending());
    topic.try_publish(2).unwrap();
    assert_eq!(b.wakes(), 1, "the task that waits is woken");
    assert_eq!(ready_value(b.poll(&mut recv)), 2);
    drop(recv);
    // And back: B's read left B registered; A waits now.
    let mut recv = sub.recv();
    assert!(a.poll(&mut recv).is_pending());
    let before = a.wakes();
    topic.try_publish(3).unwrap();
    assert_eq!(a.wakes(), before + 1);
    assert_eq!(ready_value(a.poll(&mut recv)), 3);
}

#[test]
fn a_dropped_receive_of_a_subscriber_that_stayed_registered_is_not_woken_again() {
    // A receive that waited without a visit and is then dropped (a timeout) ends the
    // registration: the publishes after it wake nobody, and nothing is lost.
    let (topic, mut sub, probe) = registered_after_its_last_read();
    let mut recv = sub.recv();
    assert!(probe.poll(&mut recv).is_pending());
    drop(recv);
    topic.try_publish(2).unwrap();
    assert_eq!(probe.wakes(), 0);
    assert_eq!(sub.try_recv().map(memq_core::Message::into_value), Ok(2));
    // A seek forgets the registration too: the next receive visits, and finds what
    // the seek went back to.
    topic.try_publish(3).unwrap();
    assert_eq!(ready_value(probe.poll(&mut sub.recv())), 3);
    sub.seek(1).unwrap();
    assert_eq!(ready_value(probe.poll(&mut sub.recv())), 2);
}

/// A waker whose `clone` panics while `panics` is set: user code that memq runs under a
/// partition's lock, which must leave nothing half done. `Wake` cannot make one (its
/// clone is the `Arc`'s), hence the raw vtable.
fn panicking_waker(panics: &'static AtomicBool) -> Waker {
    use std::task::{RawWaker, RawWakerVTable};
    fn clone(data: *const ()) -> RawWaker {
        // SAFETY: `data` is the `&'static AtomicBool` given below.
        let panics = unsafe { &*data.cast::<AtomicBool>() };
        assert!(!panics.load(Ordering::SeqCst), "a waker's clone panicked");
        RawWaker::new(data, &VTABLE)
    }
    fn nothing(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, nothing, nothing, nothing);
    let data = std::ptr::from_ref(panics).cast::<()>();
    // SAFETY: `data` points to a static `AtomicBool`; `clone` only reads it, and waking
    // or dropping does nothing, which upholds `RawWaker`'s contract.
    unsafe { Waker::from_raw(RawWaker::new(data, &VTABLE)) }
}

/// Polls `f` once with `waker`.
fn poll_with<F: Future + Unpin>(waker: &Waker, f: &mut F) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(waker))
}

#[test]
fn a_waker_whose_clone_panics_costs_a_subscriber_that_stays_registered_no_message() {
    let (topic, mut sub, probe) = registered_after_its_last_read();
    topic.try_publish(2).unwrap();
    assert_eq!(probe.wakes(), 1);
    // Polled by a task whose waker panics when cloned, as the visit that would take
    // message 2 (the last) registers it.
    static PANICS: AtomicBool = AtomicBool::new(true);
    let panicky = panicking_waker(&PANICS);
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        poll_with(&panicky, &mut sub.recv())
    }));
    assert!(polled.is_err());
    // Message 2 is still there, and the wait list still wakes whoever waits.
    assert_eq!(ready_value(probe.poll(&mut sub.recv())), 2);
    let mut recv = sub.recv();
    assert!(probe.poll(&mut recv).is_pending());
    topic.try_publish(3).unwrap();
    assert_eq!(probe.wakes(), 2);
    assert_eq!(ready_value(probe.poll(&mut recv)), 3);
    drop(recv);
    // A receive that waits with it and is dropped settles cleanly.
    let mut recv = sub.recv();
    assert!(probe.poll(&mut recv).is_pending());
    drop(recv);
    PANICS.store(false, Ordering::SeqCst);
    let mut recv = sub.recv();
    assert!(poll_with(&panicky, &mut recv).is_pending());
    topic.try_publish(4).unwrap();
    assert_eq!(ready_value(probe.poll(&mut recv)), 4);
}

#[test]
fn a_woken_member_whose_new_waker_panics_when_cloned_leaves_its_registration_whole() {
    // A member woken for a message another member took waits again; registering again
    // clones the new waker, user code that panics here. Its registration must be as it
    // was: settling it when the future is dropped, or a later wait, must not find the
    // wait list's counts off (they once were: the promise was undone before the clone).
    let topic = Topic::with_capacity(8).unwrap();
    let mut a = topic.group("g", StartAt::Latest).unwrap();
    let mut b = topic.group("g", StartAt::Latest).unwrap();
    let pa = Probe::new();
    let mut ra = a.recv();
    assert!(pa.poll(&mut ra).is_pending());
    topic.try_publish(1).unwrap();
    assert_eq!(pa.wakes(), 1);
    assert_eq!(b.try_recv().map(memq_core::Message::into_value), Ok(1));
    static PANICS: AtomicBool = AtomicBool::new(true);
    let panicky = panicking_waker(&PANICS);
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        poll_with(&panicky, &mut ra)
    }));
    assert!(polled.is_err());
    drop(ra);
    // The group goes on: a wait after it is woken by the next message, once.
    let mut ra = a.recv();
    assert!(pa.poll(&mut ra).is_pending());
    topic.try_publish(2).unwrap();
    assert_eq!(pa.wakes(), 2);
    assert!(matches!(pa.poll(&mut ra), Poll::Ready(Ok(m)) if *m.value() == 2));
}

#[cfg(feature = "std")]
#[test]
fn a_waker_whose_clone_panics_costs_an_explicit_ack_member_that_waits_nothing() {
    // An explicit-ack member that finds nothing registers last in its visit, after every
    // other change: a panicking clone there leaves the group's state whole, on the
    // locked log and on the ring (where the visit may also have moved the group's hold).
    static PANICS: AtomicBool = AtomicBool::new(true);
    let panicky = panicking_waker(&PANICS);
    for ring in [false, true] {
        PANICS.store(true, Ordering::SeqCst);
        let topic: Topic<u32> = Topic::new(TopicConfig::new(1).ring_engine(ring)).unwrap();
        let config = memq_core::AckConfig::new();
        let mut m = topic.group_acked("g", StartAt::Earliest, config).unwrap();
        topic.try_publish(1).unwrap();
        m.try_recv().unwrap().ack().unwrap();
        let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            poll_with(&panicky, &mut m.recv())
        }));
        assert!(polled.is_err(), "ring engine: {ring}");
        // The acknowledged message left room: a publish gets on at once.
        assert_eq!(topic.try_publish(2).map(|r| r.offset), Ok(1));
        let probe = Probe::new();
        let delivered = match probe.poll(&mut m.recv()) {
            Poll::Ready(Ok(d)) => d,
            other => panic!("ring engine {ring}: expected a delivery, got {other:?}"),
        };
        assert_eq!((delivered.offset(), *delivered.value()), (1, 2));
        delivered.ack().unwrap();
        // The member waits and is woken by the next publish, once.
        let mut recv = m.recv();
        assert!(probe.poll(&mut recv).is_pending());
        topic.try_publish(3).unwrap();
        assert_eq!(probe.wakes(), 1, "ring engine: {ring}");
        match probe.poll(&mut recv) {
            Poll::Ready(Ok(d)) if *d.value() == 3 => d.ack().unwrap(),
            other => panic!("ring engine {ring}: expected message 3, got {other:?}"),
        }
        drop(recv);
        // The same waker, no longer panicking, waits like any other.
        PANICS.store(false, Ordering::SeqCst);
        let mut recv = m.recv();
        assert!(poll_with(&panicky, &mut recv).is_pending());
        topic.try_publish(4).unwrap();
        assert!(matches!(probe.poll(&mut recv), Poll::Ready(Ok(d)) if *d.value() == 4));
        drop(recv);
        let stats = topic.stats();
        assert_eq!((stats.groups[0].acked, stats.groups[0].in_flight), (3, 1));
    }
}
