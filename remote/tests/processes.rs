//! Exactly-once group delivery across members in several processes: this test binary
//! runs three copies of itself as group members (the test `member_process`, which does
//! nothing unless started so), publishes, and checks that every message was handled by
//! exactly one member once the group has nothing pending.

use crate::common;

use std::collections::HashMap;
use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use memq_core::StartAt;
use memq_redis::{GroupConfig, Redis, RedisTopic, RedisTopicConfig};

const URL_ENV: &str = "MEMQ_REDIS_MEMBER_URL";
/// Set (to anything) when `MEMQ_REDIS_MEMBER_URL` is a comma-separated list of cluster nodes.
const CLUSTER_ENV: &str = "MEMQ_REDIS_MEMBER_CLUSTER";
const TOPIC: &str = "procs";
const MESSAGES: u64 = 3000;

/// A member process: acks every delivery after printing it, until killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_process() {
    let Ok(url) = std::env::var(URL_ENV) else {
        return;
    };
    let redis = if std::env::var_os(CLUSTER_ENV).is_some() {
        let urls: Vec<String> = url.split(',').map(str::to_string).collect();
        Redis::connect_cluster(&urls).await.unwrap()
    } else {
        Redis::connect(&url).await.unwrap()
    };
    let topic = RedisTopic::open(&redis, TOPIC, RedisTopicConfig::new(3))
        .await
        .unwrap();
    let mut member = topic
        .group(
            "workers",
            StartAt::Earliest,
            GroupConfig::acked(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    println!("READY");
    loop {
        let d = member.recv_delivery().await.unwrap();
        // Printed before the ack: a message acked is a message printed.
        println!(
            "GOT {} {} {}",
            std::process::id(),
            d.partition(),
            d.offset()
        );
        d.ack().await.unwrap();
    }
}

struct Member(Child);

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_across_processes() {
    if std::env::var_os(URL_ENV).is_some() {
        return;
    }
    let Some(server) = common::server() else {
        return;
    };
    let redis = Redis::connect(&server.url()).await.unwrap();
    across_processes(&redis, &server.url(), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_across_processes_on_a_cluster() {
    if std::env::var_os(URL_ENV).is_some() {
        return;
    }
    let Some(cluster) = common::cluster() else {
        return;
    };
    let redis = Redis::connect_cluster(&cluster.urls()).await.unwrap();
    across_processes(&redis, &cluster.urls().join(","), true).await;
}

/// Three member processes on `url` (a node, or the cluster's nodes joined by commas).
async fn across_processes(redis: &Redis, url: &str, cluster: bool) {
    let topic = RedisTopic::open(redis, TOPIC, RedisTopicConfig::new(3))
        .await
        .unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut members: Vec<Member> = (0..3)
        .map(|_| {
            let mut cmd = Command::new(&exe);
            cmd.args([
                "--exact",
                "processes::member_process",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(URL_ENV, url)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
            if cluster {
                cmd.env(CLUSTER_ENV, "1");
            }
            Member(cmd.spawn().unwrap())
        })
        .collect();
    // Publish while the members join and work.
    for i in 0..MESSAGES / 10 {
        let batch = (0..10)
            .map(|j| bytes::Bytes::from(format!("{}", i * 10 + j)))
            .collect();
        topic.publish_batch(batch).await.unwrap();
    }
    // Done when the group has delivered everything and nothing is pending.
    common::scenarios::eventually(|| async {
        match topic.group_stats("workers").await {
            Ok(s) => s.lag() == 0 && s.pending() == 0,
            Err(_) => false,
        }
    })
    .await;
    let mut seen: HashMap<(u32, u64), u32> = HashMap::new();
    let mut per_process: HashMap<String, u64> = HashMap::new();
    for m in &mut members {
        let _ = m.0.kill();
        let _ = m.0.wait();
        let mut out = String::new();
        m.0.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        for line in out.lines().filter(|l| l.starts_with("GOT ")) {
            let f: Vec<&str> = line.split(' ').collect();
            *per_process.entry(f[1].to_string()).or_default() += 1;
            *seen
                .entry((f[2].parse().unwrap(), f[3].parse().unwrap()))
                .or_default() += 1;
        }
    }
    println!("messages per member process: {per_process:?}");
    let twice: Vec<_> = seen.iter().filter(|(_, &n)| n > 1).collect();
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
    assert_eq!(seen.len() as u64, MESSAGES, "every message handled");
    let stats = topic.stats().await.unwrap();
    for p in stats.partitions {
        for o in p.low..p.high {
            assert_eq!(
                seen.get(&(p.partition, o)),
                Some(&1),
                "partition {} offset {o}",
                p.partition
            );
        }
    }
}
