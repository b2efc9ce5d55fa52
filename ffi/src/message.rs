//! Received messages: a handle that borrows the shared payload (zero copy), its
//! accessors, and copying the payload into a caller's buffer.

use bytes::Bytes;
use memq_core::Message;

use crate::boundary::{borrow, get, guard, guard_void, optional_out, out, release, OutPtr};
use crate::status::{memq_status, with_detail, with_static_detail};

/// A received message: its payload (shared with the log and other readers, never copied)
/// and where it came from. Free it with `memq_message_free`; the payload pointer from
/// `memq_message_data` stays valid until then.
#[derive(Debug)]
pub struct memq_message {
    pub(crate) message: Message<Bytes>,
}

/// A message's metadata.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct memq_message_meta {
    /// The message's offset within its partition.
    pub offset: u64,
    /// When it was published: nanoseconds on a monotonic clock shared by every topic of
    /// the process, whose epoch is the first time the library needed a clock (not
    /// `CLOCK_MONOTONIC`'s: compare timestamps with each other, not with the system's
    /// clocks); 0 if `has_timestamp` is false.
    pub timestamp_ns: u64,
    /// The payload's length in bytes.
    pub len: usize,
    /// The partition it was published to.
    pub partition: u32,
    /// Whether the topic stamps messages (a TTL, or `MEMQ_TOPIC_TIMESTAMPS`).
    pub has_timestamp: bool,
}

impl memq_message_meta {
    pub(crate) fn of(m: &Message<Bytes>) -> Self {
        let ts = m.timestamp();
        Self {
            offset: m.offset(),
            timestamp_ns: ts.map_or(0, |t| u64::try_from(t.as_nanos()).unwrap_or(u64::MAX)),
            len: m.value().len(),
            partition: m.partition(),
            has_timestamp: ts.is_some(),
        }
    }
}

/// Reports a payload of `needed` bytes that does not fit in a buffer of `buf_len`:
/// `*len_out` gets the length needed, and the status is `MEMQ_STATUS_BUFFER_TOO_SMALL`.
///
/// # Safety
///
/// `len_out` is valid for writing a `size_t`.
pub(crate) unsafe fn too_small(
    needed: usize,
    buf_len: usize,
    len_out: OutPtr<usize>,
) -> memq_status {
    // SAFETY: valid for writes by this function's contract.
    unsafe { len_out.write(needed) };
    with_detail(
        memq_status::BufferTooSmall,
        format_args!("buf_len: the payload is {needed} bytes, the buffer {buf_len}"),
    )
}

/// Copies `payload` into the caller's buffer, or reports the length it needs.
///
/// # Safety
///
/// `buf` is NULL or valid for writing `buf_len` bytes, and does not overlap `payload`.
pub(crate) unsafe fn copy_out(
    payload: &[u8],
    buf: *mut u8,
    buf_len: usize,
    len_out: OutPtr<usize>,
) -> Result<(), memq_status> {
    if buf.is_null() && buf_len > 0 {
        return Err(with_detail(
            memq_status::NullPointer,
            format_args!("buf is NULL with a length of {buf_len}"),
        ));
    }
    if payload.len() > buf_len {
        // SAFETY: the export's caller passes a pointer valid for writes.
        return Err(unsafe { too_small(payload.len(), buf_len, len_out) });
    }
    if !payload.is_empty() {
        debug_assert!(!buf.is_null());
        // SAFETY: `buf` is non-NULL (an empty `buf_len` would have failed above) and
        // valid for `buf_len >= payload.len()` bytes; the payload lives in memq's memory,
        // not the caller's buffer.
        unsafe { core::ptr::copy_nonoverlapping(payload.as_ptr(), buf, payload.len()) };
    }
    // SAFETY: the export's caller passes a pointer valid for writes.
    unsafe { len_out.write(payload.len()) };
    Ok(())
}

/// Writes a pointer to the message's payload to `*data_out`. The bytes stay valid and
/// unchanged until the message is freed; with a length of 0 the pointer must not be read.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: a message may be read from any number of threads at once; it must not
/// be freed while another call uses it.
///
/// # Safety
///
/// `message` is NULL or a live message handle; `data_out` is NULL or valid for writing a
/// pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_message_data(
    message: *const memq_message,
    data_out: *mut *const u8,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(["message", "data_out"], message, data_out, |message| {
            Ok(message.message.value().as_ptr())
        })
    }
}

/// Writes the payload's length in bytes to `*len_out`.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_message_data`.
///
/// # Safety
///
/// `message` is NULL or a live message handle; `len_out` is NULL or valid for writing a
/// `size_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_message_len(
    message: *const memq_message,
    len_out: *mut usize,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(["message", "len_out"], message, len_out, |message| {
            Ok(message.message.value().len())
        })
    }
}

/// Writes the message's offset within its partition to `*offset_out`.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_message_data`.
///
/// # Safety
///
/// `message` is NULL or a live message handle; `offset_out` is NULL or valid for writing
/// a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_message_offset(
    message: *const memq_message,
    offset_out: *mut u64,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(["message", "offset_out"], message, offset_out, |message| {
            Ok(message.message.offset())
        })
    }
}

