//! One worker program, run on a memq topic in memory, on a durable memq topic in a
//! temporary directory, and on Redis Streams: only how the topics are made differs
//! (`AnyTopic::Memory`, `AnyTopic::Durable` or `AnyTopic::Redis`). Two workers of one
//! explicit-ack group resize "images"; a job that always fails is retried and ends in
//! the dead-letter topic after 3 deliveries; an audit subscriber replays every job.
//! Starts its own redis-server; the outcome must be the same on all three.
//!
//! ```sh
//! cargo run -p memq-redis --features testing --example redis_worker
//! ```

use std::collections::HashSet;
use std::time::Duration;

use bytes::Bytes;
use memq_core::{DeadLetter, StartAt, Topic, TopicConfig};
use memq_redis::any::{AnyDeadLetters, AnyGroupConfig, AnyTopic};
use memq_redis::testing::RedisServer;
use memq_redis::{Redis, RedisTopic, RedisTopicConfig};
use memq_store::{DurableConfig, DurableTopic, SyncPolicy};

const JOBS: u32 = 200;

/// What a run did: jobs done once each, failed deliveries of the poison job, and jobs the
/// audit subscriber replayed.
type Outcome = (usize, u32, usize);

/// The program: knows nothing of where the topic lives.
async fn run_workers(
    topic: AnyTopic,
    dead_letters: AnyDeadLetters,
) -> Result<Outcome, Box<dyn std::error::Error>> {
    let config = AnyGroupConfig::new(Duration::from_secs(30))
        .max_deliveries(3)
        .dead_letter(dead_letters);
    let mut workers = Vec::new();
    for _ in 0..2 {
        workers.push(
            topic
                .group_acked("resize", StartAt::Earliest, config.clone())
                .await?,
        );
    }
    for i in 0..JOBS {
        let job = if i == 7 {
            "poison.png".to_string()
        } else {
            format!("image-{i}.png")
        };
        topic.publish_keyed(format!("user-{}", i % 10), job).await?;
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for mut worker in workers {
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            while let Ok(job) = worker.recv().await {
                if job.value().as_ref() == b"poison.png" {
                    // Fails every time: retried, then dead-lettered by the group.
                    let _ = job.nack().await;
                    let _ = tx.send(None);
                } else {
                    let name = job.value().clone();
                    job.ack().await.expect("acked within its lease");
                    let _ = tx.send(Some(name));
                }
            }
        }));
    }
    drop(tx);
    let mut done: HashSet<Bytes> = HashSet::new();
    let mut failures = 0;
    while done.len() < (JOBS - 1) as usize || failures < 3 {
        let next = tokio::time::timeout(Duration::from_secs(60), rx.recv()).await;
        let Ok(next) = next else {
            return Err(format!("stuck: {} done, {failures} failures", done.len()).into());
        };
        match next {
            Some(Some(name)) => assert!(done.insert(name), "a job done twice"),
            Some(None) => failures += 1,
            None => break,
        }
    }
    for t in tasks {
        t.abort();
    }
    // Every job is still there to replay, in publish order per partition.
    let mut audit = topic.subscribe(StartAt::Earliest).await?;
    let mut replayed = HashSet::new();
    while replayed.len() < JOBS as usize {
        let m = tokio::time::timeout(Duration::from_secs(60), audit.recv()).await??;
        replayed.insert(m.value().clone());
    }
    Ok((done.len(), failures, replayed.len()))
}

fn report(kind: &str, outcome: Outcome, letter: (u32, u64, u32)) {
    println!(
        "{kind:<8} {} jobs done, poison.png failed {} times, {} jobs replayed, dead letter from partition {} offset {} after {} deliveries",
        outcome.0, outcome.1, outcome.2, letter.0, letter.1, letter.2
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // In memory.
    let topic = Topic::<Bytes>::new(TopicConfig::new(1024).partitions(4))?;
    let dlq = Topic::<DeadLetter<Bytes>>::new(TopicConfig::new(64))?;
    let mut dlq_sub = dlq.subscribe(StartAt::Earliest)?;
    let memory = run_workers(AnyTopic::Memory(topic), AnyDeadLetters::Memory(dlq)).await?;
    let letter = dlq_sub.recv().await?;
    let dead = letter.value();
    assert_eq!(dead.value.as_ref(), b"poison.png");
    let memory_letter = (dead.partition, dead.offset, dead.deliveries);
    report("memory:", memory, memory_letter);

    // On disk: the same program on a durable topic (its group's dead letters are kept in
    // the group's own dead-letter log).
    let dir = tempfile::tempdir()?;
    let topic = DurableTopic::open(
        dir.path(),
        TopicConfig::new(1024).partitions(4),
        DurableConfig::new(SyncPolicy::Never),
    )?;
    let durable = run_workers(AnyTopic::Durable(topic.clone()), AnyDeadLetters::Durable).await?;
    let mut dlq_sub = topic.dead_letters("resize", StartAt::Earliest)?;
    let dead = tokio::time::timeout(Duration::from_secs(60), dlq_sub.recv()).await??;
    assert_eq!(dead.payload.as_ref(), b"poison.png");
    let durable_letter = (dead.partition, dead.offset, dead.deliveries);
    report("durable:", durable, durable_letter);

    // On Redis: the same program.
    let server = RedisServer::start()?;
    let redis = Redis::connect(&server.url()).await?;
    let topic = RedisTopic::open(&redis, "images", RedisTopicConfig::new(4)).await?;
    let dlq = RedisTopic::open(&redis, "images-dlq", RedisTopicConfig::new(1)).await?;
    let mut dlq_sub = dlq.subscribe(StartAt::Earliest).await?;
    let on_redis = run_workers(AnyTopic::Redis(topic), AnyDeadLetters::Redis(dlq)).await?;
    let letter = tokio::time::timeout(Duration::from_secs(60), dlq_sub.recv()).await??;
    assert_eq!(letter.payload.as_ref(), b"poison.png");
    let origin = letter
        .origin
        .clone()
        .ok_or("a dead letter carries its origin")?;
    let redis_letter = (origin.partition, origin.offset, origin.deliveries);
    report("redis:", on_redis, redis_letter);

    assert_eq!(memory, durable, "the same outcome in memory and on disk");
    assert_eq!(memory, on_redis, "the same outcome in memory and on Redis");
    assert_eq!(memory_letter, durable_letter, "the same dead letter");
    assert_eq!(memory_letter, redis_letter, "the same dead letter");
    Ok(())
}
