//! The ring's behaviour on real threads: every message counted (none lost, none
//! duplicated, each reader in order), registrations racing writers, values dropped
//! exactly once, and errors. Sizes shrink under miri, which runs these too.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use memq_ring::blocking::Parking;
use memq_ring::{Group, Reader, Ring, RingConfig, RingError, Start, TryPublishError, TryRecvError};

const N: u64 = if cfg!(miri) { 60 } else { 200_000 };
const STOP: u64 = u64::MAX;

fn parking_ring(capacity: usize) -> Arc<Ring<u64, Parking>> {
    Arc::new(Ring::with_waiters(RingConfig::new(capacity), Parking::default()).unwrap())
}

fn parking_ring_of<T>(capacity: usize) -> Arc<Ring<T, Parking>> {
    Arc::new(Ring::with_waiters(RingConfig::new(capacity), Parking::default()).unwrap())
}

fn taking_ring<T>(capacity: usize) -> Arc<Ring<T, Parking>> {
    let config = RingConfig {
        take: true,
        ..RingConfig::new(capacity)
    };
    Arc::new(Ring::with_waiters(config, Parking::default()).unwrap())
}

#[test]
fn one_writer_one_reader_every_message_in_order() {
    let ring = parking_ring(8);
    let mut reader = Reader::new(&ring, Start::Earliest).unwrap();
    let r = thread::spawn(move || {
        for want in 0..N {
            assert_eq!(reader.recv(), Ok((want, want * 3)));
        }
    });
    for n in 0..N {
        assert_eq!(ring.publish(n * 3).unwrap().offset, n);
    }
    r.join().unwrap();
}

