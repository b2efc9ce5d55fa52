import dataclasses
import threading

import memq
from conftest import SOON, run_in_thread


def test_publish_and_subscribe_every_bytes_like():
    t = memq.Topic(16)
    s = t.subscribe()
    payloads = [b"bytes", bytearray(b"bytearray"), memoryview(b"memoryview")]
    import array

    payloads.append(array.array("B", [1, 2, 3]))
    for i, p in enumerate(payloads):
        assert t.publish(p) == (0, i)
    got = [s.recv(timeout=SOON) for _ in payloads]
    assert [m.data for m in got] == [bytes(p) for p in payloads]
    assert all(type(m.data) is bytes for m in got)
    assert [m.offset for m in got] == list(range(len(payloads)))
    assert all(m.partition == 0 and m.key is None for m in got)
    assert isinstance(got[0].timestamp, float)
    assert bytes(got[0]) == b"bytes"


def test_publish_batch_and_recv_many():
    t = memq.Topic(64)
    s = t.subscribe()
    assert t.publish_batch([b"a", b"b", b"c"]) == (0, 0)
    assert t.publish_batch([]) == (0, 3)
    got = s.recv_many(10, timeout=SOON)
    assert [m.data for m in got] == [b"a", b"b", b"c"]
    assert s.recv_many(10, timeout=0) == []
    assert s.try_recv() is None


def test_keys_route_to_the_same_partition():
    t = memq.Topic(64, partitions=4)
    parts = {t.publish(b"x", key=b"user-7")[0] for _ in range(10)}
    assert parts == {memq.key_partition(b"user-7", 4)}
    assert t.publish_keyed("user-7", b"y")[0] == memq.key_partition("user-7", 4)
    assert t.publish(b"z", partition=3)[0] == 3


def test_iteration_ends_when_closed_and_drained():
    t = memq.Topic(8)
    s = t.subscribe()
    for i in range(5):
        t.publish(b"%d" % i)
    t.close()
    assert [m.data for m in s] == [b"0", b"1", b"2", b"3", b"4"]
    assert t.closed


def test_groups_share_messages():
    t = memq.Topic(128)
    a = t.group("g")
    b = t.group("g")
    for i in range(100):
        t.publish(b"%d" % i)
    t.close()
    got = [m.offset for m in a] + [m.offset for m in b]
    assert sorted(got) == list(range(100))
    assert a.group == "g"
    assert "g" in t.groups()


def test_blocking_recv_releases_the_gil():
    t = memq.Topic(8)
    s = t.subscribe()
    th, box = run_in_thread(s.recv, SOON)
    # If the waiting thread held the GIL, this thread could not run to publish.
    t.publish(b"hello")
    th.join(SOON)
    assert box["result"].data == b"hello"


def test_blocking_publish_waits_for_room_and_releases_the_gil():
    t = memq.Topic(2)
    s = t.subscribe()
    t.publish(b"1")
    t.publish(b"2")
    started = threading.Event()

    def publish():
        started.set()
        return t.publish(b"3", timeout=SOON)

    th, box = run_in_thread(publish)
    started.wait(SOON)
    assert s.recv(timeout=SOON).data == b"1"
    assert s.recv(timeout=SOON).data == b"2"
    th.join(SOON)
    assert box["result"] == (0, 2)


def test_full_and_timeout():
    t = memq.Topic(1, overflow="reject")
    keep_reader = t.subscribe()  # noqa: F841 - without a reader nothing is ever full
    t.publish(b"1")
    try:
        t.publish(b"2")
        raise AssertionError("no Full")
    except memq.Full:
        pass
    b = memq.Topic(1)
    keep = b.subscribe()  # noqa: F841 - a reader makes the topic block
    b.publish(b"1")
    for timeout, exc in [(0, memq.Full), (0.01, memq.Timeout)]:
        try:
            b.publish(b"2", timeout=timeout)
            raise AssertionError("no error")
        except exc:
            pass
    try:
        b.publish_batch([b"1", b"2"])  # over the capacity
        raise AssertionError("no Full")
    except memq.Full:
        pass


def test_drop_oldest_lags():
    t = memq.Topic(2, overflow="drop_oldest")
    s = t.subscribe()
    for i in range(5):
        t.publish(b"%d" % i)
    try:
        s.recv(timeout=SOON)
        raise AssertionError("no Lagged")
    except memq.Lagged as e:
        assert e.missed == 3
    assert s.recv(timeout=SOON).data == b"3"


def test_stats_are_dataclasses():
    t = memq.Topic(8, partitions=2)
    g = t.group("g")
    t.publish(b"x", partition=1)
    g.recv(timeout=SOON)
    st = t.stats()
    assert dataclasses.is_dataclass(st)
    assert st.published == 1 and st.capacity == 8 and st.overflow == "block"
    assert len(st.partitions) == 2 and st.partitions[1].published == 1
    assert st.groups[0].name == "g" and st.groups[0].lag == 0
    assert dataclasses.asdict(st)["partitions"][1]["high"] == 1


def test_context_managers_close():
    with memq.Topic(4) as t:
        with t.subscribe() as s:
            pass
        assert s.closed
    assert t.closed
    try:
        s.recv(timeout=0)
        raise AssertionError("no Closed")
    except memq.Closed:
        pass


def test_seek_and_replay():
    t = memq.Topic(8)
    for i in range(4):
        t.publish(b"%d" % i)
    s = t.subscribe("latest")
    assert s.try_recv() is None
    s.seek(1)
    assert s.recv(timeout=SOON).offset == 1
    late = t.subscribe(2)
    assert late.recv(timeout=SOON).data == b"2"


def test_broker():
    b = memq.Broker()
    t = b.create("orders", 16)
    assert t.name == "orders"
    assert "orders" in b and len(b) == 1 and b.list() == ["orders"]
    assert b.get("orders").name == "orders"
    assert b.get_or_create("orders").name == "orders"
    try:
        b.create("orders")
        raise AssertionError("no TopicExists")
    except memq.TopicExists:
        pass
    try:
        b.get("nope")
        raise AssertionError("no UnknownTopic")
    except KeyError as e:
        assert isinstance(e, memq.UnknownTopic)
    assert b.stats()[0].name == "orders"
    b.delete("orders")
    assert len(b) == 0


def test_concurrent_publishers_and_group_lose_nothing():
    t = memq.Topic(64)
    members = [t.group("w") for _ in range(3)]
    seen = []
    lock = threading.Lock()

    def consume(m):
        for msg in m:
            with lock:
                seen.append(msg.data)

    readers = [threading.Thread(target=consume, args=(m,)) for m in members]
    for r in readers:
        r.start()

    def produce(k):
        for i in range(2000):
            t.publish(b"%d-%d" % (k, i))

    writers = [threading.Thread(target=produce, args=(k,)) for k in range(3)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(SOON)
    t.close()
    for r in readers:
        r.join(SOON)
    assert sorted(seen) == sorted(b"%d-%d" % (k, i) for k in range(3) for i in range(2000))
