//! Worker pools: Python handlers run on native threads over a consumer group.
//!
//! Each worker is an OS thread and a member of the pool's group (plain, or explicit-ack
//! with `acked=True`). It waits for messages with the GIL released (parked in memq's wait
//! list and on the pool's stop signal at once: an idle pool costs no CPU), takes up to
//! `batch` ready messages, and then takes the GIL once for the whole batch, calling the
//! handler on each. While more messages are ready it keeps the GIL and goes on with the
//! next batch (an in-memory group without results: nothing there can wait), so a busy
//! pool hands the GIL between threads about once per switch interval, not once per
//! batch. Handlers that release the GIL (I/O, `time.sleep`, numpy) let the other workers
//! run meanwhile. A handler's exception is caught: counted, kept with its traceback text
//! (the last 1000), published as an error result, and, in an explicit-ack pool, nacked
//! for another delivery. Results (the handlers' return values) go to a results topic
//! that `Pool.results` reads, with the GIL released, before the next fetch.
//!
//! The pool builds on the memq crate's public group API, not on `memq::pool`: that pool
//! calls its handler once per message, which here would mean taking the GIL once per
//! message.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

use crate::errors::{self, Exc};
use crate::message::{self, Form, Message};
use crate::reader::{from_timeout, from_try, Fail, Reader, Step};
use crate::topic::{self, Topic};
use crate::util::{self, lock, Slot};

/// The signal's state once stopped (0 while running).
const STOP: u8 = 1;

/// The pool's signal: stop, and nudges (a drain wakes every waiting worker to look
/// again), with the wakers of the workers waiting on it.
#[derive(Debug, Default)]
struct Signal {
    state: AtomicU8,
    draining: std::sync::atomic::AtomicBool,
    nudges: AtomicU64,
    wakers: Mutex<Vec<Waker>>,
}

impl Signal {
    fn wake_all(&self) {
        let wakers = std::mem::take(&mut *lock(&self.wakers));
        for w in wakers {
            w.wake();
        }
    }

    fn stop(&self) {
        self.state.store(STOP, Ordering::Release);
        self.wake_all();
    }

    fn drain(&self) {
        self.draining.store(true, Ordering::Release);
        self.nudges.fetch_add(1, Ordering::AcqRel);
        self.wake_all();
    }

    fn stopped(&self) -> bool {
        self.state.load(Ordering::Acquire) == STOP
    }

    fn draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Ready once `stop` was called or a nudge came after `seen`.
    fn poll_stop(&self, seen: u64, cx: &mut Context<'_>) -> Poll<()> {
        let ready = || self.stopped() || self.nudges.load(Ordering::Acquire) != seen;
        if ready() {
            return Poll::Ready(());
        }
        let mut w = lock(&self.wakers);
        if !w.iter().any(|x| x.will_wake(cx.waker())) {
            w.push(cx.waker().clone());
        }
        drop(w);
        if ready() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Waits for `fut` or the signal, whichever comes first (`None`: the signal).
struct OrStop<'a, F> {
    fut: Pin<&'a mut F>,
    signal: &'a Signal,
    seen: u64,
}

impl<'a, F> OrStop<'a, F> {
    fn new(fut: Pin<&'a mut F>, signal: &'a Signal) -> Self {
        let seen = signal.nudges.load(Ordering::Acquire);
        OrStop { fut, signal, seen }
    }

    /// Also ready for a nudge that came after `seen` was read: a caller that decided to
    /// wait on what it saw (no drain yet) must not miss a drain that began since.
    fn after(fut: Pin<&'a mut F>, signal: &'a Signal, seen: u64) -> Self {
        OrStop { fut, signal, seen }
    }
}

impl<F: Future> Future for OrStop<'_, F> {
    type Output = Option<F::Output>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(v) = self.fut.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        let seen = self.seen;
        self.signal.poll_stop(seen, cx).map(|()| None)
    }
}

/// One handled message's outcome, as published to the results topic.
#[derive(Debug, Clone)]
pub struct Outcome {
    partition: u32,
    offset: u64,
    value: Option<Bytes>,
    error: Option<Arc<(String, String)>>,
}

/// A handled message's result: `value` (the handler's return value as bytes, or None)
/// or `error` and `traceback` (text) if the handler raised.
#[pyclass(frozen, get_all, module = "memq")]
#[derive(Debug)]
pub struct WorkResult {
    /// The input's partition.
    pub partition: u32,
    /// The input's offset.
    pub offset: u64,
    /// The handler's return value (bytes), or None.
    pub value: Option<Py<PyAny>>,
    /// `"TypeName: message"` if the handler raised.
    pub error: Option<String>,
    /// The handler's traceback, formatted, if it raised.
    pub traceback: Option<String>,
}

#[pymethods]
impl WorkResult {
    /// Whether the handler returned normally.
    #[getter]
    fn ok(&self) -> bool {
        self.error.is_none()
    }

    fn __repr__(&self) -> String {
        match &self.error {
            None => format!(
                "WorkResult(partition={}, offset={}, ok)",
                self.partition, self.offset
            ),
            Some(e) => format!(
                "WorkResult(partition={}, offset={}, error={e:?})",
                self.partition, self.offset
            ),
        }
    }
}