/// Four writers, two broadcast readers, and a group of three members, on a small ring:
/// each reader gets every message once, in each writer's order; the group gets every
/// message exactly once across its members.
#[test]
fn writers_readers_and_a_group_count_every_message() {
    const WRITERS: u64 = 4;
    const MEMBERS: usize = 3;
    let per = N / WRITERS;
    let total = per * WRITERS;
    let ring = parking_ring(16);
    let mut readers = Vec::new();
    for _ in 0..2 {
        let mut reader = Reader::new(&ring, Start::Earliest).unwrap();
        readers.push(thread::spawn(move || {
            let mut next = [0u64; WRITERS as usize];
            let mut got = 0;
            let mut last_offset = None;
            while got < total {
                let (offset, v) = reader.recv().unwrap();
                assert_eq!(last_offset.map_or(0, |o: u64| o + 1), offset);
                last_offset = Some(offset);
                let (w, seq) = ((v >> 32) as usize, v & 0xffff_ffff);
                assert_eq!(next[w], seq, "writer {w}'s messages in order");
                next[w] += 1;
                got += 1;
            }
        }));
    }
    let group = Group::new(&ring, Start::Earliest).unwrap();
    let seen: Arc<Vec<AtomicUsize>> = Arc::new((0..total).map(|_| AtomicUsize::new(0)).collect());
    let mut members = Vec::new();
    for _ in 0..MEMBERS {
        let mut m = group.member().unwrap();
        let seen = seen.clone();
        members.push(thread::spawn(move || {
            let mut got = 0u64;
            loop {
                let (_, v) = m.recv().unwrap();
                if v == STOP {
                    return got;
                }
                let (w, seq) = (v >> 32, v & 0xffff_ffff);
                seen[(w * per + seq) as usize].fetch_add(1, Ordering::Relaxed);
                got += 1;
            }
        }));
    }
    drop(group);
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let ring = ring.clone();
            thread::spawn(move || {
                for seq in 0..per {
                    ring.publish((w << 32) | seq).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    for _ in 0..MEMBERS {
        ring.publish(STOP).unwrap();
    }
    let got: u64 = members.into_iter().map(|m| m.join().unwrap()).sum();
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(got, total);
    assert!(
        seen.iter().all(|n| n.load(Ordering::Relaxed) == 1),
        "each message once"
    );
}

/// With no reader attached the writer overwrites the oldest message; readers attach at
/// `Earliest` (and seek back) while it does, and every message they read is whole and
/// at the offset it was published at.
#[test]
fn readers_attaching_while_a_writer_overwrites_read_whole_messages() {
    let ring: Arc<Ring<Arc<u64>>> = Arc::new(Ring::new(RingConfig::new(4)).unwrap());
    let done = Arc::new(AtomicUsize::new(0));
    let published = Arc::new(AtomicUsize::new(0));
    let w = {
        let (ring, done, published) = (ring.clone(), done.clone(), published.clone());
        thread::spawn(move || {
            let mut n = 0u64;
            while done.load(Ordering::Relaxed) == 0 {
                if ring.try_publish(Arc::new(n)).is_ok() {
                    n += 1;
                    published.store(n as usize, Ordering::Release);
                }
                if n.is_multiple_of(64) {
                    thread::yield_now();
                }
            }
        })
    };
    // Once a lap is published, a reader attached at `Earliest` finds a message at once
    // (the writer cannot overwrite what it holds), however slowly the writer runs.
    while published.load(Ordering::Acquire) < 8 {
        thread::yield_now();
    }
    let rounds = if cfg!(miri) { 20 } else { 20_000 };
    let mut read = 0;
    for round in 0..rounds {
        let mut reader = Reader::new(&ring, Start::Earliest).unwrap();
        if round % 3 == 0 {
            let back = reader.position().saturating_sub(2);
            reader.seek(Start::Offset(back)).unwrap();
        }
        for _ in 0..3 {
            match reader.try_recv() {
                Ok((offset, v)) => {
                    assert_eq!(*v, offset);
                    read += 1;
                }
                Err(TryRecvError::Empty | TryRecvError::Closed) => break,
                Err(TryRecvError::Lagged(_)) => {}
            }
        }
    }
    done.store(1, Ordering::Relaxed);
    w.join().unwrap();
    assert!(
        read >= rounds,
        "each round reads at least its first message"
    );
}

/// Every value published is dropped exactly once: evicted ones by the publisher,
/// the rest by the ring; and the ring keeps exactly `capacity` values alive, with or
/// without a reader, as memq's topics do (not one more for its spare slot).
#[test]
fn every_value_is_dropped_once() {
    let token = Arc::new(());
    {
        let ring = Arc::new(Ring::<Arc<()>>::new(RingConfig::new(3)).unwrap());
        for n in 0..10 {
            let p = ring.try_publish(token.clone()).unwrap();
            assert_eq!(p.evicted.is_some(), n >= 3, "publish {n}");
            drop(p.evicted);
            assert_eq!(Arc::strong_count(&token), 1 + (n as usize + 1).min(3));
        }
        let mut r = Reader::new(&ring, Start::Earliest).unwrap();
        assert_eq!(r.try_recv().map(|(o, _)| o), Ok(7));
        drop(ring.try_publish(token.clone()).unwrap().evicted);
        assert_eq!(Arc::strong_count(&token), 1 + 3);
        assert!(
            ring.try_publish(token.clone()).is_err(),
            "the reader holds 8"
        );
        assert_eq!(Arc::strong_count(&token), 1 + 3);
    }
    assert_eq!(Arc::strong_count(&token), 1);
}

/// A batch's evicted values come back in the batch's own buffer, oldest first, each
/// value dropped once (miri checks the moves), in a ring that keeps values and in one
/// that drops the oldest, with an `evicted` vector that is empty (it takes the batch's
/// buffer) and one that is not (they are appended).
#[test]
fn a_batch_hands_back_what_it_evicts_in_its_own_buffer() {
    for drop_oldest in [false, true] {
        let token = Arc::new(());
        {
            let ring = Arc::new(
                Ring::<(u64, Arc<()>)>::new(RingConfig {
                    drop_oldest,
                    ..RingConfig::new(4)
                })
                .unwrap(),
            );
            let mut r = Reader::new(&ring, Start::Earliest).unwrap();
            let mut next = 0;
            for round in 0..6u64 {
                let mut batch: Vec<_> = (0..3).map(|i| (round * 3 + i, token.clone())).collect();
                let buffer = batch.as_ptr();
                let mut evicted = if round % 2 == 0 {
                    Vec::new()
                } else {
                    vec![(u64::MAX, token.clone())]
                };
                let kept = evicted.len();
                ring.try_publish_batch(&mut batch, &mut evicted).unwrap();
                assert!(batch.is_empty());
                let old: Vec<u64> = evicted[kept..].iter().map(|(n, _)| *n).collect();
                // Offsets older than the last 4 are evicted, oldest first.
                let end = round * 3 + 3;
                let want: Vec<u64> = (next..end.saturating_sub(4)).collect();
                assert_eq!(old, want, "round {round}");
                next = next.max(end.saturating_sub(4));
                if kept == 0 && !old.is_empty() {
                    assert_eq!(evicted.as_ptr(), buffer, "the batch's own buffer");
                }
                drop(evicted);
                while let Ok((o, (n, _))) = r.try_recv() {
                    assert_eq!(o, n);
                }
                // The ring keeps the last 4 values.
                assert_eq!(Arc::strong_count(&token), 1 + end.min(4) as usize);
            }
        }
        assert_eq!(Arc::strong_count(&token), 1);
    }
}

/// A value whose clone panics once: the member's hazard is cleared, so writers go on,
/// and the message is not lost: the group's next receive gets it.
#[test]
fn a_panicking_clone_in_a_member_loses_nothing_and_holds_no_writer_back() {
    #[derive(Debug)]
    struct Bomb(Arc<AtomicUsize>);
    impl Clone for Bomb {
        fn clone(&self) -> Self {
            assert!(self.0.fetch_sub(1, Ordering::Relaxed) != 1, "boom");
            Bomb(self.0.clone())
        }
    }
    let fuse = Arc::new(AtomicUsize::new(usize::MAX));
    let ring = Arc::new(Ring::new(RingConfig::new(2)).unwrap());
    let group = Group::new(&ring, Start::Earliest).unwrap();
    let mut m = group.member().unwrap();
    let mut other = group.member().unwrap();
    ring.try_publish(Bomb(fuse.clone())).unwrap();
    ring.try_publish(Bomb(fuse.clone())).unwrap();
    fuse.store(1, Ordering::Relaxed);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| m.try_recv()));
    assert!(r.is_err());
    assert_eq!(group.position(), 0, "a clone that panicked claimed nothing");
    assert_eq!(other.try_recv().unwrap().0, 0);
    assert_eq!(m.try_recv().unwrap().0, 1);
    // The group is past both: two more fit, a third does not.
    ring.try_publish(Bomb(fuse.clone())).unwrap();
    ring.try_publish(Bomb(fuse.clone())).unwrap();
    assert!(ring.try_publish(Bomb(fuse.clone())).is_err());
}

#[test]
fn bad_sizes_and_positions_are_errors() {
    assert_eq!(
        Ring::<u8>::new(RingConfig::new(0)).err(),
        Some(RingError::ZeroCapacity)
    );
    assert_eq!(
        Ring::<u8>::new(RingConfig::new(usize::MAX)).err(),
        Some(RingError::CapacityTooLarge)
    );
    let ring = Arc::new(
        Ring::<u8>::new(RingConfig {
            capacity: 2,
            readers: 1,
            groups: 0,
            take: false,
            drop_oldest: false,
            first_offset: 0,
        })
        .unwrap(),
    );
    assert_eq!(
        Reader::new(&ring, Start::Offset(1)).err(),
        Some(RingError::PastEnd { asked: 1, end: 0 })
    );
    for n in 0..5 {
        ring.try_publish(n).unwrap();
    }
    // Offsets 0..=2 are gone: the reader starts at 3 and is told.
    let mut r = Reader::new(&ring, Start::Offset(0)).unwrap();
    assert_eq!(r.try_recv(), Err(TryRecvError::Lagged(3)));
    assert_eq!(r.try_recv(), Ok((3, 3)));
    assert_eq!(r.try_recv(), Ok((4, 4)));
    assert_eq!(r.try_recv(), Err(TryRecvError::Empty));
}

/// Closing: publishes fail and give the value back, readers and members receive what
/// was published and then `Closed`, and waiting ones are woken.
#[test]
fn close_ends_readers_after_what_was_published() {
    let ring = parking_ring(4);
    let mut r = Reader::new(&ring, Start::Earliest).unwrap();
    let group = Group::new(&ring, Start::Earliest).unwrap();
    let mut m = group.member().unwrap();
    let mut idle = group.member().unwrap();
    let waiting = thread::spawn(move || idle.recv());
    let waiting_reader = {
        let mut r2 = Reader::new(&ring, Start::Latest).unwrap();
        thread::spawn(move || r2.recv())
    };
    ring.publish(1).unwrap();
    ring.close();
    assert!(ring.is_closed());
    assert_eq!(ring.publish(2).err(), Some(2));
    assert_eq!(r.recv(), Ok((0, 1)));
    assert_eq!(r.recv(), Err(TryRecvError::Closed));
    let first = waiting.join().unwrap();
    let mine = m.recv();
    // One of the two members got the message; both then see the ring closed.
    assert!(matches!(
        (first, mine),
        (Ok((0, 1)), Err(TryRecvError::Closed)) | (Err(TryRecvError::Closed), Ok((0, 1)))
    ));
    assert_eq!(waiting_reader.join().unwrap(), Ok((0, 1)));
    assert_eq!(m.recv(), Err(TryRecvError::Closed));
}

/// A writer waiting for room gives up at its deadline; a reader too.
#[test]
fn deadlines_end_waits() {
    use std::time::{Duration, Instant};
    let ring = parking_ring(1);
    let mut r = Reader::new(&ring, Start::Earliest).unwrap();
    ring.publish(7).unwrap();
    let soon = Instant::now() + Duration::from_millis(20);
    assert!(matches!(
        ring.publish_deadline(8, soon),
        Err(memq_ring::TryPublishError::Full(8))
    ));
    assert_eq!(r.recv_deadline(soon), Ok((0, 7)));
    let soon = Instant::now() + Duration::from_millis(20);
    assert_eq!(r.recv_deadline(soon), Err(TryRecvError::Empty));
}

/// A writer parked on a full ring waits for `capacity / 16` free slots (as memq's topics),
/// and is woken as soon as the readers holding it back reach that position, even when
/// they then stop (their users busy elsewhere): readers and group members compare their
/// position with the writers' wake position after every message. Two readers, then a
/// reader and a member, each stopping at the wake position (no multiple of the batch);
/// the publish must end while they stay attached and idle. The bound on the wait is a
/// liveness bound, minutes away from the microseconds it takes.
#[test]
fn readers_and_members_that_stop_at_the_wake_position_wake_parked_writers() {
    const CAP: usize = if cfg!(miri) { 40 } else { 1024 };
    let ring = parking_ring(CAP);
    let mut a = Reader::new(&ring, Start::Earliest).unwrap();
    let mut b = Reader::new(&ring, Start::Earliest).unwrap();
    writers_woken_by(&ring, CAP, || a.try_recv(), || b.try_recv());
    let ring = parking_ring(CAP);
    let mut a = Reader::new(&ring, Start::Earliest).unwrap();
    let group = Group::new(&ring, Start::Earliest).unwrap();
    let mut m = group.member().unwrap();
    writers_woken_by(&ring, CAP, || a.try_recv(), || m.try_recv());
}

/// Fills `ring` (of `cap` messages, values equal to offsets) past one message both
/// readers took, parks a writer, lets each reader take `cap / 16` more (reaching the
/// writer's wake position together) and waits for the writer to get through.
fn writers_woken_by(
    ring: &Arc<Ring<u64, Parking>>,
    cap: usize,
    mut a: impl FnMut() -> Result<(u64, u64), TryRecvError>,
    mut b: impl FnMut() -> Result<(u64, u64), TryRecvError>,
) {
    use std::sync::mpsc;
    use std::time::Duration;
    let batch = (cap as u64 / 16).clamp(1, 64);
    for n in 0..cap as u64 {
        ring.try_publish(n).unwrap();
    }
    assert_eq!(a(), Ok((0, 0)));
    assert_eq!(b(), Ok((0, 0)));
    ring.try_publish(cap as u64).unwrap();
    let (done, finished) = mpsc::channel();
    let writer = {
        let ring = ring.clone();
        thread::spawn(move || {
            let published = ring.publish(cap as u64 + 1).unwrap().offset;
            done.send(published).unwrap();
        })
    };
    while !ring.writers_wait() {
        thread::sleep(Duration::from_millis(1));
    }
    // The writer needs the floor at `batch + 1`; each reader stops there.
    for n in 1..=batch {
        assert_eq!(a(), Ok((n, n)));
    }
    assert!(
        finished.try_recv().is_err(),
        "woken before its room was free"
    );
    for n in 1..=batch {
        assert_eq!(b(), Ok((n, n)));
    }
    let published = finished
        .recv_timeout(Duration::from_secs(600))
        .expect("the writer was never woken");
    assert_eq!(published, cap as u64 + 1);
    writer.join().unwrap();
}

/// What a front above the ring asks of it besides messages: the oldest offset held
/// (`first`), whether a publish of `n` would fit now (`has_room`), and how many messages a
/// group or a hold missed when it was made at an offset already gone (`missed`, which
/// memq reports as lagged).
#[test]
fn first_room_and_missed_starts_are_told() {
    let ring = parking_ring(4);
    assert_eq!(ring.first(), 0);
    assert!(ring.has_room(4));
    for n in 0..10 {
        ring.try_publish(n).unwrap();
    }
    // Nobody read: the oldest six went to make room, four are held.
    assert_eq!((ring.first(), ring.end()), (6, 10));
    let group = Group::new(&ring, Start::Offset(2)).unwrap();
    assert_eq!((group.position(), group.missed()), (6, 4));
    let hold = memq_ring::Hold::new(&ring, Start::Offset(5)).unwrap();
    assert_eq!((hold.position(), hold.missed()), (6, 1));
    drop(hold);
    assert_eq!(Group::new(&ring, Start::Offset(7)).unwrap().missed(), 0);
    assert_eq!(Group::new(&ring, Start::Latest).unwrap().missed(), 0);
    // The group holds offset 6 on: the ring is full for one message, and a batch larger
    // than the ring is said to have room (its publish fails at once).
    assert!(!ring.has_room(1));
    assert!(ring.has_room(5));
    let mut m = group.member().unwrap();
    assert_eq!(m.try_recv(), Ok((6, 6)));
    assert!(ring.has_room(1));
    assert!(!ring.has_room(2));
    ring.close();
    assert!(ring.has_room(2));

    // A ring from a first offset of its own, and one that drops the oldest.
    let config = RingConfig {
        first_offset: 1 << 40,
        ..RingConfig::new(4)
    };
    let ring: Arc<Ring<u64>> = Arc::new(Ring::new(config).unwrap());
    assert_eq!(ring.first(), 1 << 40);
    ring.try_publish(1).unwrap();
    assert_eq!(ring.first(), 1 << 40);
    let config = RingConfig {
        drop_oldest: true,
        ..RingConfig::new(2)
    };
    let ring: Arc<Ring<u64>> = Arc::new(Ring::new(config).unwrap());
    let _r = Reader::new(&ring, Start::Earliest).unwrap();
    for n in 0..5 {
        ring.try_publish(n).unwrap();
    }
    assert_eq!(ring.first(), 3);
    assert!(ring.has_room(1));
}

/// A hold's reader announces that it waits for an offset, as a reader does: it may
/// sleep while that offset is not published and the ring is open.
#[test]
fn a_hold_announces_a_wait_for_an_offset() {
    let ring = parking_ring(4);
    let hold = memq_ring::Hold::new(&ring, Start::Earliest).unwrap();
    assert!(hold.prepare_wait(0));
    ring.try_publish(7).unwrap();
    assert!(!hold.prepare_wait(0));
    assert!(hold.prepare_wait(1));
    ring.close();
    assert!(!hold.prepare_wait(1));
}

/// `Member::try_recv_if`: the predicate is asked once, on the message in the ring; a
/// declined message stays the group's next, for any member; a predicate that panics
/// leaves it there too; in a taking ring an accepted message is moved out.
#[test]
fn a_member_takes_a_message_only_if_its_predicate_accepts_it() {
    let ring = parking_ring(4);
    let group = Group::new(&ring, Start::Earliest).unwrap();
    let (mut a, mut b) = (group.member().unwrap(), group.member().unwrap());
    for n in [10, 11, 12] {
        ring.try_publish(n).unwrap();
    }
    let mut asked = 0;
    let declined = a.try_recv_if(|v| {
        asked += 1;
        *v == 11
    });
    assert_eq!((declined, asked), (Ok(None), 1));
    assert_eq!(group.position(), 0);
    assert_eq!(b.try_recv_if(|v| *v == 10), Ok(Some((0, 10))));
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = a.try_recv_if(|_| panic!("a predicate that panics"));
    }));
    assert!(panicked.is_err());
    assert_eq!(group.position(), 1);
    assert_eq!(a.try_recv(), Ok((1, 11)));
    assert_eq!(b.try_recv_if(|_| true), Ok(Some((2, 12))));
    assert_eq!(a.try_recv_if(|_| true), Err(TryRecvError::Empty));
    ring.close();
    assert_eq!(a.try_recv_if(|_| true), Err(TryRecvError::Closed));

    let ring = taking_ring::<Arc<u64>>(2);
    let group = Group::new(&ring, Start::Earliest).unwrap();
    let mut m = group.member().unwrap();
    let value = Arc::new(5);
    ring.try_publish(value.clone()).unwrap();
    assert_eq!(m.try_recv_if(|v| **v == 6), Ok(None));
    assert_eq!(
        Arc::strong_count(&value),
        2,
        "declined: still in the ring, not cloned"
    );
    let (offset, got) = m.try_recv_if(|v| **v == 5).unwrap().unwrap();
    assert_eq!(offset, 0);
    drop(got);
    assert_eq!(Arc::strong_count(&value), 1, "moved out, not cloned");
}

