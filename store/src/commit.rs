//! Group writes under [`SyncPolicy::Always`](crate::SyncPolicy): one `pwrite` and one
//! `fdatasync` for every publish that waits at the same time.
//!
//! A publish under `Always` cannot complete before the next sync of its partition's log,
//! so its record need not be written before that sync starts either. While a sync runs,
//! publishes queue here ([`CommitQueue`]); when it ends, the partition's commit thread
//! takes everything queued, writes it to the log in one write (and into the in-memory
//! cache, where readers see it), syncs once, and completes every publish of the round.
//! With 64 publishers that is one system call of each kind per round instead of 64
//! writes, each made under the log's lock while the others wait for it.
//!
//! A publisher that finds nothing queued and no round running, after a round that held
//! one publish, does its round itself, on its own thread (one publisher pays no hand-off
//! to another thread); after a round of many, the publishers it released queue, so that
//! the first one back does not take a round of its own. The commit thread
//! starts with the first publish that has to queue, and ends when the topic closes.
//!
//! Like a database's commit delay, the commit thread waits, before a round, until as many
//! publishes are queued as the last round held, for at most half as long as the last sync
//! took (and never more than a millisecond): the publishers the last round released are
//! on their way back, and a round started without them would cover a few, and the next
//! round the rest.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::Waker;
use std::thread::Thread;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::topic::DurablePublishError;

/// The messages of one publish: one, or a batch written all or none.
#[derive(Debug)]
pub(crate) enum Payloads {
    One(Bytes),
    Many(Vec<Bytes>),
}

impl Payloads {
    pub(crate) fn as_slice(&self) -> &[Bytes] {
        match self {
            Payloads::One(b) => std::slice::from_ref(b),
            Payloads::Many(v) => v,
        }
    }

    pub(crate) fn into_one(self) -> Bytes {
        match self {
            Payloads::One(b) => b,
            Payloads::Many(mut v) => v.pop().unwrap_or_default(),
        }
    }

    pub(crate) fn into_many(self) -> Vec<Bytes> {
        match self {
            Payloads::One(b) => vec![b],
            Payloads::Many(v) => v,
        }
    }
}

/// One publish: its key (for every message) and its messages.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) key: Option<Bytes>,
    pub(crate) payloads: Payloads,
}

impl Request {
    /// Nothing: what a publish hands back when its messages were published but their
    /// sync failed.
    pub(crate) fn empty() -> Request {
        Request {
            key: None,
            payloads: Payloads::Many(Vec::new()),
        }
    }
}

/// What became of a publish: the offsets it was given, or why not (with its request).
pub(crate) type Outcome = Result<Range<u64>, DurablePublishError<Request>>;

/// A queued publish, shared by its publisher and the round that completes it.
#[derive(Debug)]
pub(crate) struct Entry {
    slot: Mutex<Slot>,
    /// Set (`Release`) once `slot.outcome` is set, for a blocked publisher.
    done: AtomicBool,
    /// The blocked publisher, unparked when done; `None` for an async one (its waker is
    /// in the slot).
    thread: Option<Thread>,
}

#[derive(Debug)]
struct Slot {
    /// Taken by the round that writes it, or by an async publisher that gives up.
    request: Option<Request>,
    outcome: Option<Outcome>,
    waker: Option<Waker>,
    /// The round's other blocked publishers, some of which this one wakes when it is
    /// woken (see [`complete_all`]).
    chain: Option<Arc<WakeChain>>,
}

impl Entry {
    /// A publish by the current thread, which waits with [`Entry::wait`].
    pub(crate) fn blocking(request: Request) -> Arc<Entry> {
        Arc::new(Entry {
            slot: Mutex::new(Slot {
                request: Some(request),
                outcome: None,
                waker: None,
                chain: None,
            }),
            done: AtomicBool::new(false),
            thread: Some(std::thread::current()),
        })
    }

