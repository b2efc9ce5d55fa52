//! asyncio: memq's futures awaited on the running event loop, without a thread per
//! waiter.
//!
//! An [`Awaitable`] owns one memq future (a receive or a publish, with the reader it
//! borrows). Each time the task awaiting it runs, it polls that future; while the future
//! is pending it yields an asyncio future to the task, registered with the loop's
//! [`Reactor`] under the awaitable's id. memq wakes the awaitable's waker from any thread: the
//! waker puts the id on the reactor's ready list and, if the list was idle, writes one
//! byte to a socket the loop watches (`loop.add_reader`). The loop then calls
//! `Reactor.drain`, which completes the asyncio futures of the ids woken, with no
//! value: the task runs again and polls the memq future itself.
//!
//! So the value never travels through an asyncio future, and cancellation is clean: a
//! cancelled task throws `CancelledError` into the awaitable, which drops its memq future
//! without polling it again. memq's futures are cancel safe (a receive dropped loses no
//! message and passes a notification it got to another waiter; a publish dropped while
//! waiting publishes nothing), so a cancelled receive loses no message, even when the
//! cancel comes after its wake-up. The waker never takes the GIL.

use std::collections::HashMap;
use std::future::Future;
use std::io::{ErrorKind, Read, Write};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake};

use pyo3::exceptions::{PyRuntimeError, PyStopIteration};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::util::lock;

/// What a finished memq future turns into, once the GIL is held.
pub type Done = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;
/// A memq future, boxed.
pub type BoxFut = Pin<Box<dyn Future<Output = Done> + Send>>;

/// Whether a coroutine is running on an asyncio event loop in this thread.
pub fn in_loop(py: Python<'_>) -> PyResult<bool> {
    static GET: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let get = match GET.get(py) {
        Some(get) => get.bind(py),
        None => {
            // Until asyncio is imported no loop can run: do not import it (that takes
            // tens of milliseconds) for a program that never uses it.
            static MODULES: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
            let modules = MODULES.import(py, "sys", "modules")?;
            if !modules.contains(pyo3::intern!(py, "asyncio.events"))? {
                return Ok(false);
            }
            GET.import(py, "asyncio.events", "_get_running_loop")?
                .as_any()
        }
    };
    Ok(!get.call0()?.is_none())
}

#[cfg(unix)]
type Sock = std::os::unix::net::UnixStream;

/// The part of a reactor wakers share: the ids woken and the socket that wakes the loop.
#[derive(Debug)]
struct Shared {
    ready: Mutex<Vec<u64>>,
    signaled: AtomicBool,
    tx: Sock,
}

impl Shared {
    fn wake(&self, id: u64) {
        lock(&self.ready).push(id);
        if !self.signaled.swap(true, Ordering::AcqRel) {
            // A full socket means a byte is waiting already: the loop will drain.
            let _ = (&self.tx).write(&[1]);
        }
    }
}

struct IdWaker {
    shared: Arc<Shared>,
    id: u64,
}

impl Wake for IdWaker {
    fn wake(self: Arc<Self>) {
        self.shared.wake(self.id);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.shared.wake(self.id);
    }
}

/// One event loop's waking machinery (made by `memq._aio`, one per loop).
#[pyclass(frozen, module = "memq._memq")]
#[derive(Debug)]
pub struct Reactor {
    shared: Arc<Shared>,
    rx: Sock,
    waiting: Mutex<HashMap<u64, Py<PyAny>>>,
    next: AtomicU64,
}

#[pymethods]
impl Reactor {
    #[new]
    fn new() -> PyResult<Self> {
        let (tx, rx) = Sock::pair()?;
        tx.set_nonblocking(true)?;
        rx.set_nonblocking(true)?;
        Ok(Reactor {
            shared: Arc::new(Shared {
                ready: Mutex::new(Vec::new()),
                signaled: AtomicBool::new(false),
                tx,
            }),
            rx,
            waiting: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
        })
    }

    /// The file descriptor the loop watches for reading.
    fn fileno(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.rx.as_raw_fd()
    }

