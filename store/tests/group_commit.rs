//! Group writes under `SyncPolicy::Always`: many publishers at once (threads and async
//! tasks, single messages, keyed ones and batches) each get their own answer, and every
//! message is in the log exactly once, in each publisher's order, at the offset its
//! receipt gave; a group that the log refuses in part (a record too large, the retention
//! limit) fails only the publishes that do not fit; a close while publishes are queued
//! completes every one of them; an async publish dropped while queued is published at
//! most once.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll};

use bytes::Bytes;
use memq_core::{Overflow, StartAt, TopicConfig};
use memq_store::{
    DurableConfig, DurablePublishError, DurableRecvError, DurableTopic, Retention, StoreError,
    SyncPolicy,
};

fn always() -> DurableConfig {
    DurableConfig::new(SyncPolicy::Always).segment_bytes(64 << 10)
}

fn payload(publisher: u64, seq: u64) -> Bytes {
    Bytes::from(format!(
        "p{publisher}-s{seq}-{}",
        "x".repeat((seq % 13) as usize)
    ))
}

fn parse(payload: &[u8]) -> (u64, u64) {
    let s = std::str::from_utf8(payload).unwrap();
    let mut parts = s.split('-');
    let p = parts.next().unwrap()[1..].parse().unwrap();
    let q = parts.next().unwrap()[1..].parse().unwrap();
    (p, q)
}

/// Polls every future until all are done, on the calling thread (a join of many tasks
/// on one executor thread, as an async runtime's worker runs them).
fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    futures_executor::block_on(std::future::poll_fn(|cx: &mut Context<'_>| {
        let mut pending = false;
        for (f, out) in futures.iter_mut().zip(outputs.iter_mut()) {
            if out.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *out = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }));
    outputs.into_iter().map(Option::unwrap).collect()
}

