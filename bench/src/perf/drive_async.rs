//! The scenarios written once over async channels ([`AsyncPeer`]), run on a fresh
//! multi-threaded Tokio runtime per run.
//!
//! Every wait is bounded by the run's deadline, so a peer that loses messages (and so never
//! lets its consumers finish) cannot hang the run; what did arrive is still counted. The
//! bound is applied from outside (the driver aborts a consumer task past the deadline and
//! then reads its tally), so the receive loop itself is a plain `recv().await` with no
//! timer per message, the same for every peer.

use core::future::Future;
use core::ops::Range;
use core::time::Duration;
use std::time::Instant;

use alloc::sync::Arc;

use bytes::Bytes;
use tokio::sync::{Mutex, OwnedMutexGuard};
use tokio::task::JoinHandle;

use super::{
    key_of, make_payload, outcome_from, partition_of, Batch, Disconnected, Msg, Outcome, Params,
    Recv, Scenario, Shape, Tally, TryRecv, Wiring,
};

/// The sending side of an async peer.
pub trait AsyncTx: Clone + Send + Sync + 'static {
    /// Sends one message, waiting while the channel is full.
    fn send(&self, msg: Msg) -> impl Future<Output = Result<(), Disconnected>> + Send;

    /// Sends a batch. The default sends one at a time; peers with a batch API override it.
    fn send_batch(&self, batch: Vec<Msg>) -> impl Future<Output = Result<(), Disconnected>> + Send {
        async move {
            for msg in batch {
                self.send(msg).await?;
            }
            Ok(())
        }
    }

    /// Sends a message with a routing key, for wirings whose one sender partitions by key
    /// itself. The default ignores the key.
    fn send_keyed(
        &self,
        key: u64,
        msg: Msg,
    ) -> impl Future<Output = Result<(), Disconnected>> + Send {
        let _ = key;
        self.send(msg)
    }
}

/// The receiving side of an async peer.
pub trait AsyncRx: Send + 'static {
    /// Waits for the next message (or the end of the stream). The driver may abort the
    /// task at the deadline.
    fn recv(&mut self) -> impl Future<Output = Recv> + Send;

    /// Takes a message if one is ready, without waiting.
    fn try_recv(&mut self) -> TryRecv;

    /// Waits for at least one message and appends up to about `limit` to `buf`. The default
    /// waits with [`AsyncRx::recv`] and then takes what is ready with [`AsyncRx::try_recv`].
    fn recv_batch<'a>(
        &'a mut self,
        buf: &'a mut Vec<Msg>,
        limit: usize,
    ) -> impl Future<Output = Batch> + Send + 'a {
        async move {
            let first = match self.recv().await {
                Recv::Msg(m) => m,
                Recv::Lagged(n) => return Batch::Lagged(n),
                Recv::Closed => return Batch::Closed,
            };
            buf.push(first);
            let mut got = 1;
            while got < limit {
                match self.try_recv() {
                    TryRecv::Msg(m) => {
                        buf.push(m);
                        got += 1;
                    }
                    // What is already in `buf` is counted by the caller either way.
                    TryRecv::Lagged(n) => return Batch::Lagged(n),
                    TryRecv::Empty | TryRecv::Closed => break,
                }
            }
            Batch::Got
        }
    }

    /// When the last message arrived, for peers that cannot signal the end of a stream and
    /// make their consumers wait out an idle period before giving up (that wait is not the
    /// peer's throughput). `None`: the end of the stream is when the consumer noticed it.
    fn last_delivery(&self) -> Option<Instant> {
        None
    }
}

/// An async implementation under test: how to wire each [`Shape`].
pub trait AsyncPeer {
    /// Sender type.
    type Tx: AsyncTx;
    /// Receiver type.
    type Rx: AsyncRx;

