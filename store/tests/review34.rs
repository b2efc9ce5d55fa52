//! Regressions from the review of group writes, preallocated segments and durable dead
//! letters: a dead letter not yet moved is not committed past; a letter as large as the
//! topic allows fits the dead-letter log and does not stop the group; reopening a log
//! does not start a segment each time; a round whose waker panics does not leave
//! publishes waiting forever; a full disk does not strand the prepared segment.

use std::future::Future;
use std::time::Duration;

use memq_core::{StartAt, TopicConfig};
use memq_store::{DurableConfig, DurableRecvError, DurableTopic, GroupConfig, SyncPolicy};

const MAX: u32 = 1024;

fn durable() -> DurableConfig {
    DurableConfig::new(SyncPolicy::Never)
        .segment_bytes(64 * 1024)
        .max_record_bytes(MAX)
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&e.path(), &target);
        } else if e.file_name() != "LOCK" {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// Publishes the largest payload the topic takes: its dead-letter envelope (33 more
/// bytes for group "g") cannot fit the dead-letter log, which has the same limit.
fn publish_largest(topic: &DurableTopic) -> usize {
    let mut n = MAX as usize;
    loop {
        if topic.publish_blocking(vec![b'x'; n]).is_ok() {
            return n;
        }
        n -= 1;
    }
}

/// Two letters moved in one `move_dead_letters`: while the second is out of
/// `State::dead` (taken into the local iterator), settling the first writes the group's
/// state with a committed offset past the second, which is in neither `in_flight`,
/// `again` nor `dead`. A crash before the second reaches the dead-letter log loses it:
/// it is never delivered again and never dead-lettered. (Its publish failing here makes
/// the window deterministic; a SIGKILL during its publish+sync shows the same.)
#[test]
fn a_dead_letter_not_yet_moved_is_not_committed_past() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = GroupConfig::acked(Duration::from_secs(3600))
        .max_deliveries(1)
        .commit_every(1);
    {
        let topic = DurableTopic::open(dir.path(), TopicConfig::new(8), durable()).unwrap();
        topic.publish_blocking("small").unwrap(); // offset 0
        publish_largest(&topic); // offset 1
        let mut c = topic.group("g", StartAt::Earliest, cfg).unwrap();
        let d0 = c.recv_delivery_timeout(Duration::ZERO).unwrap();
        let d1 = c.recv_delivery_timeout(Duration::ZERO).unwrap();
        assert_eq!((d0.message().offset, d1.message().offset), (0, 1));
        d0.nack();
        d1.nack();
        // Both reach max_deliveries: both are moved by this receive; 0 is, 1 fails.
        let r = c.recv_delivery_timeout(Duration::ZERO);
        println!("receive after the nacks: {r:?}");
        println!("in-memory committed: {:?}", c.stats().committed);
        // A crash now (nothing more written).
        std::mem::forget(c);
        std::mem::forget(topic);
    }
    let copy = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), copy.path());
    let state: Vec<String> = std::fs::read_dir(copy.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    println!("files: {state:?}");
    let topic = DurableTopic::open(copy.path(), TopicConfig::new(8), durable()).unwrap();
    let mut dead = topic.dead_letters("g", StartAt::Earliest).unwrap();
    let mut letters = Vec::new();
    while let Ok(l) = dead.try_recv() {
        letters.push(l.offset);
    }
    let mut c = topic.group("g", StartAt::Earliest, cfg).unwrap();
    let again = c
        .recv_delivery_timeout(Duration::ZERO)
        .ok()
        .map(|d| d.message().offset);
    println!("dead letters after restart: {letters:?}; delivered again: {again:?}");
    assert!(
        letters.contains(&1) || again == Some(1),
        "offset 1 was given up on but is neither a dead letter nor delivered again: lost"
    );
}

/// A message within `max_record_bytes` whose dead-letter envelope is not: its move
/// fails with TooLarge on every receive, and `claim` returns that error before it
/// looks for messages: the group never delivers anything again.
#[test]
fn a_letter_too_large_for_the_dead_letter_log_does_not_wedge_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let topic = DurableTopic::open(dir.path(), TopicConfig::new(8), durable()).unwrap();
    publish_largest(&topic);
    let cfg = GroupConfig::acked(Duration::from_secs(3600));
    let mut c = topic.group("g", StartAt::Earliest, cfg).unwrap();
    let d = c.recv_delivery_timeout(Duration::ZERO).unwrap();
    println!("reject: {:?}", d.reject());
    topic.publish_blocking("next").unwrap();
    let mut results = Vec::new();
    for _ in 0..3 {
        results.push(
            c.recv_delivery_timeout(Duration::from_millis(50))
                .map(|d| d.message().offset),
        );
    }
    println!("{results:?}");
    assert!(
        results.iter().any(|r| matches!(r, Ok(1))),
        "the group is wedged: {results:?}"
    );
    let _ = DurableRecvError::Closed;
}

