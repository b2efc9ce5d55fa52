//! The lock-free ring under memq: a bounded log of offsets `0, 1, 2, …` (or from a first
//! offset of its own, [`RingConfig::first_offset`]) written by any
//! number of writers and read by broadcast readers and groups, with no lock on any
//! message's path.
//!
//! - A slot holds its value in a cell and a stamp, `offset + 1`; offsets never wrap, so a
//!   stamp never repeats.
//! - A publish claims its offset with one CAS on the claim counter, gated by a cached
//!   floor of the readers' positions (rescanned only when the ring looks full), writes,
//!   and stamps the slot with one Release store.
//! - A broadcast [`Reader`] reads when the stamp is its position plus one, stores its
//!   new position and fences: no read-modify-write.
//! - The members of a [`Group`] claim offsets from the group's shared position with a
//!   CAS, each message to exactly one member; a member clones before it claims, so a
//!   clone that panics loses nothing.
//! - A batch ([`Ring::try_publish_batch`]) takes consecutive offsets, all or none.
//! - The ring keeps exactly `capacity` values alive: each publish moves out the message
//!   that left its window ([`Published::evicted`]).
//! - A ring made with [`RingConfig::drop_oldest`] never waits for readers: a reader pins
//!   the offset it reads, and one left behind is told what it missed.
//! - A [`Hold`] keeps every message from its position on, to be read again in any order.
//! - Waiting is the front's business ([`Waiters`]; [`blocking::Parking`] parks threads,
//!   [`future::WakerLists`] wakes tasks):
//!   the ring keeps a flag for waiting readers and a wake position for waiting writers,
//!   and a writer or reader touches a wait list only when they say someone waits. A
//!   reader compares its position with the writers' wake position after every message,
//!   so one that stops where a waiting writer's room is free does not leave it waiting;
//!   a front may wake group members one at a time ([`Rearm`]).
//!
//! This crate holds all the `unsafe` code of memq's engine, so that memq-core can keep
//! forbidding it. Every block says why it is sound (`// SAFETY:`), and every atomic and
//! cell goes through one facade (`sync`) that loom replaces: the models in `tests/loom.rs`
//! check every interleaving of small rings, and the ring's own tests run under miri.
//!
//! ```
//! use memq_ring::{Group, Reader, Ring, RingConfig, Start, TryRecvError};
//! use std::sync::Arc;
//!
//! let ring = Arc::new(Ring::new(RingConfig::new(4)).unwrap());
//! let mut everyone = Reader::new(&ring, Start::Earliest).unwrap();
//! let group = Group::new(&ring, Start::Earliest).unwrap();
//! let (mut a, mut b) = (group.member().unwrap(), group.member().unwrap());
//! for n in 0..4 {
//!     ring.try_publish(n).unwrap();
//! }
//! // The reader holds every slot: a fifth message waits for it.
//! assert!(ring.try_publish(4).is_err());
//! assert_eq!(everyone.try_recv(), Ok((0, 0)));
//! assert_eq!(a.try_recv(), Ok((0, 0)));
//! assert_eq!(b.try_recv(), Ok((1, 1)));
//! // The reader is past offset 0, the group past 1: room for one more.
//! assert_eq!(ring.try_publish(4).unwrap().offset, 4);
//! assert!(ring.try_publish(5).is_err());
//! // Without readers, the oldest message makes room for the newest.
//! drop((everyone, a, b, group));
//! let published = ring.try_publish(5).unwrap();
//! assert_eq!((published.offset, published.evicted), (5, Some(1)));
//! assert_eq!(Reader::new(&ring, Start::Latest).unwrap().try_recv(), Err(TryRecvError::Empty));
//! ```
#![no_std]
#![deny(missing_docs)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

#[cfg(feature = "std")]
pub mod blocking;
#[cfg(feature = "std")]
pub mod future;
mod group;
mod hold;
mod reader;
mod registry;
mod ring;
mod sync;

pub use group::{Group, Member};
pub use hold::{Hold, HoldReadError};
pub use reader::{Reader, TryRecvError};
pub use ring::{
    NoWaiters, Published, Rearm, Ring, RingConfig, RingError, Room, Start, TryPublishError, Waiters,
};