/// Every message of the topic, from the start: (partition, offset) -> payload.
fn read_all(topic: &DurableTopic) -> HashMap<(u32, u64), Bytes> {
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    let mut all = HashMap::new();
    loop {
        match sub.try_recv() {
            Ok(m) => {
                assert!(all.insert((m.partition, m.offset), m.payload).is_none());
            }
            Err(DurableRecvError::Empty) => return all,
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn many_publishers_at_once_each_message_once_in_order_at_its_receipts_offset() {
    let dir = tempfile::tempdir().unwrap();
    let config = TopicConfig::new(64).partitions(2);
    let topic = DurableTopic::open(dir.path(), config.clone(), always()).unwrap();
    const THREADS: u64 = 12;
    const TASKS: u64 = 24;
    const EACH: u64 = 150;
    let start = Arc::new(Barrier::new(THREADS as usize + 2));
    // (partition, offset) -> (publisher, seq), from the receipts.
    let mut receipts: Vec<((u32, u64), (u64, u64))> = Vec::new();
    let mut handles = Vec::new();
    for t in 0..THREADS {
        let (topic, start) = (topic.clone(), start.clone());
        handles.push(std::thread::spawn(move || {
            start.wait();
            let mut got = Vec::new();
            let mut seq = 0;
            while seq < EACH {
                match seq % 3 {
                    // Keyed: every publisher's key on one partition, in its order.
                    0 | 1 => {
                        let r = topic
                            .publish_keyed_blocking(format!("k{t}"), payload(t, seq))
                            .unwrap();
                        assert!(r.durable);
                        assert_eq!(r.count, 1);
                        got.push(((r.partition, r.offset), (t, seq)));
                        seq += 1;
                    }
                    _ if seq + 3 > EACH => {
                        topic
                            .publish_keyed_blocking(format!("k{t}"), payload(t, seq))
                            .map(|r| got.push(((r.partition, r.offset), (t, seq))))
                            .unwrap();
                        seq += 1;
                    }
                    // A batch of three, all under the same key.
                    _ => {
                        let batch: Vec<Bytes> = (seq..seq + 3).map(|s| payload(t, s)).collect();
                        let r = topic
                            .publish_batch_keyed_blocking(format!("k{t}"), batch)
                            .unwrap();
                        assert_eq!(r.count, 3);
                        for i in 0..3 {
                            got.push(((r.partition, r.offset + i), (t, seq + i)));
                        }
                        seq += 3;
                    }
                }
            }
            got
        }));
    }
    // Async publishers: many tasks on one thread, each with one message in flight.
    {
        let (topic, start) = (topic.clone(), start.clone());
        handles.push(std::thread::spawn(move || {
            start.wait();
            let tasks = (THREADS..THREADS + TASKS).map(|t| {
                let topic = topic.clone();
                async move {
                    let mut got = Vec::new();
                    for seq in 0..EACH {
                        let r = topic
                            .publish_keyed(format!("k{t}"), payload(t, seq))
                            .await
                            .unwrap();
                        assert!(r.durable);
                        got.push(((r.partition, r.offset), (t, seq)));
                    }
                    got
                }
            });
            join_all(tasks.collect()).into_iter().flatten().collect()
        }));
    }
    start.wait();
    for h in handles {
        receipts.extend(h.join().unwrap());
    }
    let total = (THREADS + TASKS) * EACH;
    assert_eq!(receipts.len() as u64, total);
    let stats = topic.stats();
    let syncs: u64 = stats.partitions.iter().map(|p| p.syncs).sum();
    eprintln!("{total} publishes (messages) in {syncs} syncs");

    let check = |all: &HashMap<(u32, u64), Bytes>| {
        assert_eq!(all.len() as u64, total, "a message lost or duplicated");
        // Every receipt's offset holds that message.
        for (at, (t, seq)) in &receipts {
            assert_eq!(parse(&all[at]), (*t, *seq), "at {at:?}");
        }
        // Each publisher's messages are in its order, offsets contiguous per partition.
        let mut last: HashMap<u64, (u32, u64, u64)> = HashMap::new();
        let mut keys: Vec<_> = all.keys().copied().collect();
        keys.sort();
        for (i, (p, o)) in keys.iter().enumerate() {
            if i > 0 && keys[i - 1].0 == *p {
                assert_eq!(keys[i - 1].1 + 1, *o, "a gap in partition {p}");
            }
            let (t, seq) = parse(&all[&(*p, *o)]);
            if let Some(&(lp, lo, ls)) = last.get(&t) {
                assert_eq!(lp, *p, "one key, one partition");
                assert!(lo < *o && ls + 1 == seq, "publisher {t}: {ls} then {seq}");
            } else {
                assert_eq!(seq, 0);
            }
            last.insert(t, (*p, *o, seq));
        }
    };
    check(&read_all(&topic));
    // And after a restart, from the disk.
    drop(topic);
    let topic = DurableTopic::open(dir.path(), config, always()).unwrap();
    check(&read_all(&topic));
}

#[test]
fn a_record_too_large_fails_its_own_publish_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let durable = always().max_record_bytes(200);
    let topic = DurableTopic::open(dir.path(), TopicConfig::new(64), durable).unwrap();
    const THREADS: u64 = 6;
    const EACH: u64 = 100;
    let start = Arc::new(Barrier::new(THREADS as usize));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (topic, start) = (topic.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                let mut ok = 0;
                for seq in 0..EACH {
                    // Publisher 0's every third message is too large.
                    if t == 0 && seq % 3 == 0 {
                        let big = Bytes::from(vec![b'b'; 300]);
                        match topic.publish_blocking(big.clone()) {
                            Err(DurablePublishError::Store(StoreError::TooLarge { .. }, back)) => {
                                assert_eq!(back, big, "the message is handed back");
                            }
                            other => panic!("{other:?}"),
                        }
                    } else {
                        topic.publish_blocking(payload(t, seq)).unwrap();
                        ok += 1;
                    }
                }
                ok
            })
        })
        .collect();
    let ok: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(ok, THREADS * EACH - EACH.div_ceil(3));
    let all = read_all(&topic);
    assert_eq!(all.len() as u64, ok);
    assert!(all.values().all(|p| p[0] == b'p'));
}

