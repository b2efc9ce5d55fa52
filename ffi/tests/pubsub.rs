//! Publishing and receiving through the C ABI: subscribers, groups, partitions, keys,
//! batches, overflow policies, timestamps, TTL, the broker and stats. Every message sent
//! is counted back.

mod common;

use std::collections::HashSet;
use std::ptr::{null, null_mut};
use std::thread;

use common::*;
use memq::*;

/// What the header's thread-safety notes promise: every handle may move between threads,
/// and be shared by them (calls on a shared subscriber or consumer are serialised).
#[test]
fn handles_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<memq_broker>();
    send_sync::<memq_topic>();
    send_sync::<memq_subscriber>();
    send_sync::<memq_consumer>();
    send_sync::<memq_message>();
}

#[test]
fn broadcast_and_replay() {
    let t = topic(16);
    let early = subscribe(t, memq_start::Earliest);
    for i in 0..10u8 {
        let r = publish(t, &[i; 3]);
        assert_eq!((r.offset, r.partition), (u64::from(i), 0));
    }
    let late = subscribe(t, memq_start::Earliest);
    let mut at = null_mut();
    // SAFETY: live topic, valid out-pointer.
    unsafe {
        assert_eq!(
            memq_subscriber_new(t, memq_start::Offset as u32, 7, &mut at),
            OK
        );
    }
    for s in [early, late] {
        for i in 0..10u8 {
            assert_eq!(recv(s, 0), Ok(vec![i; 3]));
        }
        assert_eq!(recv(s, 0), Err(memq_status::Empty));
    }
    for i in 7..10u8 {
        assert_eq!(recv(at, 0), Ok(vec![i; 3]));
    }
    let mut lag = 99;
    // SAFETY: live handles, valid out-pointers; each freed once.
    unsafe {
        assert_eq!(memq_subscriber_lag(at, &mut lag), OK);
        assert_eq!(lag, 0);
        for s in [early, late, at] {
            memq_subscriber_free(s);
        }
        memq_topic_free(t);
    }
}

#[test]
fn message_accessors() {
    let mut c = config(8, 1, memq_overflow::Block);
    c.flags = MEMQ_TOPIC_TIMESTAMPS;
    let stamped = topic_with(&c);
    let plain = topic(8);
    let s1 = subscribe(stamped, memq_start::Earliest);
    let s2 = subscribe(plain, memq_start::Earliest);
    publish(stamped, b"hello");
    publish(plain, b"hello");
    // SAFETY: live handles, valid out-pointers; each freed once.
    unsafe {
        for (s, has_ts) in [(s1, true), (s2, false)] {
            let mut m = null_mut();
            assert_eq!(memq_subscriber_recv(s, 0, &mut m, null_mut()), OK);
            let (mut data, mut len, mut off, mut part, mut ts) = (null(), 0, 9, 9, 0);
            assert_eq!(memq_message_data(m, &mut data), OK);
            assert_eq!(memq_message_len(m, &mut len), OK);
            assert_eq!(std::slice::from_raw_parts(data, len), b"hello");
            assert_eq!(memq_message_offset(m, &mut off), OK);
            assert_eq!(memq_message_partition(m, &mut part), OK);
            assert_eq!((off, part), (0, 0));
            let st = memq_message_timestamp(m, &mut ts);
            let mut meta = memq_message_meta::default();
            assert_eq!(memq_message_get_meta(m, &mut meta), OK);
            assert_eq!(meta.has_timestamp, has_ts);
            if has_ts {
                assert_eq!(st, OK);
                assert!(ts > 0);
                assert_eq!(meta.timestamp_ns, ts);
            } else {
                assert_eq!((st, ts), (memq_status::NoTimestamp, 0));
            }
            memq_message_free(m);
        }
        memq_subscriber_free(s1);
        memq_subscriber_free(s2);
        memq_topic_free(stamped);
        memq_topic_free(plain);
    }
}

#[test]
fn a_releasing_topic_lets_go_of_what_every_reader_read() {
    let mut c = config(8, 1, memq_overflow::Block);
    c.flags = MEMQ_TOPIC_RELEASE_ON_READ;
    let t = topic_with(&c);
    let s = subscribe(t, memq_start::Earliest);
    for payload in [b"a", b"b", b"c"] {
        publish(t, payload);
    }
    assert_eq!(recv(s, 0).unwrap(), b"a");
    assert_eq!(recv(s, 0).unwrap(), b"b");
    // The subscriber fetched all three ahead, moving them out of the log: "c" is in its
    // hands, not handed over yet.
    let mut st = memq_topic_stats::default();
    // SAFETY: live topic, valid out-pointer.
    unsafe { assert_eq!(memq_topic_get_stats(t, &mut st), OK) };
    assert_eq!(
        (st.published, st.released, st.depth, st.evicted),
        (3, 3, 0, 0)
    );
    // The partition's counters balance on their own too.
    let mut ps = memq_partition_stats::default();
    // SAFETY: live topic, valid out-pointer.
    unsafe { assert_eq!(memq_topic_get_partition_stats(t, 0, &mut ps), OK) };
    assert_eq!(
        (ps.published, ps.released, ps.depth, ps.evicted, ps.expired),
        (3, 3, 0, 0, 0)
    );
    // Freed before it was handed "c": "c" goes back to the log, for the next reader.
    // SAFETY: live subscriber, freed once.
    unsafe { memq_subscriber_free(s) };
    let late = subscribe(t, memq_start::Earliest);
    assert_eq!(recv(late, 0).unwrap(), b"c");
    assert_eq!(recv(late, 0), Err(memq_status::Empty));
    // SAFETY: live topic, valid out-pointer.
    unsafe { assert_eq!(memq_topic_get_stats(t, &mut st), OK) };
    assert_eq!((st.released, st.depth, st.delivered), (3, 0, 3));
    // SAFETY: live handles, freed once.
    unsafe {
        memq_subscriber_free(late);
        memq_topic_free(t);
    }
}

