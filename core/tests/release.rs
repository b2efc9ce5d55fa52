//! Topics that release each message once every reader has read it
//! (`TopicConfig::release_on_read`): what leaves the log and when, that nothing a reader
//! has not been handed is ever lost (drops, seeks, rebalances, the group pool), that the
//! last reader gets the log's own value instead of a clone, and, in a differential
//! property test, that readers attached from the start receive exactly what they receive
//! from a topic that retains.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use memq_core::{
    AckConfig, Consumer, ManualClock, Overflow, PublishError, StartAt, Subscriber, Topic,
    TopicConfig, TryRecvError,
};
use proptest::prelude::*;

/// A value that counts how often it is cloned.
#[derive(Debug)]
struct Counted {
    n: u64,
    clones: Arc<AtomicUsize>,
}

impl Clone for Counted {
    fn clone(&self) -> Self {
        self.clones.fetch_add(1, Ordering::SeqCst);
        Counted {
            n: self.n,
            clones: self.clones.clone(),
        }
    }
}

fn releasing<T>(capacity: usize) -> Topic<T> {
    Topic::new(TopicConfig::new(capacity).release_on_read(true)).unwrap()
}

fn counted_topic(capacity: usize) -> (Topic<Counted>, Arc<AtomicUsize>) {
    (releasing(capacity), Arc::new(AtomicUsize::new(0)))
}

fn publish_counted(t: &Topic<Counted>, clones: &Arc<AtomicUsize>, range: std::ops::Range<u64>) {
    for n in range {
        t.try_publish(Counted {
            n,
            clones: clones.clone(),
        })
        .unwrap();
    }
}

fn sub_values(sub: &mut Subscriber<u64>) -> Vec<u64> {
    let mut out = Vec::new();
    while let Ok(m) = sub.try_recv() {
        out.push(m.into_value());
    }
    out
}

fn member_values(c: &mut Consumer<u64>) -> Vec<u64> {
    let mut out = Vec::new();
    while let Ok(m) = c.try_recv() {
        out.push(m.into_value());
    }
    out
}

fn low_depth_released<T>(t: &Topic<T>) -> (u64, u64, u64) {
    let s = t.stats();
    (s.partitions[0].low, s.depth, s.released)
}

#[test]
fn release_is_off_by_default() {
    let t = Topic::with_capacity(8).unwrap();
    let mut a = t.subscribe(StartAt::Earliest).unwrap();
    for i in 0..3u64 {
        t.try_publish(i).unwrap();
    }
    let mut buf = Vec::new();
    assert_eq!(a.try_recv_many(&mut buf, 10), Ok(3));
    assert_eq!(low_depth_released(&t), (0, 3, 0));
    let mut late = t.subscribe(StartAt::Earliest).unwrap();
    assert_eq!(sub_values(&mut late), vec![0, 1, 2]);
}

#[test]
fn a_sole_subscribers_batch_moves_the_logs_values_out() {
    let (t, clones) = counted_topic(8);
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    publish_counted(&t, &clones, 0..5);
    let mut buf = Vec::new();
    assert_eq!(sub.try_recv_many(&mut buf, 10), Ok(5));
    let got: Vec<u64> = buf.iter().map(|m| m.value().n).collect();
    assert_eq!(got, vec![0, 1, 2, 3, 4]);
    let offsets: Vec<u64> = buf.iter().map(|m| m.offset()).collect();
    assert_eq!(offsets, vec![0, 1, 2, 3, 4]);
    assert_eq!(
        clones.load(Ordering::SeqCst),
        0,
        "the last reader gets the value itself"
    );
    assert_eq!(low_depth_released(&t), (5, 0, 5));
    let s = t.stats();
    assert_eq!((s.published, s.delivered, s.evicted), (5, 5, 0));
    // A late subscriber starts after what was read; new messages reach both.
    let mut late = t.subscribe(StartAt::Earliest).unwrap();
    assert_eq!(late.try_recv().unwrap_err(), TryRecvError::Empty);
    publish_counted(&t, &clones, 5..6);
    assert_eq!(late.try_recv().unwrap().value().n, 5);
    assert_eq!(sub.try_recv().unwrap().value().n, 5);
}

#[test]
fn messages_stay_until_a_reader_comes() {
    let t = releasing::<u64>(8);
    for i in 0..3 {
        t.try_publish(i).unwrap();
    }
    assert_eq!(low_depth_released(&t), (0, 3, 0));
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    assert_eq!(sub_values(&mut sub), vec![0, 1, 2]);
    assert_eq!(low_depth_released(&t), (3, 0, 3));
}

