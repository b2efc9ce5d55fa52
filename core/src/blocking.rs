//! Blocking front ends for plain threads: each runs the async operation's own future on
//! the calling thread, parking it until the future's waker unparks it. Before parking,
//! a thread watches for its wake-up for a few microseconds (127 spin hints and 4 yields,
//! bounded, as a mutex or crossbeam's backoff does before it sleeps), so that a busy
//! hand-off between two threads costs no sleep; a thread with nothing to do parks and
//! uses no CPU.

use alloc::sync::Arc;
use alloc::task::Wake;
use core::future::Future;
use core::pin::pin;
use core::sync::atomic::{AtomicBool, Ordering};
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::thread::{self, Thread};
use std::time::Instant;

use crate::config::Overflow;
use crate::error::{PublishError, RecvError, RecvTimeoutError, TryRecvError};
use crate::message::{Message, Receipt};
use crate::partition::Shared;
use crate::publish::{Attempt, Route};
use crate::read::group::Consumer;
use crate::read::subscriber::Subscriber;
use crate::topic::Topic;
use crate::wait::WaitKey;

/// The waker of a thread blocked in memq: records the wake-up, then unparks the thread.
struct Unparker {
    thread: Thread,
    /// Set by a wake-up; the blocked thread clears it before polling again.
    woken: AtomicBool,
}

impl Wake for Unparker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        // Costs a system call only if the thread is actually parked.
        self.thread.unpark();
    }
}

impl Unparker {
    /// An unparker for this thread, and its waker.
    fn for_this_thread() -> (Arc<Unparker>, Waker) {
        let u = Arc::new(Unparker {
            thread: thread::current(),
            woken: AtomicBool::new(false),
        });
        let waker = Waker::from(u.clone());
        (u, waker)
    }
}

/// This thread's unparker and waker, and whether a blocking call is using them.
struct ThisThread {
    unparker: Arc<Unparker>,
    waker: Waker,
    busy: core::cell::Cell<bool>,
}

thread_local! {
    static THIS_THREAD: ThisThread = {
        let (unparker, waker) = Unparker::for_this_thread();
        ThisThread { unparker, waker, busy: core::cell::Cell::new(false) }
    };
}

/// Runs `f` with an unparker for this thread and its waker: the thread-local pair, made
/// once per thread, when no blocking call on this thread is using it; otherwise a pair
/// made for this call alone. That is the case for a blocking call nested in another (user
/// code that memq runs inside a blocking call, a value's `Drop` say, blocking on memq in
/// turn), whose own wake-up flag must not erase the outer call's, and while the thread
/// exits and the thread-local pair is gone (a destructor of another thread-local, or a C
/// caller's pthread key destructor, calling memq).
fn with_this_thread<R>(f: impl FnOnce(&Unparker, &Waker) -> R) -> R {
    /// Gives the thread-local pair back however `f` ends.
    struct Release;
    impl Drop for Release {
        fn drop(&mut self) {
            let _ = THIS_THREAD.try_with(|t| t.busy.set(false));
        }
    }
    if matches!(THIS_THREAD.try_with(|t| !t.busy.replace(true)), Ok(true)) {
        let _release = Release;
        THIS_THREAD.with(|t| f(&t.unparker, &t.waker))
    } else {
        let (u, waker) = Unparker::for_this_thread();
        f(&u, &waker)
    }
}

/// Waits briefly for a wake-up before parking: a hand-off that arrives within a few
/// microseconds (the other side of a busy topic) costs no sleep and no system call on
/// the waking side. Bounded, like a mutex before it sleeps: 127 spin hints in growing
/// rounds, then up to 4 `yield_now`s, then the thread parks, so an idle thread costs
/// nothing. (A parked thread on a virtual machine can take tens of microseconds to wake,
/// which is what this saves.) Returns `true` if the wake-up came.
fn spin_for_wake(u: &Unparker) -> bool {
    for round in 0..7 {
        for _ in 0..1u32 << round {
            core::hint::spin_loop();
        }
        if u.woken.load(Ordering::Acquire) {
            return true;
        }
    }
    for _ in 0..4 {
        thread::yield_now();
        if u.woken.load(Ordering::Acquire) {
            return true;
        }
    }
    false
}

