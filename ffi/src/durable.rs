//! Durable topics from C (memq-store, which the `memq` crate re-exports as
//! `memq::durable`): a topic whose messages, offsets, group positions and acks live in a
//! directory, so that they survive a restart of the process (and, with
//! `MEMQ_SYNC_ALWAYS`, a loss of power). Opening, publishing, subscribing (replaying
//! beyond what memory holds), durable consumer groups with or without explicit acks.
//!
//! docs/DURABILITY.md says what is on disk and what each sync policy guarantees.

use core::ffi::c_char;
use core::time::Duration;
use std::path::PathBuf;
use std::sync::Mutex;

use bytes::Bytes;
use memq_store::{
    Delivery, DurableConfig, DurableConsumer, DurableMessage, DurablePublishError, DurableReceipt,
    DurableRecvError, DurableSubscriber, DurableTopic, GroupConfig, OpenError, Retention,
    StoreError, SyncPolicy,
};

use crate::boundary::{
    borrow, bytes, get, guard, guard_void, init_default, into_handle, invalid, lock, name, out,
    release, OutPtr, Outcome,
};
use crate::reader::missed;
use crate::status::{memq_status, with_detail, Miss};
use crate::topic::{memq_start, memq_topic_config};
use crate::wait::Wait;

// ---- configuration ------------------------------------------------------------------------

/// When a durable topic's records are forced to the disk (`memq_durable_config.sync`, a
/// `uint32_t`; other values are `MEMQ_STATUS_INVALID_ARGUMENT`). Under every policy a
/// record is in the file (the OS page cache) before its publish returns or any reader sees
/// it, so a crash of the process alone loses nothing.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum memq_sync {
    /// A publish returns once its record is on the disk (`fdatasync`); publishers waiting
    /// at the same time share one sync. A power loss loses nothing that was acknowledged.
    /// Receipts say `durable == true`.
    Always = 0,
    /// A background thread syncs every `sync_interval_ms` (which must be > 0); a power
    /// loss loses up to that much of acknowledged messages.
    Interval = 1,
    /// The OS syncs when it likes; a power loss loses what it had not written back.
    Never = 2,
}

/// `memq_durable_config.flags`: on open, check every record of every segment, not only
/// those of the last segment (which is always checked: a crash can only tear the end).
pub const MEMQ_DURABLE_VERIFY_ON_OPEN: u32 = 1;

/// `memq_durable_config.flags`: on open, truncate a log damaged in the middle at its last
/// good record (deleting later segments) instead of failing with `MEMQ_STATUS_CORRUPT`.
pub const MEMQ_DURABLE_REPAIR: u32 = 2;

const KNOWN_DURABLE_FLAGS: u32 = MEMQ_DURABLE_VERIFY_ON_OPEN | MEMQ_DURABLE_REPAIR;

/// How a durable topic keeps its log. Fill it with `memq_durable_config_init`, then change
/// fields. A limit of 0 means "no limit".
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct memq_durable_config {
    /// A `memq_sync` value.
    pub sync: u32,
    /// For `MEMQ_SYNC_INTERVAL`: sync at least this often, in milliseconds (> 0). Not read
    /// for the other policies.
    pub sync_interval_ms: u64,
    /// A segment file is closed and a new one started at this many bytes (at least 4096,
    /// below 4 GiB).
    pub segment_bytes: u64,
    /// Retention: keep at most about this many bytes of segments per partition; 0: no
    /// limit. Under `MEMQ_OVERFLOW_BLOCK` a segment a subscriber still needs is kept and
    /// publishers wait (or get `MEMQ_STATUS_FULL` with `timeout_ms == 0`); under
    /// `MEMQ_OVERFLOW_REJECT` they get `MEMQ_STATUS_FULL`; under
    /// `MEMQ_OVERFLOW_DROP_OLDEST` the oldest segments are deleted and a subscriber that had
    /// not read them gets `MEMQ_STATUS_LAGGED`.
    pub retention_max_bytes: u64,
    /// Retention: delete a segment once its newest record is older than this many
    /// milliseconds (under every overflow policy); 0: no limit.
    pub retention_max_age_ms: u64,
    /// Retention: keep at most this many segment files per partition (as
    /// `retention_max_bytes`); 0: no limit.
    pub retention_max_segments: usize,
    /// `MEMQ_DURABLE_*` flags, or 0.
    pub flags: u32,
}

impl Default for memq_durable_config {
    fn default() -> Self {
        let d = DurableConfig::default();
        Self {
            sync: memq_sync::Always as u32,
            sync_interval_ms: 0,
            segment_bytes: d.segment_bytes,
            retention_max_bytes: 0,
            retention_max_age_ms: 0,
            retention_max_segments: 0,
            flags: 0,
        }
    }
}

impl memq_durable_config {
    fn to_store(self) -> Result<DurableConfig, memq_status> {
        const ALWAYS: u32 = memq_sync::Always as u32;
        const INTERVAL: u32 = memq_sync::Interval as u32;
        const NEVER: u32 = memq_sync::Never as u32;
        let sync = match self.sync {
            ALWAYS => SyncPolicy::Always,
            INTERVAL if self.sync_interval_ms == 0 => return Err(invalid(
                "durable->sync_interval_ms",
                "MEMQ_SYNC_INTERVAL needs an interval of at least 1 ms (or use MEMQ_SYNC_ALWAYS)",
            )),
            INTERVAL => SyncPolicy::Interval(Duration::from_millis(self.sync_interval_ms)),
            NEVER => SyncPolicy::Never,
            other => {
                return Err(invalid(
                    "durable->sync",
                    format_args!("{other} is not a memq_sync value"),
                ))
            }
        };
        if self.flags & !KNOWN_DURABLE_FLAGS != 0 {
            return Err(invalid(
                "durable->flags",
                format_args!("unknown flags {:#x}", self.flags & !KNOWN_DURABLE_FLAGS),
            ));
        }
        let limit = |v: u64| (v > 0).then_some(v);
        let retention = Retention {
            max_bytes: limit(self.retention_max_bytes),
            max_age: limit(self.retention_max_age_ms).map(Duration::from_millis),
            max_segments: (self.retention_max_segments > 0).then_some(self.retention_max_segments),
        };
        Ok(DurableConfig::new(sync)
            .segment_bytes(self.segment_bytes)
            .retention(retention)
            .verify_on_open(self.flags & MEMQ_DURABLE_VERIFY_ON_OPEN != 0)
            .repair(self.flags & MEMQ_DURABLE_REPAIR != 0))
    }
}

/// How a durable group settles its messages. Fill it with
/// `memq_durable_group_config_init`, then change fields.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct memq_durable_group_config {
    /// 0: a plain group, read with `memq_durable_consumer_recv`: a member's next receive
    /// settles its previous message (as does freeing the member). Otherwise explicit
    /// acks, read with `memq_durable_consumer_recv_delivery`: a delivery not acked within
    /// this many milliseconds is delivered again, to any member.
    pub ack_wait_ms: u64,
    /// With explicit acks: a message delivered this many times and still not acked is
    /// dead-lettered (settled, never delivered again, counted in
    /// `memq_durable_group_stats.dead_lettered`). 0: delivered until acked. Must be 0 in a
    /// plain group.
    pub max_deliveries: u32,
    /// Write the group's committed offsets to disk after this many settlements (1: after
    /// every one, an fsync each); at least 1.
    pub commit_every: u32,
}

