//! [`Topic`] (a byte topic: publishing, readers, stats), [`DeadLetterTopic`] and
//! [`Broker`] (a registry of named topics).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::aio::{self, Done};
use crate::errors::{self, Exc};
use crate::message::Form;
use crate::readers::{AckConsumer, Consumer, DeadLetterSubscriber, Subscriber};
use crate::util::{self, Slot};

/// The largest capacity accepted from Python (memq refuses what it cannot allocate).
const MAX_CAPACITY: i128 = 1 << 40;

/// A topic's capacity when Python does not give one.
const DEFAULT_CAPACITY: usize = 1024;

/// Builds a topic's configuration from Python arguments (`None`: a capacity of
/// `DEFAULT_CAPACITY`, one partition).
pub fn config(
    capacity: Option<&Bound<'_, PyAny>>,
    partitions: Option<&Bound<'_, PyAny>>,
    overflow: &str,
    ttl: Option<&Bound<'_, PyAny>>,
    release_on_read: bool,
) -> PyResult<memq::TopicConfig> {
    let cap = match capacity {
        Some(c) => util::int(c, "capacity", 1, MAX_CAPACITY)? as usize,
        None => DEFAULT_CAPACITY,
    };
    let parts = match partitions {
        Some(p) => util::int(p, "partitions", 1, 1 << 16)? as u32,
        None => 1,
    };
    let overflow = match overflow {
        "block" => memq::Overflow::Block,
        "drop_oldest" => memq::Overflow::DropOldest,
        "reject" => memq::Overflow::Reject,
        other => {
            return Err(Exc::InvalidArgument.err(format!(
                "overflow is \"block\", \"drop_oldest\" or \"reject\", not {other:?}"
            )))
        }
    };
    let mut c = memq::TopicConfig::new(cap)
        .partitions(parts)
        .overflow(overflow)
        .release_on_read(release_on_read)
        .clock(Arc::new(memq::StdClock::new()));
    if let Some(t) = ttl.filter(|t| !t.is_none()) {
        let d = util::seconds(t, "ttl")?;
        if d.is_zero() {
            return Err(Exc::InvalidArgument.err("ttl must be more than 0 seconds"));
        }
        c = c.ttl(d);
    }
    Ok(c)
}

fn overflow_name(o: memq::Overflow) -> &'static str {
    match o {
        memq::Overflow::Block => "block",
        memq::Overflow::DropOldest => "drop_oldest",
        _ => "reject",
    }
}

fn types<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    static MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    let m = MODULE.get_or_try_init(py, || py.import("memq._types").map(|m| m.unbind()))?;
    m.bind(py).getattr(name)
}

/// memq's topic statistics as `memq.TopicStats`.
pub fn stats_to_py(py: Python<'_>, s: &memq::TopicStats) -> PyResult<Py<PyAny>> {
    let pcls = types(py, "PartitionStats")?;
    let gcls = types(py, "GroupStats")?;
    let parts = PyList::empty(py);
    for p in &s.partitions {
        let kw = PyDict::new(py);
        kw.set_item("partition", p.partition)?;
        kw.set_item("low", p.low)?;
        kw.set_item("high", p.high)?;
        kw.set_item("depth", p.depth)?;
        kw.set_item("published", p.published)?;
        kw.set_item("delivered", p.delivered)?;
        kw.set_item("evicted", p.evicted)?;
        kw.set_item("expired", p.expired)?;
        kw.set_item("released", p.released)?;
        kw.set_item("lagged", p.lagged)?;
        kw.set_item("subscribers", p.subscribers)?;
        kw.set_item("waiting_publishers", p.waiting_publishers)?;
        parts.append(pcls.call((), Some(&kw))?)?;
    }
    let groups = PyList::empty(py);
    for g in &s.groups {
        let kw = PyDict::new(py);
        kw.set_item("name", &g.name)?;
        kw.set_item("members", g.members)?;
        kw.set_item("committed", g.committed.clone())?;
        kw.set_item("lag", g.lag)?;
        kw.set_item("delivered", g.delivered)?;
        kw.set_item("in_flight", g.in_flight)?;
        kw.set_item("redelivered", g.redelivered)?;
        kw.set_item("acked", g.acked)?;
        kw.set_item("dead_lettered", g.dead_lettered)?;
        kw.set_item("evicted_unacked", g.evicted_unacked)?;
        kw.set_item("lagged", g.lagged)?;
        groups.append(gcls.call((), Some(&kw))?)?;
    }
    let kw = PyDict::new(py);
    kw.set_item("name", s.name.clone())?;
    kw.set_item("capacity", s.capacity)?;
    kw.set_item("overflow", overflow_name(s.overflow))?;
    kw.set_item("closed", s.closed)?;
    kw.set_item("published", s.published)?;
    kw.set_item("delivered", s.delivered)?;
    kw.set_item("evicted", s.evicted)?;
    kw.set_item("expired", s.expired)?;
    kw.set_item("released", s.released)?;
    kw.set_item("lagged", s.lagged)?;
    kw.set_item("depth", s.depth)?;
    kw.set_item("subscribers", s.subscribers)?;
    kw.set_item("partitions", parts)?;
    kw.set_item("groups", groups)?;
    Ok(types(py, "TopicStats")?.call((), Some(&kw))?.unbind())
}

