"""memq from Python: a thin ctypes binding over libmemq's C ABI (include/memq.h).

Byte topics only, as in C: publish ``bytes``, receive ``bytes``. Every call maps to
one C call; blocking calls release the GIL (ctypes does), so threads publish and
receive in parallel. Handles are freed when their Python objects are collected, never
while another thread uses them.

    topic = memq.Topic(capacity=1024)
    sub = topic.subscribe()
    topic.publish(b"hello")
    msg = sub.recv(timeout=1.0)        # Message(data=b"hello", offset=0, ...)
    topic.close()
    for msg in sub:                    # drains what is retained, then stops
        ...

Errors are ``MemqError`` (with ``.status``, the C status code, and ``.detail``, what the
C library said about it: ``memq_last_error_message``, in the words of memq's Rust
errors). Its subclasses follow the C statuses: ``InvalidArgument`` (also a
``ValueError``), ``OutOfRange`` (also an ``IndexError``), ``AllocFailed`` (also a
``MemoryError``), ``Closed``, ``Full``, ``Timeout``, ``Lagged`` and ``LeaseExpired``. A
receive that times out returns ``None``. Arguments are checked here with memq's own
rules (a capacity is at least 1): what memq would refuse is an ``InvalidArgument``
before the call, what is not even the right type a ``TypeError``.

Python handles signals between bytecodes, so Ctrl-C reaches a thread blocked in a
receive or publish without a timeout only when that call returns; where that matters,
wait with a timeout in a loop.

``pip install examples/python`` installs this module with a ``libmemq.so`` that cargo
builds for it (or the one ``MEMQ_LIB`` names at install time). Otherwise the library is
found through ``MEMQ_LIB`` (a path to ``libmemq.so``) or in the workspace's
``target/{release,ci,debug}`` directories.
"""

import ctypes
import decimal
import numbers
import operator
import os
import threading
import time
from collections import namedtuple
from ctypes import (
    POINTER,
    Structure,
    byref,
    c_bool,
    c_char_p,
    c_int64,
    c_size_t,
    c_uint32,
    c_uint64,
    c_uint8,
    c_void_p,
)

# ---- status codes (memq_status) ---------------------------------------------------------
OK = 0
EMPTY = 1
TIMEOUT = 2
FULL = 3
CLOSED = 4
LAGGED = 5
INVALID_ARGUMENT = 6
NULL_POINTER = 7
OUT_OF_RANGE = 8
UNKNOWN_TOPIC = 9
TOPIC_EXISTS = 10
UNKNOWN_GROUP = 11
BUFFER_TOO_SMALL = 12
NO_TIMESTAMP = 13
ALLOC_FAILED = 14
PANIC = 15
LEASE_EXPIRED = 16
GROUP_MODE_MISMATCH = 17
LOCKED = 18
CORRUPT = 19
DISK_FULL = 20
IO = 21

# ---- enums and flags --------------------------------------------------------------------
OVERFLOW = {"block": 0, "drop_oldest": 1, "reject": 2}
START = {"earliest": 0, "latest": 1, "offset": 2}
BACKOFF = {"none": 0, "fixed": 1, "exponential": 2}
TOPIC_TIMESTAMPS = 1
TOPIC_RELEASE_ON_READ = 2
SYNC = {"always": 0, "interval": 1, "never": 2}
DURABLE_VERIFY_ON_OPEN = 1
DURABLE_REPAIR = 2


class MemqError(Exception):
    """A memq call failed; ``status`` is the C ABI's ``memq_status`` and ``detail`` what
    memq said about it (which argument, and why), as C's ``memq_last_error_message``.

    Made right after the failing call (the C detail is per thread, and the next failing
    call replaces it), or with the ``detail`` of a check made here before any call."""

    def __init__(self, status, what="", detail=None):
        self.status = status
        if detail is None:
            detail = _lib.memq_last_error_message().decode(errors="replace")
        self.detail = detail or _lib.memq_status_str(status).decode()
        super().__init__(f"{what}: {self.detail}" if what else self.detail)


class InvalidArgument(MemqError, ValueError):
    """An argument memq refuses: a capacity, partition count or ``max_in_flight`` of 0,
    a zero TTL or ``ack_wait``, an unknown overflow policy, ... (``INVALID_ARGUMENT``)."""

    def __init__(self, status=INVALID_ARGUMENT, what="", detail=None):
        super().__init__(status, what, detail)


class OutOfRange(MemqError, IndexError):
    """A partition index or an offset out of range (``OUT_OF_RANGE``)."""


class AllocFailed(MemqError, MemoryError):
    """A topic of that capacity (or that many partitions) cannot be allocated."""


class Closed(MemqError):
    """The topic is closed (publishing), or closed and drained (receiving)."""


class Full(MemqError):
    """No room, and the publish was not allowed to wait."""


class Timeout(MemqError):
    """A publish waited for room for its whole ``timeout``."""


class LeaseExpired(MemqError):
    """A delivery's lease ran out (``ack_wait`` passed) and the message went back to the
    group, to come again, perhaps to another member. (A settle that is late but comes
    before memq has taken the message back still counts.)"""


class Lagged(MemqError):
    """Messages were evicted before this reader got them; ``missed`` says how many.
    The next receive continues at the oldest retained message."""

    def __init__(self, missed):
        super().__init__(LAGGED)
        self.missed = missed


class Locked(MemqError):
    """A durable topic's directory is open already: in another process, or in this one
    (a ``DurableTopic``, or a subscriber, consumer or delivery of one, not yet closed)."""


class Corrupt(MemqError):
    """A durable log is damaged beyond a torn tail, or its directory holds a file the
    store did not write; ``detail`` names the file, the byte and the offset. Nothing was
    changed on disk (``repair=True`` truncates at the damage)."""


class DiskFull(MemqError, OSError):
    """The disk (or the quota) is full: the durable record was not written."""


class StoreIOError(MemqError, OSError):
    """Another I/O error of a durable topic; ``detail`` names the call, the file and the
    OS error."""


# The exception of each C status (others are MemqError). The same situation has the same
# name in Rust, C and Python: see the table in memq.h (memq_status) and the README.
_ERRORS = {
    CLOSED: Closed,
    FULL: Full,
    TIMEOUT: Timeout,
    LEASE_EXPIRED: LeaseExpired,
    INVALID_ARGUMENT: InvalidArgument,
    OUT_OF_RANGE: OutOfRange,
    ALLOC_FAILED: AllocFailed,
    LOCKED: Locked,
    CORRUPT: Corrupt,
    DISK_FULL: DiskFull,
    IO: StoreIOError,
}


# ---- C structs (field for field as in include/memq.h) ----------------------------------
class _TopicConfig(Structure):
    _fields_ = [
        ("capacity", c_size_t),
        ("partitions", c_uint32),
        ("overflow", c_uint32),
        ("ttl_ms", c_uint64),
        ("flags", c_uint32),
    ]


class _Receipt(Structure):
    _fields_ = [("offset", c_uint64), ("partition", c_uint32)]


class _Slice(Structure):
    _fields_ = [("data", POINTER(c_uint8)), ("len", c_size_t)]


