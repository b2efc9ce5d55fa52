//! The locks and atomics memq-core is built on, behind one facade.
//!
//! With `std` a partition is guarded by an OS mutex (parks instead of spinning under
//! contention), entered after a short backoff when it is taken (see [`Mutex::lock`]);
//! without `std` by a `spin` mutex; under `cfg(loom)` by loom's model-checked mutex.
//! Nothing outside this module names a concrete lock type.

#[cfg(all(not(loom), target_has_atomic = "64"))]
pub(crate) use core::sync::atomic::AtomicU64;
#[cfg(all(loom, target_has_atomic = "64"))]
pub(crate) use loom::sync::atomic::AtomicU64;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::Arc;

#[cfg(not(loom))]
pub(crate) use alloc::sync::Arc;
#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};

/// A mutex whose `lock` cannot fail.
///
/// A panic while the lock is held (only a user `Clone` or `Drop` can panic inside memq's
/// critical sections, and both run before state is changed) does not poison it: the state
/// it guards is consistent at every point where user code runs.
#[derive(Debug, Default)]
pub(crate) struct Mutex<T> {
    #[cfg(loom)]
    inner: loom::sync::Mutex<T>,
    #[cfg(all(not(loom), feature = "std"))]
    inner: std::sync::Mutex<T>,
    #[cfg(all(not(loom), not(feature = "std")))]
    inner: spin::Mutex<T>,
}

#[cfg(loom)]
pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;
#[cfg(all(not(loom), feature = "std"))]
pub(crate) type MutexGuard<'a, T> = std::sync::MutexGuard<'a, T>;
#[cfg(all(not(loom), not(feature = "std")))]
pub(crate) type MutexGuard<'a, T> = spin::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Self {
            #[cfg(loom)]
            inner: loom::sync::Mutex::new(value),
            #[cfg(all(not(loom), feature = "std"))]
            inner: std::sync::Mutex::new(value),
            #[cfg(all(not(loom), not(feature = "std")))]
            inner: spin::Mutex::new(value),
        }
    }

    /// Locks, blocking while another thread holds the lock: for a caller with one
    /// message's worth of work to do.
    ///
    /// With `std`, a caller that finds the lock taken first steps away for [`BACKOFF`]
    /// without touching it, and only then queues on the OS mutex (which spins briefly,
    /// then parks). memq's critical sections are short and come in runs: a publisher
    /// appending message after message, readers taking one message each. Queueing at
    /// once hands the lock over once per message, and each handover moves the lock's
    /// and the log's cache lines between cores. Stepping away lets the holder finish its
    /// run with its cache lines local, and the waiter finds more work done, or more to
    /// take, when it comes back. The backoff is bounded, and taken only while another
    /// thread holds the lock, that is while work is being done: an idle reader waits on
    /// a wait list, never here. Inside memq's blocking calls it is shorter
    /// ([`BLOCKING_BACKOFF`]).
    ///
    /// Where moving a cache line between cores costs little, handing the lock over per
    /// message costs less than the backoff's wait, and the caller queues at once (after
    /// a few spin hints). Which of the two holds on the machine at hand, memq measures
    /// while it runs ([`tune`]).
    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        #[cfg(all(not(loom), feature = "std"))]
        {
            match self.inner.try_lock() {
                Ok(guard) => return guard,
                Err(std::sync::TryLockError::Poisoned(poisoned)) => return poisoned.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {
                    if tune::queue_at_once() {
                        spin_briefly();
                    } else {
                        backoff();
                    }
                }
            }
        }
        self.lock_now()
    }

    /// [`Mutex::lock_now`] if `at_once` and this thread is not inside one of memq's
    /// blocking calls, [`Mutex::lock`] otherwise: for a reader whose only likely
    /// contender holds the lock for one message at a time (see `Subscriber`'s receive).
    /// Blocking calls keep the backoff: there threads queued on the OS mutex park, and
    /// each handover becomes a wake-up.
    #[inline]
    pub(crate) fn lock_at_once_if(&self, at_once: bool) -> MutexGuard<'_, T> {
        #[cfg(all(not(loom), feature = "std"))]
        if at_once && !IN_BLOCKING_CALL.with(core::cell::Cell::get) {
            return self.lock_now();
        }
        #[cfg(not(all(not(loom), feature = "std")))]
        let _ = at_once;
        self.lock()
    }

    /// [`Mutex::lock_now`] for a caller with a batch, [`Mutex::lock`] otherwise.
    #[inline]
    pub(crate) fn lock_for(&self, batch: bool) -> MutexGuard<'_, T> {
        if batch {
            self.lock_now()
        } else {
            self.lock()
        }
    }

    /// Locks without [`Mutex::lock`]'s backoff: for a caller that brings a batch
    /// (`publish_batch`, `recv_many`), whose one visit does the work of many messages.
    /// Making it wait would stall all of them while the lock may already be free.
    #[inline]
    pub(crate) fn lock_now(&self) -> MutexGuard<'_, T> {
        #[cfg(any(loom, feature = "std"))]
        {
            match self.inner.lock() {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            }
        }
        #[cfg(all(not(loom), not(feature = "std")))]
        {
            self.inner.lock()
        }
    }
}

