//! The error detail (`memq_last_error_message`): each failure says which argument was
//! wrong and why, in the words of memq-core's `Display`; a success leaves it; each
//! thread has its own; and the same situation has the same status as in Rust.

mod common;

use std::ffi::CStr;
use std::ptr::{null, null_mut};

use common::*;
use memq::*;
use memq_core::{Error, PublishError, Topic, TopicConfig};

fn last_error() -> String {
    // SAFETY: never NULL, NUL-terminated, valid until the next failing call here.
    unsafe { CStr::from_ptr(memq_last_error_message()) }
        .to_str()
        .unwrap()
        .to_owned()
}

#[test]
fn a_fresh_thread_has_no_error() {
    std::thread::spawn(|| assert_eq!(last_error(), ""))
        .join()
        .unwrap();
}

#[test]
fn zero_capacity_says_so_in_rusts_words() {
    let mut c = config(0, 1, memq_overflow::Block);
    let mut t = null_mut();
    // SAFETY: valid config and out-pointer.
    let st = unsafe { memq_topic_new(&c, &mut t) };
    assert_eq!(st, memq_status::InvalidArgument);
    assert!(t.is_null());
    assert_eq!(last_error(), Error::ZeroCapacity.to_string());
    assert_eq!(last_error(), "topic capacity must be at least 1");

    c.capacity = 4;
    c.partitions = 0;
    // SAFETY: as above.
    let st = unsafe { memq_topic_new(&c, &mut t) };
    assert_eq!(st, memq_status::InvalidArgument);
    assert_eq!(last_error(), Error::ZeroPartitions.to_string());

    c.partitions = 1;
    c.overflow = 9;
    // SAFETY: as above.
    let st = unsafe { memq_topic_new(&c, &mut t) };
    assert_eq!(st, memq_status::InvalidArgument);
    assert_eq!(
        last_error(),
        "config->overflow: 9 is not a memq_overflow value"
    );

    c.overflow = 0;
    c.flags = 0x10;
    // SAFETY: as above.
    let st = unsafe { memq_topic_new(&c, &mut t) };
    assert_eq!(st, memq_status::InvalidArgument);
    assert_eq!(last_error(), "config->flags: unknown flags 0x10");
    assert!(t.is_null());
}

#[test]
fn null_pointers_are_named() {
    let t = topic(4);
    let mut stats = memq_topic_stats::default();
    // SAFETY: NULL arguments, rejected before use; `t` is live.
    unsafe {
        assert_eq!(
            memq_topic_get_stats(null(), &mut stats),
            memq_status::NullPointer
        );
        assert_eq!(last_error(), "topic is NULL");
        assert_eq!(
            memq_topic_get_stats(t, null_mut()),
            memq_status::NullPointer
        );
        assert_eq!(last_error(), "stats_out is NULL");
        assert_eq!(
            memq_topic_publish(t, null(), 3, 0, null_mut()),
            memq_status::NullPointer
        );
        assert_eq!(last_error(), "data is NULL with a length of 3");
        let s = subscribe(t, memq_start::Earliest);
        let mut n = 0;
        assert_eq!(
            memq_subscriber_recv_many(s, 0, null_mut(), 4, &mut n, null_mut()),
            memq_status::NullPointer
        );
        assert_eq!(last_error(), "messages is NULL");
        let mut m = null_mut();
        assert_eq!(
            memq_subscriber_recv_many(s, 0, &mut m, 0, &mut n, null_mut()),
            memq_status::InvalidArgument
        );
        assert_eq!(last_error(), "capacity: a batch needs room for at least 1");
        memq_subscriber_free(s);
        memq_topic_free(t);
    }
}

