//! Dead-letter topics from C: where an explicit-ack group sends the messages it gives up
//! on (delivered `max_deliveries` times, or rejected), each with its origin. A dead-letter
//! topic is a topic of its own kind (`memq_dead_letter_topic`), read by its own
//! subscribers, whose receives hand out `memq_dead_letter`s: the payload (the original
//! message's bytes, shared, never copied) and where it came from.

use core::ffi::c_char;
use std::ffi::CString;
use std::sync::Mutex;

use bytes::Bytes;
use memq_core::{DeadLetter, DeadLetterReason, Message, Subscriber, Topic};

use crate::boundary::{borrow, get, guard, guard_void, into_handle, lock, out, release};
use crate::reader::missed;
use crate::status::{memq_status, Miss};
use crate::topic::{memq_start, memq_topic_config, memq_topic_stats};
use crate::wait::Wait;

/// Why a message was dead-lettered (`memq_dead_letter_info.reason`, a `uint32_t`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum memq_dead_letter_reason {
    /// It was delivered `max_deliveries` times (see `memq_ack_config`) without an ack.
    MaxDeliveries = 0,
    /// A member rejected it (`memq_delivery_reject`).
    Rejected = 1,
}

impl memq_dead_letter_reason {
    pub(crate) fn to_c(r: DeadLetterReason) -> u32 {
        match r {
            DeadLetterReason::MaxDeliveries => Self::MaxDeliveries as u32,
            DeadLetterReason::Rejected => Self::Rejected as u32,
            // A reason a later core adds and this library does not know yet.
            _ => u32::MAX,
        }
    }
}

/// A dead-letter topic: a set of bounded logs of dead letters (see `memq_dead_letter`),
/// named in `memq_ack_config.dead_letter` by the explicit-ack groups that use it.
///
/// Ownership: made by `memq_dead_letter_topic_new` and released by
/// `memq_dead_letter_topic_free`, once. Every group that uses it holds a reference of its
/// own for as long as the group exists (that is, as long as its origin topic), so freeing
/// the last handle does not close it while such a group exists;
/// `memq_dead_letter_topic_close` does. Subscribers and received dead letters stay valid
/// and are freed on their own.
///
/// Publishing happens inside memq only, without waiting. If the dead-letter topic is full
/// (`MEMQ_OVERFLOW_BLOCK` with a subscriber behind, or `MEMQ_OVERFLOW_REJECT`), a message
/// bound there (past `max_deliveries`, or rejected) stays in its group, not delivered
/// again, and the move is retried every few milliseconds (10 ms, or `ack_wait_ms` if
/// shorter, at least 1 ms) by the group's members: the group's work is done inside their
/// receives, so a retry happens only while a member of the group receives (one waiting in
/// a receive is woken for it). A program that stops receiving from the group once its
/// work is done and then reads the dead-letter topic should keep one member receiving
/// with a timeout until the group's `in_flight` is 0. Once the dead-letter topic is
/// closed, such messages are delivered again instead, so none is lost. Give it room for the dead letters its readers may fall behind by, or
/// use `MEMQ_OVERFLOW_DROP_OLDEST` to evict the oldest dead letters instead.
#[derive(Debug)]
pub struct memq_dead_letter_topic {
    pub(crate) topic: Topic<DeadLetter<Bytes>>,
}

/// A broadcast reader of a dead-letter topic: receives every dead letter published to it
/// from its own position, as `memq_subscriber` does on a byte topic.
///
/// Ownership: made by `memq_dead_letter_subscriber_new` and released by
/// `memq_dead_letter_subscriber_free`, once.
#[derive(Debug)]
pub struct memq_dead_letter_subscriber {
    sub: Mutex<Subscriber<DeadLetter<Bytes>>>,
}

