//! `AnyTopic` runs the same subscriber and group code on every kind of topic: memq in
//! memory, a durable memq topic in a temporary directory, and Redis.

use crate::common;

use std::time::Duration;

use bytes::Bytes;
use memq_core::{StartAt, Topic, TopicConfig};
use memq_redis::any::{AnyDeadLetters, AnyError, AnyGroupConfig, AnyTopic};
use memq_redis::{Redis, RedisTopic, RedisTopicConfig};
use memq_store::{DurableConfig, DurableTopic, SyncPolicy};

/// What the subscriber scenario saw, to compare across kinds.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    replay: Vec<(u32, u64, Bytes)>,
    refused: String,
    after_seek: Vec<(u32, u64)>,
    latest: (u32, u64, Bytes),
}

async fn recv(sub: &mut memq_redis::any::AnySubscriber) -> memq_redis::any::AnyMessage {
    tokio::time::timeout(common::PATIENCE, sub.recv())
        .await
        .expect("a message within the patience bound")
        .expect("a message")
}

/// Two partitions: three messages on 0, one on 1; replay, a refused start and seek past
/// the end, a seek back, and `Latest`.
async fn subscriber_scenario(topic: &AnyTopic) -> Seen {
    for i in 0..3 {
        topic.publish_to(0, format!("a{i}")).await.unwrap();
    }
    topic.publish_to(1, "b0").await.unwrap();
    let bad = topic.publish_to(2, "x").await.unwrap_err();
    assert!(matches!(bad.error, AnyError::InvalidPartition));
    assert_eq!(bad.message.as_ref(), b"x");

    let mut sub = topic.subscribe(StartAt::Earliest).await.unwrap();
    let mut replay = Vec::new();
    for _ in 0..4 {
        let m = recv(&mut sub).await;
        replay.push((m.partition(), m.offset(), m.value().clone()));
    }
    replay.sort();

    let refused = match topic.subscribe(StartAt::Offset(2)).await {
        Err(e @ AnyError::OffsetOutOfRange { .. }) => e.to_string(),
        other => panic!("a start past the end of partition 1: {other:?}"),
    };
    assert!(matches!(
        sub.seek(2).await,
        Err(AnyError::OffsetOutOfRange {
            offset: 2,
            partition: 1,
            high: 1
        })
    ));
    sub.seek(1).await.unwrap();
    let mut after_seek: Vec<(u32, u64)> = Vec::new();
    for _ in 0..2 {
        let m = recv(&mut sub).await;
        after_seek.push((m.partition(), m.offset()));
    }
    after_seek.sort();

    sub.seek_to(StartAt::Latest).await.unwrap();
    let r = topic.publish_to(1, "b1").await.unwrap();
    let m = recv(&mut sub).await;
    assert_eq!((m.partition(), m.offset()), (r.partition, r.offset));
    Seen {
        replay,
        refused,
        after_seek,
        latest: (m.partition(), m.offset(), m.value().clone()),
    }
}

/// An explicit-ack group: a nacked message comes back with its delivery count up, an
/// acked one never does; a dead-letter topic of another kind is refused.
async fn group_scenario(topic: &AnyTopic, other_kind: AnyDeadLetters) -> Vec<(u64, u32)> {
    let config = AnyGroupConfig::new(Duration::from_secs(30));
    assert!(matches!(
        topic
            .group_acked(
                "g",
                StartAt::Earliest,
                config.clone().dead_letter(other_kind)
            )
            .await,
        Err(AnyError::KindMismatch)
    ));
    let mut member = topic
        .group_acked("g", StartAt::Offset(1), config)
        .await
        .unwrap();
    let mut seen = Vec::new();
    // Partition 0 holds a1, a2 from offset 1; partition 1 holds b1 at offset 1.
    while seen.len() < 4 {
        let d = tokio::time::timeout(common::PATIENCE, member.recv())
            .await
            .expect("a delivery within the patience bound")
            .unwrap();
        seen.push((d.offset(), d.deliveries()));
        if d.value().as_ref() == b"a1" && d.deliveries() == 1 {
            d.nack().await.unwrap();
        } else {
            d.ack().await.unwrap();
        }
    }
    seen.sort();
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_code_on_memory_disk_and_redis() {
    let Some(server) = common::server() else {
        return;
    };
    let memory = AnyTopic::Memory(Topic::new(TopicConfig::new(64).partitions(2)).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let durable = AnyTopic::Durable(
        DurableTopic::open(
            dir.path(),
            TopicConfig::new(64).partitions(2),
            DurableConfig::new(SyncPolicy::Never),
        )
        .unwrap(),
    );
    let redis = Redis::connect(&server.url()).await.unwrap();
    let on_redis = AnyTopic::Redis(
        RedisTopic::open(&redis, "any", RedisTopicConfig::new(2))
            .await
            .unwrap(),
    );

    let in_memory = subscriber_scenario(&memory).await;
    assert_eq!(in_memory.replay.len(), 4);
    assert_eq!(
        in_memory.refused,
        "offset 2 is past the end of partition 1 (next offset is 1)"
    );
    assert_eq!(in_memory.after_seek, vec![(0, 1), (0, 2)]);
    assert_eq!(subscriber_scenario(&durable).await, in_memory, "durable");
    assert_eq!(subscriber_scenario(&on_redis).await, in_memory, "redis");

    let dlq = |kind: &str| -> AnyDeadLetters {
        match kind {
            "memory" => AnyDeadLetters::Durable,
            _ => AnyDeadLetters::Memory(Topic::new(TopicConfig::new(4)).unwrap()),
        }
    };
    let in_memory = group_scenario(&memory, dlq("memory")).await;
    assert_eq!(in_memory, vec![(1, 1), (1, 1), (1, 2), (2, 1)]);
    assert_eq!(group_scenario(&durable, dlq("durable")).await, in_memory);
    assert_eq!(group_scenario(&on_redis, dlq("redis")).await, in_memory);

    // max_in_flight: one out at a time per partition, in memory and on Redis; a durable
    // group has no such bound, and says so.
    let one = AnyGroupConfig::new(Duration::from_secs(30)).max_in_flight(1);
    for topic in [&memory, &on_redis] {
        let mut member = topic
            .group_acked("one", StartAt::Earliest, one.clone())
            .await
            .unwrap();
        let mut out = Vec::new();
        for _ in 0..2 {
            out.push(
                tokio::time::timeout(common::PATIENCE, member.recv())
                    .await
                    .unwrap()
                    .unwrap(),
            );
        }
        let mut partitions: Vec<u32> = out.iter().map(|d| d.partition()).collect();
        partitions.sort();
        assert_eq!(partitions, vec![0, 1], "one out on each partition");
        // Nothing more while they are out (a short wait only weakens this check).
        assert!(
            tokio::time::timeout(Duration::from_millis(300), member.recv())
                .await
                .is_err(),
            "a second delivery out on a partition"
        );
        for d in out {
            d.ack().await.unwrap();
        }
        let next = tokio::time::timeout(common::PATIENCE, member.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(next.offset(), 1);
        next.ack().await.unwrap();
    }
    for config in [
        one,
        AnyGroupConfig::new(Duration::from_secs(30))
            .backoff(memq_core::Backoff::fixed(Duration::from_secs(1))),
    ] {
        assert!(matches!(
            durable.group_acked("one", StartAt::Earliest, config).await,
            Err(AnyError::Unsupported(_))
        ));
    }
}
