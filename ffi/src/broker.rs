//! The broker from C: a registry of named byte topics.

use core::ffi::c_char;

use bytes::Bytes;
use memq_core::Broker;

use crate::boundary::{borrow, get, guard, guard_void, into_handle, name, out, release};
use crate::status::memq_status;
use crate::topic::{memq_topic, memq_topic_config};

/// Named topics, created and found by name. The broker holds a handle to each of its
/// topics, so a registered topic stays open until it is deleted or the broker is freed.
#[derive(Debug)]
pub struct memq_broker {
    broker: Broker<Bytes>,
}

/// Creates an empty broker and writes it to `*broker_out`; free it with
/// `memq_broker_free`.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if `broker_out` is NULL.
///
/// Thread safety: may be called from any thread.
///
/// # Safety
///
/// `broker_out` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_broker_new(broker_out: *mut *mut memq_broker) -> memq_status {
    guard(|| {
        let broker_out = out(broker_out, "broker_out")?;
        let handle = into_handle(memq_broker {
            broker: Broker::new(),
        });
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { broker_out.write(handle) };
        Ok(())
    })
}

/// Frees a broker. Its topics lose the broker's handle: each closes once no
/// `memq_topic` handle of it is left. NULL does nothing.
///
/// Thread safety: no other call may use this broker during or after this one.
///
/// # Safety
///
/// `broker` is NULL or a live broker handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn memq_broker_free(broker: *mut memq_broker) {
    // SAFETY: the caller passes NULL or a handle from `memq_broker_new`, and gives it up.
    guard_void(|| unsafe { release(broker) });
}

/// Creates the topic `name` and writes a handle to it to `*topic_out` (free the handle
/// with `memq_topic_free`; the topic stays registered).
///
/// Returns `MEMQ_STATUS_TOPIC_EXISTS` if the name is taken; configuration errors as
/// `memq_topic_new`; `MEMQ_STATUS_INVALID_ARGUMENT` if `name` is not UTF-8;
/// `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: may be called from any number of threads at once on the same broker,
/// except concurrently with `memq_broker_free(broker)`.
///
/// # Safety
///
/// `broker` is NULL or a live broker handle; `name` is NULL or a NUL-terminated string;
/// `config` is NULL or points to a `memq_topic_config`; `topic_out` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_broker_create_topic(
    broker: *const memq_broker,
    name: *const c_char,
    config: *const memq_topic_config,
    topic_out: *mut *mut memq_topic,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let broker = unsafe { borrow(broker, "broker") }?;
        // SAFETY: the caller passes NULL or a NUL-terminated string.
        let topic_name = unsafe { self::name(name, "name") }?;
        // SAFETY: the caller passes NULL or a valid config.
        let config = unsafe { borrow(config, "config") }?;
        let topic_out = out(topic_out, "topic_out")?;
        let topic = broker.broker.create(topic_name, config.to_core()?)?;
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { topic_out.write(into_handle(memq_topic { topic })) };
        Ok(())
    })
}

/// Writes a new handle to the topic `name` to `*topic_out` (free it with
/// `memq_topic_free`).
///
/// Returns `MEMQ_STATUS_UNKNOWN_TOPIC` if there is none, `MEMQ_STATUS_INVALID_ARGUMENT`
/// if `name` is not UTF-8, `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_broker_create_topic`.
///
/// # Safety
///
/// `broker` is NULL or a live broker handle; `name` is NULL or a NUL-terminated string;
/// `topic_out` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn memq_broker_get_topic(
    broker: *const memq_broker,
    name: *const c_char,
    topic_out: *mut *mut memq_topic,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let broker = unsafe { borrow(broker, "broker") }?;
        // SAFETY: the caller passes NULL or a NUL-terminated string.
        let topic_name = unsafe { self::name(name, "name") }?;
        let topic_out = out(topic_out, "topic_out")?;
        let topic = broker.broker.get(topic_name)?;
        // SAFETY: the caller passes a pointer valid for writes.
        unsafe { topic_out.write(into_handle(memq_topic { topic })) };
        Ok(())
    })
}

/// Unregisters and closes the topic `name`: its readers drain what is retained and then
/// get `MEMQ_STATUS_CLOSED`; publishing returns `MEMQ_STATUS_CLOSED`. Handles to it stay
/// valid and are freed on their own.
///
/// Returns `MEMQ_STATUS_UNKNOWN_TOPIC` if there is none, `MEMQ_STATUS_INVALID_ARGUMENT`
/// if `name` is not UTF-8, `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_broker_create_topic`.
///
/// # Safety
///
/// `broker` is NULL or a live broker handle; `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn memq_broker_delete_topic(
    broker: *const memq_broker,
    name: *const c_char,
) -> memq_status {
    guard(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let broker = unsafe { borrow(broker, "broker") }?;
        // SAFETY: the caller passes NULL or a NUL-terminated string.
        let topic_name = unsafe { self::name(name, "name") }?;
        broker.broker.delete(topic_name)?;
        Ok(())
    })
}

/// Writes the number of topics in the broker to `*count_out`.
///
/// Returns `MEMQ_STATUS_NULL_POINTER` if a pointer is NULL.
///
/// Thread safety: as `memq_broker_create_topic`.
///
/// # Safety
///
/// `broker` is NULL or a live broker handle; `count_out` is NULL or valid for writing a
/// `size_t`.
#[no_mangle]
pub unsafe extern "C" fn memq_broker_topic_count(
    broker: *const memq_broker,
    count_out: *mut usize,
) -> memq_status {
    // SAFETY: the caller passes NULL or a live handle, and NULL or a pointer valid for
    // writes.
    unsafe {
        get(["broker", "count_out"], broker, count_out, |broker| {
            Ok(broker.broker.len())
        })
    }
}
