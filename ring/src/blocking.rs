//! A blocking front: writers that wait for room and readers that wait for messages park
//! their thread on a mutex and condvar, touched only when the ring's flags say someone
//! waits.
//!
//! A waiting reader holds the readers' mutex from before it sets the flag until the
//! condvar releases it, and a waking writer takes that mutex to notify, so a wake-up
//! cannot fall between a reader's last look and its sleep.

use alloc::vec::Vec;

use crate::group::Member;
use crate::reader::{Reader, TryRecvError};
use crate::ring::{Published, Rearm, Ring, Room, TryPublishError, Waiters};
use crate::sync::{Condvar, Mutex, MutexGuard};

/// [`Waiters`] that park threads: make a ring with
/// `Ring::with_waiters(config, Parking::default())`.
#[derive(Debug, Default)]
pub struct Parking {
    readers: Mutex<()>,
    readers_cv: Condvar,
    writers: Mutex<()>,
    writers_cv: Condvar,
}

fn lock(m: &Mutex<()>) -> MutexGuard<'_, ()> {
    // The mutexes guard nothing but the hand-over of a wake-up, so a poisoned one is
    // as good as a clean one.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Waiters for Parking {
    /// Wakes every waiting reader and member: nobody is left waiting, so `rearm` is
    /// not needed.
    fn wake_readers(&self, _rearm: Rearm<'_>) {
        let _g = lock(&self.readers);
        self.readers_cv.notify_all();
    }

    fn wake_writers(&self, _room: Room<'_>) {
        let _g = lock(&self.writers);
        self.writers_cv.notify_all();
    }
}

/// How long a wait may last: forever, or until a deadline (not under loom, whose condvar
/// has no timed wait).
#[derive(Clone, Copy)]
enum Until {
    Forever,
    #[cfg(not(loom))]
    Deadline(std::time::Instant),
}

/// Waits on `cv` with `g` held, until woken or `until`; returns `false` once the deadline
/// has passed.
fn wait(cv: &Condvar, g: MutexGuard<'_, ()>, until: Until) -> bool {
    match until {
        Until::Forever => {
            drop(cv.wait(g).unwrap_or_else(|e| e.into_inner()));
            true
        }
        #[cfg(not(loom))]
        Until::Deadline(d) => {
            let now = std::time::Instant::now();
            if now >= d {
                return false;
            }
            drop(
                cv.wait_timeout(g, d - now)
                    .unwrap_or_else(|e| e.into_inner()),
            );
            true
        }
    }
}

/// Before a thread parks it looks again a few times, spinning and then yielding: a
/// message (or room) that comes within a microsecond or two is then taken without a
/// sleep and a wake-up, which on a virtual machine cost tens of microseconds (a halted
/// vCPU woken by an interrupt). Bounded: after `STEPS` looks the thread parks, so an idle
/// reader or writer costs no CPU.
pub(crate) struct Patience {
    step: u32,
    steps: u32,
}

impl Patience {
    const SPIN_STEPS: u32 = 6;

    /// Spins, then yields the thread: for a thread about to park.
    pub(crate) fn new() -> Self {
        Self { step: 0, steps: 10 }
    }

    /// Waits a little before the next look; `false` once it is time to park.
    pub(crate) fn wait_a_little(&mut self) -> bool {
        if cfg!(loom) || self.step >= self.steps {
            return false;
        }
        if self.step < Self::SPIN_STEPS {
            for _ in 0..(1u32 << self.step) {
                core::hint::spin_loop();
            }
        } else {
            #[cfg(not(loom))]
            std::thread::yield_now();
        }
        self.step += 1;
        true
    }
}

impl<T> Ring<T, Parking> {
    /// Publishes `value`, waiting while the readers hold every slot; the value comes
    /// back if the ring is closed.
    pub fn publish(&self, value: T) -> Result<Published<T>, T> {
        self.publish_until(value, Until::Forever)
            .map_err(TryPublishError::into_inner)
    }

    /// [`Ring::publish`], waiting until `deadline` at most (then `Full` comes back).
    #[cfg(not(loom))]
    pub fn publish_deadline(
        &self,
        value: T,
        deadline: std::time::Instant,
    ) -> Result<Published<T>, TryPublishError<T>> {
        self.publish_until(value, Until::Deadline(deadline))
    }

    /// Publishes every value of `values` (drained) at consecutive offsets, waiting while
    /// the readers hold too many slots for all of them; returns the first offset. Values
    /// the batch moved out of the ring are pushed onto `evicted`. `Err` if the ring is closed (or closes while
    /// this waits) or the batch is larger than the ring (it could never fit); `values` is
    /// then left as it was.
    pub fn publish_batch(
        &self,
        values: &mut Vec<T>,
        evicted: &mut Vec<T>,
    ) -> Result<u64, TryPublishError<()>> {
        let mut patience = Patience::new();
        loop {
            match self.try_publish_batch(values, evicted) {
                Err(TryPublishError::Full(())) if values.len() as u64 <= self.capacity() => {
                    if patience.wait_a_little() {
                        continue;
                    }
                    let w = self.waiters();
                    let g = lock(&w.writers);
                    if self.prepare_batch_publisher_wait(values.len()) {
                        wait(&w.writers_cv, g, Until::Forever);
                    }
                }
                done => return done,
            }
        }
    }

    fn publish_until(&self, value: T, until: Until) -> Result<Published<T>, TryPublishError<T>> {
        let mut value = value;
        let mut patience = Patience::new();
        loop {
            match self.try_publish(value) {
                Err(TryPublishError::Full(v)) => {
                    value = v;
                    if patience.wait_a_little() {
                        continue;
                    }
                    let w = self.waiters();
                    let g = lock(&w.writers);
                    if self.prepare_publisher_wait() && !wait(&w.writers_cv, g, until) {
                        return Err(TryPublishError::Full(value));
                    }
                }
                done => return done,
            }
        }
    }
}

/// The receive of a reader or a member, waiting while it finds nothing.
macro_rules! blocking_recv {
    ($ty:ident) => {
        impl<T: Clone> $ty<T, Parking> {
            /// The next message and its offset, waiting until one is published: `Err`
            /// once the ring is closed and everything was received
            /// ([`TryRecvError::Closed`]), or for messages missed
            /// ([`TryRecvError::Lagged`]).
            pub fn recv(&mut self) -> Result<(u64, T), TryRecvError> {
                self.recv_until(Until::Forever)
            }

            /// [`Self::recv`], waiting until `deadline` at most (then
            /// [`TryRecvError::Empty`]).
            #[cfg(not(loom))]
            pub fn recv_deadline(
                &mut self,
                deadline: std::time::Instant,
            ) -> Result<(u64, T), TryRecvError> {
                self.recv_until(Until::Deadline(deadline))
            }

            fn recv_until(&mut self, until: Until) -> Result<(u64, T), TryRecvError> {
                let mut patience = Patience::new();
                loop {
                    match self.try_recv() {
                        Err(TryRecvError::Empty) => {
                            if patience.wait_a_little() {
                                continue;
                            }
                            let w = self.ring().waiters();
                            let g = lock(&w.readers);
                            if self.prepare_wait() && !wait(&w.readers_cv, g, until) {
                                return Err(TryRecvError::Empty);
                            }
                        }
                        done => return done,
                    }
                }
            }
        }
    };
}

blocking_recv!(Reader);
blocking_recv!(Member);
