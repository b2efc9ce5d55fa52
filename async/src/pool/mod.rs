//! Worker pools: run a handler on every message of a consumer group with N workers.
//!
//! A [`WorkerPool`] joins a consumer group on a topic with one member per worker, so each
//! message goes to exactly one worker. [`Mode::Sequential`] is one worker, handling
//! messages one at a time in offset order; [`Mode::Parallel`]`(n)` is `n` workers. Handlers
//! are async ([`PoolBuilder::spawn`], run as tasks of the runtime) or blocking
//! ([`PoolBuilder::spawn_blocking`], each worker a thread of the runtime's blocking pool
//! that calls the handler in place). The same pool runs on [`Tokio`], [`AsyncStd`],
//! [`Smol`] and [`Threads`].
//!
//! A handler returns `Result<O, E>` with `E: Display`. An error, or a panic (caught), is
//! counted and becomes an error result, and the worker goes on with the next message. With
//! a results topic ([`PoolBuilder::results`]) every handled message yields a
//! [`WorkResult`] carrying the input's partition and offset and the output or the error
//! text.
//!
//! By default the group commits each message as it is delivered: at most once, a message
//! whose worker dies with it is not handled again. With [`PoolBuilder::acked`] the group is
//! an explicit-ack group: each message is acked only after its handler succeeded and its
//! result was published, and nacked (delivered again, per the group's backoff and
//! `max_deliveries`) if the handler failed: at least once.
//!
//! Idle workers sleep: each waits in the group's wait list and on the pool's shutdown
//! signal at once, with no timer and no polling. [`WorkerPool::stats`] reads the counters
//! at any time ([`PoolStats`] defines them). [`WorkerPool::shutdown`] drains or stops on
//! request and joins every worker; the workers also end by themselves when the topic is
//! closed and the group has delivered everything, which [`WorkerPool::join`] waits for.
//!
//! The pool reaches into nothing: it uses the group's public `recv`/`try_recv` and the
//! results topic's `publish`, like any other user.
//!
//! [`Threads`]: crate::rt::Threads
//!
//! # Examples
//!
//! ```
//! use memq::pool::{Mode, Shutdown, WorkerPool};
//! use memq::rt::Threads;
//! use memq::{StartAt, Topic};
//!
//! let jobs = Topic::<u64>::with_capacity(64)?;
//! let results = Topic::with_capacity(64)?;
//! let mut done = results.subscribe(StartAt::Earliest)?;
//!
//! let pool = WorkerPool::builder(&jobs, "squarers")
//!     .mode(Mode::Parallel(4))
//!     .results(results)
//!     .spawn_blocking(&Threads, |msg| {
//!         let n: u64 = *msg.value();
//!         if n == 3 { Err(format!("{n} is unlucky")) } else { Ok(n * n) }
//!     })?;
//! for n in 0..10u64 {
//!     jobs.publish_blocking(n)?;
//! }
//! let stats = pool.shutdown_blocking(Shutdown::Drain)?;
//! assert_eq!((stats.processed, stats.errors), (10, 1));
//!
//! let mut sum = 0;
//! while let Ok(r) = done.recv_blocking() {
//!     match &r.outcome {
//!         Ok(square) => sum += square,
//!         Err(e) => assert_eq!((r.offset, e.message()), (3, "3 is unlucky")),
//!     }
//! }
//! assert_eq!(sum, 285 - 9);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// The docs link to every runtime adapter; a build without some runtime features lacks
// those targets.
// Links to what a feature brings: here when it is on, else to the crate's list of
// features, which says which feature brings it. The blank line keeps the definitions
// out of the paragraph above.
#![doc = ""]
#![cfg_attr(feature = "tokio", doc = "[`Tokio`]: crate::rt::Tokio")]
#![cfg_attr(not(feature = "tokio"), doc = "[`Tokio`]: crate#features")]
#![cfg_attr(feature = "async-std", doc = "[`AsyncStd`]: crate::rt::AsyncStd")]
#![cfg_attr(not(feature = "async-std"), doc = "[`AsyncStd`]: crate#features")]
#![cfg_attr(feature = "smol", doc = "[`Smol`]: crate::rt::Smol")]
#![cfg_attr(not(feature = "smol"), doc = "[`Smol`]: crate#features")]

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, PoisonError};

use crate::rt::{JoinError, JoinHandle, Runtime};
use crate::{AckConfig, Message, StartAt, Topic};

