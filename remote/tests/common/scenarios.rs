//! The semantic scenarios of memq's in-memory topics, against Redis: each takes a
//! connection (single node or cluster) and a topic name of its own.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use bytes::Bytes;
use memq_core::{DeadLetterReason, StartAt};
use memq_redis::{BatchMode, Error, GroupConfig, RecvError, Redis, RedisTopic, RedisTopicConfig};

use super::PATIENCE;

async fn recv_sub(sub: &mut memq_redis::RedisSubscriber) -> memq_redis::RedisMessage {
    match super::rt::timeout(PATIENCE, sub.recv()).await {
        Ok(Ok(m)) => m,
        Ok(Err(e)) => panic!("recv: {e}"),
        Err(_) => panic!("nothing received within {PATIENCE:?}"),
    }
}

async fn recv_delivery(c: &mut memq_redis::RedisConsumer) -> memq_redis::RedisDelivery {
    match super::rt::timeout(PATIENCE, c.recv_delivery()).await {
        Ok(Ok(d)) => d,
        Ok(Err(e)) => panic!("recv_delivery: {e}"),
        Err(_) => panic!("no delivery within {PATIENCE:?}"),
    }
}

/// Waits until `cond` holds, checking every 10 ms, for at most [`PATIENCE`].
pub async fn eventually<F, Fut>(mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let t0 = std::time::Instant::now();
    while !cond().await {
        assert!(
            t0.elapsed() < PATIENCE,
            "condition not met within {PATIENCE:?}"
        );
        super::rt::sleep(Duration::from_millis(10)).await;
    }
}

/// Keyed publishes land on memq's own partition for the key; a subscriber from
/// `Earliest` replays everything in per-partition order with consecutive offsets.
pub async fn replay_and_routing(redis: &Redis, name: &str) {
    let topic = RedisTopic::open(redis, name, RedisTopicConfig::new(4))
        .await
        .unwrap();
    let memory =
        memq_core::Topic::<u32>::new(memq_core::TopicConfig::new(1024).partitions(4)).unwrap();
    let mut expected: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for i in 0..200u32 {
        let key = format!("user-{}", i % 37);
        let r = topic
            .publish_keyed(key.clone(), format!("m{i}"))
            .await
            .unwrap();
        assert_eq!(r.partition, memq_core::key_partition(&key, 4));
        let mem = memory.try_publish_keyed(key.as_bytes(), i).unwrap();
        assert_eq!(
            mem.partition, r.partition,
            "the same partition in memory and in Redis"
        );
        expected.entry(r.partition).or_default().push(r.offset);
    }
    for offsets in expected.values() {
        let want: Vec<u64> = (0..offsets.len() as u64).collect();
        assert_eq!(offsets, &want, "consecutive offsets from 0");
    }
    let mut sub = topic.subscribe(StartAt::Earliest).await.unwrap();
    let mut got: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for _ in 0..200 {
        let m = recv_sub(&mut sub).await;
        assert!(m.key.is_some());
        got.entry(m.partition).or_default().push(m.offset);
    }
    assert_eq!(got, expected, "every message once, in order per partition");
    assert_eq!(sub.lag().await.unwrap(), 0);
    // Replay again from an offset, with seek.
    sub.seek(5).await.unwrap();
    let mut again = HashSet::new();
    let total: u64 = expected
        .values()
        .map(|o| o.len().saturating_sub(5) as u64)
        .sum();
    for _ in 0..total {
        let m = recv_sub(&mut sub).await;
        assert!(m.offset >= 5);
        assert!(again.insert((m.partition, m.offset)));
    }
    // Latest sees only what comes after.
    let mut late = topic.subscribe(StartAt::Latest).await.unwrap();
    let r = topic.publish_to(2, "after").await.unwrap();
    let m = recv_sub(&mut late).await;
    assert_eq!(
        (m.partition, m.offset, m.payload.as_ref()),
        (2, r.offset, &b"after"[..])
    );
    topic.delete().await.unwrap();
}

