//! `flume` through its async API (`send_async` / `recv_async`); batches are a `recv_async` and
//! `try_recv`s up to the batch size.

use crate::perf::{
    AsyncPeer, AsyncRx, AsyncTx, Batch, Disconnected, Msg, Recv, Shape, TryRecv, Wiring,
};

/// The flume row.
#[derive(Clone, Copy, Debug, Default)]
pub struct Flume;

impl AsyncTx for flume::Sender<Msg> {
    async fn send(&self, msg: Msg) -> Result<(), Disconnected> {
        self.send_async(msg).await.map_err(|_| Disconnected)
    }
}

impl AsyncRx for flume::Receiver<Msg> {
    async fn recv(&mut self) -> Recv {
        self.recv_async().await.map_or(Recv::Closed, Recv::Msg)
    }

    fn try_recv(&mut self) -> TryRecv {
        match flume::Receiver::try_recv(self) {
            Ok(m) => TryRecv::Msg(m),
            Err(flume::TryRecvError::Empty) => TryRecv::Empty,
            Err(flume::TryRecvError::Disconnected) => TryRecv::Closed,
        }
    }

    async fn recv_batch(&mut self, buf: &mut Vec<Msg>, limit: usize) -> Batch {
        match self.recv_async().await {
            Ok(m) => buf.push(m),
            Err(_) => return Batch::Closed,
        }
        // Up to `limit` in all: `drain` would take everything queued (up to the capacity),
        // larger batches than the scenario's.
        while buf.len() < limit {
            match flume::Receiver::try_recv(self) {
                Ok(m) => buf.push(m),
                Err(_) => break,
            }
        }
        Batch::Got
    }
}

impl AsyncPeer for Flume {
    type Tx = flume::Sender<Msg>;
    type Rx = flume::Receiver<Msg>;

    async fn wire(&self, shape: Shape, capacity: usize) -> Option<Wiring<Self::Tx, Self::Rx>> {
        Some(match shape {
            Shape::Pair | Shape::Competing(_) => {
                let n = if let Shape::Competing(n) = shape {
                    n
                } else {
                    1
                };
                let (tx, rx) = flume::bounded(capacity);
                Wiring {
                    txs: vec![tx],
                    rxs: vec![rx; n],
                }
            }
            Shape::Fanout(n) | Shape::Partitioned(n) => {
                let (txs, rxs) = (0..n).map(|_| flume::bounded(capacity)).unzip();
                Wiring { txs, rxs }
            }
        })
    }
}
