//! Partitioned topics and routing: key hash (pinned forever), round-robin, explicit,
//! user routers.

extern crate alloc;

use futures_executor::block_on;
use memq_core::{
    key_hash, key_partition, Error, PublishError, Router, StartAt, Topic, TopicConfig, TryRecvError,
};
use proptest::prelude::*;

fn partitioned<T>(partitions: u32) -> Topic<T> {
    Topic::new(TopicConfig::new(256).partitions(partitions)).unwrap()
}

/// (key, FNV-1a 64, partition of 4, partition of 7). Computed once, independently of
/// memq, from the spec in `core/src/route.rs`; they must never change.
const PINNED: &[(&[u8], u64, u32, u32)] = &[
    (b"", 0xcbf2_9ce4_8422_2325, 1, 2),
    (b"a", 0xaf63_dc4c_8601_ec8c, 0, 5),
    (b"foobar", 0x8594_4171_f739_67e8, 0, 6),
    (b"user-42", 0x32c6_d7a5_4d35_dacb, 3, 2),
    (b"order-1", 0xdee4_809f_34be_e86d, 1, 5),
    (b"order-2", 0xdee4_7d9f_34be_e354, 0, 3),
    (b"alpha", 0x8ac6_25bb_85ed_202b, 3, 5),
    (b"beta", 0x7627_619b_9546_20a7, 3, 5),
    (b"gamma", 0x2291_76bd_1f6b_a96a, 2, 4),
    (b"delta", 0x5207_6675_ec13_a0c1, 1, 0),
    (b"\x00", 0xaf63_bd4c_8601_b7df, 3, 3),
    (b"\xff\xfe", 0x0a99_c807_b6f6_45b0, 0, 4),
    (b"memq", 0x4302_05a2_e314_2b3d, 1, 0),
];

#[test]
fn key_hash_is_pinned() {
    for &(key, hash, _, _) in PINNED {
        assert_eq!(key_hash(key), hash, "key {key:?}");
    }
}

#[test]
fn key_hash_is_usable_in_const_context() {
    const H: u64 = key_hash(b"foobar");
    // `key_partition` takes any `AsRef<[u8]>` key, as the keyed publishes do, so it is
    // not `const`; what it computes is, through `key_hash`.
    const P: u32 = (key_hash(b"user-42") % 4) as u32;
    assert_eq!(H, 0x8594_4171_f739_67e8);
    assert_eq!(P, 3);
    assert_eq!(key_partition(b"user-42", 4), P);
}

#[test]
fn key_partition_is_pinned_for_4_and_7() {
    for &(key, _, p4, p7) in PINNED {
        assert_eq!(key_partition(key, 4), p4, "key {key:?} of 4");
        assert_eq!(key_partition(key, 7), p7, "key {key:?} of 7");
    }
}

#[test]
fn key_partition_of_one_or_zero_partitions_is_zero() {
    for &(key, _, _, _) in PINNED {
        assert_eq!(key_partition(key, 1), 0);
        assert_eq!(key_partition(key, 0), 0);
    }
}

#[cfg(feature = "std")]
#[test]
fn keyed_publish_lands_on_the_pinned_partition() {
    for (n, col) in [(4u32, 0usize), (7, 1)] {
        let t = partitioned::<u32>(n);
        for &(key, _, p4, p7) in PINNED {
            let want = [p4, p7][col];
            assert_eq!(t.try_publish_keyed(key, 0).unwrap().partition, want);
            assert_eq!(block_on(t.publish_keyed(key, 0)).unwrap().partition, want);
            assert_eq!(t.publish_keyed_blocking(key, 0).unwrap().partition, want);
        }
    }
}

#[test]
fn keyed_publish_accepts_str_string_and_bytes() {
    let t = partitioned::<u8>(7);
    assert_eq!(t.try_publish_keyed("user-42", 0).unwrap().partition, 2);
    assert_eq!(
        t.try_publish_keyed(String::from("user-42"), 0)
            .unwrap()
            .partition,
        2
    );
    assert_eq!(
        t.try_publish_keyed(Vec::from(&b"user-42"[..]), 0)
            .unwrap()
            .partition,
        2
    );
}

