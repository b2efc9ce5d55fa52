//! What readers hand out: [`Message`], [`Delivery`] (a message to settle) and
//! [`DeadLetter`], and their conversion from memq's values.

use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyMemoryView};

use crate::errors::{self, Exc};
use crate::util::{self, lock};

/// The payload as Python sees it: `bytes`, one copy out of the log.
pub fn data(py: Python<'_>, b: &[u8]) -> Py<PyAny> {
    PyBytes::new(py, b).into_any().unbind()
}

/// How a reader hands out payloads: `bytes`, or a `memoryview` (asked for with
/// `memoryview=True`), whose slices share its memory instead of copying.
///
/// The view is over the same one `bytes` copy, not over memq's buffer: with the stable
/// ABI (abi3, Python 3.9) an extension type cannot export the buffer protocol, so a
/// view straight over a Rust-owned buffer cannot be made; a view over the `bytes`
/// keeps the one copy and makes slicing free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Form {
    /// `bytes`.
    #[default]
    Bytes,
    /// A `memoryview` over `bytes`.
    View,
}

impl Form {
    /// From a `memoryview=` argument.
    pub fn from_flag(memoryview: bool) -> Form {
        if memoryview {
            Form::View
        } else {
            Form::Bytes
        }
    }
}

/// The payload in the reader's form.
pub fn payload(py: Python<'_>, b: &[u8], form: Form) -> PyResult<Py<PyAny>> {
    let bytes = PyBytes::new(py, b);
    match form {
        Form::Bytes => Ok(bytes.into_any().unbind()),
        Form::View => Ok(PyMemoryView::from(bytes.as_any())?.into_any().unbind()),
    }
}

/// A received message: `data` (bytes), `offset`, `partition`, `timestamp` (seconds by
/// the topic's clock, or None without one) and `key` (durable topics only).
#[pyclass(frozen, get_all, module = "memq")]
#[derive(Debug)]
pub struct Message {
    /// The payload.
    pub data: Py<PyAny>,
    /// Its offset in its partition.
    pub offset: u64,
    /// Its partition.
    pub partition: u32,
    /// When it was published, in seconds by the topic's clock; None without a clock.
    pub timestamp: Option<f64>,
    /// Its key (durable topics keep keys; in-memory topics only route by them).
    pub key: Option<Py<PyAny>>,
}

impl Message {
    /// From an in-memory topic's message.
    pub fn from_memq(py: Python<'_>, m: &memq::Message<Bytes>, form: Form) -> PyResult<Message> {
        Ok(Message {
            data: payload(py, m.value(), form)?,
            offset: m.offset(),
            partition: m.partition(),
            timestamp: m.timestamp().map(|t| t.as_secs_f64()),
            key: None,
        })
    }

    /// From a durable topic's message.
    pub fn from_durable(
        py: Python<'_>,
        m: &memq::durable::DurableMessage,
        form: Form,
    ) -> PyResult<Message> {
        Ok(Message {
            data: payload(py, &m.payload, form)?,
            offset: m.offset,
            partition: m.partition,
            timestamp: Some(Duration::from_nanos(m.timestamp).as_secs_f64()),
            key: m.key.as_ref().map(|k| data(py, k)),
        })
    }
}

#[pymethods]
impl Message {
    fn __repr__(&self, py: Python<'_>) -> String {
        let n = self.data.bind(py).len().unwrap_or(0);
        format!(
            "Message(partition={}, offset={}, data=<{} bytes>)",
            self.partition, self.offset, n
        )
    }

    /// The payload as `bytes` (for a `memoryview` payload, the `bytes` it views: no
    /// copy).
    fn __bytes__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let d = self.data.bind(py);
        match d.cast::<PyMemoryView>() {
            Ok(view) => Ok(view.getattr("obj")?.unbind()),
            Err(_) => Ok(d.clone().unbind()),
        }
    }
}

