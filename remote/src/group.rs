//! Consumer groups on a Redis topic: [`RedisConsumer`] (a member; one `XREADGROUP` reader
//! task per partition it reads, on a connection of its own) and [`RedisDelivery`] (a
//! lease: ack, nack with a delay, touch, reject), leases on the pending-entries list,
//! expired leases taken back with `XAUTOCLAIM`, and dead letters after `max_deliveries`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use memq_core::{Backoff, DeadLetterReason, StartAt};
use redis::Value;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use crate::conn::Conn;
use crate::entry::{self, id_before, id_of, now_ms};
use crate::subscriber::{backoff, connect_with_backoff, BLOCK};
use crate::topic::{check_name, check_start, RedisTopic};
use crate::{Error, RecvError, RedisMessage};

/// A lease operation that holds only if the caller still owns the lease: the entry is
/// pending for this consumer with the same delivery count as when it was handed over.
/// `XAUTOCLAIM` (an expired lease taken back) raises the count, so an old lease is told
/// apart from the new one even within one consumer.
const LEASE_SCRIPT: &str = r"
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] or tonumber(p[1][4]) ~= tonumber(ARGV[4]) then return 0 end
if ARGV[5] == 'ack' then return redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) end
if ARGV[5] == 'check' then return 1 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, ARGV[2], 'IDLE', ARGV[6], 'JUSTID')
return 1
";

/// How a group's members settle messages, and where dead letters go.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use memq_core::Backoff;
/// use memq_redis::GroupConfig;
///
/// let config = GroupConfig::acked(Duration::from_secs(30))
///     .max_deliveries(5)
///     .max_in_flight(16)
///     .backoff(Backoff::exponential(Duration::from_secs(1), Duration::from_secs(20)));
/// assert!(config.is_explicit());
/// ```
#[derive(Clone, Debug)]
pub struct GroupConfig {
    ack_wait: Duration,
    explicit: bool,
    max_deliveries: Option<u32>,
    max_in_flight: usize,
    backoff: Backoff,
    dead_letter: Option<RedisTopic>,
    partitions: Option<Vec<u32>>,
    rebalance: Option<Duration>,
    consumer: Option<String>,
    claim_interval: Option<Duration>,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig::auto()
    }
}

impl GroupConfig {
    /// Automatic commit: a message is acknowledged (`XACK`) as it is handed over.
    pub fn auto() -> Self {
        GroupConfig {
            ack_wait: Duration::from_secs(30),
            explicit: false,
            max_deliveries: None,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            backoff: Backoff::none(),
            dead_letter: None,
            partitions: None,
            rebalance: None,
            consumer: None,
            claim_interval: None,
        }
    }

    /// Explicit acks: a delivery is a lease of `ack_wait`; an expired lease returns the
    /// message to the group (any member takes it back with `XAUTOCLAIM`).
    pub fn acked(ack_wait: Duration) -> Self {
        GroupConfig {
            ack_wait,
            explicit: true,
            ..GroupConfig::auto()
        }
    }

    /// After `n` deliveries without an ack, the next time the message would be delivered
    /// it goes to the dead-letter topic instead (or is dropped and counted, without one).
    pub fn max_deliveries(mut self, n: u32) -> Self {
        self.max_deliveries = Some(n);
        self
    }