/// A detached group (memq deletes a group whose members live on) holds no writer back,
/// its members' receives end, even one whose predicate is being asked when it happens
/// (it keeps what it took), and a parked writer and a parked member are woken.
#[test]
fn a_detached_group_holds_nothing_back_and_ends_its_members() {
    let ring = parking_ring(2);
    let group = Group::new(&ring, Start::Earliest).unwrap();
    let (mut a, mut b) = (group.member().unwrap(), group.member().unwrap());
    for n in 0..2 {
        ring.try_publish(n).unwrap();
    }
    assert!(matches!(ring.try_publish(2), Err(TryPublishError::Full(2))));
    let taken = a.try_recv_if(|v| {
        group.detach();
        *v == 0
    });
    assert_eq!(taken, Ok(Some((0, 0))));
    assert!(group.is_detached());
    assert_eq!(group.position(), 1, "where the group stopped");
    assert_eq!(a.try_recv(), Err(TryRecvError::Closed));
    assert_eq!(b.try_recv_if(|_| true), Err(TryRecvError::Closed));
    assert!(
        !b.prepare_wait(),
        "a member of a detached group never sleeps"
    );
    assert_eq!(
        group.member().unwrap().try_recv(),
        Err(TryRecvError::Closed)
    );
    ring.try_publish(2).unwrap();
    ring.try_publish(3).unwrap();
    group.detach();

    // On a ring of one: a writer waiting behind a group that never reads, and a member
    // waiting for a message (parked, or about to park: either way it must end).
    let ring = parking_ring(1);
    let slow = Group::new(&ring, Start::Earliest).unwrap();
    let _never_reads = slow.member().unwrap();
    ring.try_publish(0).unwrap();
    let writer = {
        let ring = ring.clone();
        thread::spawn(move || ring.publish(1).unwrap().offset)
    };
    slow.detach();
    assert_eq!(writer.join().unwrap(), 1);
    let idle = Group::new(&ring, Start::Latest).unwrap();
    let mut member = idle.member().unwrap();
    let parked = thread::spawn(move || member.recv());
    idle.detach();
    assert_eq!(parked.join().unwrap(), Err(TryRecvError::Closed));
}

