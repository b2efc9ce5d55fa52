//! Shared by the integration tests: servers that the tests start themselves, and the
//! semantic scenarios run against a single node and against a cluster.
#![allow(dead_code)]

pub mod rt;
pub mod scenarios;

use memq_redis::testing::{may_skip, RedisCluster, RedisServer, REQUIRED_ENV};

/// A fresh server, or `None` (said loudly) when none can start and none is required.
/// With `MEMQ_REDIS_REQUIRED` set, a server that cannot start fails the test.
pub fn server() -> Option<RedisServer> {
    match RedisServer::start() {
        Ok(s) => Some(s),
        Err(e) if may_skip() => {
            eprintln!("\n!!! SKIPPED: no redis-server could be started ({e}); set {REQUIRED_ENV}=1 to make this a failure\n");
            None
        }
        Err(e) => panic!("{REQUIRED_ENV} is set and redis-server could not be started: {e}"),
    }
}

/// A fresh 3-master cluster, or `None` as [`server`].
pub fn cluster() -> Option<RedisCluster> {
    match RedisCluster::start() {
        Ok(c) => Some(c),
        Err(e) if may_skip() => {
            eprintln!("\n!!! SKIPPED: no Redis Cluster could be started ({e}); set {REQUIRED_ENV}=1 to make this a failure\n");
            None
        }
        Err(e) => panic!("{REQUIRED_ENV} is set and a Redis Cluster could not be started: {e}"),
    }
}

/// A bound for waits that normally take milliseconds: far from any expected value, so
/// that no test depends on the machine's speed; reaching it fails the test.
pub const PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);
