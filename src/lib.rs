//! Examples and benchmarks for memq live in `examples/` and `benches/`.
