//! The boundary every export goes through: the panic guard, NULL checks, borrowing of
//! caller memory, handle allocation, and reading integers from C into Rust values.
//!
//! Each helper states in its `# Safety` list what the caller (the export, and through it
//! the C caller) must guarantee; the exports repeat those rules in the header.

use core::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard};

use crate::status::{memq_status, panicked, record_failure, with_detail};

/// The result of an export's body: `Err` carries the status to return.
pub(crate) type Outcome = Result<(), memq_status>;

/// Runs an export's body, turning a panic into `MEMQ_STATUS_PANIC` so that no unwind
/// crosses into C.
pub(crate) fn guard(body: impl FnOnce() -> Outcome) -> memq_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => memq_status::Ok,
        Ok(Err(status)) => record_failure(status),
        Err(payload) => {
            // The payload is a `&str` or `String` for every panic in this library; its
            // drop cannot unwind.
            panicked(&*payload);
            drop(payload);
            memq_status::Panic
        }
    }
}

/// [`guard`] for the `_free` functions, which return nothing.
pub(crate) fn guard_void(body: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(body));
}

/// Borrows the object behind a handle.
///
/// # Safety
///
/// `p` is NULL or points to a live `T` that is not mutated for `'a` (except through
/// interior mutability). `what` names the argument, for `memq_last_error_message`.
pub(crate) unsafe fn borrow<'a, T>(p: *const T, what: &str) -> Result<&'a T, memq_status> {
    // SAFETY: by this function's contract `p` is NULL (`as_ref` gives `None`) or valid
    // for shared reads for 'a.
    unsafe { p.as_ref() }.ok_or_else(|| null_argument(what))
}

/// `MEMQ_STATUS_NULL_POINTER`, with the argument named in the error detail.
pub(crate) fn null_argument(what: &str) -> memq_status {
    with_detail(memq_status::NullPointer, format_args!("{what} is NULL"))
}

/// `MEMQ_STATUS_INVALID_ARGUMENT`, with the argument named and the reason given in the
/// error detail (`"{what}: {why}"`).
pub(crate) fn invalid(what: &str, why: impl core::fmt::Display) -> memq_status {
    with_detail(memq_status::InvalidArgument, format_args!("{what}: {why}"))
}

/// Checks that a required out-parameter (named `what`) is not NULL.
pub(crate) fn out<T>(p: *mut T, what: &str) -> Result<OutPtr<T>, memq_status> {
    if p.is_null() {
        Err(null_argument(what))
    } else {
        Ok(OutPtr(p))
    }
}

/// Checks the arguments of a batch receive (`memq_*_recv_many`): `count_out` and the
/// array (named `array_name`) are not NULL, and `capacity` is not 0.
pub(crate) fn batch_out<T>(
    array: *mut *mut T,
    array_name: &str,
    capacity: usize,
    count_out: *mut usize,
) -> Result<OutPtr<usize>, memq_status> {
    let count_out = out(count_out, "count_out")?;
    if array.is_null() {
        return Err(null_argument(array_name));
    }
    if capacity == 0 {
        return Err(invalid("capacity", "a batch needs room for at least 1"));
    }
    Ok(count_out)
}

/// The body of an export that writes what it reads from a handle: borrows `handle`,
/// checks `value_out`, then writes what `value` makes of the handle to `*value_out`.
/// `names` are the two arguments' names, for `memq_last_error_message`.
///
/// # Safety
///
/// `handle` is NULL or points to a live `H`; `value_out` is NULL or valid for writing a
/// `T`.
pub(crate) unsafe fn get<H, T>(
    names: [&str; 2],
    handle: *const H,
    value_out: *mut T,
    value: impl FnOnce(&H) -> Result<T, memq_status>,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let handle = unsafe { borrow(handle, names[0]) }?;
        let value_out = out(value_out, names[1])?;
        let value = value(handle)?;
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { value_out.write(value) };
        Ok(())
    })
}

/// The body of the `_config_init` exports: writes `T`'s defaults to `*config`.
///
/// # Safety
///
/// `config` is NULL or valid for writing a `T`.
pub(crate) unsafe fn init_default<T: Default>(config: *mut T, what: &str) -> memq_status {
    guard(|| {
        let config = out(config, what)?;
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { config.write(T::default()) };
        Ok(())
    })
}

/// An optional out-parameter: NULL means the caller does not want the value.
pub(crate) fn optional_out<T>(p: *mut T) -> Option<OutPtr<T>> {
    (!p.is_null()).then_some(OutPtr(p))
}

/// A checked, non-NULL out-parameter. Written at most once, at the end of a call that
/// succeeds (or for the value that explains a failure).
#[derive(Debug)]
pub(crate) struct OutPtr<T>(*mut T);

impl<T> OutPtr<T> {
    /// Stores `value`.
    ///
    /// # Safety
    ///
    /// The pointer given to [`out`] is valid for writes of a `T` and suitably aligned.
    pub(crate) unsafe fn write(self, value: T) {
        debug_assert!(!self.0.is_null());
        // SAFETY: non-NULL by construction; valid and aligned by this function's
        // contract. `write` does not drop the (possibly uninitialised) old value.
        unsafe { self.0.write(value) }
    }
}

