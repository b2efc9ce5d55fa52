//! Sequences of C ABI calls: the input is read as a program of `memq_*` calls, made
//! through memq-ffi's `extern "C"` exports exactly as a C program makes them, on handles
//! kept in tables (topics, brokers, subscribers, consumers, explicit-ack consumers,
//! deliveries, messages, dead-letter topics, their subscribers and letters).
//!
//! Most calls get valid arguments; about one in ten gets exactly one argument the API
//! promises to reject (a NULL handle or out-parameter, NULL data with a nonzero length, an
//! out-of-range enumeration, partition or offset, a zero capacity, a name that is not
//! UTF-8), and must return the documented status for it. Never a dangling handle: a handle
//! leaves its table when it is freed. Every receive uses `timeout_ms == 0`, so no call
//! waits; a rare step sleeps 1 ms (twice per input at most, and only once something can
//! run out that fast) so that short leases, backoff delays and TTLs run out between calls.
//! At the end of each input every live handle is freed (in one of two orders), so that
//! the leak checker sees everything come back.
//!
//! Checked on every call: the status is one the function documents for the situation (a
//! small model tracks what each topic, group and handle should be in), out-parameters are
//! written only on success (or as documented: the lag count, the needed buffer length), a
//! received payload is the one published at that partition and offset (and for a
//! zero-copy publish, the caller's own buffer), offsets come in order, a too-small copy
//! reports the needed length and a retry with it succeeds and loses nothing, settling a
//! lease twice fails, and each zero-copy release function runs exactly once by the time
//! every handle is freed (at once when the publish fails). A panic caught at the boundary
//! would be `MEMQ_STATUS_PANIC`; libFuzzer's panic hook aborts before that, so any panic
//! in the library is a crash.
#![no_main]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{c_char, c_void, CStr};
use std::fmt::Debug;
use std::ptr::{null, null_mut, NonNull};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use memq_ffi::*;

type St = memq_status;

/// Calls per input, so that one input cannot run for long.
const MAX_CALLS: usize = 400;
/// Sleeps per input, and how long each is: enough for 1 ms leases and TTLs to run out.
const MAX_SLEEPS: u32 = 2;
const SLEEP: Duration = Duration::from_millis(1);
/// Live handles of each kind, so that one input cannot use much memory.
const MAX_TOPICS: usize = 8;
const MAX_READERS: usize = 16;
const MAX_MESSAGES: usize = 64;

/// Topic names in brokers, and group names: few, so that calls meet the same ones again.
const NAMES: [&CStr; 3] = [c"t0", c"t1", c"t2"];
const GROUPS: [&CStr; 3] = [c"g0", c"g1", c"g2"];
/// A name that is not UTF-8: `MEMQ_STATUS_INVALID_ARGUMENT`.
const BAD_NAME: &CStr = c"g\xff\xfe";
/// A receipt no call has written.
const NO_RECEIPT: memq_receipt = memq_receipt {
    offset: u64::MAX,
    partition: u32::MAX,
};
/// A payload that lives forever, published without a release function.
static STATIC_PAYLOAD: [u8; 16] = *b"static payload!!";

/// A pointer that is not NULL and that no call may write to: what an out-parameter holds
/// before a call that must not write it. Never dereferenced.
fn sentinel<T>() -> *mut T {
    NonNull::dangling().as_ptr()
}

/// Checks a status: never a panic caught at the boundary, and one of `allowed`.
#[track_caller]
fn expect(st: St, allowed: &[St], what: &str) {
    assert_ne!(st, St::Panic, "{what}: a panic reached the boundary");
    assert!(
        allowed.contains(&st),
        "{what}: returned {st:?}, expected one of {allowed:?}"
    );
}

/// 64-bit FNV-1a, the key routing the header documents.
fn fnv1a(key: &[u8]) -> u64 {
    key.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

// ----- zero-copy buffers ---------------------------------------------------------------

/// Buffers handed to `memq_topic_publish_owned` and not yet released, by token (the
/// `user_data`): the address and length memq must pass back, and the buffer itself.
type Owned = BTreeMap<usize, (usize, usize, Option<Box<[u8]>>)>;
static OWNED: Mutex<Owned> = Mutex::new(BTreeMap::new());
static NEXT_TOKEN: AtomicUsize = AtomicUsize::new(1);

fn owned() -> std::sync::MutexGuard<'static, Owned> {
    OWNED.lock().unwrap_or_else(|e| e.into_inner())
}

/// The release function: must run exactly once per published buffer, with its arguments.
unsafe extern "C" fn release_owned(user_data: *mut c_void, data: *const u8, len: usize) {
    let token = user_data as usize;
    let entry = owned().remove(&token);
    let Some((addr, expected_len, buffer)) = entry else {
        panic!("free_fn called twice, or with a user_data never given (token {token})");
    };
    assert_eq!(
        (data as usize, len),
        (addr, expected_len),
        "free_fn got other data"
    );
    drop(buffer);
}

// ----- the model -----------------------------------------------------------------------

/// What a topic should be, whatever handle reaches it.
struct TopicM {
    partitions: u32,
    capacity: usize,
    overflow: u32,
    /// Messages carry timestamps (a TTL or `MEMQ_TOPIC_TIMESTAMPS`).
    stamped: bool,
    ttl: bool,
    /// `MEMQ_TOPIC_RELEASE_ON_READ`: messages every reader has read leave the log.
    release: bool,
    /// `memq_topic_close` was called, or its broker deleted it.
    closed: bool,
    /// Live `memq_topic` handles.
    handles: usize,
    /// Registered in a live broker.
    registered: bool,
    /// The broker name, if made by a broker.
    name: Option<&'static CStr>,
    /// Next offset per partition: messages published so far.
    next: Vec<u64>,
    /// Every payload published, by partition and offset, and the caller's buffer for a
    /// zero-copy one.
    payloads: HashMap<(u32, u64), (Vec<u8>, Option<usize>)>,
    groups: HashMap<usize, GroupM>,
}

impl TopicM {
    fn new(c: &memq_topic_config, name: Option<&'static CStr>) -> Self {
        Self {
            partitions: c.partitions,
            capacity: c.capacity,
            overflow: c.overflow,
            stamped: c.ttl_ms > 0 || c.flags & MEMQ_TOPIC_TIMESTAMPS != 0,
            ttl: c.ttl_ms > 0,
            release: c.flags & MEMQ_TOPIC_RELEASE_ON_READ != 0,
            closed: false,
            handles: 1,
            registered: name.is_some(),
            name,
            next: vec![0; c.partitions as usize],
            payloads: HashMap::new(),
            groups: HashMap::new(),
        }
    }

    /// Closed: explicitly, or its last handle (topic handles and broker entry) is gone.
    fn is_closed(&self) -> bool {
        self.closed || (self.handles == 0 && !self.registered)
    }

    fn drop_oldest(&self) -> bool {
        self.overflow == memq_overflow::DropOldest as u32
    }

    /// Records a successful publish of `values` at `receipt`.
    fn published(&mut self, receipt: memq_receipt, values: &[(Vec<u8>, Option<usize>)]) {
        let p = receipt.partition;
        assert!(p < self.partitions, "receipt names partition {p}");
        let next = &mut self.next[p as usize];
        assert_eq!(
            receipt.offset, *next,
            "offsets are contiguous per partition"
        );
        for v in values {
            self.payloads.insert((p, *next), v.clone());
            *next += 1;
        }
    }

    /// Checks a received payload against what was published there.
    #[track_caller]
    fn check_payload(&self, p: u32, o: u64, bytes: &[u8], data: Option<*const u8>) {
        assert!(p < self.partitions, "message from partition {p}");
        let Some((expected, addr)) = self.payloads.get(&(p, o)) else {
            panic!("message at {p}/{o} that was never published");
        };
        assert_eq!(bytes, &expected[..], "payload at {p}/{o}");
        if let (Some(addr), Some(data), false) = (addr, data, bytes.is_empty()) {
            assert_eq!(data as usize, *addr, "a zero-copy payload was copied");
        }
    }

    /// The lowest next offset over the partitions a reader reads.
    fn min_high(&self, partition: Option<u32>) -> u64 {
        match partition {
            Some(p) => self.next[p as usize],
            None => self.next.iter().copied().min().unwrap_or(0),
        }
    }
}

struct GroupM {
    acked: bool,
    members: usize,
    /// Successful acks (explicit-ack groups).
    acks: u64,
    /// Offsets delivered (automatic-commit groups: at most once each).
    taken: HashSet<(u32, u64)>,
    max_deliveries: u32,
    /// The group's dead-letter topic (index into `dls`), if it has one: once that is
    /// closed, messages past `max_deliveries` are delivered again instead of moved.
    dead_letter: Option<usize>,
    /// Leases cannot run out or be evicted during an input: settling must succeed.
    strict: bool,
}

struct DlM {
    closed: bool,
    handles: usize,
}

struct TopicH {
    p: *mut memq_topic,
    t: usize,
}

struct BrokerH {
    p: *mut memq_broker,
    names: [Option<usize>; 3],
}

struct SubH {
    p: *mut memq_subscriber,
    t: usize,
    partition: Option<u32>,
    last: HashMap<u32, u64>,
    /// The length of a message kept back by a too-small `recv_into`.
    pending: Option<usize>,
}

struct ConsH {
    p: *mut memq_consumer,
    t: usize,
    g: usize,
    /// Always `None`: a member's too-small `recv_into` takes nothing from its group.
    pending: Option<usize>,
}

struct AckH {
    p: *mut memq_ack_consumer,
    t: usize,
    g: usize,
    id: u64,
}

struct DelivH {
    p: *mut memq_delivery,
    t: usize,
    g: usize,
    consumer: u64,
    /// The handle no longer holds its lease (settled, or a call said it expired).
    gone: bool,
    /// Its consumer was freed: the lease went back to the group.
    orphan: bool,
}

struct MsgH {
    p: *mut memq_message,
    t: usize,
}

struct DlH {
    p: *mut memq_dead_letter_topic,
    d: usize,
}

struct DlSubH {
    p: *mut memq_dead_letter_subscriber,
    d: usize,
}

/// A subscriber or a group member: the readers of byte messages.
#[derive(Clone, Copy, Debug)]
enum Reader {
    Sub(usize),
    Cons(usize),
}

#[derive(Default)]
struct State {
    topics: Vec<TopicM>,
    dls: Vec<DlM>,
    topic_h: Vec<TopicH>,
    brokers: Vec<BrokerH>,
    subs: Vec<SubH>,
    cons: Vec<ConsH>,
    acks: Vec<AckH>,
    delivs: Vec<DelivH>,
    msgs: Vec<MsgH>,
    dl_h: Vec<DlH>,
    dl_subs: Vec<DlSubH>,
    letters: Vec<*mut memq_dead_letter>,
    next_consumer: u64,
    /// Sleeps so far in this input (see `let_time_pass`).
    sleeps: u32,
    /// Something can run out in a millisecond: a TTL, a lease, a backoff or nack delay.
    timed: bool,
}

fn pick<T>(u: &mut Unstructured<'_>, v: &[T]) -> Result<Option<usize>> {
    if v.is_empty() {
        Ok(None)
    } else {
        u.choose_index(v.len()).map(Some)
    }
}

/// Whether this call gets a bad argument (about one call in ten).
fn faulty(u: &mut Unstructured<'_>) -> Result<bool> {
    u.ratio(1u8, 10)
}

/// A payload: up to 40 bytes usually, sometimes a few hundred.
fn payload(u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    let max = if u.ratio(1u8, 16)? { 300 } else { 40 };
    let len = u.int_in_range(0..=max)?.min(u.len());
    Ok(u.bytes(len)?.to_vec())
}

/// A data pointer for C: NULL for an empty payload half of the time.
fn data_ptr(u: &mut Unstructured<'_>, bytes: &[u8]) -> Result<*const u8> {
    Ok(if bytes.is_empty() && u.arbitrary()? {
        null()
    } else {
        bytes.as_ptr()
    })
}

/// A start position: `memq_start` and offset; an unknown value only when asked.
fn start(u: &mut Unstructured<'_>) -> Result<(u32, u64)> {
    let start = u.int_in_range(0..=2)?;
    let offset = match u.int_in_range(0..=4)? {
        0 => 0,
        1 => 1,
        2 => u.int_in_range(0..=8)?,
        3 => u64::MAX,
        _ => u.arbitrary()?,
    };
    Ok((start, offset))
}

fn bad_start(u: &mut Unstructured<'_>) -> Result<u32> {
    u.int_in_range(3..=u32::MAX)
}

