//! The cooperative wrapper: a future or stream whose polls take part in the runtime's
//! scheduling budget (see [`Runtime::cooperative`]).

use core::fmt;
use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{Context, Poll};

use futures_core::Stream;

use super::Runtime;

pin_project_lite::pin_project! {
    /// A future or stream that yields to the runtime when the task's cooperative budget is
    /// spent. Made by [`Runtime::cooperative`].
    ///
    /// # Cancel safety
    ///
    /// As cancel safe as the wrapped future or stream.
    #[must_use = "futures and streams do nothing unless polled"]
    pub struct Cooperative<R, F> {
        #[pin]
        inner: F,
        // `fn() -> R`: the wrapper is Send and Sync whatever `R` is; it holds no `R`.
        _runtime: PhantomData<fn() -> R>,
    }
}

impl<R, F> Cooperative<R, F> {
    pub(crate) fn new(inner: F) -> Self {
        Self {
            inner,
            _runtime: PhantomData,
        }
    }

    /// The wrapped future or stream.
    pub fn into_inner(self) -> F {
        self.inner
    }

    /// The wrapped future or stream, by reference.
    pub fn get_mut(&mut self) -> &mut F {
        &mut self.inner
    }
}

impl<R, F: fmt::Debug> fmt::Debug for Cooperative<R, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Cooperative").field(&self.inner).finish()
    }
}

impl<R: Runtime, F: Future> Future for Cooperative<R, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let inner = self.project().inner;
        R::poll_cooperative(cx, |cx| inner.poll(cx))
    }
}

impl<R: Runtime, S: Stream> Stream for Cooperative<R, S> {
    type Item = S::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let inner = self.project().inner;
        R::poll_cooperative(cx, |cx| inner.poll_next(cx))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}
