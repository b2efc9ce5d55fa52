//! Durable topics through the C ABI: publish and replay beyond memory, offsets, acks and
//! group positions across a restart (close, free, reopen), and every failure a status:
//! NULL, bad UTF-8, a locked directory, a corrupt log, bad configurations.
// Paths are made of bytes here, as on Unix.
#![cfg(unix)]

mod common;

use std::ffi::{CStr, CString};
use std::path::Path;
use std::ptr::{null, null_mut};

use common::*;
use memq::*;

fn last_error() -> String {
    // SAFETY: memq_last_error_message always returns a valid NUL-terminated string.
    unsafe { CStr::from_ptr(memq_last_error_message()) }
        .to_string_lossy()
        .into_owned()
}

fn cpath(dir: &Path) -> CString {
    use std::os::unix::ffi::OsStrExt;
    CString::new(dir.as_os_str().as_bytes()).unwrap()
}

fn durable_config(sync: memq_sync) -> memq_durable_config {
    let mut d = memq_durable_config::default();
    // SAFETY: a valid, writable config.
    assert_eq!(unsafe { memq_durable_config_init(&mut d) }, OK);
    d.sync = sync as u32;
    d.segment_bytes = 4096;
    d
}

fn try_open(
    dir: &Path,
    topic: &memq_topic_config,
    durable: &memq_durable_config,
) -> Result<*mut memq_durable_topic, memq_status> {
    let dir = cpath(dir);
    let mut t = SENTINEL as *mut memq_durable_topic;
    // SAFETY: valid strings, configs and out-pointer.
    match unsafe { memq_durable_open(dir.as_ptr(), topic, durable, &mut t) } {
        memq_status::Ok => Ok(t),
        st => {
            assert_eq!(t as usize, SENTINEL, "out-parameter written on {st:?}");
            Err(st)
        }
    }
}

const SENTINEL: usize = 0xDEAD_BEEF;

fn open(dir: &Path, capacity: usize, partitions: u32) -> *mut memq_durable_topic {
    try_open(
        dir,
        &config(capacity, partitions, memq_overflow::Block),
        &durable_config(memq_sync::Never),
    )
    .unwrap_or_else(|st| panic!("open: {st:?}: {}", last_error()))
}

fn publish(t: *const memq_durable_topic, payload: &[u8]) -> memq_durable_receipt {
    let mut r = memq_durable_receipt::default();
    // SAFETY: live topic, readable payload, valid receipt.
    let st = unsafe { memq_durable_publish(t, payload.as_ptr(), payload.len(), -1, &mut r) };
    assert_eq!(st, OK, "{}", last_error());
    r
}

fn subscribe(t: *const memq_durable_topic, start: memq_start) -> *mut memq_durable_subscriber {
    let mut s = null_mut();
    // SAFETY: live topic, valid out-pointer.
    let st = unsafe { memq_durable_subscriber_new(t, start as u32, 0, &mut s) };
    assert_eq!(st, OK);
    s
}

/// A message's payload, key and metadata; the handle is freed.
fn take(m: *mut memq_durable_message) -> (Vec<u8>, Option<Vec<u8>>, memq_durable_meta) {
    let mut data = null();
    let mut key = null();
    let mut meta = memq_durable_meta::default();
    // SAFETY: `m` is a live message handle; out-pointers are valid; the pointers read
    // are valid for the lengths in `meta` until the free.
    unsafe {
        assert_eq!(memq_durable_message_data(m, &mut data), OK);
        assert_eq!(memq_durable_message_key(m, &mut key), OK);
        assert_eq!(memq_durable_message_get_meta(m, &mut meta), OK);
        let bytes = std::slice::from_raw_parts(data, meta.len).to_vec();
        let key = meta
            .has_key
            .then(|| std::slice::from_raw_parts(key, meta.key_len).to_vec());
        assert_eq!(key.is_none(), !meta.has_key);
        memq_durable_message_free(m);
        (bytes, key, meta)
    }
}

fn recv(
    s: *const memq_durable_subscriber,
    timeout_ms: i64,
) -> Result<(Vec<u8>, memq_durable_meta), memq_status> {
    let mut m = null_mut();
    // SAFETY: live subscriber, valid out-pointer.
    match unsafe { memq_durable_subscriber_recv(s, timeout_ms, &mut m, null_mut()) } {
        memq_status::Ok => {
            let (data, _, meta) = take(m);
            Ok((data, meta))
        }
        st => {
            assert!(m.is_null(), "out-parameter written on {st:?}");
            Err(st)
        }
    }
}