/// A received dead letter: the original message's payload (shared, never copied) and its
/// origin (topic, group, partition, offset, deliveries, reason).
///
/// Ownership: handed out by `memq_dead_letter_subscriber_recv` and released by
/// `memq_dead_letter_free`, once. The pointers from `memq_dead_letter_data` and
/// `memq_dead_letter_get_info` (payload, topic and group names) stay valid until then.
#[derive(Debug)]
pub struct memq_dead_letter {
    message: Message<DeadLetter<Bytes>>,
    topic: Option<CString>,
    group: CString,
}

/// Where a dead letter came from, and where it is. The strings belong to the dead letter
/// and stay valid until `memq_dead_letter_free`; never free them.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct memq_dead_letter_info {
    /// The origin topic's name (NUL-terminated), or NULL if the origin topic is not
    /// registered in a broker (made by `memq_topic_new`).
    pub topic: *const c_char,
    /// The name (NUL-terminated) of the group that gave up on the message.
    pub group: *const c_char,
    /// The message's offset in its origin partition.
    pub origin_offset: u64,
    /// The dead letter's offset in the dead-letter topic's partition.
    pub offset: u64,
    /// The payload's length in bytes.
    pub len: usize,
    /// The message's origin partition.
    pub origin_partition: u32,
    /// The dead letter's partition in the dead-letter topic.
    pub partition: u32,
    /// How many times the message was delivered before it was dead-lettered.
    pub deliveries: u32,
    /// A `memq_dead_letter_reason`.
    pub reason: u32,
}

impl Default for memq_dead_letter_info {
    fn default() -> Self {
        Self {
            topic: core::ptr::null(),
            group: core::ptr::null(),
            origin_offset: 0,
            offset: 0,
            len: 0,
            origin_partition: 0,
            partition: 0,
            deliveries: 0,
            reason: 0,
        }
    }
}

/// A name for C: a NUL-terminated copy, cut at an inner NUL (names given through this
/// library never have one).
fn c_name(name: &str) -> CString {
    let name = name.split('\0').next().unwrap_or_default();
    CString::new(name).unwrap_or_default()
}

impl memq_dead_letter {
    fn new(message: Message<DeadLetter<Bytes>>) -> Self {
        let letter = message.value();
        Self {
            topic: letter.topic.as_deref().map(c_name),
            group: c_name(&letter.group),
            message,
        }
    }

    fn info(&self) -> memq_dead_letter_info {
        let letter = self.message.value();
        memq_dead_letter_info {
            topic: self
                .topic
                .as_deref()
                .map_or(core::ptr::null(), |t| t.as_ptr()),
            group: self.group.as_ptr(),
            origin_offset: letter.offset,
            offset: self.message.offset(),
            len: letter.value.len(),
            origin_partition: letter.partition,
            partition: self.message.partition(),
            deliveries: letter.deliveries,
            reason: memq_dead_letter_reason::to_c(letter.reason),
        }
    }
}

/// Creates a dead-letter topic with `config` (as `memq_topic_new`: capacity per
/// partition, partitions, overflow policy, TTL, flags) and writes its handle to
/// `*topic_out`; free it with `memq_dead_letter_topic_free`.
///
/// Returns as `memq_topic_new`.
///
/// Thread safety: may be called from any thread.
///
/// # Safety
///
/// `config` is NULL or points to a `memq_topic_config`; `topic_out` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_dead_letter_topic_new(
    config: *const memq_topic_config,
    topic_out: *mut *mut memq_dead_letter_topic,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a valid config.
        let config = unsafe { borrow(config, "config") }?;
        let topic_out = out(topic_out, "topic_out")?;
        let topic = Topic::new(config.to_core()?)?;
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { topic_out.write(into_handle(memq_dead_letter_topic { topic })) };
        Ok(())
    })
}

