//! Shared helpers: argument conversion (payloads, keys, timeouts), the interruptible
//! wait, and the slot that lends a reader to one call at a time.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyMemoryView, PyString};

use crate::errors::Exc;

/// The longest stretch a blocking call waits with the GIL released before it looks for
/// a pending signal (Ctrl-C). This is a bounded wait, not busy-waiting: the thread
/// sleeps in memq's wait list for up to this long and wakes at once when a message or
/// room arrives; only an idle wait wakes 20 times a second to give Python a chance to
/// run its signal handlers (`py.check_signals()`).
pub const SIGNAL_SLICE: Duration = Duration::from_millis(50);

/// The longest time limit accepted: about 31 years. Larger values are refused, not
/// silently clamped (pass `None` to wait as long as it takes).
pub const MAX_TIMEOUT_SECS: f64 = 1e9;

/// Converts a payload (any bytes-like object) to `Bytes`, copying it once.
pub fn payload(obj: &Bound<'_, PyAny>) -> PyResult<Bytes> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Bytes::copy_from_slice(b.as_bytes()));
    }
    if obj.is_instance_of::<PyString>() {
        return Err(Exc::InvalidType.err(
            "a payload is bytes-like (bytes, bytearray, memoryview, ...), not str: encode it first",
        ));
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(Bytes::from(b.to_vec()));
    }
    match buffer_bytes(obj) {
        Some(b) => Ok(Bytes::copy_from_slice(b?.as_bytes())),
        None => Err(Exc::InvalidType.err(format!(
            "a payload is bytes-like (bytes, bytearray, memoryview, ...), not {}",
            type_name(obj)
        ))),
    }
}

/// Converts a key: bytes-like, or `str` (its UTF-8 bytes).
pub fn key(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(s.to_cow()?.as_bytes().to_vec());
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    match buffer_bytes(obj) {
        Some(b) => Ok(b?.as_bytes().to_vec()),
        None => Err(Exc::InvalidType.err(format!(
            "a key is str or bytes-like, not {}",
            type_name(obj)
        ))),
    }
}

/// Another buffer-protocol object (memoryview, array, numpy, ...) as `bytes`; `None` if
/// `obj` has no buffer. (The limited API of Python 3.9, which the abi3 wheel targets,
/// has no buffer access, so this goes through `memoryview(obj).tobytes()`.)
fn buffer_bytes<'py>(obj: &Bound<'py, PyAny>) -> Option<PyResult<Bound<'py, PyBytes>>> {
    let view = PyMemoryView::from(obj).ok()?;
    Some(
        view.call_method0("tobytes")
            .and_then(|b| b.cast_into::<PyBytes>().map_err(PyErr::from)),
    )
}

/// The name of `obj`'s type, for messages.
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// A number of seconds: finite, at least 0, at most [`MAX_TIMEOUT_SECS`].
pub fn seconds(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Duration> {
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(Exc::InvalidType.err(format!("{what} is a number of seconds, not bool")));
    }
    let s: f64 = obj.extract().map_err(|_| {
        Exc::InvalidType.err(format!(
            "{what} is a number of seconds, not {}",
            type_name(obj)
        ))
    })?;
    if s.is_nan() {
        return Err(Exc::InvalidArgument.err(format!("{what} is NaN")));
    }
    if s < 0.0 {
        return Err(Exc::InvalidArgument.err(format!("{what} is negative ({s})")));
    }
    if s > MAX_TIMEOUT_SECS {
        return Err(Exc::InvalidArgument.err(format!(
            "{what} of {s:e} seconds is too large (at most {MAX_TIMEOUT_SECS:e}; None waits as long as it takes)"
        )));
    }
    Ok(Duration::from_secs_f64(s))
}

/// An optional timeout: `None` waits as long as it takes.
pub fn timeout(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Duration>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => seconds(o, "timeout").map(Some),
    }
}

/// Whether this is Python's main thread, the only one that runs signal handlers.
fn main_thread(py: Python<'_>) -> bool {
    static MAIN: pyo3::sync::PyOnceLock<u64> = pyo3::sync::PyOnceLock::new();
    let ident = |py: Python<'_>| -> PyResult<u64> {
        py.import("_thread")?.call_method0("get_ident")?.extract()
    };
    let main = MAIN.get_or_try_init(py, || -> PyResult<u64> {
        py.import("threading")?
            .call_method0("main_thread")?
            .getattr("ident")?
            .extract()
    });
    match (main, ident(py)) {
        (Ok(m), Ok(i)) => *m == i,
        _ => true, // slice, to be safe
    }
}

/// Waits with the GIL released until `step` reports an outcome or `limit` passes (then
/// `Ok(None)`). `step(d)` waits at most `d` and returns `None` if nothing happened. On
/// the main thread the wait goes in slices of at most [`SIGNAL_SLICE`], between which
/// the GIL is taken back to run pending signal handlers, so Ctrl-C raises
/// `KeyboardInterrupt` within about 50 ms. Other threads never run signal handlers:
/// there the wait is one stretch (in slices of an hour).
pub fn wait<R: Send>(
    py: Python<'_>,
    limit: Option<Duration>,
    mut step: impl FnMut(Duration) -> Option<R> + Send,
) -> PyResult<Option<R>> {
    let deadline = limit.map(|d| Instant::now() + d);
    let most = if main_thread(py) {
        SIGNAL_SLICE
    } else {
        Duration::from_secs(3600)
    };
    loop {
        let slice = match deadline {
            None => most,
            Some(end) => end.saturating_duration_since(Instant::now()).min(most),
        };
        if let Some(r) = py.detach(|| step(slice)) {
            return Ok(Some(r));
        }
        py.check_signals()?;
        if let Some(end) = deadline {
            if Instant::now() >= end {
                return Ok(None);
            }
        }
    }
}

