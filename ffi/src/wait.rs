//! Waiting on plain threads for the calls that take `timeout_ms`.
//!
//! Receives use memq-core's own `_blocking` methods. Publishes run the core's publish
//! futures here, because the core has no blocking form with a timeout for keyed,
//! partitioned and batch publishes: the future is polled on the calling thread, which
//! parks (after watching for a few microseconds, bounded) until the future's waker
//! unparks it or the deadline passes. Every memq future is cancel safe, so dropping one
//! at the deadline publishes nothing.

use core::future::Future;
use core::time::Duration;

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

/// Runs `fut` until it completes, or gives up as `wait` says (dropping the future) and
/// returns `None`. `Wait::Try` polls exactly once. The core's executor: the thread parks
/// until the future's waker is called, and a wake-up is kept even if user code run
/// inside a poll (a C free callback, say) parks the thread itself.
pub(crate) fn block_on<F: Future>(fut: F, wait: Wait) -> Option<F::Output> {
    match wait {
        Wait::Try => memq_core::block_on_timeout(fut, Duration::ZERO),
        Wait::Forever => Some(memq_core::block_on(fut)),
        // A timeout too large to represent waits forever (the core's rule too).
        Wait::For(d) => memq_core::block_on_timeout(fut, d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

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

    #[test]
    fn try_polls_exactly_once() {
        let mut polls = 0;
        let counted = core::future::poll_fn(|cx| {
            polls += 1;
            cx.waker().wake_by_ref(); // ready to be polled again at once
            core::task::Poll::<()>::Pending
        });
        assert_eq!(block_on(counted, Wait::Try), None);
        assert_eq!(polls, 1);
    }
}
