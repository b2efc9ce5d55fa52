//! Reopening a log after clean closes, torn tails, bit flips, corrupt middles and lost
//! indexes: each with its exact outcome.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use memq_store::{DurableConfig, SegmentLog, StoreError, SyncPolicy};

fn config() -> DurableConfig {
    // Small segments, so that a few hundred records span several files.
    DurableConfig::new(SyncPolicy::Never).segment_bytes(4096)
}

fn payload(i: u64) -> Vec<u8> {
    format!("message number {i:06} {}", "x".repeat((i % 50) as usize)).into_bytes()
}

fn fill(dir: &Path, n: u64) {
    fill_with(dir, n, config());
}

fn fill_with(dir: &Path, n: u64, config: DurableConfig) {
    let mut log = SegmentLog::open(dir, config).unwrap();
    for i in log.next_offset()..n {
        let key = i.is_multiple_of(3).then(|| i.to_le_bytes().to_vec());
        let off = log
            .append(Some(1_000 + i), key.as_deref(), &payload(i))
            .unwrap();
        assert_eq!(off, i);
    }
}

/// Reads the whole log and checks it holds offsets `0..n` with their payloads.
fn assert_holds(log: &SegmentLog, n: u64) {
    let all = log.read(0, usize::MAX).unwrap();
    assert_eq!(all.skipped, 0);
    assert_eq!(all.records.len() as u64, n);
    for (i, r) in all.records.iter().enumerate() {
        let i = i as u64;
        assert_eq!(r.offset, i);
        assert_eq!(r.payload, payload(i));
        assert_eq!(r.timestamp, Some(1_000 + i));
        assert_eq!(r.key, i.is_multiple_of(3).then(|| i.to_le_bytes().to_vec()));
    }
    assert_eq!(log.next_offset(), n);
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

/// Byte positions of the records of a segment file, from its own bytes.
fn record_positions(file: &Path) -> Vec<u64> {
    let bytes = std::fs::read(file).unwrap();
    let mut pos = 16usize;
    let mut out = Vec::new();
    while pos + 8 <= bytes.len() {
        out.push(pos as u64);
        let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
        pos += 8 + len;
    }
    out
}

fn flip_bit(file: &Path, at: u64) {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)
        .unwrap();
    let mut b = [0u8];
    f.read_exact_at(&mut b, at).unwrap();
    b[0] ^= 0x10;
    f.write_all_at(&b, at).unwrap();
}

#[test]
fn offsets_and_records_survive_reopening_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 300);
    assert!(
        segments(dir.path()).len() > 3,
        "the test needs several segments"
    );
    // Appending after a reopen continues the offsets.
    fill(dir.path(), 450);
    let log = SegmentLog::open(dir.path(), config()).unwrap();
    assert_eq!(log.recovery(), &Default::default());
    assert_holds(&log, 450);
    // Reads from any offset, through the sparse index.
    for from in [0, 1, 77, 299, 300, 449] {
        let r = log.read(from, 5).unwrap();
        assert_eq!(r.records[0].offset, from);
        assert_eq!(r.records.len() as u64, 5.min(450 - from));
    }
    assert!(log.read(450, 5).unwrap().records.is_empty());
    assert!(log.read(10_000, 5).unwrap().records.is_empty());
}

#[test]
fn a_torn_last_record_is_cut_off_and_reported_at_every_length() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 40);
    let last = segments(dir.path()).pop().unwrap();
    let positions = record_positions(&last);
    let tail = *positions.last().unwrap();
    let full = std::fs::metadata(&last).unwrap().len();
    let pristine = std::fs::read(&last).unwrap();
    // Every length the last record could have been torn to, from 1 byte short to all
    // but its first byte.
    for cut in 1..(full - tail) {
        std::fs::write(&last, &pristine[..(full - cut) as usize]).unwrap();
        let log = SegmentLog::open(dir.path(), config()).unwrap();
        let t = log
            .recovery()
            .truncated
            .clone()
            .expect("a truncation is reported");
        assert_eq!(t.file, last);
        assert_eq!(t.position, tail);
        assert_eq!(t.bytes, full - cut - tail);
        assert_holds(&log, 39);
        drop(log);
        assert_eq!(std::fs::metadata(&last).unwrap().len(), tail);
    }
    // And the log goes on from there.
    fill(dir.path(), 60);
    let log = SegmentLog::open(dir.path(), config()).unwrap();
    assert_eq!(log.recovery().truncated, None);
    assert_holds(&log, 60);
}

