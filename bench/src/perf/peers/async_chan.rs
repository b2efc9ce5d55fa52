//! `async-channel`: bounded MPMC, so competing consumers clone the receiver.

use crate::perf::{AsyncPeer, AsyncRx, AsyncTx, Disconnected, Msg, Recv, Shape, TryRecv, Wiring};

/// The async-channel row.
#[derive(Clone, Copy, Debug, Default)]
pub struct AsyncChannel;

impl AsyncTx for async_channel::Sender<Msg> {
    async fn send(&self, msg: Msg) -> Result<(), Disconnected> {
        async_channel::Sender::send(self, msg)
            .await
            .map_err(|_| Disconnected)
    }
}

impl AsyncRx for async_channel::Receiver<Msg> {
    async fn recv(&mut self) -> Recv {
        async_channel::Receiver::recv(self)
            .await
            .map_or(Recv::Closed, Recv::Msg)
    }

    fn try_recv(&mut self) -> TryRecv {
        match async_channel::Receiver::try_recv(self) {
            Ok(m) => TryRecv::Msg(m),
            Err(async_channel::TryRecvError::Empty) => TryRecv::Empty,
            Err(async_channel::TryRecvError::Closed) => TryRecv::Closed,
        }
    }
}

impl AsyncPeer for AsyncChannel {
    type Tx = async_channel::Sender<Msg>;
    type Rx = async_channel::Receiver<Msg>;

    async fn wire(&self, shape: Shape, capacity: usize) -> Option<Wiring<Self::Tx, Self::Rx>> {
        Some(match shape {
            Shape::Pair | Shape::Competing(_) => {
                let n = if let Shape::Competing(n) = shape {
                    n
                } else {
                    1
                };
                let (tx, rx) = async_channel::bounded(capacity);
                Wiring {
                    txs: vec![tx],
                    rxs: vec![rx; n],
                }
            }
            Shape::Fanout(n) | Shape::Partitioned(n) => {
                let (txs, rxs) = (0..n).map(|_| async_channel::bounded(capacity)).unzip();
                Wiring { txs, rxs }
            }
        })
    }
}