#[test]
fn same_key_keeps_order_in_its_partition() {
    let t = partitioned::<u32>(4);
    let mut sub = t.subscribe_partition(3, StartAt::Earliest).unwrap();
    for i in 0..20 {
        t.try_publish_keyed("user-42", i).unwrap();
    }
    let got: Vec<(u64, u32)> = core::iter::from_fn(|| sub.try_recv().ok())
        .map(|m| (m.offset(), m.into_value()))
        .collect();
    assert_eq!(got, (0..20).map(|i| (u64::from(i), i)).collect::<Vec<_>>());
}

proptest! {
    /// key_hash matches an independent FNV-1a 64 implementation on arbitrary bytes, and
    /// key_partition is always in range.
    #[test]
    fn key_hash_matches_reference(key in proptest::collection::vec(any::<u8>(), 0..64), n in 1u32..1000) {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in &key {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        prop_assert_eq!(key_hash(&key), h);
        let p = key_partition(&key, n);
        prop_assert!(p < n);
        prop_assert_eq!(u64::from(p), h % u64::from(n));
    }
}

#[test]
fn round_robin_spreads_evenly() {
    for n in [2u32, 3, 4, 7] {
        let t = partitioned::<u32>(n);
        let mut counts = vec![0u32; n as usize];
        let mut prev = None;
        for i in 0..(n * 25) {
            let r = t.try_publish(i).unwrap();
            if let Some(p) = prev {
                assert_eq!(
                    r.partition,
                    (p + 1) % n,
                    "publishes go to partitions in turn"
                );
            }
            prev = Some(r.partition);
            counts[r.partition as usize] += 1;
        }
        assert!(counts.iter().all(|&c| c == 25), "{n}: {counts:?}");
        let s = t.stats();
        assert!(s
            .partitions
            .iter()
            .all(|p| p.published == 25 && p.high == 25));
        assert_eq!(s.published, u64::from(n) * 25);
    }
}

#[test]
fn round_robin_includes_async_and_batches() {
    let t = partitioned::<u32>(3);
    let mut seen = [0u32; 3];
    block_on(async {
        for i in 0..6 {
            seen[t.publish(i).await.unwrap().partition as usize] += 1;
        }
        for _ in 0..3 {
            let r = t.publish_batch(vec![1, 2]).await.unwrap();
            seen[r.partition as usize] += 2;
        }
    });
    assert_eq!(seen, [4, 4, 4]);
}

#[test]
fn each_partition_has_its_own_offsets() {
    let t = partitioned::<u32>(3);
    for p in 0..3 {
        for i in 0..(p + 2) {
            let r = t.try_publish_to(p, i).unwrap();
            assert_eq!((r.partition, r.offset), (p, u64::from(i)));
        }
    }
    let s = t.stats();
    let highs: Vec<u64> = s.partitions.iter().map(|p| p.high).collect();
    assert_eq!(highs, [2, 3, 4]);
    assert_eq!(s.partitions[2].partition, 2);
}

#[cfg(feature = "std")]
#[test]
fn publish_to_explicit_partition() {
    let t = partitioned::<&str>(4);
    let mut p2 = t.subscribe_partition(2, StartAt::Earliest).unwrap();
    let mut p0 = t.subscribe_partition(0, StartAt::Earliest).unwrap();
    assert_eq!(t.try_publish_to(2, "a").unwrap().partition, 2);
    assert_eq!(block_on(t.publish_to(2, "b")).unwrap().partition, 2);
    assert_eq!(t.publish_to_blocking(2, "c").unwrap().partition, 2);
    assert_eq!(
        block_on(t.publish_batch_to(2, vec!["d", "e"]))
            .unwrap()
            .offset,
        3
    );
    let got: Vec<(u32, &str)> = core::iter::from_fn(|| p2.try_recv().ok())
        .map(|m| (m.partition(), m.into_value()))
        .collect();
    assert_eq!(got, [(2, "a"), (2, "b"), (2, "c"), (2, "d"), (2, "e")]);
    assert_eq!(p0.try_recv().unwrap_err(), TryRecvError::Empty);
}

#[cfg(feature = "std")]
#[test]
fn publish_to_out_of_range_hands_the_value_back() {
    let t = partitioned::<String>(3);
    let v = || String::from("payload");
    let e = t.try_publish_to(3, v()).unwrap_err();
    assert!(matches!(&e, PublishError::InvalidPartition(s) if s == "payload"));
    let e = block_on(t.publish_to(3, v())).unwrap_err();
    assert!(matches!(&e, PublishError::InvalidPartition(_)));
    assert_eq!(e.into_inner(), "payload");
    let e = t.publish_to_blocking(u32::MAX, v()).unwrap_err();
    assert!(matches!(e, PublishError::InvalidPartition(_)));
    let e = block_on(t.publish_batch_to(7, vec![v(), v()])).unwrap_err();
    assert!(matches!(&e, PublishError::InvalidPartition(b) if b.len() == 2));
    assert_eq!(t.stats().published, 0);
    assert!(!e.is_full() && !e.is_closed());
}

#[test]
fn user_router_is_used_for_keyed_publishes() {
    // Routes by the first byte of the key.
    let router = Router::new(|key: &[u8], n: u32| u32::from(key.first().copied().unwrap_or(0)) % n);
    let t: Topic<u8> = Topic::new(TopicConfig::new(8).partitions(5).router(router)).unwrap();
    assert_eq!(t.try_publish_keyed([3u8, 9], 0).unwrap().partition, 3);
    assert_eq!(t.try_publish_keyed([7u8], 0).unwrap().partition, 2);
    assert_eq!(block_on(t.publish_keyed([4u8], 0)).unwrap().partition, 4);
    // Unkeyed publishes still go round-robin.
    let parts: Vec<u32> = (0..5)
        .map(|_| t.try_publish(0).unwrap().partition)
        .collect();
    assert_eq!(parts, [0, 1, 2, 3, 4]);
    assert!(format!("{:?}", Router::new(|_, _| 0)).contains("Router"));
}

#[test]
fn user_router_sees_the_key_and_partition_count() {
    let seen = alloc::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let router = Router::new(move |key: &[u8], n: u32| {
        s2.lock().unwrap().push((key.to_vec(), n));
        0
    });
    let t: Topic<u8> = Topic::new(TopicConfig::new(8).partitions(6).router(router)).unwrap();
    t.try_publish_keyed("k1", 0).unwrap();
    assert_eq!(*seen.lock().unwrap(), [(b"k1".to_vec(), 6)]);
}

#[cfg(feature = "std")]
#[test]
fn user_router_out_of_range_is_invalid_partition() {
    let router = Router::new(|_: &[u8], n: u32| n);
    let t: Topic<String> = Topic::new(TopicConfig::new(8).partitions(3).router(router)).unwrap();
    let e = t.try_publish_keyed("k", String::from("v")).unwrap_err();
    assert!(matches!(&e, PublishError::InvalidPartition(v) if v == "v"));
    let e = block_on(t.publish_keyed("k", String::from("w"))).unwrap_err();
    assert_eq!(e.into_inner(), "w");
    let e = t
        .publish_keyed_blocking("k", String::from("x"))
        .unwrap_err();
    assert!(matches!(e, PublishError::InvalidPartition(_)));
    assert_eq!(t.stats().published, 0);
}

#[test]
fn subscribe_partition_out_of_range_is_an_error() {
    let t = partitioned::<u8>(4);
    assert_eq!(
        t.subscribe_partition(4, StartAt::Earliest).unwrap_err(),
        Error::PartitionOutOfRange {
            partition: 4,
            partitions: 4
        }
    );
    assert!(matches!(
        t.subscribe_partition(u32::MAX, StartAt::Latest),
        Err(Error::PartitionOutOfRange { .. })
    ));
    let single = Topic::<u8>::with_capacity(1).unwrap();
    assert!(matches!(
        single.subscribe_partition(1, StartAt::Latest),
        Err(Error::PartitionOutOfRange {
            partition: 1,
            partitions: 1
        })
    ));
    single.subscribe_partition(0, StartAt::Latest).unwrap();
}

#[test]
fn subscribe_partition_offset_applies_to_that_partition() {
    let t = partitioned::<u32>(2);
    for i in 0..3 {
        t.try_publish_to(1, i).unwrap();
    }
    let mut sub = t.subscribe_partition(1, StartAt::Offset(2)).unwrap();
    assert_eq!(sub.try_recv().unwrap().into_value(), 2);
    // Partition 0 is empty, so offset 2 is past its end.
    assert!(matches!(
        t.subscribe_partition(0, StartAt::Offset(2)),
        Err(Error::OffsetOutOfRange {
            offset: 2,
            partition: 0,
            high: 0
        })
    ));
}

#[test]
fn capacity_is_per_partition() {
    let t: Topic<u32> = Topic::new(TopicConfig::new(2).partitions(3)).unwrap();
    let _sub = t.subscribe(StartAt::Earliest).unwrap();
    for p in 0..3 {
        t.try_publish_to(p, 0).unwrap();
        t.try_publish_to(p, 1).unwrap();
        assert!(t.try_publish_to(p, 2).unwrap_err().is_full());
    }
    assert_eq!(t.capacity(), 2);
    assert_eq!(t.stats().depth, 6);
}

#[test]
fn messages_carry_their_partition() {
    let t = partitioned::<u32>(4);
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    for p in 0..4 {
        t.try_publish_to(p, p).unwrap();
    }
    let mut got: Vec<(u32, u32)> = core::iter::from_fn(|| sub.try_recv().ok())
        .map(|m| (m.partition(), m.into_value()))
        .collect();
    got.sort_unstable();
    assert_eq!(got, [(0, 0), (1, 1), (2, 2), (3, 3)]);
}

#[test]
fn a_members_position_is_what_it_handed_over_and_the_next_reader_starts_there() {
    // On a partitioned topic the group's committed position, lag and delivered count
    // show exactly what a member handed over, and when it leaves, the next member starts
    // right after its last handed-over message.
    let topic =
        memq_core::Topic::<u32>::new(memq_core::TopicConfig::new(64).partitions(2)).unwrap();
    let mut a = topic.group("g", memq_core::StartAt::Earliest).unwrap();
    for v in 0..10 {
        topic.try_publish_to(0, v).unwrap();
    }
    assert_eq!(a.try_recv().unwrap().into_value(), 0);
    assert_eq!(a.try_recv().unwrap().into_value(), 1);
    assert_eq!(a.committed(0).unwrap(), 2);
    let stats = topic.stats();
    assert_eq!(stats.groups[0].delivered, 2);
    assert_eq!(stats.groups[0].lag, 8);
    assert_eq!(stats.delivered, 2);
    let mut b = topic.group("g", memq_core::StartAt::Earliest).unwrap();
    drop(a);
    let rest: Vec<u32> =
        core::iter::from_fn(|| b.try_recv().ok().map(|m| m.into_value())).collect();
    assert_eq!(rest, (2..10).collect::<Vec<_>>());
    assert_eq!(topic.stats().groups[0].delivered, 10);
}

/// A value whose clone panics while `ARMED` holds its number: a `T::clone` that fails
/// half way through a member's fetch.
#[derive(Debug, PartialEq)]
struct Fragile(u32);

static ARMED: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(u32::MAX);

/// Held by the tests that arm [`ARMED`], so that one does not disarm it under another.
static ARMING: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Clone for Fragile {
    fn clone(&self) -> Self {
        if ARMED.load(core::sync::atomic::Ordering::SeqCst) == self.0 {
            panic!("clone of {} fails", self.0);
        }
        Fragile(self.0)
    }
}

#[test]
fn a_member_whose_clone_panics_loses_no_message() {
    // The member reads 0 and 1; cloning 2 panics. Nothing may be lost or skipped with the
    // unwinding receive: once its clone works again, 2 comes next, then the rest, each
    // exactly once, with the counts in step.
    let _arming = ARMING.lock().unwrap_or_else(|e| e.into_inner());
    let topic = Topic::<Fragile>::new(TopicConfig::new(64).partitions(2)).unwrap();
    let mut a = topic.group("g", StartAt::Earliest).unwrap();
    for v in 0..6 {
        topic.try_publish_to(0, Fragile(v)).unwrap();
    }
    ARMED.store(2, core::sync::atomic::Ordering::SeqCst);
    assert_eq!(a.try_recv().unwrap().into_value(), Fragile(0));
    assert_eq!(a.try_recv().unwrap().into_value(), Fragile(1));
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a.try_recv()));
    assert!(res.is_err(), "the clone of 2 panics");
    assert_eq!(topic.stats().groups[0].delivered, 2);
    assert_eq!(a.committed(0).unwrap(), 2);
    ARMED.store(u32::MAX, core::sync::atomic::Ordering::SeqCst);
    let rest: Vec<u32> =
        core::iter::from_fn(|| a.try_recv().ok().map(|m| m.into_value().0)).collect();
    assert_eq!(rest, [2, 3, 4, 5]);
    let stats = topic.stats();
    assert_eq!(stats.groups[0].delivered, 6);
    assert_eq!(stats.groups[0].lag, 0);
    assert_eq!(stats.delivered, 6);
}

