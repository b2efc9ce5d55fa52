//! Durable topics: replay beyond memory, offsets across restarts, keys, retention under
//! each overflow policy, receipts and the async API.

use std::time::Duration;

use memq_core::{Overflow, StartAt, TopicConfig};
use memq_store::{
    DurableConfig, DurablePublishError, DurableRecvError, DurableTopic, Retention, SyncPolicy,
};

fn durable() -> DurableConfig {
    DurableConfig::new(SyncPolicy::Never).segment_bytes(4096)
}

fn body(i: u64) -> Vec<u8> {
    format!("payload {i:05}").into_bytes()
}

#[test]
fn a_subscriber_replays_far_more_than_memory_holds_in_order() {
    let dir = tempfile::tempdir().unwrap();
    // Memory holds 8 messages; the log keeps everything.
    let topic = DurableTopic::open(dir.path(), TopicConfig::new(8), durable()).unwrap();
    let mut early = topic.subscribe(StartAt::Latest).unwrap();
    for i in 0..1000 {
        let r = topic.publish_blocking(body(i)).unwrap();
        assert_eq!((r.partition, r.offset, r.durable), (0, i, false));
    }
    // A subscriber that read nothing while 1000 went by, and one that starts now at the
    // beginning: both read all 1000, from disk and then from memory.
    let mut late = topic.subscribe(StartAt::Earliest).unwrap();
    for sub in [&mut early, &mut late] {
        for i in 0..1000 {
            let m = sub.try_recv().unwrap();
            assert_eq!((m.offset, m.payload.as_ref()), (i, &body(i)[..]));
        }
        assert!(matches!(sub.try_recv(), Err(DurableRecvError::Empty)));
    }
    // And what comes next comes from memory.
    topic.publish_blocking(body(1000)).unwrap();
    assert_eq!(late.try_recv().unwrap().offset, 1000);
    // A start at an offset.
    let mut at = topic.subscribe(StartAt::Offset(500)).unwrap();
    assert_eq!(at.try_recv().unwrap().offset, 500);
    assert!(topic.subscribe(StartAt::Offset(1002)).is_err());
}

#[test]
fn a_subscriber_that_falls_behind_the_cache_while_reading_catches_up_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let topic = DurableTopic::open(dir.path(), TopicConfig::new(4), durable()).unwrap();
    let mut sub = topic.subscribe(StartAt::Latest).unwrap();
    let mut next = 0;
    for round in 0..50u64 {
        // Bursts larger than the cache, read in part in between.
        for _ in 0..(round % 9 + 1) {
            topic.publish_blocking(body(next)).unwrap();
            next += 1;
        }
        for _ in 0..(round % 5) {
            let _ = sub.try_recv();
        }
    }
    let mut seen = Vec::new();
    let mut sub2 = topic.subscribe(StartAt::Earliest).unwrap();
    while let Ok(m) = sub2.try_recv() {
        seen.push(m.offset);
    }
    assert_eq!(seen, (0..next).collect::<Vec<_>>());
    // The first subscriber, whatever it read, reads on in order to the end.
    let mut last = None;
    while let Ok(m) = sub.try_recv() {
        if let Some(l) = last {
            assert_eq!(m.offset, l + 1);
        }
        last = Some(m.offset);
    }
    assert_eq!(last, Some(next - 1));
}