/// A reader that clones ahead of its position keeps holding writers back until it hands
/// the messages over, hands them over in order as its receives, and lets go of them
/// (each value dropped once) on a seek or when it drops. Rings that drop the oldest or
/// move messages out read nothing ahead.
#[test]
fn a_reader_reads_ahead_without_moving_its_position() {
    let ring = parking_ring_of::<Arc<u64>>(4);
    let values: Vec<Arc<u64>> = (0..6).map(Arc::new).collect();
    let mut r = Reader::new(&ring, Start::Earliest).unwrap();
    for v in &values[..4] {
        ring.try_publish(v.clone()).unwrap();
    }
    assert_eq!(r.read_ahead(10), 4);
    assert_eq!((r.ahead(), r.position()), (4, 0));
    assert!(matches!(
        ring.try_publish(values[4].clone()),
        Err(TryPublishError::Full(_))
    ));
    let (offset, got) = r.try_recv().unwrap();
    assert_eq!((offset, *got), (0, 0));
    drop(got);
    assert_eq!(r.position(), 1);
    ring.try_publish(values[4].clone()).unwrap();
    assert_eq!(r.read_ahead(10), 1, "only what was published since");
    assert_eq!(r.read_ahead(10), 0);
    for n in 1..5 {
        assert_eq!(*r.try_recv().unwrap().1, n);
    }
    assert_eq!(r.try_recv().unwrap_err(), TryRecvError::Empty);
    ring.try_publish(values[5].clone()).unwrap();
    assert_eq!(r.read_ahead(1), 1);
    assert!(
        !r.prepare_wait(),
        "a reader holding messages does not sleep"
    );
    r.seek(Start::Offset(3)).unwrap();
    assert_eq!(r.ahead(), 0);
    assert_eq!(r.read_ahead(10), 3);
    drop(r);
    drop(ring);
    assert!(
        values.iter().all(|v| Arc::strong_count(v) == 1),
        "each clone dropped once"
    );

    let dropping = Arc::new(
        Ring::new(RingConfig {
            drop_oldest: true,
            ..RingConfig::new(2)
        })
        .unwrap(),
    );
    let mut r = Reader::new(&dropping, Start::Earliest).unwrap();
    dropping.try_publish(1u8).unwrap();
    assert_eq!(r.read_ahead(4), 0);
    assert_eq!(r.try_recv(), Ok((0, 1)));
}