impl Reader for memq::Subscriber<Outcome> {
    type Item = memq::Message<Outcome>;
    fn try_recv(&mut self) -> Step<Self::Item> {
        from_try(memq::Subscriber::try_recv(self))
    }
    fn recv_timeout(&mut self, d: Duration) -> Step<Self::Item> {
        from_timeout(self.recv_blocking_timeout(d))
    }
    fn try_recv_many(&mut self, buf: &mut Vec<Self::Item>, limit: usize) -> Result<usize, Fail> {
        Ok(from_try(memq::Subscriber::try_recv_many(self, buf, limit))?.unwrap_or(0))
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
    fn to_py(py: Python<'_>, item: Self::Item, _form: Form) -> PyResult<Py<PyAny>> {
        let o = item.value();
        let r = WorkResult {
            partition: o.partition,
            offset: o.offset,
            value: o.value.as_ref().map(|v| message::data(py, v)),
            error: o.error.as_ref().map(|e| e.0.clone()),
            traceback: o.error.as_ref().map(|e| e.1.clone()),
        };
        Ok(Py::new(py, r)?.into_any())
    }
}

/// The reader of a pool's results (`Pool.results`): `WorkResult` objects, each once.
#[pyclass(frozen, module = "memq")]
#[derive(Debug)]
pub struct Results {
    slot: Arc<Slot<memq::Subscriber<Outcome>>>,
    /// Results hand out `WorkResult`s, whose values are always `bytes`.
    form: Form,
}

crate::readers::reader_class!(Results, memq::Subscriber<Outcome>, "Results", {});

/// A handler error kept by the pool.
#[derive(Debug, Clone)]
struct Failure {
    partition: u32,
    offset: u64,
    message: String,
    traceback: String,
}

#[derive(Debug, Default)]
struct Counters {
    fetched: AtomicU64,
    processed: AtomicU64,
    errors: AtomicU64,
    results: AtomicU64,
    lease_lost: AtomicU64,
    active: AtomicUsize,
    dry: AtomicUsize,
}

/// How the handler is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    /// `handler(message)`.
    Message,
    /// `handler(data)`.
    Data,
    /// `handler(offset + 1, data)` (rst_queue's `(item_id, data)`).
    IdData,
}

#[derive(Debug)]
struct Shared {
    signal: Signal,
    counters: Counters,
    failures: Mutex<VecDeque<Failure>>,
    live: Mutex<usize>,
    changed: Condvar,
    handler: Py<PyAny>,
    call: Call,
    /// How the handler sees payloads.
    form: Form,
    results: Option<memq::Topic<Outcome>>,
    batch: usize,
    ack_wait: Duration,
    /// A durable group's delay before a failed message is delivered again (an in-memory
    /// group applies its own backoff).
    backoff: Option<Duration>,
}

const KEEP_FAILURES: usize = 1000;

enum Member {
    Plain(memq::Consumer<Bytes>),
    Acked(memq::AckConsumer<Bytes>),
    Durable(crate::durable::Member),
}

/// What a worker fetched: plain messages, deliveries to settle, or a durable group's.
enum Batch {
    Plain(Vec<memq::Message<Bytes>>),
    Acked(Vec<memq::Delivery<Bytes>>),
    Durable(Vec<crate::durable::Got>),
}

impl Batch {
    fn len(&self) -> usize {
        match self {
            Batch::Plain(v) => v.len(),
            Batch::Acked(v) => v.len(),
            Batch::Durable(v) => v.len(),
        }
    }
}

/// What one attempt to fetch gave.
enum Fetched {
    Some(Batch),
    /// Nothing ready now.
    Nothing,
    /// Closed and drained (or the group is gone).
    End,
}

/// Takes up to `n` ready messages; with `wait`, waits for the first (or a nudge after
/// `seen`).
fn fetch_once(member: &mut Member, signal: &Signal, seen: u64, n: usize, wait: bool) -> Fetched {
    fn conv<T>(r: Option<Result<usize, memq::TryRecvError>>, b: T) -> Fetched
    where
        Batch: From<T>,
    {
        match r {
            Some(Ok(k)) if k > 0 => Fetched::Some(Batch::from(b)),
            Some(Ok(_)) | Some(Err(memq::TryRecvError::Empty)) | None => Fetched::Nothing,
            Some(Err(memq::TryRecvError::Lagged(_))) => Fetched::Nothing, // counted by the group
            Some(Err(_)) => Fetched::End,
        }
    }
    match member {
        Member::Plain(c) => {
            let mut buf = Vec::with_capacity(n);
            let r = match c.try_recv_many(&mut buf, n) {
                Err(memq::TryRecvError::Empty) if wait => {
                    let mut fut = std::pin::pin!(c.recv_many(&mut buf, n));
                    memq::block_on(OrStop::after(fut.as_mut(), signal, seen))
                        .map(|r| r.map_err(memq::TryRecvError::from))
                }
                other => Some(other),
            };
            conv(r, buf)
        }
        Member::Acked(c) => {
            let mut buf = Vec::with_capacity(n);
            let r = match c.try_recv_many(&mut buf, n) {
                Err(memq::TryRecvError::Empty) if wait => {
                    let mut fut = std::pin::pin!(c.recv_many(&mut buf, n));
                    memq::block_on(OrStop::after(fut.as_mut(), signal, seen))
                        .map(|r| r.map_err(memq::TryRecvError::from))
                }
                other => Some(other),
            };
            conv(r, buf)
        }
        Member::Durable(m) => {
            let mut buf = Vec::new();
            let first = match m.try_recv() {
                Ok(Some(g)) => Ok(Some(g)),
                Ok(None) if wait => {
                    let mut fut = std::pin::pin!(m.recv_async());
                    match memq::block_on(OrStop::after(fut.as_mut(), signal, seen)) {
                        None => Ok(None),
                        Some(r) => r.map(Some),
                    }
                }
                other => other,
            };
            match first {
                Ok(Some(g)) => buf.push(g),
                Ok(None) => return Fetched::Nothing,
                Err(Fail::Lagged(_)) => return Fetched::Nothing,
                Err(Fail::Closed) => return Fetched::End,
                // A read error of the log: the member stays where it was; try again
                // after a pause rather than spinning on a failing disk.
                Err(Fail::Store(_)) => {
                    std::thread::sleep(Duration::from_millis(100));
                    return Fetched::Nothing;
                }
            }
            while buf.len() < n {
                match m.try_recv() {
                    Ok(Some(g)) => buf.push(g),
                    _ => break,
                }
            }
            Fetched::Some(Batch::Durable(buf))
        }
    }
}