/// How long [`Mutex::lock`] stays away from a lock it found taken.
#[cfg(all(not(loom), feature = "std"))]
const BACKOFF: core::time::Duration = core::time::Duration::from_micros(5);

/// [`BACKOFF`] for a thread inside one of memq's blocking calls (`publish_blocking`,
/// `recv_blocking`, ...). Such programs often run more threads than cores (one per
/// publisher and reader), and there a longer wait keeps a core from the thread holding
/// the lock; async tasks run on worker pools sized to the cores. Measured on 2 cores
/// (`perf_runner`, memq-threads): S1 2.9M -> 3.6M, S3 8.6M -> 9.1M, S7 2.8M -> 4.5M
/// against 5 µs.
#[cfg(all(not(loom), feature = "std"))]
const BLOCKING_BACKOFF: core::time::Duration = core::time::Duration::from_micros(1);

#[cfg(feature = "std")]
std::thread_local! {
    /// Whether this thread is inside one of memq's blocking calls.
    static IN_BLOCKING_CALL: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Whether this thread is inside one of memq's blocking calls (always `false` without
/// `std`, which has none).
#[inline]
pub(crate) fn in_blocking_call() -> bool {
    #[cfg(feature = "std")]
    {
        IN_BLOCKING_CALL.with(core::cell::Cell::get)
    }
    #[cfg(not(feature = "std"))]
    {
        false
    }
}

/// Marks this thread as inside a blocking call until the returned guard is dropped
/// (nested calls restore what they found).
#[cfg(feature = "std")]
pub(crate) fn enter_blocking_call() -> impl Drop {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            let was = self.0;
            IN_BLOCKING_CALL.with(|b| b.set(was));
        }
    }
    Restore(IN_BLOCKING_CALL.with(|b| b.replace(true)))
}

/// Waits [`BACKOFF`] (or [`BLOCKING_BACKOFF`]) without touching any shared memory. On a
/// machine with one CPU the holder cannot run meanwhile, so there it does not wait at
/// all; nor under Miri, whose interpreted threads and clock gain nothing from it.
#[cfg(all(not(loom), feature = "std"))]
#[cold]
fn backoff() {
    if cfg!(miri) {
        return;
    }
    if !several_cpus() {
        return;
    }
    let wait = if IN_BLOCKING_CALL.with(core::cell::Cell::get) {
        BLOCKING_BACKOFF
    } else {
        BACKOFF
    };
    let start = std::time::Instant::now();
    loop {
        for _ in 0..16 {
            core::hint::spin_loop();
        }
        if start.elapsed() >= wait {
            return;
        }
    }
}

