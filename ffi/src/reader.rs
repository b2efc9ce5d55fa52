//! Reading from C: broadcast subscribers and consumer-group members, each behind a handle
//! with a lock (so that a handle shared between threads by mistake serialises instead of
//! racing), receiving one message, a batch, or a copy into the caller's buffer.

use core::ffi::c_char;
use core::time::Duration;
use std::sync::Mutex;

use bytes::Bytes;
use memq_core::{block_on, block_on_timeout, Consumer, Message, Subscriber, TryRecvIfError};

use crate::boundary::{
    batch_out, borrow, get, guard, guard_void, into_handle, lock, name, optional_out, out, release,
};
use crate::message::{
    copy_out, give_message, give_meta, memq_message, memq_message_meta, too_small,
};
use crate::status::{memq_status, with_detail, Miss};
use crate::topic::{memq_start, memq_topic};
use crate::wait::Wait;

/// The receive operations shared by subscribers and group members.
pub(crate) trait Source {
    fn try_one(&mut self) -> Result<Message<Bytes>, Miss>;
    fn wait_one(&mut self, timeout: Option<Duration>) -> Result<Message<Bytes>, Miss>;
    fn try_many(&mut self, buf: &mut Vec<Message<Bytes>>, limit: usize) -> Result<usize, Miss>;
    fn wait_many(
        &mut self,
        buf: &mut Vec<Message<Bytes>>,
        limit: usize,
        timeout: Option<Duration>,
    ) -> Result<usize, Miss>;

    /// Receives the next message for a buffer of `cap` bytes. This default takes the
    /// message whatever its size ([`Fit::Taken`]): a subscriber's message is its own, and
    /// one too large is kept back by its handle for the next receive.
    fn one_that_fits(&mut self, wait: Wait, cap: usize) -> Result<Fit, Miss> {
        let _ = cap;
        match wait {
            Wait::Try => self.try_one(),
            Wait::Forever => self.wait_one(None),
            Wait::For(d) => self.wait_one(Some(d)),
        }
        .map(Fit::Taken)
    }
}

/// What a receive for a buffer of a given size got.
#[derive(Debug)]
pub(crate) enum Fit {
    /// A message, taken from the source (too large for the buffer only where the source
    /// cannot leave a message where it is).
    Taken(Message<Bytes>),
    /// The next message's payload is this many bytes, too many for the buffer, and the
    /// message was left where it was.
    Left(usize),
}

macro_rules! source {
    ($ty:ident $(, $($more:tt)+)?) => {
        impl Source for $ty<Bytes> {
            $($($more)+)?

            fn try_one(&mut self) -> Result<Message<Bytes>, Miss> {
                Ok(self.try_recv()?)
            }

            fn wait_one(&mut self, timeout: Option<Duration>) -> Result<Message<Bytes>, Miss> {
                match timeout {
                    None => Ok(self.recv_blocking()?),
                    Some(d) => Ok(self.recv_blocking_timeout(d)?),
                }
            }

            fn try_many(
                &mut self,
                buf: &mut Vec<Message<Bytes>>,
                limit: usize,
            ) -> Result<usize, Miss> {
                Ok(self.try_recv_many(buf, limit)?)
            }

            fn wait_many(
                &mut self,
                buf: &mut Vec<Message<Bytes>>,
                limit: usize,
                timeout: Option<Duration>,
            ) -> Result<usize, Miss> {
                match timeout {
                    None => Ok(self.recv_many_blocking(buf, limit)?),
                    Some(d) => Ok(self.recv_many_blocking_timeout(buf, limit, d)?),
                }
            }
        }
    };
}

