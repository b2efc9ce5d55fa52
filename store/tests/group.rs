//! Durable consumer groups: each message to one member, positions and acks across
//! restarts, leases, redelivery and dead letters.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memq_core::{DeadLetterReason, StartAt, TopicConfig};
use memq_store::{
    DurableConfig, DurableRecvError, DurableTopic, GroupConfig, StoreError, SyncPolicy,
};

fn durable() -> DurableConfig {
    DurableConfig::new(SyncPolicy::Never).segment_bytes(4096)
}

fn body(i: u64) -> Vec<u8> {
    format!("job {i:05}").into_bytes()
}

#[test]
fn members_in_threads_get_each_message_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let topic =
        DurableTopic::open(dir.path(), TopicConfig::new(16).partitions(3), durable()).unwrap();
    let seen = Arc::new(Mutex::new(BTreeMap::new()));
    let members: Vec<_> = (0..4)
        .map(|m| {
            let mut c = topic
                .group("workers", StartAt::Earliest, GroupConfig::default())
                .unwrap();
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut last: BTreeMap<u32, u64> = BTreeMap::new();
                loop {
                    match c.recv_blocking() {
                        Ok(msg) => {
                            // Each partition's messages reach a member in order.
                            if let Some(&l) = last.get(&msg.partition) {
                                assert!(msg.offset > l, "member {m}: partition order");
                            }
                            last.insert(msg.partition, msg.offset);
                            let prev = seen.lock().unwrap().insert((msg.partition, msg.offset), m);
                            assert!(
                                prev.is_none(),
                                "{:?} delivered twice",
                                (msg.partition, msg.offset)
                            );
                        }
                        Err(DurableRecvError::Closed) => return,
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    let mut published = Vec::new();
    for i in 0..3000u64 {
        let r = topic
            .publish_keyed_blocking(format!("k{}", i % 11), body(i))
            .unwrap();
        published.push((r.partition, r.offset));
    }
    topic.close();
    for m in members {
        m.join().unwrap();
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3000);
    for k in published {
        assert!(seen.contains_key(&k));
    }
}

#[test]
fn a_group_far_behind_memory_reads_from_disk_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let topic = DurableTopic::open(dir.path(), TopicConfig::new(4), durable()).unwrap();
    for i in 0..1000 {
        topic.publish_blocking(body(i)).unwrap();
    }
    let mut c = topic
        .group("late", StartAt::Earliest, GroupConfig::default())
        .unwrap();
    for i in 0..1000 {
        let m = c.try_recv().unwrap();
        assert_eq!((m.offset, m.payload.as_ref()), (i, &body(i)[..]));
    }
    assert!(matches!(c.try_recv(), Err(DurableRecvError::Empty)));
}

#[test]
fn a_plain_group_goes_on_from_where_it_was_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let topic = DurableTopic::open(dir.path(), TopicConfig::new(8), durable()).unwrap();
        for i in 0..100 {
            topic.publish_blocking(body(i)).unwrap();
        }
        let mut c = topic
            .group("g", StartAt::Earliest, GroupConfig::default())
            .unwrap();
        for i in 0..40 {
            assert_eq!(c.recv_blocking().unwrap().offset, i);
        }
        // Leaving settles the last one and writes the group's state.
    }
    let topic = DurableTopic::open(dir.path(), TopicConfig::new(8), durable()).unwrap();
    // The start given now is ignored: the group has a committed position.
    let mut c = topic
        .group("g", StartAt::Latest, GroupConfig::default())
        .unwrap();
    assert_eq!(c.stats().committed, vec![40]);
    assert_eq!(c.recv_blocking().unwrap().offset, 40);
    // A new group in the same directory starts where it is told.
    let mut other = topic
        .group("other", StartAt::Offset(90), GroupConfig::default())
        .unwrap();
    assert_eq!(other.recv_blocking().unwrap().offset, 90);
}

