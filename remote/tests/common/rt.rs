//! The runtime a test runs on, picked as memq-redis picks it: Tokio inside a Tokio
//! runtime, smol otherwise; so that the same scenarios run on both.

use std::future::Future;
use std::time::Duration;

fn on_tokio() -> bool {
    tokio::runtime::Handle::try_current().is_ok()
}

/// Waits for `d`.
pub async fn sleep(d: Duration) {
    if on_tokio() {
        tokio::time::sleep(d).await;
    } else {
        smol::Timer::after(d).await;
    }
}

/// `f`, or `Err(())` if `d` passed first.
pub async fn timeout<F: Future>(d: Duration, f: F) -> Result<F::Output, ()> {
    tokio::select! {
        biased;
        r = f => Ok(r),
        _ = sleep(d) => Err(()),
    }
}

/// A spawned task, cancelled when dropped.
pub enum Task<T> {
    Tokio(tokio::task::JoinHandle<T>),
    Smol(Option<smol::Task<T>>),
}

/// Spawns `f` on the runtime of this thread.
pub fn spawn<T: Send + 'static>(f: impl Future<Output = T> + Send + 'static) -> Task<T> {
    if on_tokio() {
        Task::Tokio(tokio::spawn(f))
    } else {
        Task::Smol(Some(smol::spawn(f)))
    }
}

impl<T> Task<T> {
    /// Waits for its output.
    pub async fn join(mut self) -> T {
        match &mut self {
            Task::Tokio(h) => h.await.expect("the task ran to its end"),
            Task::Smol(t) => t.take().expect("not joined before").await,
        }
    }
}

impl<T> Drop for Task<T> {
    fn drop(&mut self) {
        match self {
            Task::Tokio(h) => h.abort(),
            Task::Smol(t) => drop(t.take()),
        }
    }
}