    /// At most `n` deliveries of an explicit-ack group out and not settled per partition
    /// this member reads (default 1024, as memq; 0 is refused when joining): flow
    /// control, as memq's `AckConfig::max_in_flight`. While a partition has `n` out, its
    /// reader fetches nothing from it (new messages stay in the stream, expired leases
    /// are left for other members) until one is acked, nacked, rejected or dropped.
    ///
    /// memq counts this per partition of the group, over all its members; here it is per
    /// member and partition (Redis keeps no count a member could reserve a slot of
    /// atomically while it blocks): `k` members of a group may have up to `k * n` out on
    /// one partition. Give each member `n / k` for a group-wide bound. A delivery whose
    /// lease ran out still counts until it is settled or dropped.
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n;
        self
    }

    /// Delays before a redelivery, by delivery count, as memq's `AckConfig::backoff`:
    /// applied by [`RedisDelivery::nack`] and to a delivery dropped unsettled (an
    /// explicit [`RedisDelivery::nack_after`] gives its own delay). Each delay is cut to
    /// `ack_wait`, as a nack delay is (see [`RedisDelivery::nack_after`]). Unlike memq, a
    /// lease that runs out is taken back after `ack_wait` without the backoff delay
    /// (Redis's `XAUTOCLAIM` has one idle time for all entries): include the delay in
    /// `ack_wait`, or nack failed work rather than letting its lease run out.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Where dead letters go: each is published there (with its origin) before it is
    /// acknowledged in this group, so a failure between the two duplicates it rather than
    /// losing it.
    pub fn dead_letter(mut self, topic: RedisTopic) -> Self {
        self.dead_letter = Some(topic);
        self
    }

    /// Reads only these partitions (per-partition ownership: give each member its own
    /// partitions to keep per-key order; without this every member competes on every
    /// partition, see the crate docs).
    pub fn partitions(mut self, partitions: Vec<u32>) -> Self {
        self.partitions = Some(partitions);
        self
    }

    /// Per-partition ownership, assigned and rebalanced automatically, as memq assigns a
    /// partitioned topic's partitions to a group's members: each partition is read by
    /// one member at a time, so per-key order holds across members; when members join or
    /// leave, the partitions are dealt out again (partition `p` to the `p mod k`-th of
    /// the `k` live members in name order).
    ///
    /// Members are tracked in Redis: each heartbeats its entry in the group's member
    /// hash, and holds each partition it owns with an owner key, both renewed every
    /// `session / 4` and lasting `session`. A member that leaves (dropped) gives its
    /// partitions up at once; one that crashes or loses Redis gives them up when its
    /// `session` runs out (one that merely lost Redis, or whose heartbeats keep taking
    /// longer than `session / 4`, stops reading them itself before that). A partition
    /// changes hands only after its old owner stopped its reader, but what that reader
    /// had fetched stays the old owner's: the one message it fetched ahead is still
    /// handed to it, and what it does not settle comes back after `ack_wait`; per-key
    /// order can break there, at the hand-over, as with any redelivery. Excludes
    /// [`GroupConfig::partitions`]; `session` must not be zero.
    pub fn rebalance(mut self, session: Duration) -> Self {
        self.rebalance = Some(session);
        self
    }

    /// The consumer name in Redis (by default one unique to this member). A member that
    /// comes back under the same name, as the bridge does, reads its own pending
    /// messages first.
    pub fn consumer_name(mut self, name: impl Into<String>) -> Self {
        self.consumer = Some(name.into());
        self
    }

    /// How often each reader looks for expired leases and delayed nacks to take back
    /// (`XAUTOCLAIM`); by default `ack_wait / 4`, at least 10 ms and at most 1 s.
    pub fn claim_interval(mut self, every: Duration) -> Self {
        self.claim_interval = Some(every);
        self
    }

    /// Whether deliveries are leases to settle.
    pub fn is_explicit(&self) -> bool {
        self.explicit
    }
}

/// Counters of one member.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConsumerCounters {
    /// Deliveries handed over (first deliveries and redeliveries).
    pub delivered: u64,
    /// Of them, messages taken back from an expired lease or a nack.
    pub redelivered: u64,
    /// Messages this member moved to the dead-letter topic (or dropped without one).
    pub dead_lettered: u64,
    /// Pending messages found trimmed from the stream (acknowledged, counted here).
    pub evicted: u64,
    /// Failed reads or connects that were retried.
    pub retries: u64,
}

#[derive(Default)]
struct Counters {
    delivered: AtomicU64,
    redelivered: AtomicU64,
    dead_lettered: AtomicU64,
    evicted: AtomicU64,
    retries: AtomicU64,
}

pub(crate) struct Ctx {
    pub(crate) topic: RedisTopic,
    pub(crate) group: String,
    pub(crate) consumer: String,
    config: GroupConfig,
    claim_every: Duration,
    counters: Counters,
    script: redis::Script,
}

impl Ctx {
    /// Counts a failed Redis operation that is retried.
    pub(crate) fn count_retry(&self) {
        self.counters.retries.fetch_add(1, Ordering::Relaxed);
    }
}

