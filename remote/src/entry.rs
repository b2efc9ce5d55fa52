//! Stream entries: the names of a topic's keys, the mapping between memq offsets and
//! stream IDs, and the parsing of Redis's replies into [`RedisMessage`]s. Knows nothing
//! of connections or readers.
//!
//! **Offsets.** Offset `n` of a partition is the stream entry with ID `0-(n+1)`: every
//! publish is `XADD key 0-* ...`, which makes Redis pick the next sequence number under
//! the millisecond part 0 atomically, so offsets are consecutive `u64`s from 0 however
//! many publishers in however many processes append. (`0-0` is not a valid entry ID,
//! hence the `+ 1`.) The time of a message is a field of its own, `t`.

use bytes::Bytes;
use memq_core::DeadLetterReason;
use redis::Value;

use crate::Error;

/// Field names of a stream entry.
pub(crate) const F_VALUE: &str = "v";
pub(crate) const F_KEY: &str = "k";
pub(crate) const F_TIME: &str = "t";
pub(crate) const F_TOPIC: &str = "o.topic";
pub(crate) const F_GROUP: &str = "o.group";
pub(crate) const F_PARTITION: &str = "o.partition";
pub(crate) const F_OFFSET: &str = "o.offset";
pub(crate) const F_DELIVERIES: &str = "o.deliveries";
pub(crate) const F_REASON: &str = "o.reason";

/// The stream of partition `p` of `topic`: `memq:{topic:p}`. The hash tag holds the
/// partition, so that a cluster spreads the partitions of a topic over its masters.
pub(crate) fn stream_key(topic: &str, p: u32) -> String {
    format!("memq:{{{topic}:{p}}}")
}

/// The hash recording a topic's partition count.
pub(crate) fn meta_key(topic: &str) -> String {
    format!("memq:{{{topic}}}:meta")
}

/// The stream ID of `offset`.
pub(crate) fn id_of(offset: u64) -> String {
    format!("0-{}", offset.saturating_add(1))
}

/// The ID just before `offset`: a read "after" it starts at `offset`.
pub(crate) fn id_before(offset: u64) -> String {
    format!("0-{offset}")
}

/// The offset of the stream ID `id`.
pub(crate) fn offset_of(id: &[u8]) -> Result<u64, Error> {
    let s = std::str::from_utf8(id)
        .map_err(|_| Error::Protocol("a stream ID that is not UTF-8".into()))?;
    let (ms, seq) = s
        .split_once('-')
        .ok_or_else(|| Error::Protocol(format!("stream ID {s:?}")))?;
    let seq: u64 = seq
        .parse()
        .map_err(|_| Error::Protocol(format!("stream ID {s:?}")))?;
    if ms != "0" || seq == 0 {
        return Err(Error::Protocol(format!(
            "stream ID {s} was not written by memq-redis (its IDs are 0-<offset + 1>)"
        )));
    }
    Ok(seq - 1)
}

/// Where a dead letter came from: the same origin memq's in-memory dead letters carry
/// ([`memq_core::DeadLetter`]), read from the fields of a dead-letter stream's entry.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadLetterOrigin {
    /// The origin topic's name.
    pub topic: Option<String>,
    /// The group that gave up on it.
    pub group: String,
    /// The origin partition.
    pub partition: u32,
    /// The origin offset.
    pub offset: u64,
    /// How many times it was delivered.
    pub deliveries: u32,
    /// Why it was dead-lettered.
    pub reason: DeadLetterReason,
}

/// A message of a Redis topic.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisMessage {
    /// Its partition.
    pub partition: u32,
    /// Its offset in the partition.
    pub offset: u64,
    /// When it was published, in milliseconds since the UNIX epoch (the publisher's clock).
    pub timestamp: u64,
    /// The key it was published with, if any.
    pub key: Option<Bytes>,
    /// Its bytes.
    pub payload: Bytes,
    /// Where it came from, if it is a dead letter.
    pub origin: Option<DeadLetterOrigin>,
}

impl RedisMessage {
    /// Its offset.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Its partition.
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// Its bytes.
    pub fn value(&self) -> &Bytes {
        &self.payload
    }
}

pub(crate) fn reason_name(r: DeadLetterReason) -> &'static str {
    match r {
        DeadLetterReason::Rejected => "rejected",
        _ => "max_deliveries",
    }
}

fn bytes_of(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

fn items(v: &Value) -> Option<&[Value]> {
    match v {
        Value::Array(a) | Value::Set(a) => Some(a),
        _ => None,
    }
}

fn parse_num<T: std::str::FromStr>(b: &[u8], what: &str) -> Result<T, Error> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Error::Protocol(format!("field {what} is not a number")))
}

