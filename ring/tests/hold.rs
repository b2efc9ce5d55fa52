//! Holds ([`Hold`]): a position that keeps writers off every message from it on, from
//! which those messages are read again in any order, as memq's explicit-ack groups read a
//! message again when its lease runs out. Sizes shrink under miri, which runs these too.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use memq_ring::blocking::Parking;
use memq_ring::{Hold, HoldReadError, Reader, Ring, RingConfig, RingError, Start};

const N: u64 = if cfg!(miri) { 100 } else { 100_000 };

/// A hold keeps writers back and evicts nothing from its position on; it reads any held
/// message again, in any order; advancing lets go; seeking back holds again what the
/// ring still has.
#[test]
fn a_hold_keeps_its_messages_and_reads_them_again() {
    let ring = Arc::new(Ring::<Arc<u64>>::new(RingConfig::new(4)).unwrap());
    let mut hold = Hold::new(&ring, Start::Earliest).unwrap();
    let values: Vec<Arc<u64>> = (0..4).map(Arc::new).collect();
    for v in &values {
        assert!(ring.try_publish(v.clone()).unwrap().evicted.is_none());
    }
    assert!(
        ring.try_publish(Arc::new(4)).is_err(),
        "the hold keeps all four"
    );
    for offset in [3, 0, 2, 1, 0] {
        assert_eq!(*hold.read(offset).unwrap(), offset);
    }
    assert_eq!(hold.read(4), Err(HoldReadError::NotYet));
    hold.advance(2);
    assert_eq!(hold.position(), 2);
    assert_eq!(hold.read(1), Err(HoldReadError::Released));
    // Two slots free: two publishes, each evicting one message let go.
    for n in 4..6 {
        let p = ring.try_publish(Arc::new(n)).unwrap();
        assert_eq!(p.evicted.as_deref(), Some(&(n - 4)));
    }
    assert!(ring.try_publish(Arc::new(6)).is_err());
    assert_eq!(Arc::strong_count(&values[2]), 2, "offset 2 still held");
    // Advancing past the end stops at the end; a seek back holds the oldest again.
    hold.advance(100);
    assert_eq!(hold.position(), 6);
    hold.seek(Start::Earliest).unwrap();
    assert_eq!(hold.position(), 2);
    assert_eq!(*hold.read(2).unwrap(), 2);
    drop(hold);
    assert!(
        ring.try_publish(Arc::new(6)).is_ok(),
        "a dropped hold holds nothing"
    );
}

#[test]
fn holds_refuse_taking_rings() {
    let ring = Arc::new(
        Ring::<u8>::new(RingConfig {
            take: true,
            ..RingConfig::new(2)
        })
        .unwrap(),
    );
    assert_eq!(
        Hold::new(&ring, Start::Earliest).err(),
        Some(RingError::TakingRing)
    );
    assert!(
        Reader::new(&ring, Start::Earliest).is_ok(),
        "the refusal took no entry"
    );
}

/// In a ring that drops the oldest a hold keeps nobody back: a message overwritten is
/// `Gone`, one still there reads whole.
#[test]
fn a_hold_in_a_ring_that_drops_the_oldest() {
    let ring = Arc::new(
        Ring::<u64>::new(RingConfig {
            drop_oldest: true,
            ..RingConfig::new(4)
        })
        .unwrap(),
    );
    let mut hold = Hold::new(&ring, Start::Earliest).unwrap();
    for n in 0..10 {
        ring.try_publish(n * 10).unwrap();
    }
    assert_eq!(hold.read(5), Err(HoldReadError::Gone));
    assert_eq!(hold.read(6), Ok(60));
    assert_eq!(hold.read(9), Ok(90));
}

/// A writer publishes while a consumer reads through a hold, reading every message twice
/// (once on its way, once again from the hold) and advancing: every read is the message
/// published at that offset, and the writer, parked when the hold keeps the ring full,
/// is woken by the advance.
#[test]
fn a_writer_and_a_hold_that_reads_again_and_advances() {
    let ring = Arc::new(Ring::with_waiters(RingConfig::new(8), Parking::default()).unwrap());
    let mut hold = Hold::new(&ring, Start::Earliest).unwrap();
    let mut reader = Reader::new(&ring, Start::Earliest).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let w = {
        let (ring, done) = (ring.clone(), done.clone());
        thread::spawn(move || {
            for n in 0..N {
                assert_eq!(ring.publish(n * 7).unwrap().offset, n);
            }
            done.store(true, Ordering::Release);
        })
    };
    for n in 0..N {
        let (offset, v) = reader.recv().unwrap();
        assert_eq!((offset, v), (n, n * 7));
        assert_eq!(hold.read(offset), Ok(v));
        if n % 3 == 2 {
            // Reads the last three again, then lets them go.
            for back in n - 2..=n {
                assert_eq!(hold.read(back), Ok(back * 7));
            }
            hold.advance(n + 1);
        }
    }
    w.join().unwrap();
    assert!(done.load(Ordering::Acquire));
}