mod barrier;
mod signal;
mod worker;

use barrier::Barrier;
use signal::{Signal, DRAINING, STOPPING};
use worker::{Active, AsyncFn, BlockingFn, Handler, Member, Worker};

/// How many workers a pool runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Exactly one worker: one message at a time, in offset order within each partition
    /// (on a one-partition topic, strictly in publishing order).
    ///
    /// In an explicit-ack pool ([`PoolBuilder::acked`]) a message whose handler failed is
    /// nacked and comes back under the group's backoff. Without a backoff it comes back
    /// at once, before anything published after it, and order holds. With one, the
    /// worker goes on with the messages behind it while it waits, and handles it when
    /// its backoff ends: order then holds for the messages that succeed first time.
    #[default]
    Sequential,
    /// Exactly this many workers, each handling one message at a time. 0 is an error
    /// ([`PoolError::ZeroWorkers`]).
    Parallel(usize),
}

impl Mode {
    /// The number of workers.
    pub fn workers(self) -> usize {
        match self {
            Self::Sequential => 1,
            Self::Parallel(n) => n,
        }
    }
}

/// How [`WorkerPool::shutdown`] ends the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// Handle everything available, then stop: every message published before the call
    /// is handled (in an explicit-ack pool, one that fails is tried again, but the drain
    /// waits neither for the group's backoff nor for a message that keeps failing; see
    /// below). Each
    /// worker stops waiting and takes messages while there are any. A worker whose part of
    /// the group has none waits for the others (and takes what comes to its partitions
    /// meanwhile); the workers end together once every one has run dry. None leaves the
    /// group before: a member that leaves moves partitions between the others, and a
    /// worker that had stopped looking would not read the one it was handed. So messages
    /// published during the drain are handled too, and publishers that keep every worker
    /// busy keep the drain going; and a pool of blocking workers ([`PoolBuilder::spawn_blocking`])
    /// needs a blocking thread of its runtime for each worker until the drain ends (Tokio's
    /// default is 512), since waiting workers keep theirs. The group should be the pool's
    /// alone during a drain: a member of it outside the pool that joins or leaves moves
    /// partitions without the workers knowing, and one could end without reading a
    /// partition it was handed.
    ///
    /// In an explicit-ack pool ([`PoolBuilder::acked`]) a message whose handler fails is
    /// nacked and tried again during the drain, under the group's backoff. A message
    /// waiting out a backoff when nothing else is left is not waited for: the drain ends
    /// and it stays in the group for its next members, with its delivery count. So with
    /// a backoff, a message that failed just before the call, or fails during the drain,
    /// may end the drain unhandled; without one, it is tried again at once. From its third
    /// failure during the drain on, its worker nacks it with a delay instead, which sets
    /// it aside: the drain goes on with the rest and ends without waiting for it, and it
    /// stays in the group for its next members. The delay is one second, doubled with
    /// each further failure during the drain: a message set aside that comes back while
    /// the drain is still busy (with other messages set aside, or slow handlers) is tried
    /// again and set aside for longer, until the drain finds nothing ready. So a message
    /// that fails once or twice is handled again, and messages that always fail cannot
    /// keep the drain from ending, however many there are. Every delivery a worker takes
    /// goes to the handler; none uses up one of the group's `max_deliveries` unhandled.
    Drain,
    /// Stop as soon as possible: each worker finishes the message in hand (the handler is
    /// never interrupted) and ends. Messages not yet received stay in the group for its
    /// next members. A result that cannot be published because the results topic is full
    /// is dropped and counted in [`PoolStats::results_dropped`] (in an explicit-ack pool
    /// its message is nacked, to be handled again).
    Stop,
}

