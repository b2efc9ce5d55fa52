//! The locks and atomics memq-core is built on, behind one facade.
//!
//! With `std` a partition is guarded by an OS mutex (parks instead of spinning under
//! contention); without it by a `spin` mutex; under `cfg(loom)` by loom's model-checked
//! mutex. Nothing outside this module names a concrete lock type.

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

    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
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

/// Keeps a value on its own cache line (128 bytes also covers adjacent-line prefetching),
/// for atomics written often by one thread and read by others.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Padded<T>(pub(crate) T);