/// For a `_free` call: a handle taken out of its table, or `None` (no handle, or a faulty
/// call) for a free of NULL, which does nothing.
fn take<T>(u: &mut Unstructured<'_>, table: &mut Vec<T>) -> Result<Option<T>> {
    Ok(match pick(u, table)? {
        Some(i) if !faulty(u)? => Some(table.swap_remove(i)),
        _ => None,
    })
}

/// The arguments of a call on a handle (or, for a constructor, its config) with one
/// out-parameter, and perhaps a partition: see `args`.
struct Args<H, O> {
    handle: *const H,
    out: *mut O,
    /// A partition of the topic, or one past the last when that is the bad argument (0 for
    /// a call without a partition).
    partition: u32,
    /// Which of the call's own bad arguments (an index into `args`' `others`) the caller
    /// is to make.
    other: Option<usize>,
    /// The status the bad argument gets; `None` when all are valid.
    rejected: Option<St>,
}

/// The arguments for a call on `handle` with the out-pointer `out` and, when `partitions`
/// is given, a partition below it: all valid unless `bad`. Then exactly one, picked by the
/// input, is one the API rejects: a NULL handle or out-pointer (`NullPointer`), a
/// partition past the last (`OutOfRange`), or one of the call's own, whose statuses
/// `others` lists (the caller makes that one, as `other` says).
fn args<H, O>(
    u: &mut Unstructured<'_>,
    bad: bool,
    handle: *const H,
    out: *mut O,
    partitions: Option<u32>,
    others: &[St],
) -> Result<Args<H, O>> {
    let mut a = Args {
        handle,
        out,
        partition: 0,
        other: None,
        rejected: None,
    };
    if let Some(n) = partitions {
        a.partition = u.int_in_range(0..=n - 1)?;
    }
    if !bad {
        return Ok(a);
    }
    let common = if partitions.is_some() { 3 } else { 2 };
    let k = u.choose_index(common + others.len())?;
    a.rejected = Some(match (k, partitions) {
        (0, _) => {
            a.handle = null();
            St::NullPointer
        }
        (1, _) => {
            a.out = null_mut();
            St::NullPointer
        }
        (2, Some(n)) => {
            a.partition = u.int_in_range(n..=u32::MAX)?;
            St::OutOfRange
        }
        _ => {
            a.other = Some(k - common);
            others[k - common]
        }
    });
    Ok(a)
}

impl<H, O> Args<H, O> {
    /// Checks the status of the call made with these arguments: the one for the bad
    /// argument, else one of `valid`. Whether a bad argument was rejected.
    #[track_caller]
    fn check(&self, st: St, valid: &[St], what: &str) -> bool {
        match self.rejected {
            Some(rejected) => expect(st, &[rejected], what),
            None => expect(st, valid, what),
        }
        self.rejected.is_some()
    }
}

/// A call that reads one value of a handle, such as `memq_subscriber_lag`.
type Get<H, V> = unsafe extern "C" fn(*const H, *mut V) -> St;
/// A call that reads one value of a handle's partition, such as `memq_consumer_committed`.
type GetAt<H, V> = unsafe extern "C" fn(*const H, u32, *mut V) -> St;

/// Reads a value of `handle` (NULL or live, like every handle in the tables) with `get`,
/// one of its arguments bad when `bad`: the value, or `None` when the bad argument was
/// rejected, and then the out-parameter still holds `init`.
fn get<H, V: Copy + PartialEq + Debug>(
    u: &mut Unstructured<'_>,
    bad: bool,
    handle: *const H,
    init: V,
    get: Get<H, V>,
    what: &str,
) -> Result<Option<V>> {
    // SAFETY: `get` takes NULL or a live handle of its kind, and NULL or a writable
    // out-parameter.
    let call = |h, _, out| unsafe { get(h, out) };
    let got = read(u, bad, handle, None, init, what, call)?;
    Ok(got.map(|(_, value)| value))
}

/// `get` for a partition, one of `partitions`: the partition and the value.
fn get_at<H, V: Copy + PartialEq + Debug>(
    u: &mut Unstructured<'_>,
    bad: bool,
    handle: *const H,
    partitions: u32,
    init: V,
    get: GetAt<H, V>,
    what: &str,
) -> Result<Option<(u32, V)>> {
    // SAFETY: `get` takes NULL or a live handle of its kind, any partition, and NULL or a
    // writable out-parameter.
    let call = |h, q, out| unsafe { get(h, q, out) };
    read(u, bad, handle, Some(partitions), init, what, call)
}

/// What `get` and `get_at` share: `call` makes the call with the arguments `args` gives.
fn read<H, V: Copy + PartialEq + Debug>(
    u: &mut Unstructured<'_>,
    bad: bool,
    handle: *const H,
    partitions: Option<u32>,
    init: V,
    what: &str,
    call: impl FnOnce(*const H, u32, *mut V) -> St,
) -> Result<Option<(u32, V)>> {
    let mut value = init;
    let a = args(u, bad, handle, &mut value, partitions, &[])?;
    let st = call(a.handle, a.partition, a.out);
    if a.check(st, &[St::Ok], what) {
        assert_eq!(value, init, "{what}: out-parameter written on failure");
        return Ok(None);
    }
    Ok(Some((a.partition, value)))
}

/// Makes a topic with `new` (`memq_topic_new` or `memq_dead_letter_topic_new`) from a
/// configuration, all valid unless the call is faulty: then the configuration (see
/// `topic_config`), or the config or out-pointer NULL. The configuration, and the handle
/// made, if any.
fn new_topic<T>(
    u: &mut Unstructured<'_>,
    new: unsafe extern "C" fn(*const memq_topic_config, *mut *mut T) -> St,
    what: &str,
) -> Result<(memq_topic_config, Option<*mut T>)> {
    let bad = faulty(u)?;
    let bad_config = bad && u.arbitrary()?;
    let (c, expected) = topic_config(u, bad_config)?;
    let mut out = sentinel();
    let a = args(u, bad && !bad_config, &c, &mut out, None, &[])?;
    // SAFETY: NULL or a valid config; NULL or a writable out-pointer.
    let st = unsafe { new(a.handle, a.out) };
    a.check(st, &[expected], what);
    if st != St::Ok {
        assert_eq!(out, sentinel(), "{what}: topic_out written on failure");
        return Ok((c, None));
    }
    assert!(!out.is_null() && out != sentinel());
    Ok((c, Some(out)))
}

/// Reads a group's statistics with `get` (`memq_topic_get_group_stats` or
/// `memq_topic_get_ack_group_stats`), one argument bad when `bad` (a NULL or non-UTF-8
/// group name among them): the statistics, or `None` when the call fails with the status
/// it must (the bad argument's, else `valid`), and then the out-parameter still holds
/// `init`.
fn group_stats<S: Copy + PartialEq + Debug>(
    u: &mut Unstructured<'_>,
    bad: bool,
    topic: *const memq_topic,
    g: usize,
    valid: St,
    init: S,
    get: unsafe extern "C" fn(*const memq_topic, *const c_char, *mut S) -> St,
) -> Result<Option<S>> {
    let mut s = init;
    // A NULL name; a name that is not UTF-8.
    let others = [St::NullPointer, St::InvalidArgument];
    let a = args(u, bad, topic, &mut s, None, &others)?;
    let name = match a.other {
        Some(0) => null(),
        Some(_) => BAD_NAME.as_ptr(),
        None => GROUPS[g].as_ptr(),
    };
    // SAFETY: NULL or live handle; NULL or NUL-terminated name; NULL or writable stats.
    let st = unsafe { get(a.handle, name, a.out) };
    a.check(st, &[valid], "group stats");
    if st != St::Ok {
        assert_eq!(s, init, "group stats written on failure");
        return Ok(None);
    }
    Ok(Some(s))
}

/// Checks a receive's lag out-parameter and a `Closed` status: a lag count only with
/// `Lagged` (when one was asked for), `Closed` only from a closed topic.
#[track_caller]
fn check_lag(st: St, lagged: u64, lag_asked: bool, closed: bool) {
    if st == St::Lagged && lag_asked {
        assert!(lagged > 0 && lagged != u64::MAX, "lag count {lagged}");
    } else {
        assert_eq!(lagged, u64::MAX, "lagged_out written without a lag");
    }
    if st == St::Closed {
        assert!(closed, "Closed from an open topic");
    }
}

/// A topic configuration, valid unless `bad`; the status a bad one gets.
fn topic_config(u: &mut Unstructured<'_>, bad: bool) -> Result<(memq_topic_config, St)> {
    let mut c = memq_topic_config {
        capacity: 0,
        partitions: 0,
        overflow: 7,
        ttl_ms: 7,
        flags: 7,
    };
    // SAFETY: a valid, writable config.
    expect(
        unsafe { memq_topic_config_init(&mut c) },
        &[St::Ok],
        "config_init",
    );
    assert_eq!(c, memq_topic_config::default());
    c.capacity = *u.choose(&[1, 1, 2, 2, 3, 4, 8, 16, 64])?;
    c.partitions = u.int_in_range(1..=3)?;
    c.overflow = u.int_in_range(0..=2)?;
    if u.ratio(1u8, 8)? {
        c.ttl_ms = *u.choose(&[1, 20, 60_000, u64::MAX])?;
    }
    if u.arbitrary()? {
        c.flags = MEMQ_TOPIC_TIMESTAMPS;
    }
    if u.ratio(1u8, 3)? {
        c.flags |= MEMQ_TOPIC_RELEASE_ON_READ;
    }
    // The lock-free ring engine where the topic allows it (the model is the same on
    // both engines; with a TTL, timestamps or release on read the topic stays locked).
    if u.arbitrary()? {
        c.flags |= MEMQ_TOPIC_RING_ENGINE;
    }
    let mut status = St::Ok;
    if bad {
        status = St::InvalidArgument;
        match u.int_in_range(0..=4)? {
            0 => c.capacity = 0,
            1 => c.partitions = 0,
            2 => c.overflow = u.int_in_range(3..=u32::MAX)?,
            // Bits above the known flags (`MEMQ_TOPIC_TIMESTAMPS`, `_RELEASE_ON_READ`,
            // `_RING_ENGINE`).
            3 => c.flags |= 8u32 << u.int_in_range(0..=28u32)?,
            // Rejected before anything is allocated: the ring's size overflows.
            _ => {
                c.capacity = usize::MAX >> u.int_in_range(0..=1)?;
                status = St::AllocFailed;
            }
        }
    }
    Ok((c, status))
}

fn partition_stats(t: *const memq_topic, p: u32) -> memq_partition_stats {
    let mut s = memq_partition_stats::default();
    // SAFETY: a live topic handle and a writable stats struct.
    let st = unsafe { memq_topic_get_partition_stats(t, p, &mut s) };
    expect(st, &[St::Ok], "partition stats");
    s
}

/// What a message handle holds: partition, offset, payload, payload address.
///
/// # Safety
///
/// `m` is a live message handle.
unsafe fn read_message(m: *const memq_message, stamped: bool) -> (u32, u64, Vec<u8>, *const u8) {
    let (mut len, mut data, mut offset, mut partition) =
        (usize::MAX, sentinel::<u8>().cast_const(), 0, u32::MAX);
    let mut meta = memq_message_meta::default();
    let mut ts = u64::MAX;
    // SAFETY: a live handle and writable out-parameters.
    unsafe {
        expect(memq_message_len(m, &mut len), &[St::Ok], "message_len");
        expect(memq_message_data(m, &mut data), &[St::Ok], "message_data");
        expect(memq_message_offset(m, &mut offset), &[St::Ok], "offset");
        let st = memq_message_partition(m, &mut partition);
        expect(st, &[St::Ok], "message_partition");
        expect(memq_message_get_meta(m, &mut meta), &[St::Ok], "get_meta");
        let st = memq_message_timestamp(m, &mut ts);
        if stamped {
            expect(st, &[St::Ok], "timestamp");
            assert_eq!(ts, meta.timestamp_ns);
        } else {
            expect(st, &[St::NoTimestamp], "timestamp");
            assert_eq!(ts, u64::MAX, "timestamp written on failure");
            assert_eq!(meta.timestamp_ns, 0);
        }
    }
    assert_eq!(meta.has_timestamp, stamped);
    assert_eq!(
        (meta.offset, meta.partition, meta.len),
        (offset, partition, len)
    );
    let bytes = if len == 0 {
        Vec::new()
    } else {
        assert!(!data.is_null());
        // SAFETY: the payload is `len` readable bytes until the message is freed.
        unsafe { std::slice::from_raw_parts(data, len) }.to_vec()
    };
    (partition, offset, bytes, data)
}

