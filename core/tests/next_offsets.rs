//! Topics whose partitions start at given offsets (`TopicConfig::next_offsets`), as a
//! durable topic reopened does: every reader and every policy sees the same offsets as a
//! topic that had published that many messages.

use memq_core::{Error, Overflow, StartAt, Topic, TopicConfig, TryRecvError};

#[test]
fn offsets_start_where_asked_in_every_partition() {
    let topic = Topic::new(
        TopicConfig::new(4)
            .partitions(3)
            .next_offsets([10, 0, 1 << 40]),
    )
    .unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    for p in 0..3 {
        topic.try_publish_to(p, p).unwrap();
    }
    let mut got: Vec<(u32, u64)> = (0..3)
        .map(|_| {
            let m = sub.try_recv().unwrap();
            (m.partition(), m.offset())
        })
        .collect();
    got.sort_unstable();
    assert_eq!(got, vec![(0, 10), (1, 0), (2, 1 << 40)]);
    let stats = topic.stats();
    assert_eq!(
        (stats.partitions[0].low, stats.partitions[0].high),
        (10, 11)
    );
    assert_eq!(
        (stats.partitions[2].low, stats.partitions[2].high),
        (1 << 40, (1 << 40) + 1)
    );
}

#[test]
fn the_ring_wraps_from_any_start_under_each_overflow_policy() {
    for start in [0u64, 1, 3, 5, 1_000_003] {
        // DropOldest: the ring keeps the newest 4 however far it wrapped.
        let topic = Topic::new(
            TopicConfig::new(4)
                .overflow(Overflow::DropOldest)
                .next_offsets([start]),
        )
        .unwrap();
        let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
        for i in 0..11u64 {
            assert_eq!(
                topic.try_publish(i).unwrap().offsets(),
                start + i..start + i + 1
            );
        }
        assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Lagged(7));
        for i in 7..11 {
            let m = sub.try_recv().unwrap();
            assert_eq!((m.offset(), *m.value()), (start + i, i));
        }
        assert_eq!(sub.try_recv().unwrap_err(), TryRecvError::Empty);

        // Block: a reader at the start holds the publishers back after 4.
        let topic = Topic::new(TopicConfig::new(4).next_offsets([start])).unwrap();
        let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
        for i in 0..4u64 {
            topic.try_publish(i).unwrap();
        }
        assert!(topic.try_publish(4).is_err());
        assert_eq!(sub.try_recv().unwrap().offset(), start);
        topic.try_publish(4).unwrap();
        // A group and a seek see the same offsets.
        let mut group = topic.group("g", StartAt::Earliest).unwrap();
        assert_eq!(group.try_recv().unwrap().offset(), start + 1);
        sub.seek(start + 3).unwrap();
        assert_eq!(sub.try_recv().unwrap().offset(), start + 3);
        assert_eq!(
            sub.seek(start + 6),
            Err(Error::OffsetOutOfRange {
                offset: start + 6,
                partition: 0,
                high: start + 5
            })
        );
    }
}

#[test]
fn a_latest_reader_and_an_explicit_offset_start_at_the_given_offsets() {
    let topic = Topic::new(TopicConfig::new(8).next_offsets([42])).unwrap();
    let mut latest = topic.subscribe(StartAt::Latest).unwrap();
    let mut at = topic.subscribe(StartAt::Offset(42)).unwrap();
    assert!(topic.subscribe(StartAt::Offset(43)).is_err());
    topic.try_publish("a").unwrap();
    assert_eq!(latest.try_recv().unwrap().offset(), 42);
    assert_eq!(at.try_recv().unwrap().offset(), 42);
    // An offset before the start is a gap of what the topic never held here.
    let mut early = topic.subscribe(StartAt::Offset(40)).unwrap();
    assert_eq!(early.try_recv().unwrap_err(), TryRecvError::Lagged(2));
}

#[test]
fn a_wrong_number_of_offsets_is_an_error() {
    let err = Topic::<u8>::new(TopicConfig::new(4).partitions(2).next_offsets([1])).unwrap_err();
    assert_eq!(
        err,
        Error::OffsetsPerPartition {
            given: 1,
            partitions: 2
        }
    );
    assert!(err.to_string().contains("one per partition"));
}

#[test]
fn a_next_offset_past_the_largest_is_refused_with_a_clear_error() {
    for offsets in [vec![u64::MAX], vec![0, memq_core::MAX_NEXT_OFFSET + 1]] {
        let partitions = offsets.len() as u32;
        let bad = *offsets.last().unwrap();
        let err = Topic::<u32>::new(
            TopicConfig::new(4)
                .partitions(partitions)
                .next_offsets(offsets),
        )
        .unwrap_err();
        assert_eq!(
            err,
            Error::NextOffsetTooLarge {
                partition: partitions - 1,
                offset: bad
            }
        );
        assert!(err.to_string().contains(&bad.to_string()));
    }
    // The largest is taken, and works as any other.
    let topic = Topic::new(TopicConfig::new(4).next_offsets([memq_core::MAX_NEXT_OFFSET])).unwrap();
    let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
    assert_eq!(
        topic.try_publish(1).unwrap().offset,
        memq_core::MAX_NEXT_OFFSET
    );
    let m = sub.try_recv().unwrap();
    assert_eq!(
        (m.offset(), m.into_value()),
        (memq_core::MAX_NEXT_OFFSET, 1)
    );
    topic.close();
    assert_eq!(sub.try_recv(), Err(TryRecvError::Closed));
}
