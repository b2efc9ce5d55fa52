//! Multi-thread stress tests that count every message: under `Block` nothing is lost or
//! duplicated, also on topics that release messages once read; under `DropOldest` every
//! gap is reported as lag.

use std::collections::HashMap;
use std::sync::{Arc, Barrier};
use std::thread;

use memq_core::{Overflow, RecvError, StartAt, Topic, TopicConfig};

/// `MEMQ_STRESS_SCALE` (a factor, default 1) shrinks or grows every message count, so
/// that slow runs (ThreadSanitizer, AddressSanitizer) stay short.
fn scaled(n: u64) -> u64 {
    let scale = std::env::var("MEMQ_STRESS_SCALE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .unwrap_or(1.0);
    ((n as f64 * scale) as u64).max(1_000)
}

/// A message id: publisher in the high bits, sequence in the low bits.
fn id(publisher: u64, seq: u64) -> u64 {
    (publisher << 32) | seq
}

#[test]
fn four_publishers_four_group_members_block_no_loss_no_duplicates() {
    four_publishers_four_group_members(false);
}

#[test]
fn four_publishers_four_group_members_of_a_releasing_topic_no_loss_no_duplicates() {
    four_publishers_four_group_members(true);
}

fn four_publishers_four_group_members(release: bool) {
    let per_publisher = scaled(50_000);
    let topic = Topic::<u64>::new(TopicConfig::new(256).release_on_read(release)).unwrap();
    let members: Vec<_> = (0..4)
        .map(|_| topic.group("workers", StartAt::Earliest).unwrap())
        .collect();
    let start = Arc::new(Barrier::new(8));
    let consumers: Vec<_> = members
        .into_iter()
        .map(|mut member| {
            let start = start.clone();
            thread::spawn(move || {
                start.wait();
                let mut got = Vec::new();
                let mut buf = Vec::new();
                loop {
                    // Alternate single and batched receives to exercise both paths.
                    if got.len() % 2 == 0 {
                        match member.recv_blocking() {
                            Ok(m) => got.push(m.into_value()),
                            Err(RecvError::Closed) => break,
                            Err(e) => panic!("unexpected {e}"),
                        }
                    } else {
                        match member.recv_many_blocking(&mut buf, 64) {
                            Ok(0) => break,
                            Ok(_) => got.extend(buf.drain(..).map(|m| m.into_value())),
                            Err(e) => panic!("unexpected {e}"),
                        }
                    }
                }
                got
            })
        })
        .collect();
    let publishers: Vec<_> = (0..4)
        .map(|p| {
            let topic = topic.clone();
            let start = start.clone();
            thread::spawn(move || {
                start.wait();
                for seq in 0..per_publisher {
                    topic.publish_blocking(id(p, seq)).unwrap();
                }
            })
        })
        .collect();
    for p in publishers {
        p.join().unwrap();
    }
    drop(topic); // last handle: closes, members drain and stop
    let mut seen: HashMap<u64, u32> = HashMap::new();
    let mut per_member = Vec::new();
    for c in consumers {
        let got = c.join().unwrap();
        per_member.push(got.len());
        // Per publisher, a member sees that publisher's messages in order.
        let mut last = [None::<u64>; 4];
        for v in got {
            let (p, seq) = ((v >> 32) as usize, v & 0xffff_ffff);
            if let Some(prev) = last[p] {
                assert!(seq > prev, "publisher {p}: {seq} after {prev}");
            }
            last[p] = Some(seq);
            *seen.entry(v).or_default() += 1;
        }
    }
    let total = 4 * per_publisher as usize;
    let duplicated = seen.values().filter(|&&n| n > 1).count();
    assert_eq!(duplicated, 0, "duplicated messages");
    assert_eq!(seen.len(), total, "lost {} messages", total - seen.len());
    assert_eq!(per_member.iter().sum::<usize>(), total);
}

#[test]
fn one_publisher_four_subscribers_block_every_subscriber_gets_everything_in_order() {
    one_publisher_four_subscribers(false);
}

#[test]
fn one_publisher_four_subscribers_of_a_releasing_topic_get_everything_in_order() {
    one_publisher_four_subscribers(true);
}

fn one_publisher_four_subscribers(release: bool) {
    let topic = Topic::<u64>::new(TopicConfig::new(128).release_on_read(release)).unwrap();
    let subs: Vec<_> = (0..4)
        .map(|_| topic.subscribe(StartAt::Earliest).unwrap())
        .collect();
    let readers: Vec<_> = subs
        .into_iter()
        .enumerate()
        .map(|(i, mut sub)| {
            thread::spawn(move || {
                let mut expected = 0u64;
                let mut buf = Vec::new();
                loop {
                    let n = if i % 2 == 0 {
                        match sub.recv_blocking() {
                            Ok(m) => {
                                buf.push(m);
                                1
                            }
                            Err(RecvError::Closed) => 0,
                            Err(e) => panic!("unexpected {e}"),
                        }
                    } else {
                        sub.recv_many_blocking(&mut buf, 32).unwrap()
                    };
                    if n == 0 {
                        break;
                    }
                    for m in buf.drain(..) {
                        assert_eq!(m.offset(), expected);
                        assert_eq!(*m.value(), expected);
                        expected += 1;
                    }
                }
                expected
            })
        })
        .collect();
    let n = scaled(200_000);
    for v in 0..n {
        topic.publish_blocking(v).unwrap();
    }
    topic.close();
    for r in readers {
        assert_eq!(r.join().unwrap(), n, "a subscriber lost messages");
    }
}

#[test]
fn partitioned_keys_group_keeps_per_key_order_no_loss() {
    partitioned_keys_group(false);
}

#[test]
fn partitioned_keys_group_of_a_releasing_topic_keeps_per_key_order_no_loss() {
    partitioned_keys_group(true);
}

fn partitioned_keys_group(release: bool) {
    let partitions = 4;
    let config = TopicConfig::new(64)
        .partitions(partitions)
        .release_on_read(release);
    let topic = Topic::<(u32, u64)>::new(config).unwrap();
    let members: Vec<_> = (0..4)
        .map(|_| topic.group("g", StartAt::Earliest).unwrap())
        .collect();
    let consumers: Vec<_> = members
        .into_iter()
        .map(|mut member| {
            thread::spawn(move || {
                let mut got: Vec<(u32, (u32, u64))> = Vec::new();
                loop {
                    match member.recv_blocking() {
                        Ok(m) => got.push((m.partition(), m.into_value())),
                        Err(RecvError::Closed) => break,
                        Err(e) => panic!("unexpected {e}"),
                    }
                }
                got
            })
        })
        .collect();
    let keys = 32u32;
    let per_key = scaled(5_000);
    let publishers: Vec<_> = (0..2)
        .map(|half| {
            let topic = topic.clone();
            thread::spawn(move || {
                for seq in 0..per_key {
                    for key in (half * keys / 2)..((half + 1) * keys / 2) {
                        let r = topic
                            .publish_keyed_blocking(key.to_le_bytes(), (key, seq))
                            .unwrap();
                        assert_eq!(
                            r.partition,
                            memq_core::key_partition(key.to_le_bytes(), partitions)
                        );
                    }
                }
            })
        })
        .collect();
    for p in publishers {
        p.join().unwrap();
    }
    drop(topic);
    let mut next = vec![0u64; keys as usize];
    let mut total = 0;
    let mut all: Vec<Vec<(u32, (u32, u64))>> = Vec::new();
    for c in consumers {
        all.push(c.join().unwrap());
    }
    // A key's messages may move between members only on a rebalance, and every member
    // here joined before publishing started: each key's sequence is read in order.
    for got in &all {
        let mut last: HashMap<u32, u64> = HashMap::new();
        for &(p, (key, seq)) in got {
            assert_eq!(p, memq_core::key_partition(key.to_le_bytes(), partitions));
            if let Some(prev) = last.insert(key, seq) {
                assert!(seq > prev, "key {key}: {seq} after {prev}");
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    for got in all {
        for (_, (key, seq)) in got {
            assert!(seen.insert((key, seq)), "duplicate {key}/{seq}");
            next[key as usize] += 1;
            total += 1;
        }
    }
    assert_eq!(total, keys as u64 * per_key, "lost messages");
    assert!(next.iter().all(|&n| n == per_key));
}

#[test]
fn drop_oldest_every_gap_is_reported_as_lag() {
    let topic = Topic::<u64>::new(TopicConfig::new(64).overflow(Overflow::DropOldest)).unwrap();
    let subs: Vec<_> = (0..4)
        .map(|_| topic.subscribe(StartAt::Earliest).unwrap())
        .collect();
    let readers: Vec<_> = subs
        .into_iter()
        .enumerate()
        .map(|(i, mut sub)| {
            thread::spawn(move || {
                let (mut delivered, mut lagged) = (0u64, 0u64);
                let mut last = None::<u64>;
                loop {
                    match sub.recv_blocking() {
                        Ok(m) => {
                            // Offsets only move forward, skipping exactly the lagged ones.
                            if let Some(l) = last {
                                assert!(m.offset() > l);
                            }
                            last = Some(m.offset());
                            delivered += 1;
                            if i == 0 && delivered % 64 == 0 {
                                // One slow reader, to force evictions.
                                thread::yield_now();
                            }
                        }
                        Err(RecvError::Lagged(n)) => lagged += n,
                        Err(RecvError::Closed) => break,
                        Err(e) => panic!("unexpected {e}"),
                    }
                }
                (delivered, lagged)
            })
        })
        .collect();
    let n = scaled(200_000);
    for v in 0..n {
        topic.try_publish(v).unwrap();
    }
    let evicted = topic.stats().evicted;
    topic.close();
    for r in readers {
        let (delivered, lagged) = r.join().unwrap();
        assert_eq!(
            delivered + lagged,
            n,
            "delivered {delivered} + lagged {lagged}"
        );
    }
    assert!(evicted >= n - 64);
}
