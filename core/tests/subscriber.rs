//! Broadcast subscribers: start positions, seeking, lag, batches, streams, blocking.

extern crate alloc;

use alloc::sync::Arc;
use alloc::task::Wake;
use core::future::Future;
use core::pin::pin;
use core::sync::atomic::{AtomicUsize, Ordering};
use core::task::{Context, Poll, Waker};
use core::time::Duration;

use futures_executor::block_on;
use futures_util::StreamExt;
use memq_core::{
    Error, Lagged, Message, Overflow, RecvError, RecvTimeoutError, StartAt, Subscriber, Topic,
    TopicConfig, TryRecvError,
};

#[derive(Default)]
struct CountWaker(AtomicUsize);

impl Wake for CountWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counting_waker() -> (Arc<CountWaker>, Waker) {
    let c = Arc::new(CountWaker::default());
    (c.clone(), Waker::from(c))
}

fn values<T: Clone>(sub: &mut Subscriber<T>) -> Vec<T> {
    let mut out = Vec::new();
    while let Ok(m) = sub.try_recv() {
        out.push(m.into_value());
    }
    out
}

fn filled(cap: usize, n: u64) -> Topic<u64> {
    let t = Topic::with_capacity(cap).unwrap();
    for i in 0..n {
        t.try_publish(i).unwrap();
    }
    t
}

// ----- start positions --------------------------------------------------------------

#[test]
fn start_earliest_latest_offset() {
    let t = filled(16, 5);
    let mut e = t.subscribe(StartAt::Earliest).unwrap();
    let mut l = t.subscribe(StartAt::Latest).unwrap();
    let mut o = t.subscribe(StartAt::Offset(3)).unwrap();
    let mut end = t.subscribe(StartAt::Offset(5)).unwrap();
    assert_eq!(e.position(0), Some(0));
    assert_eq!(l.position(0), Some(5));
    assert_eq!(o.position(0), Some(3));
    t.try_publish(5).unwrap();
    assert_eq!(values(&mut e), [0, 1, 2, 3, 4, 5]);
    assert_eq!(values(&mut l), [5]);
    assert_eq!(values(&mut o), [3, 4, 5]);
    assert_eq!(values(&mut end), [5]);
}

#[test]
fn default_start_is_latest() {
    assert_eq!(StartAt::default(), StartAt::Latest);
}

#[test]
fn start_offset_past_the_end_is_an_error() {
    let t = filled(16, 5);
    let err = t.subscribe(StartAt::Offset(6)).unwrap_err();
    assert_eq!(
        err,
        Error::OffsetOutOfRange {
            offset: 6,
            partition: 0,
            high: 5
        }
    );
    // Nothing stays attached.
    assert_eq!(t.stats().subscribers, 0);
}

#[test]
fn failed_multi_partition_subscribe_leaves_nothing_attached() {
    let t = Topic::new(TopicConfig::new(2).partitions(3)).unwrap();
    // Partition 0 gets two messages, partitions 1 and 2 none.
    t.try_publish_to(0, 0u8).unwrap();
    t.try_publish_to(0, 1).unwrap();
    let err = t.subscribe(StartAt::Offset(2)).unwrap_err();
    assert!(matches!(
        err,
        Error::OffsetOutOfRange {
            offset: 2,
            partition: 1,
            high: 0
        }
    ));
    let s = t.stats();
    assert!(s.partitions.iter().all(|p| p.subscribers == 0), "{s:?}");
    // Its cursor on partition 0 no longer holds retention.
    t.try_publish_to(0, 2).unwrap();
}

#[test]
fn start_offset_before_the_retained_window_reads_as_lagged() {
    // Block without readers evicts: 0..7 are gone, 7..10 retained.
    let t = filled(3, 10);
    let mut sub = t.subscribe(StartAt::Offset(2)).unwrap();
    assert_eq!(sub.lag(), 8);
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Lagged(5));
    assert_eq!(values(&mut sub), [7, 8, 9]);
}

// ----- seeking ------------------------------------------------------------------------

#[test]
fn seek_back_replays() {
    let t = filled(16, 5);
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    assert_eq!(values(&mut sub), [0, 1, 2, 3, 4]);
    sub.seek(2).unwrap();
    assert_eq!(sub.position(0), Some(2));
    assert_eq!(values(&mut sub), [2, 3, 4]);
    sub.seek(0).unwrap();
    assert_eq!(sub.try_recv().unwrap().offset(), 0);
}