/// Parses one entry, `[id, [field, value, ...]]`, of partition `partition`.
pub(crate) fn parse_entry(partition: u32, v: &Value) -> Result<RedisMessage, Error> {
    let bad = || Error::Protocol(format!("a stream entry: {v:?}"));
    let pair = items(v).ok_or_else(bad)?;
    let [id, fields] = pair else {
        return Err(bad());
    };
    let offset = offset_of(bytes_of(id).ok_or_else(bad)?)?;
    let mut msg = RedisMessage {
        partition,
        offset,
        timestamp: 0,
        key: None,
        payload: Bytes::new(),
        origin: None,
    };
    let fields = match fields {
        Value::Map(m) => m.iter().flat_map(|(k, v)| [k.clone(), v.clone()]).collect(),
        other => items(other).ok_or_else(bad)?.to_vec(),
    };
    let mut origin = DeadLetterOrigin {
        topic: None,
        group: String::new(),
        partition: 0,
        offset: 0,
        deliveries: 0,
        reason: DeadLetterReason::MaxDeliveries,
    };
    let mut is_dead = false;
    for kv in fields.chunks(2) {
        let [k, v] = kv else { return Err(bad()) };
        let (Some(k), Some(v)) = (bytes_of(k), bytes_of(v)) else {
            return Err(bad());
        };
        let text = || String::from_utf8_lossy(v).into_owned();
        match std::str::from_utf8(k).unwrap_or("") {
            F_VALUE => msg.payload = Bytes::copy_from_slice(v),
            F_KEY => msg.key = Some(Bytes::copy_from_slice(v)),
            F_TIME => msg.timestamp = parse_num(v, F_TIME)?,
            F_TOPIC => origin.topic = Some(text()),
            F_GROUP => {
                origin.group = text();
                is_dead = true;
            }
            F_PARTITION => origin.partition = parse_num(v, F_PARTITION)?,
            F_OFFSET => origin.offset = parse_num(v, F_OFFSET)?,
            F_DELIVERIES => origin.deliveries = parse_num(v, F_DELIVERIES)?,
            F_REASON => {
                origin.reason = if v == b"rejected" {
                    DeadLetterReason::Rejected
                } else {
                    DeadLetterReason::MaxDeliveries
                }
            }
            _ => {}
        }
    }
    if is_dead {
        msg.origin = Some(origin);
    }
    Ok(msg)
}

/// Parses a list of entries.
pub(crate) fn parse_entries(partition: u32, v: &Value) -> Result<Vec<RedisMessage>, Error> {
    match v {
        Value::Nil => Ok(Vec::new()),
        v => items(v)
            .ok_or_else(|| Error::Protocol(format!("a list of entries: {v:?}")))?
            .iter()
            // XAUTOCLAIM and XCLAIM may list an entry that was trimmed as `[id, nil]`.
            .filter(|e| !matches!(items(e), Some([_, Value::Nil])))
            .map(|e| parse_entry(partition, e))
            .collect(),
    }
}

/// Parses the reply of `XREAD`/`XREADGROUP` on one stream: nil (timed out) or
/// `[[key, entries]]` (or a map key → entries).
pub(crate) fn parse_read(partition: u32, v: &Value) -> Result<Vec<RedisMessage>, Error> {
    match v {
        Value::Nil => Ok(Vec::new()),
        Value::Map(m) => match m.first() {
            Some((_, entries)) => parse_entries(partition, entries),
            None => Ok(Vec::new()),
        },
        v => {
            let streams = items(v).ok_or_else(|| Error::Protocol(format!("XREAD reply {v:?}")))?;
            match streams.first().and_then(items) {
                Some([_, entries]) => parse_entries(partition, entries),
                Some(_) => Err(Error::Protocol(format!("XREAD reply {v:?}"))),
                None => Ok(Vec::new()),
            }
        }
    }
}

/// Parses `XAUTOCLAIM`'s reply: the next cursor, the claimed entries, and the IDs that
/// were pending but are trimmed from the stream (as offsets).
pub(crate) fn parse_autoclaim(
    partition: u32,
    v: &Value,
) -> Result<(String, Vec<RedisMessage>, Vec<u64>), Error> {
    let bad = || Error::Protocol(format!("XAUTOCLAIM reply {v:?}"));
    let parts = items(v).ok_or_else(bad)?;
    let cursor = parts.first().and_then(bytes_of).ok_or_else(bad)?;
    let cursor = String::from_utf8_lossy(cursor).into_owned();
    let entries = match parts.get(1) {
        Some(e) => parse_entries(partition, e)?,
        None => Vec::new(),
    };
    let mut deleted = Vec::new();
    if let Some(list) = parts.get(2).and_then(items) {
        for id in list {
            deleted.push(offset_of(bytes_of(id).ok_or_else(bad)?)?);
        }
    }
    Ok((cursor, entries, deleted))
}

/// Reads field `name` of a flat `[name, value, ...]` reply (XINFO) as an integer.
pub(crate) fn info_int(v: &Value, name: &str) -> Option<i64> {
    info_field(v, name).and_then(|v| match v {
        Value::Int(i) => Some(*i),
        other => bytes_of(other).and_then(|b| std::str::from_utf8(b).ok()?.parse().ok()),
    })
}

/// Reads field `name` of a flat reply (XINFO) as bytes.
pub(crate) fn info_bytes<'a>(v: &'a Value, name: &str) -> Option<&'a [u8]> {
    info_field(v, name).and_then(bytes_of)
}

pub(crate) fn info_field<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    match v {
        Value::Map(m) => m
            .iter()
            .find(|(k, _)| bytes_of(k) == Some(name.as_bytes()))
            .map(|(_, v)| v),
        v => items(v)?
            .chunks(2)
            .find(|kv| bytes_of(&kv[0]) == Some(name.as_bytes()))
            .and_then(|kv| kv.get(1)),
    }
}

/// The items of an array reply.
pub(crate) fn array(v: &Value) -> &[Value] {
    items(v).unwrap_or(&[])
}

/// The offset of an ID like `0-5` given by XINFO (`0-0` is "before offset 0": `None`).
pub(crate) fn offset_after_id(id: &[u8]) -> Result<Option<u64>, Error> {
    if id == b"0-0" {
        return Ok(None);
    }
    offset_of(id).map(Some)
}

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