/// Batches are transactions at consecutive offsets; bad arguments are errors that hand
/// the messages back.
pub async fn batches_and_errors(redis: &Redis, name: &str) {
    let topic = RedisTopic::open(redis, name, RedisTopicConfig::new(2))
        .await
        .unwrap();
    let batch: Vec<Bytes> = (0..50).map(|i| Bytes::from(format!("b{i}"))).collect();
    let r = topic.publish_batch_to(1, batch.clone()).await.unwrap();
    assert_eq!((r.partition, r.offset, r.count), (1, 0, 50));
    let r2 = topic.publish_batch_keyed("k", batch.clone()).await.unwrap();
    assert_eq!(r2.partition, memq_core::key_partition("k", 2));
    let e = topic.publish_to(9, "x").await.unwrap_err();
    assert!(matches!(
        e.error,
        Error::PartitionOutOfRange {
            partition: 9,
            partitions: 2
        }
    ));
    assert_eq!(e.into_inner(), Bytes::from("x"));
    let e = topic.publish_batch_to(7, batch.clone()).await.unwrap_err();
    assert_eq!(e.into_inner().len(), 50);
    assert!(matches!(
        RedisTopic::open(redis, name, RedisTopicConfig::new(3)).await,
        Err(Error::PartitionMismatch {
            existing: 2,
            requested: 3
        })
    ));
    assert!(
        RedisTopic::open(redis, "bad{name}", RedisTopicConfig::new(1))
            .await
            .is_err()
    );
    let stats = topic.stats().await.unwrap();
    let total: u64 = stats.partitions.iter().map(|p| p.depth).sum();
    assert_eq!(total, 100);
    topic.delete().await.unwrap();
    // Pipelined batches: one round trip, no transaction.
    let piped = RedisTopic::open(
        redis,
        &format!("{name}-piped"),
        RedisTopicConfig::new(1).batches(BatchMode::Pipelined),
    )
    .await
    .unwrap();
    let r = piped.publish_batch(batch.clone()).await.unwrap();
    assert_eq!((r.partition, r.offset, r.count), (0, 0, 50));
    let mut sub = piped.subscribe(StartAt::Earliest).await.unwrap();
    for (i, want) in batch.iter().enumerate() {
        let m = recv_sub(&mut sub).await;
        assert_eq!((m.offset, &m.payload), (i as u64, want));
    }
    piped.delete().await.unwrap();
}

