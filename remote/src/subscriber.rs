//! Broadcast subscribers of a Redis topic: [`RedisSubscriber`], one `XREAD BLOCK` reader
//! task per partition on a connection of its own, feeding one channel. A subscriber's
//! position lives in the subscriber (as in memq), not in Redis.

use std::time::Duration;

use redis::Value;
use tokio::sync::mpsc;

use crate::conn::{Conn, Redis};
use crate::entry::{self, id_before};
use crate::topic::{check_start, partition_stats, RedisTopic};
use crate::{Error, RecvError, RedisMessage};
use memq_core::StartAt;

/// How long one blocking read waits before it is issued again (it is woken at once by a
/// publish; this only bounds how long a reader holds its connection).
pub(crate) const BLOCK: Duration = Duration::from_secs(2);

/// Messages a reader task fetches per round trip.
const READ_COUNT: usize = 64;

/// What a reader task hands its subscriber.
pub(crate) enum Item<M> {
    Msg(M),
    Lagged(u32, u64),
}

/// Sleeps before the `attempt`-th retry: 50 ms doubling up to 2 s.
pub(crate) async fn backoff(attempt: u32) {
    let ms = 50u64.saturating_mul(1 << attempt.min(6)).min(2000);
    crate::rt::sleep(Duration::from_millis(ms)).await;
}

