//! The plain-threads runtime: every task on a thread of its own, sleeping on memq's
//! timer thread. It needs nothing but `std`.

use core::future::Future;
use core::time::Duration;
use std::sync::{Arc, OnceLock};
use std::thread;

use super::timer::ThreadSleep;
use super::{BoxBlocking, BoxTask, Runtime};
use crate::{Clock, StdClock, ThreadTimer, Timer};

/// The plain-threads runtime: [`Runtime::spawn`] starts a thread that runs the future
/// (parking while it waits), [`Runtime::spawn_blocking`] starts a thread for the closure,
/// [`Runtime::sleep`] is woken by one timer thread shared by the process, the clock is
/// a process-wide [`StdClock`] and the [`Runtime::timer`] is the core's [`ThreadTimer`].
///
/// Use it where there is no async runtime: worker pools on threads, timeouts in code
/// driven by [`Threads::block_on`]. For blocking calls without futures, the core's
/// `*_blocking` methods need no runtime at all.
///
/// # Examples
///
/// ```
/// use memq::rt::{Runtime, Threads};
/// use memq::{StartAt, Topic};
///
/// let topic = Topic::<&str>::with_capacity(16)?;
/// let mut sub = topic.subscribe(StartAt::Earliest)?;
/// let reader = Threads.spawn(async move { sub.recv().await.map(|m| m.into_value()) });
/// topic.publish_blocking("hi")?;
/// assert_eq!(reader.join_blocking()??, "hi");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Threads;

impl Threads {
    /// Runs `future` to completion on the calling thread, parking the thread while the
    /// future waits (after watching for its wake-up for a few microseconds, bounded): the
    /// core's [`block_on`](crate::block_on), which the blocking API runs on too.
    ///
    /// Do not call it from inside an async task: it blocks the executor's thread.
    ///
    /// # Examples
    ///
    /// ```
    /// use memq::rt::Threads;
    /// assert_eq!(Threads::block_on(async { 1 + 1 }), 2);
    /// ```
    pub fn block_on<F: Future>(future: F) -> F::Output {
        super::block_on(future)
    }
}

/// The process-wide monotonic clock of the runtimes that use the operating system's.
pub(crate) fn std_clock() -> Arc<dyn Clock> {
    static CLOCK: OnceLock<Arc<StdClock>> = OnceLock::new();
    CLOCK.get_or_init(|| Arc::new(StdClock::new())).clone()
}

impl Runtime for Threads {
    type Sleep = ThreadSleep;

    /// Starts a thread that runs `task`. If the operating system refuses a thread, the
    /// task is dropped (its handle reports `Cancelled`).
    fn spawn_detached(&self, task: BoxTask) {
        // On failure the closure, and the task in it, is dropped.
        let _ = thread::Builder::new()
            .name("memq-task".into())
            .spawn(move || super::block_on(task));
    }

    /// Starts a thread that runs `work`. As [`Threads::spawn_detached`] on failure.
    fn spawn_blocking_detached(&self, work: BoxBlocking) {
        let _ = thread::Builder::new()
            .name("memq-blocking".into())
            .spawn(work);
    }

    fn sleep(&self, duration: Duration) -> ThreadSleep {
        ThreadSleep::new(duration)
    }

    fn clock(&self) -> Arc<dyn Clock> {
        std_clock()
    }

    /// The core's [`ThreadTimer`]: one timer thread, only while wake-ups are scheduled.
    fn timer(&self) -> Arc<dyn Timer> {
        Arc::new(ThreadTimer::global())
    }
}