fn group_config(ack_wait_ms: u64, max_deliveries: u32) -> memq_durable_group_config {
    let mut g = memq_durable_group_config::default();
    // SAFETY: a valid, writable config.
    assert_eq!(unsafe { memq_durable_group_config_init(&mut g) }, OK);
    g.ack_wait_ms = ack_wait_ms;
    g.max_deliveries = max_deliveries;
    g
}

fn join(
    t: *const memq_durable_topic,
    group: &str,
    config: &memq_durable_group_config,
) -> *mut memq_durable_consumer {
    let group = CString::new(group).unwrap();
    let mut c = null_mut();
    // SAFETY: live topic, NUL-terminated name, valid config and out-pointer.
    let st = unsafe {
        memq_durable_consumer_new(
            t,
            group.as_ptr(),
            memq_start::Earliest as u32,
            0,
            config,
            &mut c,
        )
    };
    assert_eq!(st, OK, "{}", last_error());
    c
}

fn deliver(c: *const memq_durable_consumer, timeout_ms: i64) -> Option<*mut memq_durable_delivery> {
    let mut d = null_mut();
    // SAFETY: live consumer, valid out-pointer.
    match unsafe { memq_durable_consumer_recv_delivery(c, timeout_ms, &mut d, null_mut()) } {
        memq_status::Ok => Some(d),
        memq_status::Empty | memq_status::Timeout => None,
        st => panic!("recv_delivery: {st:?}: {}", last_error()),
    }
}

fn delivery_payload(d: *const memq_durable_delivery) -> (Vec<u8>, memq_durable_meta, u32) {
    let mut data = null();
    let mut meta = memq_durable_meta::default();
    let mut n = 0;
    // SAFETY: live delivery; valid out-pointers; `data` valid for `meta.len` bytes.
    unsafe {
        assert_eq!(memq_durable_delivery_data(d, &mut data), OK);
        assert_eq!(memq_durable_delivery_get_meta(d, &mut meta), OK);
        assert_eq!(memq_durable_delivery_deliveries(d, &mut n), OK);
        (std::slice::from_raw_parts(data, meta.len).to_vec(), meta, n)
    }
}

fn body(i: u64) -> Vec<u8> {
    format!("order {i:04}").into_bytes()
}

#[test]
fn a_subscriber_replays_beyond_memory_and_offsets_go_on_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let t = open(dir.path(), 8, 1);
    for i in 0..100 {
        let r = publish(t, &body(i));
        assert_eq!(
            (r.offset, r.partition, r.count, r.durable),
            (i, 0, 1, false)
        );
    }
    // SAFETY: a live handle, freed once; nothing else uses it.
    unsafe { memq_durable_topic_free(t) };

    let t = open(dir.path(), 8, 1);
    let mut next = 0;
    // SAFETY: live topic, valid out-pointer.
    let st = unsafe { memq_durable_topic_next_offset(t, 0, &mut next) };
    assert_eq!(st, OK);
    assert_eq!(next, 100);
    let s = subscribe(t, memq_start::Earliest);
    for i in 0..100 {
        let (data, meta) = recv(s, 1000).unwrap();
        assert_eq!((data, meta.offset, meta.partition), (body(i), i, 0));
        assert!(meta.timestamp_ms > 1_600_000_000_000, "ms since the epoch");
    }
    assert_eq!(recv(s, 0), Err(memq_status::Empty));
    assert_eq!(recv(s, 10), Err(memq_status::Timeout));
    assert_eq!(publish(t, b"after").offset, 100);
    assert_eq!(recv(s, 1000).unwrap().0, b"after");
    // SAFETY: live topic.
    assert_eq!(unsafe { memq_durable_topic_close(t) }, OK);
    assert_eq!(recv(s, -1), Err(memq_status::Closed));
    let mut r = memq_durable_receipt::default();
    // SAFETY: live topic, valid pointers.
    let st = unsafe { memq_durable_publish(t, b"x".as_ptr(), 1, -1, &mut r) };
    assert_eq!(st, memq_status::Closed);
    // SAFETY: live handles, each freed once.
    unsafe {
        memq_durable_subscriber_free(s);
        memq_durable_topic_free(t);
    }
}

