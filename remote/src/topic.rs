//! The Redis topic: [`RedisTopic`] with its configuration, publishing (one, keyed, to a
//! partition, batches), retention and stats. Readers are in `subscriber` and `group`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use redis::Value;

use crate::conn::{Conn, Redis};
use crate::entry::{self, id_of, now_ms, stream_key, F_KEY, F_TIME, F_VALUE};
use crate::{Error, PublishError};

/// How a Redis topic is laid out and retained.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use memq_redis::RedisTopicConfig;
///
/// let config = RedisTopicConfig::new(4).max_len(100_000).max_age(Duration::from_secs(3600));
/// assert_eq!(config.partitions(), 4);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisTopicConfig {
    partitions: u32,
    max_len: Option<u64>,
    max_age: Option<Duration>,
    batches: BatchMode,
}

/// How a batch is sent to Redis.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BatchMode {
    /// One `MULTI`/`EXEC` transaction: the batch is stored whole at consecutive offsets,
    /// or not at all. Redis answers every queued command with `QUEUED` before `EXEC`:
    /// about two thirds of the rate of [`BatchMode::Pipelined`] (docs/BENCHMARKS.md).
    #[default]
    Atomic,
    /// Plain pipelined `XADD`s in one round trip: the server's own rate, but messages of
    /// other publishers may fall between the batch's, and a batch that fails (the
    /// connection lost midway) may be partly stored: it is handed back whole, and
    /// publishing it again may store some of it twice (at least once).
    Pipelined,
}

impl RedisTopicConfig {
    /// `partitions` streams, nothing trimmed.
    pub fn new(partitions: u32) -> Self {
        RedisTopicConfig {
            partitions,
            max_len: None,
            max_age: None,
            batches: BatchMode::Atomic,
        }
    }

    /// How batches are sent (by default [`BatchMode::Atomic`]).
    pub fn batches(mut self, mode: BatchMode) -> Self {
        self.batches = mode;
        self
    }

    /// Keeps about `n` messages per partition: every publish is `XADD ... MAXLEN ~ n`
    /// (Redis trims whole nodes of its radix tree, so a little more may stay).
    pub fn max_len(mut self, n: u64) -> Self {
        self.max_len = Some(n);
        self
    }

    /// Trims messages older than `age` when [`RedisTopic::trim_by_age`] runs (an
    /// `XTRIM MINID` up to the first message younger than `age`).
    pub fn max_age(mut self, age: Duration) -> Self {
        self.max_age = Some(age);
        self
    }

    /// The partition count.
    pub fn partitions(&self) -> u32 {
        self.partitions
    }
}

/// Where a publish landed: as memq-store's `DurableReceipt`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedisReceipt {
    /// The partition.
    pub partition: u32,
    /// The offset of the (first) message.
    pub offset: u64,
    /// How many messages were published: consecutive offsets from `offset` under
    /// [`BatchMode::Atomic`]; under [`BatchMode::Pipelined`], other publishers' messages
    /// may fall between them.
    pub count: u32,
}

/// A snapshot of one partition's stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedisPartitionStats {
    /// The partition.
    pub partition: u32,
    /// The oldest offset kept (equal to `high` when the stream is empty).
    pub low: u64,
    /// The offset the next message gets.
    pub high: u64,
    /// Messages kept (`XLEN`).
    pub depth: u64,
}

/// A snapshot of a Redis topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisTopicStats {
    /// Each partition's stream.
    pub partitions: Vec<RedisPartitionStats>,
}

/// One partition of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedisGroupPartitionStats {
    /// The partition.
    pub partition: u32,
    /// The offset the group hands out next (its `last-delivered-id` + 1).
    pub position: u64,
    /// Delivered and not acknowledged (its pending-entries list).
    pub pending: u64,
    /// Not delivered yet: `high - position`.
    pub lag: u64,
}

/// A snapshot of a group on a Redis topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisGroupStats {
    /// The group's name.
    pub group: String,
    /// Each partition.
    pub partitions: Vec<RedisGroupPartitionStats>,
}

impl RedisGroupStats {
    /// Not delivered yet, over every partition.
    pub fn lag(&self) -> u64 {
        self.partitions.iter().map(|p| p.lag).sum()
    }

