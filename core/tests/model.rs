//! Model-based tests: random sequences of operations run against a topic (one to three
//! partitions) and against a plain reference model of the documented semantics (a
//! `VecDeque` log per partition with integer positions). Every observable result must agree: values, offsets, timestamps,
//! `Lagged` counts, `Full`/`Closed` errors, positions, lag and the stats counters.
//!
//! The model mirrors where memq applies the TTL (it is lazy: on publish, subscribe, group
//! creation, receive and stats, not on seek, lag or close), because that decides what a
//! late reader is told it missed.
//!
//! A second model covers explicit-ack groups: leases, acks, nacks, touches, rejects,
//! dropped deliveries, lease expiry on a manual clock, `max_in_flight`, `max_deliveries`
//! and a dead-letter topic that can fill up.
//!
//! `PROPTEST_CASES` sets the number of sequences (256 by default).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use memq_core::{
    AckConfig, AckConsumer, AckError, Consumer, DeadLetter, DeadLetterReason, Delivery, Error,
    ManualClock, Message, Overflow, PublishError, Receipt, StartAt, Subscriber, Timer, Topic,
    TopicConfig, TryRecvError, TryRecvIfError,
};
use proptest::prelude::*;

// ----- the reference model ----------------------------------------------------------------

/// What a reader can observe of one delivered message.
type Seen = (u64, u32, Option<Duration>, u32);

fn seen(m: &Message<u32>) -> Seen {
    (m.offset(), m.partition(), m.timestamp(), *m.value())
}

#[derive(Debug, Clone)]
struct Config {
    capacity: usize,
    partitions: usize,
    overflow: Overflow,
    clocked: bool,
    /// TTL in milliseconds (needs the clock).
    ttl: Option<u64>,
}

/// One partition's log.
#[derive(Debug, Default, Clone)]
struct Part {
    /// Retained messages: offset, timestamp (ns), value.
    log: VecDeque<(u64, u64, u32)>,
    low: u64,
    high: u64,
    published: u64,
    delivered: u64,
    evicted: u64,
    expired: u64,
}

#[derive(Debug)]
struct ModelSub {
    /// The partitions it reads and its position in each.
    parts: Vec<usize>,
    pos: Vec<u64>,
    /// Where the next receive starts looking (index into `parts`).
    next: usize,
}

#[derive(Debug)]
struct ModelGroup {
    name: String,
    /// Position and deliveries per partition.
    pos: Vec<u64>,
    delivered: Vec<u64>,
    /// Member ids in join order.
    members: Vec<u64>,
    next_id: u64,
    deleted: bool,
}

#[derive(Debug)]
struct ModelMember {
    group: usize,
    id: u64,
    next: usize,
}

/// A topic as the documentation describes it.
#[derive(Debug)]
struct Model {
    cfg: Config,
    now_ns: u64,
    parts: Vec<Part>,
    closed: bool,
    round_robin: usize,
    /// Live subscribers, in the order of the real handles.
    subs: Vec<ModelSub>,
    /// Every group ever created; deleted ones stay for their members to see `Closed`.
    groups: Vec<ModelGroup>,
    /// Live members, in the order of the real handles.
    members: Vec<ModelMember>,
}

/// What a read found, as the real `try_recv` reports it.
type ReadResult = Result<Seen, TryRecvError>;

/// A single-message read of one partition.
enum Read {
    Message(Seen),
    Lagged(u64),
    Empty,
}

impl Model {
    fn new(cfg: Config) -> Self {
        Self {
            parts: (0..cfg.partitions).map(|_| Part::default()).collect(),
            cfg,
            now_ns: 0,
            closed: false,
            round_robin: 0,
            subs: Vec::new(),
            groups: Vec::new(),
            members: Vec::new(),
        }
    }

    fn expire(&mut self, p: usize) {
        let (ttl, now) = (self.cfg.ttl, self.now_ns);
        expire_part(&mut self.parts[p], ttl, now);
    }

    /// The partitions as `stats` reports them: what the TTL has expired by now counted as
    /// gone, although nothing was taken out (`stats` is a read; the next visit does it).
    fn stats_view(&self) -> Vec<Part> {
        let mut parts = self.parts.clone();
        for part in &mut parts {
            expire_part(part, self.cfg.ttl, self.now_ns);
        }
        parts
    }
}

/// Takes out of `part` what is older than `ttl` (ms) at `now` (ns).
fn expire_part(part: &mut Part, ttl: Option<u64>, now: u64) {
    let Some(ttl) = ttl.map(|ms| ms * 1_000_000) else {
        return;
    };
    while let Some(&(_, ts, _)) = part.log.front() {
        if now.saturating_sub(ts) > ttl {
            part.log.pop_front();
            part.low += 1;
            part.expired += 1;
        } else {
            break;
        }
    }
}

impl Model {
    /// The partition an unkeyed publish goes to.
    fn route(&mut self) -> usize {
        if self.cfg.partitions == 1 {
            return 0;
        }
        let p = self.round_robin % self.cfg.partitions;
        self.round_robin += 1;
        p
    }

    /// How many of partition `p`'s oldest messages no reader needs any more.
    fn evictable(&self, p: usize) -> u64 {
        let subs = self
            .subs
            .iter()
            .flat_map(|s| s.parts.iter().zip(&s.pos))
            .filter(|(&sp, _)| sp == p)
            .map(|(_, &pos)| pos);
        let groups = self.groups.iter().filter(|g| !g.deleted).map(|g| g.pos[p]);
        let part = &self.parts[p];
        subs.chain(groups)
            .min()
            .unwrap_or(u64::MAX)
            .min(part.high)
            .saturating_sub(part.low)
    }

    fn evict_one(&mut self, p: usize) {
        let part = &mut self.parts[p];
        part.log.pop_front();
        part.low += 1;
        part.evicted += 1;
    }

    fn push(&mut self, p: usize, value: u32) -> u64 {
        let now = self.now_ns;
        let part = &mut self.parts[p];
        let offset = part.high;
        part.log.push_back((offset, now, value));
        part.high += 1;
        part.published += 1;
        offset
    }

    fn len(&self, p: usize) -> u64 {
        self.parts[p].high - self.parts[p].low
    }

    fn publish_to(&mut self, p: usize, value: u32) -> Result<Receipt, PublishError<u32>> {
        if p >= self.cfg.partitions {
            return Err(PublishError::InvalidPartition(value));
        }
        self.expire(p);
        if self.closed {
            return Err(PublishError::Closed(value));
        }
        if self.len(p) == self.cfg.capacity as u64 {
            if self.cfg.overflow != Overflow::DropOldest && self.evictable(p) == 0 {
                return Err(PublishError::Full(value));
            }
            self.evict_one(p);
        }
        let offset = self.push(p, value);
        Ok(receipt(p, offset, 1))
    }

