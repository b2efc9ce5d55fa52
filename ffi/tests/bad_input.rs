//! Bad input through the C ABI: every call returns its status, writes no out-parameter,
//! and crashes nothing. (tests/leaks.rs checks that none of it leaks.)

mod common;

use std::ffi::CStr;
use std::ptr::{null, null_mut};

use common::*;
use memq::*;

/// A value no call may write on failure.
const SENTINEL: usize = 0xDEAD_BEEF;

fn dangling_topic() -> *mut memq_topic {
    SENTINEL as *mut memq_topic
}

#[test]
fn null_handles_are_null_pointer() {
    let data = b"x";
    let mut receipt = memq_receipt {
        offset: 7,
        partition: 7,
    };
    let mut msg = dangling_topic().cast::<memq_message>();
    let mut n = SENTINEL;
    let mut sub = null_mut();
    let mut cons = null_mut();
    let mut flag = true;
    let mut stats = memq_topic_stats::default();
    let name = c"g";
    // SAFETY: every handle is NULL, which each export must reject before reading.
    unsafe {
        for st in [
            memq_topic_publish(null(), data.as_ptr(), 1, 0, &mut receipt),
            memq_topic_publish_keyed(null(), data.as_ptr(), 1, data.as_ptr(), 1, 0, &mut receipt),
            memq_topic_publish_to(null(), 0, data.as_ptr(), 1, 0, &mut receipt),
            memq_topic_publish_owned(null(), data.as_ptr(), 1, None, null_mut(), 0, &mut receipt),
            memq_topic_publish_batch(null(), null(), 0, 0, &mut receipt),
            memq_topic_publish_batch_to(null(), 0, null(), 0, 0, &mut receipt),
            memq_topic_publish_batch_keyed(null(), null(), 0, null(), 0, 0, &mut receipt),
            memq_topic_close(null()),
            memq_topic_is_closed(null(), &mut flag),
            memq_topic_is_on_ring(null(), &mut flag),
            memq_topic_get_stats(null(), &mut stats),
            memq_topic_clone(null(), &mut null_mut()),
            memq_subscriber_new(null(), 0, 0, &mut sub),
            memq_subscriber_new_partition(null(), 0, 0, 0, &mut sub),
            memq_consumer_new(null(), name.as_ptr(), 0, 0, &mut cons),
            memq_subscriber_recv(null(), 0, &mut msg, null_mut()),
            memq_subscriber_recv_many(null(), 0, &mut msg, 1, &mut n, null_mut()),
            memq_subscriber_recv_into(null(), 0, null_mut(), 0, &mut n, null_mut(), null_mut()),
            memq_subscriber_lag(null(), &mut 0),
            memq_consumer_recv(null(), 0, &mut msg, null_mut()),
            memq_consumer_recv_many(null(), 0, &mut msg, 1, &mut n, null_mut()),
            memq_consumer_recv_into(null(), 0, null_mut(), 0, &mut n, null_mut(), null_mut()),
            memq_consumer_committed(null(), 0, &mut 0),
            memq_message_data(null(), &mut null()),
            memq_message_len(null(), &mut n),
            memq_message_offset(null(), &mut 0),
            memq_message_partition(null(), &mut 0),
            memq_message_timestamp(null(), &mut 0),
            memq_message_get_meta(null(), &mut memq_message_meta::default()),
            memq_message_copy(null(), null_mut(), 0, &mut n),
            memq_broker_create_topic(
                null(),
                name.as_ptr(),
                &config(1, 1, memq_overflow::Block),
                &mut null_mut(),
            ),
            memq_broker_get_topic(null(), name.as_ptr(), &mut null_mut()),
            memq_broker_delete_topic(null(), name.as_ptr()),
            memq_broker_topic_count(null(), &mut n),
        ] {
            assert_eq!(st, memq_status::NullPointer);
        }
    }
    assert_eq!(
        receipt,
        memq_receipt {
            offset: 7,
            partition: 7
        }
    );
    assert_eq!(msg, dangling_topic().cast());
    assert_eq!(n, SENTINEL);
    assert!(sub.is_null() && cons.is_null() && flag);
    assert_eq!(stats, memq_topic_stats::default());
}

