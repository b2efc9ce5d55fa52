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