/// A member of a consumer group on a Redis topic: each message goes to exactly one
/// member (`XREADGROUP`), in any process; the group outlives its members.
pub struct RedisConsumer {
    ctx: Arc<Ctx>,
    rx: mpsc::Receiver<RedisDelivery>,
    tasks: Vec<crate::rt::Task>,
    /// The partitions it reads now.
    assignment: Arc<std::sync::Mutex<Vec<u32>>>,
}

impl Drop for RedisConsumer {
    fn drop(&mut self) {
        // A rebalancing member's coordinator sees the member gone (its channel closed),
        // stops the readers, then gives its partitions up: left to run to that end.
        if self.ctx.config.rebalance.is_some() {
            self.tasks.drain(..).for_each(crate::rt::Task::detach);
        }
    }
}

impl std::fmt::Debug for RedisConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConsumer")
            .field("group", &self.ctx.group)
            .field("consumer", &self.ctx.consumer)
            .finish_non_exhaustive()
    }
}

/// A message leased to one member of an explicit-ack group, to `ack`, `nack`, `touch` or
/// `reject`. Dropped unsettled, it goes back to the group after the group's backoff
/// delay, at once without one (when dropped inside a Tokio runtime, or anywhere with the
/// `smol` feature; otherwise when its lease runs out).
pub struct RedisDelivery {
    message: RedisMessage,
    deliveries: u32,
    ctx: Arc<Ctx>,
    settled: bool,
    /// When its reader fetched it (its lease in Redis started then).
    fetched: Instant,
    /// Its slot under `max_in_flight`, given back when it is settled or dropped.
    _slot: Option<OwnedSemaphorePermit>,
}

impl std::fmt::Debug for RedisDelivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisDelivery")
            .field("message", &self.message)
            .field("deliveries", &self.deliveries)
            .finish_non_exhaustive()
    }
}

/// memq's default `max_in_flight`.
const DEFAULT_MAX_IN_FLIGHT: usize = 1024;

static NEXT_CONSUMER: AtomicU64 = AtomicU64::new(0);

fn consumer_name() -> String {
    let n = NEXT_CONSUMER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("memq-{}-{n}-{nanos:x}", std::process::id())
}

