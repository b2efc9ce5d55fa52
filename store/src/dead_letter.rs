//! Dead letters of durable groups: the messages a group gave up on, kept on disk with
//! where they came from.
//!
//! A group with explicit acks moves a message it gives up on (delivered
//! [`GroupConfig::max_deliveries`](crate::GroupConfig) times without an ack, or
//! [rejected](crate::Delivery::reject) by a member) to its dead-letter log: a durable
//! topic of one partition in `dead-letters/<group>` under the topic's directory, with
//! the topic's sync policy, no retention limit (dead letters are kept until the
//! directory is removed), segments of at most 1 MiB, and room for any message the
//! topic took plus its envelope. The move is a publish to that log, made before the message is
//! settled in the group: a crash between the two delivers the message again after the
//! restart, and it may be dead-lettered twice (at least once, never lost).
//!
//! Each dead letter's record keeps the message's key, and its payload is an envelope:
//!
//! ```text
//! magic     b"MQDL"
//! version   u8 = 1
//! reason    u8             0: max deliveries, 1: rejected
//! partition u32            where it came from
//! offset    u64
//! deliveries u32           how many times it was delivered
//! timestamp u64            when it was published (ms since the UNIX epoch)
//! group_len u16, group     the group's name (UTF-8)
//! payload   the rest       the message's bytes
//! ```
//!
//! (little-endian). [`DurableTopic::dead_letters`] reads them back as
//! [`DurableDeadLetter`]s.

use std::path::PathBuf;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use memq_core::{DeadLetterReason, StartAt, TopicConfig};

use crate::topic::Inner;
use crate::{
    DurableConfig, DurableMessage, DurableRecvError, DurableSubscriber, DurableTopic, OpenError,
    Retention, StoreError,
};

const MAGIC: &[u8; 4] = b"MQDL";
const VERSION: u8 = 1;
/// Bytes of the envelope before the group's name.
const FIXED: usize = 4 + 1 + 1 + 4 + 8 + 4 + 8 + 2;
/// The segment size of a dead-letter log, at most.
const DEAD_LETTER_SEGMENT: u64 = 1 << 20;

/// A message a durable group gave up on, read back from its dead-letter log.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DurableDeadLetter {
    /// The group that gave up on it.
    pub group: String,
    /// The partition it came from.
    pub partition: u32,
    /// Its offset there.
    pub offset: u64,
    /// How many times it was delivered.
    pub deliveries: u32,
    /// Why it was dead-lettered.
    pub reason: DeadLetterReason,
    /// When it was published, in milliseconds since the UNIX epoch.
    pub timestamp: u64,
    /// The key it was published with, if any.
    pub key: Option<Bytes>,
    /// Its bytes.
    pub payload: Bytes,
    /// Its offset in the dead-letter log.
    pub dead_offset: u64,
    /// When it was dead-lettered, in milliseconds since the UNIX epoch.
    pub dead_timestamp: u64,
}

/// The envelope of a dead letter of `message` (see the module's docs).
pub(crate) fn envelope(
    group: &str,
    message: &DurableMessage,
    deliveries: u32,
    reason: DeadLetterReason,
) -> Bytes {
    // Group names longer than u16::MAX bytes are cut (at a character boundary).
    let mut name = group;
    while name.len() > u16::MAX as usize {
        let mut end = u16::MAX as usize;
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        name = &name[..end];
    }
    let mut out = BytesMut::with_capacity(FIXED + name.len() + message.payload.len());
    out.put_slice(MAGIC);
    out.put_u8(VERSION);
    out.put_u8(match reason {
        DeadLetterReason::Rejected => 1,
        _ => 0,
    });
    out.put_u32_le(message.partition);
    out.put_u64_le(message.offset);
    out.put_u32_le(deliveries);
    out.put_u64_le(message.timestamp);
    out.put_u16_le(name.len() as u16);
    out.put_slice(name.as_bytes());
    out.put_slice(&message.payload);
    out.freeze()
}

/// Reads the envelope of the dead-letter log's message `m`.
fn open_envelope(
    m: DurableMessage,
    log: &std::path::Path,
) -> Result<DurableDeadLetter, StoreError> {
    let bad = |reason: &str| StoreError::Format {
        file: log.to_path_buf(),
        reason: format!("offset {}: not a dead letter: {reason}", m.offset),
    };
    let b = &m.payload;
    if b.len() < FIXED || &b[..4] != MAGIC {
        return Err(bad("no envelope"));
    }
    if b[4] != VERSION {
        return Err(bad("an envelope of another version"));
    }
    let reason = match b[5] {
        0 => DeadLetterReason::MaxDeliveries,
        1 => DeadLetterReason::Rejected,
        _ => return Err(bad("an unknown reason")),
    };
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    let name_len = u16::from_le_bytes([b[30], b[31]]) as usize;
    if b.len() < FIXED + name_len {
        return Err(bad("a group name past its end"));
    }
    let group = std::str::from_utf8(&b[FIXED..FIXED + name_len])
        .map_err(|_| bad("a group name that is not UTF-8"))?
        .to_string();
    Ok(DurableDeadLetter {
        group,
        partition: u32_at(6),
        offset: u64_at(10),
        deliveries: u32_at(18),
        reason,
        timestamp: u64_at(22),
        key: m.key.clone(),
        payload: m.payload.slice(FIXED + name_len..),
        dead_offset: m.offset,
        dead_timestamp: m.timestamp,
    })
}