#[test]
fn null_out_parameters_are_null_pointer() {
    let t = topic(4);
    let s = subscribe(t, memq_start::Earliest);
    let c = member(t, "g");
    let mut b = null_mut();
    // SAFETY: live handles; every required out-pointer is NULL, which must be rejected.
    unsafe {
        assert_eq!(memq_broker_new(&mut b), OK);
        for st in [
            memq_topic_config_init(null_mut()),
            memq_topic_new(&config(1, 1, memq_overflow::Block), null_mut()),
            memq_topic_new(null(), &mut null_mut()),
            memq_topic_clone(t, null_mut()),
            memq_topic_is_closed(t, null_mut()),
            memq_topic_is_on_ring(t, null_mut()),
            memq_topic_get_stats(t, null_mut()),
            memq_topic_get_partition_stats(t, 0, null_mut()),
            memq_topic_get_group_stats(t, c"g".as_ptr(), null_mut()),
            memq_topic_get_group_stats(t, null(), &mut memq_group_stats::default()),
            memq_key_partition(null(), 0, 1, null_mut()),
            memq_subscriber_new(t, 0, 0, null_mut()),
            memq_subscriber_new_partition(t, 0, 0, 0, null_mut()),
            memq_consumer_new(t, c"g".as_ptr(), 0, 0, null_mut()),
            memq_consumer_new(t, null(), 0, 0, &mut null_mut()),
            memq_subscriber_recv(s, 0, null_mut(), null_mut()),
            memq_subscriber_recv_many(s, 0, null_mut(), 4, &mut 0, null_mut()),
            memq_subscriber_recv_many(s, 0, &mut null_mut(), 1, null_mut(), null_mut()),
            memq_subscriber_recv_into(s, 0, null_mut(), 0, null_mut(), null_mut(), null_mut()),
            memq_subscriber_lag(s, null_mut()),
            memq_consumer_recv(c, 0, null_mut(), null_mut()),
            memq_consumer_recv_many(c, 0, null_mut(), 4, &mut 0, null_mut()),
            memq_consumer_committed(c, 0, null_mut()),
            memq_broker_new(null_mut()),
            memq_broker_create_topic(
                b,
                null(),
                &config(1, 1, memq_overflow::Block),
                &mut null_mut(),
            ),
            memq_broker_create_topic(b, c"t".as_ptr(), null(), &mut null_mut()),
            memq_broker_create_topic(
                b,
                c"t".as_ptr(),
                &config(1, 1, memq_overflow::Block),
                null_mut(),
            ),
            memq_broker_get_topic(b, c"t".as_ptr(), null_mut()),
            memq_broker_delete_topic(b, null()),
            memq_broker_topic_count(b, null_mut()),
        ] {
            assert_eq!(st, memq_status::NullPointer);
        }
        // Nothing was created by the failed calls.
        let mut count = SENTINEL;
        assert_eq!(memq_broker_topic_count(b, &mut count), OK);
        assert_eq!(count, 0);
        memq_broker_free(b);
        memq_consumer_free(c);
        memq_subscriber_free(s);
        memq_topic_free(t);
    }
}

#[test]
fn null_data_with_nonzero_length() {
    let t = topic(4);
    let mut r = memq_receipt {
        offset: 9,
        partition: 9,
    };
    // SAFETY: live topic; the NULL data pointers must be rejected before any read.
    unsafe {
        assert_eq!(
            memq_topic_publish(t, null(), 3, 0, &mut r),
            memq_status::NullPointer
        );
        assert_eq!(
            memq_topic_publish_keyed(t, null(), 1, b"x".as_ptr(), 1, 0, &mut r),
            memq_status::NullPointer
        );
        assert_eq!(
            memq_topic_publish_keyed(t, b"k".as_ptr(), 1, null(), 1, 0, &mut r),
            memq_status::NullPointer
        );
        assert_eq!(
            memq_topic_publish_to(t, 0, null(), 1, 0, &mut r),
            memq_status::NullPointer
        );
        assert_eq!(
            memq_topic_publish_owned(t, null(), 1, None, null_mut(), 0, &mut r),
            memq_status::NullPointer
        );
        assert_eq!(
            memq_topic_publish_batch(t, null(), 2, 0, &mut r),
            memq_status::NullPointer
        );
        let items = [
            memq_slice {
                data: b"ok".as_ptr(),
                len: 2,
            },
            memq_slice {
                data: null(),
                len: 5,
            },
        ];
        assert_eq!(
            memq_topic_publish_batch(t, items.as_ptr(), 2, 0, &mut r),
            memq_status::NullPointer
        );
        assert_eq!(
            memq_key_partition(null(), 4, 2, &mut 0),
            memq_status::NullPointer
        );
        assert_eq!(
            r,
            memq_receipt {
                offset: 9,
                partition: 9
            }
        );
        // All or nothing: the valid first item of the batch was not published.
        let mut stats = memq_topic_stats::default();
        assert_eq!(memq_topic_get_stats(t, &mut stats), OK);
        assert_eq!(stats.published, 0);

        // NULL with a length of 0 is the empty message, and NULL/0 the empty batch.
        assert_eq!(memq_topic_publish(t, null(), 0, 0, &mut r), OK);
        assert_eq!(
            r,
            memq_receipt {
                offset: 0,
                partition: 0
            }
        );
        assert_eq!(memq_topic_publish_batch(t, null(), 0, 0, &mut r), OK);
        assert_eq!(r.offset, 1);
        let s = subscribe(t, memq_start::Earliest);
        assert_eq!(recv(s, 0), Ok(vec![]));
        memq_subscriber_free(s);
        memq_topic_free(t);
    }
}