    /// A publish by an async task, which polls with [`Entry::poll`].
    pub(crate) fn with_waker(request: Request, waker: Waker) -> Arc<Entry> {
        Arc::new(Entry {
            slot: Mutex::new(Slot {
                request: Some(request),
                outcome: None,
                waker: Some(waker),
                chain: None,
            }),
            done: AtomicBool::new(false),
            thread: None,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Slot> {
        // Each field is set in one step: a panic elsewhere leaves it usable.
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The request, for the round that writes it (`None`: its async publisher gave up).
    pub(crate) fn take_request(&self) -> Option<Request> {
        self.lock().request.take()
    }

    /// Completes the publish and wakes its publisher.
    pub(crate) fn complete(&self, outcome: Outcome) {
        let waker = {
            let mut slot = self.lock();
            slot.outcome = Some(outcome);
            slot.waker.take()
        };
        if let Some(w) = waker {
            wake(w);
        }
        if let Some(t) = &self.thread {
            self.done.store(true, Ordering::Release);
            t.unpark();
        }
    }

    /// Completes the publish with `outcome()` unless it was completed already (after a
    /// round that panicked).
    pub(crate) fn complete_if_pending(&self, outcome: impl FnOnce(Option<Request>) -> Outcome) {
        let pending = {
            let mut slot = self.lock();
            (slot.outcome.is_none() && !self.done.load(Ordering::Acquire))
                .then(|| slot.request.take())
        };
        if let Some(request) = pending {
            self.complete(outcome(request));
        }
    }

    /// Blocks the publisher until its publish is complete.
    pub(crate) fn wait(&self) -> Outcome {
        // A spurious unpark (user code may unpark this thread) only loops.
        while !self.done.load(Ordering::Acquire) {
            std::thread::park();
        }
        let (outcome, chain) = {
            let mut slot = self.lock();
            (slot.outcome.take(), slot.chain.take())
        };
        if let Some(chain) = chain {
            chain.wake_next(FAN_OUT);
        }
        outcome.expect("an entry is done once its outcome is set")
    }

    /// The outcome, if the publish is complete; else keeps `waker` to be woken.
    pub(crate) fn poll(&self, waker: &Waker) -> Option<Outcome> {
        let mut slot = self.lock();
        if let Some(out) = slot.outcome.take() {
            return Some(out);
        }
        match &slot.waker {
            Some(w) if w.will_wake(waker) => {}
            _ => slot.waker = Some(waker.clone()),
        }
        None
    }

    /// An async publisher gives up: if no round has taken its request yet, it never
    /// will, and nothing is published.
    pub(crate) fn cancel(&self) {
        let mut slot = self.lock();
        slot.request = None;
        slot.waker = None;
    }
}

/// How many blocked publishers each woken one wakes, and the commit thread first.
const FAN_OUT: usize = 2;

/// The blocked publishers of one round, woken as a tree: the commit thread wakes the
/// first [`FAN_OUT`], and each publisher that wakes wakes the next ones before it
/// returns. Waking a parked thread is a system call of a few microseconds on a virtual
/// machine; 64 of them in a row were a third of a round's time, spent before the commit
/// thread could start the next round. Spread over the woken threads (and cores), they
/// overlap the next round instead.
#[derive(Debug)]
struct WakeChain {
    entries: Vec<Arc<Entry>>,
    next: AtomicUsize,
}

impl WakeChain {
    fn wake_next(&self, count: usize) {
        for _ in 0..count {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(entry) = self.entries.get(i) else {
                return;
            };
            entry.done.store(true, Ordering::Release);
            if let Some(t) = &entry.thread {
                t.unpark();
            }
        }
    }
}

/// Wakes an async publisher. A waker is the user's runtime's code: one that panics must
/// not take the commit thread (and every publish queued behind it) with it.
fn wake(w: Waker) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.wake()));
}

/// Completes the publishes of a round: every outcome is set first, then async publishers
/// are woken, and blocked ones through a [`WakeChain`]. Every blocked one is woken: each
/// that wakes wakes [`FAN_OUT`] more until none is left (and takes its reference to the
/// chain, so that the chain, which holds the entries, is freed with the last).
pub(crate) fn complete_all(done: impl IntoIterator<Item = (Arc<Entry>, Outcome)>) {
    let mut blocked = Vec::new();
    let mut wakers = Vec::new();
    for (entry, outcome) in done {
        {
            let mut slot = entry.lock();
            slot.outcome = Some(outcome);
            wakers.extend(slot.waker.take());
        }
        if entry.thread.is_some() {
            blocked.push(entry);
        }
    }
    if !blocked.is_empty() {
        let chain = Arc::new(WakeChain {
            entries: blocked,
            next: AtomicUsize::new(0),
        });
        for entry in &chain.entries {
            entry.lock().chain = Some(Arc::clone(&chain));
        }
        chain.wake_next(FAN_OUT);
    }
    wakers.into_iter().for_each(wake);
}

/// The publishes of one partition waiting for a round, and whether one runs.
#[derive(Debug, Default)]
pub(crate) struct CommitQueue {
    state: Mutex<QueueState>,
    /// Signalled when a publish is queued, a round ends, or the topic closes.
    work: Condvar,
    /// The commit thread, joined when the topic closes: a round holds the topic, and
    /// the topic's last handle must let go of the directory before its drop returns
    /// (so that it can be opened again at once).
    handle: Mutex<Option<std::thread::JoinHandle<()>>>,
}

#[derive(Debug, Default)]
struct QueueState {
    entries: Vec<Arc<Entry>>,
    /// A round runs (the commit thread's, or a publisher's own).
    busy: bool,
    /// The commit thread was started.
    thread: bool,
    /// The commit thread sleeps until this many publishes are queued (0: it is not
    /// asleep): a publisher wakes it only then, not once per publish.
    wanted: usize,
    stop: bool,
    /// Publishes in the last round, and how long its sync took: the commit delay.
    last_round: usize,
    last_sync: Duration,
}

/// A publisher's own round under way (see [`CommitQueue::own_round`]).
#[derive(Debug)]
pub(crate) struct OwnRound<'a> {
    queue: &'a CommitQueue,
    began: Instant,
}

