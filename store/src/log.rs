//! The segment log: a directory of segments, one writer, recovery on open, retention.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::durability::Durability;
use crate::prealloc::Preparer;
use crate::record::{self, Record};
use crate::segment::{self, AppendError, ScanEnd, Segment, FILE_HEADER};
use crate::{DurableConfig, StoreError, SyncPolicy};

/// What opening a log found and did: a report for the user's logs, never silent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// The torn (or, with `repair`, corrupt) end that was cut off, if any.
    pub truncated: Option<Truncation>,
    /// Segments deleted because they came after a repaired corruption.
    pub removed_segments: Vec<PathBuf>,
    /// Index files that were missing or did not match their segment, and were rebuilt.
    pub rebuilt_indexes: Vec<PathBuf>,
}

/// Bytes cut off the end of a segment when the log was opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Truncation {
    /// The segment file.
    pub file: PathBuf,
    /// Where the cut was made: the end of the last sound record.
    pub position: u64,
    /// How many bytes were cut off.
    pub bytes: u64,
    /// What was wrong with the first bad record.
    pub reason: &'static str,
}

/// Records read by [`SegmentLog::read`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadBatch {
    /// Offsets asked for that retention had deleted already (the read starts at the
    /// oldest record kept instead).
    pub skipped: u64,
    /// The records, in offset order.
    pub records: Vec<Record>,
}

/// A durable, append-only log of records with consecutive `u64` offsets, in segment files
/// in one directory. One `SegmentLog` owns its directory (see [`SegmentLog::open`]).
///
/// Appends take `&mut self`, reads `&self`: put it behind a lock to share it. What an
/// append wrote is in the file (and so survives a crash of the process) when `append`
/// returns; when it is on the disk depends on [`SyncPolicy`] (see
/// [`SegmentLog::needs_sync_wait`] and [`Durability::wait_synced`]).
#[derive(Debug)]
pub struct SegmentLog {
    dir: PathBuf,
    config: DurableConfig,
    /// Oldest first; the last one is written to.
    segments: VecDeque<Segment>,
    /// Holds the directory's lock for as long as the log is open.
    _lock: DirLock,
    durability: Arc<Durability>,
    sync_thread: Option<JoinHandle<()>>,
    /// Prepares the next segment file ahead of time (under `Always`; see
    /// [`crate::prealloc`]).
    preparer: Option<Arc<Preparer>>,
    /// The preparer was asked for the next file since the last was taken (it is asked
    /// once the segment being written is half full, or at once when it is not a
    /// preallocated one).
    prepare_asked: bool,
    /// The segment being written was created by this open (it held no record then): it
    /// moves to the prepared file as soon as one is ready, not at its roll.
    move_early: bool,
    /// Set when a failed write could not be cut back: no more appends to that segment.
    broken: Option<String>,
    /// Lowest offset retention must keep (what readers under `Block` still need).
    floor: Option<u64>,
    scratch: Vec<u8>,
    /// Each record of an append: offset, position in `scratch`, timestamp.
    placed: Vec<(u64, u64, Option<u64>)>,
    recovery: Recovery,
}

