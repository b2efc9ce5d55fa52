//! `tokio-memq` 1.0.0 through its public API: `MessageQueue`, `Publisher::publish` /
//! `publish_batch`, `Subscriber::recv_timeout` / `recv_batch`, consumer groups
//! (`subscriber_group_with_options`) and partitioned topics (`publish_to_partitioned`,
//! `subscribe_partition`).
//!
//! Values go in its native mode (no serialization: the `Msg` is moved behind an `Arc` and
//! cloned out on receive).
//!
//! The topic has no `max_messages`: in tokio-memq that is not a bound that makes
//! publishers wait but a retention limit that drops the oldest message, read or not, and
//! set to the scenario's capacity of 1024 it lost most messages in every scenario. It has
//! no bounded lossless mode, so it runs unbounded here, as its own benchmarks run it, and
//! loses nothing.
//!
//! tokio-memq's `recv` sleeps 0–5 ms (a delay drawn per subscriber from the clock) after
//! every wait for a message, for "fair scheduling" between the members of a group, and
//! every subscriber is a group member to it. `recv_batch(1)` waits without that sleep,
//! but measured slower wherever a run is about throughput (S1, S3, S5, S7: the sleep
//! comes only after a wait, rare while the consumer trails an unbounded log), so the
//! harness receives with `recv`. Only S6, one message in flight, pays the sleep on every
//! round trip: 167–230 round trips/s with `recv` against 34–40K with `recv_batch(1)`
//! (docs/PERF-NOTES.md); memq's S6 row is more than 20 × either.
//!
//! tokio-memq has no way to close a topic, so a consumer cannot know when it has
//! everything. Each receiver therefore waits in slices of `idle`, and
//! reports the end of the stream after every sender is dropped and a whole slice passed
//! with nothing. The run's rate is measured to the last delivery, not to that idle tail.

use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, Ordering};
use core::time::Duration;
use std::time::Instant;

use tokio_memq::mq::{
    AsyncMessagePublisher, ConsumptionMode, MessageSubscriber, PartitionRouting, Publisher,
    SerializationFormat, Subscriber, TopicMessage, TopicOptions,
};
use tokio_memq::MessageQueue;

use crate::perf::{
    AsyncPeer, AsyncRx, AsyncTx, Batch, Disconnected, Msg, Params, Recv, Shape, TryRecv, Wiring,
    KEYS,
};

const TOPIC: &str = "bench";
const GROUP: &str = "bench-group";

/// The tokio-memq row.
#[derive(Clone, Copy, Debug)]
pub struct TokioMemq {
    idle: Duration,
}

impl TokioMemq {
    /// A peer whose consumers give up after `params.idle` of silence once publishing ended.
    pub fn new(params: &Params) -> TokioMemq {
        TokioMemq { idle: params.idle }
    }
}

/// Sets the "publishing is over" flag when the last sender handle is dropped.
struct Done(Arc<AtomicBool>);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

impl core::fmt::Debug for Done {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("Done")
            .field(&self.0.load(Ordering::Relaxed))
            .finish()
    }
}

/// A publishing handle (cloned per publisher).
#[derive(Clone)]
pub struct MemqTx {
    mq: MessageQueue,
    publisher: Publisher,
    partitioned: bool,
    /// The topic's name and every key's string, made once: a keyed message then costs
    /// tokio-memq no allocation beyond its own payload `Arc`.
    topic: Arc<String>,
    keys: Arc<Vec<Arc<String>>>,
    _done: Arc<Done>,
}

impl core::fmt::Debug for MemqTx {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MemqTx")
            .field("partitioned", &self.partitioned)
            .finish_non_exhaustive()
    }
}

/// A subscriber, plus what it needs to notice the end of the stream.
pub struct MemqRx {
    sub: Subscriber,
    done: Arc<AtomicBool>,
    idle: Duration,
    last: Option<Instant>,
}

impl core::fmt::Debug for MemqRx {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MemqRx")
            .field("topic", &self.sub.topic())
            .finish_non_exhaustive()
    }
}

/// Unbounded retention (see the module docs): the scenario's capacity is not applied.
fn options(_capacity: usize) -> TopicOptions {
    TopicOptions {
        max_messages: None,
        ..TopicOptions::default()
    }
}

impl AsyncTx for MemqTx {
    async fn send(&self, msg: Msg) -> Result<(), Disconnected> {
        self.publisher.publish(msg).await.map_err(|_| Disconnected)
    }

    async fn send_batch(&self, batch: Vec<Msg>) -> Result<(), Disconnected> {
        self.publisher
            .publish_batch(batch)
            .await
            .map_err(|_| Disconnected)
    }

