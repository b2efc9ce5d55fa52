//! Worker pools under load, on every runtime, with async and blocking handlers: every item
//! handled exactly once, every handler panic and error turned into an error result,
//! counters consistent whenever they are read, and shutdown joining every worker.
#![cfg(all(feature = "tokio", feature = "async-std", feature = "smol"))]

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, Once};
use std::thread;
use std::time::Duration;

use memq::pool::{Mode, PoolMonitor, PoolStats, Shutdown, WorkResult, WorkerPool};
use memq::rt::{AsyncStd, Runtime, Smol, Threads, Tokio};
use memq::{AckConfig, Message, StartAt, Topic, TopicConfig};

const N: u64 = 20_000;
const PUBLISHERS: u64 = 4;
const WORKERS: usize = 6;
const PANIC_MARK: &str = "memq-test-panic";

fn quiet_test_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .unwrap_or("");
            if !msg.contains(PANIC_MARK) {
                default(info);
            }
        }));
    });
}

/// What the handler does with item `n`: panic, fail, or succeed.
fn handle(n: u64) -> Result<u64, String> {
    if n.is_multiple_of(97) {
        panic!("{PANIC_MARK} {n}");
    }
    if n.is_multiple_of(13) {
        return Err(format!("refused {n}"));
    }
    Ok(n * 3)
}

fn is_panic(n: u64) -> bool {
    n.is_multiple_of(97)
}

fn is_error(n: u64) -> bool {
    !is_panic(n) && n.is_multiple_of(13)
}

/// The invariants that hold at every instant.
fn check(s: &PoolStats) {
    assert!(s.consumed <= s.processed, "{s:?}");
    assert!(s.processed <= s.pushed, "{s:?}");
    assert!(s.errors <= s.processed, "{s:?}");
    assert!(s.active <= s.workers, "{s:?}");
}

