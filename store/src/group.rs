//! Consumer groups of a durable topic, whose positions and acknowledgements survive a
//! crash or a restart.
//!
//! A group hands each message to exactly one member. Its state is one claim position per
//! partition and the deliveries handed out and not yet settled (in flight); a
//! partition's committed offset is the oldest offset not settled yet. Settled means
//! acknowledged: explicitly ([`Delivery::ack`]) in a group with explicit acks, or, in a
//! plain group, by the member's next receive (as a Kafka consumer's auto-commit settles
//! what its previous poll returned) or by dropping the member.
//!
//! The committed offsets, with the offsets settled above them (acknowledged out of order,
//! or dead-lettered), are written to `groups/<name>` in the topic's directory (a new file,
//! synced, renamed over the old) every [`GroupConfig::commit_every`] settlements, on
//! [`DurableConsumer::commit`], and when the last member leaves. After a restart the group
//! goes on from there: what was delivered and not settled by the last write is delivered
//! again (at least once across crashes); what was settled by it never comes back.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use memq_core::{DeadLetterReason, StartAt, Subscriber, TryRecvError};

use crate::topic::{read_log, DurableTopic, Inner, Stored};
use crate::{DurableMessage, DurableRecvError, StoreError};

/// How a durable group settles deliveries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupConfig {
    /// `None`: a plain group (a member's next receive settles its previous delivery).
    /// `Some(wait)`: explicit acks, and a delivery not acked within `wait` is delivered
    /// again, to any member.
    pub ack_wait: Option<Duration>,
    /// With explicit acks: a message delivered this many times and still not acked is
    /// dead-lettered: moved to the group's dead-letter log (see
    /// [`DurableTopic::dead_letters`]), settled, never delivered again, counted in
    /// [`DurableGroupStats::dead_lettered`]. `None`: delivered until acked (or
    /// [rejected](Delivery::reject)).
    pub max_deliveries: Option<u32>,
    /// Write the group's state after this many settlements (1: after every one; it costs
    /// an fsync). Default: 256.
    pub commit_every: u32,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            ack_wait: None,
            max_deliveries: None,
            commit_every: 256,
        }
    }
}

impl GroupConfig {
    /// A group with explicit acks and a lease of `ack_wait`.
    pub fn acked(ack_wait: Duration) -> Self {
        GroupConfig {
            ack_wait: Some(ack_wait),
            ..GroupConfig::default()
        }
    }

    /// Sets [`GroupConfig::max_deliveries`].
    #[must_use]
    pub fn max_deliveries(mut self, n: u32) -> Self {
        self.max_deliveries = Some(n);
        self
    }

    /// Sets [`GroupConfig::commit_every`].
    #[must_use]
    pub fn commit_every(mut self, n: u32) -> Self {
        self.commit_every = n.max(1);
        self
    }
}

/// A snapshot of a durable group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurableGroupStats {
    /// Members now.
    pub members: usize,
    /// Per partition: the oldest offset not settled.
    pub committed: Vec<u64>,
    /// Per partition: the committed offset last written to disk.
    pub committed_on_disk: Vec<u64>,
    /// Deliveries handed out and not settled.
    pub in_flight: usize,
    /// Deliveries made again (after a nack, an expired lease or a restart).
    pub redelivered: u64,
    /// Messages moved to the group's dead-letter log (after `max_deliveries`, or
    /// rejected).
    pub dead_lettered: u64,
}

/// Offsets settled at or above their partition's committed offset, as runs of
/// consecutive offsets: a group whose oldest message stays unsettled while the others
/// are acked in order keeps one run, not one entry per message.
#[derive(Debug, Default)]
struct Settled {
    /// `(partition, start)` to the end of the run (exclusive).
    runs: BTreeMap<(u32, u64), u64>,
}

impl Settled {
    fn run_at(&self, p: u32, o: u64) -> Option<(u64, u64)> {
        let (&(q, start), &end) = self.runs.range(..=(p, o)).next_back()?;
        (q == p && o < end).then_some((start, end))
    }

    fn contains(&self, p: u32, o: u64) -> bool {
        self.run_at(p, o).is_some()
    }

    fn insert(&mut self, p: u32, o: u64) {
        if !self.contains(p, o) {
            self.insert_run(p, o, o + 1);
        }
    }

    /// Adds `start..end` (not overlapping what is there), joining the runs it touches.
    fn insert_run(&mut self, p: u32, start: u64, end: u64) {
        let (mut start, mut end) = (start, end);
        if let Some((&(q, s), &e)) = self.runs.range(..(p, start)).next_back() {
            if q == p && e >= start {
                start = s;
                end = end.max(e);
                self.runs.remove(&(q, s));
            }
        }
        while let Some((&(q, s), &e)) = self.runs.range((p, start)..).next() {
            if q != p || s > end {
                break;
            }
            end = end.max(e);
            self.runs.remove(&(q, s));
        }
        self.runs.insert((p, start), end);
    }

    /// Forgets what is at or past `end` in partition `p`; returns whether there was any.
    fn cut_from(&mut self, p: u32, end: u64) -> bool {
        let past: Vec<(u64, u64)> = self
            .runs
            .range((p, 0)..(p, u64::MAX))
            .map(|(&(_, s), &e)| (s, e))
            .filter(|&(_, e)| e > end)
            .collect();
        let cut = !past.is_empty();
        for (s, _) in past {
            self.runs.remove(&(p, s));
            if s < end {
                self.runs.insert((p, s), end);
            }
        }
        cut
    }

    /// Forgets what is below `committed` in partition `p`.
    fn trim(&mut self, p: u32, committed: u64) {
        let below: Vec<(u64, u64)> = self
            .runs
            .range((p, 0)..(p, committed))
            .map(|(&(_, s), &e)| (s, e))
            .collect();
        for (s, e) in below {
            self.runs.remove(&(p, s));
            if e > committed {
                self.runs.insert((p, committed), e);
            }
        }
    }

