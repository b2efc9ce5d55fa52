//! Consumer groups.
mod consumer;
pub(crate) use consumer::GroupShared;
pub use consumer::{Consumer, GroupRecv, GroupRecvIf, GroupRecvMany};
