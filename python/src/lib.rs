//! memq for Python: the native module `memq._memq` behind the package `memq`.
//!
//! It binds the `memq` crate directly (not the C ABI): byte topics with subscribers,
//! consumer groups and explicit-ack groups, a broker, durable topics, asyncio awaitables
//! and worker pools running Python handlers on native threads. Every call that waits
//! releases the GIL and wakes for Ctrl-C; every error is a `memq.Error` subclass.
//!
//! Layers, bottom up: `errors` and `util` (conversions, the interruptible wait, the slot
//! that lends a reader to one call); `reader` (what all readers share); `message`;
//! `aio` (asyncio); `readers` and `topic`; `durable`; `pool` on top.

#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![forbid(unsafe_code)]

use pyo3::prelude::*;

pub mod aio;
pub mod durable;
pub mod errors;
pub mod message;
pub mod pool;
pub mod reader;
pub mod readers;
pub mod topic;
pub mod util;

/// The native module.
#[pymodule]
fn _memq(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<topic::Topic>()?;
    m.add_class::<topic::DeadLetterTopic>()?;
    m.add_class::<topic::Broker>()?;
    m.add_class::<readers::Subscriber>()?;
    m.add_class::<readers::Consumer>()?;
    m.add_class::<readers::AckConsumer>()?;
    m.add_class::<readers::DeadLetterSubscriber>()?;
    m.add_class::<message::Message>()?;
    m.add_class::<message::Delivery>()?;
    m.add_class::<message::DeadLetter>()?;
    m.add_class::<durable::DurableDeadLetters>()?;
    m.add_class::<durable::DurableTopic>()?;
    m.add_class::<durable::DurableSubscriber>()?;
    m.add_class::<durable::DurableConsumer>()?;
    m.add_class::<pool::Pool>()?;
    m.add_class::<pool::Results>()?;
    m.add_class::<pool::WorkResult>()?;
    m.add_class::<aio::Reactor>()?;
    m.add_class::<aio::Awaitable>()?;
    m.add_function(wrap_pyfunction!(key_partition, m)?)?;
    Ok(())
}

/// The partition a key goes to among `partitions` (64-bit FNV-1a, the same in every
/// language binding).
#[pyfunction]
fn key_partition(key: &Bound<'_, PyAny>, partitions: &Bound<'_, PyAny>) -> PyResult<u32> {
    let k = util::key(key)?;
    let n = util::int(partitions, "partitions", 1, i128::from(u32::MAX))? as u32;
    Ok(memq::key_partition(&k, n))
}
