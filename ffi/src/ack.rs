//! Explicit acknowledgements from C: at-least-once consumer groups whose members receive
//! each message as a lease (a `memq_delivery`) and settle it: ack it when done, nack it to
//! have it delivered again, reject it to send it to the dead-letter topic, or touch it to
//! keep it longer. A lease that runs out, a delivery freed unsettled and the leases of a
//! member that leaves all return the message to the group; after `max_deliveries`
//! attempts it goes to the group's dead-letter topic (see `dead_letter`).

use core::ffi::c_char;
use core::time::Duration;
use std::sync::Mutex;

use bytes::Bytes;
use memq_core::{AckConfig, AckConsumer, Backoff, Delivery, Error, Message};

use crate::boundary::{
    batch_out, borrow, get, guard, guard_void, init_default, into_handle, invalid, lock, name,
    optional_out, out, release, slice, Outcome,
};
use crate::dead_letter::memq_dead_letter_topic;
use crate::message::memq_message_meta;
use crate::reader::missed;
use crate::status::{memq_status, Miss};
use crate::topic::{memq_start, memq_topic};
use crate::wait::Wait;

/// How long a message waits before it is delivered again after a nack without a delay
/// (`memq_delivery_nack`), a delivery freed unsettled, or a lease that ran out
/// (`memq_ack_config.backoff`, a `uint32_t`; other values are
/// `MEMQ_STATUS_INVALID_ARGUMENT`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum memq_backoff {
    /// At once. `backoff_initial_ms` and `backoff_max_ms` are not read.
    None = 0,
    /// `backoff_initial_ms` before every redelivery. `backoff_max_ms` is not read.
    Fixed = 1,
    /// `backoff_initial_ms` after the first delivery, doubling with each further one up to
    /// `backoff_max_ms`. Needs `0 < backoff_initial_ms <= backoff_max_ms`.
    Exponential = 2,
}

/// How an explicit-ack group is set up. Fill it with `memq_ack_config_init`, then change
/// fields. Read only when a member creates the group: a member joining an existing group
/// gets that group's settings (its config is still checked).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct memq_ack_config {
    /// How many milliseconds (at least 1) a delivery may stay unsettled before its lease
    /// runs out and the message returns to the group; `memq_delivery_touch` restarts it.
    pub ack_wait_ms: u64,
    /// After this many deliveries without an ack, a message goes to the dead-letter topic
    /// (or, without one, is dropped and counted as dead-lettered). 0: unlimited.
    pub max_deliveries: u32,
    /// A `memq_backoff` value.
    pub backoff: u32,
    /// The fixed delay, or the first delay of an exponential backoff, in milliseconds.
    pub backoff_initial_ms: u64,
    /// The longest delay of an exponential backoff, in milliseconds.
    pub backoff_max_ms: u64,
    /// At most this many unacknowledged messages per partition (which is also flow
    /// control: a member receives nothing new past it). At least 1.
    pub max_in_flight: usize,
    /// The dead-letter topic, or NULL for none. It needs to be live only during
    /// `memq_ack_consumer_new`: the group keeps a reference of its own.
    pub dead_letter: *const memq_dead_letter_topic,
}

impl Default for memq_ack_config {
    fn default() -> Self {
        Self {
            ack_wait_ms: 30_000,
            max_deliveries: 0,
            backoff: memq_backoff::None as u32,
            backoff_initial_ms: 0,
            backoff_max_ms: 0,
            max_in_flight: 1024,
            dead_letter: core::ptr::null(),
        }
    }
}

impl memq_ack_config {
    fn backoff(&self) -> Result<Backoff, memq_status> {
        const NONE: u32 = memq_backoff::None as u32;
        const FIXED: u32 = memq_backoff::Fixed as u32;
        const EXPONENTIAL: u32 = memq_backoff::Exponential as u32;
        let initial = Duration::from_millis(self.backoff_initial_ms);
        match self.backoff {
            NONE => Ok(Backoff::none()),
            FIXED => Ok(Backoff::fixed(initial)),
            EXPONENTIAL
                if self.backoff_initial_ms > 0
                    && self.backoff_initial_ms <= self.backoff_max_ms =>
            {
                Ok(Backoff::exponential(
                    initial,
                    Duration::from_millis(self.backoff_max_ms),
                ))
            }
            EXPONENTIAL => Err(invalid(
                "config->backoff_initial_ms",
                "an exponential backoff needs 0 < backoff_initial_ms <= backoff_max_ms",
            )),
            other => Err(invalid(
                "config->backoff",
                format_args!("{other} is not a memq_backoff value"),
            )),
        }
    }

