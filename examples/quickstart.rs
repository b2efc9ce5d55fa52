//! The main job in one page: a broker with a topic, a publisher, an audit subscriber that
//! sees everything, and a group of two workers that share the work. Plain threads, no
//! runtime. Checks what it received and exits non-zero if anything is off.
//!
//! Run it with `cargo run --example quickstart`.

use std::collections::BTreeSet;
use std::thread;

use memq::{Broker, RecvError, StartAt, TopicConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let broker = Broker::<String>::new();
    let orders = broker.create("orders", TopicConfig::new(64))?;

    // Readers attach before publishing starts; with the default `Block` policy the
    // publisher waits for the slowest of them, so nothing is ever lost.
    let mut audit = orders.subscribe(StartAt::Earliest)?;
    let auditor = thread::spawn(move || -> Result<usize, RecvError> {
        let mut audited = 0;
        let mut buf = Vec::new();
        // `recv_many_blocking` returns 0 only once the topic is closed and drained.
        while audit.recv_many_blocking(&mut buf, 100)? > 0 {
            for msg in buf.drain(..) {
                assert_eq!(msg.value(), &format!("order-{}", msg.offset()));
                audited += 1;
            }
        }
        Ok(audited)
    });
    let workers: Vec<_> = (0..2)
        .map(|w| {
            let mut member = orders.group("billing", StartAt::Earliest)?;
            Ok(thread::spawn(move || {
                let mut handled = Vec::new();
                loop {
                    match member.recv_blocking() {
                        Ok(msg) => handled.push(msg.offset()),
                        Err(RecvError::Closed) => break,
                        Err(e) => panic!("worker {w}: {e}"),
                    }
                }
                println!("worker {w} handled {} orders", handled.len());
                handled
            }))
        })
        .collect::<Result<_, memq::Error>>()?;

    let publisher = {
        let orders = orders.clone();
        thread::spawn(move || {
            for n in 0..1000 {
                orders
                    .publish_blocking(format!("order-{n}"))
                    .expect("topic open");
            }
        })
    };
    publisher.join().expect("publisher");
    broker.delete("orders")?; // closes the topic: readers drain, then see Closed
    drop(orders);

    let audited = auditor.join().expect("auditor")?;
    let mut handled = BTreeSet::new();
    for w in workers {
        for offset in w.join().expect("worker") {
            assert!(handled.insert(offset), "order {offset} handled twice");
        }
    }
    println!(
        "audit saw {audited} orders; workers handled {} distinct orders",
        handled.len()
    );
    if audited != 1000 || handled.len() != 1000 {
        return Err("lost messages".into());
    }
    println!("ok: every order audited once and handled exactly once");
    Ok(())
}