    fn publish_batch(&mut self, values: Vec<u32>) -> Result<Receipt, PublishError<Vec<u32>>> {
        let p = self.route();
        let cap = self.cfg.capacity as u64;
        let n = values.len() as u64;
        if n > cap {
            // It could never fit; a closed topic says so first.
            if self.closed {
                return Err(PublishError::Closed(values));
            }
            return Err(PublishError::Full(values));
        }
        self.expire(p);
        if self.closed {
            return Err(PublishError::Closed(values));
        }
        if n == 0 {
            return Ok(receipt(p, self.parts[p].high, 0));
        }
        let room = cap - self.len(p);
        if self.cfg.overflow != Overflow::DropOldest && room + self.evictable(p) < n {
            return Err(PublishError::Full(values));
        }
        let first = self.parts[p].high;
        for v in values {
            if self.len(p) == cap {
                self.evict_one(p);
            }
            self.push(p, v);
        }
        Ok(receipt(p, first, n as u32))
    }

    /// Reads partition `p` at `pos` (already expired).
    fn read_at(&mut self, p: usize, pos: &mut u64) -> Read {
        let clocked = self.cfg.clocked;
        let part = &mut self.parts[p];
        if *pos < part.low {
            let missed = part.low - *pos;
            *pos = part.low;
            return Read::Lagged(missed);
        }
        if *pos >= part.high {
            return Read::Empty;
        }
        let (offset, ts, value) = part.log[(*pos - part.low) as usize];
        *pos += 1;
        part.delivered += 1;
        let stamp = clocked.then(|| Duration::from_nanos(ts));
        Read::Message((offset, p as u32, stamp, value))
    }

    /// A reader's receive of up to `limit` messages over `parts` (partition, position),
    /// starting at index `*next`: as memq does it, one partition at a time.
    fn read_many(
        &mut self,
        parts: &[usize],
        pos: &mut [u64],
        next: &mut usize,
        limit: usize,
    ) -> Result<Vec<Seen>, TryRecvError> {
        let n = parts.len();
        let mut got = Vec::new();
        let mut all_closed = true;
        // Each partition once, from where the last receive took from.
        let start = *next;
        for k in 0..n {
            if got.len() == limit {
                break;
            }
            let idx = (start + k) % n;
            let p = parts[idx];
            self.expire(p);
            let old = pos[idx];
            if old < self.parts[p].low && !got.is_empty() {
                // A gap is reported by the next receive, never mixed into a batch.
                all_closed = false;
                break;
            }
            while got.len() < limit {
                match self.read_at(p, &mut pos[idx]) {
                    Read::Message(m) => got.push(m),
                    Read::Lagged(missed) => return Err(TryRecvError::Lagged(missed)),
                    Read::Empty => break,
                }
            }
            if pos[idx] != old {
                *next = idx + 1;
                all_closed = false;
            } else if !self.closed {
                all_closed = false;
            }
        }
        if !got.is_empty() {
            Ok(got)
        } else if all_closed {
            Err(TryRecvError::Closed)
        } else {
            Err(TryRecvError::Empty)
        }
    }

    fn sub_recv_many(&mut self, i: usize, limit: usize) -> Result<Vec<Seen>, TryRecvError> {
        let mut sub = std::mem::replace(
            &mut self.subs[i],
            ModelSub {
                parts: Vec::new(),
                pos: Vec::new(),
                next: 0,
            },
        );
        let r = self.read_many(&sub.parts, &mut sub.pos, &mut sub.next, limit);
        self.subs[i] = sub;
        r
    }

    fn start(&self, p: usize, start: StartAt) -> Result<u64, Error> {
        let part = &self.parts[p];
        match start {
            StartAt::Earliest => Ok(part.low),
            StartAt::Latest => Ok(part.high),
            StartAt::Offset(o) if o <= part.high => Ok(o),
            StartAt::Offset(offset) => Err(Error::OffsetOutOfRange {
                offset,
                partition: p as u32,
                high: part.high,
            }),
        }
    }

    fn subscribe(&mut self, parts: Vec<usize>, start: StartAt) -> Result<(), Error> {
        let mut pos = Vec::new();
        for &p in &parts {
            self.expire(p);
            pos.push(self.start(p, start)?);
        }
        self.subs.push(ModelSub {
            parts,
            pos,
            next: 0,
        });
        Ok(())
    }

    fn seek_partition(&mut self, i: usize, p: usize, offset: u64) -> Result<(), Error> {
        let Some(idx) = self.subs[i].parts.iter().position(|&sp| sp == p) else {
            return Err(if p < self.cfg.partitions {
                Error::PartitionNotRead {
                    partition: p as u32,
                }
            } else {
                Error::PartitionOutOfRange {
                    partition: p as u32,
                    partitions: self.cfg.partitions as u32,
                }
            });
        };
        self.subs[i].pos[idx] = self.start(p, StartAt::Offset(offset))?;
        Ok(())
    }

    fn seek_to(&mut self, i: usize, start: StartAt) -> Result<(), Error> {
        let parts = self.subs[i].parts.clone();
        let pos = parts
            .iter()
            .map(|&p| self.start(p, start))
            .collect::<Result<Vec<_>, _>>()?;
        self.subs[i].pos = pos;
        Ok(())
    }

    fn live_group(&self, name: &str) -> Option<usize> {
        self.groups
            .iter()
            .position(|g| g.name == name && !g.deleted)
    }

    fn join(&mut self, name: &str, start: StartAt) -> Result<(), Error> {
        let g = match self.live_group(name) {
            Some(g) => g,
            None => {
                if let StartAt::Offset(_) = start {
                    for p in 0..self.cfg.partitions {
                        self.start(p, start)?;
                    }
                }
                let mut pos = Vec::new();
                for p in 0..self.cfg.partitions {
                    self.expire(p);
                    pos.push(self.start(p, start)?);
                }
                self.groups.push(ModelGroup {
                    name: name.into(),
                    pos,
                    delivered: vec![0; self.cfg.partitions],
                    members: Vec::new(),
                    next_id: 0,
                    deleted: false,
                });
                self.groups.len() - 1
            }
        };
        let group = &mut self.groups[g];
        let id = group.next_id;
        group.next_id += 1;
        group.members.push(id);
        self.members.push(ModelMember {
            group: g,
            id,
            next: 0,
        });
        Ok(())
    }

    fn leave(&mut self, i: usize) {
        let m = self.members.remove(i);
        self.groups[m.group].members.retain(|&id| id != m.id);
    }

    fn delete_group(&mut self, name: &str) -> Result<(), Error> {
        let g = self
            .live_group(name)
            .ok_or_else(|| Error::UnknownGroup(name.into()))?;
        self.groups[g].deleted = true;
        Ok(())
    }