#[test]
fn a_sole_subscriber_moves_ahead_and_gives_back_what_it_was_not_handed() {
    let (t, clones) = counted_topic(8);
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    publish_counted(&t, &clones, 0..5);
    assert_eq!(sub.try_recv().unwrap().value().n, 0);
    // The receive fetched all five ahead, moved out of the log: none is readable there
    // any more, but the four not handed over still take room.
    assert_eq!(clones.load(Ordering::SeqCst), 0);
    assert_eq!(low_depth_released(&t), (5, 0, 5));
    // 0 was handed over: 8 slots hold 1 to 8.
    for n in 5..9 {
        t.try_publish(Counted {
            n,
            clones: clones.clone(),
        })
        .unwrap();
    }
    assert!(matches!(
        t.try_publish(Counted {
            n: 9,
            clones: clones.clone()
        }),
        Err(PublishError::Full(_))
    ));
    assert_eq!(sub.try_recv().unwrap().value().n, 1);
    // A seek back within what it holds: the log has the messages again.
    sub.seek_to(StartAt::Offset(2)).unwrap();
    assert_eq!(low_depth_released(&t), (2, 7, 2));
    assert_eq!(sub.try_recv().unwrap().value().n, 2);
    // Dropped with six fetched and not handed over: nothing is lost.
    drop(sub);
    assert_eq!(low_depth_released(&t), (3, 6, 3));
    let mut next = t.subscribe(StartAt::Earliest).unwrap();
    let mut buf = Vec::new();
    assert_eq!(next.try_recv_many(&mut buf, 10), Ok(6));
    let got: Vec<u64> = buf.iter().map(|m| m.value().n).collect();
    assert_eq!(got, vec![3, 4, 5, 6, 7, 8]);
    assert_eq!(low_depth_released(&t), (9, 0, 9));
    assert_eq!(clones.load(Ordering::SeqCst), 0);
}

#[test]
fn single_receives_copy_ahead_past_a_slower_reader_and_the_log_lets_go_later() {
    let (t, clones) = counted_topic(8);
    let slow = t.subscribe(StartAt::Earliest).unwrap();
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    publish_counted(&t, &clones, 0..5);
    assert_eq!(sub.try_recv().unwrap().value().n, 0);
    // `slow` has read nothing: `sub` fetched copies, and the log keeps everything.
    assert_eq!(clones.load(Ordering::SeqCst), 5);
    assert_eq!(low_depth_released(&t), (0, 5, 0));
    drop(slow);
    // Now `sub` alone decides: what it was handed goes (stats counts it as gone at once;
    // the log lets go of it at the next visit under its lock).
    assert_eq!(low_depth_released(&t), (1, 4, 1));
    assert_eq!(sub.try_recv().unwrap().value().n, 1);
    assert_eq!(low_depth_released(&t), (2, 3, 2));
    // Dropped with three fetched and not handed over: nothing is lost, and what it was
    // handed is not read again.
    drop(sub);
    let mut next = t.subscribe(StartAt::Earliest).unwrap();
    let mut buf = Vec::new();
    assert_eq!(next.try_recv_many(&mut buf, 10), Ok(3));
    let got: Vec<u64> = buf.iter().map(|m| m.value().n).collect();
    assert_eq!(got, vec![2, 3, 4]);
    assert_eq!(low_depth_released(&t), (5, 0, 5));
}

#[test]
fn a_message_leaves_once_every_subscriber_read_it_and_the_last_gets_it() {
    let (t, clones) = counted_topic(8);
    let mut a = t.subscribe(StartAt::Earliest).unwrap();
    let mut b = t.subscribe(StartAt::Earliest).unwrap();
    publish_counted(&t, &clones, 0..3);
    let mut buf = Vec::new();
    assert_eq!(a.try_recv_many(&mut buf, 10), Ok(3));
    assert_eq!(
        clones.load(Ordering::SeqCst),
        3,
        "b has not read them: a gets copies"
    );
    assert_eq!(low_depth_released(&t), (0, 3, 0));
    buf.clear();
    assert_eq!(b.try_recv_many(&mut buf, 2), Ok(2));
    assert_eq!(
        clones.load(Ordering::SeqCst),
        3,
        "b reads last: it gets the values"
    );
    assert_eq!(low_depth_released(&t), (2, 1, 2));
    // A late subscriber sees only what someone has not read yet.
    let mut late = t.subscribe(StartAt::Earliest).unwrap();
    assert_eq!(late.try_recv().unwrap().value().n, 2);
}

