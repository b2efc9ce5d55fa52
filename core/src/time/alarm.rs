//! Timer wake-ups that know whether they went off.
//!
//! A [`Timer`] measures time on its own, and the clock a deadline is set by (a topic's or
//! a group's [`Clock`](crate::Clock)) may show less when the timer goes off: a clock that
//! ticks coarsely, or lags the timer's. The task woken then finds its deadline not yet
//! reached and waits again. An [`Alarm`] remembers whether it rang, so that the task's
//! next wait arms a new one instead of counting on the spent one; until it rings, it spares
//! a task that waits again (woken by something else) from piling up timer entries.
//!
//! An alarm alone decides how long what it rings matters. Dropping the alarm (the wait it
//! served ended; its member, publisher or topic is gone) lets go of the task's waker at
//! once and withdraws the timer's entry, if the timer can
//! ([`Timer::wake_after_cancellable`]), so that a lease or TTL of an hour does not keep
//! either for an hour.
//!
//! Part of the time layer: depends on the timer beside it and on the sync facade (every
//! atomic, `Arc` and lock here is the facade's, so that loom sees them).

use alloc::task::Wake;
use core::task::Waker;
use core::time::Duration;

use super::timer::{Timer, TimerEntry};
use crate::sync::{Arc, AtomicBool, Mutex, Ordering};

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

/// What the timer rings: marks the alarm as rung, then wakes the task. Shared by its
/// [`Alarm`] and the timer's [`Rope`]; the alarm alone decides how long it matters:
/// when the alarm goes (the wait it served ended, its member or topic is gone) the task's
/// waker goes with it at once, however long the timer would have held its wake-up, and
/// the timer's entry is withdrawn if the timer can (see
/// [`Timer::wake_after_cancellable`]). What is left for the timer to hold until its time
/// is this small bell, which then wakes nothing.
///
/// All of it goes through the sync facade, so that loom sees the timer's thread ring the
/// bell while the task drops or replaces its alarm.
#[derive(Debug)]
struct Bell {
    rung: AtomicBool,
    /// The task and the timer's entry, until the alarm rings or goes.
    held: Mutex<Held>,
}

/// What a [`Bell`] holds on to while its alarm waits.
#[derive(Debug)]
struct Held {
    /// The task to wake: taken by the ring (an alarm rings once), or let go of when the
    /// alarm goes.
    task: Option<Waker>,
    /// The timer's entry, once the alarm is armed: withdrawn when the alarm goes,
    /// disarmed when it rings.
    entry: Option<TimerEntry>,
    /// The [`Alarm`] went: an entry handed over after that is withdrawn at once.
    gone: bool,
}

impl Bell {
    /// Called by the timer's wake-up. The entry is done with: it is disarmed, so that
    /// the alarm going later never calls back into the timer from inside its own wake-up
    /// call. The entry and the waker are let go of after the bell's lock.
    fn ring(&self) {
        self.rung.store(true, Ordering::Release);
        let (entry, task) = {
            let mut held = self.held.lock();
            (held.entry.take(), held.task.take())
        };
        if let Some(entry) = entry {
            entry.disarm();
        }
        if let Some(task) = task {
            task.wake();
        }
    }
}

/// The timer's hold on a [`Bell`]: rings it if its alarm is still there.
///
/// The waker the timer is given is made from an `alloc::sync::Arc<Rope>` whatever the
/// build: `Waker::from` takes only that `Arc`. It is a waker's own count, which loom
/// models for no waker; what the rope reaches, the bell, is the facade's.
struct Rope(Arc<Bell>);

impl Wake for Rope {
    fn wake(self: alloc::sync::Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &alloc::sync::Arc<Self>) {
        self.0.ring();
    }
}

/// What to ask a timer for, outside any lock ([`Arm::set`]): ring the alarm after `delay`.
#[derive(Debug)]
pub(crate) struct Arm {
    delay: Duration,
    bell: Arc<Bell>,
}

impl Arm {
    /// Asks `timer` for the wake-up, and hands its entry (if the timer can withdraw it) to
    /// the alarm, to be withdrawn when the alarm goes. An alarm already gone meanwhile
    /// withdraws it here. Must be called with no lock held: the timer's code runs here,
    /// and so may the withdrawal.
    pub(crate) fn set(self, timer: &dyn Timer) {
        let rope = Waker::from(alloc::sync::Arc::new(Rope(self.bell.clone())));
        let Some(entry) = timer.wake_after_cancellable(self.delay, rope) else {
            return;
        };
        let spent = {
            let mut held = self.bell.held.lock();
            if held.gone {
                // The alarm went meanwhile: the entry is withdrawn, after the lock.
                Some(entry)
            } else if self.bell.rung.load(Ordering::Acquire) {
                // Rung before the entry was handed over (the ring sets `rung` before it
                // takes this lock): the wake-up has run, and the entry is let go of here,
                // not withdrawn later from wherever the alarm goes.
                drop(held);
                entry.disarm();
                None
            } else {
                held.entry = Some(entry);
                None
            }
        };
        drop(spent);
    }
}

impl Drop for Alarm {
    /// Lets go of the task's waker and withdraws the timer's entry, if any, after the
    /// bell's lock.
    fn drop(&mut self) {
        let (entry, task) = {
            let mut held = self.bell.held.lock();
            held.gone = true;
            (held.entry.take(), held.task.take())
        };
        drop(task);
        drop(entry);
    }
}

impl Alarm {
    /// Whether this alarm wakes `task` (`false` once it rang).
    pub(crate) fn is_for(&self, task: &Waker) -> bool {
        self.bell
            .held
            .lock()
            .task
            .as_ref()
            .is_some_and(|t| t.will_wake(task))
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
            held: Mutex::new(Held {
                task: Some(task.clone()),
                entry: None,
                gone: false,
            }),
        });
        let arm = Arm {
            delay,
            bell: bell.clone(),
        };
        (Alarm { at, bell }, arm)
    }
}