#[test]
fn a_bit_flip_in_the_last_record_is_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 40);
    let last = segments(dir.path()).pop().unwrap();
    let tail = *record_positions(&last).last().unwrap();
    let len = std::fs::metadata(&last).unwrap().len();
    flip_bit(&last, len - 1);
    let log = SegmentLog::open(dir.path(), config()).unwrap();
    let t = log.recovery().truncated.clone().unwrap();
    assert_eq!((t.position, t.reason), (tail, "CRC-32C mismatch"));
    assert_holds(&log, 39);
}

#[test]
fn a_bit_flip_in_the_middle_of_the_last_segment_is_an_error_until_repaired() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 40);
    let last = segments(dir.path()).pop().unwrap();
    let positions = record_positions(&last);
    assert!(positions.len() > 4);
    let bad = positions[2];
    flip_bit(&last, bad + 30);
    let before = std::fs::read(&last).unwrap();
    let err = SegmentLog::open(dir.path(), config()).unwrap_err();
    let StoreError::Corrupt {
        file,
        position,
        offset,
        reason,
    } = &err
    else {
        panic!("expected Corrupt, got {err}");
    };
    assert_eq!((file, *position, *reason), (&last, bad, "CRC-32C mismatch"));
    let first_in_last = 40 - positions.len() as u64;
    assert_eq!(*offset, first_in_last + 2);
    assert!(
        err.to_string().contains(&last.display().to_string()),
        "{err}"
    );
    // Nothing was changed on disk by the refusal.
    assert_eq!(std::fs::read(&last).unwrap(), before);

    let log = SegmentLog::open(dir.path(), config().repair(true)).unwrap();
    let t = log.recovery().truncated.clone().unwrap();
    assert_eq!((t.file.clone(), t.position), (last.clone(), bad));
    assert_holds(&log, first_in_last + 2);
}

#[test]
fn a_damaged_length_in_the_middle_is_not_mistaken_for_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 40);
    let last = segments(dir.path()).pop().unwrap();
    let bad = record_positions(&last)[1];
    // The length's high byte: the record now claims to run far past the file's end.
    flip_bit(&last, bad + 3);
    assert!(matches!(
        SegmentLog::open(dir.path(), config()),
        Err(StoreError::Corrupt { position, .. }) if position == bad
    ));
}

#[test]
fn a_corrupt_middle_segment_is_an_error_and_repair_drops_what_follows() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 300);
    let segs = segments(dir.path());
    let middle = &segs[1];
    let positions = record_positions(middle);
    // The last record of a closed segment: opening checks it (the scan from the last
    // index entry), without `verify_on_open`.
    let bad = *positions.last().unwrap();
    flip_bit(middle, bad + 20);
    let err = SegmentLog::open(dir.path(), config()).unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt { file, position, .. } if file == middle && *position == bad),
        "{err}"
    );
    let log = SegmentLog::open(dir.path(), config().repair(true)).unwrap();
    assert_eq!(log.recovery().removed_segments, segs[2..].to_vec());
    let kept = log.next_offset();
    assert_holds(&log, kept);
    assert_eq!(segments(dir.path()), segs[..2].to_vec());
}

