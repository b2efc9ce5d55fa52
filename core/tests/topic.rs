//! The topic as a bounded log: offsets, capacity, batches, closing, replay.

extern crate alloc;

use futures_executor::block_on;
use memq_core::{Error, Overflow, PublishError, StartAt, Topic, TopicConfig, TryRecvError};

fn drain<T: Clone>(sub: &mut memq_core::Subscriber<T>) -> Vec<(u64, T)> {
    let mut out = Vec::new();
    loop {
        match sub.try_recv() {
            Ok(m) => out.push((m.offset(), m.into_value())),
            Err(TryRecvError::Empty) | Err(TryRecvError::Closed) => return out,
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
}

#[test]
fn offsets_start_at_zero_and_are_contiguous() {
    let topic = Topic::with_capacity(64).unwrap();
    for i in 0..50u64 {
        let r = topic.try_publish(i).unwrap();
        assert_eq!(r.offset, i);
        assert_eq!(r.partition, 0);
    }
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    let got = drain(&mut sub);
    assert_eq!(got.len(), 50);
    for (i, (off, v)) in got.into_iter().enumerate() {
        assert_eq!(off, i as u64);
        assert_eq!(v, i as u64);
    }
}

#[test]
fn async_publish_offsets_are_contiguous() {
    let topic = Topic::with_capacity(8).unwrap();
    block_on(async {
        for i in 0..8u64 {
            assert_eq!(topic.publish(i).await.unwrap().offset, i);
        }
    });
}

#[test]
fn offsets_keep_growing_after_the_ring_wraps() {
    // No readers under Block: the oldest is evicted, offsets never wrap or repeat.
    let topic = Topic::with_capacity(3).unwrap();
    for i in 0..10u64 {
        assert_eq!(topic.try_publish(i).unwrap().offset, i);
    }
    let stats = topic.stats();
    assert_eq!((stats.partitions[0].low, stats.partitions[0].high), (7, 10));
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    assert_eq!(drain(&mut sub), vec![(7, 7), (8, 8), (9, 9)]);
}

#[test]
fn capacity_is_reported_exactly_as_asked() {
    for cap in [1usize, 3, 5, 7, 100, 1000, 1023, 1025] {
        let topic = Topic::<u8>::with_capacity(cap).unwrap();
        assert_eq!(topic.capacity(), cap);
        assert_eq!(topic.stats().capacity, cap);
        let cfg = TopicConfig::new(cap);
        assert_eq!(cfg.get_capacity(), cap);
    }
}

#[test]
fn capacity_is_honoured_exactly_not_rounded() {
    // A capacity of 3 retains exactly 3 messages (not 4).
    for cap in [1usize, 3, 5, 1000] {
        let topic = Topic::with_capacity(cap).unwrap();
        let _sub = topic.subscribe(StartAt::Earliest).unwrap();
        for i in 0..cap {
            topic.try_publish(i).unwrap();
        }
        assert!(topic.try_publish(cap).unwrap_err().is_full(), "cap {cap}");
        assert_eq!(topic.stats().depth, cap as u64);
    }
}

#[test]
fn defaults() {
    let topic = Topic::<u8>::with_capacity(4).unwrap();
    assert_eq!(topic.partitions(), 1);
    assert_eq!(topic.overflow(), Overflow::Block);
    assert_eq!(topic.name(), None);
    assert!(!topic.is_closed());
    assert!(topic.groups().is_empty());
    let stats = topic.stats();
    assert_eq!(stats.partitions.len(), 1);
    assert_eq!(stats.published, 0);
    assert_eq!(stats.depth, 0);
    assert!(!stats.closed);
}

#[test]
fn zero_capacity_is_an_error() {
    assert_eq!(
        Topic::<u8>::with_capacity(0).unwrap_err(),
        Error::ZeroCapacity
    );
}

#[test]
fn publish_batch_gets_contiguous_offsets() {
    let topic = Topic::with_capacity(16).unwrap();
    topic.try_publish(100).unwrap();
    let r = block_on(topic.publish_batch(vec![1, 2, 3, 4])).unwrap();
    assert_eq!(r.offset, 1);
    let r = topic.try_publish_batch(vec![5, 6]).unwrap();
    assert_eq!(r.offset, 5);
    assert_eq!(topic.try_publish(7).unwrap().offset, 7);
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    assert_eq!(
        drain(&mut sub),
        vec![
            (0, 100),
            (1, 1),
            (2, 2),
            (3, 3),
            (4, 4),
            (5, 5),
            (6, 6),
            (7, 7)
        ]
    );
}

#[test]
fn empty_batch_publishes_nothing() {
    let topic = Topic::<u8>::with_capacity(4).unwrap();
    topic.try_publish(1).unwrap();
    let r = topic.try_publish_batch(Vec::new()).unwrap();
    assert_eq!(r.offset, 1, "an empty batch reports the next offset");
    assert_eq!(topic.stats().published, 1);
    assert_eq!(topic.try_publish(2).unwrap().offset, 1);
}

#[test]
fn batch_larger_than_capacity_is_full_and_handed_back_intact() {
    let topic = Topic::with_capacity(3).unwrap();
    let batch: Vec<String> = (0..4).map(|i| format!("m{i}")).collect();
    let err = topic.try_publish_batch(batch.clone()).unwrap_err();
    assert!(err.is_full());
    assert_eq!(err.into_inner(), batch);
    // The async form fails too rather than waiting forever.
    let err = block_on(topic.publish_batch(batch.clone())).unwrap_err();
    assert!(matches!(err, PublishError::Full(_)));
    assert_eq!(err.into_inner(), batch);
    assert_eq!(topic.stats().published, 0);
    // A batch of exactly the capacity fits.
    assert_eq!(
        topic.try_publish_batch(batch[..3].to_vec()).unwrap().offset,
        0
    );
}

#[cfg(feature = "std")]
#[test]
fn a_closed_topic_refuses_a_batch_as_closed_whatever_its_size() {
    // A publisher that stops on `Closed` must see it even for a batch that could never
    // fit: `Full` would read as "try again later" on a topic that is gone.
    let topic = Topic::new(TopicConfig::new(2).partitions(2)).unwrap();
    topic.close();
    let batch = vec![1u8, 2, 3];
    let err = topic.try_publish_batch(batch.clone()).unwrap_err();
    assert!(err.is_closed(), "{err:?}");
    assert_eq!(err.into_inner(), batch);
    let err = block_on(topic.publish_batch(batch.clone())).unwrap_err();
    assert!(err.is_closed(), "{err:?}");
    let err = topic.try_publish_batch_to(1, batch.clone()).unwrap_err();
    assert!(err.is_closed(), "{err:?}");
    let err = topic
        .try_publish_batch_keyed(*b"k", batch.clone())
        .unwrap_err();
    assert!(err.is_closed(), "{err:?}");
    let err = topic.publish_batch_blocking(batch.clone()).unwrap_err();
    assert!(err.is_closed(), "{err:?}");
    assert_eq!(err.into_inner(), batch);
}

#[test]
fn batch_is_all_or_nothing_when_it_does_not_fit() {
    let topic = Topic::with_capacity(4).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish(0).unwrap();
    topic.try_publish(1).unwrap();
    // Two free slots, the subscriber holds the rest: three do not fit, none is written.
    let err = topic.try_publish_batch(vec![10, 11, 12]).unwrap_err();
    assert!(err.is_full());
    assert_eq!(err.into_inner(), vec![10, 11, 12]);
    assert_eq!(topic.stats().published, 2);
    // Two do fit.
    assert_eq!(topic.try_publish_batch(vec![10, 11]).unwrap().offset, 2);
    // Once the reader moves on, the whole batch goes in.
    assert_eq!(sub.try_recv().unwrap().offset(), 0);
    assert_eq!(sub.try_recv().unwrap().offset(), 1);
    assert_eq!(topic.try_publish_batch(vec![12, 13]).unwrap().offset, 4);
    assert_eq!(drain(&mut sub), vec![(2, 10), (3, 11), (4, 12), (5, 13)]);
}

#[test]
fn batch_under_reject_is_full_with_a_reader_behind() {
    let topic = Topic::new(TopicConfig::new(2).overflow(Overflow::Reject)).unwrap();
    let _sub = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish(1).unwrap();
    let err = block_on(topic.publish_batch(vec![2, 3])).unwrap_err();
    assert!(err.is_full());
    assert_eq!(err.into_inner(), vec![2, 3]);
}

#[test]
fn batch_under_drop_oldest_evicts_for_room() {
    let topic = Topic::new(TopicConfig::new(3).overflow(Overflow::DropOldest)).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish_batch(vec![0, 1, 2]).unwrap();
    assert_eq!(topic.try_publish_batch(vec![3, 4]).unwrap().offset, 3);
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Lagged(2));
    assert_eq!(drain(&mut sub), vec![(2, 2), (3, 3), (4, 4)]);
    assert_eq!(topic.stats().evicted, 2);
}

#[cfg(feature = "std")]
#[test]
fn close_hands_the_value_back_to_publishers() {
    let topic = Topic::with_capacity(4).unwrap();
    topic.close();
    assert!(topic.is_closed());
    assert!(topic.stats().closed);

    let err = topic.try_publish(String::from("try")).unwrap_err();
    assert!(err.is_closed());
    assert!(matches!(&err, PublishError::Closed(v) if v == "try"));

    let err = block_on(topic.publish(String::from("async"))).unwrap_err();
    assert!(matches!(&err, PublishError::Closed(v) if v == "async"));
    assert_eq!(err.into_inner(), "async");

    let err = topic
        .try_publish_batch(vec![String::from("b")])
        .unwrap_err();
    assert!(err.is_closed());
    assert_eq!(err.into_inner(), vec![String::from("b")]);

    let err = block_on(topic.publish_batch(vec![String::from("c")])).unwrap_err();
    assert!(err.is_closed());

    let err = topic
        .publish_blocking(String::from("blocking"))
        .unwrap_err();
    assert_eq!(err.into_inner(), "blocking");
    assert_eq!(topic.stats().published, 0);
}

#[test]
fn close_lets_readers_drain_then_reports_closed() {
    let topic = Topic::with_capacity(8).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    for i in 0..3 {
        topic.try_publish(i).unwrap();
    }
    topic.close();
    block_on(async {
        for i in 0..3 {
            assert_eq!(sub.recv().await.unwrap().into_value(), i);
        }
        assert_eq!(sub.recv().await.unwrap_err(), memq_core::RecvError::Closed);
        // And it stays closed.
        assert_eq!(sub.recv().await.unwrap_err(), memq_core::RecvError::Closed);
    });
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Closed);
    // A subscriber made after closing still replays what is retained.
    let mut late = topic.subscribe(StartAt::Earliest).unwrap();
    assert_eq!(drain(&mut late), vec![(0, 0), (1, 1), (2, 2)]);
    assert_eq!(late.try_recv().unwrap_err(), TryRecvError::Closed);
}

