//! memq-ring, the lock-free ring of issue 36, measured on its own (memq's topics run on
//! it with `TopicConfig::ring_engine(true)`): `Ring` with the blocking front (`Parking`)
//! on plain threads, like crossbeam's row. Every shape is one ring per channel the scenario needs:
//! - a pair: one ring, one broadcast `Reader`;
//! - competing receivers: one ring, one `Group` whose members compete;
//! - fan-out: one ring, one `Reader` per subscriber (a real broadcast, one sender);
//! - partitions: one ring per partition, each with one `Reader` (the harness routes keys).
//!
//! The ring closes when its last sender is dropped, so receivers end as with a channel.
//!
//! [`MemqRingAsync`] is the same wiring with the async front (`future::WakerLists`), on
//! the Tokio runtime the async peers run on.

use std::sync::Arc;
use std::time::Instant;

use memq_ring::blocking::Parking;
use memq_ring::{Group, Member, Reader, Ring, RingConfig, Start, TryRecvError};

use memq_ring::future::WakerLists;
use memq_ring::Waiters;

use crate::perf::{
    AsyncPeer, AsyncRx, AsyncTx, Disconnected, Msg, Recv, Shape, SyncRx, SyncTx, ThreadPeer,
    TryRecv, Wiring,
};

/// The memq-ring row.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemqRing;

/// The memq-ring row on Tokio, with the async front.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemqRingAsync;

/// A ring of the harness's messages, shared by its senders and receivers.
type Shared<W> = Arc<Ring<Msg, W>>;

/// Closes its ring when the last sender goes.
#[derive(Debug)]
struct Closer<W: Waiters>(Arc<Ring<Msg, W>>);

impl<W: Waiters> Drop for Closer<W> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// A sender: the ring, and a share of its closer.
#[derive(Debug)]
pub struct RingTx<W: Waiters = Parking> {
    ring: Arc<Ring<Msg, W>>,
    _closer: Arc<Closer<W>>,
}

impl<W: Waiters> Clone for RingTx<W> {
    fn clone(&self) -> Self {
        Self {
            ring: self.ring.clone(),
            _closer: self._closer.clone(),
        }
    }
}

impl SyncTx for RingTx {
    fn send(&self, msg: Msg) -> Result<(), Disconnected> {
        match self.ring.publish(msg) {
            Ok(p) => {
                drop(p.evicted);
                Ok(())
            }
            Err(_) => Err(Disconnected),
        }
    }
}

/// A receiver: a broadcast reader or a group member.
#[derive(Debug)]
pub enum RingRx<W: Waiters = Parking> {
    /// Reads every message.
    Reader(Reader<Msg, W>),
    /// Competes with the group's other members.
    Member(Member<Msg, W>),
}

fn to_recv(r: Result<(u64, Msg), TryRecvError>) -> Option<Recv> {
    match r {
        Ok((_, m)) => Some(Recv::Msg(m)),
        Err(TryRecvError::Closed) => Some(Recv::Closed),
        Err(TryRecvError::Lagged(n)) => Some(Recv::Lagged(n)),
        Err(TryRecvError::Empty) => None,
    }
}

impl SyncRx for RingRx {
    fn recv_deadline(&mut self, deadline: Instant) -> Option<Recv> {
        to_recv(match self {
            RingRx::Reader(r) => r.recv_deadline(deadline),
            RingRx::Member(m) => m.recv_deadline(deadline),
        })
    }

    fn try_recv(&mut self) -> TryRecv {
        try_recv(self)
    }
}

fn try_recv<W: Waiters>(rx: &mut RingRx<W>) -> TryRecv {
    let r = match rx {
        RingRx::Reader(r) => r.try_recv(),
        RingRx::Member(m) => m.try_recv(),
    };
    match r {
        Ok((_, m)) => TryRecv::Msg(m),
        Err(TryRecvError::Empty) => TryRecv::Empty,
        Err(TryRecvError::Closed) => TryRecv::Closed,
        Err(TryRecvError::Lagged(n)) => TryRecv::Lagged(n),
    }
}

impl AsyncTx for RingTx<WakerLists> {
    async fn send(&self, msg: Msg) -> Result<(), Disconnected> {
        match self.ring.publish_async(msg).await {
            Ok(p) => {
                drop(p.evicted);
                Ok(())
            }
            Err(_) => Err(Disconnected),
        }
    }
}

impl AsyncRx for RingRx<WakerLists> {
    async fn recv(&mut self) -> Recv {
        let r = match self {
            RingRx::Reader(r) => r.recv_async().await,
            RingRx::Member(m) => m.recv_async().await,
        };
        to_recv(r).unwrap_or(Recv::Closed)
    }

    fn try_recv(&mut self) -> TryRecv {
        try_recv(self)
    }
}

impl AsyncPeer for MemqRingAsync {
    type Tx = RingTx<WakerLists>;
    type Rx = RingRx<WakerLists>;

    async fn wire(&self, shape: Shape, capacity: usize) -> Option<Wiring<Self::Tx, Self::Rx>> {
        wire(shape, capacity)
    }
}

/// A ring for `readers` readers (or members); `take`: each message to one of them, moved
/// out (a queue), as for every shape but the fan-out.
fn ring<W: Waiters + Default>(
    capacity: usize,
    readers: usize,
    take: bool,
) -> Option<(Shared<W>, RingTx<W>)> {
    let config = RingConfig {
        capacity,
        readers: readers.max(1),
        groups: 1,
        take,
        drop_oldest: false,
        first_offset: 0,
    };
    let ring = Arc::new(Ring::with_waiters(config, W::default()).ok()?);
    let tx = RingTx {
        ring: ring.clone(),
        _closer: Arc::new(Closer(ring.clone())),
    };
    Some((ring, tx))
}

impl ThreadPeer for MemqRing {
    type Tx = RingTx;
    type Rx = RingRx;

    fn wire(&self, shape: Shape, capacity: usize) -> Option<Wiring<Self::Tx, Self::Rx>> {
        wire(shape, capacity)
    }
}

/// One wiring for both fronts.
fn wire<W: Waiters + Default>(
    shape: Shape,
    capacity: usize,
) -> Option<Wiring<RingTx<W>, RingRx<W>>> {
    {
        Some(match shape {
            Shape::Pair => {
                let (ring, tx) = ring(capacity, 1, true)?;
                let rx = RingRx::Reader(Reader::new(&ring, Start::Earliest).ok()?);
                Wiring {
                    txs: vec![tx],
                    rxs: vec![rx],
                }
            }
            Shape::Competing(n) => {
                let (ring, tx) = ring(capacity, n, true)?;
                let group = Group::new(&ring, Start::Earliest).ok()?;
                let rxs = (0..n)
                    .map(|_| group.member().ok().map(RingRx::Member))
                    .collect::<Option<Vec<_>>>()?;
                Wiring { txs: vec![tx], rxs }
            }
            Shape::Fanout(n) => {
                let (ring, tx) = ring(capacity, n, false)?;
                let rxs = (0..n)
                    .map(|_| Reader::new(&ring, Start::Earliest).ok().map(RingRx::Reader))
                    .collect::<Option<Vec<_>>>()?;
                Wiring { txs: vec![tx], rxs }
            }
            Shape::Partitioned(n) => {
                let mut txs = Vec::with_capacity(n);
                let mut rxs = Vec::with_capacity(n);
                for _ in 0..n {
                    let (ring, tx) = ring(capacity, 1, true)?;
                    rxs.push(RingRx::Reader(Reader::new(&ring, Start::Earliest).ok()?));
                    txs.push(tx);
                }
                Wiring { txs, rxs }
            }
        })
    }
}
