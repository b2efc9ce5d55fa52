//! The Tokio adapter: spawning through a runtime `Handle`, Tokio's timer and clock, and
//! Tokio's cooperative budget (`tokio::task::coop`).

use core::task::{ready, Context, Poll};
use core::time::Duration;
use std::sync::Arc;

use ::tokio::runtime::Handle;

use super::{BoxBlocking, BoxTask, Runtime};
use crate::Clock;

/// A Tokio runtime, by its [`Handle`]: tasks go to that runtime, blocking work to its
/// blocking pool, sleeps to its timer (it needs the time driver: `enable_time` or
/// `enable_all` on the builder), and receive loops take part in its cooperative budget
/// (see [`Runtime::cooperative`]).
///
/// A `Tokio` can be used from any thread, also outside the runtime, as long as the runtime
/// runs: a multi-thread runtime, or a current-thread runtime that some thread is driving
/// (with `block_on`). The tasks, sleeps and timeouts of a current-thread runtime that
/// nobody drives make no progress. Once the runtime has shut down, Tokio's timer panics
/// when one of its sleeps is polled (see [`Runtime::sleep`] below) and tasks spawned on it
/// never run, so keep the runtime alive for as long as memq uses its handle (a
/// [`Runtime::timer`] of it included).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use memq::rt::{RecvTimeoutExt, Runtime, Tokio};
/// use memq::{StartAt, Topic};
///
/// let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
/// let rt = Tokio::from(runtime.handle().clone());
/// let topic = Topic::<u32>::with_capacity(8)?;
/// let mut sub = topic.subscribe(StartAt::Earliest)?;
/// let reader = rt.spawn(async move {
///     sub.recv_timeout(Duration::from_secs(5), &Tokio::current()).await.map(|m| m.into_value())
/// });
/// topic.publish_blocking(3)?;
/// assert_eq!(reader.join_blocking()??, 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Tokio {
    handle: Handle,
}

impl Tokio {
    /// The runtime this code runs in.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime; see [`Tokio::try_current`].
    pub fn current() -> Self {
        Self {
            handle: Handle::current(),
        }
    }

    /// The runtime this code runs in, if any.
    pub fn try_current() -> Option<Self> {
        Handle::try_current().ok().map(Self::from)
    }

    /// The runtime's handle.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }
}

impl From<Handle> for Tokio {
    fn from(handle: Handle) -> Self {
        Self { handle }
    }
}

/// Tokio's monotonic clock (`tokio::time::Instant`), counted from when it was made.
///
/// It reads the same time as the operating system's monotonic clock, except on a runtime
/// whose time is paused (`tokio::time::pause`, feature `test-util`): there, read from the
/// runtime's threads, it follows the paused time, so TTLs can be tested with
/// `tokio::time::advance`. Publish and read such a topic from the runtime's threads only,
/// and give it the runtime's timer as well (`TopicConfig::timer(rt.timer())`): the
/// default timer wakes a publisher parked behind a message's TTL on the operating
/// system's time, which a paused clock does not follow.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use memq::rt::{Runtime, Tokio};
/// use memq::{Topic, TopicConfig};
///
/// let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
/// runtime.block_on(async {
///     let rt = Tokio::current();
///     let config = TopicConfig::new(16)
///         .ttl(Duration::from_secs(60))
///         .clock(rt.clock())
///         .timer(rt.timer());
///     let topic = Topic::<u32>::new(config)?;
///     topic.try_publish(1)?;
///     assert_eq!(topic.stats().depth, 1);
///     Ok::<(), Box<dyn std::error::Error>>(())
/// })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    epoch: ::tokio::time::Instant,
}

impl TokioClock {
    /// A clock whose epoch is now.
    pub fn new() -> Self {
        Self {
            epoch: ::tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Duration {
        // Saturating: a paused clock read from another thread may be behind the epoch.
        ::tokio::time::Instant::now().saturating_duration_since(self.epoch)
    }
}

/// Tokio sleeps at most about 30 years: a longer one completes then. [`Tokio`]'s sleeps
/// of this long or longer never complete instead, as [`Runtime::sleep`] promises (on a
/// paused clock, which jumps ahead whenever the runtime is idle, a 30-year sleep would
/// end at once, and `recv_timeout(Duration::MAX)` with it).
const TOKIO_LONGEST_SLEEP: Duration = Duration::from_secs(86_400 * 365 * 30);

pin_project_lite::pin_project! {
    /// The future [`Tokio`]'s [`Runtime::sleep`] returns: Tokio's `Sleep`, or, for a
    /// duration too long for Tokio's timer (30 years or more), a sleep that never
    /// completes.
    #[derive(Debug)]
    pub struct TokioSleep {
        #[pin]
        inner: Option<::tokio::time::Sleep>,
    }
}

impl core::future::Future for TokioSleep {
    type Output = ();

    fn poll(self: core::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.project().inner.as_pin_mut() {
            Some(sleep) => sleep.poll(cx),
            None => Poll::Pending,
        }
    }
}

impl Runtime for Tokio {
    type Sleep = TokioSleep;

    fn spawn_detached(&self, task: BoxTask) {
        drop(self.handle.spawn(task));
    }

    fn spawn_blocking_detached(&self, work: BoxBlocking) {
        drop(self.handle.spawn_blocking(work));
    }

    /// `true`: dropping a Tokio runtime drops its tasks, then waits for its blocking work.
    fn drops_tasks_on_shutdown(&self) -> bool {
        true
    }

    /// # Panics
    ///
    /// If the runtime was built without its time driver. Tokio's timer also panics when
    /// the sleep is polled after the runtime has shut down.
    fn sleep(&self, duration: Duration) -> TokioSleep {
        let inner = (duration < TOKIO_LONGEST_SLEEP).then(|| {
            let _in_runtime = self.handle.enter();
            ::tokio::time::sleep(duration)
        });
        TokioSleep { inner }
    }

    fn clock(&self) -> Arc<dyn Clock> {
        let _in_runtime = self.handle.enter();
        Arc::new(TokioClock::new())
    }

    fn poll_cooperative<T>(
        cx: &mut Context<'_>,
        poll: impl FnOnce(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        let budget = ready!(::tokio::task::coop::poll_proceed(cx));
        let out = poll(cx);
        if out.is_ready() {
            budget.made_progress();
        }
        out
    }
}
