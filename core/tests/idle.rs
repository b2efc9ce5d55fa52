//! Idle readers cost nothing: waiting subscribers and group members park (threads) or
//! stay pending (tasks) without polling. CPU time is measured with getrusage.

use std::thread;
use std::time::Duration;

use futures_util::future::join_all;
use memq_core::{RecvError, StartAt, Topic};

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