source!(Subscriber);
source!(
    Consumer,
    /// A group member takes a message only if it fits: one too large stays in the
    /// group, for the next receive of any member (nothing held back, nothing lost).
    fn one_that_fits(&mut self, wait: Wait, cap: usize) -> Result<Fit, Miss> {
        let mut len = 0;
        let fits = |v: &Bytes| {
            len = v.len();
            len <= cap
        };
        let got = match wait {
            Wait::Try => self.try_recv_if(fits),
            Wait::Forever => block_on(self.recv_if(fits)).map_err(TryRecvIfError::from),
            Wait::For(d) => match block_on_timeout(self.recv_if(fits), d) {
                Some(r) => r.map_err(TryRecvIfError::from),
                None => return Err(Miss::Timeout),
            },
        };
        match got {
            Ok(m) => Ok(Fit::Taken(m)),
            Err(TryRecvIfError::Declined) => Ok(Fit::Left(len)),
            Err(TryRecvIfError::Empty) => Err(Miss::Empty),
            Err(TryRecvIfError::Lagged(n)) => Err(Miss::Lagged(n)),
            Err(_) => Err(Miss::Closed),
        }
    }
);

/// A subscriber or group member with its reusable batch buffer, and a message that a
/// receive into a too-small buffer kept back for the next receive.
#[derive(Debug)]
pub(crate) struct Reader<S> {
    source: S,
    batch: Vec<Message<Bytes>>,
    pending: Option<Message<Bytes>>,
}

impl<S: Source> Reader<S> {
    fn new(source: S) -> Mutex<Self> {
        Mutex::new(Self {
            source,
            batch: Vec::new(),
            pending: None,
        })
    }

    fn recv(&mut self, wait: Wait) -> Result<Message<Bytes>, Miss> {
        if let Some(m) = self.pending.take() {
            return Ok(m);
        }
        match wait {
            Wait::Try => self.source.try_one(),
            Wait::Forever => self.source.wait_one(None),
            Wait::For(d) => self.source.wait_one(Some(d)),
        }
    }

    /// Receives the next message for a buffer of `cap` bytes (see
    /// [`Source::one_that_fits`]); a message kept back by an earlier one comes first.
    fn recv_fitting(&mut self, wait: Wait, cap: usize) -> Result<Fit, Miss> {
        match self.pending.take() {
            Some(m) => Ok(Fit::Taken(m)),
            None => self.source.one_that_fits(wait, cap),
        }
    }

    /// Receives up to `limit` (at least 1) messages into `self.batch`.
    fn recv_many(&mut self, limit: usize, wait: Wait) -> Result<(), Miss> {
        debug_assert!(limit > 0);
        self.batch.clear();
        if let Some(m) = self.pending.take() {
            self.batch.push(m);
            return Ok(());
        }
        let n = match wait {
            Wait::Try => self.source.try_many(&mut self.batch, limit)?,
            Wait::Forever => self.source.wait_many(&mut self.batch, limit, None)?,
            Wait::For(d) => self.source.wait_many(&mut self.batch, limit, Some(d))?,
        };
        // A waiting batch receive returns nothing only once closed and drained.
        match n {
            0 if wait == Wait::Try => Err(Miss::Empty),
            0 => Err(Miss::Closed),
            _ => Ok(()),
        }
    }
}

/// Reports a miss, with the lag count for `MEMQ_STATUS_LAGGED`.
///
/// # Safety
///
/// `lagged_out` is NULL or valid for writing a `uint64_t`.
pub(crate) unsafe fn missed(miss: Miss, lagged_out: *mut u64) -> memq_status {
    if let (Miss::Lagged(n), Some(lagged_out)) = (miss, optional_out(lagged_out)) {
        // SAFETY: non-NULL, and valid for writes by this function's contract.
        unsafe { lagged_out.write(n) };
    }
    miss.status()
}

/// A handle around a reader: `memq_subscriber` or `memq_consumer`.
trait ReaderHandle {
    type Source: Source;

    /// The handle's argument name, for `memq_last_error_message`.
    const NAME: &'static str;

    fn reader(&self) -> &Mutex<Reader<Self::Source>>;
}

impl ReaderHandle for memq_subscriber {
    type Source = Subscriber<Bytes>;

    const NAME: &'static str = "subscriber";

    fn reader(&self) -> &Mutex<Reader<Self::Source>> {
        &self.reader
    }
}

impl ReaderHandle for memq_consumer {
    type Source = Consumer<Bytes>;

    const NAME: &'static str = "consumer";

    fn reader(&self) -> &Mutex<Reader<Self::Source>> {
        &self.reader
    }
}

