//! Regression tests from a review of memq-store: each asserts the documented behaviour
//! that the code before the review broke (F1-F8 in the review's numbering).

use std::os::unix::fs::FileExt;
use std::time::Duration;

use memq_core::{Overflow, StartAt, TopicConfig};
use memq_store::{
    DurableConfig, DurableRecvError, DurableTopic, GroupConfig, Retention, SegmentLog, StoreError,
    SyncPolicy,
};

fn body(i: u64) -> Vec<u8> {
    format!("job {i:05} {}", "x".repeat(100)).into_bytes()
}

/// F1: a plain group's settlements (by the next receive) never count towards
/// `commit_every`, so its state is written only on commit() or when the last member
/// leaves: a crash re-delivers everything since the group was opened.
#[test]
fn f1_plain_group_writes_its_state_every_commit_every() {
    let dir = tempfile::tempdir().unwrap();
    let topic = DurableTopic::open(
        dir.path(),
        TopicConfig::new(8),
        DurableConfig::new(SyncPolicy::Never),
    )
    .unwrap();
    for i in 0..50 {
        topic.publish_blocking(body(i)).unwrap();
    }
    let mut c = topic
        .group(
            "plain",
            StartAt::Earliest,
            GroupConfig::default().commit_every(1),
        )
        .unwrap();
    for i in 0..40 {
        assert_eq!(c.recv_blocking().unwrap().offset, i);
    }
    let st = c.stats();
    assert_eq!(st.committed, vec![39]);
    assert_eq!(
        st.committed_on_disk,
        vec![39],
        "commit_every(1): 39 settlements, state never written"
    );
}

