//! The dead letters of durable groups, for C: a reader of a group's dead-letter log and
//! the letters it returns, with their origin.

use core::ffi::c_char;
use std::ffi::CString;
use std::sync::Mutex;

use memq_store::{DeadLetters, DurableDeadLetter};

use crate::boundary::{borrow, get, guard, guard_void, into_handle, lock, name, out, release};
use crate::dead_letter::memq_dead_letter_reason;
use crate::durable::{memq_durable_topic, recv_failed};
use crate::status::memq_status;
use crate::topic::memq_start;
use crate::wait::Wait;

/// A reader of one durable group's dead letters.
///
/// Ownership: made by `memq_durable_dead_letters_new`, released by
/// `memq_durable_dead_letters_free`. It keeps the topic's directory open (as a
/// subscriber does) until freed.
#[derive(Debug)]
pub struct memq_durable_dead_letters {
    reader: Mutex<DeadLetters>,
}

/// A dead letter of a durable group: the message, and where it came from.
///
/// Ownership: made by `memq_durable_dead_letters_recv`, released by
/// `memq_durable_dead_letter_free`.
#[derive(Debug)]
pub struct memq_durable_dead_letter {
    letter: DurableDeadLetter,
    group: CString,
}

/// Where a durable dead letter came from, and where it is.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct memq_durable_dead_letter_info {
    /// The name (NUL-terminated) of the group that gave up on the message; valid until
    /// the dead letter is freed.
    pub group: *const c_char,
    /// The message's offset in its origin partition.
    pub origin_offset: u64,
    /// The dead letter's offset in the group's dead-letter log.
    pub offset: u64,
    /// When the message was published, in milliseconds since the UNIX epoch.
    pub timestamp_ms: u64,
    /// When it was dead-lettered, in milliseconds since the UNIX epoch.
    pub dead_timestamp_ms: u64,
    /// The payload's length in bytes.
    pub len: usize,
    /// The key's length in bytes (0 without a key).
    pub key_len: usize,
    /// The message's origin partition.
    pub origin_partition: u32,
    /// How many times the message was delivered before it was dead-lettered.
    pub deliveries: u32,
    /// A `memq_dead_letter_reason`.
    pub reason: u32,
    /// Whether it was published with a key.
    pub has_key: bool,
}

impl Default for memq_durable_dead_letter_info {
    fn default() -> Self {
        Self {
            group: core::ptr::null(),
            origin_offset: 0,
            offset: 0,
            timestamp_ms: 0,
            dead_timestamp_ms: 0,
            len: 0,
            key_len: 0,
            origin_partition: 0,
            deliveries: 0,
            reason: 0,
            has_key: false,
        }
    }
}

/// Opens a reader of the dead letters of group `group` of `topic`, from `start` (a
/// `memq_start`; `offset` is read only for `MEMQ_START_OFFSET`; `MEMQ_START_EARLIEST`
/// is the oldest kept), and writes it to `*reader_out`; free it with
/// `memq_durable_dead_letters_free`. The group need not be open. A group with explicit
/// acks moves a message there after `max_deliveries`, or when a member rejects it
/// (`memq_durable_delivery_reject`); the log is kept under the topic's directory, with
/// the topic's sync policy and no retention limit.
///
/// Returns `MEMQ_STATUS_INVALID_ARGUMENT` for an unknown `start` or a `group` that is not
/// UTF-8, `MEMQ_STATUS_CORRUPT` or `MEMQ_STATUS_IO` if the dead-letter log cannot be
/// opened, `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: may be called from any thread, concurrently with any call on `topic`
/// except `memq_durable_topic_free(topic)`.
///
/// # Safety
///
/// `topic` is NULL or a live durable topic handle; `group` is NULL or a NUL-terminated
/// string; `reader_out` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_dead_letters_new(
    topic: *const memq_durable_topic,
    group: *const c_char,
    start: u32,
    offset: u64,
    reader_out: *mut *mut memq_durable_dead_letters,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let topic = unsafe { borrow(topic, "topic") }?;
        // SAFETY: the caller passes NULL or a NUL-terminated string.
        let group = unsafe { name(group, "group") }?;
        let reader_out = out(reader_out, "reader_out")?;
        let start = memq_start::from_c(start, offset)?;
        let reader = topic.topic.dead_letters(group, start)?;
        let handle = into_handle(memq_durable_dead_letters {
            reader: Mutex::new(reader),
        });
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { reader_out.write(handle) };
        Ok(())
    })
}

/// Frees a dead-letter reader. NULL does nothing.
///
/// Thread safety: no other call may use this reader during or after this one.
///
/// # Safety
///
/// `reader` is NULL or a live dead-letter reader handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_dead_letters_free(reader: *mut memq_durable_dead_letters) {
    // SAFETY: the caller passes NULL or a handle from `memq_durable_dead_letters_new`,
    // and gives it up.
    guard_void(|| unsafe { release(reader) });
}