#[test]
fn receipts_say_whether_the_message_is_on_disk() {
    for (sync, durable) in [(memq_sync::Always, true), (memq_sync::Never, false)] {
        let dir = tempfile::tempdir().unwrap();
        let t = try_open(
            dir.path(),
            &config(4, 1, memq_overflow::Block),
            &durable_config(sync),
        )
        .unwrap();
        assert_eq!(publish(t, b"x").durable, durable, "{sync:?}");
        // SAFETY: a live handle, freed once.
        unsafe { memq_durable_topic_free(t) };
    }
    let dir = tempfile::tempdir().unwrap();
    let mut d = durable_config(memq_sync::Interval);
    assert_eq!(
        try_open(dir.path(), &config(4, 1, memq_overflow::Block), &d),
        Err(memq_status::InvalidArgument)
    );
    assert!(
        last_error().contains("sync_interval_ms"),
        "{}",
        last_error()
    );
    d.sync_interval_ms = 5;
    let t = try_open(dir.path(), &config(4, 1, memq_overflow::Block), &d).unwrap();
    assert!(!publish(t, b"x").durable);
    // SAFETY: a live handle, freed once.
    unsafe { memq_durable_topic_free(t) };
}

#[test]
fn a_publish_waits_for_room_at_most_its_time_limit() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = durable_config(memq_sync::Never);
    d.retention_max_bytes = 8192;
    let t = try_open(dir.path(), &config(8, 1, memq_overflow::Block), &d).unwrap();
    // A subscriber that reads nothing holds every segment.
    let s = subscribe(t, memq_start::Earliest);
    let payload = [7u8; 500];
    let mut r = memq_durable_receipt::default();
    let mut published = 0;
    // SAFETY: live topic, readable payload, valid receipt.
    unsafe {
        while memq_durable_publish(t, payload.as_ptr(), payload.len(), 0, &mut r) == OK {
            published += 1;
        }
        // No room: a time limit runs out and says FULL (nothing was published).
        let st = memq_durable_publish(t, payload.as_ptr(), payload.len(), 20, &mut r);
        assert_eq!(st, memq_status::Full);
    }
    // The subscriber reads everything: room again, and a publish with a time limit far
    // longer than it needs goes through at once.
    let mut m = null_mut();
    for _ in 0..published {
        // SAFETY: live subscriber, valid out-pointer.
        let st = unsafe { memq_durable_subscriber_recv(s, 0, &mut m, null_mut()) };
        assert_eq!(st, OK);
        take(m);
    }
    // SAFETY: as above.
    let st = unsafe { memq_durable_publish(t, payload.as_ptr(), payload.len(), 60_000, &mut r) };
    assert_eq!(st, OK, "{}", last_error());
    assert_eq!(r.offset, published);
    // SAFETY: live handles, freed once.
    unsafe {
        memq_durable_subscriber_free(s);
        memq_durable_topic_free(t);
    }
}

#[test]
fn keys_route_as_in_memory_and_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let t = open(dir.path(), 8, 4);
    let key = b"user-7";
    let mut want = 0;
    let mut r = memq_durable_receipt::default();
    // SAFETY: readable key and payload, valid out-pointers, live topic.
    unsafe {
        assert_eq!(
            memq_key_partition(key.as_ptr(), key.len(), 4, &mut want),
            OK
        );
        for timeout in [0, -1] {
            let st = memq_durable_publish_keyed(
                t,
                key.as_ptr(),
                key.len(),
                b"v".as_ptr(),
                1,
                timeout,
                &mut r,
            );
            assert_eq!(st, OK);
            assert_eq!(r.partition, want);
        }
        for timeout in [0, -1] {
            let st = memq_durable_publish_to(t, 3, b"w".as_ptr(), 1, timeout, &mut r);
            assert_eq!((st, r.partition), (OK, 3));
            let st = memq_durable_publish_to(t, 4, b"w".as_ptr(), 1, timeout, &mut r);
            assert_eq!(st, memq_status::OutOfRange);
        }
        // A time limit: without a retention limit there is always room.
        let st = memq_durable_publish(t, b"w".as_ptr(), 1, 5, &mut r);
        assert_eq!(st, OK);
    }
    let s = subscribe(t, memq_start::Earliest);
    let mut m = null_mut();
    let mut keyed = 0;
    // SAFETY: live subscriber, valid out-pointer.
    while unsafe { memq_durable_subscriber_recv(s, 0, &mut m, null_mut()) } == OK {
        let (_, k, meta) = take(m);
        if meta.partition == want && meta.offset < 2 {
            assert_eq!(k.as_deref(), Some(&key[..]));
            keyed += 1;
        } else {
            assert_eq!((k, meta.key_len), (None, 0));
        }
    }
    assert_eq!(keyed, 2);
    // SAFETY: live handles, each freed once.
    unsafe {
        memq_durable_subscriber_free(s);
        memq_durable_topic_free(t);
    }
}

