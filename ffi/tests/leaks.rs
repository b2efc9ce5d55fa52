//! Nothing leaks through the C ABI, on the good paths or the bad ones: an allocator that
//! counts the bytes each thread holds checks that a sequence of calls (all handles freed)
//! gives back everything it took. The sequence runs once first, so that what lives as
//! long as a thread or the process (the waker of a blocking thread, the shared clock)
//! is already there when counting starts.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ffi::c_void;
use std::ptr::{null, null_mut};
use std::task::Waker;
use std::time::Duration;

use common::*;
use memq::*;
use memq_core::Timer;

struct Counting;

thread_local! {
    /// Bytes allocated minus bytes freed by this thread.
    static HELD: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    // `try_with`: the allocator may run while the thread's locals are torn down.
    let _ = HELD.try_with(|h| h.set(h.get() + delta));
}

// SAFETY: every call is forwarded to the system allocator unchanged; the bookkeeping
// allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded; `ptr` came from this allocator with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded; `ptr` came from this allocator with `layout`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn held() -> isize {
    HELD.with(Cell::get)
}

/// Runs `calls` twice and checks that the second run gives back every byte it took.
fn no_leak(calls: impl Fn()) {
    calls();
    let before = held();
    calls();
    assert_eq!(held() - before, 0, "bytes kept by one run");
}

unsafe extern "C" fn free_boxed(user_data: *mut c_void, _data: *const u8, _len: usize) {
    // SAFETY: `user_data` is the `Box<Vec<u8>>` given to memq, released exactly once.
    drop(unsafe { Box::from_raw(user_data.cast::<Vec<u8>>()) });
}

/// Publishes a heap buffer without copying; memq frees it through `free_boxed`, or, if
/// the publish fails, hands it back and this frees it (so a buffer released twice, or
/// never, shows up here as a crash or a leak).
fn publish_boxed(t: *const memq_topic, payload: &[u8], timeout_ms: i64) -> memq_status {
    let buf = Box::new(payload.to_vec());
    let (data, len) = (buf.as_ptr(), buf.len());
    let user = Box::into_raw(buf);
    // SAFETY: the vector stays alive and unchanged until `free_boxed` drops it.
    let st = unsafe {
        memq_topic_publish_owned(
            t,
            data,
            len,
            Some(free_boxed),
            user.cast(),
            timeout_ms,
            null_mut(),
        )
    };
    if st != OK {
        // SAFETY: not published, so memq never calls `free_boxed` for it: still ours.
        drop(unsafe { Box::from_raw(user) });
    }
    st
}