/// Frees a dead-letter topic handle. The topic closes if this was its last reference
/// (no group uses it). NULL does nothing.
///
/// Thread safety: no other call may use this handle during or after this one. Groups that
/// use the topic go on publishing to it.
///
/// # Safety
///
/// `topic` is NULL or a live dead-letter topic handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn memq_dead_letter_topic_free(topic: *mut memq_dead_letter_topic) {
    // SAFETY: the caller passes NULL or a handle from `memq_dead_letter_topic_new`, and
    // gives it up.
    guard_void(|| unsafe { release(topic) });
}

/// Closes the dead-letter topic: its subscribers drain what is retained and then get
/// `MEMQ_STATUS_CLOSED`. Messages that groups give up on afterwards (or were retrying to
/// move there) are delivered again instead, as if `max_deliveries` were not set, so close
/// it only once its groups are done. Closing a closed topic does nothing.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if `topic` is NULL.
///
/// Thread safety: may be called from any thread, concurrently with any call on `topic`
/// except `memq_dead_letter_topic_free(topic)`.
///
/// # Safety
///
/// `topic` is NULL or a live dead-letter topic handle.
#[no_mangle]
pub unsafe extern "C" fn memq_dead_letter_topic_close(
    topic: *const memq_dead_letter_topic,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let topic = unsafe { borrow(topic, "topic") }?;
        topic.topic.close();
        Ok(())
    })
}