    /// The partitions of member `i`: partition `p` goes to the member at `p % members` in
    /// join order; with one partition every member reads it.
    fn assignment(&self, i: usize) -> Vec<usize> {
        let m = &self.members[i];
        let list = &self.groups[m.group].members;
        let Some(index) = list.iter().position(|&id| id == m.id) else {
            return Vec::new();
        };
        if self.cfg.partitions == 1 {
            return vec![0];
        }
        (0..self.cfg.partitions)
            .filter(|p| p % list.len() == index)
            .collect()
    }

    fn member_recv_many(&mut self, i: usize, limit: usize) -> Result<Vec<Seen>, TryRecvError> {
        let g = self.members[i].group;
        if self.groups[g].deleted {
            return Err(TryRecvError::Closed);
        }
        let parts = self.assignment(i);
        let mut pos: Vec<u64> = parts.iter().map(|&p| self.groups[g].pos[p]).collect();
        let mut next = self.members[i].next;
        let r = self.read_many(&parts, &mut pos, &mut next, limit);
        for (idx, &p) in parts.iter().enumerate() {
            self.groups[g].pos[p] = pos[idx];
        }
        if let Ok(got) = &r {
            for m in got {
                self.groups[g].delivered[m.1 as usize] += 1;
            }
        }
        self.members[i].next = next;
        match r {
            // Nothing assigned, or all of it closed and drained: the member is done only
            // when the whole group is.
            Err(TryRecvError::Closed) => self.group_closed(g),
            r => r,
        }
    }

    /// A conditional receive (`Consumer::try_recv_if`): a receive of one, undone if
    /// `accept` declines the message, but for the TTL's lazy expiry, which the real
    /// receive applies before it looks at the message.
    fn member_recv_if(
        &mut self,
        i: usize,
        accept: impl Fn(u32) -> bool,
    ) -> Result<Seen, TryRecvIfError> {
        let next = self.members[i].next;
        let g = self.members[i].group;
        match first(self.member_recv_many(i, 1)) {
            Ok(m) if !accept(m.3) => {
                let p = m.1 as usize;
                self.groups[g].pos[p] -= 1;
                self.groups[g].delivered[p] -= 1;
                self.parts[p].delivered -= 1;
                self.members[i].next = next;
                Err(TryRecvIfError::Declined)
            }
            Ok(m) => Ok(m),
            Err(TryRecvError::Empty) => Err(TryRecvIfError::Empty),
            Err(TryRecvError::Lagged(n)) => Err(TryRecvIfError::Lagged(n)),
            Err(_) => Err(TryRecvIfError::Closed),
        }
    }

    fn group_closed(&self, g: usize) -> Result<Vec<Seen>, TryRecvError> {
        let drained = (0..self.cfg.partitions).all(|p| self.groups[g].pos[p] >= self.parts[p].high);
        Err(if self.closed && drained {
            TryRecvError::Closed
        } else {
            TryRecvError::Empty
        })
    }

    fn committed(&self, i: usize, p: usize) -> Result<u64, Error> {
        if p >= self.cfg.partitions {
            return Err(Error::PartitionOutOfRange {
                partition: p as u32,
                partitions: self.cfg.partitions as u32,
            });
        }
        let g = &self.groups[self.members[i].group];
        if g.deleted {
            Err(Error::UnknownGroup(g.name.clone()))
        } else {
            Ok(g.pos[p])
        }
    }
}

// ----- operations -------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    Publish,
    /// To a partition, possibly one that does not exist.
    PublishTo(usize),
    PublishBatch(usize),
    /// `publish(..)` polled once, then dropped.
    PollPublish,
    /// Every partition, or one.
    Subscribe(Option<usize>, StartAt),
    DropSub(usize),
    SubRecv(usize),
    /// `recv()` polled once, then dropped.
    SubPollRecv(usize),
    SubRecvMany(usize, usize),
    Seek(usize, u64),
    SeekPartition(usize, usize, u64),
    SeekTo(usize, StartAt),
    Lag(usize, usize),
    Join(usize, StartAt),
    Leave(usize),
    MemberRecv(usize),
    /// `try_recv_if` accepting values not divisible by the second field (1: none).
    MemberRecvIf(usize, u32),
    MemberPollRecv(usize),
    MemberRecvMany(usize, usize),
    Committed(usize, usize),
    DeleteGroup(usize),
    Advance(u64),
    Close,
    Stats,
}

fn start_at() -> impl Strategy<Value = StartAt> {
    prop_oneof![
        Just(StartAt::Earliest),
        Just(StartAt::Latest),
        (0u64..12).prop_map(StartAt::Offset),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let i = 0usize..4;
    let p = 0usize..4;
    prop_oneof![
        6 => Just(Op::Publish),
        3 => p.clone().prop_map(Op::PublishTo),
        2 => (0usize..6).prop_map(Op::PublishBatch),
        2 => Just(Op::PollPublish),
        3 => (proptest::option::of(p.clone()), start_at()).prop_map(|(p, a)| Op::Subscribe(p, a)),
        1 => i.clone().prop_map(Op::DropSub),
        5 => i.clone().prop_map(Op::SubRecv),
        2 => i.clone().prop_map(Op::SubPollRecv),
        2 => (i.clone(), 0usize..4).prop_map(|(s, l)| Op::SubRecvMany(s, l)),
        1 => (i.clone(), 0u64..12).prop_map(|(s, o)| Op::Seek(s, o)),
        1 => (i.clone(), p.clone(), 0u64..12).prop_map(|(s, p, o)| Op::SeekPartition(s, p, o)),
        1 => (i.clone(), start_at()).prop_map(|(s, a)| Op::SeekTo(s, a)),
        1 => (i.clone(), p.clone()).prop_map(|(s, p)| Op::Lag(s, p)),
        3 => (0usize..2, start_at()).prop_map(|(g, a)| Op::Join(g, a)),
        1 => i.clone().prop_map(Op::Leave),
        5 => i.clone().prop_map(Op::MemberRecv),
        2 => (i.clone(), 1u32..4).prop_map(|(m, k)| Op::MemberRecvIf(m, k)),
        2 => i.clone().prop_map(Op::MemberPollRecv),
        2 => (i.clone(), 0usize..4).prop_map(|(m, l)| Op::MemberRecvMany(m, l)),
        1 => (i.clone(), p).prop_map(|(m, p)| Op::Committed(m, p)),
        1 => (0usize..2).prop_map(Op::DeleteGroup),
        2 => (1u64..4).prop_map(Op::Advance),
        1 => Just(Op::Close),
        2 => Just(Op::Stats),
    ]
}

fn config() -> impl Strategy<Value = Config> {
    (
        1usize..5,
        prop_oneof![3 => Just(1usize), 1 => Just(2usize), 1 => Just(3usize)],
        prop_oneof![
            Just(Overflow::Block),
            Just(Overflow::DropOldest),
            Just(Overflow::Reject)
        ],
        any::<bool>(),
        proptest::option::of(1u64..6),
    )
        .prop_map(|(capacity, partitions, overflow, clocked, ttl)| Config {
            capacity,
            partitions,
            overflow,
            clocked: clocked || ttl.is_some(),
            ttl,
        })
}

// ----- running both -----------------------------------------------------------------------

struct Real {
    clock: Arc<ManualClock>,
    topic: Topic<u32>,
    subs: Vec<Subscriber<u32>>,
    members: Vec<Consumer<u32>>,
}

fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    Pin::new(fut).poll(&mut Context::from_waker(Waker::noop()))
}