/// The counters of a pool, read at one moment by [`WorkerPool::stats`].
///
/// Every message moves through the counters in this order: `pushed`, then `processed`
/// (and `errors` if it failed), then `consumed`. A snapshot therefore always satisfies
/// `consumed <= processed <= pushed` and `errors <= processed`, even while workers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct PoolStats {
    /// Workers the pool was asked for.
    pub workers: usize,
    /// Workers started and not yet ended. Equal to `workers` from the moment the pool is
    /// built until a shutdown, the close of the topic or a runtime shutdown ends them.
    pub active: usize,
    /// Messages the workers received from the group (handed to the pool). In an
    /// explicit-ack pool a message delivered again counts again.
    pub pushed: u64,
    /// Messages whose handler has returned: with an output, with an error, or by
    /// panicking.
    pub processed: u64,
    /// Processed messages whose handler returned an error or panicked.
    pub errors: u64,
    /// Messages the pool is done with: handled, the result published (or dropped, see
    /// `results_dropped`), and released to the group (acked or nacked in an explicit-ack
    /// pool). `pushed - consumed` messages are in the pool's hands.
    pub consumed: u64,
    /// Messages the group lost before a worker received them (a `DropOldest` topic or a
    /// TTL evicted them), as reported by the group's `Lagged`.
    pub missed: u64,
    /// Results not published: the results topic was closed or refused them (full under
    /// [`Overflow::Reject`](crate::Overflow::Reject)), or was full while the pool was
    /// stopping.
    pub results_dropped: u64,
    /// Explicit-ack pools only: acks (or nacks) refused because the lease had run out;
    /// the group delivers those messages again.
    pub acks_refused: u64,
}

impl PoolStats {
    /// Messages received and not yet done with (`pushed - consumed`).
    pub fn in_flight(&self) -> u64 {
        self.pushed - self.consumed
    }

    /// Processed messages whose handler returned an output (`processed - errors`).
    pub fn succeeded(&self) -> u64 {
        self.processed - self.errors
    }
}

/// Why a handler produced no output: it returned an error, or it panicked.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HandlerError {
    panicked: bool,
    message: String,
}

impl HandlerError {
    fn failed(e: &dyn fmt::Display) -> Self {
        Self {
            panicked: false,
            message: e.to_string(),
        }
    }

    fn panicked(message: String) -> Self {
        Self {
            panicked: true,
            message,
        }
    }

    /// Whether the handler panicked (rather than returning an error).
    pub fn is_panic(&self) -> bool {
        self.panicked
    }

    /// The error's text, or the panic's message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.panicked {
            write!(f, "handler panicked: {}", self.message)
        } else {
            write!(f, "handler failed: {}", self.message)
        }
    }
}

impl std::error::Error for HandlerError {}

/// What a pool publishes to its results topic for each message it handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkResult<O> {
    /// The input message's partition.
    pub partition: u32,
    /// The input message's offset in that partition.
    pub offset: u64,
    /// The handler's output, or why there is none.
    pub outcome: Result<O, HandlerError>,
}

impl<O> WorkResult<O> {
    /// Whether the handler returned an output.
    pub fn is_ok(&self) -> bool {
        self.outcome.is_ok()
    }
}

/// Why a pool could not be built or did not end cleanly.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PoolError {
    /// A pool needs at least one worker.
    ZeroWorkers,
    /// Joining the consumer group failed.
    Group(crate::Error),
    /// A worker did not end normally: the runtime dropped it (for example, it shut down)
    /// or the pool itself panicked. The other workers were still joined.
    Worker(JoinError),
}

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroWorkers => f.write_str("a worker pool needs at least 1 worker"),
            Self::Group(e) => write!(f, "cannot join the consumer group: {e}"),
            Self::Worker(e) => write!(f, "a worker did not end normally: {e}"),
        }
    }
}

impl std::error::Error for PoolError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Group(e) => Some(e),
            Self::Worker(e) => Some(e),
            Self::ZeroWorkers => None,
        }
    }
}

/// What the workers and the pool handle share.
#[derive(Debug)]
pub(crate) struct PoolShared {
    signal: Signal,
    workers: usize,
    active: AtomicUsize,
    /// The drain's barrier (see [`barrier`]).
    barrier: Barrier,
    /// Handler failures per message (partition, offset) during the drain, whichever
    /// worker took it (see [`worker::set_aside_delay`]).
    drain_failures: Mutex<BTreeMap<(u32, u64), u32>>,
    pushed: AtomicU64,
    processed: AtomicU64,
    errors: AtomicU64,
    consumed: AtomicU64,
    missed: AtomicU64,
    results_dropped: AtomicU64,
    acks_refused: AtomicU64,
}

impl PoolShared {
    /// How often the handler failed on message `id` (partition, offset) during the drain.
    pub(crate) fn drain_failures(&self, id: (u32, u64)) -> u32 {
        let failures = self
            .drain_failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        failures.get(&id).copied().unwrap_or(0)
    }

