//! Basic publish/subscribe: one publisher, three subscribers that each see every message
//! in order, from their own position. Plain threads and the blocking API, no runtime.
//! Exits non-zero if any subscriber saw something else.
//!
//! Run it with `cargo run --example pubsub`.

use std::thread;

use memq::{RecvError, StartAt, Topic};

const N: u64 = 10_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 64 slots with the default `Block` policy: the publisher waits for the slowest
    // subscriber, so nothing is lost although the log is much smaller than the stream.
    let topic = Topic::<u64>::with_capacity(64)?;
    let readers: Vec<_> = (0..3)
        .map(|id| {
            let mut sub = topic.subscribe(StartAt::Earliest)?;
            Ok(thread::spawn(move || {
                let mut expected = 0;
                loop {
                    match sub.recv_blocking() {
                        Ok(msg) if msg.offset() == expected && *msg.value() == expected * 10 => {
                            expected += 1;
                        }
                        Ok(msg) => return Err(format!("subscriber {id}: unexpected {msg:?}")),
                        Err(RecvError::Closed) => return Ok(expected),
                        Err(e) => return Err(format!("subscriber {id}: {e}")),
                    }
                }
            }))
        })
        .collect::<Result<_, memq::Error>>()?;

    for n in 0..N {
        topic.publish_blocking(n * 10)?;
    }
    drop(topic); // the last publishing handle: subscribers drain, then see Closed

    for (id, r) in readers.into_iter().enumerate() {
        let seen = r.join().expect("subscriber thread")?;
        println!("subscriber {id} saw {seen} messages in order");
        if seen != N {
            return Err(format!("subscriber {id} saw {seen} of {N}").into());
        }
    }
    println!("ok: every subscriber saw all {N} messages, in order");
    Ok(())
}
