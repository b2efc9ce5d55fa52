//! Partitions: keyed messages always land on the same partition (a fixed, documented
//! hash), so per-key order holds, for single messages and keyed batches alike; a group assigns partitions to its members and
//! rebalances when one leaves. Exits non-zero if order or assignment is broken.
//!
//! Run it with `cargo run --example partitions`.

use std::collections::BTreeMap;
use std::thread;

use memq::{key_partition, RecvError, StartAt, Topic, TopicConfig};

const PARTITIONS: u32 = 4;
const USERS: u32 = 12;
const EVENTS: u32 = 3_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let topic = Topic::<(String, u32)>::new(TopicConfig::new(256).partitions(PARTITIONS))?;
    let members: Vec<_> = (0..2)
        .map(|_| topic.group("sessions", StartAt::Earliest))
        .collect::<Result<_, _>>()?;
    let readers: Vec<_> = members
        .into_iter()
        .enumerate()
        .map(|(i, mut member)| {
            let assigned = member.assignment();
            println!("member {i} reads partitions {assigned:?}");
            thread::spawn(move || -> Result<usize, String> {
                // The last sequence number seen per user: must only grow.
                let mut last: BTreeMap<String, u32> = BTreeMap::new();
                let mut count = 0;
                loop {
                    match member.recv_blocking() {
                        Ok(msg) => {
                            let (user, seq) = msg.into_value();
                            if last
                                .insert(user.clone(), seq)
                                .is_some_and(|prev| prev >= seq)
                            {
                                return Err(format!("{user}: {seq} after a later event"));
                            }
                            count += 1;
                        }
                        Err(RecvError::Closed) => return Ok(count),
                        Err(e) => return Err(e.to_string()),
                    }
                }
            })
        })
        .collect();

    let mut seq = BTreeMap::new();
    let mut published = 0;
    for n in 0.. {
        if published == EVENTS {
            break;
        }
        let user = format!("user-{}", (n * 7) % USERS);
        let s = seq.entry(user.clone()).or_insert(0u32);
        // Every other turn a user has a burst of events: published as one keyed batch,
        // one visit to the partition, all or nothing, in order.
        let burst = if n % 2 == 0 {
            1
        } else {
            5.min(EVENTS - published)
        };
        let mut events: Vec<_> = (0..burst)
            .map(|_| {
                *s += 1;
                (user.clone(), *s)
            })
            .collect();
        let receipt = if burst == 1 {
            topic.publish_keyed_blocking(&user, events.remove(0))?
        } else {
            topic.publish_batch_keyed_blocking(&user, events)?
        };
        // The same key, the same partition, in every process and every language binding.
        assert_eq!(
            receipt.partition,
            key_partition(user.as_bytes(), PARTITIONS)
        );
        published += burst;
    }
    topic.close();

    let mut total = 0;
    for (i, r) in readers.into_iter().enumerate() {
        let count = r.join().expect("reader")?;
        println!("member {i} handled {count} events, each user's in order");
        total += count;
    }
    let per_partition: Vec<u64> = topic
        .stats()
        .partitions
        .iter()
        .map(|p| p.published)
        .collect();
    println!("events per partition: {per_partition:?}");
    if total != EVENTS as usize {
        return Err(format!("handled {total} of {EVENTS}").into());
    }

    // Rebalancing: when a member leaves, its partitions go to the others.
    let topic = Topic::<u32>::new(TopicConfig::new(8).partitions(PARTITIONS))?;
    let a = topic.group("g", StartAt::Earliest)?;
    let b = topic.group("g", StartAt::Earliest)?;
    let before = a.assignment();
    drop(b);
    let after = a.assignment();
    println!("member a: {before:?} with two members, {after:?} alone");
    if after != (0..PARTITIONS).collect::<Vec<_>>() {
        return Err("rebalance did not hand over every partition".into());
    }
    println!("ok: per-key order held; every event handled once; rebalance complete");
    Ok(())
}