    /// Counts a handler failure on message `id` during the drain.
    pub(crate) fn drain_failed(&self, id: (u32, u64)) {
        let mut failures = self
            .drain_failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *failures.entry(id).or_insert(0) += 1;
    }

    fn stats(&self) -> PoolStats {
        // The reverse of the order in which a message moves through the counters (see
        // `PoolStats`), with sequentially consistent operations on both sides: a counter
        // read later has seen every increment of the one read before it.
        let consumed = self.consumed.load(SeqCst);
        let results_dropped = self.results_dropped.load(SeqCst);
        let errors = self.errors.load(SeqCst);
        let processed = self.processed.load(SeqCst);
        let pushed = self.pushed.load(SeqCst);
        PoolStats {
            workers: self.workers,
            active: self.active.load(SeqCst),
            pushed,
            processed,
            errors,
            consumed,
            missed: self.missed.load(SeqCst),
            results_dropped,
            acks_refused: self.acks_refused.load(SeqCst),
        }
    }
}

/// Builds a [`WorkerPool`]; made by [`WorkerPool::builder`].
///
/// `O` is the handler's output type, the value of [`WorkResult::outcome`].
#[must_use = "a builder does nothing until `spawn` or `spawn_blocking`"]
pub struct PoolBuilder<'t, T, O> {
    topic: &'t Topic<T>,
    group: String,
    mode: Mode,
    start: StartAt,
    results: Option<Topic<WorkResult<O>>>,
    acks: Option<AckConfig<T>>,
}

impl<T, O> fmt::Debug for PoolBuilder<'_, T, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolBuilder")
            .field("group", &self.group)
            .field("mode", &self.mode)
            .field("start", &self.start)
            .field("results", &self.results.is_some())
            .field("acks", &self.acks)
            .finish()
    }
}

