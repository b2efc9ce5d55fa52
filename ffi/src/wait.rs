//! Waiting on plain threads for the calls that take `timeout_ms`.
//!
//! Receives use memq-core's own `_blocking` methods. Publishes run the core's publish
//! futures here, because the core has no blocking form with a timeout for keyed,
//! partitioned and batch publishes: the future is polled on the calling thread, which
//! parks (no spinning) until the future's waker unparks it or the deadline passes. Every
//! memq future is cancel safe, so dropping one at the deadline publishes nothing.

use core::future::Future;
use core::pin::pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::sync::Arc;
use std::task::Wake;
use std::thread::{self, Thread};
use std::time::Instant;

/// How long a call may wait, from a `timeout_ms` argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// `timeout_ms == 0`: do not wait.
    Try,
    /// `timeout_ms < 0`: wait as long as it takes.
    Forever,
    /// `timeout_ms > 0`.
    For(Duration),
}

impl Wait {
    pub(crate) fn from_ms(timeout_ms: i64) -> Self {
        match timeout_ms {
            0 => Self::Try,
            ..0 => Self::Forever,
            ms => Self::For(Duration::from_millis(ms.unsigned_abs())),
        }
    }
}

struct Unparker(Thread);

impl Wake for Unparker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

thread_local! {
    static WAKER: Waker = Waker::from(Arc::new(Unparker(thread::current())));
}

/// Runs `fut` until it completes, or gives up as `wait` says (dropping the future) and
/// returns `None`. `Wait::Try` polls exactly once.
pub(crate) fn block_on<F: Future>(fut: F, wait: Wait) -> Option<F::Output> {
    let mut fut = pin!(fut);
    // A timeout too large to represent waits forever.
    let deadline = match wait {
        Wait::For(d) => Instant::now().checked_add(d),
        Wait::Try | Wait::Forever => None,
    };
    let mut run = |waker: &Waker| {
        let mut cx = Context::from_waker(waker);
        loop {
            if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
                return Some(out);
            }
            match (wait, deadline) {
                (Wait::Try, _) => return None,
                (_, None) => thread::park(),
                (_, Some(deadline)) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return None;
                    }
                    thread::park_timeout(deadline - now);
                }
            }
        }
    };
    if WAKER.try_with(|_| ()).is_ok() {
        WAKER.with(run)
    } else {
        // The thread is exiting and its waker is gone (a C caller's pthread key or
        // thread_local destructor calling memq): one for this call alone.
        run(&Waker::from(Arc::new(Unparker(thread::current()))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_from_c() {
        assert_eq!(Wait::from_ms(0), Wait::Try);
        assert_eq!(Wait::from_ms(-1), Wait::Forever);
        assert_eq!(Wait::from_ms(i64::MIN), Wait::Forever);
        assert_eq!(Wait::from_ms(5), Wait::For(Duration::from_millis(5)));
        assert_eq!(
            Wait::from_ms(i64::MAX),
            Wait::For(Duration::from_millis(i64::MAX as u64))
        );
    }

    #[test]
    fn pending_future_gives_up() {
        assert_eq!(block_on(core::future::pending::<()>(), Wait::Try), None);
        let t = Instant::now();
        let r = block_on(
            core::future::pending::<()>(),
            Wait::For(Duration::from_millis(20)),
        );
        assert_eq!(r, None);
        assert!(t.elapsed() >= Duration::from_millis(20));
        assert_eq!(block_on(async { 7 }, Wait::Forever), Some(7));
    }
}