#[test]
fn groups_share_work_and_resume() {
    let t = topic(64);
    let a = member(t, "workers");
    let b = member(t, "workers");
    for i in 0..20u8 {
        publish(t, &[i]);
    }
    let mut seen = Vec::new();
    for _ in 0..10 {
        seen.extend(consume(a, 0).unwrap());
        seen.extend(consume(b, 0).unwrap());
    }
    seen.sort_unstable();
    assert_eq!(
        seen,
        (0..20).collect::<Vec<u8>>(),
        "each message to exactly one member"
    );
    assert_eq!(consume(a, 0), Err(memq_status::Empty));
    let mut gs = memq_group_stats::default();
    let mut committed = 0;
    // SAFETY: live handles, NUL-terminated names, valid out-pointers.
    unsafe {
        assert_eq!(
            memq_topic_get_group_stats(t, c"workers".as_ptr(), &mut gs),
            OK
        );
        assert_eq!((gs.members, gs.lag, gs.delivered), (2, 0, 20));
        assert_eq!(memq_consumer_committed(a, 0, &mut committed), OK);
        assert_eq!(committed, 20);
        memq_consumer_free(a);
        memq_consumer_free(b);
    }
    // The group outlives its members: a new one resumes where it left off.
    publish(t, b"next");
    let c = member(t, "workers");
    assert_eq!(consume(c, 0), Ok(b"next".to_vec()));
    // SAFETY: live handles, freed once.
    unsafe {
        memq_consumer_free(c);
        memq_topic_free(t);
    }
}

/// Issue 32: a member's `recv_into` with a buffer too small for the next message takes
/// nothing from the group, so freeing the member then loses nothing: another member gets
/// the message, exactly once. The same on a partitioned topic, where it goes to the
/// partition's next owner, and with a timeout.
#[test]
fn a_too_small_recv_into_leaves_the_message_in_the_group() {
    for (partitions, timeout_ms) in [(1, 0), (1, 50), (1, -1), (2, 0), (2, 50)] {
        let t = topic_with(&config(8, partitions, memq_overflow::Block));
        let a = member(t, "g");
        let b = member(t, "g");
        // `a` owns partition 0 (and, alone on a one-partition topic, competes for it).
        let mut r = memq_receipt::default();
        // SAFETY: live topic, valid payload and out-pointer.
        unsafe {
            assert_eq!(
                memq_topic_publish_to(t, 0, b"twelve bytes".as_ptr(), 12, 0, &mut r),
                OK
            );
        }
        let mut buf = [0u8; 4];
        let mut len = 0;
        let mut meta = memq_message_meta::default();
        let mut committed = u64::MAX;
        let mut before = memq_group_stats::default();
        let mut after = memq_group_stats::default();
        // SAFETY: live handles; `buf` of `buf.len()` bytes; valid out-pointers.
        unsafe {
            assert_eq!(
                memq_topic_get_group_stats(t, c"g".as_ptr(), &mut before),
                OK
            );
            assert_eq!(
                memq_consumer_recv_into(
                    a,
                    timeout_ms,
                    buf.as_mut_ptr(),
                    buf.len(),
                    &mut len,
                    &mut meta,
                    null_mut(),
                ),
                memq_status::BufferTooSmall,
                "{partitions} partitions, timeout {timeout_ms}"
            );
            assert_eq!(len, 12, "the length needed");
            assert_eq!(
                meta,
                memq_message_meta::default(),
                "meta written on failure"
            );
            assert_eq!(buf, [0; 4], "buffer written on failure");
            // Not taken: the group's position and counts are as they were.
            assert_eq!(memq_consumer_committed(a, 0, &mut committed), OK);
            assert_eq!(committed, 0);
            assert_eq!(memq_topic_get_group_stats(t, c"g".as_ptr(), &mut after), OK);
            assert_eq!((after.delivered, after.lag), (before.delivered, before.lag));
            assert_eq!((after.delivered, after.lag), (0, 1));
            memq_consumer_free(a);
        }
        // The other member gets it, once.
        assert_eq!(consume(b, 0), Ok(b"twelve bytes".to_vec()));
        assert_eq!(consume(b, 0), Err(memq_status::Empty));
        // SAFETY: live handles, valid out-pointer; each freed once.
        unsafe {
            assert_eq!(memq_topic_get_group_stats(t, c"g".as_ptr(), &mut after), OK);
            assert_eq!((after.delivered, after.lag), (1, 0));
            memq_consumer_free(b);
            memq_topic_free(t);
        }
    }
}