#[test]
fn a_batch_whose_clone_panics_keeps_the_groups_count_in_step() {
    // Review finding: a member's batch counted its messages in the group's `delivered`
    // only after the read loop, so a `T::clone` that panicked part way left the group's
    // count behind its committed position (the messages already read were handed over,
    // the partition counted them). On a partitioned topic (members read the log) and on
    // a one-partition topic (members share a pool).
    let _arming = ARMING.lock().unwrap_or_else(|e| e.into_inner());
    for partitions in [2, 1] {
        let topic = Topic::<Fragile>::new(TopicConfig::new(64).partitions(partitions)).unwrap();
        let mut a = topic.group("g", StartAt::Earliest).unwrap();
        for v in 100..106 {
            topic.try_publish_to(0, Fragile(v)).unwrap();
        }
        ARMED.store(102, core::sync::atomic::Ordering::SeqCst);
        let mut buf = Vec::new();
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            a.try_recv_many(&mut buf, 10)
        }));
        ARMED.store(u32::MAX, core::sync::atomic::Ordering::SeqCst);
        assert!(res.is_err(), "the clone of 102 panics");
        let got: Vec<u32> = buf.iter().map(|m| m.value().0).collect();
        assert_eq!(got, [100, 101], "{partitions} partition(s)");
        let stats = topic.stats();
        assert_eq!(stats.groups[0].committed[0], 2);
        assert_eq!(stats.groups[0].delivered, 2, "{partitions} partition(s)");
        assert_eq!(stats.delivered, 2);
        let rest: Vec<u32> =
            core::iter::from_fn(|| a.try_recv().ok().map(|m| m.into_value().0)).collect();
        assert_eq!(rest, [102, 103, 104, 105]);
        let stats = topic.stats();
        assert_eq!((stats.groups[0].delivered, stats.groups[0].lag), (6, 0));
    }
}

