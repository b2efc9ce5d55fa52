"""memq from Python, through libmemq's C ABI (examples/python/memq.py).

    1. pub/sub: a publisher thread and a subscriber thread on a small Block topic, so the
       publisher keeps waiting for room; every message is checked (offset, contents), and
       the subscriber stops when the topic closes.
    2. a consumer group: keyed messages on a 4-partition topic, 3 member threads. Each
       message arrives exactly once, on its key's partition, in order within it.
    3. explicit acks: every 5th message is nacked on its first delivery and comes again;
       each is acked exactly once, and the group's counters say so.
    4. a worker pool: 4 threads run a handler over jobs and publish its results; a job
       that fails once is retried, one that always fails is dead-lettered after 3 tries,
       and idle workers use no CPU.
    5. errors: bad arguments, a full topic and a closed one raise, and nothing crashes.

Usage: python3 examples/python/demo.py [MESSAGES]   (default 20000)
Needs libmemq.so: `cargo build --release -p memq-ffi`, or MEMQ_LIB=path/to/libmemq.so.
Exits 0 only if every check passed.
"""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import memq  # noqa: E402

PARTITIONS = 4
MEMBERS = 3
KEYS = 16


def fail(what):
    print(f"demo.py: check failed: {what}", file=sys.stderr)
    sys.exit(1)


def payload(seq):
    return seq.to_bytes(8, "little") + bytes((seq * 31 + i) % 256 for i in range(24))


