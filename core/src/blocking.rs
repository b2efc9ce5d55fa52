//! Blocking front ends for plain threads: each runs the async operation's own future on
//! the calling thread, parking it (no spinning) until the future's waker unparks it.

use alloc::sync::Arc;
use alloc::task::Wake;
use core::future::Future;
use core::pin::pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::thread::{self, Thread};
use std::time::Instant;

use crate::error::{PublishError, RecvError, RecvTimeoutError};
use crate::group::Consumer;
use crate::message::{Message, Receipt};
use crate::subscriber::Subscriber;
use crate::topic::{Attempt, Route, Topic};

struct Unparker(Thread);

impl Wake for Unparker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

thread_local! {
    static WAKER: Waker = Waker::from(Arc::new(Unparker(thread::current())));
}

/// Runs `fut` to completion on this thread.
fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    WAKER.with(|waker| {
        let mut cx = Context::from_waker(waker);
        loop {
            if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
                return out;
            }
            thread::park();
        }
    })
}

/// Runs `fut` until it completes or `deadline` passes; then the future is dropped (every
/// memq future is cancel safe) and `None` is returned. No deadline waits forever.
fn block_on_deadline<F: Future>(fut: F, deadline: Option<Instant>) -> Option<F::Output> {
    let Some(deadline) = deadline else {
        return Some(block_on(fut));
    };
    let mut fut = pin!(fut);
    WAKER.with(|waker| {
        let mut cx = Context::from_waker(waker);
        loop {
            if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
                return Some(out);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            thread::park_timeout(deadline - now);
        }
    })
}

fn deadline(timeout: Duration) -> Option<Instant> {
    // A timeout too large to represent waits forever.
    Instant::now().checked_add(timeout)
}

impl<T> Topic<T> {
    /// [`Topic::publish`] for plain threads: parks until there is room.
    ///
    /// # Errors
    ///
    /// As [`Topic::publish`].
    pub fn publish_blocking(&self, value: T) -> Result<Receipt, PublishError<T>> {
        block_on(self.publish(value))
    }

    /// [`Topic::publish_keyed`] for plain threads.
    ///
    /// # Errors
    ///
    /// As [`Topic::publish_keyed`].
    pub fn publish_keyed_blocking(
        &self,
        key: impl AsRef<[u8]>,
        value: T,
    ) -> Result<Receipt, PublishError<T>> {
        block_on(self.publish_keyed(key, value))
    }

    /// [`Topic::publish_to`] for plain threads.
    ///
    /// # Errors
    ///
    /// As [`Topic::publish_to`].
    pub fn publish_to_blocking(
        &self,
        partition: u32,
        value: T,
    ) -> Result<Receipt, PublishError<T>> {
        block_on(self.publish_to(partition, value))
    }

    /// [`Topic::publish_batch`] for plain threads.
    ///
    /// # Errors
    ///
    /// As [`Topic::publish_batch`].
    pub fn publish_batch_blocking(
        &self,
        batch: alloc::vec::Vec<T>,
    ) -> Result<Receipt, PublishError<alloc::vec::Vec<T>>> {
        block_on(self.publish_batch(batch))
    }

    /// [`Topic::publish`] for plain threads, giving up after `timeout`.
    ///
    /// # Errors
    ///
    /// [`PublishError::Full`] if there was no room before the time ran out; otherwise as
    /// [`Topic::publish`]. The message is handed back.
    pub fn publish_blocking_timeout(
        &self,
        value: T,
        timeout: Duration,
    ) -> Result<Receipt, PublishError<T>> {
        let p = match self.route(None, None) {
            Route::Partition(p) => p,
            Route::Invalid => return Err(PublishError::InvalidPartition(value)),
        };
        let deadline = deadline(timeout);
        let mut key = None;
        let mut value = value;
        WAKER.with(|waker| loop {
            match self.shared.attempt_publish(p, value, &mut key, Some(waker)) {
                Attempt::Done(r) => return r,
                Attempt::Parked(back) => value = back,
            }
            match deadline {
                None => thread::park(),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        self.shared.cancel_publish(p, &mut key);
                        return Err(PublishError::Full(value));
                    }
                    thread::park_timeout(d - now);
                }
            }
        })
    }
}

macro_rules! blocking_recv {
    ($ty:ident) => {
        impl<T: Clone> $ty<T> {
            /// The async `recv` for plain threads: parks until a message arrives.
            ///
            /// # Errors
            ///
            /// As the async `recv`.
            pub fn recv_blocking(&mut self) -> Result<Message<T>, RecvError> {
                block_on(self.recv())
            }

            /// [`Self::recv_blocking`], giving up after `timeout`.
            ///
            /// # Errors
            ///
            /// [`RecvTimeoutError::Timeout`] if nothing arrived in time; otherwise as
            /// the async `recv`.
            pub fn recv_blocking_timeout(
                &mut self,
                timeout: Duration,
            ) -> Result<Message<T>, RecvTimeoutError> {
                match block_on_deadline(self.recv(), deadline(timeout)) {
                    Some(r) => r.map_err(RecvTimeoutError::from),
                    None => Err(RecvTimeoutError::Timeout),
                }
            }

            /// The async `recv_many` for plain threads.
            ///
            /// # Errors
            ///
            /// As the async `recv_many`.
            pub fn recv_many_blocking(
                &mut self,
                buf: &mut alloc::vec::Vec<Message<T>>,
                limit: usize,
            ) -> Result<usize, RecvError> {
                block_on(self.recv_many(buf, limit))
            }

            /// [`Self::recv_many_blocking`], giving up after `timeout`.
            ///
            /// # Errors
            ///
            /// [`RecvTimeoutError::Timeout`] if nothing arrived in time; otherwise as
            /// the async `recv_many`.
            pub fn recv_many_blocking_timeout(
                &mut self,
                buf: &mut alloc::vec::Vec<Message<T>>,
                limit: usize,
                timeout: Duration,
            ) -> Result<usize, RecvTimeoutError> {
                match block_on_deadline(self.recv_many(buf, limit), deadline(timeout)) {
                    Some(r) => r.map_err(RecvTimeoutError::from),
                    None => Err(RecvTimeoutError::Timeout),
                }
            }
        }
    };
}

blocking_recv!(Subscriber);
blocking_recv!(Consumer);

impl<T: Clone> crate::ack::AckConsumer<T> {
    /// [`AckConsumer::recv`](crate::AckConsumer::recv) for plain threads: parks until a
    /// delivery is available (leases that run out wake it through the group's timer).
    ///
    /// # Errors
    ///
    /// As the async `recv`.
    pub fn recv_blocking(&mut self) -> Result<crate::ack::Delivery<T>, RecvError> {
        block_on(self.recv())
    }

    /// [`Self::recv_blocking`], giving up after `timeout`.
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Timeout`] if nothing arrived in time; otherwise as the async
    /// `recv`.
    pub fn recv_blocking_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<crate::ack::Delivery<T>, RecvTimeoutError> {
        match block_on_deadline(self.recv(), deadline(timeout)) {
            Some(r) => r.map_err(RecvTimeoutError::from),
            None => Err(RecvTimeoutError::Timeout),
        }
    }
}