#[test]
fn bad_input_leaks_nothing() {
    no_leak(|| {
        // SAFETY: every pointer is NULL, live, or valid for its use; each handle is
        // freed once.
        unsafe {
            let mut t = null_mut();
            assert_eq!(
                memq_topic_new(&config(0, 1, memq_overflow::Block), &mut t),
                memq_status::InvalidArgument
            );
            let mut c = config(4, 1, memq_overflow::Block);
            c.overflow = 42;
            assert_eq!(memq_topic_new(&c, &mut t), memq_status::InvalidArgument);
            assert_eq!(
                memq_topic_new(&config(usize::MAX / 2, 1, memq_overflow::Block), &mut t),
                memq_status::AllocFailed
            );
            let t = topic(2);
            assert_eq!(
                memq_topic_publish(t, null(), 4, 0, null_mut()),
                memq_status::NullPointer
            );
            assert_eq!(
                memq_topic_publish_to(t, 9, b"x".as_ptr(), 1, 0, null_mut()),
                memq_status::OutOfRange
            );
            let items = [
                memq_slice {
                    data: b"a".as_ptr(),
                    len: 1,
                },
                memq_slice {
                    data: null(),
                    len: 1,
                },
            ];
            assert_eq!(
                memq_topic_publish_batch(t, items.as_ptr(), 2, 0, null_mut()),
                memq_status::NullPointer
            );
            assert_eq!(
                memq_subscriber_new(t, 99, 0, &mut null_mut()),
                memq_status::InvalidArgument
            );
            assert_eq!(
                memq_consumer_new(t, c"g".as_ptr(), 99, 0, &mut null_mut()),
                memq_status::InvalidArgument
            );
            assert_eq!(
                memq_consumer_new(
                    t,
                    c"g".as_ptr(),
                    memq_start::Offset as u32,
                    5,
                    &mut null_mut()
                ),
                memq_status::OutOfRange
            );
            // Zero-copy publishes that fail release their buffer.
            assert_eq!(publish_boxed(null(), b"lost", 0), memq_status::NullPointer);
            let s = subscribe(t, memq_start::Earliest);
            assert_eq!(publish_boxed(t, b"owned", 0), OK);
            assert_eq!(publish_boxed(t, b"owned", 0), OK);
            assert_eq!(publish_boxed(t, b"full", 0), memq_status::Full);
            assert_eq!(publish_boxed(t, b"full", 2), memq_status::Timeout);
            // A message kept back for a too-small buffer, then the topic closed.
            let mut len = 0;
            assert_eq!(
                memq_subscriber_recv_into(s, 0, null_mut(), 0, &mut len, null_mut(), null_mut()),
                memq_status::BufferTooSmall
            );
            assert_eq!(memq_topic_close(t), OK);
            assert_eq!(publish_boxed(t, b"closed", -1), memq_status::Closed);
            let mut msgs = [null_mut(); 4];
            let mut n = 0;
            assert_eq!(
                memq_subscriber_recv_many(s, 0, msgs.as_mut_ptr(), 0, &mut n, null_mut()),
                memq_status::InvalidArgument
            );
            assert_eq!(
                memq_subscriber_recv_many(s, 0, msgs.as_mut_ptr(), 4, &mut n, null_mut()),
                OK
            );
            memq_message_free_many(msgs.as_mut_ptr(), n);
            let mut m = null_mut();
            assert_eq!(memq_subscriber_recv(s, 0, &mut m, null_mut()), OK);
            memq_message_free(m);
            assert_eq!(
                memq_subscriber_recv(s, -1, &mut m, null_mut()),
                memq_status::Closed
            );
            memq_subscriber_free(s);
            memq_topic_free(t);

            // A consumer freed after a too-small receive (the message stays in the group).
            let t = topic(2);
            let g = member(t, "g");
            assert_eq!(publish_boxed(t, b"kept", 0), OK);
            assert_eq!(
                memq_consumer_recv_into(g, 0, null_mut(), 0, &mut len, null_mut(), null_mut()),
                memq_status::BufferTooSmall
            );
            memq_consumer_free(g);
            let mut gs = memq_group_stats::default();
            assert_eq!(
                memq_topic_get_group_stats(t, c"other".as_ptr(), &mut gs),
                memq_status::UnknownGroup
            );
            memq_topic_free(t);

            // The broker's failures.
            let mut b = null_mut();
            assert_eq!(memq_broker_new(&mut b), OK);
            let mut bt = null_mut();
            assert_eq!(
                memq_broker_create_topic(
                    b,
                    c"t".as_ptr(),
                    &config(2, 1, memq_overflow::Block),
                    &mut bt
                ),
                OK
            );
            assert_eq!(
                memq_broker_create_topic(
                    b,
                    c"t".as_ptr(),
                    &config(2, 1, memq_overflow::Block),
                    &mut null_mut()
                ),
                memq_status::TopicExists
            );
            assert_eq!(
                memq_broker_create_topic(
                    b,
                    c"u".as_ptr(),
                    &config(0, 1, memq_overflow::Block),
                    &mut null_mut()
                ),
                memq_status::InvalidArgument
            );
            assert_eq!(
                memq_broker_get_topic(b, c"none".as_ptr(), &mut null_mut()),
                memq_status::UnknownTopic
            );
            assert_eq!(
                memq_broker_delete_topic(b, c"none".as_ptr()),
                memq_status::UnknownTopic
            );
            assert_eq!(publish_boxed(bt, b"in broker", 0), OK);
            memq_topic_free(bt);
            memq_broker_free(b);

            memq_topic_free(null_mut());
            memq_broker_free(null_mut());
            memq_subscriber_free(null_mut());
            memq_consumer_free(null_mut());
            memq_message_free(null_mut());
            memq_message_free_many(null_mut(), 3);
        }
    });
}

