//! Snapshots of counters and positions. Reading them takes each partition's lock
//! briefly, one at a time, and never two locks at once, and changes nothing: what a TTL
//! or a release on read would remove by now is counted as removed, but stays in the log
//! for the next reader or publisher that visits it.
//!
//! Layer: beside the facade (`topic`); reads the partitions' logs and the groups'
//! bookkeeping.

use alloc::string::String;
use alloc::vec::Vec;

use crate::config::Overflow;
use crate::sync::Arc;
use crate::topic::Topic;

/// Counters and positions of one partition.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct PartitionStats {
    /// The partition's index.
    pub partition: u32,
    /// Oldest retained offset.
    pub low: u64,
    /// Next offset to be published.
    pub high: u64,
    /// Messages retained (`high - low`).
    ///
    /// On a topic that releases on read, messages moved out to a reader ahead of its user
    /// (a subscriber's read-ahead, a group's pool, at most 33 per reader) have left the
    /// log and are counted in `released`, not here, yet their slots count against the
    /// capacity until they are handed over: such a partition can be full (`Block` waits,
    /// `Reject` refuses) with `depth` below the capacity, and a group's `committed` can be
    /// below `low` (its `lag` counts them, not yet handed over).
    pub depth: u64,
    /// Messages published.
    pub published: u64,
    /// Deliveries to subscribers and group members.
    pub delivered: u64,
    /// Messages removed to make room (capacity), read or not: on a topic that retains
    /// messages for replay, every message past the capacity is evicted in the end, so a
    /// growing `evicted` is not a loss by itself. What a reader missed shows as its
    /// `Lagged` (counted in `lagged`) or as a group's `evicted_unacked`.
    pub evicted: u64,
    /// Messages removed because their TTL ran out, read or not (on a topic that releases
    /// on read, a message every reader has a copy of and that expires before the log
    /// lets go of it counts here, not in `released`).
    pub expired: u64,
    /// Messages removed because every attached reader had read them or started past
    /// them (a first reader that joins at `Latest` passes what waited for it), or moved
    /// out to a reader ahead of its user (see `depth`); only on topics that release on
    /// read, see [`TopicConfig::release_on_read`]. Every message
    /// published is counted once: `published == depth + evicted + expired + released`.
    ///
    /// [`TopicConfig::release_on_read`]: crate::TopicConfig::release_on_read
    pub released: u64,
    /// Messages readers of this partition missed: the sum of every
    /// [`RecvError::Lagged`]`(n)` (or `TryRecvError::Lagged`, or a stream's `Lagged`)
    /// its subscribers and group members were given, counted when the gap is found (a
    /// `recv_many` that found one reports it on the next receive). A subscriber that
    /// misses 5 messages adds 5; two subscribers that each miss them add 10. Gaps come
    /// from `DropOldest`, a TTL, or a reader that starts or seeks before the retained
    /// window.
    ///
    /// [`RecvError::Lagged`]: crate::RecvError::Lagged
    pub lagged: u64,
    /// Subscribers reading this partition.
    pub subscribers: usize,
    /// Publishers waiting for room.
    pub waiting_publishers: usize,
}

/// Counters and positions of one consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct GroupStats {
    /// The group's name.
    pub name: String,
    /// Current members.
    pub members: usize,
    /// The committed position per partition: with automatic commit the next offset to
    /// deliver; in an explicit-ack group the lowest offset not yet acknowledged, so
    /// messages in flight are at or after it, as in Kafka.
    pub committed: Vec<u64>,
    /// Messages published after the committed position, summed over partitions: with
    /// automatic commit those not yet delivered; in an explicit-ack group also those
    /// delivered but not yet settled (see `in_flight`).
    pub lag: u64,
    /// Messages delivered to the group.
    pub delivered: u64,
    /// Delivered but not yet acknowledged, leased or waiting for redelivery (always 0
    /// with automatic commit).
    pub in_flight: u64,
    /// Redeliveries (always 0 with automatic commit).
    pub redelivered: u64,
    /// Messages acknowledged (0 with automatic commit, where delivery commits).
    pub acked: u64,
    /// Messages sent to the dead-letter topic, or dropped after `max_deliveries` without
    /// one (always 0 with automatic commit).
    pub dead_lettered: u64,
    /// Unacknowledged messages evicted (`DropOldest` or TTL) before they were acked.
    pub evicted_unacked: u64,
    /// Messages the group missed, summed over partitions: the `n` of every `Lagged(n)`
    /// its members were given (new messages evicted or expired before the group read
    /// them). Also counted in each partition's `lagged`.
    pub lagged: u64,
}

