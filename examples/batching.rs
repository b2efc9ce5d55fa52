//! Batching: publish many messages at once (contiguous offsets, all or nothing) and read
//! them back in batches with `recv_many`. Exits non-zero if a batch is out of order or
//! anything is missing.
//!
//! Run it with `cargo run --example batching`.

use std::thread;

use memq::{StartAt, Topic};

const BATCHES: u32 = 200;
const BATCH: u32 = 50;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let topic = Topic::<u32>::with_capacity(256)?;
    let mut sub = topic.subscribe(StartAt::Earliest)?;
    let reader = thread::spawn(move || -> Result<(u32, usize), String> {
        let (mut next, mut reads) = (0u32, 0usize);
        let mut buf = Vec::with_capacity(128);
        // Waits for at least one message, then takes up to 128 at once; 0 means closed.
        while sub
            .recv_many_blocking(&mut buf, 128)
            .map_err(|e| e.to_string())?
            > 0
        {
            reads += 1;
            for msg in buf.drain(..) {
                if *msg.value() != next || msg.offset() != u64::from(next) {
                    return Err(format!("expected {next}, got {msg:?}"));
                }
                next += 1;
            }
        }
        Ok((next, reads))
    });

    for b in 0..BATCHES {
        let batch: Vec<u32> = (b * BATCH..(b + 1) * BATCH).collect();
        let receipt = topic.publish_batch_blocking(batch)?;
        // The receipt is the first message's; the batch's offsets are contiguous.
        assert_eq!(receipt.offset, u64::from(b * BATCH));
    }
    topic.close();

    let (received, reads) = reader.join().expect("reader")?;
    println!("published {BATCHES} batches of {BATCH}; read {received} messages in {reads} reads");
    if received != BATCHES * BATCH {
        return Err("messages missing".into());
    }
    println!("ok: every message, in order, in batches");
    Ok(())
}