impl From<Vec<memq::Message<Bytes>>> for Batch {
    fn from(v: Vec<memq::Message<Bytes>>) -> Batch {
        Batch::Plain(v)
    }
}

impl From<Vec<memq::Delivery<Bytes>>> for Batch {
    fn from(v: Vec<memq::Delivery<Bytes>>) -> Batch {
        Batch::Acked(v)
    }
}

/// Fetches the next batch. While the pool drains, a worker that finds nothing ready
/// says it is dry (the drain ends when all are) and keeps waiting: it may be handed
/// partitions, or be given messages, until the drain ends. `None`: stop.
fn fetch(member: &mut Member, sh: &Shared, dry: &mut bool, want: usize) -> Option<Batch> {
    loop {
        if sh.signal.stopped() {
            return None;
        }
        // The nudge count first, then whether a drain began: a drain that begins in
        // between nudges a count newer than `seen`, so the wait below ends at once and
        // the next turn sees the drain. (Read after, a drain starting meanwhile went
        // unnoticed, and the worker waited on, not dry, with drain() waiting for it.)
        let seen = sh.signal.nudges.load(Ordering::Acquire);
        let draining = sh.signal.draining();
        match fetch_once(member, &sh.signal, seen, want, !draining || *dry) {
            Fetched::Some(b) => {
                if *dry {
                    *dry = false;
                    sh.counters.dry.fetch_sub(1, Ordering::AcqRel);
                }
                sh.counters
                    .fetched
                    .fetch_add(b.len() as u64, Ordering::Relaxed);
                return Some(b);
            }
            Fetched::Nothing => {
                if draining && !*dry {
                    *dry = true;
                    sh.counters.dry.fetch_add(1, Ordering::AcqRel);
                    let _g = lock(&sh.live);
                    sh.changed.notify_all();
                }
            }
            Fetched::End => return None,
        }
    }
}

fn describe(py: Python<'_>, e: &PyErr) -> (String, String) {
    let value = e.value(py);
    let name = value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".into());
    let msg = value.str().map(|s| s.to_string()).unwrap_or_default();
    let message = if msg.is_empty() {
        name
    } else {
        format!("{name}: {msg}")
    };
    let tb = py
        .import("traceback")
        .and_then(|m| {
            m.call_method1(
                "format_exception",
                (value.get_type(), value, e.traceback(py)),
            )
        })
        .and_then(|l| PyString::new(py, "").call_method1("join", (l,)))
        .map(|s| s.to_string())
        .unwrap_or_else(|_| message.clone());
    (message, tb)
}

/// Converts a handler's return value to a result payload (None: no value).
fn returned(ret: &Bound<'_, PyAny>) -> PyResult<Option<Bytes>> {
    if ret.is_none() {
        return Ok(None);
    }
    if let Ok(s) = ret.cast::<PyString>() {
        return Ok(Some(Bytes::copy_from_slice(s.to_cow()?.as_bytes())));
    }
    util::payload(ret).map(Some).map_err(|_| {
        Exc::InvalidType.err(format!(
            "the handler returned {}, expected bytes-like, str or None",
            util::type_name(ret)
        ))
    })
}

