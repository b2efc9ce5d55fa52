#!/usr/bin/env python3
"""The Python durable-queue peers of durable_bench (issue 34), one pass over every cell.

Run by `durable_bench` (bench/src/bin/durable_bench.rs) with the venv it makes under the
target directory (`pip install rst_queue==0.1.6 persist-queue`); by hand:

    python3 bench/python/durable_peers.py --dir DIR [--seconds 2.5] [--payloads 100,1024]
        [--batch 100]

Each cell publishes for about `--seconds` into a fresh queue in DIR (deleted after), counts
what it pushed, checks the count against the queue's own, and prints one CSV line:

    scenario,impl,payload,msgs,seconds,verified

- rst_queue `AsyncPersistenceQueue` (sled): `push` one by one, and `push_batch`;
- persist-queue `SQLiteQueue` (WAL, a commit per `put`, SQLite's default synchronous);
- persist-queue `Queue` (files; an fsync every `chunksize` = 100 puts).
"""

import argparse
import os
import shutil
import sys
import time


def timed(step, per_step, seconds):
    """Calls step() until `seconds` have passed; returns (messages, elapsed)."""
    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        step()
        n += per_step
        if time.perf_counter() >= deadline:
            break
    return n, time.perf_counter() - start


def rst_push(path, payload, seconds, batch):
    from rst_queue import AsyncPersistenceQueue, ExecutionMode

    q = AsyncPersistenceQueue(
        mode=ExecutionMode.SEQUENTIAL, buffer_size=128, storage_path=path
    )
    if batch:
        items = [payload] * batch
        n, secs = timed(lambda: q.push_batch(items), batch, seconds)
    else:
        n, secs = timed(lambda: q.push(payload), 1, seconds)
    verified = q.total_pushed() == n
    if hasattr(q, "close"):
        q.close()
    return n, secs, verified


def pq_sqlite(path, payload, seconds, _batch):
    import persistqueue

    q = persistqueue.SQLiteQueue(path, auto_commit=True)
    n, secs = timed(lambda: q.put(payload), 1, seconds)
    verified = q.qsize() == n
    q.close()
    return n, secs, verified


def pq_file(path, payload, seconds, _batch):
    import persistqueue

    q = persistqueue.Queue(path)
    n, secs = timed(lambda: q.put(payload), 1, seconds)
    verified = q.qsize() == n
    return n, secs, verified


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--seconds", type=float, default=2.5)
    ap.add_argument("--payloads", default="100,1024")
    ap.add_argument("--batch", type=int, default=100)
    args = ap.parse_args()
    payloads = [int(p) for p in args.payloads.split(",")]
    cells = [
        ("1 publisher", "rst_queue push (sled)", rst_push, 0),
        (f"batch of {args.batch}", "rst_queue push_batch (sled)", rst_push, args.batch),
        ("1 publisher", "persist-queue SQLite (WAL; commit per put)", pq_sqlite, 0),
        ("1 publisher", "persist-queue file (fsync per 100)", pq_file, 0),
    ]
    print("scenario,impl,payload,msgs,seconds,verified", flush=True)
    for size in payloads:
        payload = b"x" * size
        for i, (scenario, name, run, batch) in enumerate(cells):
            path = os.path.join(args.dir, f"py-{i}-{size}")
            shutil.rmtree(path, ignore_errors=True)
            try:
                n, secs, ok = run(path, payload, args.seconds, batch)
                print(f"{scenario},{name},{size},{n},{secs:.6f},{ok}", flush=True)
            except Exception as e:  # a peer that fails is reported, not fatal
                print(f"# {name} at {size} B failed: {e!r}", file=sys.stderr, flush=True)
            finally:
                shutil.rmtree(path, ignore_errors=True)
    sys.stdout.flush()
    # rst_queue starts threads that never end: leave without joining them.
    os._exit(0)


if __name__ == "__main__":
    main()
