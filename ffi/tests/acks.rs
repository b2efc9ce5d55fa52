//! Explicit-ack groups through the C ABI: single and batch receives, ack, nack (with and
//! without a delay), lease expiry, touch, reject, deliveries freed unsettled,
//! max_deliveries and the dead-letter topic with each letter's origin, max_in_flight,
//! competing workers, and bad input (NULL handles, settling twice, the two group modes).

mod common;

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::ptr::{null, null_mut};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use memq::*;

/// A value no call may write on failure.
const SENTINEL: usize = 0xDEAD_BEEF;

fn ack_config() -> memq_ack_config {
    // Anything but the defaults, to see that init writes every field.
    let mut c = memq_ack_config {
        ack_wait_ms: 1,
        max_deliveries: 9,
        backoff: 9,
        backoff_initial_ms: 9,
        backoff_max_ms: 9,
        max_in_flight: 9,
        dead_letter: SENTINEL as *const memq_dead_letter_topic,
    };
    // SAFETY: `c` is a valid, writable config.
    assert_eq!(unsafe { memq_ack_config_init(&mut c) }, OK);
    c
}

fn try_ack_member(
    t: *const memq_topic,
    group: &str,
    c: &memq_ack_config,
) -> Result<*mut memq_ack_consumer, memq_status> {
    let group = CString::new(group).unwrap();
    let mut out = SENTINEL as *mut memq_ack_consumer;
    // SAFETY: live topic, NUL-terminated name, valid config and out-pointer.
    let st = unsafe {
        memq_ack_consumer_new(
            t,
            group.as_ptr(),
            memq_start::Earliest as u32,
            0,
            c,
            &mut out,
        )
    };
    if st == OK {
        assert!(!out.is_null());
        Ok(out)
    } else {
        assert_eq!(out as usize, SENTINEL, "out-parameter written on {st:?}");
        Err(st)
    }
}

fn ack_member(t: *const memq_topic, group: &str, c: &memq_ack_config) -> *mut memq_ack_consumer {
    try_ack_member(t, group, c).expect("memq_ack_consumer_new")
}

/// A received delivery, its handle still to be freed.
struct Got {
    d: *mut memq_delivery,
    payload: Vec<u8>,
    offset: u64,
    partition: u32,
    deliveries: u32,
}

fn delivery(c: *const memq_ack_consumer, timeout_ms: i64) -> Result<Got, memq_status> {
    let mut d = SENTINEL as *mut memq_delivery;
    // SAFETY: live consumer, valid out-pointer.
    let st = unsafe { memq_ack_consumer_recv(c, timeout_ms, &mut d, null_mut()) };
    if st != OK {
        assert_eq!(d as usize, SENTINEL, "out-parameter written on {st:?}");
        return Err(st);
    }
    Ok(read(d))
}

fn read(d: *mut memq_delivery) -> Got {
    let mut data = null();
    let mut len = SENTINEL;
    let mut meta = memq_message_meta::default();
    let (mut offset, mut partition, mut deliveries) = (u64::MAX, u32::MAX, u32::MAX);
    // SAFETY: `d` is a live delivery; out-pointers are valid.
    unsafe {
        assert_eq!(memq_delivery_data(d, &mut data), OK);
        assert_eq!(memq_delivery_len(d, &mut len), OK);
        assert_eq!(memq_delivery_offset(d, &mut offset), OK);
        assert_eq!(memq_delivery_partition(d, &mut partition), OK);
        assert_eq!(memq_delivery_deliveries(d, &mut deliveries), OK);
        assert_eq!(memq_delivery_get_meta(d, &mut meta), OK);
        assert_eq!(
            (meta.offset, meta.partition, meta.len),
            (offset, partition, len)
        );
        let payload = if len == 0 {
            Vec::new()
        } else {
            std::slice::from_raw_parts(data, len).to_vec()
        };
        Got {
            d,
            payload,
            offset,
            partition,
            deliveries,
        }
    }
}

fn free(g: Got) {
    // SAFETY: a live delivery, freed once.
    unsafe { memq_delivery_free(g.d) };
}

fn ack(g: &Got) -> memq_status {
    // SAFETY: a live delivery.
    unsafe { memq_delivery_ack(g.d) }
}

fn nack(g: &Got) -> memq_status {
    // SAFETY: a live delivery.
    unsafe { memq_delivery_nack(g.d) }
}

fn ack_stats(t: *const memq_topic, group: &str) -> memq_ack_group_stats {
    let group = CString::new(group).unwrap();
    let mut s = memq_ack_group_stats::default();
    // SAFETY: live topic, NUL-terminated name, valid out-pointer.
    let st = unsafe { memq_topic_get_ack_group_stats(t, group.as_ptr(), &mut s) };
    assert_eq!(st, OK);
    s
}

fn pending(c: *const memq_ack_consumer) -> usize {
    let mut n = SENTINEL;
    // SAFETY: live consumer, valid out-pointer.
    assert_eq!(unsafe { memq_ack_consumer_pending(c, &mut n) }, OK);
    n
}

fn dead_letter_topic(capacity: usize) -> *mut memq_dead_letter_topic {
    let mut t = null_mut();
    // SAFETY: valid config and out-pointer.
    let st =
        unsafe { memq_dead_letter_topic_new(&config(capacity, 1, memq_overflow::Block), &mut t) };
    assert_eq!(st, OK);
    t
}

fn dead_letter_subscriber(t: *const memq_dead_letter_topic) -> *mut memq_dead_letter_subscriber {
    let mut s = null_mut();
    // SAFETY: live dead-letter topic, valid out-pointer.
    let st = unsafe { memq_dead_letter_subscriber_new(t, memq_start::Earliest as u32, 0, &mut s) };
    assert_eq!(st, OK);
    s
}

/// A received dead letter, copied out; its handle is freed.
#[derive(Debug, PartialEq, Eq)]
struct Letter {
    topic: Option<String>,
    group: String,
    origin_partition: u32,
    origin_offset: u64,
    deliveries: u32,
    reason: u32,
    partition: u32,
    offset: u64,
    payload: Vec<u8>,
}