    /// Completes the asyncio futures of the awaitables woken since the last drain (the
    /// loop calls it when the socket is readable).
    fn drain(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.signaled.store(false, Ordering::Release);
        let mut sink = [0u8; 256];
        loop {
            match (&self.rx).read(&mut sink) {
                Ok(n) if n == sink.len() => continue,
                Ok(_) => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let ids = std::mem::take(&mut *lock(&self.shared.ready));
        for id in ids {
            let fut = lock(&self.waiting).remove(&id);
            if let Some(fut) = fut {
                let fut = fut.bind(py);
                if !fut.call_method0("done")?.is_truthy()? {
                    fut.call_method1("set_result", (py.None(),))?;
                }
            }
        }
        Ok(())
    }
}

fn reactor(py: Python<'_>) -> PyResult<Py<Reactor>> {
    static GET: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let get = GET.import(py, "memq._aio", "_reactor")?;
    Ok(get.call0()?.cast_into::<Reactor>()?.unbind())
}

/// A memq operation awaited from asyncio (see the module's docs).
#[pyclass(frozen, module = "memq._memq")]
pub struct Awaitable {
    state: Mutex<State>,
}

struct State {
    polled: bool,
    fut: Option<BoxFut>,
    waker: Option<(Py<Reactor>, std::task::Waker, u64)>,
}

impl std::fmt::Debug for Awaitable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Awaitable").finish_non_exhaustive()
    }
}

impl Awaitable {
    /// Wraps `fut` (nothing runs until it is awaited).
    pub fn new(fut: BoxFut) -> Self {
        Awaitable {
            state: Mutex::new(State {
                polled: false,
                fut: Some(fut),
                waker: None,
            }),
        }
    }

    fn forget(&self) {
        let (fut, waker) = {
            let mut st = lock(&self.state);
            (st.fut.take(), st.waker.take())
        };
        drop(fut); // outside the lock: dropping a reader's future may wake others
        if let Some((r, _, id)) = waker {
            lock(&r.get().waiting).remove(&id);
        }
    }
}

#[pymethods]
impl Awaitable {
    fn __await__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let mut st = lock(&self.state);
        let st = &mut *st;
        st.polled = true;
        let Some(fut) = st.fut.as_mut() else {
            return Err(PyRuntimeError::new_err(
                "cannot reuse an awaited memq operation",
            ));
        };
        if st.waker.is_none() {
            let r = reactor(py)?;
            let id = r.get().next.fetch_add(1, Ordering::Relaxed);
            let waker = std::task::Waker::from(Arc::new(IdWaker {
                shared: r.get().shared.clone(),
                id,
            }));
            st.waker = Some((r, waker, id));
        }
        let Some((r, waker, id)) = st.waker.as_ref() else {
            unreachable!("set above");
        };
        let mut cx = Context::from_waker(waker);
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(done) => {
                let id = *id;
                let r = r.clone_ref(py);
                st.fut = None;
                st.waker = None;
                lock(&r.get().waiting).remove(&id);
                let v = done(py)?;
                Err(PyStopIteration::new_err((v,)))
            }
            Poll::Pending => {
                let lp = get_loop(py)?;
                let f = lp.call_method0("create_future")?;
                f.setattr("_asyncio_future_blocking", true)?;
                lock(&r.get().waiting).insert(*id, f.clone().unbind());
                Ok(f.unbind())
            }
        }
    }

    fn send(&self, py: Python<'_>, _value: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.__next__(py)
    }

    #[pyo3(signature = (exc, _value=None, _tb=None))]
    fn throw(
        &self,
        exc: &Bound<'_, PyAny>,
        _value: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        // Drop the memq future: cancel safe, nothing is lost.
        self.forget();
        if exc.is_instance_of::<pyo3::types::PyType>() {
            Err(PyErr::from_type(
                exc.cast::<pyo3::types::PyType>()?.clone(),
                (),
            ))
        } else {
            Err(PyErr::from_value(exc.clone()))
        }
    }

    fn close(&self) {
        lock(&self.state).polled = true;
        self.forget();
    }
}

impl Drop for Awaitable {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if !st.polled && st.fut.is_some() {
            // As Python warns of a coroutine never awaited: the operation never ran.
            Python::attach(|py| {
                let _ = PyErr::warn(
                    py,
                    &py.get_type::<pyo3::exceptions::PyRuntimeWarning>(),
                    c"a memq operation (publish or receive) was never awaited: it did nothing",
                    1,
                );
            });
        }
    }
}

fn get_loop(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    static GET: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    GET.import(py, "asyncio.events", "get_running_loop")?
        .call0()
}

/// Wraps a memq future for `await`.
pub fn awaitable(py: Python<'_>, fut: BoxFut) -> PyResult<Py<PyAny>> {
    Ok(Py::new(py, Awaitable::new(fut))?.into_any())
}