    fn runs(&self) -> impl Iterator<Item = (u32, u64, u64)> + '_ {
        self.runs.iter().map(|(&(p, s), &e)| (p, s, e))
    }
}

/// The member of a lease that no member holds: a delivery handed back with a delay.
const NO_MEMBER: u64 = u64::MAX;

#[derive(Debug)]
struct Lease {
    member: u64,
    deadline: Option<Instant>,
    deliveries: u32,
}

/// A message given up on, waiting to be moved to the dead-letter log.
#[derive(Debug, Clone, Copy)]
struct DeadEntry {
    partition: u32,
    offset: u64,
    deliveries: u32,
    reason: DeadLetterReason,
    /// A member is moving it now.
    moving: bool,
}

impl DeadEntry {
    fn new(partition: u32, offset: u64, deliveries: u32, reason: DeadLetterReason) -> Self {
        DeadEntry {
            partition,
            offset,
            deliveries,
            reason,
            moving: false,
        }
    }
}

#[derive(Debug)]
struct State {
    members: Vec<u64>,
    next_member: u64,
    /// Per partition: the next offset never handed out.
    next: Vec<u64>,
    in_flight: BTreeMap<(u32, u64), Lease>,
    /// Delivered before, not settled, to be handed out again (with its count so far).
    again: VecDeque<(u32, u64, u32)>,
    /// Given up on, to be moved to the dead-letter log (and then settled) by
    /// [`GroupShared::move_dead_letters`], made with the state's lock let go. A letter
    /// stays here until the lock hold that settles it (it holds the committed offset
    /// back meanwhile); one being moved is marked, so that no other member moves it too.
    dead: Vec<DeadEntry>,
    /// Settled offsets at or above their partition's committed offset.
    settled_above: Settled,
    since_write: u32,
    on_disk: Vec<u64>,
    redelivered: u64,
    dead_lettered: u64,
}

impl State {
    fn committed(&self, p: u32) -> u64 {
        let mut c = self.next[p as usize];
        if let Some((&(_, o), _)) = self.in_flight.range((p, 0)..(p, u64::MAX)).next() {
            c = c.min(o);
        }
        for &(q, o, _) in &self.again {
            if q == p {
                c = c.min(o);
            }
        }
        for d in &self.dead {
            if d.partition == p {
                c = c.min(d.offset);
            }
        }
        c
    }

    /// Drops settled offsets that the committed offsets passed.
    fn trim(&mut self) {
        for p in 0..self.next.len() as u32 {
            let c = self.committed(p);
            self.settled_above.trim(p, c);
        }
    }

    /// The partitions `member` reads: all of them for a topic of one partition (members
    /// compete for it), else its share, dealt round the members in order.
    fn assigned(&self, member: u64) -> Vec<u32> {
        let n = self.next.len() as u32;
        if n == 1 {
            return vec![0];
        }
        let Some(i) = self.members.iter().position(|&m| m == member) else {
            return Vec::new();
        };
        (0..n)
            .filter(|p| *p as usize % self.members.len() == i)
            .collect()
    }
}

/// One group, shared by its members in this process.
#[derive(Debug)]
pub(crate) struct GroupShared {
    name: String,
    path: PathBuf,
    topic: Arc<Inner>,
    config: GroupConfig,
    state: Mutex<State>,
    /// Per partition: the committed offset, in the partition's `readers` (the retention
    /// floor under `Overflow::Block`) for as long as the group has members here.
    positions: Vec<Arc<AtomicU64>>,
}

impl Drop for GroupShared {
    fn drop(&mut self) {
        for (p, at) in self.positions.iter().enumerate() {
            let part = &self.topic.parts[p];
            part.readers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|r| !Arc::ptr_eq(r, at));
            part.reader_moved();
        }
    }
}