class _Meta(Structure):
    _fields_ = [
        ("offset", c_uint64),
        ("timestamp_ns", c_uint64),
        ("len", c_size_t),
        ("partition", c_uint32),
        ("has_timestamp", c_bool),
    ]


class _TopicStats(Structure):
    _fields_ = [
        ("capacity", c_size_t),
        ("partitions", c_uint32),
        ("overflow", c_uint32),
        ("closed", c_bool),
        ("published", c_uint64),
        ("delivered", c_uint64),
        ("evicted", c_uint64),
        ("expired", c_uint64),
        ("depth", c_uint64),
        ("subscribers", c_size_t),
        ("groups", c_size_t),
        ("waiting_publishers", c_size_t),
        ("released", c_uint64),
        ("lagged", c_uint64),
    ]


class _AckConfig(Structure):
    _fields_ = [
        ("ack_wait_ms", c_uint64),
        ("max_deliveries", c_uint32),
        ("backoff", c_uint32),
        ("backoff_initial_ms", c_uint64),
        ("backoff_max_ms", c_uint64),
        ("max_in_flight", c_size_t),
        ("dead_letter", c_void_p),
    ]


class _AckGroupStats(Structure):
    _fields_ = [
        ("members", c_size_t),
        ("lag", c_uint64),
        ("delivered", c_uint64),
        ("in_flight", c_uint64),
        ("redelivered", c_uint64),
        ("acked", c_uint64),
        ("dead_lettered", c_uint64),
        ("evicted_unacked", c_uint64),
        ("lagged", c_uint64),
    ]


class _DurableConfig(Structure):
    _fields_ = [
        ("sync", c_uint32),
        ("sync_interval_ms", c_uint64),
        ("segment_bytes", c_uint64),
        ("retention_max_bytes", c_uint64),
        ("retention_max_age_ms", c_uint64),
        ("retention_max_segments", c_size_t),
        ("flags", c_uint32),
    ]


class _DurableGroupConfig(Structure):
    _fields_ = [
        ("ack_wait_ms", c_uint64),
        ("max_deliveries", c_uint32),
        ("commit_every", c_uint32),
    ]


class _DurableReceipt(Structure):
    _fields_ = [
        ("offset", c_uint64),
        ("partition", c_uint32),
        ("count", c_uint32),
        ("durable", c_bool),
    ]


class _DurableMeta(Structure):
    _fields_ = [
        ("offset", c_uint64),
        ("timestamp_ms", c_uint64),
        ("len", c_size_t),
        ("key_len", c_size_t),
        ("partition", c_uint32),
        ("has_key", c_bool),
    ]


class _DurableGroupStats(Structure):
    _fields_ = [
        ("members", c_size_t),
        ("in_flight", c_size_t),
        ("redelivered", c_uint64),
        ("dead_lettered", c_uint64),
    ]


def _find_library():
    """``MEMQ_LIB``; else the library an install put beside this module
    (``memq_native/``, see setup.py); else the newest one in this workspace's ``target/``."""
    path = os.environ.get("MEMQ_LIB")
    if path:
        return path
    here = os.path.dirname(os.path.abspath(__file__))
    bundled = os.path.join(here, "memq_native", "libmemq.so")
    if os.path.exists(bundled):
        return bundled
    root = os.path.dirname(os.path.dirname(here))
    candidates = [
        os.path.join(root, "target", profile, "libmemq.so") for profile in ("release", "ci", "debug")
    ]
    found = [c for c in candidates if os.path.exists(c)]
    if not found:
        raise OSError(
            "libmemq.so not found: install this binding (`pip install examples/python`), "
            "build the library (`cargo build --release -p memq-ffi`), or set MEMQ_LIB to its path"
        )
    return max(found, key=os.path.getmtime)