/// Runs the handler on every message of the batch, holding the GIL once. Returns the
/// outcomes, in order, and for an explicit-ack batch which ones succeeded.
fn handle(py: Python<'_>, sh: &Shared, batch: &mut Batch) -> Vec<Outcome> {
    let handler = sh.handler.bind(py);
    let n = batch.len();
    let mut out = Vec::with_capacity(n);
    let mut touched = Instant::now();
    for i in 0..n {
        let (partition, offset, data): (u32, u64, &Bytes) = match batch {
            Batch::Plain(v) => (v[i].partition(), v[i].offset(), v[i].value()),
            Batch::Acked(v) => {
                // Keep the leases of the batch's rest alive while earlier ones are handled.
                if touched.elapsed() > sh.ack_wait / 3 {
                    for d in v[i..].iter_mut() {
                        if d.touch().is_err() {
                            sh.counters.lease_lost.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    touched = Instant::now();
                }
                (v[i].partition(), v[i].offset(), v[i].value())
            }
            Batch::Durable(v) => match &v[i] {
                crate::durable::Got::Message(m) => (m.partition, m.offset, &m.payload),
                crate::durable::Got::Delivery(d) => {
                    let m = d.message();
                    (m.partition, m.offset, &m.payload)
                }
            },
        };
        let r = message::payload(py, data, sh.form).and_then(|data| match sh.call {
            Call::Message => {
                let m = Message {
                    data,
                    offset,
                    partition,
                    timestamp: None,
                    key: None,
                };
                Py::new(py, m).and_then(|m| handler.call1((m,)))
            }
            Call::Data => handler.call1((data,)),
            Call::IdData => handler.call1((offset + 1, data)),
        });
        let r = r.and_then(|ret| {
            if sh.results.is_some() {
                returned(&ret)
            } else {
                Ok(None)
            }
        });
        let o = match r {
            Ok(value) => Outcome {
                partition,
                offset,
                value,
                error: None,
            },
            Err(e) => {
                let (message, traceback) = describe(py, &e);
                sh.counters.errors.fetch_add(1, Ordering::Relaxed);
                let mut f = lock(&sh.failures);
                if f.len() == KEEP_FAILURES {
                    f.pop_front();
                }
                f.push_back(Failure {
                    partition,
                    offset,
                    message: message.clone(),
                    traceback: traceback.clone(),
                });
                drop(f);
                Outcome {
                    partition,
                    offset,
                    value: None,
                    error: Some(Arc::new((message, traceback))),
                }
            }
        };
        out.push(o);
        sh.counters.processed.fetch_add(1, Ordering::Relaxed);
    }
    out
}

fn worker(sh: Arc<Shared>, member: Member) {
    // The thread attaches to the interpreter once, for its whole life, and detaches
    // while it waits, publishes and settles: taking the GIL back is then a plain
    // reacquire, not the creation of a thread state per batch.
    Python::attach(|py| work(py, &sh, member));
    let mut live = lock(&sh.live);
    *live -= 1;
    let last = *live == 0;
    drop(live);
    if last {
        // Nothing is left to handle (the topic closed, or the pool stopped): the
        // dead-letter relay, if any, passes on the last letters and ends.
        sh.signal.stop();
    }
    sh.changed.notify_all();
}

/// Relays a durable group's dead letters to a dead-letter topic (`dead_letters=` on a
/// durable pool), as an in-memory group publishes its own: each letter the group makes
/// while the pool runs is copied there, and stays in the group's dead-letter log too.
/// It needs no GIL. Once the signal stops it waits for the workers to end (their last
/// receives may still move letters) and passes on what is there.
fn relay(
    sh: Arc<Shared>,
    mut letters: memq::durable::DeadLetters,
    to: memq::Topic<memq::DeadLetter<Bytes>>,
) {
    use memq::durable::DurableRecvError as E;
    let letter = |l: memq::durable::DurableDeadLetter| {
        memq::DeadLetter::new(
            None,
            l.group,
            l.partition,
            l.offset,
            l.deliveries,
            l.reason,
            l.payload,
        )
    };
    while !sh.signal.stopped() {
        let got = {
            let mut fut = std::pin::pin!(letters.recv());
            memq::block_on(OrStop::new(fut.as_mut(), &sh.signal))
        };
        match got {
            Some(Ok(l)) => {
                let mut fut = std::pin::pin!(to.publish(letter(l)));
                let mut fut = OrStop::new(fut.as_mut(), &sh.signal);
                loop {
                    match memq::block_on(&mut fut) {
                        // A nudge (a drain starting) is no reason to give up.
                        None if !sh.signal.stopped() => {
                            fut.seen = sh.signal.nudges.load(Ordering::Acquire);
                        }
                        // Published, the topic closed, or the pool stopped while the
                        // topic was full: the letter is in the group's log either way.
                        _ => break,
                    }
                }
            }
            // A letter retention deleted unread, or a nudge: go on.
            Some(Err(E::Lagged(_))) | None => {}
            // A read error of the log: try again after a pause, not in a spin.
            Some(Err(E::Store(_))) => std::thread::sleep(Duration::from_millis(100)),
            Some(Err(_)) => break,
        }
    }
    let live = lock(&sh.live);
    drop(
        sh.changed
            .wait_while(live, |n| *n > 0)
            .unwrap_or_else(|e| e.into_inner()),
    );
    while let Ok(l) = letters.try_recv() {
        if to.try_publish(letter(l)).is_err() {
            break;
        }
    }
}

/// Per-message handling time under which a worker doubles its batch (the GIL is then
/// the cost worth spreading), and over which it takes one message at a time (the
/// handler blocks or computes: other workers should get the next messages).
const FAST: Duration = Duration::from_micros(50);
const SLOW: Duration = Duration::from_micros(500);

fn work(py: Python<'_>, sh: &Shared, mut member: Member) {
    let mut dry = false;
    let mut want = 1usize;
    // The batch handled last, finished (its results published, its messages settled)
    // before the next fetch, in the same release of the GIL: one release per batch.
    let mut done: Option<(Batch, Vec<Outcome>)> = None;
    loop {
        // What is ready is taken with the GIL held, when finishing the last batch cannot
        // wait either: a worker whose handler keeps up goes from batch to batch without
        // handing the GIL over and waiting to get it back (Python's switch interval
        // still gives every other thread its turn). It releases the GIL only to wait.
        let ready = if done.as_ref().is_none_or(|(b, _)| light(sh, b)) {
            if let Some((b, o)) = done.take() {
                finish(sh, b, &o);
            }
            take_ready(&mut member, sh, &mut dry, want)
        } else {
            None
        };
        let got = match ready {
            Some(b) => Some(b),
            None => py.detach(|| {
                if let Some((b, o)) = done.take() {
                    finish(sh, b, &o);
                }
                fetch(&mut member, sh, &mut dry, want)
            }),
        };
        let Some(mut batch) = got else { break };
        sh.counters.active.fetch_add(1, Ordering::Relaxed);
        let began = Instant::now();
        let outcomes = handle(py, sh, &mut batch);
        let per = began.elapsed() / batch.len().max(1) as u32;
        want = if per < FAST {
            (want * 2).min(sh.batch)
        } else if per > SLOW {
            1
        } else {
            want
        };
        done = Some((batch, outcomes));
    }
    if dry {
        sh.counters.dry.fetch_sub(1, Ordering::AcqRel);
    }
    drop(member); // leave the group before saying so
}

/// Whether finishing `batch` never waits, so that it may be done with the GIL held: no
/// results to publish (the results topic may be full) and an in-memory group (a durable
/// ack may write the group's state to disk).
fn light(sh: &Shared, batch: &Batch) -> bool {
    sh.results.is_none() && !matches!(batch, Batch::Durable(_))
}

/// Takes up to `want` messages of an in-memory group that are ready now, without
/// waiting (so without releasing the GIL); None if none is, or for a durable group
/// (whose receive may read the disk).
fn take_ready(member: &mut Member, sh: &Shared, dry: &mut bool, want: usize) -> Option<Batch> {
    if sh.signal.stopped() {
        return None;
    }
    let batch = match member {
        Member::Plain(c) => {
            let mut buf = Vec::with_capacity(want);
            match c.try_recv_many(&mut buf, want) {
                Ok(n) if n > 0 => Batch::Plain(buf),
                _ => return None,
            }
        }
        Member::Acked(c) => {
            let mut buf = Vec::with_capacity(want);
            match c.try_recv_many(&mut buf, want) {
                Ok(n) if n > 0 => Batch::Acked(buf),
                _ => return None,
            }
        }
        Member::Durable(_) => return None,
    };
    if *dry {
        *dry = false;
        sh.counters.dry.fetch_sub(1, Ordering::AcqRel);
    }
    sh.counters
        .fetched
        .fetch_add(batch.len() as u64, Ordering::Relaxed);
    Some(batch)
}

/// Publishes a handled batch's results, if any, then settles it: an acked message is
/// never lost with its result.
fn finish(sh: &Shared, batch: Batch, outcomes: &[Outcome]) {
    let mut published = true;
    if let Some(results) = &sh.results {
        let n = outcomes.len() as u64;
        let mut fut = std::pin::pin!(results.publish_batch(outcomes.to_vec()));
        let mut fut = OrStop::new(fut.as_mut(), &sh.signal);
        loop {
            // A nudge (a drain starting) is no reason to give up publishing.
            match memq::block_on(&mut fut) {
                Some(Ok(_)) => {
                    sh.counters.results.fetch_add(n, Ordering::Relaxed);
                    break;
                }
                None if !sh.signal.stopped() => {
                    fut.seen = sh.signal.nudges.load(Ordering::Acquire);
                }
                _ => {
                    published = false;
                    break;
                }
            }
        }
    }
    settle(sh, batch, outcomes, published);
    sh.counters.active.fetch_sub(1, Ordering::Relaxed);
    // Wake a drain() that waits for the workers to run dry.
    let _g = lock(&sh.live);
    sh.changed.notify_all();
}

/// Acks what succeeded (and whose result, if any, was published), nacks the rest.
fn settle(sh: &Shared, batch: Batch, outcomes: &[Outcome], published: bool) {
    let lost = |r: bool| {
        if !r {
            sh.counters.lease_lost.fetch_add(1, Ordering::Relaxed);
        }
    };
    match batch {
        Batch::Plain(_) => {}
        Batch::Acked(deliveries) => {
            for (d, o) in deliveries.into_iter().zip(outcomes) {
                let ok = o.error.is_none() && published;
                lost(if ok { d.ack() } else { d.nack() }.is_ok());
            }
        }
        Batch::Durable(got) => {
            for (g, o) in got.into_iter().zip(outcomes) {
                if let crate::durable::Got::Delivery(d) = g {
                    if o.error.is_none() && published {
                        lost(d.ack().is_ok());
                    } else if let Some(delay) = sh.backoff {
                        lost(d.nack_after(delay).is_ok());
                    } else {
                        d.nack();
                    }
                }
            }
        }
    }
}

/// Execution modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Sequential,
    Parallel,
}

/// A worker pool: `Pool(topic, handler, workers=4, mode=PARALLEL, acked=False,
/// results=None, ...)` runs `handler(message)` on every message of a consumer group
/// of `topic`, on native threads. See the module docs of `memq.Pool`.
#[pyclass(frozen, module = "memq")]
#[derive(Debug)]
pub struct Pool {
    shared: Arc<Shared>,
    group: String,
    acked: bool,
    workers: usize,
    threads: Mutex<Vec<JoinHandle<()>>>,
    results: Option<Py<Results>>,
}

static POOL_IDS: AtomicU64 = AtomicU64::new(0);

impl Pool {
    /// Waits (GIL released, waking for signals) until every worker has ended, up to
    /// `limit`.
    fn wait_end(&self, py: Python<'_>, limit: Option<Duration>) -> PyResult<bool> {
        let sh = &self.shared;
        let done = util::wait(py, limit, |d| {
            let live = lock(&sh.live);
            let (live, _) = sh
                .changed
                .wait_timeout_while(live, d, |n| *n > 0)
                .unwrap_or_else(|e| e.into_inner());
            (*live == 0).then_some(())
        })?;
        if done.is_some() {
            // The workers have ended; a durable pool's dead-letter relay may still be
            // reading the last letters from disk: joined without the GIL.
            let threads = std::mem::take(&mut *lock(&self.threads));
            py.detach(|| {
                for t in threads {
                    let _ = t.join();
                }
            });
            Ok(true)
        } else {
            Ok(false)
        }
    }

    fn is_dry(&self) -> bool {
        let c = &self.shared.counters;
        let live = *lock(&self.shared.live);
        live == 0
            || (c.dry.load(Ordering::Acquire) == live
                && c.active.load(Ordering::Acquire) == 0
                && c.fetched.load(Ordering::Relaxed) == c.processed.load(Ordering::Relaxed))
    }

    fn stats_py(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let c = &self.shared.counters;
        let kw = PyDict::new(py);
        kw.set_item("fetched", c.fetched.load(Ordering::Relaxed))?;
        kw.set_item("processed", c.processed.load(Ordering::Relaxed))?;
        kw.set_item("errors", c.errors.load(Ordering::Relaxed))?;
        kw.set_item("results", c.results.load(Ordering::Relaxed))?;
        kw.set_item("active_workers", c.active.load(Ordering::Relaxed))?;
        kw.set_item("workers", *lock(&self.shared.live))?;
        let cls = py.import("memq._types")?.getattr("PoolStats")?;
        Ok(cls.call((), Some(&kw))?.unbind())
    }
}

#[pymethods]
impl Pool {
    /// Starts `workers` threads running `handler` on the messages of the group `group`
    /// of `topic` (a group of its own if None). `mode`: "parallel" (default) or
    /// "sequential" (one worker, in order). `acked`: an explicit-ack group (a message is
    /// acked after its handler returned and its result was published; nacked when the
    /// handler raised), with `ack_wait`, `max_deliveries`, `backoff` and `dead_letters`
    /// as for `Topic.ack_group` (only with `acked=True`). On a `DurableTopic` too: a
    /// failed message comes back after `backoff` seconds, and after `max_deliveries` it
    /// goes to the group's dead-letter log (`DurableTopic.dead_letters(pool.group)`),
    /// from which the pool also copies it to `dead_letters` if given. `results`: the
    /// capacity of a results topic that `Pool.results` reads (None: no results).
    /// `batch`: the most messages a worker takes per GIL acquisition (a worker starts
    /// with one and doubles while its handler is fast, and goes back to one when it is
    /// slow, so that blocking handlers spread over the workers). `arguments`: "message"
    /// (`handler(msg)`), "data" (`handler(data)`) or "id_data" (`handler(offset + 1,
    /// data)`). `memoryview`: the handler sees payloads as `memoryview`s (see
    /// `Topic.subscribe`).
    #[new]
    #[pyo3(signature = (topic, handler, *, workers=None, mode=None, group=None, acked=false, ack_wait=None, max_deliveries=None, backoff=None, dead_letters=None, results=None, batch=None, start=None, arguments="message", memoryview=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        topic: &Bound<'_, PyAny>,
        handler: Bound<'_, PyAny>,
        workers: Option<&Bound<'_, PyAny>>,
        mode: Option<&Bound<'_, PyAny>>,
        group: Option<String>,
        acked: bool,
        ack_wait: Option<&Bound<'_, PyAny>>,
        max_deliveries: Option<&Bound<'_, PyAny>>,
        backoff: Option<&Bound<'_, PyAny>>,
        dead_letters: Option<&Bound<'_, topic::DeadLetterTopic>>,
        results: Option<&Bound<'_, PyAny>>,
        batch: Option<&Bound<'_, PyAny>>,
        start: Option<&Bound<'_, PyAny>>,
        arguments: &str,
        memoryview: bool,
    ) -> PyResult<Self> {
        if !handler.is_callable() {
            return Err(Exc::InvalidType.err(format!(
                "the handler must be callable, not {}",
                util::type_name(&handler)
            )));
        }
        let mode_name = match mode.filter(|m| !m.is_none()) {
            Some(m) => m.str()?.to_cow()?.to_ascii_lowercase(),
            None => "parallel".to_owned(),
        };
        let mode = match mode_name.as_str() {
            "parallel" | "1" | "mode.parallel" => Mode::Parallel,
            "sequential" | "0" | "mode.sequential" => Mode::Sequential,
            other => {
                return Err(Exc::InvalidArgument.err(format!(
                    "mode is \"parallel\" or \"sequential\", not {other:?}"
                )))
            }
        };
        let n = util::opt_int(workers, "workers", 1, 1024)?;
        let workers = match (mode, n) {
            (Mode::Sequential, Some(n)) if n != 1 => {
                return Err(
                    Exc::InvalidArgument.err(format!("a sequential pool has one worker, not {n}"))
                )
            }
            (Mode::Sequential, _) => 1,
            (Mode::Parallel, n) => n.unwrap_or(4) as usize,
        };
        let call = match arguments {
            "message" => Call::Message,
            "data" => Call::Data,
            "id_data" => Call::IdData,
            other => {
                return Err(Exc::InvalidArgument.err(format!(
                    "arguments is \"message\", \"data\" or \"id_data\", not {other:?}"
                )))
            }
        };
        let batch = util::opt_int(batch, "batch", 1, 1 << 16)?.unwrap_or(64) as usize;
        let start = util::start_opt(start)?;
        let results_cap = util::opt_int(results, "results", 1, 1 << 40)?;
        let durable = topic.cast::<crate::durable::DurableTopic>().ok();
        let memory = match &durable {
            Some(_) => None,
            None => Some(
                topic
                    .cast::<Topic>()
                    .map_err(|_| {
                        Exc::InvalidType.err(format!(
                            "a pool runs on a memq.Topic or a memq.DurableTopic, not {}",
                            util::type_name(topic)
                        ))
                    })?
                    .get()
                    .inner
                    .clone(),
            ),
        };
        let group = group
            .unwrap_or_else(|| format!("memq-pool-{}", POOL_IDS.fetch_add(1, Ordering::Relaxed)));
        let (results_topic, results_reader) = match results_cap {
            None => (None, None),
            Some(cap) => {
                let t =
                    memq::Topic::new(memq::TopicConfig::new(cap as usize).release_on_read(true))
                        .map_err(errors::from_error)?;
                let sub = t
                    .subscribe(memq::StartAt::Earliest)
                    .map_err(errors::from_error)?;
                let r = Py::new(
                    py,
                    Results {
                        slot: Slot::new(sub, "results reader"),
                        form: Form::Bytes,
                    },
                )?;
                (Some(t), Some(r))
            }
        };
        let mut ack_wait_d = Duration::from_secs(30);
        if let Some(w) = ack_wait.filter(|w| !w.is_none()) {
            ack_wait_d = util::seconds(w, "ack_wait")?;
        }
        let backoff = backoff.filter(|b| !b.is_none());
        if !acked {
            let given = [
                (
                    "max_deliveries",
                    max_deliveries.is_some_and(|m| !m.is_none()),
                ),
                ("backoff", backoff.is_some()),
                ("dead_letters", dead_letters.is_some()),
            ];
            if let Some((name, _)) = given.iter().find(|(_, given)| *given) {
                return Err(Exc::InvalidArgument.err(format!(
                    "{name} applies to an explicit-ack pool: pass acked=True"
                )));
            }
        }
        let backoff_d = match backoff {
            Some(b) => Some(util::seconds(b, "backoff")?),
            None => None,
        };
        // A durable pool's relay of dead letters reads from the group's dead-letter log's
        // end as it is before any member joins: every letter they make is relayed.
        let relay_from = match (&durable, dead_letters) {
            (Some(d), Some(to)) => {
                let t = d.get();
                let reader = t.dead_letter_reader(py, &group, memq::StartAt::Latest)?;
                Some((reader, to.get().inner.clone()))
            }
            _ => None,
        };
        let mut members = Vec::with_capacity(workers);
        for _ in 0..workers {
            members.push(match (&memory, &durable) {
                (_, Some(d)) => {
                    let wait = if acked {
                        Some(ack_wait_d.as_secs_f64().into_pyobject(py)?.into_any())
                    } else {
                        None
                    };
                    Member::Durable(d.get().join_group(
                        py,
                        &group,
                        start,
                        wait.as_ref(),
                        max_deliveries,
                        None,
                    )?)
                }
                (Some(topic), None) if acked => {
                    let cfg = topic::ack_config(ack_wait, max_deliveries, None, backoff)?;
                    let cfg = match dead_letters {
                        Some(d) => cfg.dead_letter(d.get().inner.clone()),
                        None => cfg,
                    };
                    Member::Acked(
                        topic
                            .group_acked(&group, start, cfg)
                            .map_err(errors::from_error)?,
                    )
                }
                (Some(topic), None) => {
                    Member::Plain(topic.group(&group, start).map_err(errors::from_error)?)
                }
                (None, None) => unreachable!("one of the two is set above"),
            });
        }
        let shared = Arc::new(Shared {
            signal: Signal::default(),
            counters: Counters::default(),
            failures: Mutex::new(VecDeque::new()),
            live: Mutex::new(workers),
            changed: Condvar::new(),
            handler: handler.unbind(),
            call,
            form: Form::from_flag(memoryview),
            results: results_topic,
            batch,
            ack_wait: ack_wait_d,
            backoff: backoff_d.filter(|_| durable.is_some()),
        });
        let mut threads = Vec::with_capacity(workers);
        for (i, m) in members.into_iter().enumerate() {
            let sh = shared.clone();
            let t = std::thread::Builder::new()
                .name(format!("memq-pool-{i}"))
                .spawn(move || worker(sh, m));
            match t {
                Ok(t) => threads.push(t),
                Err(e) => {
                    shared.signal.stop();
                    *lock(&shared.live) -= workers - i;
                    return Err(Exc::Error.err(format!("cannot start a worker thread: {e}")));
                }
            }
        }
        if let Some((letters, to)) = relay_from {
            let sh = shared.clone();
            let t = std::thread::Builder::new()
                .name("memq-pool-dead-letters".into())
                .spawn(move || relay(sh, letters, to));
            match t {
                Ok(t) => threads.push(t),
                Err(e) => {
                    // The workers run already: they stop after their batch in hand.
                    shared.signal.stop();
                    return Err(Exc::Error.err(format!("cannot start a thread: {e}")));
                }
            }
        }
        Ok(Pool {
            shared,
            group,
            acked,
            workers,
            threads: Mutex::new(threads),
            results: results_reader,
        })
    }

    /// The reader of the results (None without `results=`).
    #[getter]
    fn results(&self, py: Python<'_>) -> Option<Py<Results>> {
        self.results.as_ref().map(|r| r.clone_ref(py))
    }

    /// The pool's group.
    #[getter]
    fn group(&self) -> &str {
        &self.group
    }

    /// The number of workers started.
    #[getter]
    fn workers(&self) -> usize {
        self.workers
    }

    /// Whether the group is an explicit-ack group.
    #[getter]
    fn acked(&self) -> bool {
        self.acked
    }

    /// The counters (`memq.PoolStats`).
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.stats_py(py)
    }

    /// The handler errors kept (the last 1000), oldest first, as `memq.HandlerError`
    /// objects with `.partition`, `.offset` and `.traceback`.
    fn errors(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        let ty = Exc::HandlerError.ty(py)?;
        let failures: Vec<Failure> = lock(&self.shared.failures).iter().cloned().collect();
        failures
            .into_iter()
            .map(|f| {
                let e = ty.call1((f.message, f.traceback))?;
                e.setattr("partition", f.partition)?;
                e.setattr("offset", f.offset)?;
                Ok(e.unbind())
            })
            .collect()
    }

    /// Handles everything in the group (what is published meanwhile too), then stops the
    /// workers and returns the stats. Raises `Timeout` if that takes longer than
    /// `timeout` seconds (the pool goes on).
    #[pyo3(signature = (timeout=None))]
    fn drain(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
        let limit = util::timeout(timeout)?;
        let sh = self.shared.clone();
        sh.signal.drain();
        let dry = util::wait(py, limit, |d| {
            if self.is_dry() {
                return Some(());
            }
            let live = lock(&sh.live);
            let _ = sh.changed.wait_timeout(live, d);
            None
        })?;
        if dry.is_none() {
            return Err(Exc::Timeout.err("the pool did not drain in time"));
        }
        self.stop(py, None)
    }

    /// Stops: each worker finishes the batch in hand and ends; what it did not fetch
    /// stays in the group. Waits up to `timeout` seconds for the workers to end (raises
    /// `Timeout` if they do not) and returns the stats.
    #[pyo3(signature = (timeout=None))]
    fn stop(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
        let limit = util::timeout(timeout)?;
        self.shared.signal.stop();
        if !self.wait_end(py, limit)? {
            return Err(Exc::Timeout.err("the workers did not end in time"));
        }
        if let Some(t) = &self.shared.results {
            t.close();
        }
        self.stats_py(py)
    }

    /// Waits for the workers to end by themselves (the topic closed and drained), up to
    /// `timeout` seconds; returns the stats. Raises `Timeout` if they do not.
    #[pyo3(signature = (timeout=None))]
    fn join(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
        let limit = util::timeout(timeout)?;
        if !self.wait_end(py, limit)? {
            return Err(Exc::Timeout.err("the workers did not end in time"));
        }
        if let Some(t) = &self.shared.results {
            t.close();
        }
        self.stats_py(py)
    }

    /// Whether every worker has ended.
    #[getter]
    fn finished(&self) -> bool {
        *lock(&self.shared.live) == 0
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Drains when the block succeeds, stops when it raises.
    #[pyo3(signature = (exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if exc_type.is_some_and(|t| !t.is_none()) {
            self.stop(py, None)?;
        } else {
            self.drain(py, None)?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "Pool(group={:?}, workers={}, acked={}, finished={})",
            self.group,
            self.workers,
            self.acked,
            self.finished()
        )
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // A pool dropped without stop(): its workers end after their batch in hand. They
        // are not joined here (that would wait with the GIL held).
        self.shared.signal.stop();
    }
}

/// `PyTuple` is used by the generated reader methods.
#[allow(dead_code)]
fn _uses(_: &PyTuple) {}