#[test]
fn at_the_retention_limit_each_publish_of_a_group_is_answered_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    // Under Reject, a subscriber at the start holds every segment: once the log reaches
    // its limit, publishes fail with Full (and their messages are handed back).
    let durable = always().segment_bytes(4096).retention(Retention {
        max_bytes: Some(16384),
        ..Retention::default()
    });
    let config = TopicConfig::new(8).overflow(Overflow::Reject);
    let topic = DurableTopic::open(dir.path(), config, durable).unwrap();
    let _holder = topic.subscribe(StartAt::Earliest).unwrap();
    const THREADS: u64 = 6;
    let start = Arc::new(Barrier::new(THREADS as usize));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (topic, start) = (topic.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                let (mut ok, mut full) = (Vec::new(), 0);
                for seq in 0..400 {
                    let p = payload(t, seq);
                    match topic.publish_blocking(p.clone()) {
                        Ok(r) => ok.push(r.offset),
                        Err(DurablePublishError::Full(back)) => {
                            assert_eq!(back, p);
                            full += 1;
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
                (ok, full)
            })
        })
        .collect();
    let mut offsets = Vec::new();
    let mut full = 0;
    for h in handles {
        let (ok, f) = h.join().unwrap();
        offsets.extend(ok);
        full += f;
    }
    assert!(full > 0, "the log never reached its limit");
    offsets.sort_unstable();
    let expected: Vec<u64> = (0..offsets.len() as u64).collect();
    assert_eq!(
        offsets, expected,
        "the published ones are the log, without gaps"
    );
    assert_eq!(read_all(&topic).len(), offsets.len());
}

#[test]
fn closing_while_publishes_are_queued_answers_every_one() {
    for _ in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let config = TopicConfig::new(64);
        let topic = DurableTopic::open(dir.path(), config.clone(), always()).unwrap();
        const THREADS: u64 = 8;
        let start = Arc::new(Barrier::new(THREADS as usize + 1));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (topic, start) = (topic.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    let mut ok = Vec::new();
                    for seq in 0.. {
                        match topic.publish_blocking(payload(t, seq)) {
                            Ok(r) => ok.push((r.offset, seq)),
                            Err(DurablePublishError::Closed(back)) => {
                                assert_eq!(back, payload(t, seq));
                                return ok;
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                    unreachable!()
                })
            })
            .collect();
        start.wait();
        // Some publishes first (a bound on what happened, not on time).
        let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
        for _ in 0..50 {
            sub.recv_blocking().unwrap();
        }
        topic.close();
        let answered: Vec<Vec<(u64, u64)>> =
            handles.into_iter().map(|h| h.join().unwrap()).collect();
        drop(sub);
        drop(topic);
        // Everything that was answered Ok is on disk, at its offset; nothing else is (a
        // publish that was written is answered Ok, never Closed). A publish that raced
        // the close may be on disk without this process's readers seeing it (see
        // `DurableTopic`): so the check reads after a reopen.
        let topic = DurableTopic::open(dir.path(), config, always()).unwrap();
        let all = read_all(&topic);
        let mut published = 0;
        for (t, ok) in answered.iter().enumerate() {
            published += ok.len();
            for &(offset, seq) in ok {
                assert_eq!(parse(&all[&(0, offset)]), (t as u64, seq));
            }
        }
        assert_eq!(all.len(), published);
    }
}

#[test]
fn an_async_publish_dropped_while_queued_is_published_at_most_once() {
    let dir = tempfile::tempdir().unwrap();
    let topic = DurableTopic::open(dir.path(), TopicConfig::new(64), always()).unwrap();
    // Many async publishes, each polled once (queued for the commit thread) and dropped.
    for i in 0..200u64 {
        let mut f = Box::pin(topic.publish(payload(0, i)));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        if let Poll::Ready(r) = f.as_mut().poll(&mut cx) {
            r.unwrap();
        }
        drop(f);
        if i % 10 == 0 {
            // And publishes that complete, in between.
            futures_executor::block_on(topic.publish(payload(1, i))).unwrap();
        }
    }
    let all = read_all(&topic);
    let mut seen = HashMap::new();
    for p in all.values() {
        *seen.entry(parse(p)).or_insert(0) += 1;
    }
    assert!(seen.values().all(|&n| n == 1), "a message published twice");
    assert_eq!(seen.keys().filter(|(p, _)| *p == 1).count(), 20);
    eprintln!(
        "{} of 200 dropped publishes were published",
        seen.keys().filter(|(p, _)| *p == 0).count()
    );
}
