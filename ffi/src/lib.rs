//! memq-ffi: the C ABI of memq, built as `libmemq` (a cdylib and a staticlib) with the
//! header `include/memq.h`, which cbindgen generates from this crate.
//!
//! This crate adds handles and status codes over memq-core's public API and nothing else:
//! no second engine, no reaching into the log. It owns the conversions at the boundary
//! (pointers, integers, timeouts, panics) and may not touch the core.
//!
//! # Conventions
//!
//! - Every object is an opaque handle made by a `memq_*_new` function (or handed out by a
//!   receive) and released by its `memq_*_free` function; `free(NULL)` does nothing.
//!   A `memq_delivery` (a lease in an explicit-ack group) is freed like any other handle,
//!   whether or not it was acked, nacked or rejected: settling ends the lease, freeing
//!   ends the handle.
//! - Every function but `memq_version`, `memq_status_str`, `memq_last_error_message` and
//!   the `_free` functions returns a [`memq_status`]; `MEMQ_STATUS_OK` is 0. Running out
//!   of messages, time or room are statuses, not crashes. [`memq_last_error_message`]
//!   says which argument was wrong and why, in the words of memq-core's errors.
//! - Arguments come in one order: the handle, what the call reads, `timeout_ms`, then
//!   what it writes (a caller's buffer or array with its capacity, then out-parameters,
//!   `lagged_out` last).
//! - Out-parameters are written only when the function returns `MEMQ_STATUS_OK`; the few
//!   that exist to explain a failure (a lag count, a required buffer length) say so.
//! - Every pointer is checked for NULL. Enumerations from C (overflow policy, start
//!   position, backoff) are read as `uint32_t` and validated.
//! - No panic crosses the boundary: each export catches it and returns
//!   `MEMQ_STATUS_PANIC`.
//! - Blocking calls take `timeout_ms`: 0 does not wait, a negative value waits forever, a
//!   positive value waits at most that many milliseconds.
//! - Each function states its thread safety.
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
// The exported names are the C names.
#![allow(non_camel_case_types)]

// The exporting modules, in the order the header presents them (cbindgen follows the
// source; rustfmt keeps groups separated by blank lines apart).
mod status;

mod topic;

mod broker;

mod reader;

mod message;

mod ack;

mod dead_letter;

mod durable;

mod durable_dead_letter;

// Helpers.
mod boundary;
mod wait;

pub use ack::*;
pub use broker::*;
pub use dead_letter::*;
pub use durable::*;
pub use durable_dead_letter::*;
pub use message::*;
pub use reader::*;
pub use status::*;
pub use topic::*;