/// # Safety
///
/// As the `memq_*_recv` exports, with `handle` NULL or a live handle.
unsafe fn recv<H: ReaderHandle>(
    handle: *const H,
    timeout_ms: i64,
    message_out: *mut *mut memq_message,
    lagged_out: *mut u64,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let reader = unsafe { borrow(handle, H::NAME) }?.reader();
        let message_out = out(message_out, "message_out")?;
        let mut reader = lock(reader)?;
        match reader.recv(Wait::from_ms(timeout_ms)) {
            Ok(m) => {
                drop(reader);
                // SAFETY: the caller passes a pointer valid for writes.
                unsafe { give_message(message_out, m) };
                Ok(())
            }
            // SAFETY: the caller passes NULL or a pointer valid for writes.
            Err(miss) => Err(unsafe { missed(miss, lagged_out) }),
        }
    })
}

/// # Safety
///
/// As the `memq_*_recv_many` exports, with `handle` NULL or a live handle.
unsafe fn recv_many<H: ReaderHandle>(
    handle: *const H,
    timeout_ms: i64,
    messages: *mut *mut memq_message,
    capacity: usize,
    count_out: *mut usize,
    lagged_out: *mut u64,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let reader = unsafe { borrow(handle, H::NAME) }?.reader();
        let count_out = batch_out(messages, "messages", capacity, count_out)?;
        let mut reader = lock(reader)?;
        if let Err(miss) = reader.recv_many(capacity, Wait::from_ms(timeout_ms)) {
            // SAFETY: the caller passes NULL or a pointer valid for writes.
            return Err(unsafe { missed(miss, lagged_out) });
        }
        let n = reader.batch.len();
        debug_assert!(n > 0 && n <= capacity);
        for (i, m) in reader.batch.drain(..).enumerate() {
            let handle = into_handle(memq_message { message: m });
            // SAFETY: the caller passes an array of `capacity` writable pointers, and
            // `i < n <= capacity`.
            unsafe { messages.add(i).write(handle) };
        }
        drop(reader);
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { count_out.write(n) };
        Ok(())
    })
}

/// # Safety
///
/// As the `memq_*_recv_into` exports, with `handle` NULL or a live handle.
unsafe fn recv_into<H: ReaderHandle>(
    handle: *const H,
    timeout_ms: i64,
    buf: *mut u8,
    buf_len: usize,
    len_out: *mut usize,
    meta_out: *mut memq_message_meta,
    lagged_out: *mut u64,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let reader = unsafe { borrow(handle, H::NAME) }?.reader();
        let len_out = out(len_out, "len_out")?;
        if buf.is_null() && buf_len > 0 {
            return Err(with_detail(
                memq_status::NullPointer,
                format_args!("buf is NULL with a length of {buf_len}"),
            ));
        }
        let mut reader = lock(reader)?;
        let m = match reader.recv_fitting(Wait::from_ms(timeout_ms), buf_len) {
            Ok(Fit::Taken(m)) => m,
            // Too small, and left where it was (a group member's: still the group's).
            // SAFETY: the caller passes a `len_out` valid for writes.
            Ok(Fit::Left(needed)) => return Err(unsafe { too_small(needed, buf_len, len_out) }),
            // SAFETY: the caller passes NULL or a pointer valid for writes.
            Err(miss) => return Err(unsafe { missed(miss, lagged_out) }),
        };
        // SAFETY: the caller passes NULL or `buf_len` writable bytes, and a `len_out` valid
        // for writes.
        match unsafe { copy_out(m.value(), buf, buf_len, len_out) } {
            Ok(()) => {
                // SAFETY: the caller passes NULL or a pointer valid for writes.
                unsafe { give_meta(meta_out, &m) };
                Ok(())
            }
            Err(status) => {
                // Too small, and taken (a subscriber's own message): kept for the next
                // receive (dropped if the handle is freed first, as the docs say).
                reader.pending = Some(m);
                Err(status)
            }
        }
    })
}