def run_threads(targets):
    """Runs each callable in a thread; re-raises the first failure in the main thread."""
    errors = []

    def wrap(fn):
        def body():
            try:
                fn()
            except BaseException as e:  # reported below, in the main thread
                errors.append(e)

        return body

    threads = [threading.Thread(target=wrap(t)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        if t.is_alive():
            fail("a thread did not finish within 120 s")
    if errors:
        raise errors[0]


def pubsub(count):
    topic = memq.Topic(capacity=64)
    sub = topic.subscribe()
    received = []

    def publish():
        for seq in range(count):
            partition, offset = topic.publish(payload(seq))
            if (partition, offset) != (0, seq):
                fail(f"message {seq} landed at {partition}/{offset}")
        topic.close()

    def receive():
        for msg in sub:
            seq = len(received)
            if msg.offset != seq or msg.data != payload(seq):
                fail(f"message {seq} wrong: offset {msg.offset}, {len(msg.data)} bytes")
            received.append(seq)

    start = time.perf_counter()
    run_threads([receive, publish])
    secs = time.perf_counter() - start
    if len(received) != count:
        fail(f"subscriber got {len(received)} of {count}")
    stats = topic.stats()
    if stats["published"] != count or not stats["closed"]:
        fail(f"stats after pub/sub: {stats}")
    kept = stats["depth"] + stats["evicted"] + stats["expired"] + stats["released"]
    if kept != stats["published"]:
        fail(f"published != depth + evicted + expired + released: {stats}")
    print(f"pub/sub: {count} messages through a 64-slot topic, {count / secs:,.0f} msgs/s")


def group(count):
    topic = memq.Topic(capacity=256, partitions=PARTITIONS)
    members = [topic.consumer("workers") for _ in range(MEMBERS)]
    # Per member, in arrival order: (seq, partition, offset).
    seen = [[] for _ in range(MEMBERS)]

    def publish():
        for seq in range(count):
            key = b"key-%d" % (seq % KEYS)
            topic.publish(payload(seq), key=key)
        topic.close()

    def member(i):
        def body():
            for msg in members[i]:
                seq = int.from_bytes(msg.data[:8], "little")
                if msg.data != payload(seq):
                    fail(f"member {i}: message {seq} corrupted")
                seen[i].append((seq, msg.partition, msg.offset))

        return body

    run_threads([member(i) for i in range(MEMBERS)] + [publish])
    all_seen = {}
    for i, arrivals in enumerate(seen):
        last = {}  # partition -> (offset, seq) of this member's previous message from it
        for seq, partition, offset in arrivals:
            if seq in all_seen:
                fail(f"message {seq} delivered twice")
            all_seen[seq] = (partition, offset)
            # A member gets a partition's messages in order; publishing order is offset
            # order, since every key's messages were published by one thread.
            prev = last.get(partition)
            if prev is not None and (offset <= prev[0] or seq <= prev[1]):
                fail(f"member {i}: partition {partition} out of order at message {seq}")
            last[partition] = (offset, seq)
    if len(all_seen) != count:
        fail(f"group got {len(all_seen)} of {count}")
    last = {}
    for seq in range(count):
        partition, offset = all_seen[seq]
        want = memq.key_partition(b"key-%d" % (seq % KEYS), PARTITIONS)
        if partition != want:
            fail(f"message {seq} on partition {partition}, its key routes to {want}")
        if offset <= last.get(partition, -1):
            fail(f"partition {partition} out of order at message {seq}")
        last[partition] = offset
    shares = ", ".join(str(len(s)) for s in seen)
    print(f"group: {count} keyed messages over {PARTITIONS} partitions, members took {shares}")


def acks(count):
    topic = memq.Topic(capacity=128)
    consumer = topic.ack_consumer("jobs", ack_wait=30)
    acked = set()
    redelivered = 0

    def publish():
        for seq in range(count):
            topic.publish(payload(seq))
        topic.close()

    def work():
        nonlocal redelivered
        for d in consumer:
            seq = int.from_bytes(d.data[:8], "little")
            if d.data != payload(seq) or d.offset != seq:
                fail(f"delivery of {seq} wrong (offset {d.offset})")
            if seq % 5 == 0 and d.deliveries == 1:
                d.nack()
                continue
            if d.deliveries != (2 if seq % 5 == 0 else 1):
                fail(f"message {seq} delivered {d.deliveries} times")
            redelivered += d.deliveries - 1
            if seq in acked:
                fail(f"message {seq} acked twice")
            d.ack()
            acked.add(seq)

    run_threads([work, publish])
    if len(acked) != count:
        fail(f"acked {len(acked)} of {count}")
    stats = topic.ack_group_stats("jobs")
    want_redelivered = (count + 4) // 5
    if (
        stats["acked"] != count
        or stats["redelivered"] != want_redelivered
        or stats["in_flight"] != 0
        or redelivered != want_redelivered
    ):
        fail(f"ack group stats: {stats}")
    print(f"acks: {count} acked, {want_redelivered} nacked once and redelivered")


def pool(count):
    jobs = memq.Topic(capacity=256)
    results = memq.Topic(capacity=count + 16)
    collector = results.subscribe()
    attempts = {}
    lock = threading.Lock()
    poison = 3

    def handler(data):
        seq = int.from_bytes(data[:8], "little")
        with lock:
            attempts[seq] = attempts.get(seq, 0) + 1
            first = attempts[seq] == 1
        if seq == poison:
            raise ValueError("poison message")
        if seq % 7 == 0 and first:
            raise RuntimeError("flaky, works the second time")
        return (seq * 2).to_bytes(8, "little")

    workers = memq.Pool(jobs, "resize", handler, workers=4, results=results, max_deliveries=3)
    # Idle workers wait inside memq with the GIL released: no CPU while nothing comes.
    cpu = time.process_time()
    time.sleep(0.5)
    idle_cpu = time.process_time() - cpu
    if idle_cpu > 0.1:
        fail(f"an idle pool of 4 workers used {idle_cpu:.3f} s of CPU in 0.5 s")
    start = time.perf_counter()
    for first in range(0, count, 100):
        jobs.publish_batch([payload(seq) for seq in range(first, min(first + 100, count))])
    jobs.close()
    if not workers.join(timeout=120):
        fail("the pool did not finish within 120 s")
    secs = time.perf_counter() - start
    got = {}
    for batch in iter(lambda: collector.recv_many(256, timeout=0), []):
        for msg in batch:
            seq = int.from_bytes(msg.data, "little") // 2
            if seq in got:
                fail(f"result of {seq} published twice")
            got[seq] = msg
    flaky = len([seq for seq in range(count) if seq % 7 == 0 and seq != poison])
    want = {seq for seq in range(count) if seq != poison}
    if set(got) != want:
        fail(f"results for {len(got)} of {len(want)} jobs")
    stats = workers.stats()
    want_stats = {"processed": count - 1, "failed": flaky + 3, "results": count - 1}
    if stats != dict(want_stats, expired=0, lagged=0):
        fail(f"pool stats {stats}")
    group = jobs.ack_group_stats("resize")
    if group["dead_lettered"] != 1 or group["acked"] != count - 1 or group["in_flight"] != 0:
        fail(f"group stats {group}")
    if attempts[poison] != 3 or any(attempts[s] != 2 for s in range(0, count, 7) if s != poison):
        fail("a job ran a wrong number of times")
    print(
        f"pool: 4 workers, {count - 1} jobs done ({count / secs:,.0f} jobs/s), {flaky} retried "
        f"once, 1 dead-lettered after 3 tries; idle CPU {idle_cpu * 1000:.1f} ms in 0.5 s"
    )


def errors():
    def expect(exc, fn, what):
        try:
            fn()
        except exc as e:
            return e
        fail(f"{what}: no {exc.__name__}")

    # The same situation has the same name as in C and Rust, and says what memq says.
    e = expect(memq.InvalidArgument, lambda: memq.Topic(capacity=0), "capacity 0")
    if e.status != memq.INVALID_ARGUMENT or "capacity must be at least 1" not in str(e):
        fail(f"capacity 0 gave status {e.status}: {e}")
    expect(ValueError, lambda: memq.Topic(overflow="sometimes"), "unknown overflow")
    e = expect(memq.Full, lambda: memq.Topic(capacity=2).publish_batch([b"x"] * 3), "big batch")
    if "can never fit" not in e.detail:
        fail(f"an over-capacity batch said: {e}")
    topic = memq.Topic(capacity=2, overflow="reject")
    # "Full" means an attached reader still needs the oldest message; with no reader
    # attached, the oldest would simply be evicted.
    holder = topic.subscribe()
    topic.publish(b"a")
    topic.publish(b"b")
    expect(memq.Full, lambda: topic.publish(b"c"), "publish to a full reject topic")
    if holder.recv(timeout=0).data != b"a":
        fail("the reject topic lost its oldest message")
    topic.publish(b"c")
    block = memq.Topic(capacity=1)
    sub = block.subscribe()
    block.publish(b"x")
    expect(memq.Full, lambda: block.publish(b"y", timeout=0), "publish that may not wait, no room")
    expect(memq.Timeout, lambda: block.publish(b"y", timeout=0.05), "timed publish, no room")
    if sub.recv(timeout=0).data != b"x" or sub.recv(timeout=0.01) is not None:
        fail("receive after a timed-out publish")
    block.close()
    expect(memq.Closed, lambda: block.publish(b"z"), "publish after close")
    expect(memq.Closed, lambda: sub.recv(), "receive after close, drained")
    drop = memq.Topic(capacity=2, overflow="drop_oldest")
    lagging = drop.subscribe()
    for i in range(5):
        drop.publish(bytes([i]))
    e = expect(memq.Lagged, lambda: lagging.recv(timeout=0), "a reader that fell behind")
    if e.missed != 3 or lagging.recv(timeout=0).data != bytes([3]):
        fail(f"lagged by {e.missed}, not 3, or not resumed at the oldest")
    print("errors: capacity 0, full, timed out, closed and lagged all reported")


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    if count < 5:
        fail("MESSAGES must be at least 5")
    print(f"libmemq {memq.version()}")
    pubsub(count)
    group(count)
    acks(max(count // 10, 5))
    pool(max(count // 4, 10))
    errors()
    print("all checks passed")


if __name__ == "__main__":
    main()
