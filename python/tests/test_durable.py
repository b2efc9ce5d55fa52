import dataclasses

import pytest

import memq
from conftest import SOON


def test_reopen_keeps_messages_and_group_positions(tmp_path):
    path = tmp_path / "orders"
    with memq.DurableTopic(str(path), 64) as t:
        for i in range(10):
            t.publish(b"order %d" % i, key=b"customer")
        g = t.group("billing", ack_wait=SOON)
        first = g.recv(timeout=SOON)
        first.ack()
        second = g.recv(timeout=SOON)  # never acked: comes back after the restart
        assert second.offset == 1
        g.close()
        del second
    with memq.DurableTopic(str(path), 64) as t:
        g = t.group("billing", ack_wait=SOON)
        again = g.recv_many(100, timeout=SOON)
        assert [d.offset for d in again] == list(range(1, 10))
        assert again[0].deliveries >= 1
        for d in again:
            d.ack()
        g.close()
        s = t.subscribe()
        replay = s.recv_many(100, timeout=SOON)
        assert [m.data for m in replay] == [b"order %d" % i for i in range(10)]
        assert replay[0].key == b"customer"
        s.close()
        st = t.stats()
        assert st.partitions[0].next == 10 and st.memory.capacity == 64


def test_locked_and_bad_arguments(tmp_path):
    path = str(tmp_path / "t")
    with memq.DurableTopic(path) as t:
        try:
            memq.DurableTopic(path)
            raise AssertionError("no Locked")
        except memq.Locked:
            pass
        try:
            t.publish("text")
            raise AssertionError("no InvalidType")
        except TypeError:
            pass
    for kw in [{"sync": "sometimes"}, {"capacity": 0}, {"sync": "interval", "sync_interval": -1}]:
        try:
            memq.DurableTopic(str(tmp_path / "u"), **kw)
            raise AssertionError(f"no error for {kw}")
        except memq.InvalidArgument:
            pass
    t = memq.DurableTopic(str(tmp_path / "v"))
    t.close()
    try:
        t.publish(b"x")
        raise AssertionError("no Closed")
    except memq.Closed:
        pass


def test_durable_pool(tmp_path):
    with memq.DurableTopic(str(tmp_path / "jobs"), sync="never") as t:
        t.publish_batch([b"%d" % i for i in range(50)])
        pool = memq.Pool(t, lambda m: m.data + b"!", workers=2, acked=True, results=100)
        st = pool.drain(timeout=SOON)
        assert st.processed == 50
        got = pool.results.recv_many(100, timeout=0)
        assert sorted(r.value for r in got) == sorted(b"%d!" % i for i in range(50))


def test_durable_deliveries_settle_every_way_and_dead_letters_keep_their_origin(tmp_path):
    path = str(tmp_path / "jobs")
    with memq.DurableTopic(path, 16) as t:
        for i in range(4):
            t.publish(b"job %d" % i, key=b"k")
        g = t.group("workers", ack_wait=SOON, max_deliveries=3)
        d = g.recv(timeout=SOON)
        d.touch()  # the lease is kept
        d.nack_after(0)  # delivered again at once
        again = g.recv(timeout=SOON)
        assert (again.offset, again.deliveries) == (0, 2)
        again.reject()  # a poison message: to the dead letters
        try:
            again.ack()
            raise AssertionError("settled twice")
        except memq.LeaseExpired:
            pass
        for _ in range(3):
            g.recv(timeout=SOON).ack()
        g.close()
        dead = t.dead_letters("workers")
        letter = dead.recv(timeout=SOON)
        assert letter.data == b"job 0"
        assert (letter.group, letter.partition, letter.offset) == ("workers", 0, 0)
        assert (letter.deliveries, letter.reason) == (2, "rejected")
        try:
            dead.recv(timeout=0)
            raise AssertionError("a second dead letter")
        except memq.Timeout:
            pass
        dead.close()
    # After a restart: the letter is still there, and nothing comes back to the group.
    with memq.DurableTopic(path, 16) as t:
        dead = t.dead_letters("workers", "earliest")
        assert dead.recv(timeout=SOON).data == b"job 0"
        dead.close()
        g = t.group("workers", ack_wait=SOON, max_deliveries=3)
        try:
            g.recv(timeout=0)
            raise AssertionError("a settled message came back")
        except memq.Timeout:
            pass
        g.close()


def test_a_durable_publish_with_a_timeout_on_a_full_log_hands_nothing_half_done(tmp_path):
    path = str(tmp_path / "full")
    with memq.DurableTopic(
        path, 8, sync="never", segment_bytes=4096, retention_bytes=8192
    ) as t:
        slow = t.subscribe("earliest")  # holds every segment
        n = 0
        while True:
            try:
                t.publish(b"x" * 500, timeout=0)
                n += 1
            except memq.Full:
                break
        for part in (None, 0):
            try:
                t.publish(b"y" * 500, partition=part, timeout=0.05)
                raise AssertionError("published into a full log")
            except memq.Timeout:
                pass
        assert t.next_offset() == n  # nothing was published by the timed-out calls
        for _ in range(n):
            slow.recv(timeout=SOON)
        # Room again: a publish with a long limit goes through at once.
        assert t.publish(b"z" * 500, timeout=SOON)[1] == n
        slow.close()


