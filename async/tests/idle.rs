//! Idle costs nothing: worker pools with nothing to do, and loops of `recv_timeout` on
//! empty topics, on every runtime, use no measurable CPU. CPU time is measured with
//! getrusage; the tests in this file run one at a time so they do not measure each other.
#![cfg(all(feature = "tokio", feature = "async-std", feature = "smol"))]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use memq::pool::{Mode, Shutdown, WorkerPool};
use memq::rt::{AsyncStd, RecvTimeoutExt, Runtime, Smol, Threads, Tokio};
use memq::{RecvTimeoutError, StartAt, Topic};

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

/// One measurement at a time in this process.
static SERIAL: Mutex<()> = Mutex::new(());

/// CPU used by the whole process during one second of idling, after a settling pause.
fn idle_cpu() -> Duration {
    thread::sleep(Duration::from_millis(300));
    let before = cpu_time();
    thread::sleep(Duration::from_secs(1));
    cpu_time() - before
}

const BUDGET: Duration = Duration::from_millis(50);

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn idle_worker_pools_use_no_cpu() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tokio = tokio_runtime();
    let rts = (
        Tokio::from(tokio.handle().clone()),
        AsyncStd,
        Smol::new(),
        Threads,
    );
    let topic = Topic::<u64>::with_capacity(64).unwrap();
    let handled = Arc::new(AtomicU64::new(0));
    let mut pools = Vec::new();
    macro_rules! pools_on {
        ($rt:expr, $name:literal) => {{
            let h = handled.clone();
            pools.push(
                WorkerPool::builder(&topic, concat!($name, "-async"))
                    .mode(Mode::Parallel(8))
                    .spawn(&$rt, move |_m| {
                        let h = h.clone();
                        async move { Ok::<_, String>(h.fetch_add(1, Ordering::SeqCst)) }
                    })
                    .unwrap(),
            );
            let h = handled.clone();
            pools.push(
                WorkerPool::builder(&topic, concat!($name, "-blocking"))
                    .mode(Mode::Parallel(4))
                    .spawn_blocking(&$rt, move |_m| {
                        Ok::<_, String>(h.fetch_add(1, Ordering::SeqCst))
                    })
                    .unwrap(),
            );
        }};
    }
    pools_on!(rts.0, "tokio");
    pools_on!(rts.1, "async-std");
    pools_on!(rts.2, "smol");
    pools_on!(rts.3, "threads");
    // One message through every pool first: they are running, not stuck.
    topic.publish_blocking(1).unwrap();
    let used = idle_cpu();
    let workers: usize = pools.iter().map(|p| p.stats().active).sum();
    assert_eq!(workers, 4 * 12);
    for pool in pools {
        let stats = pool.shutdown_blocking(Shutdown::Drain).unwrap();
        assert_eq!((stats.processed, stats.active), (1, 0));
    }
    assert_eq!(handled.load(Ordering::SeqCst), 8);
    eprintln!("8 idle pools ({workers} workers on 4 runtimes) for 1 s used {used:?} of CPU");
    assert!(used < BUDGET, "idle pools burned {used:?} of CPU in 1 s");
}

/// Loops that wait for a message with a time limit, and wait again when it runs out.
async fn timeout_loop<R: Runtime>(rt: R, topic: Topic<u64>, rounds: Arc<AtomicU64>) -> u64 {
    let mut sub = topic.subscribe(StartAt::Latest).unwrap();
    drop(topic); // the test holds the topic open
    loop {
        match sub.recv_timeout(Duration::from_millis(250), &rt).await {
            Err(RecvTimeoutError::Timeout) => {
                rounds.fetch_add(1, Ordering::SeqCst);
            }
            Err(RecvTimeoutError::Closed) => return rounds.load(Ordering::SeqCst),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn idle_recv_timeout_loops_use_no_cpu() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tokio = tokio_runtime();
    let tokio_rt = Tokio::from(tokio.handle().clone());
    let topic = Topic::<u64>::with_capacity(16).unwrap();
    let rounds = Arc::new(AtomicU64::new(0));
    let mut loops = Vec::new();
    for _ in 0..10 {
        let (t, r) = (topic.clone(), rounds.clone());
        loops.push(tokio_rt.spawn(timeout_loop(tokio_rt.clone(), t, r)));
        let (t, r) = (topic.clone(), rounds.clone());
        loops.push(AsyncStd.spawn(timeout_loop(AsyncStd, t, r)));
        let (t, r) = (topic.clone(), rounds.clone());
        loops.push(Smol::new().spawn(timeout_loop(Smol::new(), t, r)));
        let (t, r) = (topic.clone(), rounds.clone());
        loops.push(Threads.spawn(timeout_loop(Threads, t, r)));
    }
    // Group members waiting with a time limit, on plain threads (the blocking API).
    for _ in 0..10 {
        let mut member = topic.group("idle", StartAt::Latest).unwrap();
        let r = rounds.clone();
        loops.push(Threads.spawn_blocking(move || loop {
            match member.recv_blocking_timeout(Duration::from_millis(250)) {
                Err(RecvTimeoutError::Timeout) => {
                    r.fetch_add(1, Ordering::SeqCst);
                }
                Err(RecvTimeoutError::Closed) => return 0,
                other => panic!("{other:?}"),
            }
        }));
    }
    let start_rounds = rounds.load(Ordering::SeqCst);
    let used = idle_cpu();
    let idle_rounds = rounds.load(Ordering::SeqCst) - start_rounds;
    topic.close();
    for l in loops {
        l.join_blocking().unwrap();
    }
    eprintln!(
        "50 idle recv_timeout loops (4 runtimes + threads) for 1 s: {idle_rounds} timeouts, \
         {used:?} of CPU"
    );
    assert!(
        idle_rounds > 0,
        "the loops were waiting, with time limits that ran out"
    );
    assert!(used < BUDGET, "idle loops burned {used:?} of CPU in 1 s");
}