/// A settlement a [`Delivery`] can take.
#[derive(Debug, Clone, Copy)]
pub enum Settle {
    /// Done.
    Ack,
    /// Again (after this delay, or the group's backoff).
    Nack(Option<Duration>),
    /// Dead-letter.
    Reject,
}

/// What a delivery wraps: an in-memory one or a durable one.
#[derive(Debug)]
pub enum Lease {
    /// An in-memory explicit-ack group's delivery.
    Memory(memq::Delivery<Bytes>),
    /// A durable group's delivery.
    Durable(memq::durable::Delivery),
}

/// A message from an explicit-ack group, to settle: `ack()` (done), `nack()` /
/// `nack_after(seconds)` (deliver again), `touch()` (extend the lease), `reject()`
/// (dead-letter). Dropping it unsettled nacks it. As a context manager it acks when the
/// block succeeds and nacks when it raises.
#[pyclass(frozen, module = "memq")]
pub struct Delivery {
    message: Py<Message>,
    deliveries: u32,
    lease: Mutex<Option<Lease>>,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("deliveries", &self.deliveries)
            .finish_non_exhaustive()
    }
}

impl Delivery {
    /// Wraps an in-memory delivery.
    pub fn from_memq(py: Python<'_>, d: memq::Delivery<Bytes>, form: Form) -> PyResult<Delivery> {
        Ok(Delivery {
            message: Py::new(py, Message::from_memq(py, d.message(), form)?)?,
            deliveries: d.deliveries(),
            lease: Mutex::new(Some(Lease::Memory(d))),
        })
    }

    /// Wraps a durable delivery.
    pub fn from_durable(
        py: Python<'_>,
        d: memq::durable::Delivery,
        form: Form,
    ) -> PyResult<Delivery> {
        Ok(Delivery {
            message: Py::new(py, Message::from_durable(py, d.message(), form)?)?,
            deliveries: d.deliveries(),
            lease: Mutex::new(Some(Lease::Durable(d))),
        })
    }

    fn settle(&self, how: Settle) -> PyResult<()> {
        let lease = lock(&self.lease)
            .take()
            .ok_or_else(|| Exc::LeaseExpired.err("the delivery was settled already"))?;
        match lease {
            Lease::Memory(d) => match how {
                Settle::Ack => d.ack(),
                Settle::Nack(None) => d.nack(),
                Settle::Nack(Some(t)) => d.nack_after(t),
                Settle::Reject => d.reject(),
            }
            .map_err(errors::from_ack),
            Lease::Durable(d) => match how {
                // A durable ack may write the group's positions: without the GIL.
                Settle::Ack => {
                    Python::attach(|py| py.detach(|| d.ack())).map_err(errors::from_store)
                }
                Settle::Nack(None) => {
                    d.nack();
                    Ok(())
                }
                Settle::Nack(Some(t)) => d.nack_after(t).map_err(errors::from_store),
                // A reject publishes to the group's dead-letter log: without the GIL.
                Settle::Reject => {
                    Python::attach(|py| py.detach(|| d.reject())).map_err(errors::from_store)
                }
            },
        }
    }
}

#[pymethods]
impl Delivery {
    /// The message.
    #[getter]
    fn message(&self, py: Python<'_>) -> Py<Message> {
        self.message.clone_ref(py)
    }
    /// The payload.
    #[getter]
    fn data(&self, py: Python<'_>) -> Py<PyAny> {
        self.message.get().data.clone_ref(py)
    }
    /// The offset.
    #[getter]
    fn offset(&self) -> u64 {
        self.message.get().offset
    }
    /// The partition.
    #[getter]
    fn partition(&self) -> u32 {
        self.message.get().partition
    }
    /// How many times this message was delivered, this delivery included (1 the first time).
    #[getter]
    fn deliveries(&self) -> u32 {
        self.deliveries
    }
    /// Whether it was settled (acked, nacked, rejected).
    #[getter]
    fn settled(&self) -> bool {
        lock(&self.lease).is_none()
    }