#[test]
fn offsets_keys_and_payloads_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = || TopicConfig::new(16).partitions(3);
    let mut keyed = Vec::new();
    {
        let topic = DurableTopic::open(dir.path(), cfg(), durable()).unwrap();
        for i in 0..90u64 {
            let key = format!("user-{}", i % 7);
            let r = topic.publish_keyed_blocking(key.clone(), body(i)).unwrap();
            assert_eq!(r.partition, memq_core::key_partition(&key, 3));
            keyed.push((r.partition, r.offset, key, i));
        }
    }
    let topic = DurableTopic::open(dir.path(), cfg(), durable()).unwrap();
    // Offsets go on where each partition ended.
    for p in 0..3 {
        let n = keyed.iter().filter(|k| k.0 == p).count() as u64;
        assert_eq!(topic.next_offset(p), Some(n));
        assert_eq!(topic.publish_to_blocking(p, "after").unwrap().offset, n);
    }
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    let mut got = Vec::new();
    while let Ok(m) = sub.try_recv() {
        got.push(m);
    }
    assert_eq!(got.len(), 93);
    for (p, off, key, i) in keyed {
        let m = got
            .iter()
            .find(|m| m.partition == p && m.offset == off)
            .unwrap();
        assert_eq!(m.key.as_deref(), Some(key.as_bytes()));
        assert_eq!(m.payload.as_ref(), &body(i)[..]);
        assert!(
            m.timestamp > 1_600_000_000_000,
            "a wall-clock timestamp in ms"
        );
    }
    // Another partition count for the same directory is refused.
    drop(sub);
    drop(topic);
    let err =
        DurableTopic::open(dir.path(), TopicConfig::new(16).partitions(2), durable()).unwrap_err();
    assert!(err.to_string().contains("3 partitions"), "{err}");
}

#[test]
fn under_block_a_reader_holds_retention_back_and_publishers_wait_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let keep = Retention {
        max_segments: Some(2),
        ..Retention::default()
    };
    let topic = DurableTopic::open(
        dir.path(),
        TopicConfig::new(4).overflow(Overflow::Block),
        durable().retention(keep),
    )
    .unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    // try_publish fills the log to its limit and then reports Full, handing back.
    let mut n = 0u64;
    let back = loop {
        match topic.try_publish(body(n)) {
            Ok(_) => n += 1,
            Err(DurablePublishError::Full(back)) => break back,
            Err(e) => panic!("{e}"),
        }
        assert!(n < 10_000);
    };
    assert_eq!(back.as_ref(), &body(n)[..]);
    // A blocking publisher waits until the subscriber has read a segment's worth.
    let t2 = topic.clone();
    let publisher = std::thread::spawn(move || t2.publish_blocking(body(n)).unwrap().offset);
    for i in 0..=n {
        let m = sub.recv_blocking().unwrap();
        assert_eq!(m.offset, i);
    }
    assert_eq!(publisher.join().unwrap(), n);
    // Nothing was lost: the subscriber read every offset, 0 to n.
}

#[test]
fn under_drop_oldest_retention_deletes_and_a_slow_reader_is_told_how_much() {
    let dir = tempfile::tempdir().unwrap();
    let keep = Retention {
        max_segments: Some(2),
        ..Retention::default()
    };
    let topic = DurableTopic::open(
        dir.path(),
        TopicConfig::new(4).overflow(Overflow::DropOldest),
        durable().retention(keep),
    )
    .unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    for i in 0..2000 {
        topic.publish_blocking(body(i)).unwrap();
    }
    let start = topic.start_offset(0).unwrap();
    assert!(start > 0);
    match sub.try_recv() {
        Err(DurableRecvError::Lagged(n)) => assert_eq!(n, start),
        other => panic!("expected Lagged, got {other:?}"),
    }
    let mut expect = start;
    while let Ok(m) = sub.try_recv() {
        assert_eq!(m.offset, expect);
        expect += 1;
    }
    assert_eq!(expect, 2000);
}

