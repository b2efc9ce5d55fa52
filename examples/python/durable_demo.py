"""A durable work queue from Python, through libmemq's C ABI (examples/python/memq.py).

Orders are published to a durable topic in a fresh directory (64 messages per partition
in memory). Two worker threads of the explicit-ack group "billing" take them: they ack
each order, except every 7th, which they leave unacked, as a worker that dies would.
Then the program "restarts" (everything is closed, the topic is opened again from the
same directory) and checks that
  - offsets go on where they ended;
  - "billing" delivers again exactly the orders that were not acked, and none that were;
  - a subscriber from "earliest" replays every order, key and payload intact, far more
    than memory holds;
  - a second DurableTopic on the open directory raises memq.Locked.

Usage: python3 examples/python/durable_demo.py [MESSAGES]   (default 3000)
Needs libmemq.so: `cargo build --release -p memq-ffi`, or MEMQ_LIB=path/to/libmemq.so.
Exits 0 only if every check passed.
"""

import os
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import memq  # noqa: E402

CAPACITY = 64
PARTITIONS = 2


def fail(what):
    print(f"durable_demo.py: check failed: {what}", file=sys.stderr)
    sys.exit(1)


def order(seq):
    return b"order %06d" % seq


def customer(seq):
    return b"customer-%02d" % (seq % 16)


def seq_of(data):
    if not data.startswith(b"order "):
        fail(f"payload {data!r}")
    return int(data[6:])


def open_topic(path, sync):
    kwargs = {"sync_interval": 0.02} if sync == "interval" else {}
    return memq.DurableTopic(
        path, capacity=CAPACITY, partitions=PARTITIONS, sync=sync, segment_bytes=16384, **kwargs
    )


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "orders")

        # ---- before the restart --------------------------------------------------------
        acked = set()
        with open_topic(path, "interval") as topic:
            for seq in range(count):
                r = topic.publish(order(seq), key=customer(seq))
                if r.partition != memq.key_partition(customer(seq), PARTITIONS) or r.durable:
                    fail(f"receipt {r}")
            try:
                memq.DurableTopic(path, capacity=CAPACITY, partitions=PARTITIONS)
                fail("a second open of an open directory succeeded")
            except memq.Locked:
                pass

            lock = threading.Lock()

            def worker():
                with topic.group("billing", ack_wait=60) as billing:
                    while (d := billing.recv(timeout=0.5)) is not None:
                        seq = seq_of(d.data)
                        if seq % 7 != 0:
                            d.ack()
                            with lock:
                                acked.add(seq)
                        # else: dropped unacked, as by a worker that died

            threads = [threading.Thread(target=worker) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        unacked = {seq for seq in range(count) if seq % 7 == 0}
        if acked != set(range(count)) - unacked:
            fail(f"{len(acked)} acked before the restart")
        print(f"published {count} orders, acked {len(acked)}, left {len(unacked)} unacked; restarting")

        # ---- after the restart ----------------------------------------------------------
        with open_topic(path, "always") as topic:
            if sum(topic.next_offset(p) for p in range(PARTITIONS)) != count:
                fail("offsets do not go on where they ended")
            if not topic.publish(order(count), key=customer(count)).durable:
                fail("a receipt under sync='always' is not durable")
            again = []
            with topic.group("billing", ack_wait=60) as billing:
                for d in iter(lambda: billing.recv(timeout=0.5), None):
                    seq = seq_of(d.data)
                    if seq in acked:
                        fail(f"order {seq} came back after it was acked")
                    again.append(seq)
                    d.ack()
            if sorted(again) != sorted(unacked | {count}):
                fail(f"delivered again: {len(again)}, expected {len(unacked) + 1}")

            with topic.subscribe() as sub:
                replayed = {}
                while (m := sub.recv(timeout=0)) is not None:
                    seq = seq_of(m.data)
                    if m.key != customer(seq) or seq in replayed:
                        fail(f"replay of order {seq}: key {m.key!r}")
                    replayed[seq] = m
            if sorted(replayed) != list(range(count + 1)):
                fail(f"replayed {len(replayed)} of {count + 1}")
        print(
            f"after the restart: {len(unacked)} unacked orders delivered again (none acked), "
            f"replayed {len(replayed)} with {CAPACITY * PARTITIONS} in memory"
        )
    print("durable_demo.py: all checks passed")


if __name__ == "__main__":
    main()