fn group_name(g: usize) -> String {
    format!("g{g}")
}

fn received(r: Result<Message<u32>, TryRecvError>) -> ReadResult {
    r.map(|m| seen(&m))
}

fn receipt(p: usize, offset: u64, count: u32) -> Receipt {
    Receipt {
        partition: p as u32,
        offset,
        count,
    }
}

fn first(r: Result<Vec<Seen>, TryRecvError>) -> ReadResult {
    r.map(|v| v[0])
}

/// Applies `op` to both; returns an error describing the first disagreement.
fn step(model: &mut Model, real: &mut Real, op: &Op, next_value: &mut u32) -> Result<(), String> {
    macro_rules! same {
        ($real:expr, $model:expr) => {{
            let (r, m) = ($real, $model);
            if r != m {
                return Err(format!("{op:?}: memq gave {r:?}, the model {m:?}"));
            }
        }};
    }
    let mut value = || {
        *next_value += 1;
        *next_value
    };
    match *op {
        Op::Publish => {
            let v = value();
            let p = model.route();
            same!(real.topic.try_publish(v), model.publish_to(p, v));
        }
        Op::PublishTo(p) => {
            let v = value();
            same!(
                real.topic.try_publish_to(p as u32, v),
                model.publish_to(p, v)
            );
        }
        Op::PublishBatch(n) => {
            let batch: Vec<u32> = (0..n).map(|_| value()).collect();
            same!(
                real.topic.try_publish_batch(batch.clone()),
                model.publish_batch(batch)
            );
        }
        Op::PollPublish => {
            let v = value();
            let mut fut = real.topic.publish(v);
            let got = poll_once(&mut fut);
            drop(fut);
            let p = model.route();
            let want = match model.publish_to(p, v) {
                // A `Block` topic parks instead; dropping the future publishes nothing.
                Err(PublishError::Full(_)) if model.cfg.overflow == Overflow::Block => {
                    Poll::Pending
                }
                r => Poll::Ready(r),
            };
            same!(got, want);
        }
        Op::Subscribe(p, start) => {
            let (r, parts) = match p {
                None => (
                    real.topic.subscribe(start),
                    (0..model.cfg.partitions).collect(),
                ),
                Some(p) => (real.topic.subscribe_partition(p as u32, start), vec![p]),
            };
            let m = match p {
                Some(p) if p >= model.cfg.partitions => Err(Error::PartitionOutOfRange {
                    partition: p as u32,
                    partitions: model.cfg.partitions as u32,
                }),
                _ => model.subscribe(parts, start),
            };
            same!(r.as_ref().err(), m.as_ref().err());
            if let Ok(sub) = r {
                real.subs.push(sub);
            }
        }
        Op::DropSub(i) if !real.subs.is_empty() => {
            let i = i % real.subs.len();
            drop(real.subs.remove(i));
            model.subs.remove(i);
        }
        Op::SubRecv(i) if !real.subs.is_empty() => {
            let i = i % real.subs.len();
            same!(
                received(real.subs[i].try_recv()),
                first(model.sub_recv_many(i, 1))
            );
        }
        Op::SubPollRecv(i) if !real.subs.is_empty() => {
            let i = i % real.subs.len();
            let got = match poll_once(&mut real.subs[i].recv()) {
                Poll::Ready(r) => Some(r.map(|m| seen(&m)).map_err(TryRecvError::from)),
                Poll::Pending => None,
            };
            let want = match first(model.sub_recv_many(i, 1)) {
                Err(TryRecvError::Empty) => None,
                r => Some(r),
            };
            same!(got, want);
        }
        Op::SubRecvMany(i, limit) if !real.subs.is_empty() => {
            let i = i % real.subs.len();
            let mut buf = Vec::new();
            let r = real.subs[i].try_recv_many(&mut buf, limit);
            let got = r.map(|n| {
                assert_eq!(n, buf.len());
                buf.iter().map(seen).collect::<Vec<_>>()
            });
            let want = if limit == 0 {
                Ok(Vec::new())
            } else {
                model.sub_recv_many(i, limit)
            };
            same!(got, want);
        }
        Op::Seek(i, offset) if !real.subs.is_empty() => {
            let i = i % real.subs.len();
            let m = match model.subs[i].parts.as_slice() {
                &[p] => model.seek_partition(i, p, offset),
                _ => Err(Error::PartitionRequired),
            };
            same!(real.subs[i].seek(offset), m);
        }
        Op::SeekPartition(i, p, offset) if !real.subs.is_empty() => {
            let i = i % real.subs.len();
            same!(
                real.subs[i].seek_partition(p as u32, offset),
                model.seek_partition(i, p, offset)
            );
        }
        Op::SeekTo(i, start) if !real.subs.is_empty() => {
            let i = i % real.subs.len();
            same!(real.subs[i].seek_to(start), model.seek_to(i, start));
        }
        Op::Lag(i, p) if !real.subs.is_empty() => {
            let i = i % real.subs.len();
            let sub = &model.subs[i];
            let lag: u64 = sub
                .parts
                .iter()
                .zip(&sub.pos)
                .map(|(&sp, &pos)| model.parts[sp].high.saturating_sub(pos))
                .sum();
            let position = sub
                .parts
                .iter()
                .position(|&sp| sp == p)
                .map(|idx| sub.pos[idx]);
            same!(
                (real.subs[i].lag(), real.subs[i].position(p as u32)),
                (lag, position)
            );
        }
        Op::Join(g, start) => {
            let r = real.topic.group(&group_name(g), start);
            let m = model.join(&group_name(g), start);
            same!(r.as_ref().err(), m.as_ref().err());
            if let Ok(member) = r {
                real.members.push(member);
            }
        }
        Op::Leave(i) if !real.members.is_empty() => {
            let i = i % real.members.len();
            drop(real.members.remove(i));
            model.leave(i);
        }
        Op::MemberRecv(i) if !real.members.is_empty() => {
            let i = i % real.members.len();
            let got = received(real.members[i].try_recv());
            same!(got, first(model.member_recv_many(i, 1)));
        }
        Op::MemberRecvIf(i, k) if !real.members.is_empty() => {
            let i = i % real.members.len();
            let got = real.members[i]
                .try_recv_if(|v| v % k != 0)
                .map(|m| seen(&m));
            same!(got, model.member_recv_if(i, |v| v % k != 0));
        }
        Op::MemberPollRecv(i) if !real.members.is_empty() => {
            let i = i % real.members.len();
            let got = match poll_once(&mut real.members[i].recv()) {
                Poll::Ready(r) => Some(r.map(|m| seen(&m)).map_err(TryRecvError::from)),
                Poll::Pending => None,
            };
            let want = match first(model.member_recv_many(i, 1)) {
                Err(TryRecvError::Empty) => None,
                r => Some(r),
            };
            same!(got, want);
        }
        Op::MemberRecvMany(i, limit) if !real.members.is_empty() => {
            let i = i % real.members.len();
            let mut buf = Vec::new();
            let got = real.members[i]
                .try_recv_many(&mut buf, limit)
                .map(|_| buf.iter().map(seen).collect::<Vec<_>>());
            let want = if limit == 0 {
                Ok(Vec::new())
            } else {
                model.member_recv_many(i, limit)
            };
            same!(got, want);
        }
        Op::Committed(i, p) if !real.members.is_empty() => {
            let i = i % real.members.len();
            same!(real.members[i].committed(p as u32), model.committed(i, p));
        }
        Op::DeleteGroup(g) => {
            same!(
                real.topic.delete_group(&group_name(g)),
                model.delete_group(&group_name(g))
            );
        }
        Op::Advance(ms) => {
            real.clock.advance(Duration::from_millis(ms));
            model.now_ns += ms * 1_000_000;
        }
        Op::Close => {
            real.topic.close();
            model.closed = true;
        }
        Op::Stats => check_stats(model, real)?,
        // An operation on a handle when there is none: nothing to do.
        _ => {}
    }
    Ok(())
}