#[test]
fn a_seek_back_past_what_was_released_reports_it_missed() {
    let t = releasing::<u64>(8);
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    for i in 0..4 {
        t.try_publish(i).unwrap();
    }
    let mut buf = Vec::new();
    assert_eq!(sub.try_recv_many(&mut buf, 3), Ok(3));
    sub.seek_to(StartAt::Offset(1)).unwrap();
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Lagged(2));
    assert_eq!(sub_values(&mut sub), vec![3]);
    // Within what the subscriber fetched but was not handed, a seek back works.
    for i in 4..8 {
        t.try_publish(i).unwrap();
    }
    assert_eq!(sub.try_recv().unwrap().into_value(), 4);
    sub.seek_to(StartAt::Offset(5)).unwrap();
    assert_eq!(sub_values(&mut sub), vec![5, 6, 7]);
    // Everything up to 7 was handed over, so it is gone.
    sub.seek_to(StartAt::Offset(4)).unwrap();
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Lagged(4));
}

#[test]
fn what_a_subscriber_fetched_ahead_stays_for_it_while_another_reads_past() {
    let (t, clones) = counted_topic(8);
    let mut a = t.subscribe(StartAt::Earliest).unwrap();
    let mut b = t.subscribe(StartAt::Earliest).unwrap();
    publish_counted(&t, &clones, 0..5);
    // A fetches all five ahead (copies) and is handed 0; B then reads them all.
    assert_eq!(a.try_recv().unwrap().value().n, 0);
    let mut buf = Vec::new();
    assert_eq!(b.try_recv_many(&mut buf, 10), Ok(5));
    // Only 0 is read by both: B got it moved, and copies of the rest.
    assert_eq!(clones.load(Ordering::SeqCst), 5 + 4);
    assert_eq!(low_depth_released(&t), (1, 4, 1));
    // A drops what it fetched with a seek back: the log still has it.
    a.seek_to(StartAt::Offset(1)).unwrap();
    let got: Vec<u64> = std::iter::from_fn(|| a.try_recv().ok().map(|m| m.value().n)).collect();
    assert_eq!(got, vec![1, 2, 3, 4]);
    assert_eq!(low_depth_released(&t), (5, 0, 5));
}

#[test]
fn room_freed_by_release_lets_a_blocked_publisher_on() {
    let t = releasing::<u64>(2);
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    t.try_publish(0).unwrap();
    t.try_publish(1).unwrap();
    assert!(matches!(t.try_publish(2), Err(PublishError::Full(2))));
    let mut buf = Vec::new();
    assert_eq!(sub.try_recv_many(&mut buf, 10), Ok(2));
    t.try_publish(2).unwrap();
    t.try_publish(3).unwrap();
    assert_eq!(sub_values(&mut sub), vec![2, 3]);
}

#[test]
fn a_pooled_group_moves_messages_and_a_new_member_gets_what_the_pool_holds() {
    let (t, clones) = counted_topic(64);
    let mut a = t.group("g", StartAt::Earliest).unwrap();
    publish_counted(&t, &clones, 0..10);
    assert_eq!(a.try_recv().unwrap().value().n, 0);
    assert_eq!(
        clones.load(Ordering::SeqCst),
        0,
        "the pool takes the values themselves"
    );
    assert_eq!(low_depth_released(&t), (10, 0, 10));
    drop(a);
    // The pool belongs to the group, so what it holds reaches the next member.
    let mut b = t.group("g", StartAt::Earliest).unwrap();
    let got: Vec<u64> = std::iter::from_fn(|| b.try_recv().ok().map(|m| m.value().n)).collect();
    assert_eq!(got, (1..10).collect::<Vec<_>>());
    let s = t.stats();
    assert_eq!(
        (s.published, s.delivered, s.released, s.evicted),
        (10, 10, 10, 0)
    );
    assert_eq!(clones.load(Ordering::SeqCst), 0);
}

#[test]
fn messages_in_a_groups_pool_still_count_against_the_capacity() {
    let t = releasing::<u64>(2);
    let mut a = t.group("g", StartAt::Earliest).unwrap();
    let mut b = t.group("g", StartAt::Earliest).unwrap();
    t.try_publish(0).unwrap();
    t.try_publish(1).unwrap();
    // A is handed 0 and fetches 1 into the pool: out of the log, but not read yet.
    assert_eq!(a.try_recv().unwrap().into_value(), 0);
    t.try_publish(2).unwrap();
    assert!(matches!(t.try_publish(3), Err(PublishError::Full(3))));
    assert_eq!(b.try_recv().unwrap().into_value(), 1);
    t.try_publish(3).unwrap();
    assert_eq!(member_values(&mut b), vec![2, 3]);
}

