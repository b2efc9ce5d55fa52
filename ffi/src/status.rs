//! Status codes, their descriptions, the error detail of the last failed call on a thread
//! (`memq_last_error_message`), the library version, and the mapping from memq-core's
//! errors to codes and details. Codes are never renumbered: new ones are appended.

use core::cell::RefCell;
use core::ffi::{c_char, CStr};
use core::fmt::{self, Write as _};
use std::any::Any;
use std::ffi::CString;

use memq_core::{AckError, Error, PublishError, RecvError, RecvTimeoutError, TryRecvError};

/// What a call did. Returned by every function except `memq_version`, `memq_status_str`,
/// `memq_last_error_message` and the `_free` functions. In C it is a `uint32_t`; compare
/// it with the constants. `memq_last_error_message` says more about the last one that was
/// not `MEMQ_STATUS_OK`.
///
/// The same situation has the same name in every language memq speaks:
///
/// | Situation | Rust (memq-core) | C (`memq_status`) | Python (memq.py) |
/// |---|---|---|---|
/// | a capacity, partition count, `max_in_flight`, TTL or `ack_wait` of 0 | `Error::ZeroCapacity`, `ZeroPartitions`, `ZeroInFlight`, `ZeroTtl`, `ZeroAckWait` | `INVALID_ARGUMENT` | `InvalidArgument` (also a `ValueError`) |
/// | an unknown enumeration value or flag, a name that is not UTF-8 | (the types cannot hold it) | `INVALID_ARGUMENT` | `InvalidArgument`, or `TypeError` before the call |
/// | a required pointer is NULL | (references cannot be) | `NULL_POINTER` | (cannot happen) |
/// | no room, and the publish may not wait; a `REJECT` topic is full; a batch larger than the capacity | `PublishError::Full` | `FULL` | `Full` |
/// | no room (or no message) within the time limit | `Full` after `publish_*_timeout`; `RecvTimeoutError::Timeout` | `TIMEOUT` | `Timeout` (a receive returns `None`) |
/// | nothing to receive now | `TryRecvError::Empty` | `EMPTY` | a receive returns `None` |
/// | the topic is closed (publishing), closed and drained (receiving) | `PublishError::Closed`, `RecvError::Closed` | `CLOSED` | `Closed` |
/// | a reader missed messages | `RecvError::Lagged(n)` | `LAGGED` (n in `lagged_out`) | `Lagged` (`.missed`) |
/// | a partition index or an offset out of range | `PublishError::InvalidPartition`, `Error::PartitionOutOfRange`, `OffsetOutOfRange`, `PartitionNotRead` | `OUT_OF_RANGE` | `OutOfRange` (also an `IndexError`) |
/// | the capacity or partition table cannot be allocated | `Error::CapacityTooLarge`, `TooManyPartitions` | `ALLOC_FAILED` | `AllocFailed` (also a `MemoryError`) |
/// | unknown topic / topic exists / unknown group | `Error::UnknownTopic`, `TopicExists`, `UnknownGroup` | `UNKNOWN_TOPIC`, `TOPIC_EXISTS`, `UNKNOWN_GROUP` | `MemqError` |
/// | the group has the other ack mode | `Error::GroupModeMismatch` | `GROUP_MODE_MISMATCH` | `MemqError` |
/// | a lease ran out or was settled already | `AckError::LeaseExpired` | `LEASE_EXPIRED` | `LeaseExpired` |
/// | a durable topic's directory is open already | `StoreError::Locked` | `LOCKED` | `Locked` |
/// | a durable log damaged in the middle, a foreign file | `StoreError::Corrupt`, `Format` | `CORRUPT` | `Corrupt` |
/// | the disk is full | `StoreError::Io` (`is_disk_full`) | `DISK_FULL` | `DiskFull` (also an `OSError`) |
/// | another I/O error of a durable topic | `StoreError::Io` | `IO` | `StoreIOError` (also an `OSError`) |
/// | a group has the other mode (durable: plain or explicit acks) | (one type for both) | `GROUP_MODE_MISMATCH` | `MemqError` |
/// | a receive buffer is too small | (Rust hands out the message) | `BUFFER_TOO_SMALL` (length in `len_out`) | (cannot happen) |
///
/// `memq_last_error_message` words each case as the Rust error's `Display` does (for
/// example "topic capacity must be at least 1"), naming the argument where C adds a check
/// of its own (for example "count_out is NULL").
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum memq_status {
    /// Success. Out-parameters were written.
    Ok = 0,
    /// A call that does not wait (`timeout_ms == 0`) found no message.
    Empty = 1,
    /// The time given by `timeout_ms` ran out.
    Timeout = 2,
    /// The partition is full (an attached reader still needs its oldest message): a
    /// publish that does not wait on a `BLOCK` topic, or any publish on a full `REJECT`
    /// topic. The message was not published.
    Full = 3,
    /// The topic is closed: publishing fails; receiving fails once everything retained
    /// for the reader has been read.
    Closed = 4,
    /// The reader fell behind the retained window and missed messages (their number goes
    /// to the `lagged` out-parameter). The next receive continues at the oldest retained
    /// message.
    Lagged = 5,
    /// An argument is not valid: zero capacity or partitions, an unknown enumeration
    /// value, a name that is not UTF-8, a batch larger than the capacity, and so on.
    InvalidArgument = 6,
    /// A required pointer was NULL (or a data pointer was NULL with a nonzero length).
    NullPointer = 7,
    /// A partition index or an offset is out of range.
    OutOfRange = 8,
    /// No topic of that name exists in the broker.
    UnknownTopic = 9,
    /// A topic of that name already exists in the broker.
    TopicExists = 10,
    /// No group of that name exists on the topic (or a delivery's group was deleted).
    UnknownGroup = 11,
    /// The caller's buffer is too small; the required length was written to the length
    /// out-parameter.
    BufferTooSmall = 12,
    /// The message has no timestamp: its topic has no clock (see `MEMQ_TOPIC_TIMESTAMPS`).
    NoTimestamp = 13,
    /// Memory for a topic of this capacity could not be allocated.
    AllocFailed = 14,
    /// A panic inside the library was caught at the boundary. The handle used may be
    /// unusable from now on (it can still be freed).
    Panic = 15,
    /// The delivery no longer holds its lease, so it cannot be acked, nacked, touched or
    /// rejected: it was already settled through this handle (ack, nack, reject), its
    /// `ack_wait` ran out and the message went back to the group, or its consumer was
    /// freed. The message is (or will be) delivered again unless it was settled.
    LeaseExpired = 16,
    /// The group exists with the other acknowledgement mode: `memq_consumer_new` on an
    /// explicit-ack group, or `memq_ack_consumer_new` on an automatic-commit one.
    GroupModeMismatch = 17,
    /// A durable topic's directory is open already: by another process, or elsewhere in
    /// this one (a `memq_durable_topic`, or a subscriber, consumer or delivery of one, not
    /// yet freed). One owner per directory.
    Locked = 18,
    /// A durable topic's log is damaged beyond a torn tail (a bad record with sound
    /// records after it), or a file in its directory is not one the store wrote.
    /// `memq_last_error_message` names the file, the byte position and the offset.
    /// Nothing on disk was changed (`MEMQ_DURABLE_REPAIR` truncates at the damage).
    Corrupt = 19,
    /// The disk (or the user's quota) is full: the durable record was not written.
    DiskFull = 20,
    /// Another I/O error of a durable topic (creating its directory, a write, a sync);
    /// `memq_last_error_message` says which call failed on which file, and the OS error.
    Io = 21,
}