fn check_stats(model: &mut Model, real: &Real) -> Result<(), String> {
    let s = real.topic.stats();
    // `stats` is a read: it counts what has expired by now without taking it out, and so
    // does the model here.
    let parts = model.stats_view();
    let got: Vec<_> = s
        .partitions
        .iter()
        .map(|p| {
            (
                (p.partition, p.low, p.high, p.depth),
                (
                    p.published,
                    p.delivered,
                    p.evicted,
                    p.expired,
                    p.subscribers,
                ),
            )
        })
        .collect();
    let want: Vec<_> = parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let subscribers = model.subs.iter().filter(|s| s.parts.contains(&i)).count();
            (
                (i as u32, p.low, p.high, p.high - p.low),
                (p.published, p.delivered, p.evicted, p.expired, subscribers),
            )
        })
        .collect();
    if got != want {
        return Err(format!(
            "partition stats ((partition, low, high, depth), (published, delivered, evicted, \
             expired, subscribers)): memq gave {got:?}, the model {want:?}"
        ));
    }
    let sum = |f: fn(&Part) -> u64| parts.iter().map(f).sum::<u64>();
    let got = (
        (s.published, s.delivered, s.evicted, s.expired, s.depth),
        (s.subscribers, s.closed),
    );
    let want = (
        (
            sum(|p| p.published),
            sum(|p| p.delivered),
            sum(|p| p.evicted),
            sum(|p| p.expired),
            sum(|p| p.high - p.low),
        ),
        (model.subs.len(), model.closed),
    );
    if got != want {
        return Err(format!(
            "topic stats ((published, delivered, evicted, expired, depth), (subscribers, \
             closed)): memq gave {got:?}, the model {want:?}"
        ));
    }
    let mut groups: Vec<_> = s
        .groups
        .iter()
        .map(|g| {
            (
                g.name.clone(),
                g.members,
                g.committed.clone(),
                g.lag,
                g.delivered,
            )
        })
        .collect();
    groups.sort();
    let mut want: Vec<_> = model
        .groups
        .iter()
        .filter(|g| !g.deleted)
        .map(|g| {
            let lag = (0..model.cfg.partitions)
                .map(|p| model.parts[p].high - g.pos[p])
                .sum::<u64>();
            (
                g.name.clone(),
                g.members.len(),
                g.pos.clone(),
                lag,
                g.delivered.iter().sum::<u64>(),
            )
        })
        .collect();
    want.sort();
    if groups != want {
        return Err(format!(
            "group stats (name, members, committed, lag, delivered): memq gave {groups:?}, \
             the model {want:?}"
        ));
    }
    Ok(())
}

fn run(cfg: Config, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let clock = Arc::new(ManualClock::new());
    let mut tc = TopicConfig::new(cfg.capacity)
        .overflow(cfg.overflow)
        .partitions(cfg.partitions as u32);
    if cfg.clocked {
        tc = tc.clock(clock.clone());
    }
    if let Some(ttl) = cfg.ttl {
        tc = tc.ttl(Duration::from_millis(ttl));
    }
    let mut real = Real {
        clock,
        topic: Topic::new(tc).unwrap(),
        subs: Vec::new(),
        members: Vec::new(),
    };
    let mut model = Model::new(cfg);
    let mut next_value = 0;
    for (n, op) in ops.iter().enumerate() {
        if let Err(e) = step(&mut model, &mut real, op, &mut next_value) {
            return Err(TestCaseError::fail(format!("step {n}: {e}")));
        }
    }
    check_stats(&mut model, &real).map_err(TestCaseError::fail)
}

proptest! {
    #![proptest_config(ProptestConfig {
        // Shrunk failures are printed; they are not written next to the sources.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn memq_matches_the_reference_model(
        cfg in config(),
        ops in proptest::collection::vec(op(), 1..80),
    ) {
        run(cfg, ops)?;
    }
}

// ----- the model's own sanity checks -------------------------------------------------------

/// A case worth keeping whatever the random ones do: `Block` with a reader holding the
/// oldest message, a reader that moves, and a TTL that expires under a group.
#[test]
fn fixed_sequence_matches() {
    use Op::*;
    let cfg = Config {
        capacity: 2,
        partitions: 1,
        overflow: Overflow::Block,
        clocked: true,
        ttl: Some(3),
    };
    let ops = vec![
        Subscribe(None, StartAt::Earliest),
        Join(0, StartAt::Earliest),
        Publish,
        Publish,
        Publish,
        SubRecv(0),
        Publish,
        MemberRecvMany(0, 3),
        Publish,
        Advance(4),
        SubRecv(0),
        MemberRecv(0),
        Stats,
        Close,
        SubRecvMany(0, 2),
        MemberPollRecv(0),
        Stats,
    ];
    run(cfg, ops).unwrap();
}