/// Writes the partition the message was published to to `*partition_out`.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_message_data`.
///
/// # Safety
///
/// `message` is NULL or a live message handle; `partition_out` is NULL or valid for
/// writing a `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_message_partition(
    message: *const memq_message,
    partition_out: *mut u32,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(
            ["message", "partition_out"],
            message,
            partition_out,
            |message| Ok(message.message.partition()),
        )
    }
}

/// Writes when the message was published to `*timestamp_ns_out`: nanoseconds on a
/// monotonic clock shared by every topic of the process (its epoch is the first time the
/// library needed a clock).
///
/// Returns `MEMQ_STATUS_NO_TIMESTAMP` if the topic does not stamp messages (no TTL and no
/// `MEMQ_TOPIC_TIMESTAMPS`), `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_message_data`.
///
/// # Safety
///
/// `message` is NULL or a live message handle; `timestamp_ns_out` is NULL or valid for
/// writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_message_timestamp(
    message: *const memq_message,
    timestamp_ns_out: *mut u64,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let message = unsafe { borrow(message, "message") }?;
        let timestamp_ns_out = out(timestamp_ns_out, "timestamp_ns_out")?;
        let meta = memq_message_meta::of(&message.message);
        if !meta.has_timestamp {
            return Err(with_static_detail(
                memq_status::NoTimestamp,
                c"message has no timestamp: its topic has no clock (see MEMQ_TOPIC_TIMESTAMPS)",
            ));
        }
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { timestamp_ns_out.write(meta.timestamp_ns) };
        Ok(())
    })
}

/// Writes all of the message's metadata (offset, partition, timestamp, length) to
/// `*meta_out` in one call.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_message_data`.
///
/// # Safety
///
/// `message` is NULL or a live message handle; `meta_out` is NULL or valid for writing a
/// `memq_message_meta`.
#[no_mangle]
pub unsafe extern "C" fn memq_message_get_meta(
    message: *const memq_message,
    meta_out: *mut memq_message_meta,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(["message", "meta_out"], message, meta_out, |message| {
            Ok(memq_message_meta::of(&message.message))
        })
    }
}

/// Copies the payload into `buf` (room for `buf_len` bytes) and writes its length to
/// `*len_out`. `buf` may be NULL when `buf_len` is 0 (to ask for the length).
///
/// Returns `MEMQ_STATUS_BUFFER_TOO_SMALL` if the payload is longer than `buf_len`: then
/// nothing is copied and `*len_out` gets the length needed. `MEMQ_STATUS_NULL_POINTER`
/// if `message` or `len_out` is NULL, or `buf` is NULL with `buf_len` > 0.
///
/// Thread safety: as `memq_message_data`.
///
/// # Safety
///
/// `message` is NULL or a live message handle; `buf` is NULL or valid for writing
/// `buf_len` bytes; `len_out` is NULL or valid for writing a `size_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_message_copy(
    message: *const memq_message,
    buf: *mut u8,
    buf_len: usize,
    len_out: *mut usize,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let message = unsafe { borrow(message, "message") }?;
        let len_out = out(len_out, "len_out")?;
        // SAFETY: the caller passes NULL or a buffer of `buf_len` writable bytes.
        unsafe { copy_out(message.message.value(), buf, buf_len, len_out) }
    })
}

/// Frees a message. Its payload is released when no reader and no log needs it any more
/// (for `memq_topic_publish_owned`, by calling the `free_fn`). NULL does nothing.
///
/// Thread safety: no other call may use this message during or after this one. It may be
/// freed on a thread other than the one that received it.
///
/// # Safety
///
/// `message` is NULL or a live message handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn memq_message_free(message: *mut memq_message) {
    // SAFETY: the caller passes NULL or a handle from a receive, and gives it up.
    guard_void(|| unsafe { release(message) });
}

/// Frees `count` messages from `messages` (as filled by a batch receive) and sets each
/// entry to NULL. NULL entries are skipped; a NULL `messages` does nothing.
///
/// Thread safety: as `memq_message_free`, for each message and for the array.
///
/// # Safety
///
/// `messages` is NULL or points to `count` writable pointers, each NULL or a live message
/// handle not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn memq_message_free_many(messages: *mut *mut memq_message, count: usize) {
    guard_void(|| {
        if messages.is_null() {
            return;
        }
        for i in 0..count {
            // SAFETY: the caller passes `count` writable, aligned pointers at `messages`.
            let slot = unsafe { &mut *messages.add(i) };
            // SAFETY: each entry is NULL or a handle from a receive, given up here.
            unsafe { release(core::mem::replace(slot, core::ptr::null_mut())) };
        }
    });
}

/// Hands a received message to C.
///
/// # Safety
///
/// `message_out` was checked by [`out`] from a pointer valid for writes.
pub(crate) unsafe fn give_message(message_out: OutPtr<*mut memq_message>, m: Message<Bytes>) {
    let handle = crate::boundary::into_handle(memq_message { message: m });
    // SAFETY: valid for writes by this function's contract.
    unsafe { message_out.write(handle) };
}

/// Writes metadata if the caller asked for it.
///
/// # Safety
///
/// `meta_out` is NULL or valid for writing a `memq_message_meta`.
pub(crate) unsafe fn give_meta(meta_out: *mut memq_message_meta, m: &Message<Bytes>) {
    if let Some(meta_out) = optional_out(meta_out) {
        // SAFETY: non-NULL, and valid for writes by this function's contract.
        unsafe { meta_out.write(memq_message_meta::of(m)) };
    }
}
