//! Time limits on any runtime: a generic [`Timeout`], and receive and publish with a time
//! limit for subscribers, group members (automatic or explicit acks) and topics.
//!
//! Each races the core's cancel-safe future against the runtime's sleep; when the sleep
//! wins, the core future is dropped, which takes nothing (receive) and publishes nothing
//! (publish).

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use super::Runtime;
use crate::{
    AckConsumer, AckRecv, AckRecvMany, Consumer, Delivery, GroupRecv, GroupRecvMany, Message,
    Publish, PublishBatch, PublishError, Receipt, Recv, RecvError, RecvMany, RecvTimeoutError,
    Subscriber, Topic,
};

/// The time limit of [`Runtime::timeout`] ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

pin_project_lite::pin_project! {
    /// Future of [`Runtime::timeout`]: the inner future's output, or [`Elapsed`].
    ///
    /// The inner future is polled first (under the runtime's cooperative budget), so an
    /// output that is ready is returned even if the time already ran out.
    ///
    /// # Cancel safety
    ///
    /// As cancel safe as the inner future.
    #[must_use = "futures do nothing unless polled"]
    pub struct Timeout<R: Runtime, F> {
        #[pin]
        inner: F,
        #[pin]
        sleep: R::Sleep,
    }
}

impl<R: Runtime, F> Timeout<R, F> {
    pub(crate) fn new(inner: F, sleep: R::Sleep) -> Self {
        Self { inner, sleep }
    }

    /// The inner future.
    pub fn get_ref(&self) -> &F {
        &self.inner
    }
}

impl<R: Runtime, F: fmt::Debug> fmt::Debug for Timeout<R, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeout")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<R: Runtime, F: Future> Future for Timeout<R, F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let inner = this.inner;
        if let Poll::Ready(out) = R::poll_cooperative(cx, |cx| inner.poll(cx)) {
            return Poll::Ready(Ok(out));
        }
        this.sleep.poll(cx).map(|()| Err(Elapsed))
    }
}

pin_project_lite::pin_project! {
    /// Future of [`RecvTimeoutExt::recv_timeout`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping it takes no message.
    #[must_use = "futures do nothing unless polled"]
    pub struct RecvTimeout<R: Runtime, F> {
        #[pin]
        inner: Timeout<R, F>,
    }
}

impl<R: Runtime, F> fmt::Debug for RecvTimeout<R, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecvTimeout").finish_non_exhaustive()
    }
}

impl<R, F, M> Future for RecvTimeout<R, F>
where
    R: Runtime,
    F: Future<Output = Result<M, RecvError>>,
{
    type Output = Result<M, RecvTimeoutError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().inner.poll(cx).map(|out| match out {
            Ok(r) => r.map_err(RecvTimeoutError::from),
            Err(Elapsed) => Err(RecvTimeoutError::Timeout),
        })
    }
}

pin_project_lite::pin_project! {
    /// Future of [`RecvManyTimeoutExt::recv_many_timeout`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping it takes no message.
    #[must_use = "futures do nothing unless polled"]
    pub struct RecvManyTimeout<R: Runtime, F> {
        #[pin]
        inner: Timeout<R, F>,
    }
}

impl<R: Runtime, F> fmt::Debug for RecvManyTimeout<R, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecvManyTimeout").finish_non_exhaustive()
    }
}

impl<R, F> Future for RecvManyTimeout<R, F>
where
    R: Runtime,
    F: Future<Output = Result<usize, RecvError>>,
{
    type Output = Result<usize, RecvTimeoutError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().inner.poll(cx).map(|out| match out {
            Ok(r) => r.map_err(RecvTimeoutError::from),
            Err(Elapsed) => Err(RecvTimeoutError::Timeout),
        })
    }
}

mod sealed {
    pub trait Sealed {}
    impl<T> Sealed for crate::Subscriber<T> {}
    impl<T> Sealed for crate::Consumer<T> {}
    impl<T> Sealed for crate::AckConsumer<T> {}
    impl<T> Sealed for crate::Topic<T> {}
    impl<T> Sealed for crate::Publish<'_, T> {}
    impl<T> Sealed for crate::PublishBatch<'_, T> {}
}