/// Borrows `len` bytes at `data` (an argument named `what`). NULL with a length of 0 is
/// the empty slice; NULL with a nonzero length is `MEMQ_STATUS_NULL_POINTER`.
///
/// # Safety
///
/// Unless it is NULL, `data` points to `len` initialised bytes that stay valid and
/// unmodified for `'a`.
pub(crate) unsafe fn bytes<'a>(
    data: *const u8,
    len: usize,
    what: &str,
) -> Result<&'a [u8], memq_status> {
    if len == 0 {
        return Ok(&[]);
    }
    if data.is_null() {
        return Err(with_detail(
            memq_status::NullPointer,
            format_args!("{what} is NULL with a length of {len}"),
        ));
    }
    if len > isize::MAX as usize {
        return Err(invalid(
            what,
            format_args!("a length of {len} bytes cannot be real"),
        ));
    }
    // SAFETY: non-NULL and at most isize::MAX bytes (checked above); readable,
    // initialised and unmodified for 'a by this function's contract.
    Ok(unsafe { core::slice::from_raw_parts(data, len) })
}

/// Borrows `len` items at `items` (an argument named `what`), with the same NULL rules
/// as [`bytes`].
///
/// # Safety
///
/// Unless it is NULL, `items` points to `len` initialised, aligned `T`s that stay valid
/// and unmodified for `'a`.
pub(crate) unsafe fn slice<'a, T>(
    items: *const T,
    len: usize,
    what: &str,
) -> Result<&'a [T], memq_status> {
    if len == 0 {
        return Ok(&[]);
    }
    if items.is_null() {
        return Err(with_detail(
            memq_status::NullPointer,
            format_args!("{what} is NULL with a count of {len}"),
        ));
    }
    if len
        .checked_mul(size_of::<T>())
        .is_none_or(|n| n > isize::MAX as usize)
    {
        return Err(invalid(
            what,
            format_args!("a count of {len} items cannot be real"),
        ));
    }
    // SAFETY: non-NULL, size within isize::MAX (checked above); valid, aligned and
    // unmodified for 'a by this function's contract.
    Ok(unsafe { core::slice::from_raw_parts(items, len) })
}

/// Borrows a NUL-terminated UTF-8 string (a topic or group name, the argument `what`).
///
/// # Safety
///
/// Unless it is NULL, `s` points to a NUL-terminated string that stays valid and
/// unmodified for `'a`.
pub(crate) unsafe fn name<'a>(s: *const c_char, what: &str) -> Result<&'a str, memq_status> {
    if s.is_null() {
        return Err(null_argument(what));
    }
    // SAFETY: non-NULL; NUL-terminated and valid for 'a by this function's contract.
    let s = unsafe { CStr::from_ptr(s) };
    s.to_str()
        .map_err(|e| invalid(what, format_args!("not valid UTF-8 ({e})")))
}

/// Locks the state behind a handle. A lock is poisoned only by a panic caught earlier in
/// a call on the same handle, which is reported as `MEMQ_STATUS_PANIC` from then on.
pub(crate) fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>, memq_status> {
    m.lock().map_err(|_| {
        with_detail(
            memq_status::Panic,
            "this handle is unusable: an earlier call on it panicked (it can still be freed)",
        )
    })
}

/// Moves `value` to the heap and hands the pointer to C, which frees it with
/// [`release`].
pub(crate) fn into_handle<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// Takes back and drops a handle made by [`into_handle`]; NULL does nothing.
///
/// # Safety
///
/// `p` is NULL or came from [`into_handle`] with the same `T`, and is not used again.
pub(crate) unsafe fn release<T>(p: *mut T) {
    if !p.is_null() {
        // SAFETY: by this function's contract `p` came from `Box::into_raw` for this `T`
        // and ownership comes back here exactly once.
        drop(unsafe { Box::from_raw(p) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_a_status() {
        assert_eq!(guard(|| Ok(())), memq_status::Ok);
        assert_eq!(guard(|| Err(memq_status::Full)), memq_status::Full);
        assert_eq!(
            guard(|| panic!("deliberate panic, testing the boundary")),
            memq_status::Panic
        );
        let s = String::from("deliberate panic with a String payload, testing the boundary");
        assert_eq!(guard(move || std::panic::panic_any(s)), memq_status::Panic);
        guard_void(|| panic!("deliberate panic in a free, testing the boundary"));
    }

    #[test]
    fn null_and_empty_inputs() {
        // SAFETY: NULL pointers, which these helpers must reject without reading.
        unsafe {
            assert_eq!(
                borrow::<u8>(core::ptr::null(), "p"),
                Err(memq_status::NullPointer)
            );
            assert_eq!(bytes(core::ptr::null(), 0, "data"), Ok(&[][..]));
            assert_eq!(
                bytes(core::ptr::null(), 1, "data"),
                Err(memq_status::NullPointer)
            );
            assert_eq!(slice::<u64>(core::ptr::null(), 0, "items"), Ok(&[][..]));
            assert_eq!(
                name(core::ptr::null(), "name"),
                Err(memq_status::NullPointer)
            );
            release::<u8>(core::ptr::null_mut());
        }
        let dangling = core::ptr::NonNull::dangling().as_ptr();
        // SAFETY: a non-NULL pointer with a length too large to be real is rejected
        // before it is read.
        let too_long = unsafe { bytes(dangling, usize::MAX, "data") };
        assert_eq!(too_long, Err(memq_status::InvalidArgument));
        assert!(out::<u8>(core::ptr::null_mut(), "p").is_err());
        assert!(optional_out::<u8>(core::ptr::null_mut()).is_none());
    }
}