/// Before a reader registers to wait: watches, without any lock, whether something was
/// published (`quiet` turns `false`), for as long as [`spin_for_wake`] watches for a
/// wake-up. A message that arrives within that moment is then read with one visit to
/// the log, without registering, and its publisher has nobody to wake.
fn watch_for_news(quiet: impl Fn() -> bool) {
    if !quiet() {
        return;
    }
    for round in 0..7 {
        for _ in 0..1u32 << round {
            core::hint::spin_loop();
        }
        if !quiet() {
            return;
        }
    }
    for _ in 0..4 {
        thread::yield_now();
        if !quiet() {
            return;
        }
    }
}

/// Parks this thread until `u` is woken, or until `deadline`. Returns `false` if the
/// deadline passed first. Parking looks at `u`'s flag rather than trusting the thread's
/// one unpark token: user code that memq runs inside a poll (a value's `Drop`) may park
/// the thread itself and so use up the token of a wake-up meant for this call, which the
/// flag still records.
fn park_until_woken(u: &Unparker, deadline: Option<Instant>) -> bool {
    if spin_for_wake(u) {
        return true;
    }
    loop {
        match deadline {
            None => thread::park(),
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return false;
                }
                thread::park_timeout(d - now);
            }
        }
        if u.woken.load(Ordering::Acquire) {
            return true;
        }
    }
}

/// Polls `fut` on this thread until it is ready, or until `deadline` passes (then
/// returns `None`, and the caller drops the future). The thread parks between polls
/// until the future's waker is called. The deadline is looked at after every poll, so
/// a future woken again and again (a member that may take nothing more, woken by every
/// publish) cannot outlive it, and a deadline that has passed polls exactly once.
fn drive<F: Future>(fut: F, deadline: Option<Instant>) -> Option<F::Output> {
    let mut fut = pin!(fut);
    // Locks taken from here back off less (see `sync::BLOCKING_BACKOFF`).
    let _blocking = crate::sync::enter_blocking_call();
    with_this_thread(|u, waker| {
        let mut cx = Context::from_waker(waker);
        loop {
            u.woken.store(false, Ordering::Relaxed);
            if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
                return Some(out);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) || !park_until_woken(u, deadline) {
                return None;
            }
        }
    })
}

/// Runs `future` to completion on the calling thread: the executor behind memq's
/// blocking API (`recv_blocking`, `publish_blocking`, …), for any future.
///
/// The thread parks while the future waits and is unparked by the future's waker; it
/// first watches for the wake-up for a few microseconds (bounded), so a busy hand-off
/// costs no sleep, and an idle wait costs no CPU. A wake-up is never lost to user code
/// that parks the thread during a poll, and a blocking call nested in another (user code
/// run inside a poll that blocks on memq in turn) keeps the outer call's wake-up.
///
/// Do not call it from inside an async task: it blocks the executor's thread.
///
/// # Panics
///
/// If the future panics.
///
/// # Examples
///
/// ```
/// # use memq_core as memq;
/// use memq::{block_on, StartAt, Topic};
/// let topic = Topic::with_capacity(8)?;
/// let mut sub = topic.subscribe(StartAt::Earliest)?;
/// block_on(topic.publish("hello"))?;
/// assert_eq!(block_on(sub.recv())?.into_value(), "hello");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    loop {
        // `drive` gives up only at a deadline, and there is none.
        if let Some(out) = drive(future.as_mut(), None) {
            return out;
        }
    }
}

/// [`block_on`] for at most `timeout`: `None` if the future is not ready by then (it is
/// dropped; every memq future is cancel safe, see each method's "Cancel safety"). A
/// zero timeout polls the future exactly once; a timeout too large to represent waits
/// for ever.
///
/// A publish future dropped this way publishes nothing, and the message it held is
/// dropped with it. To get the message back, use the `*_blocking_timeout` publishes
/// ([`Topic::publish_keyed_blocking_timeout`], [`Topic::publish_batch_blocking_timeout`],
/// ...), which hand it back in [`PublishError::Full`].
///
/// # Panics
///
/// If the future panics.
///
/// # Examples
///
/// ```
/// # use memq_core as memq;
/// use core::time::Duration;
/// use memq::{block_on_timeout, StartAt, Topic};
/// let topic = Topic::<u32>::with_capacity(8)?;
/// let mut sub = topic.subscribe(StartAt::Earliest)?;
/// assert!(block_on_timeout(sub.recv(), Duration::from_millis(10)).is_none());
/// topic.try_publish(7)?;
/// let got = block_on_timeout(sub.recv(), Duration::ZERO).map(|m| m.map(|m| m.into_value()));
/// assert_eq!(got, Some(Ok(7)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn block_on_timeout<F: Future>(future: F, timeout: Duration) -> Option<F::Output> {
    block_on_deadline(future, deadline(timeout))
}