/// After a too-small `recv_into`, the same member's next receive of any kind gets the
/// message it could not take (nothing else overtakes it), and a large enough buffer
/// receives it.
#[test]
fn a_too_small_recv_into_is_followed_by_the_same_message() {
    let t = topic(8);
    let a = member(t, "g");
    publish(t, b"first message");
    publish(t, b"2nd");
    let mut small = [0u8; 4];
    let mut big = [0u8; 64];
    let mut len = 0;
    // SAFETY: a live handle; buffers of the lengths given; valid out-pointers.
    unsafe {
        for _ in 0..2 {
            assert_eq!(
                memq_consumer_recv_into(
                    a,
                    0,
                    small.as_mut_ptr(),
                    small.len(),
                    &mut len,
                    null_mut(),
                    null_mut(),
                ),
                memq_status::BufferTooSmall
            );
            assert_eq!(len, 13);
        }
        assert_eq!(
            memq_consumer_recv_into(
                a,
                0,
                big.as_mut_ptr(),
                big.len(),
                &mut len,
                null_mut(),
                null_mut()
            ),
            OK
        );
        assert_eq!(&big[..len], b"first message");
    }
    assert_eq!(consume(a, 0), Ok(b"2nd".to_vec()));
    // SAFETY: live handles, each freed once.
    unsafe {
        memq_consumer_free(a);
        memq_topic_free(t);
    }
}

#[test]
fn keyed_and_partitioned_publishing() {
    let t = topic_with(&config(32, 4, memq_overflow::Block));
    for key in [&b"user-1"[..], b"user-2", b"", b"a much longer key"] {
        let mut want = 99;
        let mut r = memq_receipt::default();
        // SAFETY: live topic, readable key and data, valid out-pointers.
        unsafe {
            assert_eq!(
                memq_key_partition(key.as_ptr(), key.len(), 4, &mut want),
                OK
            );
            assert_eq!(want, memq_core::key_partition(key, 4));
            for _ in 0..2 {
                let st = memq_topic_publish_keyed(
                    t,
                    key.as_ptr(),
                    key.len(),
                    b"v".as_ptr(),
                    1,
                    0,
                    &mut r,
                );
                assert_eq!(st, OK);
                assert_eq!(r.partition, want, "a key always lands on its partition");
            }
        }
    }
    // The empty key may be given as NULL.
    let mut r = memq_receipt::default();
    // SAFETY: live topic, NULL key of length 0, valid data and out-pointer.
    unsafe {
        assert_eq!(
            memq_topic_publish_keyed(t, null(), 0, b"v".as_ptr(), 1, 0, &mut r),
            OK
        );
        assert_eq!(r.partition, memq_core::key_partition(b"", 4));
        assert_eq!(
            memq_topic_publish_to(t, 3, b"p3".as_ptr(), 2, 0, &mut r),
            OK
        );
        assert_eq!(r.partition, 3);
    }
    let s = {
        let mut s = null_mut();
        // SAFETY: live topic, valid out-pointer.
        let st = unsafe { memq_subscriber_new_partition(t, 3, 0, 0, &mut s) };
        assert_eq!(st, OK);
        s
    };
    let mut ps = memq_partition_stats::default();
    let mut ts = memq_topic_stats::default();
    // SAFETY: live handles, valid out-pointers.
    unsafe {
        assert_eq!(memq_topic_get_partition_stats(t, 3, &mut ps), OK);
        assert_eq!(memq_topic_get_stats(t, &mut ts), OK);
    }
    assert_eq!(ts.published, 10);
    assert_eq!((ts.partitions, ts.capacity), (4, 32));
    let mut got = 0;
    while recv(s, 0).is_ok() {
        got += 1;
    }
    assert_eq!(got, ps.published, "the subscriber reads its partition only");
    // SAFETY: live handles, freed once.
    unsafe {
        memq_subscriber_free(s);
        memq_topic_free(t);
    }
}

