//! The Python reader classes over memq's in-memory readers: [`Subscriber`] (broadcast),
//! [`Consumer`] (a consumer group's member), [`AckConsumer`] (an explicit-ack group's
//! member, handing out deliveries) and [`DeadLetterSubscriber`].

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use pyo3::exceptions::PyStopAsyncIteration;
use pyo3::prelude::*;

use crate::aio::{BoxFut, Done};
use crate::message::{DeadLetter, Delivery, Form, Message};
use crate::reader::{from_timeout, from_try, Fail, Reader, Step};
use crate::util::{self, Slot};

/// The receive as a boxed future for asyncio: it borrows the reader from its slot for
/// as long as it lives. With `iter`, a closed topic ends an `async for`.
pub fn recv_future<R: Reader>(slot: &Arc<Slot<R>>, iter: bool, form: Form) -> PyResult<BoxFut> {
    let mut lease = slot.take()?;
    Ok(Box::pin(async move {
        let r = lease.get().recv_async().await;
        drop(lease);
        Box::new(move |py: Python<'_>| match r {
            Ok(i) => R::to_py(py, i, form),
            Err(Fail::Closed) if iter => Err(PyStopAsyncIteration::new_err(())),
            Err(f) => Err(f.into()),
        }) as Done
    }))
}

/// The methods every reader class has, generated for each (PyO3 classes cannot be
/// generic).
macro_rules! reader_class {
    // (defined before its users; exported to pool.rs below)
    ($class:ident, $reader:ty, $what:literal, { $($extra:tt)* }) => {
        #[pymethods]
        impl $class {
            /// Receives one message, waiting up to `timeout` seconds (None: as long as it
            /// takes; 0: only what is ready). Raises `Timeout`, `Lagged`, `Closed`. In a
            /// coroutine on a running asyncio loop it returns an awaitable instead.
            #[pyo3(signature = (timeout=None))]
            fn recv(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
                if crate::aio::in_loop(py)? {
                    if timeout.is_some_and(|t| !t.is_none()) {
                        return Err(crate::errors::Exc::InvalidArgument.err(
                            "in a coroutine use asyncio.wait_for(reader.recv(), timeout)",
                        ));
                    }
                    return crate::aio::awaitable(py, crate::readers::recv_future(&self.slot, false, self.form)?);
                }
                let limit = crate::util::timeout(timeout)?;
                crate::reader::recv(py, &self.slot, limit, self.form)
            }

            /// The receive as an awaitable, wherever it is called.
            fn recv_async(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
                crate::aio::awaitable(py, crate::readers::recv_future(&self.slot, false, self.form)?)
            }

            /// Receives what is ready without waiting; None if nothing is.
            fn try_recv(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
                crate::reader::try_recv(py, &self.slot, self.form)
            }

            /// Receives up to `max_count` messages: those ready, else waits up to
            /// `timeout` for the first. An empty list if none came in time.
            #[pyo3(signature = (max_count=None, timeout=None))]
            fn recv_many(
                &self,
                py: Python<'_>,
                max_count: Option<&Bound<'_, PyAny>>,
                timeout: Option<&Bound<'_, PyAny>>,
            ) -> PyResult<Vec<Py<PyAny>>> {
                let max = crate::util::opt_int(max_count, "max_count", 1, crate::reader::MAX_BATCH as i128)?.unwrap_or(256) as usize;
                let limit = crate::util::timeout(timeout)?;
                crate::reader::recv_many(py, &self.slot, max, limit, self.form)
            }

            fn __iter__(slf: Py<Self>) -> Py<Self> {
                slf
            }

            fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
                match crate::reader::recv(py, &self.slot, None, self.form) {
                    Ok(m) => Ok(Some(m)),
                    Err(e) if e.is_instance(py, crate::errors::Exc::Closed.ty(py)?.as_any()) => Ok(None),
                    Err(e) => Err(e),
                }
            }

            fn __aiter__(slf: Py<Self>) -> Py<Self> {
                slf
            }

            fn __anext__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
                crate::aio::awaitable(py, crate::readers::recv_future(&self.slot, true, self.form)?)
            }

            /// Leaves: the reader's hold on the log is released (a group member's
            /// partitions go to the others). Idempotent.
            fn close(&self) {
                self.slot.close();
            }

            /// Whether `close()` was called.
            #[getter]
            fn closed(&self) -> bool {
                self.slot.is_closed()
            }

            fn __enter__(slf: Py<Self>) -> Py<Self> {
                slf
            }

            #[pyo3(signature = (*_args))]
            fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
                self.slot.close();
                false
            }

            fn __repr__(&self) -> String {
                format!(concat!($what, "(closed={})"), if self.slot.is_closed() { "True" } else { "False" })
            }

            $($extra)*
        }
    };
}