#[test]
fn close_is_idempotent() {
    let topic = Topic::<u8>::with_capacity(2).unwrap();
    topic.close();
    topic.close();
    assert!(topic.is_closed());
}

#[test]
fn dropping_the_last_topic_handle_closes() {
    let topic = Topic::with_capacity(4).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish(1).unwrap();
    drop(topic);
    assert_eq!(sub.try_recv().unwrap().into_value(), 1);
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Closed);
    assert_eq!(
        block_on(sub.recv()).unwrap_err(),
        memq_core::RecvError::Closed
    );
}

#[test]
fn a_clone_keeps_the_topic_open() {
    let topic = Topic::with_capacity(4).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    let clone = topic.clone();
    drop(topic);
    assert!(!clone.is_closed());
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Empty);
    clone.try_publish(5).unwrap();
    assert_eq!(sub.try_recv().unwrap().into_value(), 5);
    let clone2 = clone.clone();
    drop(clone);
    assert!(!clone2.is_closed());
    drop(clone2);
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Closed);
}

#[test]
fn clones_share_one_log() {
    let a = Topic::with_capacity(8).unwrap();
    let b = a.clone();
    assert_eq!(a.try_publish(1).unwrap().offset, 0);
    assert_eq!(b.try_publish(2).unwrap().offset, 1);
    let mut sub = b.subscribe(StartAt::Earliest).unwrap();
    assert_eq!(drain(&mut sub), vec![(0, 1), (1, 2)]);
    // close() through one handle closes it for all.
    a.close();
    assert!(b.is_closed());
    assert!(b.try_publish(3).unwrap_err().is_closed());
}