#[test]
fn keyed_batches_land_whole_on_the_keys_partition() {
    let t = topic_with(&config(8, 4, memq_overflow::Block));
    let key = b"order-17";
    let want = memq_core::key_partition(key, 4);
    // A reader on the key's partition, so that it fills up (`Block`).
    let s = {
        let mut s = null_mut();
        // SAFETY: live topic, valid out-pointer.
        let st = unsafe { memq_subscriber_new_partition(t, want, 0, 0, &mut s) };
        assert_eq!(st, OK);
        s
    };
    let payloads: [&[u8]; 3] = [b"placed", b"paid", b"shipped"];
    let items = slices(&payloads);
    let mut r = memq_receipt::default();
    // SAFETY: live topic, readable key and items, valid receipt.
    unsafe {
        for round in 0..2u64 {
            let st = memq_topic_publish_batch_keyed(
                t,
                key.as_ptr(),
                key.len(),
                items.as_ptr(),
                3,
                0,
                &mut r,
            );
            assert_eq!(st, OK);
            assert_eq!((r.partition, r.offset), (want, 3 * round));
        }
        // Two more do not fit in the key's partition (capacity 8): all or nothing.
        assert_eq!(
            memq_topic_publish_batch_keyed(
                t,
                key.as_ptr(),
                key.len(),
                items.as_ptr(),
                3,
                0,
                &mut r
            ),
            memq_status::Full
        );
        // More than the capacity could never fit (`Full`, as in Rust); a NULL key needs
        // length 0.
        let many = [items[0]; 9];
        assert_eq!(
            memq_topic_publish_batch_keyed(t, key.as_ptr(), key.len(), many.as_ptr(), 9, 0, &mut r),
            memq_status::Full
        );
        assert_eq!(
            memq_topic_publish_batch_keyed(t, null(), 1, items.as_ptr(), 1, 0, &mut r),
            memq_status::NullPointer
        );
        assert_eq!(
            memq_topic_publish_batch_keyed(t, null(), 0, items.as_ptr(), 1, 0, &mut r),
            OK
        );
        assert_eq!(r.partition, memq_core::key_partition(b"", 4));
        assert_ne!(r.partition, want, "the test needs the empty key elsewhere");
    }
    let mut got = Vec::new();
    while let Ok(m) = recv(s, 0) {
        got.push(m);
    }
    let want_payloads: Vec<Vec<u8>> = payloads
        .iter()
        .chain(&payloads)
        .map(|p| p.to_vec())
        .collect();
    assert_eq!(got, want_payloads, "in order, in the key's partition only");
    // SAFETY: live handles, freed once.
    unsafe {
        memq_subscriber_free(s);
        memq_topic_free(t);
    }
}

#[test]
fn batches_in_and_out() {
    let t = topic(64);
    let s = subscribe(t, memq_start::Earliest);
    let payloads: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; usize::from(i) + 1]).collect();
    let items = slices(&payloads);
    let mut r = memq_receipt::default();
    // SAFETY: live topic, `items` of readable payloads, valid receipt.
    unsafe {
        assert_eq!(
            memq_topic_publish_batch(t, items.as_ptr(), 25, -1, &mut r),
            OK
        );
        assert_eq!(r.offset, 0);
        assert_eq!(
            memq_topic_publish_batch_to(t, 0, items[25..].as_ptr(), 15, 100, &mut r),
            OK
        );
        assert_eq!(
            r.offset, 25,
            "contiguous offsets; the receipt is the first one's"
        );
    }
    let mut got = Vec::new();
    let mut msgs = [null_mut(); 16];
    while got.len() < 40 {
        let mut n = 0;
        // SAFETY: live subscriber, array of 16, valid out-pointers.
        let st =
            unsafe { memq_subscriber_recv_many(s, 0, msgs.as_mut_ptr(), 16, &mut n, null_mut()) };
        assert_eq!(st, OK);
        assert!((1..=16).contains(&n));
        for m in &msgs[..n] {
            let (data, meta) = take(*m);
            assert_eq!(meta.offset as usize, got.len());
            got.push(data);
        }
    }
    assert_eq!(got, payloads);
    // SAFETY: live handles; `memq_message_free_many` on an array of handles.
    unsafe {
        publish(t, b"one");
        publish(t, b"two");
        let mut n = 0;
        assert_eq!(
            memq_subscriber_recv_many(s, -1, msgs.as_mut_ptr(), 16, &mut n, null_mut()),
            OK
        );
        assert_eq!(n, 2);
        memq_message_free_many(msgs.as_mut_ptr(), n);
        assert!(msgs[..n].iter().all(|m| m.is_null()));
        memq_subscriber_free(s);
        memq_topic_free(t);
    }
}

#[test]
fn drop_oldest_reports_the_lag() {
    let t = topic_with(&config(4, 1, memq_overflow::DropOldest));
    let s = subscribe(t, memq_start::Earliest);
    for i in 0..10u8 {
        publish(t, &[i]);
    }
    let mut m = null_mut();
    let mut lagged = 0;
    // SAFETY: live handles, valid out-pointers.
    unsafe {
        assert_eq!(
            memq_subscriber_recv(s, 0, &mut m, &mut lagged),
            memq_status::Lagged
        );
        assert!(m.is_null());
        assert_eq!(lagged, 6);
        let mut st = memq_topic_stats::default();
        assert_eq!(memq_topic_get_stats(t, &mut st), OK);
        assert_eq!((st.evicted, st.depth), (6, 4));
    }
    for i in 6..10u8 {
        assert_eq!(recv(s, 0), Ok(vec![i]));
    }
    // The lag count is optional, and batch receives report it too.
    for i in 0..6u8 {
        publish(t, &[i]);
    }
    let mut msgs = [null_mut(); 8];
    let mut n = 0;
    lagged = 0;
    // SAFETY: live handles, array of 8, valid out-pointers.
    unsafe {
        let st = memq_subscriber_recv_many(s, 0, msgs.as_mut_ptr(), 8, &mut n, &mut lagged);
        assert_eq!((st, lagged), (memq_status::Lagged, 2));
        assert_eq!(
            memq_subscriber_recv_many(s, 0, msgs.as_mut_ptr(), 8, &mut n, null_mut()),
            OK
        );
        assert_eq!(n, 4);
        memq_message_free_many(msgs.as_mut_ptr(), n);
        memq_subscriber_free(s);
        memq_topic_free(t);
    }
}

