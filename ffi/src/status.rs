//! Status codes, their descriptions, the library version, and the mapping from memq-core's
//! errors to codes. Codes are never renumbered: new ones are appended.

use core::ffi::{c_char, CStr};

use memq_core::{AckError, Error, PublishError, RecvError, RecvTimeoutError, TryRecvError};

/// What a call did. Returned by every function except `memq_version`, `memq_status_str`
/// and the `_free` functions. In C it is a `uint32_t`; compare it with the constants.
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
}

impl memq_status {
    /// Every status, in code order (not exported: cbindgen would turn a public one into a
    /// broken macro).
    const ALL: [memq_status; 18] = [
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
        match e {
            AckError::LeaseExpired => Self::LeaseExpired,
            // The group is gone: nothing is left to settle with.
            AckError::GroupDeleted => Self::UnknownGroup,
            _ => Self::LeaseExpired,
        }
    }
}

impl<T> From<PublishError<T>> for memq_status {
    fn from(e: PublishError<T>) -> Self {
        Self::from(&e)
    }
}

impl<T> From<&PublishError<T>> for memq_status {
    fn from(e: &PublishError<T>) -> Self {
        match e {
            PublishError::Full(_) => Self::Full,
            PublishError::Closed(_) => Self::Closed,
            PublishError::InvalidPartition(_) => Self::OutOfRange,
            _ => Self::InvalidArgument,
        }
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
    pub(crate) fn status(self) -> memq_status {
        match self {
            Self::Empty => memq_status::Empty,
            Self::Timeout => memq_status::Timeout,
            Self::Lagged(_) => memq_status::Lagged,
            Self::Closed => memq_status::Closed,
        }
    }
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