/// Receives the next dead letter and writes its handle to `*letter_out` (free it with
/// `memq_durable_dead_letter_free`). Waits up to `timeout_ms`: 0 does not wait, a
/// negative value waits as long as it takes.
///
/// Returns `MEMQ_STATUS_EMPTY` (nothing now, `timeout_ms == 0`), `MEMQ_STATUS_TIMEOUT`,
/// `MEMQ_STATUS_CLOSED` (the topic is closed and everything was read),
/// `MEMQ_STATUS_CORRUPT` (a record of the log that is not a dead letter) or
/// `MEMQ_STATUS_IO` (reading the log failed), `MEMQ_STATUS_NULL_POINTER`.
///
/// Thread safety: calls on one reader are serialised (a second thread waits for the
/// first call to finish).
///
/// # Safety
///
/// `reader` is NULL or a live dead-letter reader handle; `letter_out` is NULL or valid
/// for writing a pointer; `lagged_out` is NULL or valid for writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_dead_letters_recv(
    reader: *const memq_durable_dead_letters,
    timeout_ms: i64,
    letter_out: *mut *mut memq_durable_dead_letter,
    lagged_out: *mut u64,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let reader = unsafe { borrow(reader, "reader") }?;
        let letter_out = out(letter_out, "letter_out")?;
        let mut r = lock(&reader.reader)?;
        let got = match Wait::from_ms(timeout_ms) {
            Wait::Try => r.try_recv(),
            Wait::Forever => r.recv_blocking(),
            Wait::For(d) => r.recv_blocking_timeout(d),
        };
        drop(r);
        match got {
            Ok(letter) => {
                let group = CString::new(letter.group.replace('\0', "")).unwrap_or_default();
                let handle = into_handle(memq_durable_dead_letter { letter, group });
                // SAFETY: the caller passes a pointer valid for writes.
                unsafe { letter_out.write(handle) };
                Ok(())
            }
            // SAFETY: the caller passes NULL or a pointer valid for writes.
            Err(e) => Err(unsafe { recv_failed(e, lagged_out) }),
        }
    })
}

/// Writes a pointer to the dead letter's payload (the message's bytes;
/// `memq_durable_dead_letter_info.len` of them) to `*data_out`. The bytes stay valid and
/// unchanged until the letter is freed; with a length of 0 the pointer must not be read.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: a letter may be read from any number of threads at once; it must not
/// be freed while another call uses it.
///
/// # Safety
///
/// `letter` is NULL or a live durable dead-letter handle; `data_out` is NULL or valid
/// for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_dead_letter_data(
    letter: *const memq_durable_dead_letter,
    data_out: *mut *const u8,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(["letter", "data_out"], letter, data_out, |l| {
            Ok(l.letter.payload.as_ptr())
        })
    }
}

/// Writes a pointer to the dead letter's key (`key_len` bytes) to `*key_out`, or NULL if
/// the message had none. Valid as `memq_durable_dead_letter_data`'s pointer.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_durable_dead_letter_data`.
///
/// # Safety
///
/// `letter` is NULL or a live durable dead-letter handle; `key_out` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_dead_letter_key(
    letter: *const memq_durable_dead_letter,
    key_out: *mut *const u8,
) -> memq_status {
    // SAFETY: as `memq_durable_dead_letter_data`.
    unsafe {
        get(["letter", "key_out"], letter, key_out, |l| {
            Ok(l.letter
                .key
                .as_ref()
                .map_or(core::ptr::null(), |k| k.as_ptr()))
        })
    }
}

/// Writes the dead letter's origin and position to `*info_out`; its `group` string stays
/// valid until the letter is freed.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_durable_dead_letter_data`.
///
/// # Safety
///
/// `letter` is NULL or a live durable dead-letter handle; `info_out` is NULL or valid for
/// writing a `memq_durable_dead_letter_info`.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_dead_letter_get_info(
    letter: *const memq_durable_dead_letter,
    info_out: *mut memq_durable_dead_letter_info,
) -> memq_status {
    // SAFETY: as `memq_durable_dead_letter_data`.
    unsafe {
        get(["letter", "info_out"], letter, info_out, |l| {
            let d = &l.letter;
            Ok(memq_durable_dead_letter_info {
                group: l.group.as_ptr(),
                origin_offset: d.offset,
                offset: d.dead_offset,
                timestamp_ms: d.timestamp,
                dead_timestamp_ms: d.dead_timestamp,
                len: d.payload.len(),
                key_len: d.key.as_ref().map_or(0, |k| k.len()),
                origin_partition: d.partition,
                deliveries: d.deliveries,
                reason: memq_dead_letter_reason::to_c(d.reason),
                has_key: d.key.is_some(),
            })
        })
    }
}

/// Frees a durable dead letter. NULL does nothing.
///
/// Thread safety: no other call may use this letter during or after this one.
///
/// # Safety
///
/// `letter` is NULL or a live durable dead-letter handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_dead_letter_free(letter: *mut memq_durable_dead_letter) {
    // SAFETY: the caller passes NULL or a handle from `memq_durable_dead_letters_recv`,
    // and gives it up.
    guard_void(|| unsafe { release(letter) });
}