    /// Acknowledges: done, never delivered again.
    fn ack(&self) -> PyResult<()> {
        self.settle(Settle::Ack)
    }

    /// Gives it back for another delivery, after the group's backoff.
    fn nack(&self) -> PyResult<()> {
        self.settle(Settle::Nack(None))
    }

    /// Gives it back, to be delivered again after `delay` seconds.
    fn nack_after(&self, delay: &Bound<'_, PyAny>) -> PyResult<()> {
        let d = util::seconds(delay, "delay")?;
        self.settle(Settle::Nack(Some(d)))
    }

    /// Extends the lease by the group's `ack_wait`, from now.
    fn touch(&self) -> PyResult<()> {
        match &mut *lock(&self.lease) {
            None => Err(Exc::LeaseExpired.err("the delivery was settled already")),
            Some(Lease::Memory(d)) => d.touch().map_err(errors::from_ack),
            Some(Lease::Durable(d)) => d.touch().map_err(errors::from_store),
        }
    }

    /// Dead-letters it: to the group's dead-letter topic, never delivered again.
    fn reject(&self) -> PyResult<()> {
        self.settle(Settle::Reject)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if lock(&self.lease).is_some() {
            if exc_type.is_some_and(|t| !t.is_none()) {
                self.settle(Settle::Nack(None))?;
            } else {
                self.settle(Settle::Ack)?;
            }
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let m = self.message.get();
        format!(
            "Delivery(partition={}, offset={}, deliveries={}, settled={})",
            m.partition,
            m.offset,
            self.deliveries,
            self.settled()
        )
    }
}

/// A message an explicit-ack group gave up on: why (`reason`: "max_deliveries" or
/// "rejected"), where it came from, and its payload.
#[pyclass(frozen, get_all, module = "memq")]
#[derive(Debug)]
pub struct DeadLetter {
    /// The name of the topic it came from, if the topic has one.
    pub topic: Option<String>,
    /// The group that gave up on it.
    pub group: String,
    /// Its partition in that topic.
    pub partition: u32,
    /// Its offset in that partition.
    pub offset: u64,
    /// How many times it was delivered.
    pub deliveries: u32,
    /// "max_deliveries" or "rejected".
    pub reason: &'static str,
    /// The payload.
    pub data: Py<PyAny>,
}

impl DeadLetter {
    /// From a durable group's dead letter.
    pub fn from_durable(
        py: Python<'_>,
        d: &memq::durable::DurableDeadLetter,
        form: Form,
    ) -> PyResult<DeadLetter> {
        Ok(DeadLetter {
            topic: None,
            group: d.group.clone(),
            partition: d.partition,
            offset: d.offset,
            deliveries: d.deliveries,
            reason: match d.reason {
                memq::DeadLetterReason::MaxDeliveries => "max_deliveries",
                _ => "rejected",
            },
            data: payload(py, &d.payload, form)?,
        })
    }

    /// From memq's dead letter.
    pub fn from_memq(
        py: Python<'_>,
        d: &memq::DeadLetter<Bytes>,
        form: Form,
    ) -> PyResult<DeadLetter> {
        Ok(DeadLetter {
            topic: d.topic.clone(),
            group: d.group.clone(),
            partition: d.partition,
            offset: d.offset,
            deliveries: d.deliveries,
            reason: match d.reason {
                memq::DeadLetterReason::MaxDeliveries => "max_deliveries",
                _ => "rejected",
            },
            data: payload(py, &d.value, form)?,
        })
    }
}

#[pymethods]
impl DeadLetter {
    fn __repr__(&self) -> String {
        format!(
            "DeadLetter(group={:?}, partition={}, offset={}, deliveries={}, reason={:?})",
            self.group, self.partition, self.offset, self.deliveries, self.reason
        )
    }
}
