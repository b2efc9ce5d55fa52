//! The atomics, cells and waits the ring is built on, behind one facade: `core`'s (and
//! `std`'s) normally, loom's model-checked ones under `cfg(loom)`. Nothing outside this
//! module names a concrete atomic or cell type, so every one of them is checked by the
//! loom models (`tests/loom.rs`).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::Arc;

#[cfg(not(loom))]
pub(crate) use alloc::sync::Arc;
#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

#[cfg(all(feature = "std", loom))]
pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};
#[cfg(all(feature = "std", not(loom)))]
pub(crate) use std::sync::{Condvar, Mutex, MutexGuard};

/// The fence that completes a Dekker pairing made of sequentially consistent accesses
/// (a store or read-modify-write, then a load of another location, on each side), under
/// loom only.
///
/// In the C++/Rust memory model such a pairing needs no fence: `SeqCst` accesses are in
/// one total order consistent with each thread's program order, so of two threads that
/// each write one location and then load the other, one sees the other's write. Loom
/// treats `SeqCst` accesses as acquire/release and would miss that order; the fence
/// gives its models the ordering the real accesses have, at no cost outside them.
#[inline(always)]
pub(crate) fn loom_sc_fence() {
    #[cfg(loom)]
    fence(Ordering::SeqCst);
}

/// A cell whose contents are reached through raw pointers only, so that loom can check
/// every access against the atomics that order it.
#[derive(Debug)]
pub(crate) struct Cell<T> {
    #[cfg(loom)]
    inner: loom::cell::UnsafeCell<T>,
    #[cfg(not(loom))]
    inner: core::cell::UnsafeCell<T>,
}

impl<T> Cell<T> {
    /// A cell holding `value` (outside loom, slots are made as zeroed memory instead).
    #[cfg(loom)]
    pub(crate) fn new(value: T) -> Self {
        Self {
            inner: loom::cell::UnsafeCell::new(value),
        }
    }

    /// Runs `f` with a shared pointer to the contents.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        #[cfg(loom)]
        {
            self.inner.with(f)
        }
        #[cfg(not(loom))]
        {
            f(self.inner.get())
        }
    }

    /// Runs `f` with an exclusive pointer to the contents.
    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        #[cfg(loom)]
        {
            self.inner.with_mut(f)
        }
        #[cfg(not(loom))]
        {
            f(self.inner.get())
        }
    }
}

/// Gives the processor (or, under loom, the model's other threads) a turn while another
/// thread finishes a step of a few instructions: a registration holding the claim
/// counter, or the writer of the slot's previous lap. Neither runs user code in that
/// step, so the wait is as long as that writer's preemption at worst.
#[inline]
pub(crate) fn pause(spins: &mut u32) {
    #[cfg(loom)]
    {
        let _ = spins;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    {
        if *spins < 6 {
            for _ in 0..(1u32 << *spins) {
                core::hint::spin_loop();
            }
            *spins += 1;
        } else {
            #[cfg(feature = "std")]
            std::thread::yield_now();
            #[cfg(not(feature = "std"))]
            core::hint::spin_loop();
        }
    }
}