#[test]
fn reject_is_full_at_once() {
    let t = topic_with(&config(2, 1, memq_overflow::Reject));
    let s = subscribe(t, memq_start::Earliest);
    publish(t, b"1");
    publish(t, b"2");
    let mut r = memq_receipt::default();
    // SAFETY: live topic, valid data and receipt.
    unsafe {
        // Even with a wait, a REJECT topic does not wait.
        assert_eq!(
            memq_topic_publish(t, b"3".as_ptr(), 1, -1, &mut r),
            memq_status::Full
        );
    }
    assert_eq!(recv(s, 0), Ok(b"1".to_vec()));
    publish(t, b"3");
    // SAFETY: live handles, freed once.
    unsafe {
        memq_subscriber_free(s);
        memq_topic_free(t);
    }
}

/// "new" must still be live when it is read, within its 20 ms TTL: a run where this
/// thread was descheduled longer (measured) shows nothing, and is made again.
#[test]
fn ttl_expires_messages() {
    let ttl = std::time::Duration::from_millis(20);
    for _ in 0..100 {
        let mut c = config(8, 1, memq_overflow::Block);
        c.ttl_ms = 20;
        let t = topic_with(&c);
        let s = subscribe(t, memq_start::Earliest);
        publish(t, b"old");
        thread::sleep(std::time::Duration::from_millis(60));
        let before_new = std::time::Instant::now();
        publish(t, b"new");
        let mut m = null_mut();
        let mut lagged = 0;
        // SAFETY: live handles, valid out-pointers.
        let first = unsafe { memq_subscriber_recv(s, 0, &mut m, &mut lagged) };
        let new = recv(s, 0);
        let mut st = memq_topic_stats::default();
        // SAFETY: live topic, valid out-pointer.
        assert_eq!(unsafe { memq_topic_get_stats(t, &mut st) }, OK);
        let in_time = before_new.elapsed() < ttl;
        // SAFETY: live handles, each freed once.
        unsafe {
            memq_subscriber_free(s);
            memq_topic_free(t);
        }
        if in_time {
            assert_eq!((first, lagged), (memq_status::Lagged, 1));
            assert_eq!(new, Ok(b"new".to_vec()));
            assert_eq!(st.expired, 1);
            return;
        }
    }
    panic!("in 100 runs this thread never read a message within its 20 ms TTL");
}

#[test]
fn blocking_publish_and_receive_across_threads() {
    publish_and_receive_across_threads(0);
}

/// The same on the lock-free ring engine (`MEMQ_TOPIC_RING_ENGINE`): every message to the
/// subscriber in order and to the group once, through parked publishers and readers.
#[test]
fn blocking_publish_and_receive_across_threads_on_the_ring_engine() {
    publish_and_receive_across_threads(MEMQ_TOPIC_RING_ENGINE);
}

/// `MEMQ_TOPIC_RING_ENGINE` with a setting the ring cannot keep is not an error: the topic
/// stays on the locked log and keeps the setting.
#[test]
fn the_ring_engine_flag_beside_release_on_read_keeps_the_release() {
    let mut c = config(8, 1, memq_overflow::Block);
    c.flags = MEMQ_TOPIC_RING_ENGINE | MEMQ_TOPIC_RELEASE_ON_READ;
    let t = topic_with(&c);
    assert!(!on_ring(t));
    let s = subscribe(t, memq_start::Earliest);
    publish(t, b"a");
    assert_eq!(recv(s, 0).unwrap(), b"a");
    let mut st = memq_topic_stats::default();
    // SAFETY: live topic, valid out-pointer; handles freed once.
    unsafe {
        assert_eq!(memq_topic_get_stats(t, &mut st), OK);
        assert_eq!((st.published, st.released), (1, 1));
        memq_subscriber_free(s);
        memq_topic_free(t);
    }
}

/// Whether `t` runs on the ring engine (`memq_topic_is_on_ring`).
fn on_ring(t: *const memq_topic) -> bool {
    let mut ring = false;
    // SAFETY: live topic, valid out-pointer.
    assert_eq!(unsafe { memq_topic_is_on_ring(t, &mut ring) }, OK);
    ring
}

