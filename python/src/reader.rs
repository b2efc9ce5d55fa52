//! What every reader shares: the [`Reader`] trait over memq's subscribers, group members,
//! explicit-ack members and durable readers, and the receive calls built on it (one
//! message, a batch, with or without a time limit), each releasing the GIL while it
//! waits and honouring Ctrl-C.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;

use crate::errors::{self, Exc};
use crate::message::Form;
use crate::util::{self, Slot};

/// Why a receive ended without a message.
#[derive(Debug)]
pub enum Fail {
    /// The reader missed this many messages.
    Lagged(u64),
    /// Closed and drained.
    Closed,
    /// A durable log's error.
    Store(memq::durable::StoreError),
}

impl From<Fail> for PyErr {
    fn from(f: Fail) -> PyErr {
        match f {
            Fail::Lagged(n) => errors::lagged(n),
            Fail::Closed => Exc::Closed.err("the topic is closed and drained"),
            Fail::Store(e) => errors::from_store(e),
        }
    }
}

impl From<memq::RecvError> for Fail {
    fn from(e: memq::RecvError) -> Fail {
        match e {
            memq::RecvError::Lagged(n) => Fail::Lagged(n),
            _ => Fail::Closed,
        }
    }
}

/// `Ok(None)`: nothing now (or nothing in time).
pub type Step<I> = Result<Option<I>, Fail>;

/// Converts a `try_recv` result.
pub fn from_try<I>(r: Result<I, memq::TryRecvError>) -> Step<I> {
    match r {
        Ok(i) => Ok(Some(i)),
        Err(memq::TryRecvError::Empty) => Ok(None),
        Err(memq::TryRecvError::Lagged(n)) => Err(Fail::Lagged(n)),
        Err(_) => Err(Fail::Closed),
    }
}

/// Converts a `recv_blocking_timeout` result.
pub fn from_timeout<I>(r: Result<I, memq::RecvTimeoutError>) -> Step<I> {
    match r {
        Ok(i) => Ok(Some(i)),
        Err(memq::RecvTimeoutError::Timeout) => Ok(None),
        Err(memq::RecvTimeoutError::Lagged(n)) => Err(Fail::Lagged(n)),
        Err(_) => Err(Fail::Closed),
    }
}

/// Converts a durable receive's result.
pub fn from_durable<I>(r: Result<I, memq::durable::DurableRecvError>) -> Step<I> {
    use memq::durable::DurableRecvError as E;
    match r {
        Ok(i) => Ok(Some(i)),
        Err(E::Empty | E::Timeout) => Ok(None),
        Err(E::Lagged(n)) => Err(Fail::Lagged(n)),
        Err(E::Store(e)) => Err(Fail::Store(e)),
        Err(_) => Err(Fail::Closed),
    }
}

/// One of memq's readers, seen the same way by every Python reader class.
pub trait Reader: Send + 'static {
    /// What one receive yields.
    type Item: Send + 'static;
    /// Takes what is ready, without waiting.
    fn try_recv(&mut self) -> Step<Self::Item>;
    /// Waits at most `d`.
    fn recv_timeout(&mut self, d: Duration) -> Step<Self::Item>;
    /// Appends up to `limit` ready items to `buf`; `Ok(0)` if none is ready.
    fn try_recv_many(&mut self, buf: &mut Vec<Self::Item>, limit: usize) -> Result<usize, Fail> {
        let mut n = 0;
        while n < limit {
            match self.try_recv() {
                Ok(Some(i)) => buf.push(i),
                Ok(None) => break,
                Err(f) if n == 0 => return Err(f),
                Err(_) => break, // reported by the next receive
            }
            n += 1;
        }
        Ok(n)
    }
    /// Waits at most `d` for at least one item, then takes up to `limit`; `Ok(0)` if none
    /// came in time.
    fn recv_many_timeout(
        &mut self,
        buf: &mut Vec<Self::Item>,
        limit: usize,
        d: Duration,
    ) -> Result<usize, Fail> {
        match self.recv_timeout(d)? {
            None => Ok(0),
            Some(i) => {
                buf.push(i);
                Ok(1 + self.try_recv_many(buf, limit - 1)?)
            }
        }
    }
    /// The receive as a future (for asyncio), cancel safe.
    fn recv_async(&mut self) -> impl Future<Output = Result<Self::Item, Fail>> + Send + '_;
    /// The Python object for an item, its payload in `form`.
    fn to_py(py: Python<'_>, item: Self::Item, form: Form) -> PyResult<Py<PyAny>>;
}

/// Receives one item: what is ready at once, else waits (GIL released) up to `limit`.
///
/// # Errors
///
/// `Timeout` if nothing came in time, `Lagged`, `Closed`, `Busy`, `KeyboardInterrupt`.
pub fn recv<R: Reader>(
    py: Python<'_>,
    slot: &Arc<Slot<R>>,
    limit: Option<Duration>,
    form: Form,
) -> PyResult<Py<PyAny>> {
    let mut lease = slot.take()?;
    let r = lease.get();
    if let Some(i) = r.try_recv()? {
        return R::to_py(py, i, form);
    }
    if limit == Some(Duration::ZERO) {
        return Err(Exc::Timeout.err("no message ready"));
    }
    let got = util::wait(py, limit, |d| match r.recv_timeout(d) {
        Ok(None) => None,
        other => Some(other),
    })?;
    drop(lease);
    match got {
        Some(Ok(Some(i))) => R::to_py(py, i, form),
        Some(Err(f)) => Err(f.into()),
        _ => Err(Exc::Timeout.err("no message in time")),
    }
}

/// Receives what is ready, without waiting: `None` if nothing is.
pub fn try_recv<R: Reader>(
    py: Python<'_>,
    slot: &Arc<Slot<R>>,
    form: Form,
) -> PyResult<Option<Py<PyAny>>> {
    let mut lease = slot.take()?;
    match lease.get().try_recv()? {
        Some(i) => R::to_py(py, i, form).map(Some),
        None => Ok(None),
    }
}

/// The largest batch one call returns.
pub const MAX_BATCH: usize = 1 << 20;

/// Receives up to `max` items: those ready at once, else waits up to `limit` for the
/// first and takes what is ready with it. An empty list if nothing came in time.
pub fn recv_many<R: Reader>(
    py: Python<'_>,
    slot: &Arc<Slot<R>>,
    max: usize,
    limit: Option<Duration>,
    form: Form,
) -> PyResult<Vec<Py<PyAny>>> {
    if max == 0 || max > MAX_BATCH {
        return Err(Exc::InvalidArgument.err(format!(
            "max_count must be from 1 to {MAX_BATCH}, not {max}"
        )));
    }
    let mut lease = slot.take()?;
    let r = lease.get();
    let mut buf = Vec::with_capacity(max.min(1024));
    let n = r.try_recv_many(&mut buf, max)?;
    if n == 0 && limit != Some(Duration::ZERO) {
        let got = util::wait(py, limit, |d| match r.recv_many_timeout(&mut buf, max, d) {
            Ok(0) => None,
            other => Some(other),
        })?;
        if let Some(Err(f)) = got {
            return Err(f.into());
        }
    }
    drop(lease);
    buf.into_iter().map(|i| R::to_py(py, i, form)).collect()
}