// ----- explicit acknowledgements ----------------------------------------------------------

/// Lease length of the acked model, in milliseconds.
const ACK_WAIT_MS: u64 = 10;
/// How long a message bound for a full dead-letter topic waits before the next try (the
/// documented 10 ms, capped by the lease length).
const DEAD_LETTER_RETRY_MS: u64 = 10;

#[derive(Debug, Clone)]
struct AckedConfig {
    capacity: usize,
    /// `Block` or `DropOldest` (which may evict unacknowledged messages).
    overflow: Overflow,
    max_in_flight: usize,
    max_deliveries: Option<u32>,
    /// Capacity of the dead-letter topic (read by one subscriber), if there is one.
    dead_letter: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LeaseState {
    Leased { deadline: u64 },
    Delayed { at: u64 },
    Ready,
}

#[derive(Debug, Clone)]
struct Unacked {
    member: u64,
    deliveries: u32,
    state: LeaseState,
    /// Bound for the dead-letter topic, which was full.
    dead: Option<DeadLetterReason>,
    /// The value that move was made with, kept for the next try: the log may evict the
    /// message meanwhile, and it still goes to the dead-letter topic.
    kept: Option<u32>,
}

/// One explicit-ack group on a one-partition `Block` topic, as documented: a delivery is
/// a lease; returned messages are delivered again (oldest return first) before new ones;
/// the committed position is the lowest unacknowledged offset.
#[derive(Debug)]
struct AckModel {
    cfg: AckedConfig,
    now: u64,
    values: BTreeMap<u64, u32>,
    low: u64,
    high: u64,
    closed: bool,
    next: u64,
    unacked: BTreeMap<u64, Unacked>,
    ready: VecDeque<u64>,
    delayed: BTreeSet<(u64, u64)>,
    leases: BTreeSet<(u64, u64)>,
    members: Vec<u64>,
    /// Unread dead letters: offset, deliveries, reason, value.
    dead_letters: VecDeque<(u64, u32, DeadLetterReason, u32)>,
    delivered: u64,
    redelivered: u64,
    acked: u64,
    dead_lettered: u64,
    evicted_unacked: u64,
    published: u64,
}

/// What a receive returned: offset, value, delivery count.
type Leased = (u64, u32, u32);

impl AckModel {
    fn committed(&self) -> u64 {
        self.unacked
            .keys()
            .next()
            .map_or(self.next, |&o| o.min(self.next))
    }

    fn publish(&mut self, value: u32) -> Result<u64, PublishError<u32>> {
        if self.closed {
            return Err(PublishError::Closed(value));
        }
        if self.high - self.low == self.cfg.capacity as u64 {
            if self.cfg.overflow == Overflow::Block && self.committed().min(self.high) == self.low {
                return Err(PublishError::Full(value));
            }
            self.values.remove(&self.low);
            self.low += 1;
        }
        let offset = self.high;
        self.values.insert(offset, value);
        self.high += 1;
        self.published += 1;
        Ok(offset)
    }

    fn untime(&mut self, offset: u64) {
        match self.unacked.get(&offset).map(|u| u.state) {
            Some(LeaseState::Leased { deadline }) => {
                self.leases.remove(&(deadline, offset));
            }
            Some(LeaseState::Delayed { at }) => {
                self.delayed.remove(&(at, offset));
            }
            _ => {}
        }
    }

    fn requeue(&mut self, offset: u64, delay: u64) {
        self.untime(offset);
        let now = self.now;
        let Some(u) = self.unacked.get_mut(&offset) else {
            return;
        };
        if delay == 0 {
            u.state = LeaseState::Ready;
            self.ready.push_back(offset);
        } else {
            u.state = LeaseState::Delayed { at: now + delay };
            self.delayed.insert((now + delay, offset));
        }
    }

    fn lease(&mut self, offset: u64) {
        let deadline = self.now + ACK_WAIT_MS;
        self.unacked.get_mut(&offset).unwrap().state = LeaseState::Leased { deadline };
        self.leases.insert((deadline, offset));
    }

    /// Leases that ran out and delays that passed return to the group, in time order.
    fn promote(&mut self) {
        while let Some(&(deadline, offset)) = self.leases.first() {
            if deadline > self.now {
                break;
            }
            self.requeue(offset, 0);
        }
        while let Some(&(at, offset)) = self.delayed.first() {
            if at > self.now {
                break;
            }
            self.delayed.remove(&(at, offset));
            self.unacked.get_mut(&offset).unwrap().state = LeaseState::Ready;
            self.ready.push_back(offset);
        }
    }

    /// Moves `offset` to the dead-letter topic (with `held`, the value a member rejected,
    /// or else the log's), or keeps it bound there if that is full.
    fn dead_letter(
        &mut self,
        offset: u64,
        deliveries: u32,
        reason: DeadLetterReason,
        held: Option<u32>,
    ) {
        self.untime(offset);
        let kept = self.unacked.get(&offset).and_then(|u| u.kept);
        let value = held.or(kept).or_else(|| self.values.get(&offset).copied());
        let sent = match (self.cfg.dead_letter, value) {
            // Without a dead-letter topic it is dropped, and counted.
            (None, _) => Some(true),
            // Evicted before it could be moved: nothing is left to send.
            (Some(_), None) => Some(false),
            (Some(cap), Some(_)) if self.dead_letters.len() == cap => None,
            (Some(_), Some(value)) => {
                self.dead_letters
                    .push_back((offset, deliveries, reason, value));
                Some(true)
            }
        };
        if let Some(moved) = sent {
            self.unacked.remove(&offset);
            if moved {
                self.dead_lettered += 1;
            } else {
                self.evicted_unacked += 1;
            }
        } else {
            let u = self.unacked.get_mut(&offset).unwrap();
            u.dead = Some(reason);
            u.kept = value;
            self.requeue(offset, DEAD_LETTER_RETRY_MS.min(ACK_WAIT_MS));
        }
    }

