//! The runtime that memq-redis's own tasks and timers run on: Tokio when called from
//! within a Tokio runtime; otherwise, with the `smol` feature, smol's global executor and
//! async-io's timers. Owns spawning, sleeping and timeouts; nothing else in the crate
//! names a runtime. (The `redis` crate picks its own runtime by the same rule.)

use std::future::Future;
use std::time::Duration;

use crate::Error;

/// A task of memq-redis's: cancelled when dropped.
#[derive(Debug)]
pub(crate) enum Task {
    Tokio(Option<tokio::task::JoinHandle<()>>),
    #[cfg(feature = "smol")]
    Smol(Option<smol::Task<()>>),
}

impl Task {
    /// Cancels it and waits until it has stopped (its future dropped).
    pub(crate) async fn stop(mut self) {
        match &mut self {
            Task::Tokio(h) => {
                if let Some(h) = h.take() {
                    h.abort();
                    let _ = h.await;
                }
            }
            #[cfg(feature = "smol")]
            Task::Smol(t) => {
                if let Some(t) = t.take() {
                    t.cancel().await;
                }
            }
        }
    }

    /// Lets it run to its end on its own.
    pub(crate) fn detach(mut self) {
        match &mut self {
            Task::Tokio(h) => drop(h.take()),
            #[cfg(feature = "smol")]
            Task::Smol(t) => {
                if let Some(t) = t.take() {
                    t.detach();
                }
            }
        }
    }

    /// Whether it has ended.
    pub(crate) fn is_finished(&self) -> bool {
        match self {
            Task::Tokio(h) => h.as_ref().is_none_or(|h| h.is_finished()),
            #[cfg(feature = "smol")]
            Task::Smol(t) => t.as_ref().is_none_or(smol::Task::is_finished),
        }
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        match self {
            Task::Tokio(h) => {
                if let Some(h) = h.take() {
                    h.abort();
                }
            }
            // Dropping a smol task cancels it.
            #[cfg(feature = "smol")]
            Task::Smol(t) => drop(t.take()),
        }
    }
}

/// Whether this thread is inside a Tokio runtime.
fn on_tokio() -> bool {
    tokio::runtime::Handle::try_current().is_ok()
}

/// Spawns `f` on the Tokio runtime of this thread, else (with the `smol` feature) on
/// smol's global executor.
///
/// # Errors
///
/// [`Error::NoRuntime`] outside a Tokio runtime without the `smol` feature.
pub(crate) fn spawn<F>(f: F) -> Result<Task, Error>
where
    F: Future<Output = ()> + Send + 'static,
{
    if let Ok(h) = tokio::runtime::Handle::try_current() {
        return Ok(Task::Tokio(Some(h.spawn(f))));
    }
    #[cfg(feature = "smol")]
    {
        Ok(Task::Smol(Some(smol::spawn(f))))
    }
    #[cfg(not(feature = "smol"))]
    {
        drop(f);
        Err(Error::NoRuntime)
    }
}

/// Runs `f` to its end in the background, where [`spawn`] would (nowhere, without a
/// runtime: then `false`).
pub(crate) fn detach<F>(f: F) -> bool
where
    F: Future<Output = ()> + Send + 'static,
{
    if let Ok(h) = tokio::runtime::Handle::try_current() {
        drop(h.spawn(f));
        return true;
    }
    #[cfg(feature = "smol")]
    {
        smol::spawn(f).detach();
        true
    }
    #[cfg(not(feature = "smol"))]
    {
        drop(f);
        false
    }
}

/// Waits for `d`: on Tokio's timer inside a Tokio runtime, else on async-io's (with the
/// `smol` feature), else on a thread of its own (memq-redis's readers cannot run there,
/// but a receive with a timeout may be awaited anywhere).
pub(crate) async fn sleep(d: Duration) {
    if on_tokio() {
        tokio::time::sleep(d).await;
        return;
    }
    #[cfg(feature = "smol")]
    {
        smol::Timer::after(d).await;
    }
    #[cfg(not(feature = "smol"))]
    {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("memq-redis-sleep".into())
            .spawn(move || {
                std::thread::sleep(d);
                let _ = tx.send(());
            });
        if spawned.is_ok() {
            let _ = rx.await;
        }
    }
}

/// `f`, or `None` if `d` passed first.
pub(crate) async fn timeout<F: Future>(d: Duration, f: F) -> Option<F::Output> {
    tokio::select! {
        biased;
        r = f => Some(r),
        _ = sleep(d) => None,
    }
}