#[test]
fn a_group_and_a_subscriber_both_read_before_anything_leaves() {
    let t = releasing::<u64>(16);
    let mut g = t.group("g", StartAt::Earliest).unwrap();
    let mut s = t.subscribe(StartAt::Earliest).unwrap();
    for i in 0..6 {
        t.try_publish(i).unwrap();
    }
    assert_eq!(member_values(&mut g), (0..6).collect::<Vec<_>>());
    assert_eq!(
        low_depth_released(&t).2,
        0,
        "the subscriber has not read them"
    );
    assert_eq!(sub_values(&mut s), (0..6).collect::<Vec<_>>());
    assert_eq!(low_depth_released(&t), (6, 0, 6));
}

#[test]
fn members_of_a_partitioned_group_lose_nothing_across_rebalances() {
    let t = Topic::new(TopicConfig::new(64).partitions(3).release_on_read(true)).unwrap();
    let mut a = t.group("g", StartAt::Earliest).unwrap();
    for i in 0..60u64 {
        t.try_publish_keyed(i.to_le_bytes(), i).unwrap();
    }
    let mut seen = Vec::new();
    for _ in 0..10 {
        seen.push(a.try_recv().unwrap().into_value());
    }
    let mut b = t.group("g", StartAt::Earliest).unwrap();
    for _ in 0..10 {
        if let Ok(m) = b.try_recv() {
            seen.push(m.into_value());
        }
        if let Ok(m) = a.try_recv() {
            seen.push(m.into_value());
        }
    }
    drop(a);
    let mut c = t.group("g", StartAt::Earliest).unwrap();
    seen.extend(member_values(&mut b));
    seen.extend(member_values(&mut c));
    seen.extend(member_values(&mut b));
    let unique: BTreeSet<u64> = seen.iter().copied().collect();
    assert_eq!(seen.len(), 60, "no duplicates");
    assert_eq!(unique, (0..60).collect::<BTreeSet<_>>(), "nothing lost");
    let s = t.stats();
    assert_eq!((s.released, s.depth), (60, 0));
}

#[cfg(feature = "std")]
#[test]
fn nothing_leaves_while_an_explicit_ack_group_is_attached() {
    let t = releasing::<u64>(8);
    let mut acked = t
        .group_acked("acked", StartAt::Earliest, AckConfig::new())
        .unwrap();
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    for i in 0..3 {
        t.try_publish(i).unwrap();
    }
    assert_eq!(sub_values(&mut sub), vec![0, 1, 2]);
    let d = acked.try_recv().unwrap();
    assert_eq!(*d.value(), 0);
    d.nack().unwrap();
    // Delivered again from the log.
    let d = acked.try_recv().unwrap();
    assert_eq!(*d.value(), 0);
    d.ack().unwrap();
    assert_eq!(low_depth_released(&t), (0, 3, 0));
    let mut late = t.subscribe(StartAt::Earliest).unwrap();
    assert_eq!(sub_values(&mut late), vec![0, 1, 2]);
    drop(acked);
    t.delete_group("acked").unwrap();
    drop(late);
    // With the explicit group gone, what every reader read leaves.
    assert_eq!(low_depth_released(&t), (3, 0, 3));
}

#[test]
fn drop_oldest_and_ttl_still_evict_and_expire_on_a_releasing_topic() {
    let t = Topic::new(
        TopicConfig::new(2)
            .overflow(Overflow::DropOldest)
            .release_on_read(true),
    )
    .unwrap();
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    for i in 0..5u64 {
        t.try_publish(i).unwrap();
    }
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Lagged(3));
    assert_eq!(sub_values(&mut sub), vec![3, 4]);
    let s = t.stats();
    assert_eq!((s.evicted, s.released, s.depth), (3, 2, 0));

    let clock = Arc::new(ManualClock::new());
    let t = Topic::new(
        TopicConfig::new(8)
            .clock(clock.clone())
            .ttl(Duration::from_millis(10))
            .release_on_read(true),
    )
    .unwrap();
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    t.try_publish(0u64).unwrap();
    t.try_publish(1).unwrap();
    assert_eq!(sub.try_recv().unwrap().into_value(), 0);
    clock.advance(Duration::from_millis(20));
    t.try_publish(2).unwrap();
    // 1 expired before anyone read it.
    assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Lagged(1));
    assert_eq!(sub_values(&mut sub), vec![2]);
    let s = t.stats();
    assert_eq!((s.published, s.released, s.expired, s.depth), (3, 2, 1, 0));
}

// ----- a slower reader leaving, seeking, deleted groups, explicit groups -----------------