impl Default for memq_durable_group_config {
    fn default() -> Self {
        let d = GroupConfig::default();
        Self {
            ack_wait_ms: 0,
            max_deliveries: 0,
            commit_every: d.commit_every,
        }
    }
}

impl memq_durable_group_config {
    fn to_store(self) -> Result<GroupConfig, memq_status> {
        if self.commit_every == 0 {
            return Err(invalid("config->commit_every", "must be at least 1"));
        }
        let mut config = if self.ack_wait_ms == 0 {
            if self.max_deliveries > 0 {
                return Err(invalid(
                    "config->max_deliveries",
                    "needs explicit acks (an ack_wait_ms > 0): a plain group settles every delivery",
                ));
            }
            GroupConfig::default()
        } else {
            GroupConfig::acked(Duration::from_millis(self.ack_wait_ms))
        };
        if self.max_deliveries > 0 {
            config = config.max_deliveries(self.max_deliveries);
        }
        Ok(config.commit_every(self.commit_every))
    }
}

/// Where a publish to a durable topic landed.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct memq_durable_receipt {
    /// The message's offset in its partition. Offsets go on across restarts.
    pub offset: u64,
    /// The partition.
    pub partition: u32,
    /// How many messages were published (1).
    pub count: u32,
    /// Whether the message was on the disk when the publish returned: always under
    /// `MEMQ_SYNC_ALWAYS`, never under the other policies (the record is in the OS page
    /// cache, safe from a crash of the process but not from a power loss, until synced).
    pub durable: bool,
}

impl From<DurableReceipt> for memq_durable_receipt {
    fn from(r: DurableReceipt) -> Self {
        Self {
            offset: r.offset,
            partition: r.partition,
            count: r.count,
            durable: r.durable,
        }
    }
}

/// A durable message's metadata.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct memq_durable_meta {
    /// Its offset in its partition.
    pub offset: u64,
    /// When it was published, in milliseconds since the UNIX epoch (the system clock).
    pub timestamp_ms: u64,
    /// The payload's length in bytes.
    pub len: usize,
    /// The key's length in bytes (0 without a key).
    pub key_len: usize,
    /// Its partition.
    pub partition: u32,
    /// Whether it was published with a key (`memq_durable_publish_keyed`).
    pub has_key: bool,
}

impl memq_durable_meta {
    fn of(m: &DurableMessage) -> Self {
        Self {
            offset: m.offset,
            timestamp_ms: m.timestamp,
            len: m.payload.len(),
            key_len: m.key.as_ref().map_or(0, Bytes::len),
            partition: m.partition,
            has_key: m.key.is_some(),
        }
    }
}

/// A snapshot of a durable group's counters.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct memq_durable_group_stats {
    /// Members now (in this process).
    pub members: usize,
    /// Deliveries handed out and not settled.
    pub in_flight: usize,
    /// Deliveries made again (after a nack, an expired lease or a restart).
    pub redelivered: u64,
    /// Messages given up on after `max_deliveries`.
    pub dead_lettered: u64,
}

// ---- errors -------------------------------------------------------------------------------

impl memq_status {
    fn of_store(e: &StoreError) -> Self {
        match e {
            StoreError::Locked { .. } => Self::Locked,
            StoreError::Corrupt { .. } | StoreError::Format { .. } => Self::Corrupt,
            e if e.is_disk_full() => Self::DiskFull,
            StoreError::Full => Self::Full,
            StoreError::LeaseExpired => Self::LeaseExpired,
            StoreError::TooLarge { .. } | StoreError::InvalidConfig(_) => Self::InvalidArgument,
            // StoreError::Io, and whatever the store adds.
            _ => Self::Io,
        }
    }
}

impl From<StoreError> for memq_status {
    fn from(e: StoreError) -> Self {
        with_detail(Self::of_store(&e), &e)
    }
}

impl From<OpenError> for memq_status {
    fn from(e: OpenError) -> Self {
        let status = match &e {
            OpenError::Store(s) => Self::of_store(s),
            // OpenError::Config: a TTL, release on read, a partition count other than the
            // directory's.
            _ => Self::InvalidArgument,
        };
        with_detail(status, &e)
    }
}

impl<T> From<DurablePublishError<T>> for memq_status {
    fn from(e: DurablePublishError<T>) -> Self {
        let status = match &e {
            DurablePublishError::Full(_) => Self::Full,
            DurablePublishError::Closed(_) => Self::Closed,
            DurablePublishError::InvalidPartition(_) => Self::OutOfRange,
            DurablePublishError::Store(s, _) => Self::of_store(s),
            _ => Self::InvalidArgument,
        };
        with_detail(status, &e)
    }
}

/// Reports a receive that returned no message: as the in-memory readers do (with the lag
/// count in `*lagged_out`), or the store's status for a failed read from disk.
///
/// # Safety
///
/// `lagged_out` is NULL or valid for writing a `uint64_t`.
pub(crate) unsafe fn recv_failed(e: DurableRecvError, lagged_out: *mut u64) -> memq_status {
    let miss = match e {
        DurableRecvError::Empty => Miss::Empty,
        DurableRecvError::Timeout => Miss::Timeout,
        DurableRecvError::Lagged(n) => Miss::Lagged(n),
        DurableRecvError::Closed => Miss::Closed,
        DurableRecvError::Store(s) => return s.into(),
        other => return with_detail(memq_status::Io, other),
    };
    // SAFETY: by this function's contract.
    unsafe { missed(miss, lagged_out) }
}

// ---- handles ------------------------------------------------------------------------------

/// A durable topic: a memq topic with a segment log per partition in a directory. Also a
/// publishing handle.
///
/// Ownership: made by `memq_durable_open`, released by `memq_durable_topic_free`. The
/// directory stays locked (a second `memq_durable_open` of it, in this process or
/// another, returns `MEMQ_STATUS_LOCKED`) until the topic and every subscriber, consumer
/// and delivery made from it are freed; then each partition's log is synced and closed.
#[derive(Debug)]
pub struct memq_durable_topic {
    pub(crate) topic: DurableTopic,
}

/// A subscriber of a durable topic: reads every message of every partition, from memory
/// while it keeps up and from disk for what memory no longer (or never) held, so it can
/// replay everything retention kept. Free it with `memq_durable_subscriber_free`.
///
/// Under `MEMQ_OVERFLOW_BLOCK` with a retention limit, its position holds back retention:
/// free subscribers you no longer read.
#[derive(Debug)]
pub struct memq_durable_subscriber {
    sub: Mutex<DurableSubscriber>,
}

/// A member of a durable consumer group: each message goes to exactly one member, and the
/// group's committed offsets survive a restart. Free it with
/// `memq_durable_consumer_free`, which leaves the group (a plain member's last message is
/// settled; an explicit-ack member's unacked deliveries go back to the group).
#[derive(Debug)]
pub struct memq_durable_consumer {
    consumer: Mutex<DurableConsumer>,
    /// Whether the group has explicit acks (`ack_wait_ms > 0`).
    acked: bool,
}

/// A received durable message: payload, key and metadata. Free it with
/// `memq_durable_message_free`; the pointers from `memq_durable_message_data` and
/// `memq_durable_message_key` stay valid until then. It does not hold its topic open.
#[derive(Debug)]
pub struct memq_durable_message {
    message: DurableMessage,
}

