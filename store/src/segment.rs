//! One segment: a file of records with consecutive offsets from its base, and its
//! sparse index.
//!
//! A segment file starts with a 16-byte header (the magic `MEMQSEG` and a format
//! version, then the base offset) followed by records (see [`crate::record`]). Its index
//! (`.idx` beside it) holds `(offset - base, position)` pairs of `u32`s, one every
//! `index_interval_bytes` of records, so a read seeks close to its offset and scans
//! forward from there. The index is written when the segment is closed; it can always be
//! rebuilt from the records, and is whenever it is missing or does not match them.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::record::{self, Header, Record, HEADER};
use crate::StoreError;

/// Bytes of a segment file's header.
pub(crate) const FILE_HEADER: u64 = 16;
const MAGIC: &[u8; 8] = b"MEMQSEG\x01";

/// A segment's file name for its base offset: 20 digits, so names sort as offsets do.
pub(crate) fn file_name(base: u64) -> String {
    format!("{base:020}.log")
}

/// The base offset a segment file's name gives, if it is one.
pub(crate) fn parse_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// What reading a segment's records from some position found at their end.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ScanEnd {
    /// Every byte up to the file's end is a sound record, or zeros after them (the
    /// preallocated space of a segment).
    Clean,
    /// A bad or incomplete record at `position` with nothing sound after it: what a
    /// crash during a write leaves.
    Torn { position: u64, reason: &'static str },
    /// A bad record at `position` with a sound record after it.
    Corrupt { position: u64, reason: &'static str },
}

/// A segment of the log.
#[derive(Debug)]
pub(crate) struct Segment {
    /// Offset of its first record.
    pub base: u64,
    /// Offset after its last record.
    pub next: u64,
    /// Bytes of the file that hold the header and sound records.
    pub len: u64,
    /// Bytes of the file: more than `len` for a preallocated segment (zeros written
    /// ahead, see [`crate::prealloc`]), which appends overwrite.
    pub capacity: u64,
    /// The newest record's timestamp.
    pub max_ts: Option<u64>,
    pub path: PathBuf,
    pub file: Arc<File>,
    /// `(offset - base, position)`, ascending.
    index: Vec<(u32, u32)>,
    /// Position of the last record indexed (or of the first record).
    last_indexed: u64,
}

impl Segment {
    /// Creates an empty segment for offsets from `base`.
    pub(crate) fn create(dir: &Path, base: u64) -> Result<Segment, StoreError> {
        let path = dir.join(file_name(base));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| StoreError::io("create", &path, e))?;
        let mut head = [0u8; FILE_HEADER as usize];
        head[..8].copy_from_slice(MAGIC);
        head[8..].copy_from_slice(&base.to_le_bytes());
        if let Err(e) = file.write_all_at(&head, 0) {
            // Nothing of it is worth keeping; a failure to remove leaves a file that
            // opening reads as an empty segment or rejects, never as records.
            let _ = std::fs::remove_file(&path);
            return Err(StoreError::io("write", &path, e));
        }
        Ok(Segment {
            base,
            next: base,
            len: FILE_HEADER,
            capacity: FILE_HEADER,
            max_ts: None,
            path,
            file: Arc::new(file),
            index: Vec::new(),
            last_indexed: FILE_HEADER,
        })
    }

    /// Makes the preallocated file `prepared` (zeros, `capacity` bytes, on disk) the
    /// empty segment for offsets from `base`: writes its header and syncs it, then
    /// renames it to the segment's name (over an empty segment of that base, if there
    /// is one). The caller syncs the directory.
    pub(crate) fn from_prepared(
        dir: &Path,
        base: u64,
        prepared: &Path,
    ) -> Result<Segment, StoreError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(prepared)
            .map_err(|e| StoreError::io("open", prepared, e))?;
        let capacity = file
            .metadata()
            .map_err(|e| StoreError::io("stat", prepared, e))?
            .len();
        let mut head = [0u8; FILE_HEADER as usize];
        head[..8].copy_from_slice(MAGIC);
        head[8..].copy_from_slice(&base.to_le_bytes());
        // The header is on disk before the name is: a segment found after a crash
        // always has its header.
        file.write_all_at(&head, 0)
            .and_then(|()| file.sync_data())
            .map_err(|e| StoreError::io("write", prepared, e))?;
        let path = dir.join(file_name(base));
        std::fs::rename(prepared, &path).map_err(|e| StoreError::io("rename", prepared, e))?;
        Ok(Segment {
            base,
            next: base,
            len: FILE_HEADER,
            capacity,
            max_ts: None,
            path,
            file: Arc::new(file),
            index: Vec::new(),
            last_indexed: FILE_HEADER,
        })
    }

    /// Gives back the preallocated space past the records (a segment closed, or the log
    /// closed). The caller syncs.
    pub(crate) fn trim(&mut self) -> Result<(), StoreError> {
        if self.capacity > self.len {
            self.file
                .set_len(self.len)
                .map_err(|e| StoreError::io("truncate", &self.path, e))?;
            self.capacity = self.len;
        }
        Ok(())
    }

    /// Opens the segment at `path` whose name says it starts at `base`, without reading
    /// its records yet (see [`Segment::recover`]).
    pub(crate) fn open(path: PathBuf, base: u64, writable: bool) -> Result<Segment, StoreError> {
        let file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(&path)
            .map_err(|e| StoreError::io("open", &path, e))?;
        let size = file
            .metadata()
            .map_err(|e| StoreError::io("stat", &path, e))?
            .len();
        let mut head = [0u8; FILE_HEADER as usize];
        if size < FILE_HEADER {
            return Err(StoreError::Format {
                file: path,
                reason: format!("{size} bytes, shorter than a segment header"),
            });
        }
        file.read_exact_at(&mut head, 0)
            .map_err(|e| StoreError::io("read", &path, e))?;
        if &head[..8] != MAGIC {
            return Err(StoreError::Format {
                file: path,
                reason: "not a memq segment (bad magic)".into(),
            });
        }
        let mut b = [0u8; 8];
        b.copy_from_slice(&head[8..]);
        if u64::from_le_bytes(b) != base {
            return Err(StoreError::Format {
                file: path,
                reason: format!(
                    "header says base offset {}, its name {base}",
                    u64::from_le_bytes(b)
                ),
            });
        }
        Ok(Segment {
            base,
            next: base,
            len: size,
            capacity: size,
            max_ts: None,
            path,
            file: Arc::new(file),
            index: Vec::new(),
            last_indexed: FILE_HEADER,
        })
    }

    pub(crate) fn index_path(&self) -> PathBuf {
        self.path.with_extension("idx")
    }

    /// Reads the records from `from` (a record's position, with offset `offset`) to the
    /// file's end: sets `next`, `max_ts` and the index from what is sound, and says what
    /// was at the end. Changes nothing on disk.
    pub(crate) fn scan_from(
        &mut self,
        from: u64,
        offset: u64,
        max_record: u32,
        interval: u32,
    ) -> Result<ScanEnd, StoreError> {
        let size = self.len;
        let mut buf = vec![0u8; (size - from) as usize];
        self.file
            .read_exact_at(&mut buf, from)
            .map_err(|e| StoreError::io("read", &self.path, e))?;
        self.index.retain(|&(_, p)| (p as u64) < from);
        self.last_indexed = self.index.last().map_or(FILE_HEADER, |&(_, p)| p as u64);
        let mut at = 0usize;
        let mut expected = offset;
        let end = loop {
            if at == buf.len() {
                break ScanEnd::Clean;
            }
            let bad = match parse_at(&buf, at, max_record) {
                Parsed::Sound { offset: o, len } if o == expected => {
                    let body = &buf[at + HEADER..at + len];
                    let (_, ts) = record::offset_and_timestamp(body);
                    self.note_record(expected, from + at as u64, ts, interval);
                    expected += 1;
                    at += len;
                    continue;
                }
                Parsed::Sound { .. } => "offset out of sequence",
                Parsed::Bad(reason) => reason,
            };
            let position = from + at as u64;
            if buf[at..].iter().all(|&b| b == 0) {
                // Zeros to the end of the file: a preallocated segment's space not
                // written yet (or, in one that was not, pages never written back and
                // never synced). The records end here.
                break ScanEnd::Clean;
            }
            break match sound_record_after(&buf, at + 1, expected, max_record) {
                None => ScanEnd::Torn {
                    position,
                    reason: bad,
                },
                // Zeros up to the next sound record: pages that never reached the disk
                // before a power loss, while later ones did (the OS writes dirty pages
                // back in any order). Nothing from here on was ever synced (a sync
                // writes every dirty page of the file), so nothing here was
                // acknowledged under `Always`: a torn tail, however long.
                Some(next) if buf[at..next].iter().all(|&b| b == 0) => ScanEnd::Torn {
                    position,
                    reason:
                        "zero-filled gap (pages never written to disk), unsynced records after it",
                },
                Some(_) => ScanEnd::Corrupt {
                    position,
                    reason: bad,
                },
            };
        };
        self.next = expected;
        self.len = from + at as u64;
        Ok(end)
    }

    fn note_record(&mut self, offset: u64, position: u64, ts: Option<u64>, interval: u32) {
        if position == FILE_HEADER || position - self.last_indexed >= interval as u64 {
            // Positions fit in u32 (segments are at most 4 GiB), offsets within a segment
            // too (each record takes at least 28 bytes).
            self.index
                .push(((offset - self.base) as u32, position as u32));
            self.last_indexed = position;
        }
        if ts.is_some() {
            self.max_ts = self.max_ts.max(ts);
        }
        self.next = offset + 1;
    }

    /// Loads the index file if it matches the records; `false` if it is missing or does
    /// not (then it must be rebuilt by a scan).
    pub(crate) fn load_index(&mut self, max_record: u32) -> bool {
        let Ok(bytes) = std::fs::read(self.index_path()) else {
            return false;
        };
        if bytes.len() % 8 != 0 || bytes.is_empty() {
            return false;
        }
        let entries: Vec<(u32, u32)> = bytes
            .chunks_exact(8)
            .map(|c| {
                (
                    u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                    u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
                )
            })
            .collect();
        let ordered = entries
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1);
        if !ordered || entries[0] != (0, FILE_HEADER as u32) {
            return false;
        }
        // Each entry must point at the record it names: the last one is checked here,
        // the others by every read that lands on them.
        let &(rel, pos) = entries.last().expect("not empty");
        match self.read_record_at(pos as u64, max_record) {
            Ok(Some((r, _))) if r.offset == self.base + rel as u64 => {}
            _ => return false,
        }
        self.index = entries;
        self.last_indexed = pos as u64;
        true
    }

    /// Writes the index file (not synced: it is rebuilt if lost).
    pub(crate) fn write_index(&self) -> Result<(), StoreError> {
        let mut bytes = Vec::with_capacity(self.index.len() * 8);
        for &(rel, pos) in &self.index {
            bytes.extend_from_slice(&rel.to_le_bytes());
            bytes.extend_from_slice(&pos.to_le_bytes());
        }
        let path = self.index_path();
        std::fs::write(&path, bytes).map_err(|e| StoreError::io("write", path, e))
    }

    /// The position of the last index entry at or before `offset`, with its offset.
    pub(crate) fn seek(&self, offset: u64) -> (u64, u64) {
        let rel = offset.saturating_sub(self.base);
        let i = self.index.partition_point(|&(r, _)| (r as u64) <= rel);
        match i.checked_sub(1) {
            Some(i) => {
                let (r, p) = self.index[i];
                (p as u64, self.base + r as u64)
            }
            None => (FILE_HEADER, self.base),
        }
    }

    /// The position and offset the last index entry points at: where a scan for the
    /// end of a segment starts.
    pub(crate) fn last_index_entry(&self) -> (u64, u64) {
        self.index
            .last()
            .map_or((FILE_HEADER, self.base), |&(r, p)| {
                (p as u64, self.base + r as u64)
            })
    }

    /// Appends `bytes`, which hold records `offsets` (each with its position relative to
    /// the start of `bytes` and its timestamp), at the end of the file. On failure the
    /// file is cut back to where it was, so that it holds whole records only; if even
    /// that fails, the error says so and the segment must not be written again.
    pub(crate) fn append(
        &mut self,
        bytes: &[u8],
        records: &[(u64, u64, Option<u64>)],
        interval: u32,
    ) -> Result<(), AppendError> {
        if let Err(e) = self.file.write_all_at(bytes, self.len) {
            let err = StoreError::io("write", &self.path, e);
            return Err(match self.file.set_len(self.len) {
                Ok(()) => {
                    self.capacity = self.len;
                    AppendError::Clean(err)
                }
                Err(_) => AppendError::Dirty(err),
            });
        }
        let start = self.len;
        for &(offset, rel_pos, ts) in records {
            self.note_record(offset, start + rel_pos, ts, interval);
        }
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Cuts the file back to `len` bytes (the end of its last sound record).
    pub(crate) fn truncate(&mut self, len: u64) -> Result<(), StoreError> {
        self.file
            .set_len(len)
            .map_err(|e| StoreError::io("truncate", &self.path, e))?;
        self.len = len;
        self.capacity = len;
        Ok(())
    }

    /// The record at `pos` and the position after it; `None` at the end of the segment.
    pub(crate) fn read_record_at(
        &self,
        pos: u64,
        max_record: u32,
    ) -> Result<Option<(Record, u64)>, StoreError> {
        if pos >= self.len {
            return Ok(None);
        }
        let mut h = [0u8; HEADER];
        self.file
            .read_exact_at(&mut h, pos)
            .map_err(|e| StoreError::io("read", &self.path, e))?;
        let header = Header::parse(&h);
        let end = pos + HEADER as u64 + header.len as u64;
        if !header.plausible(max_record) || end > self.len {
            return Err(self.corrupt(pos, "bad record length"));
        }
        let mut body = vec![0u8; header.len as usize];
        self.file
            .read_exact_at(&mut body, pos + HEADER as u64)
            .map_err(|e| StoreError::io("read", &self.path, e))?;
        record::check(header, &body).map_err(|bad| self.corrupt(pos, bad.reason()))?;
        Ok(Some((record::decode(&body), end)))
    }

    pub(crate) fn corrupt(&self, position: u64, reason: &'static str) -> StoreError {
        StoreError::Corrupt {
            file: self.path.clone(),
            position,
            offset: self.offset_near(position),
            reason,
        }
    }

    /// The offset of the record at `position`, as the index and the records before it
    /// tell (best effort: for error messages).
    fn offset_near(&self, position: u64) -> u64 {
        let i = self.index.partition_point(|&(_, p)| (p as u64) <= position);
        let (mut off, mut pos) = match i.checked_sub(1) {
            Some(i) => (self.base + self.index[i].0 as u64, self.index[i].1 as u64),
            None => (self.base, FILE_HEADER),
        };
        while pos < position {
            let mut h = [0u8; HEADER];
            if self.file.read_exact_at(&mut h, pos).is_err() {
                break;
            }
            pos += HEADER as u64 + Header::parse(&h).len as u64;
            off += 1;
        }
        off
    }
}