#[test]
fn an_over_capacity_batch_is_full_in_rust_and_in_c() {
    // Rust: a batch larger than the capacity is `Full`, whatever the wait.
    let topic_rs = Topic::new(TopicConfig::new(2)).unwrap();
    let err = topic_rs
        .try_publish_batch(vec![1u8, 2, 3])
        .expect_err("3 messages into capacity 2");
    assert!(matches!(err, PublishError::Full(_)), "{err:?}");

    let t = topic(2);
    let items = [memq_slice {
        data: b"x".as_ptr(),
        len: 1,
    }; 3];
    for timeout_ms in [0, 5, -1] {
        // SAFETY: live topic, readable items.
        let st = unsafe { memq_topic_publish_batch(t, items.as_ptr(), 3, timeout_ms, null_mut()) };
        assert_eq!(st, memq_status::Full, "timeout {timeout_ms}");
        assert_eq!(
            last_error(),
            "batch of 3 messages can never fit in a partition of capacity 2"
        );
    }
    // SAFETY: `t` is live and freed once.
    unsafe { memq_topic_free(t) };
}

#[test]
fn receive_misses_and_ack_config_use_rusts_words() {
    let t = topic(4);
    let s = subscribe(t, memq_start::Earliest);
    let mut m = null_mut();
    // SAFETY: live handles and valid out-pointers.
    unsafe {
        assert_eq!(
            memq_subscriber_recv(s, 0, &mut m, null_mut()),
            memq_status::Empty
        );
        assert_eq!(last_error(), "no message available");
        assert_eq!(
            memq_subscriber_recv(s, 1, &mut m, null_mut()),
            memq_status::Timeout
        );
        assert_eq!(last_error(), "timed out waiting for a message");
        let mut ack = memq_ack_config::default();
        assert_eq!(memq_ack_config_init(&mut ack), OK);
        ack.ack_wait_ms = 0;
        let mut c = null_mut();
        assert_eq!(
            memq_ack_consumer_new(t, c"g".as_ptr(), 0, 0, &ack, &mut c),
            memq_status::InvalidArgument
        );
        assert_eq!(last_error(), Error::ZeroAckWait.to_string());
        ack.ack_wait_ms = 10;
        ack.max_in_flight = 0;
        assert_eq!(
            memq_ack_consumer_new(t, c"g".as_ptr(), 0, 0, &ack, &mut c),
            memq_status::InvalidArgument
        );
        assert_eq!(last_error(), Error::ZeroInFlight.to_string());
        assert!(c.is_null());
        memq_topic_close(t);
        assert_eq!(
            memq_subscriber_recv(s, 0, &mut m, null_mut()),
            memq_status::Closed
        );
        assert_eq!(last_error(), "topic is closed and drained");
        memq_subscriber_free(s);
        memq_topic_free(t);
    }
}

#[test]
fn success_leaves_the_last_error_and_threads_keep_their_own() {
    let mut t = null_mut();
    // SAFETY: valid config and out-pointer.
    let st = unsafe { memq_topic_new(&config(0, 1, memq_overflow::Block), &mut t) };
    assert_eq!(st, memq_status::InvalidArgument);
    let t = topic(4);
    publish(t, b"ok");
    assert_eq!(last_error(), "topic capacity must be at least 1");
    let other = std::thread::spawn(|| {
        // SAFETY: a NULL out-pointer, rejected before use.
        let st = unsafe { memq_topic_config_init(null_mut()) };
        assert_eq!(st, memq_status::NullPointer);
        last_error()
    })
    .join()
    .unwrap();
    assert_eq!(other, "config is NULL");
    assert_eq!(last_error(), "topic capacity must be at least 1");
    // SAFETY: `t` is live and freed once.
    unsafe { memq_topic_free(t) };
}

#[test]
fn a_message_too_large_for_the_buffer_gives_the_sizes() {
    let t = topic(4);
    let s = subscribe(t, memq_start::Earliest);
    publish(t, b"twelve bytes");
    let mut buf = [0u8; 4];
    let mut len = 0;
    // SAFETY: live handles, a writable 4-byte buffer, valid out-pointers.
    let st = unsafe {
        memq_subscriber_recv_into(s, 0, buf.as_mut_ptr(), 4, &mut len, null_mut(), null_mut())
    };
    assert_eq!(st, memq_status::BufferTooSmall);
    assert_eq!(len, 12);
    assert_eq!(
        last_error(),
        "buf_len: the payload is 12 bytes, the buffer 4"
    );
    // SAFETY: live handles, freed once.
    unsafe {
        memq_subscriber_free(s);
        memq_topic_free(t);
    }
}