/// A message of a durable group with explicit acks, leased to one member.
///
/// Ownership: handed out by `memq_durable_consumer_recv_delivery` and released by
/// `memq_durable_delivery_free`, exactly once, settled or not. `memq_durable_delivery_ack`
/// and `memq_durable_delivery_nack` end the lease, not the handle: its payload and
/// metadata stay readable until it is freed. At most one of them succeeds; later ones
/// return `MEMQ_STATUS_LEASE_EXPIRED`. A delivery freed unsettled is delivered again
/// once its lease (`ack_wait_ms`) runs out. A delivery keeps its topic's directory locked
/// until it is freed.
#[derive(Debug)]
pub struct memq_durable_delivery {
    message: DurableMessage,
    deliveries: u32,
    /// The lease; `None` once settled.
    lease: Mutex<Option<Delivery>>,
}

// ---- opening and closing ------------------------------------------------------------------

/// Fills `config` with the defaults: `MEMQ_SYNC_ALWAYS`, 64 MiB segments, no retention
/// limit (everything is kept), no flags.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if `config` is NULL.
///
/// Thread safety: may be called from any thread.
///
/// # Safety
///
/// `config` is NULL or valid for writing a `memq_durable_config`.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_config_init(config: *mut memq_durable_config) -> memq_status {
    // SAFETY: the caller passes NULL or a pointer valid for writes.
    unsafe { init_default(config, "config") }
}

/// Reads a directory path from C. On Unix any bytes but NUL make a path (it need not be
/// UTF-8); elsewhere it must be UTF-8.
///
/// # Safety
///
/// `dir` is NULL or a NUL-terminated string.
unsafe fn dir_path(dir: *const c_char) -> Result<PathBuf, memq_status> {
    #[cfg(unix)]
    let path = {
        use std::os::unix::ffi::OsStrExt;
        if dir.is_null() {
            return Err(crate::boundary::null_argument("dir"));
        }
        // SAFETY: non-NULL and NUL-terminated by this function's contract.
        let bytes = unsafe { core::ffi::CStr::from_ptr(dir) }.to_bytes();
        PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
    };
    #[cfg(not(unix))]
    // SAFETY: NULL or NUL-terminated by this function's contract.
    let path = PathBuf::from(unsafe { name(dir, "dir") }?);
    if path.as_os_str().is_empty() {
        return Err(invalid("dir", "an empty path names no directory"));
    }
    Ok(path)
}

/// Opens the durable topic in directory `dir` (created if missing) and writes its handle
/// to `*topic_out`; free it with `memq_durable_topic_free`. Offsets, group positions and
/// acks go on from what the directory holds; a torn last record (a crash) is cut off.
///
/// `topic` sets the in-memory part, as for `memq_topic_new`: `capacity` is how many
/// messages per partition are cached in memory (subscribers read older ones from disk),
/// `partitions` is fixed when the directory is created, and `overflow` applies to the
/// log's retention limit (see `memq_durable_config.retention_max_bytes`). `ttl_ms` must
/// be 0 (use `retention_max_age_ms`) and `MEMQ_TOPIC_RELEASE_ON_READ` is not supported.
/// `durable` sets the sync policy and retention (see `memq_durable_config_init`).
///
/// Returns `MEMQ_STATUS_LOCKED` if the directory is open already (in this process or
/// another); `MEMQ_STATUS_CORRUPT` if a record in the middle of a log is damaged (with
/// sound records after it; nothing on disk was changed: `MEMQ_DURABLE_REPAIR` truncates
/// there) or a file in the directory is not one the store wrote;
/// `MEMQ_STATUS_DISK_FULL`, `MEMQ_STATUS_IO` (the directory cannot be created or read:
/// `memq_last_error_message` names the file and the OS error);
/// `MEMQ_STATUS_INVALID_ARGUMENT` for a capacity or partition count of 0, a partition
/// count other than the directory's, a TTL, release on read, an unknown overflow, sync
/// policy or flag, an interval of 0 under `MEMQ_SYNC_INTERVAL`, a segment size outside
/// [4096, 4 GiB), or an empty `dir`; `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
/// On Unix `dir` is any NUL-terminated bytes (it need not be UTF-8).
///
/// Thread safety: may be called from any thread.
///
/// # Safety
///
/// `dir` is NULL or a NUL-terminated string; `topic` is NULL or points to a
/// `memq_topic_config`; `durable` is NULL or points to a `memq_durable_config`;
/// `topic_out` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_open(
    dir: *const c_char,
    topic: *const memq_topic_config,
    durable: *const memq_durable_config,
    topic_out: *mut *mut memq_durable_topic,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a NUL-terminated string.
        let dir = unsafe { dir_path(dir) }?;
        // SAFETY: the caller passes NULL or a valid config.
        let topic = unsafe { borrow(topic, "topic") }?;
        // SAFETY: the caller passes NULL or a valid config.
        let durable = unsafe { borrow(durable, "durable") }?;
        let topic_out = out(topic_out, "topic_out")?;
        let config = topic.to_core()?;
        let durable = durable.to_store()?;
        let topic = DurableTopic::open(dir, config, durable)?;
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { topic_out.write(into_handle(memq_durable_topic { topic })) };
        Ok(())
    })
}

/// Frees a durable topic handle. The topic closes (readers drain what was published,
/// then get `MEMQ_STATUS_CLOSED`); once its subscribers, consumers and deliveries are
/// freed too, its logs are synced and the directory unlocked. NULL does nothing.
///
/// Thread safety: no other call may use this handle during or after this one.
///
/// # Safety
///
/// `topic` is NULL or a live durable topic handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_topic_free(topic: *mut memq_durable_topic) {
    // SAFETY: the caller passes NULL or a handle from `memq_durable_open`, and gives it up.
    guard_void(|| unsafe { release(topic) });
}

/// Closes the topic: publishing returns `MEMQ_STATUS_CLOSED` from now on; readers drain
/// what was published and then get `MEMQ_STATUS_CLOSED`. Every waiting call is woken.
/// What is on disk stays; closing a closed topic does nothing.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if `topic` is NULL.
///
/// Thread safety: may be called from any thread, concurrently with any call on `topic`
/// except `memq_durable_topic_free(topic)`.
///
/// # Safety
///
/// `topic` is NULL or a live durable topic handle.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_topic_close(topic: *const memq_durable_topic) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let topic = unsafe { borrow(topic, "topic") }?;
        topic.topic.close();
        Ok(())
    })
}

/// Writes the offset the next message of `partition` gets to `*offset_out` (after a
/// restart: one past the last message kept).
///
/// Returns `MEMQ_STATUS_OUT_OF_RANGE` if there is no such partition,
/// `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: may be called from any thread, concurrently with any call on `topic`
/// except `memq_durable_topic_free(topic)`.
///
/// # Safety
///
/// `topic` is NULL or a live durable topic handle; `offset_out` is NULL or valid for
/// writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_topic_next_offset(
    topic: *const memq_durable_topic,
    partition: u32,
    offset_out: *mut u64,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(["topic", "offset_out"], topic, offset_out, |topic| {
            topic
                .topic
                .next_offset(partition)
                .ok_or_else(|| no_partition(partition, topic.topic.partitions()))
        })
    }
}