/// `free_slots` counts what the slowest reader left free; a front that keeps writers in
/// line is told the room when it is woken, and may announce the first one's need again.
#[test]
fn the_room_is_counted_for_a_front_that_keeps_writers_in_line() {
    /// Records the free slots at each wake-up, and whether the first writer left
    /// waiting (it needs 3 slots) still had to wait when announced again.
    #[derive(Default)]
    struct Line {
        woken: std::sync::Mutex<Vec<(u64, bool)>>,
    }
    impl memq_ring::Waiters for Line {
        fn wake_readers(&self, _: memq_ring::Rearm<'_>) {}
        fn wake_writers(&self, room: memq_ring::Room<'_>) {
            let free = room.free();
            let waits = room.wait_for(3);
            self.woken.lock().unwrap().push((free, waits));
        }
    }
    let ring = Arc::new(Ring::with_waiters(RingConfig::new(4), Line::default()).unwrap());
    assert_eq!(ring.free_slots(), 4);
    let mut r = Reader::new(&ring, Start::Earliest).unwrap();
    for n in 0..4 {
        ring.try_publish(n).unwrap();
    }
    assert_eq!(ring.free_slots(), 0);
    assert!(ring.prepare_publisher_wait());
    assert!(ring.writers_wait());
    assert_eq!(r.try_recv(), Ok((0, 0)));
    assert_eq!(*ring.waiters().woken.lock().unwrap(), [(1, true)]);
    assert!(
        ring.writers_wait(),
        "the front announced its first writer again"
    );
    assert_eq!(r.try_recv(), Ok((1, 1)));
    assert_eq!(ring.free_slots(), 2);
    assert_eq!(ring.waiters().woken.lock().unwrap().len(), 1);
    assert_eq!(r.try_recv(), Ok((2, 2)));
    // Its 3 slots are free: announced, it is told so (the front then wakes it).
    assert_eq!(
        *ring.waiters().woken.lock().unwrap(),
        [(1, true), (3, false)]
    );
    let dropping = Ring::<u8>::new(RingConfig {
        drop_oldest: true,
        ..RingConfig::new(3)
    })
    .unwrap();
    assert_eq!(dropping.free_slots(), 3);
}

/// A front that counts the times the ring wakes its writers, for tests that drive the
/// wait protocol by hand.
#[derive(Default)]
struct CountWakes(AtomicUsize);

impl memq_ring::Waiters for CountWakes {
    fn wake_readers(&self, _: memq_ring::Rearm<'_>) {}
    fn wake_writers(&self, _: memq_ring::Room<'_>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A wake position lower than what the waiting writer needs (left by a writer that
/// announced and then found room) does not hide the wake-up the writer does need: the
/// reader that reaches the writer's real need wakes it, though it woke writers for that
/// same wake position before. Driven step by step on one thread (the calls a blocking
/// front makes), so every step is checked.
#[test]
fn a_stale_wake_position_never_hides_a_needed_wake_up() {
    let ring = Arc::new(Ring::with_waiters(RingConfig::new(2), CountWakes::default()).unwrap());
    let wakes = || ring.waiters().0.load(Ordering::SeqCst);
    let mut b = Reader::new(&ring, Start::Earliest).unwrap();
    ring.try_publish(0).unwrap();
    ring.try_publish(1).unwrap();
    // Writer W finds the ring full and waits for offset 0 to be read (wake position 1).
    assert!(ring.try_publish(2).is_err());
    assert!(ring.prepare_publisher_wait());
    assert_eq!(b.try_recv(), Ok((0, 0)));
    assert_eq!(wakes(), 1);
    // Writer X announces the same wake position, then finds the room and does not wait.
    assert!(!ring.prepare_publisher_wait());
    // W, woken, takes the room; X finds the ring full and waits for position 2; the wake
    // position stays 1, the lower of the two.
    assert_eq!(ring.try_publish(2).unwrap().offset, 2);
    assert!(ring.try_publish(3).is_err());
    assert!(ring.prepare_publisher_wait());
    // The reader reaches 2 and stops: X's room is free, and X is woken.
    assert_eq!(b.try_recv(), Ok((1, 1)));
    assert_eq!(wakes(), 2, "the writer was left waiting with its room free");
    assert!(!ring.writers_wait());
}

/// A taking ring (a queue): one reader, values moved out, not cloned; each value is
/// dropped exactly once, whether received, evicted or left in the ring.
#[test]
fn a_taking_reader_moves_values_out_and_each_is_dropped_once() {
    let token = Arc::new(());
    {
        let ring = taking_ring::<(u64, Arc<()>)>(8);
        let mut reader = Reader::new(&ring, Start::Earliest).unwrap();
        assert_eq!(
            Reader::new(&ring, Start::Earliest).err(),
            Some(RingError::OneReaderOnly)
        );
        assert_eq!(
            Group::new(&ring, Start::Earliest).err(),
            Some(RingError::OneReaderOnly)
        );
        let r = thread::spawn(move || {
            for want in 0..N {
                let (offset, (n, t)) = reader.recv().unwrap();
                assert_eq!((offset, n), (want, want));
                drop(t);
            }
        });
        for n in 0..N {
            drop(ring.publish((n, token.clone())).unwrap().evicted);
        }
        r.join().unwrap();
        // The reader is gone: a new one may attach; the ring keeps taking.
        for n in N..N + 5 {
            drop(ring.publish((n, token.clone())).unwrap().evicted);
        }
        let mut again = Reader::new(&ring, Start::Earliest).unwrap();
        assert_eq!(again.try_recv().unwrap().0, N);
        assert!(
            Arc::strong_count(&token) > 1,
            "what is left in the ring is held"
        );
    }
    assert_eq!(Arc::strong_count(&token), 1);
}

/// A taking ring read by a group of three members, four writers: each message to
/// exactly one member, moved out.
#[test]
fn a_taking_group_gets_every_message_once() {
    const WRITERS: u64 = 4;
    let per = N / WRITERS;
    let ring = taking_ring::<u64>(16);
    let group = Group::new(&ring, Start::Earliest).unwrap();
    let seen: Arc<Vec<AtomicUsize>> =
        Arc::new((0..per * WRITERS).map(|_| AtomicUsize::new(0)).collect());
    let members: Vec<_> = (0..3)
        .map(|_| {
            let mut m = group.member().unwrap();
            let seen = seen.clone();
            thread::spawn(move || {
                while let Ok((_, v)) = m.recv() {
                    seen[v as usize].fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    drop(group);
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let ring = ring.clone();
            thread::spawn(move || {
                for seq in 0..per {
                    ring.publish(w * per + seq).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    ring.close();
    for m in members {
        m.join().unwrap();
    }
    assert!(
        seen.iter().all(|n| n.load(Ordering::Relaxed) == 1),
        "each message once"
    );
}

/// Batches take consecutive offsets, all or none: one that does not fit (or could never
/// fit) leaves its values with the caller; an empty one is the ring's end.
#[test]
fn batches_are_all_or_nothing() {
    let ring = parking_ring(8);
    let mut r = Reader::new(&ring, Start::Earliest).unwrap();
    let mut batch: Vec<u64> = (0..5).collect();
    assert_eq!(ring.try_publish_batch(&mut batch, &mut Vec::new()), Ok(0));
    assert!(batch.is_empty());
    batch.extend(5..9);
    assert_eq!(
        ring.try_publish_batch(&mut batch, &mut Vec::new()),
        Err(TryPublishError::Full(()))
    );
    assert_eq!(
        batch,
        [5, 6, 7, 8],
        "a batch that did not fit is left as it was"
    );
    assert_eq!(r.try_recv(), Ok((0, 0)));
    assert_eq!(r.try_recv(), Ok((1, 1)));
    assert_eq!(ring.try_publish_batch(&mut batch, &mut Vec::new()), Ok(5));
    let mut too_big: Vec<u64> = (0..9).collect();
    assert_eq!(
        ring.publish_batch(&mut too_big, &mut Vec::new()),
        Err(TryPublishError::Full(())),
        "a batch larger than the ring fails at once rather than wait"
    );
    assert_eq!(too_big.len(), 9);
    assert_eq!(
        ring.try_publish_batch(&mut Vec::new(), &mut Vec::new()),
        Ok(9)
    );
    for want in 2..9 {
        assert_eq!(r.try_recv(), Ok((want, want)));
    }
    // With no reader left, a batch overwrites the oldest and hands them back.
    drop(r);
    let mut evicted = Vec::new();
    let mut batch: Vec<u64> = (100..104).collect();
    assert_eq!(ring.try_publish_batch(&mut batch, &mut evicted), Ok(9));
    // Offset 0 left the ring when 8 was published (to that batch's `evicted`).
    assert_eq!(evicted, [1, 2, 3, 4]);
    ring.close();
    let mut batch = vec![1, 2];
    assert_eq!(
        ring.try_publish_batch(&mut batch, &mut Vec::new()),
        Err(TryPublishError::Closed(()))
    );
    assert_eq!(batch, [1, 2]);
}

/// Three writers publish batches of 1 to 7 messages (waiting for room) while two readers
/// read and readers attach and seek back: each reader gets every message once, and each
/// batch at consecutive offsets.
#[test]
fn concurrent_batches_take_consecutive_offsets() {
    const WRITERS: u64 = 3;
    // value = writer << 48 | batch << 8 | index << 4 | len
    let batches_per_writer: u64 = if cfg!(miri) { 4 } else { 4_000 };
    let ring = parking_ring(16);
    let mut sizes = Vec::new();
    for w in 0..WRITERS {
        sizes.push(
            (0..batches_per_writer)
                .map(move |b| 1 + (w * 7 + b * 3) % 7)
                .collect::<Vec<u64>>(),
        );
    }
    let total: u64 = sizes.iter().flatten().sum();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let mut r = Reader::new(&ring, Start::Earliest).unwrap();
            thread::spawn(move || {
                let mut got: Vec<u64> = Vec::new();
                while (got.len() as u64) < total {
                    let (offset, v) = r.recv().unwrap();
                    assert_eq!(offset, got.len() as u64);
                    got.push(v);
                }
                got
            })
        })
        .collect();
    let seeker = {
        let ring = ring.clone();
        thread::spawn(move || {
            for _ in 0..if cfg!(miri) { 4 } else { 2_000 } {
                let mut r = Reader::new(&ring, Start::Earliest).unwrap();
                if let Ok((o, v)) = r.try_recv() {
                    assert!(v >> 48 < WRITERS, "offset {o}: a torn value");
                }
                let _ = r.seek(Start::Earliest);
                let _ = r.try_recv();
            }
        })
    };
    let writers: Vec<_> = sizes
        .into_iter()
        .enumerate()
        .map(|(w, sizes)| {
            let ring = ring.clone();
            thread::spawn(move || {
                let mut batch = Vec::new();
                for (b, len) in sizes.into_iter().enumerate() {
                    batch.extend(
                        (0..len).map(|i| (w as u64) << 48 | (b as u64) << 8 | i << 4 | len),
                    );
                    ring.publish_batch(&mut batch, &mut Vec::new()).unwrap();
                    assert!(batch.is_empty());
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    seeker.join().unwrap();
    for r in readers {
        let got = r.join().unwrap();
        let mut i = 0;
        while i < got.len() {
            let v = got[i];
            let len = (v & 0xf) as usize;
            assert_eq!(
                (v >> 4) & 0xf,
                0,
                "offset {i}: a batch not started at its first"
            );
            for k in 0..len {
                let expect = (v & !0xff) | (k as u64) << 4 | len as u64;
                assert_eq!(got[i + k], expect, "batch at {i} not consecutive");
            }
            i += len;
        }
    }
}

/// A ring made with entries for one reader and no group takes hundreds of readers and
/// groups (entries are added in chunks), each reading every message; entries let go of
/// are used again.
#[test]
fn readers_beyond_the_first_entries_are_added() {
    let n = if cfg!(miri) { 20 } else { 300 };
    let ring = Arc::new(
        Ring::<u64>::new(RingConfig {
            readers: 1,
            groups: 0,
            ..RingConfig::new(4)
        })
        .unwrap(),
    );
    let mut readers: Vec<_> = (0..n)
        .map(|_| Reader::new(&ring, Start::Earliest).unwrap())
        .collect();
    let groups: Vec<_> = (0..n / 10)
        .map(|_| Group::new(&ring, Start::Earliest).unwrap())
        .collect();
    let mut members: Vec<_> = groups.iter().map(|g| g.member().unwrap()).collect();
    for round in 0..3u64 {
        for k in 0..4 {
            ring.try_publish(round * 4 + k).unwrap();
        }
        assert!(
            ring.try_publish(99).is_err(),
            "the last reader holds the ring"
        );
        for r in readers.iter_mut() {
            for k in 0..4 {
                assert_eq!(r.try_recv(), Ok((round * 4 + k, round * 4 + k)));
            }
        }
        for m in members.iter_mut() {
            for k in 0..4 {
                assert_eq!(m.try_recv().unwrap().0, round * 4 + k);
            }
        }
    }
    // Half the readers leave and as many attach again.
    readers.truncate(n / 2);
    readers.extend((0..n / 2).map(|_| Reader::new(&ring, Start::Latest).unwrap()));
    ring.try_publish(12).unwrap();
    for r in readers.iter_mut() {
        assert_eq!(r.try_recv(), Ok((12, 12)));
    }
}

/// A ring that starts at an offset of its own (a log going on from one kept elsewhere):
/// readers, groups, holds, batches, eviction and overwriting all count from it, in a ring
/// that waits and in one that drops the oldest; a first offset too large is an error.
#[test]
fn a_ring_starts_at_its_first_offset() {
    const BASE: u64 = 1 << 40;
    for drop_oldest in [false, true] {
        let ring = Arc::new(
            Ring::<u64>::new(RingConfig {
                first_offset: BASE,
                drop_oldest,
                ..RingConfig::new(4)
            })
            .unwrap(),
        );
        assert_eq!(ring.end(), BASE);
        let mut r = Reader::new(&ring, Start::Earliest).unwrap();
        assert_eq!(r.position(), BASE);
        let group = Group::new(&ring, Start::Earliest).unwrap();
        let mut m = group.member().unwrap();
        let mut hold = memq_ring::Hold::new(&ring, Start::Offset(0)).unwrap();
        assert_eq!(
            hold.position(),
            BASE,
            "a start before the first offset is clamped"
        );
        let mut evicted = Vec::new();
        assert_eq!(
            ring.try_publish_batch(&mut vec![0, 1, 2], &mut evicted),
            Ok(BASE)
        );
        assert_eq!(ring.try_publish(3).unwrap().evicted, None);
        assert!(
            evicted.is_empty(),
            "nothing before the first offset to evict"
        );
        for n in 0..2 {
            assert_eq!(r.try_recv(), Ok((BASE + n, n)));
            assert_eq!(m.try_recv(), Ok((BASE + n, n)));
        }
        assert_eq!(hold.read(BASE + 3), Ok(3));
        if drop_oldest {
            for n in 4..10 {
                ring.try_publish(n).unwrap();
            }
            assert_eq!(r.try_recv(), Err(TryRecvError::Lagged(4)));
            assert_eq!(r.try_recv(), Ok((BASE + 6, 6)));
        } else {
            assert!(ring.try_publish(4).is_err(), "the hold keeps all four");
            hold.advance(BASE + 2);
            let p = ring.try_publish(4).unwrap();
            assert_eq!((p.offset, p.evicted), (BASE + 4, Some(0)));
            let p = ring.try_publish(5).unwrap();
            assert_eq!((p.offset, p.evicted), (BASE + 5, Some(1)));
            // Overwriting the first lap's slots waits for no stamp before the first offset.
            drop((hold, m, group));
            for n in 6..20 {
                while r.try_recv().is_ok() {}
                assert_eq!(ring.try_publish(n).unwrap().offset, BASE + n);
            }
        }
    }
    assert_eq!(
        Ring::<u8>::new(RingConfig {
            first_offset: 1 << 62,
            ..RingConfig::new(4)
        })
        .err(),
        Some(RingError::FirstOffsetTooLarge)
    );
}

/// In a ring that drops the oldest, a reader's or a member's gap known at its start and
/// what writers evicted after it are one report; `skip_evicted` moves a reader (or the
/// group) past what was evicted since and says how much, and does nothing in a ring that
/// keeps what its readers have not read.
#[test]
fn a_start_gap_and_later_evictions_are_one_report() {
    let dropping = Arc::new(
        Ring::new(RingConfig {
            drop_oldest: true,
            ..RingConfig::new(2)
        })
        .unwrap(),
    );
    for n in 0..4u64 {
        dropping.try_publish(n).unwrap();
    }
    let mut r = Reader::new(&dropping, Start::Offset(0)).unwrap();
    let g = Group::new(&dropping, Start::Offset(0)).unwrap();
    let mut m = g.member().unwrap();
    assert_eq!((r.missed(), g.missed()), (2, 2));
    dropping.try_publish(4).unwrap();
    dropping.try_publish(5).unwrap();
    // The reader's next receive tells both at once.
    assert_eq!(r.try_recv(), Err(TryRecvError::Lagged(4)));
    assert_eq!(r.try_recv(), Ok((4, 4)));
    // The group moved to 2 when it was made; 2 and 3 are gone since.
    assert_eq!(m.skip_evicted(), 2);
    assert_eq!(g.position(), 4);
    assert_eq!(m.skip_evicted(), 0);
    assert_eq!(m.try_recv(), Ok((4, 4)));
    dropping.try_publish(6).unwrap();
    dropping.try_publish(7).unwrap();
    assert_eq!(r.skip_evicted(), 1);
    assert_eq!(r.try_recv(), Ok((6, 6)));

    let blocking = Arc::new(Ring::<u64>::new(RingConfig::new(2)).unwrap());
    let mut r = Reader::new(&blocking, Start::Earliest).unwrap();
    let mut m = Group::new(&blocking, Start::Earliest)
        .unwrap()
        .member()
        .unwrap();
    blocking.try_publish(1).unwrap();
    assert_eq!((r.skip_evicted(), m.skip_evicted()), (0, 0));
}