impl GroupShared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes the committed offsets and the settled offsets above them.
    fn write(&self, s: &mut State) -> Result<(), StoreError> {
        s.trim();
        let committed: Vec<u64> = (0..s.next.len() as u32).map(|p| s.committed(p)).collect();
        write_atomically(&self.path, &render_state(&committed, &s.settled_above))?;
        s.on_disk = committed;
        s.since_write = 0;
        Ok(())
    }

    /// Counts a settlement; writes the state every `commit_every`.
    fn settled(&self, s: &mut State) -> Result<(), StoreError> {
        s.since_write += 1;
        if s.since_write >= self.config.commit_every {
            self.write(s)?;
        }
        Ok(())
    }

    /// Stores each partition's committed offset where the topic's retention floor sees
    /// it (under `Overflow::Block`, publishers wait rather than delete what the group has
    /// not settled), and wakes publishers waiting for room if it moved.
    fn publish_positions(&self, s: &State) {
        for (p, at) in self.positions.iter().enumerate() {
            let c = s.committed(p as u32);
            if at.swap(c, Ordering::SeqCst) != c {
                self.topic.parts[p].reader_moved();
            }
        }
    }

    /// Moves the claim positions past what retention deleted, dropping deliveries due
    /// again that are gone; returns how many messages the group lost so.
    fn skip_deleted(&self, s: &mut State) -> u64 {
        let mut lost = 0;
        for (p, part) in self.topic.parts.iter().enumerate() {
            let start = part.start.load(Ordering::SeqCst);
            if s.next[p] < start {
                lost += start - s.next[p];
                s.next[p] = start;
            }
        }
        let before = s.again.len();
        let parts = &self.topic.parts;
        s.again
            .retain(|&(p, o, _)| o >= parts[p as usize].start.load(Ordering::SeqCst));
        lost += (before - s.again.len()) as u64;
        if lost > 0 {
            for p in 0..s.next.len() as u32 {
                let start = parts[p as usize].start.load(Ordering::SeqCst);
                s.settled_above.trim(p, start);
            }
            self.publish_positions(s);
        }
        lost
    }

    /// Moves the messages given up on to the dead-letter log, each published there
    /// (durably under `Always`) before it is settled here and the group's state written,
    /// with the state's lock let go meanwhile (a crash between the two moves it again
    /// after the restart: at least once). A message retention deleted meanwhile is
    /// settled without a letter. Under `Always` this waits for two syncs per letter,
    /// in the receive that moves it (in the poll, for an async one).
    ///
    /// # Errors
    ///
    /// Opening the dead-letter log, or publishing to it, failed: the letters not moved
    /// stay to be moved next time.
    fn move_dead_letters(&self) -> Result<(), StoreError> {
        let letters: Vec<DeadEntry> = {
            let mut s = self.lock();
            s.dead
                .iter_mut()
                .filter(|d| !d.moving)
                .map(|d| {
                    d.moving = true;
                    *d
                })
                .collect()
        };
        if letters.is_empty() {
            return Ok(());
        }
        // Letters not moved go back to waiting (unmarked) for the next try.
        let unmark = |from: &[DeadEntry]| {
            let mut s = self.lock();
            for d in s.dead.iter_mut() {
                if from
                    .iter()
                    .any(|l| (l.partition, l.offset) == (d.partition, d.offset))
                {
                    d.moving = false;
                }
            }
        };
        let log = match self.topic.dead_letter_topic(&self.name) {
            Ok(log) => log,
            Err(e) => {
                unmark(&letters);
                return Err(e);
            }
        };
        for (i, letter) in letters.iter().enumerate() {
            let (p, o) = (letter.partition, letter.offset);
            let sent = match read_disk(&self.topic, p, o) {
                Ok(m) => {
                    let body = crate::dead_letter::envelope(
                        &self.name,
                        &m,
                        letter.deliveries,
                        letter.reason,
                    );
                    let sent = match m.key {
                        Some(k) => log.publish_keyed_blocking(k, body),
                        None => log.publish_blocking(body),
                    };
                    match sent {
                        Ok(_) => true,
                        // The topic closes: the letter stays unsettled (delivered again
                        // after a restart, and moved then).
                        Err(crate::DurablePublishError::Closed(_)) => {
                            unmark(&letters[i..]);
                            return Ok(());
                        }
                        Err(e) => {
                            unmark(&letters[i..]);
                            return Err(match e {
                                crate::DurablePublishError::Store(e, _) => e,
                                other => StoreError::Format {
                                    file: log.dir().to_path_buf(),
                                    reason: other.to_string(),
                                },
                            });
                        }
                    }
                }
                // Deleted by retention: nothing to move.
                Err(DurableRecvError::Lagged(_)) => false,
                Err(DurableRecvError::Store(e)) => {
                    unmark(&letters[i..]);
                    return Err(e);
                }
                Err(_) => false,
            };
            let mut s = self.lock();
            s.dead.retain(|d| (d.partition, d.offset) != (p, o));
            if sent {
                s.dead_lettered += 1;
            }
            s.settled_above.insert(p, o);
            self.publish_positions(&s);
            // Written at once, whatever `commit_every` says: a dead letter is rare, and
            // once it is in the dead-letter log it must not be delivered again after a
            // restart.
            let written = self.write(&mut s);
            drop(s);
            if let Err(e) = written {
                unmark(&letters[i + 1..]);
                return Err(e);
            }
        }
        Ok(())
    }

    fn settle(&self, s: &mut State, p: u32, o: u64) {
        if s.in_flight.remove(&(p, o)).is_some() {
            s.settled_above.insert(p, o);
            self.publish_positions(s);
        }
    }
}

impl DurableTopic {
    /// Joins the durable group `name` (creating it at `start` if it has never been
    /// committed in this directory; otherwise it goes on from its committed offsets and
    /// `start` is ignored).
    ///
    /// # Errors
    ///
    /// [`StoreError::Format`] if the group's state file is damaged; [`StoreError::Io`];
    /// [`StoreError::InvalidConfig`] if the group is open in this process with another
    /// configuration.
    pub fn group(
        &self,
        name: &str,
        start: StartAt,
        config: GroupConfig,
    ) -> Result<DurableConsumer, StoreError> {
        let shared = {
            let mut groups = self.inner.groups.lock().unwrap_or_else(|e| e.into_inner());
            match groups.get(name).and_then(Weak::upgrade) {
                Some(g) => {
                    if g.config != config {
                        return Err(StoreError::InvalidConfig(
                            "the group is open in this process with another configuration",
                        ));
                    }
                    g
                }
                None => {
                    let g = Arc::new(open_group(&self.inner, name, start, config)?);
                    groups.insert(name.to_string(), Arc::downgrade(&g));
                    g
                }
            }
        };
        let id = {
            let mut s = shared.lock();
            let id = s.next_member;
            s.next_member += 1;
            s.members.push(id);
            id
        };
        // Members waiting may have partitions to hand over now.
        self.inner.notify_news();
        Ok(DurableConsumer {
            readers: (0..self.inner.parts.len()).map(|_| None).collect(),
            shared,
            id,
            last: None,
            rotate: 0,
        })
    }
}

fn group_path(dir: &Path, name: &str) -> PathBuf {
    // Any name, as a file name: hex of its bytes.
    let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
    dir.join("groups").join(format!("{hex}.group"))
}

