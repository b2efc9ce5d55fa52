//! One suite, five ways to run it: on Tokio, async-std, smol, plain threads with the
//! blocking API, and `futures::executor::block_on`.
//!
//! Each scenario is an `async fn` generic over a [`Flavor`]; the `suite!` macro makes one
//! test per scenario per flavor. With the threads flavor, every receive and publish below
//! goes through the blocking API (`recv_blocking`, `publish_blocking_timeout`, ...) and
//! every spawned task is a thread; the other flavors await the async API on their runtime.
#![cfg(all(feature = "tokio", feature = "async-std", feature = "smol"))]

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::{select, Either};
use futures_util::FutureExt;
use memq::pool::{Mode, PoolError, PoolStats, Shutdown, WorkResult, WorkerPool};
use memq::rt::{
    AsyncStd, PublishFutureExt, PublishTimeoutExt, RecvManyTimeoutExt, RecvTimeoutExt, Runtime,
    Smol, Threads, Tokio,
};
use memq::{
    key_partition, AckConfig, Backoff, Message, Overflow, PublishError, RecvError,
    RecvTimeoutError, StartAt, Topic, TopicConfig,
};

/// How a scenario is run.
trait Flavor: 'static {
    type Rt: Runtime;
    /// Whether receives and publishes use the blocking API.
    const BLOCKING: bool = false;
    fn run<Fut: Future<Output = ()>>(scenario: impl FnOnce(Self::Rt) -> Fut);
}

struct TokioFlavor;
impl Flavor for TokioFlavor {
    type Rt = Tokio;
    fn run<Fut: Future<Output = ()>>(scenario: impl FnOnce(Tokio) -> Fut) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let rt = Tokio::from(runtime.handle().clone());
        runtime.block_on(scenario(rt));
    }
}

struct AsyncStdFlavor;
impl Flavor for AsyncStdFlavor {
    type Rt = AsyncStd;
    fn run<Fut: Future<Output = ()>>(scenario: impl FnOnce(AsyncStd) -> Fut) {
        async_std::task::block_on(scenario(AsyncStd));
    }
}

struct SmolFlavor;
impl Flavor for SmolFlavor {
    type Rt = Smol;
    fn run<Fut: Future<Output = ()>>(scenario: impl FnOnce(Smol) -> Fut) {
        smol::block_on(scenario(Smol::new()));
    }
}

struct ThreadsFlavor;
impl Flavor for ThreadsFlavor {
    type Rt = Threads;
    const BLOCKING: bool = true;
    fn run<Fut: Future<Output = ()>>(scenario: impl FnOnce(Threads) -> Fut) {
        Threads::block_on(scenario(Threads));
    }
}

/// `futures::executor::block_on` drives the scenario; spawned tasks go to threads.
struct BlockOnFlavor;
impl Flavor for BlockOnFlavor {
    type Rt = Threads;
    fn run<Fut: Future<Output = ()>>(scenario: impl FnOnce(Threads) -> Fut) {
        futures_executor::block_on(scenario(Threads));
    }
}

// The blocking or the async form of each operation, as the flavor says. Both branches
// compile for every flavor; `F::BLOCKING` is a constant, so only one is ever taken.
macro_rules! recv {
    ($F:ty, $r:expr) => {
        if <$F>::BLOCKING {
            $r.recv_blocking()
        } else {
            $r.recv().await
        }
    };
}
macro_rules! recv_many {
    ($F:ty, $r:expr, $buf:expr, $n:expr) => {
        if <$F>::BLOCKING {
            $r.recv_many_blocking($buf, $n)
        } else {
            $r.recv_many($buf, $n).await
        }
    };
}
macro_rules! recv_timeout {
    ($F:ty, $rt:expr, $r:expr, $d:expr) => {
        if <$F>::BLOCKING {
            $r.recv_blocking_timeout($d)
        } else {
            $r.recv_timeout($d, $rt).await
        }
    };
}
macro_rules! recv_many_timeout {
    ($F:ty, $rt:expr, $r:expr, $buf:expr, $n:expr, $d:expr) => {
        if <$F>::BLOCKING {
            $r.recv_many_blocking_timeout($buf, $n, $d)
        } else {
            $r.recv_many_timeout($buf, $n, $d, $rt).await
        }
    };
}
macro_rules! publish {
    ($F:ty, $topic:expr, $v:expr) => {
        if <$F>::BLOCKING {
            $topic.publish_blocking($v)
        } else {
            $topic.publish($v).await
        }
    };
}
macro_rules! publish_timeout {
    ($F:ty, $rt:expr, $topic:expr, $v:expr, $d:expr) => {
        if <$F>::BLOCKING {
            $topic.publish_blocking_timeout($v, $d)
        } else {
            $topic.publish_timeout($v, $d, $rt).await
        }
    };
}

const LONG: Duration = Duration::from_secs(30);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Handler panics in these tests carry this marker; the panic hook keeps them quiet.
const PANIC_MARK: &str = "memq-test-panic";

fn quiet_test_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied())
                .unwrap_or("");
            if !msg.contains(PANIC_MARK) {
                default(info);
            }
        }));
    });
}

// ----- scenarios ------------------------------------------------------------------------