#[test]
fn messages_stay_after_being_read_so_late_subscribers_replay() {
    let topic = Topic::with_capacity(8).unwrap();
    let mut first = topic.subscribe(StartAt::Earliest).unwrap();
    for i in 0..5 {
        topic.try_publish(i).unwrap();
    }
    assert_eq!(drain(&mut first).len(), 5);
    assert_eq!(topic.stats().depth, 5);
    let mut late = topic.subscribe(StartAt::Earliest).unwrap();
    assert_eq!(
        drain(&mut late),
        vec![(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)]
    );
    // Latest sees only new ones.
    let mut latest = topic.subscribe(StartAt::Latest).unwrap();
    assert_eq!(latest.try_recv().unwrap_err(), TryRecvError::Empty);
    topic.try_publish(5).unwrap();
    assert_eq!(drain(&mut latest), vec![(5, 5)]);
}

#[test]
fn every_subscriber_sees_every_message() {
    let topic = Topic::with_capacity(16).unwrap();
    let mut subs: Vec<_> = (0..5)
        .map(|_| topic.subscribe(StartAt::Latest).unwrap())
        .collect();
    for i in 0..10 {
        topic.try_publish(i).unwrap();
    }
    for sub in &mut subs {
        let got: Vec<i32> = drain(sub).into_iter().map(|(_, v)| v).collect();
        assert_eq!(got, (0..10).collect::<Vec<_>>());
    }
    assert_eq!(topic.stats().delivered, 50);
    assert_eq!(topic.stats().published, 10);
}

