//! Bridges between a memq topic of this process and a Redis topic, each way, at least
//! once: a message is acknowledged on the side it comes from only after the other side
//! has it, so a restart of either side (or of the bridge) loses nothing and may repeat
//! what was in flight.
//!
//! - [`forward_to_redis`]: an explicit-ack group on the local topic; each delivery is
//!   published to the Redis partition of the same index (modulo the Redis topic's
//!   partition count), retried with backoff while Redis is away (the lease is renewed
//!   meanwhile), then acked.
//! - [`forward_from_redis`]: an explicit-ack group on the Redis topic under a fixed
//!   consumer name (a restarted bridge reads what was pending for it first); each
//!   delivery is published to the local partition of the same index (waiting for room
//!   under `Overflow::Block`, the lease renewed meanwhile), then acked in Redis.
//!
//! With the `durable` feature, the same two for memq's durable topics (memq-store's
//! `DurableTopic`), whose side survives a restart of its process too:
//!
//! - `forward_durable_to_redis`: a durable explicit-ack group; its committed position
//!   (written to the topic's directory every `commit_every` acks and when the bridge
//!   stops) is where a restarted bridge, or a restarted process, resumes; what was
//!   forwarded after the last write is forwarded again (at least once).
//! - `forward_redis_to_durable`: each Redis delivery is acked in Redis only after the
//!   durable publish returned (under `SyncPolicy::Always`, once the message is on the
//!   disk; under the other policies, once it is in the log file: safe from a crash of the
//!   process, not from a power loss until synced).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use memq_core::{AckConfig, StartAt, Topic};

use crate::rt::Task;
use crate::subscriber::backoff;
use crate::{Error, GroupConfig, RedisTopic};

/// Why a bridge could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum BridgeError {
    /// The local memq topic refused the group (for example a zero `ack_wait`).
    Memory(memq_core::Error),
    /// The durable topic refused the group (its state file, its configuration, I/O).
    #[cfg(feature = "durable")]
    Durable(memq_store::StoreError),
    /// Redis refused the group, or there is no runtime to run the bridge on
    /// ([`Error::NoRuntime`]).
    Redis(Error),
}

impl std::fmt::Display for BridgeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BridgeError::Memory(e) => write!(f, "bridge: {e}"),
            #[cfg(feature = "durable")]
            BridgeError::Durable(e) => write!(f, "bridge: {e}"),
            BridgeError::Redis(e) => write!(f, "bridge: {e}"),
        }
    }
}

impl std::error::Error for BridgeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BridgeError::Memory(e) => Some(e),
            #[cfg(feature = "durable")]
            BridgeError::Durable(e) => Some(e),
            BridgeError::Redis(e) => Some(e),
        }
    }
}

impl From<memq_core::Error> for BridgeError {
    fn from(e: memq_core::Error) -> Self {
        BridgeError::Memory(e)
    }
}

#[cfg(feature = "durable")]
impl From<memq_store::StoreError> for BridgeError {
    fn from(e: memq_store::StoreError) -> Self {
        BridgeError::Durable(e)
    }
}

impl From<Error> for BridgeError {
    fn from(e: Error) -> Self {
        BridgeError::Redis(e)
    }
}

/// Counters of a bridge.
#[derive(Debug, Default)]
pub struct BridgeCounters {
    forwarded: AtomicU64,
    retries: AtomicU64,
    lagged: AtomicU64,
}

impl BridgeCounters {
    /// Messages forwarded and acknowledged at their source.
    pub fn forwarded(&self) -> u64 {
        self.forwarded.load(Ordering::Relaxed)
    }

    /// Failed publishes that were retried.
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    /// Messages the source evicted before the bridge read them (only under a lossy
    /// overflow policy of the local topic, or trimming of the Redis stream).
    pub fn lagged(&self) -> u64 {
        self.lagged.load(Ordering::Relaxed)
    }
}

/// A running bridge; stops when dropped or with [`Bridge::stop`].
#[derive(Debug)]
pub struct Bridge {
    counters: Arc<BridgeCounters>,
    task: Option<Task>,
}

impl Bridge {
    /// Its counters.
    pub fn counters(&self) -> &BridgeCounters {
        &self.counters
    }

    /// Stops it and waits for its task to end. What was in flight comes back to the
    /// source group (at once for a local topic, after `ack_wait` or at the next start of
    /// the same bridge for Redis).
    pub async fn stop(mut self) {
        if let Some(t) = self.task.take() {
            t.stop().await;
        }
    }

    /// Whether its task has ended (the local topic was closed).
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(Task::is_finished)
    }
}