fn publish_and_receive_across_threads(flags: u32) {
    const N: u32 = 20_000;
    let mut c = config(8, 1, memq_overflow::Block);
    c.flags = flags;
    let t = topic_with(&c);
    assert_eq!(on_ring(t), flags & MEMQ_TOPIC_RING_ENGINE != 0);
    let s = subscribe(t, memq_start::Earliest) as usize;
    let c = member(t, "g") as usize;
    let tp = t as usize;
    let producer = thread::spawn(move || {
        for i in 0..N {
            let v = i.to_le_bytes();
            let mut r = memq_receipt::default();
            // SAFETY: the topic outlives this thread (joined before it is freed).
            let st =
                unsafe { memq_topic_publish(tp as *const memq_topic, v.as_ptr(), 4, -1, &mut r) };
            assert_eq!(st, OK);
            assert_eq!(r.offset, u64::from(i));
        }
    });
    let group = thread::spawn(move || {
        let mut seen = HashSet::new();
        for _ in 0..N {
            let v = consume(c as *const memq_consumer, -1).unwrap();
            assert!(seen.insert(u32::from_le_bytes(v.try_into().unwrap())));
        }
        seen.len()
    });
    for i in 0..N {
        let v = recv(s as *const memq_subscriber, 1000).unwrap();
        assert_eq!(
            u32::from_le_bytes(v.try_into().unwrap()),
            i,
            "in order, none lost"
        );
    }
    producer.join().unwrap();
    assert_eq!(group.join().unwrap(), N as usize);
    // SAFETY: live handles, no other thread uses them any more; freed once.
    unsafe {
        memq_subscriber_free(s as *mut memq_subscriber);
        memq_consumer_free(c as *mut memq_consumer);
        memq_topic_free(t);
    }
}

/// Publishers waiting for room on partition 0 of `t`.
fn waiting_publishers(t: *const memq_topic) -> usize {
    let mut st = memq_topic_stats::default();
    // SAFETY: a live topic, a valid out-pointer.
    assert_eq!(unsafe { memq_topic_get_stats(t, &mut st) }, OK);
    st.waiting_publishers
}

/// A full topic of 64 slots and a publish of 64 waiting on it for 300 ms while a reader
/// frees one slot (too few to wake it): the publish takes it at its deadline. Returns the
/// topic and the reader, which has read message 0.
///
/// Whether the slot was freed while the publish waited is seen, not assumed: the reader
/// frees it once the publish is in line and looks again after; a publish still in line
/// then makes its last try after the free. A run where the reader got there only after the
/// publish had given up (a descheduled thread) shows nothing, and is made again.
fn a_timed_publish_takes_a_slot_freed_while_it_waits() -> (*mut memq_topic, *mut memq_subscriber) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    for _ in 0..100 {
        let t = topic(64);
        let s = subscribe(t, memq_start::Earliest);
        for i in 0..64u8 {
            publish(t, &[i]);
        }
        let gave_up = Arc::new(AtomicBool::new(false));
        let (tp, sp) = (t as usize, s as usize);
        let reader = {
            let gave_up = gave_up.clone();
            thread::spawn(move || {
                let t = tp as *const memq_topic;
                while waiting_publishers(t) == 0 {
                    if gave_up.load(Ordering::SeqCst) {
                        return (None, false);
                    }
                    thread::sleep(std::time::Duration::from_millis(1));
                }
                let got = recv(sp as *const memq_subscriber, 0).unwrap();
                (Some(got), waiting_publishers(t) > 0)
            })
        };
        let mut r = memq_receipt::default();
        // SAFETY: live topic, readable payload, valid receipt.
        let st = unsafe { memq_topic_publish(t, [64u8].as_ptr(), 1, 300, &mut r) };
        gave_up.store(true, Ordering::SeqCst);
        let (got, freed_while_in_line) = reader.join().unwrap();
        if st == OK {
            assert_eq!((r.offset, got), (64, Some(vec![0])));
            return (t, s);
        }
        assert!(
            !freed_while_in_line,
            "a slot freed while the publish waited was not taken: {st:?}"
        );
        // SAFETY: live handles, each freed once; the reader has ended.
        unsafe {
            memq_subscriber_free(s);
            memq_topic_free(t);
        }
    }
    panic!("in 100 runs the reader never freed the slot before the publish gave up");
}

/// A full `BLOCK` topic of 64 slots wakes a waiting publisher only once 4 slots are free;
/// a publish with a time limit still takes, at its deadline, the one slot a reader freed
/// and then left, and times out only when no slot is free.
#[test]
fn a_timed_publish_takes_a_slot_freed_too_few_to_wake_it() {
    let (t, s) = a_timed_publish_takes_a_slot_freed_while_it_waits();
    let publish_within = |payload: &[u8], timeout_ms: i64| {
        let mut r = memq_receipt::default();
        // SAFETY: live topic, readable payload, valid receipt.
        let st =
            unsafe { memq_topic_publish(t, payload.as_ptr(), payload.len(), timeout_ms, &mut r) };
        (st, r.offset)
    };
    assert_eq!(publish_within(&[65], 20).0, memq_status::Timeout);
    assert_eq!(publish_within(&[65], 0).0, memq_status::Full);
    // Batches, keyed and to a partition, alike.
    assert_eq!(recv(s, 0).unwrap(), [1]);
    assert_eq!(recv(s, 0).unwrap(), [2]);
    let items = slices(&[[65u8], [66u8]]);
    let mut r = memq_receipt::default();
    // SAFETY: live topic, two readable items, valid receipt.
    let st = unsafe { memq_topic_publish_batch(t, items.as_ptr(), 2, 20, &mut r) };
    assert_eq!((st, r.offset), (OK, 65));
    assert_eq!(recv(s, 0).unwrap(), [3]);
    // SAFETY: live topic, readable key and payload, valid receipt.
    let st =
        unsafe { memq_topic_publish_keyed(t, b"k".as_ptr(), 1, [67u8].as_ptr(), 1, 20, &mut r) };
    assert_eq!((st, r.offset), (OK, 67));
    assert_eq!(recv(s, 0).unwrap(), [4]);
    // SAFETY: live topic, readable payload, valid receipt.
    let st = unsafe { memq_topic_publish_to(t, 0, [68u8].as_ptr(), 1, 20, &mut r) };
    assert_eq!((st, r.offset), (OK, 68));
    // Nothing lost or twice.
    for i in 5..=68u8 {
        assert_eq!(recv(s, 0).unwrap(), [i]);
    }
    // SAFETY: live handles, freed once.
    unsafe {
        memq_subscriber_free(s);
        memq_topic_free(t);
    }
}