/// Runs `fut` until it completes or `deadline` passes; then the future is dropped (every
/// memq future is cancel safe) and `None` is returned. No deadline waits forever.
fn block_on_deadline<F: Future>(fut: F, deadline: Option<Instant>) -> Option<F::Output> {
    match deadline {
        None => Some(block_on(fut)),
        Some(_) => drive(fut, deadline),
    }
}

fn deadline(timeout: Duration) -> Option<Instant> {
    // A timeout too large to represent waits forever.
    Instant::now().checked_add(timeout)
}

impl<T> Topic<T> {
    /// [`Topic::publish`] for plain threads: parks until there is room.
    ///
    /// # Errors
    ///
    /// As [`Topic::publish`].
    pub fn publish_blocking(&self, value: T) -> Result<Receipt, PublishError<T>> {
        self.publish_routed_blocking(self.route(None, None), value)
    }

    /// [`Topic::publish_keyed`] for plain threads.
    ///
    /// # Errors
    ///
    /// As [`Topic::publish_keyed`].
    pub fn publish_keyed_blocking(
        &self,
        key: impl AsRef<[u8]>,
        value: T,
    ) -> Result<Receipt, PublishError<T>> {
        self.publish_routed_blocking(self.route(None, Some(key.as_ref())), value)
    }

    /// [`Topic::publish_to`] for plain threads.
    ///
    /// # Errors
    ///
    /// As [`Topic::publish_to`].
    pub fn publish_to_blocking(
        &self,
        partition: u32,
        value: T,
    ) -> Result<Receipt, PublishError<T>> {
        self.publish_routed_blocking(self.route(Some(partition), None), value)
    }

    /// The blocking publish of one message along `route` (chosen once: a router, or
    /// round-robin, is asked once per message). A publish that finds room is done with
    /// one attempt, as `try_publish` makes it, without the future, the thread's waker and
    /// the poll loop; only one that finds a `Block` partition full goes on to wait. A
    /// thread that keeps ahead of its readers publishes that way most of the time.
    /// Measured in `plain_bench` (threads, 2 cores; one binary, the two paths switched,
    /// four pairs): S1 memq-threads 3.21–3.46M → 4.54–4.98M, S2 +14 %, S3 +11 %, S7
    /// +12 % (and +5–12 % on releasing topics).
    fn publish_routed_blocking(&self, route: Route, value: T) -> Result<Receipt, PublishError<T>> {
        let value = match route {
            Route::Partition(p) => {
                // Locks taken from here back off less, as in every blocking call.
                let _blocking = crate::sync::enter_blocking_call();
                match self.shared.try_publish_now(p, value, &mut None) {
                    Err(PublishError::Full(value)) if self.shared.overflow == Overflow::Block => {
                        value
                    }
                    done => return done,
                }
            }
            Route::Invalid => return Err(PublishError::InvalidPartition(value)),
        };
        block_on(self.publish_with(route, value))
    }

    /// [`Topic::publish_batch`] for plain threads.
    ///
    /// # Errors
    ///
    /// As [`Topic::publish_batch`].
    pub fn publish_batch_blocking(
        &self,
        batch: alloc::vec::Vec<T>,
    ) -> Result<Receipt, PublishError<alloc::vec::Vec<T>>> {
        block_on(self.publish_batch(batch))
    }

    /// [`Topic::publish_batch_keyed`] for plain threads.
    ///
    /// # Errors
    ///
    /// As [`Topic::publish_batch_keyed`].
    pub fn publish_batch_keyed_blocking(
        &self,
        key: impl AsRef<[u8]>,
        batch: alloc::vec::Vec<T>,
    ) -> Result<Receipt, PublishError<alloc::vec::Vec<T>>> {
        block_on(self.publish_batch_keyed(key, batch))
    }

    /// [`Topic::publish_batch_to`] for plain threads.
    ///
    /// # Errors
    ///
    /// As [`Topic::publish_batch_to`].
    pub fn publish_batch_to_blocking(
        &self,
        partition: u32,
        batch: alloc::vec::Vec<T>,
    ) -> Result<Receipt, PublishError<alloc::vec::Vec<T>>> {
        block_on(self.publish_batch_to(partition, batch))
    }