#[test]
fn out_of_range_enums_are_invalid_argument() {
    let t = topic(4);
    for overflow in [3, 4, 255, u32::MAX] {
        let mut c = config(4, 1, memq_overflow::Block);
        c.overflow = overflow;
        let mut out = dangling_topic();
        // SAFETY: valid config and out-pointer.
        let st = unsafe { memq_topic_new(&c, &mut out) };
        assert_eq!(st, memq_status::InvalidArgument);
        assert_eq!(out, dangling_topic());
    }
    let mut c = config(4, 1, memq_overflow::Block);
    c.flags = 1 << 7;
    // SAFETY: valid config and out-pointer.
    let st = unsafe { memq_topic_new(&c, &mut null_mut()) };
    assert_eq!(st, memq_status::InvalidArgument);
    for start in [3, 17, u32::MAX] {
        let mut s = null_mut();
        let mut m = null_mut();
        // SAFETY: live topic, valid out-pointers.
        unsafe {
            assert_eq!(
                memq_subscriber_new(t, start, 0, &mut s),
                memq_status::InvalidArgument
            );
            assert_eq!(
                memq_subscriber_new_partition(t, 0, start, 0, &mut s),
                memq_status::InvalidArgument
            );
            assert_eq!(
                memq_consumer_new(t, c"g".as_ptr(), start, 0, &mut m),
                memq_status::InvalidArgument
            );
        }
        assert!(s.is_null() && m.is_null());
    }
    // The group was not created by the rejected calls.
    // SAFETY: live topic, NUL-terminated name, valid out-pointer.
    unsafe {
        let mut gs = memq_group_stats::default();
        assert_eq!(
            memq_topic_get_group_stats(t, c"g".as_ptr(), &mut gs),
            memq_status::UnknownGroup
        );
        memq_topic_free(t);
    }
}

#[test]
fn status_strings() {
    let mut count = 0;
    for (code, status) in (0..).map_while(memq_status::from_code).enumerate() {
        assert_eq!(
            status as u32, code as u32,
            "codes are contiguous and stable"
        );
        count += 1;
        // SAFETY: `memq_status_str` returns a static NUL-terminated string.
        let s = unsafe { CStr::from_ptr(memq_status_str(code as u32)) };
        assert!(!s.is_empty() && s != c"unknown status");
    }
    assert_eq!(count, 22);
    assert_eq!(memq_status::from_code(15), Some(memq_status::Panic));
    assert_eq!(memq_status::from_code(16), Some(memq_status::LeaseExpired));
    assert_eq!(
        memq_status::from_code(17),
        Some(memq_status::GroupModeMismatch)
    );
    assert_eq!(memq_status::from_code(18), Some(memq_status::Locked));
    assert_eq!(memq_status::from_code(21), Some(memq_status::Io));
    for bad in [22, 1000, u32::MAX] {
        assert_eq!(memq_status::from_code(bad), None);
        // SAFETY: as above.
        let s = unsafe { CStr::from_ptr(memq_status_str(bad)) };
        assert_eq!(s, c"unknown status");
    }
    // SAFETY: `memq_version` returns a static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(memq_version()) };
    assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    assert_eq!(memq_status::Ok as u32, 0);
    assert_eq!(memq_status::Panic as u32, 15);
    assert_eq!(memq_status::LeaseExpired as u32, 16);
    assert_eq!(memq_status::GroupModeMismatch as u32, 17);
}

