//! memq on async-std: tasks, timeouts and a worker pool on async-std's executor.
//!
//! async-std is discontinued upstream; memq keeps its adapter for existing users, and
//! smol (see the `runtime_smol` example) is its successor. Exits non-zero if anything is
//! lost.
//!
//! Run it with `cargo run --example runtime_async_std --features async-std`.

use std::time::Duration;

use memq::pool::{Mode, Shutdown, WorkerPool};
use memq::rt::{AsyncStd, RecvTimeoutExt, Runtime};
use memq::{RecvTimeoutError, StartAt, Topic};

const N: u64 = 5_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    async_std::task::block_on(async {
        let topic = Topic::<u64>::with_capacity(64)?;
        let mut sub = topic.subscribe(StartAt::Earliest)?;
        let reader = AsyncStd.spawn(async move {
            let mut count = 0u64;
            loop {
                match sub.recv_timeout(Duration::from_secs(30), &AsyncStd).await {
                    Ok(_) => count += 1,
                    Err(RecvTimeoutError::Closed) => return Ok(count),
                    Err(e) => return Err(e),
                }
            }
        });

        let jobs = Topic::<u64>::with_capacity(64)?;
        let pool = WorkerPool::builder(&jobs, "async-std")
            .mode(Mode::Parallel(2))
            .spawn(&AsyncStd, |m| async move {
                AsyncStd.sleep(Duration::from_micros(10)).await;
                Ok::<_, String>(*m.value())
            })?;

        for n in 0..N {
            topic.publish(n).await?;
            jobs.publish(n).await?;
        }
        topic.close();
        let count = reader.await??;
        let stats = pool.shutdown(Shutdown::Drain).await?;
        println!("async-std: subscriber read {count}; pool {stats:?}");
        if count != N || stats.processed != N || stats.errors != 0 {
            return Err("mismatch".into());
        }
        println!("ok: async-std tasks, timeouts and a pool; nothing lost");
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}
