"""Readers made with memoryview=True hand out payloads as memoryviews over the one bytes
copy: slicing shares that copy, and every way of receiving gives the same form."""

import asyncio

import pytest

import memq
from conftest import SOON


def is_view_over_bytes(data, expected):
    return isinstance(data, memoryview) and type(data.obj) is bytes and data.readonly and data == expected


def test_every_receive_of_a_memoryview_subscriber_hands_out_views():
    t = memq.Topic(16)
    sub = t.subscribe(memoryview=True)
    plain = t.subscribe()
    t.publish(b"hello world")
    m = sub.recv(timeout=SOON)
    assert is_view_over_bytes(m.data, b"hello world")
    tail = m.data[6:]
    assert tail.obj is m.data.obj and tail == b"world"  # a slice shares the copy
    assert bytes(m) is m.data.obj  # bytes(msg): the bytes viewed, not another copy
    assert "<11 bytes>" in repr(m)
    assert type(plain.recv(timeout=SOON).data) is bytes
    t.publish_batch([b"a", b"b", b"c"])
    assert is_view_over_bytes(sub.try_recv().data, b"a")
    assert [is_view_over_bytes(x.data, b"b") for x in sub.recv_many(1, timeout=0)] == [True]
    t.close()
    assert [is_view_over_bytes(x.data, b"c") for x in sub] == [True]


def test_groups_deliveries_and_dead_letters_take_the_option():
    t = memq.Topic(16)
    g = t.group("g", memoryview=True)
    dlq = memq.DeadLetterTopic(4)
    letters = dlq.subscribe(memoryview=True)
    acked = t.ack_group("a", ack_wait=SOON, dead_letters=dlq, memoryview=True)
    t.publish(b"job")
    assert is_view_over_bytes(g.recv(timeout=SOON).data, b"job")
    d = acked.recv(timeout=SOON)
    assert is_view_over_bytes(d.data, b"job") and d.data.obj is d.message.data.obj
    d.reject()
    assert is_view_over_bytes(letters.recv(timeout=SOON).data, b"job")


def test_asyncio_receives_take_the_option():
    async def main():
        t = memq.Topic(8)
        sub = t.subscribe(memoryview=True)
        await t.publish(b"x")
        assert is_view_over_bytes((await sub.recv()).data, b"x")
        await t.publish(b"y")
        t.close()
        assert [is_view_over_bytes(m.data, b"y") async for m in sub] == [True]

    asyncio.run(asyncio.wait_for(main(), SOON))


def test_durable_readers_take_the_option(tmp_path):
    with memq.DurableTopic(str(tmp_path / "d"), 16, sync="never") as t:
        t.publish(b"one", key=b"k")
        sub = t.subscribe("earliest", memoryview=True)
        m = sub.recv(timeout=SOON)
        assert is_view_over_bytes(m.data, b"one") and m.key == b"k"
        g = t.group("g", ack_wait=SOON, memoryview=True)
        d = g.recv(timeout=SOON)
        assert is_view_over_bytes(d.data, b"one")
        d.reject()
        dead = t.dead_letters("g", memoryview=True)
        assert is_view_over_bytes(dead.recv(timeout=SOON).data, b"one")
        for r in (sub, g, dead):
            r.close()


def test_a_pool_hands_its_handler_views():
    t = memq.Topic(16)
    seen = []
    pool = memq.Pool(t, lambda data: seen.append(bytes(data[:2])) or data[2:], arguments="data",
                     memoryview=True, results=16, workers=1)
    t.publish(b"abcd")
    pool.drain(timeout=SOON)
    assert seen == [b"ab"]
    assert pool.results.recv(timeout=SOON).value == b"cd"  # a view is a fine return value


def test_the_option_is_a_bool():
    t = memq.Topic(4)
    with pytest.raises(TypeError):
        t.subscribe(memoryview="yes")
    with pytest.raises(TypeError):
        memq.Pool(t, print, memoryview=1)
