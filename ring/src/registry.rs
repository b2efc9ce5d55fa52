//! The registries of a ring: its readers' positions (and members' hazards), and its
//! groups' claim positions. An entry is one cache line, an `AtomicU64`; entries live in
//! chunks added as readers attach (chunk `k` holds `first << k` entries), so a ring takes
//! any number of readers, and an entry never moves while its reader holds it.
//!
//! Written here rather than taken from a crate: a chunk is published through an atomic
//! pointer that loom's models must see (`once_cell`'s `OnceBox` and the like use `core`'s
//! atomics, which loom cannot check).

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::ptr;

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// One reader's (or group's) word.
pub(crate) type Entry = CachePadded<AtomicU64>;

/// Chunks at most: with a first chunk of one entry, about sixteen million entries.
const CHUNKS: usize = 24;

/// A registry entry nobody holds.
pub(crate) const FREE: u64 = u64::MAX;

pub(crate) struct Registry {
    /// The first chunk holds `1 << shift` entries.
    shift: u32,
    /// Chunk `k`: null until published, then the first of `1 << (shift + k)` entries of a
    /// boxed slice given up with `Box::into_raw`, freed only when the registry drops.
    chunks: [AtomicPtr<Entry>; CHUNKS],
    /// One past the highest index ever taken: scans that must see every entry a reader
    /// may use look at these.
    taken: AtomicUsize,
}

impl Registry {
    /// A registry whose first chunk holds `first` entries (rounded up to a power of two,
    /// at least one), allocated now.
    pub(crate) fn new(first: usize) -> Option<Self> {
        let first = first.max(1).checked_next_power_of_two()?;
        let shift = first.trailing_zeros();
        if shift as usize + CHUNKS >= usize::BITS as usize {
            return None;
        }
        let r = Self {
            shift,
            chunks: core::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            taken: AtomicUsize::new(0),
        };
        r.chunks[0].store(Self::alloc(r.len(0), FREE)?, Ordering::Release);
        Some(r)
    }

    #[inline]
    fn len(&self, k: usize) -> usize {
        1 << (self.shift as usize + k)
    }

    #[inline]
    fn start(&self, k: usize) -> usize {
        ((1 << k) - 1) << self.shift
    }

    /// A chunk of `len` free entries but the first, which says `first`.
    fn alloc(len: usize, first: u64) -> Option<*mut Entry> {
        let mut v = Vec::new();
        v.try_reserve_exact(len).ok()?;
        v.push(CachePadded::new(AtomicU64::new(first)));
        v.extend((1..len).map(|_| CachePadded::new(AtomicU64::new(FREE))));
        Some(Box::into_raw(v.into_boxed_slice()).cast::<Entry>())
    }

    /// Chunk `k`, if published.
    #[inline]
    fn chunk(&self, k: usize) -> Option<&[Entry]> {
        let p = self.chunks[k].load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: a non-null chunk pointer was stored (Release, seen by the Acquire load
        // above) once, after `alloc` made a boxed slice of `len(k)` initialised entries
        // and gave it up; it is freed only by `Drop`, which has `&mut self`, so the
        // slice outlives `&self`. Entries are atomics: shared references are all anyone
        // takes.
        Some(unsafe {
            debug_assert!(p.is_aligned());
            core::slice::from_raw_parts(p, self.len(k))
        })
    }

    /// The entry at `index`, which must have been taken (its chunk is published).
    #[inline]
    pub(crate) fn get(&self, index: usize) -> &Entry {
        let q = (index >> self.shift) + 1;
        let k = (usize::BITS - 1 - q.leading_zeros()) as usize;
        match self.chunk(k) {
            Some(c) => &c[index - self.start(k)],
            None => unpublished(index),
        }
    }

    /// Every published entry, chunk by chunk.
    #[inline]
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Entry> {
        (0..CHUNKS).map_while(|k| self.chunk(k)).flatten()
    }

    /// Every entry a reader may use: those below the highest index ever taken (loaded
    /// sequentially consistent, the other half of [`Registry::take`]'s count).
    #[inline]
    pub(crate) fn iter_taken(&self) -> impl Iterator<Item = &Entry> {
        let n = self.taken.load(Ordering::SeqCst);
        self.iter().take(n)
    }

    /// Takes a free entry for `value`, adding a chunk if every published one is taken;
    /// `None` when no chunk can be added (out of memory, or every chunk in use).
    pub(crate) fn take(&self, value: u64) -> Option<usize> {
        let mut k = 0;
        let index = loop {
            if k == CHUNKS {
                return None;
            }
            if let Some(c) = self.chunk(k) {
                let free = c.iter().position(|e| {
                    e.compare_exchange(FREE, value, Ordering::SeqCst, Ordering::Relaxed)
                        .is_ok()
                });
                match free {
                    Some(i) => break self.start(k) + i,
                    None => k += 1,
                }
                continue;
            }
            let p = Self::alloc(self.len(k), value)?;
            match self.chunks[k].compare_exchange(
                ptr::null_mut(),
                p,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break self.start(k),
                Err(_) => {
                    // Another reader published chunk `k` first: look in theirs.
                    // SAFETY: `p` came from `alloc` just above (a boxed slice of
                    // `len(k)` entries given up with `Box::into_raw`) and was never
                    // published, so this is its only owner.
                    drop(unsafe {
                        debug_assert!(!p.is_null() && p.is_aligned());
                        Box::from_raw(ptr::slice_from_raw_parts_mut(p, self.len(k)))
                    });
                }
            }
        };
        // Before the entry's first use: a scan that misses the count misses the entry's
        // value only if that value's owner, in turn, sees what the scan's thread did first
        // (both sequentially consistent; see the ring's pins).
        self.taken.fetch_max(index + 1, Ordering::SeqCst);
        Some(index)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        for k in 0..CHUNKS {
            let p = self.chunks[k].load(Ordering::Relaxed);
            if p.is_null() {
                break;
            }
            // SAFETY: a published chunk: a boxed slice of `len(k)` entries given up with
            // `Box::into_raw` (see `Registry::chunk`), freed here once, with `&mut self`.
            drop(unsafe {
                debug_assert!(p.is_aligned());
                Box::from_raw(ptr::slice_from_raw_parts_mut(p, self.len(k)))
            });
        }
    }
}

/// An index whose chunk is not published: a bug in the ring (indices are handed out only
/// after their chunk is), which stops rather than read elsewhere.
#[cold]
#[inline(never)]
fn unpublished(index: usize) -> ! {
    panic!("memq-ring bug: registry entry {index} read before its chunk was published")
}