#[test]
fn a_shared_subscriber_serialises_instead_of_racing() {
    const N: usize = 4_000;
    let t = topic(N);
    let s = subscribe(t, memq_start::Earliest) as usize;
    for i in 0..N {
        publish(t, &(i as u32).to_le_bytes());
    }
    let readers: Vec<_> = (0..2)
        .map(|_| {
            thread::spawn(move || {
                let mut got = Vec::new();
                while let Ok(v) = recv(s as *const memq_subscriber, 0) {
                    got.push(u32::from_le_bytes(v.try_into().unwrap()));
                }
                got
            })
        })
        .collect();
    let mut all: Vec<u32> = readers
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort_unstable();
    assert_eq!(all, (0..N as u32).collect::<Vec<_>>());
    // SAFETY: live handles, no other thread uses them any more; freed once.
    unsafe {
        memq_subscriber_free(s as *mut memq_subscriber);
        memq_topic_free(t);
    }
}

#[test]
fn closing_wakes_blocked_calls() {
    let t = topic(1);
    let s = subscribe(t, memq_start::Latest) as usize;
    let c = member(t, "g") as usize;
    let tp = t as usize;
    let reader = thread::spawn(move || recv(s as *const memq_subscriber, -1));
    let publisher = thread::spawn(move || {
        let t = tp as *const memq_topic;
        let mut r = memq_receipt::default();
        // SAFETY: the topic outlives this thread.
        unsafe {
            // The subscriber reads it; the group does not, so the next publish blocks.
            assert_eq!(memq_topic_publish(t, b"a".as_ptr(), 1, -1, &mut r), OK);
            memq_topic_publish(t, b"b".as_ptr(), 1, -1, &mut r)
        }
    });
    // The publisher has published "a" and waits to publish "b": seen, not slept for.
    while waiting_publishers(t) == 0 {
        thread::sleep(std::time::Duration::from_millis(1));
    }
    // SAFETY: live topic.
    assert_eq!(unsafe { memq_topic_close(t) }, OK);
    assert_eq!(publisher.join().unwrap(), memq_status::Closed);
    assert_eq!(reader.join().unwrap(), Ok(b"a".to_vec()));
    // The group drains what is retained, then sees the close too.
    assert_eq!(consume(c as *const memq_consumer, -1), Ok(b"a".to_vec()));
    assert_eq!(
        consume(c as *const memq_consumer, -1),
        Err(memq_status::Closed)
    );
    assert_eq!(
        recv(s as *const memq_subscriber, -1),
        Err(memq_status::Closed)
    );
    // SAFETY: no other thread uses the handles any more; freed once.
    unsafe {
        memq_subscriber_free(s as *mut memq_subscriber);
        memq_consumer_free(c as *mut memq_consumer);
        memq_topic_free(t);
    }
}

#[test]
fn the_last_handle_closes_the_topic() {
    let t = topic(4);
    let mut t2 = null_mut();
    // SAFETY: live topic, valid out-pointer.
    assert_eq!(unsafe { memq_topic_clone(t, &mut t2) }, OK);
    let s = subscribe(t, memq_start::Earliest);
    publish(t2, b"x");
    // SAFETY: each handle freed once.
    unsafe { memq_topic_free(t) };
    assert_eq!(recv(s, 0), Ok(b"x".to_vec()));
    assert_eq!(
        recv(s, 0),
        Err(memq_status::Empty),
        "a handle is left: still open"
    );
    // SAFETY: as above.
    unsafe { memq_topic_free(t2) };
    assert_eq!(recv(s, -1), Err(memq_status::Closed));
    // SAFETY: as above.
    unsafe { memq_subscriber_free(s) };
}

