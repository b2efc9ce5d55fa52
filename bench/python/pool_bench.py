#!/usr/bin/env python3
"""memq's Python package against the Python work queues users would otherwise pick.

    python3 bench/python/pool_bench.py [--jobs 1000000] [--rounds 5] [--workers 4] [--quick]

Needs the `memq` package installed (a release build: `pip install ./python`, or
`maturin develop --release -m python/Cargo.toml`) and, for its columns, rst_queue 0.1.6
(`pip install rst_queue==0.1.6`; without it those cells say "n/a").

Every cell runs in a fresh process (rst_queue's workers never stop and poll every
100 µs, which would slow every later cell in the same process), the cells of a round
interleaved, `--rounds` rounds; the figure printed is the median, with the range.

Cells:
- pool: trivial-handler worker pool (`handler(item)` returns at once), `--workers`
  workers, jobs published one by one from the main thread while the workers run; jobs/s
  from the first publish to the last job handled. memq `Pool` (with its default
  handler argument, a `memq.Message`), memq `compat.rst_queue.AsyncQueue`, rst_queue
  `AsyncQueue`, `queue.Queue` with threads, and `asyncio.Queue` with worker tasks.
- pool-batched: the same, jobs published in batches of 1000 (memq `publish_batch`,
  rst_queue `push_batch`; queue.Queue and asyncio.Queue have no batch put).
- publish: one by one, and batched (1000 per call), with no reader.
- receive: one by one (`recv`) and batched (`recv_many(1000)`) from a topic holding every
  message; for rst_queue `get()` and `get_batch(1000)` of processed results.

Then the issue's targets, each PASS or FAIL on the medians: pool >= 1M jobs/s and ahead
of asyncio.Queue; publish one by one >= 2M msgs/s; >= 10x rst_queue in every cell.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PAYLOAD = b"x" * 16


# ---- cells (each runs in a child process: `pool_bench.py --cell NAME --jobs N`) ------------


def cell_memq_pool(n, workers, batched):
    import memq

    t = memq.Topic(1 << 16)
    pool = memq.Pool(t, lambda m: None, workers=workers)
    start = time.perf_counter()
    if batched:
        chunk = [PAYLOAD] * 1000
        for _ in range(n // 1000):
            t.publish_batch(chunk)
    else:
        publish = t.publish
        for _ in range(n):
            publish(PAYLOAD)
    st = pool.drain()
    took = time.perf_counter() - start
    assert st.processed == n, st
    return n / took


def cell_memq_compat(n, workers, batched):
    from memq.compat.rst_queue import AsyncQueue

    q = AsyncQueue(mode=1, buffer_size=1 << 16)
    q.start(lambda i, d: None, workers)
    start = time.perf_counter()
    if batched:
        chunk = [PAYLOAD] * 1000
        for _ in range(n // 1000):
            q.push_batch(chunk)
    else:
        push = q.push
        for _ in range(n):
            push(PAYLOAD)
    q.close()  # waits for the workers to finish
    took = time.perf_counter() - start
    assert q.total_processed() == n
    return n / took


def cell_rst_pool(n, workers, batched):
    import rst_queue

    q = rst_queue.AsyncQueue(mode=1, buffer_size=1 << 16)
    q.start(lambda i, d: None, workers)
    start = time.perf_counter()
    if batched:
        chunk = [PAYLOAD] * 1000
        for _ in range(n // 1000):
            q.push_batch(chunk)
    else:
        push = q.push
        for _ in range(n):
            push(PAYLOAD)
    # rst_queue has no join and its get_blocking deadlocks: poll its counter.
    while q.total_processed() < n:
        time.sleep(0.001)
    return n / (time.perf_counter() - start)


def cell_queue_pool(n, workers, batched):
    import queue
    import threading

    q = queue.Queue()

    def work():
        get, done = q.get, q.task_done
        while True:
            item = get()
            if item is None:
                done()
                return
            (lambda m: None)(item)
            done()

    threads = [threading.Thread(target=work) for _ in range(workers)]
    for th in threads:
        th.start()
    start = time.perf_counter()
    put = q.put
    for _ in range(n):
        put(PAYLOAD)
    q.join()
    took = time.perf_counter() - start
    for _ in threads:
        q.put(None)
    for th in threads:
        th.join()
    return n / took


def cell_asyncio_pool(n, workers, batched):
    import asyncio

    async def main():
        q = asyncio.Queue()

        async def work():
            get, done = q.get, q.task_done
            while True:
                item = await get()
                (lambda m: None)(item)
                done()

        tasks = [asyncio.create_task(work()) for _ in range(workers)]
        start = time.perf_counter()
        put = q.put_nowait
        for _ in range(n):
            put(PAYLOAD)
        await q.join()
        took = time.perf_counter() - start
        for t in tasks:
            t.cancel()
        return n / took

    return asyncio.run(main())


def cell_memq_publish(n, workers, batched):
    import memq

    t = memq.Topic(1 << 16)  # no reader: never full, old messages are evicted
    start = time.perf_counter()
    if batched:
        chunk = [PAYLOAD] * 1000
        for _ in range(n // 1000):
            t.publish_batch(chunk)
    else:
        publish = t.publish
        for _ in range(n):
            publish(PAYLOAD)
    return n / (time.perf_counter() - start)


def cell_rst_publish(n, workers, batched):
    import rst_queue

    q = rst_queue.AsyncQueue(mode=1, buffer_size=1 << 16)
    start = time.perf_counter()
    if batched:
        chunk = [PAYLOAD] * 1000
        for _ in range(n // 1000):
            q.push_batch(chunk)
    else:
        push = q.push
        for _ in range(n):
            push(PAYLOAD)
    return n / (time.perf_counter() - start)


def cell_memq_receive(n, workers, batched):
    import memq

    t = memq.Topic(n)
    s = t.subscribe()
    chunk = [PAYLOAD] * 1000
    for _ in range(n // 1000):
        t.publish_batch(chunk)
    start = time.perf_counter()
    if batched:
        got = 0
        while got < n:
            got += len(s.recv_many(1000))
    else:
        recv = s.recv
        for _ in range(n):
            recv()
    return n / (time.perf_counter() - start)


def cell_rst_receive(n, workers, batched):
    import rst_queue

    q = rst_queue.AsyncQueue(mode=1, buffer_size=1 << 16)
    q.start_with_results(lambda i, d: d, 1)
    chunk = [PAYLOAD] * 1000
    for _ in range(n // 1000):
        q.push_batch(chunk)
    while q.total_processed() < n:
        time.sleep(0.001)
    start = time.perf_counter()
    if batched:
        got = 0
        while got < n:
            got += len(q.get_batch(1000))
    else:
        get = q.get
        for _ in range(n):
            assert get() is not None
    return n / (time.perf_counter() - start)


CELLS = {
    # name: (function, batched, label)
    "memq-pool": (cell_memq_pool, False),
    "memq-compat-pool": (cell_memq_compat, False),
    "rst-pool": (cell_rst_pool, False),
    "queue-pool": (cell_queue_pool, False),
    "asyncio-pool": (cell_asyncio_pool, False),
    "memq-pool-batched": (cell_memq_pool, True),
    "memq-compat-pool-batched": (cell_memq_compat, True),
    "rst-pool-batched": (cell_rst_pool, True),
    "memq-publish": (cell_memq_publish, False),
    "rst-publish": (cell_rst_publish, False),
    "memq-publish-batched": (cell_memq_publish, True),
    "rst-publish-batched": (cell_rst_publish, True),
    "memq-receive": (cell_memq_receive, False),
    "rst-receive": (cell_rst_receive, False),
    "memq-receive-batched": (cell_memq_receive, True),
    "rst-receive-batched": (cell_rst_receive, True),
}

# rst_queue is slow: its cells get fewer jobs (rates, not totals, are compared).
RST_SHARE = 10


def run_cell(name, jobs, workers, timeout):
    if name.startswith("rst"):
        jobs = max(1000, jobs // RST_SHARE)
    cmd = [sys.executable, os.path.abspath(__file__), "--cell", name, "--jobs", str(jobs), "--workers", str(workers)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    if out.returncode != 0:
        err = (out.stderr.strip().splitlines() or ["?"])[-1]
        return None, err
    return json.loads(out.stdout.strip().splitlines()[-1])["rate"], None


def fmt(rate):
    if rate is None:
        return "n/a"
    if rate >= 1e6:
        return f"{rate / 1e6:.2f}M"
    return f"{rate / 1e3:.1f}K"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--quick", action="store_true", help="100,000 jobs, 1 round")
    ap.add_argument("--cell", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cell:
        fn, batched = CELLS[args.cell]
        rate = fn(args.jobs, args.workers, batched)
        print(json.dumps({"rate": rate}))
        sys.stdout.flush()
        os._exit(0)  # rst_queue's threads never end
    if args.quick:
        args.jobs, args.rounds = 100_000, 1
    args.jobs -= args.jobs % 1000
    import memq

    print(
        f"pool_bench: {args.jobs} jobs per cell (rst_queue: 1/{RST_SHARE} of that), {args.rounds} rounds, "
        f"{args.workers} workers, {len(PAYLOAD)}-byte payloads, memq {memq.__version__}, "
        f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs"
    )
    rates = {name: [] for name in CELLS}
    notes = {}
    for r in range(args.rounds):
        for name in CELLS:
            rate, err = run_cell(name, args.jobs, args.workers, timeout=600)
            if rate is None:
                notes[name] = err
            else:
                rates[name].append(rate)
        print(f"  round {r + 1}/{args.rounds} done", file=sys.stderr)
    med = {k: (statistics.median(v) if v else None) for k, v in rates.items()}

    print()
    print("| cell | median | range |")
    print("|---|---:|---:|")
    for name in CELLS:
        v = rates[name]
        rng = f"{fmt(min(v))}–{fmt(max(v))}" if v else notes.get(name, "n/a")
        print(f"| {name} | {fmt(med[name])} | {rng} |")

    def ratio(a, b):
        if med.get(a) is None or med.get(b) is None:
            return None
        return med[a] / med[b]

    checks = [
        ("trivial pool >= 1M jobs/s (memq Pool, one-by-one publish)", med["memq-pool"], 1e6, None),
        ("trivial pool >= 1M jobs/s (memq Pool, batched publish)", med["memq-pool-batched"], 1e6, None),
        ("pool ahead of asyncio.Queue (one-by-one)", ratio("memq-pool", "asyncio-pool"), 1.0, "x"),
        ("publish one by one >= 2M msgs/s", med["memq-publish"], 2e6, None),
    ]
    for mine, theirs in [
        ("memq-pool", "rst-pool"),
        ("memq-compat-pool", "rst-pool"),
        ("memq-pool-batched", "rst-pool-batched"),
        ("memq-compat-pool-batched", "rst-pool-batched"),
        ("memq-publish", "rst-publish"),
        ("memq-publish-batched", "rst-publish-batched"),
        ("memq-receive", "rst-receive"),
        ("memq-receive-batched", "rst-receive-batched"),
    ]:
        checks.append((f"{mine} >= 10x {theirs}", ratio(mine, theirs), 10.0, "x"))
    print()
    for what, value, floor, unit in checks:
        if value is None:
            print(f"n/a   {what}: not measured")
            continue
        shown = f"{value:.2f}x" if unit == "x" else fmt(value) + "/s"
        print(f"{'PASS' if value >= floor else 'FAIL'}  {what}: {shown}")


if __name__ == "__main__":
    main()
