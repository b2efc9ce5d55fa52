//! An async front: readers and writers that find nothing (or no room) register their
//! task's waker and return `Pending` (no spinning: the thread is the executor's); the ring's flags tell a publish (or a reader moving
//! on) when there is anyone to wake, so a publish with nobody waiting touches no list.
//!
//! A waiting task registers before it announces itself ([`Reader::prepare_wait`] and
//! [`Ring::prepare_publisher_wait`]), so a wake-up that follows the announcement finds its
//! waker. A task polled again without being woken (a `select!`) replaces its waker rather
//! than adding one.

use core::future::poll_fn;
use core::task::{Context, Poll, Waker};

use alloc::vec::Vec;

use crate::group::Member;
use crate::reader::{Reader, TryRecvError};
use crate::ring::{Published, Rearm, Ring, Room, TryPublishError, Waiters};
use crate::sync::Mutex;

/// [`Waiters`] that wake tasks: make a ring with
/// `Ring::with_waiters(config, WakerLists::default())`.
#[derive(Debug, Default)]
pub struct WakerLists {
    readers: Mutex<Vec<Waker>>,
    writers: Mutex<Vec<Waker>>,
}

fn register(list: &Mutex<Vec<Waker>>, waker: &Waker) {
    let mut list = list.lock().unwrap_or_else(|e| e.into_inner());
    if !list.iter().any(|w| w.will_wake(waker)) {
        list.push(waker.clone());
    }
}

fn wake_all(list: &Mutex<Vec<Waker>>) {
    // Woken after the lock is released: a waker may run its task at once.
    let woken = core::mem::take(&mut *list.lock().unwrap_or_else(|e| e.into_inner()));
    for w in woken {
        w.wake();
    }
}

impl Waiters for WakerLists {
    /// Wakes every waiting task: nobody is left waiting, so `rearm` is not needed.
    fn wake_readers(&self, _rearm: Rearm<'_>) {
        wake_all(&self.readers);
    }

    fn wake_writers(&self, _room: Room<'_>) {
        wake_all(&self.writers);
    }
}

impl<T> Ring<T, WakerLists> {
    /// Publishes `value`, waiting (without blocking the thread) while the readers hold
    /// every slot; the value comes back if the ring is closed.
    pub async fn publish_async(&self, value: T) -> Result<Published<T>, T> {
        let mut value = Some(value);
        poll_fn(|cx| {
            let Some(v) = value.take() else {
                // Polled after completion: the future's contract is broken by the
                // caller; stay pending rather than panic.
                return Poll::Pending;
            };
            match self.poll_publish(v, cx) {
                Ok(p) => Poll::Ready(Ok(p)),
                Err(Ok(v)) => {
                    value = Some(v);
                    Poll::Pending
                }
                Err(Err(v)) => Poll::Ready(Err(v)),
            }
        })
        .await
    }

    /// One attempt: published, or `Err(Ok(value))` to wait (registered), or
    /// `Err(Err(value))` for a closed ring.
    fn poll_publish(&self, value: T, cx: &mut Context<'_>) -> Result<Published<T>, Result<T, T>> {
        let mut value = value;
        loop {
            match self.try_publish(value) {
                Ok(p) => return Ok(p),
                Err(TryPublishError::Closed(v)) => return Err(Err(v)),
                Err(TryPublishError::Full(v)) => {
                    value = v;
                    register(&self.waiters().writers, cx.waker());
                    if self.prepare_publisher_wait() {
                        return Err(Ok(value));
                    }
                }
            }
        }
    }
}

/// The async receive of a reader or a member.
macro_rules! async_recv {
    ($ty:ident) => {
        impl<T: Clone> $ty<T, WakerLists> {
            /// The next message and its offset, waiting (without blocking the thread)
            /// until one is published: `Err` once the ring is closed and everything was
            /// received ([`TryRecvError::Closed`]), or for messages missed
            /// ([`TryRecvError::Lagged`]). Cancel safe: a future dropped before it
            /// completes has received nothing.
            pub async fn recv_async(&mut self) -> Result<(u64, T), TryRecvError> {
                poll_fn(|cx| self.poll_recv(cx)).await
            }

            /// Polls for the next message, registering `cx`'s waker if there is none.
            pub fn poll_recv(
                &mut self,
                cx: &mut Context<'_>,
            ) -> Poll<Result<(u64, T), TryRecvError>> {
                loop {
                    match self.try_recv() {
                        Err(TryRecvError::Empty) => {
                            register(&self.ring().waiters().readers, cx.waker());
                            if self.prepare_wait() {
                                return Poll::Pending;
                            }
                        }
                        done => return Poll::Ready(done),
                    }
                }
            }
        }
    };
}

async_recv!(Reader);
async_recv!(Member);
