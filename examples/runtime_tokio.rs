//! memq on Tokio: publishers and a consumer group as Tokio tasks, `recv_timeout` and
//! `publish_timeout` on Tokio's timer, consumers in Tokio's cooperative budget, and a
//! worker pool whose blocking handlers run on Tokio's blocking pool. Exits non-zero if
//! anything is lost.
//!
//! Run it with `cargo run --example runtime_tokio --features tokio`.

use std::time::Duration;

use memq::pool::{Mode, Shutdown, WorkerPool};
use memq::rt::{PublishTimeoutExt, RecvTimeoutExt, Runtime, Tokio};
use memq::{RecvTimeoutError, StartAt, Topic};

const N: u64 = 10_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let rt = Tokio::current();
        let topic = Topic::<u64>::new(memq::TopicConfig::new(128).clock(rt.clock()))?;

        // Three members of a group as tasks; each waits at most 30 s for its next message.
        let members: Vec<_> = (0..3)
            .map(|_| {
                let mut member = topic.group("tokio", StartAt::Earliest)?;
                let rt2 = rt.clone();
                Ok(rt.spawn(async move {
                    let mut sum = 0u64;
                    loop {
                        match member.recv_timeout(Duration::from_secs(30), &rt2).await {
                            Ok(m) => sum += m.into_value(),
                            Err(RecvTimeoutError::Closed) => return Ok(sum),
                            Err(e) => return Err(e),
                        }
                    }
                }))
            })
            .collect::<Result<_, memq::Error>>()?;

        // Two publisher tasks, each giving up on a message after 30 s without room.
        let publishers: Vec<_> = (0..2u64)
            .map(|p| {
                let topic = topic.clone();
                let rt2 = rt.clone();
                rt.spawn(async move {
                    for n in (p..N).step_by(2) {
                        topic
                            .publish_timeout(n, Duration::from_secs(30), &rt2)
                            .await?;
                    }
                    Ok::<(), memq::PublishError<u64>>(())
                })
            })
            .collect();
        for p in publishers {
            p.await??;
        }
        topic.close();
        let mut total = 0;
        for m in members {
            total += m.await??;
        }
        println!("3 Tokio tasks in one group summed {total}");

        // A worker pool on Tokio's blocking pool.
        let jobs = Topic::<u64>::with_capacity(64)?;
        let pool = WorkerPool::builder(&jobs, "crunch")
            .mode(Mode::Parallel(3))
            .spawn_blocking(&rt, |m| Ok::<_, String>(m.value().count_ones()))?;
        for n in 0..1_000 {
            jobs.publish(n).await?;
        }
        let stats = pool.shutdown(Shutdown::Drain).await?;
        println!("pool on Tokio's blocking pool: {stats:?}");

        if total != N * (N - 1) / 2 || stats.processed != 1_000 || stats.active != 0 {
            return Err("mismatch".into());
        }
        println!("ok: Tokio tasks, timeouts and a pool; nothing lost");
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}
