//! One worker of a pool: receive from the group, run the handler, publish the result,
//! count. The same loop serves async workers (spawned as tasks) and blocking workers (run
//! by `block_on` on a thread of the runtime's blocking pool), so both behave alike.
//!
//! The point of no return for a message is [`finish`]. In an automatic-commit group the
//! delivery already committed it, so `finish` only counts; in an explicit-ack group
//! (`PoolBuilder::acked`) `finish` acks the delivery there, after the handler ran and its
//! result was published, or nacks it if the handler failed. While the pool drains, a
//! message that failed [`DRAIN_TRIES`] times is nacked with a delay (see [`Worker::run`]).

use core::fmt;
use core::future::{poll_fn, Future};
use core::pin::Pin;
use core::task::Poll;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use super::barrier::{Arrival, Barrier};
use super::signal::{DRAINING, RUNNING, STOPPING};
use super::{HandlerError, PoolShared, WorkResult};
use crate::rt::{drop_caught, panic_message, CatchUnwind, Runtime};
use crate::{AckConsumer, Consumer, Delivery, Message, RecvError, Topic, TryRecvError};

/// How a worker runs the user's handler on one message. Errors and panics come back as
/// [`HandlerError`]s; nothing unwinds into the worker.
pub(crate) trait Handler<T, O>: Send + Sync + 'static {
    fn call(&self, msg: Message<T>) -> impl Future<Output = Result<O, HandlerError>> + Send;
}

/// An async handler: `Fn(Message<T>) -> impl Future<Output = Result<O, E>>`.
pub(crate) struct AsyncFn<F>(pub(crate) F);

impl<T, O, E, F, Fut> Handler<T, O> for AsyncFn<F>
where
    T: Send + Sync + 'static,
    O: Send + Sync + 'static,
    E: fmt::Display,
    F: Fn(Message<T>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, E>> + Send,
{
    fn call(&self, msg: Message<T>) -> impl Future<Output = Result<O, HandlerError>> + Send {
        // The handler may panic before it returns a future, or while it is polled.
        let started = catch_unwind(AssertUnwindSafe(|| (self.0)(msg)));
        async move {
            match started {
                Ok(fut) => match CatchUnwind::new(fut).await {
                    Ok(Ok(out)) => Ok(out),
                    Ok(Err(e)) => Err(failure(e)),
                    Err(payload) => Err(panic_error(payload)),
                },
                Err(payload) => Err(panic_error(payload)),
            }
        }
    }
}

/// A blocking handler: `Fn(Message<T>) -> Result<O, E>`, called on the worker's own
/// thread.
pub(crate) struct BlockingFn<F>(pub(crate) F);

impl<T, O, E, F> Handler<T, O> for BlockingFn<F>
where
    T: Send + Sync + 'static,
    O: Send + Sync + 'static,
    E: fmt::Display,
    F: Fn(Message<T>) -> Result<O, E> + Send + Sync + 'static,
{
    fn call(&self, msg: Message<T>) -> impl Future<Output = Result<O, HandlerError>> + Send {
        let out = match catch_unwind(AssertUnwindSafe(|| (self.0)(msg))) {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(e)) => Err(failure(e)),
            Err(payload) => Err(panic_error(payload)),
        };
        core::future::ready(out)
    }
}

/// The [`HandlerError`] for a handler's panic: its message, and the payload dropped with
/// a panic in its `Drop` caught, so that the worker goes on.
fn panic_error(payload: Box<dyn core::any::Any + Send>) -> HandlerError {
    let message = panic_message(payload.as_ref());
    drop_caught(payload);
    HandlerError::panicked(message)
}

/// The [`HandlerError`] for an error a handler returned. Its text comes from the user's
/// `Display`, and the error is dropped here too: a panic in either is caught and reported
/// as the handler's panic, so that the worker goes on and the message gets its result.
fn failure<E: fmt::Display>(e: E) -> HandlerError {
    let shown = move || {
        let error = HandlerError::failed(&e);
        drop(e);
        error
    };
    catch_unwind(AssertUnwindSafe(shown)).unwrap_or_else(|payload| {
        let message = format!(
            "the handler's error panicked when shown or dropped: {}",
            panic_message(payload.as_ref())
        );
        drop_caught(payload);
        HandlerError::panicked(message)
    })
}