#[test]
fn zero_capacity_and_zero_partitions() {
    for (capacity, partitions) in [(0, 1), (1, 0), (0, 0)] {
        let c = config(capacity, partitions, memq_overflow::Block);
        let mut t = dangling_topic();
        // SAFETY: valid config and out-pointer.
        let st = unsafe { memq_topic_new(&c, &mut t) };
        assert_eq!(st, memq_status::InvalidArgument);
        assert_eq!(t, dangling_topic());
        let mut b = null_mut();
        // SAFETY: valid broker, name, config and out-pointer.
        unsafe {
            assert_eq!(memq_broker_new(&mut b), OK);
            assert_eq!(
                memq_broker_create_topic(b, c"t".as_ptr(), &c, &mut t),
                memq_status::InvalidArgument
            );
            let mut n = SENTINEL;
            assert_eq!(memq_broker_topic_count(b, &mut n), OK);
            assert_eq!(n, 0);
            memq_broker_free(b);
        }
    }
    // A capacity no machine can hold is reported, not an abort.
    let c = config(usize::MAX / 2, 1, memq_overflow::Block);
    // SAFETY: valid config and out-pointer.
    let st = unsafe { memq_topic_new(&c, &mut null_mut()) };
    assert_eq!(st, memq_status::AllocFailed);
    // SAFETY: valid key and out-pointer.
    let st = unsafe { memq_key_partition(b"k".as_ptr(), 1, 0, &mut 0) };
    assert_eq!(st, memq_status::InvalidArgument);
}

#[test]
fn receiving_on_a_closed_topic() {
    let t = topic(4);
    let s = subscribe(t, memq_start::Earliest);
    let c = member(t, "g");
    publish(t, b"last");
    // SAFETY: live handles, valid out-pointers.
    unsafe {
        assert_eq!(memq_topic_close(t), OK);
        assert_eq!(memq_topic_close(t), OK, "closing twice is harmless");
        let mut closed = false;
        assert_eq!(memq_topic_is_closed(t, &mut closed), OK);
        assert!(closed);
        // Publishing fails, in every form.
        let mut r = memq_receipt::default();
        assert_eq!(
            memq_topic_publish(t, b"x".as_ptr(), 1, -1, &mut r),
            memq_status::Closed
        );
        assert_eq!(
            memq_topic_publish_batch(
                t,
                &memq_slice {
                    data: b"x".as_ptr(),
                    len: 1
                },
                1,
                -1,
                &mut r
            ),
            memq_status::Closed
        );
    }
    // Readers drain what is retained, then get CLOSED, whatever the timeout (a negative
    // one must not hang).
    assert_eq!(recv(s, 0), Ok(b"last".to_vec()));
    assert_eq!(consume(c, -1), Ok(b"last".to_vec()));
    for timeout in [0, 10, -1] {
        assert_eq!(recv(s, timeout), Err(memq_status::Closed));
        assert_eq!(consume(c, timeout), Err(memq_status::Closed));
        let mut msgs = [null_mut(); 4];
        let mut n = SENTINEL;
        let mut len = SENTINEL;
        // SAFETY: live handles, an array of 4, valid out-pointers.
        unsafe {
            assert_eq!(
                memq_subscriber_recv_many(s, timeout, msgs.as_mut_ptr(), 4, &mut n, null_mut()),
                memq_status::Closed
            );
            assert_eq!(
                memq_consumer_recv_many(c, timeout, msgs.as_mut_ptr(), 4, &mut n, null_mut()),
                memq_status::Closed
            );
            assert_eq!(
                memq_subscriber_recv_into(
                    s,
                    timeout,
                    null_mut(),
                    0,
                    &mut len,
                    null_mut(),
                    null_mut()
                ),
                memq_status::Closed
            );
        }
        assert_eq!((n, len), (SENTINEL, SENTINEL));
        assert!(msgs.iter().all(|m| m.is_null()));
    }
    // New readers of a closed topic see CLOSED too.
    let late = subscribe(t, memq_start::Latest);
    assert_eq!(recv(late, -1), Err(memq_status::Closed));
    // SAFETY: live handles, freed once.
    unsafe {
        memq_subscriber_free(late);
        memq_subscriber_free(s);
        memq_consumer_free(c);
        memq_topic_free(t);
    }
}