/// The explicit-ack paths, good and bad: deliveries acked, nacked, rejected, dead-lettered
/// and freed unsettled; settling twice; consumers freed with leases; dead letters read.
/// Only calls that do not wait, so that no timer thread allocates on this thread's
/// behalf.
#[test]
fn acknowledgements_leak_nothing() {
    no_leak(|| {
        // SAFETY: every pointer is NULL, live, or valid for its use; each handle is
        // freed once.
        unsafe {
            let mut dlt = null_mut();
            assert_eq!(
                memq_dead_letter_topic_new(&config(8, 1, memq_overflow::Block), &mut dlt),
                OK
            );
            let mut dls = null_mut();
            assert_eq!(memq_dead_letter_subscriber_new(dlt, 0, 0, &mut dls), OK);
            let mut b = null_mut();
            assert_eq!(memq_broker_new(&mut b), OK);
            let mut t = null_mut();
            assert_eq!(
                memq_broker_create_topic(
                    b,
                    c"jobs".as_ptr(),
                    &config(8, 1, memq_overflow::Block),
                    &mut t
                ),
                OK
            );
            let mut cfg = memq_ack_config::default();
            assert_eq!(memq_ack_config_init(&mut cfg), OK);
            cfg.max_deliveries = 2;
            cfg.dead_letter = dlt;
            let mut bad = cfg;
            bad.max_in_flight = 0;
            let mut c = null_mut();
            assert_eq!(
                memq_ack_consumer_new(t, c"g".as_ptr(), 0, 0, &bad, &mut c),
                memq_status::InvalidArgument
            );
            let auto = member(t, "auto");
            assert_eq!(
                memq_ack_consumer_new(t, c"auto".as_ptr(), 0, 0, &cfg, &mut c),
                memq_status::GroupModeMismatch
            );
            memq_consumer_free(auto);
            assert_eq!(
                memq_ack_consumer_new(t, c"g".as_ptr(), 0, 0, &cfg, &mut c),
                OK
            );
            memq_dead_letter_topic_free(dlt);
            for payload in [&b"ack"[..], b"reject", b"poison", b"held"] {
                publish(t, payload);
            }
            let recv = |c| {
                let mut d = null_mut();
                assert_eq!(memq_ack_consumer_recv(c, 0, &mut d, null_mut()), OK);
                d
            };
            let d = recv(c);
            assert_eq!(memq_delivery_ack(d), OK);
            assert_eq!(memq_delivery_ack(d), memq_status::LeaseExpired);
            memq_delivery_free(d);
            let d = recv(c);
            assert_eq!(memq_delivery_reject(d), OK);
            memq_delivery_free(d);
            let d = recv(c);
            assert_eq!(memq_delivery_nack(d), OK);
            memq_delivery_free(d);
            // The redelivery of "poison", freed unsettled: its second and last delivery.
            memq_delivery_free(recv(c));
            let held = recv(c);
            let mut pending = 0;
            assert_eq!(memq_ack_consumer_pending(c, &mut pending), OK);
            assert_eq!(pending, 1);
            let mut gs = memq_ack_group_stats::default();
            assert_eq!(
                memq_topic_get_ack_group_stats(t, c"g".as_ptr(), &mut gs),
                OK
            );
            assert_eq!((gs.acked, gs.dead_lettered), (1, 2));
            for _ in 0..2 {
                let mut l = null_mut();
                assert_eq!(
                    memq_dead_letter_subscriber_recv(dls, 0, &mut l, null_mut()),
                    OK
                );
                let mut info = memq_dead_letter_info::default();
                assert_eq!(memq_dead_letter_get_info(l, &mut info), OK);
                assert!(!info.topic.is_null() && !info.group.is_null());
                memq_dead_letter_free(l);
            }
            // A consumer freed with a lease out, and its delivery freed after it.
            memq_ack_consumer_free(c);
            assert_eq!(memq_delivery_touch(held), memq_status::LeaseExpired);
            memq_delivery_free(held);
            memq_topic_free(t);
            memq_broker_free(b);
            memq_dead_letter_subscriber_free(dls);

            memq_ack_consumer_free(null_mut());
            memq_delivery_free(null_mut());
            memq_dead_letter_topic_free(null_mut());
            memq_dead_letter_subscriber_free(null_mut());
            memq_dead_letter_free(null_mut());
        }
    });
}

/// A wait that times out leaves a timer wake-up behind (a lease to run out, a TTL to
/// expire, an hour away); once the consumer or the publish that asked for it is gone, the
/// wake-up is withdrawn and what it held is freed, not kept until its time.
#[test]
fn timed_out_waits_leak_nothing() {
    // The shared timer thread is kept running through both runs by a wake-up of its own:
    // starting it allocates here and frees on that thread, which is not a leak.
    let keep = memq_core::ThreadTimer::global()
        .wake_after_cancellable(Duration::from_secs(3600), Waker::noop().clone());
    assert!(keep.is_some(), "the thread timer can withdraw");
    no_leak(|| {
        // SAFETY: every pointer is NULL, live, or valid for its use; each handle is
        // freed once.
        unsafe {
            let t = topic(4);
            let mut cfg = memq_ack_config::default();
            assert_eq!(memq_ack_config_init(&mut cfg), OK);
            cfg.ack_wait_ms = 3_600_000;
            let mut c = null_mut();
            assert_eq!(
                memq_ack_consumer_new(t, c"g".as_ptr(), 0, 0, &cfg, &mut c),
                OK
            );
            publish(t, b"held");
            let mut d = null_mut();
            assert_eq!(memq_ack_consumer_recv(c, 0, &mut d, null_mut()), OK);
            let mut none = null_mut();
            assert_eq!(
                memq_ack_consumer_recv(c, 5, &mut none, null_mut()),
                memq_status::Timeout
            );
            assert_eq!(memq_delivery_ack(d), OK);
            memq_delivery_free(d);
            memq_ack_consumer_free(c);
            memq_topic_free(t);

            let mut c = config(1, 1, memq_overflow::Block);
            c.ttl_ms = 3_600_000;
            let t = topic_with(&c);
            let s = subscribe(t, memq_start::Earliest);
            publish(t, b"kept");
            assert_eq!(
                memq_topic_publish(t, b"late".as_ptr(), 4, 5, null_mut()),
                memq_status::Timeout
            );
            memq_subscriber_free(s);
            memq_topic_free(t);
        }
    });
    drop(keep);
}
