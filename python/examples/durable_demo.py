"""A durable work queue across a restart.

Orders go to a durable topic in a fresh directory (64 messages per partition in
memory). Worker threads of the explicit-ack group "billing" take them and ack each
order except every 7th, which they leave unacked, as a worker that dies would. Then
everything is closed, the topic is opened again from the same directory, and the
program checks that offsets go on where they ended, that "billing" delivers again
exactly the orders not acked, that a subscriber replays every order (key and payload
intact, far more than memory holds), and that a second open of the directory raises
memq.Locked. Exits 0 only if every check passed.

Usage: python python/examples/durable_demo.py [MESSAGES]   (default 3000)
"""

import sys
import tempfile
import threading

import memq


def check(ok, what):
    if not ok:
        print(f"durable_demo.py: check failed: {what}", file=sys.stderr)
        sys.exit(1)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    path = tempfile.mkdtemp(prefix="memq-durable-demo-")
    with memq.DurableTopic(path, 64, partitions=2) as t:
        for i in range(n):
            t.publish(b"order %06d" % i, key=b"customer-%d" % (i % 13))
        members = [t.group("billing", ack_wait=600) for _ in range(2)]
        left = []
        lock = threading.Lock()

        def work(c):
            while True:
                try:
                    d = c.recv(timeout=1)
                except memq.Timeout:
                    return
                seq = int(d.data.split()[1])
                if seq % 7 == 0:
                    with lock:
                        left.append(seq)
                    continue  # never settled: comes back after the restart
                d.ack()

        threads = [threading.Thread(target=work, args=(c,)) for c in members]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        ends = [t.next_offset(p) for p in range(2)]
        for c in members:
            c.close()
    check(sorted(left) == [i for i in range(n) if i % 7 == 0], "every 7th order left unacked")

    with memq.DurableTopic(path, 64, partitions=2) as t:
        try:
            memq.DurableTopic(path, 64, partitions=2)
            check(False, "a second open is Locked")
        except memq.Locked:
            pass
        check([t.next_offset(p) for p in range(2)] == ends, "offsets go on where they ended")
        c = t.group("billing", ack_wait=600)
        again = []
        while True:
            try:
                d = c.recv(timeout=1)
            except memq.Timeout:
                break
            again.append(int(d.data.split()[1]))
            d.ack()
        check(sorted(again) == sorted(left), "exactly the unacked orders come back")
        c.close()
        s = t.subscribe()
        replay = s.recv_many(n + 1, timeout=5)
        while len(replay) < n:
            more = s.recv_many(n, timeout=5)
            if not more:
                break
            replay += more
        check(
            sorted(int(m.data.split()[1]) for m in replay) == list(range(n)), "the subscriber replays every order"
        )
        check(all(m.key == b"customer-%d" % (int(m.data.split()[1]) % 13) for m in replay), "keys are kept")
        s.close()
    print(f"durable_demo.py: {n} orders, {len(left)} redelivered after the restart, replay intact")


if __name__ == "__main__":
    main()
