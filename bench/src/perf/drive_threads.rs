//! The scenarios written once over blocking channels ([`ThreadPeer`]), one OS thread per
//! publisher and per consumer.
//!
//! Every blocking receive takes the run's deadline, so a lossy peer cannot hang the run.

use core::ops::Range;
use core::time::Duration;
use std::sync::mpsc;
use std::thread;
use std::time::Instant;

use bytes::Bytes;

use super::drive_async::ping_outcome;
use super::{
    key_of, make_payload, outcome_from, partition_of, Batch, Disconnected, Msg, Outcome, Params,
    Recv, Scenario, Shape, Tally, TryRecv, Wiring,
};

/// The sending side of a blocking peer.
pub trait SyncTx: Clone + Send + 'static {
    /// Sends one message, blocking while the channel is full.
    fn send(&self, msg: Msg) -> Result<(), Disconnected>;

    /// Sends a batch. The default sends one at a time.
    fn send_batch(&self, batch: Vec<Msg>) -> Result<(), Disconnected> {
        for msg in batch {
            self.send(msg)?;
        }
        Ok(())
    }

    /// Sends with a routing key, for wirings whose one sender partitions by key itself.
    /// The default ignores the key.
    fn send_keyed(&self, key: u64, msg: Msg) -> Result<(), Disconnected> {
        let _ = key;
        self.send(msg)
    }
}

/// The receiving side of a blocking peer.
pub trait SyncRx: Send + 'static {
    /// Blocks for the next message until `deadline`; `None` when the deadline passed.
    fn recv_deadline(&mut self, deadline: Instant) -> Option<Recv>;

    /// Takes a message if one is ready, without blocking.
    fn try_recv(&mut self) -> TryRecv;

    /// Blocks for at least one message (until `deadline`) and appends up to about `limit`
    /// to `buf`. The default blocks on one and then takes what is ready.
    fn recv_batch_deadline(
        &mut self,
        buf: &mut Vec<Msg>,
        limit: usize,
        deadline: Instant,
    ) -> Option<Batch> {
        match self.recv_deadline(deadline)? {
            Recv::Msg(m) => buf.push(m),
            Recv::Lagged(n) => return Some(Batch::Lagged(n)),
            Recv::Closed => return Some(Batch::Closed),
        }
        let mut got = 1;
        while got < limit {
            match self.try_recv() {
                TryRecv::Msg(m) => {
                    buf.push(m);
                    got += 1;
                }
                // What is already in `buf` is counted by the caller either way.
                TryRecv::Lagged(n) => return Some(Batch::Lagged(n)),
                TryRecv::Empty | TryRecv::Closed => break,
            }
        }
        Some(Batch::Got)
    }

    /// See [`super::AsyncRx::last_delivery`].
    fn last_delivery(&self) -> Option<Instant> {
        None
    }
}

/// A blocking implementation under test: how to wire each [`Shape`].
pub trait ThreadPeer {
    /// Sender type.
    type Tx: SyncTx;
    /// Receiver type.
    type Rx: SyncRx;

    /// Wires `shape` with channels of `capacity` messages; `None`: no such shape.
    fn wire(&self, shape: Shape, capacity: usize) -> Option<Wiring<Self::Tx, Self::Rx>>;
}

/// Runs `scenario` on `peer` with plain threads.
pub fn run<P: ThreadPeer>(peer: &P, scenario: Scenario, params: &Params) -> Option<Outcome> {
    let payload = make_payload(params.payload_size_of(scenario));
    // Held until the run is over, so that freeing a 100 MiB payload is never timed as
    // part of whichever consumer happens to drop the last message.
    let keep_alive = payload.clone();
    let deadline = Instant::now() + params.deadline;
    let n = params.messages;
    let outcome = match scenario {
        Scenario::S1OneToOne => one_to_one(peer, params, n, payload, None, deadline),
        Scenario::S4Batches => one_to_one(peer, params, n, payload, Some(params.batch), deadline),
        Scenario::S5Large1MiB => {
            one_to_one(peer, params, params.large_messages, payload, None, deadline)
        }
        Scenario::S5Large100MiB => {
            one_to_one(peer, params, params.huge_messages, payload, None, deadline)
        }
        Scenario::S2Competing => competing(peer, params, payload, deadline),
        Scenario::S3Fanout => fanout(peer, params, payload, deadline),
        Scenario::S6PingPong => ping_pong(peer, params, payload, deadline),
        Scenario::S7Partitioned => partitioned(peer, params, payload, deadline),
    };
    drop(keep_alive);
    outcome
}