#[test]
fn after_a_slower_reader_leaves_the_last_reader_moves_again() {
    // A pooled group never looks for what to release on its own: the slower subscriber's
    // drop must release what the group already read, so that its later reads move.
    let (t, clones) = counted_topic(64);
    let mut g = t.group("g", StartAt::Earliest).unwrap();
    let s = t.subscribe(StartAt::Earliest).unwrap();
    publish_counted(&t, &clones, 0..4);
    let mut buf = Vec::new();
    assert_eq!(g.try_recv_many(&mut buf, 10), Ok(4));
    assert_eq!(
        clones.load(Ordering::SeqCst),
        4,
        "s has not read them: copies"
    );
    drop(s);
    for round in 0..3u64 {
        publish_counted(&t, &clones, 4 + 4 * round..8 + 4 * round);
        buf.clear();
        assert_eq!(g.try_recv_many(&mut buf, 10), Ok(4));
    }
    assert_eq!(clones.load(Ordering::SeqCst), 4, "g alone: the values move");

    // The same for a subscriber without read-ahead (a TTL topic), and a group deleted.
    let clones = Arc::new(AtomicUsize::new(0));
    let t = Topic::<Counted>::new(
        TopicConfig::new(64)
            .ttl(Duration::from_secs(3600))
            .clock(Arc::new(ManualClock::new()))
            .release_on_read(true),
    )
    .unwrap();
    let mut a = t.subscribe(StartAt::Earliest).unwrap();
    let _g = t.group("slow", StartAt::Earliest).unwrap();
    publish_counted(&t, &clones, 0..2);
    a.try_recv().unwrap();
    a.try_recv().unwrap();
    assert_eq!(clones.load(Ordering::SeqCst), 2);
    t.delete_group("slow").unwrap();
    for n in 2..10 {
        publish_counted(&t, &clones, n..n + 1);
        assert_eq!(a.try_recv().unwrap().value().n, n);
    }
    assert_eq!(clones.load(Ordering::SeqCst), 2, "a alone: the values move");
    assert_eq!(t.stats().released, 10);
}

#[test]
fn a_seek_to_earliest_finds_what_the_subscriber_had_fetched_ahead() {
    let t = releasing::<u64>(8);
    let mut s = t.subscribe(StartAt::Earliest).unwrap();
    for i in 0..5 {
        t.try_publish(i).unwrap();
    }
    assert_eq!(s.try_recv().unwrap().into_value(), 0); // 1..4 are in its read-ahead
    s.seek_to(StartAt::Earliest).unwrap();
    assert_eq!(s.position(0), Some(1));
    assert_eq!(sub_values(&mut s), vec![1, 2, 3, 4]);
    let st = t.stats();
    assert_eq!((st.released, st.delivered, st.depth), (5, 5, 0));
}

#[test]
fn deleting_a_pooled_group_gives_back_what_its_pool_holds() {
    let t = releasing::<u64>(8);
    let mut g = t.group("g", StartAt::Earliest).unwrap();
    for i in 0..5 {
        t.try_publish(i).unwrap();
    }
    assert_eq!(g.try_recv().unwrap().into_value(), 0); // 1..4 moved into the pool
    drop(g);
    t.delete_group("g").unwrap();
    let mut late = t.subscribe(StartAt::Earliest).unwrap();
    assert_eq!(sub_values(&mut late), vec![1, 2, 3, 4]);
    let st = t.stats();
    assert_eq!(
        (st.published, st.delivered, st.released, st.depth),
        (5, 5, 5, 0)
    );
}

#[cfg(feature = "std")]
#[test]
fn an_explicit_ack_group_starting_where_messages_were_fetched_ahead_lags_past_them() {
    let t = releasing::<u64>(8);
    let mut s = t.subscribe(StartAt::Earliest).unwrap();
    for i in 0..5 {
        t.try_publish(i).unwrap();
    }
    assert_eq!(s.try_recv().unwrap().into_value(), 0); // 1..4 are in s's read-ahead
    let mut acked = t
        .group_acked("acked", StartAt::Offset(2), AckConfig::new())
        .unwrap();
    // 2..4 are out of the log (s will be handed them): the group is told it missed them.
    assert_eq!(acked.try_recv().unwrap_err(), TryRecvError::Lagged(3));
    assert_eq!(acked.try_recv().unwrap_err(), TryRecvError::Empty);
    assert!(acked.pending().is_empty());
    assert_eq!(acked.committed(0), Ok(5));
    assert_eq!(sub_values(&mut s), vec![1, 2, 3, 4]);
    // Nothing is stuck: the whole capacity is free again.
    let mut accepted = 0;
    while t.try_publish(100).is_ok() {
        accepted += 1;
    }
    assert_eq!(accepted, 8);
    let d = acked.try_recv().unwrap();
    assert_eq!(d.message().offset(), 5);
    d.ack().unwrap();
}

