//! `kanal` through its async API; batches are a `recv` and `try_recv`s up to the batch size.

use crate::perf::{
    AsyncPeer, AsyncRx, AsyncTx, Batch, Disconnected, Msg, Recv, Shape, TryRecv, Wiring,
};

/// The kanal row.
#[derive(Clone, Copy, Debug, Default)]
pub struct Kanal;

impl AsyncTx for kanal::AsyncSender<Msg> {
    async fn send(&self, msg: Msg) -> Result<(), Disconnected> {
        kanal::AsyncSender::send(self, msg)
            .await
            .map_err(|_| Disconnected)
    }
}

impl AsyncRx for kanal::AsyncReceiver<Msg> {
    async fn recv(&mut self) -> Recv {
        kanal::AsyncReceiver::recv(self)
            .await
            .map_or(Recv::Closed, Recv::Msg)
    }

    fn try_recv(&mut self) -> TryRecv {
        match kanal::AsyncReceiver::try_recv(self) {
            Ok(Some(m)) => TryRecv::Msg(m),
            Ok(None) => TryRecv::Empty,
            Err(_) => TryRecv::Closed,
        }
    }

    async fn recv_batch(&mut self, buf: &mut Vec<Msg>, limit: usize) -> Batch {
        match kanal::AsyncReceiver::recv(self).await {
            Ok(m) => buf.push(m),
            Err(_) => return Batch::Closed,
        }
        // Up to `limit` in all: `drain_into` would take everything queued (up to the
        // capacity), larger batches than the scenario's. A closed channel shows up on the
        // next `recv`.
        while buf.len() < limit {
            match kanal::AsyncReceiver::try_recv(self) {
                Ok(Some(m)) => buf.push(m),
                _ => break,
            }
        }
        Batch::Got
    }
}

impl AsyncPeer for Kanal {
    type Tx = kanal::AsyncSender<Msg>;
    type Rx = kanal::AsyncReceiver<Msg>;

    async fn wire(&self, shape: Shape, capacity: usize) -> Option<Wiring<Self::Tx, Self::Rx>> {
        Some(match shape {
            Shape::Pair | Shape::Competing(_) => {
                let n = if let Shape::Competing(n) = shape {
                    n
                } else {
                    1
                };
                let (tx, rx) = kanal::bounded_async(capacity);
                Wiring {
                    txs: vec![tx],
                    rxs: vec![rx; n],
                }
            }
            Shape::Fanout(n) | Shape::Partitioned(n) => {
                let (txs, rxs) = (0..n).map(|_| kanal::bounded_async(capacity)).unzip();
                Wiring { txs, rxs }
            }
        })
    }
}
