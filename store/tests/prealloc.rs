//! Preallocated segments under `SyncPolicy::Always`: the next segment file is written
//! full of zeros ahead of time and appends overwrite it; the space past the records goes
//! back when a segment or the log closes; after a crash the zeros past the records read
//! as the segment's end (nothing reported, nothing lost); leftovers of a preparation are
//! cleaned up or reused.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use memq_store::{DurableConfig, SegmentLog, SyncPolicy};

const SEGMENT: u64 = 64 << 10;

fn config() -> DurableConfig {
    DurableConfig::new(SyncPolicy::Always).segment_bytes(SEGMENT)
}

fn payload(i: u64) -> Vec<u8> {
    format!("record {i:06} {}", "y".repeat((i % 40) as usize)).into_bytes()
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    v.sort();
    v
}

fn size(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().len()
}

fn assert_holds(log: &SegmentLog, n: u64) {
    let all = log.read(0, usize::MAX).unwrap();
    assert_eq!(all.records.len() as u64, n);
    for (i, r) in all.records.iter().enumerate() {
        assert_eq!((r.offset, &r.payload), (i as u64, &payload(i as u64)));
    }
    assert_eq!(log.next_offset(), n);
}

/// Appends (each synced) until the segment being written is a preallocated one: its
/// file is `SEGMENT` bytes. The preparer works beside the appends; the bound is far
/// from what it needs (zeros for 64 KiB), so only a preparer that never delivers
/// reaches it.
fn append_until_preallocated(log: &mut SegmentLog, dir: &Path) -> u64 {
    let start = Instant::now();
    loop {
        let i = log.next_offset();
        let off = log.append(None, None, &payload(i)).unwrap();
        log.durability().wait_synced(off).unwrap();
        let last = segments(dir).pop().unwrap();
        if size(&last) == SEGMENT {
            return log.next_offset();
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no preallocated segment"
        );
    }
}

#[test]
fn appends_move_to_a_preallocated_segment_and_a_close_gives_the_space_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = SegmentLog::open(dir.path(), config()).unwrap();
    let mut n = append_until_preallocated(&mut log, dir.path());
    // More records into it, and across a roll into the next one.
    for _ in 0..3000 {
        let off = log.append(None, None, &payload(n)).unwrap();
        log.durability().wait_synced(off).unwrap();
        n += 1;
    }
    assert!(segments(dir.path()).len() >= 3);
    assert_holds(&log, n);
    // Closed segments hold their records only.
    let all = segments(dir.path());
    for closed in &all[..all.len() - 1] {
        assert!(size(closed) < SEGMENT, "{closed:?} not trimmed");
    }
    drop(log);
    // A clean close: the active one is trimmed too, and reopening reports nothing.
    let last = segments(dir.path()).pop().unwrap();
    assert!(size(&last) < SEGMENT);
    let log = SegmentLog::open(dir.path(), config()).unwrap();
    assert_eq!(log.recovery(), &Default::default());
    assert_holds(&log, n);
}

#[test]
fn after_a_crash_the_zeros_past_the_records_are_the_end_and_appends_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let copy = tempfile::tempdir().unwrap();
    let mut log = SegmentLog::open(dir.path(), config()).unwrap();
    let n = append_until_preallocated(&mut log, dir.path());
    // What a crash leaves: the files as they are while the log is open (records, then
    // the zeros of the preallocated space).
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            std::fs::copy(&p, copy.path().join(p.file_name().unwrap())).unwrap();
        }
    }
    drop(log);
    let last = segments(copy.path()).pop().unwrap();
    assert_eq!(size(&last), SEGMENT);
    let mut log = SegmentLog::open(copy.path(), config()).unwrap();
    // Nothing torn, nothing cut.
    assert_eq!(log.recovery().truncated, None);
    assert_holds(&log, n);
    // Appends overwrite the zeros, and read back after a reopen.
    for i in n..n + 100 {
        let off = log.append(None, None, &payload(i)).unwrap();
        log.durability().wait_synced(off).unwrap();
    }
    drop(log);
    let log = SegmentLog::open(copy.path(), config()).unwrap();
    assert_holds(&log, n + 100);
}

#[test]
fn leftovers_of_a_preparation_are_reused_or_removed() {
    let dir = tempfile::tempdir().unwrap();
    // A log with a record: reopened, it prepares no file at once (only when its segment
    // is half full), so nothing of its own is in the way of what is checked below.
    let mut log = SegmentLog::open(dir.path(), config()).unwrap();
    log.append(None, None, &payload(0)).unwrap();
    drop(log);
    // A half-written file, a taken one a crash left, and a prepared one of the wrong
    // size (another segment size): removed at open. None is ever read as a segment.
    std::fs::write(dir.path().join("prealloc.tmp"), vec![0u8; 100]).unwrap();
    std::fs::write(dir.path().join("prealloc.taken"), vec![0u8; 100]).unwrap();
    std::fs::write(dir.path().join("prealloc.next"), vec![0u8; 100]).unwrap();
    let mut log = SegmentLog::open(dir.path(), config()).unwrap();
    assert!(!dir.path().join("prealloc.tmp").exists());
    assert!(!dir.path().join("prealloc.taken").exists());
    let n = append_until_preallocated(&mut log, dir.path());
    assert_holds(&log, n);
    drop(log);
    // A prepared file of the right size is kept. The segment being written holds
    // records, so it goes on (a reopen does not start a segment), and the roll takes the
    // prepared file.
    let _ = std::fs::remove_file(dir.path().join("prealloc.next"));
    std::fs::write(
        dir.path().join("prealloc.next"),
        vec![0u8; SEGMENT as usize],
    )
    .unwrap();
    let mut log = SegmentLog::open(dir.path(), config()).unwrap();
    let before = segments(dir.path());
    let mut n = n;
    log.append(None, None, &payload(n)).unwrap();
    n += 1;
    assert_eq!(segments(dir.path()), before);
    assert!(dir.path().join("prealloc.next").exists());
    while segments(dir.path()).len() == before.len() {
        log.append(None, None, &payload(n)).unwrap();
        n += 1;
    }
    assert_eq!(size(&segments(dir.path()).pop().unwrap()), SEGMENT);
    assert_holds(&log, n);
}

#[test]
fn other_policies_do_not_preallocate() {
    for sync in [
        SyncPolicy::Never,
        SyncPolicy::Interval(Duration::from_millis(5)),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let config = DurableConfig { sync, ..config() };
        let mut log = SegmentLog::open(dir.path(), config).unwrap();
        for i in 0..2000 {
            log.append(None, None, &payload(i)).unwrap();
        }
        assert!(!dir.path().join("prealloc.next").exists());
        for s in segments(dir.path()) {
            assert!(size(&s) < SEGMENT);
        }
    }
}