pub(crate) use reader_class;

// ---- broadcast subscriber --------------------------------------------------------------

/// [`Reader`] for memq's in-memory readers of messages (a subscriber and a group
/// member), which have the same receive methods.
macro_rules! memq_message_reader {
    ($reader:ident) => {
        impl Reader for memq::$reader<Bytes> {
            type Item = memq::Message<Bytes>;
            fn try_recv(&mut self) -> Step<Self::Item> {
                from_try(memq::$reader::try_recv(self))
            }
            fn recv_timeout(&mut self, d: Duration) -> Step<Self::Item> {
                from_timeout(self.recv_blocking_timeout(d))
            }
            fn try_recv_many(
                &mut self,
                buf: &mut Vec<Self::Item>,
                limit: usize,
            ) -> Result<usize, Fail> {
                Ok(from_try(memq::$reader::try_recv_many(self, buf, limit))?.unwrap_or(0))
            }
            fn recv_many_timeout(
                &mut self,
                buf: &mut Vec<Self::Item>,
                limit: usize,
                d: Duration,
            ) -> Result<usize, Fail> {
                Ok(from_timeout(self.recv_many_blocking_timeout(buf, limit, d))?.unwrap_or(0))
            }
            async fn recv_async(&mut self) -> Result<Self::Item, Fail> {
                self.recv().await.map_err(Fail::from)
            }
            fn to_py(py: Python<'_>, item: Self::Item, form: Form) -> PyResult<Py<PyAny>> {
                Ok(Py::new(py, Message::from_memq(py, &item, form)?)?.into_any())
            }
        }
    };
}

memq_message_reader!(Subscriber);

/// A broadcast subscriber: sees every message of the topic from its own position.
#[pyclass(frozen, module = "memq")]
#[derive(Debug)]
pub struct Subscriber {
    pub(crate) slot: Arc<Slot<memq::Subscriber<Bytes>>>,
    pub(crate) form: Form,
}

reader_class!(Subscriber, memq::Subscriber<Bytes>, "Subscriber", {
    /// How many messages are published and not yet read, over its partitions.
    #[getter]
    fn lag(&self) -> PyResult<u64> {
        self.slot
            .peek(|s| s.lag())
            .ok_or_else(|| crate::errors::Exc::Busy.err("the subscriber is in use or closed"))
    }

    /// Moves to `offset` (on every partition it reads).
    fn seek(&self, offset: &Bound<'_, PyAny>) -> PyResult<()> {
        let off = util::int(offset, "offset", 0, i128::from(u64::MAX))? as u64;
        let mut lease = self.slot.take()?;
        lease.get().seek(off).map_err(crate::errors::from_error)
    }
});

// ---- consumer group member -------------------------------------------------------------

memq_message_reader!(Consumer);

/// A member of a consumer group: each message of the group goes to exactly one member.
#[pyclass(frozen, module = "memq")]
#[derive(Debug)]
pub struct Consumer {
    pub(crate) slot: Arc<Slot<memq::Consumer<Bytes>>>,
    pub(crate) group: String,
    pub(crate) form: Form,
}

