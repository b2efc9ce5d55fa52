//! The runnable examples of memq live in `examples/` (`cargo run --example quickstart`);
//! the benchmarks are the `memq-bench` package in `bench/`.
