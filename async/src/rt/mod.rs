//! Runtime adapters: what memq needs from an async runtime, and nothing more.
//!
//! The core's futures run on any executor; this module adds only what needs a runtime:
//! spawning (worker pools), sleeping (timeouts), a [`Clock`] for timestamps and TTLs, a
//! [`Timer`] for the leases and redelivery delays of explicit-ack groups, and Tokio's
//! cooperative budget. [`Runtime`] is that small trait; it is implemented by
//!
//! | handle          | feature     | spawns on                         | blocking work on           |
//! |-----------------|-------------|-----------------------------------|----------------------------|
//! | [`Threads`]     | `std`       | a new thread per task             | a new thread               |
//! | [`Tokio`]       | `tokio`     | a Tokio runtime (by its `Handle`) | Tokio's blocking pool      |
//! | [`AsyncStd`]    | `async-std` | async-std's global executor       | async-std's blocking pool  |
//! | [`Smol`]        | `smol`      | smol's global or your `Executor`  | smol's blocking pool       |
//!
//! Any combination of the features may be on at once. async-std is discontinued upstream:
//! its adapter stays for existing users; smol is its successor.
//!
//! On top of the trait: [`RecvTimeoutExt`], [`RecvManyTimeoutExt`] and
//! [`PublishTimeoutExt`] (receive and publish with a time limit, on any runtime),
//! [`PublishFutureExt::with_timeout`] for every publish future of a topic (keyed, to a
//! partition, batches), which hands the message or batch back when time runs out,
//! [`Runtime::timeout`] for any future, and
//! [`Runtime::cooperative`] to make a receive loop yield when Tokio's budget runs out.
//! Worker pools live in [`crate::pool`].
//!
//! This module never reaches into a topic: it wraps the core's public, cancel-safe futures.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use memq::rt::{RecvTimeoutExt, Threads};
//! use memq::{RecvTimeoutError, StartAt, Topic};
//!
//! let topic = Topic::<u32>::with_capacity(8)?;
//! let mut sub = topic.subscribe(StartAt::Latest)?;
//! Threads::block_on(async {
//!     let waited = sub.recv_timeout(Duration::from_millis(10), &Threads).await;
//!     assert_eq!(waited.unwrap_err(), RecvTimeoutError::Timeout);
//!     topic.publish(5).await?;
//!     assert_eq!(sub.recv_timeout(Duration::from_secs(5), &Threads).await?.into_value(), 5);
//!     Ok::<(), Box<dyn std::error::Error>>(())
//! })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`Clock`]: crate::Clock
//! [`Timer`]: crate::Timer

// The docs link to every runtime adapter; a build without some runtime features lacks
// those targets.
// Links to what a feature brings: here when it is on, else to the crate's list of
// features, which says which feature brings it. The blank line keeps the definitions
// out of the paragraph above.
#![doc = ""]
#![cfg_attr(feature = "tokio", doc = "[`Tokio`]: Tokio")]
#![cfg_attr(not(feature = "tokio"), doc = "[`Tokio`]: crate#features")]
#![cfg_attr(feature = "async-std", doc = "[`AsyncStd`]: AsyncStd")]
#![cfg_attr(not(feature = "async-std"), doc = "[`AsyncStd`]: crate#features")]
#![cfg_attr(feature = "smol", doc = "[`Smol`]: Smol")]
#![cfg_attr(not(feature = "smol"), doc = "[`Smol`]: crate#features")]

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::sync::Arc;

use futures_util::future::{AbortHandle, Abortable};

use crate::{Clock, Timer, TimerEntry};

mod coop;
mod task;
mod threads;
mod timeout;
mod timer;

#[cfg(any(feature = "async-std", feature = "smol"))]
mod io_timer;

#[cfg(feature = "async-std")]
mod async_std;
#[cfg(feature = "smol")]
mod smol;
#[cfg(feature = "tokio")]
mod tokio;

#[cfg(feature = "async-std")]
pub use self::async_std::AsyncStd;
#[cfg(feature = "smol")]
pub use self::smol::Smol;
#[cfg(feature = "tokio")]
pub use self::tokio::{Tokio, TokioClock};
pub use coop::Cooperative;
#[cfg(any(feature = "async-std", feature = "smol"))]
pub use io_timer::IoSleep;
pub use task::{JoinError, JoinHandle};
pub use threads::Threads;
pub use timeout::{
    Elapsed, PublishFutureExt, PublishTimeout, PublishTimeoutExt, PublishWithin, RecvManyTimeout,
    RecvManyTimeoutExt, RecvTimeout, RecvTimeoutExt, Timeout,
};
pub use timer::ThreadSleep;

