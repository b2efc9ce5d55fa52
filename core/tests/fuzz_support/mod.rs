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
