//! Loom models of the ring: every interleaving (up to `LOOM_MAX_PREEMPTIONS`) of small
//! rings, checked for lost or duplicated messages, reads of a slot being written, and
//! lost wake-ups (a thread parked forever shows as a loom deadlock).
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p memq-ring --test loom --release`.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;

use memq_ring::blocking::Parking;
use memq_ring::{Group, Reader, Ring, RingConfig, Start, TryRecvError};

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    // A wait on a mutex and condvar, with the fences around it, takes more steps than
    // loom's default allows an execution; none of the ring's loops spins unbounded (each
    // pauses, which loom schedules as a yield).
    b.max_branches = b.max_branches.max(20_000);
    b.check(f);
}

fn parking(capacity: usize) -> Arc<Ring<u32, Parking>> {
    Arc::new(Ring::with_waiters(RingConfig::new(capacity), Parking::default()).unwrap())
}

/// Two writers and two readers at capacity 2: each reader gets all four messages, each
/// writer's in its order, and writers wait for room and readers for messages.
#[test]
fn two_writers_two_readers_capacity_two() {
    model(|| {
        let ring = parking(2);
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let mut r = Reader::new(&ring, Start::Earliest).unwrap();
                thread::spawn(move || {
                    let mut got = Vec::new();
                    for want in 0..3u64 {
                        let (offset, v) = r.recv().unwrap();
                        assert_eq!(offset, want);
                        got.push(v);
                    }
                    got
                })
            })
            .collect();
        let w = {
            let ring = ring.clone();
            thread::spawn(move || {
                ring.publish(10).unwrap();
                ring.publish(11).unwrap();
            })
        };
        ring.publish(20).unwrap();
        w.join().unwrap();
        for r in readers {
            let got = r.join().unwrap();
            let mine: Vec<_> = got.iter().filter(|v| **v >= 10 && **v < 20).collect();
            assert_eq!(mine, [&10, &11]);
            assert!(got.contains(&20));
        }
    });
}

/// A writer overwriting the oldest message (no reader attached) races a reader that
/// attaches at `Earliest`: the reader reads whole messages at their offsets, never one
/// being overwritten (loom checks the cell's accesses), and the registration's spare
/// slot covers the claim that read the floor before it.
#[test]
fn registration_races_an_overwriting_writer() {
    model(|| {
        let ring: Arc<Ring<u32>> = Arc::new(Ring::new(RingConfig::new(1)).unwrap());
        ring.try_publish(0).unwrap();
        let w = {
            let ring = ring.clone();
            thread::spawn(move || {
                for n in 1..3 {
                    // With the reader attached the ring may be full: then it stops.
                    if ring.try_publish(n).is_err() {
                        break;
                    }
                }
            })
        };
        let mut r = Reader::new(&ring, Start::Earliest).unwrap();
        for _ in 0..2 {
            match r.try_recv() {
                Ok((offset, v)) => assert_eq!(u64::from(v), offset),
                Err(_) => {}
            }
        }
        w.join().unwrap();
    });
}

/// A group of two members on a ring of capacity 2 fed three messages: each message to
/// exactly one member, and nobody parked forever.
#[test]
fn group_members_claim_each_message_once() {
    model(|| {
        let ring = parking(2);
        let group = Group::new(&ring, Start::Earliest).unwrap();
        let members: Vec<_> = (0..2)
            .map(|_| {
                let mut m = group.member().unwrap();
                thread::spawn(move || {
                    let mut got = Vec::new();
                    loop {
                        match m.recv() {
                            Ok((_, v)) => got.push(v),
                            Err(e) => {
                                assert_eq!(e, TryRecvError::Closed);
                                return got;
                            }
                        }
                    }
                })
            })
            .collect();
        drop(group);
        for n in 0..2 {
            ring.publish(n).unwrap();
        }
        ring.close();
        let mut all: Vec<u32> = members
            .into_iter()
            .flat_map(|m| m.join().unwrap())
            .collect();
        all.sort_unstable();
        assert_eq!(all, [0, 1]);
    });
}

/// Park and wake at full and at empty: a writer three messages ahead of a reader on a
/// ring of one slot waits for room, the reader waits for messages; both finish.
#[test]
fn park_and_wake_at_full_and_empty() {
    model(|| {
        let ring = parking(1);
        let mut r = Reader::new(&ring, Start::Earliest).unwrap();
        let reader = thread::spawn(move || {
            for want in 0..3u64 {
                assert_eq!(r.recv().unwrap(), (want, want as u32));
            }
        });
        for n in 0..3 {
            ring.publish(n).unwrap();
        }
        reader.join().unwrap();
    });
}
