//! Spawned work as every runtime sees it: a [`JoinHandle`] of memq's own, so that joining,
//! panics and detaching behave the same on tokio, async-std, smol and plain threads.
//!
//! The runtime adapters spawn the wrapper that [`task`] or [`blocking`] returns and detach
//! the runtime's own handle; the wrapper catches a panic and hands the output to the
//! [`JoinHandle`] through a one-slot cell. Nothing here knows which runtime runs it.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Why a spawned task produced no output.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JoinError {
    /// The task panicked; the panic's message, if it had one.
    Panicked(String),
    /// The runtime dropped the task before it finished (for example when it shut down).
    Cancelled,
}

impl JoinError {
    pub(crate) fn from_panic(payload: Box<dyn Any + Send>) -> Self {
        let message = panic_message(payload.as_ref());
        drop_caught(payload);
        Self::Panicked(message)
    }

    /// Whether the task panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self, Self::Panicked(_))
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Panicked(msg) => write!(f, "task panicked: {msg}"),
            Self::Cancelled => f.write_str("task was cancelled before it finished"),
        }
    }
}

impl std::error::Error for JoinError {}

/// The text of a panic payload (`&str` or `String`), or a placeholder.
/// Drops `value`, a user's (a panic's payload, a handler's output), catching a panic in
/// its `Drop`: the worker or task that lets go of it goes on. The payload of that second
/// panic is leaked rather than dropped, as its drop might panic again.
pub(crate) fn drop_caught<T>(value: T) {
    if let Err(payload) =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(value)))
    {
        core::mem::forget(payload);
    }
}

pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_owned()
    }
}

enum State<T> {
    Running(Option<Waker>),
    Done(Result<T, JoinError>),
    Joined,
}

struct Slot<T> {
    state: Mutex<State<T>>,
}

impl<T> Slot<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // Nothing panics while holding this lock; a poisoned one still holds valid state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A handle to spawned work: await it (or [`JoinHandle::join_blocking`]) for the output.
///
/// Dropping the handle detaches the task: it keeps running and its output is dropped. A
/// panic in the task does not unwind into the runtime; it is caught and returned here as
/// [`JoinError::Panicked`].
///
/// # Examples
///
/// ```
/// use memq::rt::{Runtime, Threads};
///
/// let handle = Threads.spawn(async { 6 * 7 });
/// assert_eq!(handle.join_blocking()?, 42);
/// # Ok::<(), memq::rt::JoinError>(())
/// ```
#[must_use = "dropping a JoinHandle detaches the task"]
pub struct JoinHandle<T> {
    slot: Arc<Slot<T>>,
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl<T> JoinHandle<T> {
    /// Whether the task has finished (its output, or error, is ready).
    pub fn is_finished(&self) -> bool {
        !matches!(*self.slot.lock(), State::Running(_))
    }

    /// Waits for the task on this thread, parking it (no spinning).
    ///
    /// Do not call this from an async task: it blocks the executor thread; `.await` the
    /// handle instead.
    ///
    /// # Errors
    ///
    /// [`JoinError::Panicked`] if the task panicked, [`JoinError::Cancelled`] if the
    /// runtime dropped it unfinished.
    pub fn join_blocking(self) -> Result<T, JoinError> {
        super::block_on(self)
    }
}

impl<T> Unpin for JoinHandle<T> {}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // A waker replaced here is dropped after the lock (its drop is the runtime's code).
        let mut _replaced = None;
        let mut state = self.slot.lock();
        match &mut *state {
            State::Running(waker) => {
                match waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => _replaced = waker.replace(cx.waker().clone()),
                }
                Poll::Pending
            }
            State::Done(_) => match core::mem::replace(&mut *state, State::Joined) {
                State::Done(out) => Poll::Ready(out),
                _ => unreachable!("state was Done"),
            },
            // Polled again after it returned the output.
            State::Joined => Poll::Pending,
        }
    }
}

/// The task's side of the slot. Dropping it unfinished reports [`JoinError::Cancelled`].
struct Completer<T> {
    slot: Option<Arc<Slot<T>>>,
}

impl<T> Completer<T> {
    fn complete(&mut self, out: Result<T, JoinError>) {
        let Some(slot) = self.slot.take() else { return };
        let waker = {
            let mut state = slot.lock();
            match core::mem::replace(&mut *state, State::Done(out)) {
                State::Running(w) => w,
                _ => None,
            }
        };
        // Woken outside the lock.
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Drop for Completer<T> {
    fn drop(&mut self) {
        self.complete(Err(JoinError::Cancelled));
    }
}

fn slot<T>() -> (Completer<T>, JoinHandle<T>) {
    let slot = Arc::new(Slot {
        state: Mutex::new(State::Running(None)),
    });
    (
        Completer {
            slot: Some(slot.clone()),
        },
        JoinHandle { slot },
    )
}

pin_project_lite::pin_project! {
    /// Catches a panic of the inner future's `poll`.
    #[derive(Debug)]
    pub(crate) struct CatchUnwind<F> {
        #[pin]
        fut: F,
    }
}

impl<F> CatchUnwind<F> {
    pub(crate) fn new(fut: F) -> Self {
        Self { fut }
    }
}

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Box<dyn Any + Send>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let fut = self.project().fut;
        // A future that panicked is not polled again (its wrapper completes), so whatever
        // state the panic left it in is never observed.
        match catch_unwind(AssertUnwindSafe(|| fut.poll(cx))) {
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(payload)),
        }
    }
}

/// Wraps `fut` for spawning: the wrapper catches a panic and reports the output to the
/// handle. If the wrapper is dropped unfinished, the handle reports `Cancelled`.
pub(crate) fn task<F>(
    fut: F,
) -> (
    impl Future<Output = ()> + Send + 'static,
    JoinHandle<F::Output>,
)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (mut done, handle) = slot();
    let wrapper = async move {
        let out = CatchUnwind::new(fut).await;
        done.complete(out.map_err(JoinError::from_panic));
    };
    (wrapper, handle)
}

/// [`task`] for a blocking closure.
pub(crate) fn blocking<F, T>(f: F) -> (impl FnOnce() + Send + 'static, JoinHandle<T>)
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (mut done, handle) = slot();
    let wrapper = move || {
        let out = catch_unwind(AssertUnwindSafe(f));
        done.complete(out.map_err(JoinError::from_panic));
    };
    (wrapper, handle)
}