/// Receiving with a time limit, on any [`Runtime`]: for [`Subscriber`], [`Consumer`] and
/// [`AckConsumer`].
///
/// The runtime is passed to each call, so one reader can be used from several runtimes.
///
/// # Panics
///
/// The returned futures sleep on the runtime's timer, so they panic where that timer does:
/// with [`Tokio`], when polled after the Tokio runtime has shut down.
///
#[cfg_attr(feature = "tokio", doc = "[`Tokio`]: super::Tokio")]
#[cfg_attr(not(feature = "tokio"), doc = "[`Tokio`]: crate#features")]
pub trait RecvTimeoutExt: sealed::Sealed {
    /// What a receive returns: a [`Message`], or a [`Delivery`] for a member of an
    /// explicit-ack group.
    type Item;

    /// The reader's `recv` future.
    type Recv<'a>: Future<Output = Result<Self::Item, RecvError>> + Unpin
    where
        Self: 'a;

    /// Receives the next message, waiting at most `timeout`.
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Timeout`] if nothing arrived in time;
    /// [`RecvTimeoutError::Lagged`] and [`RecvTimeoutError::Closed`] as the reader's
    /// `recv`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a message is taken only in the poll that returns it, so a timeout, or
    /// dropping the future when it loses a `select!`, loses nothing (and a group member's
    /// wake-up passes to another member).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use memq::rt::{RecvTimeoutExt, Threads};
    /// use memq::{RecvTimeoutError, StartAt, Topic};
    ///
    /// let topic = Topic::<u32>::with_capacity(8)?;
    /// let mut worker = topic.group("w", StartAt::Earliest)?;
    /// let got = Threads::block_on(worker.recv_timeout(Duration::from_millis(10), &Threads));
    /// assert_eq!(got.unwrap_err(), RecvTimeoutError::Timeout);
    /// # Ok::<(), memq::Error>(())
    /// ```
    fn recv_timeout<R: Runtime>(
        &mut self,
        timeout: Duration,
        rt: &R,
    ) -> RecvTimeout<R, Self::Recv<'_>>;
}

/// Receiving a batch with a time limit, on any [`Runtime`]: for [`Subscriber`],
/// [`Consumer`] and [`AckConsumer`].
pub trait RecvManyTimeoutExt<T>: sealed::Sealed {
    /// What the reader receives: [`Message`], or [`Delivery`] for [`AckConsumer`].
    type Item;

    /// The reader's `recv_many` future.
    type RecvMany<'a>: Future<Output = Result<usize, RecvError>> + Unpin
    where
        Self: 'a,
        T: 'a;