impl State {
    fn run(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        for _ in 0..MAX_CALLS {
            if u.is_empty() {
                break;
            }
            match u.int_in_range(0..=40u8)? {
                0 | 1 => self.topic_new(u)?,
                2 => self.topic_clone(u)?,
                3 => self.topic_free(u)?,
                4 => self.topic_close(u)?,
                5..=7 => self.publish(u)?,
                8 => self.publish_owned(u)?,
                9 => self.publish_batch(u)?,
                10 => self.publish_and_read_back(u)?,
                11 => self.key_partition(u)?,
                12 => self.stats(u)?,
                13 => self.broker(u)?,
                14 | 15 => self.broker_topic(u)?,
                16 | 17 => self.subscriber_new(u)?,
                18 => self.reader_free(u)?,
                19..=21 => self.reader_recv(u)?,
                22 => self.reader_query(u)?,
                23 | 24 => self.consumer_new(u)?,
                25 => self.message_op(u)?,
                26 => self.message_free(u)?,
                27 | 28 => self.ack_consumer_new(u)?,
                29 => self.ack_consumer_free(u)?,
                30 | 31 => self.ack_recv(u)?,
                32 => self.ack_query(u)?,
                33 | 34 => self.settle(u)?,
                35 => self.delivery_op(u)?,
                36 => self.dead_letter_topic(u)?,
                37 => self.dead_letter_subscriber(u)?,
                38 => self.dead_letter_recv(u)?,
                39 => self.misc(u)?,
                _ => self.let_time_pass(),
            }
        }
        Ok(())
    }

    // ----- topics ----------------------------------------------------------------------

    fn topic_new(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        if self.topic_h.len() >= MAX_TOPICS {
            return Ok(());
        }
        if let (c, Some(p)) = new_topic(u, memq_topic_new, "topic_new")? {
            self.timed |= c.ttl_ms == 1;
            self.topics.push(TopicM::new(&c, None));
            let t = self.topics.len() - 1;
            self.topic_h.push(TopicH { p, t });
        }
        Ok(())
    }

    fn topic_clone(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let Some(i) = pick(u, &self.topic_h)? else {
            return Ok(());
        };
        let bad = faulty(u)?;
        if !bad && self.topic_h.len() >= MAX_TOPICS {
            return Ok(());
        }
        let TopicH { p, t } = self.topic_h[i];
        if let Some(out) = get(u, bad, p, sentinel(), memq_topic_clone, "topic_clone")? {
            self.topics[t].handles += 1;
            self.topic_h.push(TopicH { p: out, t });
        }
        Ok(())
    }

    fn topic_free(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let h = take(u, &mut self.topic_h)?;
        // SAFETY: NULL (which does nothing), or a live handle, not used again.
        unsafe { memq_topic_free(h.as_ref().map_or(null_mut(), |h| h.p)) };
        if let Some(h) = h {
            self.topics[h.t].handles -= 1;
        }
        Ok(())
    }

    fn topic_close(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let Some(i) = pick(u, &self.topic_h)? else {
            return Ok(());
        };
        let TopicH { p, t } = self.topic_h[i];
        let mut closed = true;
        if faulty(u)? {
            // SAFETY: NULL handles and out-pointers are rejected.
            unsafe {
                expect(memq_topic_close(null()), &[St::NullPointer], "close");
                let st = memq_topic_is_closed(null(), &mut closed);
                expect(st, &[St::NullPointer], "is_closed");
                let st = memq_topic_is_closed(p, null_mut());
                expect(st, &[St::NullPointer], "is_closed");
            }
            assert!(closed, "closed_out written on failure");
            return Ok(());
        }
        if u.arbitrary()? {
            // SAFETY: a live handle.
            expect(unsafe { memq_topic_close(p) }, &[St::Ok], "close");
            self.topics[t].closed = true;
        }
        closed = !self.topics[t].is_closed();
        // SAFETY: a live handle, a writable bool.
        expect(
            unsafe { memq_topic_is_closed(p, &mut closed) },
            &[St::Ok],
            "is_closed",
        );
        assert_eq!(closed, self.topics[t].is_closed(), "is_closed");
        Ok(())
    }

    /// After a successful publish whose receipt was not asked for: where it went, from
    /// the partitions' high offsets.
    fn receipt_from_stats(&self, p: *const memq_topic, t: usize, n: u64) -> memq_receipt {
        let tm = &self.topics[t];
        let moved: Vec<u32> = (0..tm.partitions)
            .filter(|&q| partition_stats(p, q).high != tm.next[q as usize])
            .collect();
        match moved[..] {
            [] if n == 0 => memq_receipt {
                offset: tm.next[0],
                partition: 0,
            },
            [q] => {
                assert_eq!(partition_stats(p, q).high, tm.next[q as usize] + n);
                memq_receipt {
                    offset: tm.next[q as usize],
                    partition: q,
                }
            }
            _ => panic!("a publish of {n} moved partitions {moved:?}"),
        }
    }