    /// Delivered and not acknowledged, over every partition.
    pub fn pending(&self) -> u64 {
        self.partitions.iter().map(|p| p.pending).sum()
    }
}

/// A topic whose partitions are Redis streams: the same shapes as memq's topics (publish
/// one, keyed, to a partition, in batches; subscribers with `StartAt` and `seek`;
/// competing groups with explicit acks, leases, nacks and dead letters), shared by every
/// process that opens it. Cheap to clone.
///
/// Keys are routed with memq's own hash ([`memq_core::key_partition`]): a key lands on the
/// same partition index in memory, in C, in Python and in Redis.
#[derive(Clone)]
pub struct RedisTopic {
    pub(crate) inner: Arc<TopicInner>,
}

pub(crate) struct TopicInner {
    pub(crate) redis: Redis,
    pub(crate) name: String,
    pub(crate) keys: Vec<String>,
    pub(crate) config: RedisTopicConfig,
    rr: AtomicU32,
}

impl std::fmt::Debug for RedisTopic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisTopic")
            .field("name", &self.inner.name)
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

/// Checks a topic or group name: not empty, and without the braces of hash tags.
pub(crate) fn check_name(name: &str) -> Result<(), Error> {
    if name.is_empty() {
        return Err(Error::InvalidArgument("a name must not be empty"));
    }
    if name.contains(['{', '}']) {
        return Err(Error::InvalidArgument("a name must not contain '{' or '}'"));
    }
    Ok(())
}

