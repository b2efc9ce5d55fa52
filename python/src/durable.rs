//! Durable topics (`memq::durable`): [`DurableTopic`], its [`DurableSubscriber`] and
//! [`DurableConsumer`] (a durable group, plain or explicit-ack).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use memq::durable::{self as store, DurableConfig, Retention, SyncPolicy};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::errors::{self, Exc};
use crate::message::{DeadLetter, Delivery, Form, Message};
use crate::reader::{from_durable, Fail, Reader, Step};
use crate::topic::{self, Route};
use crate::util::{self, Slot};

fn receipt(py: Python<'_>, r: &store::DurableReceipt) -> PyResult<Py<PyAny>> {
    Ok(PyTuple::new(py, [r.partition as u64, r.offset])?
        .into_any()
        .unbind())
}

/// A topic whose partitions are crash-safe segment logs in a directory: what is
/// published survives a restart; groups keep their positions and unacked deliveries.
/// One process opens a directory at a time (`Locked`). A context manager that closes.
#[pyclass(frozen, module = "memq")]
#[derive(Debug)]
pub struct DurableTopic {
    // None once closed: close() drops this handle, so that the directory is released as
    // soon as the readers are closed too (a reopen in the same process works).
    inner: std::sync::Mutex<Option<store::DurableTopic>>,
    path: PathBuf,
    partitions: u32,
}

impl DurableTopic {
    /// Joins a durable group (see `group`).
    pub(crate) fn join_group(
        &self,
        py: Python<'_>,
        name: &str,
        start: memq::StartAt,
        ack_wait: Option<&Bound<'_, PyAny>>,
        max_deliveries: Option<&Bound<'_, PyAny>>,
        commit_every: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Member> {
        let acked = ack_wait.filter(|w| !w.is_none());
        let mut gc = match acked {
            Some(w) => {
                let d = util::seconds(w, "ack_wait")?;
                if d.is_zero() {
                    return Err(Exc::InvalidArgument.err("ack_wait must be more than 0 seconds"));
                }
                store::GroupConfig::acked(d)
            }
            None => store::GroupConfig::default(),
        };
        if let Some(n) = util::opt_int(max_deliveries, "max_deliveries", 1, i128::from(u32::MAX))? {
            gc = gc.max_deliveries(n as u32);
        }
        if let Some(n) = util::opt_int(commit_every, "commit_every", 1, i128::from(u32::MAX))? {
            gc = gc.commit_every(n as u32);
        }
        let t = &self.handle()?;
        let c = py
            .detach(|| t.group(name, start, gc))
            .map_err(errors::from_store)?;
        Ok(Member {
            c,
            acked: acked.is_some(),
        })
    }

    /// A reader of group `name`'s dead letters from `start` (opening the log may touch
    /// the disk: without the GIL).
    pub(crate) fn dead_letter_reader(
        &self,
        py: Python<'_>,
        name: &str,
        start: memq::StartAt,
    ) -> PyResult<store::DeadLetters> {
        let t = self.handle()?;
        py.detach(|| t.dead_letters(name, start))
            .map_err(errors::from_store)
    }

    fn handle(&self) -> PyResult<store::DurableTopic> {
        util::lock(&self.inner)
            .clone()
            .ok_or_else(|| Exc::Closed.err("the durable topic is closed"))
    }
}

#[pymethods]
impl DurableTopic {
    /// Opens (or creates) the durable topic in `path`. `sync`: "always" (a publish
    /// returns once on disk; concurrent publishers share an fsync), "interval" (synced
    /// every `sync_interval` seconds) or "never" (the OS decides). `capacity` is the
    /// in-memory tail per partition; readers behind it read from disk. Retention:
    /// `retention_bytes`, `retention_age` (seconds), `retention_segments`.
    #[new]
    #[pyo3(signature = (path, capacity=None, *, partitions=None, overflow="block", sync="always", sync_interval=None, segment_bytes=None, retention_bytes=None, retention_age=None, retention_segments=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        capacity: Option<&Bound<'_, PyAny>>,
        partitions: Option<&Bound<'_, PyAny>>,
        overflow: &str,
        sync: &str,
        sync_interval: Option<&Bound<'_, PyAny>>,
        segment_bytes: Option<&Bound<'_, PyAny>>,
        retention_bytes: Option<&Bound<'_, PyAny>>,
        retention_age: Option<&Bound<'_, PyAny>>,
        retention_segments: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let tc = topic::config(capacity, partitions, overflow, None, false)?;
        let policy = match sync {
            "always" => SyncPolicy::Always,
            "never" => SyncPolicy::Never,
            "interval" => {
                let every = match sync_interval.filter(|s| !s.is_none()) {
                    Some(s) => util::seconds(s, "sync_interval")?,
                    None => Duration::from_secs(1),
                };
                if every.is_zero() {
                    return Err(Exc::InvalidArgument.err("sync_interval must be more than 0"));
                }
                SyncPolicy::Interval(every)
            }
            other => {
                return Err(Exc::InvalidArgument.err(format!(
                    "sync is \"always\", \"interval\" or \"never\", not {other:?}"
                )))
            }
        };
        let mut dc = DurableConfig::new(policy);
        if let Some(b) = util::opt_int(segment_bytes, "segment_bytes", 4096, 1 << 40)? {
            dc = dc.segment_bytes(b as u64);
        }
        let age = match retention_age.filter(|a| !a.is_none()) {
            Some(a) => Some(util::seconds(a, "retention_age")?),
            None => None,
        };
        let retention = Retention {
            max_bytes: util::opt_int(retention_bytes, "retention_bytes", 1, i128::from(u64::MAX))?
                .map(|b| b as u64),
            max_age: age,
            max_segments: util::opt_int(retention_segments, "retention_segments", 1, 1 << 40)?
                .map(|s| s as usize),
        };
        dc = dc.retention(retention);
        let p = path.clone();
        let inner = py
            .detach(move || store::DurableTopic::open(&p, tc, dc))
            .map_err(errors::from_open)?;
        Ok(DurableTopic {
            partitions: inner.partitions(),
            inner: std::sync::Mutex::new(Some(inner)),
            path,
        })
    }

