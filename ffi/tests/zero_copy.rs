//! Zero copy in (`memq_topic_publish_owned`) and out (message handles borrow the shared
//! payload): no byte is copied, and the caller's release function runs exactly once, at
//! the right time, whatever happens.

mod common;

use std::ffi::c_void;
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use common::*;
use memq::*;

/// What the release function saw: how often it ran, and with what.
#[derive(Default)]
struct Released {
    calls: AtomicUsize,
    last: Mutex<Option<(usize, usize)>>,
}

unsafe extern "C" fn release(user_data: *mut c_void, data: *const u8, len: usize) {
    // SAFETY: every test passes a `Released` that outlives the topic and the messages.
    let r = unsafe { &*user_data.cast::<Released>() };
    r.calls.fetch_add(1, Ordering::SeqCst);
    *r.last.lock().unwrap() = Some((data as usize, len));
}

fn calls(r: &Released) -> usize {
    r.calls.load(Ordering::SeqCst)
}

/// Publishes `buf` without a copy, returning the status.
fn publish_owned(t: *const memq_topic, buf: &[u8], r: &Released, timeout_ms: i64) -> memq_status {
    let user_data = (r as *const Released).cast_mut().cast();
    let mut receipt = memq_receipt::default();
    // SAFETY: `buf` and `r` outlive every use the topic makes of them (each test frees
    // its topic and messages before they go).
    unsafe {
        memq_topic_publish_owned(
            t,
            buf.as_ptr(),
            buf.len(),
            Some(release),
            user_data,
            timeout_ms,
            &mut receipt,
        )
    }
}

#[test]
fn readers_borrow_the_callers_buffer_and_release_it_once() {
    let frame = vec![0xAB_u8; 1 << 20];
    let released = Released::default();
    let t = topic(2);
    let a = subscribe(t, memq_start::Earliest);
    let b = subscribe(t, memq_start::Earliest);
    assert_eq!(publish_owned(t, &frame, &released, 0), OK);
    let (mut ma, mut mb) = (null_mut(), null_mut());
    // SAFETY: live handles, valid out-pointers; each freed once.
    unsafe {
        assert_eq!(memq_subscriber_recv(a, 0, &mut ma, null_mut()), OK);
        assert_eq!(memq_subscriber_recv(b, 0, &mut mb, null_mut()), OK);
        for m in [ma, mb] {
            let (mut data, mut len) = (null(), 0);
            assert_eq!(memq_message_data(m, &mut data), OK);
            assert_eq!(memq_message_len(m, &mut len), OK);
            assert_eq!(
                (data, len),
                (frame.as_ptr(), frame.len()),
                "no copy, in or out"
            );
        }
        memq_message_free(ma);
        assert_eq!(
            calls(&released),
            0,
            "another message and the log still hold it"
        );
        memq_message_free(mb);
        assert_eq!(calls(&released), 0, "the log still holds it");
        memq_subscriber_free(a);
        memq_subscriber_free(b);
        memq_topic_free(t);
    }
    assert_eq!(calls(&released), 1);
    let want = Some((frame.as_ptr() as usize, frame.len()));
    assert_eq!(*released.last.lock().unwrap(), want);
}

#[test]
fn eviction_releases_when_no_message_handle_is_left() {
    let released = Released::default();
    let frame = b"frame".to_vec();
    let t = topic_with(&config(1, 1, memq_overflow::DropOldest));
    let s = subscribe(t, memq_start::Earliest);
    assert_eq!(publish_owned(t, &frame, &released, 0), OK);
    let mut m = null_mut();
    // SAFETY: live handles, valid out-pointers; each freed once.
    unsafe {
        assert_eq!(memq_subscriber_recv(s, 0, &mut m, null_mut()), OK);
        publish(t, b"evicts the frame");
        assert_eq!(calls(&released), 0, "the received message still borrows it");
        memq_message_free(m);
        assert_eq!(calls(&released), 1);
        memq_subscriber_free(s);
        memq_topic_free(t);
    }
    assert_eq!(calls(&released), 1);
}

