//! Timers: what wakes a waiting task later, when a lease, a redelivery delay or a TTL
//! runs out.
//!
//! Owns the [`Timer`] trait users implement, the [`TimerEntry`] a timer hands back for a
//! wake-up it can withdraw, and, with `std`, memq's own `ThreadTimer` (one background
//! thread for the whole process). Sits at the bottom of memq-core beside the clock: it
//! depends on nothing of the crate's.

use core::fmt;
use core::task::Waker;
use core::time::Duration;

/// Wakes a waiting task later: how leases that run out and delayed redeliveries reach
/// members that are parked.
///
/// With `std`, [`ThreadTimer`] is used unless the config names another; runtime adapters
/// provide their own. Without any timer, deadlines are still honoured whenever a member
/// polls, but a parked member is not woken by the clock alone.
///
// Without `std` the item does not exist here: the link goes to the crate's list of
// features.
#[cfg_attr(feature = "std", doc = "[`ThreadTimer`]: crate::ThreadTimer")]
#[cfg_attr(not(feature = "std"), doc = "[`ThreadTimer`]: crate#features")]
pub trait Timer: Send + Sync {
    /// Wakes `waker` once `delay` has passed.
    fn wake_after(&self, delay: Duration, waker: Waker);

    /// Wakes `waker` once `delay` has passed, unless the returned entry is dropped first:
    /// dropping it withdraws the wake-up. memq asks for every wake-up this way and drops
    /// the entry as soon as nobody waits for it any more (the wait ended, the member or
    /// the publisher gave up, the topic is gone), so that a long lease or TTL does not
    /// keep the wake-up, or a thread or task to serve it, until its time.
    ///
    /// memq drops entries outside its locks, on any thread, and may drop one while the
    /// wake-up is running on another thread or after it ran: withdrawing must then do
    /// nothing. It never withdraws from inside the wake-up call itself (an entry whose
    /// waker was woken is let go of without withdrawing).
    ///
    /// The default cannot withdraw: it calls [`Timer::wake_after`] and returns `None`.
    /// Such a wake-up still comes at its time, and then wakes nothing (memq's waker no
    /// longer reaches a task that stopped waiting); until then the timer holds only that
    /// small waker.
    fn wake_after_cancellable(&self, delay: Duration, waker: Waker) -> Option<TimerEntry> {
        self.wake_after(delay, waker);
        None
    }
}

/// A wake-up a [`Timer`] can withdraw, returned by [`Timer::wake_after_cancellable`]:
/// dropping it runs the withdrawal the timer gave it, once.
///
/// # Examples
///
/// ```
/// # use memq_core as memq;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
///
/// use memq::TimerEntry;
///
/// let withdrawn = Arc::new(AtomicBool::new(false));
/// let flag = withdrawn.clone();
/// let entry = TimerEntry::new(move || flag.store(true, Ordering::SeqCst));
/// drop(entry);
/// assert!(withdrawn.load(Ordering::SeqCst));
/// ```
#[must_use = "dropping a timer entry withdraws its wake-up at once"]
pub struct TimerEntry {
    withdraw: Option<alloc::boxed::Box<dyn FnOnce() + Send + Sync>>,
}

impl TimerEntry {
    /// An entry that runs `withdraw` when it is dropped.
    pub fn new(withdraw: impl FnOnce() + Send + Sync + 'static) -> Self {
        Self {
            withdraw: Some(alloc::boxed::Box::new(withdraw)),
        }
    }

    /// Lets go of the entry without withdrawing: its wake-up has run.
    pub(crate) fn disarm(mut self) {
        drop(self.withdraw.take());
    }
}

impl Drop for TimerEntry {
    fn drop(&mut self) {
        if let Some(withdraw) = self.withdraw.take() {
            withdraw();
        }
    }
}

impl fmt::Debug for TimerEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerEntry").finish_non_exhaustive()
    }
}

#[cfg(feature = "std")]
pub use thread_timer::ThreadTimer;

#[cfg(feature = "std")]
mod thread_timer {
    use alloc::collections::BTreeMap;
    use core::task::Waker;
    use core::time::Duration;
    use std::sync::{Condvar, Mutex, OnceLock};
    use std::time::Instant;

    /// A [`Timer`](super::Timer) on one background thread that sleeps until the earliest
    /// deadline. The thread exists only while wake-ups are scheduled: it exits when none
    /// are left and is started again by the next one, so an idle program has no timer
    /// thread at all.
    #[derive(Debug, Clone, Copy)]
    pub struct ThreadTimer {
        inner: &'static Inner,
    }

    #[derive(Debug, Default)]
    struct Inner {
        state: Mutex<State>,
        changed: Condvar,
    }

    #[derive(Debug, Default)]
    struct State {
        wakeups: BTreeMap<(Instant, u64), Waker>,
        seq: u64,
        running: bool,
    }

    impl ThreadTimer {
        /// The process-wide timer.
        pub fn global() -> Self {
            static INNER: OnceLock<Inner> = OnceLock::new();
            Self {
                inner: INNER.get_or_init(Inner::default),
            }
        }