    /// Publishes `data` (on disk before readers see it; with sync "always", synced
    /// before this returns); returns `(partition, offset)`. `key` routes (and is
    /// stored), `partition` picks one. On a full topic waits up to `timeout` seconds.
    #[pyo3(signature = (data, *, key=None, partition=None, timeout=None))]
    fn publish(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        key: Option<&Bound<'_, PyAny>>,
        partition: Option<&Bound<'_, PyAny>>,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let value = util::payload(data)?;
        let route = Route::from_args(key, partition)?;
        let limit = util::timeout(timeout)?;
        let t = &self.handle()?;
        let tried = py.detach(|| match &route {
            Route::Any => t.try_publish(value),
            Route::Key(k) => t.try_publish_keyed(Bytes::copy_from_slice(k), value),
            Route::To(p) => t.try_publish_to(*p, value),
        });
        let r = match tried {
            Ok(r) => r,
            Err(store::DurablePublishError::Full(v)) if limit != Some(Duration::ZERO) => {
                // Waits for room in slices (waking for Ctrl-C on the main thread): each
                // slice is a publish with a time limit on the wait for room, which hands
                // the payload back if none came, so a timeout never leaves a message
                // half-published.
                let mut value = Some(v);
                let got = util::wait(py, limit, |d| {
                    let v = value.take()?;
                    let r = match &route {
                        Route::Any => t.publish_blocking_timeout(v, d),
                        Route::Key(k) => {
                            t.publish_keyed_blocking_timeout(Bytes::copy_from_slice(k), v, d)
                        }
                        Route::To(p) => t.publish_to_blocking_timeout(*p, v, d),
                    };
                    match r {
                        Err(store::DurablePublishError::Full(back)) => {
                            value = Some(back);
                            None
                        }
                        other => Some(other),
                    }
                })?;
                match got {
                    Some(r) => r.map_err(errors::from_durable_publish)?,
                    None => return Err(Exc::Timeout.err("no room in time")),
                }
            }
            Err(e) => return Err(errors::from_durable_publish(e)),
        };
        receipt(py, &r)
    }

