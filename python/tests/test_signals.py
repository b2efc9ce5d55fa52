"""Ctrl-C interrupts every blocking call. A timer thread sends SIGINT to the main
thread; the call's own time limit (SOON) is far from when the signal comes, so a call
that ignored it fails the test instead of hanging it."""

import os
import signal
import threading

import pytest

import memq
from conftest import SOON

pytestmark = pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="POSIX signals")


def interrupt_soon():
    main = threading.main_thread().ident
    timer = threading.Timer(0.2, lambda: signal.pthread_kill(main, signal.SIGINT))
    timer.start()
    return timer


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.subscribe().recv(timeout=SOON),
        lambda t: t.subscribe().recv(),
        lambda t: t.group("g").recv_many(10, timeout=SOON),
        lambda t: t.ack_group("a").recv(timeout=SOON),
    ],
    ids=["recv-timeout", "recv-forever", "group-recv-many", "ack-recv"],
)
def test_blocking_receive_is_interruptible(call):
    t = memq.Topic(4)
    timer = interrupt_soon()
    with pytest.raises(KeyboardInterrupt):
        call(t)
    timer.join()


def test_blocking_publish_is_interruptible():
    t = memq.Topic(1)
    keep = t.subscribe()  # noqa: F841 - makes the topic block
    t.publish(b"1")
    timer = interrupt_soon()
    with pytest.raises(KeyboardInterrupt):
        t.publish(b"2", timeout=SOON)
    timer.join()
    assert t.stats().published == 1  # the interrupted publish published nothing


def test_pool_join_is_interruptible():
    t = memq.Topic(4)
    pool = memq.Pool(t, print, workers=1)
    timer = interrupt_soon()
    with pytest.raises(KeyboardInterrupt):
        pool.join(timeout=SOON)
    timer.join()
    pool.stop(timeout=SOON)


def test_interrupted_receive_loses_no_message():
    t = memq.Topic(4)
    g = t.group("g")
    timer = interrupt_soon()
    with pytest.raises(KeyboardInterrupt):
        g.recv(timeout=SOON)
    timer.join()
    t.publish(b"after")
    assert g.recv(timeout=SOON).data == b"after"
    assert os.getpid()  # still alive