/// Writes the oldest offset `partition` keeps on disk to `*offset_out` (what
/// `MEMQ_START_EARLIEST` reads first).
///
/// Returns as `memq_durable_topic_next_offset`.
///
/// Thread safety: as `memq_durable_topic_next_offset`.
///
/// # Safety
///
/// As `memq_durable_topic_next_offset`.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_topic_start_offset(
    topic: *const memq_durable_topic,
    partition: u32,
    offset_out: *mut u64,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(["topic", "offset_out"], topic, offset_out, |topic| {
            topic
                .topic
                .start_offset(partition)
                .ok_or_else(|| no_partition(partition, topic.topic.partitions()))
        })
    }
}

fn no_partition(partition: u32, partitions: u32) -> memq_status {
    with_detail(
        memq_status::OutOfRange,
        format_args!("partition {partition} does not exist (the topic has {partitions})"),
    )
}

// ---- publishing ---------------------------------------------------------------------------

/// Where a publish goes.
enum Route<'a> {
    Any,
    Key(&'a [u8]),
    To(u32),
}

/// The body of the publish exports.
///
/// # Safety
///
/// `topic` is NULL or a live handle; `data` is NULL or `len` readable bytes;
/// `receipt_out` is NULL or valid for writing a `memq_durable_receipt`.
unsafe fn publish(
    topic: *const memq_durable_topic,
    route: Route<'_>,
    data: *const u8,
    len: usize,
    timeout_ms: i64,
    receipt_out: *mut memq_durable_receipt,
) -> Outcome {
    // SAFETY: the caller passes NULL or a live handle.
    let topic = &unsafe { borrow(topic, "topic") }?.topic;
    // SAFETY: the caller passes NULL or `len` readable bytes.
    let data = unsafe { bytes(data, len, "data") }?;
    let receipt_out = out(receipt_out, "receipt_out")?;
    let payload = Bytes::copy_from_slice(data);
    let receipt = match (Wait::from_ms(timeout_ms), route) {
        (Wait::Try, Route::Any) => topic.try_publish(payload),
        (Wait::Try, Route::Key(k)) => topic.try_publish_keyed(Bytes::copy_from_slice(k), payload),
        (Wait::Try, Route::To(p)) => topic.try_publish_to(p, payload),
        (Wait::Forever, Route::Any) => topic.publish_blocking(payload),
        (Wait::Forever, Route::Key(k)) => {
            topic.publish_keyed_blocking(Bytes::copy_from_slice(k), payload)
        }
        (Wait::Forever, Route::To(p)) => topic.publish_to_blocking(p, payload),
        (Wait::For(d), Route::Any) => topic.publish_blocking_timeout(payload, d),
        (Wait::For(d), Route::Key(k)) => {
            topic.publish_keyed_blocking_timeout(Bytes::copy_from_slice(k), payload, d)
        }
        (Wait::For(d), Route::To(p)) => topic.publish_to_blocking_timeout(p, payload, d),
    }?;
    // SAFETY: the caller passes a pointer valid for writes.
    unsafe { receipt_out.write(receipt.into()) };
    Ok(())
}

/// Publishes a copy of `len` bytes at `data` (NULL with `len == 0` is the empty payload)
/// to the next partition in turn, and writes where it landed to `*receipt_out`. The
/// record is written to the file before this returns; under `MEMQ_SYNC_ALWAYS` this also
/// waits for the disk (`receipt_out->durable` is then true).
///
/// `timeout_ms` is about room under a retention limit with `MEMQ_OVERFLOW_BLOCK`: 0
/// does not wait (`MEMQ_STATUS_FULL` if the log is full), a positive value waits up to
/// that many milliseconds for a subscriber to move on (`MEMQ_STATUS_FULL` after), a
/// negative value as long as it takes. Without a retention limit a durable topic is
/// never full. The time limit is on the wait for room only: under `MEMQ_SYNC_ALWAYS` a
/// message written still waits for the disk.
///
/// Returns `MEMQ_STATUS_FULL` (no room: `MEMQ_OVERFLOW_REJECT`, or `BLOCK` with
/// `timeout_ms == 0` or when the time ran out), `MEMQ_STATUS_CLOSED`, `MEMQ_STATUS_DISK_FULL` or `MEMQ_STATUS_IO`
/// (nothing was published; after a failed sync, which the receipt cannot take back,
/// nothing more is published until the topic is reopened),
/// `MEMQ_STATUS_INVALID_ARGUMENT` (a record larger than 64 MiB),
/// `MEMQ_STATUS_NULL_POINTER`.
///
/// Thread safety: may be called from any thread, concurrently with any call on `topic`
/// except `memq_durable_topic_free(topic)`; publishers under `MEMQ_SYNC_ALWAYS` share
/// syncs.
///
/// # Safety
///
/// `topic` is NULL or a live durable topic handle; `data` is NULL or points to `len`
/// readable bytes; `receipt_out` is NULL or valid for writing a `memq_durable_receipt`.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_publish(
    topic: *const memq_durable_topic,
    data: *const u8,
    len: usize,
    timeout_ms: i64,
    receipt_out: *mut memq_durable_receipt,
) -> memq_status {
    // SAFETY: the caller's pointers are valid as this function requires.
    guard(|| unsafe { publish(topic, Route::Any, data, len, timeout_ms, receipt_out) })
}

/// `memq_durable_publish` with a key of `key_len` bytes, stored with the message: the
/// partition is memq's hash of the key (`memq_key_partition`, the same as for an
/// in-memory topic).
///
/// Returns as `memq_durable_publish`.
///
/// Thread safety: as `memq_durable_publish`.
///
/// # Safety
///
/// As `memq_durable_publish`; `key` is NULL or points to `key_len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_publish_keyed(
    topic: *const memq_durable_topic,
    key: *const u8,
    key_len: usize,
    data: *const u8,
    len: usize,
    timeout_ms: i64,
    receipt_out: *mut memq_durable_receipt,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or `key_len` readable bytes.
        let key = unsafe { bytes(key, key_len, "key") }?;
        // SAFETY: the caller's pointers are valid as this function requires.
        unsafe { publish(topic, Route::Key(key), data, len, timeout_ms, receipt_out) }
    })
}

/// `memq_durable_publish` to partition `partition`.
///
/// Returns as `memq_durable_publish`, and `MEMQ_STATUS_OUT_OF_RANGE` if there is no such
/// partition.
///
/// Thread safety: as `memq_durable_publish`.
///
/// # Safety
///
/// As `memq_durable_publish`.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_publish_to(
    topic: *const memq_durable_topic,
    partition: u32,
    data: *const u8,
    len: usize,
    timeout_ms: i64,
    receipt_out: *mut memq_durable_receipt,
) -> memq_status {
    // SAFETY: the caller's pointers are valid as this function requires.
    guard(|| unsafe {
        publish(
            topic,
            Route::To(partition),
            data,
            len,
            timeout_ms,
            receipt_out,
        )
    })
}

// ---- subscribers --------------------------------------------------------------------------

/// Subscribes to every partition of `topic` from `start` (a `memq_start`; `offset` is
/// read only for `MEMQ_START_OFFSET`) and writes the subscriber to `*subscriber_out`.
/// `MEMQ_START_EARLIEST` is the oldest message kept on disk, however far beyond the
/// in-memory capacity.
///
/// Returns `MEMQ_STATUS_INVALID_ARGUMENT` for an unknown `start`,
/// `MEMQ_STATUS_OUT_OF_RANGE` for an offset past the end of a partition,
/// `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: may be called from any thread, concurrently with any call on `topic`
/// except `memq_durable_topic_free(topic)`.
///
/// # Safety
///
/// `topic` is NULL or a live durable topic handle; `subscriber_out` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_subscriber_new(
    topic: *const memq_durable_topic,
    start: u32,
    offset: u64,
    subscriber_out: *mut *mut memq_durable_subscriber,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let topic = unsafe { borrow(topic, "topic") }?;
        let subscriber_out = out(subscriber_out, "subscriber_out")?;
        let sub = topic.topic.subscribe(memq_start::from_c(start, offset)?)?;
        let handle = into_handle(memq_durable_subscriber {
            sub: Mutex::new(sub),
        });
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { subscriber_out.write(handle) };
        Ok(())
    })
}