impl SegmentLog {
    /// Opens (or creates) the log in `dir`, recovering what a crash left: a torn last
    /// record is cut off and reported in [`SegmentLog::recovery`]; a missing or stale
    /// index is rebuilt; a bad record with sound records after it is
    /// [`StoreError::Corrupt`] (or, with [`DurableConfig::repair`], cut off there).
    ///
    /// # Errors
    ///
    /// [`StoreError::Locked`] if another `SegmentLog` (in any process) has `dir` open;
    /// [`StoreError::Corrupt`], [`StoreError::Format`] for damage that is not a torn tail;
    /// [`StoreError::Io`] if the directory cannot be created, read or written (a
    /// read-only directory among them); [`StoreError::InvalidConfig`].
    pub fn open(dir: impl AsRef<Path>, config: DurableConfig) -> Result<SegmentLog, StoreError> {
        config.validate()?;
        let dir = dir.as_ref().to_path_buf();
        create_dir_durably(&dir)?;
        let lock = lock_dir(&dir)?;
        let mut recovery = Recovery::default();
        let mut segments = open_segments(&dir, &config, &mut recovery)?;
        if segments.is_empty() {
            segments.push_back(Segment::create(&dir, 0)?);
            sync_dir(&dir)?;
        }
        let active = segments.back().expect("one segment");
        // What a crashed process wrote and never synced is in the page cache: sync it,
        // so that what the log holds from now on is on disk, as `Durability` assumes.
        active
            .file
            .sync_data()
            .map_err(|e| StoreError::io("fsync", &active.path, e))?;
        let durability =
            Durability::new(active.next, Arc::clone(&active.file), active.path.clone());
        let every = match config.sync {
            SyncPolicy::Always => None,
            SyncPolicy::Interval(d) => Some(d),
            SyncPolicy::Never => Some(Duration::ZERO),
        };
        let sync_thread = match every {
            Some(d) if d.is_zero() => None,
            every => {
                let weak = Arc::downgrade(&durability);
                let t = std::thread::Builder::new()
                    .name("memq-store-sync".into())
                    .spawn(move || Durability::run_sync_thread(weak, every))
                    .map_err(|e| StoreError::io("spawn sync thread for", &dir, e))?;
                Some(t)
            }
        };
        // Under `Always`, a prepared file is asked for at once if the segment being
        // written holds no record (it replaces it), else when it is half full.
        let fresh = segments.back().is_some_and(|s| s.len == FILE_HEADER);
        let preparer = match config.sync {
            SyncPolicy::Always => Preparer::start(&dir, config.segment_bytes, fresh),
            _ => None,
        };
        Ok(SegmentLog {
            dir,
            config,
            segments,
            _lock: lock,
            durability,
            sync_thread,
            preparer,
            prepare_asked: fresh,
            move_early: fresh,
            broken: None,
            floor: None,
            scratch: Vec::new(),
            placed: Vec::new(),
            recovery,
        })
    }

    /// What opening found and did.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The configuration it was opened with.
    pub fn config(&self) -> &DurableConfig {
        &self.config
    }

    /// Offset of the oldest record kept.
    pub fn start(&self) -> u64 {
        self.segments.front().map_or(0, |s| s.base)
    }

    /// Offset the next record appended gets.
    pub fn next_offset(&self) -> u64 {
        self.segments.back().map_or(0, |s| s.next)
    }