    /// The core's config.
    ///
    /// # Safety
    ///
    /// `self.dead_letter` is NULL or a live dead-letter topic handle.
    unsafe fn to_core(self) -> Result<AckConfig<Bytes>, memq_status> {
        // The core's words for the core's checks ("ack_wait must be longer than zero").
        if self.ack_wait_ms == 0 {
            return Err(Error::ZeroAckWait.into());
        }
        if self.max_in_flight == 0 {
            return Err(Error::ZeroInFlight.into());
        }
        let mut config = AckConfig::new()
            .ack_wait(Duration::from_millis(self.ack_wait_ms))
            .backoff(self.backoff()?)
            .max_in_flight(self.max_in_flight);
        if self.max_deliveries > 0 {
            config = config.max_deliveries(self.max_deliveries);
        }
        if !self.dead_letter.is_null() {
            // SAFETY: non-NULL, so a live handle by this function's contract.
            let dead_letter = unsafe { borrow(self.dead_letter, "config->dead_letter") }?;
            config = config.dead_letter(dead_letter.topic.clone());
        }
        Ok(config)
    }
}

/// A member of an explicit-ack group: receives each message of the group's partitions
/// that no other member holds, as a `memq_delivery` to settle.
///
/// Ownership: made by `memq_ack_consumer_new` and released by `memq_ack_consumer_free`,
/// once. Freeing it leaves the group and returns every lease it holds to the group at
/// once; the deliveries it handed out stay valid handles (still to be freed with
/// `memq_delivery_free`), whose settling calls then return `MEMQ_STATUS_LEASE_EXPIRED`.
/// The group, its settings and its position remain on the topic.
#[derive(Debug)]
pub struct memq_ack_consumer {
    consumer: Mutex<AckConsumer<Bytes>>,
}

/// A message leased to one member of an explicit-ack group.
///
/// Ownership: handed out by `memq_ack_consumer_recv(_many)` and always released by
/// `memq_delivery_free`, exactly once, whatever happened to its lease. Settling it
/// (`memq_delivery_ack`, `memq_delivery_nack`, `memq_delivery_nack_after`,
/// `memq_delivery_reject`) ends the lease, not the handle: its payload and metadata stay
/// readable until `memq_delivery_free`. At most one settling call succeeds; from then on
/// (and after any of them returns `MEMQ_STATUS_LEASE_EXPIRED`) every settling call and
/// `memq_delivery_touch` return `MEMQ_STATUS_LEASE_EXPIRED`. Freeing a delivery whose
/// lease is still held returns the message to the group after the backoff delay, as
/// `memq_delivery_nack` does. A delivery may outlive its consumer and its topic.
#[derive(Debug)]
pub struct memq_delivery {
    /// The message, kept readable after the lease is settled (the payload is shared).
    message: Message<Bytes>,
    deliveries: u32,
    /// The lease; `None` once settled.
    lease: Mutex<Option<Delivery<Bytes>>>,
}

/// Counters of an explicit-ack group.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct memq_ack_group_stats {
    /// Current members.
    pub members: usize,
    /// Messages past the group's committed position (its lowest unacknowledged offset),
    /// summed over the partitions.
    pub lag: u64,
    /// Deliveries to members, redeliveries included.
    pub delivered: u64,
    /// Messages delivered and not yet settled for good: leased, or waiting to be delivered
    /// again.
    pub in_flight: u64,
    /// Redeliveries.
    pub redelivered: u64,
    /// Messages acknowledged.
    pub acked: u64,
    /// Messages sent to the dead-letter topic (or dropped, without one).
    pub dead_lettered: u64,
    /// Unacknowledged messages evicted (`MEMQ_OVERFLOW_DROP_OLDEST` or TTL) before they
    /// were acknowledged.
    pub evicted_unacked: u64,
    /// New messages evicted or expired before the group read them: the sum of the lag
    /// counts its members were given (`MEMQ_STATUS_LAGGED`).
    pub lagged: u64,
}