#[test]
fn acked_messages_never_come_back_and_unacked_ones_do_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let t = open(dir.path(), 4, 1);
    for i in 0..10 {
        publish(t, &body(i));
    }
    let c = join(t, "billing", &group_config(60_000, 0));
    for i in 0..10 {
        let d = deliver(c, 1000).expect("a delivery");
        let (data, meta, n) = delivery_payload(d);
        assert_eq!((data, meta.offset, n), (body(i), i, 1));
        if i < 6 {
            // SAFETY: a live delivery.
            unsafe {
                assert_eq!(memq_durable_delivery_ack(d), OK);
                assert_eq!(memq_durable_delivery_ack(d), memq_status::LeaseExpired);
                assert_eq!(memq_durable_delivery_nack(d), memq_status::LeaseExpired);
            }
        }
        // SAFETY: a live delivery, freed once (unacked ones stay in flight).
        unsafe { memq_durable_delivery_free(d) };
    }
    let mut stats = memq_durable_group_stats::default();
    let (mut committed, mut on_disk) = (0, 0);
    // SAFETY: live consumer, valid out-pointers.
    unsafe {
        assert_eq!(memq_durable_consumer_commit(c), OK);
        assert_eq!(memq_durable_consumer_get_stats(c, &mut stats), OK);
        assert_eq!(
            memq_durable_consumer_committed(c, 0, &mut committed, &mut on_disk),
            OK
        );
        assert_eq!(
            memq_durable_consumer_committed(c, 1, &mut committed, null_mut()),
            memq_status::OutOfRange
        );
    }
    assert_eq!((stats.members, stats.in_flight), (1, 4));
    assert_eq!((committed, on_disk), (6, 6));
    // The "crash": everything freed without acking 6..9.
    // SAFETY: live handles, each freed once.
    unsafe {
        memq_durable_consumer_free(c);
        memq_durable_topic_free(t);
    }

    let t = open(dir.path(), 4, 1);
    let c = join(t, "billing", &group_config(60_000, 0));
    let mut again = Vec::new();
    while let Some(d) = deliver(c, 200) {
        let (data, _, _) = delivery_payload(d);
        again.push(data);
        // SAFETY: a live delivery, acked and freed once.
        unsafe {
            assert_eq!(memq_durable_delivery_ack(d), OK);
            memq_durable_delivery_free(d);
        }
    }
    assert_eq!(again, (6..10).map(body).collect::<Vec<_>>());
    // SAFETY: live handles, each freed once.
    unsafe {
        memq_durable_consumer_free(c);
        memq_durable_topic_free(t);
    }
}

