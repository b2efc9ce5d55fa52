//! The smol adapter: smol's global executor or one of yours, smol's blocking pool and the
//! `async-io` timer.

use core::fmt;
use core::time::Duration;
use std::sync::Arc;

use ::smol::Executor;

use super::io_timer::IoSleep;
use super::threads::std_clock;
use super::{BoxBlocking, BoxTask, Runtime};
use crate::Clock;

/// smol: tasks go to smol's global executor (`smol::spawn`) or to an [`Executor`] you
/// run yourself, blocking work to smol's blocking pool (`smol::unblock`), sleeps to the
/// `async-io` timer; the clock is the operating system's monotonic clock.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use memq::rt::{RecvTimeoutExt, Runtime, Smol};
/// use memq::{StartAt, Topic};
///
/// smol::block_on(async {
///     let rt = Smol::new();
///     let topic = Topic::with_capacity(8)?;
///     let mut group = topic.group("g", StartAt::Earliest)?;
///     let publisher = {
///         let topic = topic.clone();
///         rt.spawn(async move { topic.publish(9u64).await.map(|_| ()) })
///     };
///     assert_eq!(group.recv_timeout(Duration::from_secs(5), &rt).await?.into_value(), 9);
///     publisher.await??;
///     Ok::<(), Box<dyn std::error::Error>>(())
/// })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct Smol {
    executor: Option<Arc<Executor<'static>>>,
}

impl fmt::Debug for Smol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Smol")
            .field(
                "executor",
                &if self.executor.is_some() {
                    "own"
                } else {
                    "global"
                },
            )
            .finish()
    }
}

impl Smol {
    /// smol's global executor (`smol::spawn`; its threads are set by `SMOL_THREADS`).
    pub fn new() -> Self {
        Self { executor: None }
    }

    /// Your own executor: tasks run when you run it (`executor.run(..)`).
    pub fn with_executor(executor: Arc<Executor<'static>>) -> Self {
        Self {
            executor: Some(executor),
        }
    }
}

impl Runtime for Smol {
    type Sleep = IoSleep;

    fn spawn_detached(&self, task: BoxTask) {
        match &self.executor {
            Some(ex) => ex.spawn(task).detach(),
            None => ::smol::spawn(task).detach(),
        }
    }

    fn spawn_blocking_detached(&self, work: BoxBlocking) {
        ::smol::unblock(work).detach();
    }

    /// `true` with an executor of yours ([`Smol::with_executor`]): dropping it drops its
    /// tasks. smol's global executor never goes away.
    fn drops_tasks_on_shutdown(&self) -> bool {
        self.executor.is_some()
    }

    fn sleep(&self, duration: Duration) -> IoSleep {
        IoSleep::new(duration)
    }

    fn clock(&self) -> Arc<dyn Clock> {
        std_clock()
    }
}