/// Fills `config` with the defaults: 30 s leases, unlimited deliveries, immediate
/// redelivery (`MEMQ_BACKOFF_NONE`), 1024 messages in flight per partition, no
/// dead-letter topic.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if `config` is NULL.
///
/// Thread safety: may be called from any thread.
///
/// # Safety
///
/// `config` is NULL or valid for writing a `memq_ack_config`.
#[no_mangle]
pub unsafe extern "C" fn memq_ack_config_init(config: *mut memq_ack_config) -> memq_status {
    // SAFETY: the caller passes NULL or a pointer valid for writes.
    unsafe { init_default(config, "config") }
}

/// Joins the explicit-ack group `group` of `topic` and writes the new member to
/// `*consumer_out`; free it with `memq_ack_consumer_free`. A new group is created with
/// `config` at `start` (a `memq_start`; `offset` is read only for `MEMQ_START_OFFSET`);
/// an existing group keeps its settings and position (`start` and `config` must still be
/// valid, but are not used). Each message is leased to one member at a time; on a
/// partitioned topic each partition is read by one member, rebalanced as members join and
/// leave. The group's committed position in a partition is its lowest unacknowledged
/// offset: under `MEMQ_OVERFLOW_BLOCK`, publishers wait for it (but not for a message a
/// TTL evicted while unacknowledged: the acknowledged messages after it are not held).
///
/// Returns `MEMQ_STATUS_GROUP_MODE_MISMATCH` if `group` is an automatic-commit group
/// (made by `memq_consumer_new`); `MEMQ_STATUS_INVALID_ARGUMENT` for an unknown `start`
/// or `config->backoff`, an `ack_wait_ms` or `max_in_flight` of 0, an exponential backoff
/// without `0 < backoff_initial_ms <= backoff_max_ms`, or a `group` that is not UTF-8;
/// `MEMQ_STATUS_OUT_OF_RANGE` for a new group's offset past the end of a partition;
/// `MEMQ_STATUS_NULL_POINTER` if `topic`, `group`, `config` or `consumer_out` is NULL.
///
/// Thread safety: may be called from any thread, concurrently with any call on `topic`
/// (and on `config->dead_letter`) except freeing it.
///
/// # Safety
///
/// `topic` is NULL or a live topic handle; `group` is NULL or a NUL-terminated string;
/// `config` is NULL or points to a `memq_ack_config` whose `dead_letter` is NULL or a live
/// dead-letter topic handle; `consumer_out` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_ack_consumer_new(
    topic: *const memq_topic,
    group: *const c_char,
    start: u32,
    offset: u64,
    config: *const memq_ack_config,
    consumer_out: *mut *mut memq_ack_consumer,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let topic = unsafe { borrow(topic, "topic") }?;
        // SAFETY: the caller passes NULL or a NUL-terminated string.
        let group = unsafe { name(group, "group") }?;
        // SAFETY: the caller passes NULL or a valid config.
        let config = unsafe { borrow(config, "config") }?;
        let consumer_out = out(consumer_out, "consumer_out")?;
        let start = memq_start::from_c(start, offset)?;
        // SAFETY: the caller passes a config whose dead-letter topic is NULL or live.
        let config = unsafe { config.to_core() }?;
        let consumer = topic.topic.group_acked(group, start, config)?;
        let handle = into_handle(memq_ack_consumer {
            consumer: Mutex::new(consumer),
        });
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { consumer_out.write(handle) };
        Ok(())
    })
}

/// Frees an ack consumer: it leaves its group (its partitions go to the other members)
/// and every lease it holds returns to the group at once (its deliveries' settling calls
/// return `MEMQ_STATUS_LEASE_EXPIRED` from then on; free them as usual). The group and its
/// position remain. NULL does nothing.
///
/// Thread safety: no other call may use this consumer during or after this one. Its
/// deliveries may still be used and freed, from any thread.
///
/// # Safety
///
/// `consumer` is NULL or a live ack consumer handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn memq_ack_consumer_free(consumer: *mut memq_ack_consumer) {
    // SAFETY: the caller passes NULL or a handle from `memq_ack_consumer_new`, and gives
    // it up.
    guard_void(|| unsafe { release(consumer) });
}