/// Locks `m`, going on with the value if a holder panicked (every state a holder leaves
/// here is consistent).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

enum SlotState<T> {
    Ready(T),
    Lent { close: bool },
    Closed,
}

/// Holds a reader and lends it to one call at a time: a reader is `&mut` in Rust, and a
/// second call on the same Python object while the first waits is `Busy`, never a
/// data race. Closing drops the reader (at once, or when the call that holds it ends).
pub struct Slot<T> {
    state: Mutex<SlotState<T>>,
    what: &'static str,
}

impl<T> std::fmt::Debug for Slot<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("what", &self.what)
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl<T> std::fmt::Debug for Lease<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("what", &self.slot.what)
            .finish()
    }
}

impl<T> Slot<T> {
    /// A slot holding `value`; `what` names it in errors ("subscriber", ...).
    pub fn new(value: T, what: &'static str) -> Arc<Self> {
        Arc::new(Slot {
            state: Mutex::new(SlotState::Ready(value)),
            what,
        })
    }

    /// Lends the value.
    ///
    /// # Errors
    ///
    /// `Closed` after [`Slot::close`]; `Busy` while another call holds it.
    pub fn take(self: &Arc<Self>) -> PyResult<Lease<T>> {
        let mut st = lock(&self.state);
        match std::mem::replace(&mut *st, SlotState::Lent { close: false }) {
            SlotState::Ready(v) => Ok(Lease {
                slot: self.clone(),
                value: Some(v),
            }),
            other => {
                let closed = matches!(other, SlotState::Closed | SlotState::Lent { close: true });
                *st = other;
                if closed {
                    Err(Exc::Closed.err(format!("the {} is closed", self.what)))
                } else {
                    Err(Exc::Busy.err(format!(
                        "the {} is in use by another call (one call at a time per {})",
                        self.what, self.what
                    )))
                }
            }
        }
    }

    /// Closes: drops the value now if it is not lent, else when its lease ends.
    pub fn close(&self) {
        let old = {
            let mut st = lock(&self.state);
            match &mut *st {
                SlotState::Lent { close } => {
                    *close = true;
                    None
                }
                _ => Some(std::mem::replace(&mut *st, SlotState::Closed)),
            }
        };
        drop(old); // outside the lock: dropping a reader wakes others
    }

    /// Whether [`Slot::close`] was called.
    pub fn is_closed(&self) -> bool {
        matches!(
            *lock(&self.state),
            SlotState::Closed | SlotState::Lent { close: true }
        )
    }

    /// Runs `f` on the value if it is not lent or closed.
    pub fn peek<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
        match &*lock(&self.state) {
            SlotState::Ready(v) => Some(f(v)),
            _ => None,
        }
    }
}

/// A value lent by a [`Slot`]; it goes back when the lease is dropped.
pub struct Lease<T> {
    slot: Arc<Slot<T>>,
    value: Option<T>,
}

impl<T> Lease<T> {
    /// The value lent.
    pub fn get(&mut self) -> &mut T {
        self.value
            .as_mut()
            .expect("a lease holds its value until dropped")
    }
}

impl<T> Drop for Lease<T> {
    fn drop(&mut self) {
        let v = self.value.take();
        let dropped = {
            let mut st = lock(&self.slot.state);
            match (&*st, v) {
                (SlotState::Lent { close: false }, Some(v)) => {
                    *st = SlotState::Ready(v);
                    None
                }
                (_, v) => {
                    *st = SlotState::Closed;
                    v
                }
            }
        };
        drop(dropped);
    }
}

/// An integer argument in `min..=max`: a bool or a non-integer is `InvalidType`, a value
/// out of range `InvalidArgument` (never a silently wrapped value).
pub fn int(obj: &Bound<'_, PyAny>, what: &str, min: i128, max: i128) -> PyResult<i128> {
    if obj.is_instance_of::<pyo3::types::PyBool>() || !obj.is_instance_of::<pyo3::types::PyInt>() {
        return Err(Exc::InvalidType.err(format!("{what} is an int, not {}", type_name(obj))));
    }
    let v: i128 = obj
        .extract()
        .map_err(|_| Exc::InvalidArgument.err(format!("{what} is out of range")))?;
    if v < min || v > max {
        return Err(
            Exc::InvalidArgument.err(format!("{what} must be from {min} to {max}, not {v}"))
        );
    }
    Ok(v)
}

/// `int` for an optional argument.
pub fn opt_int(
    obj: Option<&Bound<'_, PyAny>>,
    what: &str,
    min: i128,
    max: i128,
) -> PyResult<Option<i128>> {
    match obj {
        Some(o) if !o.is_none() => int(o, what, min, max).map(Some),
        _ => Ok(None),
    }
}

/// Where a reader starts: "earliest", "latest", or an offset.
pub fn start(obj: &Bound<'_, PyAny>) -> PyResult<memq::StartAt> {
    if let Ok(s) = obj.cast::<PyString>() {
        return match &*s.to_cow()? {
            "earliest" => Ok(memq::StartAt::Earliest),
            "latest" => Ok(memq::StartAt::Latest),
            other => Err(Exc::InvalidArgument.err(format!(
                "start is \"earliest\", \"latest\" or an offset, not {other:?}"
            ))),
        };
    }
    let off = int(obj, "start", 0, i128::from(u64::MAX))?;
    Ok(memq::StartAt::Offset(off as u64))
}

/// `start` for an optional argument ("earliest" if absent).
pub fn start_opt(obj: Option<&Bound<'_, PyAny>>) -> PyResult<memq::StartAt> {
    match obj {
        Some(o) if !o.is_none() => start(o),
        _ => Ok(memq::StartAt::Earliest),
    }
}
