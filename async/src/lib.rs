//! memq: an in-process message queue with Kafka-style semantics.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![doc(test(attr(deny(warnings))))]

pub use memq_core::*;

#[cfg(feature = "serde")]
pub mod codec;