/// Counts the worker as active from its creation until it is dropped: when its loop
/// ends, or when a runtime drops it unfinished.
pub(crate) struct Active(pub(crate) Arc<PoolShared>);

impl Active {
    pub(crate) fn new(shared: &Arc<PoolShared>) -> Self {
        shared.active.fetch_add(1, SeqCst);
        Self(shared.clone())
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        // The worker has left its group (its member is dropped first), so partitions may
        // have moved: workers waiting at the drain's barrier look again before they count.
        // The reset comes first: until it, this worker is live and not counted, so no
        // count made before the move can pass the barrier.
        self.0.barrier.reset();
        self.0.active.fetch_sub(1, SeqCst);
        self.0.signal.wake_all();
    }
}

/// Where a worker's messages come from: a member of an automatic-commit group, or of an
/// explicit-ack group.
pub(crate) enum Member<T> {
    Auto(Consumer<T>),
    Acked(AckConsumer<T>),
}

pub(crate) struct Worker<T, O, H> {
    pub(crate) slot: usize,
    pub(crate) member: Member<T>,
    pub(crate) handler: Arc<H>,
    pub(crate) results: Option<Topic<WorkResult<O>>>,
    /// Declared last, so dropped last: the worker counts as active (and the pool as not
    /// finished) until it has left its group and let go of the results topic.
    pub(crate) active: Active,
}

/// After how many failures during a drain a worker puts a message of an explicit-ack
/// group aside (see [`Worker::run`]).
pub(crate) const DRAIN_TRIES: u32 = 3;

/// How long a message put aside during a drain waits before it is delivered again, the
/// first time (see [`set_aside_delay`]).
pub(crate) const DRAIN_SET_ASIDE: core::time::Duration = core::time::Duration::from_secs(1);

/// The nack delay for a message's `failures`-th failure during a drain: none before the
/// [`DRAIN_TRIES`]th (the group's backoff applies), then [`DRAIN_SET_ASIDE`], doubled for
/// each further failure.
///
/// Doubling is what ends the drain. When handling the messages set aside takes longer
/// than their delay (several of them, or slow handlers), each comes back while the
/// others are handled, and with a fixed delay one of them would always be ready again.
/// Once the delay outgrows a round of them, the drain finds nothing ready and ends, after
/// a number of rounds that grows with the logarithm of a round's length.
pub(crate) fn set_aside_delay(failures: u32) -> Option<core::time::Duration> {
    let further = failures.checked_sub(DRAIN_TRIES)?;
    Some(DRAIN_SET_ASIDE.saturating_mul(1 << further.min(31)))
}

/// What waiting for the next message produced.
enum Next<T> {
    Message(Message<T>),
    /// A message of an explicit-ack group, and the lease to settle when done.
    Leased(Delivery<T>),
    Missed(u64),
    /// The pool's state changed; look at it again.
    Signalled,
    Closed,
}

