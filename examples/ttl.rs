//! Time to live: with a clock, messages older than the TTL are skipped by readers,
//! reported to them once (`Lagged`), counted as expired and evicted. Time is a
//! `ManualClock` here, moved by hand, so the example is exact; in a program use a
//! runtime's clock (`memq::rt::Runtime::clock`). Exits non-zero on any mismatch.
//!
//! Run it with `cargo run --example ttl`.

use std::sync::Arc;
use std::time::Duration;

use memq::{Clock, ManualClock, RecvError, StartAt, Topic, TopicConfig, TryRecvError};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let clock = Arc::new(ManualClock::new());
    let topic = Topic::<&str>::new(
        TopicConfig::new(16)
            .clock(clock.clone())
            .ttl(Duration::from_secs(60)),
    )?;
    let mut sub = topic.subscribe(StartAt::Earliest)?;

    topic.try_publish("stale-1")?;
    topic.try_publish("stale-2")?;
    clock.advance(Duration::from_secs(45));
    topic.try_publish("fresh")?;
    clock.advance(Duration::from_secs(30)); // the first two are now 75 s old, "fresh" 30 s

    let mut log = Vec::new();
    loop {
        match sub.try_recv() {
            Ok(m) => {
                let age = clock
                    .now()
                    .saturating_sub(m.timestamp().unwrap_or_default());
                println!(
                    "received {:?} (offset {}, {} s old)",
                    m.value(),
                    m.offset(),
                    age.as_secs()
                );
                log.push(format!("msg:{}", m.value()));
            }
            Err(TryRecvError::Lagged(n)) => {
                println!("{n} messages expired before they were read");
                log.push(format!("expired:{n}"));
            }
            Err(TryRecvError::Empty) => break,
            Err(e) => return Err(e.into()),
        }
    }
    let expired = topic.stats().expired;
    println!("topic stats: {expired} expired");

    // A late subscriber never sees expired messages at all.
    let mut late = topic.subscribe(StartAt::Earliest)?;
    let first = late.try_recv()?.into_value();
    topic.close();
    assert_eq!(late.recv_blocking().unwrap_err(), RecvError::Closed);

    if log != ["expired:2", "msg:fresh"] || expired != 2 || first != "fresh" {
        return Err(format!("unexpected: {log:?}, {expired} expired, late saw {first}").into());
    }
    println!("ok: expired messages skipped, reported once and counted");
    Ok(())
}