/// Receives the next delivery for this member (a message due for redelivery first, else
/// the next new one) and writes its handle to `*delivery_out`; free it with
/// `memq_delivery_free` whatever is done with it. Waits up to `timeout_ms`: 0 does not
/// wait, a negative value waits as long as it takes. While it waits, leases that run out
/// and delays that pass wake it.
///
/// Returns `MEMQ_STATUS_EMPTY` (nothing now, `timeout_ms == 0`; also when
/// `max_in_flight` messages are unacknowledged), `MEMQ_STATUS_TIMEOUT`,
/// `MEMQ_STATUS_CLOSED` (the topic is closed and every message was acknowledged or
/// dead-lettered), `MEMQ_STATUS_LAGGED` (new messages were evicted before the group read
/// them; their number goes to `*lagged_out` unless it is NULL; the next receive continues
/// at the oldest retained one), `MEMQ_STATUS_NULL_POINTER`.
///
/// Thread safety: calls on one ack consumer are serialised (a second thread waits for
/// the first call to finish); use one ack consumer per thread for competing workers. May
/// run concurrently with calls on the topic, on other consumers and on deliveries. A
/// receive waiting forever returns once a delivery comes or the topic is closed and the
/// group drained.
///
/// # Safety
///
/// `consumer` is NULL or a live ack consumer handle; `delivery_out` is NULL or valid for
/// writing a pointer; `lagged_out` is NULL or valid for writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_ack_consumer_recv(
    consumer: *const memq_ack_consumer,
    timeout_ms: i64,
    delivery_out: *mut *mut memq_delivery,
    lagged_out: *mut u64,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let consumer = unsafe { borrow(consumer, "consumer") }?;
        let delivery_out = out(delivery_out, "delivery_out")?;
        let mut c = lock(&consumer.consumer)?;
        let received: Result<_, Miss> = match Wait::from_ms(timeout_ms) {
            Wait::Try => c.try_recv().map_err(Miss::from),
            Wait::Forever => c.recv_blocking().map_err(Miss::from),
            Wait::For(d) => c.recv_blocking_timeout(d).map_err(Miss::from),
        };
        drop(c);
        match received {
            Ok(delivery) => {
                // SAFETY: the caller passes a pointer valid for writes.
                unsafe { delivery_out.write(delivery_handle(delivery)) };
                Ok(())
            }
            // SAFETY: the caller passes NULL or a pointer valid for writes.
            Err(miss) => Err(unsafe { missed(miss, lagged_out) }),
        }
    })
}

/// The C handle of a delivery: its message and count readable without the lease's lock.
fn delivery_handle(delivery: Delivery<Bytes>) -> *mut memq_delivery {
    into_handle(memq_delivery {
        message: delivery.message().clone(),
        deliveries: delivery.deliveries(),
        lease: Mutex::new(Some(delivery)),
    })
}

/// Receives up to `capacity` deliveries for this member: waits up to `timeout_ms` for the
/// first (as `memq_ack_consumer_recv`), then takes whatever else is available now, up to
/// `max_in_flight` unacknowledged in all. Writes their handles to `deliveries[0]` ..
/// `deliveries[*count_out - 1]` and their number (at least 1) to `*count_out`. Each is a
/// lease of its own: settle and free each with the `memq_delivery_*` calls.
///
/// Returns as `memq_ack_consumer_recv`, and `MEMQ_STATUS_INVALID_ARGUMENT` if `capacity`
/// is 0. A gap (`MEMQ_STATUS_LAGGED`) is never mixed into a batch: deliveries taken
/// before it are returned first, the gap by the next call.
///
/// Thread safety: as `memq_ack_consumer_recv`.
///
/// # Safety
///
/// `consumer` is NULL or a live ack consumer handle; `deliveries` is NULL or points to
/// `capacity` writable pointers; `count_out` is NULL or valid for writing a `size_t`;
/// `lagged_out` is NULL or valid for writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_ack_consumer_recv_many(
    consumer: *const memq_ack_consumer,
    timeout_ms: i64,
    deliveries: *mut *mut memq_delivery,
    capacity: usize,
    count_out: *mut usize,
    lagged_out: *mut u64,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let consumer = unsafe { borrow(consumer, "consumer") }?;
        let count_out = batch_out(deliveries, "deliveries", capacity, count_out)?;
        let mut batch = Vec::new();
        let mut c = lock(&consumer.consumer)?;
        let received: Result<usize, Miss> = match Wait::from_ms(timeout_ms) {
            Wait::Try => c.try_recv_many(&mut batch, capacity).map_err(Miss::from),
            Wait::Forever => c
                .recv_many_blocking(&mut batch, capacity)
                .map_err(Miss::from),
            Wait::For(d) => c
                .recv_many_blocking_timeout(&mut batch, capacity, d)
                .map_err(Miss::from),
        };
        drop(c);
        match received {
            // A waiting batch receive returns nothing only once closed and settled.
            Ok(0) => Err(Miss::Closed.status()),
            Ok(n) => {
                debug_assert!(n <= capacity && n == batch.len());
                for (i, delivery) in batch.into_iter().enumerate() {
                    // SAFETY: the caller passes an array of `capacity` writable pointers,
                    // and `i < n <= capacity`.
                    unsafe { deliveries.add(i).write(delivery_handle(delivery)) };
                }
                // SAFETY: the caller passes a pointer valid for writes.
                unsafe { count_out.write(n) };
                Ok(())
            }
            // SAFETY: the caller passes NULL or a pointer valid for writes.
            Err(miss) => Err(unsafe { missed(miss, lagged_out) }),
        }
    })
}

