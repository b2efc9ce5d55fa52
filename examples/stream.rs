//! Subscribers and group members are `Stream`s: read them with stream combinators. A
//! Tokio task reads a topic as a stream wrapped in `cooperative` (it yields to other tasks
//! when its budget is spent, even though messages are always ready), while a second
//! stream filters and sums. Exits non-zero on a wrong total.
//!
//! Run it with `cargo run --example stream --features tokio`.

use futures_util::StreamExt;
use memq::rt::{Runtime, Tokio};
use memq::{StartAt, Topic};

const N: u64 = 1_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let rt = Tokio::current();
        let topic = Topic::<u64>::with_capacity(128)?;
        let all = topic.subscribe(StartAt::Earliest)?;
        let evens = topic.subscribe(StartAt::Earliest)?;

        // The stream ends when the topic is closed and drained; `Err(Lagged)` items only
        // happen under a lossy policy, so none here.
        let counter = rt.spawn(
            rt.cooperative(all)
                .map(|m| m.map(|_| 1u64))
                .fold(Ok(0u64), |acc, one| async move {
                    Ok::<_, memq::Lagged>(acc? + one?)
                }),
        );
        let summer = rt.spawn(async move {
            evens
                .filter_map(|m| async move { m.ok().map(|m| m.into_value()) })
                .filter(|v| std::future::ready(v.is_multiple_of(2)))
                .fold(0u64, |acc, v| async move { acc + v })
                .await
        });

        for n in 0..N {
            topic.publish(n).await?;
        }
        topic.close();

        let count = counter.await??;
        let even_sum = summer.await?;
        println!("stream counted {count} messages; the even ones sum to {even_sum}");
        let want: u64 = (0..N).filter(|v| v.is_multiple_of(2)).sum();
        if count != N || even_sum != want {
            return Err(format!("expected {N} messages and {want}").into());
        }
        println!("ok: both streams saw every message");
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}
