#!/usr/bin/env python3
"""Per-call costs of memq's Python package (ns, the best of several runs of 200,000
calls): where publishing and receiving one message spend their time.

    python3 bench/python/call_costs.py
"""

import time

import memq

P = b"x" * 16
N = 200_000


def best(fn, runs=7):
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) / N * 1e9)
    return min(out)


def main():
    t = memq.Topic(1 << 16)

    def publish():
        p = t.publish
        for _ in range(N):
            p(P)

    rows = [("empty attribute read (getter t.closed)", best(lambda: [t.closed for _ in range(N)]))]
    rows.append(("publish, asyncio not imported", best(publish)))
    import asyncio.events as ev

    g = ev._get_running_loop
    rows.append(("asyncio.events._get_running_loop() from Python", best(lambda: [g() for _ in range(N)])))
    rows.append(("publish, asyncio imported", best(publish)))
    rows.append(
        ("publish_batch(1000), per message", best(lambda: [t.publish_batch([P] * 1000) for _ in range(N // 1000)]))
    )

    # Receiving: refill 1000 at a time, and take the refill's own cost off.
    r = memq.Topic(1 << 16)
    s = r.subscribe()
    spare = memq.Topic(1 << 16)

    def refill_only():
        for i in range(N):
            if i % 1000 == 0:
                spare.publish_batch([P] * 1000)

    def recv():
        get = s.recv
        for i in range(N):
            if i % 1000 == 0:
                r.publish_batch([P] * 1000)
            get()

    def try_recv():
        get = s.try_recv
        for i in range(N):
            if i % 1000 == 0:
                r.publish_batch([P] * 1000)
            get()

    def recv_many():
        for _ in range(N // 1000):
            r.publish_batch([P] * 1000)
            s.recv_many(1000)

    base = best(refill_only)
    rows.append(("recv one by one (ready), minus the refill", best(recv) - base))
    rows.append(("try_recv one by one (ready), minus the refill", best(try_recv) - base))
    rows.append(("recv_many(1000) per message, minus the refill", best(recv_many) - base))
    for what, ns in rows:
        print(f"{ns:8.1f} ns  {what}")


if __name__ == "__main__":
    main()