#[test]
fn damage_before_a_closed_segments_last_index_entry_is_found_by_verify_or_by_the_read() {
    let config = || DurableConfig {
        index_interval_bytes: 256,
        ..config()
    };
    let dir = tempfile::tempdir().unwrap();
    fill_with(dir.path(), 300, config());
    let first = segments(dir.path())[0].clone();
    let bad = record_positions(&first)[1];
    flip_bit(&first, bad + 25);
    // A plain open trusts the index up to its last entry (one every 256 bytes here)...
    let log = SegmentLog::open(dir.path(), config()).unwrap();
    // ...and the read that meets the record fails, naming it.
    let err = log.read(0, 10).unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt { file, position, offset: 1, .. } if *file == first && *position == bad),
        "{err}"
    );
    drop(log);
    // verify_on_open checks every record.
    let err = SegmentLog::open(dir.path(), config().verify_on_open(true)).unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt { position, .. } if *position == bad),
        "{err}"
    );
}

#[test]
fn missing_and_stale_indexes_are_rebuilt_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 300);
    let segs = segments(dir.path());
    let idx0 = segs[0].with_extension("idx");
    let idx1 = segs[1].with_extension("idx");
    std::fs::remove_file(&idx0).unwrap();
    std::fs::write(&idx1, [1u8; 24]).unwrap();
    // An index whose segment is gone is removed.
    let orphan = dir.path().join(format!("{:020}.idx", 99_999_999u64));
    std::fs::write(&orphan, [0u8; 8]).unwrap();
    let log = SegmentLog::open(dir.path(), config()).unwrap();
    assert_eq!(
        log.recovery().rebuilt_indexes,
        vec![idx0.clone(), idx1.clone()]
    );
    assert_holds(&log, 300);
    drop(log);
    assert!(idx0.exists() && !orphan.exists());
    let log = SegmentLog::open(dir.path(), config()).unwrap();
    assert!(log.recovery().rebuilt_indexes.is_empty());
}

#[test]
fn a_segment_created_but_not_written_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 50);
    let log = SegmentLog::open(dir.path(), config()).unwrap();
    let next = log.next_offset();
    drop(log);
    // A crash between creating the next segment and writing its header.
    let empty = dir.path().join(format!("{next:020}.log"));
    std::fs::write(&empty, b"").unwrap();
    let log = SegmentLog::open(dir.path(), config()).unwrap();
    assert_eq!(log.recovery().truncated.as_ref().unwrap().file, empty);
    assert_holds(&log, 50);
}

#[test]
fn foreign_files_and_gaps_are_refused_with_the_file_named() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 300);
    let segs = segments(dir.path());
    std::fs::remove_file(&segs[1]).unwrap();
    let err = SegmentLog::open(dir.path(), config()).unwrap_err();
    assert!(
        matches!(&err, StoreError::Format { file, .. } if *file == segs[2]),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(format!("{:020}.log", 0)), [7u8; 64]).unwrap();
    let err = SegmentLog::open(dir.path(), config()).unwrap_err();
    assert!(err.to_string().contains("bad magic"), "{err}");
}

#[test]
fn a_directory_is_opened_by_one_log_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let log = SegmentLog::open(dir.path(), config()).unwrap();
    let err = SegmentLog::open(dir.path(), config()).unwrap_err();
    assert!(
        matches!(&err, StoreError::Locked { dir: d } if d == dir.path()),
        "{err}"
    );
    drop(log);
    SegmentLog::open(dir.path(), config()).unwrap();
}

