//! Timer wake-ups that nobody waits for any more: a wait that ended, a member or a
//! publisher that gave up. A timer that can withdraw a wake-up
//! ([`Timer::wake_after_cancellable`]) is asked to at once; any timer is left holding
//! nothing that keeps the waiting task (its waker) alive until the time comes.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use memq_core::{AckConfig, ManualClock, StartAt, Timer, TimerEntry, Topic, TopicConfig};

const HOUR: Duration = Duration::from_secs(3600);

/// A timer that cannot withdraw: it keeps every waker it is given until its time, which
/// never comes here.
#[derive(Default)]
struct KeepingTimer(Mutex<Vec<Waker>>);

impl KeepingTimer {
    /// How many wake-ups it was asked for.
    fn asked(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

impl Timer for KeepingTimer {
    fn wake_after(&self, _delay: Duration, waker: Waker) {
        self.0.lock().unwrap().push(waker);
    }
}

/// A timer that withdraws what it is asked to: `live` holds the wake-ups still wanted.
#[derive(Default)]
struct WithdrawingTimer {
    next: AtomicU64,
    live: Arc<Mutex<BTreeMap<u64, Waker>>>,
}

impl WithdrawingTimer {
    fn live(&self) -> usize {
        self.live.lock().unwrap().len()
    }

    /// Checks that `n` wake-ups are wanted.
    #[track_caller]
    fn expect(&self, n: usize, what: &str) {
        assert_eq!(self.live(), n, "{what}");
    }

    /// Wakes every wake-up still wanted, as if its time had come.
    fn fire(&self) {
        let due = std::mem::take(&mut *self.live.lock().unwrap());
        due.into_values().for_each(Waker::wake);
    }
}

impl Timer for WithdrawingTimer {
    fn wake_after(&self, _delay: Duration, _waker: Waker) {
        panic!("memq asks a timer that can withdraw for wake-ups it can withdraw");
    }

    fn wake_after_cancellable(&self, _delay: Duration, waker: Waker) -> Option<TimerEntry> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.live.lock().unwrap().insert(id, waker);
        let live = Arc::downgrade(&self.live);
        Some(TimerEntry::new(move || {
            if let Some(live) = live.upgrade() {
                live.lock().unwrap().remove(&id);
            }
        }))
    }
}

/// A task's waker whose references can be counted, and that counts its wake-ups.
#[derive(Default)]
struct Task(AtomicU64);

impl Wake for Task {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn task() -> (Arc<Task>, Waker) {
    let task = Arc::new(Task::default());
    (task.clone(), Waker::from(task))
}

/// A publish of `value` parked on the full `topic` by `waker`: it asked `timer`, which had
/// no other wake-up wanted, for one.
fn parked<'a>(
    topic: &'a Topic<u32>,
    value: u32,
    waker: &Waker,
    timer: &WithdrawingTimer,
) -> memq_core::Publish<'a, u32> {
    let mut publish = topic.publish(value);
    park(&mut publish, waker);
    timer.expect(1, "the parked publish asked for a wake-up");
    publish
}

/// Drops the test's own waker and checks that nothing else holds the task any more.
fn let_go(task: Arc<Task>, waker: Waker, what: &str) {
    drop(waker);
    assert_eq!(Arc::strong_count(&task), 1, "{what}");
}

/// Polls `fut` once with `waker`; it must wait.
fn park<F: Future + Unpin>(fut: &mut F, waker: &Waker) {
    let poll = Pin::new(fut).poll(&mut Context::from_waker(waker));
    assert!(poll.is_pending(), "expected the future to wait");
}

/// A member and the lease it holds.
type Holder = (memq_core::AckConsumer<u32>, memq_core::Delivery<u32>);

/// A topic of 4 slots on a manual clock, a member holding the lease of message 5 (both
/// returned, to be kept), and a second member of the same group (`timer`, 1 h leases)
/// for the test to wait with.
fn leased(timer: Arc<dyn Timer>) -> (Topic<u32>, Holder, memq_core::AckConsumer<u32>) {
    let clock = Arc::new(ManualClock::new());
    let topic = Topic::new(TopicConfig::new(4).clock(clock.clone())).unwrap();
    let config = || AckConfig::new().ack_wait(HOUR).timer(timer.clone());
    let mut holder = topic.group_acked("g", StartAt::Earliest, config()).unwrap();
    let waiter = topic.group_acked("g", StartAt::Earliest, config()).unwrap();
    topic.try_publish(5).unwrap();
    let lease = holder.try_recv().unwrap();
    (topic, (holder, lease), waiter)
}

