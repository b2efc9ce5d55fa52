//! `Threads::block_on` (which also runs every task of the `Threads` runtime) keeps a
//! wake-up that arrives while user code it runs inside a poll parks the thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use memq::rt::Threads;
use memq::{ManualClock, StartAt, Topic, TopicConfig};

/// Parks the thread that drops it on a channel, once.
struct Trap {
    rx: Mutex<Option<mpsc::Receiver<()>>>,
    sprung: Arc<AtomicBool>,
}

impl Drop for Trap {
    fn drop(&mut self) {
        if let Some(rx) = self.rx.lock().unwrap().take() {
            self.sprung.store(true, Ordering::SeqCst);
            let _ = rx.recv();
        }
    }
}

#[derive(Clone)]
struct Item {
    v: u32,
    _trap: Option<Arc<Trap>>,
}

#[test]
fn a_park_in_user_code_inside_a_poll_keeps_block_ons_wake_up() {
    let clock = Arc::new(ManualClock::new());
    let x = Topic::<Item>::new(
        TopicConfig::new(4)
            .ttl(Duration::from_millis(10))
            .clock(clock.clone()),
    )
    .unwrap();
    let mut sub = x.subscribe(StartAt::Earliest).unwrap();
    let (tx, rx) = mpsc::channel();
    let sprung = Arc::new(AtomicBool::new(false));
    x.try_publish(Item {
        v: 0,
        _trap: Some(Arc::new(Trap {
            rx: Mutex::new(Some(rx)),
            sprung: sprung.clone(),
        })),
    })
    .unwrap();
    // The subscriber's copy goes at once; the log's stays until it expires, and the next
    // receive drops it after registering to wait.
    assert_eq!(sub.try_recv().map(|m| m.v).ok(), Some(0));
    clock.advance(Duration::from_millis(20));
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = done_tx.send(Threads::block_on(sub.recv()).map(|m| m.v));
    });
    while !sprung.load(Ordering::SeqCst) {
        thread::sleep(Duration::from_millis(1));
    }
    thread::sleep(Duration::from_millis(20));
    x.try_publish(Item { v: 42, _trap: None }).unwrap(); // wakes the receive
    thread::sleep(Duration::from_millis(20));
    tx.send(()).unwrap(); // the `Drop` returns

    // A hang detector: a healthy run takes tens of milliseconds.
    let got = done_rx.recv_timeout(Duration::from_secs(30));
    assert_eq!(got, Ok(Ok(42)), "block_on slept on with a message waiting");
}
