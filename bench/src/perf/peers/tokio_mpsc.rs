//! `tokio::sync::mpsc`: single consumer, so competing consumers share the one receiver
//! behind a `tokio::sync::Mutex`; fan-out and partitions use one channel per receiver.

use alloc::sync::Arc;

use tokio::sync::{mpsc, Mutex};

use crate::perf::{
    AsyncPeer, AsyncRx, AsyncTx, Batch, Disconnected, Msg, Recv, Shape, TryRecv, Wiring,
};

/// The tokio mpsc row.
#[derive(Clone, Copy, Debug, Default)]
pub struct TokioMpsc;

/// A receiver owned by one consumer, or shared by competing consumers.
#[derive(Debug)]
pub enum MpscRx {
    /// The only consumer.
    Owned(mpsc::Receiver<Msg>),
    /// One of several consumers taking turns on the same receiver.
    Shared(Arc<Mutex<mpsc::Receiver<Msg>>>),
}

impl AsyncTx for mpsc::Sender<Msg> {
    async fn send(&self, msg: Msg) -> Result<(), Disconnected> {
        mpsc::Sender::send(self, msg)
            .await
            .map_err(|_| Disconnected)
    }

    async fn send_batch(&self, batch: Vec<Msg>) -> Result<(), Disconnected> {
        // One wait for room for the whole batch, then no more synchronisation per item.
        let permits = self
            .reserve_many(batch.len())
            .await
            .map_err(|_| Disconnected)?;
        for (permit, msg) in permits.zip(batch) {
            permit.send(msg);
        }
        Ok(())
    }
}

impl AsyncRx for MpscRx {
    async fn recv(&mut self) -> Recv {
        let got = match self {
            MpscRx::Owned(rx) => rx.recv().await,
            MpscRx::Shared(rx) => rx.lock().await.recv().await,
        };
        got.map_or(Recv::Closed, Recv::Msg)
    }

    fn try_recv(&mut self) -> TryRecv {
        let res = match self {
            MpscRx::Owned(rx) => rx.try_recv(),
            MpscRx::Shared(rx) => match rx.try_lock() {
                Ok(mut rx) => rx.try_recv(),
                Err(_) => return TryRecv::Empty,
            },
        };
        match res {
            Ok(m) => TryRecv::Msg(m),
            Err(mpsc::error::TryRecvError::Empty) => TryRecv::Empty,
            Err(mpsc::error::TryRecvError::Disconnected) => TryRecv::Closed,
        }
    }

    async fn recv_batch(&mut self, buf: &mut Vec<Msg>, limit: usize) -> Batch {
        let got = match self {
            MpscRx::Owned(rx) => rx.recv_many(buf, limit).await,
            MpscRx::Shared(rx) => rx.lock().await.recv_many(buf, limit).await,
        };
        if got == 0 {
            Batch::Closed
        } else {
            Batch::Got
        }
    }
}

impl AsyncPeer for TokioMpsc {
    type Tx = mpsc::Sender<Msg>;
    type Rx = MpscRx;

    async fn wire(&self, shape: Shape, capacity: usize) -> Option<Wiring<Self::Tx, Self::Rx>> {
        Some(match shape {
            Shape::Pair => {
                let (tx, rx) = mpsc::channel(capacity);
                Wiring {
                    txs: vec![tx],
                    rxs: vec![MpscRx::Owned(rx)],
                }
            }
            Shape::Competing(n) => {
                let (tx, rx) = mpsc::channel(capacity);
                let rx = Arc::new(Mutex::new(rx));
                Wiring {
                    txs: vec![tx],
                    rxs: (0..n).map(|_| MpscRx::Shared(rx.clone())).collect(),
                }
            }
            Shape::Fanout(n) | Shape::Partitioned(n) => {
                let (txs, rxs) = (0..n)
                    .map(|_| {
                        let (tx, rx) = mpsc::channel(capacity);
                        (tx, MpscRx::Owned(rx))
                    })
                    .unzip();
                Wiring { txs, rxs }
            }
        })
    }
}