fn dead_letter(
    s: *const memq_dead_letter_subscriber,
    timeout_ms: i64,
) -> Result<Letter, memq_status> {
    let mut l = SENTINEL as *mut memq_dead_letter;
    // SAFETY: live subscriber, valid out-pointer; the letter is read while live, then
    // freed once.
    unsafe {
        let st = memq_dead_letter_subscriber_recv(s, timeout_ms, &mut l, null_mut());
        if st != OK {
            assert_eq!(l as usize, SENTINEL, "out-parameter written on {st:?}");
            return Err(st);
        }
        let mut info = memq_dead_letter_info::default();
        let mut data = null();
        assert_eq!(memq_dead_letter_get_info(l, &mut info), OK);
        assert_eq!(memq_dead_letter_data(l, &mut data), OK);
        let name = |p: *const std::ffi::c_char| {
            (!p.is_null()).then(|| CStr::from_ptr(p).to_str().unwrap().to_owned())
        };
        let letter = Letter {
            topic: name(info.topic),
            group: name(info.group).expect("a group name"),
            origin_partition: info.origin_partition,
            origin_offset: info.origin_offset,
            deliveries: info.deliveries,
            reason: info.reason,
            partition: info.partition,
            offset: info.offset,
            payload: if info.len == 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts(data, info.len).to_vec()
            },
        };
        memq_dead_letter_free(l);
        Ok(letter)
    }
}

#[test]
fn handles_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<memq_ack_consumer>();
    send_sync::<memq_delivery>();
    send_sync::<memq_dead_letter_topic>();
    send_sync::<memq_dead_letter_subscriber>();
    send_sync::<memq_dead_letter>();
}

#[test]
fn config_defaults() {
    let c = ack_config();
    assert_eq!(c.ack_wait_ms, 30_000);
    assert_eq!(c.max_deliveries, 0);
    assert_eq!(c.backoff, memq_backoff::None as u32);
    assert_eq!((c.backoff_initial_ms, c.backoff_max_ms), (0, 0));
    assert_eq!(c.max_in_flight, 1024);
    assert!(c.dead_letter.is_null());
}

#[test]
fn ack_settles_for_good() {
    let t = topic(8);
    let c = ack_member(t, "g", &ack_config());
    for i in 0..3u8 {
        publish(t, &[i; 4]);
    }
    let got: Vec<Got> = (0..3).map(|_| delivery(c, 0).unwrap()).collect();
    for (i, g) in got.iter().enumerate() {
        assert_eq!(g.payload, vec![i as u8; 4]);
        assert_eq!((g.offset, g.partition, g.deliveries), (i as u64, 0, 1));
    }
    assert_eq!(pending(c), 3);
    assert_eq!(delivery(c, 0).err(), Some(memq_status::Empty));
    for g in &got {
        assert_eq!(ack(g), OK);
    }
    // Settled, still readable until freed.
    for (i, g) in got.into_iter().enumerate() {
        assert_eq!(read(g.d).payload, vec![i as u8; 4]);
        free(g);
    }
    assert_eq!(pending(c), 0);
    assert_eq!(delivery(c, 20).err(), Some(memq_status::Timeout));
    let mut committed = u64::MAX;
    // SAFETY: live consumer, valid out-pointer.
    unsafe {
        assert_eq!(memq_ack_consumer_committed(c, 0, &mut committed), OK);
        assert_eq!(
            memq_ack_consumer_committed(c, 1, &mut committed),
            memq_status::OutOfRange
        );
    }
    assert_eq!(committed, 3);
    let s = ack_stats(t, "g");
    assert_eq!(
        (s.members, s.acked, s.in_flight, s.redelivered),
        (1, 3, 0, 0)
    );
    assert_eq!((s.delivered, s.lag, s.dead_lettered), (3, 0, 0));
    // SAFETY: live handles, each freed once.
    unsafe {
        memq_ack_consumer_free(c);
        memq_topic_free(t);
    }
}

/// Receives a batch of up to `capacity` deliveries; on failure checks that nothing was
/// written.
fn deliveries(
    c: *const memq_ack_consumer,
    capacity: usize,
    timeout_ms: i64,
) -> Result<Vec<Got>, memq_status> {
    let mut batch = vec![SENTINEL as *mut memq_delivery; capacity.max(1)];
    let mut n = SENTINEL;
    // SAFETY: live consumer, an array of `capacity` writable pointers, valid out-pointers.
    let st = unsafe {
        memq_ack_consumer_recv_many(
            c,
            timeout_ms,
            batch.as_mut_ptr(),
            capacity,
            &mut n,
            null_mut(),
        )
    };
    if st != OK {
        assert_eq!(n, SENTINEL, "count written on {st:?}");
        assert!(batch.iter().all(|&d| d as usize == SENTINEL));
        return Err(st);
    }
    assert!((1..=capacity).contains(&n));
    assert!(batch[n..].iter().all(|&d| d as usize == SENTINEL));
    Ok(batch[..n].iter().map(|&d| read(d)).collect())
}

#[test]
fn recv_many_leases_each_delivery_and_takes_redeliveries_first() {
    let t = topic(8);
    let c = ack_member(t, "g", &ack_config());
    for i in 0..5u8 {
        publish(t, &[i; 2]);
    }
    assert_eq!(
        deliveries(c, 0, 0).err(),
        Some(memq_status::InvalidArgument)
    );
    let first = deliveries(c, 3, 0).unwrap();
    let offsets: Vec<_> = first.iter().map(|g| (g.offset, g.deliveries)).collect();
    assert_eq!(offsets, [(0, 1), (1, 1), (2, 1)]);
    assert_eq!(pending(c), 3);
    assert_eq!(ack(&first[0]), OK);
    assert_eq!(nack(&first[1]), OK);
    assert_eq!(ack(&first[2]), OK);
    first.into_iter().for_each(free);
    let second = deliveries(c, 10, 1000).unwrap();
    let got: Vec<_> = second
        .iter()
        .map(|g| (g.offset, g.deliveries, g.payload[0]))
        .collect();
    assert_eq!(
        got,
        [(1, 2, 1), (3, 1, 3), (4, 1, 4)],
        "the redelivery first"
    );
    for g in second {
        assert_eq!(ack(&g), OK);
        free(g);
    }
    assert_eq!(deliveries(c, 4, 0).err(), Some(memq_status::Empty));
    assert_eq!(deliveries(c, 4, 20).err(), Some(memq_status::Timeout));
    let mut committed = u64::MAX;
    // SAFETY: live handles.
    unsafe {
        assert_eq!(memq_ack_consumer_committed(c, 0, &mut committed), OK);
        assert_eq!(memq_topic_close(t), OK);
    }
    assert_eq!(committed, 5);
    assert_eq!(deliveries(c, 4, -1).err(), Some(memq_status::Closed));
    // SAFETY: live handles, each freed once.
    unsafe {
        memq_ack_consumer_free(c);
        memq_topic_free(t);
    }
}

