//! memq on smol: tasks on an executor of your own, timeouts on the `async-io` timer, and
//! a worker pool whose blocking handlers run on smol's blocking pool. Exits non-zero if
//! anything is lost.
//!
//! Run it with `cargo run --example runtime_smol --features smol`.

use std::sync::Arc;
use std::time::Duration;

use memq::pool::{Mode, Shutdown, WorkerPool};
use memq::rt::{PublishTimeoutExt, RecvTimeoutExt, Runtime, Smol};
use memq::{StartAt, Topic};

const N: u64 = 5_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let executor = Arc::new(smol::Executor::new());
    let rt = Smol::with_executor(executor.clone());
    // The executor runs while the main future runs.
    smol::block_on(executor.run(async {
        let topic = Topic::<u64>::with_capacity(64)?;
        let members: Vec<_> = (0..2)
            .map(|_| {
                let mut member = topic.group("smol", StartAt::Earliest)?;
                let rt2 = rt.clone();
                Ok(rt.spawn(async move {
                    let mut got = Vec::new();
                    while let Ok(m) = member.recv_timeout(Duration::from_secs(30), &rt2).await {
                        got.push(m.into_value());
                    }
                    got
                }))
            })
            .collect::<Result<_, memq::Error>>()?;

        let jobs = Topic::<u64>::with_capacity(64)?;
        let pool = WorkerPool::builder(&jobs, "smol-blocking")
            .mode(Mode::Parallel(2))
            .spawn_blocking(&rt, |m| Ok::<_, String>(m.value() * 2))?;

        for n in 0..N {
            topic
                .publish_timeout(n, Duration::from_secs(30), &rt)
                .await?;
            jobs.publish(n).await?;
        }
        topic.close();
        let mut all = Vec::new();
        for m in members {
            all.extend(m.await?);
        }
        all.sort_unstable();
        let stats = pool.shutdown(Shutdown::Drain).await?;
        println!(
            "smol: group members got {} messages; pool {stats:?}",
            all.len()
        );
        if all != (0..N).collect::<Vec<_>>() || stats.processed != N {
            return Err("mismatch".into());
        }
        println!("ok: smol tasks, timeouts and a pool; nothing lost");
        Ok::<(), Box<dyn std::error::Error>>(())
    }))
}