#[test]
fn freeing_null_does_nothing() {
    // SAFETY: NULL is accepted by every `_free`.
    unsafe {
        memq_topic_free(null_mut());
        memq_broker_free(null_mut());
        memq_subscriber_free(null_mut());
        memq_consumer_free(null_mut());
        memq_message_free(null_mut());
        memq_message_free_many(null_mut(), 10);
        let mut some = [null_mut(); 3];
        memq_message_free_many(some.as_mut_ptr(), some.len());
    }
}

#[test]
fn buffer_too_small_reports_the_length_and_loses_nothing() {
    let t = topic(8);
    let s = subscribe(t, memq_start::Earliest);
    publish(t, b"0123456789");
    publish(t, b"ab");
    let mut buf = [0u8; 4];
    let mut len = SENTINEL;
    let mut meta = memq_message_meta {
        offset: 77,
        ..Default::default()
    };
    // SAFETY: live handles; `buf` has room for `buf.len()` bytes; valid out-pointers.
    unsafe {
        // Into a buffer of 4: too small, the length needed comes back.
        let st =
            memq_subscriber_recv_into(s, 0, buf.as_mut_ptr(), 4, &mut len, &mut meta, null_mut());
        assert_eq!(st, memq_status::BufferTooSmall);
        assert_eq!(len, 10);
        assert_eq!(meta.offset, 77, "meta is written only on success");
        assert_eq!(buf, [0; 4], "nothing is copied");
        // The kept message is not read yet: it still counts in the lag (review finding:
        // it did not, so a caller waiting for lag 0 stopped one message short).
        let mut lag = SENTINEL as u64;
        assert_eq!(memq_subscriber_lag(s, &mut lag), OK);
        assert_eq!(lag, 2);
        // Asking with no buffer at all works the same way.
        len = SENTINEL;
        let st = memq_subscriber_recv_into(s, 0, null_mut(), 0, &mut len, null_mut(), null_mut());
        assert_eq!((st, len), (memq_status::BufferTooSmall, 10));
        // NULL with a nonzero length is rejected before receiving anything.
        let st = memq_subscriber_recv_into(s, 0, null_mut(), 16, &mut len, null_mut(), null_mut());
        assert_eq!(st, memq_status::NullPointer);
        // The kept message comes back first, to a big enough buffer.
        let mut big = [0u8; 16];
        let st =
            memq_subscriber_recv_into(s, -1, big.as_mut_ptr(), 16, &mut len, &mut meta, null_mut());
        assert_eq!((st, len, meta.offset, meta.len), (OK, 10, 0, 10));
        assert_eq!(&big[..10], b"0123456789");
        // A message handle copies the same way.
        let mut m = null_mut();
        assert_eq!(memq_subscriber_recv(s, 0, &mut m, null_mut()), OK);
        len = SENTINEL;
        assert_eq!(
            memq_message_copy(m, buf.as_mut_ptr(), 1, &mut len),
            memq_status::BufferTooSmall
        );
        assert_eq!(len, 2);
        assert_eq!(
            memq_message_copy(m, null_mut(), 5, &mut len),
            memq_status::NullPointer
        );
        assert_eq!(memq_message_copy(m, buf.as_mut_ptr(), 4, &mut len), OK);
        assert_eq!((&buf[..2], len), (&b"ab"[..], 2));
        memq_message_free(m);

        // A kept-back message is also what the next batch or plain receive returns.
        publish(t, b"long enough");
        let st =
            memq_subscriber_recv_into(s, 0, buf.as_mut_ptr(), 4, &mut len, null_mut(), null_mut());
        assert_eq!(st, memq_status::BufferTooSmall);
        let mut msgs = [null_mut(); 4];
        let mut n = 0;
        assert_eq!(
            memq_subscriber_recv_many(s, 0, msgs.as_mut_ptr(), 4, &mut n, null_mut()),
            OK
        );
        assert_eq!(n, 1);
        assert_eq!(take(msgs[0]).0, b"long enough");
        memq_subscriber_free(s);
        memq_topic_free(t);
    }
}

