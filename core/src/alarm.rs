//! Timer wake-ups that know whether they went off.
//!
//! A [`Timer`] measures time on its own, and the clock a deadline is set by (a topic's or
//! a group's [`Clock`](crate::Clock)) may show less when the timer goes off: a clock that
//! ticks coarsely, or lags the timer's. The task woken then finds its deadline not yet
//! reached and waits again. An [`Alarm`] remembers whether it rang, so that the task's
//! next wait arms a new one instead of counting on the spent one; until it rings, it spares
//! a task that waits again (woken by something else) from piling up timer entries.
//!
//! An alarm is the only owner of what it rings: the timer holds it weakly. Dropping the
//! alarm (the wait it served ended; its member, publisher or topic is gone) lets go of
//! the task's waker at once and withdraws the timer's entry, if the timer can
//! ([`Timer::wake_after_cancellable`]), so that a lease or TTL of an hour does not keep
//! either for an hour.

use alloc::sync::{Arc, Weak};
use alloc::task::Wake;
use core::sync::atomic::{AtomicBool, Ordering};
use core::task::Waker;
use core::time::Duration;

use crate::ack::{Timer, TimerEntry};
use crate::sync::Mutex;

/// The shortest delay of an alarm armed after one that rang before the clock showed its
/// time: the clock is behind the timer, and the task then looks at it at most this often
/// until it catches up, never in a tight loop.
const AFTER_EARLY_RING: Duration = Duration::from_millis(1);

/// A timer wake-up of one task at clock time `at`. Dropping it withdraws the wake-up (see
/// [`Bell`]); it is dropped outside every lock of memq's, as the timer's code runs then.
#[derive(Debug)]
pub(crate) struct Alarm {
    at: u64,
    bell: Arc<Bell>,
}

/// What the timer rings: marks the alarm as rung, then wakes the task. Owned by its
/// [`Alarm`] alone; the timer holds a [`Rope`] to it, so that when the alarm goes (the
/// wait it served ended, its member or topic is gone) the task's waker goes with it at
/// once, however long the timer would have held its wake-up, and the timer's entry is
/// withdrawn if the timer can (see [`Timer::wake_after_cancellable`]).
#[derive(Debug)]
struct Bell {
    rung: AtomicBool,
    task: Waker,
    /// The timer's entry, once the alarm is armed: withdrawn when the bell is dropped.
    entry: Mutex<Option<TimerEntry>>,
}

impl Bell {
    /// Called by the timer's wake-up. The entry is done with: it is disarmed, so that
    /// dropping this bell later (perhaps right here, if the alarm went meanwhile) never
    /// calls back into the timer from inside its own wake-up call.
    fn ring(&self) {
        self.rung.store(true, Ordering::Release);
        let entry = self.entry.lock().take();
        if let Some(entry) = entry {
            entry.disarm();
        }
        self.task.wake_by_ref();
    }
}

/// The timer's hold on a [`Bell`]: rings it if it is still there.
struct Rope(Weak<Bell>);

impl Wake for Rope {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(bell) = self.0.upgrade() {
            bell.ring();
        }
    }
}

/// What to ask a timer for, outside any lock ([`Arm::set`]): ring the alarm after `delay`.
#[derive(Debug)]
pub(crate) struct Arm {
    delay: Duration,
    bell: Weak<Bell>,
}

impl Arm {
    /// Asks `timer` for the wake-up, and hands its entry (if the timer can withdraw it) to
    /// the alarm, to be withdrawn when the alarm goes. An alarm already gone meanwhile
    /// withdraws it here. Must be called with no lock held: the timer's code runs here,
    /// and so may the withdrawal.
    pub(crate) fn set(self, timer: &dyn Timer) {
        let rope = Waker::from(Arc::new(Rope(self.bell.clone())));
        let Some(entry) = timer.wake_after_cancellable(self.delay, rope) else {
            return;
        };
        match self.bell.upgrade() {
            // If the alarm went meanwhile, this is the last hold on the bell, and the entry
            // is withdrawn as it drops, right here.
            Some(bell) => {
                *bell.entry.lock() = Some(entry);
                // Rung before the entry was stored: the wake-up has run, and the entry is
                // let go of here, not withdrawn later from wherever the bell goes (which
                // may be inside the timer's wake-up call).
                if bell.rung.load(Ordering::Acquire) {
                    let entry = bell.entry.lock().take();
                    if let Some(entry) = entry {
                        entry.disarm();
                    }
                }
            }
            None => drop(entry),
        }
    }
}

impl Alarm {
    /// Whether this alarm wakes `task`.
    pub(crate) fn is_for(&self, task: &Waker) -> bool {
        self.bell.task.will_wake(task)
    }

    /// Whether the timer rang it.
    pub(crate) fn rung(&self) -> bool {
        self.bell.rung.load(Ordering::Acquire)
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
            entry: Mutex::new(None),
        });
        let arm = Arm {
            delay,
            bell: Arc::downgrade(&bell),
        };
        (Alarm { at, bell }, arm)
    }
}
