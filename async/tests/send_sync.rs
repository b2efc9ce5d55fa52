//! Compile-time checks: the runtime handles, futures and pool types are `Send`/`Sync` as
//! they must be to cross threads and be spawned on multi-threaded runtimes. A failure here
//! is a compile error.
#![cfg(all(feature = "tokio", feature = "async-std", feature = "smol"))]
#![allow(dead_code)]

use std::sync::Arc;

use memq::pool::{
    HandlerError, Join, Mode, PoolBuilder, PoolError, PoolMonitor, PoolStats, Shutdown, WorkResult,
    WorkerPool,
};
use memq::rt::{
    AsyncStd, Cooperative, Elapsed, IoSleep, JoinError, JoinHandle, PublishTimeout,
    RecvManyTimeout, RecvTimeout, Smol, ThreadSleep, Threads, Timeout, Tokio, TokioClock,
};
use memq::{GroupRecv, GroupRecvMany, Recv, RecvMany};

fn is_send<T: Send>() {}
fn is_sync<T: Sync>() {}
fn is_error<E: std::error::Error + Send + Sync + 'static>() {}

type V = Arc<[u8]>;

#[test]
fn runtime_handles() {
    is_send::<Tokio>();
    is_sync::<Tokio>();
    is_send::<AsyncStd>();
    is_sync::<AsyncStd>();
    is_send::<Smol>();
    is_sync::<Smol>();
    is_send::<Threads>();
    is_sync::<Threads>();
    is_send::<TokioClock>();
    is_sync::<TokioClock>();
    is_send::<JoinHandle<V>>();
    is_sync::<JoinHandle<V>>();
    is_send::<ThreadSleep>();
    is_send::<IoSleep>();
}

#[test]
fn futures_can_be_spawned() {
    is_send::<Timeout<Tokio, Recv<'static, V>>>();
    is_send::<RecvTimeout<Tokio, Recv<'static, V>>>();
    is_send::<RecvTimeout<Smol, GroupRecv<'static, V>>>();
    is_send::<RecvManyTimeout<AsyncStd, RecvMany<'static, V>>>();
    is_send::<RecvManyTimeout<Threads, GroupRecvMany<'static, V>>>();
    is_send::<PublishTimeout<'static, Tokio, V>>();
    is_send::<Cooperative<Tokio, Recv<'static, V>>>();
    is_send::<Join>();
}

#[test]
fn pool_types() {
    is_send::<WorkerPool>();
    is_sync::<WorkerPool>();
    is_send::<PoolMonitor>();
    is_sync::<PoolMonitor>();
    is_send::<PoolBuilder<'static, V, V>>();
    is_send::<WorkResult<V>>();
    is_sync::<WorkResult<V>>();
    is_send::<PoolStats>();
    is_send::<Mode>();
    is_send::<Shutdown>();
}

#[test]
fn errors_are_errors() {
    is_error::<JoinError>();
    is_error::<Elapsed>();
    is_error::<HandlerError>();
    is_error::<PoolError>();
}