#[test]
fn nack_redelivers_and_max_deliveries_dead_letters() {
    let dir = tempfile::tempdir().unwrap();
    let t = open(dir.path(), 4, 1);
    publish(t, b"poison");
    let c = join(t, "g", &group_config(60_000, 2));
    for attempt in 1..=2 {
        let d = deliver(c, 1000).unwrap();
        assert_eq!(delivery_payload(d).2, attempt);
        // SAFETY: a live delivery, nacked and freed once.
        unsafe {
            assert_eq!(memq_durable_delivery_nack(d), OK);
            memq_durable_delivery_free(d);
        }
    }
    assert!(deliver(c, 0).is_none());
    let mut stats = memq_durable_group_stats::default();
    // SAFETY: live consumer, valid out-pointer.
    let st = unsafe { memq_durable_consumer_get_stats(c, &mut stats) };
    assert_eq!(st, OK);
    assert_eq!((stats.redelivered, stats.dead_lettered), (1, 1));
    // A message touched (its lease kept), then handed back with a delay of 0: delivered
    // again at once; settled once only.
    publish(t, b"later");
    let d = deliver(c, 1000).unwrap();
    // SAFETY: a live delivery, settled and freed once.
    unsafe {
        assert_eq!(memq_durable_delivery_touch(d), OK);
        assert_eq!(memq_durable_delivery_nack_after(d, 0), OK);
        assert_eq!(memq_durable_delivery_touch(d), memq_status::LeaseExpired);
        memq_durable_delivery_free(d);
    }
    let d = deliver(c, 60_000).unwrap();
    assert_eq!(delivery_payload(d).2, 2);
    // SAFETY: as above.
    unsafe {
        assert_eq!(memq_durable_delivery_ack(d), OK);
        memq_durable_delivery_free(d);
    }
    // A second message, rejected on sight.
    publish(t, b"reject me");
    let d = deliver(c, 1000).unwrap();
    // SAFETY: a live delivery, rejected and freed once; a second settle is refused.
    unsafe {
        assert_eq!(memq_durable_delivery_reject(d), OK);
        assert_eq!(memq_durable_delivery_ack(d), memq_status::LeaseExpired);
        memq_durable_delivery_free(d);
    }
    // Both are in the group's dead-letter log, with where they came from.
    let group = CString::new("g").unwrap();
    let mut r = null_mut();
    let mut letters = Vec::new();
    // SAFETY: live topic, a NUL-terminated name, valid out-pointers; each handle freed
    // once, after its last use.
    unsafe {
        let st = memq_durable_dead_letters_new(
            t,
            group.as_ptr(),
            memq_start::Earliest as u32,
            0,
            &mut r,
        );
        assert_eq!(st, OK, "{}", last_error());
        let mut l = null_mut();
        while memq_durable_dead_letters_recv(r, 0, &mut l, null_mut()) == OK {
            let mut info = memq_durable_dead_letter_info::default();
            assert_eq!(memq_durable_dead_letter_get_info(l, &mut info), OK);
            let mut data = null();
            assert_eq!(memq_durable_dead_letter_data(l, &mut data), OK);
            let payload = std::slice::from_raw_parts(data, info.len).to_vec();
            let mut key = SENTINEL as *const u8;
            assert_eq!(memq_durable_dead_letter_key(l, &mut key), OK);
            assert!(key.is_null() && !info.has_key);
            let name = std::ffi::CStr::from_ptr(info.group)
                .to_str()
                .unwrap()
                .to_string();
            letters.push((
                payload,
                name,
                info.origin_offset,
                info.deliveries,
                info.reason,
            ));
            memq_durable_dead_letter_free(l);
        }
        assert_eq!(
            memq_durable_dead_letters_recv(r, 20, &mut l, null_mut()),
            memq_status::Timeout
        );
        memq_durable_dead_letters_free(r);
    }
    let max = memq_dead_letter_reason::MaxDeliveries as u32;
    let rejected = memq_dead_letter_reason::Rejected as u32;
    assert_eq!(
        letters,
        vec![
            (b"poison".to_vec(), "g".to_string(), 0, 2, max),
            (b"reject me".to_vec(), "g".to_string(), 2, 1, rejected),
        ]
    );
    // SAFETY: live handles, each freed once.
    unsafe {
        memq_durable_consumer_free(c);
        memq_durable_topic_free(t);
    }
}

