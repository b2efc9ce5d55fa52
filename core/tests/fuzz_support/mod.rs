//! What the liveness fuzz tests share: a counting waker and the number of sequences.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Wake;

/// A waker's wake-ups, counted.
#[derive(Default)]
pub struct Wakes(pub AtomicUsize);

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Sequences per test: `PROPTEST_CASES`, or 1,000.
pub fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000)
}

/// The fuzz tests' proptest settings: [`cases`] sequences, no failure files.
pub fn config() -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases: cases(),
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    }
}

/// The next `n` message values after `*next` (1, 2, 3, ... over a run), counted on.
pub fn next_values(next: &mut u64, n: usize) -> Vec<u64> {
    (0..n)
        .map(|_| {
            *next += 1;
            *next
        })
        .collect()
}

/// Acks a delivery (`how` 0), nacks it (1) or drops it (anything else).
pub fn settle(d: memq_core::Delivery<u64>, how: u8) {
    match how {
        0 => {
            let _ = d.ack();
        }
        1 => {
            let _ = d.nack();
        }
        _ => drop(d),
    }
}

/// A timer on a manual clock that rings each waker once the clock reaches its time, and
/// not before: the timer of a program whose clock and timer agree. (Not every test that
/// includes this module uses it.)
#[allow(dead_code)]
pub struct ExactTimer {
    clock: std::sync::Arc<memq_core::ManualClock>,
    due: std::sync::Mutex<Vec<(std::time::Duration, std::task::Waker)>>,
}

#[allow(dead_code)]
impl ExactTimer {
    /// A timer on `clock`.
    pub fn new(clock: std::sync::Arc<memq_core::ManualClock>) -> Self {
        Self {
            clock,
            due: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Moves the clock on by `by` and rings every waker whose time has come.
    pub fn advance(&self, by: std::time::Duration) {
        use memq_core::Clock;
        self.clock.advance(by);
        let now = self.clock.now();
        let due: Vec<std::task::Waker> = {
            let mut all = self.due.lock().unwrap();
            let (due, later): (Vec<_>, Vec<_>) = all.drain(..).partition(|(at, _)| *at <= now);
            *all = later;
            due.into_iter().map(|(_, w)| w).collect()
        };
        due.into_iter().for_each(std::task::Waker::wake);
    }
}

impl memq_core::Timer for ExactTimer {
    fn wake_after(&self, delay: std::time::Duration, waker: std::task::Waker) {
        use memq_core::Clock;
        let at = self.clock.now().saturating_add(delay);
        self.due.lock().unwrap().push((at, waker));
    }
}