/// Frees a durable subscriber (its hold on retention is released). NULL does nothing.
///
/// Thread safety: no other call may use this subscriber during or after this one.
///
/// # Safety
///
/// `subscriber` is NULL or a live durable subscriber handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_subscriber_free(subscriber: *mut memq_durable_subscriber) {
    // SAFETY: the caller passes NULL or a handle from `memq_durable_subscriber_new`, and
    // gives it up.
    guard_void(|| unsafe { release(subscriber) });
}

/// Hands a received message to C.
///
/// # Safety
///
/// `message_out` was checked by [`out`] from a pointer valid for writes.
unsafe fn give(message_out: OutPtr<*mut memq_durable_message>, message: DurableMessage) {
    let handle = into_handle(memq_durable_message { message });
    // SAFETY: valid for writes by this function's contract.
    unsafe { message_out.write(handle) };
}

/// Receives the next message (per partition in offset order) and writes its handle to
/// `*message_out` (free it with `memq_durable_message_free`). Waits up to `timeout_ms`: 0
/// does not wait, a negative value waits as long as it takes.
///
/// Returns `MEMQ_STATUS_EMPTY` (nothing now, `timeout_ms == 0`), `MEMQ_STATUS_TIMEOUT`,
/// `MEMQ_STATUS_CLOSED` (closed and everything read), `MEMQ_STATUS_LAGGED` (retention
/// deleted messages before they were read, under `MEMQ_OVERFLOW_DROP_OLDEST`; their
/// number goes to `*lagged_out` unless it is NULL; the next receive goes on with the
/// oldest message kept), `MEMQ_STATUS_CORRUPT` or `MEMQ_STATUS_IO` (reading the log
/// failed; the subscriber stays where it was), `MEMQ_STATUS_NULL_POINTER`.
///
/// Thread safety: calls on one subscriber are serialised (a second thread waits for the
/// first call to finish). A receive waiting forever returns once a message comes or the
/// topic is closed.
///
/// # Safety
///
/// `subscriber` is NULL or a live durable subscriber handle; `message_out` is NULL or
/// valid for writing a pointer; `lagged_out` is NULL or valid for writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_subscriber_recv(
    subscriber: *const memq_durable_subscriber,
    timeout_ms: i64,
    message_out: *mut *mut memq_durable_message,
    lagged_out: *mut u64,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let subscriber = unsafe { borrow(subscriber, "subscriber") }?;
        let message_out = out(message_out, "message_out")?;
        let mut sub = lock(&subscriber.sub)?;
        let got = match Wait::from_ms(timeout_ms) {
            Wait::Try => sub.try_recv(),
            Wait::Forever => sub.recv_blocking(),
            Wait::For(d) => sub.recv_blocking_timeout(d),
        };
        drop(sub);
        match got {
            // SAFETY: checked by `out` from the caller's pointer.
            Ok(m) => unsafe { give(message_out, m) },
            // SAFETY: the caller passes NULL or a pointer valid for writes.
            Err(e) => return Err(unsafe { recv_failed(e, lagged_out) }),
        }
        Ok(())
    })
}

// ---- groups -------------------------------------------------------------------------------

/// Fills `config` with the defaults: a plain group (`ack_wait_ms` 0), no delivery limit,
/// the committed offsets written every 256 settlements.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if `config` is NULL.
///
/// Thread safety: may be called from any thread.
///
/// # Safety
///
/// `config` is NULL or valid for writing a `memq_durable_group_config`.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_group_config_init(
    config: *mut memq_durable_group_config,
) -> memq_status {
    // SAFETY: the caller passes NULL or a pointer valid for writes.
    unsafe { init_default(config, "config") }
}

/// Joins the durable group `group` of `topic` and writes the member to `*consumer_out`;
/// free it with `memq_durable_consumer_free`. A group never committed in this directory
/// starts at `start` (a `memq_start`; `offset` is read only for `MEMQ_START_OFFSET`);
/// otherwise it goes on from its committed offsets and `start` is not used. After a
/// restart, what was delivered and not settled by the group's last write is delivered
/// again; what was settled (acked, or dead-lettered) never comes back.
///
/// `config->ack_wait_ms` of 0 makes a plain group (read with
/// `memq_durable_consumer_recv`), otherwise one with explicit acks (read with
/// `memq_durable_consumer_recv_delivery`).
///
/// Returns `MEMQ_STATUS_INVALID_ARGUMENT` for an unknown `start`, a `group` that is not
/// UTF-8, a `commit_every` of 0, a `max_deliveries` in a plain group, or a group open in
/// this process with another configuration; `MEMQ_STATUS_CORRUPT` if the group's file is
/// damaged; `MEMQ_STATUS_IO`; `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: may be called from any thread, concurrently with any call on `topic`
/// except `memq_durable_topic_free(topic)`.
///
/// # Safety
///
/// `topic` is NULL or a live durable topic handle; `group` is NULL or a NUL-terminated
/// string; `config` is NULL or points to a `memq_durable_group_config`; `consumer_out` is
/// NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_consumer_new(
    topic: *const memq_durable_topic,
    group: *const c_char,
    start: u32,
    offset: u64,
    config: *const memq_durable_group_config,
    consumer_out: *mut *mut memq_durable_consumer,
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
        let config = config.to_store()?;
        let consumer = topic.topic.group(group, start, config)?;
        let handle = into_handle(memq_durable_consumer {
            consumer: Mutex::new(consumer),
            acked: config.ack_wait.is_some(),
        });
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { consumer_out.write(handle) };
        Ok(())
    })
}

/// Frees a durable consumer: it leaves its group. A plain member's last message counts as
/// processed; an explicit-ack member's unacked deliveries go back to the group at once.
/// When the last member in this process leaves, the group's committed offsets are
/// written. NULL does nothing.
///
/// Thread safety: no other call may use this consumer during or after this one. Its
/// deliveries may still be used and freed.
///
/// # Safety
///
/// `consumer` is NULL or a live durable consumer handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_consumer_free(consumer: *mut memq_durable_consumer) {
    // SAFETY: the caller passes NULL or a handle from `memq_durable_consumer_new`, and
    // gives it up.
    guard_void(|| unsafe { release(consumer) });
}

fn mode_mismatch(acked: bool) -> memq_status {
    let why = if acked {
        "the group has explicit acks: receive with memq_durable_consumer_recv_delivery"
    } else {
        "the group is a plain one (ack_wait_ms 0): receive with memq_durable_consumer_recv"
    };
    with_detail(memq_status::GroupModeMismatch, why)
}