/// Writes the group's committed position in `partition` (its lowest unacknowledged
/// offset) to `*offset_out`.
///
/// Returns `MEMQ_STATUS_OUT_OF_RANGE` if there is no such partition,
/// `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_ack_consumer_recv` (it waits while a receive on the same
/// consumer is waiting).
///
/// # Safety
///
/// `consumer` is NULL or a live ack consumer handle; `offset_out` is NULL or valid for
/// writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_ack_consumer_committed(
    consumer: *const memq_ack_consumer,
    partition: u32,
    offset_out: *mut u64,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(
            ["consumer", "offset_out"],
            consumer,
            offset_out,
            |consumer| Ok(lock(&consumer.consumer)?.committed(partition)?),
        )
    }
}

/// Writes how many messages of the group (on every partition, whichever member holds
/// them) are delivered and not yet acknowledged or dead-lettered to `*count_out`: leased
/// ones and ones waiting to be delivered again.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_ack_consumer_committed`.
///
/// # Safety
///
/// `consumer` is NULL or a live ack consumer handle; `count_out` is NULL or valid for
/// writing a `size_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_ack_consumer_pending(
    consumer: *const memq_ack_consumer,
    count_out: *mut usize,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(["consumer", "count_out"], consumer, count_out, |consumer| {
            Ok(lock(&consumer.consumer)?.pending().len())
        })
    }
}

/// Writes a snapshot of the counters of the explicit-ack group `group` to `*stats_out`
/// (for an automatic-commit group, the acknowledgement counters are 0).
///
/// Returns `MEMQ_STATUS_UNKNOWN_GROUP` if the topic has no such group,
/// `MEMQ_STATUS_INVALID_ARGUMENT` if `group` is not UTF-8, `MEMQ_STATUS_NULL_POINTER` if
/// a pointer is NULL.
///
/// Thread safety: as `memq_topic_get_group_stats`.
///
/// # Safety
///
/// `topic` is NULL or a live topic handle; `group` is NULL or a NUL-terminated string;
/// `stats_out` is NULL or valid for writing a `memq_ack_group_stats`.
#[no_mangle]
pub unsafe extern "C" fn memq_topic_get_ack_group_stats(
    topic: *const memq_topic,
    group: *const c_char,
    stats_out: *mut memq_ack_group_stats,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let topic = unsafe { borrow(topic, "topic") }?;
        // SAFETY: the caller passes NULL or a NUL-terminated string.
        let group = unsafe { name(group, "group") }?;
        let stats_out = out(stats_out, "stats_out")?;
        let s = topic.topic.stats();
        let g = s
            .groups
            .iter()
            .find(|g| g.name == group)
            .ok_or_else(|| memq_status::from(Error::UnknownGroup(group.into())))?;
        let stats = memq_ack_group_stats {
            members: g.members,
            lag: g.lag,
            delivered: g.delivered,
            in_flight: g.in_flight,
            redelivered: g.redelivered,
            acked: g.acked,
            dead_lettered: g.dead_lettered,
            evicted_unacked: g.evicted_unacked,
            lagged: g.lagged,
        };
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { stats_out.write(stats) };
        Ok(())
    })
}