/// Each message goes to exactly one of the group's members; the group outlives its
/// members; a new group starts where `StartAt` says.
pub async fn group_exactly_once(redis: &Redis, name: &str) {
    let topic = RedisTopic::open(redis, name, RedisTopicConfig::new(3))
        .await
        .unwrap();
    let n = 600u32;
    let mut members = Vec::new();
    for _ in 0..3 {
        members.push(
            topic
                .group("workers", StartAt::Earliest, GroupConfig::auto())
                .await
                .unwrap(),
        );
    }
    let publisher = {
        let topic = topic.clone();
        super::rt::spawn(async move {
            for i in 0..n {
                topic.publish(format!("{i}")).await.unwrap();
            }
        })
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut handles = Vec::new();
    for (id, mut m) in members.into_iter().enumerate() {
        let tx = tx.clone();
        handles.push(super::rt::spawn(async move {
            while let Ok(Some(msg)) = m.recv_timeout(PATIENCE).await {
                if tx.send((id, msg.payload)).is_err() {
                    break;
                }
            }
        }));
    }
    drop(tx);
    let mut seen = HashSet::new();
    let mut per_member = [0usize; 3];
    for _ in 0..n {
        let (id, payload) = super::rt::timeout(PATIENCE, rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert!(seen.insert(payload), "delivered twice");
        per_member[id] += 1;
    }
    publisher.join().await;
    drop(handles);
    assert_eq!(seen.len(), n as usize);
    let stats = topic.group_stats("workers").await.unwrap();
    assert_eq!(stats.lag(), 0);
    // A later member resumes at the group's position: nothing old again.
    let mut late = topic
        .group("workers", StartAt::Earliest, GroupConfig::auto())
        .await
        .unwrap();
    topic.publish("new").await.unwrap();
    let m = late.recv_timeout(PATIENCE).await.unwrap().unwrap();
    assert_eq!(m.payload.as_ref(), b"new");
    // A new group from Earliest replays everything.
    let mut other = topic
        .group("audit", StartAt::Earliest, GroupConfig::auto())
        .await
        .unwrap();
    let mut count = 0;
    while count < n + 1 {
        other.recv_timeout(PATIENCE).await.unwrap().unwrap();
        count += 1;
    }
    topic.delete().await.unwrap();
}

/// Explicit acks: acked messages never come back; an expired lease returns the message
/// (to another member), whose old ack is refused; a nack redelivers after its delay;
/// a dropped delivery comes back.
pub async fn acks_and_redelivery(redis: &Redis, name: &str) {
    let topic = RedisTopic::open(redis, name, RedisTopicConfig::new(1))
        .await
        .unwrap();
    let lease = Duration::from_millis(300);
    let config = GroupConfig::acked(lease).claim_interval(Duration::from_millis(20));
    let mut a = topic
        .group("jobs", StartAt::Earliest, config.clone())
        .await
        .unwrap();
    for i in 0..4 {
        topic.publish(format!("job{i}")).await.unwrap();
    }
    // job0: acked.
    let d0 = recv_delivery(&mut a).await;
    assert_eq!((d0.offset(), d0.deliveries()), (0, 1));
    d0.ack().await.unwrap();
    // job1: a takes it and sits on it past its lease (a stuck worker); it comes back (to
    // a or b) with a higher delivery count, and a's late ack is refused. job2 is nacked
    // with a delay and job3 dropped unsettled the first time they are seen; both come
    // back. Workers settle at once what they are not told to sit on.
    let held = recv_delivery(&mut a).await;
    assert_eq!(held.offset(), 1);
    let mut b = topic
        .group("jobs", StartAt::Earliest, config.clone())
        .await
        .unwrap();
    let mut first_seen: HashSet<u64> = HashSet::new();
    let mut settled: HashSet<u64> = HashSet::new();
    while settled.len() < 3 {
        let d = tokio::select! {
            d = a.recv_delivery() => d.unwrap(),
            d = b.recv_delivery() => d.unwrap(),
            _ = super::rt::sleep(PATIENCE) => panic!("not everything came back: settled {settled:?}"),
        };
        assert_ne!(d.offset(), 0, "an acked message came back");
        match d.offset() {
            1 => {
                assert!(d.deliveries() >= 2);
                d.ack().await.unwrap();
                settled.insert(1);
            }
            o if first_seen.insert(o) => {
                if o == 2 {
                    d.nack_after(Duration::from_millis(100)).await.unwrap();
                } else {
                    drop(d);
                }
            }
            o => {
                assert!(d.deliveries() >= 2);
                d.ack().await.unwrap();
                settled.insert(o);
            }
        }
    }
    assert!(matches!(held.ack().await, Err(Error::LeaseExpired)));
    // Nothing comes back once everything is acked (waits only for what would be wrong).
    let stray = a.recv_delivery_timeout(lease * 3).await.unwrap();
    assert!(stray.is_none(), "acked message came back: {stray:?}");
    let stats = topic.group_stats("jobs").await.unwrap();
    assert_eq!((stats.pending(), stats.lag()), (0, 0));
    topic.delete().await.unwrap();
}

/// After `max_deliveries`, a message goes to the dead-letter topic with its origin; a
/// rejected one goes there at once.
pub async fn dead_letters(redis: &Redis, name: &str) {
    let topic = RedisTopic::open(redis, name, RedisTopicConfig::new(2))
        .await
        .unwrap();
    let dlq = RedisTopic::open(redis, &format!("{name}-dlq"), RedisTopicConfig::new(1))
        .await
        .unwrap();
    let config = GroupConfig::acked(Duration::from_millis(200))
        .claim_interval(Duration::from_millis(20))
        .max_deliveries(2)
        .dead_letter(dlq.clone());
    let mut c = topic
        .group("jobs", StartAt::Earliest, config)
        .await
        .unwrap();
    let poison = topic.publish_to(1, "poison").await.unwrap();
    let bad = topic.publish_to(0, "bad").await.unwrap();
    let mut dlq_sub = dlq.subscribe(StartAt::Earliest).await.unwrap();
    let mut poison_deliveries = 0;
    let mut rejected = false;
    let mut letters = Vec::new();
    while letters.len() < 2 {
        tokio::select! {
            d = c.recv_delivery() => {
                let d = d.unwrap();
                if d.value().as_ref() == b"bad" {
                    assert!(!rejected);
                    rejected = true;
                    d.reject().await.unwrap();
                } else {
                    poison_deliveries += 1;
                    assert_eq!(d.deliveries(), poison_deliveries);
                    d.nack().await.unwrap();
                }
            }
            m = dlq_sub.recv() => letters.push(m.unwrap()),
            _ = super::rt::sleep(PATIENCE) => panic!("no dead letter"),
        }
    }
    assert_eq!(
        poison_deliveries, 2,
        "delivered max_deliveries times, then dead-lettered"
    );
    letters.sort_by_key(|m| m.payload.clone());
    let o = letters[0].origin.clone().unwrap();
    assert_eq!(letters[0].payload.as_ref(), b"bad");
    assert_eq!((o.topic.as_deref(), o.group.as_str()), (Some(name), "jobs"));
    assert_eq!(
        (o.partition, o.offset, o.deliveries, o.reason),
        (0, bad.offset, 1, DeadLetterReason::Rejected)
    );
    let o = letters[1].origin.clone().unwrap();
    assert_eq!(letters[1].payload.as_ref(), b"poison");
    assert_eq!(
        (o.partition, o.offset, o.deliveries, o.reason),
        (1, poison.offset, 2, DeadLetterReason::MaxDeliveries)
    );
    // The member counts after it published the letter: wait for the count.
    eventually(|| async { c.counters().dead_lettered == 2 }).await;
    let stats = topic.group_stats("jobs").await.unwrap();
    assert_eq!((stats.pending(), stats.lag()), (0, 0));
    topic.delete().await.unwrap();
    dlq.delete().await.unwrap();
}

/// Retention by count trims what readers have not read: a subscriber is told how many it
/// missed (`Lagged`), as memq's `DropOldest`; retention by age trims old messages.
pub async fn retention(redis: &Redis, name: &str) {
    let topic = RedisTopic::open(redis, name, RedisTopicConfig::new(1).max_len(10))
        .await
        .unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).await.unwrap();
    // The subscriber's reader may already have fetched the first messages: publish in
    // one transaction so that it sees either nothing or everything.
    let batch: Vec<Bytes> = (0..1000).map(|i| Bytes::from(format!("{i}"))).collect();
    topic.publish_batch(batch).await.unwrap();
    let stats = topic.stats().await.unwrap().partitions[0];
    assert_eq!(stats.high, 1000);
    assert!(stats.depth >= 10 && stats.depth < 1000, "{stats:?}");
    let first = match super::rt::timeout(PATIENCE, sub.recv()).await.unwrap() {
        Err(RecvError::Lagged(n)) => {
            assert_eq!(n, stats.low);
            recv_sub(&mut sub).await
        }
        other => panic!("expected Lagged, got {other:?}"),
    };
    assert_eq!(first.offset, stats.low);
    // By age.
    let aged = RedisTopic::open(
        redis,
        &format!("{name}-aged"),
        RedisTopicConfig::new(2).max_age(Duration::from_millis(50)),
    )
    .await
    .unwrap();
    aged.publish_batch_to(0, vec![Bytes::from("old"); 5])
        .await
        .unwrap();
    super::rt::sleep(Duration::from_millis(120)).await;
    aged.publish_to(0, "young").await.unwrap();
    let trimmed = aged.trim_by_age().await.unwrap();
    assert_eq!(trimmed, 5);
    let s = aged.stats().await.unwrap().partitions[0];
    assert_eq!((s.low, s.high, s.depth), (5, 6, 1));
    topic.delete().await.unwrap();
    aged.delete().await.unwrap();
}

/// Every scenario, one after the other, on one server or cluster.
/// `StartAt::Offset(n)` past the end of a partition is refused, as memq refuses it, for
/// a subscriber, a seek and a new group (which is then not created); at the end itself
/// is valid; an existing group ignores its start.
pub async fn start_past_end(redis: &Redis, name: &str) {
    let topic = RedisTopic::open(redis, name, RedisTopicConfig::new(2))
        .await
        .unwrap();
    for i in 0..3 {
        topic.publish_to(0, format!("a{i}")).await.unwrap();
    }
    topic.publish_to(1, "b0").await.unwrap();
    // The same refusal, in the same words, as a memq topic in memory.
    let memory =
        memq_core::Topic::<u32>::new(memq_core::TopicConfig::new(8).partitions(2)).unwrap();
    for _ in 0..3 {
        memory.try_publish_to(0, 0).unwrap();
    }
    memory.try_publish_to(1, 0).unwrap();
    let in_memory = memory.subscribe(StartAt::Offset(2)).unwrap_err();
    let past = topic.subscribe(StartAt::Offset(2)).await.unwrap_err();
    assert!(
        matches!(
            past,
            Error::OffsetOutOfRange {
                offset: 2,
                partition: 1,
                high: 1
            }
        ),
        "{past:?}"
    );
    assert_eq!(past.to_string(), in_memory.to_string());

    // At the end is valid: the subscriber waits there.
    let mut sub = topic.subscribe(StartAt::Offset(1)).await.unwrap();
    let m = recv_sub(&mut sub).await;
    assert_eq!((m.partition, m.offset), (0, 1));
    let m = recv_sub(&mut sub).await;
    assert_eq!((m.partition, m.offset), (0, 2));
    // A refused seek moves nothing.
    assert!(matches!(
        sub.seek(3).await,
        Err(Error::OffsetOutOfRange { partition: 1, .. })
    ));
    assert!(matches!(
        sub.seek_partition(0, 4).await,
        Err(Error::OffsetOutOfRange {
            offset: 4,
            partition: 0,
            high: 3
        })
    ));
    assert!(matches!(
        sub.seek_partition(2, 0).await,
        Err(Error::PartitionOutOfRange { .. })
    ));
    topic.publish_to(1, "b1").await.unwrap();
    let m = recv_sub(&mut sub).await;
    assert_eq!(
        (m.partition, m.offset, m.payload.as_ref()),
        (1, 1, &b"b1"[..])
    );
    sub.seek_partition(0, 3).await.unwrap();
    sub.seek_to(StartAt::Offset(0)).await.unwrap();
    let m = recv_sub(&mut sub).await;
    assert_eq!(m.offset, 0);

    // A new group past the end is refused and not created, on any partition.
    let acked = || GroupConfig::acked(Duration::from_secs(30));
    let refused = topic.group("g", StartAt::Offset(3), acked()).await;
    assert!(
        matches!(
            refused,
            Err(Error::OffsetOutOfRange {
                offset: 3,
                partition: 1,
                high: 2
            })
        ),
        "{refused:?}"
    );
    assert!(matches!(
        topic.group_stats("g").await,
        Err(Error::InvalidArgument(_))
    ));
    // Only the partitions a member reads count.
    let mut on_0 = topic
        .group("g0", StartAt::Offset(3), acked().partitions(vec![0]))
        .await
        .unwrap();
    topic.publish_to(0, "a3").await.unwrap();
    let d = recv_delivery(&mut on_0).await;
    assert_eq!((d.partition(), d.offset()), (0, 3));
    d.ack().await.unwrap();
    // At the end is valid; once the group exists, a start past the end is ignored.
    let mut g = topic.group("g", StartAt::Offset(2), acked()).await.unwrap();
    for offset in [2, 3] {
        let d = recv_delivery(&mut g).await;
        assert_eq!((d.partition(), d.offset()), (0, offset));
        d.ack().await.unwrap();
    }
    drop(g);
    let mut again = topic
        .group("g", StartAt::Offset(100), acked())
        .await
        .unwrap();
    topic.publish_to(1, "b2").await.unwrap();
    let d = recv_delivery(&mut again).await;
    assert_eq!(
        (d.partition(), d.offset()),
        (1, 2),
        "the group's own position, not the ignored start"
    );
    d.ack().await.unwrap();
}

/// `max_in_flight` holds a member's reader back while that many deliveries are out (as
/// memq's flow control); the backoff schedule spaces redeliveries after a nack and after
/// a drop, by delivery count.
pub async fn in_flight_and_backoff(redis: &Redis, name: &str) {
    let topic = RedisTopic::open(redis, name, RedisTopicConfig::new(1))
        .await
        .unwrap();
    assert!(matches!(
        topic
            .group(
                "zero",
                StartAt::Earliest,
                GroupConfig::acked(Duration::from_secs(30)).max_in_flight(0)
            )
            .await,
        Err(Error::InvalidArgument(_))
    ));
    for i in 0..5 {
        topic.publish(format!("m{i}")).await.unwrap();
    }
    let config = GroupConfig::acked(Duration::from_secs(30)).max_in_flight(2);
    let mut member = topic
        .group("flow", StartAt::Earliest, config)
        .await
        .unwrap();
    let first = recv_delivery(&mut member).await;
    let second = recv_delivery(&mut member).await;
    // Two out: the reader fetches nothing more (the third stays in the stream), however
    // long one waits; a short wait only makes this check weaker, never wrong.
    assert!(member
        .recv_delivery_timeout(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    let stats = topic.group_stats("flow").await.unwrap();
    assert_eq!((stats.pending(), stats.lag()), (2, 3));
    first.ack().await.unwrap();
    let third = recv_delivery(&mut member).await;
    assert_eq!(third.offset(), 2);
    assert_eq!(topic.group_stats("flow").await.unwrap().pending(), 2);
    // A dropped delivery gives its slot back too.
    drop(second);
    let next = recv_delivery(&mut member).await;
    assert!(
        next.offset() == 1 || next.offset() == 3,
        "{}",
        next.offset()
    );

    // Backoff: 300 ms after the first delivery, 600 ms after later ones.
    let delays = [Duration::from_millis(300), Duration::from_millis(600)];
    let config = GroupConfig::acked(Duration::from_secs(10))
        .claim_interval(Duration::from_millis(20))
        .backoff(memq_core::Backoff::schedule(delays.to_vec()));
    let retry = RedisTopic::open(redis, &format!("{name}-retry"), RedisTopicConfig::new(1))
        .await
        .unwrap();
    let mut member = retry
        .group("retry", StartAt::Earliest, config)
        .await
        .unwrap();
    retry.publish("flaky").await.unwrap();
    let d = recv_delivery(&mut member).await;
    assert_eq!(d.deliveries(), 1);
    let nacked = std::time::Instant::now();
    d.nack().await.unwrap();
    let d = recv_delivery(&mut member).await;
    // Redis counts idle time in whole milliseconds: a few of slack, never more.
    let slack = Duration::from_millis(20);
    assert_eq!(d.deliveries(), 2);
    assert!(
        nacked.elapsed() + slack >= delays[0],
        "{:?}",
        nacked.elapsed()
    );
    let dropped = std::time::Instant::now();
    drop(d);
    let d = recv_delivery(&mut member).await;
    assert_eq!(d.deliveries(), 3);
    assert!(
        dropped.elapsed() + slack >= delays[1],
        "{:?}",
        dropped.elapsed()
    );
    d.ack().await.unwrap();
}

/// Waits until `cond` holds, as [`eventually`].
async fn until(cond: impl Fn() -> bool) {
    eventually(|| {
        let ok = cond();
        async move { ok }
    })
    .await;
}

/// `GroupConfig::rebalance`: the partitions are dealt out over the members, each read by
/// one member (per-key order holds across members), and dealt out again when a member
/// joins or leaves.
pub async fn rebalance(redis: &Redis, name: &str) {
    let topic = RedisTopic::open(redis, name, RedisTopicConfig::new(4))
        .await
        .unwrap();
    // Heartbeats every second; one that takes longer than that only delays a hand-over.
    let config = GroupConfig::acked(Duration::from_secs(30)).rebalance(Duration::from_secs(4));
    for bad in [
        config.clone().rebalance(Duration::ZERO),
        config.clone().partitions(vec![0]),
    ] {
        assert!(matches!(
            topic.group("owners", StartAt::Earliest, bad).await,
            Err(Error::InvalidArgument(_))
        ));
    }
    let mut a = topic
        .group("owners", StartAt::Earliest, config.clone())
        .await
        .unwrap();
    until(|| a.assignment() == vec![0, 1, 2, 3]).await;
    let mut b = topic
        .group("owners", StartAt::Earliest, config.clone())
        .await
        .unwrap();
    // Dealt out: two each, none read by both.
    until(|| {
        let (x, y) = (a.assignment(), b.assignment());
        let mut both: Vec<u32> = x.iter().chain(&y).copied().collect();
        both.sort();
        x.len() == 2 && y.len() == 2 && both == vec![0, 1, 2, 3]
    })
    .await;
    let (owned_by_a, owned_by_b) = (a.assignment(), b.assignment());

    // Per-key order across the two members: each key's messages all go to the owner of
    // its partition, in order.
    for i in 0..5 {
        for k in 0..12 {
            topic
                .publish_keyed(format!("k{k}"), format!("{i}"))
                .await
                .unwrap();
        }
    }
    let mut per_key: BTreeMap<String, (char, Vec<u64>)> = BTreeMap::new();
    for _ in 0..60 {
        let (who, d) = tokio::select! {
            d = a.recv_delivery() => ('a', d.unwrap()),
            d = b.recv_delivery() => ('b', d.unwrap()),
            _ = super::rt::sleep(PATIENCE) => panic!("not every message within {PATIENCE:?}"),
        };
        let key = String::from_utf8(d.message().key.clone().unwrap().to_vec()).unwrap();
        let i: u64 = std::str::from_utf8(d.value()).unwrap().parse().unwrap();
        let owner = if owned_by_a.contains(&d.partition()) {
            'a'
        } else {
            assert!(owned_by_b.contains(&d.partition()));
            'b'
        };
        assert_eq!(who, owner, "partition {} read by its owner", d.partition());
        let e = per_key.entry(key).or_insert((who, Vec::new()));
        assert_eq!(e.0, who, "one member per key");
        e.1.push(i);
        d.ack().await.unwrap();
    }
    assert_eq!(per_key.len(), 12);
    for (key, (_, seq)) in &per_key {
        assert_eq!(seq, &vec![0, 1, 2, 3, 4], "key {key} in order");
    }

    // b leaves: a owns everything again, and reads what comes next on every partition.
    drop(b);
    until(|| a.assignment() == vec![0, 1, 2, 3]).await;
    for p in 0..4 {
        topic.publish_to(p, "after").await.unwrap();
    }
    let mut after = HashSet::new();
    for _ in 0..4 {
        let d = recv_delivery(&mut a).await;
        assert_eq!(d.value().as_ref(), b"after");
        after.insert(d.partition());
        d.ack().await.unwrap();
    }
    assert_eq!(after.len(), 4);

    // A member that crashes (its runtime gone: no heartbeat, no leave) is dealt its
    // partitions, never takes them, and loses its place when its session runs out: then
    // a owns everything again.
    let (t, c) = (topic.clone(), config.clone());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let member = rt.block_on(async {
            let member = t.group("owners", StartAt::Earliest, c).await.unwrap();
            let t0 = std::time::Instant::now();
            while member.assignment().len() != 2 {
                assert!(t0.elapsed() < PATIENCE, "the new member got nothing");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            member
        });
        drop(rt);
        drop(member);
    })
    .join()
    .unwrap();
    until(|| a.assignment() == vec![0, 1, 2, 3]).await;
    for p in 0..4 {
        topic.publish_to(p, "after a crash").await.unwrap();
    }
    for _ in 0..4 {
        let d = recv_delivery(&mut a).await;
        assert_eq!(d.value().as_ref(), b"after a crash");
        d.ack().await.unwrap();
    }
}

pub async fn all(redis: &Redis, prefix: &str) {
    replay_and_routing(redis, &format!("{prefix}-replay")).await;
    batches_and_errors(redis, &format!("{prefix}-batches")).await;
    group_exactly_once(redis, &format!("{prefix}-group")).await;
    acks_and_redelivery(redis, &format!("{prefix}-acks")).await;
    dead_letters(redis, &format!("{prefix}-dlq")).await;
    retention(redis, &format!("{prefix}-retention")).await;
    start_past_end(redis, &format!("{prefix}-start")).await;
    in_flight_and_backoff(redis, &format!("{prefix}-flow")).await;
    rebalance(redis, &format!("{prefix}-owners")).await;
}