fn consume<R: SyncRx>(
    mut rx: R,
    mut tally: Tally,
    deadline: Instant,
    batch: Option<usize>,
) -> Tally {
    match batch {
        None => loop {
            match rx.recv_deadline(deadline) {
                Some(Recv::Msg(m)) => tally.record(&m),
                Some(Recv::Lagged(n)) => tally.lag_reported += n,
                Some(Recv::Closed) => break,
                None => {
                    tally.timed_out = true;
                    break;
                }
            }
        },
        Some(limit) => {
            let mut buf = Vec::with_capacity(limit);
            loop {
                let res = rx.recv_batch_deadline(&mut buf, limit, deadline);
                for m in buf.drain(..) {
                    tally.record(&m);
                }
                match res {
                    Some(Batch::Got) => {}
                    Some(Batch::Lagged(n)) => tally.lag_reported += n,
                    Some(Batch::Closed) => break,
                    None => {
                        tally.timed_out = true;
                        break;
                    }
                }
            }
        }
    }
    tally.end = Some(rx.last_delivery().unwrap_or_else(Instant::now));
    tally
}

fn publish<T: SyncTx>(tx: T, ids: Range<u64>, payload: Bytes, batch: Option<usize>) -> u64 {
    let mut sent = 0;
    match batch {
        None => {
            for id in ids {
                if tx
                    .send(Msg {
                        id,
                        payload: payload.clone(),
                    })
                    .is_err()
                {
                    break;
                }
                sent += 1;
            }
        }
        Some(size) => {
            let mut id = ids.start;
            while id < ids.end {
                let hi = (id + size as u64).min(ids.end);
                let chunk: Vec<Msg> = (id..hi)
                    .map(|id| Msg {
                        id,
                        payload: payload.clone(),
                    })
                    .collect();
                if tx.send_batch(chunk).is_err() {
                    break;
                }
                sent += hi - id;
                id = hi;
            }
        }
    }
    sent
}

fn single<Tx, Rx>(w: Wiring<Tx, Rx>) -> Option<(Tx, Rx)> {
    let mut txs = w.txs.into_iter();
    let mut rxs = w.rxs.into_iter();
    Some((txs.next()?, rxs.next()?))
}

/// Starts a consumer thread per receiver, each counting into a tally made by `tally`
/// ([`Tally::new`], or [`Tally::keyed`] for S7).
fn spawn_consumers<R: SyncRx>(
    rxs: Vec<R>,
    tally: fn(u64, &Bytes) -> Tally,
    range: u64,
    payload: &Bytes,
    deadline: Instant,
    batch: Option<usize>,
) -> Vec<thread::JoinHandle<Tally>> {
    rxs.into_iter()
        .map(|rx| {
            let tally = tally(range, payload);
            thread::spawn(move || consume(rx, tally, deadline, batch))
        })
        .collect()
}

fn join_consumers(handles: Vec<thread::JoinHandle<Tally>>) -> Vec<Tally> {
    handles
        .into_iter()
        .map(|h| h.join().expect("consumer thread panicked"))
        .collect()
}

/// A publisher thread; its count comes back over a channel so that waiting for it can
/// be bounded (a thread cannot be aborted: one still blocked past the deadline is left
/// behind and the run is flagged).
fn spawn_publisher(body: impl FnOnce() -> u64 + Send + 'static) -> mpsc::Receiver<u64> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(body());
    });
    rx
}

/// Waits for the publishers a little past the deadline (after the consumers: by then,
/// consumers that gave up have dropped their receivers, which frees a blocked publisher).
/// Returns whether one had to be left behind.
fn join_publishers(publishers: Vec<mpsc::Receiver<u64>>, deadline: Instant) -> bool {
    let until = deadline + Duration::from_secs(1);
    let mut timed_out = false;
    for p in publishers {
        match p.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(_) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => timed_out = true,
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!("publisher thread panicked"),
        }
    }
    timed_out
}

/// Waits for everything, then counts.
fn conclude(
    start: Instant,
    consumers: Vec<thread::JoinHandle<Tally>>,
    publishers: Vec<mpsc::Receiver<u64>>,
    deadline: Instant,
    per_group: u64,
    merge: bool,
) -> Outcome {
    let tallies = join_consumers(consumers);
    let pub_timed_out = join_publishers(publishers, deadline);
    let groups = if merge {
        vec![Tally::merge(tallies)]
    } else {
        tallies
    };
    let mut out = outcome_from(start, groups, per_group);
    out.timed_out |= pub_timed_out;
    out
}

fn one_to_one<P: ThreadPeer>(
    peer: &P,
    params: &Params,
    count: u64,
    payload: Bytes,
    batch: Option<usize>,
    deadline: Instant,
) -> Option<Outcome> {
    let (tx, rx) = single(peer.wire(Shape::Pair, params.capacity)?)?;
    let consumers = spawn_consumers(vec![rx], Tally::new, count, &payload, deadline, batch);
    let start = Instant::now();
    let publisher = spawn_publisher(move || publish(tx, 0..count, payload, batch));
    Some(conclude(
        start,
        consumers,
        vec![publisher],
        deadline,
        count,
        false,
    ))
}