def _load():
    path = _find_library()
    lib = ctypes.CDLL(path)
    handle = c_void_p
    out = POINTER(c_void_p)
    sigs = {
        "memq_status_str": (c_char_p, [c_uint32]),
        "memq_version": (c_char_p, []),
        "memq_topic_config_init": (c_uint32, [POINTER(_TopicConfig)]),
        "memq_topic_new": (c_uint32, [POINTER(_TopicConfig), out]),
        "memq_topic_free": (None, [handle]),
        "memq_topic_close": (c_uint32, [handle]),
        "memq_topic_publish": (
            c_uint32,
            [handle, POINTER(c_uint8), c_size_t, c_int64, POINTER(_Receipt)],
        ),
        "memq_topic_publish_keyed": (
            c_uint32,
            [
                handle,
                POINTER(c_uint8),
                c_size_t,
                POINTER(c_uint8),
                c_size_t,
                c_int64,
                POINTER(_Receipt),
            ],
        ),
        "memq_topic_publish_batch": (
            c_uint32,
            [handle, POINTER(_Slice), c_size_t, c_int64, POINTER(_Receipt)],
        ),
        "memq_topic_publish_batch_keyed": (
            c_uint32,
            [
                handle,
                POINTER(c_uint8),
                c_size_t,
                POINTER(_Slice),
                c_size_t,
                c_int64,
                POINTER(_Receipt),
            ],
        ),
        "memq_key_partition": (
            c_uint32,
            [POINTER(c_uint8), c_size_t, c_uint32, POINTER(c_uint32)],
        ),
        "memq_topic_get_stats": (c_uint32, [handle, POINTER(_TopicStats)]),
        "memq_topic_get_ack_group_stats": (
            c_uint32,
            [handle, c_char_p, POINTER(_AckGroupStats)],
        ),
        "memq_subscriber_new": (c_uint32, [handle, c_uint32, c_uint64, out]),
        "memq_subscriber_free": (None, [handle]),
        "memq_subscriber_recv": (c_uint32, [handle, c_int64, out, POINTER(c_uint64)]),
        "memq_consumer_new": (c_uint32, [handle, c_char_p, c_uint32, c_uint64, out]),
        "memq_consumer_free": (None, [handle]),
        "memq_subscriber_recv_many": (
            c_uint32,
            [handle, c_int64, POINTER(c_void_p), c_size_t, POINTER(c_size_t), POINTER(c_uint64)],
        ),
        "memq_consumer_recv_many": (
            c_uint32,
            [handle, c_int64, POINTER(c_void_p), c_size_t, POINTER(c_size_t), POINTER(c_uint64)],
        ),
        "memq_ack_consumer_recv_many": (
            c_uint32,
            [handle, c_int64, POINTER(c_void_p), c_size_t, POINTER(c_size_t), POINTER(c_uint64)],
        ),
        "memq_consumer_recv": (c_uint32, [handle, c_int64, out, POINTER(c_uint64)]),
        "memq_message_data": (c_uint32, [handle, POINTER(POINTER(c_uint8))]),
        "memq_message_get_meta": (c_uint32, [handle, POINTER(_Meta)]),
        "memq_message_free": (None, [handle]),
        "memq_ack_config_init": (c_uint32, [POINTER(_AckConfig)]),
        "memq_ack_consumer_new": (
            c_uint32,
            [handle, c_char_p, c_uint32, c_uint64, POINTER(_AckConfig), out],
        ),
        "memq_ack_consumer_free": (None, [handle]),
        "memq_ack_consumer_recv": (c_uint32, [handle, c_int64, out, POINTER(c_uint64)]),
        "memq_delivery_data": (c_uint32, [handle, POINTER(POINTER(c_uint8))]),
        "memq_delivery_get_meta": (c_uint32, [handle, POINTER(_Meta)]),
        "memq_delivery_deliveries": (c_uint32, [handle, POINTER(c_uint32)]),
        "memq_delivery_ack": (c_uint32, [handle]),
        "memq_delivery_nack": (c_uint32, [handle]),
        "memq_delivery_nack_after": (c_uint32, [handle, c_uint64]),
        "memq_delivery_reject": (c_uint32, [handle]),
        "memq_delivery_touch": (c_uint32, [handle]),
        "memq_delivery_free": (None, [handle]),
        "memq_last_error_message": (c_char_p, []),
        "memq_durable_config_init": (c_uint32, [POINTER(_DurableConfig)]),
        "memq_durable_open": (
            c_uint32,
            [c_char_p, POINTER(_TopicConfig), POINTER(_DurableConfig), out],
        ),
        "memq_durable_topic_free": (None, [handle]),
        "memq_durable_topic_close": (c_uint32, [handle]),
        "memq_durable_topic_next_offset": (c_uint32, [handle, c_uint32, POINTER(c_uint64)]),
        "memq_durable_topic_start_offset": (c_uint32, [handle, c_uint32, POINTER(c_uint64)]),
        "memq_durable_publish": (
            c_uint32,
            [handle, POINTER(c_uint8), c_size_t, c_int64, POINTER(_DurableReceipt)],
        ),
        "memq_durable_publish_keyed": (
            c_uint32,
            [
                handle,
                POINTER(c_uint8),
                c_size_t,
                POINTER(c_uint8),
                c_size_t,
                c_int64,
                POINTER(_DurableReceipt),
            ],
        ),
        "memq_durable_publish_to": (
            c_uint32,
            [handle, c_uint32, POINTER(c_uint8), c_size_t, c_int64, POINTER(_DurableReceipt)],
        ),
        "memq_durable_subscriber_new": (c_uint32, [handle, c_uint32, c_uint64, out]),
        "memq_durable_subscriber_free": (None, [handle]),
        "memq_durable_subscriber_recv": (c_uint32, [handle, c_int64, out, POINTER(c_uint64)]),
        "memq_durable_group_config_init": (c_uint32, [POINTER(_DurableGroupConfig)]),
        "memq_durable_consumer_new": (
            c_uint32,
            [handle, c_char_p, c_uint32, c_uint64, POINTER(_DurableGroupConfig), out],
        ),
        "memq_durable_consumer_free": (None, [handle]),
        "memq_durable_consumer_recv": (c_uint32, [handle, c_int64, out, POINTER(c_uint64)]),
        "memq_durable_consumer_recv_delivery": (
            c_uint32,
            [handle, c_int64, out, POINTER(c_uint64)],
        ),
        "memq_durable_consumer_commit": (c_uint32, [handle]),
        "memq_durable_consumer_get_stats": (c_uint32, [handle, POINTER(_DurableGroupStats)]),
        "memq_durable_consumer_committed": (
            c_uint32,
            [handle, c_uint32, POINTER(c_uint64), POINTER(c_uint64)],
        ),
        "memq_durable_message_data": (c_uint32, [handle, POINTER(POINTER(c_uint8))]),
        "memq_durable_message_key": (c_uint32, [handle, POINTER(POINTER(c_uint8))]),
        "memq_durable_message_get_meta": (c_uint32, [handle, POINTER(_DurableMeta)]),
        "memq_durable_message_free": (None, [handle]),
        "memq_durable_delivery_data": (c_uint32, [handle, POINTER(POINTER(c_uint8))]),
        "memq_durable_delivery_key": (c_uint32, [handle, POINTER(POINTER(c_uint8))]),
        "memq_durable_delivery_get_meta": (c_uint32, [handle, POINTER(_DurableMeta)]),
        "memq_durable_delivery_deliveries": (c_uint32, [handle, POINTER(c_uint32)]),
        "memq_durable_delivery_ack": (c_uint32, [handle]),
        "memq_durable_delivery_nack": (c_uint32, [handle]),
        "memq_durable_delivery_free": (None, [handle]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


_lib = _load()


def version():
    """libmemq's version string."""
    return _lib.memq_version().decode()


def _check(status, what):
    """Raises the exception of a failed call's status (at once: it reads the C detail)."""
    if status == OK:
        return
    raise _ERRORS.get(status, MemqError)(status, what)


_I64_MAX = 2**63 - 1
_U64_MAX = 2**64 - 1
_U32_MAX = 2**32 - 1
_SIZE_MAX = 2 ** (8 * ctypes.sizeof(c_size_t)) - 1


def _int_arg(value, name, low, high):
    """``value`` as a C integer in ``[low, high]``: a ``TypeError`` for what is not an
    integer (``operator.index`` decides, so numpy's integers pass; ``bool`` does not), an
    ``InvalidArgument`` (a ``ValueError``) out of range (ctypes would silently wrap it)."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None
    if value < low:
        raise InvalidArgument(detail=f"{name} must be at least {low}, not {value}")
    if value > high:
        raise InvalidArgument(detail=f"{name} must be at most {high}, not {value}")
    return value


def _seconds(value, name):
    """A number of seconds, 0 or more (``inf`` too), as an ``int`` or a ``float``: any
    real number is accepted (``Fraction``, ``Decimal``, numpy's scalars), a ``str`` or a
    ``bool`` is not."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a number of seconds, not bool")
    if isinstance(value, numbers.Integral):
        value = operator.index(value)
    elif isinstance(value, (numbers.Real, decimal.Decimal)):
        value = float(value)
    else:
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    if not value >= 0:  # also NaN
        raise InvalidArgument(detail=f"{name} must be >= 0 seconds, not {value}")
    return value


def _ms_ceil(seconds, limit):
    """Whole milliseconds, rounded up; anything past ``limit`` ms (hundreds of millions
    of years) is ``limit``. Infinity is ``limit`` too."""
    if seconds * 1000 >= limit:
        return limit
    return min(limit, int(-(-seconds * 1000 // 1)))


def _timeout_ms(timeout):
    """``None`` waits as long as it takes (-1), else whole milliseconds, rounded up."""
    if timeout is None:
        return -1
    return _ms_ceil(_seconds(timeout, "timeout"), _I64_MAX)


def _duration_ms(seconds, name):
    """A duration that must be positive (a TTL, an ack wait), in whole milliseconds
    rounded up, so that a tiny one is 1 ms rather than none."""
    seconds = _seconds(seconds, name)
    if seconds == 0:
        # memq's words: "a ttl must be longer than zero", "ack_wait must be ..."
        raise InvalidArgument(detail=f"{name} must be longer than zero")
    return _ms_ceil(seconds, _U64_MAX)


def _bytes_arg(data):
    """A pointer to ``data``'s bytes for one call (no copy for ``bytes``; the caller
    keeps the returned object alive until the call returns). Anything with the buffer
    protocol is accepted (``bytearray``, ``memoryview``, arrays); a ``str`` or an
    ``int`` is a ``TypeError``, not an encoding guess or a run of zero bytes."""
    if not isinstance(data, bytes):
        try:
            data = bytes(memoryview(data))
        except TypeError:
            raise TypeError(
                f"memq carries bytes: a bytes-like object is required, not {type(data).__name__}"
            ) from None
    if not data:
        return None, 0, data
    return ctypes.cast(c_char_p(data), POINTER(c_uint8)), len(data), data


def key_partition(key, partitions):
    """The partition memq routes ``key`` to among ``partitions`` (stable across runs and
    languages: the same routing as the Rust crates and the C ABI)."""
    buf, n, _keep = _bytes_arg(key)
    out = c_uint32()
    partitions = _int_arg(partitions, "partitions", 1, _U32_MAX)
    _check(_lib.memq_key_partition(buf, n, partitions, byref(out)), "key_partition")
    return out.value


Message = namedtuple("Message", "data offset partition timestamp_ns")
Message.__doc__ = (
    "A received message: its bytes (copied out), offset, partition, and timestamp in ns "
    "(None when the topic has no clock)."
)


def _meta_of(getter, handle):
    meta = _Meta()
    _check(getter(handle, byref(meta)), "meta")
    return meta


def _data_of(getter, handle, length):
    if length == 0:
        return b""
    ptr = POINTER(c_uint8)()
    _check(getter(handle, byref(ptr)), "data")
    return ctypes.string_at(ptr, length)


def _take_message(handle):
    try:
        meta = _meta_of(_lib.memq_message_get_meta, handle)
        data = _data_of(_lib.memq_message_data, handle, meta.len)
    finally:
        _lib.memq_message_free(handle)
    ts = meta.timestamp_ns if meta.has_timestamp else None
    return Message(data, meta.offset, meta.partition, ts)


def _recv(fn, handle, timeout, what):
    """One receive: a handle, or None on timeout; raises Closed / Lagged."""
    out = c_void_p()
    lagged = c_uint64()
    status = fn(handle, _timeout_ms(timeout), byref(out), byref(lagged))
    if status == OK:
        return out
    if status in (TIMEOUT, EMPTY):
        return None
    if status == LAGGED:
        raise Lagged(lagged.value)
    _check(status, what)
    return None


def _recv_many(fn, handle, max_count, timeout, what):
    """One batch receive: up to ``max_count`` handles (an empty list on timeout); raises
    Closed / Lagged as ``_recv``."""
    # A batch is an array of handles allocated here: a million is plenty.
    max_count = _int_arg(max_count, "max_count", 1, 1 << 20)
    out = (c_void_p * max_count)()
    count = c_size_t()
    lagged = c_uint64()
    status = fn(handle, _timeout_ms(timeout), out, max_count, byref(count), byref(lagged))
    if status == OK:
        return [out[i] for i in range(count.value)]
    if status in (TIMEOUT, EMPTY):
        return []
    if status == LAGGED:
        raise Lagged(lagged.value)
    _check(status, what)
    return []


def _wrap_all(handles, wrap, free):
    """Wraps every handle; if one fails, frees those not yet wrapped and re-raises."""
    done = []
    for i, h in enumerate(handles):
        try:
            done.append(wrap(h))
        except BaseException:
            for rest in handles[i + 1 :]:
                free(rest)
            raise
    return done


class Topic:
    """A topic: a bounded log of byte messages, in one or more partitions.

    ``overflow`` is ``"block"`` (publishers wait; nothing is lost), ``"drop_oldest"``
    or ``"reject"``. ``ttl`` (seconds) expires messages; ``timestamps`` stamps them
    without a TTL; ``release_on_read`` lets a message go once every reader has it.

    Readers do not keep the topic open: when the last ``Topic`` object goes away (or on
    ``close()``, or leaving a ``with`` block) the topic closes, and its readers drain what
    is retained and then stop, as in C.
    """

    def __init__(
        self,
        capacity=1024,
        partitions=1,
        overflow="block",
        ttl=None,
        timestamps=False,
        release_on_read=False,
    ):
        self._h = None
        config = _TopicConfig()
        _check(_lib.memq_topic_config_init(byref(config)), "topic config")
        # memq's rules: "topic capacity must be at least 1", "... at least 1 partition".
        config.capacity = _int_arg(capacity, "capacity", 1, _SIZE_MAX)
        config.partitions = _int_arg(partitions, "partitions", 1, _U32_MAX)
        if overflow not in OVERFLOW:
            raise InvalidArgument(detail=f"overflow must be one of {sorted(OVERFLOW)}")
        config.overflow = OVERFLOW[overflow]
        config.ttl_ms = 0 if ttl is None else _duration_ms(ttl, "ttl")
        config.flags = (TOPIC_TIMESTAMPS if timestamps else 0) | (
            TOPIC_RELEASE_ON_READ if release_on_read else 0
        )
        out = c_void_p()
        _check(_lib.memq_topic_new(byref(config), byref(out)), "topic")
        self._h = out

    def __del__(self):
        if self._h:
            _lib.memq_topic_free(self._h)
            self._h = None

    def publish(self, data, key=None, timeout=None):
        """Publishes ``data``; returns ``(partition, offset)``. With ``key`` the message
        goes to the key's partition. On a full ``block`` topic waits up to ``timeout``
        seconds (``None``: as long as it takes), then raises ``Timeout``; with
        ``timeout=0``, or on a full ``reject`` topic, raises ``Full`` at once."""
        buf, n, _keep = _bytes_arg(data)
        receipt = _Receipt()
        if key is None:
            status = _lib.memq_topic_publish(self._h, buf, n, _timeout_ms(timeout), byref(receipt))
        else:
            kbuf, kn, _keep_key = _bytes_arg(key)
            status = _lib.memq_topic_publish_keyed(
                self._h, kbuf, kn, buf, n, _timeout_ms(timeout), byref(receipt)
            )
        _check(status, "publish")
        return receipt.partition, receipt.offset

    def publish_batch(self, items, key=None, timeout=None):
        """Publishes ``items`` (byte strings) as one batch, all or nothing, to one
        partition (the key's with ``key``); returns ``(partition, first_offset)``. Waits
        for room for the whole batch as ``publish`` waits for one message. An empty batch
        publishes nothing and succeeds at once, as in Rust and C (``first_offset`` is the
        partition's next offset); a batch over the capacity is ``Full``."""
        kept = [_bytes_arg(item) for item in items]
        slices = (_Slice * max(1, len(kept)))()
        for i, (buf, n, _keep) in enumerate(kept):
            slices[i].data = buf
            slices[i].len = n
        receipt = _Receipt()
        ms = _timeout_ms(timeout)
        if key is None:
            status = _lib.memq_topic_publish_batch(
                self._h, slices, len(kept), ms, byref(receipt)
            )
        else:
            kbuf, kn, _keep_key = _bytes_arg(key)
            status = _lib.memq_topic_publish_batch_keyed(
                self._h, kbuf, kn, slices, len(kept), ms, byref(receipt)
            )
        _check(status, "publish_batch")
        return receipt.partition, receipt.offset

    def close(self):
        """Closes the topic: publishers get ``Closed``, readers drain and then stop."""
        _check(_lib.memq_topic_close(self._h), "close")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def stats(self):
        """The topic's counters, as a dict (see ``memq_topic_stats`` in memq.h)."""
        s = _TopicStats()
        _check(_lib.memq_topic_get_stats(self._h, byref(s)), "stats")
        return {name: getattr(s, name) for name, _ in s._fields_}

    def ack_group_stats(self, group):
        """An explicit-ack group's counters, as a dict."""
        s = _AckGroupStats()
        _check(
            _lib.memq_topic_get_ack_group_stats(self._h, _group_name(group), byref(s)),
            "ack group stats",
        )
        return {name: getattr(s, name) for name, _ in s._fields_}

    def subscribe(self, start="earliest", offset=0):
        """A broadcast subscriber: it reads every message, from ``start``."""
        return Subscriber(self, start, offset)

    def consumer(self, group, start="earliest", offset=0):
        """A member of consumer group ``group``: members share the messages."""
        return Consumer(self, group, start, offset)

    def ack_consumer(
        self,
        group,
        start="earliest",
        offset=0,
        ack_wait=None,
        max_deliveries=None,
        max_in_flight=None,
    ):
        """A member of explicit-ack group ``group``: each delivery is acked or nacked,
        and an unacked one comes again after ``ack_wait`` seconds."""
        return AckConsumer(self, group, start, offset, ack_wait, max_deliveries, max_in_flight)


def _start(start):
    if start not in START:
        raise InvalidArgument(detail=f"start must be one of {sorted(START)}")
    return START[start]


def _offset(offset):
    return _int_arg(offset, "offset", 0, _U64_MAX)


def _group_name(group):
    if not isinstance(group, str):
        raise TypeError(f"a group's name is a str, not {type(group).__name__}")
    if "\0" in group:
        raise InvalidArgument(detail="a group's name cannot contain NUL")
    return group.encode()


class _Reader:
    _recv_fn = None
    _free_fn = None
    _what = "recv"

    def __del__(self):
        self._free()

    def _free(self):
        """Frees the handle now (a group member leaves its group); only when no other
        thread uses this reader. Later calls raise ``MemqError`` (a null handle)."""
        h, self._h = getattr(self, "_h", None), None
        if h:
            type(self)._free_fn(h)

    def recv(self, timeout=None):
        """The next item (a ``Message``, or a ``Delivery`` from an ``AckConsumer``), or
        ``None`` if none came within ``timeout`` seconds (``None``: wait as long as it
        takes). ``Closed`` once the topic is closed and drained; ``Lagged`` after a gap."""
        cls = type(self)
        h = _recv(cls._recv_fn, self._h, timeout, self._what)
        return None if h is None else cls._wrap(h)

    def recv_many(self, max_count=256, timeout=None):
        """Up to ``max_count`` items in one call: waits up to ``timeout`` seconds for the
        first, then takes what is there now. An empty list on timeout; ``Closed`` once the
        topic is closed and drained; ``Lagged`` (never mixed into a batch) after a gap."""
        cls = type(self)
        handles = _recv_many(cls._recv_many_fn, self._h, max_count, timeout, "recv_many")
        return _wrap_all(handles, cls._wrap, cls._free_item)

    def __iter__(self):
        """Every message until the topic is closed and drained (lags are skipped)."""
        while True:
            try:
                msg = self.recv()
            except Lagged:
                continue
            except Closed:
                return
            yield msg


class Subscriber(_Reader):
    """A broadcast reader (``Topic.subscribe``)."""

    _recv_fn = _lib.memq_subscriber_recv
    _recv_many_fn = _lib.memq_subscriber_recv_many
    _free_fn = _lib.memq_subscriber_free
    _wrap = staticmethod(_take_message)
    _free_item = _lib.memq_message_free

    def __init__(self, topic, start, offset):
        self._h = None
        out = c_void_p()
        _check(
            _lib.memq_subscriber_new(topic._h, _start(start), _offset(offset), byref(out)), "subscribe"
        )
        self._h = out


class Consumer(_Reader):
    """A consumer group member (``Topic.consumer``)."""

    _recv_fn = _lib.memq_consumer_recv
    _recv_many_fn = _lib.memq_consumer_recv_many
    _free_fn = _lib.memq_consumer_free
    _wrap = staticmethod(_take_message)
    _free_item = _lib.memq_message_free

    def __init__(self, topic, group, start, offset):
        self._h = None
        out = c_void_p()
        _check(
            _lib.memq_consumer_new(
                topic._h, _group_name(group), _start(start), _offset(offset), byref(out)
            ),
            "consumer",
        )
        self._h = out


class Delivery:
    """A message from an explicit-ack group; settle it with ``ack`` or ``nack``."""

    def __init__(self, handle):
        self._h = handle
        try:
            meta = _meta_of(_lib.memq_delivery_get_meta, handle)
            self.data = _data_of(_lib.memq_delivery_data, handle, meta.len)
            n = c_uint32()
            _check(_lib.memq_delivery_deliveries(handle, byref(n)), "deliveries")
        except BaseException:
            _lib.memq_delivery_free(handle)
            self._h = None
            raise
        self.offset = meta.offset
        self.partition = meta.partition
        self.timestamp_ns = meta.timestamp_ns if meta.has_timestamp else None
        #: How many times this message has been delivered, this time included.
        self.deliveries = n.value

    def ack(self):
        """Done: it will not be delivered again."""
        _check(_lib.memq_delivery_ack(self._h), "ack")

    def nack(self, delay=None):
        """Not done: it goes back to the group to be delivered again (after ``delay``
        seconds if given, else after the group's backoff)."""
        if delay is None:
            _check(_lib.memq_delivery_nack(self._h), "nack")
        else:
            ms = _ms_ceil(_seconds(delay, "delay"), _U64_MAX)
            _check(_lib.memq_delivery_nack_after(self._h, ms), "nack")

    def touch(self):
        """Still working on it: the lease now runs out ``ack_wait`` from now. Raises
        ``LeaseExpired`` if it already ran out (the message went back to the group)."""
        _check(_lib.memq_delivery_touch(self._h), "touch")

    def reject(self):
        """Never to be done: it is not delivered again, and is dropped and counted as
        dead-lettered (this binding does not set up dead-letter topics)."""
        _check(_lib.memq_delivery_reject(self._h), "reject")

    def __del__(self):
        if getattr(self, "_h", None):
            _lib.memq_delivery_free(self._h)
            self._h = None


class AckConsumer(_Reader):
    """A member of an explicit-ack group (``Topic.ack_consumer``)."""

    _recv_fn = _lib.memq_ack_consumer_recv
    _recv_many_fn = _lib.memq_ack_consumer_recv_many
    _free_fn = _lib.memq_ack_consumer_free
    _wrap = Delivery
    _free_item = _lib.memq_delivery_free

    def __init__(self, topic, group, start, offset, ack_wait, max_deliveries, max_in_flight):
        self._h = None
        config = _AckConfig()
        _check(_lib.memq_ack_config_init(byref(config)), "ack config")
        if ack_wait is not None:
            config.ack_wait_ms = _duration_ms(ack_wait, "ack_wait")
        # memq's rules: "max_deliveries must be at least 1 (unset means no limit)" (C's
        # 0 means unset, so 0 here would silently mean no limit), "max_in_flight must be
        # at least 1".
        if max_deliveries is not None:
            config.max_deliveries = _int_arg(max_deliveries, "max_deliveries", 1, _U32_MAX)
        if max_in_flight is not None:
            config.max_in_flight = _int_arg(max_in_flight, "max_in_flight", 1, _SIZE_MAX)
        out = c_void_p()
        _check(
            _lib.memq_ack_consumer_new(
                topic._h,
                _group_name(group),
                _start(start),
                _offset(offset),
                byref(config),
                byref(out),
            ),
            "ack consumer",
        )
        self._h = out


# ---- durable topics ----------------------------------------------------------------------

DurableReceipt = namedtuple("DurableReceipt", "partition offset count durable")
DurableReceipt.__doc__ = (
    "Where a durable publish landed; ``durable``: the record was on the disk when the "
    "publish returned (always under sync='always', never under the others)."
)

DurableMessage = namedtuple("DurableMessage", "data key offset partition timestamp_ms")
DurableMessage.__doc__ = (
    "A message of a durable topic: its bytes, its key (bytes, or None), offset, "
    "partition, and when it was published (ms since the UNIX epoch)."
)


def _durable_fields(meta_fn, data_fn, key_fn, handle):
    """(meta, data, key) of a durable message or delivery handle (copied out)."""
    meta = _meta_of_durable(meta_fn, handle)
    data = _data_of(data_fn, handle, meta.len)
    key = None
    if meta.has_key:
        key = _data_of(key_fn, handle, meta.key_len)
    return meta, data, key


def _meta_of_durable(getter, handle):
    meta = _DurableMeta()
    _check(getter(handle, byref(meta)), "meta")
    return meta


def _take_durable_message(handle):
    try:
        meta, data, key = _durable_fields(
            _lib.memq_durable_message_get_meta,
            _lib.memq_durable_message_data,
            _lib.memq_durable_message_key,
            handle,
        )
    finally:
        _lib.memq_durable_message_free(handle)
    return DurableMessage(data, key, meta.offset, meta.partition, meta.timestamp_ms)


def _path_arg(path):
    """A directory path as bytes for C (``str``, ``bytes`` or ``os.PathLike``)."""
    try:
        path = os.fsencode(path)
    except TypeError:
        raise TypeError(f"a path is a str, bytes or os.PathLike, not {type(path).__name__}") from None
    if b"\0" in path:
        raise InvalidArgument(detail="a path cannot contain NUL")
    return path


def _optional_limit(value, name, high, scale=None):
    """A retention limit: None (no limit) or a positive number (of ``scale``d units)."""
    if value is None:
        return 0
    if scale is not None:
        return _duration_ms(value, name)
    return _int_arg(value, name, 1, high)


class DurableTopic:
    """A durable topic: a topic whose messages, offsets, group positions and acks live in
    directory ``path``, and survive a restart of the process (docs/DURABILITY.md).

    ``capacity`` messages per partition are cached in memory; subscribers read older ones
    from disk. ``partitions`` is fixed when the directory is created. ``sync`` is
    ``"always"`` (a publish returns once on the disk), ``"interval"`` (synced every
    ``sync_interval`` seconds) or ``"never"`` (the OS decides). Retention (none by
    default): ``max_bytes`` and ``max_segments`` per partition, under ``overflow``
    (``"block"``: publishers wait for subscribers, ``"reject"``: ``Full``,
    ``"drop_oldest"``: the oldest segments go), and ``max_age`` seconds.

    One owner per directory: ``Locked`` while another ``DurableTopic`` (or a reader of
    one) has it open. ``close()`` (or leaving a ``with`` block) closes the topic and
    releases this handle; the directory is free again once its readers are closed too::

        with memq.DurableTopic("/var/lib/app/orders") as topic:
            topic.publish(b"order 1", key=b"customer-7")
            with topic.group("billing", ack_wait=30) as billing:
                delivery = billing.recv(timeout=1)
                delivery.ack()
    """

    def __init__(
        self,
        path,
        capacity=1024,
        partitions=1,
        overflow="block",
        sync="always",
        sync_interval=None,
        segment_bytes=None,
        max_bytes=None,
        max_age=None,
        max_segments=None,
        verify_on_open=False,
        repair=False,
    ):
        self._h = None
        config = _TopicConfig()
        _check(_lib.memq_topic_config_init(byref(config)), "topic config")
        config.capacity = _int_arg(capacity, "capacity", 1, _SIZE_MAX)
        config.partitions = _int_arg(partitions, "partitions", 1, _U32_MAX)
        if overflow not in OVERFLOW:
            raise InvalidArgument(detail=f"overflow must be one of {sorted(OVERFLOW)}")
        config.overflow = OVERFLOW[overflow]
        durable = _DurableConfig()
        _check(_lib.memq_durable_config_init(byref(durable)), "durable config")
        if sync not in SYNC:
            raise InvalidArgument(detail=f"sync must be one of {sorted(SYNC)}")
        durable.sync = SYNC[sync]
        if sync == "interval":
            if sync_interval is None:
                raise InvalidArgument(detail="sync='interval' needs a sync_interval in seconds")
            durable.sync_interval_ms = _duration_ms(sync_interval, "sync_interval")
        elif sync_interval is not None:
            raise InvalidArgument(detail="sync_interval is only for sync='interval'")
        if segment_bytes is not None:
            durable.segment_bytes = _int_arg(segment_bytes, "segment_bytes", 1, _U64_MAX)
        durable.retention_max_bytes = _optional_limit(max_bytes, "max_bytes", _U64_MAX)
        durable.retention_max_age_ms = _optional_limit(max_age, "max_age", _U64_MAX, "s")
        durable.retention_max_segments = _optional_limit(max_segments, "max_segments", _SIZE_MAX)
        durable.flags = (DURABLE_VERIFY_ON_OPEN if verify_on_open else 0) | (
            DURABLE_REPAIR if repair else 0
        )
        out = c_void_p()
        _check(
            _lib.memq_durable_open(_path_arg(path), byref(config), byref(durable), byref(out)),
            "durable topic",
        )
        self._h = out
        self.path = path
        self.partitions = config.partitions

    def __del__(self):
        self.close()

    def _handle(self):
        if not self._h:
            raise Closed(CLOSED, "durable topic", "this DurableTopic was closed")
        return self._h

    def close(self):
        """Closes the topic (publishing raises ``Closed``; readers drain what was
        published, then see ``Closed``) and releases this handle. What is on disk stays."""
        h, self._h = getattr(self, "_h", None), None
        if h:
            _lib.memq_durable_topic_close(h)
            _lib.memq_durable_topic_free(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def publish(self, data, key=None, partition=None, wait=True):
        """Publishes ``data`` (bytes-like): with ``key`` (routed by memq's key hash, kept
        with the message) or to ``partition``, else to the next partition in turn.
        Returns a ``DurableReceipt``. ``wait=False`` does not wait for room under a
        retention limit with overflow "block" (``Full`` instead); either way, under
        sync="always" it waits for the disk."""
        if key is not None and partition is not None:
            raise InvalidArgument(detail="give a key or a partition, not both")
        buf, n, _keep = _bytes_arg(data)
        timeout = 0 if not wait else -1
        receipt = _DurableReceipt()
        h = self._handle()
        if key is not None:
            kbuf, kn, _kkeep = _bytes_arg(key)
            status = _lib.memq_durable_publish_keyed(h, kbuf, kn, buf, n, timeout, byref(receipt))
        elif partition is not None:
            p = _int_arg(partition, "partition", 0, _U32_MAX)
            status = _lib.memq_durable_publish_to(h, p, buf, n, timeout, byref(receipt))
        else:
            status = _lib.memq_durable_publish(h, buf, n, timeout, byref(receipt))
        _check(status, "publish")
        return DurableReceipt(receipt.partition, receipt.offset, receipt.count, receipt.durable)

    def next_offset(self, partition=0):
        """The offset the next message of ``partition`` gets."""
        out = c_uint64()
        p = _int_arg(partition, "partition", 0, _U32_MAX)
        _check(_lib.memq_durable_topic_next_offset(self._handle(), p, byref(out)), "next_offset")
        return out.value

    def start_offset(self, partition=0):
        """The oldest offset ``partition`` keeps on disk."""
        out = c_uint64()
        p = _int_arg(partition, "partition", 0, _U32_MAX)
        _check(_lib.memq_durable_topic_start_offset(self._handle(), p, byref(out)), "start_offset")
        return out.value

    def subscribe(self, start="earliest", offset=0):
        """A subscriber reading every message from ``start`` (``"earliest"``: the oldest
        kept on disk, however much more than memory holds)."""
        return DurableSubscriber(self, start, offset)

    def group(self, name, start="earliest", offset=0, ack_wait=None, max_deliveries=None, commit_every=None):
        """A member of durable group ``name``. Without ``ack_wait`` a plain group (a
        member's next receive settles its previous message); with it, explicit acks:
        ``recv`` returns ``DurableDelivery`` objects to ``ack`` or ``nack``, and one not
        acked within ``ack_wait`` seconds comes again. The group's committed offsets are
        written every ``commit_every`` settlements (default 256), on ``commit()`` and
        when its last member closes; after a restart, what was settled never comes back
        and what was not comes again."""
        return DurableConsumer(self, name, start, offset, ack_wait, max_deliveries, commit_every)


class _DurableReader:
    _free_fn = None

    def __del__(self):
        self.close()

    def close(self):
        """Frees the handle now (a group member leaves its group; the directory is
        released once the topic and its readers are closed). Only when no other thread
        uses this reader."""
        h, self._h = getattr(self, "_h", None), None
        if h:
            type(self)._free_fn(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _recv(self, fn, timeout, what):
        if not self._h:
            raise Closed(CLOSED, what, "this reader was closed")
        return _recv(fn, self._h, timeout, what)

    def __iter__(self):
        """Every message until the topic is closed and drained (lags are skipped)."""
        while True:
            try:
                item = self.recv()
            except Lagged:
                continue
            except Closed:
                return
            yield item


class DurableSubscriber(_DurableReader):
    """A subscriber of a durable topic (``DurableTopic.subscribe``)."""

    _free_fn = _lib.memq_durable_subscriber_free

    def __init__(self, topic, start, offset):
        self._h = None
        out = c_void_p()
        _check(
            _lib.memq_durable_subscriber_new(
                topic._handle(), _start(start), _offset(offset), byref(out)
            ),
            "subscribe",
        )
        self._h = out

    def recv(self, timeout=None):
        """The next ``DurableMessage``, or ``None`` if none came within ``timeout``
        seconds (``None``: wait as long as it takes). ``Closed`` once the topic is closed
        and everything was read; ``Lagged`` if retention deleted messages first."""
        h = self._recv(_lib.memq_durable_subscriber_recv, timeout, "recv")
        return None if h is None else _take_durable_message(h)


class DurableDelivery:
    """A message of a durable group with explicit acks; settle it with ``ack`` or
    ``nack``. Dropped unsettled, it comes again once its lease (``ack_wait``) ends."""

    def __init__(self, handle):
        self._h = handle
        try:
            meta, self.data, self.key = _durable_fields(
                _lib.memq_durable_delivery_get_meta,
                _lib.memq_durable_delivery_data,
                _lib.memq_durable_delivery_key,
                handle,
            )
            n = c_uint32()
            _check(_lib.memq_durable_delivery_deliveries(handle, byref(n)), "deliveries")
        except BaseException:
            _lib.memq_durable_delivery_free(handle)
            self._h = None
            raise
        self.offset = meta.offset
        self.partition = meta.partition
        self.timestamp_ms = meta.timestamp_ms
        #: How many times this message has been delivered, this time included.
        self.deliveries = n.value

    def ack(self):
        """Done: never delivered again, across restarts too once the group's state is
        written. ``LeaseExpired`` if it was acked or nacked already."""
        _check(_lib.memq_durable_delivery_ack(self._h), "ack")

    def nack(self):
        """Not done: delivered again at once, to any member (dead-lettered after
        ``max_deliveries``)."""
        _check(_lib.memq_durable_delivery_nack(self._h), "nack")

    def __del__(self):
        if getattr(self, "_h", None):
            _lib.memq_durable_delivery_free(self._h)
            self._h = None


class DurableConsumer(_DurableReader):
    """A member of a durable group (``DurableTopic.group``)."""

    _free_fn = _lib.memq_durable_consumer_free

    def __init__(self, topic, name, start, offset, ack_wait, max_deliveries, commit_every):
        self._h = None
        config = _DurableGroupConfig()
        _check(_lib.memq_durable_group_config_init(byref(config)), "group config")
        self.acked = ack_wait is not None
        if self.acked:
            config.ack_wait_ms = _duration_ms(ack_wait, "ack_wait")
        if max_deliveries is not None:
            if not self.acked:
                raise InvalidArgument(detail="max_deliveries needs explicit acks (an ack_wait)")
            config.max_deliveries = _int_arg(max_deliveries, "max_deliveries", 1, _U32_MAX)
        if commit_every is not None:
            config.commit_every = _int_arg(commit_every, "commit_every", 1, _U32_MAX)
        out = c_void_p()
        _check(
            _lib.memq_durable_consumer_new(
                topic._handle(),
                _group_name(name),
                _start(start),
                _offset(offset),
                byref(config),
                byref(out),
            ),
            "group",
        )
        self._h = out
        self.name = name
        self._partitions = topic.partitions

    def recv(self, timeout=None):
        """The next item: a ``DurableMessage`` in a plain group, a ``DurableDelivery``
        with explicit acks; ``None`` if none came within ``timeout`` seconds (``None``:
        wait as long as it takes). ``Closed`` once the topic is closed and the group
        drained."""
        if self.acked:
            h = self._recv(_lib.memq_durable_consumer_recv_delivery, timeout, "recv")
            return None if h is None else DurableDelivery(h)
        h = self._recv(_lib.memq_durable_consumer_recv, timeout, "recv")
        return None if h is None else _take_durable_message(h)

    def commit(self):
        """Writes the group's committed offsets to disk now (an fsync)."""
        _check(_lib.memq_durable_consumer_commit(self._h), "commit")

    def committed(self, partition=0):
        """``(committed, on_disk)`` of ``partition``: the oldest offset not settled, and
        the committed offset last written to disk (where a restart goes on)."""
        c, d = c_uint64(), c_uint64()
        p = _int_arg(partition, "partition", 0, _U32_MAX)
        _check(_lib.memq_durable_consumer_committed(self._h, p, byref(c), byref(d)), "committed")
        return c.value, d.value

    def stats(self):
        """The group's counters, as a dict."""
        s = _DurableGroupStats()
        _check(_lib.memq_durable_consumer_get_stats(self._h, byref(s)), "stats")
        return {name: getattr(s, name) for name, _ in s._fields_}


class Pool:
    """Worker threads that share the messages of ``topic``: each is a member of the
    explicit-ack group ``group`` and calls ``handler(data)`` for every message it gets.

    A handler that returns acks the message; if ``results`` is a ``Topic`` and the
    handler returned something other than ``None``, that (bytes) is published to
    ``results`` first. A handler that raises (anything), or whose result cannot be
    published, nacks the message, which comes again (to any worker) until
    ``max_deliveries`` deliveries, after which memq drops it and counts it as
    dead-lettered. Handler errors never end a worker.

    Delivery is at least once: nothing is lost, and a message comes again when its
    worker does not settle it within ``ack_wait`` seconds. Workers fetch up to ``batch``
    messages at a time and, between jobs, renew every lease of the batch still waiting
    whenever an eighth of ``ack_wait`` has passed since the last renewal: every job starts
    with at least seven eighths of ``ack_wait`` on its own lease and on those behind it,
    wherever it sits in its batch. So ``ack_wait`` must be longer than the handler's
    slowest call by an eighth: then no lease runs out, whatever the other jobs take and
    however loaded the machine. A worker whose leases run out anyway (a slower call)
    fetches fewer next time; ``stats()["expired"]`` counts the leases that ran out.

    Idle workers wait inside memq with the GIL released and cost no CPU. The workers end
    once the topic is closed and everything in it is settled; ``join`` waits for that.
    They are daemon threads: a program that wants every job done closes the topic and
    calls ``join`` before it exits.
    """

    def __init__(
        self,
        topic,
        group,
        handler,
        workers=4,
        results=None,
        max_deliveries=3,
        ack_wait=30.0,
        batch=64,
        _clock=time.monotonic,
    ):
        workers = _int_arg(workers, "workers", 1, 1024)
        self._batch = _int_arg(batch, "batch", 1, 1 << 16)
        # Seconds as memq holds them (whole ms, clamped): a float, even for a huge int.
        self._ack_wait = _duration_ms(ack_wait, "ack_wait") / 1000
        if not callable(handler):
            raise TypeError("handler must be callable")
        self._handler = handler
        self._results = results
        # The clock leases are renewed by: memq's own (monotonic); tests drive it by hand.
        self._clock = _clock
        self._lock = threading.Lock()
        self._counts = {"processed": 0, "failed": 0, "results": 0, "expired": 0, "lagged": 0}
        self._errors = []
        # Members join before any thread starts, so none misses the first messages.
        self._members = [
            topic.ack_consumer(
                group,
                ack_wait=ack_wait,
                max_deliveries=max_deliveries,
                # The group's limit per partition, shared by its members: room for every
                # worker's batch.
                max_in_flight=self._batch * workers,
            )
            for _ in range(workers)
        ]
        self._threads = [
            threading.Thread(
                target=self._work, args=(i,), name=f"memq-pool-{group}-{i}", daemon=True
            )
            for i in range(workers)
        ]
        for t in self._threads:
            t.start()

    def _record(self, error, always=False):
        with self._lock:
            if always or len(self._errors) < 100:
                self._errors.append(error)

    def _add(self, counts):
        with self._lock:
            for name, n in counts.items():
                self._counts[name] += n

    def _work(self, i):
        member = self._members[i]
        fetch = self._batch
        try:
            while True:
                fetched_at = self._clock()
                try:
                    deliveries = member.recv_many(fetch)
                except Lagged as e:  # a drop_oldest topic evicted messages unread
                    self._add({"lagged": e.missed})
                    continue
                except Closed:
                    return
                expired = self._run(deliveries, fetched_at)
                # Leases that ran out mean the batch took too long: fetch fewer.
                fetch = max(1, fetch // 2) if expired else min(self._batch, fetch * 2)
        except BaseException as e:  # memq itself failed: recorded, and the worker ends
            self._record(e, always=True)
        finally:
            # The member leaves the group now, not when the Pool is collected, so its
            # partitions and unsettled deliveries go to the workers still running.
            self._members[i] = None
            member._free()

    def _settle(self, settle):
        """Acks or nacks: ``"done"``, ``"expired"`` (the lease had run out) or
        ``"error"`` (recorded)."""
        try:
            settle()
        except LeaseExpired:
            return "expired"
        except MemqError as e:
            self._record(e)
            return "error"
        return "done"

    def _run(self, deliveries, fetched_at):
        """Handles one batch; returns how many leases ran out.

        ``fetched_at`` is the clock read before the fetch: every lease of the batch began
        at or after it. The waiting leases of a batch all share one renewal time. Before
        each job, if an eighth of ``ack_wait`` has passed since then, every lease still
        waiting (the job about to run included) is renewed, so each job starts with at
        least seven eighths of ``ack_wait`` on its own lease and on every lease behind it,
        wherever it sits in the batch and however long the jobs before it took. A job
        shorter than that therefore never lets a lease run out: not its own, and not
        those of the jobs still waiting. Renewing costs one round of touches per eighth
        of ``ack_wait`` at most, none for a batch that is done sooner.
        """
        processed = failed = published = expired = 0
        handler, results, ack_wait, clock = self._handler, self._results, self._ack_wait, self._clock
        renew_after = ack_wait / 8
        renewed = fetched_at  # no waiting lease runs out before this + ack_wait
        lost = set()  # indices of deliveries whose lease ran out before their turn
        try:
            for n, d in enumerate(deliveries):
                now = clock()
                if now - renewed >= renew_after:
                    renewed = now  # read before the touches: each renews from later on
                    for m in range(n, len(deliveries)):
                        if m not in lost:
                            try:
                                deliveries[m].touch()
                            except LeaseExpired:
                                lost.add(m)
                if n in lost:
                    expired += 1
                    continue
                try:
                    out = handler(d.data)
                    if out is not None and results is not None:
                        results.publish(out)
                        published += 1
                except BaseException as e:  # counted, and the message comes again
                    self._record(e)
                    outcome = self._settle(d.nack)
                    failed += outcome == "done"
                    expired += outcome == "expired"
                    continue
                outcome = self._settle(d.ack)
                processed += outcome == "done"
                expired += outcome == "expired"
        finally:
            self._add(
                {"processed": processed, "failed": failed, "results": published, "expired": expired}
            )
            # A recorded exception's traceback keeps this frame: let the batch go.
            deliveries.clear()
            d = None  # noqa: F841
        return expired

    def join(self, timeout=None):
        """Waits until every worker has ended (the topic closed and drained); ``False``
        if ``timeout`` seconds passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in self._threads:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    def stats(self):
        """Messages processed (acked), handler failures (nacked), results published,
        leases that ran out (the message came again), and messages missed to eviction
        (``lagged``, on a ``drop_oldest`` topic)."""
        with self._lock:
            return dict(self._counts)

    def errors(self):
        """The first (up to 100) exceptions the handler raised, or memq raised to a
        worker."""
        with self._lock:
            return list(self._errors)