#[test]
fn consumer_keeps_a_message_too_large_for_the_buffer() {
    let t = topic(8);
    let c = member(t, "g");
    publish(t, b"payload");
    let mut len = 0;
    let mut buf = [0u8; 8];
    // SAFETY: live handles, valid buffer and out-pointers.
    unsafe {
        let st =
            memq_consumer_recv_into(c, 0, buf.as_mut_ptr(), 3, &mut len, null_mut(), null_mut());
        assert_eq!((st, len), (memq_status::BufferTooSmall, 7));
        let st =
            memq_consumer_recv_into(c, 0, buf.as_mut_ptr(), 8, &mut len, null_mut(), null_mut());
        assert_eq!((st, len, &buf[..7]), (OK, 7, &b"payload"[..]));
        // Freeing a consumer with a kept-back message releases it.
        publish(t, b"payload two");
        let st =
            memq_consumer_recv_into(c, 0, buf.as_mut_ptr(), 3, &mut len, null_mut(), null_mut());
        assert_eq!(st, memq_status::BufferTooSmall);
        memq_consumer_free(c);
        memq_topic_free(t);
    }
}

#[test]
fn partitions_and_offsets_out_of_range() {
    let t = topic_with(&config(4, 2, memq_overflow::Block));
    let mut r = memq_receipt {
        offset: 5,
        partition: 5,
    };
    let mut s = null_mut();
    let item = memq_slice {
        data: b"x".as_ptr(),
        len: 1,
    };
    // SAFETY: live topic, valid data and out-pointers.
    unsafe {
        assert_eq!(
            memq_topic_publish_to(t, 2, b"x".as_ptr(), 1, 0, &mut r),
            memq_status::OutOfRange
        );
        assert_eq!(
            memq_topic_publish_to(t, u32::MAX, b"x".as_ptr(), 1, -1, &mut r),
            memq_status::OutOfRange
        );
        assert_eq!(
            memq_topic_publish_batch_to(t, 2, &item, 1, 0, &mut r),
            memq_status::OutOfRange
        );
        assert_eq!(
            r,
            memq_receipt {
                offset: 5,
                partition: 5
            }
        );
        assert_eq!(
            memq_subscriber_new_partition(t, 2, 0, 0, &mut s),
            memq_status::OutOfRange
        );
        // Offsets up to the next one to be published are valid; past it they are not.
        assert_eq!(
            memq_subscriber_new(t, memq_start::Offset as u32, 1, &mut s),
            memq_status::OutOfRange
        );
        assert_eq!(
            memq_consumer_new(
                t,
                c"g".as_ptr(),
                memq_start::Offset as u32,
                1,
                &mut null_mut()
            ),
            memq_status::OutOfRange
        );
        assert!(s.is_null());
        let mut ps = memq_partition_stats::default();
        assert_eq!(
            memq_topic_get_partition_stats(t, 2, &mut ps),
            memq_status::OutOfRange
        );
        assert_eq!(ps, memq_partition_stats::default());
        let c = member(t, "g");
        assert_eq!(
            memq_consumer_committed(c, 2, &mut 0),
            memq_status::OutOfRange
        );
        // A batch larger than the capacity could never fit: `Full` at once, as in Rust.
        let items = [item; 5];
        assert_eq!(
            memq_topic_publish_batch(t, items.as_ptr(), 5, -1, &mut r),
            memq_status::Full
        );
        memq_consumer_free(c);
        memq_topic_free(t);
    }
}

#[test]
fn names_unknown_taken_or_not_utf8() {
    let mut b = null_mut();
    let mut t = dangling_topic();
    let not_utf8 = [0xff_u8, 0xfe, 0];
    let c = config(2, 1, memq_overflow::Block);
    // SAFETY: live broker, NUL-terminated names, valid configs and out-pointers.
    unsafe {
        assert_eq!(memq_broker_new(&mut b), OK);
        assert_eq!(
            memq_broker_get_topic(b, c"nope".as_ptr(), &mut t),
            memq_status::UnknownTopic
        );
        assert_eq!(
            memq_broker_delete_topic(b, c"nope".as_ptr()),
            memq_status::UnknownTopic
        );
        assert_eq!(t, dangling_topic());
        let name = not_utf8.as_ptr().cast();
        assert_eq!(
            memq_broker_create_topic(b, name, &c, &mut t),
            memq_status::InvalidArgument
        );
        assert_eq!(
            memq_broker_get_topic(b, name, &mut t),
            memq_status::InvalidArgument
        );

        let mut first = null_mut();
        assert_eq!(
            memq_broker_create_topic(b, c"t".as_ptr(), &c, &mut first),
            OK
        );
        assert_eq!(
            memq_broker_create_topic(b, c"t".as_ptr(), &c, &mut t),
            memq_status::TopicExists
        );
        assert_eq!(t, dangling_topic());
        assert_eq!(
            memq_consumer_new(first, name, 0, 0, &mut null_mut()),
            memq_status::InvalidArgument
        );
        let mut gs = memq_group_stats::default();
        assert_eq!(
            memq_topic_get_group_stats(first, c"none".as_ptr(), &mut gs),
            memq_status::UnknownGroup
        );
        memq_topic_free(first);
        memq_broker_free(b);
    }
}

