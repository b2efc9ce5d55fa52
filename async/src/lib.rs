//! memq: an in-process message queue with Kafka-style semantics.
//!
//! This crate re-exports the engine, [`memq_core`] (topics with offsets, broadcast
//! [`Subscriber`]s, consumer groups, partitions, retention, replay, explicit acks, the
//! [`Broker`]), and adds what needs `std` or a runtime:
//!
//! - [`rt`]: the [`Runtime`][rt-runtime] trait and its adapters for Tokio, async-std,
//!   smol and plain threads; receive and publish with a time limit on any of them; a
//!   wrapper that puts a consumer under Tokio's cooperative budget; timers for
//!   explicit-ack leases.
//! - [`pool`]: worker pools over a consumer group, sequential or parallel, with async or
//!   blocking handlers, results, counters and graceful shutdown.
//! - [`codec`]: JSON, MessagePack, gzip, zstd and a magic header over byte topics.
//!
//! The blocking API (`recv_blocking`, `publish_blocking`, `*_blocking_timeout`) comes with
//! the core and needs no runtime at all.
//!
//! # Examples
//!
//! ```
//! # #[cfg(feature = "std")]
//! # {
//! use std::time::Duration;
//! use memq::pool::{Mode, Shutdown, WorkerPool};
//! use memq::rt::{RecvTimeoutExt, Threads};
//! use memq::{StartAt, Topic};
//!
//! let orders = Topic::<u64>::with_capacity(64)?;
//! let mut audit = orders.subscribe(StartAt::Earliest)?;
//! let pool = WorkerPool::builder(&orders, "billing")
//!     .mode(Mode::Parallel(2))
//!     .spawn(&Threads, |order| async move { Ok::<_, String>(*order.value() * 100) })?;
//!
//! orders.publish_blocking(7)?;
//! let seen = Threads::block_on(audit.recv_timeout(Duration::from_secs(5), &Threads))?;
//! assert_eq!(*seen.value(), 7);
//! assert_eq!(pool.shutdown_blocking(Shutdown::Drain)?.processed, 1);
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Features
//!
//! - `std` (default): the blocking API, [`rt`] with the plain-threads runtime, [`pool`].
//! - `tokio`, `async-std`, `smol`: the runtime adapters [`rt::Tokio`], [`rt::AsyncStd`],
//!   [`rt::Smol`]; any combination may be on at once. async-std is discontinued upstream:
//!   the adapter stays for existing users, and smol is its successor.
//! - `serde`, `postcard`, `json`, `msgpack`, `gzip`, `zstd`: the codecs in [`codec`].
//! - `durable`: [`durable`], topics whose messages, offsets and group positions live on
//!   disk (the crate `memq-store`).
//! - `redis`: [`redis`], the same topics, groups, acks and dead letters on Redis Streams,
//!   shared by processes and machines (the crate `memq-redis`, on Tokio).
//!
//! These docs are meant to be built with every feature on (`cargo doc --all-features`);
//! in a build with some off, a link to what is missing leads to this list.
// (The blank line ends the paragraph: the link definitions below must not continue it.)
#![doc = ""]
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![doc(test(attr(deny(warnings))))]
// Links to what a feature brings: within these docs when the feature is on, else to the
// list of features above, so that every link resolves under every feature set.
#![cfg_attr(
    feature = "std",
    doc = "[`rt`]: rt\n\n[`pool`]: pool\n\n[rt-runtime]: rt::Runtime"
)]
#![cfg_attr(
    not(feature = "std"),
    doc = "[`rt`]: crate#features\n\n\
           [`pool`]: crate#features\n\n\
           [rt-runtime]: crate#features"
)]
#![cfg_attr(feature = "serde", doc = "[`codec`]: codec")]
#![cfg_attr(not(feature = "serde"), doc = "[`codec`]: crate#features")]
#![cfg_attr(feature = "tokio", doc = "[`rt::Tokio`]: rt::Tokio")]
#![cfg_attr(not(feature = "tokio"), doc = "[`rt::Tokio`]: crate#features")]
#![cfg_attr(feature = "async-std", doc = "[`rt::AsyncStd`]: rt::AsyncStd")]
#![cfg_attr(not(feature = "async-std"), doc = "[`rt::AsyncStd`]: crate#features")]
#![cfg_attr(feature = "smol", doc = "[`rt::Smol`]: rt::Smol")]
#![cfg_attr(not(feature = "smol"), doc = "[`rt::Smol`]: crate#features")]
#![cfg_attr(feature = "durable", doc = "[`durable`]: durable")]
#![cfg_attr(not(feature = "durable"), doc = "[`durable`]: crate#features")]
#![cfg_attr(feature = "redis", doc = "[`redis`]: redis")]
#![cfg_attr(not(feature = "redis"), doc = "[`redis`]: crate#features")]

pub use memq_core::*;

#[cfg(feature = "serde")]
pub mod codec;
#[cfg(feature = "std")]
pub mod pool;
#[cfg(feature = "std")]
pub mod rt;

/// Durable topics: a memq topic with a crash-safe segment log under each partition, its
/// subscribers and its consumer groups (the crate `memq-store`; see
/// `docs/DURABILITY.md` for the format and each sync policy's guarantee).
#[cfg(feature = "durable")]
pub mod durable {
    pub use memq_store::*;
}

/// The same topics, consumer groups, explicit acks and dead letters on Redis Streams,
/// single node or Redis Cluster (the crate `memq-redis`, on Tokio, or on smol with the
/// `smol` feature; with `durable` too, its `AnyTopic` and bridges take durable topics).
/// See `docs/REDIS.md` for the mapping of memq's concepts to Redis commands and what
/// differs.
#[cfg(feature = "redis")]
pub mod redis {
    pub use memq_redis::*;
}

/// The README's example, compiled and run as a doctest.
#[cfg(all(doctest, feature = "std"))]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
