import memq
from conftest import SOON


def test_ack_nack_reject_and_dead_letters():
    t = memq.Topic(16)
    dlq = memq.DeadLetterTopic(16)
    dead = dlq.subscribe()
    c = t.ack_group("jobs", ack_wait=SOON, max_deliveries=2, dead_letters=dlq)
    for i in range(3):
        t.publish(b"%d" % i)
    d0 = c.recv(timeout=SOON)
    assert d0.deliveries == 1 and d0.data == b"0"
    d0.ack()
    assert d0.settled
    try:
        d0.ack()
        raise AssertionError("no LeaseExpired")
    except memq.LeaseExpired:
        pass
    # Offset 1 fails twice (max_deliveries), offset 2 is rejected, in whatever order the
    # group hands them out.
    settled = 0
    while settled < 2:
        d = c.recv(timeout=SOON)
        if d.offset == 2:
            d.reject()
            settled += 1
        else:
            assert d.offset == 1
            d.touch()
            d.nack()
            settled += d.deliveries == 2
    letters = [dead.recv(timeout=SOON) for _ in range(2)]
    assert sorted((x.offset, x.reason) for x in letters) == [(1, "max_deliveries"), (2, "rejected")]
    assert letters[0].group == "jobs"
    st = [g for g in t.stats().groups if g.name == "jobs"][0]
    assert st.acked == 1 and st.dead_lettered == 2


def test_nack_after_and_context_manager():
    t = memq.Topic(8)
    c = t.ack_group("g", ack_wait=SOON)
    t.publish(b"a")
    with c.recv(timeout=SOON) as d:
        assert d.data == b"a"
    assert d.settled
    t.publish(b"b")
    try:
        with c.recv(timeout=SOON):
            raise RuntimeError("handler failed")
    except RuntimeError:
        pass
    redo = c.recv(timeout=SOON)
    assert (redo.data, redo.deliveries) == (b"b", 2)
    redo.nack_after(0.001)
    assert c.recv(timeout=SOON).deliveries == 3


def test_dropped_delivery_comes_back():
    t = memq.Topic(8)
    c = t.ack_group("g", ack_wait=SOON)
    t.publish(b"x")
    d = c.recv(timeout=SOON)
    del d
    assert c.recv(timeout=SOON).deliveries == 2


def test_lease_expiry_redelivers():
    t = memq.Topic(8)
    c = t.ack_group("g", ack_wait=0.05)
    t.publish(b"x")
    d = c.recv(timeout=SOON)
    again = c.recv(timeout=SOON)  # comes back once the lease ran out, however late
    assert again.deliveries == 2
    try:
        d.ack()
        raise AssertionError("no LeaseExpired")
    except memq.LeaseExpired:
        pass
    again.ack()