    /// [`Topic::publish`] for plain threads, giving up after `timeout`.
    ///
    /// # Errors
    ///
    /// [`PublishError::Full`] if there was no room before the time ran out; otherwise as
    /// [`Topic::publish`]. The message is handed back.
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// use core::time::Duration;
    /// use memq::{PublishError, StartAt, Topic};
    ///
    /// let topic = Topic::with_capacity(1)?;
    /// let _slow = topic.subscribe(StartAt::Earliest)?; // holds the one slot
    /// topic.publish_blocking_timeout("a", Duration::from_millis(10))?;
    /// let err = topic.publish_blocking_timeout("b", Duration::from_millis(10));
    /// assert!(matches!(err, Err(PublishError::Full("b"))));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn publish_blocking_timeout(
        &self,
        value: T,
        timeout: Duration,
    ) -> Result<Receipt, PublishError<T>> {
        self.publish_within(
            self.route(None, None),
            value,
            timeout,
            Shared::attempt_publish,
        )
    }

    /// [`Topic::publish_keyed`] for plain threads, giving up after `timeout`.
    ///
    /// # Errors
    ///
    /// [`PublishError::Full`] if the key's partition had no room before the time ran out;
    /// otherwise as [`Topic::publish_keyed`]. The message is handed back.
    pub fn publish_keyed_blocking_timeout(
        &self,
        key: impl AsRef<[u8]>,
        value: T,
        timeout: Duration,
    ) -> Result<Receipt, PublishError<T>> {
        let route = self.route(None, Some(key.as_ref()));
        self.publish_within(route, value, timeout, Shared::attempt_publish)
    }

    /// [`Topic::publish_to`] for plain threads, giving up after `timeout`.
    ///
    /// # Errors
    ///
    /// [`PublishError::Full`] if the partition had no room before the time ran out;
    /// otherwise as [`Topic::publish_to`]. The message is handed back.
    pub fn publish_to_blocking_timeout(
        &self,
        partition: u32,
        value: T,
        timeout: Duration,
    ) -> Result<Receipt, PublishError<T>> {
        let route = self.route(Some(partition), None);
        self.publish_within(route, value, timeout, Shared::attempt_publish)
    }

    /// [`Topic::publish_batch`] for plain threads, giving up after `timeout`: the batch
    /// goes in whole or not at all.
    ///
    /// # Errors
    ///
    /// [`PublishError::Full`] if there was no room for the whole batch before the time ran
    /// out; otherwise as [`Topic::publish_batch`]. The batch is handed back whole.
    ///
    /// # Examples
    ///
    /// ```
    /// # use memq_core as memq;
    /// use core::time::Duration;
    /// use memq::{StartAt, Topic};
    ///
    /// let topic = Topic::with_capacity(3)?;
    /// let _slow = topic.subscribe(StartAt::Earliest)?;
    /// topic.publish_batch_blocking_timeout(vec![1, 2], Duration::from_millis(10))?;
    /// // One slot left: the next two do not fit, and come back.
    /// let err = topic.publish_batch_blocking_timeout(vec![3, 4], Duration::from_millis(10));
    /// assert_eq!(err.unwrap_err().into_inner(), [3, 4]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn publish_batch_blocking_timeout(
        &self,
        batch: alloc::vec::Vec<T>,
        timeout: Duration,
    ) -> Result<Receipt, PublishError<alloc::vec::Vec<T>>> {
        let route = self.route(None, None);
        self.publish_within(route, batch, timeout, Shared::attempt_publish)
    }

    /// [`Topic::publish_batch_keyed`] for plain threads, giving up after `timeout`.
    ///
    /// # Errors
    ///
    /// As [`Topic::publish_batch_blocking_timeout`], and as
    /// [`Topic::publish_batch_keyed`].
    pub fn publish_batch_keyed_blocking_timeout(
        &self,
        key: impl AsRef<[u8]>,
        batch: alloc::vec::Vec<T>,
        timeout: Duration,
    ) -> Result<Receipt, PublishError<alloc::vec::Vec<T>>> {
        let route = self.route(None, Some(key.as_ref()));
        self.publish_within(route, batch, timeout, Shared::attempt_publish)
    }

    /// [`Topic::publish_batch_to`] for plain threads, giving up after `timeout`.
    ///
    /// # Errors
    ///
    /// As [`Topic::publish_batch_blocking_timeout`], and as [`Topic::publish_batch_to`].
    pub fn publish_batch_to_blocking_timeout(
        &self,
        partition: u32,
        batch: alloc::vec::Vec<T>,
        timeout: Duration,
    ) -> Result<Receipt, PublishError<alloc::vec::Vec<T>>> {
        let route = self.route(Some(partition), None);
        self.publish_within(route, batch, timeout, Shared::attempt_publish)
    }

    /// The `*_blocking_timeout` publishes: `attempt` (a message's or a batch's) is tried,
    /// and this thread parked between tries, until it is done or `timeout` has passed;
    /// then the value is handed back in [`PublishError::Full`]. Each attempt hands the
    /// value back explicitly, so no path can lose it.
    fn publish_within<V>(
        &self,
        route: Route,
        value: V,
        timeout: Duration,
        attempt: impl Fn(
            &Shared<T>,
            usize,
            V,
            &mut Option<WaitKey>,
            Option<&Waker>,
        ) -> Attempt<V, Receipt>,
    ) -> Result<Receipt, PublishError<V>> {
        let p = match route {
            Route::Partition(p) => p,
            Route::Invalid => return Err(PublishError::InvalidPartition(value)),
        };
        let deadline = deadline(timeout);
        // Locks taken from here back off less, as in every other blocking call (see
        // `sync::BLOCKING_BACKOFF`).
        let _blocking = crate::sync::enter_blocking_call();
        // Leaves its place in line however the wait ends: also by a panic out of the
        // user's clock or timer, which would otherwise leave the place behind, to be
        // woken and then hold the room promised to it for ever.
        let mut place = Place {
            shared: &self.shared,
            p,
            key: None,
        };
        // Room now: done with one attempt, without the thread's waker and the loop (see
        // `publish_routed_blocking`). Without a waker, a full `Block` partition parks
        // nobody and answers `Full`, which here means: wait.
        let mut value = match attempt(&self.shared, p, value, &mut place.key, None) {
            Attempt::Done(Err(PublishError::Full(back)))
                if self.shared.overflow == Overflow::Block =>
            {
                back
            }
            Attempt::Done(r) => return r,
            Attempt::Parked(back) => back,
        };
        with_this_thread(|u, waker| loop {
            u.woken.store(false, Ordering::Relaxed);
            match attempt(&self.shared, p, value, &mut place.key, Some(waker)) {
                Attempt::Done(r) => return r,
                Attempt::Parked(back) => value = back,
            }
            if deadline.is_some_and(|d| Instant::now() >= d) || !park_until_woken(u, deadline) {
                // Time is up. A waiting publisher is woken only once a batch of slots is
                // free (see `Overflow::Block`), so fewer may be free now: it leaves the
                // line as a dropped publish does (the next in line is woken if its room
                // is free), then makes one last try, as a new publish would.
                self.shared.cancel_publish(p, &mut place.key);
                return match attempt(&self.shared, p, value, &mut place.key, None) {
                    Attempt::Done(r) => r,
                    Attempt::Parked(back) => Err(PublishError::Full(back)),
                };
            }
        })
    }
}

