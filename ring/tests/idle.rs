//! Idle readers and writers cost nothing: blocked threads park on the condvar after their
//! bounded spin, pending tasks stay pending, a writer on a full ring parks. CPU time of
//! the whole process is measured with getrusage.
#![cfg(not(loom))]
#![cfg(not(miri))]

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use memq_ring::blocking::Parking;
use memq_ring::future::WakerLists;
use memq_ring::{Group, Reader, Ring, RingConfig, Start, TryRecvError};

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
fn idle_readers_members_tasks_and_a_blocked_writer_use_no_cpu() {
    // Threads: 20 readers and 10 members of an empty ring; a writer on a full ring.
    let empty =
        Arc::new(Ring::<u64, _>::with_waiters(RingConfig::new(16), Parking::default()).unwrap());
    let group = Group::new(&empty, Start::Latest).unwrap();
    let mut threads: Vec<_> = (0..20)
        .map(|_| {
            let mut r = Reader::new(&empty, Start::Latest).unwrap();
            thread::spawn(move || r.recv() == Err(TryRecvError::Closed))
        })
        .collect();
    threads.extend((0..10).map(|_| {
        let mut m = group.member().unwrap();
        thread::spawn(move || m.recv() == Err(TryRecvError::Closed))
    }));
    let full =
        Arc::new(Ring::<u64, _>::with_waiters(RingConfig::new(1), Parking::default()).unwrap());
    let stuck = Reader::new(&full, Start::Latest).unwrap();
    full.publish(1).unwrap();
    let writer = {
        let full = full.clone();
        thread::spawn(move || full.publish(2).is_err())
    };
    // Tasks: 20 readers pending on one executor thread.
    let tasks =
        Arc::new(Ring::<u64, _>::with_waiters(RingConfig::new(16), WakerLists::default()).unwrap());
    let mut readers: Vec<_> = (0..20)
        .map(|_| Reader::new(&tasks, Start::Latest).unwrap())
        .collect();
    let executor = thread::spawn(move || {
        futures_executor::block_on(futures_util::future::join_all(
            readers.iter_mut().map(|r| r.recv_async()),
        ))
        .into_iter()
        .all(|r| r == Err(TryRecvError::Closed))
    });
    // Let every one reach its wait before measuring.
    thread::sleep(Duration::from_millis(300));
    let before = cpu_time();
    thread::sleep(Duration::from_secs(1));
    let used = cpu_time() - before;
    empty.close();
    full.close();
    tasks.close();
    for t in threads {
        assert!(
            t.join().unwrap(),
            "a waiting reader or member saw the ring closed"
        );
    }
    assert!(
        writer.join().unwrap(),
        "the blocked writer got its value back"
    );
    assert!(
        executor.join().unwrap(),
        "the pending tasks saw the ring closed"
    );
    drop(stuck);
    eprintln!("50 idle readers and a blocked writer for 1 s used {used:?} of CPU");
    assert!(
        used < Duration::from_millis(50),
        "idle waiters burned {used:?} of CPU in 1 s"
    );
}
