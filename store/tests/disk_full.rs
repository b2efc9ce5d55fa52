//! A real full disk and a read-only directory: a small tmpfs mounted for the test.
//!
//! Mounting needs root (or a user namespace); where it cannot be had, each test says so
//! loudly and checks nothing, rather than passing quietly.

use std::path::{Path, PathBuf};
use std::process::Command;

use memq_store::{DurableConfig, SegmentLog, StoreError, SyncPolicy};

/// A tmpfs of `size` mounted on a fresh directory; unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!(
                "SKIPPED: cannot mount a tmpfs here (needs root); the disk-full and \
                 read-only tests did not run"
            );
            return None;
        }
        Some(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Remounts with `opts`. A remount read-only is refused (busy) while any process
    /// has a file of it open for writing, and a child that another test thread forks
    /// holds copies of this process's files until it runs its program: so it is tried
    /// again, up to 100 times (a bound far from the microseconds such a hold lasts).
    fn remount(&self, opts: &str) {
        for _ in 0..100 {
            let ok = Command::new("mount")
                .args(["-o", &format!("remount,{opts}")])
                .arg(self.path())
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap()
                .success();
            if ok {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("remount {opts}");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

fn config() -> DurableConfig {
    DurableConfig::new(SyncPolicy::Always).segment_bytes(64 << 10)
}

#[test]
fn disk_full_fails_the_append_hands_nothing_half_written_and_recovers_when_space_is_freed() {
    // `Interval`: nothing else on the disk moves, so a second append on the full disk
    // fails too.
    disk_full_run(
        DurableConfig::new(SyncPolicy::Interval(std::time::Duration::from_millis(5)))
            .segment_bytes(64 << 10),
        true,
    );
}

#[test]
fn disk_full_under_always_with_preallocated_segments() {
    // `Always`: the thread that prepares the next segment gives its file up when the
    // disk is full, which frees space: a later append may then go through. Each append
    // is whole or refused either way. Small segments, so that the file it prepares once
    // space is freed takes little of it.
    disk_full_run(config().segment_bytes(16 << 10), false);
}

fn disk_full_run(config: DurableConfig, nothing_else_frees_space: bool) {
    let Some(fs) = Tmpfs::mount("512k") else {
        return;
    };
    // Room the test frees later.
    let filler: PathBuf = fs.path().join("filler");
    std::fs::write(&filler, vec![0u8; 128 << 10]).unwrap();
    let dir = fs.path().join("log");
    let mut log = SegmentLog::open(&dir, config).unwrap();
    let record = |i: u64| vec![(i % 251) as u8; 1000 + (i % 7) as usize * 100];
    let mut appended = 0u64;
    let err = loop {
        match log.append(Some(appended), None, &record(appended)) {
            Ok(off) => {
                assert_eq!(off, appended);
                appended += 1;
            }
            Err(e) => break e,
        }
        assert!(appended < 10_000, "the tmpfs never filled");
    };
    assert!(err.is_disk_full(), "expected disk full, got {err}");
    assert!(err.to_string().contains("No space left"), "{err}");
    // Nothing of the failed record is in the log; what was appended is all there.
    assert_eq!(log.next_offset(), appended);
    let all = log.read(0, usize::MAX).unwrap();
    assert_eq!(all.records.len() as u64, appended);
    for r in &all.records {
        assert_eq!(r.payload, record(r.offset));
    }
    // Still full: still an error, still nothing appended (unless the preparer gave its
    // file up meanwhile: then the record is appended whole).
    match log.append(Some(appended), None, &record(appended)) {
        Err(e) => {
            assert!(e.is_disk_full(), "{e}");
            assert_eq!(log.next_offset(), appended);
        }
        Ok(off) => {
            assert!(!nothing_else_frees_space, "appended on a full disk");
            assert_eq!(off, appended);
            appended += 1;
        }
    }

    // Space is freed: the log goes on.
    std::fs::remove_file(&filler).unwrap();
    for _ in 0..20 {
        assert_eq!(
            log.append(Some(appended), None, &record(appended)).unwrap(),
            appended
        );
        appended += 1;
    }
    log.sync().unwrap();
    drop(log);
    let log = SegmentLog::open(&dir, config).unwrap();
    assert_eq!(log.recovery().truncated, None);
    let all = log.read(0, usize::MAX).unwrap();
    assert_eq!(all.records.len() as u64, appended);
    for r in &all.records {
        assert_eq!(r.payload, record(r.offset));
    }
    eprintln!(
        "disk full after {} records; {} after freeing space",
        appended - 20,
        appended
    );
}

#[test]
fn a_read_only_directory_is_a_clear_error() {
    let Some(fs) = Tmpfs::mount("1m") else {
        return;
    };
    let dir = fs.path().join("log");
    let mut log = SegmentLog::open(&dir, config()).unwrap();
    log.append(None, None, b"kept").unwrap();
    drop(log);
    fs.remount("ro");
    let err = SegmentLog::open(&dir, config()).unwrap_err();
    let StoreError::Io { op, path, source } = &err else {
        panic!("expected an I/O error, got {err}");
    };
    assert_eq!((*op, path.as_path()), ("open", dir.join("LOCK").as_path()));
    assert_eq!(source.raw_os_error(), Some(30), "EROFS: {err}");
    fs.remount("rw");
    let log = SegmentLog::open(&dir, config()).unwrap();
    assert_eq!(log.read(0, 10).unwrap().records[0].payload, b"kept");
}

#[test]
fn a_durable_topic_hands_the_message_back_on_a_full_disk_and_goes_on_when_space_is_freed() {
    use memq_core::{StartAt, TopicConfig};
    use memq_store::{DurablePublishError, DurableTopic};

    let Some(fs) = Tmpfs::mount("512k") else {
        return;
    };
    let filler = fs.path().join("filler");
    std::fs::write(&filler, vec![0u8; 128 << 10]).unwrap();
    let topic = DurableTopic::open(fs.path().join("topic"), TopicConfig::new(8), config()).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    let payload = |i: u64| vec![(i % 200) as u8; 1500];
    let mut n = 0u64;
    let (err, back) = loop {
        match topic.publish_blocking(payload(n)) {
            Ok(r) => {
                assert_eq!(r.offset, n);
                n += 1;
            }
            Err(DurablePublishError::Store(e, back)) => break (e, back),
            Err(e) => panic!("{e}"),
        }
        assert!(n < 10_000);
    };
    assert!(err.is_disk_full(), "{err}");
    assert_eq!(back.as_ref(), &payload(n)[..], "the message is handed back");
    // Readers see exactly what was published, nothing of the failed one.
    for i in 0..n {
        assert_eq!(sub.try_recv().unwrap().offset, i);
    }
    assert!(sub.try_recv().is_err());
    std::fs::remove_file(&filler).unwrap();
    let r = topic.publish_blocking(back).unwrap();
    assert_eq!(r.offset, n);
    assert_eq!(sub.try_recv().unwrap().payload.as_ref(), &payload(n)[..]);
    assert_eq!(topic.stats().partitions[0].next, n + 1);
}