/// F2: retention (DropOldest) deletes offsets a group has not claimed yet; the group
/// then returns Lagged(1) for the same offset forever (hand_over puts the claim back in
/// `again` with deliveries - 1), never making progress.
#[test]
fn f2_group_behind_retention_makes_progress() {
    let dir = tempfile::tempdir().unwrap();
    let durable = DurableConfig::new(SyncPolicy::Never)
        .segment_bytes(4096)
        .retention(Retention {
            max_segments: Some(2),
            ..Retention::default()
        });
    let topic = DurableTopic::open(
        dir.path(),
        TopicConfig::new(4).overflow(Overflow::DropOldest),
        durable,
    )
    .unwrap();
    let mut c = topic
        .group("g", StartAt::Earliest, GroupConfig::default())
        .unwrap();
    for i in 0..400 {
        topic.publish_blocking(body(i)).unwrap();
    }
    let start = topic.start_offset(0).unwrap();
    assert!(start > 0, "retention deleted something");
    let mut lagged = 0;
    let mut got = None;
    for _ in 0..(start + 10) {
        match c.try_recv() {
            Ok(m) => {
                got = Some(m.offset);
                break;
            }
            Err(DurableRecvError::Lagged(n)) => lagged += n,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(
        got,
        Some(start),
        "after {lagged} Lagged, the group should go on at the oldest kept ({start})"
    );
}

/// F3: under Overflow::Block, a durable group holds back nothing: retention deletes
/// what it has not read, and the publisher never waits.
#[test]
fn f3_block_keeps_what_a_group_has_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let durable = DurableConfig::new(SyncPolicy::Never)
        .segment_bytes(4096)
        .retention(Retention {
            max_segments: Some(2),
            ..Retention::default()
        });
    let topic = DurableTopic::open(
        dir.path(),
        TopicConfig::new(4).overflow(Overflow::Block),
        durable,
    )
    .unwrap();
    let _c = topic
        .group("g", StartAt::Earliest, GroupConfig::default())
        .unwrap();
    let mut published = 0;
    for i in 0..400 {
        match topic.try_publish(body(i)) {
            Ok(_) => published += 1,
            Err(_) => break,
        }
    }
    assert_eq!(
        topic.start_offset(0),
        Some(0),
        "Block deleted {} messages the group had not read ({published} published)",
        topic.start_offset(0).unwrap()
    );
}

/// F4: a group's committed offset read back on open is not checked against the log's
/// end. After a power loss that drops an unsynced log tail the group had already
/// claimed, acked and committed (possible under Always: members claim on `published`,
/// before the publisher's sync), new publishes reuse those offsets and the group skips
/// them. Simulated here by truncating the log's tail.
#[test]
fn f4_group_committed_past_the_log_end_skips_new_messages() {
    let dir = tempfile::tempdir().unwrap();
    {
        let topic = DurableTopic::open(
            dir.path(),
            TopicConfig::new(8),
            DurableConfig::new(SyncPolicy::Always),
        )
        .unwrap();
        for i in 0..10 {
            topic.publish_blocking(body(i)).unwrap();
        }
        let mut c = topic
            .group("g", StartAt::Earliest, GroupConfig::default())
            .unwrap();
        for _ in 0..10 {
            c.recv_blocking().unwrap();
        }
        c.commit().unwrap();
        assert_eq!(c.stats().committed_on_disk, vec![10]);
    }
    // The power loss: records 5.. never reached the disk.
    let seg = dir.path().join("partition-0/00000000000000000000.log");
    let len = 16 + 5 * (8 + 20 + body(0).len() as u64);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(len)
        .unwrap();
    let topic = DurableTopic::open(
        dir.path(),
        TopicConfig::new(8),
        DurableConfig::new(SyncPolicy::Always),
    )
    .unwrap();
    assert_eq!(topic.next_offset(0), Some(5));
    for i in 100..110 {
        let r = topic.publish_blocking(body(i)).unwrap();
        assert!(r.durable);
    }
    let mut c = topic
        .group("g", StartAt::Earliest, GroupConfig::default())
        .unwrap();
    let first = c.try_recv().map(|m| m.offset);
    assert!(
        matches!(first, Ok(o) if o <= 9),
        "acknowledged messages at offsets 5..=9 skipped by the group: {first:?}, committed {:?}",
        c.stats().committed
    );
}

/// F5: a power loss leaves the unsynced pages of the last segment in any order: a page
/// of zeros (never written back) followed by a later page that was. That is a torn
/// tail (nothing there was acknowledged under Always), but recovery calls it Corrupt
/// and refuses to open.
#[test]
fn f5_zeroed_unsynced_page_before_a_written_one_is_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = DurableConfig::new(SyncPolicy::Always);
    {
        let mut log = SegmentLog::open(dir.path(), cfg).unwrap();
        for i in 0..100 {
            log.append(Some(1), None, &body(i)).unwrap();
        }
        log.sync().unwrap();
    }
    // Records from offset 60 on were appended after the last sync (not acknowledged);
    // the page holding record 60 was not written back, a later one was.
    let seg = dir.path().join("00000000000000000000.log");
    let rec = 8 + 20 + body(0).len() as u64;
    let pos60 = 16 + 60 * rec;
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.write_all_at(&vec![0u8; 2 * rec as usize], pos60).unwrap();
    drop(f);
    match SegmentLog::open(dir.path(), cfg) {
        Ok(log) => assert_eq!(log.next_offset(), 60),
        Err(e @ StoreError::Corrupt { .. }) => panic!("refused to open: {e}"),
        Err(e) => panic!("{e}"),
    }
}

/// F6: a subscriber is not a reader for the Block floor until after it read the log's
/// start; a group is never one. (See report; not deterministic, not run.)
/// F7: a Delivery acked after its consumer was dropped is silently ignored (Ok(())),
/// and the message is delivered again.
#[test]
fn f7_ack_after_member_dropped_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let topic = DurableTopic::open(
        dir.path(),
        TopicConfig::new(8),
        DurableConfig::new(SyncPolicy::Never),
    )
    .unwrap();
    topic.publish_blocking(body(0)).unwrap();
    let cfg = GroupConfig::acked(Duration::from_secs(3600)).commit_every(1);
    let mut a = topic.group("g", StartAt::Earliest, cfg).unwrap();
    let mut b = topic.group("g", StartAt::Earliest, cfg).unwrap();
    let d = a.recv_delivery_blocking().unwrap();
    drop(a);
    let acked = d.ack();
    let again = b
        .recv_delivery_timeout(Duration::ZERO)
        .map(|d| d.message().offset);
    assert!(
        !(acked.is_ok() && again.is_ok()),
        "ack returned Ok, yet the message was delivered again: {again:?}"
    );
}