/// Why an append failed.
#[derive(Debug)]
pub(crate) enum AppendError {
    /// Nothing of it is in the file.
    Clean(StoreError),
    /// Part of it may be in the file, which could not be cut back.
    Dirty(StoreError),
}

enum Parsed {
    Sound { offset: u64, len: usize },
    Bad(&'static str),
}

/// Parses the record at `at` of `buf`.
fn parse_at(buf: &[u8], at: usize, max_record: u32) -> Parsed {
    let Some(h) = buf.get(at..at + HEADER) else {
        return Parsed::Bad("incomplete record header");
    };
    let header = Header::parse(h.try_into().expect("8 bytes"));
    if !header.plausible(max_record) {
        return Parsed::Bad("bad record length");
    }
    let len = HEADER + header.len as usize;
    let Some(body) = buf.get(at + HEADER..at + len) else {
        return Parsed::Bad("incomplete record");
    };
    match record::check(header, body) {
        Ok(offset) => Parsed::Sound { offset, len },
        Err(bad) => Parsed::Bad(bad.reason()),
    }
}

/// Where the first sound record with an offset past `expected` starts in `buf` from
/// `from` on, if anywhere: then a bad record before it is damage in the middle of the log
/// (unless only zeros lie between), not a torn tail. Looks at every byte position, so that a damaged length cannot hide what
/// follows; the CRC is computed only where the offset field is plausible.
fn sound_record_after(buf: &[u8], from: usize, expected: u64, max_record: u32) -> Option<usize> {
    let min = HEADER + record::BODY_FIXED;
    // Each record takes at least `min` bytes: no later offset can be further than this.
    let furthest = expected + (buf.len() / min) as u64 + 1;
    (from..buf.len().saturating_sub(min - 1)).find(|&at| {
        let mut o = [0u8; 8];
        o.copy_from_slice(&buf[at + HEADER..at + HEADER + 8]);
        let offset = u64::from_le_bytes(o);
        offset > expected
            && offset <= furthest
            && matches!(parse_at(buf, at, max_record), Parsed::Sound { offset: f, .. } if f == offset)
    })
}