impl memq_status {
    /// Every status, in code order (not exported: cbindgen would turn a public one into a
    /// broken macro).
    const ALL: [memq_status; 22] = [
        Self::Ok,
        Self::Empty,
        Self::Timeout,
        Self::Full,
        Self::Closed,
        Self::Lagged,
        Self::InvalidArgument,
        Self::NullPointer,
        Self::OutOfRange,
        Self::UnknownTopic,
        Self::TopicExists,
        Self::UnknownGroup,
        Self::BufferTooSmall,
        Self::NoTimestamp,
        Self::AllocFailed,
        Self::Panic,
        Self::LeaseExpired,
        Self::GroupModeMismatch,
        Self::Locked,
        Self::Corrupt,
        Self::DiskFull,
        Self::Io,
    ];

    /// The status whose code is `code`, as read back from C; `None` for any other value.
    pub fn from_code(code: u32) -> Option<Self> {
        Self::ALL.iter().copied().find(|s| *s as u32 == code)
    }

    fn description(self) -> &'static CStr {
        match self {
            Self::Ok => c"ok",
            Self::Empty => c"no message available",
            Self::Timeout => c"timed out",
            Self::Full => c"topic partition is full",
            Self::Closed => c"topic is closed",
            Self::Lagged => c"reader lagged behind and missed messages",
            Self::InvalidArgument => c"invalid argument",
            Self::NullPointer => c"null pointer",
            Self::OutOfRange => c"partition or offset out of range",
            Self::UnknownTopic => c"unknown topic",
            Self::TopicExists => c"topic already exists",
            Self::UnknownGroup => c"unknown group",
            Self::BufferTooSmall => c"buffer too small",
            Self::NoTimestamp => c"message has no timestamp",
            Self::AllocFailed => c"allocation failed",
            Self::Panic => c"internal panic caught at the library boundary",
            Self::LeaseExpired => c"lease expired or already settled",
            Self::GroupModeMismatch => c"group exists with the other acknowledgement mode",
            Self::Locked => c"durable topic directory is already open",
            Self::Corrupt => c"durable log is corrupt",
            Self::DiskFull => c"disk full",
            Self::Io => c"i/o error",
        }
    }
}