/// Where a publish goes.
#[derive(Debug)]
pub enum Route {
    /// Round robin (or the only partition).
    Any,
    /// The key's partition.
    Key(Vec<u8>),
    /// This partition.
    To(u32),
}

impl Route {
    /// From the `key=` and `partition=` arguments (at most one of them).
    pub fn from_args(
        key: Option<&Bound<'_, PyAny>>,
        partition: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Route> {
        let key = key.filter(|k| !k.is_none());
        let partition = partition.filter(|p| !p.is_none());
        match (key, partition) {
            (Some(_), Some(_)) => Err(Exc::InvalidArgument.err("pass key or partition, not both")),
            (Some(k), None) => Ok(Route::Key(util::key(k)?)),
            (None, Some(p)) => Ok(Route::To(
                util::int(p, "partition", 0, i128::from(u32::MAX))? as u32,
            )),
            (None, None) => Ok(Route::Any),
        }
    }
}

fn receipt(py: Python<'_>, r: memq::Receipt) -> PyResult<Py<PyAny>> {
    Ok(PyTuple::new(py, [r.partition as u64, r.offset])?
        .into_any()
        .unbind())
}

fn batch_of(items: &Bound<'_, PyAny>) -> PyResult<Vec<Bytes>> {
    if items.is_instance_of::<pyo3::types::PyBytes>()
        || items.is_instance_of::<pyo3::types::PyString>()
    {
        return Err(
            Exc::InvalidType.err("a batch is an iterable of bytes-like payloads, not one payload")
        );
    }
    let iter = items.try_iter().map_err(|_| {
        Exc::InvalidType.err(format!(
            "a batch is an iterable of bytes-like payloads, not {}",
            util::type_name(items)
        ))
    })?;
    let mut out = Vec::with_capacity(items.len().unwrap_or(0));
    for item in iter {
        out.push(util::payload(&item?)?);
    }
    Ok(out)
}

/// A topic of byte messages: a bounded log per partition with offsets, broadcast
/// subscribers, consumer groups and explicit-ack groups. Thread-safe; a context manager
/// that closes it.
#[pyclass(frozen, module = "memq")]
#[derive(Debug)]
pub struct Topic {
    pub(crate) inner: memq::Topic<Bytes>,
}

macro_rules! publish_one {
    ($py:expr, $topic:expr, $route:expr, $value:expr, $limit:expr) => {{
        let t = $topic;
        let tried = match &$route {
            Route::Any => t.try_publish($value),
            Route::Key(k) => t.try_publish_keyed(k, $value),
            Route::To(p) => t.try_publish_to(*p, $value),
        };
        match tried {
            Ok(r) => Ok(r),
            Err(memq::PublishError::Full(v))
                if $limit != Some(Duration::ZERO) && t.overflow() == memq::Overflow::Block =>
            {
                let mut fut = match &$route {
                    Route::Any => t.publish(v),
                    Route::Key(k) => t.publish_keyed(k, v),
                    Route::To(p) => t.publish_to(*p, v),
                };
                match util::wait($py, $limit, |d| memq::block_on_timeout(&mut fut, d))? {
                    Some(r) => r.map_err(errors::from_publish),
                    None => Err(Exc::Timeout.err("no room in time")),
                }
            }
            Err(e) => Err(errors::from_publish(e)),
        }
    }};
}

macro_rules! publish_many {
    ($py:expr, $topic:expr, $route:expr, $value:expr, $limit:expr) => {{
        let t = $topic;
        let tried = match &$route {
            Route::Any => t.try_publish_batch($value),
            Route::Key(k) => t.try_publish_batch_keyed(k, $value),
            Route::To(p) => t.try_publish_batch_to(*p, $value),
        };
        match tried {
            Ok(r) => Ok(r),
            Err(memq::PublishError::Full(v))
                if $limit != Some(Duration::ZERO)
                    && t.overflow() == memq::Overflow::Block
                    && v.len() <= t.capacity() =>
            {
                let mut fut = match &$route {
                    Route::Any => t.publish_batch(v),
                    Route::Key(k) => t.publish_batch_keyed(k, v),
                    Route::To(p) => t.publish_batch_to(*p, v),
                };
                match util::wait($py, $limit, |d| memq::block_on_timeout(&mut fut, d))? {
                    Some(r) => r.map_err(errors::from_publish),
                    None => Err(Exc::Timeout.err("no room in time")),
                }
            }
            Err(e) => Err(errors::from_publish(e)),
        }
    }};
}

impl Topic {
    fn publish_async(&self, py: Python<'_>, route: Route, value: Bytes) -> PyResult<Py<PyAny>> {
        let t = self.inner.clone();
        aio::awaitable(
            py,
            Box::pin(async move {
                let r = match &route {
                    Route::Any => t.publish(value).await,
                    Route::Key(k) => t.publish_keyed(k, value).await,
                    Route::To(p) => t.publish_to(*p, value).await,
                };
                Box::new(move |py: Python<'_>| match r {
                    Ok(r) => receipt(py, r),
                    Err(e) => Err(errors::from_publish(e)),
                }) as Done
            }),
        )
    }

