//! Cooperative yielding for async operations that are often ready at once.
//!
//! A publish under `Interval` or `Never` is ready in its first poll (the record is
//! written in it), and so is a receive with messages waiting on disk. A task that
//! publishes or reads in a loop would then never give its runtime's thread back: other
//! tasks on that worker, and the runtime's own timers, would not run until it stops.
//! Tokio has a budget for this in its own futures; memq-store runs on any runtime, so it
//! keeps a small one of its own: after [`BUDGET`] operations ready in a row on one
//! thread, the next one yields once (it wakes itself and returns `Pending`).

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Operations ready in a row on one thread before one yields.
const BUDGET: u32 = 32;

thread_local! {
    static READY_IN_A_ROW: Cell<u32> = const { Cell::new(0) };
}

/// Ready at once, except every [`BUDGET`]th time on a thread, when it yields once first.
pub(crate) fn yield_sometimes() -> impl Future<Output = ()> {
    YieldSometimes { yielded: false }
}

struct YieldSometimes {
    yielded: bool,
}

impl Future for YieldSometimes {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        let spent = READY_IN_A_ROW.with(|n| {
            let spent = n.get() + 1 >= BUDGET;
            n.set(if spent { 0 } else { n.get() + 1 });
            spent
        });
        if spent {
            self.yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_in_every_budget_yields_once() {
        let mut pending = 0;
        let mut cx = Context::from_waker(std::task::Waker::noop());
        for _ in 0..BUDGET * 4 {
            let mut f = std::pin::pin!(yield_sometimes());
            if f.as_mut().poll(&mut cx).is_pending() {
                pending += 1;
                assert!(f.as_mut().poll(&mut cx).is_ready(), "it yields only once");
            }
        }
        assert_eq!(pending, 4);
    }
}
