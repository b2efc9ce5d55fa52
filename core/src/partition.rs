//! A partition: its state under the partition's lock ([`PartLog`]).

mod state;

pub(crate) use state::{Fetcher, GroupId, GroupPart, PartLog};
