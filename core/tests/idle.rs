//! Idle readers cost nothing: waiting subscribers and group members park (threads) or
//! stay pending (tasks) without polling. CPU time is measured with getrusage.

use std::thread;
use std::time::Duration;

use futures_util::future::join_all;
use memq_core::{AckConfig, RecvError, StartAt, Topic};

/// Held by each test here: the first two measure the whole process, which must not
/// count the threads or the 50,000 publishes of another test of this file run beside them.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// User + system CPU time of the whole process.
fn cpu_time() -> Duration {
    // SAFETY: `getrusage` writes into the zeroed struct we own; RUSAGE_SELF is valid.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut usage), 0);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

#[test]
fn hundred_idle_subscribers_use_no_cpu() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let topic = Topic::<u64>::with_capacity(16).unwrap();
    // 50 blocked threads and 50 pending tasks on one executor thread.
    let threads: Vec<_> = (0..50)
        .map(|_| {
            let mut sub = topic.subscribe(StartAt::Latest).unwrap();
            thread::spawn(move || matches!(sub.recv_blocking(), Err(RecvError::Closed)))
        })
        .collect();
    let mut subs: Vec<_> = (0..50)
        .map(|_| topic.subscribe(StartAt::Latest).unwrap())
        .collect();
    let executor = thread::spawn(move || {
        futures_executor::block_on(join_all(subs.iter_mut().map(|s| s.recv())))
            .into_iter()
            .all(|r| matches!(r, Err(RecvError::Closed)))
    });
    // Let every reader reach its wait before measuring.
    thread::sleep(Duration::from_millis(200));
    let before = cpu_time();
    thread::sleep(Duration::from_secs(1));
    let used = cpu_time() - before;
    topic.close();
    for t in threads {
        assert!(t.join().unwrap(), "thread reader saw Closed");
    }
    assert!(executor.join().unwrap(), "task readers saw Closed");
    eprintln!("100 idle subscribers for 1 s used {used:?} of CPU");
    assert!(
        used < Duration::from_millis(50),
        "idle subscribers burned {used:?} of CPU in 1 s"
    );
}

#[test]
fn idle_group_members_and_blocked_publisher_use_no_cpu() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let topic = Topic::<u64>::with_capacity(1).unwrap();
    let members: Vec<_> = (0..20)
        .map(|_| topic.group("g", StartAt::Latest).unwrap())
        .collect();
    let readers: Vec<_> = members
        .into_iter()
        .map(|mut m| thread::spawn(move || m.recv_blocking_timeout(Duration::from_secs(30))))
        .collect();
    // A publisher blocked on a full partition (a subscriber that never reads holds it).
    let stuck = topic.subscribe(StartAt::Latest).unwrap();
    let publisher = {
        let topic = topic.clone();
        thread::spawn(move || {
            let _ = topic.try_publish(1);
            topic.publish_blocking(2).is_err()
        })
    };
    thread::sleep(Duration::from_millis(200));
    let before = cpu_time();
    thread::sleep(Duration::from_secs(1));
    let used = cpu_time() - before;
    topic.close();
    drop(stuck);
    assert!(publisher.join().unwrap(), "blocked publisher saw Closed");
    for r in readers {
        // One member may have received message 1; the rest see Closed.
        let _ = r.join().unwrap();
    }
    eprintln!("20 idle members + 1 blocked publisher for 1 s used {used:?} of CPU");
    assert!(used < Duration::from_millis(50), "burned {used:?}");
}

/// CPU time of the calling thread.
fn thread_cpu_time() -> Duration {
    // SAFETY: `clock_gettime` writes into the zeroed struct we own; the clock id is valid.
    let ts = unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        assert_eq!(
            libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts),
            0
        );
        ts
    };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Members of an explicit-ack group blocked at `max_in_flight` (one message out, held
/// by another member) while 50,000 messages are published: they could take none of
/// them, and their threads stay asleep until the ack frees the slot. Before, each
/// publish woke one of them to look and wait again.
#[test]
#[cfg_attr(miri, ignore = "threads, sleeps and the process-wide timer")]
fn members_waiting_at_max_in_flight_use_no_cpu_while_messages_pour_in() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const MESSAGES: u64 = 50_000;
    let topic = Topic::<u64>::with_capacity(1 << 16).unwrap();
    let cfg = || AckConfig::new().max_in_flight(1);
    let mut holder = topic.group_acked("g", StartAt::Earliest, cfg()).unwrap();
    topic.try_publish(0).unwrap();
    let held = holder.try_recv().unwrap();
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let mut m = topic.group_acked("g", StartAt::Earliest, cfg()).unwrap();
            thread::spawn(move || {
                let before = thread_cpu_time();
                let got = m.recv_blocking().map(|d| {
                    let v = *d.value();
                    d.ack().unwrap();
                    v
                });
                (got, thread_cpu_time() - before)
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(200)); // both wait at the limit
    for i in 1..=MESSAGES {
        topic.try_publish(i).unwrap();
    }
    thread::sleep(Duration::from_millis(100));
    held.ack().unwrap(); // one of them takes message 1, then the other message 2
    let mut used = Duration::ZERO;
    let mut got = Vec::new();
    for w in waiters {
        let (v, cpu) = w.join().unwrap();
        got.push(v.unwrap());
        used += cpu;
    }
    got.sort_unstable();
    assert_eq!(got, [1, 2]);
    eprintln!(
        "2 members waiting at max_in_flight through {MESSAGES} publishes used {used:?} of CPU"
    );
    assert!(used < Duration::from_millis(50), "burned {used:?}");
}