    /// Waits at most `timeout` for at least one message, then appends up to `limit` to
    /// `buf` and returns how many. Returns `Ok(0)` only when the topic is closed and
    /// drained (or `limit` is 0).
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Timeout`] if nothing arrived in time;
    /// [`RecvTimeoutError::Lagged`] as the reader's `recv_many`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`RecvTimeoutExt::recv_timeout`]: messages are appended to `buf`
    /// only in the poll that returns them.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use memq::rt::{RecvManyTimeoutExt, Threads};
    /// use memq::{StartAt, Topic};
    ///
    /// let topic = Topic::with_capacity(8)?;
    /// let mut sub = topic.subscribe(StartAt::Earliest)?;
    /// topic.try_publish_batch(vec![1, 2, 3])?;
    /// let mut buf = Vec::new();
    /// let n = Threads::block_on(sub.recv_many_timeout(&mut buf, 10, Duration::from_secs(1), &Threads))?;
    /// assert_eq!(n, 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn recv_many_timeout<'a, R: Runtime>(
        &'a mut self,
        buf: &'a mut Vec<Self::Item>,
        limit: usize,
        timeout: Duration,
        rt: &R,
    ) -> RecvManyTimeout<R, Self::RecvMany<'a>>;
}

macro_rules! recv_timeout_ext {
    ($reader:ident, $item:ident, $recv:ident) => {
        impl<T: Clone> RecvTimeoutExt for $reader<T> {
            type Item = $item<T>;
            type Recv<'a>
                = $recv<'a, T>
            where
                Self: 'a;

            fn recv_timeout<R: Runtime>(
                &mut self,
                timeout: Duration,
                rt: &R,
            ) -> RecvTimeout<R, $recv<'_, T>> {
                RecvTimeout {
                    inner: rt.timeout(timeout, self.recv()),
                }
            }
        }
    };
}

recv_timeout_ext!(Subscriber, Message, Recv);
recv_timeout_ext!(Consumer, Message, GroupRecv);
recv_timeout_ext!(AckConsumer, Delivery, AckRecv);

macro_rules! recv_many_timeout_ext {
    ($reader:ident, $item:ident, $recv_many:ident) => {
        impl<T: Clone> RecvManyTimeoutExt<T> for $reader<T> {
            type Item = $item<T>;
            type RecvMany<'a>
                = $recv_many<'a, T>
            where
                Self: 'a,
                T: 'a;

            fn recv_many_timeout<'a, R: Runtime>(
                &'a mut self,
                buf: &'a mut Vec<$item<T>>,
                limit: usize,
                timeout: Duration,
                rt: &R,
            ) -> RecvManyTimeout<R, $recv_many<'a, T>> {
                RecvManyTimeout {
                    inner: rt.timeout(timeout, self.recv_many(buf, limit)),
                }
            }
        }
    };
}

recv_many_timeout_ext!(Subscriber, Message, RecvMany);
recv_many_timeout_ext!(Consumer, Message, GroupRecvMany);
recv_many_timeout_ext!(AckConsumer, Delivery, AckRecvMany);

/// Publishing with a time limit, on any [`Runtime`]: for [`Topic`].
///
/// # Panics
///
/// As for [`RecvTimeoutExt`]: with [`Tokio`], when polled after the Tokio
/// runtime has shut down.
///
#[cfg_attr(feature = "tokio", doc = "[`Tokio`]: super::Tokio")]
#[cfg_attr(not(feature = "tokio"), doc = "[`Tokio`]: crate#features")]
pub trait PublishTimeoutExt<T>: sealed::Sealed {
    /// Publishes `value`, waiting at most `timeout` for room (policy `Block`); unkeyed
    /// messages go to partitions in turn, as with `publish`.
    ///
    /// Nothing is cloned: if time runs out, the waiting publish is cancelled and hands
    /// the value back in the error.
    ///
    /// # Errors
    ///
    /// [`PublishError::Full`] if there was no room before the time ran out (or at once on
    /// a full `Reject` topic); [`PublishError::Closed`] if the topic is closed. The
    /// message is handed back.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it completes publishes nothing, and a wake-up it had
    /// received passes to the next waiting publisher.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use memq::rt::{PublishTimeoutExt, Threads};
    /// use memq::{StartAt, Topic};
    ///
    /// let topic = Topic::with_capacity(1)?;
    /// let _slow = topic.subscribe(StartAt::Earliest)?; // holds the only slot
    /// topic.try_publish(1)?;
    /// let err = Threads::block_on(topic.publish_timeout(2, Duration::from_millis(10), &Threads));
    /// assert_eq!(err.unwrap_err().into_inner(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn publish_timeout<R: Runtime>(
        &self,
        value: T,
        timeout: Duration,
        rt: &R,
    ) -> PublishTimeout<'_, R, T>;
}

impl<T> PublishTimeoutExt<T> for Topic<T> {
    fn publish_timeout<R: Runtime>(
        &self,
        value: T,
        timeout: Duration,
        rt: &R,
    ) -> PublishTimeout<'_, R, T> {
        self.publish(value).with_timeout(timeout, rt)
    }
}

/// A topic's publish futures, which can be called off and hand back what they were
/// publishing: [`Publish`] (from `publish`, `publish_keyed`, `publish_to`) and
/// [`PublishBatch`] (from `publish_batch`, `publish_batch_keyed`, `publish_batch_to`).
/// Gives them [`with_timeout`](PublishFutureExt::with_timeout). (The codecs'
/// `PublishEncoded` is not one: time-limit it with [`Runtime::timeout`]; its value is the
/// encoded copy.)
pub trait PublishFutureExt:
    Future<Output = Result<Receipt, PublishError<Self::Value>>> + Unpin + sealed::Sealed + Sized
{
    /// What is being published: the message, or the batch.
    type Value;

    /// Calls the publish off; hands back what it was publishing, or `None` if it was
    /// published already (the futures' own `into_inner`, for generic code).
    fn into_inner(self) -> Option<Self::Value>;

    /// Stops waiting with one last try: publishes now if there is room, or hands the
    /// value back in [`PublishError::Full`]; `None` if it was published already (the
    /// futures' own `try_now`, for generic code).
    fn try_now(self) -> Option<Result<Receipt, PublishError<Self::Value>>>;

    /// This publish, waiting at most `timeout` for room (policy `Block`), on any
    /// [`Runtime`]: whatever the routing (key, partition, next in turn) and for batches
    /// too.
    ///
    /// Nothing is cloned: if time runs out, the waiting publish makes one last try (a
    /// waiting publisher is woken only once a batch of slots is free, so a few may be
    /// free that it was not told of), and is otherwise called off and hands the message
    /// (or the whole batch) back in [`PublishError::Full`].
    ///
    /// # Errors
    ///
    /// [`PublishError::Full`] if there was no room before the time ran out; otherwise
    /// what the publish itself returns.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it completes publishes nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use memq::rt::{PublishFutureExt, Threads};
    /// use memq::{StartAt, Topic, TopicConfig};
    ///
    /// let topic = Topic::new(TopicConfig::new(2).partitions(2))?;
    /// let _slow = topic.subscribe(StartAt::Earliest)?; // holds every slot it has not read
    /// let limit = Duration::from_millis(10);
    /// let first = Threads::block_on(topic.publish_batch_keyed("k", vec![1, 2]).with_timeout(limit, &Threads))?;
    /// // The key's partition is full: the batch comes back whole.
    /// let err = Threads::block_on(topic.publish_batch_keyed("k", vec![3, 4]).with_timeout(limit, &Threads));
    /// assert_eq!(err.unwrap_err().into_inner(), [3, 4]);
    /// // Another partition has room.
    /// let other = 1 - first.partition;
    /// Threads::block_on(topic.publish_to(other, 5).with_timeout(limit, &Threads))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn with_timeout<R: Runtime>(self, timeout: Duration, rt: &R) -> PublishWithin<R, Self> {
        PublishWithin {
            publish: Some(self),
            sleep: rt.sleep(timeout),
        }
    }
}

impl<T> PublishFutureExt for Publish<'_, T> {
    type Value = T;

    fn into_inner(self) -> Option<T> {
        Publish::into_inner(self)
    }

    fn try_now(self) -> Option<Result<Receipt, PublishError<T>>> {
        Publish::try_now(self)
    }
}

impl<T> PublishFutureExt for PublishBatch<'_, T> {
    type Value = Vec<T>;

    fn into_inner(self) -> Option<Vec<T>> {
        PublishBatch::into_inner(self)
    }

    fn try_now(self) -> Option<Result<Receipt, PublishError<Vec<T>>>> {
        PublishBatch::try_now(self)
    }
}

/// Future of [`PublishTimeoutExt::publish_timeout`].
pub type PublishTimeout<'a, R, T> = PublishWithin<R, Publish<'a, T>>;

pin_project_lite::pin_project! {
    /// Future of [`PublishFutureExt::with_timeout`]: a publish with a time limit.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping it publishes nothing.
    #[must_use = "futures do nothing unless polled"]
    pub struct PublishWithin<R: Runtime, F> {
        // The waiting publish; on timeout it is called off and hands the value back.
        publish: Option<F>,
        #[pin]
        sleep: R::Sleep,
    }
}

impl<R: Runtime, F> fmt::Debug for PublishWithin<R, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PublishWithin")
            .field("waiting", &self.publish.is_some())
            .finish_non_exhaustive()
    }
}

impl<R: Runtime, F: PublishFutureExt> Future for PublishWithin<R, F> {
    type Output = Result<Receipt, PublishError<F::Value>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Some(publish) = this.publish.as_mut() else {
            return Poll::Pending; // polled after completion
        };
        if let Poll::Ready(out) = R::poll_cooperative(cx, |cx| Pin::new(publish).poll(cx)) {
            *this.publish = None;
            return Poll::Ready(out);
        }
        match this.sleep.poll(cx) {
            // Time is up: one last try, else the caller gets the value back.
            Poll::Ready(()) => match this.publish.take().and_then(PublishFutureExt::try_now) {
                Some(out) => Poll::Ready(out),
                None => Poll::Pending,
            },
            Poll::Pending => Poll::Pending,
        }
    }
}