    fn publish_batch_async(
        &self,
        py: Python<'_>,
        route: Route,
        value: Vec<Bytes>,
    ) -> PyResult<Py<PyAny>> {
        let t = self.inner.clone();
        aio::awaitable(
            py,
            Box::pin(async move {
                let r = match &route {
                    Route::Any => t.publish_batch(value).await,
                    Route::Key(k) => t.publish_batch_keyed(k, value).await,
                    Route::To(p) => t.publish_batch_to(*p, value).await,
                };
                Box::new(move |py: Python<'_>| match r {
                    Ok(r) => receipt(py, r),
                    Err(e) => Err(errors::from_publish(e)),
                }) as Done
            }),
        )
    }
}

#[pymethods]
impl Topic {
    /// A new topic of `capacity` messages per partition. `overflow`: "block" (default:
    /// publishers wait for readers, nothing is lost), "drop_oldest" (readers that fall
    /// behind get `Lagged`) or "reject" (a full topic raises `Full`). `ttl`: seconds a
    /// message is kept. `release_on_read`: a queue that frees what every reader has read.
    #[new]
    #[pyo3(signature = (capacity=None, *, partitions=None, overflow="block", ttl=None, release_on_read=false))]
    fn new(
        capacity: Option<&Bound<'_, PyAny>>,
        partitions: Option<&Bound<'_, PyAny>>,
        overflow: &str,
        ttl: Option<&Bound<'_, PyAny>>,
        release_on_read: bool,
    ) -> PyResult<Self> {
        let c = config(capacity, partitions, overflow, ttl, release_on_read)?;
        Ok(Topic {
            inner: memq::Topic::new(c).map_err(errors::from_error)?,
        })
    }