impl<T, O, H> Worker<T, O, H>
where
    T: Clone + Send + Sync + 'static,
    O: Clone + Send + Sync + 'static,
    H: Handler<T, O>,
{
    /// The worker's loop, until the group closes, or the pool is told to stop, or it has
    /// drained.
    ///
    /// While draining, a failed delivery of an explicit-ack group is nacked as usual and
    /// so comes back to be tried again (under the group's backoff), but from its
    /// [`DRAIN_TRIES`]th failure during the drain on, a message is nacked with a delay
    /// instead ([`set_aside_delay`]: [`DRAIN_SET_ASIDE`], doubling with each further
    /// failure): set aside, so that the drain handles what is behind it and ends without
    /// waiting for it. With no backoff a nacked message is ready again
    /// at once, ahead of everything not yet delivered, so a message that always failed
    /// would otherwise keep the drain (and the worker) busy for ever. Every delivery the
    /// worker receives goes to the handler: none uses up a delivery attempt unhandled.
    pub(crate) async fn run<R: Runtime>(mut self) {
        let shared = self.active.0.clone();
        loop {
            // The barrier's generation before this receive (see `Next::Leased` below).
            let generation = shared.barrier.generation();
            let next = match shared.signal.state() {
                RUNNING => self.next::<R>().await,
                DRAINING if shared.barrier.passed() => Next::Closed,
                DRAINING => {
                    // Under the runtime's budget, as every wait while running is: a
                    // backlog drained by a handler that never waits must still leave
                    // turns to the other tasks of its thread.
                    let member = &mut self.member;
                    let taken = poll_fn(|cx| {
                        R::poll_cooperative(cx, |_| {
                            Poll::Ready(match member {
                                Member::Auto(c) => c.try_recv().map(Next::Message),
                                Member::Acked(c) => c.try_recv().map(Next::Leased),
                            })
                        })
                    })
                    .await;
                    match taken {
                        Ok(next) => next,
                        Err(TryRecvError::Lagged(n)) => Next::Missed(n),
                        Err(TryRecvError::Empty) => self.at_drain_barrier::<R>().await,
                        // Closed, and the whole group drained.
                        Err(_) => Next::Closed,
                    }
                }
                _ => Next::Closed,
            };
            match next {
                Next::Message(m) => {
                    shared.pushed.fetch_add(1, SeqCst);
                    self.process::<R>(m, None, None).await;
                }
                Next::Leased(d) => {
                    let id = (d.partition(), d.offset());
                    // Whether a failure now would be this message's DRAIN_TRIES-th (or a
                    // later one) during the drain: then it is set aside.
                    let failures = shared.drain_failures(id);
                    let set_aside = set_aside_delay(failures + 1);
                    shared.pushed.fetch_add(1, SeqCst);
                    // The handler gets the message; the lease stays here to be settled.
                    let failed = self
                        .process::<R>(d.message().clone(), Some(d), set_aside)
                        .await;
                    if failed && shared.signal.state() == DRAINING {
                        shared.drain_failed(id);
                    }
                    if shared.barrier.generation() != generation {
                        // A worker ended while this one held the lease, so its partition
                        // may have moved to a worker that found nothing there then (the
                        // message was out): settling it may have made something ready
                        // there. Counted workers look again.
                        shared.barrier.reset();
                        shared.signal.wake_all();
                    }
                }
                Next::Missed(n) => {
                    shared.missed.fetch_add(n, SeqCst);
                }
                Next::Signalled => {}
                Next::Closed => break,
            }
        }
    }

    /// During a drain, with nothing to take now: waits until every live worker is in the
    /// same place (the drain is over), or a message comes to this worker's partitions
    /// (it drains on), or the pool is told to stop.
    ///
    /// No worker leaves its group before every one has drained. A member that leaves
    /// hands its partitions to the others, and a worker that had seen nothing and ended,
    /// but not yet left, would be handed a partition with messages and never read it,
    /// while the member that had been reading it was handed an empty one and ended too:
    /// with more partitions than one, a drain could end with messages still in the group
    /// (found by the pool's stress test under load). While every worker waits here,
    /// nobody leaves, so every partition was last seen empty by the worker that has it.
    async fn at_drain_barrier<R: Runtime>(&mut self) -> Next<T> {
        let shared = self.active.0.clone();
        let slot = self.slot;
        match &mut self.member {
            Member::Auto(c) => barrier::<R, _, _, _>(&shared, slot, c.recv(), Next::Message).await,
            Member::Acked(c) => barrier::<R, _, _, _>(&shared, slot, c.recv(), Next::Leased).await,
        }
    }

    /// Waits for a message or a change of the pool's state, whichever comes first; idle,
    /// the worker sleeps in both wait lists.
    async fn next<R: Runtime>(&mut self) -> Next<T> {
        let shared = self.active.0.clone();
        let slot = self.slot;
        match &mut self.member {
            Member::Auto(c) => wait::<R, _, _, _>(&shared, slot, c.recv(), Next::Message).await,
            Member::Acked(c) => wait::<R, _, _, _>(&shared, slot, c.recv(), Next::Leased).await,
        }
    }

    /// Runs the handler on `msg`, publishes its result and settles `lease` (a failure is
    /// nacked after `failure_delay` if given, else under the group's backoff); returns
    /// whether the handler failed.
    async fn process<R: Runtime>(
        &mut self,
        msg: Message<T>,
        lease: Option<Delivery<T>>,
        failure_delay: Option<core::time::Duration>,
    ) -> bool {
        let shared = self.active.0.clone();
        let (partition, offset) = (msg.partition(), msg.offset());
        let outcome = self.handler.call(msg).await;
        // Order matters for `PoolStats`: processed before errors before consumed, and
        // readers load them in the reverse order.
        let failed = outcome.is_err();
        shared.processed.fetch_add(1, SeqCst);
        if failed {
            shared.errors.fetch_add(1, SeqCst);
        }
        let mut done = !failed;
        match &self.results {
            // Nobody takes the output: it is let go of here.
            None => drop_caught(outcome),
            Some(results) => {
                let result = WorkResult {
                    partition,
                    offset,
                    outcome,
                };
                match publish_result::<R, O>(results, result, &shared, self.slot).await {
                    Published::Yes => {}
                    Published::Closed => {
                        shared.results_dropped.fetch_add(1, SeqCst);
                    }
                    Published::Stopping => {
                        shared.results_dropped.fetch_add(1, SeqCst);
                        // Its result is lost: an explicit-ack group delivers it again later.
                        done = false;
                    }
                }
            }
        }
        finish(&shared, lease, done, failure_delay.filter(|_| failed));
        failed
    }
}

