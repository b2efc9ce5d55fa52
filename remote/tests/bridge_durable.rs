//! The durable bridges across restarts of either side: the durable side is closed and
//! opened again from its directory (as a restarted process would), the bridge is stopped
//! and started again, and redis-server is killed with SIGKILL and restarted on its
//! append-only file; every message arrives (at least once; repeats are counted, never
//! strangers).

use crate::common;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use memq_core::{StartAt, TopicConfig};
use memq_redis::bridge::{forward_durable_to_redis, forward_redis_to_durable};
use memq_redis::{GroupConfig, Redis, RedisConsumer, RedisTopic, RedisTopicConfig};
use memq_store::{DurableConfig, DurableSubscriber, DurableTopic, SyncPolicy};

const N: u64 = 2000;
const ACK_WAIT: Duration = Duration::from_secs(1);

fn open(dir: &Path, sync: SyncPolicy) -> DurableTopic {
    DurableTopic::open(
        dir,
        TopicConfig::new(256).partitions(2),
        DurableConfig::new(sync),
    )
    .unwrap()
}

fn all_seen(seen: &HashMap<Bytes, u32>) -> bool {
    (0..N).all(|i| seen.contains_key(&Bytes::from(format!("m{i}"))))
}

/// Reads `reader` until `seen` holds `until` distinct messages.
async fn read_redis(reader: &mut RedisConsumer, seen: &mut HashMap<Bytes, u32>, until: u64) {
    while (seen.len() as u64) < until {
        let m = reader
            .recv_timeout(common::PATIENCE)
            .await
            .unwrap()
            .expect("a message within the patience bound");
        *seen.entry(m.payload).or_default() += 1;
    }
}

/// Reads `sub` until `seen` holds `until` distinct messages.
async fn read_durable(sub: &mut DurableSubscriber, seen: &mut HashMap<Bytes, u32>, until: u64) {
    while (seen.len() as u64) < until {
        let m = tokio::time::timeout(common::PATIENCE, sub.recv())
            .await
            .expect("a message within the patience bound")
            .unwrap();
        *seen.entry(m.payload).or_default() += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_to_redis_survives_restarts_of_either_side() {
    let Some(mut server) = common::server() else {
        return;
    };
    let redis = Redis::connect(&server.url()).await.unwrap();
    let remote = RedisTopic::open(&redis, "out", RedisTopicConfig::new(2))
        .await
        .unwrap();
    let mut reader = remote
        .group("check", StartAt::Earliest, GroupConfig::auto())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let local = open(dir.path(), SyncPolicy::Never);
    for i in 0..N {
        local.publish(format!("m{i}")).await.unwrap();
    }
    let bridge = forward_durable_to_redis(&local, "b", remote.clone(), ACK_WAIT).unwrap();
    let mut seen = HashMap::new();
    read_redis(&mut reader, &mut seen, N / 4).await;

    // The durable side restarts: the bridge stops (its group writes its position), the
    // topic closes, and both come back from the directory.
    bridge.stop().await;
    drop(local);
    let local = open(dir.path(), SyncPolicy::Never);
    let bridge = forward_durable_to_redis(&local, "b", remote.clone(), ACK_WAIT).unwrap();
    read_redis(&mut reader, &mut seen, N / 2).await;

    // Redis restarts under the bridge: it retries until Redis is back.
    server.kill();
    server.restart().unwrap();
    read_redis(&mut reader, &mut seen, N).await;
    let repeats: u32 = seen.values().map(|n| n - 1).sum();
    println!(
        "durable -> redis: {N} messages, {repeats} repeated across the restarts, {} publishes retried",
        bridge.counters().retries()
    );
    assert!(all_seen(&seen));
    assert_eq!(seen.len() as u64, N, "nothing but the messages published");
    // The restarted bridge went on from the group's committed position, not from the
    // start (which would repeat at least the quarter read before the restart).
    assert!(
        u64::from(repeats) < N / 4,
        "{repeats} repeats: resumed from the start?"
    );
    bridge.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_to_durable_survives_restarts_of_either_side() {
    let Some(mut server) = common::server() else {
        return;
    };
    let redis = Redis::connect(&server.url()).await.unwrap();
    let remote = RedisTopic::open(&redis, "in", RedisTopicConfig::new(2))
        .await
        .unwrap();
    for i in 0..N {
        remote.publish(format!("m{i}")).await.unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    // `Always`: a message is on the disk before the bridge acks it in Redis.
    let local = open(dir.path(), SyncPolicy::Always);
    let mut sub = local.subscribe(StartAt::Earliest).unwrap();
    let bridge = forward_redis_to_durable(&remote, "b", local.clone(), ACK_WAIT)
        .await
        .unwrap();
    let mut before = HashMap::new();
    read_durable(&mut sub, &mut before, N / 4).await;

    // The durable side restarts: the bridge stops, the topic closes and is opened again
    // from its directory, and a new bridge goes on from the Redis group.
    bridge.stop().await;
    drop(sub);
    drop(local);
    let local = open(dir.path(), SyncPolicy::Always);
    // Everything is read again from the start of the log: what came before the restart
    // is on disk.
    let mut sub = local.subscribe(StartAt::Earliest).unwrap();
    let bridge = forward_redis_to_durable(&remote, "b", local.clone(), ACK_WAIT)
        .await
        .unwrap();
    let mut seen = HashMap::new();
    read_durable(&mut sub, &mut seen, N / 2).await;

    // Redis restarts under the bridge: its group and pending entries come back from the
    // append-only file.
    server.kill();
    server.restart().unwrap();
    read_durable(&mut sub, &mut seen, N).await;
    let repeats: u32 = seen.values().map(|n| n - 1).sum();
    println!(
        "redis -> durable: {N} messages, {repeats} repeated across the restarts; {} forwarded after the restart of the durable side",
        bridge.counters().forwarded()
    );
    assert!(all_seen(&seen));
    assert_eq!(seen.len() as u64, N, "nothing but the messages published");
    assert!(
        before.keys().all(|m| seen.contains_key(m)),
        "what was forwarded before the restart is read again from the log"
    );
    bridge.stop().await;
}