/// A static, NUL-terminated, lowercase description of `status` (a `memq_status` read as
/// an integer); "unknown status" for a value that is not a status. Never NULL; never
/// free it.
///
/// Thread safety: may be called from any thread at any time.
#[no_mangle]
pub extern "C" fn memq_status_str(status: u32) -> *const c_char {
    memq_status::from_code(status)
        .map_or(c"unknown status", memq_status::description)
        .as_ptr()
}

const VERSION: &CStr =
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(v) => v,
        Err(_) => panic!("the package version contains a NUL byte"),
    };

/// The library's version ("MAJOR.MINOR.PATCH"), static and NUL-terminated. Never NULL;
/// never free it.
///
/// Thread safety: may be called from any thread at any time.
#[no_mangle]
pub extern "C" fn memq_version() -> *const c_char {
    VERSION.as_ptr()
}

impl From<Error> for memq_status {
    fn from(e: Error) -> Self {
        let status = Self::of_error(&e);
        with_detail(status, &e)
    }
}

impl memq_status {
    fn of_error(e: &Error) -> Self {
        match e {
            Error::CapacityTooLarge { .. } | Error::TooManyPartitions { .. } => Self::AllocFailed,
            Error::PartitionOutOfRange { .. }
            | Error::PartitionNotRead { .. }
            | Error::OffsetOutOfRange { .. } => Self::OutOfRange,
            Error::UnknownTopic(_) => Self::UnknownTopic,
            Error::TopicExists(_) => Self::TopicExists,
            Error::UnknownGroup(_) => Self::UnknownGroup,
            Error::GroupModeMismatch(_) => Self::GroupModeMismatch,
            // ZeroCapacity, ZeroPartitions, TtlWithoutClock, PartitionRequired,
            // ZeroInFlight (`max_in_flight` of 0), ZeroAckWait (the C config is checked
            // first), ZeroTtl and ZeroMaxDeliveries (0 means "none" in C, so never set),
            // ClockRequired (only without `std`, so
            // never here: every topic of this library has a clock or gets the default
            // one), and whatever configuration errors the core adds.
            _ => Self::InvalidArgument,
        }
    }
}

impl From<AckError> for memq_status {
    fn from(e: AckError) -> Self {
        let status = match e {
            AckError::LeaseExpired => Self::LeaseExpired,
            // The group is gone: nothing is left to settle with.
            AckError::GroupDeleted => Self::UnknownGroup,
            _ => Self::LeaseExpired,
        };
        with_detail(status, e)
    }
}

impl<T> From<PublishError<T>> for memq_status {
    fn from(e: PublishError<T>) -> Self {
        Self::from(&e)
    }
}

impl<T> From<&PublishError<T>> for memq_status {
    fn from(e: &PublishError<T>) -> Self {
        let status = match e {
            PublishError::Full(_) => Self::Full,
            PublishError::Closed(_) => Self::Closed,
            PublishError::InvalidPartition(_) => Self::OutOfRange,
            _ => Self::InvalidArgument,
        };
        with_detail(status, e)
    }
}

/// Why a receive returned no message, for every kind of receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Miss {
    Empty,
    Timeout,
    Lagged(u64),
    Closed,
}

impl Miss {
    /// The status, with the detail the core's receive errors give (no allocation but for
    /// a lag, so that a polling loop's `EMPTY` costs nothing).
    pub(crate) fn status(self) -> memq_status {
        match self {
            Self::Empty => with_static_detail(memq_status::Empty, c"no message available"),
            Self::Timeout => {
                with_static_detail(memq_status::Timeout, c"timed out waiting for a message")
            }
            Self::Lagged(n) => with_detail(memq_status::Lagged, RecvError::Lagged(n)),
            Self::Closed => with_static_detail(memq_status::Closed, c"topic is closed and drained"),
        }
    }
}

// ---- the error detail -------------------------------------------------------------------