/// Whether this machine runs threads in parallel: where it does not, a waiter cannot
/// gain by waiting for the holder (which cannot run meanwhile), and there is no choice
/// for [`tune`] to make. Also `false` where the platform cannot tell (nor measure time).
#[cfg(all(not(loom), feature = "std"))]
fn several_cpus() -> bool {
    static SEVERAL_CPUS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SEVERAL_CPUS.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

/// Keeps a value on its own cache line (128 bytes also covers adjacent-line prefetching),
/// for atomics written often by one thread and read by others.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Padded<T>(pub(crate) T);

/// A few spin hints before queueing on the OS mutex: what a waiter does when
/// [`tune::queue_at_once`] says that handing the lock over costs little here.
#[cfg(all(not(loom), feature = "std"))]
#[inline]
fn spin_briefly() {
    for _ in 0..16 {
        core::hint::spin_loop();
    }
}

/// Counts `n` messages appended by this thread, the measure of progress by which the
/// lock's waiting strategy is chosen (see [`tune`]). Does nothing without `std`.
#[inline]
pub(crate) fn count_published(n: usize) {
    #[cfg(all(not(loom), feature = "std"))]
    tune::published(n);
    #[cfg(not(all(not(loom), feature = "std")))]
    let _ = n;
}

#[cfg(all(not(loom), feature = "std"))]
pub(crate) mod tune {
    //! Chooses, by measuring, how a thread waits for a partition's lock that it found taken.
    //!
    //! Whether stepping away ([`BACKOFF`](super::BACKOFF)) or queueing at once is faster
    //! depends on the machine more than on the program: on how much it costs to move a cache
    //! line from one core to another. On one 2-vCPU VM where a line moved in about 50 ns,
    //! queueing at once ran S1 23 % and S3 15 % faster than the backoff (`perf_runner`); on
    //! another, where the backoff was tuned, queueing at once lost 15–55 % (S1, S3, S7,
    //! `docs/PERF-NOTES.md`). The same VM was seen to switch between such states within
    //! minutes. So memq measures: the messages appended per second by the whole process (each
    //! thread counts its own and adds them up every [`FLUSH`] messages) in epochs of at least
    //! [`EPOCH`], mostly with the strategy that measured best, and now and then
    //! ([`EXPLORE_EVERY`]) one epoch with the other. An epoch with the other strategy that
    //! beats the epoch just before it by [`MARGIN_PERCENT`] makes it the best. Epochs longer
    //! than [`STALE`] (the program was mostly idle, and the strategy did not matter) are not
    //! judged. The bookkeeping costs a thread-local addition per publish and a `try_lock` of a
    //! process-wide mutex every [`FLUSH`] messages; no thread waits on it.

    use core::cell::Cell;
    use core::sync::atomic::{AtomicBool, Ordering};
    use core::time::Duration;
    use std::time::Instant;

    /// Messages a thread counts before adding them to the process-wide count.
    pub(crate) const FLUSH: usize = 512;
    /// Shortest epoch that is judged.
    pub(crate) const EPOCH: Duration = Duration::from_millis(5);
    /// Longest epoch that is judged.
    pub(crate) const STALE: Duration = Duration::from_millis(50);
    /// One epoch in this many tries the strategy that is not the best.
    pub(crate) const EXPLORE_EVERY: u32 = 8;
    /// How much faster the other strategy must measure to become the best.
    pub(crate) const MARGIN_PERCENT: u64 = 5;

    /// The strategy in force: `true` to queue at once, `false` to back off.
    static AT_ONCE: AtomicBool = AtomicBool::new(false);
    static TUNER: std::sync::Mutex<Tuner> = std::sync::Mutex::new(Tuner::new());

    std::thread_local! {
        static UNCOUNTED: Cell<usize> = const { Cell::new(0) };
    }

    /// Whether a waiter should queue on the lock at once instead of backing off. Never
    /// inside memq's blocking calls, which keep their own short backoff.
    #[inline]
    pub(crate) fn queue_at_once() -> bool {
        AT_ONCE.load(Ordering::Relaxed) && !super::IN_BLOCKING_CALL.with(Cell::get)
    }

    /// Counts `n` messages appended by this thread.
    #[inline]
    pub(crate) fn published(n: usize) {
        let total = UNCOUNTED.with(|c| {
            let total = c.get().saturating_add(n);
            c.set(if total >= FLUSH { 0 } else { total });
            total
        });
        if total >= FLUSH {
            flush(total);
        }
    }

    #[cold]
    #[inline(never)]
    fn flush(units: usize) {
        // Miri: its interpreted clock and threads gain nothing from it. One CPU (or a
        // platform that cannot tell, and may have no clock): nothing to choose.
        if cfg!(miri) || !super::several_cpus() {
            return;
        }
        match TUNER.try_lock() {
            Ok(mut tuner) => {
                if let Some(at_once) = tuner.step(units as u64, Instant::now()) {
                    AT_ONCE.store(at_once, Ordering::Relaxed);
                }
            }
            // Another thread is adding its count: keep this one for the next time.
            Err(_) => UNCOUNTED.with(|c| c.set(c.get().saturating_add(units))),
        }
    }

    /// The measuring, apart from the clock and the process-wide state (unit tests feed
    /// it counts and instants).
    #[derive(Debug)]
    pub(crate) struct Tuner {
        start: Option<Instant>,
        units: u64,
        at_once: bool,
        best: bool,
        epochs: u32,
        /// Messages per millisecond in the last judged epoch with the best strategy.
        best_rate: u64,
    }

    impl Tuner {
        pub(crate) const fn new() -> Self {
            Self {
                start: None,
                units: 0,
                at_once: false,
                best: false,
                epochs: 0,
                best_rate: 0,
            }
        }

        /// The strategy in force.
        #[cfg(test)]
        pub(crate) fn at_once(&self) -> bool {
            self.at_once
        }

        /// Adds `units` messages counted by `now`; returns the strategy to use from now
        /// on when it changes.
        pub(crate) fn step(&mut self, units: u64, now: Instant) -> Option<bool> {
            let Some(start) = self.start else {
                self.start = Some(now);
                return None;
            };
            self.units = self.units.saturating_add(units);
            let took = now.saturating_duration_since(start);
            if took < EPOCH {
                return None;
            }
            let units = core::mem::take(&mut self.units);
            self.start = Some(now);
            if took > STALE {
                return None;
            }
            let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX).max(1);
            let rate = units.saturating_mul(1000) / micros;
            self.epochs = self.epochs.wrapping_add(1);
            if self.at_once == self.best {
                self.best_rate = rate;
            } else if rate.saturating_mul(100) > self.best_rate.saturating_mul(100 + MARGIN_PERCENT)
            {
                self.best = self.at_once;
                self.best_rate = rate;
            }
            // The first try of the other strategy comes early (a benchmark or a burst
            // may not last long), then one epoch in EXPLORE_EVERY.
            let next = if self.epochs % EXPLORE_EVERY == 2 {
                !self.best
            } else {
                self.best
            };
            let changed = next != self.at_once;
            self.at_once = next;
            changed.then_some(next)
        }
    }
}