/// Two subscribers each see every message, in order, while a task publishes into a small
/// topic (so the publisher waits for the slower reader).
async fn pubsub<F: Flavor>(rt: F::Rt) {
    const N: u32 = 2_000;
    let topic = Topic::<u32>::with_capacity(16).unwrap();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
            rt.spawn(async move {
                let mut got = Vec::new();
                loop {
                    match recv!(F, sub) {
                        Ok(m) => got.push((m.offset(), m.into_value())),
                        Err(RecvError::Closed) => return got,
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    for n in 0..N {
        publish!(F, topic, n).unwrap();
    }
    drop(topic); // the last publishing handle: readers drain, then see Closed
    for r in readers {
        let got = r.await.unwrap();
        let want: Vec<_> = (0..N).map(|n| (u64::from(n), n)).collect();
        assert_eq!(got, want);
    }
}

/// Members of one group share the work: every message exactly once.
async fn groups<F: Flavor>(rt: F::Rt) {
    const N: u64 = 3_000;
    let topic = Topic::<u64>::with_capacity(32).unwrap();
    let members: Vec<_> = (0..3)
        .map(|_| {
            let mut member = topic.group("g", StartAt::Earliest).unwrap();
            rt.spawn(async move {
                let mut got = Vec::new();
                let mut buf = Vec::new();
                loop {
                    match recv_many!(F, member, &mut buf, 7) {
                        Ok(0) => return got,
                        Ok(_) => got.extend(buf.drain(..).map(|m| m.into_value())),
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    for n in 0..N {
        publish!(F, topic, n).unwrap();
    }
    topic.close();
    let mut all = Vec::new();
    for m in members {
        let got = m.await.unwrap();
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "a member sees offset order"
        );
        all.extend(got);
    }
    all.sort_unstable();
    assert_eq!(all, (0..N).collect::<Vec<_>>(), "each message exactly once");
    let stats = topic.stats();
    assert_eq!(stats.groups[0].delivered, N);
}

/// Keyed messages land on the key's partition in order; a group spreads partitions over
/// its members and keeps per-partition order.
async fn partitions<F: Flavor>(rt: F::Rt) {
    const N: u32 = 1_000;
    const P: u32 = 4;
    let topic = Topic::<(u32, u32)>::new(TopicConfig::new(64).partitions(P)).unwrap();
    let mut audit = topic.subscribe(StartAt::Earliest).unwrap();
    let members: Vec<_> = (0..2)
        .map(|_| topic.group("g", StartAt::Earliest).unwrap())
        .collect();
    let readers: Vec<_> = members
        .into_iter()
        .map(|mut member| {
            rt.spawn(async move {
                let assigned: BTreeSet<u32> = member.assignment().into_iter().collect();
                let mut got = Vec::new();
                loop {
                    match recv!(F, member) {
                        Ok(m) => {
                            assert!(
                                assigned.contains(&m.partition()),
                                "only assigned partitions"
                            );
                            got.push((m.partition(), m.offset()));
                        }
                        Err(RecvError::Closed) => return (assigned, got),
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    let auditor = rt.spawn(async move {
        let mut got = Vec::new();
        while let Ok(m) = recv!(F, audit) {
            got.push(m);
        }
        got
    });
    for n in 0..N {
        let key = format!("key-{}", n % 10);
        if F::BLOCKING {
            topic.publish_keyed_blocking(&key, (n % 10, n)).unwrap();
        } else {
            topic.publish_keyed(&key, (n % 10, n)).await.unwrap();
        }
    }
    topic.close();

    let seen: Vec<Message<(u32, u32)>> = auditor.await.unwrap();
    assert_eq!(seen.len(), N as usize);
    let mut last: BTreeMap<u32, u32> = BTreeMap::new();
    for m in &seen {
        let (key, n) = *m.value();
        assert_eq!(
            m.partition(),
            key_partition(format!("key-{key}").as_bytes(), P)
        );
        if let Some(prev) = last.insert(key, n) {
            assert!(prev < n, "per-key order");
        }
    }
    let mut assigned_all = BTreeSet::new();
    let mut delivered = 0;
    for r in readers {
        let (assigned, got) = r.await.unwrap();
        assert!(
            assigned_all.is_disjoint(&assigned),
            "a partition has one reader"
        );
        assigned_all.extend(assigned);
        for p in 0..P {
            let offsets: Vec<u64> = got.iter().filter(|g| g.0 == p).map(|g| g.1).collect();
            assert!(
                offsets.windows(2).all(|w| w[0] + 1 == w[1]),
                "per-partition order"
            );
        }
        delivered += got.len();
    }
    assert_eq!(assigned_all, (0..P).collect());
    assert_eq!(delivered, N as usize);
}

/// Keyed and explicit-partition publishes, single and batched, with a time limit
/// (`PublishFutureExt::with_timeout`, awaited on every flavor): one that finds no room in
/// time hands back its message or its whole batch; one that gets room in time is
/// published.
async fn routed_publish_timeouts<F: Flavor>(rt: F::Rt) {
    let topic = Topic::<u32>::new(TopicConfig::new(4).partitions(2)).unwrap();
    let key = b"k";
    let p = key_partition(key, 2);
    let mut sub = topic.subscribe_partition(p, StartAt::Earliest).unwrap();
    let mut other = topic.subscribe_partition(1 - p, StartAt::Earliest).unwrap();
    let first = topic
        .publish_batch_keyed(key, vec![1, 2, 3])
        .with_timeout(ms(10), &rt)
        .await
        .unwrap();
    assert_eq!((first.partition, first.offset), (p, 0));
    // One slot is left in the key's partition: two do not fit, and come back whole.
    let err = topic
        .publish_batch_keyed(key, vec![4, 5])
        .with_timeout(ms(10), &rt)
        .await
        .unwrap_err();
    assert!(err.is_full());
    assert_eq!(err.into_inner(), [4, 5]);
    topic
        .publish_keyed(key, 4)
        .with_timeout(ms(10), &rt)
        .await
        .unwrap();
    let err = topic
        .publish_to(p, 5)
        .with_timeout(ms(10), &rt)
        .await
        .unwrap_err();
    assert_eq!(err.into_inner(), 5);
    // The other partition has room of its own.
    let r = topic
        .publish_batch_to(1 - p, vec![10, 11])
        .with_timeout(ms(10), &rt)
        .await
        .unwrap();
    assert_eq!(r.partition, 1 - p);
    // A batch waiting with a time limit gets the room a reader makes in time.
    let publisher = {
        let topic = topic.clone();
        let rt2 = rt.clone();
        rt.spawn(async move {
            topic
                .publish_batch_keyed(b"k", vec![5, 6])
                .with_timeout(LONG, &rt2)
                .await
                .map(|r| r.offset)
        })
    };
    let mut got = Vec::new();
    while got.len() < 6 {
        got.push(recv!(F, sub).unwrap().into_value());
    }
    assert_eq!(got, [1, 2, 3, 4, 5, 6], "in order, nothing twice");
    assert_eq!(publisher.await.unwrap().unwrap(), 4);
    assert_eq!(recv!(F, other).unwrap().into_value(), 10);
    assert_eq!(topic.stats().published, 8);
}

/// A publish with a time limit, on a log of 64 slots whose waiting publishers are woken
/// four slots at a time, takes at its deadline the one slot a reader freed and then left.
///
/// Whether the slots were freed while the publish waited is seen, not assumed: the reader
/// frees them once the publish is in line and looks again after; a publish still in line
/// then makes its last try after the free. A run where the reader got there only after the
/// publish had given up (a descheduled thread) shows nothing, and is made again.
async fn publish_timeout_takes_the_last_free_slot<F: Flavor>(rt: F::Rt) {
    let waiting = |t: &Topic<u32>| t.stats().partitions[0].waiting_publishers;
    'fresh: for _ in 0..100 {
        let topic = Topic::<u32>::with_capacity(64).unwrap();
        let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
        for n in 0..64 {
            topic.try_publish(n).unwrap();
        }
        let one = {
            let (topic, rt2) = (topic.clone(), rt.clone());
            rt.spawn(async move { topic.publish(64).with_timeout(ms(200), &rt2).await })
        };
        while waiting(&topic) == 0 && !one.is_finished() {
            rt.sleep(ms(1)).await;
        }
        assert_eq!(recv!(F, sub).unwrap().into_value(), 0);
        let in_line = waiting(&topic) > 0;
        match one.await.unwrap() {
            Ok(r) => assert_eq!(r.offset, 64),
            Err(PublishError::Full(_)) if !in_line => continue 'fresh,
            Err(e) => panic!("a slot freed while the publish waited was not taken: {e:?}"),
        }
        let batch = {
            let (topic, rt2) = (topic.clone(), rt.clone());
            rt.spawn(async move {
                topic
                    .publish_batch(vec![65, 66])
                    .with_timeout(ms(200), &rt2)
                    .await
            })
        };
        while waiting(&topic) == 0 && !batch.is_finished() {
            rt.sleep(ms(1)).await;
        }
        assert_eq!(recv!(F, sub).unwrap().into_value(), 1);
        assert_eq!(recv!(F, sub).unwrap().into_value(), 2);
        let in_line = waiting(&topic) > 0;
        match batch.await.unwrap() {
            Ok(r) => assert_eq!(r.offset, 65),
            Err(PublishError::Full(_)) if !in_line => continue 'fresh,
            Err(e) => panic!("two slots freed while the batch waited were not taken: {e:?}"),
        }
        let mut rest = Vec::new();
        for _ in 3..67 {
            rest.push(recv!(F, sub).unwrap().into_value());
        }
        assert_eq!(
            rest,
            (3..67).collect::<Vec<_>>(),
            "in order, nothing lost or twice"
        );
        return;
    }
    panic!("in 100 runs the reader never freed a slot before the publish gave up");
}

/// Receive and publish with time limits, on subscribers, group members and topics.
async fn timeouts<F: Flavor>(rt: F::Rt) {
    let topic = Topic::<u32>::with_capacity(2).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    let mut member = topic.group("g", StartAt::Earliest).unwrap();
    let mut buf = Vec::new();

    // Nothing to read: each gives up.
    assert_eq!(
        recv_timeout!(F, &rt, sub, ms(10)).unwrap_err(),
        RecvTimeoutError::Timeout
    );
    assert_eq!(
        recv_timeout!(F, &rt, member, ms(10)).unwrap_err(),
        RecvTimeoutError::Timeout
    );
    assert_eq!(
        recv_many_timeout!(F, &rt, member, &mut buf, 8, ms(10)).unwrap_err(),
        RecvTimeoutError::Timeout
    );
    assert!(rt.timeout(ms(10), sub.recv()).await.is_err());

    // Full topic (a subscriber and the group hold both slots): publishing gives up and
    // hands the message back.
    publish!(F, topic, 1).unwrap();
    publish!(F, topic, 2).unwrap();
    let err = publish_timeout!(F, &rt, topic, 3, ms(10)).unwrap_err();
    assert!(err.is_full());
    assert_eq!(err.into_inner(), 3);

    // Messages that are there are returned even with a zero time limit.
    assert_eq!(
        recv_timeout!(F, &rt, sub, Duration::ZERO)
            .unwrap()
            .into_value(),
        1
    );
    assert_eq!(
        recv_many_timeout!(F, &rt, member, &mut buf, 8, Duration::ZERO).unwrap(),
        2
    );
    assert_eq!(
        buf.drain(..).map(|m| m.into_value()).collect::<Vec<_>>(),
        [1, 2]
    );

    // Full again (the subscriber still holds message 2): a publisher waiting for room
    // gets it when the subscriber reads.
    publish!(F, topic, 3).unwrap();
    let publisher = {
        let topic = topic.clone();
        let rt2 = rt.clone();
        rt.spawn(async move { publish_timeout!(F, &rt2, topic, 4, LONG).map(|r| r.offset) })
    };
    assert_eq!(recv_timeout!(F, &rt, sub, LONG).unwrap().into_value(), 2);
    // A reader waiting with a time limit gets a message that arrives in time.
    assert_eq!(recv_timeout!(F, &rt, sub, LONG).unwrap().into_value(), 3);
    assert_eq!(recv_timeout!(F, &rt, sub, LONG).unwrap().into_value(), 4);
    assert_eq!(publisher.await.unwrap().unwrap(), 3);
    assert_eq!(recv_timeout!(F, &rt, member, LONG).unwrap().into_value(), 3);
    assert_eq!(recv_timeout!(F, &rt, member, LONG).unwrap().into_value(), 4);

    // Sleeping and the runtime's clock.
    let clock = rt.clock();
    let before = clock.now();
    rt.sleep(ms(20)).await;
    assert!(clock.now() - before >= ms(20));
}

/// Close: readers drain what is retained, then see `Closed`; publishers get their message
/// back; a publisher waiting for room is woken with `Closed`.
async fn close<F: Flavor>(rt: F::Rt) {
    let topic = Topic::<String>::with_capacity(2).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    let mut member = topic.group("g", StartAt::Earliest).unwrap();
    publish!(F, topic, "a".to_string()).unwrap();
    publish!(F, topic, "b".to_string()).unwrap();
    let blocked = {
        let topic = topic.clone();
        rt.spawn(async move { publish!(F, topic, "c".to_string()) })
    };
    // Let the publisher reach its wait (it cannot finish before the close either way).
    rt.sleep(ms(20)).await;
    topic.close();
    match blocked.await.unwrap() {
        Err(PublishError::Closed(v)) => assert_eq!(v, "c"),
        other => panic!("blocked publisher: {other:?}"),
    }
    match publish!(F, topic, "d".to_string()) {
        Err(PublishError::Closed(v)) => assert_eq!(v, "d"),
        other => panic!("{other:?}"),
    }
    for want in ["a", "b"] {
        assert_eq!(recv!(F, sub).unwrap().into_value(), want);
        assert_eq!(
            recv_timeout!(F, &rt, member, LONG).unwrap().into_value(),
            want
        );
    }
    assert_eq!(recv!(F, sub).unwrap_err(), RecvError::Closed);
    assert_eq!(
        recv_timeout!(F, &rt, sub, LONG).unwrap_err(),
        RecvTimeoutError::Closed
    );
    assert_eq!(
        recv_timeout!(F, &rt, member, LONG).unwrap_err(),
        RecvTimeoutError::Closed
    );
    let mut buf = Vec::new();
    assert_eq!(
        recv_many_timeout!(F, &rt, member, &mut buf, 4, LONG).unwrap(),
        0
    );
}

/// A receive that loses a race (a `select!`, a timeout) loses nothing: readers that give
/// up again and again while a task publishes still get every message exactly once.
async fn cancel_safety<F: Flavor>(rt: F::Rt) {
    const N: u32 = 3_000;
    let topic = Topic::<u32>::with_capacity(8).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    let members: Vec<_> = (0..2)
        .map(|_| topic.group("g", StartAt::Earliest).unwrap())
        .collect();
    let publisher = {
        let topic = topic.clone();
        let rt2 = rt.clone();
        rt.spawn(async move {
            for n in 0..N {
                publish!(F, topic, n).unwrap();
                if n.is_multiple_of(500) {
                    rt2.sleep(ms(2)).await;
                }
            }
        })
    };
    let group_readers: Vec<_> = members
        .into_iter()
        .map(|mut member| {
            let rt2 = rt.clone();
            rt.spawn(async move {
                let (mut got, mut lost_races) = (Vec::new(), 0u32);
                loop {
                    let out = if F::BLOCKING {
                        member.recv_blocking_timeout(Duration::from_micros(50))
                    } else {
                        // `select!`: the receive races a short sleep and often loses.
                        futures_util::select! {
                            r = member.recv().fuse() => r.map_err(RecvTimeoutError::from),
                            () = rt2.sleep(Duration::from_micros(50)).fuse() =>
                                Err(RecvTimeoutError::Timeout),
                        }
                    };
                    match out {
                        Ok(m) => got.push(m.into_value()),
                        Err(RecvTimeoutError::Timeout) => lost_races += 1,
                        Err(RecvTimeoutError::Closed) => return (got, lost_races),
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    let (mut got, mut lost_races) = (Vec::new(), 0u32);
    loop {
        let out = if F::BLOCKING {
            sub.recv_blocking_timeout(Duration::from_micros(50))
        } else {
            let sleep = pin!(rt.sleep(Duration::from_micros(50)));
            match select(sub.recv(), sleep).await {
                Either::Left((r, _)) => r.map_err(RecvTimeoutError::from),
                Either::Right(((), lost)) => {
                    drop(lost); // the receive loses the race and is dropped
                    Err(RecvTimeoutError::Timeout)
                }
            }
        };
        match out {
            Ok(m) => got.push(m.into_value()),
            Err(RecvTimeoutError::Timeout) => lost_races += 1,
            Err(RecvTimeoutError::Closed) => break,
            Err(e) => panic!("{e}"),
        }
        if got.len() == N as usize {
            topic.close(); // everything is published: let every reader drain and end
        }
    }
    publisher.await.unwrap();
    assert_eq!(
        got,
        (0..N).collect::<Vec<_>>(),
        "subscriber: all, once, in order"
    );
    let mut all = Vec::new();
    let mut group_lost = Vec::new();
    for r in group_readers {
        let (got, lost) = r.await.unwrap();
        all.extend(got);
        group_lost.push(lost);
    }
    eprintln!("receives that lost their race: subscriber {lost_races}, members {group_lost:?}");
    all.sort_unstable();
    assert_eq!(all, (0..N).collect::<Vec<_>>(), "group: all, exactly once");
}

/// Messages older than the TTL, by the runtime's clock, are skipped and reported.
///
/// Message 2 must still be live when it is read: a run where the reader got to it only a
/// TTL after its publish (a descheduled thread), as the clock shows, is made again.
async fn ttl<F: Flavor>(rt: F::Rt) {
    const TTL: Duration = Duration::from_millis(50);
    let clock = rt.clock();
    let late = |published: Duration| clock.now().saturating_sub(published) >= TTL;
    'fresh: for _ in 0..100 {
        let topic = Topic::<u32>::new(TopicConfig::new(8).clock(clock.clone()).ttl(TTL)).unwrap();
        let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
        publish!(F, topic, 1).unwrap();
        rt.sleep(3 * TTL).await;
        let published = clock.now();
        publish!(F, topic, 2).unwrap();
        match recv_timeout!(F, &rt, sub, LONG) {
            Err(RecvTimeoutError::Lagged(1)) => {}
            Err(RecvTimeoutError::Lagged(2)) if late(published) => continue 'fresh,
            other => panic!("{other:?}"),
        }
        let m = match recv_timeout!(F, &rt, sub, LONG) {
            Ok(m) => m,
            Err(RecvTimeoutError::Lagged(1)) if late(published) => continue 'fresh,
            other => panic!("{other:?}"),
        };
        assert_eq!((m.offset(), *m.value()), (1, 2));
        assert!(m.timestamp().is_some());
        assert_eq!(topic.stats().expired, 1);
        return;
    }
    panic!("in 100 runs message 2 was never read within its TTL");
}

/// Explicit acks on the runtime's timer: a lease that runs out while the other member is
/// parked (in a batch receive) wakes it (only the timer can), and it gets the message
/// again.
///
/// The lease is real time: a run where the member's short receive, which must find the
/// message leased, came only after the lease had run out (a descheduled thread) shows
/// nothing, and is made again.
async fn acked_redelivery<F: Flavor>(rt: F::Rt) {
    const ACK_WAIT: Duration = Duration::from_millis(100);
    'fresh: for _ in 0..100 {
        let topic = Topic::<u32>::with_capacity(8).unwrap();
        let config = || AckConfig::new().ack_wait(ACK_WAIT).timer(rt.timer());
        let mut a = topic
            .group_acked("acks", StartAt::Earliest, config())
            .unwrap();
        let mut b = topic
            .group_acked("acks", StartAt::Earliest, config())
            .unwrap();
        assert_eq!(
            recv_timeout!(F, &rt, b, ms(5)).unwrap_err(),
            RecvTimeoutError::Timeout
        );
        publish!(F, topic, 7).unwrap();
        // `a` takes the message and sits on it without acking.
        let before_lease = Instant::now();
        let held = recv_timeout!(F, &rt, a, LONG).unwrap();
        assert_eq!((*held.value(), held.deliveries()), (7, 1));
        // `b` parks in a batch receive; when the lease runs out the timer wakes it, and it
        // gets the message.
        let mut batch = Vec::new();
        match recv_many_timeout!(F, &rt, b, &mut batch, 4, ms(5)) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(1) if before_lease.elapsed() >= ACK_WAIT => continue 'fresh,
            other => panic!("{other:?} while the lease was held"),
        }
        assert_eq!(
            recv_many_timeout!(F, &rt, b, &mut batch, 4, LONG).unwrap(),
            1
        );
        assert!(
            before_lease.elapsed() >= ACK_WAIT,
            "redelivered before the lease ran out"
        );
        let again = batch.pop().unwrap();
        assert_eq!((*again.value(), again.deliveries()), (7, 2));
        again.ack().unwrap();
        assert!(held.ack().is_err(), "an expired lease cannot be acked");
        topic.close();
        assert_eq!(
            recv_timeout!(F, &rt, a, LONG).unwrap_err(),
            RecvTimeoutError::Closed
        );
        assert_eq!(
            recv_many_timeout!(F, &rt, b, &mut batch, 4, LONG).unwrap(),
            0
        );
        return;
    }
    panic!("in 100 runs the lease always ran out before the member's short receive");
}

/// The final counters of a pool that handled `n` messages, `errors` of them failed.
fn assert_final(stats: PoolStats, workers: usize, n: u64, errors: u64) {
    assert_eq!(stats.workers, workers);
    assert_eq!(stats.active, 0, "every worker joined");
    assert_eq!(
        (stats.pushed, stats.processed, stats.consumed, stats.errors),
        (n, n, n, errors)
    );
    assert_eq!(stats.in_flight(), 0);
}

/// Reads every result until the results topic closes (the pool holds the last handle).
async fn collect_results<F: Flavor, O: Clone + Send + 'static>(
    sub: &mut memq::Subscriber<WorkResult<O>>,
) -> Vec<WorkResult<O>> {
    let mut out = Vec::new();
    while let Ok(m) = recv!(F, sub) {
        out.push(m.into_value());
    }
    out
}

/// A sequential pool handles every message in order; an async handler.
async fn pool_sequential<F: Flavor>(rt: F::Rt) {
    const N: u64 = 500;
    let topic = Topic::<u64>::with_capacity(32).unwrap();
    let results = Topic::<WorkResult<u64>>::with_capacity(1024).unwrap();
    let mut done = results.subscribe(StartAt::Earliest).unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let pool = {
        let order = order.clone();
        let rt2 = rt.clone();
        WorkerPool::builder(&topic, "seq")
            .mode(Mode::Sequential)
            .results(results)
            .spawn(&rt, move |msg| {
                let order = order.clone();
                let rt2 = rt2.clone();
                async move {
                    if msg.offset().is_multiple_of(100) {
                        rt2.sleep(ms(1)).await; // a handler that waits
                    }
                    order.lock().unwrap().push(msg.offset());
                    Ok::<_, String>(msg.value() * 2)
                }
            })
            .unwrap()
    };
    assert_eq!(pool.stats().active, 1);
    for n in 0..N {
        publish!(F, topic, n).unwrap();
    }
    topic.close(); // the workers end by themselves once everything is handled
    let stats = pool.join().await.unwrap();
    assert_final(stats, 1, N, 0);
    assert_eq!(
        *order.lock().unwrap(),
        (0..N).collect::<Vec<_>>(),
        "strict order"
    );
    let results = collect_results::<F, u64>(&mut done).await;
    let want: Vec<_> = (0..N)
        .map(|n| WorkResult {
            partition: 0,
            offset: n,
            outcome: Ok(n * 2),
        })
        .collect();
    assert_eq!(results, want);
}

/// A parallel pool of blocking handlers: each message exactly once, errors and panics
/// become error results, and the pool goes on.
async fn pool_parallel<F: Flavor>(rt: F::Rt) {
    quiet_test_panics();
    const N: u64 = 600;
    let topic = Topic::<u64>::with_capacity(64).unwrap();
    let results = Topic::<WorkResult<u64>>::with_capacity(2048).unwrap();
    let mut done = results.subscribe(StartAt::Earliest).unwrap();
    let pool = WorkerPool::builder(&topic, "par")
        .mode(Mode::Parallel(4))
        .results(results)
        .spawn_blocking(&rt, |msg: Message<u64>| {
            let n = *msg.value();
            if n.is_multiple_of(7) {
                panic!("{PANIC_MARK}: {n}");
            }
            if n.is_multiple_of(5) {
                return Err(format!("no {n}"));
            }
            Ok(n + 1)
        })
        .unwrap();
    assert_eq!(pool.stats().active, 4);
    for n in 0..N {
        publish!(F, topic, n).unwrap();
    }
    let stats = pool.shutdown(Shutdown::Drain).await.unwrap();
    let failures = (0..N)
        .filter(|n| n.is_multiple_of(7) || n.is_multiple_of(5))
        .count() as u64;
    assert_final(stats, 4, N, failures);
    let mut results = collect_results::<F, u64>(&mut done).await;
    results.sort_by_key(|r| r.offset);
    assert_eq!(results.len(), N as usize);
    for (n, r) in (0..N).zip(&results) {
        assert_eq!(r.offset, n);
        match &r.outcome {
            Ok(v) => assert_eq!(*v, n + 1),
            Err(e) if n.is_multiple_of(7) => {
                assert!(e.is_panic());
                assert_eq!(e.message(), format!("{PANIC_MARK}: {n}"));
            }
            Err(e) => {
                assert_eq!(n % 5, 0);
                assert!(!e.is_panic());
                assert_eq!(e.message(), format!("no {n}"));
            }
        }
    }
}

/// Stop: the message in hand is finished, nothing more is taken, and what is left stays
/// in the group for its next member. Worker count 0 is an error.
async fn pool_stop<F: Flavor>(rt: F::Rt) {
    let topic = Topic::<u32>::with_capacity(16).unwrap();
    // Signals between the test and the handler, as topics (they work on every runtime).
    let started = Topic::<u32>::with_capacity(16).unwrap();
    let release = Topic::<()>::with_capacity(1).unwrap();
    let mut started_sub = started.subscribe(StartAt::Earliest).unwrap();
    assert_eq!(
        WorkerPool::builder(&topic, "stop")
            .mode(Mode::Parallel(0))
            .spawn_blocking(&rt, |_m: Message<u32>| Ok::<(), String>(()))
            .unwrap_err(),
        PoolError::ZeroWorkers
    );
    let pool = {
        let release = release.clone();
        WorkerPool::builder(&topic, "stop")
            .spawn(&rt, move |msg| {
                let started = started.clone();
                let mut gate = release.subscribe(StartAt::Earliest).unwrap();
                async move {
                    started.publish(*msg.value()).await.unwrap();
                    let _ = recv!(F, gate);
                    Ok::<_, String>(())
                }
            })
            .unwrap()
    };
    for n in 0..10 {
        publish!(F, topic, n).unwrap();
    }
    // The worker is inside the handler of message 0.
    assert_eq!(recv!(F, started_sub).unwrap().into_value(), 0);
    let stats = pool.stats();
    assert_eq!((stats.pushed, stats.processed, stats.active), (1, 0, 1));
    pool.request_shutdown(Shutdown::Stop);
    release.try_publish(()).unwrap();
    let stats = pool.shutdown(Shutdown::Stop).await.unwrap();
    assert_final(stats, 1, 1, 0);
    // The other nine are still the group's.
    let mut next = topic.group("stop", StartAt::Earliest).unwrap();
    assert_eq!(recv!(F, next).unwrap().offset(), 1);
}

/// An explicit-ack pool: a failed handler nacks and the message comes back until it
/// succeeds; every success is acked, so the group commits everything exactly when done.
async fn pool_acked<F: Flavor>(rt: F::Rt) {
    const N: u64 = 300;
    let topic = Topic::<u64>::with_capacity(32).unwrap();
    let results = Topic::<WorkResult<u64>>::with_capacity(1024).unwrap();
    let mut done = results.subscribe(StartAt::Earliest).unwrap();
    let tried = Arc::new(Mutex::new(BTreeSet::new()));
    let pool = {
        let tried = tried.clone();
        WorkerPool::builder(&topic, "acked")
            .mode(Mode::Parallel(3))
            .acked(AckConfig::new().ack_wait(LONG).timer(rt.timer()))
            .results(results)
            .spawn_blocking(&rt, move |msg: Message<u64>| {
                // Every tenth message fails on its first attempt.
                let first = tried.lock().unwrap().insert(msg.offset());
                if first && msg.offset().is_multiple_of(10) {
                    return Err("first attempt");
                }
                Ok(*msg.value())
            })
            .unwrap()
    };
    for n in 0..N {
        publish!(F, topic, n).unwrap();
    }
    topic.close();
    let stats = pool.join().await.unwrap();
    let retries = N / 10;
    assert_final(stats, 3, N + retries, retries);
    assert_eq!(stats.acks_refused, 0);
    let group = &topic.stats().groups[0];
    assert_eq!(
        (group.committed[0], group.in_flight, group.redelivered),
        (N, 0, retries)
    );
    let results = collect_results::<F, u64>(&mut done).await;
    assert_eq!(results.len() as u64, N + retries);
    let ok: BTreeSet<u64> = results
        .iter()
        .filter(|r| r.is_ok())
        .map(|r| r.offset)
        .collect();
    assert_eq!(ok, (0..N).collect(), "every message succeeded once");
}

/// A sequential explicit-ack pool keeps publishing order through a retry when the group
/// has no backoff (the failed message comes back first); with a backoff, the messages
/// behind it go on while it waits, and it is handled when its backoff ends.
async fn pool_sequential_acked_retries<F: Flavor>(rt: F::Rt) {
    for backoff in [None, Some(ms(30))] {
        let topic = Topic::<u64>::with_capacity(32).unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut config = AckConfig::new().ack_wait(LONG).timer(rt.timer());
        if let Some(b) = backoff {
            config = config.backoff(Backoff::fixed(b));
        }
        let pool = {
            let order = order.clone();
            WorkerPool::builder(&topic, "seq-acked")
                .acked(config)
                .spawn_blocking(&rt, move |msg: Message<u64>| {
                    let mut order = order.lock().unwrap();
                    order.push(msg.offset());
                    // Offset 1 fails on its first attempt.
                    if msg.offset() == 1 && order.iter().filter(|&&o| o == 1).count() == 1 {
                        return Err("first attempt");
                    }
                    Ok(())
                })
                .unwrap()
        };
        for n in 0..5 {
            publish!(F, topic, n).unwrap();
        }
        topic.close();
        let stats = pool.join().await.unwrap();
        assert_final(stats, 1, 6, 1);
        let order = order.lock().unwrap().clone();
        match backoff {
            None => assert_eq!(order, [0, 1, 1, 2, 3, 4], "no backoff: retried first"),
            Some(_) => assert_eq!(order, [0, 1, 2, 3, 4, 1], "backoff: retried after its wait"),
        }
        let group = &topic.stats().groups[0];
        assert_eq!(
            (group.committed[0], group.in_flight, group.redelivered),
            (5, 0, 1)
        );
    }
}

/// Errors as values: a handler's `Err` and a panic are results, not the end of the pool.
async fn pool_errors_are_results<F: Flavor>(rt: F::Rt) {
    quiet_test_panics();
    let topic = Topic::<&'static str>::with_capacity(8).unwrap();
    let results = Topic::<WorkResult<usize>>::with_capacity(8).unwrap();
    let mut done = results.subscribe(StartAt::Earliest).unwrap();
    let pool = WorkerPool::builder(&topic, "e")
        .results(results)
        .spawn(&rt, |msg| async move {
            match *msg.value() {
                "panic" => panic!("{PANIC_MARK}"),
                "bad" => Err("bad input"),
                s => Ok(s.len()),
            }
        })
        .unwrap();
    for s in ["ok", "bad", "panic", "fine"] {
        publish!(F, topic, s).unwrap();
    }
    drop(topic);
    let stats = pool.join().await.unwrap();
    assert_final(stats, 1, 4, 2);
    let outcomes: Vec<_> = collect_results::<F, usize>(&mut done)
        .await
        .into_iter()
        .map(|r| r.outcome.map_err(|e| (e.is_panic(), e.to_string())))
        .collect();
    assert_eq!(
        outcomes,
        [
            Ok(2),
            Err((false, "handler failed: bad input".to_string())),
            Err((true, format!("handler panicked: {PANIC_MARK}"))),
            Ok(4),
        ]
    );
}

/// Tokio only: a consumer that always finds a message ready still yields, so another task
/// on a one-thread runtime gets to run in between.
#[test]
fn tokio_consumers_yield_to_other_tasks() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let rt = Tokio::current();
        let topic = Topic::<u32>::new(TopicConfig::new(10_000).overflow(Overflow::Block)).unwrap();
        let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
        for n in 0..10_000 {
            topic.try_publish(n).unwrap();
        }
        topic.close();
        let ticks = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let ticker = {
            let ticks = ticks.clone();
            tokio::spawn(async move {
                loop {
                    ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
            })
        };
        let mut n = 0;
        while rt.cooperative(sub.recv()).await.is_ok() {
            n += 1;
        }
        assert_eq!(n, 10_000);
        // Without the budget the loop would never have yielded: not one tick.
        assert!(ticks.load(std::sync::atomic::Ordering::Relaxed) > 0);
        ticker.abort();
    });
}

// ----- one test per scenario per flavor ---------------------------------------------------

macro_rules! suite {
    ($($flavor:ident => $module:ident),* $(,)?) => {$(
        mod $module {
            use super::*;
            #[test]
            fn pubsub() { $flavor::run(super::pubsub::<$flavor>) }
            #[test]
            fn groups() { $flavor::run(super::groups::<$flavor>) }
            #[test]
            fn partitions() { $flavor::run(super::partitions::<$flavor>) }
            #[test]
            fn timeouts() { $flavor::run(super::timeouts::<$flavor>) }
            #[test]
            fn routed_publish_timeouts() {
                $flavor::run(super::routed_publish_timeouts::<$flavor>)
            }
            #[test]
            fn publish_timeout_takes_the_last_free_slot() {
                $flavor::run(super::publish_timeout_takes_the_last_free_slot::<$flavor>)
            }
            #[test]
            fn close() { $flavor::run(super::close::<$flavor>) }
            #[test]
            fn cancel_safety() { $flavor::run(super::cancel_safety::<$flavor>) }
            #[test]
            fn ttl() { $flavor::run(super::ttl::<$flavor>) }
            #[test]
            fn acked_redelivery() { $flavor::run(super::acked_redelivery::<$flavor>) }
            #[test]
            fn pool_sequential() { $flavor::run(super::pool_sequential::<$flavor>) }
            #[test]
            fn pool_parallel() { $flavor::run(super::pool_parallel::<$flavor>) }
            #[test]
            fn pool_stop() { $flavor::run(super::pool_stop::<$flavor>) }
            #[test]
            fn pool_acked() { $flavor::run(super::pool_acked::<$flavor>) }
            #[test]
            fn pool_sequential_acked_retries() {
                $flavor::run(super::pool_sequential_acked_retries::<$flavor>)
            }
            #[test]
            fn pool_errors_are_results() { $flavor::run(super::pool_errors_are_results::<$flavor>) }
        }
    )*};
}

suite! {
    TokioFlavor => on_tokio,
    AsyncStdFlavor => on_async_std,
    SmolFlavor => on_smol,
    ThreadsFlavor => on_threads,
    BlockOnFlavor => on_block_on,
}