/// A blocked publisher's place in a partition's line of parked publishers; dropping it
/// leaves the line (a no-op once the publish is done or the place was never taken).
struct Place<'a, T> {
    shared: &'a Shared<T>,
    p: usize,
    key: Option<WaitKey>,
}

impl<T> Drop for Place<'_, T> {
    fn drop(&mut self) {
        self.shared.cancel_publish(self.p, &mut self.key);
    }
}

/// A `try_recv`'s answer as the async `recv` gives it, or `None` where the receive must
/// wait.
#[inline]
fn one_ready<M>(tried: Result<M, TryRecvError>) -> Option<Result<M, RecvError>> {
    match tried {
        Ok(m) => Some(Ok(m)),
        Err(TryRecvError::Empty) => None,
        Err(TryRecvError::Lagged(n)) => Some(Err(RecvError::Lagged(n))),
        Err(TryRecvError::Closed) => Some(Err(RecvError::Closed)),
    }
}

/// A `try_recv_many`'s answer as the async `recv_many` gives it (the end is `Ok(0)`
/// there), or `None` where the receive must wait.
#[inline]
fn many_ready(tried: Result<usize, TryRecvError>) -> Option<Result<usize, RecvError>> {
    match one_ready(tried)? {
        Err(RecvError::Closed) => Some(Ok(0)),
        answer => Some(answer),
    }
}

