"""Tests of the Python binding's edges: argument checking, leases, and the worker Pool.

Run with ``python3 examples/python/test_memq.py`` (libmemq found as ``memq.py`` says).
The demo (``demo.py``) shows the main paths at volume; these tests pin down what a user
gets when something goes wrong: a clear exception, never a wrapped integer, a dead
worker or a lost message.
"""

import collections
import ctypes
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import memq  # noqa: E402


def drain(reader):
    """Every message a subscriber can take now."""
    out = []
    while True:
        batch = reader.recv_many(256, timeout=0)
        if not batch:
            return out
        out.extend(batch)


class Arguments(unittest.TestCase):
    def test_payloads_are_bytes_like(self):
        topic = memq.Topic(capacity=8)
        sub = topic.subscribe()
        topic.publish(bytearray(b"ab"))
        topic.publish(memoryview(b"xcdx")[1:3])
        topic.publish_batch([b"e", bytearray(b"f")])
        self.assertEqual([m.data for m in drain(sub)], [b"ab", b"cd", b"e", b"f"])
        for bad in (3, "text", None, 1.5):
            with self.assertRaises(TypeError, msg=repr(bad)):
                topic.publish(bad)
            with self.assertRaises(TypeError, msg=repr(bad)):
                topic.publish(b"x", key=bad if bad is not None else 7)
        with self.assertRaises(TypeError):
            topic.publish_batch([b"ok", 3])
        self.assertEqual(topic.stats()["published"], 4, "a refused call publishes nothing")

    def test_integers_out_of_range_are_refused_not_wrapped(self):
        for kwargs in (
            {"partitions": 2**32 + 1},
            {"partitions": -1},
            {"capacity": -1},
            {"capacity": 2**64},
        ):
            with self.assertRaises(ValueError, msg=repr(kwargs)):
                memq.Topic(**kwargs)
        with self.assertRaises(TypeError):
            memq.Topic(capacity=8.5)
        with self.assertRaises(ValueError):
            memq.key_partition(b"k", 2**32)
        topic = memq.Topic(capacity=8)
        with self.assertRaises(ValueError):
            topic.subscribe(start="offset", offset=-1)
        with self.assertRaises(ValueError):
            topic.ack_consumer("g", max_deliveries=2**32)
        with self.assertRaises(TypeError):
            topic.consumer(b"g")
        with self.assertRaises(ValueError):
            topic.subscribe().recv_many(0)

    def test_timeouts_are_checked_and_huge_ones_wait(self):
        topic = memq.Topic(capacity=1)
        sub = topic.subscribe()
        topic.publish(b"fills it")
        for bad in (-1, -0.001, float("nan")):
            with self.assertRaises(ValueError, msg=repr(bad)):
                topic.publish(b"x", timeout=bad)
            with self.assertRaises(ValueError, msg=repr(bad)):
                sub.recv(timeout=bad)
        with self.assertRaises(TypeError):
            sub.recv(timeout="1")
        # Past what a C int64 of milliseconds holds (ctypes would wrap it to a small or
        # negative number): the publish waits, as for timeout=None, until the topic closes.
        for huge in (2**64 / 1000, float("inf")):
            full = memq.Topic(capacity=1)
            holder = full.subscribe()  # a reader that does not read holds publishers
            full.publish(b"fills it")
            closer = threading.Timer(0.3, full.close)
            start = time.monotonic()
            closer.start()
            with self.assertRaises(memq.Closed, msg=repr(huge)):
                full.publish(b"y", timeout=huge)
            self.assertGreaterEqual(time.monotonic() - start, 0.25, repr(huge))
            closer.join()

    def test_zero_durations_are_errors_and_tiny_ones_round_up(self):
        with self.assertRaises(ValueError):
            memq.Topic(ttl=0)
        with self.assertRaises(ValueError):
            memq.Topic(capacity=8).ack_consumer("g", ack_wait=0)
        memq.Topic(ttl=0.0001)  # 1 ms
        from decimal import Decimal

        # 1 ms too, not a Decimal rounded toward 0 (which C reads as "no TTL").
        self.assertEqual(memq._duration_ms(Decimal("0.0005"), "ttl"), 1)
        topic = memq.Topic(capacity=8)
        topic.publish(b"x")
        member = topic.ack_consumer("g")
        d = member.recv(timeout=1)
        with self.assertRaises(ValueError):
            d.nack(delay=-1)
        d.nack(delay=2**70)  # the longest delay C takes, not a wrapped one
        self.assertEqual(member.recv(timeout=0.2), None, "not due for ages")

    def test_a_freed_reader_raises_instead_of_crashing(self):
        topic = memq.Topic(capacity=8)
        member = topic.consumer("g")
        member._free()
        with self.assertRaises(memq.MemqError):
            member.recv(timeout=0)
        member._free()  # twice is harmless