    fn recv(&mut self, member: u64) -> Result<Leased, TryRecvError> {
        loop {
            self.promote();
            let mut to_dead_letter = None;
            let mut picked = None;
            while let Some(offset) = self.ready.pop_front() {
                let Some(u) = self.unacked.get_mut(&offset) else {
                    continue;
                };
                if u.state != LeaseState::Ready {
                    continue;
                }
                // Evicted before it was settled, unless it is bound for the dead-letter
                // topic with its value kept.
                if offset < self.low && !(u.dead.is_some() && u.kept.is_some()) {
                    self.unacked.remove(&offset);
                    self.evicted_unacked += 1;
                    continue;
                }
                if let Some(reason) = u.dead {
                    to_dead_letter = Some((offset, u.deliveries, reason));
                } else if self.cfg.max_deliveries.is_some_and(|m| u.deliveries >= m) {
                    to_dead_letter = Some((offset, u.deliveries, DeadLetterReason::MaxDeliveries));
                } else {
                    u.deliveries += 1;
                    u.member = member;
                    picked = Some((offset, u.deliveries));
                    self.redelivered += 1;
                }
                break;
            }
            if let Some((offset, deliveries, reason)) = to_dead_letter {
                self.dead_letter(offset, deliveries, reason, None);
                continue;
            }
            if picked.is_none()
                && self.unacked.len() < self.cfg.max_in_flight
                && self.next < self.low
            {
                let missed = self.low - self.next;
                self.next = self.low;
                return Err(TryRecvError::Lagged(missed));
            }
            if picked.is_none()
                && self.unacked.len() < self.cfg.max_in_flight
                && self.next < self.high
            {
                let offset = self.next;
                self.next += 1;
                self.unacked.insert(
                    offset,
                    Unacked {
                        member,
                        deliveries: 1,
                        state: LeaseState::Ready,
                        dead: None,
                        kept: None,
                    },
                );
                picked = Some((offset, 1));
            }
            if let Some((offset, attempt)) = picked {
                self.lease(offset);
                self.delivered += 1;
                return Ok((offset, self.values[&offset], attempt));
            }
            let done = self.closed && self.next >= self.high && self.unacked.is_empty();
            return Err(if done {
                TryRecvError::Closed
            } else {
                TryRecvError::Empty
            });
        }
    }

    /// Whether a delivery of `offset` made as attempt `attempt` still holds its lease.
    fn holds(&self, offset: u64, attempt: u32) -> bool {
        self.unacked.get(&offset).is_some_and(|u| {
            u.deliveries == attempt && matches!(u.state, LeaseState::Leased { .. })
        })
    }

    /// Settles the delivery of `offset` made as attempt `attempt`, whose value is `value`.
    fn settle(
        &mut self,
        offset: u64,
        attempt: u32,
        value: u32,
        op: &Settle,
    ) -> Result<(), AckError> {
        if !self.holds(offset, attempt) {
            return Err(AckError::LeaseExpired);
        }
        match *op {
            Settle::Ack => {
                self.untime(offset);
                self.unacked.remove(&offset);
                self.acked += 1;
            }
            Settle::Nack | Settle::Drop => self.requeue(offset, 0),
            Settle::NackAfter(ms) => self.requeue(offset, ms),
            Settle::Touch => {
                self.untime(offset);
                self.lease(offset);
            }
            Settle::Reject => {
                self.dead_letter(offset, attempt, DeadLetterReason::Rejected, Some(value))
            }
        }
        Ok(())
    }