    /// Wires `shape` with channels of `capacity` messages. Runs inside the Tokio runtime of
    /// the run. `None`: this peer has no such shape.
    fn wire(
        &self,
        shape: Shape,
        capacity: usize,
    ) -> impl Future<Output = Option<Wiring<Self::Tx, Self::Rx>>>;
}

/// Runs `scenario` on `peer` on a fresh Tokio runtime with `params.workers` workers.
pub fn run<P: AsyncPeer>(peer: &P, scenario: Scenario, params: &Params) -> Option<Outcome> {
    // Allocated (and touched) before the clock starts.
    let payload = make_payload(params.payload_size_of(scenario));
    // Held until the run is over, so that freeing a 100 MiB payload is never timed as
    // part of whichever consumer happens to drop the last message.
    let keep_alive = payload.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(params.workers)
        .enable_all()
        .build()
        .expect("build tokio runtime");
    let deadline = Instant::now() + params.deadline;
    let outcome = rt.block_on(async {
        let n = params.messages;
        match scenario {
            Scenario::S1OneToOne => one_to_one(peer, params, n, payload, None, deadline).await,
            Scenario::S4Batches => {
                one_to_one(peer, params, n, payload, Some(params.batch), deadline).await
            }
            Scenario::S5Large1MiB => {
                one_to_one(peer, params, params.large_messages, payload, None, deadline).await
            }
            Scenario::S5Large100MiB => {
                one_to_one(peer, params, params.huge_messages, payload, None, deadline).await
            }
            Scenario::S2Competing => competing(peer, params, payload, deadline).await,
            Scenario::S3Fanout => fanout(peer, params, payload, deadline).await,
            Scenario::S6PingPong => ping_pong(peer, params, payload, deadline).await,
            Scenario::S7Partitioned => partitioned(peer, params, payload, deadline).await,
        }
    });
    // Wait for the runtime's threads to drop every task and exit before the next run
    // starts. Some peers leave tasks behind that never end (tokio-memq's cleanup loop,
    // which owns every message it retained); dropping them, and what they own, must not
    // run on the CPUs while the next implementation is measured. The bound only matters
    // for a task that never yields, which no peer has.
    rt.shutdown_timeout(Duration::from_secs(10));
    drop(keep_alive);
    outcome
}

fn tokio_deadline(deadline: Instant) -> tokio::time::Instant {
    tokio::time::Instant::from_std(deadline)
}

/// A consumer task and the tally it fills. The task holds the tally's lock for its whole
/// life, so the driver can read the tally once the task ended, even if the driver had to
/// abort it at the deadline: waits are bounded from outside, at no cost per message.
struct Consumer<S> {
    task: JoinHandle<()>,
    state: Arc<Mutex<Option<S>>>,
}

/// The state of a running task, locked for as long as the task lives.
struct Held<S>(OwnedMutexGuard<Option<S>>);

impl<S> core::ops::Deref for Held<S> {
    type Target = S;
    fn deref(&self) -> &S {
        self.0
            .as_ref()
            .expect("state is present while its task runs")
    }
}

impl<S> core::ops::DerefMut for Held<S> {
    fn deref_mut(&mut self) -> &mut S {
        self.0
            .as_mut()
            .expect("state is present while its task runs")
    }
}

fn spawn_with_state<S, F>(state: S, body: impl FnOnce(Held<S>) -> F) -> Consumer<S>
where
    S: Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let state = Arc::new(Mutex::new(Some(state)));
    let guard = state
        .clone()
        .try_lock_owned()
        .expect("a fresh mutex is unlocked");
    Consumer {
        task: tokio::spawn(body(Held(guard))),
        state,
    }
}

