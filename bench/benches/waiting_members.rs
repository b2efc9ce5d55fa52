//! What a publish costs while members of an explicit-ack group wait at their
//! `max_in_flight` on the partition, by how many wait (2, 64, 512).
//!
//! Each member has registered once more after its first wake-up, so its own timer covers
//! the partition's next lease deadline: publishes that bring it nothing it may take must
//! neither wake it nor cost more for every member that waits.
//!
//! ```text
//! cargo bench -p memq-bench --bench waiting_members
//! ```

use core::future::Future;
use core::pin::Pin;
use core::task::Context;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use memq::{AckConfig, StartAt, Topic};

/// Publishes per measured batch.
const BATCH: u64 = 10_000;

/// Times `iters` batches of `BATCH` publishes to a topic where `members` members wait at
/// `max_in_flight(1)` (a fresh topic per batch, set up outside the timing).
fn publishes_with_members_waiting(members: usize, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    let waker = futures_util::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    for _ in 0..iters {
        let topic = Topic::<u64>::with_capacity(1 << 16).unwrap();
        let cfg = || {
            AckConfig::new()
                .max_in_flight(1)
                .ack_wait(Duration::from_secs(3600))
        };
        // One member holds the only lease the limit allows...
        let mut holder = topic.group_acked("g", StartAt::Earliest, cfg()).unwrap();
        topic.try_publish(0).unwrap();
        let held = holder.try_recv().unwrap();
        // ... and the others wait. A member first waits without a timer, is woken once
        // by a publish to set one, and waits again covered by it.
        let mut waiting: Vec<_> = (0..members)
            .map(|_| topic.group_acked("g", StartAt::Earliest, cfg()).unwrap())
            .collect();
        let mut recvs: Vec<_> = waiting.iter_mut().map(|m| Box::pin(m.recv())).collect();
        for _ in 0..2 {
            for r in &mut recvs {
                assert!(Pin::new(r).poll(&mut cx).is_pending(), "nothing to take");
            }
            topic.try_publish(1).unwrap();
        }
        let start = Instant::now();
        for i in 0..BATCH {
            topic.try_publish(i).unwrap();
        }
        total += start.elapsed();
        drop(recvs);
        held.ack().unwrap();
    }
    total
}

fn waiting_members(c: &mut Criterion) {
    let mut group = c.benchmark_group("publish_at_max_in_flight");
    group.throughput(Throughput::Elements(BATCH));
    group.sample_size(20);
    for members in [2usize, 64, 512] {
        group.bench_with_input(BenchmarkId::from_parameter(members), &members, |b, &n| {
            b.iter_custom(|iters| publishes_with_members_waiting(n, iters));
        });
    }
    group.finish();
}

criterion_group!(benches, waiting_members);
criterion_main!(benches);
