//! memq-redis on smol, with no Tokio runtime anywhere: the `redis` crate's connections,
//! memq-redis's reader tasks, its timers (receive timeouts, claim rounds, backoff) and
//! its bridges all run on smol. The same scenarios as on a single node under Tokio.

use crate::common;

use std::collections::HashSet;
use std::time::Duration;

use bytes::Bytes;
use memq_core::{StartAt, Topic, TopicConfig};
use memq_redis::bridge::{forward_from_redis, forward_to_redis};
use memq_redis::{Redis, RedisTopic, RedisTopicConfig};

fn no_tokio() {
    assert!(
        tokio::runtime::Handle::try_current().is_err(),
        "this test must run outside any Tokio runtime"
    );
}

#[test]
fn every_scenario_on_smol() {
    let Some(server) = common::server() else {
        return;
    };
    smol::block_on(async {
        no_tokio();
        let redis = Redis::connect(&server.url()).await.unwrap();
        common::scenarios::all(&redis, "smol").await;
    });
}

#[test]
fn bridges_on_smol() {
    let Some(server) = common::server() else {
        return;
    };
    smol::block_on(async {
        no_tokio();
        let redis = Redis::connect(&server.url()).await.unwrap();
        let remote = RedisTopic::open(&redis, "through", RedisTopicConfig::new(2))
            .await
            .unwrap();
        let from = Topic::<Bytes>::new(TopicConfig::new(1024).partitions(2)).unwrap();
        let to = Topic::<Bytes>::new(TopicConfig::new(1024).partitions(2)).unwrap();
        let mut sub = to.subscribe(StartAt::Earliest).unwrap();
        let out = forward_to_redis(&from, "out", remote.clone(), Duration::from_secs(1)).unwrap();
        let back = forward_from_redis(&remote, "back", to.clone(), Duration::from_secs(1))
            .await
            .unwrap();
        const N: u64 = 500;
        for i in 0..N {
            from.publish(Bytes::from(format!("m{i}"))).await.unwrap();
        }
        let mut seen = HashSet::new();
        while (seen.len() as u64) < N {
            let m = common::rt::timeout(common::PATIENCE, sub.recv())
                .await
                .expect("a message within the patience bound")
                .unwrap();
            seen.insert(m.into_value());
        }
        assert!((0..N).all(|i| seen.contains(&Bytes::from(format!("m{i}")))));
        out.stop().await;
        back.stop().await;
    });
}