/// A topic of 1 slot whose messages live 1 h on a manual clock (`timer`), full: message 0
/// is retained for a subscriber that never reads (returned, to be kept).
fn full_with_ttl(timer: Arc<dyn Timer>) -> (Topic<u32>, memq_core::Subscriber<u32>) {
    let clock = Arc::new(ManualClock::new());
    let topic = Topic::<u32>::new(TopicConfig::new(1).clock(clock).ttl(HOUR).timer(timer)).unwrap();
    let idle = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish(0).unwrap();
    (topic, idle)
}

/// A member waiting for a lease to run out asks the timer for a wake-up. Once the member
/// is gone, whatever the timer still holds must not keep the waiting task alive.
#[test]
fn a_dropped_member_leaves_its_task_to_no_timer() {
    let timer = Arc::new(KeepingTimer::default());
    let (_topic, _lease, mut waiter) = leased(timer.clone());
    let (task, waker) = task();
    let mut recv = waiter.recv();
    park(&mut recv, &waker);
    drop(recv);
    assert_eq!(timer.asked(), 1, "the member asked for a wake-up");
    drop(waiter);
    let_go(
        task,
        waker,
        "the timer still holds the task of a member that is gone",
    );
}

/// A publisher parked on a full log of a topic with a TTL asks the timer to be woken when
/// the oldest message expires. Once it gave up (its future dropped, as a timed-out
/// publish drops it), that wake-up must not keep its task alive.
#[test]
fn a_publisher_that_gave_up_leaves_its_task_to_no_timer() {
    let timer = Arc::new(KeepingTimer::default());
    let (topic, _idle) = full_with_ttl(timer.clone());
    let (task, waker) = task();
    let mut publish = topic.publish(1);
    park(&mut publish, &waker);
    assert_eq!(timer.asked(), 1, "the publisher asked for a wake-up");
    drop(publish);
    let_go(
        task,
        waker,
        "the timer or the log still holds the task of a publisher that gave up",
    );
}

/// With a timer that can withdraw, a member that is gone leaves no wake-up behind; while
/// it waits, the wake-up it asked for reaches it.
#[test]
fn a_dropped_member_withdraws_its_wake_up() {
    let timer = Arc::new(WithdrawingTimer::default());
    let (_topic, _lease, mut waiter) = leased(timer.clone());
    let (task, waker) = task();
    {
        let mut recv = waiter.recv();
        park(&mut recv, &waker);
        timer.expect(1, "wake-ups wanted");
        timer.fire();
        assert_eq!(
            task.0.load(Ordering::SeqCst),
            1,
            "the wake-up reached the task"
        );
        // Asked again (the clock did not move).
        park(&mut recv, &waker);
        timer.expect(1, "wake-ups wanted");
        // The same task waiting again asks for nothing more.
        park(&mut recv, &waker);
        timer.expect(1, "one wake-up per task");
    }
    drop(waiter);
    timer.expect(0, "a wake-up left behind by a member that is gone");
    let_go(task, waker, "the task is still held");
}

/// With a timer that can withdraw, a publisher that gave up leaves no wake-up behind, and
/// neither does one that got on.
#[test]
fn a_publisher_that_gave_up_withdraws_its_wake_up() {
    let timer = Arc::new(WithdrawingTimer::default());
    let (topic, idle) = full_with_ttl(timer.clone());
    let (task, waker) = task();
    let publish = parked(&topic, 1, &waker, &timer);
    drop(publish);
    timer.expect(0, "a wake-up left behind by a publisher that gave up");

    // Parked, then let on by a reader: its wake-up is not wanted any more either.
    let mut publish = parked(&topic, 2, &waker, &timer);
    drop(idle);
    let poll = Pin::new(&mut publish).poll(&mut Context::from_waker(&waker));
    assert!(matches!(poll, Poll::Ready(Ok(_))));
    drop(publish);
    timer.expect(0, "a wake-up left behind by a publisher that got on");
    let_go(task, waker, "the task is still held");
}