reader_class!(Consumer, memq::Consumer<Bytes>, "Consumer", {
    /// The group's name.
    #[getter]
    fn group(&self) -> &str {
        &self.group
    }

    /// The partitions this member owns now.
    fn assignment(&self) -> PyResult<Vec<u32>> {
        self.slot
            .peek(|c| c.assignment())
            .ok_or_else(|| crate::errors::Exc::Busy.err("the consumer is in use or closed"))
    }
});

// ---- explicit-ack group member ---------------------------------------------------------

impl Reader for memq::AckConsumer<Bytes> {
    type Item = memq::Delivery<Bytes>;
    fn try_recv(&mut self) -> Step<Self::Item> {
        from_try(memq::AckConsumer::try_recv(self))
    }
    fn recv_timeout(&mut self, d: Duration) -> Step<Self::Item> {
        from_timeout(self.recv_blocking_timeout(d))
    }
    fn try_recv_many(&mut self, buf: &mut Vec<Self::Item>, limit: usize) -> Result<usize, Fail> {
        Ok(from_try(memq::AckConsumer::try_recv_many(self, buf, limit))?.unwrap_or(0))
    }
    fn recv_many_timeout(
        &mut self,
        buf: &mut Vec<Self::Item>,
        limit: usize,
        d: Duration,
    ) -> Result<usize, Fail> {
        Ok(from_timeout(self.recv_many_blocking_timeout(buf, limit, d))?.unwrap_or(0))
    }
    async fn recv_async(&mut self) -> Result<Self::Item, Fail> {
        self.recv().await.map_err(Fail::from)
    }
    fn to_py(py: Python<'_>, item: Self::Item, form: Form) -> PyResult<Py<PyAny>> {
        Ok(Py::new(py, Delivery::from_memq(py, item, form)?)?.into_any())
    }
}

/// A member of an explicit-ack group: receives hand out `Delivery` objects to settle.
#[pyclass(frozen, module = "memq")]
#[derive(Debug)]
pub struct AckConsumer {
    pub(crate) slot: Arc<Slot<memq::AckConsumer<Bytes>>>,
    pub(crate) group: String,
    pub(crate) form: Form,
}

reader_class!(AckConsumer, memq::AckConsumer<Bytes>, "AckConsumer", {
    /// The group's name.
    #[getter]
    fn group(&self) -> &str {
        &self.group
    }

    /// How many deliveries this member holds unsettled.
    fn pending(&self) -> PyResult<usize> {
        self.slot
            .peek(|c| c.pending().len())
            .ok_or_else(|| crate::errors::Exc::Busy.err("the consumer is in use or closed"))
    }
});

// ---- dead letters ----------------------------------------------------------------------

impl Reader for memq::Subscriber<memq::DeadLetter<Bytes>> {
    type Item = memq::Message<memq::DeadLetter<Bytes>>;
    fn try_recv(&mut self) -> Step<Self::Item> {
        from_try(memq::Subscriber::try_recv(self))
    }
    fn recv_timeout(&mut self, d: Duration) -> Step<Self::Item> {
        from_timeout(self.recv_blocking_timeout(d))
    }
    async fn recv_async(&mut self) -> Result<Self::Item, Fail> {
        self.recv().await.map_err(Fail::from)
    }
    fn to_py(py: Python<'_>, item: Self::Item, form: Form) -> PyResult<Py<PyAny>> {
        Ok(Py::new(py, DeadLetter::from_memq(py, item.value(), form)?)?.into_any())
    }
}

/// A subscriber of a dead-letter topic: receives `DeadLetter` objects.
#[pyclass(frozen, module = "memq")]
#[derive(Debug)]
pub struct DeadLetterSubscriber {
    pub(crate) slot: Arc<Slot<memq::Subscriber<memq::DeadLetter<Bytes>>>>,
    pub(crate) form: Form,
}

reader_class!(
    DeadLetterSubscriber,
    memq::Subscriber<memq::DeadLetter<Bytes>>,
    "DeadLetterSubscriber",
    {}
);
