//! Time: the clock memq reads, the timers that wake waiting tasks, and the alarms that
//! tie one to the other.
//!
//! The bottom layer of memq-core beside [`sync`](crate::sync): it depends on the sync
//! facade and nothing else of the crate's, and everything above (the log's TTL, the
//! publish path's parked publishers, explicit-ack leases) uses it.
//!
//! - `clock`: the [`Clock`] trait, [`ManualClock`], `StdClock`, and how memq reads a
//!   clock (`u64` nanoseconds, anchored when the clock's epoch is far back);
//! - `timer`: the [`Timer`] trait, [`TimerEntry`], and `ThreadTimer` with `std`;
//! - `alarm`: one timer wake-up of one task, which knows whether it rang and withdraws
//!   itself when dropped.

mod alarm;
mod clock;
mod timer;

pub(crate) use alarm::{Alarm, Arm};
#[cfg(feature = "std")]
pub use clock::StdClock;
pub(crate) use clock::{anchored, as_nanos};
pub use clock::{Clock, ManualClock};
#[cfg(feature = "std")]
pub use timer::ThreadTimer;
pub use timer::{Timer, TimerEntry};