    async fn send_keyed(&self, key: u64, msg: Msg) -> Result<(), Disconnected> {
        if !self.partitioned {
            return self.send(msg).await;
        }
        let mut message =
            TopicMessage::new_shared_topic(self.topic.clone(), msg, SerializationFormat::Native)
                .map_err(|_| Disconnected)?;
        message.key = Some(self.keys[key as usize].clone());
        self.mq
            .publish_to_partitioned(message)
            .await
            .map_err(|_| Disconnected)
    }
}

impl MemqRx {
    fn delivered(&mut self, message: &TopicMessage) -> Option<Msg> {
        // A value that does not come back as a `Msg` is not counted: it shows up as lost.
        let msg = message.deserialize::<Msg>().ok()?;
        self.last = Some(Instant::now());
        Some(msg)
    }
}

impl AsyncRx for MemqRx {
    async fn recv(&mut self) -> Recv {
        loop {
            match self.sub.recv_timeout(self.idle).await {
                Ok(Some(message)) => {
                    if let Some(msg) = self.delivered(&message) {
                        return Recv::Msg(msg);
                    }
                }
                Ok(None) => {
                    if self.done.load(Ordering::Acquire) {
                        return Recv::Closed;
                    }
                }
                Err(_) => return Recv::Closed,
            }
        }
    }

    fn try_recv(&mut self) -> TryRecv {
        // tokio-memq's `try_recv` is itself async; the default batch path is not used
        // (`recv_batch` below calls its batch API).
        TryRecv::Empty
    }

    async fn recv_batch(&mut self, buf: &mut Vec<Msg>, limit: usize) -> Batch {
        loop {
            // `recv_batch` waits without a timeout, so bound each wait by `idle`.
            match tokio::time::timeout(self.idle, self.sub.recv_batch(limit)).await {
                Ok(Ok(messages)) => {
                    let before = buf.len();
                    for message in &messages {
                        if let Some(msg) = self.delivered(message) {
                            buf.push(msg);
                        }
                    }
                    if buf.len() > before {
                        return Batch::Got;
                    }
                }
                Ok(Err(_)) => return Batch::Closed,
                Err(_) => {
                    if self.done.load(Ordering::Acquire) {
                        return Batch::Closed;
                    }
                }
            }
        }
    }

    fn last_delivery(&self) -> Option<Instant> {
        self.last
    }
}

impl AsyncPeer for TokioMemq {
    type Tx = MemqTx;
    type Rx = MemqRx;

    async fn wire(&self, shape: Shape, capacity: usize) -> Option<Wiring<Self::Tx, Self::Rx>> {
        // A queue per wiring: S6 wires two independent pairs.
        let mq = MessageQueue::new();
        let done = Arc::new(AtomicBool::new(false));
        let topic = TOPIC.to_owned();
        let opts = options(capacity);
        let mut subs = Vec::new();
        let mut partitioned = false;
        match shape {
            Shape::Pair => {
                subs.push(mq.subscriber_with_options(topic.clone(), opts).await.ok()?);
            }
            Shape::Fanout(n) => {
                for _ in 0..n {
                    subs.push(
                        mq.subscriber_with_options(topic.clone(), opts.clone())
                            .await
                            .ok()?,
                    );
                }
            }
            Shape::Competing(n) => {
                for _ in 0..n {
                    let sub = mq
                        .subscriber_group_with_options(
                            topic.clone(),
                            opts.clone(),
                            GROUP.to_owned(),
                            ConsumptionMode::Earliest,
                        )
                        .await
                        .ok()?;
                    subs.push(sub);
                }
            }
            Shape::Partitioned(n) => {
                partitioned = true;
                mq.create_partitioned_topic(topic.clone(), opts, n)
                    .await
                    .ok()?;
                // "message" is the only Hash argument that makes it hash each message's key.
                mq.set_partition_routing(topic.clone(), PartitionRouting::Hash("message".into()))
                    .await
                    .ok()?;
                for p in 0..n {
                    let sub = mq
                        .subscribe_partition(
                            topic.clone(),
                            p,
                            Some(GROUP.to_owned()),
                            ConsumptionMode::Earliest,
                        )
                        .await
                        .ok()?;
                    subs.push(sub);
                }
            }
        }
        let tx = MemqTx {
            topic: Arc::new(topic.clone()),
            keys: Arc::new((0..KEYS).map(|k| Arc::new(format!("k{k}"))).collect()),
            publisher: mq.publisher(topic),
            mq,
            partitioned,
            _done: Arc::new(Done(done.clone())),
        };
        let rxs = subs
            .into_iter()
            .map(|sub| MemqRx {
                sub,
                done: done.clone(),
                idle: self.idle,
                last: None,
            })
            .collect();
        Some(Wiring { txs: vec![tx], rxs })
    }
}
