//! memq's topics on Redis Streams: the same shapes as memq's in-memory topics (publish
//! one, keyed, to a partition, in batches; subscribers with `StartAt` and `seek`;
//! competing consumer groups; explicit acks with leases, nacks with a delay,
//! `max_deliveries` and dead letters with their origin; retention by count and age;
//! stats and lag), shared by every process and machine that reaches the same Redis
//! server or Redis Cluster.
//!
//! Readers, timers and bridges run on the Tokio runtime they are started from; with the
//! `smol` feature, outside Tokio, on smol (its global executor and async-io's timers).
//! With the `durable` feature, [`any::AnyTopic`] and [`bridge`] take memq's durable
//! topics (memq-store) too.
//!
//! | memq | Redis |
//! |---|---|
//! | partition `p` of topic `t` | the stream `memq:{t:p}` (its own hash tag: partitions spread over a cluster) |
//! | offset `n` | the entry ID `0-(n+1)`, assigned by `XADD key 0-*` (atomic, consecutive) |
//! | key routing | memq's own FNV-1a hash, [`memq_core::key_partition`] |
//! | subscriber | `XREAD BLOCK` from the subscriber's own position |
//! | consumer group, member | `XGROUP CREATE`, `XREADGROUP GROUP g consumer` |
//! | lease, `ack_wait` | the pending-entries list; `XAUTOCLAIM` after `ack_wait` |
//! | ack / nack after a delay / touch | `XACK` / `XCLAIM ... IDLE ack_wait-delay` / `XCLAIM` (owner-checked in one script) |
//! | `max_deliveries`, dead letters | the delivery count; `XADD` to the dead-letter topic, then `XACK` |
//! | retention by count / age | `XADD ... MAXLEN ~ n` / `XTRIM MINID` ([`RedisTopic::trim_by_age`]) |
//!
//! **What differs from memq in memory, said here rather than hidden:** members of a
//! group compete for every partition by default, so per-key order does not hold across
//! members (have partitions owned, dealt out and rebalanced automatically with
//! [`GroupConfig::rebalance`], or by hand with [`GroupConfig::partitions`], to keep it);
//! a message is delivered at least once (a lease that runs out, a connection lost after
//! a command was sent); there is no backpressure (`Overflow::Block`): retention trims
//! what readers have not read, and subscribers are told with [`RecvError::Lagged`];
//! a nack delay is at most `ack_wait`, and a backoff delay applies to nacks and drops,
//! not to an expired lease; [`GroupConfig::max_in_flight`] bounds each member, not the
//! group as a whole. See `docs/REDIS.md`.
//!
//! ```no_run
//! use std::time::Duration;
//! use memq_core::StartAt;
//! use memq_redis::{GroupConfig, Redis, RedisTopic, RedisTopicConfig};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let redis = Redis::connect("redis://127.0.0.1:6379/").await?;
//! let orders = RedisTopic::open(&redis, "orders", RedisTopicConfig::new(4)).await?;
//! orders.publish_keyed("customer-7", "order #1").await?;
//!
//! let mut worker = orders
//!     .group("billing", StartAt::Earliest, GroupConfig::acked(Duration::from_secs(30)))
//!     .await?;
//! let delivery = worker.recv_delivery().await?;
//! assert_eq!(delivery.value().as_ref(), b"order #1");
//! delivery.ack().await?; // never delivered again, in any process
//! # Ok(())
//! # }
//! # fn main() { let _ = run; } // needs a server: compiled, not run
//! ```
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![forbid(unsafe_code)]
#![doc(test(attr(deny(warnings))))]

pub mod any;
pub mod bridge;
mod conn;
mod entry;
mod error;
mod group;
mod rebalance;
mod rt;
mod subscriber;
#[cfg(feature = "testing")]
pub mod testing;
mod topic;

pub use conn::Redis;
pub use entry::{DeadLetterOrigin, RedisMessage};
pub use error::{Error, PublishError, RecvError};
pub use group::{ConsumerCounters, GroupConfig, RedisConsumer, RedisDelivery};
pub use subscriber::RedisSubscriber;
pub use topic::{
    BatchMode, RedisGroupPartitionStats, RedisGroupStats, RedisPartitionStats, RedisReceipt,
    RedisTopic, RedisTopicConfig, RedisTopicStats,
};