#[test]
fn what_a_visit_lets_go_of_is_dropped_when_the_visit_ends() {
    // B fetches 0..4 ahead as copies (A has read nothing); A then reads them all, moving 0
    // (B was handed it) and copying 1..4. Once B has handed 1..4 over too, everyone has
    // read them: B's next visit to the log lets go of the log's own values, and drops
    // them when it ends, not at some later visit.
    let t = releasing::<Arc<u64>>(8);
    let mut a = t.subscribe(StartAt::Earliest).unwrap();
    let mut b = t.subscribe(StartAt::Earliest).unwrap();
    let probes: Vec<Arc<u64>> = (0..5).map(Arc::new).collect();
    for p in &probes {
        t.try_publish(p.clone()).unwrap();
    }
    assert_eq!(*b.try_recv().unwrap().into_value(), 0);
    let mut got = Vec::new();
    assert_eq!(a.try_recv_many(&mut got, 10), Ok(5));
    drop(got);
    for i in 1..5 {
        assert_eq!(*b.try_recv().unwrap().into_value(), i);
    }
    // 1..4 are still in the log: both readers got copies.
    let counts: Vec<usize> = probes.iter().map(Arc::strong_count).collect();
    assert_eq!(counts, vec![1, 2, 2, 2, 2]);
    // B's next visit (a receive that finds the log has news) lets go of them.
    t.try_publish(Arc::new(5)).unwrap();
    assert_eq!(*b.try_recv().unwrap().into_value(), 5);
    let counts: Vec<usize> = probes.iter().map(Arc::strong_count).collect();
    assert_eq!(counts, vec![1; 5], "nothing kept once everyone has read it");
    assert_eq!(t.stats().released, 5);
}

// ----- differential: releasing and retaining topics deliver the same ------------------------

#[derive(Debug, Clone)]
enum Op {
    Publish,
    PublishTo(u32),
    PublishBatch(usize),
    SubRecv(usize),
    SubRecvMany(usize, usize),
    MemberRecv(usize),
    MemberRecvMany(usize, usize),
    DropSub(usize),
    Leave(usize),
    /// A new subscriber at `Latest` (where the two topics agree).
    SubscribeLatest,
    /// A new member of group `g` (a new group starts at `Latest`).
    JoinLatest(usize),
    Advance(u64),
    Close,
}

fn op() -> impl Strategy<Value = Op> {
    let i = 0usize..4;
    prop_oneof![
        6 => Just(Op::Publish),
        2 => (0u32..4).prop_map(Op::PublishTo),
        2 => (0usize..6).prop_map(Op::PublishBatch),
        5 => i.clone().prop_map(Op::SubRecv),
        2 => (i.clone(), 0usize..5).prop_map(|(s, l)| Op::SubRecvMany(s, l)),
        5 => i.clone().prop_map(Op::MemberRecv),
        2 => (i.clone(), 0usize..5).prop_map(|(m, l)| Op::MemberRecvMany(m, l)),
        1 => i.clone().prop_map(Op::DropSub),
        1 => i.prop_map(Op::Leave),
        1 => Just(Op::SubscribeLatest),
        1 => (0usize..3).prop_map(Op::JoinLatest),
        1 => (1u64..4).prop_map(Op::Advance),
        1 => Just(Op::Close),
    ]
}

#[derive(Debug, Clone)]
struct Setup {
    capacity: usize,
    partitions: u32,
    overflow: Overflow,
    ttl: Option<u64>,
    /// Subscribers and members (of groups 0 and 1, alternately) attached before anything
    /// is published, at `Earliest`.
    subs: usize,
    members: usize,
}

fn setup() -> impl Strategy<Value = Setup> {
    (
        1usize..5,
        prop_oneof![3 => Just(1u32), 1 => Just(2u32), 1 => Just(3u32)],
        prop_oneof![
            Just(Overflow::Block),
            Just(Overflow::DropOldest),
            Just(Overflow::Reject)
        ],
        proptest::option::of(1u64..6),
        0usize..3,
        0usize..4,
    )
        .prop_map(
            |(capacity, partitions, overflow, ttl, subs, members)| Setup {
                capacity,
                partitions,
                overflow,
                ttl,
                subs,
                members,
            },
        )
}

/// One topic of the pair, with its readers.
struct Side {
    topic: Topic<u64>,
    subs: Vec<Subscriber<u64>>,
    members: Vec<Consumer<u64>>,
}

/// What a reader observed: (partition, offset, value) or an error.
type Got = Result<Vec<(u32, u64, u64)>, TryRecvError>;