macro_rules! blocking_recv {
    ($ty:ident) => {
        impl<T: Clone> $ty<T> {
            /// The async `recv` for plain threads: parks until a message arrives.
            ///
            /// # Errors
            ///
            /// As the async `recv`.
            pub fn recv_blocking(&mut self) -> Result<Message<T>, RecvError> {
                if let Some(ready) = self.ready_now() {
                    return ready;
                }
                watch_for_news(|| !self.may_have_news());
                block_on(self.recv())
            }

            /// What a receive answers at once, without setting up a wait: a message, a
            /// gap (`Lagged`) or the end, from one non-waiting receive (`try_recv`), with
            /// the locks' shorter backoff of blocking calls. `None` if the receive must
            /// wait. A thread that keeps up with a busy topic finds a message ready on
            /// most calls, and this skips the future, the thread's waker and the poll
            /// loop for it. Measured in `plain_bench` (threads, 2 cores; one binary, the
            /// two paths switched, four pairs): S3 (four subscribers) 8 % faster, S1, S2
            /// and S4 unchanged. A receive that must wait pays one more look first; a
            /// subscriber's is lock-free when nothing came (`may_have_news`).
            #[inline]
            fn ready_now(&mut self) -> Option<Result<Message<T>, RecvError>> {
                let _blocking = crate::sync::enter_blocking_call();
                one_ready(self.try_recv())
            }

            /// [`Self::recv_blocking`], giving up after `timeout`.
            ///
            /// # Errors
            ///
            /// [`RecvTimeoutError::Timeout`] if nothing arrived in time; otherwise as
            /// the async `recv`.
            pub fn recv_blocking_timeout(
                &mut self,
                timeout: Duration,
            ) -> Result<Message<T>, RecvTimeoutError> {
                if let Some(ready) = self.ready_now() {
                    return ready.map_err(RecvTimeoutError::from);
                }
                watch_for_news(|| !self.may_have_news());
                match block_on_deadline(self.recv(), deadline(timeout)) {
                    Some(r) => r.map_err(RecvTimeoutError::from),
                    None => Err(RecvTimeoutError::Timeout),
                }
            }

            /// The async `recv_many` for plain threads.
            ///
            /// # Errors
            ///
            /// As the async `recv_many`.
            pub fn recv_many_blocking(
                &mut self,
                buf: &mut alloc::vec::Vec<Message<T>>,
                limit: usize,
            ) -> Result<usize, RecvError> {
                if let Some(ready) = self.ready_many_now(buf, limit) {
                    return ready;
                }
                watch_for_news(|| !self.may_have_news());
                block_on(self.recv_many(buf, limit))
            }

            /// What `recv_many` answers at once, as [`Self::ready_now`] for one message:
            /// messages, a gap, or the end (`Ok(0)`, as the async `recv_many` says it),
            /// from one `try_recv_many`; `None` if the receive must wait.
            #[inline]
            fn ready_many_now(
                &mut self,
                buf: &mut alloc::vec::Vec<Message<T>>,
                limit: usize,
            ) -> Option<Result<usize, RecvError>> {
                let _blocking = crate::sync::enter_blocking_call();
                many_ready(self.try_recv_many(buf, limit))
            }

            /// [`Self::recv_many_blocking`], giving up after `timeout`.
            ///
            /// # Errors
            ///
            /// [`RecvTimeoutError::Timeout`] if nothing arrived in time; otherwise as
            /// the async `recv_many`.
            pub fn recv_many_blocking_timeout(
                &mut self,
                buf: &mut alloc::vec::Vec<Message<T>>,
                limit: usize,
                timeout: Duration,
            ) -> Result<usize, RecvTimeoutError> {
                if let Some(ready) = self.ready_many_now(buf, limit) {
                    return ready.map_err(RecvTimeoutError::from);
                }
                watch_for_news(|| !self.may_have_news());
                match block_on_deadline(self.recv_many(buf, limit), deadline(timeout)) {
                    Some(r) => r.map_err(RecvTimeoutError::from),
                    None => Err(RecvTimeoutError::Timeout),
                }
            }
        }
    };
}

blocking_recv!(Subscriber);
blocking_recv!(Consumer);