    /// Publishes `items` as one batch to one partition, all or nothing; returns
    /// `(partition, first_offset)`.
    #[pyo3(signature = (items, *, key=None, partition=None))]
    fn publish_batch(
        &self,
        py: Python<'_>,
        items: &Bound<'_, PyAny>,
        key: Option<&Bound<'_, PyAny>>,
        partition: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let mut batch = Vec::new();
        if items.is_instance_of::<pyo3::types::PyBytes>() {
            return Err(Exc::InvalidType.err("a batch is an iterable of payloads, not one payload"));
        }
        for item in items.try_iter().map_err(|_| {
            Exc::InvalidType.err(format!(
                "a batch is an iterable of bytes-like payloads, not {}",
                util::type_name(items)
            ))
        })? {
            batch.push(util::payload(&item?)?);
        }
        let route = Route::from_args(key, partition)?;
        let t = &self.handle()?;
        let r = py
            .detach(|| match &route {
                Route::Any => t.publish_batch_blocking(batch),
                Route::Key(k) => t.publish_batch_keyed_blocking(Bytes::copy_from_slice(k), batch),
                Route::To(p) => t.publish_batch_to_blocking(*p, batch),
            })
            .map_err(errors::from_durable_publish)?;
        receipt(py, &r)
    }

    /// A subscriber from `start` ("earliest", "latest" or an offset); it replays from
    /// disk what memory no longer holds. `memoryview`: as for `Topic.subscribe`.
    #[pyo3(signature = (start=None, *, memoryview=false))]
    fn subscribe(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        memoryview: bool,
    ) -> PyResult<DurableSubscriber> {
        let sub = self
            .handle()?
            .subscribe(util::start_opt(start)?)
            .map_err(errors::from_error)?;
        Ok(DurableSubscriber {
            slot: Slot::new(sub, "subscriber"),
            form: Form::from_flag(memoryview),
        })
    }

    /// The dead letters of group `name` from `start` ("earliest" by default, "latest"
    /// or an offset): what it gave up on after `max_deliveries`, or what a member
    /// rejected, with where it came from. The group need not be open. `memoryview`: as
    /// for `Topic.subscribe`.
    #[pyo3(signature = (name, start=None, *, memoryview=false))]
    fn dead_letters(
        &self,
        py: Python<'_>,
        name: &str,
        start: Option<&Bound<'_, PyAny>>,
        memoryview: bool,
    ) -> PyResult<DurableDeadLetters> {
        let start = match start {
            None => memq::StartAt::Earliest,
            Some(_) => util::start_opt(start)?,
        };
        let reader = self.dead_letter_reader(py, name, start)?;
        Ok(DurableDeadLetters {
            slot: Slot::new(reader, "dead-letter reader"),
            form: Form::from_flag(memoryview),
        })
    }

    /// Joins the durable group `name`: it goes on from its committed offsets after a
    /// restart (`start` applies to a new group). With `ack_wait` (seconds) it is an
    /// explicit-ack group handing out `Delivery` objects (ack/nack); unacked deliveries
    /// come back after a restart. `commit_every`: positions written every N messages.
    /// `memoryview`: as for `Topic.subscribe`.
    #[pyo3(signature = (name, *, start=None, ack_wait=None, max_deliveries=None, commit_every=None, memoryview=false))]
    #[allow(clippy::too_many_arguments)]
    fn group(
        &self,
        py: Python<'_>,
        name: &str,
        start: Option<&Bound<'_, PyAny>>,
        ack_wait: Option<&Bound<'_, PyAny>>,
        max_deliveries: Option<&Bound<'_, PyAny>>,
        commit_every: Option<&Bound<'_, PyAny>>,
        memoryview: bool,
    ) -> PyResult<DurableConsumer> {
        let start = util::start_opt(start)?;
        let m = self.join_group(py, name, start, ack_wait, max_deliveries, commit_every)?;
        Ok(DurableConsumer {
            slot: Slot::new(m, "consumer"),
            group: name.to_owned(),
            form: Form::from_flag(memoryview),
        })
    }