/// A publisher woken (room was freed) that gives up before it comes back leaves no
/// wake-up behind either: its waiter's waker went to wake it, so the log finds its alarm
/// by the task no longer waiting.
#[test]
fn a_publisher_woken_then_dropped_withdraws_its_wake_up() {
    let timer = Arc::new(WithdrawingTimer::default());
    let (topic, idle) = full_with_ttl(timer.clone());
    let (task, waker) = task();
    let publish = parked(&topic, 1, &waker, &timer);
    drop(idle);
    assert_eq!(task.0.load(Ordering::SeqCst), 1, "woken by the room freed");
    drop(publish);
    timer.expect(0, "a wake-up left behind by a woken publisher that gave up");
    let_go(task, waker, "the task is still held");
}

/// Two publishes of one task parked on the same full log each have their wake-up: the
/// one that gives up withdraws its own and leaves the other's, which still needs it.
#[test]
fn a_wake_up_stays_while_another_publish_of_the_task_waits() {
    let timer = Arc::new(WithdrawingTimer::default());
    let (topic, _idle) = full_with_ttl(timer.clone());
    let (task, waker) = task();
    let mut first = topic.publish(1);
    let mut second = topic.publish(2);
    park(&mut first, &waker);
    park(&mut second, &waker);
    timer.expect(2, "one wake-up per parked publish");
    // Parking again asks for nothing more.
    park(&mut first, &waker);
    timer.expect(2, "wake-ups wanted");
    drop(first);
    timer.expect(1, "the publish still parked lost its wake-up");
    timer.fire();
    assert_eq!(task.0.load(Ordering::SeqCst), 1);
    // Woken by its alarm before the clock moved: it waits again, with a new one.
    park(&mut second, &waker);
    timer.expect(1, "wake-ups wanted");
    drop(second);
    timer.expect(0, "wake-ups wanted");
}

/// With others parked (the usual case when a publish times out on a full topic), each
/// publisher that gives up withdraws its own wake-up; and closing the topic withdraws
/// those of the publishers it wakes.
#[test]
fn publishers_that_give_up_while_others_wait_withdraw_their_wake_ups() {
    let timer = Arc::new(WithdrawingTimer::default());
    let (topic, _idle) = full_with_ttl(timer.clone());
    let (_stays, waker) = task();
    let mut stays = topic.publish(0);
    park(&mut stays, &waker);
    let (gone, gone_waker) = task();
    for n in 1..=100 {
        let mut publish = topic.publish(n);
        park(&mut publish, &gone_waker);
    }
    drop(gone_waker);
    timer.expect(1, "wake-ups left behind by publishers that gave up");
    assert_eq!(Arc::strong_count(&gone), 1);
    topic.close();
    timer.expect(0, "closing left a parked publisher's wake-up");
    let poll = Pin::new(&mut stays).poll(&mut Context::from_waker(&waker));
    assert!(matches!(poll, Poll::Ready(Err(_))));
}

/// A wake-up whose time the topic's clock already shows but that the timer has not run
/// (the clock is ahead of the timer) still has a task to wake: another publisher parking
/// meanwhile must not withdraw it.
#[test]
fn a_wake_up_not_yet_run_stays_when_the_clock_is_ahead_of_the_timer() {
    let clock = Arc::new(ManualClock::new());
    let timer = Arc::new(WithdrawingTimer::default());
    let topic = Topic::<u32>::new(
        TopicConfig::new(2)
            .clock(clock.clone())
            .ttl(Duration::from_millis(10))
            .timer(timer.clone()),
    )
    .unwrap();
    let _idle = topic.subscribe(StartAt::Earliest).unwrap();
    topic.try_publish(0).unwrap();
    clock.advance(Duration::from_millis(5));
    topic.try_publish(1).unwrap();
    clock.advance(Duration::from_millis(1));
    // A batch of two waits for both messages to expire; its alarm is for the first.
    let (batch_task, batch_waker) = task();
    let mut batch = topic.publish_batch(vec![2, 3]);
    park(&mut batch, &batch_waker);
    timer.expect(1, "wake-ups wanted");
    // The clock shows the first expiry, the timer has not run yet. A publisher takes the
    // slot that freed (the batch needs two), and the next one parks.
    clock.advance(Duration::from_millis(6));
    topic.try_publish(4).unwrap();
    let (_task, waker) = task();
    let mut single = topic.publish(5);
    park(&mut single, &waker);
    timer.expect(2, "the batch's wake-up was withdrawn before it ran");
    timer.fire();
    assert_eq!(batch_task.0.load(Ordering::SeqCst), 1);
}

