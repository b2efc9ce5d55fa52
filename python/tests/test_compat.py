import threading

import pytest

from memq.compat import rst_queue as rq
from memq.compat.rst_queue import AsyncPersistenceQueue, AsyncQueue, ExecutionMode, ProcessedResult, QueueStats
from conftest import SOON


def test_names_and_defaults():
    q = AsyncQueue()
    assert q.get_mode() == 1 and ExecutionMode.SEQUENTIAL == 0
    assert isinstance(q.get_stats(), QueueStats)
    assert repr(q.get_stats()) == (
        "QueueStats(total_pushed=0, total_processed=0, total_errors=0, total_removed=0, active_workers=0)"
    )
    assert q.push(b"x") is None
    assert q.push_batch([b"y", b"z"]) == [2, 3]
    assert q.pending_items() == 3
    q.close()


def test_results_ids_and_errors():
    q = AsyncQueue(mode=ExecutionMode.SEQUENTIAL)

    def worker(item_id, data):
        if data == b"boom":
            raise ValueError("boom")
        return b"%d:" % item_id + data

    q.start_with_results(worker, num_workers=1)
    q.push(b"a")
    q.push(b"boom")
    q.push(b"c")
    got = [q.get_blocking(timeout=SOON) for _ in range(3)]
    assert all(isinstance(r, ProcessedResult) for r in got)
    assert [r.result for r in got] == [b"1:a", b"", b"3:c"]
    assert got[1].is_error() and "ValueError: boom" in got[1].error and got[1].id == 2
    assert q.get() is None and q.get_batch(10) == []
    s = q.get_stats()
    assert (s.total_pushed, s.total_processed, s.total_errors, s.total_removed) == (3, 3, 1, 3)
    q.close()


def test_workers_count_and_stop_on_close():
    q = AsyncQueue(buffer_size=64)
    barrier = threading.Barrier(4, timeout=SOON)
    # Four items, each of which needs four workers at once. A worker's first batch is
    # one item, and a worker waiting at the barrier takes no other: so this passes only
    # if all four workers run (none capped) and wait with the GIL released.
    q.start(lambda i, d: barrier.wait(), 4)
    for _ in range(4):
        q.push(b"x")
    q.close()  # waits for the workers to finish what was pushed
    s = q.get_stats()
    assert s.total_processed == 4 and s.total_errors == 0 and s.active_workers == 0


def test_get_blocking_releases_the_gil_and_errors_subclass_typeerror():
    q = AsyncQueue()
    with pytest.raises(TypeError):
        q.get_blocking()  # no results would ever come: an error, not a deadlock
    q.start_with_results(lambda i, d: d, 1)
    t = threading.Thread(target=lambda: q.push(b"late"))
    t.start()
    assert q.get_blocking(timeout=SOON).result == b"late"
    t.join(SOON)
    for bad in (lambda: q.push("str"), lambda: q.set_mode(5), lambda: AsyncQueue(buffer_size=0),
                lambda: AsyncQueue().start(print, 0), lambda: q.get_batch(-1)):
        with pytest.raises(TypeError):
            bad()
    q.close()
    with pytest.raises(rq.QueueClosed):
        q.push(b"x")
    with pytest.raises(TypeError):
        q.push(b"x")


def test_buffer_size_is_honoured():
    q = AsyncQueue(buffer_size=4)
    q.push_batch([b"1", b"2", b"3", b"4"])
    with pytest.raises(rq.QueueFull):
        q.push(b"5")
    q.start(lambda i, d: None, 2)
    for _ in range(100):
        q.push(b"x")  # waits for room instead
    q.close()
    assert q.get_stats().total_processed == 104


def test_clear_and_pending():
    q = AsyncQueue(mode=0)
    q.push_batch([b"%d" % i for i in range(10)])
    q.clear()
    assert q.pending_items() == 0
    q.push(b"kept")
    q.start_with_results(lambda i, d: d, 1)
    assert q.get_blocking(timeout=SOON).result == b"kept"
    q.close()


def test_persistence_survives_restart_in_order(tmp_path):
    path = str(tmp_path / "queue")
    q = AsyncPersistenceQueue(mode=0, storage_path=path)
    q.push_batch([b"item%d" % i for i in range(1, 12)])
    assert q.pending_items() == 11
    q.close()
    q = AsyncPersistenceQueue(mode=0, storage_path=path)
    assert q.pending_items() == 11
    q.start_with_results(lambda i, d: d, 1)
    got = [q.get_blocking(timeout=SOON).result for _ in range(11)]
    assert got == [b"item%d" % i for i in range(1, 12)]  # push order, not string order
    q.close()
    q = AsyncPersistenceQueue(mode=0, storage_path=path)
    assert q.pending_items() == 0  # processed items do not come back
    assert q.get_storage_path() == path
    q.close()