pub(crate) use task::{drop_caught, panic_message, CatchUnwind};

/// A future that the runtime runs to completion on its own; its output is `()`.
pub type BoxTask = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Blocking work that the runtime runs where blocking is allowed.
pub type BoxBlocking = Box<dyn FnOnce() + Send + 'static>;

/// What memq needs from an async runtime: spawning, sleeping and a clock.
///
/// A handle is cheap to clone and can be sent to any thread. Implement it for another
/// executor by providing the four required methods; [`Runtime::spawn`],
/// [`Runtime::spawn_blocking`], [`Runtime::timeout`] and [`Runtime::cooperative`] are built
/// on them.
///
/// # Examples
///
/// Code generic over the runtime:
///
/// ```
/// use std::time::Duration;
/// use memq::rt::{Runtime, Threads};
///
/// async fn twice<R: Runtime>(rt: &R) -> u32 {
///     let task = rt.spawn(async { 21 });
///     rt.sleep(Duration::from_millis(1)).await;
///     task.await.expect("no panic") * 2
/// }
/// assert_eq!(Threads::block_on(twice(&Threads)), 42);
/// ```
pub trait Runtime: Clone + Send + Sync + fmt::Debug + 'static {
    /// The future [`Runtime::sleep`] returns.
    type Sleep: Future<Output = ()> + Send + 'static;

    /// Runs `task` in the background, detached.
    fn spawn_detached(&self, task: BoxTask);

    /// Runs blocking `work` in the background, detached, where blocking does not stall the
    /// runtime's async workers.
    fn spawn_blocking_detached(&self, work: BoxBlocking);

    /// A future that completes after `duration`. A duration too long for the runtime's
    /// timer to represent (on Tokio, 30 years or more) never completes.
    fn sleep(&self, duration: Duration) -> Self::Sleep;

    /// A monotonic clock for [`TopicConfig::clock`] (timestamps and TTLs).
    ///
    /// [`TopicConfig::clock`]: crate::TopicConfig::clock
    fn clock(&self) -> Arc<dyn Clock>;

    /// A [`Timer`] on this runtime for [`AckConfig::timer`]: it wakes the parked members of
    /// an explicit-ack group when a lease or a redelivery delay runs out. The default
    /// spawns one sleeping task per scheduled wake-up.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use memq::rt::{Runtime, Threads};
    /// use memq::{AckConfig, StartAt, Topic};
    ///
    /// let topic = Topic::<u32>::with_capacity(8)?;
    /// let config = AckConfig::new().ack_wait(Duration::from_secs(10)).timer(Threads.timer());
    /// let mut worker = topic.group_acked("jobs", StartAt::Earliest, config)?;
    /// topic.try_publish(1)?;
    /// worker.try_recv()?.ack()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// [`AckConfig::timer`]: crate::AckConfig::timer
    fn timer(&self) -> Arc<dyn Timer>
    where
        Self: Sized,
    {
        Arc::new(RuntimeTimer(self.clone()))
    }

    /// Whether the runtime can shut down, dropping the tasks it has not finished, while
    /// blocking work it runs goes on (and may be waited for, as Tokio's shutdown does).
    ///
    /// A worker pool with blocking workers ([`PoolBuilder::spawn_blocking`]) on such a
    /// runtime also spawns one small task there, which tells the workers to stop when the
    /// runtime drops it: so a shutdown of the runtime ends the pool, instead of waiting for
    /// it for ever. The default is `false`: no such task.
    ///
    /// [`PoolBuilder::spawn_blocking`]: crate::pool::PoolBuilder::spawn_blocking
    fn drops_tasks_on_shutdown(&self) -> bool {
        false
    }

    /// Runs one poll under the runtime's cooperative scheduling budget: when the budget of
    /// the current task is used up, returns `Pending` (arranging to be polled again)
    /// without calling `poll`. The default has no budget and always calls `poll`.
    ///
    /// Only Tokio has a budget; see [`Runtime::cooperative`].
    fn poll_cooperative<T>(
        cx: &mut Context<'_>,
        poll: impl FnOnce(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T>
    where
        Self: Sized,
    {
        poll(cx)
    }

    /// Spawns `future` and returns a handle to its output.
    ///
    /// Dropping the handle detaches the task. A panic in the task is caught and returned
    /// by the handle as [`JoinError::Panicked`].
    fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
        Self: Sized,
    {
        let (task, handle) = task::task(future);
        self.spawn_detached(Box::pin(task));
        handle
    }

    /// Runs blocking `work` where blocking is allowed and returns a handle to its output.
    ///
    /// As [`Runtime::spawn`] for dropping the handle and for panics.
    fn spawn_blocking<F, T>(&self, work: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
        Self: Sized,
    {
        let (work, handle) = task::blocking(work);
        self.spawn_blocking_detached(Box::new(work));
        handle
    }

    /// Runs `future` for at most `duration`.
    ///
    /// The output is [`Elapsed`] if the time ran out first; `future` is then dropped, so
    /// use this only with cancel-safe futures (every memq future is).
    ///
    /// # Cancel safety
    ///
    /// As cancel safe as `future`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use memq::rt::{Runtime, Threads};
    /// use memq::{StartAt, Topic};
    ///
    /// let topic = Topic::<u8>::with_capacity(4)?;
    /// let mut group = topic.group("g", StartAt::Latest)?;
    /// let out = Threads::block_on(Threads.timeout(Duration::from_millis(5), group.recv()));
    /// assert!(out.is_err()); // nothing was published
    /// # Ok::<(), memq::Error>(())
    /// ```
    fn timeout<F: Future>(&self, duration: Duration, future: F) -> Timeout<Self, F>
    where
        Self: Sized,
    {
        Timeout::new(future, self.sleep(duration))
    }

    /// Wraps a future or a stream so that each of its polls takes part in the runtime's
    /// cooperative budget (Tokio's `coop`): a consumer that always finds a message ready
    /// still yields to other tasks once its budget is spent.
    ///
    /// On runtimes without a budget the wrapper changes nothing.
    ///
    /// # Cancel safety
    ///
    /// As cancel safe as the wrapped future: when the budget is spent it returns `Pending`
    /// without polling it, so nothing is taken.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "tokio")]
    /// # {
    /// use memq::rt::{Runtime, Tokio};
    /// use memq::{StartAt, Topic};
    ///
    /// let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// runtime.block_on(async {
    ///     let rt = Tokio::current();
    ///     let topic = Topic::with_capacity(1024)?;
    ///     let mut sub = topic.subscribe(StartAt::Earliest)?;
    ///     for n in 0..1000u32 {
    ///         topic.try_publish(n)?;
    ///     }
    ///     topic.close();
    ///     let mut sum = 0;
    ///     // Yields to other tasks every 128 messages, although none of these waits.
    ///     while let Ok(m) = rt.cooperative(sub.recv()).await {
    ///         sum += m.into_value();
    ///     }
    ///     assert_eq!(sum, 499_500);
    ///     Ok::<(), Box<dyn std::error::Error>>(())
    /// }).unwrap();
    /// # }
    /// ```
    fn cooperative<F>(&self, inner: F) -> Cooperative<Self, F>
    where
        Self: Sized,
    {
        Cooperative::new(inner)
    }
}

/// The default [`Runtime::timer`]: a sleeping task per wake-up.
#[derive(Debug)]
struct RuntimeTimer<R>(R);

impl<R: Runtime> Timer for RuntimeTimer<R> {
    fn wake_after(&self, delay: Duration, waker: Waker) {
        let sleep = self.0.sleep(delay);
        self.0.spawn_detached(Box::pin(async move {
            sleep.await;
            waker.wake();
        }));
    }

    /// The sleeping task ends as soon as the entry is dropped (it is woken to see that),
    /// taking the runtime's timer entry and the waker with it.
    fn wake_after_cancellable(&self, delay: Duration, waker: Waker) -> Option<TimerEntry> {
        let (handle, registration) = AbortHandle::new_pair();
        let sleep = self.0.sleep(delay);
        let wake = async move {
            sleep.await;
            waker.wake();
        };
        self.0.spawn_detached(Box::pin(async move {
            // Aborted: the wake-up is withdrawn; nothing more to do.
            let _ = Abortable::new(wake, registration).await;
        }));
        Some(TimerEntry::new(move || handle.abort()))
    }
}

/// Runs `future` to completion on this thread, parking it while the future waits: the
/// core's executor, which keeps a wake-up that comes while user code run inside a poll
/// parks the thread (a value's `Drop` blocking on something else), and gives a blocking
/// call nested in another a waker of its own.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    memq_core::block_on(future)
}
