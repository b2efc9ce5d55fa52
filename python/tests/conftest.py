"""Shared helpers. Tests never assert a timing: waits have bounds far from what they
should take (tens of seconds), and concurrency is observed with events and counters."""

import threading

import pytest

# Generous bound for anything that should happen "soon" on a loaded 2-core machine.
SOON = 60.0


@pytest.fixture
def soon():
    return SOON


def run_in_thread(fn, *args):
    """Runs fn in a thread; returns (thread, box) where box["result"] or box["error"]
    holds the outcome."""
    box = {}

    def body():
        try:
            box["result"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - reported to the test
            box["error"] = e

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t, box