    /// The statuses a valid publish of `n` messages may get.
    fn publish_statuses(&self, t: usize) -> &'static [St] {
        let tm = &self.topics[t];
        if tm.is_closed() {
            &[St::Closed]
        } else if tm.drop_oldest() {
            &[St::Ok]
        } else {
            &[St::Ok, St::Full]
        }
    }

    fn publish(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let Some(i) = pick(u, &self.topic_h)? else {
            return Ok(());
        };
        let TopicH { p, t } = self.topic_h[i];
        let value = payload(u)?;
        let route = u.int_in_range(0..=2u8)?;
        let key = if route == 1 { payload(u)? } else { Vec::new() };
        let partitions = self.topics[t].partitions;
        let mut partition = u.int_in_range(0..=partitions - 1)?;
        let mut receipt = NO_RECEIPT;
        let want_receipt = !u.ratio(1u8, 4)?;
        let receipt_out: *mut memq_receipt = if want_receipt {
            &mut receipt
        } else {
            null_mut()
        };
        let mut topic: *const memq_topic = p;
        let mut data = data_ptr(u, &value)?;
        let mut key_ptr = data_ptr(u, &key)?;
        let mut allowed = self.publish_statuses(t);
        if faulty(u)? {
            match u.int_in_range(0..=3u8)? {
                0 => {
                    topic = null();
                    allowed = &[St::NullPointer];
                }
                1 if !value.is_empty() => {
                    data = null();
                    allowed = &[St::NullPointer];
                }
                2 if route == 1 && !key.is_empty() => {
                    key_ptr = null();
                    allowed = &[St::NullPointer];
                }
                3 if route == 2 => {
                    partition = u.int_in_range(partitions..=u32::MAX)?;
                    allowed = &[St::OutOfRange];
                }
                _ => {}
            }
        }
        // SAFETY: NULL or live handles; payloads and keys readable for their lengths (or
        // NULL); a writable receipt or NULL.
        let st = unsafe {
            match route {
                0 => memq_topic_publish(topic, data, value.len(), 0, receipt_out),
                1 => memq_topic_publish_keyed(
                    topic,
                    key_ptr,
                    key.len(),
                    data,
                    value.len(),
                    0,
                    receipt_out,
                ),
                _ => memq_topic_publish_to(topic, partition, data, value.len(), 0, receipt_out),
            }
        };
        expect(st, allowed, "publish");
        if st != St::Ok {
            assert_eq!(receipt.offset, u64::MAX, "receipt written on failure");
            return Ok(());
        }
        if !want_receipt {
            receipt = self.receipt_from_stats(p, t, 1);
        }
        match route {
            1 => assert_eq!(
                u64::from(receipt.partition),
                fnv1a(&key) % u64::from(partitions),
                "keyed publish routed elsewhere"
            ),
            2 => assert_eq!(receipt.partition, partition),
            _ => {}
        }
        self.topics[t].published(receipt, &[(value, None)]);
        Ok(())
    }

    fn publish_owned(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let Some(i) = pick(u, &self.topic_h)? else {
            return Ok(());
        };
        let TopicH { p, t } = self.topic_h[i];
        let mut receipt = NO_RECEIPT;
        let mut topic: *const memq_topic = p;
        let mut allowed = self.publish_statuses(t);
        if u.ratio(1u8, 6)? {
            // A static buffer: no release function.
            let len = u.int_in_range(0..=STATIC_PAYLOAD.len())?;
            if faulty(u)? {
                topic = null();
                allowed = &[St::NullPointer];
            }
            // SAFETY: NULL or a live handle; static data; a writable receipt.
            let st = unsafe {
                memq_topic_publish_owned(
                    topic,
                    STATIC_PAYLOAD.as_ptr(),
                    len,
                    None,
                    null_mut(),
                    0,
                    &mut receipt,
                )
            };
            expect(st, allowed, "publish_owned (static)");
            if st == St::Ok {
                let value = STATIC_PAYLOAD[..len].to_vec();
                let addr = STATIC_PAYLOAD.as_ptr() as usize;
                self.topics[t].published(receipt, &[(value, Some(addr))]);
            }
            return Ok(());
        }
        let value = payload(u)?;
        let buffer: Box<[u8]> = value.clone().into_boxed_slice();
        let mut data = data_ptr(u, &buffer)?;
        let mut len = buffer.len();
        if faulty(u)? {
            allowed = &[St::NullPointer];
            if u.arbitrary()? {
                topic = null();
            } else {
                data = null();
                len = len.max(1);
            }
        }
        let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
        owned().insert(token, (data as usize, len, Some(buffer)));
        // SAFETY: NULL or a live handle; `data` is NULL or the buffer, which stays
        // readable until `release_owned` takes it out of OWNED; a writable receipt.
        let st = unsafe {
            memq_topic_publish_owned(
                topic,
                data,
                len,
                Some(release_owned),
                token as *mut c_void,
                0,
                &mut receipt,
            )
        };
        expect(st, allowed, "publish_owned");
        if st == St::Ok {
            self.topics[t].published(receipt, &[(value, Some(data as usize))]);
        } else {
            assert_eq!(receipt.offset, u64::MAX, "receipt written on failure");
            // Not published: memq must not have released it, and never will; it is ours.
            assert!(
                owned().remove(&token).is_some(),
                "a failed publish_owned released the caller's buffer ({st:?})"
            );
        }
        Ok(())
    }

    fn publish_batch(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let Some(i) = pick(u, &self.topic_h)? else {
            return Ok(());
        };
        let TopicH { p, t } = self.topic_h[i];
        let (capacity, partitions) = (self.topics[t].capacity, self.topics[t].partitions);
        let bad = faulty(u)?;
        let fault = if bad { u.int_in_range(0..=5u8)? } else { 255 };
        let count = if fault == 3 {
            capacity + 1
        } else {
            u.int_in_range(0..=capacity.min(5))?
        };
        let mut values = Vec::with_capacity(count);
        for _ in 0..count {
            values.push(payload(u)?);
        }
        let mut items: Vec<memq_slice> = values
            .iter()
            .map(|v| memq_slice {
                data: v.as_ptr(),
                len: v.len(),
            })
            .collect();
        // 0: the next partition in turn; 1: an explicit one; 2: the key's.
        let route = match fault {
            4 => 1,
            5 => 2,
            _ => u.int_in_range(0..=2u8)?,
        };
        let key = if route == 2 { payload(u)? } else { Vec::new() };
        let mut key_ptr = data_ptr(u, &key)?;
        let mut partition = u.int_in_range(0..=partitions - 1)?;
        let mut topic: *const memq_topic = p;
        let mut items_ptr = if count == 0 && u.arbitrary()? {
            null()
        } else {
            items.as_ptr()
        };
        let mut allowed = self.publish_statuses(t);
        match fault {
            0 => {
                topic = null();
                allowed = &[St::NullPointer];
            }
            1 if count > 0 => {
                items_ptr = null();
                allowed = &[St::NullPointer];
            }
            2 if count > 0 => {
                let k = u.choose_index(count)?;
                items[k] = memq_slice {
                    data: null(),
                    len: items[k].len.max(1),
                };
                items_ptr = items.as_ptr();
                allowed = &[St::NullPointer];
            }
            // A batch over the capacity: `Full` at once, as in Rust.
            3 => allowed = &[St::Full],
            4 => {
                partition = u.int_in_range(partitions..=u32::MAX)?;
                allowed = &[St::OutOfRange];
            }
            5 if !key.is_empty() => {
                key_ptr = null();
                allowed = &[St::NullPointer];
            }
            _ => {}
        }
        let mut receipt = NO_RECEIPT;
        // SAFETY: NULL or a live handle; `items_ptr` NULL or `count` slices, each NULL or
        // readable for its length; the key NULL or readable for its length; a writable
        // receipt.
        let st = unsafe {
            match route {
                0 => memq_topic_publish_batch(topic, items_ptr, count, 0, &mut receipt),
                1 => {
                    memq_topic_publish_batch_to(topic, partition, items_ptr, count, 0, &mut receipt)
                }
                _ => memq_topic_publish_batch_keyed(
                    topic,
                    key_ptr,
                    key.len(),
                    items_ptr,
                    count,
                    0,
                    &mut receipt,
                ),
            }
        };
        expect(st, allowed, "publish_batch");
        if st != St::Ok {
            assert_eq!(receipt.offset, u64::MAX, "receipt written on failure");
            return Ok(());
        }
        match route {
            1 => assert_eq!(receipt.partition, partition),
            2 => assert_eq!(
                u64::from(receipt.partition),
                fnv1a(&key) % u64::from(partitions),
                "keyed batch routed elsewhere"
            ),
            _ => {}
        }
        let values: Vec<_> = values.into_iter().map(|v| (v, None)).collect();
        self.topics[t].published(receipt, &values);
        Ok(())
    }

    /// Publishes a copy, then reads it back with a fresh subscriber at `Earliest`.
    fn publish_and_read_back(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let Some(i) = pick(u, &self.topic_h)? else {
            return Ok(());
        };
        let TopicH { p, t } = self.topic_h[i];
        let value = payload(u)?;
        let partition = u.int_in_range(0..=self.topics[t].partitions - 1)?;
        let mut receipt = memq_receipt::default();
        // SAFETY: a live handle, a readable payload, a writable receipt.
        let st = unsafe {
            memq_topic_publish_to(p, partition, value.as_ptr(), value.len(), 0, &mut receipt)
        };
        expect(st, self.publish_statuses(t), "publish_to");
        if st != St::Ok {
            return Ok(());
        }
        self.topics[t].published(receipt, &[(value.clone(), None)]);
        let tm = &self.topics[t];
        let mut sub = sentinel();
        let earliest = memq_start::Earliest as u32;
        // SAFETY: a live handle, a writable out-pointer.
        let st = unsafe { memq_subscriber_new_partition(p, partition, earliest, 0, &mut sub) };
        expect(st, &[St::Ok], "subscriber_new_partition");
        let mut found = false;
        for _ in 0..=tm.capacity {
            let mut m = sentinel();
            let mut lagged = u64::MAX;
            // SAFETY: a live subscriber, writable out-pointers.
            let st = unsafe { memq_subscriber_recv(sub, 0, &mut m, &mut lagged) };
            // Only a TTL can take a message that was just published.
            let allowed: &[St] = if tm.ttl {
                &[St::Ok, St::Empty, St::Lagged]
            } else {
                &[St::Ok]
            };
            expect(st, allowed, "read back");
            if st != St::Ok {
                break;
            }
            // SAFETY: a live message, freed right after.
            let (mp, mo, bytes, data) = unsafe { read_message(m, tm.stamped) };
            // SAFETY: a live message, not used again.
            unsafe { memq_message_free(m) };
            assert_eq!(mp, partition);
            tm.check_payload(mp, mo, &bytes, Some(data));
            if mo == receipt.offset {
                assert_eq!(bytes, value, "read back other bytes");
                found = true;
                break;
            }
            assert!(mo < receipt.offset);
        }
        assert!(
            found || tm.ttl,
            "a message just published was not read back"
        );
        // SAFETY: a live subscriber, not used again.
        unsafe { memq_subscriber_free(sub) };
        Ok(())
    }

    fn key_partition(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let key = payload(u)?;
        let mut key_ptr = data_ptr(u, &key)?;
        let mut partitions: u32 = if u.arbitrary()? {
            u.int_in_range(1..=4)?
        } else {
            u.int_in_range(1..=u32::MAX)?
        };
        let mut out = u32::MAX;
        let mut out_ptr: *mut u32 = &mut out;
        let mut expected = St::Ok;
        if faulty(u)? {
            match u.int_in_range(0..=2u8)? {
                0 => {
                    partitions = 0;
                    expected = St::InvalidArgument;
                }
                1 => {
                    out_ptr = null_mut();
                    expected = St::NullPointer;
                }
                _ if !key.is_empty() => {
                    key_ptr = null();
                    expected = St::NullPointer;
                }
                _ => {}
            }
        }
        // SAFETY: the key is NULL or readable for its length; the out-pointer NULL or
        // writable.
        let st = unsafe { memq_key_partition(key_ptr, key.len(), partitions, out_ptr) };
        expect(st, &[expected], "key_partition");
        if st == St::Ok {
            assert_eq!(u64::from(out), fnv1a(&key) % u64::from(partitions));
        } else {
            assert_eq!(out, u32::MAX, "partition_out written on failure");
        }
        Ok(())
    }

    fn stats(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let Some(i) = pick(u, &self.topic_h)? else {
            return Ok(());
        };
        let TopicH { p, t } = self.topic_h[i];
        let tm = &self.topics[t];
        let bad = faulty(u)?;
        match u.int_in_range(0..=3u8)? {
            0 => {
                let init = memq_topic_stats {
                    capacity: 12345,
                    ..Default::default()
                };
                let Some(s) = get(u, bad, p, init, memq_topic_get_stats, "get_stats")? else {
                    return Ok(());
                };
                assert_eq!(s.capacity, tm.capacity);
                assert_eq!(s.partitions, tm.partitions);
                assert_eq!(s.overflow, tm.overflow);
                assert_eq!(s.closed, tm.is_closed());
                assert_eq!(s.published, tm.next.iter().sum::<u64>());
                assert!(s.depth <= (tm.capacity as u64) * u64::from(tm.partitions));
                if !tm.release {
                    assert_eq!(s.released, 0, "a retaining topic released");
                }
                // Every message published is still in the log or left it once, counted
                // by why.
                let gone = s.evicted + s.expired + s.released;
                assert_eq!(s.published, s.depth + gone, "{s:?}");
                assert_eq!(s.groups, tm.groups.len());
                let subs = self.subs.iter().filter(|s| s.t == t).count();
                assert_eq!(s.subscribers, subs, "subscriber count");
                assert_eq!(s.waiting_publishers, 0, "a publish that did not wait waits");
            }
            1 => {
                let init = memq_partition_stats {
                    low: 12345,
                    ..Default::default()
                };
                let (call, n) = (memq_topic_get_partition_stats, tm.partitions);
                let Some((partition, s)) = get_at(u, bad, p, n, init, call, "partition stats")?
                else {
                    return Ok(());
                };
                let next = tm.next[partition as usize];
                assert_eq!((s.high, s.published), (next, next));
                assert!(s.low <= s.high && s.depth == s.high - s.low);
                assert!(s.depth <= tm.capacity as u64);
                assert_eq!(s.waiting_publishers, 0);
                let subs = self
                    .subs
                    .iter()
                    .filter(|s| s.t == t && s.partition.is_none_or(|q| q == partition))
                    .count();
                assert_eq!(s.subscribers, subs, "partition subscriber count");
            }
            k => {
                let g = u.choose_index(GROUPS.len())?;
                let valid = match tm.groups.get(&g) {
                    Some(_) => St::Ok,
                    None => St::UnknownGroup,
                };
                if k == 2 {
                    let init = memq_group_stats {
                        members: 12345,
                        ..Default::default()
                    };
                    let call = memq_topic_get_group_stats;
                    let Some(gs) = group_stats(u, bad, p, g, valid, init, call)? else {
                        return Ok(());
                    };
                    let gm = &tm.groups[&g];
                    assert_eq!(gs.members, gm.members, "group members");
                    if !gm.acked {
                        // Kept back by a too-small buffer, or read without its metadata:
                        // delivered, but not seen here.
                        assert!(gs.delivered >= gm.taken.len() as u64, "group delivered");
                    }
                } else {
                    let init = memq_ack_group_stats {
                        members: 12345,
                        ..Default::default()
                    };
                    let call = memq_topic_get_ack_group_stats;
                    let Some(acks) = group_stats(u, bad, p, g, valid, init, call)? else {
                        return Ok(());
                    };
                    let gm = &tm.groups[&g];
                    assert_eq!(acks.members, gm.members, "ack group members");
                    assert_eq!(acks.acked, gm.acks, "acked count");
                    if !gm.acked {
                        let counters = [
                            acks.in_flight,
                            acks.redelivered,
                            acks.acked,
                            acks.dead_lettered,
                            acks.evicted_unacked,
                        ];
                        assert_eq!(counters, [0; 5], "ack counters of an auto group");
                    }
                }
            }
        }
        Ok(())
    }

    // ----- brokers ---------------------------------------------------------------------

    fn broker(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        if u.arbitrary()? {
            if faulty(u)? {
                // SAFETY: NULL out-pointer.
                expect(
                    unsafe { memq_broker_new(null_mut()) },
                    &[St::NullPointer],
                    "broker_new",
                );
                return Ok(());
            }
            if self.brokers.len() >= 2 {
                return Ok(());
            }
            let mut b = sentinel();
            // SAFETY: a writable out-pointer.
            expect(unsafe { memq_broker_new(&mut b) }, &[St::Ok], "broker_new");
            self.brokers.push(BrokerH {
                p: b,
                names: [None; 3],
            });
        } else {
            let b = take(u, &mut self.brokers)?;
            // SAFETY: NULL (which does nothing), or a live broker, not used again.
            unsafe { memq_broker_free(b.as_ref().map_or(null_mut(), |b| b.p)) };
            for t in b.into_iter().flat_map(|b| b.names).flatten() {
                self.topics[t].registered = false;
            }
        }
        Ok(())
    }

    fn broker_topic(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let Some(b) = pick(u, &self.brokers)? else {
            return Ok(());
        };
        let bp = self.brokers[b].p;
        let n = u.choose_index(NAMES.len())?;
        let bad = faulty(u)?;
        let mut broker: *const memq_broker = bp;
        let mut name = NAMES[n].as_ptr();
        let mut bad_status = None;
        if bad {
            bad_status = Some(St::NullPointer);
            match u.int_in_range(0..=2u8)? {
                0 => broker = null(),
                1 => name = null(),
                _ => {
                    name = BAD_NAME.as_ptr();
                    bad_status = Some(St::InvalidArgument);
                }
            }
        }
        let current = self.brokers[b].names[n];
        match u.int_in_range(0..=3u8)? {
            0 => {
                if self.topic_h.len() >= MAX_TOPICS {
                    return Ok(());
                }
                let bad_config = !bad && faulty(u)?;
                let (c, config_status) = topic_config(u, bad_config)?;
                let mut out = sentinel();
                let exists = current.is_some();
                // A bad configuration and a taken name: the header does not say which
                // is reported.
                let expected: Vec<St> = match bad_status {
                    Some(st) => vec![st],
                    None if config_status != St::Ok && exists => {
                        vec![config_status, St::TopicExists]
                    }
                    None if config_status != St::Ok => vec![config_status],
                    None if exists => vec![St::TopicExists],
                    None => vec![St::Ok],
                };
                // SAFETY: NULL or live broker; NULL or NUL-terminated name; a valid config;
                // a writable out-pointer.
                let st = unsafe { memq_broker_create_topic(broker, name, &c, &mut out) };
                expect(st, &expected, "create_topic");
                if st == St::Ok {
                    self.timed |= c.ttl_ms == 1;
                    self.topics.push(TopicM::new(&c, Some(NAMES[n])));
                    let t = self.topics.len() - 1;
                    self.brokers[b].names[n] = Some(t);
                    self.topic_h.push(TopicH { p: out, t });
                } else {
                    assert_eq!(out, sentinel(), "topic_out written on failure");
                }
            }
            1 => {
                if self.topic_h.len() >= MAX_TOPICS {
                    return Ok(());
                }
                let mut out = sentinel();
                let expected = bad_status.unwrap_or(match current {
                    Some(_) => St::Ok,
                    None => St::UnknownTopic,
                });
                // SAFETY: NULL or live broker; NULL or NUL-terminated name; a writable
                // out-pointer.
                let st = unsafe { memq_broker_get_topic(broker, name, &mut out) };
                expect(st, &[expected], "get_topic");
                if let (St::Ok, Some(t)) = (st, current) {
                    self.topics[t].handles += 1;
                    self.topic_h.push(TopicH { p: out, t });
                } else {
                    assert_eq!(out, sentinel(), "topic_out written on failure");
                }
            }
            2 => {
                let expected = bad_status.unwrap_or(match current {
                    Some(_) => St::Ok,
                    None => St::UnknownTopic,
                });
                // SAFETY: NULL or live broker; NULL or NUL-terminated name.
                let st = unsafe { memq_broker_delete_topic(broker, name) };
                expect(st, &[expected], "delete_topic");
                if let (St::Ok, Some(t)) = (st, current) {
                    self.topics[t].closed = true;
                    self.topics[t].registered = false;
                    self.brokers[b].names[n] = None;
                }
            }
            _ => {
                let mut count = usize::MAX;
                let out: *mut usize = if bad && name.is_null() {
                    null_mut()
                } else {
                    &mut count
                };
                let expected = match bad_status {
                    Some(_) if broker.is_null() || out.is_null() => St::NullPointer,
                    _ => St::Ok,
                };
                // SAFETY: NULL or live broker; NULL or a writable count.
                let st = unsafe { memq_broker_topic_count(broker, out) };
                expect(st, &[expected], "topic_count");
                if st == St::Ok {
                    let names = self.brokers[b].names.iter().flatten().count();
                    assert_eq!(count, names, "broker topic count");
                } else {
                    assert_eq!(count, usize::MAX, "count written on failure");
                }
            }
        }
        Ok(())
    }

    // ----- readers ---------------------------------------------------------------------

    fn subscriber_new(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let Some(i) = pick(u, &self.topic_h)? else {
            return Ok(());
        };
        if self.subs.len() >= MAX_READERS {
            return Ok(());
        }
        let TopicH { p, t } = self.topic_h[i];
        let tm = &self.topics[t];
        let (mut start, offset) = start(u)?;
        let mut partition = if u.arbitrary()? {
            Some(u.int_in_range(0..=tm.partitions - 1)?)
        } else {
            None
        };
        let valid = if start == memq_start::Offset as u32 && offset > tm.min_high(partition) {
            St::OutOfRange
        } else {
            St::Ok
        };
        let mut out = sentinel();
        // A bad start; a partition past the last.
        let others = [St::InvalidArgument, St::OutOfRange];
        let bad = faulty(u)?;
        let a = args(u, bad, p, &mut out, None, &others)?;
        match a.other {
            Some(0) => start = bad_start(u)?,
            Some(_) => partition = Some(u.int_in_range(tm.partitions..=u32::MAX)?),
            None => {}
        }
        let (topic, out_ptr) = (a.handle, a.out);
        // SAFETY: NULL or live handle; NULL or writable out-pointer.
        let st = unsafe {
            match partition {
                Some(q) => memq_subscriber_new_partition(topic, q, start, offset, out_ptr),
                None => memq_subscriber_new(topic, start, offset, out_ptr),
            }
        };
        a.check(st, &[valid], "subscriber_new");
        if st == St::Ok {
            self.subs.push(SubH {
                p: out,
                t,
                partition,
                last: HashMap::new(),
                pending: None,
            });
        } else {
            assert_eq!(out, sentinel(), "subscriber_out written on failure");
        }
        Ok(())
    }

    fn consumer_new(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let Some(i) = pick(u, &self.topic_h)? else {
            return Ok(());
        };
        if self.cons.len() >= MAX_READERS {
            return Ok(());
        }
        let TopicH { p, t } = self.topic_h[i];
        let tm = &self.topics[t];
        let g = u.choose_index(GROUPS.len())?;
        let (mut start, offset) = start(u)?;
        let mut name = GROUPS[g].as_ptr();
        let valid = match tm.groups.get(&g) {
            Some(gm) if gm.acked => St::GroupModeMismatch,
            Some(_) => St::Ok,
            None if start == memq_start::Offset as u32 && offset > tm.min_high(None) => {
                St::OutOfRange
            }
            None => St::Ok,
        };
        let mut out = sentinel();
        // A NULL name; a name that is not UTF-8; a bad start.
        let others = [St::NullPointer, St::InvalidArgument, St::InvalidArgument];
        let bad = faulty(u)?;
        let a = args(u, bad, p, &mut out, None, &others)?;
        match a.other {
            Some(0) => name = null(),
            Some(1) => name = BAD_NAME.as_ptr(),
            Some(_) => start = bad_start(u)?,
            None => {}
        }
        // SAFETY: NULL or live handle; NULL or NUL-terminated name; NULL or writable
        // out-pointer.
        let st = unsafe { memq_consumer_new(a.handle, name, start, offset, a.out) };
        a.check(st, &[valid], "consumer_new");
        if st != St::Ok {
            assert_eq!(out, sentinel(), "consumer_out written on failure");
            return Ok(());
        }
        let gm = self.topics[t].groups.entry(g).or_insert_with(|| GroupM {
            acked: false,
            members: 0,
            acks: 0,
            taken: HashSet::new(),
            max_deliveries: 0,
            dead_letter: None,
            strict: false,
        });
        gm.members += 1;
        self.cons.push(ConsH {
            p: out,
            t,
            g,
            pending: None,
        });
        Ok(())
    }

    fn pick_reader(&self, u: &mut Unstructured<'_>) -> Result<Option<Reader>> {
        let n = self.subs.len() + self.cons.len();
        if n == 0 {
            return Ok(None);
        }
        let k = u.choose_index(n)?;
        Ok(Some(if k < self.subs.len() {
            Reader::Sub(k)
        } else {
            Reader::Cons(k - self.subs.len())
        }))
    }

    fn reader_topic(&self, r: Reader) -> usize {
        match r {
            Reader::Sub(i) => self.subs[i].t,
            Reader::Cons(i) => self.cons[i].t,
        }
    }

    fn pending(&mut self, r: Reader) -> &mut Option<usize> {
        match r {
            Reader::Sub(i) => &mut self.subs[i].pending,
            Reader::Cons(i) => &mut self.cons[i].pending,
        }
    }

    fn reader_free(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let bad = faulty(u)?;
        match self.pick_reader(u)? {
            Some(Reader::Sub(i)) if !bad => {
                let s = self.subs.swap_remove(i);
                // SAFETY: a live subscriber, not used again.
                unsafe { memq_subscriber_free(s.p) };
            }
            Some(Reader::Cons(i)) if !bad => {
                let c = self.cons.swap_remove(i);
                // SAFETY: a live consumer, not used again.
                unsafe { memq_consumer_free(c.p) };
                if let Some(gm) = self.topics[c.t].groups.get_mut(&c.g) {
                    gm.members -= 1;
                }
            }
            // SAFETY: NULL does nothing.
            _ => unsafe {
                memq_subscriber_free(null_mut());
                memq_consumer_free(null_mut());
            },
        }
        Ok(())
    }

    /// Checks a message a reader received.
    fn received(&mut self, r: Reader, m: *mut memq_message) {
        assert!(!m.is_null() && m != sentinel(), "no message handle");
        let tm = &self.topics[self.reader_topic(r)];
        // SAFETY: a live message handle.
        let (p, o, bytes, data) = unsafe { read_message(m, tm.stamped) };
        tm.check_payload(p, o, &bytes, Some(data));
        self.saw(r, p, o, bytes.len());
    }

    /// Keeps a received message in the table, or frees it.
    fn keep_or_free(&mut self, r: Reader, m: *mut memq_message, keep: bool) {
        if keep && self.msgs.len() < MAX_MESSAGES {
            let t = self.reader_topic(r);
            self.msgs.push(MsgH { p: m, t });
        } else {
            // SAFETY: a live message, not used again.
            unsafe { memq_message_free(m) };
        }
    }

    /// Order and delivery checks for a message `r` received at `p`/`o`.
    fn saw(&mut self, r: Reader, p: u32, o: u64, len: usize) {
        if let Some(n) = self.pending(r).take() {
            assert_eq!(
                len, n,
                "the message kept back was not the one returned next"
            );
        }
        match r {
            Reader::Sub(i) => {
                let s = &mut self.subs[i];
                if let Some(q) = s.partition {
                    assert_eq!(p, q, "a partition subscriber read another partition");
                }
                if let Some(&last) = s.last.get(&p) {
                    assert!(o > last, "subscriber read {p}/{o} after {p}/{last}");
                }
                s.last.insert(p, o);
            }
            Reader::Cons(i) => {
                let ConsH { t, g, .. } = self.cons[i];
                let gm = self.topics[t].groups.get_mut(&g).expect("the group exists");
                assert!(gm.taken.insert((p, o)), "group {g} delivered {p}/{o} twice");
            }
        }
    }

    /// Checks the status of a receive and its lag out-parameter.
    fn miss(&self, r: Reader, st: St, lagged: u64, lag_asked: bool, pending: Option<usize>) {
        if pending.is_some() {
            // The message kept back comes first, whatever the receive.
            assert!(
                matches!(st, St::Ok | St::BufferTooSmall),
                "a message kept back was lost: {st:?}"
            );
        }
        let closed = self.topics[self.reader_topic(r)].is_closed();
        check_lag(st, lagged, lag_asked, closed);
    }

    fn reader_recv(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let Some(r) = self.pick_reader(u)? else {
            return Ok(());
        };
        let handle_sub = match r {
            Reader::Sub(i) => self.subs[i].p,
            Reader::Cons(_) => null_mut(),
        };
        let handle_cons = match r {
            Reader::Cons(i) => self.cons[i].p,
            Reader::Sub(_) => null_mut(),
        };
        let pending = *self.pending(r);
        let mut lagged = u64::MAX;
        let lag_asked = !u.ratio(1u8, 4)?;
        let lag_ptr: *mut u64 = if lag_asked { &mut lagged } else { null_mut() };
        let bad = faulty(u)?;
        let fault = if bad { u.int_in_range(0..=3u8)? } else { 255 };
        let null_handle = fault == 0;
        let (hs, hc): (*const memq_subscriber, *const memq_consumer) = if null_handle {
            (null(), null())
        } else {
            (handle_sub, handle_cons)
        };
        let is_sub = matches!(r, Reader::Sub(_));
        let ok_statuses: &[St] = &[St::Ok, St::Empty, St::Lagged, St::Closed];
        match u.int_in_range(0..=2u8)? {
            0 => {
                let mut m = sentinel();
                let out: *mut *mut memq_message = if fault == 1 { null_mut() } else { &mut m };
                let allowed = if fault <= 1 {
                    &[St::NullPointer][..]
                } else {
                    ok_statuses
                };
                // SAFETY: NULL or live handle; NULL or writable out-pointers.
                let st = unsafe {
                    if is_sub {
                        memq_subscriber_recv(hs, 0, out, lag_ptr)
                    } else {
                        memq_consumer_recv(hc, 0, out, lag_ptr)
                    }
                };
                expect(st, allowed, "recv");
                if fault > 1 {
                    self.miss(r, st, lagged, lag_asked, pending);
                }
                if st == St::Ok {
                    self.received(r, m);
                    self.keep_or_free(r, m, u.arbitrary()?);
                } else {
                    assert_eq!(m, sentinel(), "message_out written on failure");
                }
            }
            1 => {
                let capacity: usize = if fault == 3 {
                    0
                } else {
                    *u.choose(&[1, 2, 3, 8])?
                };
                let mut array = vec![sentinel::<memq_message>(); capacity.max(1)];
                let mut count = usize::MAX;
                let mut messages = array.as_mut_ptr();
                let mut count_ptr: *mut usize = &mut count;
                let allowed = match fault {
                    0 => &[St::NullPointer][..],
                    1 => {
                        messages = null_mut();
                        &[St::NullPointer][..]
                    }
                    2 => {
                        count_ptr = null_mut();
                        &[St::NullPointer][..]
                    }
                    3 => &[St::InvalidArgument][..],
                    _ => ok_statuses,
                };
                // SAFETY: NULL or live handle; NULL or `capacity` writable slots; NULL or
                // writable out-pointers.
                let st = unsafe {
                    if is_sub {
                        memq_subscriber_recv_many(hs, 0, messages, capacity, count_ptr, lag_ptr)
                    } else {
                        memq_consumer_recv_many(hc, 0, messages, capacity, count_ptr, lag_ptr)
                    }
                };
                expect(st, allowed, "recv_many");
                if fault > 3 {
                    self.miss(r, st, lagged, lag_asked, pending);
                }
                if st != St::Ok {
                    assert_eq!(count, usize::MAX, "count written on failure");
                    assert!(array.iter().all(|&m| m == sentinel()), "slots written");
                    return Ok(());
                }
                assert!(count >= 1 && count <= capacity, "batch of {count}");
                if pending.is_some() {
                    assert_eq!(count, 1, "a message kept back comes alone");
                }
                assert!(array[count..].iter().all(|&m| m == sentinel()));
                for &m in &array[..count] {
                    self.received(r, m);
                }
                match u.int_in_range(0..=2u8)? {
                    0 => {
                        // As a C caller frees a batch: the whole array at once.
                        // SAFETY: `capacity` slots: `count` live messages, then sentinels
                        // (replaced by NULL first), each given up here.
                        unsafe {
                            array[count..].fill(null_mut());
                            memq_message_free_many(array.as_mut_ptr(), capacity);
                        }
                        assert!(array.iter().all(|m| m.is_null()), "entries not NULLed");
                    }
                    k => {
                        for &m in &array[..count] {
                            self.keep_or_free(r, m, k == 1);
                        }
                    }
                }
            }
            _ => {
                let buf_len: usize = *u.choose(&[0, 0, 1, 2, 4, 8, 40, 300])?;
                let mut buf = vec![0xA5u8; buf_len];
                let mut buf_ptr = if buf_len == 0 && u.arbitrary()? {
                    null_mut()
                } else {
                    buf.as_mut_ptr()
                };
                let mut len = usize::MAX;
                let mut len_ptr: *mut usize = &mut len;
                let mut meta = memq_message_meta {
                    offset: u64::MAX,
                    ..Default::default()
                };
                let meta_ptr: *mut memq_message_meta = if u.ratio(1u8, 4)? {
                    null_mut()
                } else {
                    &mut meta
                };
                let allowed = match fault {
                    0 => &[St::NullPointer][..],
                    1 => {
                        len_ptr = null_mut();
                        &[St::NullPointer][..]
                    }
                    2 if buf_len > 0 => {
                        buf_ptr = null_mut();
                        &[St::NullPointer][..]
                    }
                    _ => &[
                        St::Ok,
                        St::Empty,
                        St::Lagged,
                        St::Closed,
                        St::BufferTooSmall,
                    ][..],
                };
                // SAFETY: NULL or live handle; NULL or `buf_len` writable bytes; NULL or
                // writable out-pointers.
                let st = unsafe {
                    if is_sub {
                        memq_subscriber_recv_into(
                            hs, 0, buf_ptr, buf_len, len_ptr, meta_ptr, lag_ptr,
                        )
                    } else {
                        memq_consumer_recv_into(hc, 0, buf_ptr, buf_len, len_ptr, meta_ptr, lag_ptr)
                    }
                };
                expect(st, allowed, "recv_into");
                if allowed.len() == 1 {
                    // Rejected before receiving anything: a kept-back message stays kept.
                    assert_eq!((len, meta.offset), (usize::MAX, u64::MAX));
                    return Ok(());
                }
                self.miss(r, st, lagged, lag_asked, pending);
                match st {
                    St::Ok => {
                        assert!(len <= buf_len, "copied {len} into {buf_len}");
                        if let Some(n) = pending {
                            assert_eq!(len, n);
                        }
                        self.recv_into_done(r, &buf[..len], meta_ptr.is_null(), meta);
                    }
                    St::BufferTooSmall => {
                        assert!(len > buf_len, "too small for {len} with {buf_len}");
                        if let Some(n) = pending {
                            assert_eq!(len, n, "the kept-back message changed length");
                        }
                        assert_eq!(meta.offset, u64::MAX, "meta written on failure");
                        assert!(buf.iter().all(|&b| b == 0xA5), "buffer written");
                        // A subscriber keeps the message back for its next receive; a
                        // group member does not take it at all: it stays the group's,
                        // for the next receive of any member.
                        if let Reader::Sub(_) = r {
                            *self.pending(r) = Some(len);
                        }
                        if u.arbitrary()? {
                            self.retry_recv_into(r, len, hs, hc);
                        }
                    }
                    _ => {
                        assert_eq!(len, usize::MAX, "len written on failure");
                        assert_eq!(meta.offset, u64::MAX, "meta written on failure");
                    }
                }
            }
        }
        Ok(())
    }

    /// Retries a receive that reported `BufferTooSmall` with the length it needed.
    fn retry_recv_into(
        &mut self,
        r: Reader,
        needed: usize,
        hs: *const memq_subscriber,
        hc: *const memq_consumer,
    ) {
        let mut buf = vec![0u8; needed];
        let mut len = usize::MAX;
        let mut meta = memq_message_meta::default();
        // SAFETY: a live handle; `needed` writable bytes; writable out-pointers.
        let st = unsafe {
            match r {
                Reader::Sub(_) => memq_subscriber_recv_into(
                    hs,
                    0,
                    buf.as_mut_ptr(),
                    needed,
                    &mut len,
                    &mut meta,
                    null_mut(),
                ),
                Reader::Cons(_) => memq_consumer_recv_into(
                    hc,
                    0,
                    buf.as_mut_ptr(),
                    needed,
                    &mut len,
                    &mut meta,
                    null_mut(),
                ),
            }
        };
        // A group member's message stayed in the group: under a TTL it may have expired
        // since (reported as missed). A subscriber's was kept back by its handle.
        let ttl = self.topics[self.reader_topic(r)].ttl;
        let allowed: &[St] = match r {
            Reader::Cons(_) if ttl => &[St::Ok, St::Lagged],
            _ => &[St::Ok],
        };
        expect(st, allowed, "recv_into with the length it asked for");
        if st != St::Ok {
            return;
        }
        assert_eq!(len, needed);
        self.recv_into_done(r, &buf, false, meta);
    }

    fn recv_into_done(&mut self, r: Reader, bytes: &[u8], no_meta: bool, meta: memq_message_meta) {
        if no_meta {
            // Nothing says which message it was: only the kept-back state clears.
            self.pending(r).take();
            return;
        }
        assert_eq!(meta.len, bytes.len());
        let tm = &self.topics[self.reader_topic(r)];
        assert_eq!(meta.has_timestamp, tm.stamped);
        tm.check_payload(meta.partition, meta.offset, bytes, None);
        self.saw(r, meta.partition, meta.offset, bytes.len());
    }

    /// Lag and committed positions.
    fn reader_query(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let Some(r) = self.pick_reader(u)? else {
            return Ok(());
        };
        let bad = faulty(u)?;
        match r {
            Reader::Sub(i) => {
                let (p, t) = (self.subs[i].p, self.subs[i].t);
                if let Some(lag) = get(u, bad, p, u64::MAX, memq_subscriber_lag, "lag")? {
                    let published = self.topics[t].next.iter().sum::<u64>();
                    assert!(lag <= published, "lag {lag}");
                }
                Ok(())
            }
            Reader::Cons(i) => {
                let ConsH { p, t, .. } = self.cons[i];
                self.committed(u, bad, p, t, memq_consumer_committed, "committed")
            }
        }
    }

    /// A committed position (`memq_consumer_committed` or `memq_ack_consumer_committed`
    /// as `get`) of a reader of topic `t`: never past the partition's end.
    fn committed<H>(
        &self,
        u: &mut Unstructured<'_>,
        bad: bool,
        handle: *const H,
        t: usize,
        get: GetAt<H, u64>,
        what: &str,
    ) -> Result<()> {
        let tm = &self.topics[t];
        if let Some((q, value)) = get_at(u, bad, handle, tm.partitions, u64::MAX, get, what)? {
            let next = tm.next[q as usize];
            assert!(value <= next, "{what}: {value} past {next}");
        }
        Ok(())
    }

    // ----- messages --------------------------------------------------------------------

    fn message_op(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let Some(i) = pick(u, &self.msgs)? else {
            return Ok(());
        };
        let MsgH { p: m, t } = self.msgs[i];
        let tm = &self.topics[t];
        if faulty(u)? {
            let mut v = u64::MAX;
            let mut ptr = sentinel::<u8>().cast_const();
            let mut meta = memq_message_meta {
                offset: u64::MAX,
                ..Default::default()
            };
            let (mut len, mut part) = (usize::MAX, u32::MAX);
            let null_msg = u.arbitrary()?;
            let h: *const memq_message = if null_msg { null() } else { m };
            // SAFETY: NULL or live handle; NULL or writable out-pointers.
            let sts = unsafe {
                if null_msg {
                    [
                        memq_message_data(h, &mut ptr),
                        memq_message_len(h, &mut len),
                        memq_message_offset(h, &mut v),
                        memq_message_partition(h, &mut part),
                        memq_message_timestamp(h, &mut v),
                        memq_message_get_meta(h, &mut meta),
                        memq_message_copy(h, null_mut(), 0, &mut len),
                    ]
                } else {
                    let mut buf = [0u8; 4];
                    [
                        memq_message_data(h, null_mut()),
                        memq_message_len(h, null_mut()),
                        memq_message_offset(h, null_mut()),
                        memq_message_partition(h, null_mut()),
                        memq_message_timestamp(h, null_mut()),
                        memq_message_get_meta(h, null_mut()),
                        memq_message_copy(h, buf.as_mut_ptr(), buf.len(), null_mut()),
                    ]
                }
            };
            for st in sts {
                expect(st, &[St::NullPointer], "message accessor");
            }
            // SAFETY: a live message, NULL buffer with a nonzero length.
            let st = unsafe { memq_message_copy(m, null_mut(), 1, &mut len) };
            expect(st, &[St::NullPointer], "message_copy");
            assert_eq!(
                (v, len, part, meta.offset),
                (u64::MAX, usize::MAX, u32::MAX, u64::MAX)
            );
            assert_eq!(ptr, sentinel::<u8>().cast_const());
            return Ok(());
        }
        // SAFETY: a live message.
        let (mp, mo, bytes, data) = unsafe { read_message(m, tm.stamped) };
        tm.check_payload(mp, mo, &bytes, Some(data));
        // A copy into a buffer that may be too small, then with the length it asks for.
        let buf_len = *u.choose(&[0, 1, 2, 3, 8, 64, 300])?;
        let mut buf = vec![0x5Au8; buf_len];
        let buf_ptr = if buf_len == 0 && u.arbitrary()? {
            null_mut()
        } else {
            buf.as_mut_ptr()
        };
        let mut len = usize::MAX;
        // SAFETY: a live message; NULL or `buf_len` writable bytes; a writable length.
        let st = unsafe { memq_message_copy(m, buf_ptr, buf_len, &mut len) };
        assert_eq!(len, bytes.len(), "copy reports the payload's length");
        if bytes.len() > buf_len {
            expect(st, &[St::BufferTooSmall], "message_copy");
            assert!(buf.iter().all(|&b| b == 0x5A), "buffer written");
            let mut again = vec![0u8; len];
            let mut len2 = usize::MAX;
            // SAFETY: as above, with `len` writable bytes.
            let st = unsafe { memq_message_copy(m, again.as_mut_ptr(), len, &mut len2) };
            expect(st, &[St::Ok], "message_copy with the length it asked for");
            assert_eq!(len2, len);
            assert_eq!(again, bytes);
        } else {
            expect(st, &[St::Ok], "message_copy");
            assert_eq!(&buf[..len], &bytes[..]);
            assert!(
                buf[len..].iter().all(|&b| b == 0x5A),
                "wrote past the payload"
            );
        }
        Ok(())
    }

    fn message_free(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        match u.int_in_range(0..=3u8)? {
            0 => {
                // SAFETY: NULL does nothing; NULL entries are skipped.
                unsafe {
                    memq_message_free(null_mut());
                    memq_message_free_many(null_mut(), 3);
                    let mut nulls = [null_mut(); 2];
                    memq_message_free_many(nulls.as_mut_ptr(), nulls.len());
                }
            }
            1 => {
                if let Some(i) = pick(u, &self.msgs)? {
                    let m = self.msgs.swap_remove(i);
                    // SAFETY: a live message, not used again.
                    unsafe { memq_message_free(m.p) };
                }
            }
            _ => {
                let k = u.int_in_range(0..=self.msgs.len().min(6))?;
                let mut array: Vec<*mut memq_message> = Vec::with_capacity(k + 1);
                for _ in 0..k {
                    let i = u.choose_index(self.msgs.len())?;
                    array.push(self.msgs.swap_remove(i).p);
                }
                if u.arbitrary()? {
                    let at = u.int_in_range(0..=array.len())?;
                    array.insert(at, null_mut());
                }
                // SAFETY: live messages (and NULLs), each given up here.
                unsafe { memq_message_free_many(array.as_mut_ptr(), array.len()) };
                assert!(array.iter().all(|m| m.is_null()), "entries not set to NULL");
            }
        }
        Ok(())
    }

    // ----- explicit acks ---------------------------------------------------------------

    fn ack_consumer_new(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let Some(i) = pick(u, &self.topic_h)? else {
            return Ok(());
        };
        if self.acks.len() >= MAX_READERS {
            return Ok(());
        }
        let TopicH { p, t } = self.topic_h[i];
        let tm = &self.topics[t];
        let g = u.choose_index(GROUPS.len())?;
        let (mut start, offset) = start(u)?;
        let mut c = memq_ack_config {
            ack_wait_ms: 7,
            max_deliveries: 7,
            backoff: 7,
            backoff_initial_ms: 7,
            backoff_max_ms: 7,
            max_in_flight: 7,
            dead_letter: sentinel(),
        };
        // SAFETY: a writable config.
        let st = unsafe { memq_ack_config_init(&mut c) };
        expect(st, &[St::Ok], "ack_config_init");
        assert_eq!(c, memq_ack_config::default());
        c.ack_wait_ms = *u.choose(&[30_000, 30_000, 30_000, 1, 5, u64::MAX])?;
        c.max_deliveries = u.int_in_range(0..=3)?;
        c.backoff = u.int_in_range(0..=2)?;
        c.backoff_initial_ms = *u.choose(&[0, 1, 5, 60_000, u64::MAX])?;
        c.backoff_max_ms = *u.choose(&[0, 1, 5, 60_000, u64::MAX])?;
        c.max_in_flight = *u.choose(&[1, 2, 3, 1024, usize::MAX])?;
        let mut dead_letter = None;
        if let Some(d) = pick(u, &self.dl_h)? {
            if u.ratio(3u8, 4)? {
                c.dead_letter = self.dl_h[d].p;
                dead_letter = Some(self.dl_h[d].d);
            }
        }
        let bad_backoff = c.backoff == memq_backoff::Exponential as u32
            && !(c.backoff_initial_ms > 0 && c.backoff_initial_ms <= c.backoff_max_ms);
        let mut name = GROUPS[g].as_ptr();
        let valid = if bad_backoff {
            St::InvalidArgument
        } else {
            match tm.groups.get(&g) {
                Some(gm) if !gm.acked => St::GroupModeMismatch,
                Some(_) => St::Ok,
                None if start == memq_start::Offset as u32 && offset > tm.min_high(None) => {
                    St::OutOfRange
                }
                None => St::Ok,
            }
        };
        let mut out = sentinel();
        // A NULL name or config; then (`InvalidArgument`) a name that is not UTF-8, a bad
        // start, a zero ack wait, a zero in-flight limit, an unknown backoff.
        let mut others = [St::InvalidArgument; 7];
        others[..2].fill(St::NullPointer);
        let bad = faulty(u)?;
        let a = args(u, bad, p, &mut out, None, &others)?;
        match a.other {
            Some(0) => name = null(),
            Some(2) => name = BAD_NAME.as_ptr(),
            Some(3) => start = bad_start(u)?,
            Some(4) => c.ack_wait_ms = 0,
            Some(5) => c.max_in_flight = 0,
            Some(6) => c.backoff = u.int_in_range(3..=u32::MAX)?,
            _ => {}
        }
        // Taken after the config's last change.
        let config: *const memq_ack_config = if a.other == Some(1) { null() } else { &c };
        // SAFETY: NULL or live handle; NULL or NUL-terminated name; NULL or a config whose
        // dead-letter topic is NULL or live; NULL or writable out-pointer.
        let st = unsafe { memq_ack_consumer_new(a.handle, name, start, offset, config, a.out) };
        a.check(st, &[valid], "ack_consumer_new");
        if st != St::Ok {
            assert_eq!(out, sentinel(), "consumer_out written on failure");
            return Ok(());
        }
        let strict = c.ack_wait_ms >= 30_000 && !tm.drop_oldest() && !tm.ttl;
        let gm = self.topics[t].groups.entry(g).or_insert_with(|| GroupM {
            acked: true,
            members: 0,
            acks: 0,
            taken: HashSet::new(),
            max_deliveries: c.max_deliveries,
            dead_letter,
            strict,
        });
        gm.members += 1;
        let backoff = c.backoff != memq_backoff::None as u32;
        self.timed |= c.ack_wait_ms <= 5 || (backoff && c.backoff_initial_ms <= 5);
        self.next_consumer += 1;
        self.acks.push(AckH {
            p: out,
            t,
            g,
            id: self.next_consumer,
        });
        Ok(())
    }

    fn ack_consumer_free(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let a = take(u, &mut self.acks)?;
        // SAFETY: NULL (which does nothing), or a live ack consumer, not used again.
        unsafe { memq_ack_consumer_free(a.as_ref().map_or(null_mut(), |a| a.p)) };
        if let Some(a) = a {
            self.topics[a.t].groups.get_mut(&a.g).unwrap().members -= 1;
            for d in self.delivs.iter_mut().filter(|d| d.consumer == a.id) {
                d.orphan = true;
            }
        }
        Ok(())
    }

    fn ack_recv(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let Some(i) = pick(u, &self.acks)? else {
            return Ok(());
        };
        let AckH { p, t, g, id } = self.acks[i];
        if u.arbitrary()? {
            return self.ack_recv_many(u, p, t, g, id);
        }
        let mut d = sentinel();
        let mut lagged = u64::MAX;
        let lag_asked = u.arbitrary()?;
        let lag_ptr: *mut u64 = if lag_asked { &mut lagged } else { null_mut() };
        let bad = faulty(u)?;
        let a = args(u, bad, p, &mut d, None, &[])?;
        // SAFETY: NULL or live handle; NULL or writable out-pointers.
        let st = unsafe { memq_ack_consumer_recv(a.handle, 0, a.out, lag_ptr) };
        if a.check(st, &[St::Ok, St::Empty, St::Lagged, St::Closed], "ack recv") {
            assert_eq!((d, lagged), (sentinel(), u64::MAX));
            return Ok(());
        }
        check_lag(st, lagged, lag_asked, self.topics[t].is_closed());
        if st != St::Ok {
            assert_eq!(d, sentinel(), "delivery_out written on failure");
            return Ok(());
        }
        self.keep_delivery(d, t, g, id);
        Ok(())
    }

    /// `memq_ack_consumer_recv_many` on ack consumer `p` (member `id` of group `g` on
    /// topic `t`): a batch of leases, or a fault (a NULL handle, array or count, a
    /// capacity of 0) that must write nothing.
    fn ack_recv_many(
        &mut self,
        u: &mut Unstructured<'_>,
        p: *mut memq_ack_consumer,
        t: usize,
        g: usize,
        id: u64,
    ) -> Result<()> {
        let fault = if faulty(u)? {
            u.int_in_range(0..=3u8)?
        } else {
            255
        };
        let capacity: usize = if fault == 3 {
            0
        } else {
            *u.choose(&[1, 2, 3, 8])?
        };
        let mut array = vec![sentinel::<memq_delivery>(); capacity.max(1)];
        let mut count = usize::MAX;
        let mut lagged = u64::MAX;
        let lag_asked = u.arbitrary()?;
        let lag_ptr: *mut u64 = if lag_asked { &mut lagged } else { null_mut() };
        let mut handle: *const memq_ack_consumer = p;
        let mut deliveries = array.as_mut_ptr();
        let mut count_ptr: *mut usize = &mut count;
        let allowed = match fault {
            0 => {
                handle = null();
                &[St::NullPointer][..]
            }
            1 => {
                deliveries = null_mut();
                &[St::NullPointer][..]
            }
            2 => {
                count_ptr = null_mut();
                &[St::NullPointer][..]
            }
            3 => &[St::InvalidArgument][..],
            _ => &[St::Ok, St::Empty, St::Lagged, St::Closed][..],
        };
        // SAFETY: NULL or a live handle; NULL or `capacity` writable slots; NULL or
        // writable out-pointers.
        let st = unsafe {
            memq_ack_consumer_recv_many(handle, 0, deliveries, capacity, count_ptr, lag_ptr)
        };
        expect(st, allowed, "ack recv_many");
        if fault <= 3 || st != St::Ok {
            if fault > 3 {
                check_lag(st, lagged, lag_asked, self.topics[t].is_closed());
            }
            assert_eq!(count, usize::MAX, "count written on failure");
            assert!(array.iter().all(|&d| d == sentinel()), "slots written");
            return Ok(());
        }
        assert_eq!(lagged, u64::MAX, "lagged_out written without a lag");
        assert!(count >= 1 && count <= capacity, "batch of {count}");
        assert!(array[count..].iter().all(|&d| d == sentinel()));
        for &d in &array[..count] {
            self.keep_delivery(d, t, g, id);
        }
        Ok(())
    }

    /// Checks a delivery just received by member `id` and keeps it for later calls.
    fn keep_delivery(&mut self, d: *mut memq_delivery, t: usize, g: usize, id: u64) {
        assert!(!d.is_null());
        self.check_delivery(d, t, g);
        self.delivs.push(DelivH {
            p: d,
            t,
            g,
            consumer: id,
            gone: false,
            orphan: false,
        });
        if self.delivs.len() > MAX_MESSAGES {
            let old = self.delivs.swap_remove(0);
            // SAFETY: a live delivery, not used again.
            unsafe { memq_delivery_free(old.p) };
        }
    }

    fn check_delivery(&self, d: *const memq_delivery, t: usize, g: usize) {
        let tm = &self.topics[t];
        let (mut len, mut data, mut offset, mut partition, mut n) =
            (usize::MAX, sentinel::<u8>().cast_const(), 0, 0, 0);
        let mut meta = memq_message_meta::default();
        // SAFETY: a live delivery; writable out-pointers.
        unsafe {
            expect(memq_delivery_len(d, &mut len), &[St::Ok], "delivery_len");
            expect(memq_delivery_data(d, &mut data), &[St::Ok], "delivery_data");
            expect(memq_delivery_offset(d, &mut offset), &[St::Ok], "offset");
            let st = memq_delivery_partition(d, &mut partition);
            expect(st, &[St::Ok], "delivery_partition");
            let st = memq_delivery_deliveries(d, &mut n);
            expect(st, &[St::Ok], "delivery_deliveries");
            expect(memq_delivery_get_meta(d, &mut meta), &[St::Ok], "meta");
        }
        assert_eq!(
            (meta.offset, meta.partition, meta.len),
            (offset, partition, len)
        );
        assert_eq!(meta.has_timestamp, tm.stamped);
        let bytes = if len == 0 {
            Vec::new()
        } else {
            // SAFETY: `len` readable bytes until the delivery is freed.
            unsafe { std::slice::from_raw_parts(data, len) }.to_vec()
        };
        tm.check_payload(partition, offset, &bytes, Some(data));
        assert!(n >= 1, "delivered {n} times");
        let gm = &tm.groups[&g];
        let max = gm.max_deliveries;
        let dead_letters_closed = gm.dead_letter.is_some_and(|d| self.dls[d].closed);
        assert!(
            max == 0 || n <= max || dead_letters_closed,
            "delivered {n} times, max {max}"
        );
    }

    fn ack_query(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let Some(i) = pick(u, &self.acks)? else {
            return Ok(());
        };
        let AckH { p, t, .. } = self.acks[i];
        let bad = faulty(u)?;
        if u.arbitrary()? {
            let call = memq_ack_consumer_pending;
            if let Some(count) = get(u, bad, p, usize::MAX, call, "pending")? {
                let published: u64 = self.topics[t].next.iter().sum();
                assert!(count as u64 <= published, "{count} pending of {published}");
            }
            return Ok(());
        }
        self.committed(u, bad, p, t, memq_ack_consumer_committed, "ack committed")
    }

    fn settle(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let Some(i) = pick(u, &self.delivs)? else {
            return Ok(());
        };
        let action = u.int_in_range(0..=4u8)?;
        let delay = *u.choose(&[0, 1, 60_000, u64::MAX])?;
        let null_handle = faulty(u)?;
        let h: *const memq_delivery = if null_handle {
            null()
        } else {
            self.delivs[i].p
        };
        // SAFETY: NULL or a live delivery.
        let st = unsafe {
            match action {
                0 => memq_delivery_ack(h),
                1 => memq_delivery_nack(h),
                2 => memq_delivery_nack_after(h, delay),
                3 => memq_delivery_reject(h),
                _ => memq_delivery_touch(h),
            }
        };
        if null_handle {
            expect(st, &[St::NullPointer], "settle");
            return Ok(());
        }
        let d = &self.delivs[i];
        let gm = &self.topics[d.t].groups[&d.g];
        let allowed: &[St] = if d.gone || d.orphan {
            &[St::LeaseExpired]
        } else if gm.strict {
            &[St::Ok]
        } else {
            &[St::Ok, St::LeaseExpired, St::UnknownGroup]
        };
        expect(st, allowed, "settle");
        let d = &mut self.delivs[i];
        if action < 4 || st != St::Ok {
            d.gone = true;
        }
        self.timed |= action == 2 && delay == 1 && st == St::Ok;
        if action == 0 && st == St::Ok {
            let (t, g) = (d.t, d.g);
            self.topics[t].groups.get_mut(&g).unwrap().acks += 1;
        }
        Ok(())
    }

    fn delivery_op(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let Some(i) = pick(u, &self.delivs)? else {
            // SAFETY: NULL does nothing.
            unsafe { memq_delivery_free(null_mut()) };
            return Ok(());
        };
        match u.int_in_range(0..=2u8)? {
            0 => {
                let d = self.delivs.swap_remove(i);
                // SAFETY: a live delivery, not used again.
                unsafe { memq_delivery_free(d.p) };
            }
            1 => {
                let DelivH { p, t, g, .. } = self.delivs[i];
                self.check_delivery(p, t, g);
            }
            _ => {
                let mut v = u64::MAX;
                let mut meta = memq_message_meta {
                    offset: u64::MAX,
                    ..Default::default()
                };
                let d = self.delivs[i].p;
                // SAFETY: NULL handles and out-pointers are rejected.
                let sts = unsafe {
                    [
                        memq_delivery_len(null(), null_mut()),
                        memq_delivery_data(d, null_mut()),
                        memq_delivery_offset(null(), &mut v),
                        memq_delivery_partition(d, null_mut()),
                        memq_delivery_deliveries(d, null_mut()),
                        memq_delivery_get_meta(null(), &mut meta),
                    ]
                };
                for st in sts {
                    expect(st, &[St::NullPointer], "delivery accessor");
                }
                assert_eq!((v, meta.offset), (u64::MAX, u64::MAX));
            }
        }
        Ok(())
    }

    // ----- dead letters ----------------------------------------------------------------

    fn dead_letter_topic(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        match u.int_in_range(0..=3u8)? {
            0 => {
                if self.dl_h.len() >= 3 {
                    return Ok(());
                }
                let new = memq_dead_letter_topic_new;
                if let (_, Some(p)) = new_topic(u, new, "dead_letter_topic_new")? {
                    self.dls.push(DlM {
                        closed: false,
                        handles: 1,
                    });
                    let d = self.dls.len() - 1;
                    self.dl_h.push(DlH { p, d });
                }
            }
            1 => {
                let h = take(u, &mut self.dl_h)?;
                // SAFETY: NULL (which does nothing), or a live handle, not used again.
                unsafe { memq_dead_letter_topic_free(h.as_ref().map_or(null_mut(), |h| h.p)) };
                if let Some(h) = h {
                    self.dls[h.d].handles -= 1;
                }
            }
            2 => {
                let Some(i) = pick(u, &self.dl_h)? else {
                    return Ok(());
                };
                if faulty(u)? {
                    // SAFETY: NULL is rejected.
                    let st = unsafe { memq_dead_letter_topic_close(null()) };
                    expect(st, &[St::NullPointer], "dl close");
                    return Ok(());
                }
                // SAFETY: a live handle.
                let st = unsafe { memq_dead_letter_topic_close(self.dl_h[i].p) };
                expect(st, &[St::Ok], "dl close");
                self.dls[self.dl_h[i].d].closed = true;
            }
            _ => {
                let Some(i) = pick(u, &self.dl_h)? else {
                    return Ok(());
                };
                let DlH { p, d } = self.dl_h[i];
                let init = memq_topic_stats {
                    capacity: 12345,
                    ..Default::default()
                };
                let (bad, call) = (faulty(u)?, memq_dead_letter_topic_get_stats);
                let Some(s) = get(u, bad, p, init, call, "dl stats")? else {
                    return Ok(());
                };
                assert_eq!(s.closed, self.dls[d].closed, "dead-letter topic closed");
                let subs = self.dl_subs.iter().filter(|s| s.d == d).count();
                assert_eq!(s.subscribers, subs);
                assert_eq!(s.waiting_publishers, 0);
            }
        }
        Ok(())
    }

    fn dead_letter_subscriber(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        if u.arbitrary()? {
            let s = take(u, &mut self.dl_subs)?;
            // SAFETY: NULL (which does nothing), or a live subscriber, not used again.
            unsafe { memq_dead_letter_subscriber_free(s.map_or(null_mut(), |s| s.p)) };
            return Ok(());
        }
        let Some(i) = pick(u, &self.dl_h)? else {
            return Ok(());
        };
        if self.dl_subs.len() >= MAX_READERS {
            return Ok(());
        }
        let DlH { p, d } = self.dl_h[i];
        let (mut start, offset) = start(u)?;
        // The dead-letter topic's offsets are not modelled: an offset may be past the end.
        let valid: &[St] = if start == memq_start::Offset as u32 && offset > 0 {
            &[St::Ok, St::OutOfRange]
        } else {
            &[St::Ok]
        };
        let mut out = sentinel();
        let bad = faulty(u)?;
        let a = args(u, bad, p, &mut out, None, &[St::InvalidArgument])?;
        if a.other.is_some() {
            start = bad_start(u)?;
        }
        // SAFETY: NULL or live handle; NULL or writable out-pointer.
        let st = unsafe { memq_dead_letter_subscriber_new(a.handle, start, offset, a.out) };
        a.check(st, valid, "dl subscriber_new");
        if st == St::Ok {
            self.dl_subs.push(DlSubH { p: out, d });
        } else {
            assert_eq!(out, sentinel());
        }
        Ok(())
    }

    fn dead_letter_recv(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        if u.ratio(1u8, 4)? {
            return self.letter_op(u);
        }
        let Some(i) = pick(u, &self.dl_subs)? else {
            return Ok(());
        };
        let DlSubH { p, d } = self.dl_subs[i];
        let mut letter = sentinel();
        let mut lagged = u64::MAX;
        let bad = faulty(u)?;
        let a = args(u, bad, p, &mut letter, None, &[])?;
        // SAFETY: NULL or live handle; NULL or writable out-pointers.
        let st = unsafe { memq_dead_letter_subscriber_recv(a.handle, 0, a.out, &mut lagged) };
        if a.check(st, &[St::Ok, St::Empty, St::Lagged, St::Closed], "dl recv") {
            assert_eq!((letter, lagged), (sentinel(), u64::MAX));
            return Ok(());
        }
        let dm = &self.dls[d];
        check_lag(st, lagged, true, dm.closed || dm.handles == 0);
        if st != St::Ok {
            assert_eq!(letter, sentinel());
            return Ok(());
        }
        self.check_letter(letter);
        if self.letters.len() < MAX_MESSAGES && u.arbitrary()? {
            self.letters.push(letter);
        } else {
            // SAFETY: a live letter, not used again.
            unsafe { memq_dead_letter_free(letter) };
        }
        Ok(())
    }

    /// A dead letter comes from an explicit-ack group of a topic that published its
    /// payload at its origin partition and offset.
    fn check_letter(&self, letter: *const memq_dead_letter) {
        let mut info = memq_dead_letter_info::default();
        let mut data = sentinel::<u8>().cast_const();
        // SAFETY: a live letter; writable out-pointers.
        unsafe {
            expect(
                memq_dead_letter_get_info(letter, &mut info),
                &[St::Ok],
                "info",
            );
            expect(
                memq_dead_letter_data(letter, &mut data),
                &[St::Ok],
                "dl data",
            );
        }
        let bytes = if info.len == 0 {
            Vec::new()
        } else {
            // SAFETY: `len` readable bytes until the letter is freed.
            unsafe { std::slice::from_raw_parts(data, info.len) }.to_vec()
        };
        assert!(info.reason <= memq_dead_letter_reason::Rejected as u32);
        assert!(info.deliveries >= 1);
        assert!(!info.group.is_null());
        // SAFETY: NUL-terminated strings owned by the letter.
        let group = unsafe { CStr::from_ptr(info.group) };
        let topic = (!info.topic.is_null()).then(|| {
            // SAFETY: as above.
            unsafe { CStr::from_ptr(info.topic) }
        });
        let g = GROUPS
            .iter()
            .position(|&n| n == group)
            .unwrap_or_else(|| panic!("dead letter from group {group:?}"));
        let found = self.topics.iter().any(|tm| {
            tm.name == topic
                && tm.groups.get(&g).is_some_and(|gm| {
                    let max = gm.max_deliveries;
                    gm.acked
                        && match info.reason {
                            // Given up on after exactly `max_deliveries` deliveries.
                            0 => info.deliveries == max,
                            _ => max == 0 || info.deliveries <= max,
                        }
                })
                && tm
                    .payloads
                    .get(&(info.origin_partition, info.origin_offset))
                    .is_some_and(|(v, _)| v[..] == bytes[..])
        });
        assert!(found, "a dead letter from nowhere: {info:?}");
    }

    fn letter_op(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let Some(i) = pick(u, &self.letters)? else {
            // SAFETY: NULL does nothing.
            unsafe { memq_dead_letter_free(null_mut()) };
            return Ok(());
        };
        match u.int_in_range(0..=2u8)? {
            0 => {
                let l = self.letters.swap_remove(i);
                // SAFETY: a live letter, not used again.
                unsafe { memq_dead_letter_free(l) };
            }
            1 => self.check_letter(self.letters[i]),
            _ => {
                let mut info = memq_dead_letter_info {
                    offset: u64::MAX,
                    ..Default::default()
                };
                let mut data = sentinel::<u8>().cast_const();
                // SAFETY: NULL handles and out-pointers are rejected.
                let sts = unsafe {
                    [
                        memq_dead_letter_get_info(null(), &mut info),
                        memq_dead_letter_get_info(self.letters[i], null_mut()),
                        memq_dead_letter_data(null(), &mut data),
                        memq_dead_letter_data(self.letters[i], null_mut()),
                    ]
                };
                for st in sts {
                    expect(st, &[St::NullPointer], "letter accessor");
                }
                assert_eq!(info.offset, u64::MAX);
                assert_eq!(data, sentinel::<u8>().cast_const());
            }
        }
        Ok(())
    }

    // ----- the rest --------------------------------------------------------------------

    /// Lets time pass (the target sleeps; no call waits), so that short leases, backoff
    /// delays and TTLs run out between calls; only if there are any, to keep runs fast.
    fn let_time_pass(&mut self) {
        if self.timed && self.sleeps < MAX_SLEEPS {
            self.sleeps += 1;
            std::thread::sleep(SLEEP);
        }
    }

    fn misc(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let code: u32 = if u.arbitrary()? {
            u.int_in_range(0..=20)?
        } else {
            u.arbitrary()?
        };
        let s = memq_status_str(code);
        assert!(!s.is_null());
        // SAFETY: a static NUL-terminated string.
        let s = unsafe { CStr::from_ptr(s) };
        assert_eq!(
            s == c"unknown status",
            St::from_code(code).is_none(),
            "status_str({code})"
        );
        let v = memq_version();
        assert!(!v.is_null());
        // SAFETY: a static NUL-terminated string.
        assert!(!unsafe { CStr::from_ptr(v) }.is_empty());
        // SAFETY: NULL config pointers are rejected.
        unsafe {
            expect(
                memq_topic_config_init(null_mut()),
                &[St::NullPointer],
                "init",
            );
            expect(memq_ack_config_init(null_mut()), &[St::NullPointer], "init");
        }
        Ok(())
    }

    /// Frees every live handle: readers' products first, or owners first.
    fn free_all(mut self, owners_first: bool) {
        let mut steps: Vec<fn(&mut State)> = vec![
            |s| {
                for d in s.delivs.drain(..) {
                    // SAFETY: live, not used again.
                    unsafe { memq_delivery_free(d.p) };
                }
            },
            |s| {
                for m in s.msgs.drain(..) {
                    // SAFETY: live, not used again.
                    unsafe { memq_message_free(m.p) };
                }
                for l in s.letters.drain(..) {
                    // SAFETY: live, not used again.
                    unsafe { memq_dead_letter_free(l) };
                }
            },
            |s| {
                for x in s.subs.drain(..) {
                    // SAFETY: live, not used again.
                    unsafe { memq_subscriber_free(x.p) };
                }
                for x in s.cons.drain(..) {
                    // SAFETY: live, not used again.
                    unsafe { memq_consumer_free(x.p) };
                }
                for x in s.acks.drain(..) {
                    // SAFETY: live, not used again.
                    unsafe { memq_ack_consumer_free(x.p) };
                }
                for x in s.dl_subs.drain(..) {
                    // SAFETY: live, not used again.
                    unsafe { memq_dead_letter_subscriber_free(x.p) };
                }
            },
            |s| {
                for x in s.topic_h.drain(..) {
                    // SAFETY: live, not used again.
                    unsafe { memq_topic_free(x.p) };
                }
                for x in s.brokers.drain(..) {
                    // SAFETY: live, not used again.
                    unsafe { memq_broker_free(x.p) };
                }
                for x in s.dl_h.drain(..) {
                    // SAFETY: live, not used again.
                    unsafe { memq_dead_letter_topic_free(x.p) };
                }
            },
        ];
        if owners_first {
            steps.reverse();
        }
        for step in steps {
            step(&mut self);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let owners_first = u.arbitrary::<bool>().unwrap_or(false);
    let mut state = State::default();
    // Running out of input ends the program; its handles are freed below.
    let _ = state.run(&mut u);
    state.free_all(owners_first);
    let left: Vec<usize> = owned().keys().copied().collect();
    assert!(
        left.is_empty(),
        "zero-copy buffers never released once everything was freed: {left:?}"
    );
});
