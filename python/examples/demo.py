"""memq from Python threads: pub/sub, a keyed consumer group, explicit acks with
redelivery and dead letters, a worker pool, asyncio, and the error paths. Every message
is checked; exits 0 only if every check passed.

Usage: python python/examples/demo.py [MESSAGES]   (default 20000)
"""

import asyncio
import sys
import threading

import memq


def check(ok, what):
    if not ok:
        print(f"demo.py: check failed: {what}", file=sys.stderr)
        sys.exit(1)


def pubsub(n):
    # Two subscribers each see every message, in order, while a thread publishes.
    t = memq.Topic(256)
    subs = [t.subscribe(), t.subscribe()]
    got = [[], []]

    def read(i):
        for m in subs[i]:
            got[i].append(m.data)

    readers = [threading.Thread(target=read, args=(i,)) for i in range(2)]
    for r in readers:
        r.start()
    for i in range(n):
        t.publish(b"%d" % i)
    t.close()
    for r in readers:
        r.join()
    want = [b"%d" % i for i in range(n)]
    check(got[0] == want and got[1] == want, "pub/sub: every subscriber sees every message in order")
    print(f"pub/sub: 2 subscribers x {n} messages, in order")


def keyed_group(n):
    # Four partitions, keys route; three members share them, each message to one member,
    # and per key the order holds.
    t = memq.Topic(256, partitions=4)
    members = [t.group("billing") for _ in range(3)]
    seen = [[] for _ in members]

    def consume(i):
        for m in members[i]:
            seen[i].append((m.partition, m.data))

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(3)]
    for th in threads:
        th.start()
    for i in range(n):
        t.publish(b"customer-%d:%d" % (i % 10, i), key=b"customer-%d" % (i % 10))
    t.close()
    for th in threads:
        th.join()
    allseen = [d for s in seen for _, d in s]
    check(sorted(allseen) == sorted(b"customer-%d:%d" % (i % 10, i) for i in range(n)), "group: each message once")
    for s in seen:
        per_key = {}
        for p, d in s:
            key, seq = d.split(b":")
            check(p == memq.key_partition(key, 4), "group: a key's messages go to its partition")
            check(per_key.get(key, -1) < int(seq), "group: per-key order")
            per_key[key] = int(seq)
    print(f"keyed group: {n} messages over 3 members, per-key order kept")


def acks(n):
    # Every 5th message is nacked once (and comes back), every 97th rejected (dead letter).
    t = memq.Topic(128)
    dlq = memq.DeadLetterTopic(1024)
    dead = dlq.subscribe()
    c = t.ack_group("jobs", ack_wait=60, dead_letters=dlq)
    done = set()

    def consume():
        for d in c:
            seq = int(d.data)
            if seq % 97 == 0:
                d.reject()
            elif seq % 5 == 0 and d.deliveries == 1:
                d.nack()
            else:
                d.ack()
                done.add(seq)

    th = threading.Thread(target=consume)
    th.start()
    for i in range(n):
        t.publish(b"%d" % i)
    t.close()
    th.join()
    rejected = {i for i in range(n) if i % 97 == 0}
    check(done == set(range(n)) - rejected, "acks: every message acked once, nacked ones again")
    letters = dead.recv_many(len(rejected) + 1, timeout=10)
    check({int(x.data) for x in letters} == rejected and all(x.reason == "rejected" for x in letters), "acks: dead letters")
    print(f"acks: {n} messages, {n // 5} nacked and redelivered, {len(rejected)} dead-lettered")


def pool(n):
    t = memq.Topic(1024)

    def handler(m):
        seq = int(m.data)
        if seq % 1000 == 999:
            raise ValueError(f"unlucky {seq}")
        return b"%d" % (seq * 2)

    with memq.Pool(t, handler, workers=4, results=n) as p:
        for i in range(0, n, 100):
            t.publish_batch([b"%d" % j for j in range(i, min(n, i + 100))])
    st = p.stats()
    errors = n // 1000
    check((st.processed, st.errors) == (n, errors), f"pool: counts {st}")
    results = p.results.recv_many(n + 1, timeout=10)
    check(sorted(int(r.value) for r in results if r.ok) == sorted(2 * i for i in range(n) if i % 1000 != 999), "pool: results")
    check(all("ValueError: unlucky" in e.traceback for e in p.errors()), "pool: tracebacks")
    print(f"pool: {n} jobs on 4 workers, {errors} handler errors captured with tracebacks")


def aio(n):
    async def main():
        t = memq.Topic(64)
        s = t.subscribe()

        async def produce():
            for i in range(n):
                await t.publish(b"%d" % i)
            t.close()

        task = asyncio.create_task(produce())
        got = [int(m.data) async for m in s]
        await task
        check(got == list(range(n)), "asyncio: every message in order")

    asyncio.run(main())
    print(f"asyncio: {n} messages through one loop")


def errors():
    # A topic closes when its last handle goes: keep one for the receive below.
    kept = memq.Topic(4)
    for call, exc in [
        (lambda: memq.Topic(0), memq.InvalidArgument),
        (lambda: memq.Topic(4).publish("text"), memq.InvalidType),
        (lambda: memq.Topic(4).subscribe().recv(timeout=-1), memq.InvalidArgument),
        (lambda: kept.subscribe().recv(timeout=0), memq.Timeout),
        (lambda: memq.Topic(4).subscribe().recv(timeout=0), memq.Closed),
        (lambda: memq.Topic(4, partitions=2).publish(b"x", partition=2), memq.OutOfRange),
        (lambda: memq.Broker().get("nope"), memq.UnknownTopic),
    ]:
        try:
            call()
            check(False, f"no {exc.__name__}")
        except exc as e:
            check(isinstance(e, memq.Error), f"{exc.__name__} is a memq.Error")
    print("errors: each a precise memq.Error")


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    pubsub(n)
    keyed_group(n)
    acks(n)
    pool(n)
    aio(n)
    errors()
    print("demo.py: all checks passed")


if __name__ == "__main__":
    main()