fn competing<P: ThreadPeer>(
    peer: &P,
    params: &Params,
    payload: Bytes,
    deadline: Instant,
) -> Option<Outcome> {
    let n = params.messages;
    let w = peer.wire(Shape::Competing(params.consumers), params.capacity)?;
    let tx = w.txs.into_iter().next()?;
    let consumers = spawn_consumers(w.rxs, Tally::new, n, &payload, deadline, None);
    let start = Instant::now();
    let p = params.publishers as u64;
    let publishers: Vec<_> = (0..p)
        .map(|i| {
            let (tx, payload) = (tx.clone(), payload.clone());
            spawn_publisher(move || publish(tx, i * n / p..(i + 1) * n / p, payload, None))
        })
        .collect();
    drop(tx);
    Some(conclude(start, consumers, publishers, deadline, n, true))
}

fn fanout<P: ThreadPeer>(
    peer: &P,
    params: &Params,
    payload: Bytes,
    deadline: Instant,
) -> Option<Outcome> {
    let n = params.messages;
    let w = peer.wire(Shape::Fanout(params.consumers), params.capacity)?;
    let consumers = spawn_consumers(w.rxs, Tally::new, n, &payload, deadline, None);
    let txs = w.txs;
    let start = Instant::now();
    let publisher = spawn_publisher(move || {
        let mut sent = 0;
        'all: for id in 0..n {
            for tx in &txs {
                if tx
                    .send(Msg {
                        id,
                        payload: payload.clone(),
                    })
                    .is_err()
                {
                    break 'all;
                }
            }
            sent += 1;
        }
        sent
    });
    Some(conclude(
        start,
        consumers,
        vec![publisher],
        deadline,
        n,
        false,
    ))
}

fn partitioned<P: ThreadPeer>(
    peer: &P,
    params: &Params,
    payload: Bytes,
    deadline: Instant,
) -> Option<Outcome> {
    let n = params.messages;
    let w = peer.wire(Shape::Partitioned(params.consumers), params.capacity)?;
    let consumers = spawn_consumers(w.rxs, Tally::keyed, n, &payload, deadline, None);
    let txs = w.txs;
    let start = Instant::now();
    let publisher = spawn_publisher(move || {
        let mut sent = 0;
        for id in 0..n {
            let key = key_of(id);
            let msg = Msg {
                id,
                payload: payload.clone(),
            };
            let res = if txs.len() == 1 {
                txs[0].send_keyed(key, msg)
            } else {
                txs[partition_of(key, txs.len())].send(msg)
            };
            if res.is_err() {
                break;
            }
            sent += 1;
        }
        sent
    });
    Some(conclude(
        start,
        consumers,
        vec![publisher],
        deadline,
        n,
        true,
    ))
}

fn ping_pong<P: ThreadPeer>(
    peer: &P,
    params: &Params,
    payload: Bytes,
    deadline: Instant,
) -> Option<Outcome> {
    let (ping_tx, mut ping_rx) = single(peer.wire(Shape::Pair, params.capacity)?)?;
    let (pong_tx, mut pong_rx) = single(peer.wire(Shape::Pair, params.capacity)?)?;
    let echo = thread::spawn(move || loop {
        match ping_rx.recv_deadline(deadline) {
            Some(Recv::Msg(m)) => {
                if pong_tx.send(m).is_err() {
                    break;
                }
            }
            Some(Recv::Lagged(_)) => {}
            Some(Recv::Closed) | None => break,
        }
    });
    let trips = params.round_trips;
    let reply_timeout: Duration = params.idle * 5;
    let mut tally = Tally::new(trips, &payload);
    let mut rtts = Vec::with_capacity(trips as usize);
    let mut sent = 0u64;
    let start = Instant::now();
    'trips: for id in 0..trips {
        if start.elapsed() >= params.pingpong_budget {
            break;
        }
        let t0 = Instant::now();
        if ping_tx
            .send(Msg {
                id,
                payload: payload.clone(),
            })
            .is_err()
        {
            break;
        }
        sent += 1;
        let wait_until = (t0 + reply_timeout).min(deadline);
        loop {
            match pong_rx.recv_deadline(wait_until) {
                Some(Recv::Msg(m)) => {
                    tally.record(&m);
                    if m.id == id {
                        rtts.push(t0.elapsed());
                        break;
                    }
                }
                Some(Recv::Lagged(n)) => tally.lag_reported += n,
                Some(Recv::Closed) => break 'trips,
                None => {
                    if Instant::now() >= deadline {
                        tally.timed_out = true;
                        break 'trips;
                    }
                    break;
                }
            }
        }
    }
    let elapsed = start.elapsed();
    drop(ping_tx);
    // The echo thread ends when it sees the ping channel closed, or at the deadline.
    echo.join().expect("echo thread panicked");
    Some(ping_outcome(tally, rtts, sent, elapsed))
}
