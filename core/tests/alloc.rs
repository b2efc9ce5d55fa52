//! memq allocates nothing per message in steady state: once a topic and its readers exist
//! and have carried a few rounds of messages, publishing and receiving one at a time (by
//! subscribers and by a consumer group's members, waiting included) counts zero
//! allocations, on the locked log and on the ring engine; and so do batches on the ring
//! engine (the values a batch evicts go back in the batch's own buffer). The locked log
//! allocates one vector per batch published, room for the values the batch overwrites,
//! reserved before the partition's lock is taken: putting them back in the batch's own
//! buffer there (a deque over it) cost memq-release's S4 about a tenth in plain_bench
//! (docs/ENGINE-PLAN.md), and the ring engine is to carry every topic it can. A counting
//! global allocator, in a test binary of its own, counting only on the test's own thread
//! (the test harness's threads allocate now and then while they wait).
#![cfg(not(miri))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use memq_core::{StartAt, Topic, TopicConfig};

struct Counting;

thread_local! {
    /// Whether this thread's allocations are counted.
    static COUNTED: Cell<bool> = const { Cell::new(false) };
    /// This thread's allocations while counted (the tests run on threads side by side).
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

/// Counts an allocation of this thread, if counted.
fn count() {
    if COUNTED.with(Cell::get) {
        ALLOCS.with(|n| n.set(n.get() + 1));
    }
}

// SAFETY: forwards to the system allocator, counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above, with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations `f` makes on this thread.
fn allocations(f: impl FnOnce()) -> usize {
    let before = ALLOCS.with(Cell::get);
    COUNTED.with(|c| c.set(true));
    f();
    COUNTED.with(|c| c.set(false));
    ALLOCS.with(Cell::get) - before
}

/// The messages of one round: more than the capacity, so that the log wraps.
const ROUND: u64 = 3 * CAPACITY as u64;
const CAPACITY: usize = 64;

/// Publishes a round one message at a time and receives each, through a subscriber, a
/// group member, and a subscriber whose receive first waits (a future polled before the
/// publish, with a waker that does nothing).
fn round(
    topic: &Topic<u64>,
    sub: &mut memq_core::Subscriber<u64>,
    member: &mut memq_core::Consumer<u64>,
) {
    let mut cx = Context::from_waker(Waker::noop());
    for i in 0..ROUND {
        {
            let mut waiting = pin!(sub.recv());
            assert!(waiting.as_mut().poll(&mut cx).is_pending());
            topic.try_publish(i).unwrap();
            match waiting.as_mut().poll(&mut cx) {
                Poll::Ready(Ok(m)) => assert_eq!(*m.value(), i),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(*member.try_recv().unwrap().value(), i);
    }
}

/// The batches of a round (the user's vectors, made before anything is counted).
fn batches() -> Vec<Vec<u64>> {
    (0..ROUND)
        .step_by(16)
        .map(|start| (start..start + 16).collect())
        .collect()
}

/// A round in batches: each published, then received by `try_recv_many`.
fn batch_round(
    topic: &Topic<u64>,
    sub: &mut memq_core::Subscriber<u64>,
    member: &mut memq_core::Consumer<u64>,
    batches: Vec<Vec<u64>>,
    buf: &mut Vec<memq_core::Message<u64>>,
) {
    for batch in batches {
        let first = batch[0];
        topic.try_publish_batch(batch).unwrap();
        buf.clear();
        assert_eq!(sub.try_recv_many(buf, 16).unwrap(), 16);
        assert_eq!(*buf[0].value(), first);
        buf.clear();
        assert_eq!(member.try_recv_many(buf, 16).unwrap(), 16);
        assert_eq!(*buf[15].value(), first + 15);
    }
}

/// Allocations of a round one message at a time, and of a round in batches, after
/// warm-up rounds that grow what grows once (the log's slots, wait lists, the lock
/// tuner's first look at the machine).
fn allocations_per_round(config: TopicConfig) -> (usize, usize) {
    let topic = Topic::<u64>::new(config).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    let mut member = topic.group("g", StartAt::Earliest).unwrap();
    let mut buf = Vec::with_capacity(16);
    for _ in 0..2 {
        round(&topic, &mut sub, &mut member);
        batch_round(&topic, &mut sub, &mut member, batches(), &mut buf);
    }
    let single = allocations(|| round(&topic, &mut sub, &mut member));
    let batches = batches();
    let batched = allocations(|| batch_round(&topic, &mut sub, &mut member, batches, &mut buf));
    (single, batched)
}

/// Batches of a round.
const BATCHES: usize = ROUND as usize / 16;

#[test]
fn the_locked_log_allocates_nothing_per_message() {
    // A log that keeps messages, and a queue (each value moved out once every reader
    // has read it).
    let queue = TopicConfig::new(CAPACITY).release_on_read(true);
    for config in [TopicConfig::new(CAPACITY), queue] {
        let (single, batched) = allocations_per_round(config);
        assert_eq!(single, 0, "{single} allocations for {ROUND} messages");
        assert!(
            batched <= BATCHES,
            "{batched} allocations for {BATCHES} batches"
        );
    }
}

#[test]
#[cfg(target_has_atomic = "64")]
fn the_ring_engine_allocates_nothing_per_message() {
    let config = TopicConfig::new(CAPACITY).ring_engine(true);
    assert_eq!(allocations_per_round(config), (0, 0));
}
