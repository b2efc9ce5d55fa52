"""memq's exception hierarchy: every error memq raises is a ``memq.Error``.

Where a builtin exception means the same thing, the memq exception subclasses it too, so
that ``except ValueError`` (bad argument), ``except TimeoutError``, ``except KeyError``
(unknown name) or ``except OSError`` (the disk) keep working.
"""

from __future__ import annotations


class Error(Exception):
    """Base class of every memq error."""


class InvalidArgument(Error, ValueError):
    """An argument memq cannot accept: a zero capacity, a negative or NaN timeout, ..."""


class InvalidType(Error, TypeError):
    """An argument of the wrong type, e.g. a ``str`` payload (payloads are bytes-like)."""


class OutOfRange(Error, IndexError):
    """A partition or an offset out of range."""


class AllocFailed(Error, MemoryError):
    """The topic's capacity cannot be allocated."""


class Closed(Error):
    """The topic is closed (publishing), or closed and drained (receiving), or the handle
    was closed."""


class Full(Error):
    """No room, and the call was not to wait (``timeout=0``, a ``reject`` topic, a batch
    over the capacity)."""


class Timeout(Error, TimeoutError):
    """Nothing happened in time: no room to publish, or no message to receive."""


class Lagged(Error):
    """The reader missed messages (evicted before it read them); ``missed`` says how many.
    The next receive goes on with the oldest message retained."""

    def __init__(self, message: str = "", missed: int = 0) -> None:
        super().__init__(message)
        self.missed = missed


class LeaseExpired(Error):
    """The delivery's lease ran out (or it was settled already): the message went back to
    the group."""


class GroupDeleted(Error):
    """The delivery's group was deleted."""


class Busy(Error):
    """Another call is using this reader (one receive at a time per reader)."""


class UnknownTopic(Error, KeyError):
    """No topic of that name in the broker."""

    def __str__(self) -> str:  # KeyError would quote the message
        return Exception.__str__(self)


class TopicExists(Error):
    """A topic of that name exists already in the broker."""


class UnknownGroup(Error, KeyError):
    """No group of that name on the topic."""

    def __str__(self) -> str:
        return Exception.__str__(self)


class GroupModeMismatch(Error):
    """The group exists with the other mode (plain or explicit-ack)."""


class Locked(Error):
    """The durable topic's directory is open already (in this or another process)."""


class Corrupt(Error):
    """The durable log is damaged (a bad checksum, a bad format)."""


class DiskFull(Error, OSError):
    """The disk is full."""


class StoreIOError(Error, OSError):
    """An I/O error of the durable log."""


class HandlerError(Error):
    """A pool handler raised: ``traceback`` holds its formatted traceback."""

    def __init__(self, message: str = "", traceback: str = "") -> None:
        super().__init__(message)
        self.traceback = traceback