class Errors(unittest.TestCase):
    """One vocabulary: the exception of a situation is that of its C status, whether the
    binding or the library finds it, and says what memq says (in Rust's words)."""

    def test_capacity_must_be_at_least_one_whoever_checks(self):
        for bad in (-1, 0):
            with self.assertRaises(memq.InvalidArgument, msg=repr(bad)) as cm:
                memq.Topic(capacity=bad)
            self.assertIsInstance(cm.exception, ValueError)
            self.assertIsInstance(cm.exception, memq.MemqError)
            self.assertEqual(cm.exception.status, memq.INVALID_ARGUMENT)
            self.assertIn("capacity must be at least 1", str(cm.exception))
            self.assertNotIn("between 0", str(cm.exception))
        with self.assertRaises(memq.InvalidArgument) as cm:
            memq.Topic(partitions=0)
        self.assertIn("partitions must be at least 1", str(cm.exception))

    def test_the_c_detail_is_in_the_message(self):
        topic = memq.Topic(capacity=4)
        # Past the binding's checks, the library's own words: max_in_flight is checked
        # here, so reach C's check through an unknown start value.
        with self.assertRaises(memq.InvalidArgument) as cm:
            memq._check(memq._lib.memq_subscriber_new(topic._h, 7, 0, ctypes.byref(ctypes.c_void_p())), "subscribe")
        self.assertEqual(str(cm.exception), "subscribe: start: 7 is not a memq_start value")
        self.assertEqual(cm.exception.detail, "start: 7 is not a memq_start value")

    def test_an_over_capacity_batch_is_full(self):
        topic = memq.Topic(capacity=2)
        with self.assertRaises(memq.Full) as cm:
            topic.publish_batch([b"a", b"b", b"c"])
        self.assertIn("batch of 3 messages can never fit in a partition of capacity 2", str(cm.exception))
        self.assertEqual(topic.stats()["published"], 0)
        # An empty batch is no error, as in Rust and C: nothing is published.
        topic.publish(b"x")
        self.assertEqual(topic.publish_batch([]), (0, 1))
        self.assertEqual(topic.stats()["published"], 1)

    def test_zero_limits_are_memqs_invalid_arguments(self):
        topic = memq.Topic(capacity=4)
        for kwargs in ({"max_in_flight": 0}, {"max_deliveries": 0}, {"ack_wait": 0}):
            with self.assertRaises(memq.InvalidArgument, msg=repr(kwargs)):
                topic.ack_consumer("g", **kwargs)
        with self.assertRaises(memq.InvalidArgument):
            memq.Topic(ttl=0)
        with self.assertRaises(memq.InvalidArgument):
            memq.key_partition(b"k", 0)

    def test_batches_of_every_reader_come_in_order(self):
        topic = memq.Topic(capacity=16)
        sub = topic.subscribe()
        member = topic.consumer("g")
        acker = topic.ack_consumer("a")
        for i in range(5):
            topic.publish(bytes([i]))
        self.assertEqual([m.data for m in sub.recv_many(8, timeout=1)], [bytes([i]) for i in range(5)])
        self.assertEqual([m.data for m in member.recv_many(3, timeout=1)], [b"\0", b"\1", b"\2"])
        got = acker.recv_many(8, timeout=1)
        self.assertEqual([d.data for d in got], [bytes([i]) for i in range(5)])
        for d in got:
            d.ack()
        self.assertEqual(sub.recv_many(8, timeout=0), [])