#[test]
fn a_plain_group_goes_on_from_its_commit_and_modes_do_not_mix() {
    let dir = tempfile::tempdir().unwrap();
    let t = open(dir.path(), 4, 1);
    for i in 0..6 {
        publish(t, &body(i));
    }
    let c = join(t, "plain", &group_config(0, 0));
    let mut m = null_mut();
    let mut d = null_mut();
    // SAFETY: live consumer, valid out-pointers.
    unsafe {
        for i in 0..3 {
            assert_eq!(memq_durable_consumer_recv(c, 1000, &mut m, null_mut()), OK);
            assert_eq!(take(m).0, body(i));
        }
        assert_eq!(
            memq_durable_consumer_recv_delivery(c, 0, &mut d, null_mut()),
            memq_status::GroupModeMismatch
        );
        assert!(d.is_null());
        memq_durable_consumer_free(c);
        memq_durable_topic_free(t);
    }
    let t = open(dir.path(), 4, 1);
    let c = join(t, "plain", &group_config(0, 0));
    // SAFETY: live consumer, valid out-pointers.
    unsafe {
        for i in 3..6 {
            assert_eq!(memq_durable_consumer_recv(c, 1000, &mut m, null_mut()), OK);
            assert_eq!(take(m).0, body(i));
        }
        assert_eq!(
            memq_durable_consumer_recv(c, 0, &mut m, null_mut()),
            memq_status::Empty
        );
        assert_eq!(
            memq_durable_consumer_recv(c, 20, &mut m, null_mut()),
            memq_status::Timeout
        );
        let acked = join(t, "acked", &group_config(1000, 0));
        assert_eq!(
            memq_durable_consumer_recv(acked, 0, &mut m, null_mut()),
            memq_status::GroupModeMismatch
        );
        // The same group with another configuration in this process.
        let other = CString::new("plain").unwrap();
        let mut x = null_mut();
        let st = memq_durable_consumer_new(t, other.as_ptr(), 0, 0, &group_config(1000, 0), &mut x);
        assert_eq!(st, memq_status::InvalidArgument);
        assert!(x.is_null());
        memq_durable_topic_close(t);
        assert_eq!(
            memq_durable_consumer_recv(c, -1, &mut m, null_mut()),
            memq_status::Closed
        );
        memq_durable_consumer_free(acked);
        memq_durable_consumer_free(c);
        memq_durable_topic_free(t);
    }
}

#[test]
fn a_directory_open_elsewhere_is_locked_until_everything_is_freed() {
    let dir = tempfile::tempdir().unwrap();
    let t = open(dir.path(), 4, 1);
    let topic = config(4, 1, memq_overflow::Block);
    let durable = durable_config(memq_sync::Never);
    assert_eq!(
        try_open(dir.path(), &topic, &durable),
        Err(memq_status::Locked)
    );
    assert!(last_error().contains("already open"), "{}", last_error());
    // A subscriber keeps it locked after its topic handle is gone.
    let s = subscribe(t, memq_start::Earliest);
    // SAFETY: a live handle, freed once.
    unsafe { memq_durable_topic_free(t) };
    assert_eq!(
        try_open(dir.path(), &topic, &durable),
        Err(memq_status::Locked)
    );
    // SAFETY: a live handle, freed once.
    unsafe { memq_durable_subscriber_free(s) };
    let t = try_open(dir.path(), &topic, &durable).unwrap();
    // SAFETY: a live handle, freed once.
    unsafe { memq_durable_topic_free(t) };
}

#[test]
fn a_corrupt_log_is_refused_and_repaired_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let t = open(dir.path(), 4, 1);
    for i in 0..400 {
        publish(t, &body(i));
    }
    // SAFETY: a live handle, freed once.
    unsafe { memq_durable_topic_free(t) };
    // A byte in the middle of the first (closed) segment's first record.
    let seg = dir.path().join("partition-0/00000000000000000000.log");
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[16 + 36] ^= 0xff;
    std::fs::write(&seg, bytes).unwrap();

    let topic = config(4, 1, memq_overflow::Block);
    let mut durable = durable_config(memq_sync::Never);
    durable.flags = MEMQ_DURABLE_VERIFY_ON_OPEN;
    assert_eq!(
        try_open(dir.path(), &topic, &durable),
        Err(memq_status::Corrupt)
    );
    assert!(last_error().contains("corrupt record"), "{}", last_error());
    durable.flags |= MEMQ_DURABLE_REPAIR;
    let t = try_open(dir.path(), &topic, &durable).unwrap();
    let mut next = u64::MAX;
    // SAFETY: live topic, valid out-pointer.
    let st = unsafe { memq_durable_topic_next_offset(t, 0, &mut next) };
    assert_eq!(st, OK);
    assert_eq!(next, 0, "cut at the first record");
    // SAFETY: a live handle, freed once.
    unsafe { memq_durable_topic_free(t) };
}