impl<'t, T, O> PoolBuilder<'t, T, O>
where
    T: Clone + Send + Sync + 'static,
    O: Clone + Send + Sync + 'static,
{
    /// Sets how many workers run (default [`Mode::Sequential`]).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Where the group starts if it does not exist yet (default [`StartAt::Earliest`]:
    /// a work queue handles what was published before the pool started). An existing
    /// group resumes at its committed position.
    pub fn start_at(mut self, start: StartAt) -> Self {
        self.start = start;
        self
    }

    /// Publishes a [`WorkResult`] for every handled message to `results`.
    ///
    /// The pool keeps a publishing handle to `results` until its last worker ends, so a
    /// reader of `results` sees `Closed` after the pool ended (once the other handles are
    /// gone too). A full results topic holds the workers back (policy `Block`): read it.
    pub fn results(mut self, results: Topic<WorkResult<O>>) -> Self {
        self.results = Some(results);
        self
    }

    /// Makes the pool's group an explicit-ack group (at least once) with `config`: each
    /// message is a lease, acked after its handler succeeded and its result was
    /// published, nacked if the handler failed, so the group's backoff,
    /// `max_deliveries` and dead-letter topic apply to failures; a worker that ends or a
    /// lease that runs out returns the message to the group. Without this, the group
    /// commits each message as it is delivered (at most once).
    ///
    /// `config` creates the group; an existing explicit-ack group of that name keeps its
    /// own settings. Workers do not extend leases: choose an `ack_wait` longer than the
    /// slowest handler, or a message is handled again while its first handler still runs.
    /// For leases to run out while members are parked, give `config` the runtime's timer
    /// ([`Runtime::timer`]). A result dropped by [`Shutdown::Stop`] nacks its message.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use memq::pool::{Shutdown, WorkerPool};
    /// use memq::rt::{Runtime, Threads};
    /// use memq::{AckConfig, Topic};
    ///
    /// let topic = Topic::<u32>::with_capacity(8)?;
    /// let config = AckConfig::new().ack_wait(Duration::from_secs(30)).timer(Threads.timer());
    /// let pool = WorkerPool::builder(&topic, "at-least-once")
    ///     .acked(config)
    ///     .spawn_blocking(&Threads, |m| Ok::<_, String>(*m.value() + 1))?;
    /// topic.publish_blocking(1)?;
    /// assert_eq!(pool.shutdown_blocking(Shutdown::Drain)?.consumed, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acked(mut self, config: AckConfig<T>) -> Self {
        self.acks = Some(config);
        self
    }

    /// Starts the pool with an async handler; each worker is a task of `rt`.
    ///
    /// # Errors
    ///
    /// [`PoolError::ZeroWorkers`] for `Mode::Parallel(0)`; [`PoolError::Group`] if the
    /// group cannot be joined. Nothing is started then.
    ///
    /// # Examples
    ///
    /// ```
    /// use memq::pool::{Shutdown, WorkerPool};
    /// use memq::rt::Threads;
    /// use memq::Topic;
    ///
    /// let topic = Topic::<&str>::with_capacity(8)?;
    /// let pool = WorkerPool::builder(&topic, "printer")
    ///     .spawn(&Threads, |msg| async move { Ok::<_, String>(println!("{}", msg.value())) })?;
    /// topic.publish_blocking("hello")?;
    /// assert_eq!(pool.shutdown_blocking(Shutdown::Drain)?.processed, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn<R, F, Fut, E>(self, rt: &R, handler: F) -> Result<WorkerPool, PoolError>
    where
        R: Runtime,
        F: Fn(Message<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
        E: fmt::Display,
    {
        self.start_workers(AsyncFn(handler), |worker| rt.spawn(worker.run::<R>()))
    }

    /// Starts the pool with a blocking handler; each worker is a thread of `rt`'s
    /// blocking pool (a thread of its own with [`Threads`](crate::rt::Threads)) that
    /// calls the handler in place, for the pool's whole life.
    ///
    /// If the runtime shuts down first (a Tokio runtime dropped, an executor of yours
    /// given to [`Smol::with_executor`] dropped; see
    /// [`Runtime::drops_tasks_on_shutdown`]), the workers are told to stop, as by
    /// [`Shutdown::Stop`]: Tokio's shutdown waits for its blocking threads, and would
    /// otherwise wait for ever.
    ///
    /// # Errors
    ///
    /// As [`PoolBuilder::spawn`].
    ///
    /// # Examples
    ///
    /// ```
    /// use memq::pool::{Mode, Shutdown, WorkerPool};
    /// use memq::rt::Threads;
    /// use memq::Topic;
    ///
    /// let topic = Topic::<&str>::with_capacity(8)?;
    /// let pool = WorkerPool::builder(&topic, "hashers")
    ///     .mode(Mode::Parallel(2))
    ///     .spawn_blocking(&Threads, |msg| Ok::<_, String>(msg.value().len()))?;
    /// topic.publish_blocking("abc")?;
    /// let stats = pool.shutdown_blocking(Shutdown::Drain)?;
    /// assert_eq!((stats.processed, stats.active), (1, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    #[cfg_attr(
        feature = "smol",
        doc = "[`Smol::with_executor`]: crate::rt::Smol::with_executor"
    )]
    #[cfg_attr(not(feature = "smol"), doc = "[`Smol::with_executor`]: crate#features")]
    pub fn spawn_blocking<R, F, E>(self, rt: &R, handler: F) -> Result<WorkerPool, PoolError>
    where
        R: Runtime,
        F: Fn(Message<T>) -> Result<O, E> + Send + Sync + 'static,
        E: fmt::Display,
    {
        let pool = self.start_workers(BlockingFn(handler), |worker| {
            rt.spawn_blocking(move || crate::rt::block_on(worker.run::<R>()))
        })?;
        if rt.drops_tasks_on_shutdown() {
            // The blocking workers cannot see the runtime go; this task can.
            rt.spawn_detached(Box::pin(watch_runtime(pool.shared.clone())));
        }
        Ok(pool)
    }

    fn start_workers<H: Handler<T, O>>(
        self,
        handler: H,
        mut spawn: impl FnMut(Worker<T, O, H>) -> JoinHandle<()>,
    ) -> Result<WorkerPool, PoolError> {
        let n = self.mode.workers();
        if n == 0 {
            return Err(PoolError::ZeroWorkers);
        }
        // Join every member before starting any worker, so a failure starts nothing.
        let acked = self.acks.is_some();
        let mut acks = self.acks;
        let members: Vec<Member<T>> = (0..n)
            .map(|_| match acks.take() {
                // The first member creates the group with the caller's settings; the
                // others join it, and the group ignores their (default) settings.
                Some(config) => self
                    .topic
                    .group_acked(&self.group, self.start, config)
                    .map(Member::Acked),
                None if acked => self
                    .topic
                    .group_acked(&self.group, self.start, AckConfig::new())
                    .map(Member::Acked),
                None => self.topic.group(&self.group, self.start).map(Member::Auto),
            })
            .collect::<Result<_, _>>()
            .map_err(PoolError::Group)?;
        let shared = Arc::new(PoolShared {
            // One slot per worker, and one for `watch_runtime`.
            signal: Signal::new(n + 1),
            workers: n,
            active: AtomicUsize::new(0),
            barrier: Barrier::default(),
            drain_failures: Mutex::new(BTreeMap::new()),
            pushed: AtomicU64::new(0),
            processed: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            consumed: AtomicU64::new(0),
            missed: AtomicU64::new(0),
            results_dropped: AtomicU64::new(0),
            acks_refused: AtomicU64::new(0),
        });
        let handler = Arc::new(handler);
        let handles = members
            .into_iter()
            .enumerate()
            .map(|(slot, member)| {
                spawn(Worker {
                    active: Active::new(&shared),
                    slot,
                    member,
                    handler: handler.clone(),
                    results: self.results.clone(),
                })
            })
            .collect();
        Ok(WorkerPool {
            shared,
            handles,
            group: self.group,
        })
    }
}