/// Writes a snapshot of the dead-letter topic's counters to `*stats_out` (`published`
/// counts the dead letters it received).
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_dead_letter_topic_close`.
///
/// # Safety
///
/// `topic` is NULL or a live dead-letter topic handle; `stats_out` is NULL or valid for
/// writing a `memq_topic_stats`.
#[no_mangle]
pub unsafe extern "C" fn memq_dead_letter_topic_get_stats(
    topic: *const memq_dead_letter_topic,
    stats_out: *mut memq_topic_stats,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(["topic", "stats_out"], topic, stats_out, |topic| {
            Ok(memq_topic_stats::of(&topic.topic))
        })
    }
}

/// Subscribes to every partition of the dead-letter topic, starting at `start` (a
/// `memq_start`; `offset` is read only for `MEMQ_START_OFFSET`), and writes the new
/// subscriber to `*subscriber_out`; free it with `memq_dead_letter_subscriber_free`.
///
/// Returns as `memq_subscriber_new`.
///
/// Thread safety: may be called from any thread, concurrently with any call on `topic`
/// except `memq_dead_letter_topic_free(topic)`.
///
/// # Safety
///
/// `topic` is NULL or a live dead-letter topic handle; `subscriber_out` is NULL or valid
/// for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_dead_letter_subscriber_new(
    topic: *const memq_dead_letter_topic,
    start: u32,
    offset: u64,
    subscriber_out: *mut *mut memq_dead_letter_subscriber,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let topic = unsafe { borrow(topic, "topic") }?;
        let subscriber_out = out(subscriber_out, "subscriber_out")?;
        let sub = topic.topic.subscribe(memq_start::from_c(start, offset)?)?;
        let handle = into_handle(memq_dead_letter_subscriber {
            sub: Mutex::new(sub),
        });
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { subscriber_out.write(handle) };
        Ok(())
    })
}

/// Frees a dead-letter subscriber: its hold on the topic is released. NULL does nothing.
///
/// Thread safety: no other call may use this subscriber during or after this one.
///
/// # Safety
///
/// `subscriber` is NULL or a live dead-letter subscriber handle, not used again
/// afterwards.
#[no_mangle]
pub unsafe extern "C" fn memq_dead_letter_subscriber_free(
    subscriber: *mut memq_dead_letter_subscriber,
) {
    // SAFETY: the caller passes NULL or a handle from `memq_dead_letter_subscriber_new`,
    // and gives it up.
    guard_void(|| unsafe { release(subscriber) });
}

/// Receives the next dead letter and writes its handle to `*letter_out` (free it with
/// `memq_dead_letter_free`). Waits up to `timeout_ms`: 0 does not wait, a negative value
/// waits as long as it takes.
///
/// Returns `MEMQ_STATUS_EMPTY` (nothing now, `timeout_ms == 0`), `MEMQ_STATUS_TIMEOUT`,
/// `MEMQ_STATUS_CLOSED` (closed and everything read), `MEMQ_STATUS_LAGGED` (dead letters
/// were evicted before this subscriber read them; their number goes to `*lagged_out`
/// unless it is NULL), `MEMQ_STATUS_NULL_POINTER`.
///
/// Thread safety: calls on one subscriber are serialised (a second thread waits for the
/// first call to finish). May run concurrently with calls on the topic and on other
/// subscribers. A receive waiting forever returns once a dead letter comes or the topic
/// is closed (`memq_dead_letter_topic_close`).
///
/// # Safety
///
/// `subscriber` is NULL or a live dead-letter subscriber handle; `letter_out` is NULL or
/// valid for writing a pointer; `lagged_out` is NULL or valid for writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_dead_letter_subscriber_recv(
    subscriber: *const memq_dead_letter_subscriber,
    timeout_ms: i64,
    letter_out: *mut *mut memq_dead_letter,
    lagged_out: *mut u64,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let subscriber = unsafe { borrow(subscriber, "subscriber") }?;
        let letter_out = out(letter_out, "letter_out")?;
        let mut sub = lock(&subscriber.sub)?;
        let received: Result<_, Miss> = match Wait::from_ms(timeout_ms) {
            Wait::Try => sub.try_recv().map_err(Miss::from),
            Wait::Forever => sub.recv_blocking().map_err(Miss::from),
            Wait::For(d) => sub.recv_blocking_timeout(d).map_err(Miss::from),
        };
        drop(sub);
        match received {
            Ok(message) => {
                let handle = into_handle(memq_dead_letter::new(message));
                // SAFETY: the caller passes a pointer valid for writes.
                unsafe { letter_out.write(handle) };
                Ok(())
            }
            // SAFETY: the caller passes NULL or a pointer valid for writes.
            Err(miss) => Err(unsafe { missed(miss, lagged_out) }),
        }
    })
}

/// Writes a pointer to the dead letter's payload (the original message's bytes) to
/// `*data_out`; its length is `memq_dead_letter_info.len`. The bytes stay valid and
/// unchanged until the dead letter is freed; with a length of 0 the pointer must not be
/// read.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: a dead letter may be read from any number of threads at once; it must
/// not be freed while another call uses it.
///
/// # Safety
///
/// `letter` is NULL or a live dead-letter handle; `data_out` is NULL or valid for writing
/// a pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_dead_letter_data(
    letter: *const memq_dead_letter,
    data_out: *mut *const u8,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(["letter", "data_out"], letter, data_out, |letter| {
            Ok(letter.message.value().value.as_ptr())
        })
    }
}

/// Writes the dead letter's origin and position to `*info_out`. Its `topic` and `group`
/// strings stay valid until the dead letter is freed.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_dead_letter_data`.
///
/// # Safety
///
/// `letter` is NULL or a live dead-letter handle; `info_out` is NULL or valid for writing
/// a `memq_dead_letter_info`.
#[no_mangle]
pub unsafe extern "C" fn memq_dead_letter_get_info(
    letter: *const memq_dead_letter,
    info_out: *mut memq_dead_letter_info,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(["letter", "info_out"], letter, info_out, |letter| {
            Ok(letter.info())
        })
    }
}

/// Frees a dead letter. NULL does nothing.
///
/// Thread safety: no other call may use this dead letter during or after this one. It may
/// be freed on a thread other than the one that received it.
///
/// # Safety
///
/// `letter` is NULL or a live dead-letter handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn memq_dead_letter_free(letter: *mut memq_dead_letter) {
    // SAFETY: the caller passes NULL or a handle from `memq_dead_letter_subscriber_recv`,
    // and gives it up.
    guard_void(|| unsafe { release(letter) });
}