#[test]
fn expiry_releases_the_buffer_as_the_message_leaves_the_log() {
    // From review: expired messages stayed in their slots until a publish reused them, so
    // their buffers were not released, which may be never if publishing stops.
    let released = Released::default();
    let frame = b"frame".to_vec();
    let mut c = config(4, 1, memq_overflow::Block);
    c.ttl_ms = 20;
    let t = topic_with(&c);
    let s = subscribe(t, memq_start::Earliest);
    assert_eq!(publish_owned(t, &frame, &released, 0), OK);
    assert_eq!(publish_owned(t, &frame, &released, 0), OK);
    std::thread::sleep(std::time::Duration::from_millis(60));
    // The visit that applies the TTL lets them go.
    assert_eq!(recv(s, 0), Err(memq_status::Lagged));
    assert_eq!(calls(&released), 2);
    // SAFETY: live handles, each freed once.
    unsafe {
        memq_subscriber_free(s);
        memq_topic_free(t);
    }
    assert_eq!(calls(&released), 2);
}

#[test]
fn a_message_not_published_stays_with_its_caller() {
    let frame = b"frame".to_vec();
    let released = Released::default();
    let full = topic(1);
    let reader = subscribe(full, memq_start::Earliest);
    publish(full, b"fills it");
    let closed = topic(1);
    // SAFETY: live topic.
    assert_eq!(unsafe { memq_topic_close(closed) }, OK);
    let cases = [
        (null(), frame.as_ptr(), 0, memq_status::NullPointer),
        (full.cast_const(), null(), 0, memq_status::NullPointer),
        (full.cast_const(), frame.as_ptr(), 0, memq_status::Full),
        (full.cast_const(), frame.as_ptr(), 5, memq_status::Timeout),
        (closed.cast_const(), frame.as_ptr(), -1, memq_status::Closed),
    ];
    for (n, (t, data, timeout, want)) in cases.into_iter().enumerate() {
        let user_data = (&released as *const Released).cast_mut().cast();
        // SAFETY: `frame` and `released` outlive the call; NULL cases must be rejected.
        let st = unsafe {
            memq_topic_publish_owned(
                t,
                data,
                frame.len(),
                Some(release),
                user_data,
                timeout,
                null_mut(),
            )
        };
        assert_eq!(st, want, "case {n}");
        assert_eq!(
            calls(&released),
            0,
            "case {n}: not released, the caller keeps it"
        );
    }
    // The caller may publish the same buffer again once there is room; memq releases it
    // then, once.
    assert_eq!(recv(reader, 0).unwrap(), b"fills it");
    assert_eq!(publish_owned(full, &frame, &released, 0), OK);
    assert_eq!(recv(reader, 0).unwrap(), frame);
    assert_eq!(calls(&released), 0, "still retained by the log");
    publish(full, b"evicts it");
    assert_eq!(calls(&released), 1);
    assert_eq!(
        *released.last.lock().unwrap(),
        Some((frame.as_ptr() as usize, frame.len()))
    );
    // SAFETY: live handles, freed once.
    unsafe {
        memq_subscriber_free(reader);
        memq_topic_free(full);
        memq_topic_free(closed);
    }
}

#[test]
fn static_data_needs_no_release_function() {
    static DATA: [u8; 4] = *b"stat";
    let t = topic(2);
    let s = subscribe(t, memq_start::Earliest);
    // SAFETY: static data, no release function, NULL user data and receipt.
    let st =
        unsafe { memq_topic_publish_owned(t, DATA.as_ptr(), 4, None, null_mut(), 0, null_mut()) };
    assert_eq!(st, OK);
    let mut m = null_mut();
    let mut data = null();
    // SAFETY: live handles, valid out-pointers; each freed once.
    unsafe {
        assert_eq!(memq_subscriber_recv(s, 0, &mut m, null_mut()), OK);
        assert_eq!(memq_message_data(m, &mut data), OK);
        assert_eq!(data, DATA.as_ptr());
        memq_message_free(m);
        memq_subscriber_free(s);
        memq_topic_free(t);
    }
}

#[test]
fn released_on_the_thread_that_lets_go_last() {
    let released = Box::leak(Box::new(Released::default()));
    let frame: &'static [u8] = Box::leak(vec![7u8; 4096].into_boxed_slice());
    let t = topic(1);
    let s = subscribe(t, memq_start::Earliest);
    assert_eq!(publish_owned(t, frame, released, 0), OK);
    let mut m = null_mut();
    // SAFETY: live handles, valid out-pointers; each freed once.
    unsafe {
        assert_eq!(memq_subscriber_recv(s, 0, &mut m, null_mut()), OK);
        memq_subscriber_free(s);
        memq_topic_free(t);
    }
    assert_eq!(calls(released), 0, "the message still borrows it");
    let m = m as usize;
    std::thread::spawn(move || {
        // SAFETY: the message handle moves to this thread and is freed once.
        unsafe { memq_message_free(m as *mut memq_message) };
    })
    .join()
    .unwrap();
    assert_eq!(calls(released), 1);
}