/// Lives on the runtime of a pool with blocking workers until the pool is asked to shut
/// down or every worker has ended (the topic closed and the group drained: a pool that
/// ends on its own must not leave this task behind); if the runtime drops it first (it is
/// shutting down), tells the workers to stop.
///
/// A runtime such as Tokio's waits for its blocking work when it shuts down, and a
/// blocking worker waiting for messages would keep that wait going for ever. Stopped,
/// the workers finish the message in hand and end, and the shutdown completes.
fn watch_runtime(shared: Arc<PoolShared>) -> impl Future<Output = ()> + Send + 'static {
    struct StopIfDropped(Arc<PoolShared>);
    impl Drop for StopIfDropped {
        fn drop(&mut self) {
            // Dropped unfinished: nobody asked the pool to shut down yet, and workers
            // are still running.
            if self.0.signal.state() < DRAINING && self.0.active.load(SeqCst) > 0 {
                self.0.signal.request(STOPPING);
            }
        }
    }
    // Made here, not in the `async` block: a task dropped before it was ever polled
    // (an executor that nobody ran) drops it too.
    let guard = StopIfDropped(shared);
    async move {
        let slot = guard.0.workers;
        core::future::poll_fn(|cx| {
            if guard.0.signal.poll_reached(DRAINING, slot, cx).is_ready() {
                return Poll::Ready(());
            }
            // Registered first: a worker that ends counts itself out, then wakes every
            // slot, so the last one cannot end unseen between this look and the wait.
            if guard.0.active.load(SeqCst) == 0 {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }
}

/// A running worker pool; see the [module documentation](self).
///
/// Dropping it without [`WorkerPool::shutdown`] or [`WorkerPool::join`] asks the workers
/// to stop ([`Shutdown::Stop`]) and does not wait for them.
#[derive(Debug)]
#[must_use = "dropping a worker pool asks its workers to stop; keep it, and end it with `shutdown` or `join`"]
pub struct WorkerPool {
    shared: Arc<PoolShared>,
    handles: Vec<JoinHandle<()>>,
    group: String,
}

impl WorkerPool {
    /// Starts building a pool over the consumer group `group` of `topic`.
    ///
    /// The pool joins the group with one member per worker when it is spawned; the topic
    /// itself is only borrowed, so it still closes when its last publishing handle goes.
    pub fn builder<'t, T, O>(topic: &'t Topic<T>, group: &str) -> PoolBuilder<'t, T, O> {
        PoolBuilder {
            topic,
            group: group.to_owned(),
            mode: Mode::Sequential,
            start: StartAt::Earliest,
            results: None,
            acks: None,
        }
    }

    /// The consumer group's name.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The counters, as of now. See [`PoolStats`] for what each counts.
    pub fn stats(&self) -> PoolStats {
        self.shared.stats()
    }

    /// Whether every worker has ended.
    pub fn is_finished(&self) -> bool {
        self.shared.active.load(SeqCst) == 0
    }

    /// A handle that reads the counters from anywhere (another thread, a metrics task),
    /// also after the pool was shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// use memq::pool::{Shutdown, WorkerPool};
    /// use memq::rt::Threads;
    /// use memq::Topic;
    ///
    /// let topic = Topic::<u8>::with_capacity(8)?;
    /// let pool = WorkerPool::builder(&topic, "g").spawn_blocking(&Threads, |_| Ok::<_, String>(()))?;
    /// let monitor = pool.monitor();
    /// std::thread::spawn(move || println!("{:?}", monitor.stats())).join().unwrap();
    /// pool.shutdown_blocking(Shutdown::Stop)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn monitor(&self) -> PoolMonitor {
        PoolMonitor {
            shared: self.shared.clone(),
        }
    }

    /// Asks the workers to end as `how` says, without waiting for them. A later `Stop`
    /// overrides a `Drain`, not the reverse.
    pub fn request_shutdown(&self, how: Shutdown) {
        self.shared.signal.request(match how {
            Shutdown::Drain => DRAINING,
            Shutdown::Stop => STOPPING,
        });
    }

    /// Asks the workers to end as `how` says, and waits until every one has.
    ///
    /// # Errors
    ///
    /// [`PoolError::Worker`] if a worker did not end normally (see there); every worker
    /// is still waited for.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it completes escalates to [`Shutdown::Stop`] and no
    /// longer waits.
    pub fn shutdown(self, how: Shutdown) -> Join {
        self.request_shutdown(how);
        self.join()
    }

    /// [`WorkerPool::shutdown`] for plain threads: parks until every worker has ended.
    ///
    /// Do not call it from an async task: it blocks the executor's thread.
    ///
    /// # Errors
    ///
    /// As [`WorkerPool::shutdown`].
    pub fn shutdown_blocking(self, how: Shutdown) -> Result<PoolStats, PoolError> {
        crate::rt::block_on(self.shutdown(how))
    }

    /// Waits until every worker has ended by itself: the topic was closed and the group
    /// has delivered everything, or the group was deleted.
    ///
    /// # Errors
    ///
    /// As [`WorkerPool::shutdown`].
    ///
    /// # Cancel safety
    ///
    /// As [`WorkerPool::shutdown`].
    pub fn join(mut self) -> Join {
        Join {
            shared: self.shared.clone(),
            handles: core::mem::take(&mut self.handles),
            next: 0,
            failed: None,
            done: false,
        }
    }

    /// [`WorkerPool::join`] for plain threads.
    ///
    /// # Errors
    ///
    /// As [`WorkerPool::shutdown`].
    pub fn join_blocking(self) -> Result<PoolStats, PoolError> {
        crate::rt::block_on(self.join())
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        if !self.handles.is_empty() {
            self.shared.signal.request(STOPPING);
        }
    }
}