/// Publishes 0..N from several threads (item `n` once), reading the counters as it goes.
fn publish_all(topic: &Topic<u64>, monitor: &PoolMonitor) -> u64 {
    let samples: u64 = thread::scope(|s| {
        let handles: Vec<_> = (0..PUBLISHERS)
            .map(|p| {
                s.spawn(move || {
                    let mut samples = 0;
                    for n in (p..N).step_by(PUBLISHERS as usize) {
                        topic.publish_blocking(n).unwrap();
                        if n.is_multiple_of(16) {
                            check(&monitor.stats());
                            samples += 1;
                        }
                    }
                    samples
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    samples
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Async,
    Blocking,
}

fn start<R: Runtime>(
    rt: &R,
    kind: Kind,
    topic: &Topic<u64>,
    results: Topic<WorkResult<u64>>,
) -> WorkerPool {
    let builder = WorkerPool::builder(topic, "stress")
        .mode(Mode::Parallel(WORKERS))
        .results(results);
    match kind {
        Kind::Async => builder.spawn(rt, |m: Message<u64>| async move { handle(*m.value()) }),
        Kind::Blocking => builder.spawn_blocking(rt, |m: Message<u64>| handle(*m.value())),
    }
    .unwrap()
}

/// Drains the pool after publishing everything: every item handled exactly once.
fn drain_everything<R: Runtime>(rt: R, kind: Kind, partitions: u32) {
    quiet_test_panics();
    let topic = Topic::<u64>::new(TopicConfig::new(256).partitions(partitions)).unwrap();
    // A small results topic, read as the pool runs: full, it holds the workers back.
    let results = Topic::<WorkResult<u64>>::with_capacity(64).unwrap();
    let mut reader = results.subscribe(StartAt::Earliest).unwrap();
    let collector = thread::spawn(move || {
        let mut all = Vec::new();
        // Ends when the pool's last worker drops its handle to the results topic.
        while let Ok(m) = reader.recv_blocking() {
            all.push(m.into_value());
        }
        all
    });
    let pool = start(&rt, kind, &topic, results);
    let monitor = pool.monitor();
    assert_eq!(monitor.stats().active, WORKERS);

    let samples = publish_all(&topic, &monitor);
    let stats = pool.shutdown_blocking(Shutdown::Drain).unwrap();
    assert!(monitor.is_finished());
    check(&stats);

    // The results: one per item, each the right outcome.
    let mut by_item = BTreeMap::new();
    let mut origin = BTreeMap::new();
    let mut panics = 0;
    for r in collector.join().unwrap() {
        assert!(
            origin.insert((r.partition, r.offset), ()).is_none(),
            "input once"
        );
        let n = match &r.outcome {
            Ok(v) => v / 3,
            Err(e) => e
                .message()
                .rsplit(' ')
                .next()
                .unwrap()
                .parse::<u64>()
                .unwrap(),
        };
        match &r.outcome {
            Ok(v) => assert_eq!(*v, n * 3),
            Err(e) if e.is_panic() => {
                assert!(is_panic(n), "{e}");
                panics += 1;
            }
            Err(e) => assert!(is_error(n), "{e}"),
        }
        assert!(by_item.insert(n, r).is_none(), "item {n} handled twice");
    }
    assert_eq!(by_item.len() as u64, N, "every item handled: {stats:?}");
    let want_panics = (0..N).filter(|&n| is_panic(n)).count() as u64;
    let want_errors = (0..N).filter(|&n| is_panic(n) || is_error(n)).count() as u64;
    assert_eq!(panics, want_panics, "every panic is an error result");
    assert_eq!(stats.workers, WORKERS);
    assert_eq!(stats.active, 0, "every worker joined");
    assert_eq!(
        (stats.pushed, stats.processed, stats.consumed),
        (N, N, N),
        "{stats:?}"
    );
    assert_eq!(stats.errors, want_errors);
    assert_eq!((stats.missed, stats.results_dropped), (0, 0));
    let rt = std::any::type_name::<R>();
    eprintln!("{kind:?} on {rt}, {partitions} partition(s): {stats:?}; {samples} samples");
}

/// An explicit-ack pool under load: the first attempt at every 13th item fails and at
/// every 97th panics; the nacked items come back, and in the end every item succeeded
/// exactly once and was acked.
fn drain_acked<R: Runtime>(rt: R, kind: Kind) {
    quiet_test_panics();
    let topic = Topic::<u64>::new(TopicConfig::new(256).partitions(3)).unwrap();
    let results = Topic::<WorkResult<u64>>::with_capacity(64).unwrap();
    let mut reader = results.subscribe(StartAt::Earliest).unwrap();
    let collector = thread::spawn(move || {
        let mut all = Vec::new();
        while let Ok(m) = reader.recv_blocking() {
            all.push(m.into_value());
        }
        all
    });
    let tried = Arc::new(Mutex::new(HashSet::new()));
    let first_try_fails = move |m: &Message<u64>| -> Result<u64, String> {
        let n = *m.value();
        if tried.lock().unwrap().insert(n) && (is_panic(n) || is_error(n)) {
            return handle(n);
        }
        Ok(n * 3)
    };
    let builder = WorkerPool::builder(&topic, "acked-stress")
        .mode(Mode::Parallel(WORKERS))
        .acked(
            AckConfig::new()
                .ack_wait(Duration::from_secs(60))
                .timer(rt.timer()),
        )
        .results(results);
    let pool = match kind {
        Kind::Async => builder.spawn(&rt, move |m: Message<u64>| {
            let out = first_try_fails(&m);
            async move { out }
        }),
        Kind::Blocking => builder.spawn_blocking(&rt, move |m: Message<u64>| first_try_fails(&m)),
    }
    .unwrap();
    let monitor = pool.monitor();
    publish_all(&topic, &monitor);
    let stats = pool.shutdown_blocking(Shutdown::Drain).unwrap();
    check(&stats);
    let failing = (0..N).filter(|&n| is_panic(n) || is_error(n)).count() as u64;
    assert_eq!(stats.active, 0);
    assert_eq!(
        (stats.pushed, stats.processed, stats.consumed, stats.errors),
        (N + failing, N + failing, N + failing, failing),
        "{stats:?}"
    );
    assert_eq!(stats.acks_refused, 0);
    let mut ok = BTreeMap::new();
    for r in collector.join().unwrap() {
        if let Ok(v) = r.outcome {
            assert!(ok.insert(v / 3, r.offset).is_none(), "succeeded twice");
        }
    }
    assert_eq!(ok.len() as u64, N, "every item succeeded once");
    let group = &topic.stats().groups[0];
    assert_eq!(
        (group.in_flight, group.redelivered),
        (0, failing),
        "{group:?}"
    );
    let rt = std::any::type_name::<R>();
    eprintln!("{kind:?} acked on {rt}: {stats:?}");
}

/// Stops the pool half way: what was taken is finished, the rest stays in the group.
fn stop_half_way<R: Runtime>(rt: R, kind: Kind) {
    quiet_test_panics();
    let topic = Topic::<u64>::with_capacity(N as usize).unwrap();
    let results = Topic::<WorkResult<u64>>::with_capacity(N as usize).unwrap();
    let mut reader = results.subscribe(StartAt::Earliest).unwrap();
    for n in 0..N {
        topic.try_publish(n).unwrap();
    }
    let pool = start(&rt, kind, &topic, results);
    // Stop once the first results are out.
    let first = reader.recv_blocking().unwrap().into_value();
    let stats = pool.shutdown_blocking(Shutdown::Stop).unwrap();
    check(&stats);
    assert_eq!(stats.active, 0);
    assert_eq!(
        stats.pushed, stats.consumed,
        "nothing left half done: {stats:?}"
    );

    let mut handled = vec![first.offset];
    while let Ok(m) = reader.try_recv() {
        handled.push(m.into_value().offset);
    }
    assert_eq!(handled.len() as u64, stats.consumed);
    // The rest is still the group's: a new member gets exactly the items not handled.
    topic.close();
    let mut rest = topic.group("stress", StartAt::Earliest).unwrap();
    while let Ok(m) = rest.recv_blocking() {
        handled.push(m.offset());
    }
    handled.sort_unstable();
    assert_eq!(
        handled,
        (0..N).collect::<Vec<_>>(),
        "nothing lost, nothing twice"
    );
    let rt = std::any::type_name::<R>();
    eprintln!("{kind:?} on {rt}: stopped after {} of {N}", stats.consumed);
}

/// Many short drains over five partitions with six workers, one partition's handler
/// slower than the others': workers run dry at different times, and a member that leaves
/// moves partitions between the others. Nothing may be left in the group when a drain
/// ends. (A drain once did end with items in the group: a worker that had found nothing
/// and ended, but not yet left, was handed a partition with messages, and the worker that
/// had been reading it was handed an empty one and ended too.)
fn drains_leave_nothing_behind<R: Runtime>(rt: R, kind: Kind) {
    const ITEMS: u64 = 300;
    for round in 0..30 {
        let topic = Topic::<u64>::new(TopicConfig::new(64).partitions(5)).unwrap();
        let builder = WorkerPool::builder(&topic, "drain")
            .mode(Mode::Parallel(WORKERS))
            .start_at(StartAt::Earliest);
        let slow = |m: &Message<u64>| {
            if m.partition() == 4 {
                thread::sleep(Duration::from_micros(50));
            }
        };
        let pool = match kind {
            Kind::Async => builder.spawn(&rt, move |m: Message<u64>| async move {
                slow(&m);
                Ok::<_, String>(*m.value())
            }),
            Kind::Blocking => builder.spawn_blocking(&rt, move |m: Message<u64>| {
                slow(&m);
                Ok::<_, String>(*m.value())
            }),
        }
        .unwrap();
        for n in 0..ITEMS {
            topic.publish_blocking(n).unwrap();
        }
        let stats = pool.shutdown_blocking(Shutdown::Drain).unwrap();
        let mut late = topic.group("drain", StartAt::Earliest).unwrap();
        let left: Vec<(u32, u64)> = std::iter::from_fn(|| late.try_recv().ok())
            .map(|m| (m.partition(), m.offset()))
            .collect();
        assert_eq!(
            (stats.pushed, left.as_slice()),
            (ITEMS, &[][..]),
            "round {round}: {stats:?}"
        );
    }
}

/// [`drains_leave_nothing_behind`] for an explicit-ack pool on one partition, one message
/// in flight at a time: members waiting at the drain's barrier are woken by each ack and
/// take the next message, while the others look and find nothing (from review: a worker
/// counted at the barrier that had just taken a message let the barrier pass, and the
/// messages behind it stayed in the group).
fn acked_drains_leave_nothing_behind<R: Runtime>(rt: R, kind: Kind) {
    const ITEMS: u64 = 200;
    for round in 0..20 {
        let topic = Topic::<u64>::with_capacity(256).unwrap();
        let builder = WorkerPool::builder(&topic, "acked-drain")
            .mode(Mode::Parallel(4))
            .start_at(StartAt::Earliest)
            .acked(AckConfig::new().max_in_flight(1));
        let pool = match kind {
            Kind::Async => {
                builder.spawn(
                    &rt,
                    |m: Message<u64>| async move { Ok::<_, String>(*m.value()) },
                )
            }
            Kind::Blocking => {
                builder.spawn_blocking(&rt, |m: Message<u64>| Ok::<_, String>(*m.value()))
            }
        }
        .unwrap();
        for n in 0..ITEMS {
            topic.publish_blocking(n).unwrap();
        }
        let stats = pool.shutdown_blocking(Shutdown::Drain).unwrap();
        let mut late = topic
            .group_acked("acked-drain", StartAt::Earliest, AckConfig::new())
            .unwrap();
        let left: Vec<u64> = std::iter::from_fn(|| late.try_recv().ok())
            .map(|d| d.message().offset())
            .collect();
        assert_eq!(
            (stats.consumed, left.as_slice()),
            (ITEMS, &[][..]),
            "round {round}: {stats:?}"
        );
    }
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

macro_rules! stress {
    ($($name:ident: $rt:expr;)*) => {$(
        mod $name {
            use super::*;
            #[test]
            fn async_handlers_one_partition() {
                let (_keep, rt) = $rt;
                drain_everything(rt, Kind::Async, 1);
            }
            #[test]
            fn blocking_handlers_one_partition() {
                let (_keep, rt) = $rt;
                drain_everything(rt, Kind::Blocking, 1);
            }
            #[test]
            fn async_handlers_five_partitions() {
                let (_keep, rt) = $rt;
                drain_everything(rt, Kind::Async, 5);
            }
            #[test]
            fn blocking_handlers_five_partitions() {
                let (_keep, rt) = $rt;
                drain_everything(rt, Kind::Blocking, 5);
            }
            #[test]
            fn async_acked_three_partitions() {
                let (_keep, rt) = $rt;
                drain_acked(rt, Kind::Async);
            }
            #[test]
            fn blocking_acked_three_partitions() {
                let (_keep, rt) = $rt;
                drain_acked(rt, Kind::Blocking);
            }
            #[test]
            fn async_drains_leave_nothing_behind() {
                let (_keep, rt) = $rt;
                drains_leave_nothing_behind(rt, Kind::Async);
            }
            #[test]
            fn blocking_drains_leave_nothing_behind() {
                let (_keep, rt) = $rt;
                drains_leave_nothing_behind(rt, Kind::Blocking);
            }
            #[test]
            fn async_acked_drains_leave_nothing_behind() {
                let (_keep, rt) = $rt;
                acked_drains_leave_nothing_behind(rt, Kind::Async);
            }
            #[test]
            fn blocking_acked_drains_leave_nothing_behind() {
                let (_keep, rt) = $rt;
                acked_drains_leave_nothing_behind(rt, Kind::Blocking);
            }
            #[test]
            fn async_stop_half_way() {
                let (_keep, rt) = $rt;
                stop_half_way(rt, Kind::Async);
            }
            #[test]
            fn blocking_stop_half_way() {
                let (_keep, rt) = $rt;
                stop_half_way(rt, Kind::Blocking);
            }
        }
    )*};
}

stress! {
    on_tokio: { let r = tokio_runtime(); let h = Tokio::from(r.handle().clone()); (Some(r), h) };
    on_async_std: (None::<()>, AsyncStd);
    on_smol: (None::<()>, Smol::new());
    on_threads: (None::<()>, Threads);
}