#[test]
fn acked_messages_never_come_back_and_unacked_ones_do_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = GroupConfig::acked(Duration::from_secs(3600)).commit_every(1);
    {
        let topic = DurableTopic::open(dir.path(), TopicConfig::new(8), durable()).unwrap();
        for i in 0..20 {
            topic.publish_blocking(body(i)).unwrap();
        }
        let mut c = topic.group("acked", StartAt::Earliest, cfg).unwrap();
        let mut held = Vec::new();
        for i in 0..12 {
            let d = c.recv_delivery_blocking().unwrap();
            assert_eq!(d.message().offset, i);
            if i % 2 == 0 {
                d.ack().unwrap();
            } else {
                held.push(d);
            }
        }
        // Acked out of order: 0, 2, 4... and the odd ones still leased when the
        // process goes away (held past the restart, like a crash would).
        assert_eq!(c.stats().committed, vec![1]);
        std::mem::forget(held);
        // The state on disk was written at the last ack (commit_every(1)); make the
        // leaving member not write it again, as a crash would not.
        std::mem::forget(c);
        std::mem::forget(topic);
    }
    // The forgotten handles still hold the directory's lock files in this process:
    // copy the directory, as a crashed process's successor would find it.
    let copy = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), copy.path());
    let topic = DurableTopic::open(copy.path(), TopicConfig::new(8), durable()).unwrap();
    let mut c = topic.group("acked", StartAt::Latest, cfg).unwrap();
    let mut got = Vec::new();
    while let Ok(d) = c.recv_delivery_timeout(Duration::ZERO) {
        got.push(d.message().offset);
        d.ack().unwrap();
    }
    let mut expect: Vec<u64> = (1..12).step_by(2).collect();
    expect.extend(12..20);
    assert_eq!(got, expect, "unacked come back, acked never");
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&e.path(), &target);
        } else if e.file_name() != "LOCK" {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

#[test]
fn a_lease_that_ends_delivers_again_and_max_deliveries_dead_letters() {
    let dir = tempfile::tempdir().unwrap();
    let topic = DurableTopic::open(dir.path(), TopicConfig::new(8), durable()).unwrap();
    topic.publish_blocking("poison").unwrap();
    topic.publish_blocking("fine").unwrap();
    let cfg = GroupConfig::acked(Duration::from_millis(20)).max_deliveries(2);
    let mut c = topic.group("g", StartAt::Earliest, cfg).unwrap();
    // A bound far from the lease: only a lease that never ends reaches it.
    let long = Duration::from_secs(60);
    let d1 = c.recv_delivery_timeout(long).unwrap();
    assert_eq!((d1.message().offset, d1.deliveries()), (0, 1));
    let d2 = c.recv_delivery_timeout(long).unwrap();
    assert_eq!(d2.message().offset, 1);
    d2.ack().unwrap();
    drop(d1);
    // The lease of offset 0 ends: delivered again...
    let again = c.recv_delivery_timeout(long).unwrap();
    assert_eq!((again.message().offset, again.deliveries()), (0, 2));
    drop(again);
    // ...and after its second lease, dead-lettered rather than delivered a third time.
    assert!(matches!(
        c.recv_delivery_timeout(Duration::from_millis(200)),
        Err(DurableRecvError::Timeout)
    ));
    let stats = c.stats();
    assert_eq!(
        (stats.dead_lettered, stats.redelivered, stats.in_flight),
        (1, 1, 0)
    );
    assert_eq!(stats.committed, vec![2]);
}

#[test]
fn a_nack_delivers_again_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let topic = DurableTopic::open(dir.path(), TopicConfig::new(8), durable()).unwrap();
    topic.publish_blocking("x").unwrap();
    let mut c = topic
        .group(
            "g",
            StartAt::Earliest,
            GroupConfig::acked(Duration::from_secs(3600)),
        )
        .unwrap();
    c.recv_delivery_blocking().unwrap().nack();
    let d = c.recv_delivery_timeout(Duration::ZERO).unwrap();
    assert_eq!((d.message().offset, d.deliveries()), (0, 2));
}