#[test]
fn bad_configurations_are_invalid_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let ok_topic = config(4, 1, memq_overflow::Block);
    let ok_durable = durable_config(memq_sync::Never);
    let mut ttl = ok_topic;
    ttl.ttl_ms = 10;
    let mut release = ok_topic;
    release.flags = MEMQ_TOPIC_RELEASE_ON_READ;
    let mut zero = ok_topic;
    zero.capacity = 0;
    for bad in [ttl, release, zero] {
        assert_eq!(
            try_open(dir.path(), &bad, &ok_durable),
            Err(memq_status::InvalidArgument),
            "{bad:?}"
        );
    }
    let mut sync = ok_durable;
    sync.sync = 9;
    let mut flags = ok_durable;
    flags.flags = 0x80;
    let mut segment = ok_durable;
    segment.segment_bytes = 100;
    for bad in [sync, flags, segment] {
        assert_eq!(
            try_open(dir.path(), &ok_topic, &bad),
            Err(memq_status::InvalidArgument),
            "{bad:?}"
        );
    }
    // The partition count is the directory's.
    let t = try_open(dir.path(), &ok_topic, &ok_durable).unwrap();
    // SAFETY: a live handle, freed once.
    unsafe { memq_durable_topic_free(t) };
    assert_eq!(
        try_open(dir.path(), &config(4, 2, memq_overflow::Block), &ok_durable),
        Err(memq_status::InvalidArgument)
    );
    assert!(last_error().contains("partitions"), "{}", last_error());
    // A file where the directory should be.
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    assert_eq!(
        try_open(&file, &ok_topic, &ok_durable),
        Err(memq_status::Io)
    );
    // Group configurations.
    let t = open(&dir.path().join("groups"), 4, 1);
    let name = c"g";
    let mut c = null_mut();
    for bad in [
        group_config(0, 3),
        memq_durable_group_config {
            commit_every: 0,
            ..group_config(10, 0)
        },
    ] {
        // SAFETY: live topic, valid pointers.
        let st = unsafe { memq_durable_consumer_new(t, name.as_ptr(), 0, 0, &bad, &mut c) };
        assert_eq!(st, memq_status::InvalidArgument, "{bad:?}");
        assert!(c.is_null());
    }
    // SAFETY: live topic, valid pointers.
    let st =
        unsafe { memq_durable_consumer_new(t, name.as_ptr(), 7, 0, &group_config(0, 0), &mut c) };
    assert_eq!(st, memq_status::InvalidArgument);
    // SAFETY: a live handle, freed once.
    unsafe { memq_durable_topic_free(t) };
}

