//! The async-std adapter. async-std is discontinued upstream; this adapter stays for
//! existing users. smol ([`Smol`](super::Smol), feature `smol`) is its successor.

use core::time::Duration;
use std::sync::Arc;

use super::io_timer::IoSleep;
use super::threads::std_clock;
use super::{BoxBlocking, BoxTask, Runtime};
use crate::Clock;

/// async-std's global executor: tasks go to `async_std::task::spawn`, blocking work to
/// `async_std::task::spawn_blocking`, sleeps to the `async-io` timer; the clock is the
/// operating system's monotonic clock.
///
/// async-std is discontinued upstream. This adapter is kept for existing users; new code
/// should prefer [`Smol`](super::Smol) (feature `smol`), its successor.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use memq::rt::{AsyncStd, RecvTimeoutExt, Runtime};
/// use memq::{StartAt, Topic};
///
/// async_std::task::block_on(async {
///     let topic = Topic::with_capacity(8)?;
///     let mut sub = topic.subscribe(StartAt::Earliest)?;
///     let publisher = {
///         let topic = topic.clone();
///         AsyncStd.spawn(async move { topic.publish("hello").await.map(|_| ()) })
///     };
///     let msg = sub.recv_timeout(Duration::from_secs(5), &AsyncStd).await?;
///     assert_eq!(msg.into_value(), "hello");
///     publisher.await??;
///     Ok::<(), Box<dyn std::error::Error>>(())
/// })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AsyncStd;

impl Runtime for AsyncStd {
    type Sleep = IoSleep;

    fn spawn_detached(&self, task: BoxTask) {
        // Dropping async-std's handle detaches the task.
        drop(::async_std::task::spawn(task));
    }

    fn spawn_blocking_detached(&self, work: BoxBlocking) {
        drop(::async_std::task::spawn_blocking(work));
    }

    fn sleep(&self, duration: Duration) -> IoSleep {
        IoSleep::new(duration)
    }

    fn clock(&self) -> Arc<dyn Clock> {
        std_clock()
    }
}