/// Waits for `consumer` until `deadline`, aborts it past that, and returns its state and
/// whether it had to be aborted.
async fn finish<S>(consumer: Consumer<S>, deadline: Instant) -> (S, bool) {
    let abort = consumer.task.abort_handle();
    let aborted = match tokio::time::timeout_at(tokio_deadline(deadline), consumer.task).await {
        Ok(Ok(())) => false,
        Ok(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Ok(Err(_)) => true,
        Err(_) => {
            abort.abort();
            true
        }
    };
    // Dropping the (finished or aborted) task releases the lock; this waits for that.
    let state = consumer
        .state
        .lock()
        .await
        .take()
        .expect("state is taken once");
    (state, aborted)
}

fn spawn_consumer<R: AsyncRx>(rx: R, tally: Tally, batch: Option<usize>) -> Consumer<Tally> {
    spawn_with_state(tally, move |tally| consume(rx, tally, batch))
}

async fn finish_consumers(consumers: Vec<Consumer<Tally>>, deadline: Instant) -> Vec<Tally> {
    let mut out = Vec::with_capacity(consumers.len());
    for c in consumers {
        let (mut tally, aborted) = finish(c, deadline).await;
        if aborted {
            tally.timed_out = true;
            tally.end = Some(Instant::now());
        }
        out.push(tally);
    }
    out
}

/// Receives until the stream ends, counting every message. Plain `recv().await`: the
/// deadline is enforced by aborting the task (see [`Consumer`]).
async fn consume<R: AsyncRx>(mut rx: R, mut guard: Held<Tally>, batch: Option<usize>) {
    let tally = &mut *guard;
    match batch {
        None => loop {
            match rx.recv().await {
                Recv::Msg(m) => tally.record(&m),
                Recv::Lagged(n) => tally.lag_reported += n,
                Recv::Closed => break,
            }
        },
        Some(limit) => {
            // Messages land in `buf` only after the wait, and are counted before the next
            // one, so an abort never loses a counted message.
            let mut buf = Vec::with_capacity(limit);
            loop {
                let res = rx.recv_batch(&mut buf, limit).await;
                for m in buf.drain(..) {
                    tally.record(&m);
                }
                match res {
                    Batch::Got => {}
                    Batch::Lagged(n) => tally.lag_reported += n,
                    Batch::Closed => break,
                }
            }
        }
    }
    tally.end = Some(rx.last_delivery().unwrap_or_else(Instant::now));
}

/// Publishes ids `ids` through one sender; returns how many were accepted.
async fn publish<T: AsyncTx>(tx: T, ids: Range<u64>, payload: Bytes, batch: Option<usize>) -> u64 {
    let mut sent = 0;
    match batch {
        None => {
            for id in ids {
                let msg = Msg {
                    id,
                    payload: payload.clone(),
                };
                if tx.send(msg).await.is_err() {
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
                if tx.send_batch(chunk).await.is_err() {
                    break;
                }
                sent += hi - id;
                id = hi;
            }
        }
    }
    sent
}

/// Waits for the publishers a little past the deadline (after the consumers: by then,
/// consumers that were aborted have dropped their receivers, which frees a publisher
/// blocked on a full channel).
async fn join_publishers(handles: Vec<JoinHandle<u64>>, deadline: Instant) -> bool {
    let mut timed_out = false;
    let dl = tokio_deadline(deadline + Duration::from_secs(1));
    for h in handles {
        let abort = h.abort_handle();
        match tokio::time::timeout_at(dl, h).await {
            Ok(res) => {
                res.expect("publisher task panicked");
            }
            Err(_) => {
                abort.abort();
                timed_out = true;
            }
        }
    }
    timed_out
}

fn single<Tx, Rx>(w: Wiring<Tx, Rx>) -> Option<(Tx, Rx)> {
    let mut txs = w.txs.into_iter();
    let mut rxs = w.rxs.into_iter();
    Some((txs.next()?, rxs.next()?))
}

/// Waits for everything, then counts.
async fn conclude(
    start: Instant,
    consumers: Vec<Consumer<Tally>>,
    publishers: Vec<JoinHandle<u64>>,
    deadline: Instant,
    per_group: u64,
    merge: bool,
) -> Outcome {
    let tallies = finish_consumers(consumers, deadline).await;
    let pub_timed_out = join_publishers(publishers, deadline).await;
    let groups = if merge {
        vec![Tally::merge(tallies)]
    } else {
        tallies
    };
    let mut out = outcome_from(start, groups, per_group);
    out.timed_out |= pub_timed_out;
    out
}

/// S1, S4, S5: one publisher, one consumer.
async fn one_to_one<P: AsyncPeer>(
    peer: &P,
    params: &Params,
    count: u64,
    payload: Bytes,
    batch: Option<usize>,
    deadline: Instant,
) -> Option<Outcome> {
    let (tx, rx) = single(peer.wire(Shape::Pair, params.capacity).await?)?;
    let consumer = spawn_consumer(rx, Tally::new(count, &payload), batch);
    let start = Instant::now();
    let publisher = tokio::spawn(publish(tx, 0..count, payload, batch));
    Some(
        conclude(
            start,
            vec![consumer],
            vec![publisher],
            deadline,
            count,
            false,
        )
        .await,
    )
}

/// S2: `publishers` publishers with disjoint id ranges, `consumers` competing consumers.
async fn competing<P: AsyncPeer>(
    peer: &P,
    params: &Params,
    payload: Bytes,
    deadline: Instant,
) -> Option<Outcome> {
    let n = params.messages;
    let w = peer
        .wire(Shape::Competing(params.consumers), params.capacity)
        .await?;
    let tx = w.txs.into_iter().next()?;
    let consumers: Vec<_> = w
        .rxs
        .into_iter()
        .map(|rx| spawn_consumer(rx, Tally::new(n, &payload), None))
        .collect();
    let start = Instant::now();
    let p = params.publishers as u64;
    let publishers: Vec<_> = (0..p)
        .map(|i| {
            tokio::spawn(publish(
                tx.clone(),
                i * n / p..(i + 1) * n / p,
                payload.clone(),
                None,
            ))
        })
        .collect();
    drop(tx);
    Some(conclude(start, consumers, publishers, deadline, n, true).await)
}

/// S3: one publisher, every subscriber gets every message.
async fn fanout<P: AsyncPeer>(
    peer: &P,
    params: &Params,
    payload: Bytes,
    deadline: Instant,
) -> Option<Outcome> {
    let n = params.messages;
    let w = peer
        .wire(Shape::Fanout(params.consumers), params.capacity)
        .await?;
    let consumers: Vec<_> = w
        .rxs
        .into_iter()
        .map(|rx| spawn_consumer(rx, Tally::new(n, &payload), None))
        .collect();
    let txs = w.txs;
    let start = Instant::now();
    let publisher = tokio::spawn(async move {
        let mut sent = 0;
        'all: for id in 0..n {
            for tx in &txs {
                if tx
                    .send(Msg {
                        id,
                        payload: payload.clone(),
                    })
                    .await
                    .is_err()
                {
                    break 'all;
                }
            }
            sent += 1;
        }
        sent
    });
    Some(conclude(start, consumers, vec![publisher], deadline, n, false).await)
}

/// S7: keyed messages over partitions, one group member per partition.
async fn partitioned<P: AsyncPeer>(
    peer: &P,
    params: &Params,
    payload: Bytes,
    deadline: Instant,
) -> Option<Outcome> {
    let n = params.messages;
    let w = peer
        .wire(Shape::Partitioned(params.consumers), params.capacity)
        .await?;
    let consumers: Vec<_> = w
        .rxs
        .into_iter()
        .map(|rx| spawn_consumer(rx, Tally::keyed(n, &payload), None))
        .collect();
    let txs = w.txs;
    let start = Instant::now();
    let publisher = tokio::spawn(async move {
        let mut sent = 0;
        for id in 0..n {
            let key = key_of(id);
            let msg = Msg {
                id,
                payload: payload.clone(),
            };
            let res = if txs.len() == 1 {
                txs[0].send_keyed(key, msg).await
            } else {
                txs[partition_of(key, txs.len())].send(msg).await
            };
            if res.is_err() {
                break;
            }
            sent += 1;
        }
        sent
    });
    Some(conclude(start, consumers, vec![publisher], deadline, n, true).await)
}

/// What the ping side of S6 has seen so far.
#[derive(Debug)]
struct PingState {
    tally: Tally,
    rtts: Vec<Duration>,
    sent: u64,
    elapsed: Duration,
}

/// S6: one message in flight, echoed back over a second channel. Both sides use plain
/// `recv().await`; the deadline aborts them (a lost reply would otherwise stall the ping
/// side until then, counted and flagged).
async fn ping_pong<P: AsyncPeer>(
    peer: &P,
    params: &Params,
    payload: Bytes,
    deadline: Instant,
) -> Option<Outcome> {
    let (ping_tx, mut ping_rx) = single(peer.wire(Shape::Pair, params.capacity).await?)?;
    let (pong_tx, mut pong_rx) = single(peer.wire(Shape::Pair, params.capacity).await?)?;
    let echo = spawn_with_state((), move |_guard| async move {
        loop {
            match ping_rx.recv().await {
                Recv::Msg(m) => {
                    if pong_tx.send(m).await.is_err() {
                        break;
                    }
                }
                Recv::Lagged(_) => {}
                Recv::Closed => break,
            }
        }
    });
    let trips = params.round_trips;
    let budget = params.pingpong_budget;
    let state = PingState {
        tally: Tally::new(trips, &payload),
        rtts: Vec::with_capacity(usize::try_from(trips).unwrap_or(0)),
        sent: 0,
        elapsed: Duration::ZERO,
    };
    let pinger = spawn_with_state(state, move |mut guard| async move {
        let st = &mut *guard;
        let start = Instant::now();
        'trips: for id in 0..trips {
            if start.elapsed() >= budget {
                break;
            }
            let t0 = Instant::now();
            if ping_tx
                .send(Msg {
                    id,
                    payload: payload.clone(),
                })
                .await
                .is_err()
            {
                break;
            }
            st.sent += 1;
            loop {
                match pong_rx.recv().await {
                    Recv::Msg(m) => {
                        st.tally.record(&m);
                        if m.id == id {
                            st.rtts.push(t0.elapsed());
                            st.elapsed = start.elapsed();
                            break;
                        }
                    }
                    Recv::Lagged(n) => st.tally.lag_reported += n,
                    Recv::Closed => break 'trips,
                }
            }
        }
        drop(ping_tx);
    });
    let (mut st, aborted) = finish(pinger, deadline).await;
    st.tally.timed_out |= aborted;
    // The echo side ends when it sees the ping channel closed (or at the deadline).
    let _ = finish(echo, deadline + Duration::from_secs(1)).await;
    Some(ping_outcome(st.tally, st.rtts, st.sent, st.elapsed))
}

/// Builds the S6 outcome: the rate is 1e9 / median round trip in ns.
pub fn ping_outcome(
    tally: Tally,
    mut rtts: Vec<Duration>,
    sent: u64,
    elapsed: Duration,
) -> Outcome {
    rtts.sort_unstable();
    let median = rtts.get(rtts.len() / 2).copied();
    Outcome {
        msgs_per_s: median.map_or(0.0, |m| 1e9 / (m.as_nanos().max(1) as f64)),
        lost: sent.saturating_sub(tally.distinct),
        duplicated: tally.duplicated,
        delivered: tally.distinct,
        expected: sent,
        elapsed,
        timed_out: tally.timed_out,
        out_of_range: tally.out_of_range,
        out_of_order: 0,
        split_keys: 0,
        payload_mismatch: tally.payload_mismatch,
        lag_reported: tally.lag_reported,
        median_rtt: median,
    }
}
