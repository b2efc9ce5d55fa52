//! The drain's barrier (see [`Worker::run`](super::worker::Worker)): workers that found
//! nothing to take wait here until every live worker has, and only then leave their
//! group, so that no partition moves to a worker that stopped looking.
//!
//! A worker counts as arrived only while it waits with nothing seen: it takes itself off
//! the count before it looks again, so the barrier never passes while a worker that is
//! looking (or has just taken a message) is counted. Counts belong to a generation, and a
//! worker ending starts a new one: its partitions moved to the others, and each must look
//! at its new share before it counts again.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;

/// Set once the barrier is passed; nothing changes after.
const PASSED: u64 = 1 << 63;
/// The generation is kept above the count.
const GENERATION_SHIFT: u32 = 32;
const COUNT: u64 = (1 << GENERATION_SHIFT) - 1;
/// Generations wrap within the bits between the count and [`PASSED`].
const GENERATIONS: u64 = (1 << (63 - GENERATION_SHIFT)) - 1;

/// How an arrival went.
pub(crate) enum Arrival {
    /// Counted, in the generation given.
    Counted,
    /// A worker ended since the caller looked: look again.
    Stale,
    /// The barrier is passed: the drain is over.
    Passed,
}

/// Workers arrived, per generation, and whether the barrier was passed.
#[derive(Debug, Default)]
pub(crate) struct Barrier {
    state: AtomicU64,
}

impl Barrier {
    /// Whether the barrier was passed (the drain is over).
    pub(crate) fn passed(&self) -> bool {
        self.state.load(SeqCst) & PASSED != 0
    }

    /// The current generation, read before a worker looks for messages.
    pub(crate) fn generation(&self) -> u64 {
        (self.state.load(SeqCst) & !PASSED) >> GENERATION_SHIFT
    }

    /// Counts a worker that looked during `generation` and found nothing.
    pub(crate) fn arrive(&self, generation: u64) -> Arrival {
        let arrived = self.state.fetch_update(SeqCst, SeqCst, |v| {
            let same = (v & !PASSED) >> GENERATION_SHIFT == generation;
            (v & PASSED == 0 && same).then_some(v + 1)
        });
        match arrived {
            Ok(_) => Arrival::Counted,
            Err(v) if v & PASSED != 0 => Arrival::Passed,
            Err(_) => Arrival::Stale,
        }
    }

    /// Takes back an arrival made in `generation` (nothing to take back if a worker ended
    /// since: that reset the count). Returns `false` if the barrier was passed.
    pub(crate) fn leave(&self, generation: u64) -> bool {
        let left = self.state.fetch_update(SeqCst, SeqCst, |v| {
            let same = (v & !PASSED) >> GENERATION_SHIFT == generation;
            (v & PASSED == 0 && same && v & COUNT > 0).then(|| v - 1)
        });
        match left {
            Ok(_) => true,
            Err(v) => v & PASSED == 0,
        }
    }

    /// A worker ended: a new generation, with nobody counted, unless the barrier was
    /// passed.
    pub(crate) fn reset(&self) {
        let _ = self.state.fetch_update(SeqCst, SeqCst, |v| {
            let next = ((v >> GENERATION_SHIFT) + 1) & GENERATIONS;
            (v & PASSED == 0).then_some(next << GENERATION_SHIFT)
        });
    }

    /// Passes the barrier if `live` workers (or more) are counted; whether it is passed.
    pub(crate) fn try_pass(&self, live: usize) -> bool {
        let v = self.state.load(SeqCst);
        if v & PASSED != 0 {
            return true;
        }
        if (v & COUNT) < live as u64 {
            return false;
        }
        self.state
            .compare_exchange(v, v | PASSED, SeqCst, SeqCst)
            .is_ok()
            || self.passed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_once_every_live_worker_counts_in_the_same_generation() {
        let b = Barrier::default();
        let g = b.generation();
        assert!(matches!(b.arrive(g), Arrival::Counted));
        assert!(!b.try_pass(2));
        // A worker ends: those counted must look again.
        b.reset();
        assert!(matches!(b.arrive(g), Arrival::Stale));
        assert!(b.leave(g), "a stale arrival has nothing to take back");
        let g = b.generation();
        assert!(matches!(b.arrive(g), Arrival::Counted));
        assert!(!b.try_pass(2));
        assert!(b.leave(g));
        assert!(!b.try_pass(1));
        assert!(matches!(b.arrive(g), Arrival::Counted));
        assert!(b.try_pass(1));
        assert!(b.passed());
        assert!(!b.leave(g));
        assert!(matches!(b.arrive(g), Arrival::Passed));
        b.reset();
        assert!(b.passed());
    }
}