#[test]
fn partitions_are_shared_out_among_members_and_move_when_one_leaves() {
    let dir = tempfile::tempdir().unwrap();
    let topic =
        DurableTopic::open(dir.path(), TopicConfig::new(8).partitions(4), durable()).unwrap();
    let a = topic
        .group("g", StartAt::Earliest, GroupConfig::default())
        .unwrap();
    let b = topic
        .group("g", StartAt::Earliest, GroupConfig::default())
        .unwrap();
    let (mut pa, mut pb) = (a.assignment(), b.assignment());
    assert_eq!(pa.len() + pb.len(), 4);
    pa.append(&mut pb);
    pa.sort_unstable();
    assert_eq!(pa, vec![0, 1, 2, 3]);
    drop(a);
    assert_eq!(b.assignment(), vec![0, 1, 2, 3]);
}

#[test]
fn async_members_wait_without_a_thread_and_leases_wake_them() {
    let dir = tempfile::tempdir().unwrap();
    let topic = DurableTopic::open(dir.path(), TopicConfig::new(8), durable()).unwrap();
    // Plain: two async members on threads of their own, fed after they started waiting.
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let mut c = topic
                .group("async", StartAt::Earliest, GroupConfig::default())
                .unwrap();
            std::thread::spawn(move || {
                futures_executor::block_on(async {
                    let mut got = Vec::new();
                    loop {
                        match c.recv().await {
                            Ok(m) => got.push(m.offset),
                            Err(DurableRecvError::Closed) => return got,
                            Err(e) => panic!("{e}"),
                        }
                    }
                })
            })
        })
        .collect();
    for i in 0..500 {
        topic.publish_blocking(body(i)).unwrap();
    }
    topic.close();
    let mut all: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort_unstable();
    assert_eq!(all, (0..500).collect::<Vec<_>>());

    // Explicit acks: a lease that ends wakes a member waiting in recv_delivery.
    let dir = tempfile::tempdir().unwrap();
    let topic = DurableTopic::open(dir.path(), TopicConfig::new(8), durable()).unwrap();
    topic.publish_blocking("once").unwrap();
    let mut c = topic
        .group(
            "leases",
            StartAt::Earliest,
            GroupConfig::acked(Duration::from_millis(30)),
        )
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        futures_executor::block_on(async {
            let first = c.recv_delivery().await.unwrap();
            let offset = first.message().offset;
            drop(first); // not acked: its lease ends
            let again = c.recv_delivery().await.unwrap();
            tx.send((offset, again.message().offset, again.deliveries()))
                .unwrap();
        })
    });
    // A bound far from the lease: only a wake-up that never comes reaches it.
    let got = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the lease's end woke the member");
    assert_eq!(got, (0, 0, 2));
}

#[test]
fn a_stuck_delivery_keeps_the_groups_state_small() {
    let dir = tempfile::tempdir().unwrap();
    let topic = DurableTopic::open(dir.path(), TopicConfig::new(8), durable()).unwrap();
    for i in 0..2000 {
        topic.publish_blocking(body(i)).unwrap();
    }
    let cfg = GroupConfig::acked(Duration::from_secs(3600)).commit_every(1);
    let mut c = topic.group("stuck", StartAt::Earliest, cfg).unwrap();
    let stuck = c.recv_delivery_blocking().unwrap();
    for _ in 1..2000 {
        c.recv_delivery_blocking().unwrap().ack().unwrap();
    }
    assert_eq!(c.stats().committed, vec![0]);
    let file = std::fs::read_dir(dir.path().join("groups"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "group"))
        .unwrap();
    // One run of 1999 settled offsets, not 1999 lines.
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("settled 0 1 2000"), "{text}");
    assert!(text.len() < 200, "{} bytes", text.len());
    stuck.ack().unwrap();
    assert_eq!(c.stats().committed, vec![2000]);
}

#[test]
fn a_plain_member_waits_a_limited_time() {
    let dir = tempfile::tempdir().unwrap();
    let topic = DurableTopic::open(dir.path(), TopicConfig::new(8), durable()).unwrap();
    let mut c = topic
        .group("g", StartAt::Earliest, GroupConfig::default())
        .unwrap();
    let started = std::time::Instant::now();
    assert!(matches!(
        c.recv_blocking_timeout(Duration::from_millis(50)),
        Err(DurableRecvError::Timeout)
    ));
    assert!(started.elapsed() >= Duration::from_millis(50));
    topic.publish_blocking(body(0)).unwrap();
    let m = c.recv_blocking_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!((m.offset, &m.payload[..]), (0, &body(0)[..]));
    topic.close();
    assert!(matches!(
        c.recv_blocking_timeout(Duration::from_secs(5)),
        Err(DurableRecvError::Closed)
    ));
}