impl RedisTopic {
    /// Opens the topic `name`, creating it with `config` if it does not exist. Its
    /// partition count is recorded in Redis (`memq:{name}:meta`), so that every process
    /// routes keys the same way.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty name, one with `{` or `}`, or zero
    /// partitions; [`Error::PartitionMismatch`] if the topic exists with another count;
    /// [`Error::Redis`].
    pub async fn open(redis: &Redis, name: &str, config: RedisTopicConfig) -> Result<Self, Error> {
        check_name(name)?;
        if config.partitions == 0 {
            return Err(Error::InvalidArgument(
                "a topic needs at least one partition",
            ));
        }
        let mut conn = redis.conn();
        let meta = entry::meta_key(name);
        let _: i64 = conn
            .query(
                redis::cmd("HSETNX")
                    .arg(&meta)
                    .arg("partitions")
                    .arg(config.partitions),
            )
            .await?;
        let existing: u32 = conn
            .query(redis::cmd("HGET").arg(&meta).arg("partitions"))
            .await?;
        if existing != config.partitions {
            return Err(Error::PartitionMismatch {
                existing,
                requested: config.partitions,
            });
        }
        Ok(RedisTopic {
            inner: Arc::new(TopicInner {
                redis: redis.clone(),
                name: name.to_string(),
                keys: (0..config.partitions)
                    .map(|p| stream_key(name, p))
                    .collect(),
                config,
                rr: AtomicU32::new(0),
            }),
        })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Its partition count.
    pub fn partitions(&self) -> u32 {
        self.inner.config.partitions
    }

    /// The Redis key of partition `partition`'s stream (`memq:{name:partition}`).
    pub fn stream_key(&self, partition: u32) -> Option<&str> {
        self.inner.keys.get(partition as usize).map(String::as_str)
    }

    /// The connection it uses.
    pub fn redis(&self) -> &Redis {
        &self.inner.redis
    }

    fn round_robin(&self) -> u32 {
        self.inner.rr.fetch_add(1, Ordering::Relaxed) % self.partitions()
    }

    fn check_partition(&self, partition: u32) -> Result<(), Error> {
        if partition >= self.partitions() {
            return Err(Error::PartitionOutOfRange {
                partition,
                partitions: self.partitions(),
            });
        }
        Ok(())
    }

    fn xadd(
        &self,
        cmd: &mut redis::Cmd,
        partition: u32,
        key: Option<&Bytes>,
        payload: &Bytes,
        t: u64,
    ) {
        cmd.arg("XADD").arg(&self.inner.keys[partition as usize]);
        if let Some(n) = self.inner.config.max_len {
            cmd.arg("MAXLEN").arg("~").arg(n);
        }
        cmd.arg("0-*").arg(F_VALUE).arg(payload.as_ref());
        if let Some(k) = key {
            cmd.arg(F_KEY).arg(k.as_ref());
        }
        cmd.arg(F_TIME).arg(t);
    }

    /// Publishes `payload` to the next partition in turn.
    ///
    /// # Errors
    ///
    /// [`PublishError`] with the payload handed back.
    pub async fn publish(
        &self,
        payload: impl Into<Bytes>,
    ) -> Result<RedisReceipt, PublishError<Bytes>> {
        let p = self.round_robin();
        self.publish_inner(p, None, payload.into()).await
    }

    /// Publishes `payload` with `key`, to the partition memq's key hash gives it.
    ///
    /// # Errors
    ///
    /// [`PublishError`] with the payload handed back.
    pub async fn publish_keyed(
        &self,
        key: impl Into<Bytes>,
        payload: impl Into<Bytes>,
    ) -> Result<RedisReceipt, PublishError<Bytes>> {
        let key = key.into();
        let p = memq_core::key_partition(&key, self.partitions());
        self.publish_inner(p, Some(key), payload.into()).await
    }

    /// Publishes `payload` to `partition`.
    ///
    /// # Errors
    ///
    /// [`PublishError`] with the payload handed back; [`Error::PartitionOutOfRange`].
    pub async fn publish_to(
        &self,
        partition: u32,
        payload: impl Into<Bytes>,
    ) -> Result<RedisReceipt, PublishError<Bytes>> {
        self.publish_inner(partition, None, payload.into()).await
    }

    async fn publish_inner(
        &self,
        partition: u32,
        key: Option<Bytes>,
        payload: Bytes,
    ) -> Result<RedisReceipt, PublishError<Bytes>> {
        let fail = |error, messages| PublishError { error, messages };
        if let Err(e) = self.check_partition(partition) {
            return Err(fail(e, payload));
        }
        let mut cmd = redis::Cmd::new();
        self.xadd(&mut cmd, partition, key.as_ref(), &payload, now_ms());
        let mut conn = self.inner.redis.conn();
        let id: Vec<u8> = match conn.query(&cmd).await {
            Ok(id) => id,
            Err(e) => return Err(fail(e.into(), payload)),
        };
        match entry::offset_of(&id) {
            Ok(offset) => Ok(RedisReceipt {
                partition,
                offset,
                count: 1,
            }),
            Err(e) => Err(fail(e, payload)),
        }
    }

    /// Publishes `batch` to the next partition in turn, in one round trip: by default as
    /// one `MULTI`/`EXEC` transaction, stored whole at consecutive offsets or not at all
    /// (see [`BatchMode`] for the faster plain pipeline).
    ///
    /// # Errors
    ///
    /// [`PublishError`] with the whole batch handed back.
    pub async fn publish_batch(
        &self,
        batch: Vec<Bytes>,
    ) -> Result<RedisReceipt, PublishError<Vec<Bytes>>> {
        let p = self.round_robin();
        self.publish_batch_inner(p, None, batch).await
    }

    /// Publishes `batch` with `key` (every message with the same key), to the partition
    /// memq's key hash gives the key; one transaction, as [`RedisTopic::publish_batch`].
    ///
    /// # Errors
    ///
    /// [`PublishError`] with the whole batch handed back.
    pub async fn publish_batch_keyed(
        &self,
        key: impl Into<Bytes>,
        batch: Vec<Bytes>,
    ) -> Result<RedisReceipt, PublishError<Vec<Bytes>>> {
        let key = key.into();
        let p = memq_core::key_partition(&key, self.partitions());
        self.publish_batch_inner(p, Some(key), batch).await
    }

    /// Publishes `batch` to `partition`; one transaction, as [`RedisTopic::publish_batch`].
    ///
    /// # Errors
    ///
    /// [`PublishError`] with the whole batch handed back; [`Error::PartitionOutOfRange`].
    pub async fn publish_batch_to(
        &self,
        partition: u32,
        batch: Vec<Bytes>,
    ) -> Result<RedisReceipt, PublishError<Vec<Bytes>>> {
        self.publish_batch_inner(partition, None, batch).await
    }

    async fn publish_batch_inner(
        &self,
        partition: u32,
        key: Option<Bytes>,
        batch: Vec<Bytes>,
    ) -> Result<RedisReceipt, PublishError<Vec<Bytes>>> {
        let fail = |error, messages| PublishError { error, messages };
        if let Err(e) = self.check_partition(partition) {
            return Err(fail(e, batch));
        }
        let Ok(count) = u32::try_from(batch.len()) else {
            return Err(fail(
                Error::InvalidArgument("a batch of more than u32::MAX"),
                batch,
            ));
        };
        if count == 0 {
            return Err(fail(Error::InvalidArgument("an empty batch"), batch));
        }
        let t = now_ms();
        let mut pipe = redis::pipe();
        if self.inner.config.batches == BatchMode::Atomic {
            pipe.atomic();
        }
        for (i, payload) in batch.iter().enumerate() {
            let mut cmd = redis::Cmd::new();
            self.xadd(&mut cmd, partition, key.as_ref(), payload, t);
            pipe.add_command(cmd);
            // Only the first ID is needed (the receipt's offset): the others are not
            // collected (an error reply still fails the batch).
            if i > 0 {
                pipe.ignore();
            }
        }
        let mut conn = self.inner.redis.conn();
        let ids: Vec<Vec<u8>> = match conn.pipe(&pipe).await {
            Ok(ids) => ids,
            Err(e) => return Err(fail(e.into(), batch)),
        };
        match ids.first().map(|id| entry::offset_of(id)) {
            Some(Ok(offset)) => Ok(RedisReceipt {
                partition,
                offset,
                count,
            }),
            Some(Err(e)) => Err(fail(e, batch)),
            None => Err(fail(Error::Protocol("EXEC returned no IDs".into()), batch)),
        }
    }

    /// A snapshot of every partition (`XINFO STREAM` each).
    ///
    /// # Errors
    ///
    /// [`Error::Redis`].
    pub async fn stats(&self) -> Result<RedisTopicStats, Error> {
        let mut conn = self.inner.redis.conn();
        let mut partitions = Vec::with_capacity(self.inner.keys.len());
        for p in 0..self.partitions() {
            partitions.push(partition_stats(&mut conn, &self.inner.keys[p as usize], p).await?);
        }
        Ok(RedisTopicStats { partitions })
    }

    /// A snapshot of the group `group` on every partition (`XINFO GROUPS`): its position,
    /// pending (delivered, not acknowledged) and lag (not delivered yet).
    ///
    /// # Errors
    ///
    /// [`Error::Redis`]; [`Error::InvalidArgument`] if the group does not exist.
    pub async fn group_stats(&self, group: &str) -> Result<RedisGroupStats, Error> {
        let mut conn = self.inner.redis.conn();
        let mut partitions = Vec::new();
        for p in 0..self.partitions() {
            let key = &self.inner.keys[p as usize];
            let stream = partition_stats(&mut conn, key, p).await?;
            let groups: Value = conn
                .query(redis::cmd("XINFO").arg("GROUPS").arg(key))
                .await?;
            let g = entry::array(&groups)
                .iter()
                .find(|g| entry::info_bytes(g, "name") == Some(group.as_bytes()))
                .ok_or(Error::InvalidArgument("no such group"))?;
            let pending = entry::info_int(g, "pending").unwrap_or(0).max(0) as u64;
            let last = entry::info_bytes(g, "last-delivered-id").unwrap_or(b"0-0");
            let position = entry::offset_after_id(last)?.map_or(0, |o| o + 1);
            partitions.push(RedisGroupPartitionStats {
                partition: p,
                position,
                pending,
                lag: stream.high.saturating_sub(position),
            });
        }
        Ok(RedisGroupStats {
            group: group.to_string(),
            partitions,
        })
    }

    /// Trims, on every partition, the messages older than the configured
    /// [`max_age`](RedisTopicConfig::max_age) (by their publish time): finds the first
    /// younger message and `XTRIM MINID` up to it. Does nothing without a `max_age`.
    /// Run it from a timer as often as the age needs to be exact. Returns how many
    /// messages were trimmed.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`].
    pub async fn trim_by_age(&self) -> Result<u64, Error> {
        let Some(age) = self.inner.config.max_age else {
            return Ok(0);
        };
        let cutoff = now_ms().saturating_sub(age.as_millis() as u64);
        let mut conn = self.inner.redis.conn();
        let mut trimmed = 0;
        for (p, key) in self.inner.keys.iter().enumerate() {
            let mut from = "-".to_string();
            let keep = loop {
                let v: Value = conn
                    .query(
                        redis::cmd("XRANGE")
                            .arg(key)
                            .arg(&from)
                            .arg("+")
                            .arg("COUNT")
                            .arg(256),
                    )
                    .await?;
                let entries = entry::parse_entries(p as u32, &v)?;
                let Some(last) = entries.last() else {
                    break None;
                };
                if let Some(young) = entries.iter().find(|m| m.timestamp >= cutoff) {
                    break Some(young.offset);
                }
                from = format!("({}", id_of(last.offset));
            };
            let min = match keep {
                Some(o) => id_of(o),
                // Everything is old: trim up to after the last ID generated.
                None => {
                    let s = partition_stats(&mut conn, key, p as u32).await?;
                    id_of(s.high)
                }
            };
            let n: u64 = conn
                .query(redis::cmd("XTRIM").arg(key).arg("MINID").arg(min))
                .await?;
            trimmed += n;
        }
        Ok(trimmed)
    }

    /// Deletes the topic's streams (with their groups) and its recorded partition count.
    /// Offsets start again from 0 if it is opened again.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`].
    pub async fn delete(&self) -> Result<(), Error> {
        let mut conn = self.inner.redis.conn();
        for key in &self.inner.keys {
            let _: i64 = conn.query(redis::cmd("DEL").arg(key)).await?;
        }
        let _: i64 = conn
            .query(redis::cmd("DEL").arg(entry::meta_key(&self.inner.name)))
            .await?;
        Ok(())
    }
}

/// Refuses `StartAt::Offset(n)` past the end of any of `partitions`, all or nothing, as
/// memq does for a subscriber or a new group: offsets up to a partition's `high` are
/// valid. With `group`, partitions where that group exists already are skipped (an
/// existing group goes on from its own position and ignores the start). Offsets only
/// grow, so a start valid now stays valid while the readers are made.
pub(crate) async fn check_start(
    topic: &RedisTopic,
    partitions: &[u32],
    start: memq_core::StartAt,
    group: Option<&str>,
) -> Result<(), Error> {
    let memq_core::StartAt::Offset(offset) = start else {
        return Ok(());
    };
    let mut conn = topic.redis().conn();
    for &p in partitions {
        let key = topic.stream_key_of(p);
        let stats = partition_stats(&mut conn, key, p).await?;
        if offset <= stats.high {
            continue;
        }
        if let Some(group) = group {
            if group_exists(&mut conn, key, group).await? {
                continue;
            }
        }
        return Err(Error::OffsetOutOfRange {
            offset,
            partition: p,
            high: stats.high,
        });
    }
    Ok(())
}

/// Whether the group `group` exists on the stream `key` (an absent stream has none).
async fn group_exists(conn: &mut Conn, key: &str, group: &str) -> Result<bool, Error> {
    let exists: i64 = conn.query(redis::cmd("EXISTS").arg(key)).await?;
    if exists == 0 {
        return Ok(false);
    }
    let groups: Value = conn
        .query(redis::cmd("XINFO").arg("GROUPS").arg(key))
        .await?;
    Ok(entry::array(&groups)
        .iter()
        .any(|g| entry::info_bytes(g, "name") == Some(group.as_bytes())))
}

/// `XINFO STREAM` of one partition (an absent stream is empty at offset 0).
pub(crate) async fn partition_stats(
    conn: &mut Conn,
    key: &str,
    p: u32,
) -> Result<RedisPartitionStats, Error> {
    let exists: i64 = conn.query(redis::cmd("EXISTS").arg(key)).await?;
    if exists == 0 {
        return Ok(RedisPartitionStats {
            partition: p,
            low: 0,
            high: 0,
            depth: 0,
        });
    }
    let info: Value = conn
        .query(redis::cmd("XINFO").arg("STREAM").arg(key))
        .await?;
    let depth = entry::info_int(&info, "length").unwrap_or(0).max(0) as u64;
    let last = entry::info_bytes(&info, "last-generated-id").unwrap_or(b"0-0");
    let high = entry::offset_after_id(last)?.map_or(0, |o| o + 1);
    let low = match entry::info_field(&info, "first-entry") {
        Some(Value::Nil) | None => high,
        Some(first) => entry::parse_entry(p, first)?.offset,
    };
    Ok(RedisPartitionStats {
        partition: p,
        low,
        high,
        depth,
    })
}
