//! memq-redis's integration tests, one module per file beside this one, built as one
//! test binary: each binary of its own compiled and linked the client, the engine and
//! Tokio again (the tests' build took 187 s of the 2-core machine's wall time). Run one
//! file's tests with its module as the filter: `cargo test -p memq-redis --features
//! testing --test suite -- cluster::`.

mod common;

mod any;
mod bridge_durable;
mod bridge_restart;
mod cluster;
mod fault;
mod processes;
mod single_node;
mod smol;