#[test]
fn nack_redelivers_with_two_deliveries() {
    let t = topic(8);
    let c = ack_member(t, "g", &ack_config());
    publish(t, b"retry me");
    publish(t, b"next");
    let first = delivery(c, 0).unwrap();
    assert_eq!((first.offset, first.deliveries), (0, 1));
    assert_eq!(nack(&first), OK);
    // The nacked message comes again before the next new one.
    let again = delivery(c, 0).unwrap();
    assert_eq!(again.payload, b"retry me");
    assert_eq!((again.offset, again.deliveries), (0, 2));
    let next = delivery(c, 0).unwrap();
    assert_eq!(
        (next.payload.as_slice(), next.deliveries),
        (&b"next"[..], 1)
    );
    assert_eq!(ack(&again), OK);
    assert_eq!(ack(&next), OK);
    let s = ack_stats(t, "g");
    assert_eq!((s.acked, s.redelivered, s.in_flight), (2, 1, 0));
    // The first delivery's handle is still there, with its message.
    assert_eq!(read(first.d).deliveries, 1);
    for g in [first, again, next] {
        free(g);
    }
    // SAFETY: live handles, each freed once.
    unsafe {
        memq_ack_consumer_free(c);
        memq_topic_free(t);
    }
}

#[test]
fn nack_after_and_backoff_delay_redelivery() {
    let t = topic(8);
    let mut cfg = ack_config();
    cfg.backoff = memq_backoff::Fixed as u32;
    cfg.backoff_initial_ms = 150;
    let c = ack_member(t, "g", &cfg);
    publish(t, b"x");

    // An explicit delay.
    let g = delivery(c, 0).unwrap();
    let t0 = Instant::now();
    // SAFETY: a live delivery.
    assert_eq!(unsafe { memq_delivery_nack_after(g.d, 100) }, OK);
    free(g);
    // Not due yet, unless this thread was descheduled for the whole delay: then the
    // redelivery is there already (the bound below holds either way).
    let g = match delivery(c, 0) {
        Err(memq_status::Empty) => delivery(c, 5_000).unwrap(),
        other => other.unwrap(),
    };
    assert!(
        t0.elapsed() >= Duration::from_millis(90),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(g.deliveries, 2);

    // The group's backoff (fixed, 150 ms).
    let t0 = Instant::now();
    assert_eq!(nack(&g), OK);
    free(g);
    // As above: a wait of 50 ms ends before the 150 ms, unless descheduled past them.
    let g = match delivery(c, 50) {
        Err(memq_status::Timeout) => delivery(c, 5_000).unwrap(),
        other => other.unwrap(),
    };
    assert!(
        t0.elapsed() >= Duration::from_millis(140),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(g.deliveries, 3);

    // nack_after(0): at once.
    // SAFETY: a live delivery.
    assert_eq!(unsafe { memq_delivery_nack_after(g.d, 0) }, OK);
    free(g);
    let g = delivery(c, 0).unwrap();
    assert_eq!(g.deliveries, 4);
    assert_eq!(ack(&g), OK);
    free(g);
    // SAFETY: live handles, each freed once.
    unsafe {
        memq_ack_consumer_free(c);
        memq_topic_free(t);
    }
}

#[test]
fn an_expired_lease_is_redelivered() {
    let t = topic(8);
    let mut cfg = ack_config();
    cfg.ack_wait_ms = 50;
    let c = ack_member(t, "g", &cfg);
    publish(t, b"slow");
    let t0 = Instant::now();
    let first = delivery(c, 0).unwrap();
    assert_eq!(first.deliveries, 1);
    // The waiting receive is woken when the lease runs out.
    let second = delivery(c, 5_000).unwrap();
    assert!(
        t0.elapsed() >= Duration::from_millis(45),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!((second.offset, second.deliveries), (0, 2));
    assert_eq!(second.payload, b"slow");
    // The first delivery lost its lease: every settling call says so.
    assert_eq!(ack(&first), memq_status::LeaseExpired);
    // SAFETY: a live delivery.
    let touched = unsafe { memq_delivery_touch(first.d) };
    assert_eq!(touched, memq_status::LeaseExpired);
    assert_eq!(ack(&second), OK);
    assert_eq!(ack_stats(t, "g").acked, 1);
    free(first);
    free(second);
    // SAFETY: live handles, each freed once.
    unsafe {
        memq_ack_consumer_free(c);
        memq_topic_free(t);
    }
}

/// The leases are real time (200 ms): each check below holds only if this thread was
/// not descheduled for a whole lease since the mark before it, which is measured; a run
/// where it was shows nothing, and is made again.
#[test]
fn touch_extends_the_lease() {
    let lease = Duration::from_millis(200);
    for _ in 0..100 {
        let t = topic(8);
        let mut cfg = ack_config();
        cfg.ack_wait_ms = 200;
        let c = ack_member(t, "g", &cfg);
        publish(t, b"long job");
        let before_delivery = Instant::now();
        let g = delivery(c, 0).unwrap();
        thread::sleep(Duration::from_millis(120));
        let before_touch = Instant::now();
        // SAFETY: a live delivery.
        let touched = unsafe { memq_delivery_touch(g.d) };
        let touched_in_time = before_delivery.elapsed() < lease;
        thread::sleep(Duration::from_millis(120));
        // 240 ms after the delivery: without the touch it would be due again.
        let again = delivery(c, 0);
        let acked = ack(&g);
        let settled_in_time = before_touch.elapsed() < lease;
        free(g);
        let redelivered = ack_stats(t, "g").redelivered;
        // A redelivery (only in a run made again) is freed like any other.
        let again = again.map(free);
        // SAFETY: live handles, each freed once.
        unsafe {
            memq_ack_consumer_free(c);
            memq_topic_free(t);
        }
        if touched_in_time && settled_in_time {
            assert_eq!(touched, OK);
            assert_eq!(again.err(), Some(memq_status::Empty));
            assert_eq!((acked, redelivered), (OK, 0));
            return;
        }
    }
    panic!("in 100 runs this thread never kept to the lease's 200 ms");
}

#[test]
fn max_deliveries_sends_a_dead_letter_with_its_origin() {
    let mut b = null_mut();
    let mut t = null_mut();
    let dlt = dead_letter_topic(8);
    let dls = dead_letter_subscriber(dlt);
    // SAFETY: valid out-pointers and config.
    unsafe {
        assert_eq!(memq_broker_new(&mut b), OK);
        assert_eq!(
            memq_broker_create_topic(
                b,
                c"orders".as_ptr(),
                &config(8, 2, memq_overflow::Block),
                &mut t
            ),
            OK
        );
    }
    let mut cfg = ack_config();
    cfg.max_deliveries = 3;
    cfg.dead_letter = dlt;
    let c = ack_member(t, "billing", &cfg);
    // The group keeps its own reference: the handle may go at once.
    // SAFETY: live handle, freed once, not used again (the subscriber is separate).
    unsafe { memq_dead_letter_topic_free(dlt) };
    let mut r = memq_receipt::default();
    // SAFETY: live topic, readable payloads, valid receipt.
    unsafe {
        assert_eq!(memq_topic_publish_to(t, 1, b"x".as_ptr(), 1, 0, &mut r), OK);
        assert_eq!(
            memq_topic_publish_to(t, 1, b"poison".as_ptr(), 6, 0, &mut r),
            OK
        );
    }
    assert_eq!((r.partition, r.offset), (1, 1));
    let ok = delivery(c, 0).unwrap();
    assert_eq!(ack(&ok), OK);
    free(ok);
    for attempt in 1..=3 {
        let g = delivery(c, 0).unwrap();
        assert_eq!((g.partition, g.offset, g.deliveries), (1, 1, attempt));
        assert_eq!(g.payload, b"poison");
        assert_eq!(nack(&g), OK);
        free(g);
    }
    assert_eq!(pending(c), 1);
    // The next receive moves it to the dead-letter topic instead of delivering it.
    assert_eq!(delivery(c, 0).err(), Some(memq_status::Empty));
    assert_eq!(pending(c), 0);
    let letter = dead_letter(dls, 0).unwrap();
    assert_eq!(
        letter,
        Letter {
            topic: Some("orders".into()),
            group: "billing".into(),
            origin_partition: 1,
            origin_offset: 1,
            deliveries: 3,
            reason: memq_dead_letter_reason::MaxDeliveries as u32,
            partition: 0,
            offset: 0,
            payload: b"poison".to_vec(),
        }
    );
    assert_eq!(dead_letter(dls, 0), Err(memq_status::Empty));
    let s = ack_stats(t, "billing");
    assert_eq!(
        (s.acked, s.dead_lettered, s.redelivered, s.in_flight),
        (1, 1, 2, 0)
    );
    let mut committed = 0;
    // SAFETY: live handles, valid out-pointers, each handle freed once.
    unsafe {
        assert_eq!(memq_ack_consumer_committed(c, 1, &mut committed), OK);
        assert_eq!(committed, 2);
        memq_ack_consumer_free(c);
        memq_topic_free(t);
        memq_broker_free(b);
        // The origin topic is gone, and with it the group's reference: the dead-letter
        // topic closed, and its subscriber sees the end.
        assert_eq!(dead_letter(dls, -1), Err(memq_status::Closed));
        memq_dead_letter_subscriber_free(dls);
    }
}

#[test]
fn reject_dead_letters_at_once() {
    let t = topic(8);
    let dlt = dead_letter_topic(8);
    let dls = dead_letter_subscriber(dlt);
    let mut cfg = ack_config();
    cfg.dead_letter = dlt;
    let c = ack_member(t, "g", &cfg);
    publish(t, b"bad");
    publish(t, b"");
    let g = delivery(c, 0).unwrap();
    // SAFETY: a live delivery.
    assert_eq!(unsafe { memq_delivery_reject(g.d) }, OK);
    // Rejected is settled: nothing else applies.
    assert_eq!(ack(&g), memq_status::LeaseExpired);
    free(g);
    let empty = delivery(c, 0).unwrap();
    assert!(empty.payload.is_empty());
    // SAFETY: a live delivery.
    assert_eq!(unsafe { memq_delivery_reject(empty.d) }, OK);
    free(empty);
    let letter = dead_letter(dls, 0).unwrap();
    assert_eq!(letter.topic, None, "a topic outside a broker has no name");
    assert_eq!(letter.group, "g");
    assert_eq!((letter.origin_offset, letter.offset), (0, 0));
    assert_eq!(
        (letter.deliveries, letter.payload.as_slice()),
        (1, &b"bad"[..])
    );
    assert_eq!(letter.reason, memq_dead_letter_reason::Rejected as u32);
    let letter = dead_letter(dls, 0).unwrap();
    assert_eq!((letter.origin_offset, letter.offset), (1, 1));
    assert!(letter.payload.is_empty());
    assert_eq!(delivery(c, 0).err(), Some(memq_status::Empty));
    let mut stats = memq_topic_stats::default();
    // SAFETY: live handles, valid out-pointers; each handle freed once.
    unsafe {
        assert_eq!(memq_dead_letter_topic_get_stats(dlt, &mut stats), OK);
        assert_eq!((stats.published, stats.subscribers), (2, 1));
        assert_eq!(ack_stats(t, "g").dead_lettered, 2);
        // Closing the dead-letter topic ends its subscriber's reading once drained.
        assert_eq!(memq_dead_letter_topic_close(dlt), OK);
        assert_eq!(dead_letter(dls, -1), Err(memq_status::Closed));
        memq_dead_letter_subscriber_free(dls);
        memq_dead_letter_topic_free(dlt);
        memq_ack_consumer_free(c);
        memq_topic_free(t);
    }

    // Without a dead-letter topic a rejected message is dropped and counted.
    let t = topic(8);
    let c = ack_member(t, "g", &ack_config());
    publish(t, b"gone");
    let g = delivery(c, 0).unwrap();
    // SAFETY: a live delivery.
    assert_eq!(unsafe { memq_delivery_reject(g.d) }, OK);
    free(g);
    assert_eq!(delivery(c, 0).err(), Some(memq_status::Empty));
    let s = ack_stats(t, "g");
    assert_eq!((s.dead_lettered, s.in_flight), (1, 0));
    // SAFETY: live handles, each freed once.
    unsafe {
        memq_ack_consumer_free(c);
        memq_topic_free(t);
    }
}

#[test]
fn a_delivery_freed_unsettled_is_redelivered() {
    let t = topic(8);
    let c = ack_member(t, "g", &ack_config());
    publish(t, b"again");
    let g = delivery(c, 0).unwrap();
    free(g);
    let g = delivery(c, 0).unwrap();
    assert_eq!(
        (g.offset, g.deliveries, g.payload.as_slice()),
        (0, 2, &b"again"[..])
    );

    // A consumer freed while holding a lease gives it back at once to the others; its
    // delivery stays readable, and its settling calls report the lost lease.
    let other = ack_member(t, "g", &ack_config());
    // SAFETY: live handle, freed once.
    unsafe { memq_ack_consumer_free(c) };
    let h = delivery(other, 0).unwrap();
    assert_eq!((h.offset, h.deliveries), (0, 3));
    assert_eq!(read(g.d).payload, b"again");
    assert_eq!(ack(&g), memq_status::LeaseExpired);
    assert_eq!(nack(&g), memq_status::LeaseExpired);
    assert_eq!(ack(&h), OK);
    free(g);
    free(h);
    let s = ack_stats(t, "g");
    assert_eq!((s.members, s.acked, s.redelivered), (1, 1, 2));
    // SAFETY: live handles, each freed once.
    unsafe {
        memq_ack_consumer_free(other);
        memq_topic_free(t);
    }
}

#[test]
fn a_delivery_outlives_its_consumer_and_topic() {
    let t = topic(8);
    let c = ack_member(t, "g", &ack_config());
    publish(t, b"kept");
    let g = delivery(c, 0).unwrap();
    // SAFETY: live handles, each freed once; the delivery is used after both are gone.
    unsafe {
        memq_ack_consumer_free(c);
        memq_topic_free(t);
    }
    assert_eq!(read(g.d).payload, b"kept");
    assert_eq!(ack(&g), memq_status::LeaseExpired);
    free(g);
}

/// A delivery carries a timestamp only if its topic stamps messages, as a subscriber's
/// message does. Found by the `ffi_calls` fuzz target: deliveries from a topic without
/// `MEMQ_TOPIC_TIMESTAMPS` or a TTL reported `has_timestamp` with a timestamp of 0.
#[test]
fn a_delivery_is_stamped_only_if_its_topic_is() {
    for stamped in [false, true] {
        let mut c = config(4, 1, memq_overflow::Block);
        if stamped {
            c.flags = MEMQ_TOPIC_TIMESTAMPS;
        }
        let t = topic_with(&c);
        let member = ack_member(t, "g", &ack_config());
        let s = subscribe(t, memq_start::Earliest);
        publish(t, b"when");
        let g = delivery(member, 0).unwrap();
        let mut m = null_mut();
        let (mut delivered, mut received) =
            (memq_message_meta::default(), memq_message_meta::default());
        // SAFETY: live handles and valid out-pointers; each handle freed once.
        unsafe {
            assert_eq!(memq_subscriber_recv(s, 0, &mut m, null_mut()), OK);
            assert_eq!(memq_message_get_meta(m, &mut received), OK);
            assert_eq!(memq_delivery_get_meta(g.d, &mut delivered), OK);
            memq_message_free(m);
            memq_subscriber_free(s);
        }
        assert_eq!(received.has_timestamp, stamped);
        assert_eq!(delivered.has_timestamp, stamped, "stamped topic: {stamped}");
        assert_eq!(delivered.timestamp_ns, received.timestamp_ns);
        assert_eq!(ack(&g), OK);
        free(g);
        // SAFETY: live handles, each freed once.
        unsafe {
            memq_ack_consumer_free(member);
            memq_topic_free(t);
        }
    }
}

#[test]
fn settling_twice_is_lease_expired() {
    let t = topic(8);
    let c = ack_member(t, "g", &ack_config());
    publish(t, b"once");
    let g = delivery(c, 0).unwrap();
    // SAFETY: a live delivery.
    unsafe {
        assert_eq!(memq_delivery_touch(g.d), OK);
        assert_eq!(memq_delivery_ack(g.d), OK);
        for st in [
            memq_delivery_ack(g.d),
            memq_delivery_nack(g.d),
            memq_delivery_nack_after(g.d, 5),
            memq_delivery_reject(g.d),
            memq_delivery_touch(g.d),
        ] {
            assert_eq!(st, memq_status::LeaseExpired);
        }
        let s = CStr::from_ptr(memq_status_str(memq_status::LeaseExpired as u32));
        assert_eq!(s, c"lease expired or already settled");
    }
    free(g);
    // Acked once: nothing comes back, nothing was counted twice.
    assert_eq!(delivery(c, 0).err(), Some(memq_status::Empty));
    let s = ack_stats(t, "g");
    assert_eq!((s.acked, s.redelivered, s.dead_lettered), (1, 0, 0));
    // SAFETY: live handles, each freed once.
    unsafe {
        memq_ack_consumer_free(c);
        memq_topic_free(t);
    }
}

#[test]
fn group_modes_do_not_mix() {
    let t = topic(8);
    let auto = member(t, "auto");
    assert_eq!(
        try_ack_member(t, "auto", &ack_config()).err(),
        Some(memq_status::GroupModeMismatch)
    );
    let acked = ack_member(t, "acked", &ack_config());
    let mut m = SENTINEL as *mut memq_consumer;
    // SAFETY: live topic, NUL-terminated name, valid out-pointer; handles freed once.
    unsafe {
        assert_eq!(
            memq_consumer_new(t, c"acked".as_ptr(), 0, 0, &mut m),
            memq_status::GroupModeMismatch
        );
        assert_eq!(m as usize, SENTINEL);
        let s = CStr::from_ptr(memq_status_str(memq_status::GroupModeMismatch as u32));
        assert_eq!(s, c"group exists with the other acknowledgement mode");
        // Both groups read the same messages, each in its own mode.
        publish(t, b"both");
        assert_eq!(consume(auto, 0), Ok(b"both".to_vec()));
        let g = delivery(acked, 0).unwrap();
        assert_eq!(ack(&g), OK);
        free(g);
        // The stats of an automatic group have no acknowledgements.
        let s = ack_stats(t, "auto");
        assert_eq!((s.members, s.delivered, s.acked), (1, 1, 0));
        memq_consumer_free(auto);
        memq_ack_consumer_free(acked);
        memq_topic_free(t);
    }
}

#[test]
fn an_existing_group_keeps_its_settings() {
    let t = topic(8);
    let mut first = ack_config();
    first.max_in_flight = 1;
    let a = ack_member(t, "g", &first);
    // A second member asks for more in flight: the group's own setting holds, also once
    // the member that created the group has left.
    let b = ack_member(t, "g", &ack_config());
    // SAFETY: live handle, freed once.
    unsafe { memq_ack_consumer_free(a) };
    publish(t, b"1");
    publish(t, b"2");
    let g = delivery(b, 0).unwrap();
    assert_eq!(delivery(b, 0).err(), Some(memq_status::Empty));
    assert_eq!(delivery(b, 30).err(), Some(memq_status::Timeout));
    assert_eq!(ack(&g), OK);
    free(g);
    let g = delivery(b, 0).unwrap();
    assert_eq!(g.payload, b"2");
    assert_eq!(ack(&g), OK);
    free(g);
    // SAFETY: live handles, each freed once.
    unsafe {
        memq_ack_consumer_free(b);
        memq_topic_free(t);
    }
}

#[test]
fn lag_and_close() {
    // New messages evicted before the group read them.
    let t = topic_with(&config(2, 1, memq_overflow::DropOldest));
    let c = ack_member(t, "g", &ack_config());
    for i in 0..5u8 {
        publish(t, &[i]);
    }
    let mut d = null_mut();
    let mut lagged = 0;
    // SAFETY: live consumer, valid out-pointers.
    unsafe {
        assert_eq!(
            memq_ack_consumer_recv(c, 0, &mut d, &mut lagged),
            memq_status::Lagged
        );
    }
    assert!(d.is_null());
    assert_eq!(lagged, 3);
    let g3 = delivery(c, 0).unwrap();
    let g4 = delivery(c, 0).unwrap();
    assert_eq!((g3.payload[0], g4.payload[0]), (3, 4));

    // Closed: receives end only once every message is settled.
    // SAFETY: live topic.
    assert_eq!(unsafe { memq_topic_close(t) }, OK);
    assert_eq!(delivery(c, 0).err(), Some(memq_status::Empty));
    assert_eq!(nack(&g3), OK);
    let again = delivery(c, 0).unwrap();
    assert_eq!(again.offset, 3);
    let blocked = {
        let c = c as usize;
        thread::spawn(move || delivery(c as *const memq_ack_consumer, -1).err())
    };
    thread::sleep(Duration::from_millis(30));
    for g in [&again, &g4] {
        assert_eq!(ack(g), OK);
    }
    assert_eq!(blocked.join().unwrap(), Some(memq_status::Closed));
    for g in [g3, g4, again] {
        free(g);
    }
    // SAFETY: live handles, each freed once.
    unsafe {
        memq_ack_consumer_free(c);
        memq_topic_free(t);
    }
}

#[test]
fn competing_workers_settle_every_message_once() {
    const COUNT: u32 = 4_000;
    const WORKERS: usize = 4;
    let t = topic_with(&config(256, 4, memq_overflow::Block));
    let dlt = dead_letter_topic(COUNT as usize);
    let dls = dead_letter_subscriber(dlt);
    let mut cfg = ack_config();
    cfg.max_deliveries = 2;
    cfg.backoff = memq_backoff::Exponential as u32;
    cfg.backoff_initial_ms = 1;
    cfg.backoff_max_ms = 4;
    cfg.max_in_flight = 16;
    cfg.dead_letter = dlt;
    let workers: Vec<usize> = (0..WORKERS)
        .map(|_| ack_member(t, "workers", &cfg) as usize)
        .collect();
    // seq % 5 == 0: nacked once, then acked; seq % 11 == 0 (and not % 5): always nacked,
    // so dead-lettered after 2 deliveries; the rest acked at once.
    let acked = Mutex::new(HashMap::<u32, u32>::new());
    thread::scope(|s| {
        let t = t as usize;
        s.spawn(move || {
            for seq in 0..COUNT {
                let t = t as *const memq_topic;
                let payload = seq.to_le_bytes();
                let key = (seq % 13).to_le_bytes();
                // SAFETY: live topic, readable key and payload.
                let st = unsafe {
                    memq_topic_publish_keyed(
                        t,
                        key.as_ptr(),
                        4,
                        payload.as_ptr(),
                        4,
                        -1,
                        null_mut(),
                    )
                };
                assert_eq!(st, OK);
            }
            // SAFETY: live topic.
            assert_eq!(unsafe { memq_topic_close(t as *const memq_topic) }, OK);
        });
        for &w in &workers {
            let acked = &acked;
            s.spawn(move || loop {
                let g = match delivery(w as *const memq_ack_consumer, 100) {
                    Ok(g) => g,
                    Err(memq_status::Timeout) => continue,
                    Err(memq_status::Closed) => break,
                    Err(st) => panic!("receive: {st:?}"),
                };
                let seq = u32::from_le_bytes(g.payload.clone().try_into().unwrap());
                if seq % 5 == 0 && g.deliveries == 1 || seq % 5 != 0 && seq % 11 == 0 {
                    assert_eq!(nack(&g), OK);
                } else {
                    assert_eq!(ack(&g), OK);
                    *acked.lock().unwrap().entry(seq).or_default() += 1;
                }
                free(g);
            });
        }
    });
    let acked = acked.into_inner().unwrap();
    let poison: Vec<u32> = (0..COUNT).filter(|s| s % 5 != 0 && s % 11 == 0).collect();
    for seq in 0..COUNT {
        let want = u32::from(!poison.contains(&seq));
        assert_eq!(acked.get(&seq).copied().unwrap_or(0), want, "message {seq}");
    }
    let mut dead = Vec::new();
    while let Ok(l) = dead_letter(dls, 0) {
        assert_eq!((l.group.as_str(), l.deliveries), ("workers", 2));
        assert_eq!(l.reason, memq_dead_letter_reason::MaxDeliveries as u32);
        dead.push(u32::from_le_bytes(l.payload.try_into().unwrap()));
    }
    dead.sort_unstable();
    assert_eq!(dead, poison);
    let s = ack_stats(t, "workers");
    assert_eq!(s.acked, u64::from(COUNT) - poison.len() as u64);
    assert_eq!(s.dead_lettered, poison.len() as u64);
    assert_eq!(s.in_flight, 0);
    assert!(s.redelivered >= u64::from(COUNT / 5) + poison.len() as u64);
    // SAFETY: live handles, each freed once.
    unsafe {
        for w in workers {
            memq_ack_consumer_free(w as *mut memq_ack_consumer);
        }
        memq_dead_letter_subscriber_free(dls);
        memq_dead_letter_topic_free(dlt);
        memq_topic_free(t);
    }
}

#[test]
fn null_handles_and_outputs_are_null_pointer() {
    let t = topic(4);
    let dlt = dead_letter_topic(4);
    let dls = dead_letter_subscriber(dlt);
    let mut cfg = ack_config();
    cfg.dead_letter = dlt;
    let c = ack_member(t, "g", &cfg);
    let mut consumer = SENTINEL as *mut memq_ack_consumer;
    let mut d = SENTINEL as *mut memq_delivery;
    let mut batch = [SENTINEL as *mut memq_delivery; 4];
    let mut dl = SENTINEL as *mut memq_dead_letter;
    let mut dlt_out = SENTINEL as *mut memq_dead_letter_topic;
    let mut dls_out = SENTINEL as *mut memq_dead_letter_subscriber;
    let mut data = SENTINEL as *const u8;
    let mut n = SENTINEL;
    let mut u64_out = SENTINEL as u64;
    let mut u32_out = SENTINEL as u32;
    let mut meta = memq_message_meta::default();
    let mut info = memq_dead_letter_info::default();
    let mut stats = memq_topic_stats::default();
    let mut gs = memq_ack_group_stats::default();
    let start = memq_start::Earliest as u32;
    // SAFETY: every handle or required out-pointer below is NULL, which each export must
    // reject before reading or writing anything; the rest are live or valid.
    unsafe {
        for st in [
            // NULL handles.
            memq_ack_consumer_new(null(), c"g".as_ptr(), start, 0, &cfg, &mut consumer),
            memq_ack_consumer_recv(null(), 0, &mut d, null_mut()),
            memq_ack_consumer_recv_many(null(), 0, batch.as_mut_ptr(), 4, &mut n, null_mut()),
            memq_ack_consumer_committed(null(), 0, &mut u64_out),
            memq_ack_consumer_pending(null(), &mut n),
            memq_topic_get_ack_group_stats(null(), c"g".as_ptr(), &mut gs),
            memq_delivery_data(null(), &mut data),
            memq_delivery_len(null(), &mut n),
            memq_delivery_offset(null(), &mut u64_out),
            memq_delivery_partition(null(), &mut u32_out),
            memq_delivery_deliveries(null(), &mut u32_out),
            memq_delivery_get_meta(null(), &mut meta),
            memq_delivery_ack(null()),
            memq_delivery_nack(null()),
            memq_delivery_nack_after(null(), 1),
            memq_delivery_touch(null()),
            memq_delivery_reject(null()),
            memq_dead_letter_topic_close(null()),
            memq_dead_letter_topic_get_stats(null(), &mut stats),
            memq_dead_letter_subscriber_new(null(), start, 0, &mut dls_out),
            memq_dead_letter_subscriber_recv(null(), 0, &mut dl, null_mut()),
            memq_dead_letter_data(null(), &mut data),
            memq_dead_letter_get_info(null(), &mut info),
            // NULL names, configs and out-parameters.
            memq_ack_config_init(null_mut()),
            memq_ack_consumer_new(t, null(), start, 0, &cfg, &mut consumer),
            memq_ack_consumer_new(t, c"g".as_ptr(), start, 0, null(), &mut consumer),
            memq_ack_consumer_new(t, c"g".as_ptr(), start, 0, &cfg, null_mut()),
            memq_ack_consumer_recv(c, 0, null_mut(), null_mut()),
            memq_ack_consumer_recv_many(c, 0, null_mut(), 4, &mut n, null_mut()),
            memq_ack_consumer_recv_many(c, 0, batch.as_mut_ptr(), 4, null_mut(), null_mut()),
            memq_ack_consumer_committed(c, 0, null_mut()),
            memq_ack_consumer_pending(c, null_mut()),
            memq_topic_get_ack_group_stats(t, null(), &mut gs),
            memq_topic_get_ack_group_stats(t, c"g".as_ptr(), null_mut()),
            memq_dead_letter_topic_new(null(), &mut dlt_out),
            memq_dead_letter_topic_new(&config(4, 1, memq_overflow::Block), null_mut()),
            memq_dead_letter_topic_get_stats(dlt, null_mut()),
            memq_dead_letter_subscriber_new(dlt, start, 0, null_mut()),
            memq_dead_letter_subscriber_recv(dls, 0, null_mut(), null_mut()),
        ] {
            assert_eq!(st, memq_status::NullPointer);
        }
        // Nothing was written.
        assert_eq!(consumer as usize, SENTINEL);
        assert_eq!(d as usize, SENTINEL);
        assert!(batch.iter().all(|&b| b as usize == SENTINEL));
        assert_eq!(dl as usize, SENTINEL);
        assert_eq!(dlt_out as usize, SENTINEL);
        assert_eq!(dls_out as usize, SENTINEL);
        assert_eq!(data as usize, SENTINEL);
        assert_eq!(
            (n, u64_out, u32_out),
            (SENTINEL, SENTINEL as u64, SENTINEL as u32)
        );
        assert_eq!(meta, memq_message_meta::default());
        assert_eq!(info, memq_dead_letter_info::default());
        assert_eq!(stats, memq_topic_stats::default());
        assert_eq!(gs, memq_ack_group_stats::default());
        // The one member is the only one.
        assert_eq!(ack_stats(t, "g").members, 1);

        // A live delivery with NULL outputs.
        publish(t, b"x");
        let g = delivery(c, 0).unwrap();
        for st in [
            memq_delivery_data(g.d, null_mut()),
            memq_delivery_len(g.d, null_mut()),
            memq_delivery_offset(g.d, null_mut()),
            memq_delivery_partition(g.d, null_mut()),
            memq_delivery_deliveries(g.d, null_mut()),
            memq_delivery_get_meta(g.d, null_mut()),
        ] {
            assert_eq!(st, memq_status::NullPointer);
        }
        // SAFETY: a live delivery.
        assert_eq!(memq_delivery_reject(g.d), OK);
        free(g);
        let mut l = null_mut();
        assert_eq!(
            memq_dead_letter_subscriber_recv(dls, 0, &mut l, null_mut()),
            OK
        );
        assert_eq!(
            memq_dead_letter_data(l, null_mut()),
            memq_status::NullPointer
        );
        assert_eq!(
            memq_dead_letter_get_info(l, null_mut()),
            memq_status::NullPointer
        );
        memq_dead_letter_free(l);

        // free(NULL) does nothing.
        memq_ack_consumer_free(null_mut());
        memq_delivery_free(null_mut());
        memq_dead_letter_topic_free(null_mut());
        memq_dead_letter_subscriber_free(null_mut());
        memq_dead_letter_free(null_mut());

        memq_ack_consumer_free(c);
        memq_dead_letter_subscriber_free(dls);
        memq_dead_letter_topic_free(dlt);
        memq_topic_free(t);
    }
}

#[test]
fn invalid_configs_and_arguments() {
    let t = topic(4);
    let bad_configs = [
        memq_ack_config {
            ack_wait_ms: 0,
            ..ack_config()
        },
        memq_ack_config {
            max_in_flight: 0,
            ..ack_config()
        },
        memq_ack_config {
            backoff: 3,
            ..ack_config()
        },
        memq_ack_config {
            backoff: u32::MAX,
            ..ack_config()
        },
        memq_ack_config {
            backoff: memq_backoff::Exponential as u32,
            backoff_initial_ms: 0,
            backoff_max_ms: 10,
            ..ack_config()
        },
        memq_ack_config {
            backoff: memq_backoff::Exponential as u32,
            backoff_initial_ms: 20,
            backoff_max_ms: 10,
            ..ack_config()
        },
    ];
    for cfg in &bad_configs {
        assert_eq!(
            try_ack_member(t, "g", cfg).err(),
            Some(memq_status::InvalidArgument),
            "{cfg:?}"
        );
    }
    let mut out = SENTINEL as *mut memq_ack_consumer;
    let not_utf8 = [0xFFu8, 0];
    let mut dlt = SENTINEL as *mut memq_dead_letter_topic;
    let mut dls = SENTINEL as *mut memq_dead_letter_subscriber;
    let mut gs = memq_ack_group_stats::default();
    // SAFETY: live topic; names NUL-terminated; configs and out-pointers valid.
    unsafe {
        for start in [3, u32::MAX] {
            assert_eq!(
                memq_ack_consumer_new(t, c"g".as_ptr(), start, 0, &ack_config(), &mut out),
                memq_status::InvalidArgument
            );
        }
        assert_eq!(
            memq_ack_consumer_new(t, not_utf8.as_ptr().cast(), 0, 0, &ack_config(), &mut out),
            memq_status::InvalidArgument
        );
        assert_eq!(
            memq_ack_consumer_new(
                t,
                c"g".as_ptr(),
                memq_start::Offset as u32,
                5,
                &ack_config(),
                &mut out
            ),
            memq_status::OutOfRange
        );
        assert_eq!(out as usize, SENTINEL);
        // None of the failed calls created the group.
        assert_eq!(
            memq_topic_get_ack_group_stats(t, c"g".as_ptr(), &mut gs),
            memq_status::UnknownGroup
        );
        assert_eq!(gs, memq_ack_group_stats::default());
        // The dead-letter topic checks its config as a topic does.
        assert_eq!(
            memq_dead_letter_topic_new(&config(0, 1, memq_overflow::Block), &mut dlt),
            memq_status::InvalidArgument
        );
        let mut c = config(4, 1, memq_overflow::Block);
        c.overflow = 7;
        assert_eq!(
            memq_dead_letter_topic_new(&c, &mut dlt),
            memq_status::InvalidArgument
        );
        assert_eq!(dlt as usize, SENTINEL);
        let dlt = dead_letter_topic(4);
        assert_eq!(
            memq_dead_letter_subscriber_new(dlt, 9, 0, &mut dls),
            memq_status::InvalidArgument
        );
        assert_eq!(
            memq_dead_letter_subscriber_new(dlt, memq_start::Offset as u32, 1, &mut dls),
            memq_status::OutOfRange
        );
        assert_eq!(dls as usize, SENTINEL);
        memq_dead_letter_topic_free(dlt);
        memq_topic_free(t);
    }
}

#[test]
fn ack_all_settles_a_batch_and_reports_what_it_could_not() {
    let t = topic(8);
    let c = ack_member(t, "g", &ack_config());
    for i in 0..4u8 {
        publish(t, &[i; 2]);
    }
    let batch = deliveries(c, 4, 0).unwrap();
    assert_eq!(ack(&batch[1]), OK, "settled before");
    // The batch, with its first delivery listed twice.
    let mut handles: Vec<*const memq_delivery> = batch.iter().map(|g| g.d.cast_const()).collect();
    handles.push(batch[0].d);
    let mut report = memq_ack_report {
        acked: SENTINEL,
        expired: SENTINEL,
        group_deleted: SENTINEL,
    };
    // A NULL element: refused before anything is settled, the report untouched.
    let mut with_null = handles.clone();
    with_null.insert(2, null());
    // SAFETY: an array of live handles and one NULL; a writable report.
    let st = unsafe { memq_deliveries_ack_all(with_null.as_ptr(), with_null.len(), &mut report) };
    assert_eq!(st, memq_status::NullPointer);
    assert_eq!(report.acked, SENTINEL);
    assert_eq!(pending(c), 3);
    // SAFETY: an array of live handles; a writable report.
    let st = unsafe { memq_deliveries_ack_all(handles.as_ptr(), handles.len(), &mut report) };
    assert_eq!(st, OK);
    assert_eq!(
        report,
        memq_ack_report {
            acked: 3,
            expired: 2,
            group_deleted: 0
        }
    );
    assert_eq!(pending(c), 0);
    assert_eq!(
        ack(&batch[0]),
        memq_status::LeaseExpired,
        "settled for good"
    );
    let mut committed = u64::MAX;
    // SAFETY: live handles; NULL with a count of 0 is the empty batch, NULL report.
    unsafe {
        assert_eq!(memq_ack_consumer_committed(c, 0, &mut committed), OK);
        assert_eq!(memq_deliveries_ack_all(null(), 0, null_mut()), OK);
        assert_eq!(
            memq_deliveries_ack_all(null(), 1, null_mut()),
            memq_status::NullPointer
        );
    }
    assert_eq!(committed, 4);
    assert_eq!(ack_stats(t, "g").acked, 4);
    batch.into_iter().for_each(free);
    // SAFETY: live handles, each freed once.
    unsafe {
        memq_ack_consumer_free(c);
        memq_topic_free(t);
    }
}
