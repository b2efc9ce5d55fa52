//! The sleep future of the runtimes built on `async-io` (async-std and smol): its
//! reactor thread wakes timers, so a sleeper costs nothing until its deadline.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

/// The future of [`Runtime::sleep`](super::Runtime::sleep) on async-std and smol: an
/// `async-io` timer.
///
/// # Cancel safety
///
/// Dropping it unregisters the timer.
#[must_use = "futures do nothing unless polled"]
pub struct IoSleep(async_io::Timer);

impl IoSleep {
    pub(crate) fn new(duration: Duration) -> Self {
        // `Timer::after` never fires for a deadline it cannot represent.
        Self(async_io::Timer::after(duration))
    }
}

impl fmt::Debug for IoSleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("IoSleep").field(&self.0).finish()
    }
}

impl Future for IoSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx).map(drop)
    }
}