/// Writes a pointer to the delivery's payload to `*data_out`. The bytes stay valid and
/// unchanged until the delivery is freed, settled or not; with a length of 0 the pointer
/// must not be read.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: the accessors (`memq_delivery_data`, `_len`, `_offset`, `_partition`,
/// `_deliveries`, `_get_meta`) may be called from any number of threads at once, also
/// while another thread settles the delivery; it must not be freed while another call
/// uses it.
///
/// # Safety
///
/// `delivery` is NULL or a live delivery handle; `data_out` is NULL or valid for writing
/// a pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_delivery_data(
    delivery: *const memq_delivery,
    data_out: *mut *const u8,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(["delivery", "data_out"], delivery, data_out, |delivery| {
            Ok(delivery.message.value().as_ptr())
        })
    }
}

/// Writes the payload's length in bytes to `*len_out`.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_delivery_data`.
///
/// # Safety
///
/// `delivery` is NULL or a live delivery handle; `len_out` is NULL or valid for writing a
/// `size_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_delivery_len(
    delivery: *const memq_delivery,
    len_out: *mut usize,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(["delivery", "len_out"], delivery, len_out, |delivery| {
            Ok(delivery.message.value().len())
        })
    }
}

/// Writes the message's offset within its partition to `*offset_out`.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_delivery_data`.
///
/// # Safety
///
/// `delivery` is NULL or a live delivery handle; `offset_out` is NULL or valid for
/// writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_delivery_offset(
    delivery: *const memq_delivery,
    offset_out: *mut u64,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(
            ["delivery", "offset_out"],
            delivery,
            offset_out,
            |delivery| Ok(delivery.message.offset()),
        )
    }
}

/// Writes the partition the message was published to to `*partition_out`.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_delivery_data`.
///
/// # Safety
///
/// `delivery` is NULL or a live delivery handle; `partition_out` is NULL or valid for
/// writing a `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_delivery_partition(
    delivery: *const memq_delivery,
    partition_out: *mut u32,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(
            ["delivery", "partition_out"],
            delivery,
            partition_out,
            |delivery| Ok(delivery.message.partition()),
        )
    }
}

/// Writes how many times the message has been delivered, this delivery included (1 the
/// first time), to `*deliveries_out`.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_delivery_data`.
///
/// # Safety
///
/// `delivery` is NULL or a live delivery handle; `deliveries_out` is NULL or valid for
/// writing a `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_delivery_deliveries(
    delivery: *const memq_delivery,
    deliveries_out: *mut u32,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(
            ["delivery", "deliveries_out"],
            delivery,
            deliveries_out,
            |delivery| Ok(delivery.deliveries),
        )
    }
}

/// Writes all of the message's metadata (offset, partition, timestamp, length) to
/// `*meta_out` in one call, as `memq_message_get_meta`.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_delivery_data`.
///
/// # Safety
///
/// `delivery` is NULL or a live delivery handle; `meta_out` is NULL or valid for writing
/// a `memq_message_meta`.
#[no_mangle]
pub unsafe extern "C" fn memq_delivery_get_meta(
    delivery: *const memq_delivery,
    meta_out: *mut memq_message_meta,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(["delivery", "meta_out"], delivery, meta_out, |delivery| {
            Ok(memq_message_meta::of(&delivery.message))
        })
    }
}

/// What a settling call does with the lease it takes.
#[derive(Debug, Clone, Copy)]
enum Settle {
    Ack,
    Nack(Option<Duration>),
    Reject,
}

/// Takes the lease out of the handle and settles it. A lease already taken is
/// `MEMQ_STATUS_LEASE_EXPIRED`; so is one the core refuses (it is gone either way).
///
/// # Safety
///
/// `delivery` is NULL or a live delivery handle.
unsafe fn settle(delivery: *const memq_delivery, action: Settle) -> Outcome {
    // SAFETY: the caller passes NULL or a live handle.
    let delivery = unsafe { borrow(delivery, "delivery") }?;
    let lease = lock(&delivery.lease)?
        .take()
        .ok_or(memq_status::LeaseExpired)?;
    // Settled outside the handle's lock: it takes the partition's lock, and the handle is
    // already marked settled.
    let settled = match action {
        Settle::Ack => lease.ack(),
        Settle::Nack(None) => lease.nack(),
        Settle::Nack(Some(delay)) => lease.nack_after(delay),
        Settle::Reject => lease.reject(),
    };
    Ok(settled?)
}

