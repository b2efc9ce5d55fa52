//! Maps memq's Rust errors to the Python exceptions of `memq._errors`.
//!
//! The exception classes are defined in Python (so that they can subclass two builtins,
//! e.g. `InvalidArgument(Error, ValueError)`) and looked up once per class.

use memq::durable::{DurablePublishError, DurableRecvError, OpenError, StoreError};
use memq::{AckError, PublishError, RecvError, RecvTimeoutError, TryRecvError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

macro_rules! exceptions {
    ($($name:ident),* $(,)?) => {
        /// The exception classes of `memq._errors`, by name.
        #[derive(Clone, Copy, Debug)]
        #[allow(missing_docs)]
        pub enum Exc { $($name),* }

        impl Exc {
            fn cell(self) -> &'static PyOnceLock<Py<PyType>> {
                $(
                    #[allow(non_upper_case_globals)]
                    static $name: PyOnceLock<Py<PyType>> = PyOnceLock::new();
                )*
                match self { $(Exc::$name => &$name),* }
            }

            fn name(self) -> &'static str {
                match self { $(Exc::$name => stringify!($name)),* }
            }
        }
    };
}

exceptions!(
    Error,
    InvalidArgument,
    InvalidType,
    OutOfRange,
    AllocFailed,
    Closed,
    Full,
    Timeout,
    Lagged,
    LeaseExpired,
    GroupDeleted,
    Busy,
    UnknownTopic,
    TopicExists,
    UnknownGroup,
    GroupModeMismatch,
    Locked,
    Corrupt,
    DiskFull,
    StoreIOError,
    HandlerError,
);

impl Exc {
    /// The exception class.
    pub fn ty(self, py: Python<'_>) -> PyResult<Bound<'_, PyType>> {
        self.cell().import(py, "memq._errors", self.name()).cloned()
    }

    /// A new exception of this class with `msg`.
    pub fn err(self, msg: impl Into<String>) -> PyErr {
        let msg = msg.into();
        Python::attach(|py| match self.ty(py) {
            Ok(ty) => PyErr::from_type(ty, msg),
            Err(e) => e,
        })
    }
}

/// `Lagged` with its `missed` count.
pub fn lagged(missed: u64) -> PyErr {
    Python::attach(|py| match Exc::Lagged.ty(py) {
        Ok(ty) => PyErr::from_type(ty, (format!("the reader missed {missed} messages"), missed)),
        Err(e) => e,
    })
}

/// memq's configuration and lookup errors.
pub fn from_error(e: memq::Error) -> PyErr {
    use memq::Error as E;
    let exc = match &e {
        E::CapacityTooLarge { .. } => Exc::AllocFailed,
        E::PartitionOutOfRange { .. } | E::OffsetOutOfRange { .. } | E::PartitionNotRead { .. } => {
            Exc::OutOfRange
        }
        E::UnknownTopic(_) => Exc::UnknownTopic,
        E::TopicExists(_) => Exc::TopicExists,
        E::UnknownGroup(_) => Exc::UnknownGroup,
        E::GroupModeMismatch(_) => Exc::GroupModeMismatch,
        _ => Exc::InvalidArgument,
    };
    exc.err(e.to_string())
}

/// A failed publish (the message itself is dropped: Python keeps its own copy).
pub fn from_publish<T>(e: PublishError<T>) -> PyErr {
    match e {
        PublishError::Full(_) => Exc::Full.err("the topic is full"),
        PublishError::Closed(_) => Exc::Closed.err("the topic is closed"),
        PublishError::InvalidPartition(_) => Exc::OutOfRange.err("no such partition"),
        _ => Exc::Error.err(e.to_string()),
    }
}

/// A failed receive.
pub fn from_recv(e: RecvError) -> PyErr {
    match e {
        RecvError::Lagged(n) => lagged(n),
        RecvError::Closed => Exc::Closed.err("the topic is closed and drained"),
        _ => Exc::Error.err(e.to_string()),
    }
}

/// A failed receive with a time limit.
pub fn from_recv_timeout(e: RecvTimeoutError) -> PyErr {
    match e {
        RecvTimeoutError::Timeout => Exc::Timeout.err("no message in time"),
        RecvTimeoutError::Lagged(n) => lagged(n),
        RecvTimeoutError::Closed => Exc::Closed.err("the topic is closed and drained"),
        _ => Exc::Error.err(e.to_string()),
    }
}

/// A failed `try_recv` (the caller handles `Empty` first).
pub fn from_try_recv(e: TryRecvError) -> PyErr {
    match e {
        TryRecvError::Empty => Exc::Timeout.err("no message ready"),
        TryRecvError::Lagged(n) => lagged(n),
        TryRecvError::Closed => Exc::Closed.err("the topic is closed and drained"),
        _ => Exc::Error.err(e.to_string()),
    }
}

/// A failed ack, nack, touch or reject.
pub fn from_ack(e: AckError) -> PyErr {
    match e {
        AckError::LeaseExpired => Exc::LeaseExpired.err(
            "the lease ran out (or the delivery was settled): the message went back to the group",
        ),
        AckError::GroupDeleted => Exc::GroupDeleted.err("the group was deleted"),
        _ => Exc::Error.err(e.to_string()),
    }
}

/// A durable log's error.
pub fn from_store(e: StoreError) -> PyErr {
    let exc = match &e {
        StoreError::Locked { .. } => Exc::Locked,
        StoreError::Corrupt { .. } | StoreError::Format { .. } => Exc::Corrupt,
        StoreError::Full => Exc::DiskFull,
        StoreError::TooLarge { .. } => Exc::InvalidArgument,
        StoreError::InvalidConfig(_) => Exc::InvalidArgument,
        StoreError::Io { source, .. } if source.raw_os_error() == Some(28) => Exc::DiskFull,
        _ => Exc::StoreIOError,
    };
    exc.err(e.to_string())
}

/// A failed durable open.
pub fn from_open(e: OpenError) -> PyErr {
    match e {
        OpenError::Config(why) => Exc::InvalidArgument.err(why),
        OpenError::Store(e) => from_store(e),
        e => Exc::Error.err(e.to_string()),
    }
}

/// A failed durable publish.
pub fn from_durable_publish<T>(e: DurablePublishError<T>) -> PyErr {
    match e {
        DurablePublishError::Full(_) => Exc::Full.err("the topic is full"),
        DurablePublishError::Closed(_) => Exc::Closed.err("the topic is closed"),
        DurablePublishError::InvalidPartition(_) => Exc::OutOfRange.err("no such partition"),
        DurablePublishError::Store(e, _) => from_store(e),
        _ => Exc::Error.err("durable publish failed"),
    }
}

/// A failed durable receive (the caller handles `Empty` and `Timeout` where they mean
/// something else).
pub fn from_durable_recv(e: DurableRecvError) -> PyErr {
    match e {
        DurableRecvError::Empty => Exc::Timeout.err("no message ready"),
        DurableRecvError::Timeout => Exc::Timeout.err("no message in time"),
        DurableRecvError::Lagged(n) => lagged(n),
        DurableRecvError::Closed => Exc::Closed.err("the topic is closed and drained"),
        DurableRecvError::Store(e) => from_store(e),
        e => Exc::Error.err(format!("{e:?}")),
    }
}