    /// Publishes `data` (bytes-like); returns `(partition, offset)`. With `key` (bytes or
    /// str) it goes to the key's partition, with `partition` to that one. On a full
    /// "block" topic it waits up to `timeout` seconds (None: as long as it takes), then
    /// raises `Timeout`; `timeout=0` or a "reject" topic raise `Full` at once. In a
    /// coroutine on a running asyncio loop it returns an awaitable instead.
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
        if aio::in_loop(py)? {
            return self.publish_async(py, route, value);
        }
        let r = publish_one!(py, &self.inner, route, value, limit)?;
        receipt(py, r)
    }

    /// `publish(data, key=key)`.
    #[pyo3(signature = (key, data, *, timeout=None))]
    fn publish_keyed(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.publish(py, data, Some(key), None, timeout)
    }

    /// Publishes `items` (an iterable of bytes-like payloads) as one batch, all or
    /// nothing, to one partition; returns `(partition, first_offset)`. Waits for room
    /// for the whole batch as `publish` waits for one message; a batch larger than the
    /// capacity raises `Full`.
    #[pyo3(signature = (items, *, key=None, partition=None, timeout=None))]
    fn publish_batch(
        &self,
        py: Python<'_>,
        items: &Bound<'_, PyAny>,
        key: Option<&Bound<'_, PyAny>>,
        partition: Option<&Bound<'_, PyAny>>,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let value = batch_of(items)?;
        let route = Route::from_args(key, partition)?;
        let limit = util::timeout(timeout)?;
        if aio::in_loop(py)? {
            return self.publish_batch_async(py, route, value);
        }
        let r = publish_many!(py, &self.inner, route, value, limit)?;
        receipt(py, r)
    }

    /// `publish` as an awaitable, wherever it is called.
    #[pyo3(name = "publish_async", signature = (data, *, key=None, partition=None))]
    fn py_publish_async(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        key: Option<&Bound<'_, PyAny>>,
        partition: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let value = util::payload(data)?;
        let route = Route::from_args(key, partition)?;
        self.publish_async(py, route, value)
    }

    /// A broadcast subscriber from `start` ("earliest", "latest" or an offset), on every
    /// partition or on `partition` only. Payloads are `bytes`, one copy out of the log;
    /// with `memoryview=True` a `memoryview` over that same copy, so that slicing it
    /// copies nothing (every reader takes this option). It is a view over `bytes`, not
    /// over memq's own buffer, because the stable ABI memq is built for (abi3, Python
    /// 3.9+) lets no extension type export the buffer protocol.
    #[pyo3(signature = (start=None, *, partition=None, memoryview=false))]
    fn subscribe(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        partition: Option<&Bound<'_, PyAny>>,
        memoryview: bool,
    ) -> PyResult<Subscriber> {
        let _ = py;
        let start = util::start_opt(start)?;
        let sub = match partition.filter(|p| !p.is_none()) {
            None => self.inner.subscribe(start),
            Some(p) => {
                let p = util::int(p, "partition", 0, i128::from(u32::MAX))? as u32;
                self.inner.subscribe_partition(p, start)
            }
        }
        .map_err(errors::from_error)?;
        Ok(Subscriber {
            slot: Slot::new(sub, "subscriber"),
            form: Form::from_flag(memoryview),
        })
    }

    /// Joins the consumer group `name` (created at `start` if new). `memoryview`: as for
    /// `subscribe`.
    #[pyo3(signature = (name, start=None, *, memoryview=false))]
    fn group(
        &self,
        py: Python<'_>,
        name: &str,
        start: Option<&Bound<'_, PyAny>>,
        memoryview: bool,
    ) -> PyResult<Consumer> {
        let _ = py;
        let start = util::start_opt(start)?;
        let c = self.inner.group(name, start).map_err(errors::from_error)?;
        Ok(Consumer {
            slot: Slot::new(c, "consumer"),
            group: name.to_owned(),
            form: Form::from_flag(memoryview),
        })
    }

    /// Joins the explicit-ack group `name`: every message is leased for `ack_wait`
    /// seconds and delivered again unless acked; after `max_deliveries` deliveries (or a
    /// `reject()`) it goes to `dead_letters` (a `DeadLetterTopic`) or is dropped and
    /// counted. `max_in_flight` bounds unsettled deliveries per partition; `backoff`
    /// (seconds) delays redeliveries. `memoryview`: as for `subscribe`.
    #[pyo3(signature = (name, *, ack_wait=None, max_deliveries=None, max_in_flight=None, backoff=None, dead_letters=None, start=None, memoryview=false))]
    #[allow(clippy::too_many_arguments)]
    fn ack_group(
        &self,
        py: Python<'_>,
        name: &str,
        ack_wait: Option<&Bound<'_, PyAny>>,
        max_deliveries: Option<&Bound<'_, PyAny>>,
        max_in_flight: Option<&Bound<'_, PyAny>>,
        backoff: Option<&Bound<'_, PyAny>>,
        dead_letters: Option<&Bound<'_, DeadLetterTopic>>,
        start: Option<&Bound<'_, PyAny>>,
        memoryview: bool,
    ) -> PyResult<AckConsumer> {
        let _ = py;
        let start = util::start_opt(start)?;
        let config = ack_config(ack_wait, max_deliveries, max_in_flight, backoff)?;
        let config = match dead_letters {
            Some(d) => config.dead_letter(d.get().inner.clone()),
            None => config,
        };
        let c = self
            .inner
            .group_acked(name, start, config)
            .map_err(errors::from_error)?;
        Ok(AckConsumer {
            slot: Slot::new(c, "consumer"),
            group: name.to_owned(),
            form: Form::from_flag(memoryview),
        })
    }

    /// Deletes the group `name` (its members see `Closed`).
    fn delete_group(&self, name: &str) -> PyResult<()> {
        self.inner.delete_group(name).map_err(errors::from_error)
    }

    /// The names of the topic's groups.
    fn groups(&self) -> Vec<String> {
        self.inner.groups()
    }

    /// A snapshot of the topic's counters (`memq.TopicStats`).
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        stats_to_py(py, &self.inner.stats())
    }

    /// Closes: publishers get `Closed`; readers drain what is retained, then get
    /// `Closed`. Idempotent.
    fn close(&self) {
        self.inner.close();
    }

    /// Whether the topic is closed.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Messages per partition.
    #[getter]
    fn capacity(&self) -> usize {
        self.inner.capacity()
    }

    /// The number of partitions.
    #[getter]
    fn partitions(&self) -> u32 {
        self.inner.partitions()
    }

    /// "block", "drop_oldest" or "reject".
    #[getter]
    fn overflow(&self) -> &'static str {
        overflow_name(self.inner.overflow())
    }

    /// The topic's name (topics made by a `Broker`).
    #[getter]
    fn name(&self) -> Option<String> {
        self.inner.name().map(str::to_owned)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> bool {
        self.inner.close();
        false
    }

    fn __repr__(&self) -> String {
        format!(
            "Topic(name={:?}, capacity={}, partitions={}, overflow={:?}, closed={})",
            self.inner.name(),
            self.inner.capacity(),
            self.inner.partitions(),
            overflow_name(self.inner.overflow()),
            self.inner.is_closed()
        )
    }
}