fn open_group(
    inner: &Arc<Inner>,
    name: &str,
    start: StartAt,
    config: GroupConfig,
) -> Result<GroupShared, StoreError> {
    let path = group_path(&inner.dir, name);
    let n = inner.parts.len();
    let (next, settled_above) = match std::fs::read(&path) {
        // Within the log's end: see `fit_groups_to_log`, run when the topic opened.
        Ok(bytes) => parse_state(&path, &bytes, n)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut next = Vec::with_capacity(n);
            for part in &inner.parts {
                let high = part.published.load(Ordering::SeqCst);
                next.push(match start {
                    StartAt::Earliest => read_log(part).start(),
                    StartAt::Latest => high,
                    StartAt::Offset(o) if o > high => {
                        return Err(StoreError::InvalidConfig(
                            "a group's start offset is past the end of a partition",
                        ))
                    }
                    StartAt::Offset(o) => o,
                });
            }
            (next, Settled::default())
        }
        Err(e) => return Err(StoreError::io("read", &path, e)),
    };
    let mut state = State {
        members: Vec::new(),
        next_member: 0,
        on_disk: next.clone(),
        next,
        in_flight: BTreeMap::new(),
        again: VecDeque::new(),
        dead: Vec::new(),
        settled_above,
        since_write: 0,
        redelivered: 0,
        dead_lettered: 0,
    };
    // Offsets settled above the committed ones are skipped when reached; the committed
    // ones themselves are where the claim positions start.
    state.trim();
    let positions: Vec<Arc<AtomicU64>> = (0..n as u32)
        .map(|p| Arc::new(AtomicU64::new(state.committed(p))))
        .collect();
    for (part, at) in inner.parts.iter().zip(&positions) {
        part.readers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(at.clone());
    }
    let shared = GroupShared {
        name: name.to_string(),
        path,
        topic: inner.clone(),
        config,
        state: Mutex::new(state),
        positions,
    };
    // Written at once, so that a new group's start is fixed from now on (and a clamped
    // one is corrected on disk).
    shared.write(&mut shared.lock())?;
    Ok(shared)
}

type Parsed = (Vec<u64>, Settled);

/// A group's state file: its committed offsets and the runs settled above them, with a
/// CRC-32C of the whole.
fn render_state(committed: &[u64], settled: &Settled) -> Vec<u8> {
    let mut text = format!("memq-group 1\npartitions {}\n", committed.len());
    for (p, c) in committed.iter().enumerate() {
        text.push_str(&format!("committed {p} {c}\n"));
    }
    for (p, start, end) in settled.runs() {
        text.push_str(&format!("settled {p} {start} {end}\n"));
    }
    let crc = crc32c::crc32c(text.as_bytes());
    text.push_str(&format!("crc {crc}\n"));
    text.into_bytes()
}

/// When a durable topic opens: every group's state is brought within the log's end,
/// `ends` (one per partition). The log may end before what a group committed: a power
/// loss took records that were never synced while the group's file was, or a repair cut
/// the log. The offsets from the log's end on will be new messages, which the group must
/// not skip; so its committed offsets and settled runs are cut there, and the file is
/// written again.
pub(crate) fn fit_groups_to_log(dir: &Path, ends: &[u64]) -> Result<(), StoreError> {
    let groups = dir.join("groups");
    let entries = match std::fs::read_dir(&groups) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StoreError::io("read", &groups, e)),
    };
    for entry in entries {
        let path = entry
            .map_err(|e| StoreError::io("read", &groups, e))?
            .path();
        if path.extension().is_none_or(|e| e != "group") {
            continue;
        }
        let bytes = std::fs::read(&path).map_err(|e| StoreError::io("read", &path, e))?;
        let (mut committed, mut settled) = parse_state(&path, &bytes, ends.len())?;
        let mut changed = false;
        for (p, &end) in ends.iter().enumerate() {
            if committed[p] > end {
                committed[p] = end;
                changed = true;
            }
            changed |= settled.cut_from(p as u32, end);
        }
        if changed {
            write_atomically(&path, &render_state(&committed, &settled))?;
        }
    }
    Ok(())
}

fn parse_state(path: &Path, bytes: &[u8], n: usize) -> Result<Parsed, StoreError> {
    let bad = |why: &str| StoreError::Format {
        file: path.to_path_buf(),
        reason: format!("group state: {why}"),
    };
    let text = std::str::from_utf8(bytes).map_err(|_| bad("not text"))?;
    let body_end = text.rfind("crc ").ok_or_else(|| bad("no checksum"))?;
    let (body, crc_line) = text.split_at(body_end);
    let crc: u32 = crc_line[4..]
        .trim()
        .parse()
        .map_err(|_| bad("bad checksum line"))?;
    if crc32c::crc32c(body.as_bytes()) != crc {
        return Err(bad("checksum mismatch"));
    }
    let mut next = vec![0u64; n];
    let mut settled = Settled::default();
    let mut lines = body.lines();
    if lines.next() != Some("memq-group 1") {
        return Err(bad("unknown version"));
    }
    if lines.next() != Some(&*format!("partitions {n}")) {
        return Err(bad("written for another partition count"));
    }
    for line in lines {
        let f: Vec<&str> = line.split(' ').collect();
        let num = |i: usize| {
            f.get(i)
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| bad(line))
        };
        let p = num(1)?;
        if p >= n as u64 {
            return Err(bad(line));
        }
        let p = p as u32;
        match (f[0], f.len()) {
            ("committed", 3) => next[p as usize] = num(2)?,
            ("settled", 4) => {
                let (start, end) = (num(2)?, num(3)?);
                if start >= end {
                    return Err(bad(line));
                }
                settled.insert_run(p, start, end);
            }
            _ => return Err(bad(line)),
        }
    }
    Ok((next, settled))
}

/// Writes `bytes` to `path` so that a crash leaves the old file or the new, never a mix:
/// a new file, synced, renamed over the old, and the directory synced.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().expect("a file in a directory");
    crate::log::create_dir_durably(dir)?;
    let tmp = path.with_extension("tmp");
    let file = std::fs::File::create(&tmp).map_err(|e| StoreError::io("create", &tmp, e))?;
    use std::io::Write;
    (&file)
        .write_all(bytes)
        .and_then(|()| file.sync_data())
        .map_err(|e| StoreError::io("write", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| StoreError::io("rename", path, e))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io("fsync", dir, e))
}