class Stats(unittest.TestCase):
    def test_missed_messages_are_counted_as_lagged(self):
        topic = memq.Topic(capacity=2, overflow="drop_oldest")
        sub = topic.subscribe()
        acker = topic.ack_consumer("a")
        for i in range(5):
            topic.publish(bytes([i]))
        with self.assertRaises(memq.Lagged) as cm:
            sub.recv(timeout=0)
        self.assertEqual(cm.exception.missed, 3)
        self.assertIn("missed 3 messages", str(cm.exception))
        with self.assertRaises(memq.Lagged):
            acker.recv(timeout=0)
        self.assertEqual(topic.stats()["lagged"], 6)
        self.assertEqual(topic.ack_group_stats("a")["lagged"], 3)


class Leases(unittest.TestCase):
    def test_settling_after_the_lease_ran_out_raises_lease_expired(self):
        topic = memq.Topic(capacity=8)
        member = topic.ack_consumer("g", ack_wait=0.05)
        topic.publish(b"job")
        first = member.recv(timeout=1)
        time.sleep(0.3)
        # The lease ran out; the next receive takes the message back and delivers it again.
        again = member.recv(timeout=5)
        self.assertEqual((again.data, again.offset, again.deliveries), (b"job", 0, 2))
        with self.assertRaises(memq.LeaseExpired):
            first.ack()
        with self.assertRaises(memq.LeaseExpired):
            first.touch()
        again.ack()
        self.assertEqual(topic.ack_group_stats("g")["acked"], 1)

    def test_touch_keeps_the_lease(self):
        # The lease is real time: each check holds only if this thread was not held up
        # for a whole lease (2 s) since the mark before it, which is measured; a run
        # where it was shows nothing, and is made again.
        for _ in range(10):
            topic = memq.Topic(capacity=8)
            member = topic.ack_consumer("g", ack_wait=2.0)
            topic.publish(b"job")
            mark = time.monotonic()
            d = member.recv(timeout=1)
            seen, in_time = [], True
            for _ in range(2):  # 2.4 s in all, never 2 s without a touch
                time.sleep(1.2)
                # A receive takes an expired lease back: nothing may come while d is renewed.
                again = member.recv(timeout=0)
                before_touch = time.monotonic()
                try:
                    d.touch()
                    touched = True
                except memq.LeaseExpired:
                    touched = False
                in_time = in_time and time.monotonic() - mark < 2.0
                mark = before_touch
                seen.append((again, touched))
            try:
                d.ack()
                acked = True
            except memq.LeaseExpired:
                acked = False
            in_time = in_time and time.monotonic() - mark < 2.0
            if in_time:
                self.assertEqual(seen, [(None, True)] * 2)
                self.assertTrue(acked)
                stats = topic.ack_group_stats("g")
                self.assertEqual((stats["acked"], stats["redelivered"]), (1, 0))
                return
        self.fail("in 10 runs this thread never kept to the 2 s lease")