        fn run(inner: &'static Inner) {
            let mut state = inner.state.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                let now = Instant::now();
                let mut due = Vec::new();
                while let Some((&(at, seq), _)) = state.wakeups.first_key_value() {
                    if at > now {
                        break;
                    }
                    if let Some(w) = state.wakeups.remove(&(at, seq)) {
                        due.push(w);
                    }
                }
                if !due.is_empty() {
                    drop(state);
                    for waker in due {
                        // A waker that panics must not end this thread (`running` would stay
                        // set, and no wake-up asked of the timer would ever come again).
                        let _ = std::panic::catch_unwind(core::panic::AssertUnwindSafe(|| {
                            waker.wake();
                        }));
                    }
                    state = inner.state.lock().unwrap_or_else(|e| e.into_inner());
                    continue;
                }
                let Some((&(at, _), _)) = state.wakeups.first_key_value() else {
                    state.running = false;
                    return;
                };
                state = inner
                    .changed
                    .wait_timeout(state, at.saturating_duration_since(now))
                    .map(|(s, _)| s)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
        }
    }

    impl ThreadTimer {
        /// Adds a wake-up at `delay` from now and returns its key; starts the thread if
        /// none runs.
        fn add(&self, delay: Duration, waker: Waker) -> (Instant, u64) {
            let at = Instant::now()
                .checked_add(delay)
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365));
            let mut state = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
            state.seq += 1;
            let seq = state.seq;
            state.wakeups.insert((at, seq), waker);
            if state.running {
                drop(state);
                self.inner.changed.notify_one();
            } else {
                state.running = true;
                drop(state);
                let inner = self.inner;
                if std::thread::Builder::new()
                    .name("memq-timer".into())
                    .spawn(move || Self::run(inner))
                    .is_err()
                {
                    // No thread: wake everything now rather than never (members re-check
                    // their deadlines when polled).
                    let mut state = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
                    state.running = false;
                    let all: Vec<Waker> =
                        core::mem::take(&mut state.wakeups).into_values().collect();
                    drop(state);
                    all.into_iter().for_each(Waker::wake);
                }
            }
            (at, seq)
        }

        /// Withdraws the wake-up `key` if it has not run. The thread is told when that
        /// leaves nothing to wait for, so that it ends now rather than at the withdrawn
        /// wake-up's time. The waker is dropped after the lock.
        fn withdraw(inner: &'static Inner, key: (Instant, u64)) {
            let mut state = inner.state.lock().unwrap_or_else(|e| e.into_inner());
            let waker = state.wakeups.remove(&key);
            let idle = waker.is_some() && state.wakeups.is_empty() && state.running;
            drop(state);
            drop(waker);
            if idle {
                inner.changed.notify_one();
            }
        }

        /// How many wake-ups are scheduled, and whether the thread runs (for tests).
        #[cfg(test)]
        fn pending(&self) -> (usize, bool) {
            let state = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
            (state.wakeups.len(), state.running)
        }
    }

    impl super::Timer for ThreadTimer {
        fn wake_after(&self, delay: Duration, waker: Waker) {
            self.add(delay, waker);
        }

        fn wake_after_cancellable(
            &self,
            delay: Duration,
            waker: Waker,
        ) -> Option<super::TimerEntry> {
            let key = self.add(delay, waker);
            let inner = self.inner;
            Some(super::TimerEntry::new(move || Self::withdraw(inner, key)))
        }
    }

    #[cfg(test)]
    mod tests {
        use super::{Inner, ThreadTimer};
        use crate::Timer;
        use alloc::boxed::Box;
        use alloc::sync::Arc;
        use alloc::task::Wake;
        use core::sync::atomic::{AtomicUsize, Ordering};
        use core::task::Waker;
        use core::time::Duration;
        use std::time::Instant;

        #[derive(Default)]
        struct Count(AtomicUsize);

        impl Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }

        /// A timer of its own (not the process-wide one other tests share).
        fn timer() -> ThreadTimer {
            ThreadTimer {
                inner: Box::leak(Box::new(Inner::default())),
            }
        }

        fn until(what: impl Fn() -> bool) -> bool {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !what() {
                if Instant::now() > deadline {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            true
        }

        /// A withdrawn wake-up is gone at once, with its waker, and once nothing is left
        /// the timer's thread ends rather than sleeping until the withdrawn time.
        #[test]
        fn a_withdrawn_wake_up_leaves_nothing_behind() {
            let timer = timer();
            let count = Arc::new(Count::default());
            let entry = timer
                .wake_after_cancellable(Duration::from_secs(3600), Waker::from(count.clone()))
                .expect("the thread timer can withdraw");
            assert_eq!(timer.pending(), (1, true));
            drop(entry);
            assert_eq!(timer.pending().0, 0);
            assert_eq!(Arc::strong_count(&count), 1, "the waker was kept");
            assert!(until(|| !timer.pending().1), "the thread did not end");
            assert_eq!(count.0.load(Ordering::SeqCst), 0);
        }

        /// Withdrawing one of several leaves the others to come at their time; withdrawing
        /// one that already ran does nothing.
        #[test]
        fn withdrawing_one_keeps_the_others() {
            let timer = timer();
            let (soon, late) = (Arc::new(Count::default()), Arc::new(Count::default()));
            let ran = timer
                .wake_after_cancellable(Duration::from_millis(1), Waker::from(soon.clone()))
                .unwrap();
            let later = timer
                .wake_after_cancellable(Duration::from_secs(3600), Waker::from(late.clone()))
                .unwrap();
            assert!(until(|| soon.0.load(Ordering::SeqCst) == 1));
            drop(ran);
            assert_eq!(timer.pending(), (1, true));
            drop(later);
            assert!(until(|| timer.pending() == (0, false)));
            assert_eq!(late.0.load(Ordering::SeqCst), 0);
        }
    }
}
