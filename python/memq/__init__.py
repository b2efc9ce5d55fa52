"""memq: an in-process message queue with Kafka-style semantics.

Topics of byte messages with offsets, broadcast subscribers, consumer groups,
explicit-ack groups with dead letters, a broker of named topics, durable topics on disk,
worker pools running Python handlers on native threads, and asyncio support. Every
call that waits releases the GIL and wakes for Ctrl-C; every error is a ``memq.Error``.

    import memq

    topic = memq.Topic(capacity=1024, partitions=4)
    workers = topic.group("workers")
    topic.publish(b"resize 42.png", key=b"user-7")
    msg = workers.recv(timeout=1.0)     # Message(data, offset, partition, timestamp, key)
    topic.close()
"""

from __future__ import annotations

from enum import IntEnum

from ._errors import (
    AllocFailed,
    Busy,
    Closed,
    Corrupt,
    DiskFull,
    Error,
    Full,
    GroupDeleted,
    GroupModeMismatch,
    HandlerError,
    InvalidArgument,
    InvalidType,
    Lagged,
    LeaseExpired,
    Locked,
    OutOfRange,
    StoreIOError,
    Timeout,
    TopicExists,
    UnknownGroup,
    UnknownTopic,
)
from ._memq import (
    AckConsumer,
    Broker,
    Consumer,
    DeadLetter,
    DeadLetterSubscriber,
    DeadLetterTopic,
    Delivery,
    DurableConsumer,
    DurableDeadLetters,
    DurableSubscriber,
    DurableTopic,
    Message,
    Pool,
    Results,
    Subscriber,
    Topic,
    WorkResult,
    __version__,
    key_partition,
)
from ._types import (
    DurableGroupStats,
    DurablePartitionStats,
    DurableStats,
    GroupStats,
    PartitionStats,
    PoolStats,
    TopicStats,
)


class Mode(IntEnum):
    """A pool's execution mode (rst_queue's values: 0 and 1)."""

    SEQUENTIAL = 0
    PARALLEL = 1

    def __str__(self) -> str:
        return self.name.lower()


SEQUENTIAL = Mode.SEQUENTIAL
PARALLEL = Mode.PARALLEL

__all__ = [
    "AckConsumer",
    "AllocFailed",
    "Broker",
    "Busy",
    "Closed",
    "Consumer",
    "Corrupt",
    "DeadLetter",
    "DeadLetterSubscriber",
    "DeadLetterTopic",
    "Delivery",
    "DiskFull",
    "DurableConsumer",
    "DurableDeadLetters",
    "DurableGroupStats",
    "DurablePartitionStats",
    "DurableStats",
    "DurableSubscriber",
    "DurableTopic",
    "Error",
    "Full",
    "GroupDeleted",
    "GroupModeMismatch",
    "GroupStats",
    "HandlerError",
    "InvalidArgument",
    "InvalidType",
    "Lagged",
    "LeaseExpired",
    "Locked",
    "Message",
    "Mode",
    "PARALLEL",
    "Pool",
    "PoolStats",
    "Results",
    "SEQUENTIAL",
    "OutOfRange",
    "PartitionStats",
    "StoreIOError",
    "Subscriber",
    "Timeout",
    "Topic",
    "TopicExists",
    "TopicStats",
    "UnknownGroup",
    "UnknownTopic",
    "WorkResult",
    "__version__",
    "key_partition",
]