/// Forwards every message of `local` to `remote`, through the local explicit-ack group
/// `group` (created at `Earliest` if new; a bridge started again on the same topic goes
/// on from the group's position). Runs on the current Tokio runtime (or on smol, with the `smol` feature, outside Tokio).
///
/// # Errors
///
/// [`BridgeError::Memory`] with the errors of memq's `group_acked` (for example a zero
/// `ack_wait`); [`BridgeError::Redis`] with [`Error::NoRuntime`].
pub fn forward_to_redis(
    local: &Topic<Bytes>,
    group: &str,
    remote: RedisTopic,
    ack_wait: Duration,
) -> Result<Bridge, BridgeError> {
    let mut consumer = local.group_acked(
        group,
        StartAt::Earliest,
        AckConfig::new().ack_wait(ack_wait),
    )?;
    let counters = Arc::new(BridgeCounters::default());
    let c = counters.clone();
    let task = crate::rt::spawn(async move {
        loop {
            let d = match consumer.recv().await {
                Ok(d) => d,
                Err(memq_core::RecvError::Lagged(n)) => {
                    c.lagged.fetch_add(n, Ordering::Relaxed);
                    continue;
                }
                Err(_) => return,
            };
            let p = d.message().partition() % remote.partitions();
            let value = d.message().value().clone();
            publish_then_settle(&remote, p, value, &c, d).await;
        }
    })?;
    Ok(Bridge {
        counters,
        task: Some(task),
    })
}

/// Forwards every message of `remote` to `local`, through the Redis group `group`
/// (created at `Earliest` if new) under the consumer name `bridge-<group>`. Runs on the
/// current Tokio runtime.
///
/// # Errors
///
/// [`BridgeError::Redis`] with the errors of [`RedisTopic::group`] or
/// [`Error::NoRuntime`].
pub async fn forward_from_redis(
    remote: &RedisTopic,
    group: &str,
    local: Topic<Bytes>,
    ack_wait: Duration,
) -> Result<Bridge, BridgeError> {
    let config = GroupConfig::acked(ack_wait).consumer_name(format!("bridge-{group}"));
    let mut consumer = remote.group(group, StartAt::Earliest, config).await?;
    let counters = Arc::new(BridgeCounters::default());
    let c = counters.clone();
    let task = crate::rt::spawn(async move {
        let renew = (ack_wait / 3).max(Duration::from_millis(1));
        while let Ok(mut d) = consumer.recv_delivery().await {
            let p = d.partition() % local.partitions();
            let value = d.value().clone();
            let published = {
                let publish = local.publish_to(p, value);
                tokio::pin!(publish);
                loop {
                    tokio::select! {
                        biased;
                        r = &mut publish => break r,
                        _ = crate::rt::sleep(renew) => { let _ = d.touch().await; }
                    }
                }
            };
            match published {
                Ok(_) => {
                    // A failed ack leaves it pending: it comes back (at least once).
                    let _ = d.ack().await;
                    c.forwarded.fetch_add(1, Ordering::Relaxed);
                }
                // The local topic is closed: leave the message in Redis and stop.
                Err(_) => {
                    let _ = d.nack().await;
                    return;
                }
            }
        }
    })?;
    Ok(Bridge {
        counters,
        task: Some(task),
    })
}

/// A local delivery a bridge out of memq settles once Redis took its message: memq's
/// explicit-ack deliveries, and (with `durable`) a durable group's.
trait LocalLease {
    /// Renews the lease while Redis refuses the message.
    fn touch(&mut self);
    /// Settles it. A refused ack (the lease ran out meanwhile) means the message comes
    /// back and is forwarded again: at least once.
    fn ack(self);
}

impl LocalLease for memq_core::Delivery<Bytes> {
    fn touch(&mut self) {
        let _ = memq_core::Delivery::touch(self);
    }
    fn ack(self) {
        let _ = memq_core::Delivery::ack(self);
    }
}

#[cfg(feature = "durable")]
impl LocalLease for memq_store::Delivery {
    fn touch(&mut self) {
        let _ = memq_store::Delivery::touch(self);
    }
    fn ack(self) {
        let _ = memq_store::Delivery::ack(self);
    }
}