/// A broadcast reader of a topic: receives every message published to the partitions it
/// reads, from its own position. Free it with `memq_subscriber_free`.
///
/// Under `MEMQ_OVERFLOW_BLOCK` a subscriber that does not read holds publishers back, so
/// free subscribers you no longer read.
#[derive(Debug)]
pub struct memq_subscriber {
    reader: Mutex<Reader<Subscriber<Bytes>>>,
}

/// A member of a consumer group: receives the messages of the group's partitions that no
/// other member received. Free it with `memq_consumer_free`; the group and its position
/// remain on the topic.
#[derive(Debug)]
pub struct memq_consumer {
    reader: Mutex<Reader<Consumer<Bytes>>>,
}

/// Subscribes to every partition of `topic`, starting at `start` (a `memq_start`;
/// `offset` is read only for `MEMQ_START_OFFSET`), and writes the new subscriber to
/// `*subscriber_out`.
///
/// Returns `MEMQ_STATUS_INVALID_ARGUMENT` for an unknown `start`,
/// `MEMQ_STATUS_OUT_OF_RANGE` for an offset past the end of a partition,
/// `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: may be called from any thread, concurrently with any call on `topic`
/// except `memq_topic_free(topic)`.
///
/// # Safety
///
/// `topic` is NULL or a live topic handle; `subscriber_out` is NULL or valid for writing
/// a pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_subscriber_new(
    topic: *const memq_topic,
    start: u32,
    offset: u64,
    subscriber_out: *mut *mut memq_subscriber,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let topic = unsafe { borrow(topic, "topic") }?;
        let subscriber_out = out(subscriber_out, "subscriber_out")?;
        let sub = topic.topic.subscribe(memq_start::from_c(start, offset)?)?;
        let handle = into_handle(memq_subscriber {
            reader: Reader::new(sub),
        });
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { subscriber_out.write(handle) };
        Ok(())
    })
}

/// `memq_subscriber_new` for one partition only.
///
/// Returns `MEMQ_STATUS_OUT_OF_RANGE` if there is no such partition; otherwise as
/// `memq_subscriber_new`.
///
/// Thread safety: as `memq_subscriber_new`.
///
/// # Safety
///
/// As `memq_subscriber_new`.
#[no_mangle]
pub unsafe extern "C" fn memq_subscriber_new_partition(
    topic: *const memq_topic,
    partition: u32,
    start: u32,
    offset: u64,
    subscriber_out: *mut *mut memq_subscriber,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let topic = unsafe { borrow(topic, "topic") }?;
        let subscriber_out = out(subscriber_out, "subscriber_out")?;
        let start = memq_start::from_c(start, offset)?;
        let sub = topic.topic.subscribe_partition(partition, start)?;
        let handle = into_handle(memq_subscriber {
            reader: Reader::new(sub),
        });
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { subscriber_out.write(handle) };
        Ok(())
    })
}

/// Frees a subscriber: its hold on the topic is released. NULL does nothing.
///
/// Thread safety: no other call may use this subscriber during or after this one.
///
/// # Safety
///
/// `subscriber` is NULL or a live subscriber handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn memq_subscriber_free(subscriber: *mut memq_subscriber) {
    // SAFETY: the caller passes NULL or a handle from `memq_subscriber_new*`, and gives
    // it up.
    guard_void(|| unsafe { release(subscriber) });
}

/// Receives the next message and writes its handle to `*message_out` (free it with
/// `memq_message_free`). Waits up to `timeout_ms`: 0 does not wait, a negative value
/// waits as long as it takes.
///
/// Returns `MEMQ_STATUS_EMPTY` (nothing now, `timeout_ms == 0`), `MEMQ_STATUS_TIMEOUT`,
/// `MEMQ_STATUS_CLOSED` (closed and everything read), `MEMQ_STATUS_LAGGED` (messages were
/// missed; their number goes to `*lagged_out` unless it is NULL; the next receive
/// continues at the oldest retained one), `MEMQ_STATUS_NULL_POINTER`.
///
/// Thread safety: calls on one subscriber are serialised (a second thread waits for the
/// first call to finish); use one subscriber per thread to read in parallel. May run
/// concurrently with calls on the topic and on other readers. A receive waiting forever
/// returns once a message comes or the topic is closed (`memq_topic_close`).
///
/// # Safety
///
/// `subscriber` is NULL or a live subscriber handle; `message_out` is NULL or valid for
/// writing a pointer; `lagged_out` is NULL or valid for writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_subscriber_recv(
    subscriber: *const memq_subscriber,
    timeout_ms: i64,
    message_out: *mut *mut memq_message,
    lagged_out: *mut u64,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and out-parameters valid as this
    // function requires.
    unsafe { recv(subscriber, timeout_ms, message_out, lagged_out) }
}

