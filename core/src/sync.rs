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
pub(crate) use loom::sync::atomic::{fence, AtomicUsize, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::Arc;

#[cfg(not(loom))]
pub(crate) use alloc::sync::Arc;
#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{fence, AtomicUsize, Ordering};

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
    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        #[cfg(all(not(loom), feature = "std"))]
        {
            match self.inner.try_lock() {
                Ok(guard) => return guard,
                Err(std::sync::TryLockError::Poisoned(poisoned)) => return poisoned.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => backoff(),
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
    use std::sync::OnceLock;
    if cfg!(miri) {
        return;
    }
    static SEVERAL_CPUS: OnceLock<bool> = OnceLock::new();
    if !*SEVERAL_CPUS
        .get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
    {
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

/// Keeps a value on its own cache line (128 bytes also covers adjacent-line prefetching),
/// for atomics written often by one thread and read by others.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Padded<T>(pub(crate) T);