#[test]
fn seek_to_the_end_is_allowed_past_it_is_an_error() {
    let t = filled(16, 5);
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    sub.seek(5).unwrap();
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Empty);
    assert_eq!(
        sub.seek(6).unwrap_err(),
        Error::OffsetOutOfRange {
            offset: 6,
            partition: 0,
            high: 5
        }
    );
    assert!(matches!(
        sub.seek(u64::MAX).unwrap_err(),
        Error::OffsetOutOfRange { .. }
    ));
    // A failed seek does not move the subscriber.
    assert_eq!(sub.position(0), Some(5));
}

#[test]
fn seek_before_the_window_reads_as_lagged() {
    let t = filled(3, 10);
    let mut sub = t.subscribe(StartAt::Latest).unwrap();
    sub.seek(0).unwrap();
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Lagged(7));
    assert_eq!(values(&mut sub), [7, 8, 9]);
}

#[test]
fn seek_forward_under_block_frees_room() {
    let t = Topic::with_capacity(2).unwrap();
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    t.try_publish(0).unwrap();
    t.try_publish(1).unwrap();
    assert!(t.try_publish(2).unwrap_err().is_full());
    sub.seek(2).unwrap();
    t.try_publish(2).unwrap();
    assert_eq!(values(&mut sub), [2]);
}

#[test]
fn seek_on_a_multi_partition_subscriber_needs_a_partition() {
    let t = Topic::new(TopicConfig::new(8).partitions(3)).unwrap();
    for p in 0..3 {
        for i in 0..3u32 {
            t.try_publish_to(p, p * 10 + i).unwrap();
        }
    }
    let mut sub = t.subscribe(StartAt::Latest).unwrap();
    assert_eq!(sub.seek(0).unwrap_err(), Error::PartitionRequired);
    sub.seek_partition(1, 1).unwrap();
    assert_eq!(sub.position(1), Some(1));
    assert_eq!(sub.position(0), Some(3));
    assert_eq!(values(&mut sub), [11, 12]);
    assert_eq!(
        sub.seek_partition(1, 4).unwrap_err(),
        Error::OffsetOutOfRange {
            offset: 4,
            partition: 1,
            high: 3
        }
    );
    assert_eq!(
        sub.seek_partition(3, 0).unwrap_err(),
        Error::PartitionOutOfRange {
            partition: 3,
            partitions: 3
        }
    );
}

#[test]
fn seek_partition_to_a_partition_not_read_is_an_error() {
    let t = Topic::<u8>::new(TopicConfig::new(8).partitions(3)).unwrap();
    let mut sub = t.subscribe_partition(2, StartAt::Earliest).unwrap();
    assert_eq!(sub.partitions().collect::<Vec<_>>(), [2]);
    assert_eq!(sub.position(0), None);
    let err = sub.seek_partition(0, 0).unwrap_err();
    assert_eq!(err, Error::PartitionNotRead { partition: 0 });
    assert_eq!(err.to_string(), "this subscriber does not read partition 0");
    // A partition the topic does not have is out of range, read or not.
    assert_eq!(
        sub.seek_partition(3, 0).unwrap_err(),
        Error::PartitionOutOfRange {
            partition: 3,
            partitions: 3
        }
    );
    // A single-partition subscriber may seek without naming it.
    sub.seek(0).unwrap();
}

#[test]
fn seek_to_earliest_and_latest() {
    let t = Topic::new(TopicConfig::new(8).partitions(2)).unwrap();
    for i in 0..4u32 {
        t.try_publish(i).unwrap();
    }
    let mut sub = t.subscribe(StartAt::Latest).unwrap();
    assert_eq!(sub.lag(), 0);
    sub.seek_to(StartAt::Earliest).unwrap();
    assert_eq!(sub.lag(), 4);
    let mut got = values(&mut sub);
    got.sort_unstable();
    assert_eq!(got, [0, 1, 2, 3]);
    sub.seek_to(StartAt::Offset(1)).unwrap();
    assert_eq!(sub.lag(), 2);
    sub.seek_to(StartAt::Latest).unwrap();
    assert_eq!(sub.lag(), 0);
    assert!(matches!(
        sub.seek_to(StartAt::Offset(3)),
        Err(Error::OffsetOutOfRange { .. })
    ));
}