/// Receives up to `capacity` messages: waits up to `timeout_ms` for the first (as
/// `memq_subscriber_recv`), then takes whatever else is available now. Writes their
/// handles to `messages[0]` .. `messages[*count_out - 1]` and their number (at least 1)
/// to `*count_out`. Free each message (or use `memq_message_free_many`).
///
/// Returns as `memq_subscriber_recv`, and `MEMQ_STATUS_INVALID_ARGUMENT` if `capacity`
/// is 0. A gap (`MEMQ_STATUS_LAGGED`) is never mixed into a batch: messages read before
/// it are returned first, the gap by the next call.
///
/// Thread safety: as `memq_subscriber_recv`.
///
/// # Safety
///
/// `subscriber` is NULL or a live subscriber handle; `messages` is NULL or points to
/// `capacity` writable pointers; `count_out` is NULL or valid for writing a `size_t`;
/// `lagged_out` is NULL or valid for writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_subscriber_recv_many(
    subscriber: *const memq_subscriber,
    timeout_ms: i64,
    messages: *mut *mut memq_message,
    capacity: usize,
    count_out: *mut usize,
    lagged_out: *mut u64,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and the array and out-parameters
    // valid as required.
    unsafe {
        recv_many(
            subscriber, timeout_ms, messages, capacity, count_out, lagged_out,
        )
    }
}

/// Receives the next message (as `memq_subscriber_recv`) and copies its payload into
/// `buf` (room for `buf_len` bytes): `*len_out` gets the payload's length and, unless
/// `meta_out` is NULL, `*meta_out` its metadata.
///
/// Returns `MEMQ_STATUS_BUFFER_TOO_SMALL` if the payload is longer than `buf_len`:
/// `*len_out` gets the length needed, and the message is kept in this subscriber for its
/// next receive (of any kind), which returns it. It has been read from the topic already:
/// freeing the subscriber before that receive drops it. On a retaining topic it stays in
/// the log for other readers, but on a `MEMQ_TOPIC_RELEASE_ON_READ` topic this
/// subscriber may have been its last reader, and it is then lost. So receive again (with
/// a larger buffer, or with `memq_subscriber_recv`, which has no size limit) before
/// freeing. `buf` may be NULL when `buf_len` is 0. Otherwise returns as
/// `memq_subscriber_recv`.
///
/// Thread safety: as `memq_subscriber_recv`.
///
/// # Safety
///
/// `subscriber` is NULL or a live subscriber handle; `buf` is NULL or valid for writing
/// `buf_len` bytes; `len_out` is NULL or valid for writing a `size_t`; `meta_out` is NULL
/// or valid for writing a `memq_message_meta`; `lagged_out` is NULL or valid for writing
/// a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_subscriber_recv_into(
    subscriber: *const memq_subscriber,
    timeout_ms: i64,
    buf: *mut u8,
    buf_len: usize,
    len_out: *mut usize,
    meta_out: *mut memq_message_meta,
    lagged_out: *mut u64,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and the buffer and out-parameters
    // valid as required.
    unsafe {
        recv_into(
            subscriber, timeout_ms, buf, buf_len, len_out, meta_out, lagged_out,
        )
    }
}

/// Writes how many published messages the subscriber has neither read nor been told it
/// missed (summed over its partitions) to `*lag_out`.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_subscriber_recv` (it waits while a receive on the same
/// subscriber is waiting).
///
/// # Safety
///
/// `subscriber` is NULL or a live subscriber handle; `lag_out` is NULL or valid for
/// writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_subscriber_lag(
    subscriber: *const memq_subscriber,
    lag_out: *mut u64,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(["subscriber", "lag_out"], subscriber, lag_out, |sub| {
            let reader = lock(&sub.reader)?;
            // A message kept back by `memq_subscriber_recv_into` is not read yet either.
            Ok(reader.source.lag() + u64::from(reader.pending.is_some()))
        })
    }
}

