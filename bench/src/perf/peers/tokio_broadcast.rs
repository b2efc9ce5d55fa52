//! `tokio::sync::broadcast`: every receiver sees every message, unless it falls more than
//! `capacity` behind, in which case the oldest are dropped for it and it gets `Lagged(n)`.

use tokio::sync::broadcast;

use crate::perf::{AsyncPeer, AsyncRx, AsyncTx, Disconnected, Msg, Recv, Shape, TryRecv, Wiring};

/// The tokio broadcast row.
#[derive(Clone, Copy, Debug, Default)]
pub struct TokioBroadcast;

impl AsyncTx for broadcast::Sender<Msg> {
    async fn send(&self, msg: Msg) -> Result<(), Disconnected> {
        // Never waits: a full ring overwrites the oldest message.
        let res = broadcast::Sender::send(self, msg)
            .map(drop)
            .map_err(|_| Disconnected);
        // A loop of sends that never wait would never yield either, and the receiver it
        // wakes would sit in this worker's LIFO slot (which other workers cannot steal)
        // until the whole run is published: nearly every message would be lost to
        // scheduling, not to the channel. Spend Tokio's co-operative budget like any
        // well-behaved task, so that the scheduler gets to run the receivers.
        tokio::task::consume_budget().await;
        res
    }
}

impl AsyncRx for broadcast::Receiver<Msg> {
    async fn recv(&mut self) -> Recv {
        match broadcast::Receiver::recv(self).await {
            Ok(m) => Recv::Msg(m),
            Err(broadcast::error::RecvError::Lagged(n)) => Recv::Lagged(n),
            Err(broadcast::error::RecvError::Closed) => Recv::Closed,
        }
    }

    fn try_recv(&mut self) -> TryRecv {
        match broadcast::Receiver::try_recv(self) {
            Ok(m) => TryRecv::Msg(m),
            Err(broadcast::error::TryRecvError::Empty) => TryRecv::Empty,
            Err(broadcast::error::TryRecvError::Lagged(n)) => TryRecv::Lagged(n),
            Err(broadcast::error::TryRecvError::Closed) => TryRecv::Closed,
        }
    }
}

impl AsyncPeer for TokioBroadcast {
    type Tx = broadcast::Sender<Msg>;
    type Rx = broadcast::Receiver<Msg>;

    async fn wire(&self, shape: Shape, capacity: usize) -> Option<Wiring<Self::Tx, Self::Rx>> {
        let n = match shape {
            Shape::Pair => 1,
            Shape::Fanout(n) => n,
            // A broadcast channel cannot give each message to only one receiver.
            Shape::Competing(_) | Shape::Partitioned(_) => return None,
        };
        let (tx, rx) = broadcast::channel(capacity);
        let mut rxs = vec![rx];
        rxs.extend((1..n).map(|_| tx.subscribe()));
        Some(Wiring { txs: vec![tx], rxs })
    }
}