impl RedisTopic {
    /// Joins the group `name`, creating it at `start` on each partition where it does not
    /// exist (an existing group goes on from its own position, and `start` is ignored).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a bad name, a zero `ack_wait`, `max_deliveries` or
    /// `max_in_flight`, or no partitions; [`Error::PartitionOutOfRange`]; [`Error::OffsetOutOfRange`] for
    /// a new group at `StartAt::Offset(n)` past the end of one of its partitions (as
    /// memq; nothing is created then); [`Error::Redis`].
    pub async fn group(
        &self,
        name: &str,
        start: StartAt,
        config: GroupConfig,
    ) -> Result<RedisConsumer, Error> {
        check_name(name)?;
        if config.ack_wait.is_zero() {
            return Err(Error::InvalidArgument("ack_wait must not be zero"));
        }
        if config.max_deliveries == Some(0) {
            return Err(Error::InvalidArgument("max_deliveries must not be zero"));
        }
        if config.max_in_flight == 0 {
            return Err(Error::InvalidArgument("max_in_flight must not be zero"));
        }
        if let Some(session) = config.rebalance {
            if session.is_zero() {
                return Err(Error::InvalidArgument(
                    "a rebalance session must not be zero",
                ));
            }
            if config.partitions.is_some() {
                return Err(Error::InvalidArgument(
                    "partitions given by hand and rebalancing exclude each other",
                ));
            }
        }
        let partitions = match &config.partitions {
            Some(ps) => ps.clone(),
            None => (0..self.partitions()).collect(),
        };
        if partitions.is_empty() {
            return Err(Error::InvalidArgument(
                "a member must read at least one partition",
            ));
        }
        if let Some(&p) = partitions.iter().find(|&&p| p >= self.partitions()) {
            return Err(Error::PartitionOutOfRange {
                partition: p,
                partitions: self.partitions(),
            });
        }
        // A new group starting past the end of a partition is refused before any
        // partition's group is made.
        check_start(self, &partitions, start, Some(name)).await?;
        let mut conn = self.redis().conn();
        for &p in &partitions {
            let id = match start {
                StartAt::Earliest => "0-0".to_string(),
                StartAt::Latest => "$".to_string(),
                StartAt::Offset(n) => id_before(n),
            };
            create_group(&mut conn, self.stream_key_of(p), name, &id).await?;
        }
        let claim_every = config.claim_interval.unwrap_or_else(|| {
            (config.ack_wait / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
        });
        let ctx = Arc::new(Ctx {
            topic: self.clone(),
            group: name.to_string(),
            consumer: config.consumer.clone().unwrap_or_else(consumer_name),
            config,
            claim_every,
            counters: Counters::default(),
            script: redis::Script::new(LEASE_SCRIPT),
        });
        // One message of read-ahead per partition: the lease of a message starts when its
        // reader fetched it.
        let (tx, rx) = mpsc::channel(1);
        let (tasks, assignment) = match ctx.config.rebalance {
            Some(session) => {
                let assignment = Arc::new(std::sync::Mutex::new(Vec::new()));
                let coordinator =
                    crate::rebalance::coordinate(ctx.clone(), tx, assignment.clone(), session);
                (vec![crate::rt::spawn(coordinator)?], assignment)
            }
            None => {
                let tasks = partitions
                    .iter()
                    .map(|&p| crate::rt::spawn(read_group(ctx.clone(), p, tx.clone())))
                    .collect::<Result<_, _>>()?;
                (tasks, Arc::new(std::sync::Mutex::new(partitions)))
            }
        };
        Ok(RedisConsumer {
            ctx,
            rx,
            tasks,
            assignment,
        })
    }
}

async fn create_group(conn: &mut Conn, key: &str, group: &str, id: &str) -> Result<(), Error> {
    let r: redis::RedisResult<Value> = conn
        .query(
            redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(key)
                .arg(group)
                .arg(id)
                .arg("MKSTREAM"),
        )
        .await;
    match r {
        Ok(_) => Ok(()),
        Err(e) if e.code() == Some("BUSYGROUP") => Ok(()),
        Err(e) => Err(e.into()),
    }
}

impl RedisConsumer {
    /// The group's name.
    pub fn group_name(&self) -> &str {
        &self.ctx.group
    }

    /// This member's consumer name in Redis.
    pub fn consumer_name(&self) -> &str {
        &self.ctx.consumer
    }