#[test]
fn broker_topics_by_name() {
    let mut b = null_mut();
    let c = config(8, 2, memq_overflow::DropOldest);
    let (mut created, mut found) = (null_mut(), null_mut());
    // SAFETY: live broker, NUL-terminated names, valid configs and out-pointers.
    unsafe {
        assert_eq!(memq_broker_new(&mut b), OK);
        assert_eq!(
            memq_broker_create_topic(b, c"orders".as_ptr(), &c, &mut created),
            OK
        );
        assert_eq!(memq_broker_get_topic(b, c"orders".as_ptr(), &mut found), OK);
        let s = subscribe(found, memq_start::Earliest);
        publish(created, b"o-1");
        assert_eq!(recv(s, 0), Ok(b"o-1".to_vec()));
        let mut st = memq_topic_stats::default();
        assert_eq!(memq_topic_get_stats(found, &mut st), OK);
        assert_eq!(
            (st.capacity, st.partitions, st.overflow),
            (8, 2, memq_overflow::DropOldest as u32)
        );
        assert_eq!(st.subscribers, 1);
        // Freeing handles leaves the topic registered and open.
        memq_topic_free(created);
        memq_topic_free(found);
        let mut n = 0;
        assert_eq!(memq_broker_topic_count(b, &mut n), OK);
        assert_eq!(n, 1);
        assert_eq!(recv(s, 0), Err(memq_status::Empty));
        // Deleting closes it.
        assert_eq!(memq_broker_delete_topic(b, c"orders".as_ptr()), OK);
        assert_eq!(recv(s, 0), Err(memq_status::Closed));
        assert_eq!(memq_broker_topic_count(b, &mut n), OK);
        assert_eq!(n, 0);
        memq_subscriber_free(s);
        memq_broker_free(b);
    }
}

/// Handles a thread-local destructor uses at thread exit (as addresses: handles may be
/// used from any thread).
struct FlushOnExit {
    topic: usize,
    sub: usize,
    out: std::sync::mpsc::Sender<(memq_status, memq_status)>,
}

impl Drop for FlushOnExit {
    fn drop(&mut self) {
        let t = self.topic as *const memq_topic;
        // SAFETY: live handles (freed by the test after this thread is joined).
        let published =
            unsafe { memq_topic_publish(t, b"c".as_ptr(), 1, 100, std::ptr::null_mut()) };
        let received = recv(self.sub as *const memq_subscriber, 100).map(drop);
        let _ = self.out.send((published, received.err().unwrap_or(OK)));
    }
}

std::thread_local! {
    static FLUSH: std::cell::RefCell<Option<FlushOnExit>> = const { std::cell::RefCell::new(None) };
}

#[test]
fn a_blocking_call_from_a_thread_exit_destructor_works() {
    // From review: once a thread had made one blocking call, a call with a timeout from a
    // destructor that ran after memq's thread-local was gone returned PANIC (and printed
    // one), as C code flushing from a pthread key destructor would see.
    let t = topic_with(&config(8, 1, memq_overflow::Block));
    let s = subscribe(t, memq_start::Earliest);
    let (tx, rx) = std::sync::mpsc::channel();
    let (ta, sa) = (t as usize, s as usize);
    std::thread::spawn(move || {
        FLUSH.with(|f| {
            *f.borrow_mut() = Some(FlushOnExit {
                topic: ta,
                sub: sa,
                out: tx,
            })
        });
        // SAFETY: a live topic handle.
        let st = unsafe {
            memq_topic_publish(
                ta as *const memq_topic,
                b"a".as_ptr(),
                1,
                100,
                std::ptr::null_mut(),
            )
        };
        assert_eq!(st, OK);
    })
    .join()
    .unwrap();
    assert_eq!(rx.recv().unwrap(), (OK, OK));
    // SAFETY: live handles, each freed once.
    unsafe {
        memq_subscriber_free(s);
        memq_topic_free(t);
    }
}

/// What readers missed is counted in the stats: per topic, partition and group.
#[test]
fn missed_messages_are_counted_as_lagged() {
    let t = topic_with(&config(2, 1, memq_overflow::DropOldest));
    let s = subscribe(t, memq_start::Earliest);
    let c = member(t, "g");
    for i in 0..5u8 {
        publish(t, &[i]);
    }
    let mut m = std::ptr::null_mut();
    let mut lagged = 0;
    // SAFETY: live handles and valid out-pointers; every handle freed once.
    unsafe {
        assert_eq!(
            memq_subscriber_recv(s, 0, &mut m, &mut lagged),
            memq_status::Lagged
        );
        assert_eq!(lagged, 3);
        assert_eq!(
            memq_consumer_recv(c, 0, &mut m, &mut lagged),
            memq_status::Lagged
        );
        assert_eq!(lagged, 3);
        let mut ts = memq_topic_stats::default();
        assert_eq!(memq_topic_get_stats(t, &mut ts), OK);
        assert_eq!(ts.lagged, 6, "two readers that each missed 3");
        let mut ps = memq_partition_stats::default();
        assert_eq!(memq_topic_get_partition_stats(t, 0, &mut ps), OK);
        assert_eq!(ps.lagged, 6);
        let mut gs = memq_group_stats::default();
        assert_eq!(memq_topic_get_group_stats(t, c"g".as_ptr(), &mut gs), OK);
        assert_eq!(gs.lagged, 3);
        assert_eq!(
            memq_topic_get_group_stats(t, c"nope".as_ptr(), &mut gs),
            memq_status::UnknownGroup
        );
        let detail = std::ffi::CStr::from_ptr(memq_last_error_message());
        assert_eq!(detail.to_str().unwrap(), "unknown group \"nope\"");
        memq_subscriber_free(s);
        memq_consumer_free(c);
        memq_topic_free(t);
    }
}
