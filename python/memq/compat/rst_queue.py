"""rst_queue 0.1.6's API on memq: switch with one import.

    # from rst_queue import AsyncQueue, ExecutionMode
    from memq.compat.rst_queue import AsyncQueue, ExecutionMode

The names, signatures and return types are rst_queue 0.1.6's: ``AsyncQueue(mode=1,
buffer_size=128)``, ``AsyncPersistenceQueue(mode=1, buffer_size=128,
storage_path="./queue_storage")``, ``push(data) -> None``, ``push_batch(items) ->
list[int]`` (the item ids), ``start(worker, num_workers)`` and
``start_with_results(worker, num_workers)`` calling ``worker(item_id, data)`` (ids from
1), ``get() -> ProcessedResult | None``, ``get_batch(max_items) -> list``,
``get_blocking() -> ProcessedResult``, ``get_stats() -> QueueStats``, ``total_pushed()``,
``total_processed()``, ``total_errors()``, ``active_workers()``, ``get_mode()``,
``set_mode(mode)``, ``clear()``, ``pending_items()``, ``close()``.

What differs, on purpose (rst_queue's defects):

- ``get_blocking()`` waits with the GIL released (other threads, the workers among them,
  run meanwhile), wakes for Ctrl-C, and takes an optional ``timeout``.
- Workers are native threads of a memq pool; they sleep when idle (no polling) and stop
  on ``close()``, which waits for them to finish what was pushed.
- ``num_workers`` is the number of workers started (not capped at the CPU count);
  ``num_workers < 1`` is an error, not a queue that never processes anything.
- ``buffer_size`` bounds the items pushed and not yet taken by a worker: a push to a full
  queue waits for the workers, or raises ``QueueFull`` if none is started (it could never
  get room).
- A worker's exception is counted in ``total_errors`` (with ``start()`` too) and, with
  ``start_with_results``, becomes an error result (``is_error()``).
- Counters are consistent: ``total_removed <= total_processed <= total_pushed`` (plus,
  for a persistent queue, what was pending on disk when it was opened); they count this
  process's work.
- ``pending_items()`` is O(1) and reorders nothing.
- ``AsyncPersistenceQueue`` stores items in a durable memq topic (``sync="always"``: a
  push returns once the item is on disk) in push order; items are acked after their
  worker returned. After ``close()`` a restart hands the workers exactly the items not
  processed. After a crash it is at least once: the durable group writes its positions
  every 256 items, so up to that many processed items can be handed out again (never
  an item lost).
- Errors are precise ``memq.Error`` subclasses that also subclass ``TypeError``, which
  rst_queue raised for everything, so existing ``except TypeError`` clauses still work.
"""

from __future__ import annotations

import threading
from enum import IntEnum
from typing import Any, Callable, List, Optional, Sequence, Union

import memq

__all__ = [
    "AsyncPersistenceQueue",
    "AsyncQueue",
    "ExecutionMode",
    "InvalidArgument",
    "NoResults",
    "ProcessedResult",
    "QueueClosed",
    "QueueFull",
    "QueueStats",
]


class ExecutionMode(IntEnum):
    """SEQUENTIAL (0): one worker, items in order. PARALLEL (1): ``num_workers`` workers."""

    SEQUENTIAL = 0
    PARALLEL = 1


class QueueClosed(memq.Closed, TypeError):
    """The queue is closed."""


class QueueFull(memq.Full, TypeError):
    """The queue holds ``buffer_size`` pending items and no worker is started."""


class InvalidArgument(memq.InvalidArgument, TypeError):
    """An argument rst_queue would have taken silently or raised TypeError for."""


class NoResults(memq.Error, TypeError):
    """``get_blocking()`` on a queue started without results (it would wait forever)."""


class QueueStats:
    """A snapshot of the counters."""

    __slots__ = ("total_pushed", "total_processed", "total_errors", "total_removed", "active_workers")

    def __init__(
        self,
        total_pushed: int = 0,
        total_processed: int = 0,
        total_errors: int = 0,
        total_removed: int = 0,
        active_workers: int = 0,
    ) -> None:
        self.total_pushed = total_pushed
        self.total_processed = total_processed
        self.total_errors = total_errors
        self.total_removed = total_removed
        self.active_workers = active_workers

    def __repr__(self) -> str:
        return (
            f"QueueStats(total_pushed={self.total_pushed}, total_processed={self.total_processed}, "
            f"total_errors={self.total_errors}, total_removed={self.total_removed}, "
            f"active_workers={self.active_workers})"
        )

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, QueueStats):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)