/// A snapshot of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicStats {
    /// The topic's name, if it belongs to a broker.
    pub name: Option<String>,
    /// Capacity per partition.
    pub capacity: usize,
    /// Overflow policy.
    pub overflow: Overflow,
    /// Whether the topic is closed (as [`Topic::is_closed`](crate::Topic::is_closed)).
    pub closed: bool,
    /// Per-partition figures.
    pub partitions: Vec<PartitionStats>,
    /// Per-group figures.
    pub groups: Vec<GroupStats>,
    /// Sum of `published` over partitions.
    pub published: u64,
    /// Sum of `delivered` over partitions.
    pub delivered: u64,
    /// Sum of `evicted` over partitions.
    pub evicted: u64,
    /// Sum of `expired` over partitions.
    pub expired: u64,
    /// Sum of `released` over partitions.
    pub released: u64,
    /// Sum of `lagged` over partitions: every message a reader was told it missed.
    pub lagged: u64,
    /// Sum of `depth` over partitions.
    pub depth: u64,
    /// Subscribers (a subscriber of several partitions counts once).
    pub subscribers: usize,
}

impl<T> Topic<T> {
    /// A snapshot of the topic's counters, partitions and groups.
    ///
    /// A read: it changes nothing. Messages a TTL has expired by now, or that every
    /// reader of a releasing topic has been handed, show as `expired` and `released` (and
    /// no longer in `depth`) although the log lets go of them only on a later visit to
    /// their partition (a receive, subscribe or group join; a publish, for expired ones).
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// let topic = memq::Topic::with_capacity(4)?;
    /// topic.try_publish(1)?;
    /// let stats = topic.stats();
    /// assert_eq!((stats.published, stats.depth), (1, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stats(&self) -> TopicStats {
        let shared = &self.shared;
        let groups: Vec<_> = shared.groups.lock().iter().map(Arc::clone).collect();
        let mut group_stats: Vec<GroupStats> = groups
            .iter()
            .map(|g| GroupStats {
                name: g.name.clone(),
                members: g.member_count(),
                ..GroupStats::default()
            })
            .collect();
        let mut partitions = Vec::with_capacity(shared.parts.len());
        let now = shared.expiry_now();
        for (p, part) in shared.parts.iter().enumerate() {
            #[cfg(target_has_atomic = "64")]
            if let Some(ring) = shared.rings.get(p) {
                partitions.push(ring_partition_stats(
                    p,
                    ring,
                    part,
                    &groups,
                    &mut group_stats,
                ));
                continue;
            }
            let log = part.log.lock();
            let retained = log.retained_as_of(now, shared.ttl);
            partitions.push(PartitionStats {
                partition: p as u32,
                low: retained.first,
                high: log.high,
                depth: log.high - retained.first,
                published: log.published,
                delivered: log.delivered(),
                evicted: log.evicted,
                expired: retained.expired,
                released: retained.released,
                lagged: log.lagged,
                subscribers: log.subscribers,
                waiting_publishers: log.pubs.waiting(),
            });
            for (g, gs) in groups.iter().zip(group_stats.iter_mut()) {
                if let Some(gp) = log.group_ref(g.ids[p]) {
                    // As `committed`: an explicit-ack group's own count, which an
                    // unacknowledged message evicted by a TTL still holds.
                    let pos = gp
                        .acks
                        .as_ref()
                        .map_or_else(|| log.cursor(gp.cursor), crate::ack::Acks::committed);
                    gs.committed.push(pos);
                    gs.lag += log.high.saturating_sub(pos);
                    gs.delivered += gp.delivered - log.unread(gp.cursor);
                    gs.lagged += gp.lagged;
                    if let Some(a) = &gp.acks {
                        ack_counts(a, gs);
                    }
                }
            }
        }
        TopicStats {
            name: shared.name.clone(),
            capacity: shared.capacity,
            overflow: shared.overflow,
            // As `Topic::is_closed`: every partition closed, not a close under way.
            closed: shared.is_closed(),
            published: partitions.iter().map(|p| p.published).sum(),
            delivered: partitions.iter().map(|p| p.delivered).sum(),
            evicted: partitions.iter().map(|p| p.evicted).sum(),
            expired: partitions.iter().map(|p| p.expired).sum(),
            released: partitions.iter().map(|p| p.released).sum(),
            lagged: partitions.iter().map(|p| p.lagged).sum(),
            depth: partitions.iter().map(|p| p.depth).sum(),
            subscribers: shared.subscribers.load(crate::sync::Ordering::Relaxed),
            partitions,
            groups: group_stats,
        }
    }
}