fn dead_letter_dir(inner: &Inner, group: &str) -> PathBuf {
    let hex: String = group.bytes().map(|b| format!("{b:02x}")).collect();
    inner.dir.join("dead-letters").join(hex)
}

impl Inner {
    /// The dead-letter log of `group`, opened on first use and kept open with the topic.
    pub(crate) fn dead_letter_topic(&self, group: &str) -> Result<DurableTopic, StoreError> {
        let mut open = self
            .dead_letter_topics
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(t) = open.get(group) {
            return Ok(t.clone());
        }
        let dir = dead_letter_dir(self, group);
        let durable = DurableConfig {
            retention: Retention::default(),
            // A letter is its message and an envelope of at most FIXED + u16::MAX bytes:
            // any message the topic took fits.
            max_record_bytes: self
                .durable
                .max_record_bytes
                .saturating_add((FIXED + u16::MAX as usize) as u32),
            // Dead letters are few: small segments (and, under `Always`, a small
            // preallocated one), not the topic's.
            segment_bytes: self.durable.segment_bytes.min(DEAD_LETTER_SEGMENT),
            ..self.durable
        };
        let t = DurableTopic::open(&dir, TopicConfig::new(64), durable).map_err(|e| match e {
            OpenError::Store(e) => e,
            OpenError::Config(why) => StoreError::Format {
                file: dir.clone(),
                reason: why,
            },
        })?;
        open.insert(group.to_string(), t.clone());
        Ok(t)
    }
}

impl DurableTopic {
    /// A reader of the dead letters of group `name` from `start` (`Earliest`: the
    /// oldest), whether or not the group is open; it sees the letters moved while it
    /// reads.
    ///
    /// ```
    /// use std::time::Duration;
    /// use memq_core::{DeadLetterReason, StartAt, TopicConfig};
    /// use memq_store::{DurableConfig, DurableTopic, GroupConfig, SyncPolicy};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let topic = DurableTopic::open(dir.path(), TopicConfig::new(16), DurableConfig::default())?;
    /// topic.publish_keyed_blocking("order-7", "not json")?;
    /// let config = GroupConfig::acked(Duration::from_secs(30)).max_deliveries(3);
    /// let mut workers = topic.group("workers", StartAt::Earliest, config)?;
    /// let d = workers.recv_delivery_blocking()?;
    /// d.reject()?; // a poison message: straight to the dead letters
    ///
    /// let mut dead = topic.dead_letters("workers", StartAt::Earliest)?;
    /// let letter = dead.try_recv()?;
    /// assert_eq!(letter.payload, "not json");
    /// assert_eq!(letter.key.as_deref(), Some(&b"order-7"[..]));
    /// assert_eq!((letter.partition, letter.offset), (0, 0));
    /// assert_eq!(letter.reason, DeadLetterReason::Rejected);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`DurableTopic::open`] for the dead-letter log (a directory damaged, say).
    pub fn dead_letters(&self, group: &str, start: StartAt) -> Result<DeadLetters, StoreError> {
        let log = self.inner.dead_letter_topic(group)?;
        let sub = log.subscribe(start).map_err(|e| StoreError::Format {
            file: log.dir().to_path_buf(),
            reason: e.to_string(),
        })?;
        Ok(DeadLetters {
            sub,
            dir: log.dir().to_path_buf(),
        })
    }
}

/// Reads a group's dead letters (see [`DurableTopic::dead_letters`]).
#[derive(Debug)]
pub struct DeadLetters {
    sub: DurableSubscriber,
    dir: PathBuf,
}

impl DeadLetters {
    fn open(
        &self,
        got: Result<DurableMessage, DurableRecvError>,
    ) -> Result<DurableDeadLetter, DurableRecvError> {
        open_envelope(got?, &self.dir).map_err(DurableRecvError::Store)
    }

    /// The next dead letter, if there is one now.
    ///
    /// # Errors
    ///
    /// As [`DurableSubscriber::try_recv`]; [`StoreError::Format`] for a record of the
    /// dead-letter log that is not a dead letter.
    pub fn try_recv(&mut self) -> Result<DurableDeadLetter, DurableRecvError> {
        let got = self.sub.try_recv();
        self.open(got)
    }

    /// Waits for the next dead letter.
    ///
    /// # Errors
    ///
    /// As [`DeadLetters::try_recv`], but never `Empty`.
    pub fn recv_blocking(&mut self) -> Result<DurableDeadLetter, DurableRecvError> {
        let got = self.sub.recv_blocking();
        self.open(got)
    }

    /// Waits at most `timeout` for the next dead letter.
    ///
    /// # Errors
    ///
    /// As [`DeadLetters::try_recv`]; `Timeout` instead of `Empty`.
    pub fn recv_blocking_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<DurableDeadLetter, DurableRecvError> {
        let got = self.sub.recv_blocking_timeout(timeout);
        self.open(got)
    }

    /// Waits for the next dead letter (async, any runtime).
    ///
    /// # Errors
    ///
    /// As [`DeadLetters::recv_blocking`].
    pub async fn recv(&mut self) -> Result<DurableDeadLetter, DurableRecvError> {
        let got = self.sub.recv().await;
        self.open(got)
    }
}
