//! A bare-metal program that uses memq-core: built for `thumbv7em-none-eabi` by the check
//! script to prove the core needs neither std nor an OS.
#![no_std]
#![no_main]

extern crate alloc;

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicUsize, Ordering};
use core::time::Duration;

use alloc::sync::Arc;
use alloc::vec::Vec;
use memq_core::codec::{Codec, Postcard};
use memq_core::{Broker, ManualClock, Overflow, StartAt, Topic, TopicConfig};

const HEAP_SIZE: usize = 64 * 1024;

/// A bump allocator over a static array: enough for a check program that never frees
/// much.
struct Bump {
    heap: UnsafeCell<[u8; HEAP_SIZE]>,
    next: AtomicUsize,
}

// SAFETY: the only shared state is `next`, updated atomically; each allocation hands out
// a disjoint range of `heap`.
unsafe impl Sync for Bump {}

// SAFETY: `alloc` returns ranges inside `heap` that never overlap (the bump pointer only
// grows), aligned as requested, or null when the heap is exhausted.
unsafe impl GlobalAlloc for Bump {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let base = self.heap.get() as usize;
        let mut current = self.next.load(Ordering::Relaxed);
        loop {
            let start = (base + current + layout.align() - 1) & !(layout.align() - 1);
            let end = start - base + layout.size();
            if end > HEAP_SIZE {
                return core::ptr::null_mut();
            }
            match self
                .next
                .compare_exchange(current, end, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return start as *mut u8,
                Err(seen) => current = seen,
            }
        }
    }

    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: Layout) {}
}

#[global_allocator]
static ALLOCATOR: Bump = Bump {
    heap: UnsafeCell::new([0; HEAP_SIZE]),
    next: AtomicUsize::new(0),
};

#[panic_handler]
fn panic(_info: &core::panic::PanicInfo<'_>) -> ! {
    loop {}
}

/// Entry point the linker keeps; a real firmware would call it from its reset handler.
#[no_mangle]
pub extern "C" fn memq_check() -> u32 {
    let clock = Arc::new(ManualClock::new());
    let Ok(topic) = Topic::<u32>::new(
        TopicConfig::new(8)
            .overflow(Overflow::DropOldest)
            .partitions(2)
            .clock(clock.clone())
            .ttl(Duration::from_secs(1)),
    ) else {
        return 1;
    };
    let Ok(mut sub) = topic.subscribe(StartAt::Earliest) else {
        return 2;
    };
    let Ok(mut member) = topic.group("g", StartAt::Earliest) else {
        return 3;
    };
    for n in 0..4 {
        if topic.try_publish_keyed(b"key", n).is_err() {
            return 4;
        }
    }
    let mut seen = Vec::new();
    while let Ok(m) = sub.try_recv() {
        seen.push(*m.value());
    }
    let mut got = 0;
    while member.try_recv().is_ok() {
        got += 1;
    }
    let broker = Broker::<u32>::new();
    if broker.create("t", TopicConfig::new(4)).is_err() {
        return 5;
    }
    let Ok(bytes) = Postcard::new().encode(&(1u32, 2u8)) else {
        return 6;
    };
    let Ok((a, b)): Result<(u32, u8), _> = Postcard::new().decode(&bytes) else {
        return 7;
    };
    (seen.len() as u32) + got + a + u32::from(b)
}

/// The entry point the linker starts from: runs the check, then idles.
#[no_mangle]
pub extern "C" fn _start() -> ! {
    let result = memq_check();
    // Keep the result observable so the work is not optimised away.
    core::hint::black_box(result);
    loop {
        core::hint::spin_loop();
    }
}
