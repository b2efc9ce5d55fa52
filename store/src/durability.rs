//! Which appended records are on the disk, and the group commit that puts them there.
//!
//! Appending writes records to the segment file under the log's lock; forcing them to
//! the disk (`fdatasync`, hundreds of microseconds) happens outside it, here. A caller
//! that needs its record on disk asks [`Durability::wait_synced`]: if a sync is already
//! running, it waits for that one and, if its record was written after that sync began,
//! for the next; otherwise it runs the sync itself, for everything written so far. So
//! however many appenders wait at once, one `fdatasync` at a time covers them all.
//!
//! When a sync ends, only the waiters it covered are woken, each by its own unpark; of
//! the others, one is woken to run the next sync for all of them (not every waiter at
//! once, to find the lock taken and sleep again: with many publishers that herd cost
//! more CPU than the appends).
//! Async callers register a waker instead ([`Durability::poll_synced`]) and the log's
//! sync thread does the work for them; under [`SyncPolicy::Interval`](crate::SyncPolicy)
//! the same thread syncs on its timer.
//!
//! An `fdatasync` that fails is final: after a failure Linux may have dropped the dirty
//! pages it could not write and report the next sync as a success, so every later wait
//! fails too and the log must be reopened (which reads back what really is on disk).

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::task::{Poll, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crate::StoreError;

/// The sync state of one log, shared by its appenders, waiters and sync thread.
#[derive(Debug)]
pub struct Durability {
    state: Mutex<State>,
    /// Offset after the last record written to a file: moved by every append (under the
    /// log's lock, without this one), read by the sync that starts.
    written: AtomicU64,
    /// Signalled when `synced` moves, a sync ends, or work arrives for the sync thread.
    changed: Condvar,
}

#[derive(Debug)]
struct State {
    /// Offset after the last record known to be on disk.
    synced: u64,
    /// A sync is running (by a waiter or by the sync thread).
    syncing: bool,
    /// The file being appended to, which a sync forces to disk.
    file: Arc<File>,
    path: PathBuf,
    /// The first sync failure, after which nothing is ever reported synced again.
    failed: Option<String>,
    /// `fdatasync` calls made so far.
    syncs: u64,
    /// Async waiters: the offset each needs on disk.
    wakers: Vec<(u64, Waker)>,
    /// Blocked waiters, while a sync runs.
    blocked: Vec<Arc<Blocked>>,
    /// Async waiters the last sync woke, and how long it took: the sync thread waits up
    /// to half that long for as many to be back before it starts the next (see
    /// [`Durability::run_sync_thread`]).
    last_woken: usize,
    last_sync: Duration,
    /// The sync thread should sync (an async waiter asked) or stop.
    requested: bool,
    stop: bool,
}

/// A thread blocked in [`Durability::wait_synced`] while another syncs.
#[derive(Debug)]
struct Blocked {
    offset: u64,
    thread: Thread,
    /// Set (`Release`) when it is woken: its record is on disk, or the sync failed, or it
    /// is to run the next sync. It then looks at the state again under the lock.
    woken: AtomicU8,
}

impl Durability {
    pub(crate) fn new(next: u64, file: Arc<File>, path: PathBuf) -> Arc<Durability> {
        Arc::new(Durability {
            written: AtomicU64::new(next),
            state: Mutex::new(State {
                // What a log holds when it is opened is on disk (recovery synced it, or
                // it is read back from the disk and so will be again).
                synced: next,
                syncing: false,
                file,
                path,
                failed: None,
                syncs: 0,
                wakers: Vec::new(),
                blocked: Vec::new(),
                last_woken: 0,
                last_sync: Duration::ZERO,
                requested: false,
                stop: false,
            }),
            changed: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding it leaves consistent numbers (each field is set in one
        // step), so the state stays usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that every record before `next` is written.
    pub(crate) fn note_written(&self, next: u64) {
        self.written.fetch_max(next, Ordering::AcqRel);
    }

    /// The segment being written changes to `file`; the old one was synced up to `next`
    /// by the caller (or, under `Never`, is left to the OS).
    pub(crate) fn switch_file(&self, file: Arc<File>, path: PathBuf, synced_old: Option<u64>) {
        let mut s = self.lock();
        // A sync running on the old file still sets `synced` to what it covered, which
        // is no more than what the caller synced.
        s.file = file;
        s.path = path;
        if let Some(next) = synced_old {
            s.synced = s.synced.max(next);
        }
        self.wake(&mut s);
    }

    /// Makes every later wait fail (a sync elsewhere failed: see the module's docs).
    pub(crate) fn mark_failed(&self, why: &str) {
        let mut s = self.lock();
        s.failed.get_or_insert_with(|| why.to_string());
        self.wake(&mut s);
    }

    /// Offset after the last record known to be on disk.
    pub fn synced(&self) -> u64 {
        self.lock().synced
    }

    /// How many `fdatasync` calls the log made so far: with group commit, fewer than the
    /// appends that waited for one.
    pub fn syncs(&self) -> u64 {
        self.lock().syncs
    }

    /// Blocks until the record at `offset` is on disk, syncing the file itself if no sync
    /// is running (group commit: see the module's documentation).
    pub fn wait_synced(&self, offset: u64) -> Result<(), StoreError> {
        let mut s = self.lock();
        loop {
            if let Some(why) = &s.failed {
                return Err(failed(&s.path, why));
            }
            if s.synced > offset {
                return Ok(());
            }
            if s.syncing {
                let me = Arc::new(Blocked {
                    offset,
                    thread: std::thread::current(),
                    woken: AtomicU8::new(0),
                });
                s.blocked.push(Arc::clone(&me));
                drop(s);
                // Parks until the sync that ends wakes it (a spurious unpark, from user
                // code that unparks this thread, only loops).
                while me.woken.load(Ordering::Acquire) == 0 {
                    std::thread::park();
                }
                s = self.lock();
                continue;
            }
            s = self.sync_locked(s);
        }
    }

    /// Ready once the record at `offset` is on disk; otherwise registers `waker` and asks
    /// the sync thread to sync.
    pub fn poll_synced(&self, offset: u64, waker: &Waker) -> Poll<Result<(), StoreError>> {
        let mut s = self.lock();
        if let Some(why) = &s.failed {
            return Poll::Ready(Err(failed(&s.path, why)));
        }
        if s.synced > offset {
            return Poll::Ready(Ok(()));
        }
        match s.wakers.iter_mut().find(|(_, w)| w.will_wake(waker)) {
            Some(slot) => slot.0 = slot.0.max(offset),
            None => s.wakers.push((offset, waker.clone())),
        }
        s.requested = true;
        self.changed.notify_all();
        Poll::Pending
    }

    /// Runs one sync of everything written so far, with the lock let go meanwhile.
    fn sync_locked<'a>(&'a self, mut s: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        s.syncing = true;
        s.requested = false;
        let target = self.written.load(Ordering::Acquire);
        let file = Arc::clone(&s.file);
        drop(s);
        let began = Instant::now();
        let result = file.sync_data();
        let took = began.elapsed();
        let mut s = self.lock();
        s.syncing = false;
        s.syncs += 1;
        s.last_sync = took;
        match result {
            Ok(()) => s.synced = s.synced.max(target),
            Err(e) => {
                s.failed.get_or_insert_with(|| e.to_string());
            }
        }
        self.wake(&mut s);
        s
    }

    /// Wakes the async waiters whose records are on disk (all of them after a failure)
    /// and the blocked ones.
    fn wake(&self, s: &mut State) {
        let (synced, failed) = (s.synced, s.failed.is_some());
        let mut i = 0;
        let mut woken = 0;
        while i < s.wakers.len() {
            if failed || s.wakers[i].0 < synced {
                s.wakers.swap_remove(i).1.wake();
                woken += 1;
            } else {
                i += 1;
            }
        }
        if woken > 0 {
            s.last_woken = woken;
        }
        // Blocked waiters: those covered, and one of the others to run the next sync
        // (unless one runs already).
        let mut leader = !s.syncing;
        s.blocked.retain(|b| {
            let wake = failed || b.offset < synced || std::mem::take(&mut leader);
            if wake {
                b.woken.store(1, Ordering::Release);
                b.thread.unpark();
            }
            !wake
        });
        if !s.wakers.is_empty() && !s.syncing {
            s.requested = true;
        }
        self.changed.notify_all();
    }

    /// Syncs now if anything written is not on disk yet (for a clean close and for the
    /// interval timer).
    pub(crate) fn sync_now(&self) -> Result<(), StoreError> {
        let written = self.written.load(Ordering::Acquire);
        match written.checked_sub(1) {
            Some(last) => self.wait_synced(last),
            None => Ok(()),
        }
    }

    /// The sync thread's loop: syncs when an async waiter asks and, with `every`, at
    /// least that often while something written is not on disk. Ends when the log is
    /// dropped.
    pub(crate) fn run_sync_thread(this: Weak<Durability>, every: Option<Duration>) {
        let mut next_tick = every.map(|d| Instant::now() + d);
        loop {
            let Some(d) = this.upgrade() else { return };
            let mut s = d.lock();
            loop {
                if s.stop {
                    return;
                }
                let due = next_tick.is_some_and(|t| Instant::now() >= t);
                if (s.requested || due) && !s.syncing {
                    break;
                }
                s = match next_tick {
                    Some(t) => {
                        let wait = t.saturating_duration_since(Instant::now());
                        // A sync by someone else still leaves the timer as it was.
                        let wait = if s.syncing {
                            wait.max(Duration::from_millis(1))
                        } else {
                            wait
                        };
                        d.changed
                            .wait_timeout(s, wait)
                            .unwrap_or_else(|p| p.into_inner())
                            .0
                    }
                    None => d.changed.wait(s).unwrap_or_else(|p| p.into_inner()),
                };
            }
            if let Some(every) = every {
                next_tick = Some(Instant::now() + every);
            }
            // Group commit for async publishers: the tasks the last sync woke publish
            // again within moments (their next record), but the runtime runs them one
            // after the other. A sync started at once would cover only the first few, and
            // the next sync the rest: twice the syncs for the same records. So, like a
            // database's commit delay, it waits until as many waiters are back as the
            // last sync woke, for at most half as long as that sync took (a lone
            // publisher is back at once and waits for nothing).
            let gather = (s.last_sync / 2).min(Duration::from_millis(2));
            let until = Instant::now() + gather;
            while s.wakers.len() < s.last_woken && !s.stop {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                s = d
                    .changed
                    .wait_timeout(s, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            if s.syncing || s.stop {
                continue;
            }
            if s.failed.is_none() && s.synced < d.written.load(Ordering::Acquire) {
                drop(d.sync_locked(s));
            } else {
                s.requested = false;
            }
        }
    }

    /// Tells the sync thread to end.
    pub(crate) fn stop(&self) {
        self.lock().stop = true;
        self.changed.notify_all();
    }
}

fn failed(path: &std::path::Path, why: &str) -> StoreError {
    StoreError::io(
        "fsync",
        path,
        std::io::Error::other(format!(
            "an earlier fsync failed ({why}); what is on disk is unknown until the log is reopened"
        )),
    )
}
