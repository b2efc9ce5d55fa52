//! The futures of a member's receives ([`GroupRecv`], [`GroupRecvIf`], [`GroupRecvMany`])
//! and its `Stream` implementation: each polls the member's receive path once per poll
//! and, dropped, withdraws the member from the wait it registered.
//!
//! Layer: on [`Consumer`]'s receive paths only.

use alloc::vec::Vec;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::accept::TakeIf;
use super::consumer::Consumer;
use crate::error::{RecvError, RecvIfError};
use crate::message::Message;

/// Future of [`Consumer::recv`].
#[must_use = "futures do nothing unless polled"]
pub struct GroupRecv<'a, T> {
    pub(super) consumer: &'a mut Consumer<T>,
}

impl<T> fmt::Debug for GroupRecv<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupRecv").finish_non_exhaustive()
    }
}

impl<T: Clone> Future for GroupRecv<'_, T> {
    type Output = Result<Message<T>, RecvError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self
            .get_mut()
            .consumer
            .poll_inner(None, 1, Some(cx.waker()))
        {
            Poll::Ready(Ok((_, Some(m)))) => Poll::Ready(Ok(m)),
            Poll::Ready(Ok((_, None))) => Poll::Ready(Err(RecvError::Closed)),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T> Drop for GroupRecv<'_, T> {
    fn drop(&mut self) {
        self.consumer.cancel_wait();
    }
}

/// Future of [`Consumer::recv_if`].
#[must_use = "futures do nothing unless polled"]
pub struct GroupRecvIf<'a, T, F> {
    pub(super) consumer: &'a mut Consumer<T>,
    pub(super) accept: TakeIf<F>,
}

// The predicate is never pinned: it is moved out to be called.
impl<T, F> Unpin for GroupRecvIf<'_, T, F> {}

impl<T, F> fmt::Debug for GroupRecvIf<'_, T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupRecvIf").finish_non_exhaustive()
    }
}

impl<T: Clone, F: FnOnce(&T) -> bool> Future for GroupRecvIf<'_, T, F> {
    type Output = Result<Message<T>, RecvIfError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        match this
            .consumer
            .poll_with(None, 1, Some(cx.waker()), &mut this.accept)
        {
            Poll::Ready(Ok((_, Some(m)))) => Poll::Ready(Ok(m)),
            Poll::Ready(Ok((_, None))) if this.accept.declined => {
                Poll::Ready(Err(RecvIfError::Declined))
            }
            Poll::Ready(Ok((_, None))) => Poll::Ready(Err(RecvIfError::Closed)),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e.into())),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T, F> Drop for GroupRecvIf<'_, T, F> {
    fn drop(&mut self) {
        self.consumer.cancel_wait();
    }
}

/// Future of [`Consumer::recv_many`].
#[must_use = "futures do nothing unless polled"]
pub struct GroupRecvMany<'a, T> {
    pub(super) consumer: &'a mut Consumer<T>,
    pub(super) buf: &'a mut Vec<Message<T>>,
    pub(super) limit: usize,
}

impl<T> fmt::Debug for GroupRecvMany<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupRecvMany")
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl<T: Clone> Future for GroupRecvMany<'_, T> {
    type Output = Result<usize, RecvError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.limit == 0 {
            return Poll::Ready(Ok(0));
        }
        match this
            .consumer
            .poll_inner(Some(this.buf), this.limit, Some(cx.waker()))
        {
            Poll::Ready(Ok((n, _))) => Poll::Ready(Ok(n)),
            Poll::Ready(Err(RecvError::Closed)) => Poll::Ready(Ok(0)),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T> Drop for GroupRecvMany<'_, T> {
    fn drop(&mut self) {
        self.consumer.cancel_wait();
    }
}

impl<T: Clone> futures_core::Stream for Consumer<T> {
    type Item = Result<Message<T>, crate::Lagged>;

    /// Unlike [`Consumer::recv`]'s future, a `next()` future that is dropped while it
    /// waits (under a timeout, in a `select!`) cannot withdraw the member from the wait:
    /// the member stays registered until it is polled again or dropped. So that no
    /// message waits for it meanwhile, a member waiting as a stream takes nobody's turn:
    /// a new message wakes the member waiting in `recv` whose turn it is, and with it the
    /// stream members queued before that one; with nobody waiting in `recv`, every stream
    /// member waiting. All but one of them find nothing and wait again.
    #[inline]
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        this.as_stream = true;
        let polled = this.poll_inner(None, 1, Some(cx.waker()));
        this.as_stream = false;
        match polled {
            Poll::Ready(Ok((_, Some(m)))) => Poll::Ready(Some(Ok(m))),
            Poll::Ready(Ok((_, None))) | Poll::Ready(Err(RecvError::Closed)) => Poll::Ready(None),
            Poll::Ready(Err(RecvError::Lagged(n))) => Poll::Ready(Some(Err(crate::Lagged(n)))),
            Poll::Pending => Poll::Pending,
        }
    }
}