#[cfg(all(test, not(loom), feature = "std"))]
mod tests {
    use super::tune::{Tuner, EPOCH, EXPLORE_EVERY, STALE};
    use std::time::Instant;

    /// Runs `epochs` epochs of `EPOCH` each, in which `rate(at_once)` messages per
    /// millisecond are counted; returns the strategy in force in each.
    fn run(
        tuner: &mut Tuner,
        now: &mut Instant,
        epochs: u32,
        rate: impl Fn(bool) -> u64,
    ) -> Vec<bool> {
        let ms = u64::try_from(EPOCH.as_millis()).unwrap();
        let mut seen = Vec::new();
        for _ in 0..epochs {
            let at_once = tuner.at_once();
            seen.push(at_once);
            *now += EPOCH;
            tuner.step(rate(at_once) * ms, *now);
        }
        seen
    }

    fn started() -> (Tuner, Instant) {
        let mut tuner = Tuner::new();
        let now = Instant::now();
        assert_eq!(tuner.step(0, now), None);
        assert!(!tuner.at_once(), "starts with the backoff");
        (tuner, now)
    }

    #[test]
    fn queueing_at_once_is_kept_where_it_measures_faster() {
        let (mut tuner, mut now) = started();
        let seen = run(
            &mut tuner,
            &mut now,
            40,
            |at_once| if at_once { 1300 } else { 1000 },
        );
        // Two epochs of backoff, one try of queueing at once, then queueing at once,
        // apart from one epoch in EXPLORE_EVERY that tries the backoff again.
        assert_eq!(&seen[..3], &[false, false, true]);
        let backoff_epochs = seen[3..].iter().filter(|&&a| !a).count();
        assert_eq!(backoff_epochs, seen[3..].len() / EXPLORE_EVERY as usize);
        assert!(tuner.at_once());
    }