    /// The next offset of `partition`.
    #[pyo3(signature = (partition=0))]
    fn next_offset(&self, partition: u32) -> PyResult<u64> {
        self.handle()?
            .next_offset(partition)
            .ok_or_else(|| Exc::OutOfRange.err(format!("no partition {partition}")))
    }

    /// The oldest offset kept on disk in `partition`.
    #[pyo3(signature = (partition=0))]
    fn start_offset(&self, partition: u32) -> PyResult<u64> {
        self.handle()?
            .start_offset(partition)
            .ok_or_else(|| Exc::OutOfRange.err(format!("no partition {partition}")))
    }

    /// `memq._types.DurableStats`: the logs, and the in-memory topic over them.
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let s = self.handle()?.stats();
        let types = py.import("memq._types")?;
        let pcls = types.getattr("DurablePartitionStats")?;
        let parts = PyList::empty(py);
        for p in &s.partitions {
            let kw = PyDict::new(py);
            kw.set_item("partition", p.partition)?;
            kw.set_item("start", p.start)?;
            kw.set_item("next", p.next)?;
            kw.set_item("bytes", p.bytes)?;
            kw.set_item("segments", p.segments)?;
            kw.set_item("synced", p.synced)?;
            parts.append(pcls.call((), Some(&kw))?)?;
        }
        let memory = topic::stats_to_py(py, &s.memory)?;
        Ok(types
            .getattr("DurableStats")?
            .call1((parts, memory))?
            .unbind())
    }

    /// The directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// The number of partitions.
    #[getter]
    fn partitions(&self) -> u32 {
        self.partitions
    }

    /// Closes: publishers get `Closed`, readers drain and get `Closed`. The directory is
    /// released when every handle (readers included) is gone.
    fn close(&self) {
        let t = util::lock(&self.inner).take();
        if let Some(t) = t {
            t.close();
        }
    }

    /// Whether it is closed.
    #[getter]
    fn closed(&self) -> bool {
        util::lock(&self.inner)
            .as_ref()
            .is_none_or(|t| t.is_closed())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> bool {
        self.close();
        false
    }

    fn __repr__(&self) -> String {
        format!(
            "DurableTopic(path={:?}, partitions={}, closed={})",
            self.path,
            self.partitions,
            self.closed()
        )
    }
}

impl Reader for store::DurableSubscriber {
    type Item = store::DurableMessage;
    fn try_recv(&mut self) -> Step<Self::Item> {
        from_durable(store::DurableSubscriber::try_recv(self))
    }
    fn recv_timeout(&mut self, d: Duration) -> Step<Self::Item> {
        from_durable(self.recv_blocking_timeout(d))
    }
    async fn recv_async(&mut self) -> Result<Self::Item, Fail> {
        from_durable(self.recv().await).and_then(|m| m.ok_or(Fail::Closed))
    }
    fn to_py(py: Python<'_>, item: Self::Item, form: Form) -> PyResult<Py<PyAny>> {
        Ok(Py::new(py, Message::from_durable(py, &item, form)?)?.into_any())
    }
}

impl Reader for store::DeadLetters {
    type Item = store::DurableDeadLetter;
    fn try_recv(&mut self) -> Step<Self::Item> {
        from_durable(store::DeadLetters::try_recv(self))
    }
    fn recv_timeout(&mut self, d: Duration) -> Step<Self::Item> {
        from_durable(self.recv_blocking_timeout(d))
    }
    async fn recv_async(&mut self) -> Result<Self::Item, Fail> {
        from_durable(self.recv().await).and_then(|m| m.ok_or(Fail::Closed))
    }
    fn to_py(py: Python<'_>, item: Self::Item, form: Form) -> PyResult<Py<PyAny>> {
        Ok(Py::new(py, DeadLetter::from_durable(py, &item, form)?)?.into_any())
    }
}

/// A reader of a durable group's dead letters (`DurableTopic.dead_letters`), handing out
/// `DeadLetter` objects.
#[pyclass(frozen, module = "memq")]
#[derive(Debug)]
pub struct DurableDeadLetters {
    slot: Arc<Slot<store::DeadLetters>>,
    form: Form,
}