/// A member of a durable group. See the [module documentation](crate::group) for what
/// is delivered when.
#[derive(Debug)]
pub struct DurableConsumer {
    shared: Arc<GroupShared>,
    id: u64,
    /// Per partition: a reader of the in-memory topic, made when first needed.
    readers: Vec<Option<Subscriber<Stored>>>,
    /// A plain group's member's last delivery, settled by its next receive.
    last: Option<(u32, u64)>,
    rotate: usize,
}

/// A delivery of a durable group with explicit acks: settle it with [`Delivery::ack`],
/// or hand it back with [`Delivery::nack`]. Dropped unsettled, it is delivered again
/// when its lease ends.
#[derive(Debug)]
pub struct Delivery {
    message: DurableMessage,
    deliveries: u32,
    /// The member it was delivered to.
    member: u64,
    shared: Arc<GroupShared>,
}

impl Delivery {
    /// The message.
    pub fn message(&self) -> &DurableMessage {
        &self.message
    }

    /// How many times it has been delivered, this time included.
    pub fn deliveries(&self) -> u32 {
        self.deliveries
    }

    /// Settles it: it is never delivered again, across restarts too once the group's
    /// state is written (see [`DurableConsumer::commit`]).
    ///
    /// # Errors
    ///
    /// [`StoreError::Io`] if writing the group's state failed (the ack is kept in memory
    /// and written with the next write).
    pub fn ack(self) -> Result<(), StoreError> {
        let shared = self.shared.clone();
        let (p, o) = (self.message.partition, self.message.offset);
        let mut s = shared.lock();
        match s.in_flight.get(&(p, o)) {
            Some(l) if self.holds(l) => shared.settle(&mut s, p, o),
            _ => {
                // Its lease ran out (or its member left) and it waits to be delivered
                // again: the ack still settles it. Anything else (delivered to another
                // member since, or dead-lettered) it cannot.
                let i = s
                    .again
                    .iter()
                    .position(|&(q, x, n)| (q, x) == (p, o) && n == self.deliveries)
                    .ok_or(StoreError::LeaseExpired)?;
                s.again.remove(i);
                s.settled_above.insert(p, o);
                shared.publish_positions(&s);
            }
        }
        let written = shared.settled(&mut s);
        drop(s);
        if shared.topic.topic.is_closed() {
            // Members waiting for the group to drain look again.
            shared.topic.notify_news();
        }
        written
    }

    /// Whether `lease` is this delivery's (not a later delivery of the same message).
    fn holds(&self, lease: &Lease) -> bool {
        lease.member == self.member && lease.deliveries == self.deliveries
    }

    /// Gives up on it: moves it to the group's dead-letter log (see
    /// [`DurableTopic::dead_letters`]) with [`DeadLetterReason::Rejected`], and settles
    /// it: it is never delivered again. For a message no member can ever process.
    ///
    /// If the topic closes before the move, the message stays unsettled: it is delivered
    /// again after a restart (and can be rejected then).
    ///
    /// # Errors
    ///
    /// [`StoreError::LeaseExpired`] if it was handed out again since (its lease ran
    /// out); as [`Delivery::ack`] if the move failed (it stays to be moved by the
    /// group's next receive).
    pub fn reject(self) -> Result<(), StoreError> {
        let shared = self.shared.clone();
        let key = (self.message.partition, self.message.offset);
        {
            let mut s = shared.lock();
            if !s.in_flight.get(&key).is_some_and(|l| self.holds(l)) {
                return Err(StoreError::LeaseExpired);
            }
            let l = s.in_flight.remove(&key).expect("looked up");
            s.dead.push(DeadEntry::new(
                key.0,
                key.1,
                l.deliveries,
                DeadLetterReason::Rejected,
            ));
        }
        let moved = shared.move_dead_letters();
        if shared.topic.topic.is_closed() {
            // Members waiting for the group to drain look again.
            shared.topic.notify_news();
        }
        moved
    }

    /// Extends its lease by the group's `ack_wait`, from now: for work that takes longer
    /// than one lease.
    ///
    /// # Errors
    ///
    /// [`StoreError::LeaseExpired`] if it was handed out again since (its lease ran
    /// out, and a receive took it back). A lease that ran out and was not taken back
    /// yet is still this delivery's, as for [`Delivery::ack`].
    pub fn touch(&mut self) -> Result<(), StoreError> {
        let key = (self.message.partition, self.message.offset);
        let wait = self.shared.config.ack_wait;
        let mut s = self.shared.lock();
        match s.in_flight.get_mut(&key) {
            Some(l) if l.member == self.member && l.deliveries == self.deliveries => {
                l.deadline = wait.and_then(|w| Instant::now().checked_add(w));
                Ok(())
            }
            _ => Err(StoreError::LeaseExpired),
        }
    }

    /// Hands it back to be delivered again, to any member, once `delay` has passed (a
    /// retry with backoff). Until then it holds its partition's committed offset back,
    /// as a delivery in flight does; after a restart it is delivered again at once. A
    /// delay too long to add to the clock means never, until a restart.
    ///
    /// # Errors
    ///
    /// [`StoreError::LeaseExpired`] if it was handed out again since (as
    /// [`Delivery::touch`]).
    pub fn nack_after(self, delay: Duration) -> Result<(), StoreError> {
        let key = (self.message.partition, self.message.offset);
        {
            let mut s = self.shared.lock();
            match s.in_flight.get_mut(&key) {
                Some(l) if self.holds(l) => {
                    // Held by no member now: it ends as a lease does, and is then
                    // delivered again.
                    l.member = NO_MEMBER;
                    l.deadline = Instant::now().checked_add(delay);
                }
                _ => return Err(StoreError::LeaseExpired),
            }
        }
        // Members waiting compute their wake-up from the leases: they look again.
        self.shared.topic.notify_news();
        Ok(())
    }

