//! The semantic scenarios against a 3-master Redis Cluster started by the test: the
//! partitions of each topic spread over the masters.

use crate::common;

use std::collections::HashSet;
use std::process::Command;

use memq_redis::testing::RedisCluster;
use memq_redis::{Redis, RedisTopic, RedisTopicConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_on_a_cluster() {
    let Some(cluster) = common::cluster() else {
        return;
    };
    let redis = Redis::connect_cluster(&cluster.urls()).await.unwrap();
    assert!(redis.is_cluster());
    // The partitions of a topic live on different masters.
    let topic = RedisTopic::open(&redis, "spread", RedisTopicConfig::new(8))
        .await
        .unwrap();
    let owners: HashSet<u16> = (0..8)
        .map(|p| owner_of(&cluster, key_slot(&cluster, topic.stream_key(p).unwrap())))
        .collect();
    assert!(
        owners.len() >= 2,
        "8 partitions all on one master: {owners:?}"
    );
    common::scenarios::all(&redis, "cluster").await;
}

fn redis_cli(cluster: &RedisCluster, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &cluster.nodes[0].port().to_string(), "--raw"])
        .args(args)
        .output()
        .expect("redis-cli runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The slot of a key, as Redis computes it.
fn key_slot(cluster: &RedisCluster, key: &str) -> u16 {
    redis_cli(cluster, &["cluster", "keyslot", key])
        .trim()
        .parse()
        .unwrap()
}

/// The port of the master serving `slot`, from `CLUSTER SLOTS` (each range printed as
/// start, end, then its master's ip, port and id).
fn owner_of(cluster: &RedisCluster, slot: u16) -> u16 {
    let text = redis_cli(cluster, &["cluster", "slots"]);
    let lines: Vec<&str> = text.lines().collect();
    for w in lines.windows(4) {
        if let (Ok(start), Ok(end), "127.0.0.1", Ok(port)) = (
            w[0].parse::<u16>(),
            w[1].parse::<u16>(),
            w[2],
            w[3].parse::<u16>(),
        ) {
            if (start..=end).contains(&slot) {
                return port;
            }
        }
    }
    panic!("slot {slot} not found in CLUSTER SLOTS: {lines:?}");
}
