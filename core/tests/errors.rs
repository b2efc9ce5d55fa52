//! Error types: bad input is an error (never a panic), messages read well, values come
//! back.

use std::error::Error as StdError;

use memq_core::{
    Error, Lagged, PublishError, RecvError, RecvTimeoutError, StartAt, Topic, TopicConfig,
    TryRecvError,
};

#[test]
fn zero_capacity() {
    assert_eq!(
        Topic::<u8>::new(TopicConfig::new(0)).unwrap_err(),
        Error::ZeroCapacity
    );
    assert_eq!(
        Topic::<u8>::with_capacity(0).unwrap_err(),
        Error::ZeroCapacity
    );
    // Reported even with other settings that are fine.
    assert_eq!(
        Topic::<u8>::new(TopicConfig::new(0).partitions(4)).unwrap_err(),
        Error::ZeroCapacity
    );
}

#[test]
fn zero_partitions() {
    assert_eq!(
        Topic::<u8>::new(TopicConfig::new(4).partitions(0)).unwrap_err(),
        Error::ZeroPartitions
    );
}

#[test]
fn ttl_without_clock() {
    assert_eq!(
        Topic::<u8>::new(TopicConfig::new(4).ttl(core::time::Duration::from_secs(1))).unwrap_err(),
        Error::TtlWithoutClock
    );
}

/// "Bad input gets a clear error, never a panic in library code": a capacity too large to
/// allocate should be refused by `Topic::new`, not panic inside it.
#[test]
fn absurd_capacity_is_an_error_not_a_panic() {
    let r = std::panic::catch_unwind(|| Topic::<u64>::new(TopicConfig::new(usize::MAX)).map(drop));
    assert!(
        matches!(r, Ok(Err(_))),
        "Topic::new(capacity = usize::MAX) panicked instead of returning an error"
    );
}