#[test]
fn message_accessors() {
    let topic = Topic::with_capacity(4).unwrap();
    topic.try_publish(String::from("hello")).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    let m = sub.try_recv().unwrap();
    assert_eq!(m.offset(), 0);
    assert_eq!(m.partition(), 0);
    assert_eq!(m.timestamp(), None);
    assert_eq!(m.value(), "hello");
    assert_eq!(m.len(), 5, "Message derefs to the value");
    assert_eq!(m.into_value(), "hello");
}

#[test]
fn large_values_are_shared_not_copied() {
    use alloc::sync::Arc;
    let topic = Topic::with_capacity(4).unwrap();
    let big = Arc::new(vec![0u8; 1 << 20]);
    let mut a = topic.subscribe(StartAt::Latest).unwrap();
    let mut b = topic.subscribe(StartAt::Latest).unwrap();
    topic.try_publish(big.clone()).unwrap();
    let ma = a.try_recv().unwrap().into_value();
    let mb = b.try_recv().unwrap().into_value();
    assert!(Arc::ptr_eq(&ma, &big) && Arc::ptr_eq(&mb, &big));
}

#[test]
fn evicted_values_are_dropped() {
    use alloc::sync::Arc;
    let topic = Topic::with_capacity(2).unwrap();
    let tracked = Arc::new(());
    for _ in 0..5 {
        topic.try_publish(tracked.clone()).unwrap();
    }
    // The ring keeps exactly two clones alive.
    assert_eq!(Arc::strong_count(&tracked), 3);
    drop(topic);
    assert_eq!(Arc::strong_count(&tracked), 1);
}

#[test]
fn debug_does_not_need_t_debug() {
    struct Opaque;
    let topic = Topic::<Opaque>::with_capacity(2).unwrap();
    let s = format!("{topic:?}");
    assert!(s.contains("Topic"), "{s}");
    let sub = topic.subscribe(StartAt::Earliest).unwrap();
    assert!(format!("{sub:?}").contains("Subscriber"));
    let c = topic.group("g", StartAt::Earliest).unwrap();
    assert!(format!("{c:?}").contains("Consumer"));
    let fut = topic.publish(Opaque);
    assert!(format!("{fut:?}").contains("Publish"));
}

#[test]
// A terabyte-sized allocation that the OS refuses; Miri would try to make it.
#[cfg_attr(miri, ignore)]
fn allocation_errors_name_what_could_not_be_allocated() {
    // Review finding: a partition table too large to allocate was reported as a log of
    // capacity 1 that could not be.
    let err = Topic::<u8>::new(TopicConfig::new(1).partitions(u32::MAX)).unwrap_err();
    assert_eq!(
        err,
        Error::TooManyPartitions {
            partitions: u32::MAX
        },
        "{err}"
    );
    let err = Topic::<u8>::with_capacity(usize::MAX).unwrap_err();
    assert_eq!(
        err,
        Error::CapacityTooLarge {
            capacity: usize::MAX
        }
    );
}

/// A thread-local whose destructor uses memq's blocking calls, as code that flushes on
/// thread exit does.
#[cfg(feature = "std")]
struct FlushOnExit {
    topic: Topic<u32>,
    sub: memq_core::Subscriber<u32>,
    out: std::sync::mpsc::Sender<(bool, bool, bool)>,
}

#[cfg(feature = "std")]
impl Drop for FlushOnExit {
    fn drop(&mut self) {
        let published = self.topic.publish_blocking(2).is_ok();
        let timed = self
            .topic
            .publish_blocking_timeout(3, std::time::Duration::from_millis(100))
            .is_ok();
        let received = self.sub.recv_blocking().is_ok();
        let _ = self.out.send((published, timed, received));
    }
}

