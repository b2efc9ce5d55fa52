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
/// A `Tokio` can be used from any thread, also outside the runtime.
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
/// `tokio::time::advance`. Publish and read such a topic from the runtime's threads only.
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

impl Runtime for Tokio {
    type Sleep = ::tokio::time::Sleep;

    fn spawn_detached(&self, task: BoxTask) {
        drop(self.handle.spawn(task));
    }

    fn spawn_blocking_detached(&self, work: BoxBlocking) {
        drop(self.handle.spawn_blocking(work));
    }

    /// # Panics
    ///
    /// If the runtime was built without its time driver.
    fn sleep(&self, duration: Duration) -> ::tokio::time::Sleep {
        let _in_runtime = self.handle.enter();
        ::tokio::time::sleep(duration)
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