/// F8: after close, a member waiting for the group to drain is not woken by another
/// member's ack (ack never notifies news): it sleeps until the acked lease's old
/// deadline (ack_wait) instead of returning Closed.
#[test]
fn f8_ack_after_close_wakes_a_member_waiting_to_drain() {
    let dir = tempfile::tempdir().unwrap();
    let topic = DurableTopic::open(
        dir.path(),
        TopicConfig::new(8),
        DurableConfig::new(SyncPolicy::Never),
    )
    .unwrap();
    topic.publish_blocking(body(0)).unwrap();
    let cfg = GroupConfig::acked(Duration::from_secs(30));
    let mut a = topic.group("g", StartAt::Earliest, cfg).unwrap();
    let mut b = topic.group("g", StartAt::Earliest, cfg).unwrap();
    let d = a.recv_delivery_blocking().unwrap();
    topic.close();
    let waiter = std::thread::spawn(move || {
        let t = std::time::Instant::now();
        let r = b.recv_delivery_timeout(Duration::from_secs(5)).map(|_| ());
        (r, t.elapsed())
    });
    std::thread::sleep(Duration::from_millis(200));
    d.ack().unwrap();
    let (r, took) = waiter.join().unwrap();
    assert!(
        matches!(r, Err(DurableRecvError::Closed)) && took < Duration::from_secs(2),
        "got {r:?} after {took:?}"
    );
}

/// Probe: a subscriber under DropOldest: lagged + received = published, offsets strictly
/// increasing, whatever the interleaving of publishes and receives.
#[test]
fn probe_subscriber_counts_under_drop_oldest() {
    for pattern in [1usize, 3, 7, 50, 1000] {
        let dir = tempfile::tempdir().unwrap();
        let durable = DurableConfig::new(SyncPolicy::Never)
            .segment_bytes(4096)
            .retention(Retention {
                max_segments: Some(2),
                ..Retention::default()
            });
        let topic = DurableTopic::open(
            dir.path(),
            TopicConfig::new(4)
                .partitions(2)
                .overflow(Overflow::DropOldest),
            durable,
        )
        .unwrap();
        let mut s = topic.subscribe(StartAt::Earliest).unwrap();
        let mut last = [None::<u64>; 2];
        let (mut got, mut lagged) = (0u64, 0u64);
        let n = 2000u64;
        for i in 0..n {
            topic.publish_to_blocking((i % 2) as u32, body(i)).unwrap();
            if (i as usize).is_multiple_of(pattern) {
                loop {
                    match s.try_recv() {
                        Ok(m) => {
                            let p = m.partition as usize;
                            assert!(
                                last[p].is_none_or(|l| m.offset > l),
                                "order {:?} {}",
                                last[p],
                                m.offset
                            );
                            last[p] = Some(m.offset);
                            got += 1;
                        }
                        Err(DurableRecvError::Lagged(k)) => lagged += k,
                        Err(DurableRecvError::Empty) => break,
                        Err(e) => panic!("{e}"),
                    }
                }
            }
        }
        loop {
            match s.try_recv() {
                Ok(m) => {
                    let p = m.partition as usize;
                    assert!(last[p].is_none_or(|l| m.offset > l));
                    last[p] = Some(m.offset);
                    got += 1;
                }
                Err(DurableRecvError::Lagged(k)) => lagged += k,
                Err(DurableRecvError::Empty) => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(
            got + lagged,
            n,
            "pattern {pattern}: got {got} lagged {lagged}"
        );
    }
}
