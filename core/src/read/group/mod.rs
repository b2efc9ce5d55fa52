//! Consumer groups: competing consumers sharing one position per partition.
//!
//! A group is created by the first [`Topic::group`](crate::Topic::group) call with its
//! name and outlives its members: its position stays attached to every partition
//! (holding back `Block` retention) until
//! [`Topic::delete_group`](crate::Topic::delete_group). Each message goes to exactly one
//! member. On a one-partition topic all members compete for every message; on a
//! partitioned topic each partition is assigned to one member (partition `i` to the
//! member at `i % members` in join order) and the assignment is rebalanced whenever a
//! member joins or leaves, so order within a partition holds for the member reading it.
//!
//! With automatic commit (groups joined with [`Topic::group`](crate::Topic::group)) a
//! delivery commits: the group's position moves past the message as it is handed out.
//! Groups joined with [`Topic::group_acked`](crate::Topic::group_acked) commit on
//! acknowledgement instead (see [`AckConsumer`](crate::AckConsumer)).
//!
//! After the topic closes, a member's receive returns `Closed` once the whole group has
//! drained, not just the member's own partitions: until then a member that finished
//! early waits, because a rebalance may still hand it a partition with messages.
//!
//! # Files
//!
//! - `shared`: the group's state shared by its members and the topic's registry
//!   ([`GroupShared`], the membership, the one-partition [`Pool`](shared::Pool)), the
//!   assignment of partitions to members, and the wake-up helpers.
//! - `registry`: creating, joining and deleting groups on a [`Topic`](crate::Topic).
//! - `consumer`: the member ([`Consumer`]): its public receive methods, its assignment,
//!   its wait registrations and leaving the group.
//! - `receive`: the plain receive path, visiting the member's partitions one by one.
//! - `pooled`: the receive path of a group whose members share a pool.
//! - `ring`: groups of a topic on the lock-free ring engine: the group's positions in
//!   the rings, each member's readers of them, and their receive path.
//! - `accept`: what a receive asks of a message before it takes it (`recv_if`).
//! - `futures`: the receive futures and the `Stream` implementation.
//!
//! # Layer
//!
//! Above the log ([`crate::log`]), the wait lists ([`crate::wait`]) and the sync facade;
//! beside the subscriber ([`super::subscriber`]), whose message conversion and start
//! positions it shares. It reaches the partitions through the topic's shared state
//! ([`crate::partition::Shared`]), and the explicit-ack layer ([`crate::ack`]) is built on
//! it: the only names from `ack` here are the settings an explicit-ack group keeps
//! (`AckSettings`, `Acks`), held for that layer and not interpreted.

mod accept;
mod consumer;
mod futures;
mod pooled;
mod receive;
mod registry;
#[cfg(target_has_atomic = "64")]
mod ring;
mod shared;
mod wake;

pub use consumer::Consumer;
pub use futures::{GroupRecv, GroupRecvIf, GroupRecvMany};
pub(crate) use registry::{delete, join, names};
pub(crate) use shared::GroupShared;
#[cfg(target_has_atomic = "64")]
pub(crate) use shared::RingGroup;
