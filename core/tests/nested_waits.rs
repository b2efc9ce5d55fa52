//! A blocked thread's wake-up survives user code that parks the thread while memq runs it
//! inside the blocking call (a value's `Drop`, run when memq lets go of an expired value):
//! a nested memq blocking call, or any other park (a channel receive), must not use up or
//! erase the outer call's wake-up.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use memq_core::{ManualClock, StartAt, Subscriber, Topic, TopicConfig, TryRecvError};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Parks the thread that drops it, once: in a nested memq receive, or on a channel.
enum Trap {
    Memq(Mutex<Option<Subscriber<u32>>>),
    Channel(Mutex<Option<mpsc::Receiver<()>>>),
}

struct Armed {
    trap: Trap,
    sprung: Arc<AtomicBool>,
}

impl Drop for Armed {
    fn drop(&mut self) {
        match &self.trap {
            Trap::Memq(sub) => {
                if let Some(mut sub) = sub.lock().unwrap().take() {
                    self.sprung.store(true, Ordering::SeqCst);
                    assert_eq!(sub.recv_blocking().map(|m| m.into_value()), Ok(7));
                }
            }
            Trap::Channel(rx) => {
                if let Some(rx) = rx.lock().unwrap().take() {
                    self.sprung.store(true, Ordering::SeqCst);
                    let _ = rx.recv();
                }
            }
        }
    }
}

#[derive(Clone)]
struct Item {
    v: u32,
    _trap: Option<Arc<Armed>>,
}

fn item(v: u32) -> Item {
    Item { v, _trap: None }
}

fn trapped(trap: Trap, sprung: &Arc<AtomicBool>) -> Item {
    Item {
        v: 0,
        _trap: Some(Arc::new(Armed {
            trap,
            sprung: sprung.clone(),
        })),
    }
}

fn wait_for(flag: &AtomicBool) {
    while !flag.load(Ordering::SeqCst) {
        thread::sleep(ms(1));
    }
}

/// A topic whose log keeps a trapped value that expires: the next receive lets go of it
/// (and runs its `Drop`) after it has registered to wait.
fn expiring_trap(trap: Trap, sprung: &Arc<AtomicBool>) -> (Topic<Item>, Subscriber<Item>) {
    let clock = Arc::new(ManualClock::new());
    let x = Topic::new(TopicConfig::new(4).ttl(ms(10)).clock(clock.clone())).unwrap();
    let mut sub = x.subscribe(StartAt::Earliest).unwrap();
    x.try_publish(trapped(trap, sprung)).unwrap();
    // The subscriber's copy goes at once; the log's copy stays until it expires.
    assert_eq!(sub.try_recv().map(|m| m.v).ok(), Some(0));
    clock.advance(ms(20));
    (x, sub)
}

#[test]
fn a_nested_blocking_receive_keeps_the_outer_receives_wake_up() {
    let y = Topic::<u32>::with_capacity(4).unwrap();
    let sprung = Arc::new(AtomicBool::new(false));
    let inner = y.subscribe(StartAt::Latest).unwrap();
    let (x, mut sub) = expiring_trap(Trap::Memq(Mutex::new(Some(inner))), &sprung);
    let outer = thread::spawn(move || {
        let t = Instant::now();
        let r = sub
            .recv_blocking_timeout(Duration::from_secs(60))
            .map(|m| m.v);
        (r, t.elapsed())
    });
    wait_for(&sprung);
    thread::sleep(ms(20));
    x.try_publish(item(42)).unwrap(); // wakes the outer receive, parked in the inner one
    thread::sleep(ms(20));
    y.try_publish(7).unwrap(); // ends the inner receive
    let (r, took) = outer.join().unwrap();
    assert_eq!(r, Ok(42));
    // A lost wake-up sleeps out the 60 s limit; a healthy run takes milliseconds, and a
    // loaded machine far less than 30 s.
    assert!(
        took < Duration::from_secs(30),
        "the outer receive slept {took:?} with a message waiting"
    );
}

/// A timer that keeps what it is asked to wake until the test fires it.
#[derive(Default)]
struct HeldTimer(Mutex<Vec<core::task::Waker>>);

impl memq_core::Timer for HeldTimer {
    fn wake_after(&self, _delay: Duration, waker: core::task::Waker) {
        self.0.lock().unwrap().push(waker);
    }
}

impl HeldTimer {
    /// Wakes what was asked last; `false` if nothing was.
    fn fire_last(&self) -> bool {
        let last = self.0.lock().unwrap().pop();
        last.map(core::task::Waker::wake).is_some()
    }
}

#[test]
fn a_park_in_user_code_keeps_a_timed_blocking_publishers_wake_up() {
    let clock = Arc::new(ManualClock::new());
    let timer = Arc::new(HeldTimer::default());
    let x = Topic::<Item>::new(
        TopicConfig::new(2)
            .ttl(Duration::from_secs(10))
            .clock(clock.clone())
            .timer(timer.clone()),
    )
    .unwrap();
    let mut slow = x.subscribe(StartAt::Earliest).unwrap(); // holds both slots
    let (tx, rx) = mpsc::channel();
    let sprung = Arc::new(AtomicBool::new(false));
    x.try_publish(trapped(Trap::Channel(Mutex::new(Some(rx))), &sprung))
        .unwrap();
    clock.advance(Duration::from_secs(5));
    x.try_publish(item(1)).unwrap(); // full: the trap (at 0 s) and 1 (at 5 s)
                                     // `first` waits first in line, `second` behind it.
    let first = {
        let x = x.clone();
        thread::spawn(move || x.publish_blocking(item(2)).map(|r| r.offset))
    };
    while x.stats().partitions[0].waiting_publishers < 1 {
        thread::sleep(ms(1));
    }
    let second = {
        let x = x.clone();
        thread::spawn(move || {
            let t = Instant::now();
            let r = x.publish_blocking_timeout(item(3), Duration::from_secs(60));
            (r.map(|r| r.offset).map_err(|e| e.to_string()), t.elapsed())
        })
    };
    while x.stats().partitions[0].waiting_publishers < 2 {
        thread::sleep(ms(1));
    }
    clock.advance(Duration::from_secs(6)); // the trap has expired, 1 has not
                                           // `second`'s TTL alarm (the last asked for): it looks again, expires the trap (whose
                                           // slot is `first`'s, first in line), stays in line, and then drops the trap, which
                                           // parks.
    assert!(timer.fire_last());
    wait_for(&sprung);
    assert_eq!(first.join().unwrap().ok(), Some(2));
    // The slow reader moves on: a slot frees, and `second` is woken inside the `Drop`.
    assert!(matches!(slow.try_recv(), Err(TryRecvError::Lagged(1))));
    assert_eq!(slow.try_recv().map(|m| m.v).ok(), Some(1));
    thread::sleep(ms(20));
    tx.send(()).unwrap(); // the `Drop` returns
    let (r, took) = second.join().unwrap();
    assert_eq!(r, Ok(3));
    // As above: 60 s when the wake-up is lost, milliseconds when it is kept.
    assert!(
        took < Duration::from_secs(30),
        "the publisher slept {took:?} with its room free"
    );
}