class PoolTests(unittest.TestCase):
    def test_a_slow_batch_renews_its_leases(self):
        # 16 jobs of 0.2 s per fetch: 3.2 s, longer than ack_wait (2 s). Without renewal
        # the tail of each batch would expire and run twice. With it, each job starts
        # with at least 7/8 of ack_wait (1.75 s) on every waiting lease: a margin of
        # 1.55 s over a 0.2 s job, far from what a busy machine adds between jobs.
        jobs, results = memq.Topic(capacity=64), memq.Topic(capacity=64)
        out = results.subscribe()
        calls = collections.Counter()
        lock = threading.Lock()

        def handler(data):
            with lock:
                calls[data] += 1
            time.sleep(0.2)
            return data

        pool = memq.Pool(jobs, "g", handler, workers=2, results=results, ack_wait=2.0, batch=16)
        for i in range(24):
            jobs.publish(b"%d" % i)
        jobs.close()
        self.assertTrue(pool.join(timeout=60))
        self.assertEqual(pool.errors(), [])
        self.assertEqual(pool.stats()["expired"], 0)
        self.assertEqual(pool.stats()["processed"], 24)
        self.assertEqual(sorted(calls.values()), [1] * 24, "no job ran twice")
        self.assertEqual(sorted(m.data for m in drain(out)), sorted(b"%d" % i for i in range(24)))

    def test_a_handler_may_take_most_of_ack_wait_at_any_place_in_its_batch(self):
        # Jobs of 0.45 and 0.7 of ack_wait, four to a batch, on real time: whatever the
        # jobs before it took, each job starts with 7/8 of ack_wait on every lease still
        # waiting, so none expires. The margin (0.175 of ack_wait, 1.4 s) is far from what
        # a busy machine takes to go from one job to the next; the exact schedule is
        # pinned down on a hand-driven clock in LeaseRenewalSchedule below.
        ack = 8.0
        jobs = memq.Topic(capacity=64)
        calls = collections.Counter()
        lock = threading.Lock()

        def handler(data):
            with lock:
                calls[data] += 1
            time.sleep((0.45 if data.startswith(b"short") else 0.7) * ack)

        pool = memq.Pool(jobs, "g", handler, workers=2, ack_wait=ack, batch=4)
        for i in range(2):
            jobs.publish_batch([b"short%d" % i, b"long%d" % i])
        jobs.close()
        self.assertTrue(pool.join(timeout=300))
        self.assertEqual(sorted(calls.values()), [1] * 4, "no job ran twice")
        self.assertEqual((pool.stats()["processed"], pool.stats()["expired"]), (4, 0))
        self.assertEqual(jobs.ack_group_stats("g")["redelivered"], 0)

    def test_numbers_of_every_kind_configure_a_pool(self):
        from decimal import Decimal
        from fractions import Fraction

        for ack_wait in (10**400, Fraction(30), Decimal("30.5"), float("inf")):
            jobs = memq.Topic(capacity=64)
            pool = memq.Pool(jobs, "g", lambda d: None, workers=2, ack_wait=ack_wait)
            for i in range(10):
                jobs.publish(b"%d" % i)
            jobs.close()
            self.assertTrue(pool.join(timeout=30), repr(ack_wait))
            self.assertEqual((pool.stats()["processed"], pool.errors()), (10, []), repr(ack_wait))
        for bad in ("30", True, None, -1):
            with self.assertRaises((TypeError, ValueError), msg=repr(bad)):
                memq.Pool(memq.Topic(), "g", lambda d: None, ack_wait=bad)

    def test_recorded_errors_do_not_keep_their_batches(self):
        import gc

        jobs = memq.Topic(capacity=64)

        def handler(data):
            raise RuntimeError("fails")

        pool = memq.Pool(jobs, "g", handler, workers=1, max_deliveries=1)
        jobs.publish_batch([b"x" * 1000 for _ in range(20)])
        jobs.close()
        self.assertTrue(pool.join(timeout=30))
        self.assertEqual(len(pool.errors()), 20)
        gc.collect()
        alive = [o for o in gc.get_objects() if isinstance(o, memq.Delivery)]
        self.assertEqual(alive, [], "an error's traceback keeps deliveries alive")

    def test_anything_a_handler_raises_is_a_failure_not_a_dead_worker(self):
        topic = memq.Topic(capacity=64, partitions=2)

        def handler(data):
            if data == b"exit":
                raise SystemExit("a handler calls sys.exit")
            if data == b"interrupt":
                raise KeyboardInterrupt
            if data == b"str":
                return "not bytes"
            return None

        results = memq.Topic(capacity=64)
        pool = memq.Pool(topic, "g", handler, workers=2, results=results, max_deliveries=2)
        for payload in (b"exit", b"interrupt", b"str"):
            topic.publish(payload, key=payload)
        for i in range(20):
            topic.publish(b"ok", key=b"k%d" % i)
        topic.close()
        self.assertTrue(pool.join(timeout=30))
        stats = pool.stats()
        self.assertEqual((stats["processed"], stats["failed"]), (20, 6))
        kinds = sorted(type(e).__name__ for e in pool.errors())
        self.assertEqual(kinds, ["KeyboardInterrupt"] * 2 + ["SystemExit"] * 2 + ["TypeError"] * 2)
        group = topic.ack_group_stats("g")
        self.assertEqual((group["acked"], group["dead_lettered"], group["members"]), (20, 3, 0))

    def test_a_closed_results_topic_fails_the_jobs_it_cannot_take(self):
        jobs, results = memq.Topic(capacity=64), memq.Topic(capacity=64)
        results.close()
        pool = memq.Pool(jobs, "g", lambda d: d, workers=2, results=results, max_deliveries=3)
        for i in range(10):
            jobs.publish(b"%d" % i)
        jobs.close()
        self.assertTrue(pool.join(timeout=30))
        self.assertEqual(pool.stats()["failed"], 30)
        self.assertTrue(all(isinstance(e, memq.Closed) for e in pool.errors()))
        self.assertEqual(jobs.ack_group_stats("g")["dead_lettered"], 10)

    def test_eviction_on_a_drop_oldest_topic_is_counted_and_the_worker_goes_on(self):
        topic = memq.Topic(capacity=4, overflow="drop_oldest")
        inside, go = threading.Event(), threading.Event()

        def handler(data):
            if data == b"first":
                inside.set()
                go.wait()

        pool = memq.Pool(topic, "g", handler, workers=1, batch=1, ack_wait=30)
        topic.publish(b"first")
        self.assertTrue(inside.wait(10))
        for i in range(10):
            topic.publish(b"%d" % i)
        go.set()
        topic.close()
        self.assertTrue(pool.join(timeout=30))
        stats = pool.stats()
        self.assertGreater(stats["lagged"], 0)
        # Every message is either processed or counted as missed.
        self.assertEqual(stats["processed"] + stats["lagged"], 11)
        self.assertEqual(pool.errors(), [])

    def test_workers_do_not_keep_the_program_alive(self):
        script = (
            "import memq\n"
            "jobs = memq.Topic()\n"
            "pool = memq.Pool(jobs, 'g', lambda d: None, workers=2)\n"
            "assert all(t.daemon for t in pool._threads)\n"
            "jobs.publish(b'x')\n"
            "raise SystemExit(3)  # ends without closing jobs\n"
        )
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.abspath(__file__)))
        done = subprocess.run([sys.executable, "-c", script], env=env, timeout=60)
        self.assertEqual(done.returncode, 3)