#[cfg(feature = "std")]
#[test]
fn keyed_batches_land_whole_on_the_keys_partition_in_order() {
    let t = partitioned::<u32>(4);
    let mut readers: Vec<_> = (0..4)
        .map(|p| t.subscribe_partition(p, StartAt::Earliest).unwrap())
        .collect();
    // Single keyed publishes and keyed batches of the same keys, interleaved, in every
    // mode: each key's messages keep their order in its one partition.
    let keys: [&[u8]; 4] = [b"alpha", b"beta", b"gamma", b"delta"];
    let mut expected: Vec<Vec<(usize, u32)>> = vec![Vec::new(); 4];
    let mut next = 0u32;
    for round in 0..6 {
        for (k, key) in keys.iter().enumerate() {
            let batch: Vec<u32> = (next..next + 3).collect();
            next += 3;
            let p = key_partition(key, 4);
            let receipt = match round % 3 {
                0 => block_on(t.publish_batch_keyed(key, batch.clone())).unwrap(),
                1 => t.try_publish_batch_keyed(key, batch.clone()).unwrap(),
                _ => t.publish_batch_keyed_blocking(key, batch.clone()).unwrap(),
            };
            assert_eq!(receipt.partition, p);
            let single = t.try_publish_keyed(key, next).unwrap();
            // The batch's offsets are contiguous, and the next publish follows them.
            assert_eq!((single.partition, single.offset), (p, receipt.offset + 3));
            expected[p as usize].extend(batch.into_iter().map(|v| (k, v)));
            expected[p as usize].push((k, next));
            next += 1;
        }
    }
    for (p, reader) in readers.iter_mut().enumerate() {
        let got: Vec<u32> = core::iter::from_fn(|| reader.try_recv().ok())
            .map(|m| {
                assert_eq!(m.partition() as usize, p);
                m.into_value()
            })
            .collect();
        let want: Vec<u32> = expected[p].iter().map(|&(_, v)| v).collect();
        assert_eq!(got, want, "partition {p}");
    }
    assert_eq!(t.stats().published, u64::from(next));
}