#[test]
fn dead_letters_keep_their_origin_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = TopicConfig::new(8).partitions(2);
    let open = || DurableTopic::open(dir.path(), config.clone(), durable()).unwrap();
    let topic = open();
    // Two poison messages under keys, one fine message.
    let p_bad = topic.publish_keyed_blocking("bad", "poison").unwrap();
    let p_worse = topic.publish_keyed_blocking("worse", "worse").unwrap();
    topic.publish_keyed_blocking("ok", "fine").unwrap();
    let cfg = GroupConfig::acked(Duration::from_millis(20)).max_deliveries(2);
    let mut c = topic.group("g", StartAt::Earliest, cfg).unwrap();
    // A bound far from the lease: only a lease that never ends reaches it.
    let long = Duration::from_secs(60);
    let mut attempts: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
    // Until both are dead letters and the fine one is acked (a receive moves what the
    // group gave up on; one that times out only looks again).
    while c.stats().dead_lettered < 2 || c.stats().committed.iter().sum::<u64>() < 3 {
        match c.recv_delivery_timeout(Duration::from_millis(300)) {
            Ok(d) => {
                let body = d.message().payload.to_vec();
                *attempts.entry(body.clone()).or_default() += 1;
                match &body[..] {
                    b"fine" => d.ack().unwrap(),
                    // Rejected on sight: dead-lettered at once.
                    b"worse" => d.reject().unwrap(),
                    // Never acked: its lease ends, twice.
                    _ => drop(d),
                }
            }
            Err(DurableRecvError::Timeout) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(attempts[&b"poison"[..]], 2);
    assert_eq!(attempts[&b"worse"[..]], 1);
    assert_eq!(c.stats().dead_lettered, 2);
    let check = |topic: &DurableTopic| {
        let mut dead = topic.dead_letters("g", StartAt::Earliest).unwrap();
        let mut letters = Vec::new();
        while let Ok(l) = dead.recv_blocking_timeout(long) {
            letters.push(l);
            if letters.len() == 2 {
                break;
            }
        }
        assert!(matches!(dead.try_recv(), Err(DurableRecvError::Empty)));
        letters.sort_by_key(|l| l.payload.clone());
        let (poison, worse) = (&letters[0], &letters[1]);
        assert_eq!(poison.payload, "poison");
        assert_eq!(poison.key.as_deref(), Some(&b"bad"[..]));
        assert_eq!(
            (poison.partition, poison.offset),
            (p_bad.partition, p_bad.offset)
        );
        assert_eq!(poison.deliveries, 2);
        assert_eq!(poison.reason, DeadLetterReason::MaxDeliveries);
        assert_eq!(poison.group, "g");
        assert!(poison.timestamp > 0 && poison.dead_timestamp >= poison.timestamp);
        assert_eq!(worse.payload, "worse");
        assert_eq!(
            (worse.partition, worse.offset),
            (p_worse.partition, p_worse.offset)
        );
        assert_eq!(
            (worse.deliveries, worse.reason),
            (1, DeadLetterReason::Rejected)
        );
    };
    check(&topic);
    c.commit().unwrap();
    drop(c);
    drop(topic);
    // After a restart: the letters are still there, and nothing dead-lettered (or acked)
    // is delivered again.
    let topic = open();
    check(&topic);
    let mut c = topic.group("g", StartAt::Earliest, cfg).unwrap();
    assert!(matches!(
        c.recv_delivery_timeout(Duration::from_millis(200)),
        Err(DurableRecvError::Timeout)
    ));
}

#[test]
fn a_reject_after_the_lease_ended_is_refused_and_the_message_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let topic = DurableTopic::open(dir.path(), TopicConfig::new(8), durable()).unwrap();
    topic.publish_blocking("x").unwrap();
    let cfg = GroupConfig::acked(Duration::from_millis(20));
    let mut c = topic.group("g", StartAt::Earliest, cfg).unwrap();
    let d = c.recv_delivery_blocking().unwrap();
    // The lease ends; a receive hands the message out again.
    let again = c.recv_delivery_timeout(Duration::from_secs(60)).unwrap();
    assert_eq!(again.deliveries(), 2);
    assert!(matches!(d.reject(), Err(StoreError::LeaseExpired)));
    // The current holder can still reject it.
    again.reject().unwrap();
    assert_eq!(c.stats().dead_lettered, 1);
    let mut dead = topic.dead_letters("g", StartAt::Earliest).unwrap();
    assert_eq!(dead.try_recv().unwrap().deliveries, 2);
}

