"""Plain data returned by memq: statistics (frozen dataclasses, so ``dataclasses.asdict``,
``==`` and ``repr`` work as for any dataclass)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional


@dataclass(frozen=True)
class PartitionStats:
    """One partition of a topic."""

    partition: int
    low: int
    high: int
    depth: int
    published: int
    delivered: int
    evicted: int
    expired: int
    released: int
    lagged: int
    subscribers: int
    waiting_publishers: int


@dataclass(frozen=True)
class GroupStats:
    """One consumer group of a topic."""

    name: str
    members: int
    committed: List[int]
    lag: int
    delivered: int
    in_flight: int
    redelivered: int
    acked: int
    dead_lettered: int
    evicted_unacked: int
    lagged: int


@dataclass(frozen=True)
class TopicStats:
    """A topic: totals over its partitions, each partition, each group."""

    name: Optional[str]
    capacity: int
    overflow: str
    closed: bool
    published: int
    delivered: int
    evicted: int
    expired: int
    released: int
    lagged: int
    depth: int
    subscribers: int
    partitions: List[PartitionStats] = field(default_factory=list)
    groups: List[GroupStats] = field(default_factory=list)


@dataclass(frozen=True)
class PoolStats:
    """A worker pool's counters. ``processed`` counts handled messages (``errors`` of
    them raised); ``in_flight`` is fetched and not yet handled."""

    fetched: int
    processed: int
    errors: int
    results: int
    active_workers: int
    workers: int

    @property
    def in_flight(self) -> int:
        return self.fetched - self.processed

    @property
    def succeeded(self) -> int:
        return self.processed - self.errors


@dataclass(frozen=True)
class DurablePartitionStats:
    """One partition of a durable topic's log."""

    partition: int
    start: int
    next: int
    bytes: int
    segments: int
    synced: int


@dataclass(frozen=True)
class DurableStats:
    """A durable topic: its logs on disk, and the in-memory topic over them."""

    partitions: List[DurablePartitionStats]
    memory: TopicStats


@dataclass(frozen=True)
class DurableGroupStats:
    """A durable group (``DurableConsumer.stats()``): ``committed`` is, per partition,
    the oldest offset not settled, ``committed_on_disk`` the one last written (what a
    restart goes on from); ``in_flight`` counts deliveries handed out and not settled."""

    name: str
    members: int
    committed: List[int]
    committed_on_disk: List[int]
    in_flight: int
    redelivered: int
    dead_lettered: int