#[test]
fn retention_deletes_whole_old_segments_by_size_count_and_age_but_not_past_the_floor() {
    use memq_store::Retention;
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let cfg = config().retention(Retention {
        max_segments: Some(3),
        ..Retention::default()
    });
    let mut log = SegmentLog::open(dir.path(), cfg).unwrap();
    for i in 0..300 {
        log.append(Some(1_000 + i), None, &payload(i)).unwrap();
    }
    assert_eq!(log.segment_count(), 3);
    let start = log.start();
    assert!(start > 0);
    let r = log.read(0, 3).unwrap();
    assert_eq!((r.skipped, r.records[0].offset), (start, start));

    // Under a floor, an append that needs an old segment gone fails with Full...
    log.set_floor(Some(start));
    let mut full = false;
    for i in 300..400 {
        match log.append(Some(1_000 + i), None, &payload(i)) {
            Ok(_) => {}
            Err(StoreError::Full) => {
                full = true;
                break;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(full, "the floor must hold the oldest segment");
    assert_eq!(log.start(), start);
    // ...and succeeds once the readers move on.
    log.set_floor(None);
    log.append(None, None, b"after").unwrap();

    // By age: everything but the segment being written is older than an hour.
    let dir = tempfile::tempdir().unwrap();
    let cfg = config().retention(Retention {
        max_age: Some(Duration::from_secs(3600)),
        ..Retention::default()
    });
    let mut log = SegmentLog::open(dir.path(), cfg).unwrap();
    for i in 0..300 {
        log.append(Some(1_000 + i), None, &payload(i)).unwrap();
    }
    let n = log.segment_count();
    // The oldest segment's newest record is younger than an hour at this time...
    assert_eq!(log.enforce_retention(1_000 + 3_600_000).unwrap(), 0);
    // ...a segment goes once its newest record is older than the limit...
    let first_end = log.read(0, usize::MAX).unwrap().records.len();
    assert_eq!(first_end, 300);
    let deleted = log.enforce_retention(1_000 + 150 + 3_600_000).unwrap();
    assert!(deleted > 0 && deleted < n - 1, "{deleted} of {n}");
    assert!(log.start() <= 150 && log.start() > 0);
    // ...and all but the one being written, when all are old.
    log.enforce_retention(1_000 + 300 + 3_600_000 * 2).unwrap();
    assert_eq!(log.segment_count(), 1);
}

#[test]
fn records_too_large_are_refused_and_nothing_is_appended() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = SegmentLog::open(dir.path(), config().max_record_bytes(100)).unwrap();
    log.append(None, None, &[1; 50]).unwrap();
    let err = log
        .append_batch([(None, None, &[1u8; 10][..]), (None, None, &[2u8; 200][..])])
        .unwrap_err();
    assert!(
        matches!(err, StoreError::TooLarge { max: 100, .. }),
        "{err}"
    );
    assert_eq!(log.next_offset(), 1);
    assert_eq!(log.append(None, None, b"ok").unwrap(), 1);
}

#[test]
fn async_waiters_are_woken_by_the_sync_thread_and_interval_syncs_on_its_own() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::task::{Poll, Wake, Waker};
    use std::time::{Duration, Instant};

    struct Flag(AtomicBool, std::thread::Thread);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
            self.1.unpark();
        }
    }

    // Always: an async waiter registers, and the sync thread syncs and wakes it.
    let dir = tempfile::tempdir().unwrap();
    let mut log = SegmentLog::open(dir.path(), DurableConfig::new(SyncPolicy::Always)).unwrap();
    let off = log.append(None, None, b"async").unwrap();
    let d = log.durability().clone();
    let flag = Arc::new(Flag(AtomicBool::new(false), std::thread::current()));
    let waker = Waker::from(flag.clone());
    assert!(d.poll_synced(off, &waker).is_pending());
    // A bound far from the expected time (an fsync): only a lost wake-up reaches it.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !flag.0.load(Ordering::SeqCst) {
        assert!(
            Instant::now() < deadline,
            "the sync thread never woke the waiter"
        );
        std::thread::park_timeout(Duration::from_millis(100));
    }
    assert!(matches!(d.poll_synced(off, &waker), Poll::Ready(Ok(()))));

    // Interval: nobody waits, and the record reaches the disk anyway.
    let dir = tempfile::tempdir().unwrap();
    let cfg = DurableConfig::new(SyncPolicy::Interval(Duration::from_millis(5)));
    let mut log = SegmentLog::open(dir.path(), cfg).unwrap();
    let off = log.append(None, None, b"interval").unwrap();
    let d = log.durability().clone();
    let deadline = Instant::now() + Duration::from_secs(60);
    while d.synced() <= off {
        assert!(Instant::now() < deadline, "the interval never synced");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(d.syncs() >= 1);
    // Idle, it does not sync again: nothing new was written.
    let syncs = d.syncs();
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(d.syncs(), syncs);
}