/// A clean close trims the active segment; at the next open it is not a preallocated
/// one, so the first append once `prealloc.next` is ready rolls early: every open that
/// appends starts a new segment, however little the last one holds (and, when no
/// `prealloc.next` was left, writes a whole segment of zeros first).
#[test]
fn reopening_a_log_under_always_does_not_start_a_segment_each_time() {
    use memq_store::SegmentLog;
    let dir = tempfile::tempdir().unwrap();
    let config = DurableConfig::new(SyncPolicy::Always).segment_bytes(64 << 10);
    for i in 0..10u64 {
        let mut log = SegmentLog::open(dir.path(), config).unwrap();
        // Give the preparer time to have its file ready (as a real process would): it
        // prepares one at once for a new log only (later, when a segment is half full).
        let t = std::time::Instant::now();
        while i == 0
            && !dir.path().join("prealloc.next").exists()
            && t.elapsed() < Duration::from_secs(10)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        let off = log.append(None, None, format!("r{i}").as_bytes()).unwrap();
        log.durability().wait_synced(off).unwrap();
    }
    let logs = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "log")
        })
        .count();
    println!("segments after 10 reopens of 1 record each: {logs}");
    assert!(logs <= 2, "{logs} segments for 10 records");
}

/// A waker that panics when woken.
struct PanicWake;
impl std::task::Wake for PanicWake {
    fn wake(self: std::sync::Arc<Self>) {
        panic!("this task's runtime is gone");
    }
}

/// Polls `f` with a no-op waker until it is ready or `limit` has passed.
fn poll_for<F: std::future::Future>(f: F, limit: Duration) -> Option<F::Output> {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let t = std::time::Instant::now();
    while t.elapsed() < limit {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

/// A panic in a round (here a user's waker, woken by `complete_all` on the commit
/// thread) kills the commit thread with `QueueState::thread` still set: no thread is
/// ever started again, and every later publish that queues waits forever.
#[test]
fn a_panic_in_a_round_does_not_leave_publishes_queued_forever() {
    let dir = tempfile::tempdir().unwrap();
    let topic = DurableTopic::open(
        dir.path(),
        TopicConfig::new(8),
        DurableConfig::new(SyncPolicy::Always).segment_bytes(64 << 10),
    )
    .unwrap();
    {
        let waker = std::task::Waker::from(std::sync::Arc::new(PanicWake));
        let mut cx = std::task::Context::from_waker(&waker);
        let mut f = std::pin::pin!(topic.publish("first"));
        assert!(f.as_mut().poll(&mut cx).is_pending());
        // The commit thread writes it and wakes the task: the waker panics there.
        std::thread::sleep(Duration::from_millis(300));
        // (the future is dropped here: cancelled after its round; nothing to wait for)
    }
    let second = poll_for(topic.publish("second"), Duration::from_secs(3));
    assert!(
        second.is_some(),
        "an async publish queued after the commit thread died never completed"
    );
}

/// A full disk with a prepared segment waiting: the records fit in `prealloc.next`
/// (zeros already on disk), but the early roll into it first writes the closed
/// segment's index (`active.write_index()?` in `SegmentLog::roll`), a new file the full
/// disk refuses: the append fails, and so does every later one, while a whole segment
/// of space the preparer took sits unused. (Needs root for a tmpfs, like disk_full.rs.)
#[test]
fn a_full_disk_does_not_strand_the_prepared_segment() {
    use memq_store::SegmentLog;
    use std::process::Command;
    let mnt = tempfile::tempdir().unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=512k", "tmpfs"])
        .arg(mnt.path())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIPPED: cannot mount a tmpfs");
        return;
    }
    struct Umount(std::path::PathBuf);
    impl Drop for Umount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _u = Umount(mnt.path().to_path_buf());
    let dir = mnt.path().join("log");
    let seg = 64u64 << 10;
    let mut log = SegmentLog::open(
        &dir,
        DurableConfig::new(SyncPolicy::Always).segment_bytes(seg),
    )
    .unwrap();
    let rec = vec![7u8; 100];
    let t = std::time::Instant::now();
    // Appends until the segment being written is a preallocated one, past half full, and
    // the next one is prepared.
    loop {
        let off = log.append(None, None, &rec).unwrap();
        log.durability().wait_synced(off).unwrap();
        let last_is_prepared = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .max()
            .is_some_and(|p| std::fs::metadata(p).unwrap().len() == seg);
        if last_is_prepared && dir.join("prealloc.next").exists() {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "no prepared file");
    }
    // The disk fills up (other files on it).
    let mut filler = std::fs::File::create(mnt.path().join("filler")).unwrap();
    let chunk = vec![1u8; 4096];
    while std::io::Write::write_all(&mut filler, &chunk).is_ok() {}
    drop(filler);
    // On to the roll into the prepared file (the segment holds ~480 such records), and
    // a few appends into it: the disk has no room, but the prepared file's blocks are
    // there already.
    let count = |d: &std::path::Path| {
        std::fs::read_dir(d)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "log")
            })
            .count()
    };
    let before = count(&dir);
    let mut after_roll = 0;
    let mut r = Ok(0);
    while after_roll < 10 {
        r = log.append(None, None, &rec);
        if r.is_err() {
            break;
        }
        if count(&dir) > before {
            after_roll += 1;
        }
    }
    assert!(
        r.is_ok(),
        "the prepared segment has room for the record, but the append failed: {r:?}"
    );
}