impl<T: Clone> crate::ack::AckConsumer<T> {
    /// [`AckConsumer::recv`](crate::AckConsumer::recv) for plain threads: parks until a
    /// delivery is available (leases that run out wake it through the group's timer).
    ///
    /// # Errors
    ///
    /// As the async `recv`.
    pub fn recv_blocking(&mut self) -> Result<crate::ack::Delivery<T>, RecvError> {
        if let Some(ready) = self.ready_now() {
            return ready;
        }
        block_on(self.recv())
    }

    /// What `recv` answers at once, without setting up a wait: a delivery (a new message
    /// or one whose lease ran out), or the end, from one `try_recv` with the locks'
    /// shorter backoff of blocking calls; `None` if the receive must wait. As for
    /// subscribers (`Subscriber::recv_blocking`): a worker that keeps up with a busy
    /// group finds a delivery ready on most calls, and this skips the future, the
    /// thread's waker and the poll loop for it.
    #[inline]
    fn ready_now(&mut self) -> Option<Result<crate::ack::Delivery<T>, RecvError>> {
        let _blocking = crate::sync::enter_blocking_call();
        one_ready(self.try_recv())
    }

    /// What `recv_many` answers at once (see [`Self::ready_now`]), `Ok(0)` for the end.
    #[inline]
    fn ready_many_now(
        &mut self,
        buf: &mut alloc::vec::Vec<crate::ack::Delivery<T>>,
        limit: usize,
    ) -> Option<Result<usize, RecvError>> {
        let _blocking = crate::sync::enter_blocking_call();
        many_ready(self.try_recv_many(buf, limit))
    }

    /// [`Self::recv_blocking`], giving up after `timeout`.
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Timeout`] if nothing arrived in time; otherwise as the async
    /// `recv`.
    pub fn recv_blocking_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<crate::ack::Delivery<T>, RecvTimeoutError> {
        if let Some(ready) = self.ready_now() {
            return ready.map_err(RecvTimeoutError::from);
        }
        match block_on_deadline(self.recv(), deadline(timeout)) {
            Some(r) => r.map_err(RecvTimeoutError::from),
            None => Err(RecvTimeoutError::Timeout),
        }
    }

    /// [`AckConsumer::recv_many`](crate::AckConsumer::recv_many) for plain threads.
    ///
    /// # Errors
    ///
    /// As the async `recv_many`.
    pub fn recv_many_blocking(
        &mut self,
        buf: &mut alloc::vec::Vec<crate::ack::Delivery<T>>,
        limit: usize,
    ) -> Result<usize, RecvError> {
        if let Some(ready) = self.ready_many_now(buf, limit) {
            return ready;
        }
        block_on(self.recv_many(buf, limit))
    }

    /// [`Self::recv_many_blocking`], giving up after `timeout`.
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Timeout`] if nothing arrived in time; otherwise as the async
    /// `recv_many`.
    pub fn recv_many_blocking_timeout(
        &mut self,
        buf: &mut alloc::vec::Vec<crate::ack::Delivery<T>>,
        limit: usize,
        timeout: Duration,
    ) -> Result<usize, RecvTimeoutError> {
        if let Some(ready) = self.ready_many_now(buf, limit) {
            return ready.map_err(RecvTimeoutError::from);
        }
        match block_on_deadline(self.recv_many(buf, limit), deadline(timeout)) {
            Some(r) => r.map_err(RecvTimeoutError::from),
            None => Err(RecvTimeoutError::Timeout),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A future that wakes itself every time it waits, and completes at its `limit`-th
    /// poll.
    struct Restless {
        polls: u64,
        limit: u64,
    }

    impl Future for Restless {
        type Output = u64;

        fn poll(mut self: core::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u64> {
            self.polls += 1;
            if self.polls >= self.limit {
                return Poll::Ready(self.polls);
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    /// A deadline ends the wait of a future that is woken again before its thread ever
    /// sleeps (a timed receive of an explicit-ack member at its `max_in_flight`, woken by
    /// every publish, ran for as long as the publishers did; from review). Without the
    /// check the future runs to its limit, about 10^8 polls, seconds past the deadline.
    #[test]
    #[cfg_attr(miri, ignore = "10^5 polls and more")]
    fn a_deadline_ends_the_wait_of_a_future_woken_before_every_sleep() {
        let restless = Restless {
            polls: 0,
            limit: 100_000_000,
        };
        let deadline = Instant::now() + Duration::from_millis(20);
        assert_eq!(block_on_deadline(restless, Some(deadline)), None);
    }
}
