//! Compile-time checks that public types are `Send`/`Sync` when their value type allows
//! it, and that futures can be spawned on multi-threaded executors. A failure here is a
//! compile error.
#![allow(dead_code)]

extern crate alloc;

use alloc::rc::Rc;
use core::cell::Cell;

use memq_core::{
    Broker, Consumer, Error, GroupRecv, GroupRecvMany, GroupStats, Lagged, ManualClock, Message,
    Overflow, PartitionStats, Publish, PublishBatch, PublishError, Receipt, Recv, RecvError,
    RecvMany, RecvTimeoutError, Router, StartAt, Subscriber, Topic, TopicConfig, TopicStats,
    TryRecvError,
};

fn is_send<T: Send>() {}
fn is_sync<T: Sync>() {}
fn is_unpin<T: Unpin>() {}
fn is_static_error<E: std::error::Error + Send + Sync + 'static>() {}

/// A payload that is `Send + Sync`, like `bytes::Bytes` or `Arc<[u8]>`.
type V = alloc::sync::Arc<[u8]>;

#[test]
fn handles_are_send_and_sync() {
    is_send::<Topic<V>>();
    is_sync::<Topic<V>>();
    is_send::<Subscriber<V>>();
    is_sync::<Subscriber<V>>();
    is_send::<Consumer<V>>();
    is_sync::<Consumer<V>>();
    is_send::<Broker<V>>();
    is_sync::<Broker<V>>();
    is_send::<Message<V>>();
    is_sync::<Message<V>>();
    is_send::<Receipt>();
    is_sync::<Receipt>();
}

/// Handles are `Send` and `Sync` when the value type is `Send` and `Sync`: readers on
/// the lock-free ring clone a message from several threads at once, without a lock, as
/// every lock-free broadcast does. A `Send` but `!Sync` value type (a `Cell`) gives
/// handles that stay on one thread (`handles_of_non_sync_values_are_not_send`).
#[test]
fn handles_need_t_send_and_sync() {
    type S = alloc::sync::Arc<std::sync::Mutex<u8>>;
    is_send::<Topic<S>>();
    is_sync::<Topic<S>>();
    is_send::<Subscriber<S>>();
    is_send::<Consumer<S>>();
    is_send::<Broker<S>>();
    is_sync::<Broker<S>>();
}

#[test]
fn futures_are_send_and_sync() {
    is_send::<Publish<'static, V>>();
    is_sync::<Publish<'static, V>>();
    is_send::<PublishBatch<'static, V>>();
    is_sync::<PublishBatch<'static, V>>();
    is_send::<Recv<'static, V>>();
    is_sync::<Recv<'static, V>>();
    is_send::<RecvMany<'static, V>>();
    is_sync::<RecvMany<'static, V>>();
    is_send::<GroupRecv<'static, V>>();
    is_sync::<GroupRecv<'static, V>>();
    is_send::<GroupRecvMany<'static, V>>();
    is_sync::<GroupRecvMany<'static, V>>();
}

#[test]
fn futures_are_unpin() {
    is_unpin::<Publish<'static, V>>();
    is_unpin::<PublishBatch<'static, V>>();
    is_unpin::<Recv<'static, V>>();
    is_unpin::<RecvMany<'static, V>>();
    is_unpin::<GroupRecv<'static, V>>();
    is_unpin::<GroupRecvMany<'static, V>>();
    is_unpin::<Subscriber<V>>();
    is_unpin::<Consumer<V>>();
    // Even for a value type that is not Unpin.
    is_unpin::<Publish<'static, core::marker::PhantomPinned>>();
}

#[test]
fn async_blocks_using_memq_are_send() {
    // What `tokio::spawn` needs: the whole async block is Send.
    fn assert_send_future<F: core::future::Future + Send>(_: F) {}
    let topic = Topic::<V>::with_capacity(4).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    let mut member = topic.group("g", StartAt::Earliest).unwrap();
    assert_send_future(async move {
        topic.publish(V::from(&b"x"[..])).await.unwrap();
        topic.publish_batch(vec![V::from(&b"y"[..])]).await.unwrap();
        let _ = sub.recv().await;
        let mut buf = Vec::new();
        let _ = sub.recv_many(&mut buf, 8).await;
        let _ = member.recv().await;
        let _ = member.recv_many(&mut buf, 8).await;
    });
}

#[test]
fn errors_are_send_sync_static_errors() {
    is_static_error::<Error>();
    is_static_error::<RecvError>();
    is_static_error::<TryRecvError>();
    is_static_error::<RecvTimeoutError>();
    is_static_error::<Lagged>();
    is_static_error::<PublishError<V>>();
    is_static_error::<PublishError<Vec<V>>>();
    // PublishError's Error impl does not need T: Debug.
    struct NoDebug;
    is_static_error::<PublishError<NoDebug>>();
    is_send::<PublishError<Cell<u8>>>();
}

// `assert_not_send!(T)` compiles only if `T` is not `Send`: for a `Send` type both impls
// apply and the call is ambiguous.
trait AmbiguousIfSend<A> {
    fn some_item() {}
}
impl<T: ?Sized> AmbiguousIfSend<()> for T {}
impl<T: ?Sized + Send> AmbiguousIfSend<u8> for T {}

macro_rules! assert_not_send {
    ($t:ty) => {
        let _ = <$t as AmbiguousIfSend<_>>::some_item;
    };
}

#[test]
fn handles_of_non_send_values_are_not_send() {
    // A handle would otherwise let an `Rc` clone cross threads.
    assert_not_send!(Topic<Rc<u8>>);
    assert_not_send!(Subscriber<Rc<u8>>);
    assert_not_send!(Consumer<Rc<u8>>);
    assert_not_send!(Broker<Rc<u8>>);
    assert_not_send!(Message<Rc<u8>>);
    assert_not_send!(PublishError<Rc<u8>>);
}

#[test]
fn handles_of_non_sync_values_are_not_send() {
    // Two readers on two threads would otherwise clone one `Cell` at once.
    assert_not_send!(Topic<Cell<u8>>);
    assert_not_send!(Subscriber<Cell<u8>>);
    assert_not_send!(Consumer<Cell<u8>>);
    assert_not_send!(Broker<Cell<u8>>);
}

#[test]
fn config_stats_clocks_are_send_and_sync() {
    is_send::<TopicConfig>();
    is_sync::<TopicConfig>();
    is_send::<Router>();
    is_sync::<Router>();
    is_send::<TopicStats>();
    is_sync::<TopicStats>();
    is_send::<PartitionStats>();
    is_send::<GroupStats>();
    is_send::<Overflow>();
    is_send::<StartAt>();
    is_send::<ManualClock>();
    is_sync::<ManualClock>();
    #[cfg(feature = "std")]
    {
        is_send::<memq_core::StdClock>();
        is_sync::<memq_core::StdClock>();
    }
}