class FakeTime:
    """A clock the test moves by hand."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class FakeDelivery:
    """A delivery whose lease runs out by a ``FakeTime``, as memq's run out by its clock."""

    def __init__(self, clock, ack_wait, data, log):
        self.clock, self.ack_wait, self.data, self.log = clock, ack_wait, data, log
        self.deadline = clock.now + ack_wait  # leased when fetched
        self.settled = None

    def _live(self, what):
        if self.clock.now > self.deadline:
            self.log.append(("expired", self.data, what))
            raise memq.LeaseExpired(memq.LEASE_EXPIRED, what)

    def touch(self):
        self._live("touch")
        self.deadline = self.clock.now + self.ack_wait

    def ack(self):
        self._live("ack")
        self.settled = "ack"

    def nack(self):
        self._live("nack")
        self.settled = "nack"


class LeaseRenewalSchedule(unittest.TestCase):
    """``Pool._run`` on a clock driven by hand: each handler "takes" exactly the time it
    is given, so the renewal rule is checked on many orders of job lengths, with no
    dependence on how fast the machine is."""

    ACK = 8.0

    def pool(self, clock, handler):
        topic = memq.Topic(capacity=8)
        pool = memq.Pool(topic, "g", handler, workers=1, ack_wait=self.ACK, _clock=clock)
        return topic, pool

    def finish(self, topic, pool):
        topic.close()
        self.assertTrue(pool.join(timeout=30))

    def run_batch(self, lengths, pause=0.0, jitter=0.0):
        """Runs one batch of jobs of ``lengths`` seconds: ``pause`` passes between the
        clock read before the fetch and the leases' start (a fetch that waited),
        ``jitter`` between the fetch and the first job (a descheduled worker)."""
        clock = FakeTime()
        log = []
        lengths = dict(enumerate(lengths))

        def handler(data):
            clock.now += lengths[data]

        topic, pool = self.pool(clock, handler)
        try:
            fetched_at = clock.now
            clock.now += pause
            batch = [FakeDelivery(clock, self.ACK, i, log) for i in lengths]
            clock.now += jitter
            expired = pool._run(list(batch), fetched_at)
        finally:
            self.finish(topic, pool)
        return expired, [d.settled for d in batch], log

    def test_every_job_shorter_than_seven_eighths_keeps_every_lease(self):
        import itertools
        import random

        rng = random.Random(7)
        limit = self.ACK * 7 / 8 * 0.999
        shapes = [
            [0.45 * self.ACK, 0.7 * self.ACK] * 4,  # the order that used to expire leases
            [0.1 * self.ACK] * 3 + [limit] * 5,
            [limit] * 8,
            [0.0] * 64,
        ]
        shapes += [list(p) for p in itertools.permutations([0.1, 2.4, 4.0, 6.4, limit])]
        shapes += [
            [rng.uniform(0, limit) for _ in range(rng.randint(1, 40))] for _ in range(200)
        ]
        for lengths in shapes:
            for pause, jitter in ((0.0, 0.0), (50.0, 0.0), (0.0, 0.05 * self.ACK)):
                expired, settled, log = self.run_batch(lengths, pause, jitter)
                self.assertEqual((expired, log), (0, []), (lengths, pause, jitter))
                self.assertEqual(settled, ["ack"] * len(lengths))

    def test_a_quick_batch_touches_nothing(self):
        clock = FakeTime()
        touched = []
        topic, pool = self.pool(clock, lambda data: None)
        try:
            batch = [FakeDelivery(clock, self.ACK, i, []) for i in range(64)]
            for d in batch:
                d.touch = lambda d=d: touched.append(d.data)
            self.assertEqual(pool._run(list(batch), clock.now), 0)
        finally:
            self.finish(topic, pool)
        self.assertEqual((touched, [d.settled for d in batch]), ([], ["ack"] * 64))

    def test_a_job_longer_than_ack_wait_expires_and_is_counted(self):
        # The promise has a limit: a job over ack_wait loses its own lease (its message
        # comes again), and one long enough, those behind it too.
        expired, settled, log = self.run_batch([self.ACK * 2.5, 1.0, 1.0])
        self.assertEqual((expired, settled), (3, [None, None, None]))
        self.assertEqual(log[0], ("expired", 0, "ack"))


