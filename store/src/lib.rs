//! The durable segment log under memq's durable topics.
//!
//! A [`SegmentLog`] is a directory of segment files holding records (offset, timestamp,
//! key, payload, each record checked by a CRC-32C) with consecutive `u64` offsets, the
//! same offsets as memq's in-memory topics. It is std-only and knows nothing of topics or
//! readers: memq puts it under a topic's partitions.
//!
//! - **Writes:** an append is written to the file before it returns, so a crash of the
//!   process never loses it; [`SyncPolicy`] says when it reaches the disk, with group
//!   commit under [`SyncPolicy::Always`] (see [`Durability`]).
//! - **Recovery:** [`SegmentLog::open`] cuts off a torn last record and reports it
//!   ([`Recovery`]), rebuilds missing or stale indexes, and refuses damage in the middle
//!   of the log with [`StoreError::Corrupt`] naming the file, the byte and the offset,
//!   unless asked to [repair](DurableConfig::repair) it.
//! - **Ownership:** one log per directory, enforced with a lock file
//!   ([`StoreError::Locked`]).
//! - **Retention:** whole segments by size, age and count ([`Retention`]), never past
//!   a floor that readers still need ([`SegmentLog::set_floor`]).
//!
//! ```
//! use memq_store::{DurableConfig, SegmentLog, SyncPolicy};
//!
//! let dir = tempfile::tempdir()?;
//! let mut log = SegmentLog::open(dir.path(), DurableConfig::new(SyncPolicy::Always))?;
//! let offset = log.append(None, Some(b"user-7"), b"hello")?;
//! log.durability().wait_synced(offset)?; // on disk now
//! drop(log);
//!
//! let log = SegmentLog::open(dir.path(), DurableConfig::default())?;
//! let read = log.read(0, 10)?;
//! assert_eq!(read.records[0].payload, b"hello");
//! assert_eq!(read.records[0].key.as_deref(), Some(&b"user-7"[..]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

mod commit;
mod config;
mod coop;
mod dead_letter;
mod durability;
mod error;
pub mod group;
mod log;
mod prealloc;
pub mod record;
mod segment;
mod subscriber;
mod topic;

pub use config::{DurableConfig, Retention, SyncPolicy};
pub use dead_letter::{DeadLetters, DurableDeadLetter};
pub use durability::Durability;
pub use error::StoreError;
pub use group::{Delivery, DurableConsumer, DurableGroupStats, GroupConfig};
pub use log::{ReadBatch, Recovery, SegmentLog, Truncation};
pub use record::Record;
pub use subscriber::{DurableMessage, DurableRecvError, DurableSubscriber};
pub use topic::{
    DurablePartitionStats, DurablePublishError, DurableReceipt, DurableStats, DurableTopic,
    OpenError,
};