/// Acknowledges the message: it is done and will not be delivered again. Ends the lease;
/// the handle stays valid (free it with `memq_delivery_free`).
///
/// Returns `MEMQ_STATUS_LEASE_EXPIRED` if the delivery no longer holds its lease (already
/// settled, its `ack_wait` ran out and the message went back to the group, or its consumer
/// was freed): the message is or will be delivered again unless it was settled.
/// `MEMQ_STATUS_UNKNOWN_GROUP` if the group was deleted; `MEMQ_STATUS_NULL_POINTER` if
/// `delivery` is NULL.
///
/// Thread safety: the settling calls (`memq_delivery_ack`, `_nack`, `_nack_after`,
/// `_reject`, `_touch`) on one delivery are serialised and may come from any thread,
/// including after its consumer was freed; at most one settling call succeeds. The
/// delivery must not be freed while another call uses it.
///
/// # Safety
///
/// `delivery` is NULL or a live delivery handle.
#[no_mangle]
pub unsafe extern "C" fn memq_delivery_ack(delivery: *const memq_delivery) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle.
    guard(|| unsafe { settle(delivery, Settle::Ack) })
}

/// Returns the message to the group for another delivery, after the group's backoff delay
/// for this attempt (`memq_ack_config.backoff`). Ends the lease; the handle stays valid
/// (free it with `memq_delivery_free`). Once the message has been delivered
/// `max_deliveries` times it is not delivered again: the next receive of a member reading
/// its partition sends it to the dead-letter topic instead.
///
/// Returns as `memq_delivery_ack`.
///
/// Thread safety: as `memq_delivery_ack`.
///
/// # Safety
///
/// `delivery` is NULL or a live delivery handle.
#[no_mangle]
pub unsafe extern "C" fn memq_delivery_nack(delivery: *const memq_delivery) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle.
    guard(|| unsafe { settle(delivery, Settle::Nack(None)) })
}

/// Returns the message to the group, to be delivered again after `delay_ms` milliseconds
/// (0: at once) instead of the backoff delay. Otherwise as `memq_delivery_nack`.
///
/// Returns as `memq_delivery_ack`.
///
/// Thread safety: as `memq_delivery_ack`.
///
/// # Safety
///
/// `delivery` is NULL or a live delivery handle.
#[no_mangle]
pub unsafe extern "C" fn memq_delivery_nack_after(
    delivery: *const memq_delivery,
    delay_ms: u64,
) -> memq_status {
    let delay = Duration::from_millis(delay_ms);
    // SAFETY: the caller passes NULL or a live handle.
    guard(|| unsafe { settle(delivery, Settle::Nack(Some(delay))) })
}

/// Rejects the message: it goes to the group's dead-letter topic with reason
/// `MEMQ_DEAD_LETTER_REASON_REJECTED` (or, without one, is dropped and counted as
/// dead-lettered) and is not delivered again. Ends the lease; the handle stays valid
/// (free it with `memq_delivery_free`).
///
/// If the dead-letter topic is full at that moment, the message stays in the group,
/// bound there, until it has room: the move is retried while a member of the group
/// receives (see `memq_dead_letter_topic`); if it is closed, the message returns to the group and
/// is delivered again (with its delivery count raised). Either way it is not lost, and
/// this call still returns `MEMQ_STATUS_OK`.
///
/// Returns as `memq_delivery_ack`.
///
/// Thread safety: as `memq_delivery_ack`.
///
/// # Safety
///
/// `delivery` is NULL or a live delivery handle.
#[no_mangle]
pub unsafe extern "C" fn memq_delivery_reject(delivery: *const memq_delivery) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle.
    guard(|| unsafe { settle(delivery, Settle::Reject) })
}

/// What `memq_deliveries_ack_all` did with the deliveries it was given.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct memq_ack_report {
    /// Deliveries acknowledged.
    pub acked: usize,
    /// Deliveries that no longer held their lease (settled already, listed twice, or their
    /// `ack_wait` ran out and the message went back to the group): what
    /// `memq_delivery_ack` reports as `MEMQ_STATUS_LEASE_EXPIRED`.
    pub expired: usize,
    /// Deliveries of a group that was deleted.
    pub group_deleted: usize,
}