class Durable(unittest.TestCase):
    """Durable topics: restarts, acks across restarts, replay beyond memory, and the
    errors a directory can give."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = os.path.join(self._tmp.name, "topic")

    def tearDown(self):
        self._tmp.cleanup()

    def open(self, **kwargs):
        kwargs.setdefault("capacity", 8)
        kwargs.setdefault("sync", "never")
        kwargs.setdefault("segment_bytes", 4096)
        return memq.DurableTopic(self.dir, **kwargs)

    def test_offsets_go_on_and_a_subscriber_replays_beyond_memory(self):
        with self.open(partitions=2) as topic:
            receipts = [topic.publish(b"m%03d" % i, key=b"k%d" % (i % 5)) for i in range(300)]
            self.assertFalse(any(r.durable for r in receipts))
            for i, r in enumerate(receipts):
                self.assertEqual(r.partition, memq.key_partition(b"k%d" % (i % 5), 2))
        with self.open(partitions=2) as topic:
            self.assertEqual(topic.next_offset(0) + topic.next_offset(1), 300)
            with topic.subscribe() as sub:
                got = [sub.recv(timeout=1) for _ in range(300)]
                self.assertIsNone(sub.recv(timeout=0))
            self.assertEqual(sorted(m.data for m in got), [b"m%03d" % i for i in range(300)])
            for m in got:
                i = int(m.data[1:])
                self.assertEqual(m.key, b"k%d" % (i % 5))
                self.assertEqual(m.partition, memq.key_partition(m.key, 2))
                self.assertGreater(m.timestamp_ms, 1_600_000_000_000)
            r = topic.publish(b"late", partition=1)
            self.assertEqual((r.partition, r.offset), (1, topic.next_offset(1) - 1))
            with self.assertRaises(memq.OutOfRange):
                topic.publish(b"x", partition=2)
        with self.assertRaises(memq.Closed):
            topic.publish(b"after close")

    def test_receipts_are_durable_under_sync_always(self):
        with self.open(sync="always") as topic:
            self.assertTrue(topic.publish(b"x").durable)

    def test_acked_messages_never_come_back_unacked_ones_do(self):
        with self.open() as topic:
            for i in range(20):
                topic.publish(b"job %d" % i)
            with topic.group("workers", ack_wait=60) as workers:
                kept = []
                for i in range(20):
                    d = workers.recv(timeout=1)
                    self.assertEqual((d.data, d.deliveries), (b"job %d" % i, 1))
                    if i % 4 == 0:
                        kept.append(d)  # unacked, and never will be
                    else:
                        d.ack()
                        with self.assertRaises(memq.LeaseExpired):
                            d.ack()
                workers.commit()
                self.assertEqual(workers.stats()["in_flight"], 5)
                self.assertEqual(workers.committed(0), (0, 0))
                del kept
        with self.open() as topic, topic.group("workers", ack_wait=60) as workers:
            again = []
            while (d := workers.recv(timeout=0.2)) is not None:
                again.append(d.data)
                d.ack()
            self.assertEqual(again, [b"job %d" % i for i in range(0, 20, 4)])
            workers.commit()
            self.assertEqual(workers.committed(0), (20, 20))

    def test_a_plain_group_goes_on_from_its_commit(self):
        with self.open() as topic:
            for i in range(10):
                topic.publish(b"%d" % i)
            with topic.group("audit") as audit:
                self.assertEqual([audit.recv(timeout=1).data for _ in range(4)], [b"0", b"1", b"2", b"3"])
                audit.commit()
        with self.open() as topic, topic.group("audit") as audit:
            self.assertEqual(audit.recv(timeout=1).data, b"4")
            with self.assertRaises(memq.InvalidArgument):
                topic.group("audit", ack_wait=1)  # open here with the other configuration

    def test_a_locked_directory(self):
        topic = self.open()
        sub = topic.subscribe()
        with self.assertRaises(memq.Locked) as caught:
            self.open()
        self.assertIn("already open", caught.exception.detail)
        topic.close()
        with self.assertRaises(memq.Locked):
            self.open()  # the subscriber still holds it
        sub.close()
        self.open().close()

    def test_directory_errors_are_exceptions(self):
        path = os.path.join(self._tmp.name, "a-file")
        with open(path, "wb"):
            pass
        with self.assertRaises(memq.StoreIOError) as caught:
            memq.DurableTopic(path)
        self.assertIsInstance(caught.exception, OSError)
        with self.open() as topic:
            for i in range(400):
                topic.publish(b"payload %d" % i)
        seg = os.path.join(self.dir, "partition-0", "0" * 20 + ".log")
        with open(seg, "r+b") as f:
            f.seek(16 + 36)
            byte = f.read(1)
            f.seek(16 + 36)
            f.write(bytes([byte[0] ^ 0xFF]))
        with self.assertRaises(memq.Corrupt):
            self.open(verify_on_open=True)
        with self.open(verify_on_open=True, repair=True) as topic:
            self.assertEqual(topic.next_offset(0), 0)

    def test_arguments(self):
        for kwargs in (
            {"sync": "sometimes"},
            {"sync": "interval"},
            {"sync": "always", "sync_interval": 1},
            {"overflow": "spill"},
            {"capacity": 0},
            {"segment_bytes": 100},
            {"max_age": 0},
        ):
            with self.assertRaises(memq.InvalidArgument, msg=repr(kwargs)):
                self.open(**kwargs)
        with self.assertRaises(TypeError):
            memq.DurableTopic(3)
        with self.assertRaises(memq.InvalidArgument):
            memq.DurableTopic("a\0b")
        with self.open(sync="interval", sync_interval=0.01) as topic:
            with self.assertRaises(memq.InvalidArgument):
                topic.publish(b"x", key=b"k", partition=0)
            with self.assertRaises(TypeError):
                topic.publish("text")
            with self.assertRaises(memq.InvalidArgument):
                topic.group("g", max_deliveries=3)
            with self.assertRaises(memq.OutOfRange):
                topic.subscribe(start="offset", offset=5)

    def test_wait_false_is_full_at_a_retention_limit(self):
        with self.open(max_segments=1) as topic, topic.subscribe() as sub:
            with self.assertRaises(memq.Full):
                for i in range(10_000):
                    topic.publish(b"x" * 64, wait=False)
            self.assertIsNotNone(sub.recv(timeout=0))

    def test_nack_and_dead_letters(self):
        with self.open() as topic, topic.group("g", ack_wait=60, max_deliveries=2) as g:
            topic.publish(b"poison")
            for attempt in (1, 2):
                d = g.recv(timeout=1)
                self.assertEqual(d.deliveries, attempt)
                d.nack()
            self.assertIsNone(g.recv(timeout=0))
            self.assertEqual(g.stats()["dead_lettered"], 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