    /// The partitions this member reads now: those given with
    /// [`GroupConfig::partitions`] (every partition by default), or, with
    /// [`GroupConfig::rebalance`], those it owns now (they move when members join or
    /// leave; none until its first heartbeat).
    pub fn assignment(&self) -> Vec<u32> {
        self.assignment
            .lock()
            .map(|a| a.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// This member's counters.
    pub fn counters(&self) -> ConsumerCounters {
        let c = &self.ctx.counters;
        ConsumerCounters {
            delivered: c.delivered.load(Ordering::Relaxed),
            redelivered: c.redelivered.load(Ordering::Relaxed),
            dead_lettered: c.dead_lettered.load(Ordering::Relaxed),
            evicted: c.evicted.load(Ordering::Relaxed),
            retries: c.retries.load(Ordering::Relaxed),
        }
    }

    /// Receives the next delivery, a lease to settle (explicit-ack groups only).
    ///
    /// # Errors
    ///
    /// [`RecvError::Error`] with [`Error::InvalidArgument`] on an automatic-commit group;
    /// [`RecvError::Closed`] if the member's readers ended.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a receive dropped before it completes loses no message (what its
    /// readers fetched stays for the next receive).
    pub async fn recv_delivery(&mut self) -> Result<RedisDelivery, RecvError> {
        if !self.ctx.config.explicit {
            return Err(RecvError::Error(Error::InvalidArgument(
                "recv_delivery on an automatic-commit group",
            )));
        }
        loop {
            let mut d = self.rx.recv().await.ok_or(RecvError::Closed)?;
            if self.fresh(&mut d).await {
                return Ok(d);
            }
        }
    }

    /// Whether `d`, fetched ahead, is still this member's to hand over: a delivery that
    /// waited in the read-ahead for a while gets its lease renewed first (so that a lease
    /// counts from the hand-over, as in memq); one whose lease was taken back meanwhile
    /// is skipped (the member that took it back delivers it).
    async fn fresh(&self, d: &mut RedisDelivery) -> bool {
        if d.fetched.elapsed() < self.ctx.claim_every {
            return true;
        }
        match d.touch().await {
            Ok(()) => {
                d.fetched = Instant::now();
                true
            }
            Err(Error::LeaseExpired) => {
                d.settled = true;
                false
            }
            // Cannot tell now: hand it over; its ack says whether the lease held.
            Err(_) => true,
        }
    }

    /// [`RedisConsumer::recv_delivery`] for at most `timeout`: `Ok(None)` if nothing came.
    ///
    /// # Errors
    ///
    /// As [`RedisConsumer::recv_delivery`].
    pub async fn recv_delivery_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<RedisDelivery>, RecvError> {
        match crate::rt::timeout(timeout, self.recv_delivery()).await {
            Some(r) => r.map(Some),
            None => Ok(None),
        }
    }

    /// Receives the next message and acknowledges it at once (on an explicit-ack group
    /// too): at most once for this member, unless the ack fails, when the message comes
    /// back after `ack_wait` (at least once).
    ///
    /// # Errors
    ///
    /// [`RecvError::Closed`] if the member's readers ended.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe until a message is taken; a receive dropped during its `XACK` leaves
    /// the message to come back after `ack_wait`.
    pub async fn recv(&mut self) -> Result<RedisMessage, RecvError> {
        loop {
            let mut d = self.rx.recv().await.ok_or(RecvError::Closed)?;
            d.settled = true;
            match d.lease_op("ack", 0).await {
                // Taken back by another member while it waited here: that one has it.
                Err(Error::LeaseExpired) => continue,
                // Acked, or unknown (then it comes back after `ack_wait`).
                _ => return Ok(d.message.clone()),
            }
        }
    }

    /// [`RedisConsumer::recv`] for at most `timeout`: `Ok(None)` if nothing came.
    ///
    /// # Errors
    ///
    /// As [`RedisConsumer::recv`].
    pub async fn recv_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<RedisMessage>, RecvError> {
        match crate::rt::timeout(timeout, self.recv()).await {
            Some(r) => r.map(Some),
            None => Ok(None),
        }
    }
}

impl RedisDelivery {
    /// The message.
    pub fn message(&self) -> &RedisMessage {
        &self.message
    }

    /// Its bytes.
    pub fn value(&self) -> &Bytes {
        &self.message.payload
    }

    /// Its offset.
    pub fn offset(&self) -> u64 {
        self.message.offset
    }

    /// Its partition.
    pub fn partition(&self) -> u32 {
        self.message.partition
    }

    /// How many times it has been delivered, this time included (Redis's delivery count).
    pub fn deliveries(&self) -> u32 {
        self.deliveries
    }

    async fn lease_op(&self, op: &str, idle_ms: u64) -> Result<(), Error> {
        let ctx = &self.ctx;
        let mut conn = ctx.topic.redis().conn();
        let key = ctx.topic.stream_key_of(self.message.partition);
        let mut inv = ctx.script.prepare_invoke();
        inv.key(key)
            .arg(&ctx.group)
            .arg(id_of(self.message.offset))
            .arg(&ctx.consumer)
            .arg(self.deliveries)
            .arg(op)
            .arg(idle_ms);
        let n: i64 = match &mut conn {
            Conn::Single(c) => inv.invoke_async(c).await?,
            Conn::Cluster(c) => inv.invoke_async(c).await?,
        };
        if n == 0 {
            return Err(Error::LeaseExpired);
        }
        Ok(())
    }

    /// Acknowledges it: never delivered again.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseExpired`] if its lease was taken back (another member, or this one,
    /// holds it again) or it was settled; [`Error::Redis`] (then it comes back after
    /// `ack_wait`, at least once).
    pub async fn ack(mut self) -> Result<(), Error> {
        self.settled = true;
        self.lease_op("ack", 0).await
    }

    /// Returns it to the group for redelivery after the group's
    /// [`backoff`](GroupConfig::backoff) delay for its delivery count (at once without
    /// one).
    ///
    /// # Errors
    ///
    /// As [`RedisDelivery::ack`].
    pub async fn nack(self) -> Result<(), Error> {
        let delay = self.ctx.config.backoff.delay(self.deliveries);
        self.nack_after(delay).await
    }

    /// Returns it to the group for redelivery after `delay`, done in Redis by setting its
    /// idle time to `ack_wait - delay` (`XCLAIM ... IDLE`), so that `XAUTOCLAIM` takes it
    /// back `delay` later, in any member of any process. A delay longer than `ack_wait`
    /// is cut to `ack_wait` (Redis cannot set a delivery time in the future).
    ///
    /// # Errors
    ///
    /// As [`RedisDelivery::ack`].
    pub async fn nack_after(mut self, delay: Duration) -> Result<(), Error> {
        self.settled = true;
        self.release(delay).await
    }

    /// Returns it to the group after `delay`, or, if this was its last delivery
    /// (`max_deliveries`), moves it to the dead-letter topic now, as memq does.
    async fn release(&self, delay: Duration) -> Result<(), Error> {
        if self
            .ctx
            .config
            .max_deliveries
            .is_some_and(|max| self.deliveries >= max)
        {
            self.lease_op("check", 0).await?;
            let mut conn = self.ctx.topic.redis().conn();
            return dead_letter(
                &self.ctx,
                &mut conn,
                &self.message,
                self.deliveries,
                DeadLetterReason::MaxDeliveries,
            )
            .await;
        }
        let idle = self.ctx.config.ack_wait.saturating_sub(delay);
        self.lease_op("nack", idle.as_millis() as u64).await
    }

    /// Extends the lease by a new `ack_wait` from now.
    ///
    /// # Errors
    ///
    /// As [`RedisDelivery::ack`].
    pub async fn touch(&mut self) -> Result<(), Error> {
        self.lease_op("touch", 0).await
    }

    /// Sends it to the dead-letter topic now (reason `Rejected`), then acknowledges it.
    ///
    /// # Errors
    ///
    /// As [`RedisDelivery::ack`]; a failed publish to the dead-letter topic leaves the
    /// message in the group (it comes back after `ack_wait`).
    pub async fn reject(mut self) -> Result<(), Error> {
        self.settled = true;
        self.lease_op("check", 0).await?;
        let mut conn = self.ctx.topic.redis().conn();
        dead_letter(
            &self.ctx,
            &mut conn,
            &self.message,
            self.deliveries,
            DeadLetterReason::Rejected,
        )
        .await
    }
}

impl Drop for RedisDelivery {
    fn drop(&mut self) {
        if self.settled || !self.ctx.config.explicit {
            return;
        }
        self.settled = true;
        let d = RedisDelivery {
            message: self.message.clone(),
            deliveries: self.deliveries,
            ctx: self.ctx.clone(),
            settled: true,
            fetched: self.fetched,
            _slot: None,
        };
        let delay = self.ctx.config.backoff.delay(self.deliveries);
        // Without a runtime to release it on, it comes back when its lease runs out.
        crate::rt::detach(async move {
            let _ = d.release(delay).await;
        });
    }
}

/// Publishes `msg` to the dead-letter topic with its origin (or drops it without one),
/// then acknowledges it in the group. Counted.
async fn dead_letter(
    ctx: &Ctx,
    conn: &mut Conn,
    msg: &RedisMessage,
    deliveries: u32,
    reason: DeadLetterReason,
) -> Result<(), Error> {
    if let Some(dlq) = &ctx.config.dead_letter {
        let p = msg.partition % dlq.partitions();
        let mut cmd = redis::cmd("XADD");
        cmd.arg(dlq.stream_key_of(p))
            .arg("0-*")
            .arg(entry::F_VALUE)
            .arg(msg.payload.as_ref());
        if let Some(k) = &msg.key {
            cmd.arg(entry::F_KEY).arg(k.as_ref());
        }
        cmd.arg(entry::F_TIME)
            .arg(now_ms())
            .arg(entry::F_TOPIC)
            .arg(ctx.topic.name())
            .arg(entry::F_GROUP)
            .arg(&ctx.group)
            .arg(entry::F_PARTITION)
            .arg(msg.partition)
            .arg(entry::F_OFFSET)
            .arg(msg.offset)
            .arg(entry::F_DELIVERIES)
            .arg(deliveries)
            .arg(entry::F_REASON)
            .arg(entry::reason_name(reason));
        let mut dconn = dlq.redis().conn();
        let _: Vec<u8> = dconn.query(&cmd).await?;
    }
    let key = ctx.topic.stream_key_of(msg.partition);
    let _: i64 = conn
        .query(
            redis::cmd("XACK")
                .arg(key)
                .arg(&ctx.group)
                .arg(id_of(msg.offset)),
        )
        .await?;
    ctx.counters.dead_lettered.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// The delivery count of a pending entry (`XPENDING key group id id 1`).
async fn delivery_count(
    conn: &mut Conn,
    key: &str,
    group: &str,
    offset: u64,
) -> Result<Option<u32>, Error> {
    let id = id_of(offset);
    let v: Value = conn
        .query(
            redis::cmd("XPENDING")
                .arg(key)
                .arg(group)
                .arg(&id)
                .arg(&id)
                .arg(1),
        )
        .await?;
    Ok(entry::array(&v)
        .first()
        .and_then(|e| match entry::array(e).get(3) {
            Some(Value::Int(n)) => u32::try_from(*n).ok(),
            _ => None,
        }))
}

enum Step {
    /// Deliveries to hand over.
    Ready(Vec<(RedisMessage, u32)>),
    /// Nothing now.
    Idle,
}

/// Takes back expired leases and due nacks of this partition (one `XAUTOCLAIM` page of
/// at most `count` entries).
async fn claim(
    ctx: &Ctx,
    conn: &mut Conn,
    key: &str,
    p: u32,
    cursor: &mut String,
    count: usize,
) -> Result<Step, Error> {
    if count == 0 {
        // No slot free under `max_in_flight`: left for other members, or for later.
        *cursor = "0-0".to_string();
        return Ok(Step::Idle);
    }
    let v: Value = conn
        .query(
            redis::cmd("XAUTOCLAIM")
                .arg(key)
                .arg(&ctx.group)
                .arg(&ctx.consumer)
                .arg(ctx.config.ack_wait.as_millis() as u64)
                .arg(&*cursor)
                .arg("COUNT")
                .arg(count),
        )
        .await?;
    let (next, entries, deleted) = entry::parse_autoclaim(p, &v)?;
    *cursor = next;
    for offset in deleted {
        // Trimmed while pending: there is nothing left to deliver.
        let _: i64 = conn
            .query(
                redis::cmd("XACK")
                    .arg(key)
                    .arg(&ctx.group)
                    .arg(id_of(offset)),
            )
            .await?;
        ctx.counters.evicted.fetch_add(1, Ordering::Relaxed);
    }
    let mut ready = Vec::new();
    for m in entries {
        let deliveries = delivery_count(conn, key, &ctx.group, m.offset)
            .await?
            .unwrap_or(1);
        if ctx
            .config
            .max_deliveries
            .is_some_and(|max| deliveries > max)
        {
            dead_letter(
                ctx,
                conn,
                &m,
                deliveries - 1,
                DeadLetterReason::MaxDeliveries,
            )
            .await?;
            continue;
        }
        ctx.counters.redelivered.fetch_add(1, Ordering::Relaxed);
        ready.push((m, deliveries));
    }
    Ok(if ready.is_empty() {
        Step::Idle
    } else {
        Step::Ready(ready)
    })
}

/// Deliveries `XAUTOCLAIM` takes back at a time, at most.
const CLAIM_COUNT: usize = 16;

/// The reader of one partition for one member: takes back expired leases every
/// `claim_every`, otherwise waits in `XREADGROUP BLOCK` for new messages; with explicit
/// acks, only while a slot under `max_in_flight` is free (else it waits for one, or for
/// the next claim round, without touching Redis).
pub(crate) async fn read_group(ctx: Arc<Ctx>, p: u32, tx: mpsc::Sender<RedisDelivery>) {
    let slots = ctx.config.explicit.then(|| {
        Arc::new(Semaphore::new(
            ctx.config.max_in_flight.min(Semaphore::MAX_PERMITS),
        ))
    });
    let free = || {
        slots
            .as_ref()
            .map_or(CLAIM_COUNT, |s| s.available_permits())
    };
    let key = ctx.topic.stream_key_of(p).to_string();
    let Some(mut conn) =
        connect_with_backoff(ctx.topic.redis(), &tx, Some(&ctx.counters.retries)).await
    else {
        return;
    };
    let mut cursor = "0-0".to_string();
    let mut next_claim = Instant::now();
    // A member under a fixed name reads what is pending for it first (from ID 0, one
    // page after another), then new messages.
    let mut own_pending: Option<String> = ctx.config.consumer.is_some().then(|| "0-0".to_string());
    let mut attempt = 0;
    loop {
        let step = if Instant::now() >= next_claim {
            let count = free().min(CLAIM_COUNT);
            let s = claim(&ctx, &mut conn, &key, p, &mut cursor, count).await;
            if !matches!(s, Ok(Step::Ready(_))) && cursor == "0-0" {
                next_claim = Instant::now() + ctx.claim_every;
            }
            s
        } else if let Some(slots) = slots.as_ref().filter(|s| s.available_permits() == 0) {
            // Every slot is out: wait for one to come back, or for the next claim round.
            let wait = next_claim.saturating_duration_since(Instant::now());
            tokio::select! {
                biased;
                _ = slots.acquire() => {}
                _ = crate::rt::sleep(wait) => {}
            }
            continue;
        } else {
            let block = next_claim
                .saturating_duration_since(Instant::now())
                .min(BLOCK);
            let from = own_pending.clone().unwrap_or_else(|| ">".to_string());
            let mut cmd = redis::cmd("XREADGROUP");
            cmd.arg("GROUP")
                .arg(&ctx.group)
                .arg(&ctx.consumer)
                .arg("COUNT")
                .arg(1);
            if own_pending.is_none() {
                cmd.arg("BLOCK").arg(block.as_millis().max(1) as u64);
            }
            cmd.arg("STREAMS").arg(&key).arg(from);
            match conn.query::<Value>(&cmd).await {
                Ok(v) => match entry::parse_read(p, &v) {
                    Ok(ms) if ms.is_empty() => {
                        own_pending = None;
                        Ok(Step::Idle)
                    }
                    Ok(ms) => {
                        let mut ready = Vec::new();
                        for m in ms {
                            let d = if own_pending.is_some() {
                                delivery_count(&mut conn, &key, &ctx.group, m.offset)
                                    .await
                                    .ok()
                                    .flatten()
                                    .unwrap_or(1)
                            } else {
                                1
                            };
                            if own_pending.is_some() {
                                own_pending = Some(id_of(m.offset));
                            }
                            ready.push((m, d));
                        }
                        Ok(Step::Ready(ready))
                    }
                    Err(e) => Err(e),
                },
                Err(e) if e.code() == Some("NOGROUP") => {
                    // The stream was deleted and made again: the group is made again at
                    // its start.
                    create_group(&mut conn, &key, &ctx.group, "0-0")
                        .await
                        .map(|_| Step::Idle)
                }
                Err(e) => Err(e.into()),
            }
        };
        match step {
            Ok(Step::Ready(ready)) => {
                attempt = 0;
                for (message, deliveries) in ready {
                    // Free: only this task takes slots, the deliveries give them back.
                    let slot = slots
                        .as_ref()
                        .and_then(|s| s.clone().try_acquire_owned().ok());
                    let d = RedisDelivery {
                        message,
                        deliveries,
                        ctx: ctx.clone(),
                        settled: false,
                        fetched: Instant::now(),
                        _slot: slot,
                    };
                    ctx.counters.delivered.fetch_add(1, Ordering::Relaxed);
                    if let Err(mpsc::error::SendError(mut d)) = tx.send(d).await {
                        d.settled = true; // left to come back after ack_wait
                        return;
                    }
                }
            }
            Ok(Step::Idle) => attempt = 0,
            Err(_) => {
                if tx.is_closed() {
                    return;
                }
                ctx.counters.retries.fetch_add(1, Ordering::Relaxed);
                backoff(attempt).await;
                attempt += 1;
            }
        }
    }
}
