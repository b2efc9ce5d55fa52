//! One module per implementation under test. Each says only how to wire the scenario
//! shapes with that implementation's public API; the drivers do the measuring.

pub mod async_chan;
pub mod crossbeam_chan;
pub mod flume_chan;
pub mod kanal_chan;
pub mod memq_ring;
pub mod memq_topic;
pub mod tokio_broadcast;
pub mod tokio_memq_topic;
pub mod tokio_mpsc;