/// Receives the next message of a plain group and writes its handle to `*message_out`
/// (free it with `memq_durable_message_free`); settles this member's previous message.
/// Waits up to `timeout_ms`: 0 does not wait, a negative value waits as long as it takes.
///
/// Returns `MEMQ_STATUS_GROUP_MODE_MISMATCH` on a group with explicit acks;
/// `MEMQ_STATUS_EMPTY`, `MEMQ_STATUS_TIMEOUT`, `MEMQ_STATUS_CLOSED` (closed and everything
/// handed out), `MEMQ_STATUS_LAGGED` (retention deleted the message before the group read
/// it; the count goes to `*lagged_out` unless it is NULL), `MEMQ_STATUS_CORRUPT`,
/// `MEMQ_STATUS_IO`, `MEMQ_STATUS_NULL_POINTER`.
///
/// Thread safety: calls on one consumer are serialised (a second thread waits for the
/// first call to finish, `memq_durable_consumer_commit` and `_get_stats` too); use one
/// consumer per thread for competing workers.
///
/// # Safety
///
/// `consumer` is NULL or a live durable consumer handle; `message_out` is NULL or valid
/// for writing a pointer; `lagged_out` is NULL or valid for writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_consumer_recv(
    consumer: *const memq_durable_consumer,
    timeout_ms: i64,
    message_out: *mut *mut memq_durable_message,
    lagged_out: *mut u64,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let consumer = unsafe { borrow(consumer, "consumer") }?;
        let message_out = out(message_out, "message_out")?;
        if consumer.acked {
            return Err(mode_mismatch(true));
        }
        let mut c = lock(&consumer.consumer)?;
        let got = match Wait::from_ms(timeout_ms) {
            Wait::Try => c.try_recv(),
            Wait::Forever => c.recv_blocking(),
            Wait::For(d) => c.recv_blocking_timeout(d),
        };
        drop(c);
        match got {
            // SAFETY: checked by `out` from the caller's pointer.
            Ok(m) => unsafe { give(message_out, m) },
            // SAFETY: the caller passes NULL or a pointer valid for writes.
            Err(e) => return Err(unsafe { recv_failed(e, lagged_out) }),
        }
        Ok(())
    })
}

/// Receives the next delivery of a group with explicit acks (a message due again first)
/// and writes its handle to `*delivery_out`; free it with `memq_durable_delivery_free`
/// whatever is done with it. Waits up to `timeout_ms`: 0 does not wait, a negative value
/// waits as long as it takes; leases that run out wake it.
///
/// Returns `MEMQ_STATUS_GROUP_MODE_MISMATCH` on a plain group; otherwise as
/// `memq_durable_consumer_recv` (`MEMQ_STATUS_CLOSED` once the topic is closed and every
/// message was acked or dead-lettered).
///
/// Thread safety: as `memq_durable_consumer_recv`.
///
/// # Safety
///
/// `consumer` is NULL or a live durable consumer handle; `delivery_out` is NULL or valid
/// for writing a pointer; `lagged_out` is NULL or valid for writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_consumer_recv_delivery(
    consumer: *const memq_durable_consumer,
    timeout_ms: i64,
    delivery_out: *mut *mut memq_durable_delivery,
    lagged_out: *mut u64,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let consumer = unsafe { borrow(consumer, "consumer") }?;
        let delivery_out = out(delivery_out, "delivery_out")?;
        if !consumer.acked {
            return Err(mode_mismatch(false));
        }
        let mut c = lock(&consumer.consumer)?;
        let got = match Wait::from_ms(timeout_ms) {
            // A deadline of now: what is there is claimed, nothing is waited for.
            Wait::Try => c
                .recv_delivery_timeout(Duration::ZERO)
                .map_err(|e| match e {
                    DurableRecvError::Timeout => DurableRecvError::Empty,
                    e => e,
                }),
            Wait::Forever => c.recv_delivery_blocking(),
            Wait::For(d) => c.recv_delivery_timeout(d),
        };
        drop(c);
        match got {
            Ok(d) => {
                let handle = into_handle(memq_durable_delivery {
                    message: d.message().clone(),
                    deliveries: d.deliveries(),
                    lease: Mutex::new(Some(d)),
                });
                // SAFETY: the caller passes a pointer valid for writes.
                unsafe { delivery_out.write(handle) };
                Ok(())
            }
            // SAFETY: the caller passes NULL or a pointer valid for writes.
            Err(e) => Err(unsafe { recv_failed(e, lagged_out) }),
        }
    })
}

/// Writes the group's committed offsets (and the offsets settled above them) to disk now,
/// with an fsync; a plain member's last message is settled first. Without it they are
/// written every `commit_every` settlements and when the last member leaves.
///
/// Returns `MEMQ_STATUS_DISK_FULL` or `MEMQ_STATUS_IO` if the write failed (the
/// settlements are kept in memory and written with the next write),
/// `MEMQ_STATUS_NULL_POINTER`.
///
/// Thread safety: as `memq_durable_consumer_recv`.
///
/// # Safety
///
/// `consumer` is NULL or a live durable consumer handle.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_consumer_commit(
    consumer: *const memq_durable_consumer,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let consumer = unsafe { borrow(consumer, "consumer") }?;
        lock(&consumer.consumer)?.commit()?;
        Ok(())
    })
}

/// Writes a snapshot of the group's counters to `*stats_out`.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_durable_consumer_recv`.
///
/// # Safety
///
/// `consumer` is NULL or a live durable consumer handle; `stats_out` is NULL or valid for
/// writing a `memq_durable_group_stats`.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_consumer_get_stats(
    consumer: *const memq_durable_consumer,
    stats_out: *mut memq_durable_group_stats,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(["consumer", "stats_out"], consumer, stats_out, |consumer| {
            let s = lock(&consumer.consumer)?.stats();
            Ok(memq_durable_group_stats {
                members: s.members,
                in_flight: s.in_flight,
                redelivered: s.redelivered,
                dead_lettered: s.dead_lettered,
            })
        })
    }
}

/// Writes the group's committed offset in `partition` (its oldest offset not settled) to
/// `*committed_out`, and the one last written to disk (what a restart goes on from) to
/// `*on_disk_out` unless it is NULL.
///
/// Returns `MEMQ_STATUS_OUT_OF_RANGE` if there is no such partition,
/// `MEMQ_STATUS_NULL_POINTER` if `consumer` or `committed_out` is NULL.
///
/// Thread safety: as `memq_durable_consumer_recv`.
///
/// # Safety
///
/// `consumer` is NULL or a live durable consumer handle; `committed_out` and
/// `on_disk_out` are NULL or valid for writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_consumer_committed(
    consumer: *const memq_durable_consumer,
    partition: u32,
    committed_out: *mut u64,
    on_disk_out: *mut u64,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let consumer = unsafe { borrow(consumer, "consumer") }?;
        let committed_out = out(committed_out, "committed_out")?;
        let s = lock(&consumer.consumer)?.stats();
        let i = partition as usize;
        let (Some(&committed), Some(&on_disk)) = (s.committed.get(i), s.committed_on_disk.get(i))
        else {
            return Err(no_partition(partition, s.committed.len() as u32));
        };
        if let Some(on_disk_out) = crate::boundary::optional_out(on_disk_out) {
            // SAFETY: non-NULL, and the caller passes a pointer valid for writes.
            unsafe { on_disk_out.write(on_disk) };
        }
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { committed_out.write(committed) };
        Ok(())
    })
}

// ---- messages and deliveries --------------------------------------------------------------

/// A handle that carries a durable message.
trait Carries {
    fn message(&self) -> &DurableMessage;
}

impl Carries for memq_durable_message {
    fn message(&self) -> &DurableMessage {
        &self.message
    }
}