    #[test]
    fn the_backoff_is_kept_where_queueing_at_once_measures_slower() {
        let (mut tuner, mut now) = started();
        let seen = run(
            &mut tuner,
            &mut now,
            40,
            |at_once| if at_once { 600 } else { 1000 },
        );
        let tries = seen.iter().filter(|&&a| a).count();
        assert_eq!(tries, 1 + (40 - 3) / EXPLORE_EVERY as usize, "{seen:?}");
        assert!(!tuner.at_once());
    }

    #[test]
    fn a_difference_within_the_margin_changes_nothing() {
        let (mut tuner, mut now) = started();
        let seen = run(
            &mut tuner,
            &mut now,
            30,
            |at_once| if at_once { 1030 } else { 1000 },
        );
        assert!(!tuner.at_once());
        assert!(seen.iter().filter(|&&a| a).count() <= 4, "{seen:?}");
    }

    #[test]
    fn the_choice_follows_the_machine_when_it_changes() {
        let (mut tuner, mut now) = started();
        run(
            &mut tuner,
            &mut now,
            20,
            |at_once| if at_once { 1500 } else { 1000 },
        );
        assert!(tuner.at_once());
        // Now handing the lock over costs more than backing off.
        run(&mut tuner, &mut now, 3 * EXPLORE_EVERY, |at_once| {
            if at_once {
                700
            } else {
                1000
            }
        });
        assert!(!tuner.at_once());
    }

    #[test]
    fn idle_stretches_are_not_judged() {
        let (mut tuner, mut now) = started();
        // Epochs 1 and 2 with the backoff, 3 trying the other way, which is faster.
        run(
            &mut tuner,
            &mut now,
            3,
            |at_once| if at_once { 1500 } else { 1000 },
        );
        assert!(tuner.at_once());
        for _ in 0..50 {
            // A few messages, then a long pause: nothing is judged, nothing changes,
            // however slow these stretches look.
            now += STALE * 2;
            assert_eq!(tuner.step(10, now), None);
        }
        assert!(tuner.at_once());
    }

    #[test]
    fn short_stretches_add_up_to_one_epoch() {
        let (mut tuner, mut now) = started();
        let mut step = |tuner: &mut Tuner| {
            now += EPOCH / 10;
            tuner.step(100, now)
        };
        for _ in 0..15 {
            assert_eq!(step(&mut tuner), None);
        }
        // One epoch and a half: still the backoff.
        assert!(!tuner.at_once());
        for _ in 0..10 {
            step(&mut tuner);
        }
        // The second epoch has ended: the early try of queueing at once is on.
        assert!(tuner.at_once());
    }
}