/// Joins the consumer group `group` of `topic` and writes the new member to
/// `*consumer_out`. A new group starts at `start` (a `memq_start`; `offset` is read only
/// for `MEMQ_START_OFFSET`); an existing group keeps its position (`start` must still be
/// a `memq_start` value, but its position is not used). Each message goes to exactly one
/// member of a group; on a partitioned topic each partition is read by one member,
/// rebalanced as members join and leave.
///
/// Returns `MEMQ_STATUS_INVALID_ARGUMENT` for an unknown `start` or a `group` that is not
/// UTF-8, `MEMQ_STATUS_OUT_OF_RANGE` for a new group's offset past the end of a
/// partition, `MEMQ_STATUS_GROUP_MODE_MISMATCH` if `group` is an explicit-ack group (see
/// `memq_ack_consumer_new`), `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_subscriber_new`.
///
/// # Safety
///
/// `topic` is NULL or a live topic handle; `group` is NULL or a NUL-terminated string;
/// `consumer_out` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_consumer_new(
    topic: *const memq_topic,
    group: *const c_char,
    start: u32,
    offset: u64,
    consumer_out: *mut *mut memq_consumer,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let topic = unsafe { borrow(topic, "topic") }?;
        // SAFETY: the caller passes NULL or a NUL-terminated string.
        let group = unsafe { name(group, "group") }?;
        let consumer_out = out(consumer_out, "consumer_out")?;
        let member = topic
            .topic
            .group(group, memq_start::from_c(start, offset)?)?;
        let handle = into_handle(memq_consumer {
            reader: Reader::new(member),
        });
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { consumer_out.write(handle) };
        Ok(())
    })
}

/// Frees a consumer: it leaves its group (its partitions go to the other members); the
/// group and its position remain. Nothing received is lost with it: a message that
/// `memq_consumer_recv_into` found too large for the buffer was not taken from the group,
/// and goes to the next receive of another member. Messages this member received are the
/// caller's (an automatic-commit group counted them delivered when they were received).
/// NULL does nothing.
///
/// Thread safety: no other call may use this consumer during or after this one.
///
/// # Safety
///
/// `consumer` is NULL or a live consumer handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn memq_consumer_free(consumer: *mut memq_consumer) {
    // SAFETY: the caller passes NULL or a handle from `memq_consumer_new`, and gives it
    // up.
    guard_void(|| unsafe { release(consumer) });
}

/// Receives the next message for this member; as `memq_subscriber_recv`.
/// `MEMQ_STATUS_CLOSED` comes once the topic is closed and the whole group has drained
/// (a member that finished early waits: a rebalance may still hand it messages).
///
/// Thread safety: as `memq_subscriber_recv`; use one consumer per thread for competing
/// consumers.
///
/// # Safety
///
/// As `memq_subscriber_recv`, with a live consumer handle.
#[no_mangle]
pub unsafe extern "C" fn memq_consumer_recv(
    consumer: *const memq_consumer,
    timeout_ms: i64,
    message_out: *mut *mut memq_message,
    lagged_out: *mut u64,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and out-parameters valid as this
    // function requires.
    unsafe { recv(consumer, timeout_ms, message_out, lagged_out) }
}

/// Receives a batch for this member; as `memq_subscriber_recv_many`.
///
/// Thread safety: as `memq_consumer_recv`.
///
/// # Safety
///
/// As `memq_subscriber_recv_many`, with a live consumer handle.
#[no_mangle]
pub unsafe extern "C" fn memq_consumer_recv_many(
    consumer: *const memq_consumer,
    timeout_ms: i64,
    messages: *mut *mut memq_message,
    capacity: usize,
    count_out: *mut usize,
    lagged_out: *mut u64,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and the array and out-parameters
    // valid as required.
    unsafe {
        recv_many(
            consumer, timeout_ms, messages, capacity, count_out, lagged_out,
        )
    }
}