#[cfg(feature = "std")]
#[test]
fn keyed_batches_follow_a_user_router_and_its_mistakes_hand_the_batch_back() {
    // Routes by the first byte of the key; a key starting with 0xff goes nowhere.
    let router = Router::new(|key: &[u8], n: u32| match key.first() {
        Some(0xff) => n,
        Some(&b) => u32::from(b) % n,
        None => 0,
    });
    let t: Topic<u8> = Topic::new(TopicConfig::new(8).partitions(5).router(router)).unwrap();
    assert_eq!(
        t.try_publish_batch_keyed([3u8], vec![1, 2])
            .unwrap()
            .partition,
        3
    );
    assert_eq!(
        block_on(t.publish_batch_keyed([7u8], vec![1]))
            .unwrap()
            .partition,
        2
    );
    assert_eq!(
        t.publish_batch_keyed_blocking([9u8], vec![1])
            .unwrap()
            .partition,
        4
    );
    let e = t
        .try_publish_batch_keyed([0xffu8], vec![1, 2, 3])
        .unwrap_err();
    assert!(matches!(&e, PublishError::InvalidPartition(b) if b == &[1, 2, 3]));
    let e = block_on(t.publish_batch_keyed([0xffu8], vec![4])).unwrap_err();
    assert_eq!(e.into_inner(), [4]);
    let e = t
        .publish_batch_keyed_blocking([0xffu8], vec![5])
        .unwrap_err();
    assert!(matches!(e, PublishError::InvalidPartition(_)));
    assert_eq!(t.stats().published, 4);
}

