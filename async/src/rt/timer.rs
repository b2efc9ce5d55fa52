//! Sleeping without a runtime: one lazily started timer thread for the whole process that
//! waits on a condition variable until the earliest deadline, wakes the sleepers that are
//! due and waits again. It never wakes up without a deadline that is due or a new earlier
//! one, so idle sleepers cost nothing.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread;
use std::time::Instant;

/// A registered sleeper: its deadline, made unique by a sequence number.
type Key = (Instant, u64);

#[derive(Default)]
struct State {
    sleepers: BTreeMap<Key, Waker>,
    next_id: u64,
    started: bool,
}

struct Timer {
    state: Mutex<State>,
    changed: Condvar,
}

impl Timer {
    fn get() -> &'static Timer {
        static TIMER: OnceLock<Timer> = OnceLock::new();
        TIMER.get_or_init(|| Timer {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // No user code runs under this lock; a poisoned one still holds valid state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers `waker` for `deadline`, or refreshes the waker of `key`.
    fn register(&'static self, deadline: Instant, key: &mut Option<Key>, waker: &Waker) {
        let mut state = self.lock();
        if let Some(k) = key {
            if let Some(w) = state.sleepers.get_mut(k) {
                if !w.will_wake(waker) {
                    let old = core::mem::replace(w, waker.clone());
                    drop(state);
                    // Outside the lock: the old waker may be the last hold on a task whose
                    // future has sleeps of its own, and dropping those cancels them here.
                    drop(old);
                }
                return;
            }
        }
        let k = (deadline, state.next_id);
        state.next_id += 1;
        state.sleepers.insert(k, waker.clone());
        *key = Some(k);
        let earliest = state.sleepers.keys().next() == Some(&k);
        if !state.started {
            // If the thread cannot be started now, the next registration tries again.
            state.started = thread::Builder::new()
                .name("memq-sleep".into())
                .spawn(move || self.run())
                .is_ok();
        } else if earliest {
            self.changed.notify_one();
        }
    }

    fn cancel(&self, key: Key) {
        let waker = self.lock().sleepers.remove(&key);
        drop(waker); // outside the lock
    }

    fn run(&self) {
        let mut due = Vec::new();
        let mut state = self.lock();
        loop {
            let now = Instant::now();
            while let Some(entry) = state.sleepers.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                due.push(entry.remove());
            }
            if !due.is_empty() {
                drop(state);
                for waker in due.drain(..) {
                    // A waker that panics must not end this thread: every sleep in the
                    // process depends on it, and none would be woken again.
                    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| waker.wake()));
                }
                state = self.lock();
                continue;
            }
            state = match state.sleepers.keys().next() {
                Some(&(deadline, _)) => {
                    self.changed
                        .wait_timeout(state, deadline - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
                None => self
                    .changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner),
            };
        }
    }
}

/// The future of [`Threads::sleep`](super::Threads): completes at its deadline, woken by
/// memq's timer thread.
///
/// # Cancel safety
///
/// Dropping it unregisters it.
#[must_use = "futures do nothing unless polled"]
pub struct ThreadSleep {
    /// `None`: too far away to represent; never completes.
    deadline: Option<Instant>,
    key: Option<Key>,
}

impl fmt::Debug for ThreadSleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadSleep")
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl ThreadSleep {
    pub(crate) fn new(duration: Duration) -> Self {
        Self {
            deadline: Instant::now().checked_add(duration),
            key: None,
        }
    }

    /// When it completes (`None`: never).
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }
}

impl Future for ThreadSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let Some(deadline) = this.deadline else {
            return Poll::Pending;
        };
        if Instant::now() >= deadline {
            if let Some(k) = this.key.take() {
                Timer::get().cancel(k);
            }
            return Poll::Ready(());
        }
        Timer::get().register(deadline, &mut this.key, cx.waker());
        Poll::Pending
    }
}

impl Drop for ThreadSleep {
    fn drop(&mut self) {
        if let Some(k) = self.key.take() {
            Timer::get().cancel(k);
        }
    }
}
