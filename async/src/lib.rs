//! memq: an in-process message queue with Kafka-style semantics.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![doc(test(attr(deny(warnings))))]

pub use memq_core::*;

#[cfg(feature = "serde")]
pub mod codec;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
