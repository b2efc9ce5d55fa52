//! The bridges across a restart of the bridge itself: stopped while messages flow and
//! started again on the same topics and group, they deliver every message (at least
//! once; repeats are counted, never strangers).

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use memq_core::{StartAt, Topic, TopicConfig};
use memq_redis::bridge::{forward_from_redis, forward_to_redis};
use memq_redis::{GroupConfig, Redis, RedisTopic, RedisTopicConfig};

const N: u64 = 2000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_to_local_survives_a_bridge_restart() {
    let Some(server) = common::server() else {
        return;
    };
    let redis = Redis::connect(&server.url()).await.unwrap();
    let remote = RedisTopic::open(&redis, "in", RedisTopicConfig::new(2))
        .await
        .unwrap();
    let local = Topic::<Bytes>::new(TopicConfig::new(1 << 13).partitions(2)).unwrap();
    let mut sub = local.subscribe(StartAt::Earliest).unwrap();
    for i in 0..N {
        remote.publish(format!("m{i}")).await.unwrap();
    }
    let bridge = forward_from_redis(&remote, "b", local.clone(), Duration::from_secs(1))
        .await
        .unwrap();
    let mut seen: HashMap<Bytes, u32> = HashMap::new();
    // Stop it once part of the stream went through, then start it again.
    while seen.len() < (N / 4) as usize {
        let m = tokio::time::timeout(common::PATIENCE, sub.recv())
            .await
            .unwrap()
            .unwrap();
        *seen.entry(m.into_value()).or_default() += 1;
    }
    bridge.stop().await;
    let bridge = forward_from_redis(&remote, "b", local.clone(), Duration::from_secs(1))
        .await
        .unwrap();
    while seen.len() < N as usize {
        let m = tokio::time::timeout(common::PATIENCE, sub.recv())
            .await
            .unwrap()
            .unwrap();
        *seen.entry(m.into_value()).or_default() += 1;
    }
    let repeats: u32 = seen.values().map(|n| n - 1).sum();
    println!("redis -> local: {N} messages, {repeats} repeated across the restart");
    assert!((0..N).all(|i| seen.contains_key(&Bytes::from(format!("m{i}")))));
    bridge.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_to_redis_survives_a_bridge_restart() {
    let Some(server) = common::server() else {
        return;
    };
    let redis = Redis::connect(&server.url()).await.unwrap();
    let remote = RedisTopic::open(&redis, "out", RedisTopicConfig::new(2))
        .await
        .unwrap();
    let local = Topic::<Bytes>::new(TopicConfig::new(1 << 13).partitions(2)).unwrap();
    let mut reader = remote
        .group("check", StartAt::Earliest, GroupConfig::auto())
        .await
        .unwrap();
    let bridge = forward_to_redis(&local, "b", remote.clone(), Duration::from_secs(1)).unwrap();
    for i in 0..N {
        local.publish(Bytes::from(format!("m{i}"))).await.unwrap();
    }
    let mut seen: HashMap<Bytes, u32> = HashMap::new();
    while seen.len() < (N / 4) as usize {
        let m = reader
            .recv_timeout(common::PATIENCE)
            .await
            .unwrap()
            .unwrap();
        *seen.entry(m.payload).or_default() += 1;
    }
    bridge.stop().await;
    let bridge = forward_to_redis(&local, "b", remote.clone(), Duration::from_secs(1)).unwrap();
    while seen.len() < N as usize {
        let m = reader
            .recv_timeout(common::PATIENCE)
            .await
            .unwrap()
            .unwrap();
        *seen.entry(m.payload).or_default() += 1;
    }
    let repeats: u32 = seen.values().map(|n| n - 1).sum();
    println!("local -> redis: {N} messages, {repeats} repeated across the restart");
    assert!((0..N).all(|i| seen.contains_key(&Bytes::from(format!("m{i}")))));
    bridge.stop().await;
}