impl Carries for memq_durable_delivery {
    fn message(&self) -> &DurableMessage {
        &self.message
    }
}

/// # Safety
///
/// `handle` is NULL or a live handle; `data_out` is NULL or valid for writing a pointer.
unsafe fn data_of<H: Carries>(
    names: [&str; 2],
    handle: *const H,
    data_out: *mut *const u8,
) -> memq_status {
    // SAFETY: by this function's contract.
    unsafe {
        get(names, handle, data_out, |h| {
            Ok(h.message().payload.as_ptr())
        })
    }
}

/// # Safety
///
/// `handle` is NULL or a live handle; `key_out` is NULL or valid for writing a pointer.
unsafe fn key_of<H: Carries>(
    names: [&str; 2],
    handle: *const H,
    key_out: *mut *const u8,
) -> memq_status {
    // SAFETY: by this function's contract.
    unsafe {
        get(names, handle, key_out, |h| {
            Ok(h.message()
                .key
                .as_ref()
                .map_or(core::ptr::null(), |k| k.as_ptr()))
        })
    }
}

/// # Safety
///
/// `handle` is NULL or a live handle; `meta_out` is NULL or valid for writing a
/// `memq_durable_meta`.
unsafe fn meta_of<H: Carries>(
    names: [&str; 2],
    handle: *const H,
    meta_out: *mut memq_durable_meta,
) -> memq_status {
    // SAFETY: by this function's contract.
    unsafe {
        get(names, handle, meta_out, |h| {
            Ok(memq_durable_meta::of(h.message()))
        })
    }
}

/// Writes a pointer to the message's payload (`meta.len` bytes) to `*data_out`. The
/// bytes stay valid and unchanged until the message is freed; with a length of 0 the
/// pointer must not be read.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: a message may be read from any number of threads at once; it must not
/// be freed while another call uses it.
///
/// # Safety
///
/// `message` is NULL or a live durable message handle; `data_out` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_message_data(
    message: *const memq_durable_message,
    data_out: *mut *const u8,
) -> memq_status {
    // SAFETY: the caller's pointers are valid as this function requires.
    unsafe { data_of(["message", "data_out"], message, data_out) }
}

/// Writes a pointer to the message's key (`meta.key_len` bytes) to `*key_out`, or NULL if
/// it was published without one. Valid as `memq_durable_message_data`'s pointer.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_durable_message_data`.
///
/// # Safety
///
/// `message` is NULL or a live durable message handle; `key_out` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_message_key(
    message: *const memq_durable_message,
    key_out: *mut *const u8,
) -> memq_status {
    // SAFETY: the caller's pointers are valid as this function requires.
    unsafe { key_of(["message", "key_out"], message, key_out) }
}

/// Writes the message's metadata (offset, partition, timestamp, payload and key lengths)
/// to `*meta_out`.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_durable_message_data`.
///
/// # Safety
///
/// `message` is NULL or a live durable message handle; `meta_out` is NULL or valid for
/// writing a `memq_durable_meta`.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_message_get_meta(
    message: *const memq_durable_message,
    meta_out: *mut memq_durable_meta,
) -> memq_status {
    // SAFETY: the caller's pointers are valid as this function requires.
    unsafe { meta_of(["message", "meta_out"], message, meta_out) }
}

/// Frees a durable message. NULL does nothing.
///
/// Thread safety: no other call may use this message during or after this one.
///
/// # Safety
///
/// `message` is NULL or a live durable message handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_message_free(message: *mut memq_durable_message) {
    // SAFETY: the caller passes NULL or a handle from a receive, and gives it up.
    guard_void(|| unsafe { release(message) });
}

/// `memq_durable_message_data` for a delivery.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_durable_message_data`; also while it is being settled.
///
/// # Safety
///
/// `delivery` is NULL or a live durable delivery handle; `data_out` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_delivery_data(
    delivery: *const memq_durable_delivery,
    data_out: *mut *const u8,
) -> memq_status {
    // SAFETY: the caller's pointers are valid as this function requires.
    unsafe { data_of(["delivery", "data_out"], delivery, data_out) }
}

/// `memq_durable_message_key` for a delivery.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_durable_delivery_data`.
///
/// # Safety
///
/// `delivery` is NULL or a live durable delivery handle; `key_out` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_delivery_key(
    delivery: *const memq_durable_delivery,
    key_out: *mut *const u8,
) -> memq_status {
    // SAFETY: the caller's pointers are valid as this function requires.
    unsafe { key_of(["delivery", "key_out"], delivery, key_out) }
}

/// `memq_durable_message_get_meta` for a delivery.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_durable_delivery_data`.
///
/// # Safety
///
/// `delivery` is NULL or a live durable delivery handle; `meta_out` is NULL or valid for
/// writing a `memq_durable_meta`.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_delivery_get_meta(
    delivery: *const memq_durable_delivery,
    meta_out: *mut memq_durable_meta,
) -> memq_status {
    // SAFETY: the caller's pointers are valid as this function requires.
    unsafe { meta_of(["delivery", "meta_out"], delivery, meta_out) }
}

/// Writes how many times the message has been delivered, this time included, to
/// `*deliveries_out` (1 the first time; deliveries before a restart count).
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_durable_delivery_data`.
///
/// # Safety
///
/// `delivery` is NULL or a live durable delivery handle; `deliveries_out` is NULL or
/// valid for writing a `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_delivery_deliveries(
    delivery: *const memq_durable_delivery,
    deliveries_out: *mut u32,
) -> memq_status {
    // SAFETY: the caller's pointers are valid as this function requires.
    unsafe {
        get(
            ["delivery", "deliveries_out"],
            delivery,
            deliveries_out,
            |d| Ok(d.deliveries),
        )
    }
}

/// Takes the lease out of a delivery handle, once.
pub(crate) fn take_lease(delivery: &memq_durable_delivery) -> Result<Delivery, memq_status> {
    lock(&delivery.lease)?.take().ok_or_else(|| {
        with_detail(
            memq_status::LeaseExpired,
            "this delivery was acked or nacked already",
        )
    })
}

/// Acknowledges the message: it is settled and never delivered again, across restarts
/// too once the group's state is written (every `commit_every` settlements,
/// `memq_durable_consumer_commit`, or when the last member leaves). Ends the lease; the
/// handle stays valid (free it with `memq_durable_delivery_free`).
///
/// Returns `MEMQ_STATUS_LEASE_EXPIRED` if this delivery was acked or nacked already;
/// `MEMQ_STATUS_DISK_FULL` or `MEMQ_STATUS_IO` if writing the group's state failed (the
/// ack is kept in memory and written with the next write); `MEMQ_STATUS_NULL_POINTER`.
/// An ack that comes after the lease ran out, while the message waits to be delivered
/// again, still settles it.
///
/// Thread safety: `memq_durable_delivery_ack` and `_nack` on one delivery may come from
/// any thread, also after its consumer was freed; at most one succeeds. The delivery must
/// not be freed while another call uses it.
///
/// # Safety
///
/// `delivery` is NULL or a live durable delivery handle.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_delivery_ack(
    delivery: *const memq_durable_delivery,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let delivery = unsafe { borrow(delivery, "delivery") }?;
        take_lease(delivery)?.ack()?;
        Ok(())
    })
}

