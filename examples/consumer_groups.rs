//! Consumer groups: members of one group share the work (each message goes to exactly
//! one member), while a second group sees the whole stream on its own. A member that
//! joins later resumes at the group's committed position. Exits non-zero if a message is
//! lost or handled twice.
//!
//! Run it with `cargo run --example consumer_groups`.

use std::collections::BTreeSet;
use std::thread;

use memq::{RecvError, StartAt, Topic};

const N: u64 = 5_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let topic = Topic::<u64>::with_capacity(128)?;
    let billing: Vec<_> = (0..3)
        .map(|_| topic.group("billing", StartAt::Earliest))
        .collect::<Result<_, _>>()?;
    let mut analytics = topic.group("analytics", StartAt::Earliest)?;

    let workers: Vec<_> = billing
        .into_iter()
        .map(|mut member| {
            thread::spawn(move || {
                let mut handled = Vec::new();
                loop {
                    match member.recv_blocking() {
                        Ok(msg) => handled.push(msg.into_value()),
                        Err(RecvError::Closed) => return handled,
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    let analyst = thread::spawn(move || {
        let mut seen = 0u64;
        while analytics.recv_blocking().is_ok() {
            seen += 1;
        }
        seen
    });

    for n in 0..N {
        topic.publish_blocking(n)?;
    }
    topic.close();

    let mut all = BTreeSet::new();
    for (i, w) in workers.into_iter().enumerate() {
        let handled = w.join().expect("worker");
        println!("billing member {i} handled {} messages", handled.len());
        for n in handled {
            if !all.insert(n) {
                return Err(format!("message {n} handled twice").into());
            }
        }
    }
    let seen = analyst.join().expect("analyst");
    println!("analytics (its own group) saw {seen} messages");
    if all.len() as u64 != N || seen != N {
        return Err("messages lost".into());
    }

    // A group outlives its members: a new member resumes where the group left off.
    let topic = Topic::<u64>::with_capacity(8)?;
    let mut first = topic.group("resume", StartAt::Earliest)?;
    for n in 0..4 {
        topic.try_publish(n)?;
    }
    assert_eq!(first.try_recv()?.into_value(), 0);
    assert_eq!(first.try_recv()?.into_value(), 1);
    drop(first);
    let mut later = topic.group("resume", StartAt::Earliest)?;
    let resumed = later.try_recv()?.into_value();
    println!("a member joining later resumed at {resumed}");
    if resumed != 2 {
        return Err("the group did not resume at its committed position".into());
    }
    println!("ok: each message handled exactly once; groups are independent; positions kept");
    Ok(())
}
