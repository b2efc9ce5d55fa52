//! The async front: tasks that wait for messages or room are woken, every message is
//! counted, and a receive that is dropped before it completes takes nothing.
#![cfg(not(loom))]

use std::sync::Arc;
use std::thread;

use futures_executor::block_on;
use memq_ring::future::WakerLists;
use memq_ring::{Group, Reader, Ring, RingConfig, Start, TryRecvError};

const N: u64 = if cfg!(miri) { 50 } else { 100_000 };

fn ring(capacity: usize, take: bool) -> Arc<Ring<u64, WakerLists>> {
    let config = RingConfig {
        take,
        ..RingConfig::new(capacity)
    };
    Arc::new(Ring::with_waiters(config, WakerLists::default()).unwrap())
}

#[test]
fn an_async_writer_and_reader_count_every_message() {
    for take in [false, true] {
        let ring = ring(4, take);
        let mut reader = Reader::new(&ring, Start::Earliest).unwrap();
        let r = thread::spawn(move || {
            block_on(async {
                for want in 0..N {
                    assert_eq!(reader.recv_async().await, Ok((want, want)));
                }
                assert_eq!(reader.recv_async().await, Err(TryRecvError::Closed));
            })
        });
        block_on(async {
            for n in 0..N {
                assert_eq!(ring.publish_async(n).await.unwrap().offset, n);
            }
        });
        ring.close();
        assert_eq!(block_on(ring.publish_async(0)).err(), Some(0));
        r.join().unwrap();
    }
}

#[test]
fn async_members_of_a_taking_group_get_each_message_once() {
    let ring = ring(8, true);
    let group = Group::new(&ring, Start::Earliest).unwrap();
    let members: Vec<_> = (0..3)
        .map(|_| {
            let mut m = group.member().unwrap();
            thread::spawn(move || {
                block_on(async {
                    let mut got = Vec::new();
                    while let Ok((_, v)) = m.recv_async().await {
                        got.push(v);
                    }
                    got
                })
            })
        })
        .collect();
    drop(group);
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let ring = ring.clone();
            thread::spawn(move || {
                block_on(async {
                    for n in 0..N / 2 {
                        ring.publish_async(w * (N / 2) + n).await.unwrap();
                    }
                })
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    ring.close();
    let mut all: Vec<u64> = members
        .into_iter()
        .flat_map(|m| m.join().unwrap())
        .collect();
    all.sort_unstable();
    assert_eq!(all, (0..N / 2 * 2).collect::<Vec<_>>());
}

/// A receive polled once (nothing there: it registers) and dropped takes nothing: the
/// next receive gets the message.
#[test]
fn a_dropped_receive_takes_nothing() {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};
    let ring = ring(2, true);
    let mut reader = Reader::new(&ring, Start::Earliest).unwrap();
    {
        let mut fut = pin!(reader.recv_async());
        let mut cx = Context::from_waker(Waker::noop());
        assert!(matches!(fut.as_mut().poll(&mut cx), Poll::Pending));
    }
    block_on(ring.publish_async(5)).unwrap();
    assert_eq!(block_on(reader.recv_async()), Ok((0, 5)));
}