#[test]
fn zero_capacity_batch_receive_is_invalid() {
    let t = topic(2);
    let s = subscribe(t, memq_start::Earliest);
    let c = member(t, "g");
    publish(t, b"x");
    let mut msgs = [null_mut(); 1];
    let mut n = SENTINEL;
    // SAFETY: live handles, valid array and out-pointers.
    unsafe {
        assert_eq!(
            memq_subscriber_recv_many(s, 0, msgs.as_mut_ptr(), 0, &mut n, null_mut()),
            memq_status::InvalidArgument
        );
        assert_eq!(
            memq_consumer_recv_many(c, 0, msgs.as_mut_ptr(), 0, &mut n, null_mut()),
            memq_status::InvalidArgument
        );
        assert_eq!(n, SENTINEL);
        // The message is still there.
        assert_eq!(recv(s, 0), Ok(b"x".to_vec()));
        assert_eq!(consume(c, 0), Ok(b"x".to_vec()));
        memq_subscriber_free(s);
        memq_consumer_free(c);
        memq_topic_free(t);
    }
}

#[test]
fn timeouts_of_every_sign() {
    let t = topic(1);
    let s = subscribe(t, memq_start::Latest);
    let c = member(t, "g");
    assert_eq!(recv(s, 0), Err(memq_status::Empty));
    assert_eq!(recv(s, 5), Err(memq_status::Timeout));
    assert_eq!(consume(c, 0), Err(memq_status::Empty));
    assert_eq!(consume(c, 5), Err(memq_status::Timeout));
    let mut msgs = [null_mut(); 2];
    let mut n = SENTINEL;
    // SAFETY: live handles, valid array and out-pointers.
    unsafe {
        assert_eq!(
            memq_subscriber_recv_many(s, 0, msgs.as_mut_ptr(), 2, &mut n, null_mut()),
            memq_status::Empty
        );
        assert_eq!(
            memq_consumer_recv_many(c, 5, msgs.as_mut_ptr(), 2, &mut n, null_mut()),
            memq_status::Timeout
        );
        assert_eq!(n, SENTINEL);
        // A full BLOCK topic: FULL without waiting, TIMEOUT with a wait.
        let mut r = memq_receipt::default();
        assert_eq!(memq_topic_publish(t, b"a".as_ptr(), 1, 0, &mut r), OK);
        for (timeout, want) in [(0, memq_status::Full), (5, memq_status::Timeout)] {
            assert_eq!(
                memq_topic_publish(t, b"b".as_ptr(), 1, timeout, &mut r),
                want
            );
            assert_eq!(
                memq_topic_publish_keyed(t, b"k".as_ptr(), 1, b"b".as_ptr(), 1, timeout, &mut r),
                want
            );
            assert_eq!(
                memq_topic_publish_to(t, 0, b"b".as_ptr(), 1, timeout, &mut r),
                want
            );
            let item = memq_slice {
                data: b"b".as_ptr(),
                len: 1,
            };
            assert_eq!(memq_topic_publish_batch(t, &item, 1, timeout, &mut r), want);
            assert_eq!(
                memq_topic_publish_batch_to(t, 0, &item, 1, timeout, &mut r),
                want
            );
        }
        // Nothing but the first message went in, and nobody is left waiting.
        let mut st = memq_topic_stats::default();
        assert_eq!(memq_topic_get_stats(t, &mut st), OK);
        assert_eq!((st.published, st.waiting_publishers), (1, 0));
        memq_subscriber_free(s);
        memq_consumer_free(c);
        memq_topic_free(t);
    }
}