impl OwnRound<'_> {
    /// The sync starts now: the round's time is counted from here.
    pub(crate) fn syncing(&mut self) {
        self.began = Instant::now();
    }
}

impl Drop for OwnRound<'_> {
    fn drop(&mut self) {
        self.queue.leave(self.began.elapsed());
    }
}

/// What a publisher is to do, from [`CommitQueue::enter`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Nothing queued, no round running, and the last round held one publish: run a
    /// round of this publish now, on this thread, then call [`CommitQueue::leave`].
    Own,
    /// Queued: wait for the entry. `start_thread` is set for the one caller that must
    /// start the commit thread.
    Queued { start_thread: bool },
    /// The topic is closed: nothing was queued.
    Closed,
}

impl CommitQueue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A publisher arrives with `entry`. With `own_round` (a blocked publisher) it may
    /// run the round itself, when it is alone (see [`Turn::Own`]); otherwise the entry
    /// is queued for the commit thread.
    pub(crate) fn enter(&self, entry: &Arc<Entry>, own_round: bool) -> Turn {
        let mut q = self.lock();
        if q.stop {
            return Turn::Closed;
        }
        // After a round of many, the publishers it released come back one by one: the
        // first must not start a round of its own, which would cover it alone and leave
        // the others to the next.
        if own_round && !q.busy && q.entries.is_empty() && q.last_round <= 1 {
            q.busy = true;
            return Turn::Own;
        }
        q.entries.push(Arc::clone(entry));
        let start_thread = !std::mem::replace(&mut q.thread, true);
        let wake = q.wanted != 0 && q.entries.len() >= q.wanted;
        drop(q);
        if wake {
            self.work.notify_one();
        }
        Turn::Queued { start_thread }
    }

    /// A publisher's own round: [`CommitQueue::leave`] when dropped, however the round
    /// ends (a panic in it too, which would otherwise leave the queue busy for good).
    pub(crate) fn own_round(&self) -> OwnRound<'_> {
        OwnRound {
            queue: self,
            began: Instant::now(),
        }
    }

    /// A publisher's own round ended.
    pub(crate) fn leave(&self, took: Duration) {
        let mut q = self.lock();
        q.busy = false;
        q.last_round = 1;
        q.last_sync = took;
        let wake = q.wanted != 0 && !q.entries.is_empty();
        drop(q);
        if wake {
            self.work.notify_one();
        }
    }

    /// The commit thread could not be started: the entries queued so far are handed to
    /// the caller to complete (with the error), and the next publisher tries again.
    pub(crate) fn thread_failed(&self) -> Vec<Arc<Entry>> {
        let mut q = self.lock();
        q.thread = false;
        std::mem::take(&mut q.entries)
    }

    /// Keeps the commit thread's handle, to join it on [`CommitQueue::stop`].
    pub(crate) fn started(&self, handle: std::thread::JoinHandle<()>) {
        *self.handle.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
        if self.lock().stop {
            // Closed while it started: `stop` may have looked for the handle already.
            self.join();
        }
    }

    /// The topic closes: the commit thread completes what is queued and ends; this
    /// waits for it (at most the end of a round: a write and a sync).
    pub(crate) fn stop(&self) {
        self.lock().stop = true;
        self.work.notify_all();
        self.join();
    }

    fn join(&self) {
        let handle = self.handle.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle {
            if h.thread().id() != std::thread::current().id() {
                // It never panics (a publish's error is its outcome); if it did, its
                // publishes were answered or are lost with it, and close goes on.
                let _ = h.join();
            }
        }
    }

    /// The commit thread's wait for its next round: the entries to write, or `None`
    /// when the topic closed and nothing is left.
    pub(crate) fn next_round(&self) -> Option<Vec<Arc<Entry>>> {
        let mut q = self.lock();
        loop {
            if q.stop && q.entries.is_empty() {
                return None;
            }
            if q.entries.is_empty() || q.busy {
                // Nothing to do, or a publisher's own round runs (`leave` wakes it).
                q.wanted = 1;
                q = self.work.wait(q).unwrap_or_else(|e| e.into_inner());
                q.wanted = 0;
                continue;
            }
            // The commit delay (see the module's docs).
            let target = q.last_round;
            let until = Instant::now() + (q.last_sync / 2).min(Duration::from_millis(1));
            while q.entries.len() < target && !q.stop {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                q.wanted = target;
                q = self
                    .work
                    .wait_timeout(q, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                q.wanted = 0;
            }
            if q.busy || q.entries.is_empty() {
                continue;
            }
            q.busy = true;
            return Some(std::mem::take(&mut q.entries));
        }
    }

    /// The commit thread died (a panic it did not catch): the next publisher to queue
    /// starts another.
    pub(crate) fn thread_gone(&self) {
        let mut q = self.lock();
        q.thread = false;
        q.busy = false;
    }

    /// The commit thread's round of `count` publishes ended; its sync took `took`.
    pub(crate) fn round_done(&self, count: usize, took: Duration) {
        let mut q = self.lock();
        q.busy = false;
        q.last_round = count;
        q.last_sync = took;
    }
}