/// An error detail: static text, or text made for one failure.
#[derive(Debug)]
enum Detail {
    Static(&'static CStr),
    Owned(CString),
}

impl Detail {
    fn as_ptr(&self) -> *const c_char {
        match self {
            Self::Static(s) => s.as_ptr(),
            Self::Owned(s) => s.as_ptr(),
        }
    }
}

thread_local! {
    /// The detail the current call gave for the status it is about to return (set where
    /// the failure is found, taken by the boundary when the call returns that status).
    static PENDING: RefCell<Option<(memq_status, Detail)>> = const { RefCell::new(None) };
    /// What `memq_last_error_message` returns on this thread.
    static LAST: RefCell<Detail> = const { RefCell::new(Detail::Static(c"")) };
}

fn set_pending(status: memq_status, detail: Detail) {
    // During the thread's teardown the slot may be gone: there is nobody left to ask.
    let _ = PENDING.try_with(|p| *p.borrow_mut() = Some((status, detail)));
}

/// Records `detail` as what the current call says about its failure with `status`, and
/// returns `status`. Only the boundary's return of that same status publishes it (see
/// [`record_failure`]).
pub(crate) fn with_detail(status: memq_status, detail: impl fmt::Display) -> memq_status {
    let mut text = String::new();
    let _ = write!(text, "{detail}");
    // A NUL inside (from a name, say) would cut the C string short: shown as U+FFFD.
    let text = CString::new(text).unwrap_or_else(|e| {
        let text = String::from_utf8_lossy(&e.into_vec()).replace('\0', "\u{fffd}");
        CString::new(text).unwrap_or_default()
    });
    set_pending(status, Detail::Owned(text));
    status
}

/// [`with_detail`] with static text (no allocation).
pub(crate) fn with_static_detail(status: memq_status, detail: &'static CStr) -> memq_status {
    set_pending(status, Detail::Static(detail));
    status
}

/// Called by the boundary as an export returns `status` (not `MEMQ_STATUS_OK`): the
/// detail recorded for it becomes this thread's last error, or the status's description
/// if none was recorded for this status. Returns `status`.
pub(crate) fn record_failure(status: memq_status) -> memq_status {
    let detail = PENDING
        .try_with(|p| p.borrow_mut().take())
        .ok()
        .flatten()
        .and_then(|(s, d)| (s == status).then_some(d))
        .unwrap_or(Detail::Static(status.description()));
    let _ = LAST.try_with(|l| *l.borrow_mut() = detail);
    status
}

/// Records a panic caught at the boundary as this thread's last error, with its message.
pub(crate) fn panicked(payload: &(dyn Any + Send)) {
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str));
    match message {
        Some(m) => with_detail(memq_status::Panic, format_args!("internal panic: {m}")),
        None => memq_status::Panic,
    };
    record_failure(memq_status::Panic);
}

/// What the last call on this thread that returned a status other than `MEMQ_STATUS_OK`
/// had to say about it: which argument was invalid and why, or what the situation was,
/// in the words of memq's Rust errors (for example "topic capacity must be at least 1",
/// "count_out is NULL", "batch of 9 messages can never fit in a partition of capacity
/// 8"). Without more to say it is the status's description (`memq_status_str`); before
/// any call failed on this thread it is "". A successful call leaves it as it was (as
/// `errno`), so read it right after the call that failed. A NUL-terminated string, never
/// NULL; never free it.
///
/// Lifetime: valid until the next call into memq on this thread that does not return
/// `MEMQ_STATUS_OK` (which replaces it), or until the thread exits; copy it to keep it.
///
/// Thread safety: may be called from any thread at any time; each thread has its own
/// last error, so one thread's failures never change another's.
#[no_mangle]
pub extern "C" fn memq_last_error_message() -> *const c_char {
    LAST.try_with(|l| l.borrow().as_ptr())
        .unwrap_or(c"".as_ptr())
}

impl From<TryRecvError> for Miss {
    fn from(e: TryRecvError) -> Self {
        match e {
            TryRecvError::Empty => Self::Empty,
            TryRecvError::Lagged(n) => Self::Lagged(n),
            _ => Self::Closed,
        }
    }
}

impl From<RecvError> for Miss {
    fn from(e: RecvError) -> Self {
        match e {
            RecvError::Lagged(n) => Self::Lagged(n),
            _ => Self::Closed,
        }
    }
}

impl From<RecvTimeoutError> for Miss {
    fn from(e: RecvTimeoutError) -> Self {
        match e {
            RecvTimeoutError::Timeout => Self::Timeout,
            RecvTimeoutError::Lagged(n) => Self::Lagged(n),
            _ => Self::Closed,
        }
    }
}