/// The settings of an explicit-ack group.
pub fn ack_config(
    ack_wait: Option<&Bound<'_, PyAny>>,
    max_deliveries: Option<&Bound<'_, PyAny>>,
    max_in_flight: Option<&Bound<'_, PyAny>>,
    backoff: Option<&Bound<'_, PyAny>>,
) -> PyResult<memq::AckConfig<Bytes>> {
    let wait = match ack_wait.filter(|w| !w.is_none()) {
        Some(w) => util::seconds(w, "ack_wait")?,
        None => Duration::from_secs(30),
    };
    if wait.is_zero() {
        return Err(Exc::InvalidArgument.err("ack_wait must be more than 0 seconds"));
    }
    let mut c = memq::AckConfig::new().ack_wait(wait);
    if let Some(n) = util::opt_int(max_deliveries, "max_deliveries", 1, i128::from(u32::MAX))? {
        c = c.max_deliveries(n as u32);
    }
    if let Some(n) = util::opt_int(max_in_flight, "max_in_flight", 1, 1 << 40)? {
        c = c.max_in_flight(n as usize);
    }
    if let Some(b) = backoff.filter(|b| !b.is_none()) {
        c = c.backoff(memq::Backoff::fixed(util::seconds(b, "backoff")?));
    }
    Ok(c)
}

/// A topic of dead letters, for `Topic.ack_group(..., dead_letters=...)`.
#[pyclass(frozen, module = "memq")]
#[derive(Debug)]
pub struct DeadLetterTopic {
    pub(crate) inner: memq::Topic<memq::DeadLetter<Bytes>>,
}

