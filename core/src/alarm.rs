//! Timer wake-ups that know whether they went off.
//!
//! A [`Timer`] measures time on its own, and the clock a deadline is set by (a topic's or
//! a group's [`Clock`](crate::Clock)) may show less when the timer goes off: a clock that
//! ticks coarsely, or lags the timer's. The task woken then finds its deadline not yet
//! reached and waits again. An [`Alarm`] remembers whether it rang, so that the task's
//! next wait arms a new one instead of counting on the spent one; until it rings, it spares
//! a task that waits again (woken by something else) from piling up timer entries.

use alloc::sync::Arc;
use alloc::task::Wake;
use core::sync::atomic::{AtomicBool, Ordering};
use core::task::Waker;
use core::time::Duration;

/// The shortest delay of an alarm armed after one that rang before the clock showed its
/// time: the clock is behind the timer, and the task then looks at it at most this often
/// until it catches up, never in a tight loop.
const AFTER_EARLY_RING: Duration = Duration::from_millis(1);

/// A timer wake-up of one task at clock time `at`.
#[derive(Debug)]
pub(crate) struct Alarm {
    at: u64,
    bell: Arc<Bell>,
}

/// What the timer wakes: marks the alarm as rung, then wakes the task.
#[derive(Debug)]
struct Bell {
    rung: AtomicBool,
    task: Waker,
}

impl Wake for Bell {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.rung.store(true, Ordering::Release);
        self.task.wake_by_ref();
    }
}

/// What to ask a timer for: wake `waker` after `delay`.
pub(crate) struct Arm {
    pub(crate) delay: Duration,
    pub(crate) waker: Waker,
}

impl Alarm {
    /// Whether this alarm wakes `task`.
    pub(crate) fn is_for(&self, task: &Waker) -> bool {
        self.bell.task.will_wake(task)
    }

    /// The clock time it is set for.
    pub(crate) fn at(&self) -> u64 {
        self.at
    }

    /// Whether it will still wake `task` by clock time `at`: not rung yet, for that task,
    /// and set for `at` or earlier.
    pub(crate) fn covers(&self, task: &Waker, at: u64) -> bool {
        self.at <= at && !self.bell.rung.load(Ordering::Acquire) && self.is_for(task)
    }

    /// An alarm for `task` at clock time `at`, as of clock time `now`, and what to ask the
    /// timer for (outside any lock). `replaced` is the task's previous alarm, if any: if it
    /// rang before the clock showed its time, the new one is at least
    /// [`AFTER_EARLY_RING`] out.
    pub(crate) fn new(task: &Waker, at: u64, now: u64, replaced: Option<&Alarm>) -> (Alarm, Arm) {
        let mut delay = Duration::from_nanos(at.saturating_sub(now));
        let early =
            replaced.is_some_and(|old| old.at > now && old.bell.rung.load(Ordering::Acquire));
        if early {
            delay = delay.max(AFTER_EARLY_RING);
        }
        let bell = Arc::new(Bell {
            rung: AtomicBool::new(false),
            task: task.clone(),
        });
        let waker = Waker::from(bell.clone());
        (Alarm { at, bell }, Arm { delay, waker })
    }
}