/// The figures of ring partition `p`, and its groups' in `group_stats`: explicit-ack
/// groups keep their state, and count, in the partition's log.
#[cfg(target_has_atomic = "64")]
fn ring_partition_stats<T>(
    p: usize,
    ring: &crate::partition::PartRing<T>,
    part: &crate::partition::Partition<T>,
    groups: &[Arc<crate::read::group::GroupShared<T>>],
    group_stats: &mut [GroupStats],
) -> PartitionStats {
    let mut stats = ring_stats(p, ring);
    let log = part.log.lock();
    stats.delivered += log.delivered();
    stats.lagged += log.lagged;
    for (g, gs) in groups.iter().zip(group_stats.iter_mut()) {
        if let Some(rg) = g.rings.get(p) {
            ring_group_stats(rg, gs);
        } else if let Some(gp) = log.group_ref(g.ids[p]) {
            acked_group_stats(gp, ring.end(), log.unread(gp.cursor), gs);
        }
    }
    stats
}

/// Adds an explicit-ack group's lease counts on one partition to `gs`.
fn ack_counts(a: &crate::ack::Acks, gs: &mut GroupStats) {
    gs.in_flight += a.unacked.len() as u64;
    gs.redelivered += a.redelivered;
    gs.acked += a.acked;
    gs.dead_lettered += a.dead_lettered;
    gs.evicted_unacked += a.evicted_unacked;
}

/// Adds an explicit-ack group's figures on one ring partition (its state in the
/// partition's log, the end from the ring) to `gs`.
#[cfg(target_has_atomic = "64")]
fn acked_group_stats(
    gp: &crate::partition::GroupPart,
    high: u64,
    unread: u64,
    gs: &mut GroupStats,
) {
    let Some(a) = &gp.acks else {
        return;
    };
    let pos = a.committed();
    gs.committed.push(pos);
    gs.lag += high.saturating_sub(pos);
    gs.delivered += gp.delivered - unread;
    gs.lagged += gp.lagged;
    ack_counts(a, gs);
}

/// Adds a group's figures on one ring partition to `gs`: its position from the ring,
/// its counts from its members' counters.
#[cfg(target_has_atomic = "64")]
fn ring_group_stats<T>(rg: &crate::read::group::RingGroup<T>, gs: &mut GroupStats) {
    let ring = rg.ring();
    let pos = rg.position();
    let (delivered, lagged) = ring.waiters().lists.lock().group_counted(rg.slot);
    gs.committed.push(pos);
    gs.lag += ring.end().saturating_sub(pos);
    gs.delivered += delivered;
    gs.lagged += lagged;
}

/// The figures of partition `p` on the ring: positions from the ring, counts from its
/// readers' counters. Nothing expires or is released on the ring (such topics stay on
/// the locked log), so what was published and is no longer held was evicted.
#[cfg(target_has_atomic = "64")]
fn ring_stats<T>(p: usize, ring: &crate::partition::PartRing<T>) -> PartitionStats {
    let waits = ring.waiters();
    let (delivered, lagged, subscribers, waiting_publishers) = {
        let lists = waits.lists.lock();
        let (d, l, n) = lists.counted();
        (d, l, n, lists.pubs.waiting())
    };
    // One read of the end, so that the figures agree with each other (`Ring::first`
    // would read it again): the ring holds the last `capacity` offsets published.
    let high = ring.end();
    let low = high.saturating_sub(ring.capacity()).max(waits.base);
    let published = high - waits.base;
    PartitionStats {
        partition: p as u32,
        low,
        high,
        depth: high - low,
        published,
        delivered,
        evicted: published - (high - low),
        expired: 0,
        released: 0,
        lagged,
        subscribers,
        waiting_publishers,
    }
}