    /// Bytes of all segment files.
    pub fn bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.len).sum()
    }

    /// The offset after the oldest segment's last record, if there is a segment besides
    /// the one being written: how far readers must have read before retention by size
    /// or count can delete anything under a floor.
    pub fn oldest_segment_end(&self) -> Option<u64> {
        (self.segments.len() > 1).then(|| self.segments.front().expect("two").next)
    }

    /// Number of segment files.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// The sync state: wait on it (outside any lock) for appended records to reach the
    /// disk.
    pub fn durability(&self) -> &Arc<Durability> {
        &self.durability
    }

    /// Whether an append is acknowledged only once synced ([`SyncPolicy::Always`]).
    pub fn needs_sync_wait(&self) -> bool {
        self.config.sync == SyncPolicy::Always
    }

    /// Whether retention limits the log's size or segment count (only then does a floor
    /// matter).
    pub fn has_size_limits(&self) -> bool {
        let r = self.config.retention;
        r.max_bytes.is_some() || r.max_segments.is_some()
    }

    /// Sets the lowest offset that retention by size or count must keep (`None`: it
    /// may delete anything but the segment being written). Under `Overflow::Block` this
    /// is the slowest reader's position; an append that would go over the size or count
    /// limit while only such segments could go fails with [`StoreError::Full`].
    pub fn set_floor(&mut self, floor: Option<u64>) {
        self.floor = floor;
    }

    /// Appends one record; returns its offset. It is in the file when this returns.
    ///
    /// # Errors
    ///
    /// [`StoreError::TooLarge`]; [`StoreError::Full`] (see [`SegmentLog::set_floor`]);
    /// [`StoreError::Io`] (disk full among them): nothing was appended, and the log is
    /// usable again once the cause is gone.
    pub fn append(
        &mut self,
        timestamp: Option<u64>,
        key: Option<&[u8]>,
        payload: &[u8],
    ) -> Result<u64, StoreError> {
        self.append_batch([(timestamp, key, payload)])
            .map(|r| r.start)
    }

    /// Appends records in one write; returns their offsets. All of them or none.
    ///
    /// # Errors
    ///
    /// As [`SegmentLog::append`].
    pub fn append_batch<'a>(
        &mut self,
        records: impl IntoIterator<Item = (Option<u64>, Option<&'a [u8]>, &'a [u8])>,
    ) -> Result<Range<u64>, StoreError> {
        if let Some(why) = &self.broken {
            return Err(StoreError::io(
                "write",
                &self.segments.back().expect("one segment").path,
                std::io::Error::other(why.clone()),
            ));
        }
        let first = self.next_offset();
        let mut bytes = core::mem::take(&mut self.scratch);
        bytes.clear();
        let mut placed = core::mem::take(&mut self.placed);
        placed.clear();
        let max = self.config.max_record_bytes as u64;
        for (ts, key, payload) in records {
            let size = record::encoded_len(key, payload);
            if size > max || key.is_some_and(|k| k.len() >= u32::MAX as usize) {
                (self.scratch, self.placed) = (bytes, placed);
                return Err(StoreError::TooLarge { size, max });
            }
            let offset = first + placed.len() as u64;
            placed.push((offset, bytes.len() as u64, ts));
            record::encode(&mut bytes, offset, ts, key, payload);
        }
        let end = first + placed.len() as u64;
        if placed.is_empty() {
            (self.scratch, self.placed) = (bytes, placed);
            return Ok(first..first);
        }
        if bytes.len() as u64 > u32::MAX as u64 - FILE_HEADER {
            // A segment's positions are 32-bit: no one write may be larger.
            let size = bytes.len() as u64;
            (self.scratch, self.placed) = (bytes, placed);
            return Err(StoreError::TooLarge {
                size,
                max: u32::MAX as u64 - FILE_HEADER,
            });
        }
        let result = self.write(&bytes, &placed);
        (self.scratch, self.placed) = (bytes, placed);
        result?;
        self.durability.note_written(end);
        Ok(first..end)
    }

    fn write(
        &mut self,
        bytes: &[u8],
        placed: &[(u64, u64, Option<u64>)],
    ) -> Result<(), StoreError> {
        let active = self.segments.back().expect("one segment");
        if !self.prepare_asked && active.len * 2 > self.config.segment_bytes {
            if let Some(p) = &self.preparer {
                p.want();
            }
            self.prepare_asked = true;
        }
        if active.len > FILE_HEADER && active.len + bytes.len() as u64 > self.config.segment_bytes {
            self.roll()?;
        } else if self.move_early
            && active.capacity < self.config.segment_bytes
            && self.preparer.as_ref().is_some_and(|p| p.is_ready())
        {
            // A new log's first segment, not a preallocated one: the prepared file takes
            // its place (renamed over it while it holds no record, else by a roll). A
            // segment found at open goes on to its roll instead, so that reopening a
            // log does not start a segment each time.
            self.move_early = false;
            if active.len == FILE_HEADER {
                self.adopt_prepared()?;
            } else {
                self.roll()?;
            }
        }
        self.make_room(bytes.len() as u64)?;
        let interval = self.config.index_interval_bytes;
        let active = self.segments.back_mut().expect("one segment");
        match active.append(bytes, placed, interval) {
            Ok(()) => Ok(()),
            Err(AppendError::Clean(e)) => Err(e),
            Err(AppendError::Dirty(e)) => {
                self.broken = Some(format!(
                    "a failed write could not be cut back ({e}); reopen the log to recover"
                ));
                Err(e)
            }
        }
    }

    /// Replaces the segment being written, which holds no record, by the prepared file
    /// (renamed over it).
    fn adopt_prepared(&mut self) -> Result<(), StoreError> {
        let Some(file) = self.preparer.as_ref().and_then(|p| p.take()) else {
            return Ok(());
        };
        let base = self.segments.back().expect("one segment").base;
        let seg = match Segment::from_prepared(&self.dir, base, &file) {
            Ok(seg) => seg,
            Err(_) => {
                // The segment as it was goes on.
                let _ = std::fs::remove_file(&file);
                return Ok(());
            }
        };
        self.prepare_asked = false;
        let (file, path) = (Arc::clone(&seg.file), seg.path.clone());
        *self.segments.back_mut().expect("one segment") = seg;
        self.durability.switch_file(file, path, None);
        if let Err(err) = sync_dir(&self.dir) {
            self.fail(&err);
            return Err(err);
        }
        Ok(())
    }

    /// Closes the segment being written and starts the next one.
    fn roll(&mut self) -> Result<(), StoreError> {
        // The space preallocated past its records goes back, synced below with them.
        self.segments.back_mut().expect("one segment").trim()?;
        let active = self.segments.back().expect("one segment");
        let next = active.next;
        // The closed segment is synced under every policy (under `Never` too: once per
        // segment costs nothing, and a closed segment is then whole after a power loss,
        // where a torn one in the middle of the log could only be repaired by cutting
        // everything after it). A failed sync is final, as any other (see `Durability`).
        if let Err(e) = active.file.sync_data() {
            let err = StoreError::io("fsync", &active.path, e);
            self.fail(&err);
            return Err(err);
        }
        // Not synced: a lost index is rebuilt on open. So a failure to write it (a
        // full disk) does not stop the roll: the partial file goes, and the next open
        // rebuilds it.
        if active.write_index().is_err() {
            let _ = std::fs::remove_file(active.index_path());
        }
        let prepared = self.preparer.as_ref().and_then(|p| p.take());
        let seg = match prepared {
            Some(file) => match Segment::from_prepared(&self.dir, next, &file) {
                Ok(seg) => {
                    self.prepare_asked = false;
                    seg
                }
                Err(_) => {
                    let _ = std::fs::remove_file(&file);
                    Segment::create(&self.dir, next)?
                }
            },
            None => Segment::create(&self.dir, next)?,
        };
        if self.prepare_asked {
            // A segment the appends grow: a prepared file replaces it once ready (a
            // preallocated one asks for the next when half full).
            if let Some(p) = &self.preparer {
                p.want();
            }
        }
        let (file, path) = (Arc::clone(&seg.file), seg.path.clone());
        self.segments.push_back(seg);
        self.durability.switch_file(file, path, Some(next));
        // The new file's name must be on disk before a record in it is acknowledged as
        // durable: a failure here is final too.
        if let Err(err) = sync_dir(&self.dir) {
            self.fail(&err);
            return Err(err);
        }
        Ok(())
    }

    /// After a failed sync: nothing more is appended or acknowledged until the log is
    /// reopened.
    fn fail(&mut self, err: &StoreError) {
        let why = format!("{err}; reopen the log to recover");
        self.durability.mark_failed(&why);
        self.broken = Some(why);
    }

    /// Deletes old segments to keep an append of `bytes` within the size and count
    /// limits; [`StoreError::Full`] if what would have to go is still needed.
    fn make_room(&mut self, bytes: u64) -> Result<(), StoreError> {
        let r = self.config.retention;
        loop {
            let over_bytes = r.max_bytes.is_some_and(|m| self.bytes() + bytes > m);
            let over_count = r.max_segments.is_some_and(|m| self.segments.len() > m);
            if !over_bytes && !over_count {
                return Ok(());
            }
            if !self.delete_oldest_if_free()? {
                // Only the segment being written is left, or the oldest is still needed.
                return if self.segments.len() > 1 {
                    Err(StoreError::Full)
                } else {
                    Ok(())
                };
            }
        }
    }

    /// Deletes the oldest segment unless it is the one being written or holds offsets
    /// at or past the floor. Returns whether it did.
    fn delete_oldest_if_free(&mut self) -> Result<bool, StoreError> {
        if self.segments.len() < 2 {
            return Ok(false);
        }
        let oldest = self.segments.front().expect("two segments");
        if self.floor.is_some_and(|f| oldest.next > f) {
            return Ok(false);
        }
        self.delete_oldest()?;
        Ok(true)
    }

    fn delete_oldest(&mut self) -> Result<(), StoreError> {
        let oldest = self.segments.front().expect("a segment");
        // The log file first: an index left behind without it is removed on open.
        std::fs::remove_file(&oldest.path)
            .map_err(|e| StoreError::io("remove", &oldest.path, e))?;
        let _ = std::fs::remove_file(oldest.index_path());
        self.segments.pop_front();
        Ok(())
    }

    /// Applies retention now: deletes whole segments, oldest first, whose newest record
    /// is older than the age limit (`now_ms`, milliseconds since the UNIX epoch), and
    /// those over the size and count limits that are below the floor. Never the segment
    /// being written. Returns how many were deleted.
    ///
    /// # Errors
    ///
    /// [`StoreError::Io`] if a file cannot be deleted (the log stays consistent: the
    /// segment stays, and is tried again next time).
    pub fn enforce_retention(&mut self, now_ms: u64) -> Result<usize, StoreError> {
        let mut deleted = 0;
        if let Some(age) = self.config.retention.max_age {
            let age_ms = u64::try_from(age.as_millis()).unwrap_or(u64::MAX);
            while self.segments.len() > 1 {
                let oldest = self.segments.front().expect("a segment");
                match oldest.max_ts {
                    Some(ts) if ts.saturating_add(age_ms) < now_ms => {
                        self.delete_oldest()?;
                        deleted += 1;
                    }
                    _ => break,
                }
            }
        }
        let before = self.segments.len();
        match self.make_room(0) {
            Ok(()) | Err(StoreError::Full) => {}
            Err(e) => return Err(e),
        }
        deleted += before - self.segments.len();
        if deleted > 0 && self.config.sync != SyncPolicy::Never {
            sync_dir(&self.dir)?;
        }
        Ok(deleted)
    }

    /// Reads up to `max` records from offset `from` on. An offset retention deleted
    /// reads from the oldest record kept, counted in [`ReadBatch::skipped`]; an offset at
    /// or past the end reads nothing.
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupt`] if a record read fails its check (the file changed since
    /// the log was opened); [`StoreError::Io`].
    pub fn read(&self, from: u64, max: usize) -> Result<ReadBatch, StoreError> {
        let start = self.start();
        let mut batch = ReadBatch {
            skipped: start.saturating_sub(from),
            records: Vec::new(),
        };
        let mut want = from.max(start);
        let max_record = self.config.max_record_bytes;
        let first = self.segments.partition_point(|s| s.next <= want);
        for seg in self.segments.iter().skip(first) {
            if batch.records.len() >= max || want >= self.next_offset() {
                break;
            }
            let (mut pos, mut at) = seg.seek(want);
            while batch.records.len() < max {
                let Some((rec, after)) = seg.read_record_at(pos, max_record)? else {
                    break;
                };
                if rec.offset != at {
                    return Err(seg.corrupt(pos, "offset out of sequence"));
                }
                pos = after;
                at += 1;
                if rec.offset >= want {
                    want = rec.offset + 1;
                    batch.records.push(rec);
                }
            }
        }
        Ok(batch)
    }

    /// Syncs everything appended so far to the disk, whatever the policy.
    ///
    /// # Errors
    ///
    /// [`StoreError::Io`] if the sync fails (then every later sync fails too: reopen).
    pub fn sync(&self) -> Result<(), StoreError> {
        self.durability.sync_now()
    }
}

impl Drop for SegmentLog {
    fn drop(&mut self) {
        if let Some(p) = self.preparer.take() {
            p.stop();
        }
        self.durability.stop();
        if let Some(t) = self.sync_thread.take() {
            let _ = t.join();
        }
        // The space preallocated past the records goes back (synced below, unless the
        // policy is `Never`), so that the next open reads no zeros.
        if self.broken.is_none() {
            if let Some(active) = self.segments.back_mut() {
                if active.trim().is_ok() && self.config.sync != SyncPolicy::Never {
                    let _ = active.file.sync_data();
                }
            }
        }
        // A clean close: what was appended is synced (unless the policy is `Never`),
        // and the active segment's index written, so the next open reads less. Errors
        // are not lost data: what is not on disk was never acknowledged as durable.
        if self.config.sync != SyncPolicy::Never {
            let _ = self.durability.sync_now();
        }
        if self.broken.is_none() {
            if let Some(active) = self.segments.back() {
                let _ = active.write_index();
            }
        }
    }
}

/// Directories opened by a log of this process, by canonical path: a second open here
/// is refused at once, without waiting on the lock file.
static OPEN_DIRS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// How long an open waits for a lock file that another process holds: a child forked by
/// any thread of this process holds copies of its open files (the lock among them) until
/// it calls `exec`, which closes them; such a hold is over in microseconds. A real owner
/// holds it for as long as it runs, and the open is refused after this.
const LOCK_WAIT: Duration = Duration::from_secs(1);

/// The directory's lock: its `LOCK` file held with `flock`, and its place in
/// [`OPEN_DIRS`]; both let go of when dropped.
#[derive(Debug)]
struct DirLock {
    _file: File,
    canonical: PathBuf,
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let mut open = OPEN_DIRS.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|d| *d != self.canonical);
    }
}

/// Takes the directory's lock, held until the returned value is dropped.
fn lock_dir(dir: &Path) -> Result<DirLock, StoreError> {
    let canonical = dir
        .canonicalize()
        .map_err(|e| StoreError::io("resolve", dir, e))?;
    {
        let mut open = OPEN_DIRS.lock().unwrap_or_else(|e| e.into_inner());
        if open.contains(&canonical) {
            return Err(StoreError::Locked {
                dir: dir.to_path_buf(),
            });
        }
        open.push(canonical.clone());
    }
    // From here on, an error must give the place in OPEN_DIRS back.
    let release = |e| {
        OPEN_DIRS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|d| *d != canonical);
        e
    };
    let path = dir.join("LOCK");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| release(StoreError::io("open", &path, e)))?;
    // `flock`: released by the OS when the process dies, however it dies.
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => {
                return Ok(DirLock {
                    _file: file,
                    canonical,
                })
            }
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(release(StoreError::Locked {
                    dir: dir.to_path_buf(),
                }))
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(release(StoreError::io("lock", &path, e)))
            }
        }
    }
}

/// Creates `dir` (and its parents) if missing, and makes its name durable in its parent:
/// files created in it and synced are then found after a power loss.
pub(crate) fn create_dir_durably(dir: &Path) -> Result<(), StoreError> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(|e| StoreError::io("create", dir, e))?;
    match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => sync_dir(parent),
        _ => Ok(()),
    }
}

/// Makes the directory's entries (new and deleted files) durable.
fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io("fsync", dir, e))
}

/// Opens and checks every segment in `dir`, oldest first: the last one record by
/// record (a crash can tear only its end), the others through their index and their
/// last records (or all of them with `verify_on_open`).
fn open_segments(
    dir: &Path,
    config: &DurableConfig,
    recovery: &mut Recovery,
) -> Result<VecDeque<Segment>, StoreError> {
    let mut bases = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| StoreError::io("read", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io("read", dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(base) = segment::parse_name(name) {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    remove_orphan_indexes(dir, &bases);
    let mut segments: VecDeque<Segment> = VecDeque::new();
    let max_record = config.max_record_bytes;
    let interval = config.index_interval_bytes;
    for (i, &base) in bases.iter().enumerate() {
        let path = dir.join(segment::file_name(base));
        let last = i + 1 == bases.len();
        if let Some(prev) = segments.back() {
            if prev.next != base {
                let reason = format!(
                    "segment starts at offset {base}, but the one before ends at {}",
                    prev.next
                );
                if config.repair {
                    remove_from(dir, &bases[i..], recovery)?;
                    break;
                }
                return Err(StoreError::Format { file: path, reason });
            }
        }
        let size = std::fs::metadata(&path)
            .map_err(|e| StoreError::io("stat", &path, e))?
            .len();
        if last && size < FILE_HEADER && segments.back().is_none_or(|p| p.next == base) {
            // A crash while the segment was being created: it holds no records.
            std::fs::remove_file(&path).map_err(|e| StoreError::io("remove", &path, e))?;
            recovery.truncated = Some(Truncation {
                file: path,
                position: 0,
                bytes: size,
                reason: "segment created but its header not written",
            });
            let seg = Segment::create(dir, base)?;
            seg.file
                .sync_data()
                .map_err(|e| StoreError::io("fsync", &seg.path, e))?;
            sync_dir(dir)?;
            segments.push_back(seg);
            break;
        }
        let mut seg = Segment::open(path, base, true)?;
        let (from, offset) = if last || config.verify_on_open || !seg.load_index(max_record) {
            if !last && !config.verify_on_open {
                recovery.rebuilt_indexes.push(seg.index_path());
            }
            (FILE_HEADER, base)
        } else {
            seg.last_index_entry()
        };
        let size = seg.len;
        match seg.scan_from(from, offset, max_record, interval)? {
            ScanEnd::Clean => {}
            ScanEnd::Torn { position, reason } if last => {
                seg.truncate(position)?;
                seg.file
                    .sync_data()
                    .map_err(|e| StoreError::io("fsync", &seg.path, e))?;
                recovery.truncated = Some(Truncation {
                    file: seg.path.clone(),
                    position,
                    bytes: size - position,
                    reason,
                });
            }
            ScanEnd::Torn { position, reason } | ScanEnd::Corrupt { position, reason } => {
                if !config.repair {
                    return Err(StoreError::Corrupt {
                        file: seg.path.clone(),
                        position,
                        offset: seg.next,
                        reason,
                    });
                }
                seg.truncate(position)?;
                seg.file
                    .sync_data()
                    .map_err(|e| StoreError::io("fsync", &seg.path, e))?;
                recovery.truncated = Some(Truncation {
                    file: seg.path.clone(),
                    position,
                    bytes: size - position,
                    reason,
                });
                if !last {
                    remove_from(dir, &bases[i + 1..], recovery)?;
                }
                if !last && recovery.rebuilt_indexes.last() == Some(&seg.index_path()) {
                    seg.write_index()?;
                }
                segments.push_back(seg);
                break;
            }
        }
        if !last && recovery.rebuilt_indexes.last() == Some(&seg.index_path()) {
            seg.write_index()?;
        }
        segments.push_back(seg);
    }
    Ok(segments)
}

/// Deletes the segments from `bases` on (after a repaired corruption or gap).
fn remove_from(dir: &Path, bases: &[u64], recovery: &mut Recovery) -> Result<(), StoreError> {
    for &base in bases {
        let path = dir.join(segment::file_name(base));
        std::fs::remove_file(&path).map_err(|e| StoreError::io("remove", &path, e))?;
        let _ = std::fs::remove_file(path.with_extension("idx"));
        recovery.removed_segments.push(path);
    }
    sync_dir(dir)
}

/// Removes index files whose segment is gone (a crash between deleting the two).
fn remove_orphan_indexes(dir: &Path, bases: &[u64]) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(stem) = name.strip_suffix(".idx") else {
            continue;
        };
        let as_log = format!("{stem}.log");
        if let Some(base) = segment::parse_name(&as_log) {
            if bases.binary_search(&base).is_err() {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}
