//! memq-core: the engine of memq, an in-process message queue with Kafka-style semantics.
//!
//! `no_std` + `alloc`. A [`Topic`] is a set of bounded logs (one per partition) of
//! messages with `u64` offsets; [`Subscriber`]s read every message from their own
//! position, [`Consumer`]s of a group share one position so each message goes to one
//! member; a [`Broker`] names topics. Waiting is done with the core's own futures on
//! [`core::task::Waker`], so any executor runs them; the `std` feature adds blocking
//! methods for plain threads and OS mutexes.
//!
//! Most users add the `memq` crate, which re-exports this one and adds runtime adapters.
//!
//! # Examples
//!
//! ```
//! # use memq_core as memq;
//! use memq::{Overflow, StartAt, Topic, TopicConfig};
//!
//! let topic = Topic::new(TopicConfig::new(1024).overflow(Overflow::Block))?;
//! let mut audit = topic.subscribe(StartAt::Earliest)?;
//! let mut worker = topic.group("workers", StartAt::Earliest)?;
//!
//! for n in 0..3u32 {
//!     topic.try_publish(n)?;
//! }
//! assert_eq!(worker.try_recv()?.into_value(), 0);
//! let first = audit.try_recv()?;
//! assert_eq!((first.offset(), *first.value()), (0, 0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Features
//!
//! - `std` (default): OS mutexes, `*_blocking` methods, [`StdClock`], `std::error::Error`.
// The codec module exists only with `serde`: link to it only then, so that the default
// docs build without warnings.
#![cfg_attr(
    feature = "serde",
    doc = "- `serde`: the [`codec::Codec`] trait; `postcard`: the postcard codec."
)]
#![cfg_attr(
    not(feature = "serde"),
    doc = "- `serde`: the `codec::Codec` trait; `postcard`: the postcard codec."
)]
// Without `std`, `StdClock` is not here: the link goes to the crate's list of features
// (after a blank line, so that the definition does not continue the list above).
#![doc = ""]
#![cfg_attr(feature = "std", doc = "[`StdClock`]: StdClock")]
#![cfg_attr(not(feature = "std"), doc = "[`StdClock`]: crate#features")]
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![doc(test(attr(deny(warnings))))]
// The core speaks `core::` and `alloc::` only, so that it stays `no_std`.
#![warn(
    clippy::std_instead_of_core,
    clippy::std_instead_of_alloc,
    clippy::alloc_instead_of_core
)]

extern crate alloc;

mod ack;
#[cfg(feature = "std")]
mod blocking;
mod broker;
#[cfg(feature = "serde")]
pub mod codec;
mod config;
mod error;
mod log;
mod message;
mod partition;
mod publish;
mod read;
mod route;
mod stats;
mod sync;
mod time;
mod topic;
mod wait;

pub use ack::{
    AckConfig, AckConsumer, AckError, AckRecv, AckRecvMany, AckReport, Backoff, DeadLetter,
    DeadLetterReason, Delivery, PendingInfo,
};
#[cfg(feature = "std")]
pub use blocking::{block_on, block_on_timeout};
pub use broker::Broker;
pub use config::{Overflow, StartAt, TopicConfig};
pub use error::{
    Error, Lagged, PublishError, RecvError, RecvIfError, RecvTimeoutError, TryRecvError,
    TryRecvIfError, MAX_NEXT_OFFSET,
};
pub use message::{Message, Receipt};
pub use publish::{Publish, PublishBatch};
pub use read::group::{Consumer, GroupRecv, GroupRecvIf, GroupRecvMany};
pub use read::subscriber::{Recv, RecvMany, Subscriber};
pub use route::{key_hash, key_partition, Router};
pub use stats::{GroupStats, PartitionStats, TopicStats};
pub use time::{Clock, ManualClock, Timer, TimerEntry};
#[cfg(feature = "std")]
pub use time::{StdClock, ThreadTimer};
pub use topic::Topic;