/// Hands the message back to the group, to be delivered again at once (to any member);
/// after `max_deliveries` deliveries it is dead-lettered instead. Ends the lease; the
/// handle stays valid (free it with `memq_durable_delivery_free`).
///
/// Returns `MEMQ_STATUS_LEASE_EXPIRED` if this delivery was acked or nacked already,
/// `MEMQ_STATUS_NULL_POINTER`.
///
/// Thread safety: as `memq_durable_delivery_ack`.
///
/// # Safety
///
/// `delivery` is NULL or a live durable delivery handle.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_delivery_nack(
    delivery: *const memq_durable_delivery,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let delivery = unsafe { borrow(delivery, "delivery") }?;
        take_lease(delivery)?.nack();
        Ok(())
    })
}

/// Hands the message back to the group, to be delivered again (to any member) once
/// `delay_ms` milliseconds have passed: a retry with backoff. Until then it holds its
/// partition's committed offset back; after a restart it is delivered again at once.
/// Ends the lease; the handle stays valid (free it with `memq_durable_delivery_free`).
///
/// Returns `MEMQ_STATUS_LEASE_EXPIRED` if this delivery was settled already or its lease
/// ran out, `MEMQ_STATUS_NULL_POINTER`.
///
/// Thread safety: as `memq_durable_delivery_ack`.
///
/// # Safety
///
/// `delivery` is NULL or a live durable delivery handle.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_delivery_nack_after(
    delivery: *const memq_durable_delivery,
    delay_ms: u64,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let delivery = unsafe { borrow(delivery, "delivery") }?;
        take_lease(delivery)?.nack_after(Duration::from_millis(delay_ms))?;
        Ok(())
    })
}

/// Extends the delivery's lease by the group's `ack_wait_ms`, from now, for work that
/// takes longer than one lease. The delivery stays unsettled.
///
/// Returns `MEMQ_STATUS_LEASE_EXPIRED` if it was settled already or its lease ran out
/// (it is delivered again, or waits to be), `MEMQ_STATUS_NULL_POINTER`.
///
/// Thread safety: as `memq_durable_delivery_ack`.
///
/// # Safety
///
/// `delivery` is NULL or a live durable delivery handle.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_delivery_touch(
    delivery: *const memq_durable_delivery,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let delivery = unsafe { borrow(delivery, "delivery") }?;
        let mut lease = lock(&delivery.lease)?;
        let held = lease.as_mut().ok_or_else(|| {
            with_detail(
                memq_status::LeaseExpired,
                "this delivery was settled already",
            )
        })?;
        held.touch()?;
        Ok(())
    })
}

/// Gives up on the message: it is moved to the group's dead-letter log (read it with
/// `memq_durable_dead_letters_new`) with reason `MEMQ_DEAD_LETTER_REASON_REJECTED`,
/// settled, and never delivered again. Ends the lease; the handle stays valid (free it
/// with `memq_durable_delivery_free`).
///
/// Returns `MEMQ_STATUS_LEASE_EXPIRED` if this delivery was settled already or its lease
/// ran out (it will be delivered again, and can be rejected then); `MEMQ_STATUS_DISK_FULL`
/// or `MEMQ_STATUS_IO` if the move failed (it is moved by the group's next receive);
/// `MEMQ_STATUS_NULL_POINTER`.
///
/// Thread safety: as `memq_durable_delivery_ack`.
///
/// # Safety
///
/// `delivery` is NULL or a live durable delivery handle.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_delivery_reject(
    delivery: *const memq_durable_delivery,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let delivery = unsafe { borrow(delivery, "delivery") }?;
        take_lease(delivery)?.reject()?;
        Ok(())
    })
}

/// Frees a delivery, settled or not. One still unsettled is delivered again once its
/// lease runs out. NULL does nothing.
///
/// Thread safety: no other call may use this delivery during or after this one. It may
/// be freed on any thread, before or after its consumer.
///
/// # Safety
///
/// `delivery` is NULL or a live durable delivery handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn memq_durable_delivery_free(delivery: *mut memq_durable_delivery) {
    // SAFETY: the caller passes NULL or a handle from
    // `memq_durable_consumer_recv_delivery`, and gives it up.
    guard_void(|| unsafe { release(delivery) });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The store's errors map to the statuses the header promises, with its words.
    #[test]
    fn store_errors_map_to_their_statuses() {
        let io = |code| StoreError::Io {
            op: "write",
            path: PathBuf::from("/x/partition-0/00000000000000000000.log"),
            source: std::io::Error::from_raw_os_error(code),
        };
        // ENOSPC and EDQUOT (Linux's numbers) are a full disk; EIO another I/O error.
        assert_eq!(memq_status::from(io(28)), memq_status::DiskFull);
        #[cfg(target_os = "linux")]
        assert_eq!(memq_status::from(io(122)), memq_status::DiskFull);
        assert_eq!(memq_status::from(io(5)), memq_status::Io);
        let locked = StoreError::Locked {
            dir: PathBuf::from("/x"),
        };
        assert_eq!(memq_status::from(locked), memq_status::Locked);
        let corrupt = StoreError::Corrupt {
            file: PathBuf::from("/x/a.log"),
            position: 16,
            offset: 0,
            reason: "bad crc",
        };
        assert_eq!(memq_status::from(corrupt), memq_status::Corrupt);
        let format = StoreError::Format {
            file: PathBuf::from("/x/b.log"),
            reason: "foreign header".into(),
        };
        assert_eq!(memq_status::from(format), memq_status::Corrupt);
        assert_eq!(memq_status::from(StoreError::Full), memq_status::Full);
        let large = StoreError::TooLarge { size: 10, max: 5 };
        assert_eq!(memq_status::from(large), memq_status::InvalidArgument);
        let open = OpenError::Config("a TTL".into());
        assert_eq!(memq_status::from(open), memq_status::InvalidArgument);
        let publish: DurablePublishError<()> = DurablePublishError::Store(io(28), ());
        assert_eq!(memq_status::from(publish), memq_status::DiskFull);
        // SAFETY: NULL `lagged_out` is allowed.
        let read = unsafe { recv_failed(DurableRecvError::Store(io(5)), core::ptr::null_mut()) };
        assert_eq!(read, memq_status::Io);
        let mut lagged = 0;
        // SAFETY: a valid `lagged_out`.
        let lag = unsafe { recv_failed(DurableRecvError::Lagged(3), &mut lagged) };
        assert_eq!((lag, lagged), (memq_status::Lagged, 3));
    }

    /// A handle whose lock a panic poisoned answers `MEMQ_STATUS_PANIC`, and can be freed.
    #[test]
    fn a_poisoned_durable_handle_reports_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let topic = DurableTopic::open(
            dir.path(),
            memq_core::TopicConfig::new(4),
            DurableConfig::new(SyncPolicy::Never),
        )
        .unwrap();
        let sub = into_handle(memq_durable_subscriber {
            sub: Mutex::new(topic.subscribe(memq_core::StartAt::Earliest).unwrap()),
        });
        // SAFETY: `sub` is live until the free below.
        let held = unsafe { &*sub };
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _guard = held.sub.lock().unwrap();
            panic!("deliberate panic, poisoning a durable subscriber");
        }));
        let mut m = core::ptr::null_mut();
        // SAFETY: a live handle and valid out-pointers.
        let st = unsafe { memq_durable_subscriber_recv(sub, 0, &mut m, core::ptr::null_mut()) };
        assert_eq!(st, memq_status::Panic);
        assert!(m.is_null());
        // SAFETY: freed once.
        unsafe { memq_durable_subscriber_free(sub) };
    }
}