#[test]
fn null_and_bad_strings_are_statuses() {
    let dir = tempfile::tempdir().unwrap();
    let topic = config(4, 1, memq_overflow::Block);
    let durable = durable_config(memq_sync::Never);
    let path = cpath(dir.path());
    let mut t = null_mut();
    let mut r = memq_durable_receipt::default();
    let mut s = null_mut();
    let mut c = null_mut();
    let mut m = null_mut();
    let mut d = null_mut();
    let mut p = null();
    let mut meta = memq_durable_meta::default();
    let mut stats = memq_durable_group_stats::default();
    let mut dl = null_mut();
    let mut letter = null_mut();
    let mut info = memq_durable_dead_letter_info::default();
    let g = group_config(0, 0);
    // SAFETY: every handle or required pointer is NULL, which each export must reject
    // before reading; the rest are valid.
    unsafe {
        for st in [
            memq_durable_config_init(null_mut()),
            memq_durable_group_config_init(null_mut()),
            memq_durable_open(null(), &topic, &durable, &mut t),
            memq_durable_open(path.as_ptr(), null(), &durable, &mut t),
            memq_durable_open(path.as_ptr(), &topic, null(), &mut t),
            memq_durable_open(path.as_ptr(), &topic, &durable, null_mut()),
            memq_durable_topic_close(null()),
            memq_durable_topic_next_offset(null(), 0, &mut 0),
            memq_durable_topic_start_offset(null(), 0, &mut 0),
            memq_durable_publish(null(), null(), 0, 0, &mut r),
            memq_durable_publish_keyed(null(), null(), 0, null(), 0, 0, &mut r),
            memq_durable_publish_to(null(), 0, null(), 0, 0, &mut r),
            memq_durable_subscriber_new(null(), 0, 0, &mut s),
            memq_durable_subscriber_recv(null(), 0, &mut m, null_mut()),
            memq_durable_consumer_new(null(), c"g".as_ptr(), 0, 0, &g, &mut c),
            memq_durable_consumer_recv(null(), 0, &mut m, null_mut()),
            memq_durable_consumer_recv_delivery(null(), 0, &mut d, null_mut()),
            memq_durable_consumer_commit(null()),
            memq_durable_consumer_get_stats(null(), &mut stats),
            memq_durable_consumer_committed(null(), 0, &mut 0, null_mut()),
            memq_durable_message_data(null(), &mut p),
            memq_durable_message_key(null(), &mut p),
            memq_durable_message_get_meta(null(), &mut meta),
            memq_durable_delivery_data(null(), &mut p),
            memq_durable_delivery_key(null(), &mut p),
            memq_durable_delivery_get_meta(null(), &mut meta),
            memq_durable_delivery_deliveries(null(), &mut 0),
            memq_durable_delivery_reject(null()),
            memq_durable_delivery_touch(null()),
            memq_durable_delivery_nack_after(null(), 0),
            memq_durable_dead_letters_new(null(), c"g".as_ptr(), 0, 0, &mut dl),
            memq_durable_dead_letters_recv(null(), 0, &mut letter, null_mut()),
            memq_durable_dead_letter_data(null(), &mut p),
            memq_durable_dead_letter_key(null(), &mut p),
            memq_durable_dead_letter_get_info(null(), &mut info),
            memq_durable_delivery_ack(null()),
            memq_durable_delivery_nack(null()),
        ] {
            assert_eq!(st, memq_status::NullPointer);
        }
        memq_durable_topic_free(null_mut());
        memq_durable_subscriber_free(null_mut());
        memq_durable_consumer_free(null_mut());
        memq_durable_message_free(null_mut());
        memq_durable_delivery_free(null_mut());
    }
    assert!(t.is_null() && s.is_null() && c.is_null() && m.is_null() && d.is_null());

    // An empty path; a path that is not UTF-8 is still a path on Unix.
    // SAFETY: valid strings, configs and out-pointer.
    unsafe {
        assert_eq!(
            memq_durable_open(c"".as_ptr(), &topic, &durable, &mut t),
            memq_status::InvalidArgument
        );
    }
    let odd = dir.path().join(odd_name());
    let t = try_open(&odd, &topic, &durable).unwrap();
    assert!(odd.is_dir());
    let t2 = t;
    // A group name that is not UTF-8; NULL out-parameters on a live topic.
    let bad = CString::new(vec![b'g', 0xff]).unwrap();
    // SAFETY: live topic, valid strings and configs.
    unsafe {
        assert_eq!(
            memq_durable_consumer_new(t2, bad.as_ptr(), 0, 0, &g, &mut c),
            memq_status::InvalidArgument
        );
        assert!(last_error().contains("UTF-8"), "{}", last_error());
        assert_eq!(
            memq_durable_consumer_new(t2, null(), 0, 0, &g, &mut c),
            memq_status::NullPointer
        );
        assert_eq!(
            memq_durable_publish(t2, null(), 3, 0, &mut r),
            memq_status::NullPointer
        );
        assert_eq!(
            memq_durable_publish(t2, b"x".as_ptr(), 1, 0, null_mut()),
            memq_status::NullPointer
        );
        let sub = subscribe(t2, memq_start::Latest);
        assert_eq!(
            memq_durable_subscriber_recv(sub, 0, null_mut(), null_mut()),
            memq_status::NullPointer
        );
        let mut past = null_mut();
        assert_eq!(
            memq_durable_subscriber_new(t2, memq_start::Offset as u32, 5, &mut past),
            memq_status::OutOfRange
        );
        assert_eq!(
            memq_durable_subscriber_new(t2, 9, 0, &mut past),
            memq_status::InvalidArgument
        );
        assert!(past.is_null());
        memq_durable_subscriber_free(sub);
        memq_durable_topic_free(t2);
    }
}

/// A file name that is not UTF-8.
fn odd_name() -> &'static std::ffi::OsStr {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::OsStr::from_bytes(b"topic-\xff")
}