#[cfg(feature = "std")]
#[test]
fn batches_to_a_partition_without_waiting_or_from_a_thread() {
    let t: Topic<u32> = Topic::new(TopicConfig::new(4).partitions(2)).unwrap();
    let mut p1 = t.subscribe_partition(1, StartAt::Earliest).unwrap();
    assert_eq!(t.try_publish_batch_to(1, vec![0, 1, 2]).unwrap().offset, 0);
    // No room for two more in partition 1 (capacity 4, `Block`): handed back whole.
    let e = t.try_publish_batch_to(1, vec![3, 4]).unwrap_err();
    assert!(matches!(&e, PublishError::Full(b) if b == &[3, 4]));
    // Partition 0 has room: capacity is per partition.
    assert_eq!(t.try_publish_batch_to(0, vec![9, 9]).unwrap().partition, 0);
    let e = t.try_publish_batch_to(2, vec![5]).unwrap_err();
    assert!(matches!(e, PublishError::InvalidPartition(_)));
    let e = t.try_publish_batch_to(1, vec![0; 5]).unwrap_err();
    assert!(e.is_full(), "larger than the capacity: it could never fit");
    // A blocking batch waits for room for all of it, which the reader makes.
    std::thread::scope(|s| {
        let publisher = s.spawn(|| t.publish_batch_to_blocking(1, vec![3, 4]).unwrap());
        let mut got = Vec::new();
        while got.len() < 5 {
            got.push(p1.recv_blocking().unwrap().into_value());
        }
        assert_eq!(got, [0, 1, 2, 3, 4]);
        assert_eq!(publisher.join().unwrap().offset, 3);
    });
    let e = t.publish_batch_to_blocking(7, vec![1]).unwrap_err();
    assert!(matches!(e, PublishError::InvalidPartition(_)));
    t.close();
    let e = t.publish_batch_to_blocking(0, vec![1]).unwrap_err();
    assert!(e.is_closed());
}

