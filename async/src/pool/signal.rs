//! The pool's control signal: running, draining or stopping, and the wakers of the
//! workers waiting for it to change. A worker waits on it and on its receive at once, so
//! an idle worker sleeps until a message or a shutdown request arrives.

use core::task::{Context, Poll, Waker};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

pub(crate) const RUNNING: u8 = 0;
pub(crate) const DRAINING: u8 = 1;
pub(crate) const STOPPING: u8 = 2;

#[derive(Debug)]
pub(crate) struct Signal {
    state: AtomicU8,
    /// One slot per worker: its waker while it waits.
    wakers: Mutex<Vec<Option<Waker>>>,
}

impl Signal {
    pub(crate) fn new(workers: usize) -> Self {
        Self {
            state: AtomicU8::new(RUNNING),
            wakers: Mutex::new(vec![None; workers]),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Option<Waker>>> {
        // No user code runs under this lock; a poisoned one still holds valid state.
        self.wakers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn state(&self) -> u8 {
        self.state.load(Ordering::SeqCst)
    }

    /// Moves to `to` unless already further (stopping overrides draining, never the
    /// reverse), and wakes every waiting worker.
    pub(crate) fn request(&self, to: u8) {
        self.state.fetch_max(to, Ordering::SeqCst);
        // Taken under the lock, woken outside it. A worker that registers after this
        // sees the new state under the same lock (see `poll_reached`).
        let wakers: Vec<Waker> = self.lock().iter_mut().filter_map(Option::take).collect();
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Wakes every waiting worker without a change of state (see
    /// the drain's [`Barrier`](super::barrier::Barrier)).
    pub(crate) fn wake_all(&self) {
        let wakers: Vec<Waker> = self.lock().iter_mut().filter_map(Option::take).collect();
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Registers worker `slot` to be woken by the next [`Signal::request`] or
    /// [`Signal::wake_all`]; the caller looks at what it waits for again afterwards.
    pub(crate) fn register(&self, slot: usize, cx: &mut Context<'_>) {
        // A waker replaced here is dropped after the lock (its drop is the runtime's code).
        let _replaced = self.store(slot, cx);
    }

    /// Stores the task's waker for `slot` unless an equivalent one is there; returns the
    /// waker it replaced, for the caller to drop after the lock.
    fn store(&self, slot: usize, cx: &mut Context<'_>) -> Option<Waker> {
        let mut wakers = self.lock();
        match &mut wakers[slot] {
            Some(w) if w.will_wake(cx.waker()) => None,
            w => w.replace(cx.waker().clone()),
        }
    }

    /// Ready once the state is at least `level`; otherwise registers worker `slot`.
    pub(crate) fn poll_reached(&self, level: u8, slot: usize, cx: &mut Context<'_>) -> Poll<()> {
        if self.state() >= level {
            return Poll::Ready(());
        }
        let _replaced = self.store(slot, cx);
        if self.state() >= level {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}