impl Side {
    fn new(s: &Setup, clock: &Arc<ManualClock>, release: bool) -> Side {
        let mut config = TopicConfig::new(s.capacity)
            .partitions(s.partitions)
            .overflow(s.overflow)
            .clock(clock.clone())
            .release_on_read(release);
        if let Some(ttl) = s.ttl {
            config = config.ttl(Duration::from_millis(ttl));
        }
        let topic = Topic::new(config).unwrap();
        let subs = (0..s.subs)
            .map(|_| topic.subscribe(StartAt::Earliest).unwrap())
            .collect();
        let members = (0..s.members)
            .map(|m| {
                topic
                    .group(&format!("g{}", m % 2), StartAt::Earliest)
                    .unwrap()
            })
            .collect();
        Side {
            topic,
            subs,
            members,
        }
    }

    fn apply(&mut self, op: &Op, next: &mut u64) -> String {
        let mut value = || {
            *next += 1;
            *next
        };
        let one = |r: Result<memq_core::Message<u64>, TryRecvError>| -> Got {
            r.map(|m| vec![(m.partition(), m.offset(), *m.value())])
        };
        let many = |r: Result<usize, TryRecvError>, buf: Vec<memq_core::Message<u64>>| -> Got {
            r.map(|_| {
                buf.iter()
                    .map(|m| (m.partition(), m.offset(), *m.value()))
                    .collect()
            })
        };
        match *op {
            Op::Publish => format!("{:?}", self.topic.try_publish(value())),
            Op::PublishTo(p) => format!("{:?}", self.topic.try_publish_to(p, value())),
            Op::PublishBatch(n) => {
                let batch: Vec<u64> = (0..n).map(|_| value()).collect();
                format!("{:?}", self.topic.try_publish_batch(batch))
            }
            Op::SubRecv(i) => match self.subs.get_mut(i) {
                Some(s) => format!("{:?}", one(s.try_recv())),
                None => String::new(),
            },
            Op::SubRecvMany(i, limit) => match self.subs.get_mut(i) {
                Some(s) => {
                    let mut buf = Vec::new();
                    let r = s.try_recv_many(&mut buf, limit);
                    format!("{:?}", many(r, buf))
                }
                None => String::new(),
            },
            Op::MemberRecv(i) => match self.members.get_mut(i) {
                Some(c) => format!("{:?}", one(c.try_recv())),
                None => String::new(),
            },
            Op::MemberRecvMany(i, limit) => match self.members.get_mut(i) {
                Some(c) => {
                    let mut buf = Vec::new();
                    let r = c.try_recv_many(&mut buf, limit);
                    format!("{:?}", many(r, buf))
                }
                None => String::new(),
            },
            Op::DropSub(i) => {
                if i < self.subs.len() {
                    self.subs.remove(i);
                }
                String::new()
            }
            Op::Leave(i) => {
                if i < self.members.len() {
                    self.members.remove(i);
                }
                String::new()
            }
            Op::SubscribeLatest => match self.topic.subscribe(StartAt::Latest) {
                Ok(s) => {
                    self.subs.push(s);
                    "subscribed".into()
                }
                Err(e) => format!("{e:?}"),
            },
            Op::JoinLatest(g) => match self.topic.group(&format!("g{g}"), StartAt::Latest) {
                Ok(c) => {
                    self.members.push(c);
                    "joined".into()
                }
                Err(e) => format!("{e:?}"),
            },
            Op::Advance(_) => String::new(),
            Op::Close => {
                self.topic.close();
                String::new()
            }
        }
    }
}