    fn leave(&mut self, member: u64) {
        let held: Vec<u64> = self
            .unacked
            .iter()
            .filter(|(_, u)| u.member == member && matches!(u.state, LeaseState::Leased { .. }))
            .map(|(&o, _)| o)
            .collect();
        for o in held {
            self.requeue(o, 0);
        }
        self.members.retain(|&m| m != member);
    }
}

#[derive(Debug, Clone)]
enum Settle {
    Ack,
    Nack,
    NackAfter(u64),
    Touch,
    Reject,
    Drop,
}

#[derive(Debug, Clone)]
enum AckOp {
    Publish,
    Recv(usize),
    Settle(usize, Settle),
    Join,
    Leave(usize),
    Advance(u64),
    ReadDeadLetter,
    Close,
    Stats,
}

fn ack_op() -> impl Strategy<Value = AckOp> {
    let settle = prop_oneof![
        4 => Just(Settle::Ack),
        1 => Just(Settle::Nack),
        1 => (1u64..15).prop_map(Settle::NackAfter),
        1 => Just(Settle::Touch),
        1 => Just(Settle::Reject),
        2 => Just(Settle::Drop),
    ];
    prop_oneof![
        6 => Just(AckOp::Publish),
        8 => (0usize..3).prop_map(AckOp::Recv),
        8 => (0usize..4, settle).prop_map(|(i, s)| AckOp::Settle(i, s)),
        1 => Just(AckOp::Join),
        1 => (0usize..3).prop_map(AckOp::Leave),
        3 => (1u64..12).prop_map(AckOp::Advance),
        2 => Just(AckOp::ReadDeadLetter),
        1 => Just(AckOp::Close),
        2 => Just(AckOp::Stats),
    ]
}

fn acked_config() -> impl Strategy<Value = AckedConfig> {
    (
        1usize..6,
        prop_oneof![Just(Overflow::Block), Just(Overflow::DropOldest)],
        1usize..4,
        proptest::option::of(1u32..4),
        proptest::option::of(1usize..3),
    )
        .prop_map(
            |(capacity, overflow, max_in_flight, max_deliveries, dead_letter)| AckedConfig {
                capacity,
                overflow,
                max_in_flight,
                max_deliveries,
                dead_letter,
            },
        )
}

/// A timer that never fires: the model only ever receives without waiting.
struct NoTimer;

impl Timer for NoTimer {
    fn wake_after(&self, _delay: Duration, _waker: Waker) {}
}

struct AckReal {
    clock: Arc<ManualClock>,
    topic: Topic<u32>,
    config: Box<dyn Fn() -> AckConfig<u32>>,
    members: Vec<AckConsumer<u32>>,
    /// Deliveries not yet settled: the delivery, its offset and attempt.
    held: Vec<(Delivery<u32>, u64, u32)>,
    dead_letters: Option<Subscriber<DeadLetter<u32>>>,
}

fn ack_step(
    model: &mut AckModel,
    real: &mut AckReal,
    op: &AckOp,
    next_value: &mut u32,
) -> Result<(), String> {
    macro_rules! same {
        ($real:expr, $model:expr) => {{
            let (r, m) = ($real, $model);
            if r != m {
                return Err(format!("{op:?}: memq gave {r:?}, the model {m:?}"));
            }
        }};
    }
    match op {
        AckOp::Publish => {
            *next_value += 1;
            let v = *next_value;
            same!(
                real.topic.try_publish(v).map(|r| r.offset),
                model.publish(v)
            );
        }
        AckOp::Recv(i) if !real.members.is_empty() => {
            let i = i % real.members.len();
            let member = real.members[i].member_id();
            let got = real.members[i].try_recv().map(|d| {
                let seen = (d.offset(), *d.value(), d.deliveries());
                real.held.push((d, seen.0, seen.2));
                seen
            });
            same!(got, model.recv(member));
        }
        AckOp::Settle(i, s) if !real.held.is_empty() => {
            let i = i % real.held.len();
            let (mut d, offset, attempt) = real.held.remove(i);
            let value = *d.value();
            let got = match s {
                Settle::Ack => d.ack(),
                Settle::Nack => d.nack(),
                Settle::NackAfter(ms) => d.nack_after(Duration::from_millis(*ms)),
                Settle::Touch => {
                    let r = d.touch();
                    real.held.insert(i, (d, offset, attempt));
                    r
                }
                Settle::Reject => d.reject(),
                Settle::Drop => {
                    drop(d);
                    // Dropping reports nothing; the model says what it did.
                    let _ = model.settle(offset, attempt, value, s);
                    return Ok(());
                }
            };
            same!(got, model.settle(offset, attempt, value, s));
        }
        AckOp::Join => {
            let m = real
                .topic
                .group_acked("g", StartAt::Earliest, (real.config)())
                .map_err(|e| format!("join: {e}"))?;
            model.members.push(m.member_id());
            real.members.push(m);
        }
        AckOp::Leave(i) if !real.members.is_empty() => {
            let i = i % real.members.len();
            let m = real.members.remove(i);
            model.leave(m.member_id());
            drop(m);
        }
        AckOp::Advance(ms) => {
            real.clock.advance(Duration::from_millis(*ms));
            model.now += ms;
        }
        AckOp::ReadDeadLetter => {
            if let Some(sub) = &mut real.dead_letters {
                let got = sub.try_recv().map(|m| {
                    let d = m.into_value();
                    assert_eq!((d.group.as_str(), d.partition, d.topic), ("g", 0, None));
                    (d.offset, d.deliveries, d.reason, d.value)
                });
                same!(got.ok(), model.dead_letters.pop_front());
            }
        }
        AckOp::Close => {
            real.topic.close();
            model.closed = true;
        }
        AckOp::Stats => check_ack_stats(model, real)?,
        _ => {}
    }
    Ok(())
}

fn check_ack_stats(model: &AckModel, real: &AckReal) -> Result<(), String> {
    let s = real.topic.stats();
    let g = &s.groups[0];
    let got = (
        (
            s.published,
            s.delivered,
            s.partitions[0].low,
            s.partitions[0].high,
        ),
        (g.members, g.committed.clone(), g.lag, g.delivered),
        (
            g.in_flight,
            g.redelivered,
            g.acked,
            g.dead_lettered,
            g.evicted_unacked,
        ),
    );
    let committed = model.committed();
    let want = (
        // The group is the topic's only reader: its deliveries are all the topic's.
        (model.published, model.delivered, model.low, model.high),
        (
            model.members.len(),
            vec![committed],
            model.high - committed,
            model.delivered,
        ),
        (
            model.unacked.len() as u64,
            model.redelivered,
            model.acked,
            model.dead_lettered,
            model.evicted_unacked,
        ),
    );
    if got != want {
        return Err(format!(
            "stats ((published, delivered, low, high), (members, committed, lag, delivered), \
             (in_flight, \
             redelivered, acked, dead_lettered, evicted_unacked)): memq gave {got:?}, the model \
             {want:?}"
        ));
    }
    Ok(())
}

fn run_acked(cfg: AckedConfig, ops: Vec<AckOp>) -> Result<(), TestCaseError> {
    let clock = Arc::new(ManualClock::new());
    let topic = Topic::new(
        TopicConfig::new(cfg.capacity)
            .overflow(cfg.overflow)
            .clock(clock.clone()),
    )
    .unwrap();
    let (dead_letter_topic, dead_letters) = match cfg.dead_letter {
        Some(cap) => {
            let t = Topic::<DeadLetter<u32>>::with_capacity(cap).unwrap();
            let sub = t.subscribe(StartAt::Earliest).unwrap();
            (Some(t), Some(sub))
        }
        None => (None, None),
    };
    let config = {
        let (clock, cfg) = (clock.clone(), cfg.clone());
        move || {
            let mut c = AckConfig::new()
                .ack_wait(Duration::from_millis(ACK_WAIT_MS))
                .max_in_flight(cfg.max_in_flight)
                .clock(clock.clone())
                .timer(Arc::new(NoTimer));
            if let Some(m) = cfg.max_deliveries {
                c = c.max_deliveries(m);
            }
            if let Some(t) = &dead_letter_topic {
                c = c.dead_letter(t.clone());
            }
            c
        }
    };
    let first = topic.group_acked("g", StartAt::Earliest, config()).unwrap();
    let mut model = AckModel {
        cfg,
        now: 0,
        values: BTreeMap::new(),
        low: 0,
        high: 0,
        closed: false,
        next: 0,
        unacked: BTreeMap::new(),
        ready: VecDeque::new(),
        delayed: BTreeSet::new(),
        leases: BTreeSet::new(),
        members: vec![first.member_id()],
        dead_letters: VecDeque::new(),
        delivered: 0,
        redelivered: 0,
        acked: 0,
        dead_lettered: 0,
        evicted_unacked: 0,
        published: 0,
    };
    let mut real = AckReal {
        clock,
        topic,
        config: Box::new(config),
        members: vec![first],
        held: Vec::new(),
        dead_letters,
    };
    let mut next_value = 0;
    for (n, op) in ops.iter().enumerate() {
        if let Err(e) = ack_step(&mut model, &mut real, op, &mut next_value) {
            return Err(TestCaseError::fail(format!("step {n}: {e}")));
        }
    }
    check_ack_stats(&model, &real).map_err(TestCaseError::fail)
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn explicit_acks_match_the_reference_model(
        cfg in acked_config(),
        ops in proptest::collection::vec(ack_op(), 1..80),
    ) {
        run_acked(cfg, ops)?;
    }
}

/// Found by the explicit-ack model: deliveries of an explicit-ack group were counted in
/// the group's `delivered` but not in the partition's and topic's `delivered`, which are
/// documented as "deliveries to subscribers and group members" (automatic-commit groups
/// are counted there). The model's stats check compares the topic's `delivered` too.
#[test]
fn explicit_ack_deliveries_count_in_the_topic_delivered() {
    let clock = Arc::new(ManualClock::new());
    let topic = Topic::new(TopicConfig::new(4).clock(clock.clone())).unwrap();
    let config = AckConfig::new().clock(clock).timer(Arc::new(NoTimer));
    let mut member = topic.group_acked("g", StartAt::Earliest, config).unwrap();
    topic.try_publish(1u32).unwrap();
    member.try_recv().unwrap().ack().unwrap();
    let stats = topic.stats();
    assert_eq!(stats.groups[0].delivered, 1);
    assert_eq!(stats.partitions[0].delivered, 1, "partition");
    assert_eq!(stats.delivered, 1, "topic");
}
