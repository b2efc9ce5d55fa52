//! Readers: everything that takes messages out of a partition's log.
pub(crate) mod group;
pub(crate) mod subscriber;