class ProcessedResult:
    """A worker's result: ``id`` (the item's id), ``result`` (bytes; empty on error),
    ``error`` (the error text, or None)."""

    __slots__ = ("id", "result", "error")

    def __init__(self, id: int, result: bytes = b"", error: Optional[str] = None) -> None:
        self.id = id
        self.result = result
        self.error = error

    def is_error(self) -> bool:
        """Whether the worker raised."""
        return self.error is not None

    def __repr__(self) -> str:
        if self.error is not None:
            return f"ProcessedResult(id={self.id}, error={self.error})"
        return f"ProcessedResult(id={self.id}, result={len(self.result)} bytes)"

    __str__ = __repr__


# Results are held until taken; a pool waits for room once this many are untaken.
_RESULTS_CAPACITY = 1 << 20
_GROUP = "rst_queue"


def _mode(mode: Union[int, ExecutionMode]) -> ExecutionMode:
    if isinstance(mode, bool) or not isinstance(mode, int):
        raise InvalidArgument(f"mode is 0 (SEQUENTIAL) or 1 (PARALLEL), not {mode!r}")
    if mode not in (0, 1):
        raise InvalidArgument(f"mode is 0 (SEQUENTIAL) or 1 (PARALLEL), not {mode}")
    return ExecutionMode(mode)