/// Receives the next message for this member into the caller's buffer; as
/// `memq_subscriber_recv_into`, except for a message too large for the buffer: it is not
/// taken from the group at all. Then `MEMQ_STATUS_BUFFER_TOO_SMALL` is returned with the
/// length needed in `*len_out` (nothing else is written), and the message stays the
/// group's next, exactly where it was (the committed position, the delivered count and
/// `MEMQ_OVERFLOW_BLOCK` room unchanged): the next receive of this member or of any
/// other, of any kind, gets it, and freeing this member loses nothing. With `timeout_ms`
/// other than 0 the call waits for a message as `memq_consumer_recv` does, then returns
/// at once if it does not fit (another member waiting for messages is woken for it).
///
/// Thread safety: as `memq_consumer_recv`.
///
/// # Safety
///
/// As `memq_subscriber_recv_into`, with a live consumer handle.
#[no_mangle]
pub unsafe extern "C" fn memq_consumer_recv_into(
    consumer: *const memq_consumer,
    timeout_ms: i64,
    buf: *mut u8,
    buf_len: usize,
    len_out: *mut usize,
    meta_out: *mut memq_message_meta,
    lagged_out: *mut u64,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and the buffer and out-parameters
    // valid as required.
    unsafe {
        recv_into(
            consumer, timeout_ms, buf, buf_len, len_out, meta_out, lagged_out,
        )
    }
}

/// Writes the group's committed position (the next offset it delivers) in `partition` to
/// `*offset_out`.
///
/// Returns `MEMQ_STATUS_OUT_OF_RANGE` if there is no such partition,
/// `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_consumer_recv`.
///
/// # Safety
///
/// `consumer` is NULL or a live consumer handle; `offset_out` is NULL or valid for
/// writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_consumer_committed(
    consumer: *const memq_consumer,
    partition: u32,
    offset_out: *mut u64,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(
            ["consumer", "offset_out"],
            consumer,
            offset_out,
            |consumer| Ok(lock(&consumer.reader)?.source.committed(partition)?),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::ptr::null_mut;

    use super::*;
    use crate::topic::{memq_topic_config, memq_topic_free, memq_topic_new};

    /// A handle whose lock a panic poisoned answers `MEMQ_STATUS_PANIC` from then on, and
    /// can still be freed.
    #[test]
    fn a_handle_poisoned_by_a_panic_reports_it() {
        let mut t = null_mut();
        let mut s = null_mut();
        let mut c = null_mut();
        // SAFETY: valid config, live handles and out-pointers; each freed once.
        unsafe {
            assert_eq!(
                memq_topic_new(&memq_topic_config::default(), &mut t),
                memq_status::Ok
            );
            assert_eq!(memq_subscriber_new(t, 0, 0, &mut s), memq_status::Ok);
            assert_eq!(
                memq_consumer_new(t, c"g".as_ptr(), 0, 0, &mut c),
                memq_status::Ok
            );
            let _ = catch_unwind(AssertUnwindSafe(|| {
                let _held = (*s).reader.lock();
                panic!("deliberate panic while holding a subscriber, testing the boundary");
            }));
            let _ = catch_unwind(AssertUnwindSafe(|| {
                let _held = (*c).reader.lock();
                panic!("deliberate panic while holding a consumer, testing the boundary");
            }));
            let mut m = null_mut();
            let mut n = 0;
            let mut lag = 7;
            assert_eq!(
                memq_subscriber_recv(s, 0, &mut m, null_mut()),
                memq_status::Panic
            );
            assert_eq!(
                memq_subscriber_recv_many(s, 0, &mut m, 1, &mut n, null_mut()),
                memq_status::Panic
            );
            assert_eq!(memq_subscriber_lag(s, &mut lag), memq_status::Panic);
            assert_eq!(
                memq_consumer_recv(c, -1, &mut m, null_mut()),
                memq_status::Panic
            );
            assert!(m.is_null());
            assert_eq!((n, lag), (0, 7));
            memq_subscriber_free(s);
            memq_consumer_free(c);
            memq_topic_free(t);
        }
    }
}