#[cfg(feature = "std")]
#[test]
fn routed_and_batch_publishes_with_a_time_limit_hand_back_what_did_not_fit() {
    use std::time::Duration;
    let short = Duration::from_millis(20);
    let t: Topic<u32> = Topic::new(TopicConfig::new(2).partitions(2)).unwrap();
    let mut p0 = t.subscribe_partition(0, StartAt::Earliest).unwrap();
    let mut p1 = t.subscribe_partition(1, StartAt::Earliest).unwrap();
    let key_to = |p| {
        PINNED
            .iter()
            .map(|k| k.0)
            .find(|k| key_partition(k, 2) == p)
            .unwrap()
    };
    let (key_of_0, key_of_1) = (key_to(0), key_to(1));
    // Room: each goes where it is routed, at once.
    let r = t
        .publish_keyed_blocking_timeout(key_of_0, 1, short)
        .unwrap();
    assert_eq!((r.partition, r.offset), (0, 0));
    let r = t.publish_to_blocking_timeout(1, 2, short).unwrap();
    assert_eq!((r.partition, r.offset), (1, 0));
    let r = t
        .publish_batch_keyed_blocking_timeout(key_of_1, vec![3], short)
        .unwrap();
    assert_eq!((r.partition, r.offset), (1, 1));
    // Partition 1 is full and its reader does not read: everything routed there comes
    // back after the time limit, a batch whole, and nothing was appended.
    let e = t
        .publish_keyed_blocking_timeout(key_of_1, 4, short)
        .unwrap_err();
    assert!(matches!(e, PublishError::Full(4)));
    let e = t
        .publish_to_blocking_timeout(1, 5, Duration::ZERO)
        .unwrap_err();
    assert!(matches!(e, PublishError::Full(5)));
    let e = t
        .publish_batch_to_blocking_timeout(1, vec![6, 7], short)
        .unwrap_err();
    assert!(matches!(&e, PublishError::Full(b) if b == &[6, 7]));
    let e = t
        .publish_batch_keyed_blocking_timeout(key_of_1, vec![8], short)
        .unwrap_err();
    assert!(matches!(&e, PublishError::Full(b) if b == &[8]));
    assert_eq!(t.stats().partitions[1].published, 2);
    // A batch that could never fit is refused at once, whatever the limit.
    let e = t
        .publish_batch_to_blocking_timeout(0, vec![0; 3], Duration::from_secs(60))
        .unwrap_err();
    assert!(matches!(&e, PublishError::Full(b) if b.len() == 3));
    // Bad routes are errors, not waits.
    let e = t.publish_to_blocking_timeout(2, 9, short).unwrap_err();
    assert!(matches!(e, PublishError::InvalidPartition(9)));
    let e = t
        .publish_batch_to_blocking_timeout(u32::MAX, vec![9], short)
        .unwrap_err();
    assert!(matches!(&e, PublishError::InvalidPartition(b) if b == &[9]));
    // A waiting publish gets in when a reader makes room before the limit.
    t.publish_to_blocking_timeout(0, 10, short).unwrap(); // partition 0 is full now
    std::thread::scope(|s| {
        let publisher = s.spawn(|| {
            t.publish_batch_to_blocking_timeout(0, vec![11, 12], Duration::from_secs(30))
        });
        let mut got = Vec::new();
        while got.len() < 4 {
            got.push(p0.recv_blocking().unwrap().into_value());
        }
        assert_eq!(got, [1, 10, 11, 12]);
        assert_eq!(publisher.join().unwrap().unwrap().offset, 2);
    });
    // The publishes that timed out on partition 1 left no place in line behind: once
    // its reader has read, the room is there for the next publisher.
    let got: Vec<u32> = (0..2)
        .map(|_| p1.recv_blocking().unwrap().into_value())
        .collect();
    assert_eq!(got, [2, 3]);
    assert_eq!(t.try_publish_to(1, 13).unwrap().offset, 2);
    assert_eq!(
        t.publish_to_blocking_timeout(1, 14, Duration::ZERO)
            .unwrap()
            .offset,
        3
    );
    t.close();
    let e = t
        .publish_keyed_blocking_timeout(key_of_0, 15, short)
        .unwrap_err();
    assert!(e.is_closed());
}