#[test]
fn nack_after_waits_then_delivers_again_and_touch_keeps_a_lease() {
    let dir = tempfile::tempdir().unwrap();
    let open = || DurableTopic::open(dir.path(), TopicConfig::new(8), durable()).unwrap();
    let topic = open();
    topic.publish_blocking("a").unwrap();
    topic.publish_blocking("b").unwrap();
    let cfg = GroupConfig::acked(Duration::from_secs(3600));
    let mut c = topic.group("g", StartAt::Earliest, cfg).unwrap();
    // A delay of zero: delivered again at once.
    let d = c.recv_delivery_blocking().unwrap();
    assert_eq!(d.message().offset, 0);
    d.nack_after(Duration::ZERO).unwrap();
    let mut d = c.recv_delivery_timeout(Duration::from_secs(60)).unwrap();
    assert_eq!((d.message().offset, d.deliveries()), (0, 2));
    // Touch: the lease is still this delivery's.
    d.touch().unwrap();
    d.ack().unwrap();
    // A long delay: not delivered meanwhile, and it holds the committed offset back.
    let d = c.recv_delivery_blocking().unwrap();
    assert_eq!(d.message().offset, 1);
    d.nack_after(Duration::from_secs(3600)).unwrap();
    assert!(matches!(
        c.recv_delivery_timeout(Duration::from_millis(50)),
        Err(DurableRecvError::Timeout)
    ));
    let stats = c.stats();
    assert_eq!((stats.in_flight, stats.committed.clone()), (1, vec![1]));
    // A delay too long for the clock is accepted (never, until a restart).
    topic.publish_blocking("c").unwrap();
    let d = c.recv_delivery_blocking().unwrap();
    assert_eq!(d.message().offset, 2);
    d.nack_after(Duration::MAX).unwrap();
    c.commit().unwrap();
    drop(c);
    drop(topic);
    // After a restart both are delivered again at once.
    let topic = open();
    let mut c = topic.group("g", StartAt::Earliest, cfg).unwrap();
    let mut again: Vec<u64> = (0..2)
        .map(|_| {
            let d = c.recv_delivery_timeout(Duration::from_secs(60)).unwrap();
            let o = d.message().offset;
            d.ack().unwrap();
            o
        })
        .collect();
    again.sort_unstable();
    assert_eq!(again, vec![1, 2]);
}

#[test]
fn touch_and_nack_after_of_a_lease_that_ran_out_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let topic = DurableTopic::open(dir.path(), TopicConfig::new(8), durable()).unwrap();
    topic.publish_blocking("x").unwrap();
    let cfg = GroupConfig::acked(Duration::from_millis(20));
    let mut c = topic.group("g", StartAt::Earliest, cfg).unwrap();
    let mut first = c.recv_delivery_blocking().unwrap();
    // Its lease runs out and the message is handed out again (a bound far from the
    // lease: only a lease that never ends reaches it).
    let second = c.recv_delivery_timeout(Duration::from_secs(60)).unwrap();
    assert_eq!(second.deliveries(), 2);
    assert!(matches!(first.touch(), Err(StoreError::LeaseExpired)));
    assert!(matches!(
        first.nack_after(Duration::ZERO),
        Err(StoreError::LeaseExpired)
    ));
    second.ack().unwrap();
}