/// Like `subscribe` (which detaches everything on error) and group creation (which checks
/// every partition first), a failed `seek_to` should leave every position as it was.
#[test]
fn failed_seek_to_leaves_every_position_unchanged() {
    let t = Topic::new(TopicConfig::new(8).partitions(2)).unwrap();
    for i in 0..5u32 {
        t.try_publish_to(0, i).unwrap();
    }
    t.try_publish_to(1, 100).unwrap();
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    // Offset 3 exists in partition 0 but is past the end of partition 1.
    assert!(matches!(
        sub.seek_to(StartAt::Offset(3)),
        Err(Error::OffsetOutOfRange { partition: 1, .. })
    ));
    assert_eq!(
        (sub.position(0), sub.position(1)),
        (Some(0), Some(0)),
        "seek_to failed but moved some partitions"
    );
}

// ----- lag ----------------------------------------------------------------------------

#[test]
fn lag_counts_unread_messages() {
    let t = Topic::new(TopicConfig::new(16).partitions(2)).unwrap();
    let mut sub = t.subscribe(StartAt::Latest).unwrap();
    assert_eq!(sub.lag(), 0);
    for i in 0..6u32 {
        t.try_publish(i).unwrap();
    }
    assert_eq!(sub.lag(), 6);
    sub.try_recv().unwrap();
    assert_eq!(sub.lag(), 5);
    values(&mut sub);
    assert_eq!(sub.lag(), 0);
}

#[test]
fn lag_includes_evicted_until_reported() {
    let t = Topic::new(TopicConfig::new(2).overflow(Overflow::DropOldest)).unwrap();
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    for i in 0..5 {
        t.try_publish(i).unwrap();
    }
    assert_eq!(sub.lag(), 5);
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Lagged(3));
    assert_eq!(sub.lag(), 2);
}

// ----- recv, recv_many, try_recv_many -------------------------------------------------

#[test]
fn recv_waits_and_is_woken_by_a_publish() {
    let t = Topic::with_capacity(4).unwrap();
    let mut sub = t.subscribe(StartAt::Latest).unwrap();
    let (count, waker) = counting_waker();
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(sub.recv());
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    t.try_publish(7).unwrap();
    assert!(count.0.load(Ordering::SeqCst) >= 1);
    match fut.as_mut().poll(&mut cx) {
        Poll::Ready(Ok(m)) => assert_eq!(m.into_value(), 7),
        other => panic!("{other:?}"),
    }
}

