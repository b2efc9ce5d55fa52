//! Helpers shared by the ABI tests: small safe wrappers over the exports, used only where
//! a test is not about the call itself.
#![allow(dead_code)]

use std::ffi::CString;
use std::ptr;

use memq::*;

pub const OK: memq_status = memq_status::Ok;

pub fn config(capacity: usize, partitions: u32, overflow: memq_overflow) -> memq_topic_config {
    let mut c = memq_topic_config::default();
    // SAFETY: `c` is a valid, writable config.
    assert_eq!(unsafe { memq_topic_config_init(&mut c) }, OK);
    c.capacity = capacity;
    c.partitions = partitions;
    c.overflow = overflow as u32;
    c
}

/// A topic with one partition and `Block` overflow.
pub fn topic(capacity: usize) -> *mut memq_topic {
    topic_with(&config(capacity, 1, memq_overflow::Block))
}

pub fn topic_with(c: &memq_topic_config) -> *mut memq_topic {
    let mut t = ptr::null_mut();
    // SAFETY: valid config and out-pointer.
    assert_eq!(unsafe { memq_topic_new(c, &mut t) }, OK);
    assert!(!t.is_null());
    t
}

pub fn subscribe(t: *const memq_topic, start: memq_start) -> *mut memq_subscriber {
    let mut s = ptr::null_mut();
    // SAFETY: live topic, valid out-pointer.
    let st = unsafe { memq_subscriber_new(t, start as u32, 0, &mut s) };
    assert_eq!(st, OK);
    s
}

pub fn member(t: *const memq_topic, group: &str) -> *mut memq_consumer {
    let group = CString::new(group).unwrap();
    let mut c = ptr::null_mut();
    // SAFETY: live topic, NUL-terminated name, valid out-pointer.
    let st =
        unsafe { memq_consumer_new(t, group.as_ptr(), memq_start::Earliest as u32, 0, &mut c) };
    assert_eq!(st, OK);
    c
}

pub fn publish(t: *const memq_topic, payload: &[u8]) -> memq_receipt {
    let mut r = memq_receipt::default();
    // SAFETY: live topic, readable payload, valid receipt.
    let st = unsafe { memq_topic_publish(t, payload.as_ptr(), payload.len(), 0, &mut r) };
    assert_eq!(st, OK);
    r
}

/// The `memq_slice`s of `payloads`, for the batch exports (borrowing: keep `payloads`
/// alive while they are used).
pub fn slices<P: AsRef<[u8]>>(payloads: &[P]) -> Vec<memq_slice> {
    payloads
        .iter()
        .map(|p| memq_slice {
            data: p.as_ref().as_ptr(),
            len: p.as_ref().len(),
        })
        .collect()
}

/// The payload and metadata of a message handle, which is then freed.
pub fn take(m: *mut memq_message) -> (Vec<u8>, memq_message_meta) {
    let mut data = ptr::null();
    let mut meta = memq_message_meta::default();
    // SAFETY: `m` is a live message handle; out-pointers are valid.
    unsafe {
        assert_eq!(memq_message_data(m, &mut data), OK);
        assert_eq!(memq_message_get_meta(m, &mut meta), OK);
        let bytes = std::slice::from_raw_parts(data, meta.len).to_vec();
        memq_message_free(m);
        (bytes, meta)
    }
}

pub fn recv(s: *const memq_subscriber, timeout_ms: i64) -> Result<Vec<u8>, memq_status> {
    let mut m = ptr::null_mut();
    // SAFETY: live subscriber, valid out-pointer.
    match unsafe { memq_subscriber_recv(s, timeout_ms, &mut m, ptr::null_mut()) } {
        memq_status::Ok => Ok(take(m).0),
        st => {
            assert!(m.is_null(), "out-parameter written on {st:?}");
            Err(st)
        }
    }
}

pub fn consume(c: *const memq_consumer, timeout_ms: i64) -> Result<Vec<u8>, memq_status> {
    let mut m = ptr::null_mut();
    // SAFETY: live consumer, valid out-pointer.
    match unsafe { memq_consumer_recv(c, timeout_ms, &mut m, ptr::null_mut()) } {
        memq_status::Ok => Ok(take(m).0),
        st => {
            assert!(m.is_null(), "out-parameter written on {st:?}");
            Err(st)
        }
    }
}