fn differential(s: Setup, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let clock = Arc::new(ManualClock::new());
    let mut retain = Side::new(&s, &clock, false);
    let mut release = Side::new(&s, &clock, true);
    let (mut next_a, mut next_b) = (0, 0);
    for (n, op) in ops.iter().enumerate() {
        if let Op::Advance(ms) = op {
            clock.advance(Duration::from_millis(*ms));
        }
        let a = retain.apply(op, &mut next_a);
        let b = release.apply(op, &mut next_b);
        prop_assert_eq!(a, b, "step {}: {:?}", n, op);
    }
    let (a, b) = (retain.topic.stats(), release.topic.stats());
    prop_assert_eq!(a.published, b.published);
    prop_assert_eq!(a.delivered, b.delivered);
    prop_assert_eq!(a.released, 0);
    for st in [&a, &b] {
        // Every published message is retained or left by exactly one way.
        prop_assert_eq!(
            st.published,
            st.depth + st.evicted + st.expired + st.released,
            "{:?}",
            st
        );
    }
    // Releasing only ever removes: never more retained than the retaining topic.
    prop_assert!(b.depth <= a.depth, "{:?} vs {:?}", a, b);
    // And it removes everything every reader has read: where readers remain, the oldest
    // message left is the slowest reader's next one (or where retention took the log).
    // Messages may have been moved ahead of the user into a subscriber's read-ahead
    // (topics without a TTL or `DropOldest`) or a one-partition group's pool, up to 33 a
    // reader: there the log may start that much later.
    let ahead = s.ttl.is_none() && s.overflow != Overflow::DropOldest;
    let pooled = ahead && s.partitions == 1 && !b.groups.is_empty();
    let held = pooled || (ahead && !release.subs.is_empty());
    for p in 0..s.partitions {
        let subs = release.subs.iter().filter_map(|sub| sub.position(p));
        let groups = b.groups.iter().map(|g| g.committed[p as usize]);
        if let Some(slowest) = subs.chain(groups).min() {
            let want = a.partitions[p as usize].low.max(slowest);
            let low = b.partitions[p as usize].low;
            prop_assert!(
                low == want || (held && low > want && low <= want + 33),
                "partition {}: low {} against {}: {:?} vs {:?}",
                p,
                low,
                want,
                a,
                b
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn readers_attached_from_the_start_receive_the_same_from_both(
        s in setup(),
        ops in proptest::collection::vec(op(), 1..80),
    ) {
        differential(s, ops)?;
    }
}

#[test]
fn copies_every_reader_was_handed_count_as_released_when_a_publish_overwrites_them() {
    // Review finding: both subscribers were handed 0 and 1 without the lock (copies
    // fetched ahead), so no visit let go of them before the log filled; the publishes
    // that overwrote them counted them as evicted, a loss signal, though both readers
    // had them.
    let t = releasing::<u64>(2);
    let mut a = t.subscribe(StartAt::Earliest).unwrap();
    let mut b = t.subscribe(StartAt::Earliest).unwrap();
    t.try_publish(0).unwrap();
    t.try_publish(1).unwrap();
    assert_eq!(a.try_recv().unwrap().into_value(), 0); // fetches copies of 0 and 1
    assert_eq!(b.try_recv().unwrap().into_value(), 0); // moves 0 out, copies 1
    assert_eq!(a.try_recv().unwrap().into_value(), 1); // both without the lock
    assert_eq!(b.try_recv().unwrap().into_value(), 1);
    t.try_publish(2).unwrap();
    t.try_publish(3).unwrap();
    let s = t.stats();
    assert_eq!((s.evicted, s.released, s.depth), (0, 2, 2), "{s:?}");
    assert_eq!(s.published, s.depth + s.evicted + s.expired + s.released);
    // Readers of different speeds over many rounds: every message reached both, so
    // nothing is evicted.
    let t = releasing::<u64>(8);
    let mut a = t.subscribe(StartAt::Earliest).unwrap();
    let mut b = t.subscribe(StartAt::Earliest).unwrap();
    for r in 0..125u64 {
        for i in 0..8 {
            t.try_publish(r * 8 + i).unwrap();
        }
        assert_eq!(a.try_recv().unwrap().into_value(), r * 8);
        assert_eq!(sub_values(&mut b), (r * 8..r * 8 + 8).collect::<Vec<_>>());
        assert_eq!(
            sub_values(&mut a),
            (r * 8 + 1..r * 8 + 8).collect::<Vec<_>>()
        );
    }
    let s = t.stats();
    assert_eq!((s.published, s.evicted), (1000, 0), "{s:?}");
    assert_eq!(s.published, s.depth + s.released, "{s:?}");
}

/// `stats` is a read: it reports what a visit would let go of as released, and lets go
/// of nothing itself; the next visit under the partition's lock does.
#[test]
fn stats_counts_what_a_visit_would_release_and_releases_nothing() {
    let t = releasing::<Arc<u32>>(8);
    let values: Vec<Arc<u32>> = (0..5).map(Arc::new).collect();
    let slow = t.subscribe(StartAt::Earliest).unwrap();
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    for v in &values {
        t.try_publish(v.clone()).unwrap();
    }
    // `sub` fetches copies of all five (`slow` has read none) and hands over the first.
    assert_eq!(*sub.try_recv().unwrap().into_value(), 0);
    // Dropping `slow` is a visit: the one message every reader left has read goes.
    drop(slow);
    assert_eq!(Arc::strong_count(&values[0]), 1);
    // The next is handed over without the lock: stats counts it as released, yet the
    // log still holds its copy until someone visits it.
    assert_eq!(*sub.try_recv().unwrap().into_value(), 1);
    assert_eq!(low_depth_released(&t), (2, 3, 2));
    assert_eq!(
        low_depth_released(&t),
        (2, 3, 2),
        "stats changed what it read"
    );
    assert_eq!(Arc::strong_count(&values[1]), 2, "stats let go of a value");
    // A visit (a reader attaching) lets go of it.
    drop(t.subscribe(StartAt::Latest).unwrap());
    assert_eq!(Arc::strong_count(&values[1]), 1);
    assert_eq!(low_depth_released(&t), (2, 3, 2));
}
