//! A work queue that survives restarts: orders are published to a durable topic, a
//! worker acks what it processed, the process "restarts" (everything is dropped and the
//! topic reopened from its directory), and the orders that were not acked come back while
//! the acked ones never do. Also: a subscriber replaying history far larger than memory.
//!
//! `cargo run --example durable --features durable`

use std::time::Duration;

use memq::durable::{DurableConfig, DurableTopic, GroupConfig, SyncPolicy};
use memq::{StartAt, TopicConfig};

fn open(dir: &std::path::Path) -> Result<DurableTopic, Box<dyn std::error::Error>> {
    // Memory keeps the newest 64 messages; the disk keeps them all.
    Ok(DurableTopic::open(
        dir,
        TopicConfig::new(64),
        DurableConfig::new(SyncPolicy::Always),
    )?)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("memq-durable-example-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let acked_before_restart;
    {
        let topic = open(&dir)?;
        for i in 0..1000 {
            let receipt = topic
                .publish_keyed_blocking(format!("customer-{}", i % 10), format!("order {i}"))?;
            assert!(receipt.durable, "Always: on disk when the publish returns");
        }
        // A worker processes 300 orders and acks them; the 301st is in its hands when
        // the process stops.
        let mut worker = topic.group(
            "billing",
            StartAt::Earliest,
            GroupConfig::acked(Duration::from_secs(30)),
        )?;
        for _ in 0..300 {
            worker.recv_delivery_blocking()?.ack()?;
        }
        let unfinished = worker.recv_delivery_blocking()?;
        acked_before_restart = worker.stats().committed[0];
        println!(
            "before the restart: 1000 published, {acked_before_restart} acked, order at offset {} in progress",
            unfinished.message().offset
        );
        worker.commit()?;
    } // everything dropped: the process "restarts"

    let topic = open(&dir)?;
    println!(
        "reopened: partition 0 holds offsets {}..{}",
        topic.start_offset(0).unwrap(),
        topic.next_offset(0).unwrap()
    );
    // The group goes on from what was acked: the order in progress comes back first.
    let mut worker = topic.group(
        "billing",
        StartAt::Earliest,
        GroupConfig::acked(Duration::from_secs(30)),
    )?;
    let first = worker.recv_delivery_blocking()?;
    assert_eq!(
        first.message().offset,
        acked_before_restart,
        "the order in progress comes back first"
    );
    first.ack()?;
    let mut processed = 1;
    while let Ok(delivery) = worker.recv_delivery_timeout(Duration::ZERO) {
        assert!(
            delivery.message().offset >= acked_before_restart,
            "an acked order came back"
        );
        delivery.ack()?;
        processed += 1;
    }
    assert_eq!(processed, 1000 - acked_before_restart);
    println!(
        "after the restart: the order in progress delivered again, then {} never delivered; none of the {acked_before_restart} acked ones",
        processed - 1
    );

    // Replay: memory holds 64, the subscriber reads all 1000 (from disk, then memory).
    let mut audit = topic.subscribe(StartAt::Earliest)?;
    let mut replayed = 0u64;
    while let Ok(m) = audit.try_recv() {
        assert_eq!(m.offset, replayed);
        assert_eq!(m.payload, format!("order {replayed}").into_bytes());
        replayed += 1;
    }
    assert_eq!(replayed, 1000);
    println!("replayed {replayed} orders from offset 0, though memory holds 64");
    drop((audit, worker, topic));
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