/// Acknowledges the `count` deliveries of the array `deliveries`, as `memq_delivery_ack`
/// on each in turn would, and writes what happened into `*report` (NULL if the caller
/// does not want it). Deliveries that follow each other in the array from the same
/// partition of the same group (a batch from `memq_ack_consumer_recv_many`) are settled
/// under one lock of that partition, which makes this cheaper than acking them one by
/// one; they may come from several partitions, groups and topics. Ends the leases; the
/// handles stay valid (free each with `memq_delivery_free`).
///
/// Returns `MEMQ_STATUS_OK` whatever happened to each lease (see `*report`).
/// `MEMQ_STATUS_NULL_POINTER` if `deliveries` is NULL with a nonzero `count`, or if any
/// element is NULL: then no delivery is settled and `*report` is not written.
///
/// Thread safety: as `memq_delivery_ack` for each delivery.
///
/// # Safety
///
/// `deliveries` is NULL or points to `count` pointers, each NULL or a live delivery
/// handle; `report` is NULL or valid for writing a `memq_ack_report`.
#[no_mangle]
pub unsafe extern "C" fn memq_deliveries_ack_all(
    deliveries: *const *const memq_delivery,
    count: usize,
    report: *mut memq_ack_report,
) -> memq_status {
    guard(|| {
        // SAFETY: NULL, or `count` pointers valid for the call, by the caller's contract.
        let handles = unsafe { slice(deliveries, count, "deliveries") }?;
        // Every handle is checked before any lease is taken.
        let handles = handles
            .iter()
            // SAFETY: each element is NULL or a live handle, by the caller's contract.
            .map(|&d| unsafe { borrow(d, "an element of deliveries") })
            .collect::<Result<Vec<_>, _>>()?;
        let mut done = memq_ack_report::default();
        let mut leases = Vec::with_capacity(handles.len());
        for d in handles {
            // A handle settled already (or listed twice) has no lease left; a poisoned
            // handle lock has none that can be reached either.
            match lock(&d.lease).ok().and_then(|mut l| l.take()) {
                Some(lease) => leases.push(lease),
                None => done.expired += 1,
            }
        }
        let settled = Delivery::ack_all(&mut leases);
        done.acked += settled.acked;
        done.expired += settled.expired;
        done.group_deleted += settled.group_deleted;
        if let Some(out) = optional_out(report) {
            // SAFETY: non-NULL, valid for writes by the caller's contract.
            unsafe { out.write(done) };
        }
        Ok(())
    })
}

/// Extends the lease: it now runs out `ack_wait_ms` from now. The delivery keeps its
/// lease, to be settled later.
///
/// Returns `MEMQ_STATUS_LEASE_EXPIRED` if the delivery no longer holds its lease (the
/// handle then no longer holds it either); otherwise as `memq_delivery_ack`.
///
/// Thread safety: as `memq_delivery_ack`.
///
/// # Safety
///
/// `delivery` is NULL or a live delivery handle.
#[no_mangle]
pub unsafe extern "C" fn memq_delivery_touch(delivery: *const memq_delivery) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let delivery = unsafe { borrow(delivery, "delivery") }?;
        let mut lease = lock(&delivery.lease)?;
        let held = lease.as_mut().ok_or(memq_status::LeaseExpired)?;
        match held.touch() {
            Ok(()) => Ok(()),
            Err(e) => {
                // The lease is gone: dropping it now changes nothing in the group.
                *lease = None;
                Err(e.into())
            }
        }
    })
}

/// Frees a delivery, settled or not. If it still holds its lease, the message returns to
/// the group after the backoff delay for this attempt, as with `memq_delivery_nack`.
/// NULL does nothing.
///
/// Thread safety: no other call may use this delivery during or after this one. It may
/// be freed on any thread, before or after its consumer.
///
/// # Safety
///
/// `delivery` is NULL or a live delivery handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn memq_delivery_free(delivery: *mut memq_delivery) {
    // SAFETY: the caller passes NULL or a handle from `memq_ack_consumer_recv`, and gives
    // it up.
    guard_void(|| unsafe { release(delivery) });
}