#[test]
fn receipts_say_whether_the_message_is_on_disk() {
    for (sync, durable) in [
        (SyncPolicy::Always, true),
        (SyncPolicy::Interval(Duration::from_millis(10)), false),
        (SyncPolicy::Never, false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let topic =
            DurableTopic::open(dir.path(), TopicConfig::new(4), DurableConfig::new(sync)).unwrap();
        assert_eq!(
            topic.publish_blocking("x").unwrap().durable,
            durable,
            "{sync:?}"
        );
    }
}

#[test]
fn the_async_api_publishes_and_receives_on_any_executor() {
    let dir = tempfile::tempdir().unwrap();
    let topic = DurableTopic::open(
        dir.path(),
        TopicConfig::new(4).partitions(2),
        DurableConfig::new(SyncPolicy::Always),
    )
    .unwrap();
    let mut sub = topic.subscribe(StartAt::Latest).unwrap();
    futures_executor::block_on(async {
        for i in 0..20u64 {
            let r = topic
                .publish_keyed(format!("k{}", i % 2), body(i))
                .await
                .unwrap();
            assert!(r.durable);
        }
        let mut got = 0;
        while got < 20 {
            sub.recv().await.unwrap();
            got += 1;
        }
    });
    // A publisher waiting in recv is woken by a publish from another thread.
    let t2 = topic.clone();
    let h = std::thread::spawn(move || {
        futures_executor::block_on(async { sub.recv().await.unwrap().payload })
    });
    futures_executor::block_on(topic.publish("late")).unwrap();
    assert_eq!(h.join().unwrap().as_ref(), b"late");
    drop(t2);
}

#[test]
fn configurations_a_durable_topic_cannot_honour_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = std::sync::Arc::new(memq_core::StdClock::new());
    let ttl = TopicConfig::new(4).clock(clock).ttl(Duration::from_secs(1));
    let err = DurableTopic::open(dir.path(), ttl, durable()).unwrap_err();
    assert!(err.to_string().contains("max_age"), "{err}");
    let err = DurableTopic::open(
        dir.path(),
        TopicConfig::new(4).release_on_read(true),
        durable(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("release_on_read"), "{err}");
    // The same directory twice.
    let _t = DurableTopic::open(dir.path(), TopicConfig::new(4), durable()).unwrap();
    let err = DurableTopic::open(dir.path(), TopicConfig::new(4), durable()).unwrap_err();
    assert!(err.to_string().contains("already open"), "{err}");
}

#[test]
fn closing_ends_subscribers_after_what_was_published_and_refuses_publishes() {
    let dir = tempfile::tempdir().unwrap();
    let topic = DurableTopic::open(dir.path(), TopicConfig::new(4), durable()).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    for i in 0..10 {
        topic.publish_blocking(body(i)).unwrap();
    }
    topic.close();
    assert!(matches!(
        topic.publish_blocking("no"),
        Err(DurablePublishError::Closed(_))
    ));
    for i in 0..10 {
        assert_eq!(sub.recv_blocking().unwrap().offset, i);
    }
    assert!(matches!(sub.recv_blocking(), Err(DurableRecvError::Closed)));
}

#[test]
fn dropping_the_last_topic_handle_ends_its_subscribers() {
    let dir = tempfile::tempdir().unwrap();
    let topic = DurableTopic::open(dir.path(), TopicConfig::new(4), durable()).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    let other = topic.clone();
    other.publish_blocking("one").unwrap();
    drop(topic);
    // A handle remains: still open.
    assert!(!other.is_closed());
    drop(other);
    assert_eq!(sub.recv_blocking().unwrap().payload.as_ref(), b"one");
    assert!(matches!(sub.recv_blocking(), Err(DurableRecvError::Closed)));
}

#[test]
fn batches_are_written_at_once_and_read_like_single_messages() {
    use bytes::Bytes;
    let dir = tempfile::tempdir().unwrap();
    let topic = DurableTopic::open(
        dir.path(),
        TopicConfig::new(8).partitions(2),
        DurableConfig::new(SyncPolicy::Always).segment_bytes(4096),
    )
    .unwrap();
    let mut sub = topic.subscribe(StartAt::Latest).unwrap();
    // Larger than the in-memory cache, and than a segment.
    let batch: Vec<Bytes> = (0..1000).map(|i| Bytes::from(body(i))).collect();
    let r = topic.publish_batch_to_blocking(1, batch).unwrap();
    assert_eq!(
        (r.partition, r.offset, r.count, r.durable),
        (1, 0, 1000, true)
    );
    let r = topic
        .publish_batch_keyed_blocking(
            "k",
            vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")],
        )
        .unwrap();
    let kp = memq_core::key_partition("k", 2);
    assert_eq!((r.partition, r.count), (kp, 2));
    let empty = topic.publish_batch_to_blocking(0, Vec::new()).unwrap();
    assert_eq!(empty.count, 0);
    let mut got = Vec::new();
    while let Ok(m) = sub.try_recv() {
        got.push((m.partition, m.offset, m.payload, m.key));
    }
    assert_eq!(got.len(), 1002);
    let p1: Vec<u64> = got.iter().filter(|m| m.0 == 1).map(|m| m.1).collect();
    let first_keyed = if kp == 1 { 1000 } else { 0 };
    assert_eq!(p1.len(), if kp == 1 { 1002 } else { 1000 });
    assert!(p1.windows(2).all(|w| w[1] == w[0] + 1));
    let keyed: Vec<_> = got
        .iter()
        .filter(|m| m.3.as_deref() == Some(&b"k"[..]))
        .collect();
    assert_eq!(keyed.len(), 2);
    assert_eq!(keyed[0].1, first_keyed);
    // A batch with one record too large is refused whole, and handed back.
    let dir2 = tempfile::tempdir().unwrap();
    let small = DurableTopic::open(
        dir2.path(),
        TopicConfig::new(8),
        DurableConfig::new(SyncPolicy::Never).max_record_bytes(100),
    )
    .unwrap();
    let err = small
        .publish_batch_blocking(vec![Bytes::from_static(b"ok"), Bytes::from(vec![0u8; 200])])
        .unwrap_err();
    assert!(
        matches!(
            &err,
            DurablePublishError::Store(memq_store::StoreError::TooLarge { .. }, _)
        ),
        "{err}"
    );
    assert_eq!(err.into_inner().len(), 2);
    assert_eq!(small.next_offset(0), Some(0));
}

#[test]
fn try_publish_keyed_and_to_never_wait_for_room() {
    let dir = tempfile::tempdir().unwrap();
    let config = TopicConfig::new(8).partitions(2).overflow(Overflow::Block);
    let retention = Retention {
        max_segments: Some(1),
        ..Retention::default()
    };
    let topic = DurableTopic::open(dir.path(), config, durable().retention(retention)).unwrap();
    let key = b"user-7".to_vec();
    let p = memq_core::key_partition(&key, 2);
    let r = topic.try_publish_keyed(key.clone(), body(0)).unwrap();
    assert_eq!((r.partition, r.offset, r.count), (p, 0, 1));
    let r = topic.try_publish_to(1 - p, body(1)).unwrap();
    assert_eq!((r.partition, r.offset), (1 - p, 0));
    assert!(matches!(
        topic.try_publish_to(2, body(2)),
        Err(DurablePublishError::InvalidPartition(_))
    ));
    // A subscriber at the start holds the only segment: a full log is `Full`, at once.
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    let full = (0..10_000).find_map(|i| topic.try_publish_to(p, body(i)).err());
    assert!(
        matches!(full, Some(DurablePublishError::Full(_))),
        "{full:?}"
    );
    // The keyed message kept its key.
    let keyed = std::iter::from_fn(|| sub.try_recv().ok())
        .find(|m| (m.partition, m.offset) == (p, 0))
        .unwrap();
    assert_eq!(keyed.key.as_deref(), Some(&key[..]));
}

#[test]
fn a_publish_with_a_time_limit_waits_for_room_until_then() {
    let dir = tempfile::tempdir().unwrap();
    let retention = Retention {
        max_bytes: Some(8192),
        ..Retention::default()
    };
    let durable = durable().retention(retention);
    let topic = DurableTopic::open(dir.path(), TopicConfig::new(8), durable).unwrap();
    let mut slow = topic.subscribe(StartAt::Earliest).unwrap();
    let mut published = 0u64;
    while topic.try_publish(vec![1u8; 500]).is_ok() {
        published += 1;
    }
    // No room, and no reader moves: the time runs out, the payload comes back.
    let batch = vec![bytes::Bytes::from(vec![3u8; 500]); 3];
    match topic.publish_batch_blocking_timeout(batch.clone(), Duration::from_millis(20)) {
        Err(DurablePublishError::Full(back)) => assert_eq!(back, batch),
        other => panic!("{other:?}"),
    }
    // A reader that moves on while a publish waits lets it through, well before its
    // time limit (a bound far from what it needs).
    let reader = std::thread::spawn(move || {
        for _ in 0..published {
            slow.recv_blocking().unwrap();
        }
        slow
    });
    let r = topic
        .publish_keyed_blocking_timeout("k", vec![2u8; 500], Duration::from_secs(600))
        .unwrap();
    assert_eq!(r.offset, published);
    drop(reader.join().unwrap());
}

#[test]
fn an_async_publisher_in_a_loop_lets_other_tasks_of_its_thread_run() {
    // Under Never a publish is ready in its first poll. A task publishing in a loop must
    // still give its thread back now and then, or the task beside it (here, the one that
    // tells it to stop) never runs.
    let dir = tempfile::tempdir().unwrap();
    let topic = DurableTopic::open(dir.path(), TopicConfig::new(64), durable()).unwrap();
    let stop = std::cell::Cell::new(false);
    let publisher = async {
        let mut n = 0u64;
        while !stop.get() {
            topic.publish(body(n)).await.unwrap();
            n += 1;
            assert!(n < 10_000, "the publishing task never yielded");
        }
        n
    };
    let stopper = async { stop.set(true) };
    let mut publisher = std::pin::pin!(publisher);
    let mut stopper = std::pin::pin!(stopper);
    let (mut published, mut stopped) = (None, false);
    futures_executor::block_on(std::future::poll_fn(|cx| {
        use std::future::Future;
        if published.is_none() {
            if let std::task::Poll::Ready(n) = publisher.as_mut().poll(cx) {
                published = Some(n);
            }
        }
        if !stopped {
            stopped = stopper.as_mut().poll(cx).is_ready();
        }
        match published {
            Some(_) => std::task::Poll::Ready(()),
            None => std::task::Poll::Pending,
        }
    }));
    assert!(published.unwrap() > 0);
}

#[test]
fn async_publish_to_and_seek_to() {
    let dir = tempfile::tempdir().unwrap();
    let topic =
        DurableTopic::open(dir.path(), TopicConfig::new(4).partitions(2), durable()).unwrap();
    let mut sub = topic.subscribe(StartAt::Latest).unwrap();
    futures_executor::block_on(async {
        for i in 0..20 {
            let r = topic.publish_to(1, body(i)).await.unwrap();
            assert_eq!((r.partition, r.offset), (1, i));
        }
        let bad = topic.publish_to(2, body(0)).await.unwrap_err();
        assert!(matches!(bad, DurablePublishError::InvalidPartition(_)));
        assert_eq!(bad.into_inner(), body(0));
    });
    // Back to an offset behind memory (on disk), on every partition: partition 0 is
    // empty, so only its end, 0, is valid there.
    sub.seek_to(StartAt::Latest).unwrap();
    assert_eq!(sub.position(1), Some(20));
    assert!(matches!(
        sub.seek_to(StartAt::Offset(3)),
        Err(memq_core::Error::OffsetOutOfRange {
            offset: 3,
            partition: 0,
            high: 0
        })
    ));
    assert_eq!(sub.position(1), Some(20), "a refused seek moves nothing");
    sub.seek_to(StartAt::Offset(0)).unwrap();
    for i in 0..20 {
        let m = sub.recv_blocking().unwrap();
        assert_eq!(
            (m.partition, m.offset, m.payload.as_ref()),
            (1, i, &body(i)[..])
        );
    }
    topic.publish_to_blocking(0, body(99)).unwrap();
    sub.seek_to(StartAt::Earliest).unwrap();
    let mut got: Vec<(u32, u64)> = (0..21)
        .map(|_| {
            let m = sub.recv_blocking().unwrap();
            (m.partition, m.offset)
        })
        .collect();
    got.sort();
    assert_eq!(got[0], (0, 0));
    assert_eq!(got[20], (1, 19));
    sub.seek_to(StartAt::Latest).unwrap();
    assert!(matches!(sub.try_recv(), Err(DurableRecvError::Empty)));
}