/// Publishes `value` to partition `p` of `remote` until Redis takes it, renewing the local
/// delivery's lease between attempts, then acks it. The two bridges out of memq (a
/// topic's group, a durable topic's group) share it.
async fn publish_then_settle(
    remote: &RedisTopic,
    p: u32,
    value: Bytes,
    c: &BridgeCounters,
    mut delivery: impl LocalLease,
) {
    let mut attempt = 0;
    loop {
        match remote.publish_to(p, value.clone()).await {
            Ok(_) => {
                delivery.ack();
                c.forwarded.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Err(_) => {
                c.retries.fetch_add(1, Ordering::Relaxed);
                delivery.touch();
                backoff(attempt).await;
                attempt += 1;
            }
        }
    }
}

/// Publishes with `publish` until it succeeds, renewing the Redis lease of `d` every
/// third of `ack_wait` while a publish waits, and retrying a failed publish with backoff
/// (counted) unless `retry` says the failure is final. Returns whether it was published.
#[cfg(feature = "durable")]
async fn publish_holding_lease<F, Fut, E>(
    d: &mut crate::RedisDelivery,
    ack_wait: Duration,
    counters: &BridgeCounters,
    mut publish: F,
    retry: impl Fn(&E) -> bool,
) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
{
    let renew = (ack_wait / 3).max(Duration::from_millis(1));
    let mut attempt = 0;
    loop {
        let published = {
            let publish = publish();
            tokio::pin!(publish);
            loop {
                tokio::select! {
                    biased;
                    r = &mut publish => break r,
                    _ = crate::rt::sleep(renew) => { let _ = d.touch().await; }
                }
            }
        };
        match published {
            Ok(()) => return true,
            Err(e) if retry(&e) => {
                counters.retries.fetch_add(1, Ordering::Relaxed);
                let _ = d.touch().await;
                backoff(attempt).await;
                attempt += 1;
            }
            Err(_) => return false,
        }
    }
}

/// Forwards every message of the durable topic `local` to `remote`, through the durable
/// explicit-ack group `group` (created at `Earliest` if new; a bridge started again, in
/// this process or after a restart of it, goes on from the group's committed position).
/// A message is acked in the group only once Redis has it; publishes that fail are
/// retried with backoff while Redis is away, the lease renewed meanwhile. Runs on the
/// current Tokio runtime.
///
/// The group writes its committed position every `commit_every` acks (memq-store's
/// `GroupConfig::commit_every`, 256 by default) and when the bridge stops: after a crash
/// of the process, what was forwarded since the last write is forwarded again (at least
/// once, never lost).
///
/// # Errors
///
/// `BridgeError::Durable` with the errors of memq-store's `DurableTopic::group` (a
/// damaged group state file, the group open in this process with another
/// configuration, an I/O error); [`BridgeError::Redis`] with [`Error::NoRuntime`].
#[cfg(feature = "durable")]
pub fn forward_durable_to_redis(
    local: &memq_store::DurableTopic,
    group: &str,
    remote: RedisTopic,
    ack_wait: Duration,
) -> Result<Bridge, BridgeError> {
    let mut consumer = local.group(
        group,
        StartAt::Earliest,
        memq_store::GroupConfig::acked(ack_wait),
    )?;
    let counters = Arc::new(BridgeCounters::default());
    let c = counters.clone();
    let task = crate::rt::spawn(async move {
        loop {
            let d = match consumer.recv_delivery().await {
                Ok(d) => d,
                Err(memq_store::DurableRecvError::Lagged(n)) => {
                    c.lagged.fetch_add(n, Ordering::Relaxed);
                    continue;
                }
                // The log could not be read now: try again after a pause.
                Err(memq_store::DurableRecvError::Store(_)) => {
                    c.retries.fetch_add(1, Ordering::Relaxed);
                    backoff(6).await;
                    continue;
                }
                // Closed and drained.
                Err(_) => return,
            };
            let p = d.message().partition % remote.partitions();
            let value = d.message().payload.clone();
            publish_then_settle(&remote, p, value, &c, d).await;
        }
    })?;
    Ok(Bridge {
        counters,
        task: Some(task),
    })
}

/// Forwards every message of `remote` to the durable topic `local`, through the Redis
/// group `group` (created at `Earliest` if new) under the consumer name
/// `bridge-<group>`: a message is acked in Redis only after the durable publish returned,
/// so a restart of Redis, of the bridge or of this process loses nothing and may repeat
/// what was in flight. Each message goes to the local partition of the same index
/// (modulo the local partition count). A publish the disk refused is retried with
/// backoff, the Redis lease renewed meanwhile; a closed topic stops the bridge and hands
/// the message back to the Redis group. Runs on the current Tokio runtime (or on smol, with the `smol` feature, outside Tokio).
///
/// # Errors
///
/// [`BridgeError::Redis`] with the errors of [`RedisTopic::group`] or
/// [`Error::NoRuntime`].
#[cfg(feature = "durable")]
pub async fn forward_redis_to_durable(
    remote: &RedisTopic,
    group: &str,
    local: memq_store::DurableTopic,
    ack_wait: Duration,
) -> Result<Bridge, BridgeError> {
    use memq_store::DurablePublishError;

    let config = GroupConfig::acked(ack_wait).consumer_name(format!("bridge-{group}"));
    let mut consumer = remote.group(group, StartAt::Earliest, config).await?;
    let counters = Arc::new(BridgeCounters::default());
    let c = counters.clone();
    let task = crate::rt::spawn(async move {
        while let Ok(mut d) = consumer.recv_delivery().await {
            let p = d.partition() % local.partitions();
            let value = d.value().clone();
            let published = publish_holding_lease(
                &mut d,
                ack_wait,
                &c,
                || {
                    let local = &local;
                    let value = value.clone();
                    async move { local.publish_to(p, value).await.map(|_| ()) }
                },
                // Full (under `Overflow::Reject`) and a refusing disk may pass; a closed
                // topic does not.
                |e: &DurablePublishError<Bytes>| {
                    matches!(
                        e,
                        DurablePublishError::Full(_) | DurablePublishError::Store(..)
                    )
                },
            )
            .await;
            if published {
                // A failed ack leaves it pending: it comes back (at least once).
                let _ = d.ack().await;
                c.forwarded.fetch_add(1, Ordering::Relaxed);
            } else {
                let _ = d.nack().await;
                return;
            }
        }
    })?;
    Ok(Bridge {
        counters,
        task: Some(task),
    })
}
