//! Replay and seek: messages stay in the log after they are read, so a late subscriber
//! replays from the start, another starts at an offset, and a reader can seek back.
//! Reading before the retained window reports what was missed. Exits non-zero on any
//! mismatch.
//!
//! Run it with `cargo run --example replay`.

use memq::{Overflow, RecvError, StartAt, Topic, TopicConfig, TryRecvError};

fn values(sub: &mut memq::Subscriber<u32>) -> Vec<u32> {
    let mut out = Vec::new();
    while let Ok(m) = sub.try_recv() {
        out.push(m.into_value());
    }
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A log of 8 that drops its oldest message when full: a window over the stream.
    let topic = Topic::<u32>::new(TopicConfig::new(8).overflow(Overflow::DropOldest))?;
    for n in 0..5 {
        topic.try_publish(n)?;
    }

    // A late subscriber replays everything retained.
    let mut late = topic.subscribe(StartAt::Earliest)?;
    let replayed = values(&mut late);
    println!("late subscriber replayed {replayed:?}");
    // Another starts at offset 3; one at `Latest` sees only what comes next.
    let mut from_three = topic.subscribe(StartAt::Offset(3))?;
    let mut latest = topic.subscribe(StartAt::Latest)?;
    topic.try_publish(5)?;
    let (three, next) = (values(&mut from_three), values(&mut latest));
    println!("from offset 3: {three:?}; from latest: {next:?}");

    // Seek back and read again.
    late.seek(1)?;
    let again = values(&mut late);
    println!("after seek(1): {again:?}");

    // Publish past the window: the oldest are evicted, and a reader positioned before
    // the window is told how many it missed, then continues at the oldest retained.
    for n in 6..20 {
        topic.try_publish(n)?;
    }
    late.seek(0)?;
    let missed = match late.try_recv() {
        Err(TryRecvError::Lagged(n)) => n,
        other => return Err(format!("expected Lagged, got {other:?}").into()),
    };
    let window = values(&mut late);
    println!("seek(0) after eviction: missed {missed}, then {window:?}");
    let stats = topic.stats();
    println!(
        "retained window [{}, {})",
        stats.partitions[0].low, stats.partitions[0].high
    );

    // Seeking past the end is an error, not a wait.
    let past = late.seek(100).unwrap_err();
    println!("seek(100): {past}");
    topic.close();
    assert_eq!(late.recv_blocking().unwrap_err(), RecvError::Closed);

    if replayed != [0, 1, 2, 3, 4]
        || three != [3, 4, 5]
        || next != [5]
        || again != [1, 2, 3, 4, 5]
        || missed != 12
        || window != (12..20).collect::<Vec<_>>()
    {
        return Err("replay mismatch".into());
    }
    println!("ok: replay, offsets, seek and eviction reporting all as expected");
    Ok(())
}