    /// Hands it back to be delivered again, to any member, at once. Does nothing if its
    /// lease ran out already.
    pub fn nack(self) {
        let shared = self.shared.clone();
        let key = (self.message.partition, self.message.offset);
        let mut s = shared.lock();
        if s.in_flight.get(&key).is_some_and(|l| self.holds(l)) {
            let l = s.in_flight.remove(&key).expect("looked up");
            s.again.push_back((key.0, key.1, l.deliveries));
        }
        drop(s);
        shared.topic.notify_news();
    }
}

enum Claim {
    Got(u32, u64, u32),
    /// Retention deleted this many messages the group had not read.
    Lagged(u64),
    /// Nothing now; with explicit acks, a lease ends at this instant.
    Wait(Option<Instant>),
}

impl DurableConsumer {
    /// The group's name.
    pub fn group_name(&self) -> &str {
        &self.shared.name
    }

    /// The partitions this member reads now (they move when members join or leave).
    pub fn assignment(&self) -> Vec<u32> {
        self.shared.lock().assigned(self.id)
    }

    /// Writes the group's committed offsets now (an fsync).
    ///
    /// # Errors
    ///
    /// [`StoreError::Io`].
    pub fn commit(&mut self) -> Result<(), StoreError> {
        let shared = self.shared.clone();
        let mut s = shared.lock();
        self.settle_last(&mut s);
        shared.write(&mut s)
    }

    /// A snapshot of the group.
    pub fn stats(&self) -> DurableGroupStats {
        let s = self.shared.lock();
        DurableGroupStats {
            members: s.members.len(),
            committed: (0..s.next.len() as u32).map(|p| s.committed(p)).collect(),
            committed_on_disk: s.on_disk.clone(),
            in_flight: s.in_flight.len(),
            redelivered: s.redelivered,
            dead_lettered: s.dead_lettered,
        }
    }

    fn settle_last(&mut self, s: &mut State) {
        if let Some((p, o)) = self.last.take() {
            self.shared.settle(s, p, o);
        }
    }

    /// Receives the next message of a plain group, on this thread; settles this
    /// member's previous one.
    ///
    /// # Errors
    ///
    /// `Closed` once the topic is closed and everything was handed out; `Store`.
    /// With explicit acks, use [`DurableConsumer::recv_delivery_blocking`].
    pub fn recv_blocking(&mut self) -> Result<DurableMessage, DurableRecvError> {
        let (m, _) = self.next_blocking(None)?;
        Ok(m)
    }

    /// [`DurableConsumer::recv_blocking`] without waiting: `Empty` if nothing is there.
    ///
    /// # Errors
    ///
    /// As [`DurableConsumer::recv_blocking`], and `Empty`.
    pub fn try_recv(&mut self) -> Result<DurableMessage, DurableRecvError> {
        let (m, _) = self.next_blocking(Some(Instant::now()))?;
        Ok(m)
    }

    /// [`DurableConsumer::recv_blocking`], giving up after `timeout`.
    ///
    /// # Errors
    ///
    /// As [`DurableConsumer::recv_blocking`], and `Timeout`.
    pub fn recv_blocking_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<DurableMessage, DurableRecvError> {
        let (m, _) = self
            .next_blocking(Some(Instant::now() + timeout))
            .map_err(|e| match e {
                DurableRecvError::Empty => DurableRecvError::Timeout,
                e => e,
            })?;
        Ok(m)
    }

    /// Receives the next delivery of a group with explicit acks, on this thread.
    ///
    /// # Errors
    ///
    /// As [`DurableConsumer::recv_blocking`].
    pub fn recv_delivery_blocking(&mut self) -> Result<Delivery, DurableRecvError> {
        self.recv_delivery_until(None)
    }

    /// [`DurableConsumer::recv_delivery_blocking`], giving up after `timeout`.
    ///
    /// # Errors
    ///
    /// As [`DurableConsumer::recv_blocking`], and `Timeout`.
    pub fn recv_delivery_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<Delivery, DurableRecvError> {
        self.recv_delivery_until(Some(Instant::now() + timeout))
            .map_err(|e| match e {
                DurableRecvError::Empty => DurableRecvError::Timeout,
                e => e,
            })
    }

    fn recv_delivery_until(
        &mut self,
        until: Option<Instant>,
    ) -> Result<Delivery, DurableRecvError> {
        let (message, deliveries) = self.next_blocking(until)?;
        Ok(Delivery {
            message,
            deliveries,
            member: self.id,
            shared: self.shared.clone(),
        })
    }

    /// Claims and reads the next message, waiting (until `until`, if given) for one.
    fn next_blocking(
        &mut self,
        until: Option<Instant>,
    ) -> Result<(DurableMessage, u32), DurableRecvError> {
        loop {
            let topic = self.shared.topic.clone();
            // Registered before looking, so that a publish (or a nack, or a member
            // leaving) after the look wakes the wait below.
            let ticket = topic.news_ticket();
            match self.claim()? {
                Claim::Got(p, o, deliveries) => return self.hand_over(p, o, deliveries),
                Claim::Lagged(n) => return Err(DurableRecvError::Lagged(n)),
                Claim::Wait(lease_end) => {
                    if topic.topic.is_closed() && self.drained() {
                        return Err(DurableRecvError::Closed);
                    }
                    if until.is_some_and(|u| Instant::now() >= u) {
                        return Err(DurableRecvError::Empty);
                    }
                    let wake = match (until, lease_end) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                    topic.wait_news(ticket, wake);
                }
            }
        }
    }