/// After a receive on a subscriber of several partitions completes, nothing is left
/// registered: a later publish to another partition wakes nobody and the waker is not
/// kept ("skip all waker work when nobody waits").
#[test]
fn completed_recv_leaves_no_registration_on_other_partitions() {
    let t = Topic::new(TopicConfig::new(8).partitions(2)).unwrap();
    let mut sub = t.subscribe(StartAt::Latest).unwrap();
    let (count, waker) = counting_waker();
    {
        let mut fut = pin!(sub.recv());
        assert!(fut
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        t.try_publish_to(0, 1u8).unwrap();
        assert!(fut
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_ready());
    }
    drop(waker);
    let woken = count.0.load(Ordering::SeqCst);
    assert_eq!(
        Arc::strong_count(&count),
        1,
        "the subscriber still holds a clone of a finished receive's waker"
    );
    t.try_publish_to(1, 2).unwrap();
    assert_eq!(
        count.0.load(Ordering::SeqCst),
        woken,
        "a finished receive was woken again"
    );
    assert_eq!(sub.try_recv().unwrap().into_value(), 2);
}

#[test]
fn every_waiting_subscriber_is_woken_even_beyond_one_wake_batch() {
    let t = Topic::with_capacity(4).unwrap();
    let mut subs: Vec<_> = (0..100)
        .map(|_| t.subscribe(StartAt::Latest).unwrap())
        .collect();
    let wakers: Vec<_> = (0..100).map(|_| counting_waker()).collect();
    {
        let mut futs: Vec<_> = subs.iter_mut().map(|s| Box::pin(s.recv())).collect();
        for (f, (_, w)) in futs.iter_mut().zip(&wakers) {
            assert!(f.as_mut().poll(&mut Context::from_waker(w)).is_pending());
        }
        t.try_publish(1u8).unwrap();
        let woken = wakers
            .iter()
            .filter(|(c, _)| c.0.load(Ordering::SeqCst) > 0)
            .count();
        assert_eq!(woken, 100);
        for (f, (_, w)) in futs.iter_mut().zip(&wakers) {
            assert!(matches!(
                f.as_mut().poll(&mut Context::from_waker(w)),
                Poll::Ready(Ok(_))
            ));
        }
    }
    // Park them all again, then close: all woken, all see Closed.
    let mut futs: Vec<_> = subs.iter_mut().map(|s| Box::pin(s.recv())).collect();
    for (f, (_, w)) in futs.iter_mut().zip(&wakers) {
        assert!(f.as_mut().poll(&mut Context::from_waker(w)).is_pending());
    }
    let before: Vec<usize> = wakers
        .iter()
        .map(|(c, _)| c.0.load(Ordering::SeqCst))
        .collect();
    t.close();
    for (i, (f, (c, w))) in futs.iter_mut().zip(&wakers).enumerate() {
        assert!(
            c.0.load(Ordering::SeqCst) > before[i],
            "subscriber {i} not woken by close"
        );
        assert!(matches!(
            f.as_mut().poll(&mut Context::from_waker(w)),
            Poll::Ready(Err(RecvError::Closed))
        ));
    }
}

#[test]
fn dropped_recv_loses_nothing() {
    let t = Topic::with_capacity(4).unwrap();
    let mut sub = t.subscribe(StartAt::Latest).unwrap();
    {
        let (_c, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        let mut fut = pin!(sub.recv());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        t.try_publish(1).unwrap();
        // Dropped after being woken, before taking the message.
    }
    assert_eq!(sub.try_recv().unwrap().into_value(), 1);
}

#[test]
fn recv_many_respects_the_limit_and_appends() {
    let t = filled(32, 10);
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    let mut buf: Vec<Message<u64>> = Vec::new();
    block_on(async {
        assert_eq!(sub.recv_many(&mut buf, 4).await.unwrap(), 4);
        assert_eq!(buf.len(), 4);
        assert_eq!(sub.recv_many(&mut buf, 4).await.unwrap(), 4);
        assert_eq!(buf.len(), 8, "recv_many appends");
        assert_eq!(sub.recv_many(&mut buf, 100).await.unwrap(), 2);
        assert_eq!(sub.recv_many(&mut buf, 0).await.unwrap(), 0);
    });
    let offsets: Vec<u64> = buf.iter().map(Message::offset).collect();
    assert_eq!(offsets, (0..10).collect::<Vec<_>>());
}

#[test]
fn recv_many_returns_zero_only_when_closed_and_drained() {
    let t = filled(8, 3);
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    t.close();
    let mut buf = Vec::new();
    block_on(async {
        assert_eq!(sub.recv_many(&mut buf, 2).await.unwrap(), 2);
        assert_eq!(sub.recv_many(&mut buf, 2).await.unwrap(), 1);
        assert_eq!(sub.recv_many(&mut buf, 2).await.unwrap(), 0);
        assert_eq!(sub.recv_many(&mut buf, 2).await.unwrap(), 0);
    });
    assert_eq!(buf.len(), 3);
}

#[test]
fn recv_many_waits_when_empty_and_open() {
    let t = Topic::with_capacity(8).unwrap();
    let mut sub = t.subscribe(StartAt::Latest).unwrap();
    let mut buf = Vec::new();
    let (count, waker) = counting_waker();
    let mut cx = Context::from_waker(&waker);
    {
        let mut fut = pin!(sub.recv_many(&mut buf, 10));
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        t.try_publish_batch(vec![1u8, 2, 3]).unwrap();
        assert!(count.0.load(Ordering::SeqCst) >= 1);
        assert!(matches!(fut.as_mut().poll(&mut cx), Poll::Ready(Ok(3))));
    }
    assert_eq!(buf.len(), 3);
}

#[test]
fn recv_many_does_not_mix_a_gap_into_a_batch() {
    let t = Topic::new(TopicConfig::new(3).overflow(Overflow::DropOldest)).unwrap();
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    for i in 0..5 {
        t.try_publish(i).unwrap();
    }
    let mut buf = Vec::new();
    block_on(async {
        assert_eq!(
            sub.recv_many(&mut buf, 10).await.unwrap_err(),
            RecvError::Lagged(2)
        );
        assert!(buf.is_empty());
        assert_eq!(sub.recv_many(&mut buf, 10).await.unwrap(), 3);
    });
    let vals: Vec<i32> = buf.into_iter().map(Message::into_value).collect();
    assert_eq!(vals, [2, 3, 4]);
}

#[test]
fn recv_many_on_several_partitions_reports_a_gap_separately() {
    let t = Topic::new(
        TopicConfig::new(2)
            .overflow(Overflow::DropOldest)
            .partitions(2),
    )
    .unwrap();
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    t.try_publish_to(0, 0).unwrap();
    for i in 0..4 {
        t.try_publish_to(1, 10 + i).unwrap(); // 2 evicted on partition 1
    }
    let mut buf = Vec::new();
    let mut lagged = 0;
    let mut calls = 0;
    loop {
        calls += 1;
        assert!(calls < 10);
        match sub.try_recv_many(&mut buf, 10) {
            Ok(n) => assert!(n > 0),
            Err(TryRecvError::Lagged(n)) => lagged += n,
            Err(TryRecvError::Empty) => break,
            Err(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(lagged, 2);
    let mut vals: Vec<i32> = buf.into_iter().map(Message::into_value).collect();
    vals.sort_unstable();
    assert_eq!(vals, [0, 12, 13]);
}

#[test]
fn try_recv_many_empty_then_messages_then_closed() {
    let t = Topic::with_capacity(8).unwrap();
    let mut sub = t.subscribe(StartAt::Latest).unwrap();
    let mut buf = Vec::new();
    assert_eq!(
        sub.try_recv_many(&mut buf, 4).unwrap_err(),
        TryRecvError::Empty
    );
    for i in 0..6 {
        t.try_publish(i).unwrap();
    }
    assert_eq!(sub.try_recv_many(&mut buf, 4).unwrap(), 4);
    assert_eq!(sub.try_recv_many(&mut buf, 0).unwrap(), 0);
    assert_eq!(sub.try_recv_many(&mut buf, 4).unwrap(), 2);
    assert_eq!(
        sub.try_recv_many(&mut buf, 4).unwrap_err(),
        TryRecvError::Empty
    );
    t.close();
    assert_eq!(
        sub.try_recv_many(&mut buf, 4).unwrap_err(),
        TryRecvError::Closed
    );
    let vals: Vec<i32> = buf.iter().map(|m| **m).collect();
    assert_eq!(vals, [0, 1, 2, 3, 4, 5]);
}

#[test]
fn subscriber_of_all_partitions_gets_everything_in_partition_order() {
    let t = Topic::new(TopicConfig::new(64).partitions(4)).unwrap();
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    assert_eq!(sub.partitions().collect::<Vec<_>>(), [0, 1, 2, 3]);
    for i in 0..40u32 {
        t.try_publish_keyed(i.to_le_bytes(), i).unwrap();
    }
    let mut last: [Option<u64>; 4] = [None; 4];
    let mut n = 0;
    while let Ok(m) = sub.try_recv() {
        let p = m.partition() as usize;
        assert!(last[p].is_none_or(|o| o < m.offset()));
        last[p] = Some(m.offset());
        n += 1;
    }
    assert_eq!(n, 40);
}

// ----- Stream -------------------------------------------------------------------------

#[test]
fn stream_yields_items_then_ends_at_close() {
    let t = filled(8, 4);
    let sub = t.subscribe(StartAt::Earliest).unwrap();
    t.close();
    let items: Vec<u64> = block_on(sub.map(|r| r.unwrap().into_value()).collect::<Vec<_>>());
    assert_eq!(items, [0, 1, 2, 3]);
}

#[test]
fn stream_reports_lag_as_an_item() {
    let t = Topic::new(TopicConfig::new(2).overflow(Overflow::DropOldest)).unwrap();
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    for i in 0..5 {
        t.try_publish(i).unwrap();
    }
    drop(t);
    block_on(async {
        assert_eq!(sub.next().await.unwrap().unwrap_err(), Lagged(3));
        assert_eq!(sub.next().await.unwrap().unwrap().into_value(), 3);
        assert_eq!(sub.next().await.unwrap().unwrap().into_value(), 4);
        assert!(sub.next().await.is_none());
        assert!(sub.next().await.is_none());
    });
}

#[test]
fn stream_with_next_between_publishes() {
    let t = Topic::with_capacity(4).unwrap();
    let mut sub = t.subscribe(StartAt::Latest).unwrap();
    block_on(async {
        for i in 0..10 {
            t.publish(i).await.unwrap();
            assert_eq!(*sub.next().await.unwrap().unwrap(), i);
        }
    });
}

// ----- releasing the hold -------------------------------------------------------------

#[test]
fn dropping_a_subscriber_releases_its_hold_under_block() {
    let t = Topic::with_capacity(2).unwrap();
    let sub = t.subscribe(StartAt::Earliest).unwrap();
    let mut other = t.subscribe(StartAt::Earliest).unwrap();
    t.try_publish(0).unwrap();
    t.try_publish(1).unwrap();
    values(&mut other);
    assert!(t.try_publish(2).unwrap_err().is_full());
    assert_eq!(t.stats().subscribers, 2);
    drop(sub);
    assert_eq!(t.stats().subscribers, 1);
    t.try_publish(2).unwrap();
    assert_eq!(values(&mut other), [2]);
}

#[test]
fn dropping_a_subscriber_wakes_a_blocked_publisher() {
    let t = Topic::with_capacity(1).unwrap();
    let sub = t.subscribe(StartAt::Earliest).unwrap();
    t.try_publish(0).unwrap();
    let (count, waker) = counting_waker();
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(t.publish(1));
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    drop(sub);
    assert!(count.0.load(Ordering::SeqCst) >= 1, "publisher not woken");
    assert!(matches!(fut.as_mut().poll(&mut cx), Poll::Ready(Ok(r)) if r.offset == 1));
}

#[test]
fn stats_count_each_subscriber_once() {
    let t = Topic::<u8>::new(TopicConfig::new(4).partitions(3)).unwrap();
    let _all = t.subscribe(StartAt::Latest).unwrap();
    assert_eq!(
        t.stats().subscribers,
        1,
        "a subscriber of 3 partitions counts once"
    );
    let _p1 = t.subscribe_partition(1, StartAt::Latest).unwrap();
    let _p2 = t.subscribe_partition(2, StartAt::Latest).unwrap();
    let s = t.stats();
    assert_eq!(
        s.partitions
            .iter()
            .map(|p| p.subscribers)
            .collect::<Vec<_>>(),
        [1, 2, 2]
    );
    assert_eq!(s.subscribers, 3, "three distinct subscribers exist");
}

// ----- blocking front end -------------------------------------------------------------

#[cfg(feature = "std")]
#[test]
fn blocking_recv_and_timeouts() {
    let t = Topic::with_capacity(2).unwrap();
    let mut sub = t.subscribe(StartAt::Latest).unwrap();
    assert_eq!(
        sub.recv_blocking_timeout(Duration::from_millis(5))
            .unwrap_err(),
        RecvTimeoutError::Timeout
    );
    let mut buf = Vec::new();
    assert_eq!(
        sub.recv_many_blocking_timeout(&mut buf, 4, Duration::from_millis(5))
            .unwrap_err(),
        RecvTimeoutError::Timeout
    );
    t.publish_blocking(1).unwrap();
    t.publish_blocking(2).unwrap();
    // Full under Block: times out and hands the value back.
    let err = t
        .publish_blocking_timeout(3, Duration::from_millis(5))
        .unwrap_err();
    assert_eq!(err.into_inner(), 3);
    assert_eq!(t.stats().partitions[0].waiting_publishers, 0);
    assert_eq!(sub.recv_blocking().unwrap().into_value(), 1);
    assert_eq!(sub.recv_many_blocking(&mut buf, 4).unwrap(), 1);
    t.close();
    assert_eq!(sub.recv_blocking().unwrap_err(), RecvError::Closed);
    assert_eq!(
        sub.recv_blocking_timeout(Duration::from_millis(5))
            .unwrap_err(),
        RecvTimeoutError::Closed
    );
    assert_eq!(sub.recv_many_blocking(&mut buf, 4).unwrap(), 0);
}

#[cfg(feature = "std")]
#[test]
fn blocking_recv_across_threads() {
    let t = Topic::<u32>::with_capacity(4).unwrap();
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        loop {
            match sub.recv_blocking() {
                Ok(m) => got.push(m.into_value()),
                Err(RecvError::Closed) => return got,
                Err(e) => panic!("{e:?}"),
            }
        }
    });
    for i in 0..100u32 {
        t.publish_blocking(i).unwrap();
    }
    drop(t);
    assert_eq!(reader.join().unwrap(), (0..100).collect::<Vec<_>>());
}

/// A subscriber that has fetched everything answers `try_recv` without the partition's
/// lock; it must still see every later publish, a seek back and the close.
#[test]
fn try_recv_of_a_caught_up_subscriber_sees_publishes_seeks_and_close() {
    let topic = Topic::<u64>::new(TopicConfig::new(8).partitions(2)).unwrap();
    topic.try_publish_to(1, 10).unwrap();
    let mut latest = topic.subscribe(StartAt::Latest).unwrap();
    let mut s = topic.subscribe(StartAt::Earliest).unwrap();
    assert_eq!(s.try_recv().unwrap().into_value(), 10);
    assert!(matches!(s.try_recv(), Err(TryRecvError::Empty)));
    assert!(matches!(latest.try_recv(), Err(TryRecvError::Empty)));
    topic.try_publish_to(0, 11).unwrap();
    assert_eq!(s.try_recv().unwrap().into_value(), 11);
    assert_eq!(latest.try_recv().unwrap().into_value(), 11);
    assert!(matches!(s.try_recv(), Err(TryRecvError::Empty)));
    let batch = topic.publish_batch(vec![12, 13]);
    block_on(batch).unwrap();
    let mut buf = Vec::new();
    assert_eq!(s.try_recv_many(&mut buf, 10).unwrap(), 2);
    assert!(matches!(
        s.try_recv_many(&mut buf, 10),
        Err(TryRecvError::Empty)
    ));
    s.seek_partition(1, 0).unwrap();
    assert_eq!(s.try_recv().unwrap().into_value(), 10);
    assert!(matches!(s.try_recv(), Err(TryRecvError::Empty)));
    topic.close();
    assert!(matches!(s.try_recv(), Err(TryRecvError::Closed)));
    // The other one drains what it had not read, then sees the close.
    assert_eq!(latest.try_recv().unwrap().into_value(), 12);
    assert_eq!(latest.try_recv().unwrap().into_value(), 13);
    assert!(matches!(latest.try_recv(), Err(TryRecvError::Closed)));
}

/// A blocking receive that finds its answer ready (a gap, a message, the end) gives it
/// as the async receive would, without waiting: for a subscriber and a group member, with
/// and without a timeout.
#[cfg(feature = "std")]
#[test]
fn blocking_receives_answer_what_is_ready_as_the_async_receive_does() {
    let topic = Topic::new(TopicConfig::new(2).overflow(Overflow::DropOldest)).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    let mut member = topic.group("g", StartAt::Earliest).unwrap();
    for i in 0..5u32 {
        topic.try_publish(i).unwrap();
    }
    // Offsets 0..3 were dropped for room: each reader is told before it reads on.
    assert!(matches!(sub.recv_blocking(), Err(RecvError::Lagged(3))));
    assert!(matches!(
        member.recv_blocking_timeout(Duration::from_secs(60)),
        Err(RecvTimeoutError::Lagged(3))
    ));
    assert_eq!(*sub.recv_blocking().unwrap().value(), 3);
    assert_eq!(*member.recv_blocking().unwrap().value(), 3);
    let m = sub.recv_blocking_timeout(Duration::ZERO).unwrap();
    assert_eq!((m.offset(), *m.value()), (4, 4));
    assert_eq!(
        *member
            .recv_blocking_timeout(Duration::ZERO)
            .unwrap()
            .value(),
        4
    );
    assert!(matches!(
        sub.recv_blocking_timeout(Duration::ZERO),
        Err(RecvTimeoutError::Timeout)
    ));
    drop(topic);
    assert!(matches!(sub.recv_blocking(), Err(RecvError::Closed)));
    assert!(matches!(
        member.recv_blocking_timeout(Duration::from_secs(60)),
        Err(RecvTimeoutError::Closed)
    ));
    assert_eq!(sub.lag(), 0);
}

/// The batch receives likewise: a blocking `recv_many` that finds its answer ready (a gap,
/// messages, the end) gives what the async `recv_many` gives a twin reader at the same
/// place, for subscribers and group members, with and without a timeout; `limit` 0 is
/// `Ok(0)` and an empty topic with a zero timeout times out.
#[cfg(feature = "std")]
#[test]
fn blocking_batch_receives_answer_what_is_ready_as_the_async_receive_many_does() {
    let topic = Topic::new(TopicConfig::new(4).overflow(Overflow::DropOldest)).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    let mut twin = topic.subscribe(StartAt::Earliest).unwrap();
    let mut member = topic.group("g", StartAt::Earliest).unwrap();
    let mut member_twin = topic.group("h", StartAt::Earliest).unwrap();
    for i in 0..7u32 {
        topic.try_publish(i).unwrap();
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let values = |buf: &mut Vec<Message<u32>>| -> Vec<(u64, u32)> {
        buf.drain(..).map(|m| (m.offset(), *m.value())).collect()
    };
    // Offsets 0..3 were dropped for room: the gap first, then the batch.
    let gap = sub.recv_many_blocking(&mut a, 2);
    assert!(matches!(gap, Err(RecvError::Lagged(3))), "{gap:?}");
    assert!(matches!(
        block_on(twin.recv_many(&mut b, 2)),
        Err(RecvError::Lagged(3))
    ));
    let gap = member.recv_many_blocking_timeout(&mut a, 2, Duration::from_secs(60));
    assert!(matches!(gap, Err(RecvTimeoutError::Lagged(3))), "{gap:?}");
    assert!(matches!(
        block_on(member_twin.recv_many(&mut b, 2)),
        Err(RecvError::Lagged(3))
    ));
    assert_eq!(sub.recv_many_blocking(&mut a, 2).unwrap(), 2);
    assert_eq!(block_on(twin.recv_many(&mut b, 2)).unwrap(), 2);
    assert_eq!(values(&mut a), values(&mut b));
    assert_eq!(member.recv_many_blocking(&mut a, 0).unwrap(), 0);
    assert_eq!(
        member
            .recv_many_blocking_timeout(&mut a, 10, Duration::ZERO)
            .unwrap(),
        4
    );
    assert_eq!(block_on(member_twin.recv_many(&mut b, 10)).unwrap(), 4);
    assert_eq!(values(&mut a), [(3, 3), (4, 4), (5, 5), (6, 6)]);
    assert_eq!(values(&mut b), [(3, 3), (4, 4), (5, 5), (6, 6)]);
    assert_eq!(
        sub.recv_many_blocking_timeout(&mut a, 10, Duration::ZERO)
            .unwrap(),
        2
    );
    assert_eq!(block_on(twin.recv_many(&mut b, 10)).unwrap(), 2);
    assert_eq!(values(&mut a), [(5, 5), (6, 6)]);
    assert_eq!(values(&mut b), [(5, 5), (6, 6)]);
    assert!(matches!(
        sub.recv_many_blocking_timeout(&mut a, 10, Duration::ZERO),
        Err(RecvTimeoutError::Timeout)
    ));
    assert!(matches!(
        member.recv_many_blocking_timeout(&mut a, 10, Duration::ZERO),
        Err(RecvTimeoutError::Timeout)
    ));
    topic.close();
    // The end is `Ok(0)`, as the async `recv_many` says it.
    assert_eq!(sub.recv_many_blocking(&mut a, 10).unwrap(), 0);
    assert_eq!(block_on(twin.recv_many(&mut b, 10)).unwrap(), 0);
    assert_eq!(
        member
            .recv_many_blocking_timeout(&mut a, 10, Duration::from_secs(60))
            .unwrap(),
        0
    );
    assert_eq!(block_on(member_twin.recv_many(&mut b, 10)).unwrap(), 0);
    assert!(a.is_empty() && b.is_empty());
}
