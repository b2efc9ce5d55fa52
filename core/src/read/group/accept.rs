//! What a receive asks of the next message before it takes it: [`TakeAny`] for the plain
//! receives, [`TakeIf`] for `recv_if` and `try_recv_if`.
//!
//! Layer: plain values, no locks; the receive paths ask them inside the critical section
//! that holds the message.

/// What a receive asks of the next message before it takes it (see
/// [`Consumer::try_recv_if`](super::Consumer::try_recv_if)). A poll that declines a message
/// returns `Ok((0, None))` with nothing changed.
pub(super) trait Accept<T> {
    /// `true` for receives that take any message: their checks compile away, so a plain
    /// receive costs what it did before receives could decline.
    const ALL: bool;

    /// Whether to take the message whose value is `value`. Called at most once per
    /// poll, inside the critical section that holds the message.
    fn accept(&mut self, value: &T) -> bool;
}

/// A plain receive: takes any message.
pub(super) struct TakeAny;

impl<T> Accept<T> for TakeAny {
    const ALL: bool = true;

    #[inline(always)]
    fn accept(&mut self, _: &T) -> bool {
        true
    }
}

/// A receive that takes the next message only if the user's predicate holds for it.
pub(super) struct TakeIf<F> {
    /// The predicate, until it is asked.
    f: Option<F>,
    /// Whether it declined the message it was asked about.
    pub(super) declined: bool,
}

impl<F> TakeIf<F> {
    pub(super) fn new(f: F) -> Self {
        Self {
            f: Some(f),
            declined: false,
        }
    }
}

impl<T, F: FnOnce(&T) -> bool> Accept<T> for TakeIf<F> {
    const ALL: bool = false;

    fn accept(&mut self, value: &T) -> bool {
        // Asked once: the poll that asks it returns either way (a second question would
        // be a bug, answered by taking nothing).
        let ok = self.f.take().is_some_and(|f| f(value));
        self.declined = !ok;
        ok
    }
}