/// What a worker's receive gave: a message (made a [`Next`] by `wrap`), a gap, or the end
/// (the group closed and drained, or deleted).
fn received<M, T>(r: Result<M, RecvError>, wrap: fn(M) -> Next<T>) -> Next<T> {
    match r {
        Ok(m) => wrap(m),
        Err(RecvError::Lagged(n)) => Next::Missed(n),
        Err(_) => Next::Closed,
    }
}

/// Waits for `recv` or a change of the pool's state, whichever comes first.
async fn wait<R, F, M, T>(
    shared: &PoolShared,
    slot: usize,
    mut recv: F,
    wrap: fn(M) -> Next<T>,
) -> Next<T>
where
    R: Runtime,
    F: Future<Output = Result<M, RecvError>> + Unpin,
{
    poll_fn(|cx| {
        // The state first: a worker woken by a shutdown request and a message at once
        // takes no message published after `Stop` (which leaves them in the group); the
        // run loop drains for `Drain`.
        if shared.signal.state() >= DRAINING {
            return Poll::Ready(Next::Signalled);
        }
        if let Poll::Ready(r) = R::poll_cooperative(cx, |cx| Pin::new(&mut recv).poll(cx)) {
            return Poll::Ready(received(r, wrap));
        }
        // Losing this race drops `recv`, which takes nothing (cancel safe).
        shared
            .signal
            .poll_reached(DRAINING, slot, cx)
            .map(|()| Next::Signalled)
    })
    .await
}