/// Reads a pool's counters; made by [`WorkerPool::monitor`]. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PoolMonitor {
    shared: Arc<PoolShared>,
}

impl PoolMonitor {
    /// The counters, as of now. See [`PoolStats`] for what each counts.
    pub fn stats(&self) -> PoolStats {
        self.shared.stats()
    }

    /// Whether every worker has ended.
    pub fn is_finished(&self) -> bool {
        self.shared.active.load(SeqCst) == 0
    }
}

/// Future of [`WorkerPool::join`] and [`WorkerPool::shutdown`]: the final counters once
/// every worker has ended.
///
/// # Cancel safety
///
/// Dropping it before it completes asks the workers to stop and no longer waits.
#[must_use = "futures do nothing unless polled"]
pub struct Join {
    shared: Arc<PoolShared>,
    handles: Vec<JoinHandle<()>>,
    next: usize,
    failed: Option<JoinError>,
    done: bool,
}

impl fmt::Debug for Join {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Join")
            .field("workers", &self.handles.len())
            .field("joined", &self.next)
            .finish()
    }
}

impl Future for Join {
    type Output = Result<PoolStats, PoolError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.done {
            return Poll::Pending;
        }
        while let Some(handle) = this.handles.get_mut(this.next) {
            match Pin::new(handle).poll(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => {
                    this.failed.get_or_insert(e);
                }
                Poll::Pending => return Poll::Pending,
            }
            this.next += 1;
        }
        this.done = true;
        Poll::Ready(match this.failed.take() {
            Some(e) => Err(PoolError::Worker(e)),
            None => Ok(this.shared.stats()),
        })
    }
}

impl Drop for Join {
    fn drop(&mut self) {
        if !self.done {
            self.shared.signal.request(STOPPING);
        }
    }
}
