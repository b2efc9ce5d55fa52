//! memq's integration tests, one module per file beside this one, built as one test
//! binary: each binary of its own compiled the engine, the runtimes and their adapters
//! again (the tests' build took 167 s of the 2-core machine's wall time). `idle` has a
//! `[[test]]` of its own in Cargo.toml: it measures the process's CPU time, which other
//! tests running beside it would spend. The modules' panic hooks each quiet only the
//! panics marked `memq-test-panic` and hand every other on. Run one file's tests with
//! its module as the filter: `cargo test -p memq --all-features --test suite -- rt::`.

mod block_on;
mod codec;
mod pool_stress;
mod rt;
mod runtimes;
mod send_sync;