def _count(n: Any, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidArgument(f"{what} is an int, not {type(n).__name__}")
    if n < 1:
        raise InvalidArgument(f"{what} must be at least 1, not {n}")
    return n


def _result(r: "memq.WorkResult") -> ProcessedResult:
    item = r.offset + 1
    if r.error is not None:
        return ProcessedResult(item, b"", f"Worker execution error for item {item}: {r.error}")
    return ProcessedResult(item, r.value if r.value is not None else b"")


class _Base:
    _topic: Any

    def __init__(self, mode: Union[int, ExecutionMode], buffer_size: int) -> None:
        self._mode = _mode(mode)
        self._buffer = _count(buffer_size, "buffer_size")
        self._pool: Optional[memq.Pool] = None
        self._results: Optional[memq.Results] = None
        self._removed = 0
        self._pushed = 0
        self._lock = threading.Lock()
        self._closed = False

    # ---- pushing -------------------------------------------------------------------

    def _full(self) -> None:
        if self._pool is None:
            raise QueueFull(
                f"the queue holds buffer_size ({self._buffer}) pending items and no worker "
                "is started: it could never get room"
            )

    def push(self, data: bytes) -> None:
        """Adds an item (bytes-like). Waits while ``buffer_size`` items are pending and
        workers are running."""
        if self._closed:
            raise QueueClosed("Queue is closed")
        try:
            try:
                self._publish(data, 0)
            except memq.Full:
                self._full()
                self._publish(data, None)
        except memq.Closed:
            raise QueueClosed("Queue is closed") from None
        except memq.InvalidType as e:
            raise InvalidArgument(str(e)) from None
        with self._lock:
            self._pushed += 1

    def push_batch(self, items: Sequence[bytes]) -> List[int]:
        """Adds the items in order; returns their ids."""
        if isinstance(items, (bytes, str)):
            raise InvalidArgument("push_batch takes a sequence of bytes items")
        items = list(items)
        if self._closed:
            raise QueueClosed("Queue is closed")
        ids: List[int] = []
        try:
            # In chunks that fit the buffer, so that a large batch waits for room.
            for i in range(0, len(items), self._buffer):
                chunk = items[i : i + self._buffer]
                try:
                    first = self._publish_batch(chunk, 0)
                except memq.Full:
                    self._full()
                    first = self._publish_batch(chunk, None)
                ids.extend(range(first + 1, first + 1 + len(chunk)))
        except memq.Closed:
            raise QueueClosed("Queue is closed") from None
        except memq.InvalidType as e:
            raise InvalidArgument(str(e)) from None
        with self._lock:
            self._pushed += len(ids)
        return ids

    # ---- workers -------------------------------------------------------------------

    def _start(self, worker: Callable[[int, bytes], Any], num_workers: int, results: bool) -> None:
        if not callable(worker):
            raise InvalidArgument(f"the worker must be callable, not {type(worker).__name__}")
        n = _count(num_workers, "num_workers")
        if self._closed:
            raise QueueClosed("Queue is closed")
        if self._pool is not None:
            raise InvalidArgument("the queue is started already")
        sequential = self._mode == ExecutionMode.SEQUENTIAL
        self._pool = self._make_pool(
            worker,
            workers=None if sequential else n,
            mode=memq.SEQUENTIAL if sequential else memq.PARALLEL,
            results=_RESULTS_CAPACITY if results else None,
        )
        self._results = self._pool.results
        self._started()

    def start(self, worker: Callable[[int, bytes], Any], num_workers: int = 1) -> None:
        """Starts ``num_workers`` workers (one in SEQUENTIAL mode) calling
        ``worker(item_id, data)`` on every item; return values are dropped."""
        self._start(worker, num_workers, False)

    def start_with_results(self, worker: Callable[[int, bytes], Any], num_workers: int = 1) -> None:
        """As ``start``, keeping each return value (bytes or str) or error as a
        ``ProcessedResult`` for ``get``, ``get_batch`` and ``get_blocking``."""
        self._start(worker, num_workers, True)

    # ---- results -------------------------------------------------------------------

    def _took(self, n: int) -> None:
        with self._lock:
            self._removed += n

    def get(self) -> Optional[ProcessedResult]:
        """The next result if one is ready, else None."""
        if self._results is None:
            return None
        try:
            r = self._results.try_recv()
        except memq.Closed:
            return None
        if r is None:
            return None
        self._took(1)
        return _result(r)

    def get_batch(self, max_items: int) -> List[ProcessedResult]:
        """Up to ``max_items`` ready results (an empty list if none)."""
        n = _count(max_items, "max_items")
        if self._results is None:
            return []
        try:
            rs = self._results.recv_many(n, timeout=0)
        except memq.Closed:
            return []
        self._took(len(rs))
        return [_result(r) for r in rs]

    def get_blocking(self, timeout: Optional[float] = None) -> ProcessedResult:
        """Waits for the next result (the GIL released; Ctrl-C interrupts). With
        ``timeout`` (seconds) raises ``memq.Timeout`` when none comes in time."""
        if self._results is None:
            raise NoResults("get_blocking() needs start_with_results(): no result would ever come")
        try:
            r = self._results.recv(timeout=timeout)
        except memq.Closed:
            raise QueueClosed("Queue is closed and every result was taken") from None
        self._took(1)
        return _result(r)

    # ---- counters and control --------------------------------------------------------

    def _pool_stats(self) -> Any:
        return self._pool.stats() if self._pool is not None else None

    def total_pushed(self) -> int:
        """Items pushed by this process."""
        return self._pushed

    def total_processed(self) -> int:
        """Items the workers handled (errors included)."""
        s = self._pool_stats()
        return s.processed if s else 0

    def total_errors(self) -> int:
        """Items whose worker raised."""
        s = self._pool_stats()
        return s.errors if s else 0

    def active_workers(self) -> int:
        """Workers handling items right now."""
        s = self._pool_stats()
        return s.active_workers if s else 0

    def get_stats(self) -> QueueStats:
        """A snapshot of the counters."""
        s = self._pool_stats()
        with self._lock:
            removed, pushed = self._removed, self._pushed
        if s is None:
            return QueueStats(pushed, 0, 0, removed, 0)
        return QueueStats(pushed, s.processed, s.errors, removed, s.active_workers)

    def get_mode(self) -> int:
        """0 (SEQUENTIAL) or 1 (PARALLEL)."""
        return int(self._mode)

    def set_mode(self, mode: int) -> None:
        """Sets the mode used by ``start``; raises once started (the workers are running)."""
        m = _mode(mode)
        if self._pool is not None and m != self._mode:
            raise InvalidArgument("the mode cannot change once the workers are started")
        self._mode = m

    def close(self) -> None:
        """Stops accepting items, lets the workers finish what was pushed, and waits for
        them to end. Results stay readable."""
        if self._closed:
            return
        self._closed = True
        self._close_topic()
        if self._pool is not None:
            self._pool.join()

    def __enter__(self) -> "_Base":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # Implemented by the two queues.
    def _publish(self, data: bytes, timeout: Optional[float]) -> None:  # pragma: no cover
        raise NotImplementedError

    def _publish_batch(self, items: List[bytes], timeout: Optional[float]) -> int:  # pragma: no cover
        raise NotImplementedError

    def _make_pool(self, worker: Callable[..., Any], **kw: Any) -> "memq.Pool":  # pragma: no cover
        raise NotImplementedError

    def _started(self) -> None:  # pragma: no cover
        raise NotImplementedError

    def _close_topic(self) -> None:  # pragma: no cover
        raise NotImplementedError

    def pending_items(self) -> int:  # pragma: no cover
        raise NotImplementedError

    def clear(self) -> None:  # pragma: no cover
        raise NotImplementedError


class AsyncQueue(_Base):
    """An in-memory work queue (rst_queue's ``AsyncQueue``) on a memq topic and pool."""

    def __init__(self, mode: Union[int, ExecutionMode] = 1, buffer_size: int = 128) -> None:
        super().__init__(mode, buffer_size)
        self._topic = memq.Topic(self._buffer, release_on_read=True)
        # Holds the group's place from the first item until the workers start.
        self._holder: Optional[memq.Consumer] = self._topic.group(_GROUP)

    def _publish(self, data: bytes, timeout: Optional[float]) -> None:
        self._topic.publish(data, timeout=timeout)

    def _publish_batch(self, items: List[bytes], timeout: Optional[float]) -> int:
        return self._topic.publish_batch(items, timeout=timeout)[1]

    def _make_pool(self, worker: Callable[..., Any], **kw: Any) -> "memq.Pool":
        return memq.Pool(self._topic, worker, group=_GROUP, arguments="id_data", **kw)

    def _started(self) -> None:
        if self._holder is not None:
            self._holder.close()
            self._holder = None

    def _close_topic(self) -> None:
        self._topic.close()
        if self._pool is None and self._holder is not None:
            self._holder.close()
            self._holder = None

    def pending_items(self) -> int:
        """Items pushed and not yet taken by a worker."""
        for g in self._topic.stats().groups:
            if g.name == _GROUP:
                return g.lag
        return 0

    def clear(self) -> None:
        """Drops the items not yet taken by a worker (in push order; the rest stays in
        order)."""
        member = self._topic.group(_GROUP)
        try:
            while member.recv_many(4096, timeout=0):
                pass
        except memq.Closed:
            pass
        finally:
            member.close()


class AsyncPersistenceQueue(_Base):
    """A work queue whose items survive a restart (rst_queue's
    ``AsyncPersistenceQueue``), on a durable memq topic in ``storage_path``."""

    def __init__(
        self,
        mode: Union[int, ExecutionMode] = 1,
        buffer_size: int = 128,
        storage_path: str = "./queue_storage",
    ) -> None:
        super().__init__(mode, buffer_size)
        self._path = storage_path
        self._topic = memq.DurableTopic(storage_path, self._buffer, sync="always")
        self._holder: Optional[memq.DurableConsumer] = None

    def _publish(self, data: bytes, timeout: Optional[float]) -> None:
        self._topic.publish(data, timeout=timeout)

    def _publish_batch(self, items: List[bytes], timeout: Optional[float]) -> int:
        # A durable batch waits for room without a time limit.
        return self._topic.publish_batch(items)[1]

    def _make_pool(self, worker: Callable[..., Any], **kw: Any) -> "memq.Pool":
        return memq.Pool(
            self._topic, worker, group=_GROUP, arguments="id_data", acked=True, ack_wait=300, **kw
        )

    def _started(self) -> None:
        pass

    def _close_topic(self) -> None:
        self._topic.close()

    def get_storage_path(self) -> str:
        """The storage directory."""
        return self._path

    def pending_items(self) -> int:
        """Items stored and not yet handled (as far as the group has committed)."""
        if self._pool is not None:
            s = self._pool.stats()
            base = self._pending_at_start
            return max(0, base + self._pushed - s.fetched)
        return self._pending_on_disk()

    def _pending_on_disk(self) -> int:
        try:
            member = self._topic.group(_GROUP, ack_wait=300)
        except memq.Closed:
            return 0
        try:
            stats = member.stats()
        finally:
            member.close()
        committed = sum(stats.committed)
        nxt = sum(self._topic.next_offset(p) for p in range(self._topic.partitions))
        return max(0, nxt - committed)

    def _start(self, worker: Callable[[int, bytes], Any], num_workers: int, results: bool) -> None:
        self._pending_at_start = self._pending_on_disk() - self._pushed
        super()._start(worker, num_workers, results)

    def storage_item_count(self) -> int:
        """Items stored on disk (handled or not)."""
        return sum(
            self._topic.next_offset(p) - self._topic.start_offset(p) for p in range(self._topic.partitions)
        )

    def clear(self) -> None:
        """Drops the stored items not yet handled (acked, so they do not come back)."""
        if self._pool is not None:
            raise InvalidArgument("clear() is for a queue whose workers are not started")
        member = self._topic.group(_GROUP, ack_wait=300)
        try:
            while True:
                d = member.recv(timeout=0)
                d.ack()
        except (memq.Timeout, memq.Closed):
            pass
        finally:
            member.commit()
            member.close()
