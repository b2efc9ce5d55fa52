//! memq-core's integration tests, one module per file beside this one, built as one
//! test binary: each binary of its own monomorphised and optimised the whole engine
//! again, and building 20 of them was most of the check's build time for this crate
//! (125 s of the 2-core machine's wall time, against 76 s as one). Kept apart, each for
//! a reason (their own `[[test]]` in Cargo.toml): `alloc` (a counting global allocator,
//! which would count every other test's allocations), `idle` (it measures the process's
//! CPU time, which other tests running beside it would spend), `loom` (built only with
//! `--cfg loom`), `model` (the reference model, which stage 75 runs again with more
//! cases) and `stress` (which the sanitizers build on its own).
//!
//! Run one file's tests with its module as the filter: `cargo test -p memq-core --test
//! suite -- wakeups::`.
//!
//! Without the `std` feature (stage 40 runs the suite that way, on the `spin` locks that
//! bare-metal targets get) the tests of the blocking API, of `StdClock` and the default
//! timer, and of explicit-ack groups on the default clock (a topic without `std` and
//! without a clock refuses them: `Error::ClockRequired`) are compiled out, and the
//! imports and helpers only they use go unused.
#![cfg_attr(not(feature = "std"), allow(unused, unused_extern_crates))]

/// The fuzz tests' helpers, shared by several modules.
#[allow(dead_code)]
mod fuzz_support;

mod acks;
mod broker;
mod errors;
mod group;
mod liveness;
// Nested blocking calls: the blocking API needs `std`.
#[cfg(feature = "std")]
mod nested_waits;
mod next_offsets;
mod overflow;
mod partition;
mod reader_liveness;
mod release;
mod ring_engine;
mod send_sync;
mod subscriber;
mod timed_liveness;
mod timer_entries;
mod topic;
mod ttl;
mod waker_drop;
mod wakeups;
