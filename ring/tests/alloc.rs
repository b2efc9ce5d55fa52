//! The ring allocates nothing per message: after the ring and its readers exist, publishing
//! and receiving (broadcast, group, taking) counts zero allocations. A counting global
//! allocator, in a test binary of its own, counting only on the test's own thread (the
//! test harness's thread allocates now and then while it waits).
#![cfg(not(loom))]
#![cfg(not(miri))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use memq_ring::{Group, Reader, Ring, RingConfig, Start};

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Whether this thread's allocations are counted.
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: forwards to the system allocator, counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTED.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above, with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn publishing_and_receiving_allocate_nothing() {
    let payload: Arc<[u8]> = vec![7u8; 1024].into();
    let ring = Arc::new(Ring::new(RingConfig::new(64)).unwrap());
    let mut reader = Reader::new(&ring, Start::Earliest).unwrap();
    let group = Group::new(&ring, Start::Earliest).unwrap();
    let mut member = group.member().unwrap();
    let taking = Arc::new(
        Ring::new(RingConfig {
            take: true,
            ..RingConfig::new(64)
        })
        .unwrap(),
    );
    let mut taker = Reader::new(&taking, Start::Earliest).unwrap();
    COUNTED.with(|c| c.set(true));
    let before = ALLOCS.load(Ordering::Relaxed);
    for _ in 0..10_000 {
        drop(ring.try_publish(payload.clone()).unwrap().evicted);
        drop(taking.try_publish(payload.clone()).unwrap().evicted);
        drop(reader.try_recv().unwrap());
        drop(member.try_recv().unwrap());
        drop(taker.try_recv().unwrap());
    }
    let during = ALLOCS.load(Ordering::Relaxed) - before;
    COUNTED.with(|c| c.set(false));
    assert_eq!(during, 0, "allocations while moving 30,000 messages");
    // The counter sees this thread's allocations at all.
    COUNTED.with(|c| c.set(true));
    let seen = ALLOCS.load(Ordering::Relaxed);
    drop(std::hint::black_box(Vec::<u8>::with_capacity(8)));
    COUNTED.with(|c| c.set(false));
    assert!(ALLOCS.load(Ordering::Relaxed) > seen, "the counter counts");
}