    /// The async receive of a plain group: settles this member's previous message, then
    /// waits for the next without blocking the thread (any runtime).
    ///
    /// # Errors
    ///
    /// As [`DurableConsumer::recv_blocking`].
    pub async fn recv(&mut self) -> Result<DurableMessage, DurableRecvError> {
        Ok(self.next_async().await?.0)
    }

    /// The async receive of a group with explicit acks. A lease that ends while it waits
    /// wakes it through memq's `ThreadTimer` (a thread that exists only while wake-ups
    /// are scheduled).
    ///
    /// # Errors
    ///
    /// As [`DurableConsumer::recv_blocking`].
    pub async fn recv_delivery(&mut self) -> Result<Delivery, DurableRecvError> {
        let (message, deliveries) = self.next_async().await?;
        Ok(Delivery {
            message,
            deliveries,
            member: self.id,
            shared: self.shared.clone(),
        })
    }

    async fn next_async(&mut self) -> Result<(DurableMessage, u32), DurableRecvError> {
        // Often ready at once (a backlog): give the runtime its thread back now and then.
        crate::coop::yield_sometimes().await;
        loop {
            let topic = self.shared.topic.clone();
            let ticket = topic.news_ticket();
            match self.claim()? {
                Claim::Got(p, o, deliveries) => return self.hand_over(p, o, deliveries),
                Claim::Lagged(n) => return Err(DurableRecvError::Lagged(n)),
                Claim::Wait(lease_end) => {
                    if topic.topic.is_closed() && self.drained() {
                        return Err(DurableRecvError::Closed);
                    }
                    // Withdrawn when dropped (the wait ended first).
                    let mut timer = None;
                    std::future::poll_fn(|cx| {
                        if let Some(at) = lease_end {
                            let now = Instant::now();
                            if now >= at {
                                return std::task::Poll::Ready(());
                            }
                            if timer.is_none() {
                                timer = Some(memq_core::Timer::wake_after_cancellable(
                                    &memq_core::ThreadTimer::global(),
                                    at - now,
                                    cx.waker().clone(),
                                ));
                            }
                        }
                        topic.poll_news(&ticket, cx)
                    })
                    .await;
                    drop(timer);
                }
            }
        }
    }

    /// Reads a claimed message and hands it over; on failure puts it back to be claimed
    /// again.
    fn hand_over(
        &mut self,
        p: u32,
        o: u64,
        deliveries: u32,
    ) -> Result<(DurableMessage, u32), DurableRecvError> {
        match self.read(p, o) {
            Ok(m) => Ok((m, deliveries)),
            Err(e) => {
                let shared = self.shared.clone();
                let mut s = shared.lock();
                if self.last == Some((p, o)) {
                    self.last = None;
                }
                let gone = matches!(e, DurableRecvError::Lagged(_));
                if s.in_flight.remove(&(p, o)).is_some() && !gone {
                    // Not handed over: it goes back to be claimed again. (Deleted by
                    // retention between the claim and the read: gone, and said so.)
                    s.again.push_front((p, o, deliveries - 1));
                }
                shared.publish_positions(&s);
                Err(e)
            }
        }
    }

    /// Whether everything published was handed out and settled.
    fn drained(&self) -> bool {
        let s = self.shared.lock();
        s.in_flight.is_empty()
            && s.again.is_empty()
            && s.dead.is_empty()
            && self
                .shared
                .topic
                .parts
                .iter()
                .enumerate()
                .all(|(p, part)| s.next[p] >= part.published.load(Ordering::SeqCst))
    }

    /// Takes the next message for this member, and moves what the group gave up on to
    /// its dead-letter log.
    fn claim(&mut self) -> Result<Claim, DurableRecvError> {
        // A move that fails leaves its letters to the next receive: it never keeps this
        // one from handing out a message, or from saying what retention deleted.
        let before = self.shared.move_dead_letters();
        let claim = self.claim_locked()?;
        let after = self.shared.move_dead_letters();
        match (claim, before.and(after)) {
            (Claim::Wait(_), Err(e)) => Err(DurableRecvError::Store(e)),
            (claim, _) => Ok(claim),
        }
    }

    /// Takes the next message for this member under the group's lock.
    fn claim_locked(&mut self) -> Result<Claim, DurableRecvError> {
        let shared = self.shared.clone();
        let mut s = shared.lock();
        if self.last.is_some() {
            self.settle_last(&mut s);
            shared.settled(&mut s).map_err(DurableRecvError::Store)?;
        }
        let now = Instant::now();
        // Leases that ended: their messages are delivered again.
        let ended: Vec<(u32, u64)> = s
            .in_flight
            .iter()
            .filter(|(_, l)| l.deadline.is_some_and(|d| d <= now))
            .map(|(&k, _)| k)
            .collect();
        for k in ended {
            let l = s.in_flight.remove(&k).expect("listed");
            s.again.push_back((k.0, k.1, l.deliveries));
        }
        // What retention deleted before the group read it: told once, then gone.
        let lagged = shared.skip_deleted(&mut s);
        if lagged > 0 {
            return Ok(Claim::Lagged(lagged));
        }
        let assigned = s.assigned(self.id);
        let max = shared.config.max_deliveries;
        // First what must be delivered again, of this member's partitions.
        while let Some(i) = s.again.iter().position(|(p, _, _)| assigned.contains(p)) {
            let (p, o, n) = s.again.remove(i).expect("found");
            if max.is_some_and(|m| n >= m) {
                // Moved to the dead-letter log once the lock is let go (see `claim`).
                s.dead
                    .push(DeadEntry::new(p, o, n, DeadLetterReason::MaxDeliveries));
                continue;
            }
            // A count of 0: handed back before it was ever handed over (a failed read).
            if n > 0 {
                s.redelivered += 1;
            }
            return Ok(self.lease(&mut s, p, o, n + 1, now));
        }
        for k in 0..assigned.len() {
            let p = assigned[(self.rotate + k) % assigned.len()];
            let high = shared.topic.parts[p as usize]
                .published
                .load(Ordering::SeqCst);
            while s.next[p as usize] < high {
                let o = s.next[p as usize];
                s.next[p as usize] += 1;
                if s.settled_above.contains(p, o) {
                    // Settled before a restart: never again.
                    continue;
                }
                self.rotate = (self.rotate + k + 1) % assigned.len().max(1);
                return Ok(self.lease(&mut s, p, o, 1, now));
            }
        }
        let lease_end = s.in_flight.values().filter_map(|l| l.deadline).min();
        Ok(Claim::Wait(lease_end))
    }