struct NoDebug(#[allow(dead_code)] u8);

#[test]
fn publish_error_debug_does_not_need_t_debug() {
    assert_eq!(format!("{:?}", PublishError::Full(NoDebug(1))), "Full(..)");
    assert_eq!(
        format!("{:?}", PublishError::Closed(NoDebug(1))),
        "Closed(..)"
    );
    assert_eq!(
        format!("{:?}", PublishError::InvalidPartition(NoDebug(1))),
        "InvalidPartition(..)"
    );
    // So `unwrap_err` / `expect` compile on topics of such values.
    let t = Topic::with_capacity(1).unwrap();
    let _sub = t.subscribe(StartAt::Earliest).unwrap();
    t.try_publish(NoDebug(1)).unwrap();
    let e = t.try_publish(NoDebug(2)).unwrap_err();
    assert_eq!(e.into_inner().0, 2);
}

#[test]
fn into_inner_returns_the_value() {
    assert_eq!(PublishError::Full(String::from("a")).into_inner(), "a");
    assert_eq!(PublishError::Closed(vec![1, 2]).into_inner(), vec![1, 2]);
    assert_eq!(PublishError::InvalidPartition(7u8).into_inner(), 7);
}

#[test]
fn publish_error_predicates() {
    let full = PublishError::Full(());
    let closed = PublishError::Closed(());
    let invalid = PublishError::InvalidPartition(());
    assert!(full.is_full() && !full.is_closed());
    assert!(closed.is_closed() && !closed.is_full());
    assert!(!invalid.is_closed() && !invalid.is_full());
    assert_eq!(full.clone(), PublishError::Full(()));
    assert_ne!(full, closed);
}

#[test]
fn recv_error_conversions() {
    assert_eq!(TryRecvError::from(RecvError::Closed), TryRecvError::Closed);
    assert_eq!(
        TryRecvError::from(RecvError::Lagged(4)),
        TryRecvError::Lagged(4)
    );
    assert_eq!(
        RecvTimeoutError::from(RecvError::Closed),
        RecvTimeoutError::Closed
    );
    assert_eq!(
        RecvTimeoutError::from(RecvError::Lagged(9)),
        RecvTimeoutError::Lagged(9)
    );
}

fn every_display() -> Vec<String> {
    let mut all = vec![
        PublishError::Full(NoDebug(0)).to_string(),
        PublishError::Closed(NoDebug(0)).to_string(),
        PublishError::InvalidPartition(NoDebug(0)).to_string(),
        RecvError::Lagged(3).to_string(),
        RecvError::Closed.to_string(),
        TryRecvError::Empty.to_string(),
        TryRecvError::Lagged(3).to_string(),
        TryRecvError::Closed.to_string(),
        RecvTimeoutError::Timeout.to_string(),
        RecvTimeoutError::Lagged(3).to_string(),
        RecvTimeoutError::Closed.to_string(),
        Lagged(3).to_string(),
    ];
    all.extend(
        [
            Error::ZeroCapacity,
            Error::ZeroPartitions,
            Error::TtlWithoutClock,
            Error::PartitionOutOfRange {
                partition: 5,
                partitions: 4,
            },
            Error::OffsetOutOfRange {
                offset: 10,
                partition: 1,
                high: 7,
            },
            Error::PartitionRequired,
            Error::UnknownTopic("Orders".into()),
            Error::TopicExists("Orders".into()),
            Error::UnknownGroup("Workers".into()),
        ]
        .iter()
        .map(ToString::to_string),
    );
    all
}

#[test]
fn every_display_is_lowercase_without_a_trailing_period() {
    for s in every_display() {
        assert!(!s.is_empty());
        let first = s.chars().next().unwrap();
        assert!(!first.is_uppercase(), "{s:?} starts uppercase");
        assert!(!s.ends_with('.'), "{s:?} ends with a period");
        assert_eq!(s.trim(), s, "{s:?} has stray whitespace");
    }
}

#[test]
fn displays_carry_their_details() {
    assert!(RecvError::Lagged(17).to_string().contains("17"));
    assert!(Lagged(17).to_string().contains("17"));
    let s = Error::PartitionOutOfRange {
        partition: 5,
        partitions: 4,
    }
    .to_string();
    assert!(s.contains('5') && s.contains('4'), "{s}");
    let s = Error::OffsetOutOfRange {
        offset: 10,
        partition: 1,
        high: 7,
    }
    .to_string();
    assert!(
        s.contains("10") && s.contains('1') && s.contains('7'),
        "{s}"
    );
    assert!(Error::UnknownTopic("orders".into())
        .to_string()
        .contains("orders"));
    assert!(Error::TopicExists("orders".into())
        .to_string()
        .contains("orders"));
    assert!(Error::UnknownGroup("workers".into())
        .to_string()
        .contains("workers"));
}

#[test]
fn errors_work_with_question_mark_into_boxed_errors() {
    fn run() -> Result<(), Box<dyn StdError + Send + Sync>> {
        let t = Topic::with_capacity(1)?;
        let _sub = t.subscribe(StartAt::Earliest)?;
        t.try_publish(NoDebug(1))?;
        t.try_publish(NoDebug(2))?; // full
        Ok(())
    }
    let e = run().unwrap_err();
    assert_eq!(e.to_string(), PublishError::Full(()).to_string());
    assert!(e.downcast_ref::<PublishError<NoDebug>>().is_some());

    fn recv() -> Result<(), Box<dyn StdError>> {
        let t = Topic::<u8>::with_capacity(1)?;
        let mut sub = t.subscribe(StartAt::Earliest)?;
        sub.try_recv()?;
        Ok(())
    }
    let e = recv().unwrap_err();
    assert_eq!(e.downcast_ref::<TryRecvError>(), Some(&TryRecvError::Empty));
}

#[test]
fn errors_have_no_source() {
    assert!(Error::ZeroCapacity.source().is_none());
    assert!(RecvError::Closed.source().is_none());
    assert!(PublishError::Full(0u8).source().is_none());
}

#[test]
fn subscriber_errors_leave_state_unchanged() {
    let t = Topic::with_capacity(4).unwrap();
    t.try_publish(1u8).unwrap();
    let mut sub = t.subscribe(StartAt::Earliest).unwrap();
    assert!(sub.seek(2).is_err());
    assert!(t.subscribe(StartAt::Offset(2)).is_err());
    assert!(t.subscribe_partition(1, StartAt::Earliest).is_err());
    assert!(t.group("g", StartAt::Offset(9)).is_err());
    assert_eq!(sub.try_recv().unwrap().into_value(), 1);
    let s = t.stats();
    assert_eq!(s.subscribers, 1);
    assert!(s.groups.is_empty());
}

/// Resident memory of this process, in bytes (Linux), if it can be read.
#[cfg(target_os = "linux")]
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

/// A topic's capacity reserves memory, and pages are used as messages arrive: creating
/// many large partitions must neither touch gigabytes (which got the process killed by
/// the kernel's OOM killer instead of an error when capacity × partitions ran into the
/// billions) nor fail when the memory is merely reserved.
#[cfg(target_os = "linux")]
#[test]
fn large_capacities_use_memory_as_messages_arrive() {
    const CAPACITY: usize = 1 << 20;
    const PARTITIONS: u32 = 64; // 2 GiB of slots for `u64` messages
    let before = resident_bytes().expect("/proc/self/statm");
    let topic = match Topic::<u64>::new(TopicConfig::new(CAPACITY).partitions(PARTITIONS)) {
        Ok(t) => t,
        // A machine that does not overcommit may refuse the reservation: an error is
        // fine, a kill is not.
        Err(e) => {
            assert_eq!(e, Error::CapacityTooLarge { capacity: CAPACITY });
            return;
        }
    };
    let grown = resident_bytes()
        .expect("/proc/self/statm")
        .saturating_sub(before);
    assert!(
        grown < 256 << 20,
        "creating the topic made {grown} bytes resident"
    );
    // Slots come into use as the first lap is written, and the log works across it.
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    for p in 0..PARTITIONS {
        for i in 0..100u64 {
            topic.try_publish_to(p, u64::from(p) * 1000 + i).unwrap();
        }
    }
    let mut seen = vec![0u64; PARTITIONS as usize];
    for _ in 0..PARTITIONS * 100 {
        let m = sub.try_recv().unwrap();
        let p = m.partition() as usize;
        assert_eq!(*m.value(), p as u64 * 1000 + seen[p]);
        assert_eq!(m.offset(), seen[p]);
        seen[p] += 1;
    }
    assert!(matches!(sub.try_recv(), Err(TryRecvError::Empty)));
}
