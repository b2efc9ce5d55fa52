//! `crossbeam-channel` on plain threads with blocking calls (`recv_deadline`).

use std::time::Instant;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};

use crate::perf::{Disconnected, Msg, Recv, Shape, SyncRx, SyncTx, ThreadPeer, TryRecv, Wiring};

/// The crossbeam row.
#[derive(Clone, Copy, Debug, Default)]
pub struct Crossbeam;

impl SyncTx for Sender<Msg> {
    fn send(&self, msg: Msg) -> Result<(), Disconnected> {
        Sender::send(self, msg).map_err(|_| Disconnected)
    }
}

impl SyncRx for Receiver<Msg> {
    fn recv_deadline(&mut self, deadline: Instant) -> Option<Recv> {
        match Receiver::recv_deadline(self, deadline) {
            Ok(m) => Some(Recv::Msg(m)),
            Err(RecvTimeoutError::Disconnected) => Some(Recv::Closed),
            Err(RecvTimeoutError::Timeout) => None,
        }
    }

    fn try_recv(&mut self) -> TryRecv {
        match Receiver::try_recv(self) {
            Ok(m) => TryRecv::Msg(m),
            Err(TryRecvError::Empty) => TryRecv::Empty,
            Err(TryRecvError::Disconnected) => TryRecv::Closed,
        }
    }
}

impl ThreadPeer for Crossbeam {
    type Tx = Sender<Msg>;
    type Rx = Receiver<Msg>;

    fn wire(&self, shape: Shape, capacity: usize) -> Option<Wiring<Self::Tx, Self::Rx>> {
        Some(match shape {
            Shape::Pair | Shape::Competing(_) => {
                let n = if let Shape::Competing(n) = shape {
                    n
                } else {
                    1
                };
                let (tx, rx) = crossbeam_channel::bounded(capacity);
                Wiring {
                    txs: vec![tx],
                    rxs: vec![rx; n],
                }
            }
            Shape::Fanout(n) | Shape::Partitioned(n) => {
                let (txs, rxs) = (0..n).map(|_| crossbeam_channel::bounded(capacity)).unzip();
                Wiring { txs, rxs }
            }
        })
    }
}
