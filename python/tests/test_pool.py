import threading

import pytest

import memq
from conftest import SOON


def test_pool_results_and_errors():
    t = memq.Topic(256)

    def handler(m):
        if m.data == b"bad":
            raise ValueError("bad input")
        return m.data.upper()

    with memq.Pool(t, handler, workers=3, results=1024) as pool:
        for i in range(200):
            t.publish(b"x%d" % i)
        t.publish(b"bad")
    st = pool.stats()
    assert (st.processed, st.errors, st.results) == (201, 1, 201)
    assert st.succeeded == 200 and st.in_flight == 0 and st.workers == 0
    results = pool.results.recv_many(1000, timeout=0)
    assert len(results) == 201
    bad = [r for r in results if not r.ok]
    assert len(bad) == 1 and bad[0].error == "ValueError: bad input"
    assert "Traceback" in bad[0].traceback and "bad input" in bad[0].traceback
    assert sorted(r.value for r in results if r.ok) == sorted(b"X%d" % i for i in range(200))
    errs = pool.errors()
    assert len(errs) == 1 and isinstance(errs[0], memq.HandlerError)
    assert errs[0].offset == bad[0].offset and "raise ValueError" in errs[0].traceback


def test_handlers_that_release_the_gil_run_in_parallel():
    t = memq.Topic(64)
    # Four handlers must all be inside at once to pass the barrier: only possible if
    # each releases the GIL while it waits and the workers really run in parallel.
    barrier = threading.Barrier(4, timeout=SOON)
    pool = memq.Pool(t, lambda m: barrier.wait(), workers=4, batch=1)
    for _ in range(4):
        t.publish(b"x")
    st = pool.drain(timeout=SOON)
    assert (st.processed, st.errors) == (4, 0)


def test_sequential_keeps_order():
    t = memq.Topic(1024)
    seen = []
    pool = memq.Pool(t, lambda m: seen.append(m.offset), mode=memq.SEQUENTIAL)
    for i in range(500):
        t.publish(b"%d" % i)
    pool.drain(timeout=SOON)
    assert seen == list(range(500))
    assert pool.workers == 1


def test_join_ends_when_topic_closes():
    t = memq.Topic(64)
    count = [0]
    lock = threading.Lock()

    def h(m):
        with lock:
            count[0] += 1

    pool = memq.Pool(t, h, workers=2, arguments="data")
    for _ in range(100):
        t.publish(b"x")
    t.close()
    st = pool.join(timeout=SOON)
    assert st.processed == 100 == count[0] and pool.finished


def test_stop_leaves_the_rest_in_the_group():
    t = memq.Topic(64)
    gate = threading.Event()
    pool = memq.Pool(t, lambda m: gate.wait(SOON), workers=1, batch=1, group="g")
    for _ in range(10):
        t.publish(b"x")
    stopper = threading.Thread(target=pool.stop, kwargs={"timeout": SOON})
    stopper.start()
    gate.set()
    stopper.join(SOON)
    st = pool.stats()
    assert pool.finished and st.processed == st.fetched <= 10
    rest = t.group("g").recv_many(100, timeout=0)
    assert len(rest) + st.processed == 10


def test_acked_pool_retries_failures():
    t = memq.Topic(64)
    failed = set()

    def flaky(m):
        if m.offset not in failed:
            failed.add(m.offset)
            raise RuntimeError("first try fails")

    pool = memq.Pool(t, flaky, workers=2, acked=True, ack_wait=SOON)
    for _ in range(20):
        t.publish(b"x")
    t.close()
    st = pool.join(timeout=SOON)
    # Every message failed once, was nacked, and succeeded the second time.
    assert st.errors == 20 and st.processed == 40


def test_acked_pool_dead_letters_after_max_deliveries():
    t = memq.Topic(16)
    dlq = memq.DeadLetterTopic(16)
    dead = dlq.subscribe()
    pool = memq.Pool(
        t, lambda m: 1 / 0, workers=1, acked=True, ack_wait=SOON, max_deliveries=3, dead_letters=dlq
    )
    t.publish(b"poison")
    letter = dead.recv(timeout=SOON)
    assert (letter.reason, letter.deliveries, letter.data) == ("max_deliveries", 3, b"poison")
    pool.stop(timeout=SOON)
    assert "ZeroDivisionError" in pool.errors()[0].traceback


def test_handler_returning_the_wrong_type_is_an_error_result():
    t = memq.Topic(8)
    pool = memq.Pool(t, lambda m: 42, results=8)
    t.publish(b"x")
    pool.drain(timeout=SOON)
    r = pool.results.recv(timeout=SOON)
    assert not r.ok and "expected bytes-like" in r.error


def test_bad_pool_arguments():
    t = memq.Topic(8)
    with pytest.raises(memq.InvalidType):
        memq.Pool(t, "not callable")
    with pytest.raises(memq.InvalidArgument):
        memq.Pool(t, print, workers=0)
    with pytest.raises(memq.InvalidArgument):
        memq.Pool(t, print, mode="sometimes")
    with pytest.raises(memq.InvalidArgument):
        memq.Pool(t, print, mode=memq.SEQUENTIAL, workers=2)
    with pytest.raises(memq.InvalidType):
        memq.Pool(object(), print)
    with pytest.raises(memq.InvalidArgument):
        memq.Pool(t, print, arguments="everything")


def test_idle_pool_drains_at_once():
    t = memq.Topic(8)
    pool = memq.Pool(t, print, workers=4)
    st = pool.drain(timeout=SOON)
    assert st.processed == 0 and pool.finished


def test_interpreter_exits_cleanly_with_a_busy_pool():
    import subprocess
    import sys

    code = (
        "import memq\n"
        "t = memq.Topic(1024)\n"
        "p = memq.Pool(t, lambda m: sum(range(100)), workers=4)\n"
        "for i in range(20000): t.publish(b'x')\n"
        "print('bye')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=SOON)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "bye"