/// [`Worker::at_drain_barrier`]'s wait: the receive `recv` against the barrier and the
/// pool's state. The worker counts at the barrier only while it waits having found
/// nothing: each time it is woken it takes itself off the count, looks again, and counts
/// again if it still finds nothing, in the barrier's current generation (one a worker that
/// ended did not cut short). A look that the runtime's budget put off does not count.
async fn barrier<R, F, M, T>(
    shared: &PoolShared,
    slot: usize,
    mut recv: F,
    wrap: fn(M) -> Next<T>,
) -> Next<T>
where
    R: Runtime,
    F: Future<Output = Result<M, RecvError>> + Unpin,
{
    let mut at = Arrived {
        barrier: &shared.barrier,
        generation: None,
    };
    poll_fn(|cx| loop {
        if let Some(generation) = at.generation.take() {
            if !shared.barrier.leave(generation) {
                return Poll::Ready(Next::Closed);
            }
        }
        if shared.signal.state() >= STOPPING || shared.barrier.passed() {
            return Poll::Ready(Next::Closed);
        }
        let generation = shared.barrier.generation();
        let mut looked = false;
        let polled = R::poll_cooperative(cx, |cx| {
            looked = true;
            Pin::new(&mut recv).poll(cx)
        });
        if let Poll::Ready(r) = polled {
            return Poll::Ready(received(r, wrap));
        }
        if !looked {
            // The runtime will poll again; nothing was seen, so nothing counts.
            return Poll::Pending;
        }
        // Registered before counting: a pass, a worker ending or a stop after this wakes it.
        shared.signal.register(slot, cx);
        match shared.barrier.arrive(generation) {
            Arrival::Passed => return Poll::Ready(Next::Closed),
            Arrival::Stale => continue,
            Arrival::Counted => at.generation = Some(generation),
        }
        if shared.signal.state() >= STOPPING || shared.barrier.try_pass(shared.active.load(SeqCst))
        {
            if shared.barrier.passed() {
                shared.signal.wake_all();
            }
            return Poll::Ready(Next::Closed);
        }
        return Poll::Pending;
    })
    .await
}

/// A worker's count at the barrier, taken back if its wait ends without the barrier being
/// passed (a stop, or the task dropped or unwinding).
struct Arrived<'a> {
    barrier: &'a Barrier,
    generation: Option<u64>,
}

impl Drop for Arrived<'_> {
    fn drop(&mut self) {
        if let Some(generation) = self.generation.take() {
            self.barrier.leave(generation);
        }
    }
}

/// Whether a result was published.
enum Published {
    Yes,
    /// The results topic is closed.
    Closed,
    /// The results topic stayed full until the pool was told to stop.
    Stopping,
}

/// Publishes a result, waiting for room unless the pool is told to stop.
async fn publish_result<R: Runtime, O>(
    results: &Topic<WorkResult<O>>,
    result: WorkResult<O>,
    shared: &PoolShared,
    slot: usize,
) -> Published {
    let mut publish = results.publish(result);
    let published = poll_fn(|cx| {
        if let Poll::Ready(r) = R::poll_cooperative(cx, |cx| Pin::new(&mut publish).poll(cx)) {
            return Poll::Ready(match r {
                Ok(_) => Published::Yes,
                // The result comes back: let go of with a panic in its drop caught.
                Err(e) => {
                    drop_caught(e);
                    Published::Closed
                }
            });
        }
        // Stopping: give up on a full results topic rather than hang the shutdown.
        // Dropping `publish` publishes nothing.
        shared
            .signal
            .poll_reached(STOPPING, slot, cx)
            .map(|()| Published::Stopping)
    })
    .await;
    // Still holding the result if it was not published.
    drop_caught(publish);
    published
}

/// The pool is done with a message.
///
/// In an explicit-ack group the lease is settled here, after the handler ran and its
/// result was published, so that a crash before this point redelivers rather than loses:
/// `ack` when `done`, `nack` otherwise (the handler failed, or its result was dropped by a
/// stop; the group's backoff, `max_deliveries` and dead-letter topic then apply), or
/// `nack_after(delay)` when a `delay` is given (see [`Worker::run`]). An ack refused
/// because the lease ran out is counted: the message was returned to the group and is
/// delivered again.
fn finish<T>(
    shared: &PoolShared,
    lease: Option<Delivery<T>>,
    done: bool,
    delay: Option<core::time::Duration>,
) {
    if let Some(delivery) = lease {
        let settled = match (done, delay) {
            (true, _) => delivery.ack(),
            (false, Some(delay)) => delivery.nack_after(delay),
            (false, None) => delivery.nack(),
        };
        if settled.is_err() {
            shared.acks_refused.fetch_add(1, SeqCst);
        }
    }
    shared.consumed.fetch_add(1, SeqCst);
}
