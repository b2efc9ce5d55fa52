//! The fault test: redis-server (appendonly yes, appendfsync always) is killed with
//! SIGKILL while publishers, group members and both bridges run, and started again on the
//! same port and directory. Publishes that failed come back to their publisher with
//! their messages and are published again; consumers and bridges resume. Every message
//! is counted: none acknowledged is lost, and duplicates (at least once) are counted.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use memq_core::{StartAt, Topic, TopicConfig};
use memq_redis::bridge::{forward_from_redis, forward_to_redis};
use memq_redis::{GroupConfig, Redis, RedisTopic, RedisTopicConfig};

const PER_PUBLISHER: u64 = 3000;
const LOCAL: u64 = 2000;

type Seen = Arc<Mutex<HashMap<Bytes, u32>>>;

fn count(seen: &Seen, v: Bytes) {
    *seen.lock().unwrap().entry(v).or_default() += 1;
}

/// Spawns a member of `group` that records and acks everything it gets.
async fn member(topic: &RedisTopic, group: &str, seen: Seen) -> tokio::task::JoinHandle<()> {
    let mut m = topic
        .group(
            group,
            StartAt::Earliest,
            GroupConfig::acked(Duration::from_secs(2)),
        )
        .await
        .unwrap();
    tokio::spawn(async move {
        while let Ok(d) = m.recv_delivery().await {
            // Counted as handled when received (the work is done before the ack); an ack
            // whose reply was lost to the kill may or may not have been applied: then the
            // message comes back and counts as a duplicate.
            count(&seen, d.value().clone());
            let _ = d.ack().await;
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_under_load_loses_nothing_acknowledged() {
    let Some(mut server) = common::server() else {
        return;
    };
    let redis = Redis::connect(&server.url()).await.unwrap();
    let topic = RedisTopic::open(&redis, "fault", RedisTopicConfig::new(2))
        .await
        .unwrap();
    let bridged = RedisTopic::open(&redis, "bridged", RedisTopicConfig::new(2))
        .await
        .unwrap();

    // Consumers: two group members, and the Redis -> local bridge into `inbox`.
    let in_group: Seen = Arc::default();
    let via_bridge: Seen = Arc::default();
    let from_local: Seen = Arc::default();
    let members = vec![
        member(&topic, "g", in_group.clone()).await,
        member(&topic, "g", in_group.clone()).await,
        member(&bridged, "out", from_local.clone()).await,
    ];
    let inbox = Topic::<Bytes>::new(TopicConfig::new(1 << 14).partitions(2)).unwrap();
    let mut inbox_sub = inbox.subscribe(StartAt::Earliest).unwrap();
    let inbox_reader = {
        let seen = via_bridge.clone();
        tokio::spawn(async move {
            while let Ok(m) = inbox_sub.recv().await {
                count(&seen, m.into_value());
            }
        })
    };
    let bridge_in = forward_from_redis(&topic, "bridge", inbox.clone(), Duration::from_secs(2))
        .await
        .unwrap();
    // The local -> Redis bridge from `outbox`.
    let outbox = Topic::<Bytes>::new(TopicConfig::new(1 << 12).partitions(2)).unwrap();
    let bridge_out =
        forward_to_redis(&outbox, "to-redis", bridged.clone(), Duration::from_secs(2)).unwrap();

    // Publishers: one message at a time, and batches of 10; a failed publish is retried
    // with the messages it handed back. Only what returned Ok counts as acknowledged.
    let acked: Arc<Mutex<HashSet<Bytes>>> = Arc::default();
    let progress = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    let mut publishers = Vec::new();
    for t in 0..2u64 {
        let (topic, acked, progress, failures) = (
            topic.clone(),
            acked.clone(),
            progress.clone(),
            failures.clone(),
        );
        publishers.push(tokio::spawn(async move {
            let mut i = 0;
            while i < PER_PUBLISHER {
                if t == 0 {
                    let mut msg = Bytes::from(format!("p{t}-{i}"));
                    loop {
                        match tokio::time::timeout(
                            Duration::from_secs(20),
                            topic.publish(msg.clone()),
                        )
                        .await
                        .expect("a publish returns, with an error at worst")
                        {
                            Ok(_) => break,
                            Err(e) => {
                                failures.fetch_add(1, Ordering::Relaxed);
                                // The message comes back with the error.
                                assert_eq!(e.messages, msg);
                                msg = e.into_inner();
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                        }
                    }
                    acked.lock().unwrap().insert(msg);
                    i += 1;
                } else {
                    let mut batch: Vec<Bytes> = (i..i + 10)
                        .map(|j| Bytes::from(format!("p{t}-{j}")))
                        .collect();
                    loop {
                        match tokio::time::timeout(
                            Duration::from_secs(20),
                            topic.publish_batch(batch.clone()),
                        )
                        .await
                        .expect("a publish returns, with an error at worst")
                        {
                            Ok(_) => break,
                            Err(e) => {
                                failures.fetch_add(1, Ordering::Relaxed);
                                assert_eq!(e.messages, batch);
                                batch = e.into_inner();
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                        }
                    }
                    acked.lock().unwrap().extend(batch);
                    i += 10;
                }
                progress.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let local_publisher = {
        let outbox = outbox.clone();
        tokio::spawn(async move {
            for i in 0..LOCAL {
                outbox.publish(Bytes::from(format!("l-{i}"))).await.unwrap();
                if i % 100 == 0 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        })
    };

    // Kill the server once the publishers are well under way, then start it again.
    common::scenarios::eventually(|| async { progress.load(Ordering::Relaxed) >= 500 }).await;
    server.kill();
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.restart().unwrap();
    let killed_at = progress.load(Ordering::Relaxed);

    for p in publishers {
        p.await.unwrap();
    }
    local_publisher.await.unwrap();
    let acked: HashSet<Bytes> = acked.lock().unwrap().clone();
    assert_eq!(acked.len() as u64, 2 * PER_PUBLISHER);
    let locals: HashSet<Bytes> = (0..LOCAL).map(|i| Bytes::from(format!("l-{i}"))).collect();

    // Everything acknowledged arrives in the group, through the bridge, and everything
    // published locally arrives in Redis.
    let missing = |seen: &Seen, want: &HashSet<Bytes>| {
        let s = seen.lock().unwrap();
        want.iter().filter(|v| !s.contains_key(*v)).count()
    };
    let t0 = std::time::Instant::now();
    loop {
        let m = (
            missing(&in_group, &acked),
            missing(&via_bridge, &acked),
            missing(&from_local, &locals),
        );
        if m == (0, 0, 0) {
            break;
        }
        assert!(
            t0.elapsed() < common::PATIENCE,
            "not arrived (group, bridge in, bridge out): {m:?}; bridge out retries {}, forwarded {}; bridge in forwarded {}",
            bridge_out.counters().retries(),
            bridge_out.counters().forwarded(),
            bridge_in.counters().forwarded(),
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let dups = |seen: &Seen| {
        seen.lock()
            .unwrap()
            .values()
            .map(|&n| u64::from(n - 1))
            .sum::<u64>()
    };
    let strays = |seen: &Seen, want: &HashSet<Bytes>| {
        seen.lock()
            .unwrap()
            .keys()
            .filter(|k| !want.contains(*k))
            .count()
    };
    let (group_len, local_len) = (
        in_group.lock().unwrap().len(),
        from_local.lock().unwrap().len(),
    );
    println!(
        "killed after {killed_at} publishes; {} failed publishes retried; group: {group_len} \
         messages, {} duplicates; bridge in: {} duplicates; bridge out: {local_len} messages, \
         {} duplicates, {} retries",
        failures.load(Ordering::Relaxed),
        dups(&in_group),
        dups(&via_bridge),
        dups(&from_local),
        bridge_out.counters().retries(),
    );
    // Nothing arrived that was not published (a failed publish retried may arrive twice,
    // which counts as a duplicate, never as a stranger).
    assert_eq!(strays(&in_group, &acked), 0);
    assert_eq!(strays(&via_bridge, &acked), 0);
    assert_eq!(strays(&from_local, &locals), 0);
    bridge_in.stop().await;
    bridge_out.stop().await;
    inbox_reader.abort();
    for m in members {
        m.abort();
    }
}