def test_durable_group_stats_are_a_frozen_dataclass(tmp_path):
    with memq.DurableTopic(str(tmp_path / "s"), 16, partitions=2, sync="never") as t:
        t.publish(b"a", partition=0)
        t.publish(b"b", partition=1)
        g = t.group("g", ack_wait=SOON)
        d = g.recv(timeout=SOON)
        st = g.stats()
        assert isinstance(st, memq.DurableGroupStats)
        assert (st.name, st.members, st.in_flight, st.redelivered, st.dead_lettered) == ("g", 1, 1, 0, 0)
        assert len(st.committed) == len(st.committed_on_disk) == 2
        assert dataclasses.asdict(st)["committed"] == st.committed
        with pytest.raises(dataclasses.FrozenInstanceError):
            st.members = 2
        d.ack()
        g.close()


def test_durable_pool_backoff_holds_a_failed_message_back(tmp_path):
    with memq.DurableTopic(str(tmp_path / "jobs"), sync="never") as t:
        t.publish(b"flaky")
        # A member that stays (a group whose last member leaves starts again from its
        # committed offsets, as after a restart) and looks after the pool is done.
        g = t.group("jobs", ack_wait=SOON)
        # A day's backoff: the failed message is held back, so the drain ends after one
        # try (without a backoff it would come back at once, and the drain never end).
        pool = memq.Pool(t, lambda m: 1 / 0, workers=2, group="jobs", acked=True, ack_wait=SOON,
                         backoff=86400)
        st = pool.drain(timeout=SOON)
        assert (st.processed, st.errors) == (1, 1)
        assert g.try_recv() is None
        assert g.stats().in_flight == 1  # held back, not settled
        g.close()


def test_durable_pool_retries_after_a_short_backoff(tmp_path):
    with memq.DurableTopic(str(tmp_path / "jobs"), sync="never") as t:
        failed = set()

        def flaky(m):
            if m.offset not in failed:
                failed.add(m.offset)
                raise RuntimeError("first try")

        pool = memq.Pool(t, flaky, workers=2, acked=True, ack_wait=SOON, backoff=0.001)
        for i in range(20):
            t.publish(b"%d" % i)
        t.close()
        st = pool.join(timeout=SOON)
        assert (st.processed, st.errors) == (40, 20)


def test_durable_pool_dead_letters_reach_the_group_log_and_a_dead_letter_topic(tmp_path):
    with memq.DurableTopic(str(tmp_path / "jobs"), sync="never") as t:
        dlq = memq.DeadLetterTopic(16)
        dead = dlq.subscribe()
        pool = memq.Pool(t, lambda m: 1 / 0, workers=2, acked=True, ack_wait=SOON,
                         max_deliveries=3, backoff=0.001, dead_letters=dlq)
        t.publish(b"poison", key=b"k")
        letter = dead.recv(timeout=SOON)  # relayed while the pool runs
        assert (letter.group, letter.offset, letter.reason, letter.deliveries, letter.data) == (
            pool.group, 0, "max_deliveries", 3, b"poison")
        kept = t.dead_letters(pool.group)
        assert kept.recv(timeout=SOON).data == b"poison"
        kept.close()
        t.close()
        st = pool.join(timeout=SOON)  # the workers end, and the relay with them
        assert (st.processed, st.errors) == (3, 3)


def test_durable_pool_relays_the_last_dead_letters_when_it_drains(tmp_path):
    with memq.DurableTopic(str(tmp_path / "jobs"), sync="never") as t:
        dlq = memq.DeadLetterTopic(16)
        dead = dlq.subscribe()
        pool = memq.Pool(t, lambda m: 1 / 0, workers=1, acked=True, ack_wait=SOON,
                         max_deliveries=2, dead_letters=dlq)
        t.publish_batch([b"a", b"b"])
        st = pool.drain(timeout=SOON)
        assert (st.processed, st.errors) == (4, 4)
        # Each letter was made by a worker's receive; the relay passed every one on
        # before the drain returned.
        assert sorted(d.data for d in dead.recv_many(10, timeout=0)) == [b"a", b"b"]


def test_pool_retry_settings_need_an_explicit_ack_pool(tmp_path):
    t = memq.Topic(4)
    with memq.DurableTopic(str(tmp_path / "bad"), sync="never") as d:
        for topic in (t, d):
            for kw in ({"backoff": 1}, {"max_deliveries": 2}, {"dead_letters": memq.DeadLetterTopic()}):
                with pytest.raises(memq.InvalidArgument, match="acked=True"):
                    memq.Pool(topic, print, **kw)
            with pytest.raises(memq.InvalidArgument):
                memq.Pool(topic, print, acked=True, backoff=-1)
            with pytest.raises(TypeError):
                memq.Pool(topic, print, acked=True, dead_letters=object())