crate::readers::reader_class!(
    DurableDeadLetters,
    store::DeadLetters,
    "DurableDeadLetters",
    {}
);

/// A durable topic's subscriber.
#[pyclass(frozen, module = "memq")]
#[derive(Debug)]
pub struct DurableSubscriber {
    slot: Arc<Slot<store::DurableSubscriber>>,
    form: Form,
}

crate::readers::reader_class!(
    DurableSubscriber,
    store::DurableSubscriber,
    "DurableSubscriber",
    {}
);

/// A durable group member, plain or explicit-ack.
#[derive(Debug)]
pub struct Member {
    c: store::DurableConsumer,
    acked: bool,
}

/// What a durable member hands out.
#[derive(Debug)]
pub enum Got {
    /// From a plain group.
    Message(store::DurableMessage),
    /// From an explicit-ack group.
    Delivery(store::Delivery),
}

impl Reader for Member {
    type Item = Got;
    fn try_recv(&mut self) -> Step<Self::Item> {
        if self.acked {
            from_durable(self.c.recv_delivery_timeout(Duration::ZERO)).map(|o| o.map(Got::Delivery))
        } else {
            from_durable(self.c.try_recv()).map(|o| o.map(Got::Message))
        }
    }
    fn recv_timeout(&mut self, d: Duration) -> Step<Self::Item> {
        if self.acked {
            from_durable(self.c.recv_delivery_timeout(d)).map(|o| o.map(Got::Delivery))
        } else {
            from_durable(self.c.recv_blocking_timeout(d)).map(|o| o.map(Got::Message))
        }
    }
    async fn recv_async(&mut self) -> Result<Self::Item, Fail> {
        let r = if self.acked {
            from_durable(self.c.recv_delivery().await).map(|o| o.map(Got::Delivery))
        } else {
            from_durable(self.c.recv().await).map(|o| o.map(Got::Message))
        };
        r.and_then(|m| m.ok_or(Fail::Closed))
    }
    fn to_py(py: Python<'_>, item: Self::Item, form: Form) -> PyResult<Py<PyAny>> {
        match item {
            Got::Message(m) => Ok(Py::new(py, Message::from_durable(py, &m, form)?)?.into_any()),
            Got::Delivery(d) => Ok(Py::new(py, Delivery::from_durable(py, d, form)?)?.into_any()),
        }
    }
}

/// A member of a durable group.
#[pyclass(frozen, module = "memq")]
#[derive(Debug)]
pub struct DurableConsumer {
    slot: Arc<Slot<Member>>,
    group: String,
    form: Form,
}

crate::readers::reader_class!(DurableConsumer, Member, "DurableConsumer", {
    /// The group's name.
    #[getter]
    fn group(&self) -> &str {
        &self.group
    }

    /// Writes the group's positions now (they are also written every `commit_every`
    /// messages and when the member leaves).
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        let mut lease = self.slot.take()?;
        let m = lease.get();
        py.detach(|| m.c.commit()).map_err(errors::from_store)
    }

    /// The group's counters (`memq.DurableGroupStats`): members, committed offsets (in
    /// memory and on disk, per partition), deliveries in flight, redelivered and
    /// dead-lettered.
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let s = self
            .slot
            .peek(|m| m.c.stats())
            .ok_or_else(|| Exc::Busy.err("the consumer is in use or closed"))?;
        let kw = PyDict::new(py);
        kw.set_item("name", &self.group)?;
        kw.set_item("members", s.members)?;
        kw.set_item("committed", s.committed)?;
        kw.set_item("committed_on_disk", s.committed_on_disk)?;
        kw.set_item("in_flight", s.in_flight)?;
        kw.set_item("redelivered", s.redelivered)?;
        kw.set_item("dead_lettered", s.dead_lettered)?;
        let cls = py.import("memq._types")?.getattr("DurableGroupStats")?;
        Ok(cls.call((), Some(&kw))?.unbind())
    }
});