/// A timer that wakes under its own lock (allowed: the wake-up is its own code) and
/// counts withdrawals that come from inside a wake-up call, which would take that lock
/// again.
#[derive(Default)]
struct WakingUnderLock {
    live: Mutex<BTreeMap<u64, Waker>>,
    next: AtomicU64,
    waking: std::sync::atomic::AtomicBool,
    reentered: AtomicU64,
}

impl WakingUnderLock {
    fn fire(&self) {
        let live = self.live.lock().unwrap();
        self.waking.store(true, Ordering::SeqCst);
        for waker in live.values() {
            waker.wake_by_ref();
        }
        self.waking.store(false, Ordering::SeqCst);
    }
}

/// A [`WakingUnderLock`] shared with its entries.
#[derive(Default, Clone)]
struct SharedTimer(Arc<WakingUnderLock>);

impl Timer for SharedTimer {
    fn wake_after(&self, _delay: Duration, _waker: Waker) {
        panic!("memq asks a timer that can withdraw for wake-ups it can withdraw");
    }

    fn wake_after_cancellable(&self, _delay: Duration, waker: Waker) -> Option<TimerEntry> {
        let id = self.0.next.fetch_add(1, Ordering::Relaxed);
        self.0.live.lock().unwrap().insert(id, waker);
        let timer = self.0.clone();
        Some(TimerEntry::new(move || {
            if timer.waking.load(Ordering::SeqCst) {
                timer.reentered.fetch_add(1, Ordering::SeqCst);
                return;
            }
            timer.live.lock().unwrap().remove(&id);
        }))
    }
}

/// A task whose wake-up drops its publish future: the alarm goes while the timer is
/// still inside the wake-up call (as when the woken task runs on another thread at once).
struct DropOnWake(Mutex<Option<Pin<Box<dyn Future<Output = ()> + Send>>>>);

impl Wake for DropOnWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        drop(self.0.lock().unwrap().take());
    }
}

/// A wake-up that has run is let go of without a withdrawal: none comes from inside the
/// timer's own wake-up call, where a timer that wakes under its lock would deadlock.
#[test]
fn no_withdrawal_comes_from_inside_the_wake_up_call() {
    let timer = SharedTimer::default();
    let (topic, idle) = full_with_ttl(Arc::new(timer.clone()));
    let handle = topic.clone();
    let task = Arc::new(DropOnWake(Mutex::new(Some(Box::pin(async move {
        let _ = handle.publish(1).await;
    })))));
    let waker = Waker::from(task.clone());
    {
        let mut slot = task.0.lock().unwrap();
        park(slot.as_mut().unwrap(), &waker);
    }
    assert_eq!(timer.0.live.lock().unwrap().len(), 1);
    timer.0.fire();
    assert!(
        task.0.lock().unwrap().is_none(),
        "the wake-up reached the task"
    );
    assert_eq!(
        timer.0.reentered.load(Ordering::SeqCst),
        0,
        "a withdrawal from inside the wake-up call"
    );
    drop(idle);
}

/// A timer whose wake-up runs at once, inside the call that asks for it (before memq has
/// its entry), and that counts withdrawals.
#[derive(Default)]
struct AtOnce(Arc<AtomicU64>);

impl Timer for AtOnce {
    fn wake_after(&self, _delay: Duration, _waker: Waker) {
        panic!("memq asks a timer that can withdraw for wake-ups it can withdraw");
    }

    fn wake_after_cancellable(&self, _delay: Duration, waker: Waker) -> Option<TimerEntry> {
        waker.wake();
        let withdrawn = self.0.clone();
        Some(TimerEntry::new(move || {
            withdrawn.fetch_add(1, Ordering::SeqCst);
        }))
    }
}

/// A wake-up that ran before memq stored its entry is let go of then, never withdrawn
/// later (from wherever the alarm happens to go, which may be a timer's wake-up call).
#[test]
fn a_wake_up_that_ran_before_its_entry_was_stored_is_never_withdrawn() {
    let timer = AtOnce::default();
    let withdrawn = timer.0.clone();
    let (topic, _idle) = full_with_ttl(Arc::new(timer));
    let (task, waker) = task();
    let mut publish = topic.publish(1);
    park(&mut publish, &waker);
    assert_eq!(task.0.load(Ordering::SeqCst), 1, "the wake-up ran");
    drop(publish);
    assert_eq!(
        withdrawn.load(Ordering::SeqCst),
        0,
        "a wake-up that ran was withdrawn"
    );
}