    fn lease(&mut self, s: &mut State, p: u32, o: u64, deliveries: u32, now: Instant) -> Claim {
        let deadline = self.shared.config.ack_wait.map(|w| now + w);
        s.in_flight.insert(
            (p, o),
            Lease {
                member: self.id,
                deadline,
                deliveries,
            },
        );
        if self.shared.config.ack_wait.is_none() {
            self.last = Some((p, o));
        }
        Claim::Got(p, o, deliveries)
    }

    /// Reads the message at `o` of partition `p`: from the in-memory topic if it still
    /// holds it, else from disk.
    fn read(&mut self, p: u32, o: u64) -> Result<DurableMessage, DurableRecvError> {
        let topic = &self.shared.topic;
        if self.readers[p as usize].is_none() {
            let sub = topic
                .topic
                .subscribe_partition(p, StartAt::Latest)
                .map_err(|e| DurableRecvError::Store(StoreError::InvalidConfig(leak(e))))?;
            self.readers[p as usize] = Some(sub);
        }
        let sub = self.readers[p as usize].as_mut().expect("made above");
        if sub.position(p) != Some(o) && sub.seek(o).is_err() {
            return read_disk(topic, p, o);
        }
        match sub.try_recv() {
            Ok(m) if m.offset() == o => {
                let v = m.into_value();
                Ok(DurableMessage {
                    partition: p,
                    offset: o,
                    timestamp: v.timestamp,
                    key: v.key,
                    payload: v.payload,
                })
            }
            Ok(_) | Err(TryRecvError::Lagged(_)) | Err(TryRecvError::Empty) => {
                read_disk(topic, p, o)
            }
            Err(_) => read_disk(topic, p, o),
        }
    }
}

fn leak(e: memq_core::Error) -> &'static str {
    // Never expected (the partition exists); a fixed message rather than a panic.
    let _ = e;
    "could not read a partition of the in-memory topic"
}

fn read_disk(topic: &Inner, p: u32, o: u64) -> Result<DurableMessage, DurableRecvError> {
    let part = &topic.parts[p as usize];
    let batch = read_log(part).read(o, 1).map_err(DurableRecvError::Store)?;
    match batch.records.into_iter().next() {
        Some(r) if r.offset == o => Ok(DurableMessage {
            partition: p,
            offset: o,
            timestamp: r.timestamp.unwrap_or(0),
            key: r.key.map(Bytes::from),
            payload: Bytes::from(r.payload),
        }),
        // Retention deleted it (under DropOldest) before the group read it.
        _ => Err(DurableRecvError::Lagged(1)),
    }
}

impl Drop for DurableConsumer {
    fn drop(&mut self) {
        let shared = self.shared.clone();
        let mut s = shared.lock();
        // A plain member's last delivery counts as processed; an explicit-ack member's
        // unacked ones are delivered again to the others at once.
        self.settle_last(&mut s);
        let mine: Vec<(u32, u64)> = s
            .in_flight
            .iter()
            .filter(|(_, l)| l.member == self.id)
            .map(|(&k, _)| k)
            .collect();
        for k in mine {
            let l = s.in_flight.remove(&k).expect("listed");
            s.again.push_back((k.0, k.1, l.deliveries));
        }
        s.members.retain(|&m| m != self.id);
        if s.members.is_empty() {
            // Errors here lose nothing acknowledged as durable: the state on disk is
            // older, and what it does not cover is delivered again.
            let _ = shared.write(&mut s);
        }
        drop(s);
        shared.topic.notify_news();
    }
}

#[cfg(test)]
mod tests {
    use super::Settled;

    #[test]
    fn settled_offsets_join_into_runs_and_trim_at_the_committed_offset() {
        let mut s = Settled::default();
        for o in [5, 7, 6, 9, 3, 4] {
            s.insert(0, o);
        }
        s.insert(1, 5);
        s.insert(0, 6); // again: nothing changes
        assert_eq!(
            s.runs().collect::<Vec<_>>(),
            vec![(0, 3, 8), (0, 9, 10), (1, 5, 6)]
        );
        assert!(s.contains(0, 3) && s.contains(0, 7) && s.contains(0, 9));
        assert!(!s.contains(0, 8) && !s.contains(0, 2) && !s.contains(1, 4));
        s.insert(0, 8);
        assert_eq!(s.runs().collect::<Vec<_>>(), vec![(0, 3, 10), (1, 5, 6)]);
        s.trim(0, 6);
        assert_eq!(s.runs().collect::<Vec<_>>(), vec![(0, 6, 10), (1, 5, 6)]);
        s.trim(0, 10);
        s.trim(1, 5);
        assert_eq!(s.runs().collect::<Vec<_>>(), vec![(1, 5, 6)]);
        // A run read back from a file joins its neighbours too.
        s.insert_run(1, 6, 9);
        s.insert_run(1, 1, 5);
        assert_eq!(s.runs().collect::<Vec<_>>(), vec![(1, 1, 9)]);
    }
}