/// Gets a dedicated connection, retrying with backoff until it is had (or the receiver
/// is gone: `None`).
pub(crate) async fn connect_with_backoff<T>(
    redis: &Redis,
    tx: &mpsc::Sender<T>,
    reconnects: Option<&std::sync::atomic::AtomicU64>,
) -> Option<Conn> {
    let mut attempt = 0;
    loop {
        if tx.is_closed() {
            return None;
        }
        match redis.dedicated(BLOCK).await {
            Ok(c) => return Some(c),
            Err(_) => {
                if let Some(r) = reconnects {
                    r.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                backoff(attempt).await;
                attempt += 1;
            }
        }
    }
}

/// A broadcast subscriber of a Redis topic: reads every partition from its own position
/// (`XREAD`), as memq's `Subscriber`. Order holds within a partition.
///
/// Reader tasks run on the Tokio runtime the subscriber was made on (or, with the `smol`
/// feature, outside Tokio, on smol); they reconnect with backoff when the server goes
/// away and go on from where they were.
#[derive(Debug)]
pub struct RedisSubscriber {
    topic: RedisTopic,
    rx: mpsc::Receiver<Item<RedisMessage>>,
    tasks: Vec<crate::rt::Task>,
    /// The next offset to hand over, per partition.
    next: Vec<u64>,
}

impl RedisTopic {
    /// Subscribes to every partition at `start` (`Latest` is the end of each partition
    /// now; `Offset(n)` is offset `n` of every partition).
    ///
    /// # Errors
    ///
    /// [`Error::OffsetOutOfRange`] for `Offset(n)` past the end of a partition (as memq:
    /// offsets up to the next one to be published are valid); [`Error::Redis`] if the
    /// end of the partitions cannot be read (for `Latest` and `Offset`).
    pub async fn subscribe(&self, start: StartAt) -> Result<RedisSubscriber, Error> {
        let all: Vec<u32> = (0..self.partitions()).collect();
        let next = self.start_positions(&all, start).await?;
        let (tx, rx) = mpsc::channel(1);
        let mut sub = RedisSubscriber {
            topic: self.clone(),
            rx,
            tasks: Vec::new(),
            next,
        };
        drop(tx);
        sub.start()?;
        Ok(sub)
    }

    /// Where a subscriber starts on each of `partitions` (all or nothing).
    async fn start_positions(&self, partitions: &[u32], start: StartAt) -> Result<Vec<u64>, Error> {
        check_start(self, partitions, start, None).await?;
        let mut next = Vec::with_capacity(partitions.len());
        let mut conn = self.redis().conn();
        for &p in partitions {
            next.push(match start {
                StartAt::Earliest => 0,
                StartAt::Offset(n) => n,
                StartAt::Latest => {
                    partition_stats(&mut conn, self.stream_key_of(p), p)
                        .await?
                        .high
                }
            });
        }
        Ok(next)
    }

    pub(crate) fn stream_key_of(&self, p: u32) -> &str {
        &self.inner.keys[p as usize]
    }
}

impl RedisSubscriber {
    fn start(&mut self) -> Result<(), Error> {
        let (tx, rx) = mpsc::channel(READ_COUNT * self.next.len().max(1));
        self.rx = rx;
        self.tasks = (0..self.next.len() as u32)
            .map(|p| {
                crate::rt::spawn(read_partition(
                    self.topic.redis().clone(),
                    self.topic.stream_key_of(p).to_string(),
                    p,
                    self.next[p as usize],
                    tx.clone(),
                ))
            })
            .collect::<Result<_, _>>()?;
        Ok(())
    }

    /// Receives the next message of any partition.
    ///
    /// # Errors
    ///
    /// [`RecvError::Lagged`] once when retention trimmed messages this subscriber had not
    /// read (it goes on with the oldest kept); [`RecvError::Closed`] if its tasks ended.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a receive dropped before it completes loses no message.
    pub async fn recv(&mut self) -> Result<RedisMessage, RecvError> {
        match self.rx.recv().await {
            Some(Item::Msg(m)) => {
                self.next[m.partition as usize] = m.offset + 1;
                Ok(m)
            }
            Some(Item::Lagged(p, n)) => {
                self.next[p as usize] += n;
                Err(RecvError::Lagged(n))
            }
            None => Err(RecvError::Closed),
        }
    }

    /// [`RedisSubscriber::recv`] for at most `timeout`: `Ok(None)` if nothing came.
    ///
    /// # Errors
    ///
    /// As [`RedisSubscriber::recv`].
    pub async fn recv_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<RedisMessage>, RecvError> {
        match crate::rt::timeout(timeout, self.recv()).await {
            Some(r) => r.map(Some),
            None => Ok(None),
        }
    }

    /// Moves every partition's position to `offset`: the next receives start there.
    ///
    /// # Errors
    ///
    /// [`Error::OffsetOutOfRange`] if `offset` is past the end of a partition (nothing
    /// moves then, as in memq); [`Error::Redis`] if the ends cannot be read.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped before it completes, it moves nothing.
    pub async fn seek(&mut self, offset: u64) -> Result<(), Error> {
        self.seek_to(StartAt::Offset(offset)).await
    }

    /// Moves every partition's position to `start`: its first offset kept
    /// (`Earliest`), its end now (`Latest`), or an offset (`Offset(n)`).
    ///
    /// # Errors
    ///
    /// As [`RedisSubscriber::seek`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped before it completes, it moves nothing.
    pub async fn seek_to(&mut self, start: StartAt) -> Result<(), Error> {
        let all: Vec<u32> = (0..self.next.len() as u32).collect();
        self.next = self.topic.start_positions(&all, start).await?;
        self.restart()
    }

    /// Moves one partition's position to `offset`.
    ///
    /// # Errors
    ///
    /// [`Error::PartitionOutOfRange`]; [`Error::OffsetOutOfRange`] if `offset` is past
    /// the partition's end (nothing moves then); [`Error::Redis`] if its end cannot be
    /// read.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped before it completes, it moves nothing.
    pub async fn seek_partition(&mut self, partition: u32, offset: u64) -> Result<(), Error> {
        let partitions = self.next.len() as u32;
        if partition >= partitions {
            return Err(Error::PartitionOutOfRange {
                partition,
                partitions,
            });
        }
        let pos = self
            .topic
            .start_positions(&[partition], StartAt::Offset(offset))
            .await?;
        if let (Some(n), Some(&o)) = (self.next.get_mut(partition as usize), pos.first()) {
            *n = o;
        }
        self.restart()
    }

    fn restart(&mut self) -> Result<(), Error> {
        self.tasks.clear();
        self.start()
    }

    /// The next offset this subscriber hands over from `partition`.
    pub fn position(&self, partition: u32) -> Option<u64> {
        self.next.get(partition as usize).copied()
    }

    /// Messages published and not yet handed over, over every partition.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`].
    pub async fn lag(&self) -> Result<u64, Error> {
        let stats = self.topic.stats().await?;
        Ok(stats
            .partitions
            .iter()
            .map(|s| s.high.saturating_sub(self.next[s.partition as usize]))
            .sum())
    }
}

/// The reader of one partition: `XREAD BLOCK` from `next`, with gap detection (a gap is
/// what retention trimmed before it was read).
async fn read_partition(
    redis: Redis,
    key: String,
    p: u32,
    mut next: u64,
    tx: mpsc::Sender<Item<RedisMessage>>,
) {
    let Some(mut conn) = connect_with_backoff(&redis, &tx, None).await else {
        return;
    };
    let mut attempt = 0;
    loop {
        let cmd = redis::cmd("XREAD")
            .arg("COUNT")
            .arg(READ_COUNT)
            .arg("BLOCK")
            .arg(BLOCK.as_millis() as u64)
            .arg("STREAMS")
            .arg(&key)
            .arg(id_before(next))
            .to_owned();
        let reply: Value = match conn.query(&cmd).await {
            Ok(v) => {
                attempt = 0;
                v
            }
            Err(_) => {
                if tx.is_closed() {
                    return;
                }
                backoff(attempt).await;
                attempt += 1;
                continue;
            }
        };
        let Ok(entries) = entry::parse_read(p, &reply) else {
            // Not a memq stream entry: nothing to hand over; wait rather than spin.
            backoff(6).await;
            continue;
        };
        for m in entries {
            if m.offset > next && tx.send(Item::Lagged(p, m.offset - next)).await.is_err() {
                return;
            }
            next = m.offset + 1;
            if tx.send(Item::Msg(m)).await.is_err() {
                return;
            }
        }
    }
}