#[test]
fn key_partition_takes_keys_as_keyed_publishes_do() {
    let topic = partitioned::<u32>(8);
    for key in ["", "a", "user-42", "order-17"] {
        let receipt = topic.try_publish_keyed(key, 1).unwrap();
        // The same key in every form `publish_keyed` accepts routes alike.
        assert_eq!(key_partition(key, 8), receipt.partition);
        assert_eq!(key_partition(key.as_bytes(), 8), receipt.partition);
        assert_eq!(key_partition(String::from(key), 8), receipt.partition);
        let owned: Vec<u8> = key.into();
        assert_eq!(key_partition(owned, 8), receipt.partition);
        assert_eq!(
            key_partition(bytes::Bytes::copy_from_slice(key.as_bytes()), 8),
            receipt.partition
        );
        assert_eq!(
            u64::from(key_partition(key, 8)),
            key_hash(key.as_bytes()) % 8
        );
    }
    assert_eq!(key_partition(b"user-42", 1), 0);
}

/// A blocking publish that finds its partition full and waits routes its message once:
/// the user's router is asked once, round-robin moves on by one, and the message lands
/// where it was routed. (A blocking publish first tries once without waiting; the wait
/// that follows must keep the route it chose.) Each publish below either waits or, if
/// the room was freed before its first try, does not; both must route the same.
#[cfg(feature = "std")]
#[test]
fn a_blocking_publish_that_waits_routes_its_message_once() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    let calls = alloc::sync::Arc::new(AtomicUsize::new(0));
    let (routed, on_route) = mpsc::channel();
    let routed = std::sync::Mutex::new(routed);
    let counted = calls.clone();
    let router = Router::new(move |_: &[u8], _: u32| {
        counted.fetch_add(1, Ordering::SeqCst);
        let _ = routed.lock().unwrap().send(());
        1
    });
    let t: Topic<u32> = Topic::new(TopicConfig::new(1).partitions(2).router(router)).unwrap();
    let mut sub = t.subscribe_partition(1, StartAt::Earliest).unwrap();
    let mut both = t.subscribe(StartAt::Earliest).unwrap();
    t.try_publish_to(1, 0).unwrap();
    assert_eq!(
        t.try_publish(10).unwrap().partition,
        0,
        "round-robin starts at 0"
    );
    let mut read: Vec<u32> = (0..2)
        .map(|_| *both.recv_blocking().unwrap().value())
        .collect();
    read.sort_unstable();
    assert_eq!(read, [0, 10]);
    // Partition 1 is full until `sub` reads message 0: the keyed publish waits for it.
    let receipt = std::thread::scope(|s| {
        let publisher = s.spawn(|| t.publish_keyed_blocking("k", 1));
        on_route.recv().unwrap();
        assert_eq!(*sub.recv_blocking().unwrap().value(), 0);
        publisher.join().unwrap().unwrap()
    });
    assert_eq!((receipt.partition, receipt.offset), (1, 1));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the router was asked once");
    assert_eq!(*both.recv_blocking().unwrap().value(), 1);
    // Unkeyed: round-robin's next turn is partition 1, full until `sub` reads message 1:
    // the blocking publish waits there, and the turn after it is partition 0.
    let receipt = std::thread::scope(|s| {
        let publisher = s.spawn(|| t.publish_blocking(2));
        assert_eq!(*sub.recv_blocking().unwrap().value(), 1);
        publisher.join().unwrap().unwrap()
    });
    assert_eq!((receipt.partition, receipt.offset), (1, 2));
    assert_eq!(t.try_publish(12).unwrap().partition, 0);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}