#[pymethods]
impl DeadLetterTopic {
    /// A dead-letter topic of `capacity` letters (overflow "drop_oldest" by default, so
    /// a group never waits on a dead-letter topic nobody reads).
    #[new]
    #[pyo3(signature = (capacity=None, *, overflow="drop_oldest"))]
    fn new(capacity: Option<&Bound<'_, PyAny>>, overflow: &str) -> PyResult<Self> {
        let c = config(capacity, None, overflow, None, false)?;
        Ok(DeadLetterTopic {
            inner: memq::Topic::new(c).map_err(errors::from_error)?,
        })
    }

    /// A subscriber of the dead letters, from `start`. `memoryview`: as for
    /// `Topic.subscribe`.
    #[pyo3(signature = (start=None, *, memoryview=false))]
    fn subscribe(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        memoryview: bool,
    ) -> PyResult<DeadLetterSubscriber> {
        let _ = py;
        let sub = self
            .inner
            .subscribe(util::start_opt(start)?)
            .map_err(errors::from_error)?;
        Ok(DeadLetterSubscriber {
            slot: Slot::new(sub, "subscriber"),
            form: Form::from_flag(memoryview),
        })
    }

    /// Counters, as for a topic.
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        stats_to_py(py, &self.inner.stats())
    }

    /// Closes the dead-letter topic.
    fn close(&self) {
        self.inner.close();
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> bool {
        self.inner.close();
        false
    }
}

/// A registry of named topics.
#[pyclass(frozen, module = "memq")]
#[derive(Debug)]
pub struct Broker {
    inner: memq::Broker<Bytes>,
}

#[pymethods]
impl Broker {
    #[new]
    fn new() -> Self {
        Broker {
            inner: memq::Broker::new(),
        }
    }

    /// Creates the topic `name` (raises `TopicExists` if there is one).
    #[pyo3(signature = (name, capacity=None, *, partitions=None, overflow="block", ttl=None, release_on_read=false))]
    fn create(
        &self,
        name: &str,
        capacity: Option<&Bound<'_, PyAny>>,
        partitions: Option<&Bound<'_, PyAny>>,
        overflow: &str,
        ttl: Option<&Bound<'_, PyAny>>,
        release_on_read: bool,
    ) -> PyResult<Topic> {
        let c = config(capacity, partitions, overflow, ttl, release_on_read)?;
        Ok(Topic {
            inner: self.inner.create(name, c).map_err(errors::from_error)?,
        })
    }

    /// The topic `name` (raises `UnknownTopic`, a `KeyError`, if there is none).
    fn get(&self, name: &str) -> PyResult<Topic> {
        Ok(Topic {
            inner: self.inner.get(name).map_err(errors::from_error)?,
        })
    }

    /// The topic `name`, created with these settings if there is none.
    #[pyo3(signature = (name, capacity=None, *, partitions=None, overflow="block", ttl=None, release_on_read=false))]
    fn get_or_create(
        &self,
        name: &str,
        capacity: Option<&Bound<'_, PyAny>>,
        partitions: Option<&Bound<'_, PyAny>>,
        overflow: &str,
        ttl: Option<&Bound<'_, PyAny>>,
        release_on_read: bool,
    ) -> PyResult<Topic> {
        let c = config(capacity, partitions, overflow, ttl, release_on_read)?;
        Ok(Topic {
            inner: self
                .inner
                .get_or_create(name, c)
                .map_err(errors::from_error)?,
        })
    }

    /// Removes the topic `name` from the registry (and closes it).
    fn delete(&self, name: &str) -> PyResult<()> {
        self.inner.delete(name).map_err(errors::from_error)
    }

    /// The names of the topics.
    fn list(&self) -> Vec<String> {
        self.inner.list()
    }

    /// Stats of every topic.
    fn stats(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        self.inner
            .stats()
            .iter()
            .map(|s| stats_to_py(py, s))
            .collect()
    }

    fn __contains__(&self, name: &str) -> bool {
        self.inner.contains(name)
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __repr__(&self) -> String {
        format!("Broker(topics={:?})", self.inner.list())
    }
}