#[cfg(feature = "std")]
std::thread_local! {
    static FLUSH: std::cell::RefCell<Option<FlushOnExit>> = const { std::cell::RefCell::new(None) };
}

#[cfg(feature = "std")]
#[test]
fn blocking_calls_work_in_a_thread_locals_destructor_at_thread_exit() {
    // From review of the C ABI: once a thread had made one blocking call, memq's own
    // thread-local was gone by the time later destructors ran, and a blocking call from
    // one of them panicked ("cannot access a Thread Local Storage value during or after
    // destruction").
    let topic: Topic<u32> = Topic::with_capacity(8).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let t = topic.clone();
    std::thread::spawn(move || {
        let sub = t.subscribe(StartAt::Earliest).unwrap();
        // Set up first, so destroyed last (after memq's thread-local, made next).
        FLUSH.with(|f| {
            *f.borrow_mut() = Some(FlushOnExit {
                topic: t.clone(),
                sub,
                out: tx,
            })
        });
        t.publish_blocking(1).unwrap();
    })
    .join()
    .unwrap();
    assert_eq!(rx.recv().unwrap(), (true, true, true));
}

#[cfg(feature = "std")]
#[test]
fn a_receipt_counts_what_was_published() {
    let topic = Topic::with_capacity(16).unwrap();
    let r = topic.try_publish(0).unwrap();
    assert_eq!((r.offset, r.count, r.offsets()), (0, 1, 0..1));
    assert!(!r.is_empty());
    let r = block_on(topic.publish_batch(vec![1, 2, 3])).unwrap();
    assert_eq!((r.offset, r.count, r.offsets()), (1, 3, 1..4));
    let r = topic.publish_batch_blocking(vec![4, 5]).unwrap();
    assert_eq!(r.offsets(), 4..6);
    assert_eq!(block_on(topic.publish(6)).unwrap().count, 1);
}

/// Every form of batch publish answers an empty batch alike: at once, with an empty
/// receipt (count 0, the next offset), whether the partition is full or not.
#[cfg(feature = "std")]
#[test]
fn every_batch_publish_answers_an_empty_batch_with_an_empty_receipt() {
    use std::time::Duration;
    let topic = Topic::<u8>::new(TopicConfig::new(2).partitions(2)).unwrap();
    // A reader holds partition 0 full under `Block`: an empty batch still does not wait.
    let _sub = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish_to(0, 1).unwrap();
    topic.try_publish_to(0, 2).unwrap();
    let p0 = |r: memq_core::Receipt| {
        assert_eq!((r.partition, r.offset, r.count), (0, 2, 0));
        assert!(r.is_empty());
        assert_eq!(r.offsets(), 2..2);
    };
    p0(topic.try_publish_batch_to(0, Vec::new()).unwrap());
    p0(block_on(topic.publish_batch_to(0, Vec::new())).unwrap());
    p0(topic.publish_batch_to_blocking(0, Vec::new()).unwrap());
    p0(topic
        .publish_batch_to_blocking_timeout(0, Vec::new(), Duration::from_millis(1))
        .unwrap());
    let key = (0..)
        .find(|k: &u32| memq_core::key_partition(k.to_string(), 2) == 0)
        .unwrap();
    let key = key.to_string();
    p0(topic.try_publish_batch_keyed(&key, Vec::new()).unwrap());
    p0(block_on(topic.publish_batch_keyed(&key, Vec::new())).unwrap());
    p0(topic
        .publish_batch_keyed_blocking(&key, Vec::new())
        .unwrap());
    p0(topic
        .publish_batch_keyed_blocking_timeout(&key, Vec::new(), Duration::from_millis(1))
        .unwrap());
    // Round-robin: whichever partition the turn gives, nothing is published there.
    for r in [
        topic.try_publish_batch(Vec::new()).unwrap(),
        block_on(topic.publish_batch(Vec::new())).unwrap(),
        topic.publish_batch_blocking(Vec::new()).unwrap(),
        topic
            .publish_batch_blocking_timeout(Vec::new(), Duration::from_millis(1))
            .unwrap(),
    ] {
        assert_eq!(r.count, 0);
        assert_eq!(r.offset, [2, 0][r.partition as usize]);
    }
    assert_eq!(topic.stats().published, 2);
    // Still an error where any publish is one.
    assert!(matches!(
        topic.try_publish_batch_to(2, Vec::new()),
        Err(PublishError::InvalidPartition(_))
    ));
    topic.close();
    assert!(topic.try_publish_batch(Vec::new()).unwrap_err().is_closed());
}
