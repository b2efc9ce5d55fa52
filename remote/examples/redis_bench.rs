//! Publishing to Redis Streams: memq-redis's pipelined publishes beside the server's own
//! limit (`redis-benchmark` running `XADD` with pipelining, on the same server) and a
//! naive client that sends one `XADD` per round trip. Starts its own redis-server
//! (no append-only file: the server's limit, not the disk's) on a free port.
//!
//! ```sh
//! cargo run --release -p memq-redis --features testing --example redis_bench -- --rounds 5
//! cargo run --release -p memq-redis --features testing --example redis_bench -- --quick
//! ```
//!
//! Prints each round and the medians; messages of 64 bytes. Exits non-zero if memq-redis's
//! best pipelined (`BatchMode::Pipelined`) median is under 80 % of redis-benchmark's
//! (unless `--quick`). Rounds interleave the publishers, so that they share the machine's
//! moods alike.

use std::process::{Command, ExitCode};
use std::time::Instant;

use bytes::Bytes;
use memq_redis::testing::RedisServer;
use memq_redis::{BatchMode, Redis, RedisTopic, RedisTopicConfig};

const PAYLOAD: usize = 64;

struct Args {
    rounds: usize,
    messages: u64,
    naive: u64,
    quick: bool,
}

fn args() -> Args {
    let mut a = Args {
        rounds: 5,
        messages: 1_000_000,
        naive: 50_000,
        quick: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => {
                a.quick = true;
                a.rounds = 1;
                a.messages = 50_000;
                a.naive = 5_000;
            }
            "--rounds" => a.rounds = it.next().and_then(|v| v.parse().ok()).unwrap_or(a.rounds),
            "--messages" => {
                a.messages = it.next().and_then(|v| v.parse().ok()).unwrap_or(a.messages)
            }
            _ => {
                eprintln!("usage: redis_bench [--quick] [--rounds N] [--messages N]");
                std::process::exit(2);
            }
        }
    }
    a
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// redis-benchmark's XADD rate with pipelining (50 clients, 100 commands per pipeline):
/// plain (`XADD key * v <payload>`), or with memq-redis's entry shape (`XADD key 0-* v
/// <payload> t <ms>`: the explicit offset ID and the timestamp field).
fn redis_benchmark(port: u16, n: u64, memq_shape: bool) -> Result<f64, String> {
    let payload = "x".repeat(PAYLOAD);
    let command: Vec<&str> = if memq_shape {
        vec![
            "XADD",
            "bench:rb",
            "0-*",
            "v",
            &payload,
            "t",
            "1796543567844",
        ]
    } else {
        vec!["XADD", "bench:rb", "*", "v", &payload]
    };
    let (port, n) = (port.to_string(), n.to_string());
    let out = Command::new("redis-benchmark")
        .args(["-p", &port, "-n", &n, "-c", "50", "-P", "100", "-q"])
        .args(&command)
        .output()
        .map_err(|e| format!("redis-benchmark: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "XADD bench:rb * v xxx: 123456.78 requests per second, p50=..."
    let rate = text
        .split("requests per second")
        .next()
        .and_then(|s| s.rsplit(' ').nth(1).or_else(|| s.rsplit(": ").next()))
        .and_then(|s| s.trim().trim_start_matches(':').trim().parse::<f64>().ok());
    rate.ok_or_else(|| format!("could not read redis-benchmark's output: {text}"))
}

async fn del(redis_url: &str, key: &str) {
    let client = redis::Client::open(redis_url).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let _: i64 = redis::cmd("DEL")
        .arg(key)
        .query_async(&mut c)
        .await
        .unwrap();
}

/// One XADD per round trip, one connection.
async fn naive(url: &str, n: u64) -> f64 {
    let client = redis::Client::open(url).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let payload = vec![b'x'; PAYLOAD];
    let t0 = Instant::now();
    for _ in 0..n {
        let _: String = redis::cmd("XADD")
            .arg("bench:naive")
            .arg("*")
            .arg("v")
            .arg(&payload)
            .query_async(&mut c)
            .await
            .unwrap();
    }
    n as f64 / t0.elapsed().as_secs_f64()
}

/// The redis crate alone: pipelines of `batch` `XADD key 0-* v <payload> t <ms>` (memq's
/// entry shape) from `tasks` tasks on one multiplexed connection, without memq-redis.
async fn raw_pipelines(url: &str, n: u64, tasks: u64, batch: u64) -> f64 {
    let client = redis::Client::open(url).unwrap();
    let conn = client.get_multiplexed_async_connection().await.unwrap();
    let payload = vec![b'x'; PAYLOAD];
    let t0 = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let (mut conn, payload) = (conn.clone(), payload.clone());
        handles.push(tokio::spawn(async move {
            let mut sent = 0;
            while sent < n / tasks {
                let mut pipe = redis::pipe();
                for _ in 0..batch {
                    pipe.cmd("XADD")
                        .arg("bench:raw")
                        .arg("0-*")
                        .arg("v")
                        .arg(&payload)
                        .arg("t")
                        .arg(1u64)
                        .ignore();
                }
                let () = pipe.query_async(&mut conn).await.unwrap();
                sent += batch;
            }
            sent
        }));
    }
    let mut total = 0;
    for h in handles {
        total += h.await.unwrap();
    }
    total as f64 / t0.elapsed().as_secs_f64()
}

/// memq-redis: `publish_batch` of `batch` messages from `tasks` concurrent tasks, or
/// `publish` one at a time from `tasks` tasks (batch = 1).
async fn memq(topic: &RedisTopic, n: u64, tasks: u64, batch: u64) -> f64 {
    let payload = Bytes::from(vec![b'x'; PAYLOAD]);
    let t0 = Instant::now();
    let per_task = n / tasks;
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let (topic, payload) = (topic.clone(), payload.clone());
        handles.push(tokio::spawn(async move {
            let mut sent = 0;
            while sent < per_task {
                if batch == 1 {
                    topic.publish(payload.clone()).await.unwrap();
                } else {
                    let b = vec![payload.clone(); batch as usize];
                    topic.publish_batch(b).await.unwrap();
                }
                sent += batch;
            }
            sent
        }));
    }
    let mut total = 0;
    for h in handles {
        total += h.await.unwrap();
    }
    total as f64 / t0.elapsed().as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let a = args();
    let server = RedisServer::start_with(&["--appendonly", "no"]).unwrap_or_else(|e| {
        eprintln!("redis_bench: cannot start redis-server: {e}");
        std::process::exit(1);
    });
    let url = server.url();
    let redis = Redis::connect(&url).await.unwrap();
    let topic = RedisTopic::open(&redis, "bench", RedisTopicConfig::new(1))
        .await
        .unwrap();
    let key = topic.stream_key(0).unwrap().to_string();
    let piped = RedisTopic::open(
        &redis,
        "bench-piped",
        RedisTopicConfig::new(1).batches(BatchMode::Pipelined),
    )
    .await
    .unwrap();
    let piped_key = piped.stream_key(0).unwrap().to_string();
    let version = Command::new("redis-server")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    println!(
        "redis_bench: {} rounds, {} messages of {PAYLOAD} bytes ({} for the naive client); {}",
        a.rounds,
        a.messages,
        a.naive,
        version.unwrap_or_default()
    );
    let names = [
        "redis-benchmark XADD -c 50 -P 100 (server limit)",
        "redis-benchmark, memq's entry shape (0-*, v, t)",
        "naive: one XADD per round trip",
        "redis crate alone: pipelines of 1000 XADD (memq's shape), 4 tasks",
        "memq-redis publish, 64 tasks",
        "memq-redis publish_batch(100) atomic, 4 tasks",
        "memq-redis publish_batch(1000) atomic, 2 tasks",
        "memq-redis publish_batch(100) pipelined, 4 tasks",
        "memq-redis publish_batch(1000) pipelined, 4 tasks",
    ];
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for round in 1..=a.rounds {
        let mut rbs = [0.0; 2];
        for (i, shape) in [false, true].into_iter().enumerate() {
            rbs[i] = match redis_benchmark(server.port(), a.messages, shape) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("redis_bench: {e}");
                    // Returning (not `exit`) stops the server on the way out.
                    return ExitCode::FAILURE;
                }
            };
            del(&url, "bench:rb").await;
        }
        let [rb, rb_shape] = rbs;
        let nv = naive(&url, a.naive).await;
        del(&url, "bench:naive").await;
        let raw = raw_pipelines(&url, a.messages, 4, 1000).await;
        del(&url, "bench:raw").await;
        let m1 = memq(&topic, a.messages / 4, 64, 1).await;
        del(&url, &key).await;
        let m100 = memq(&topic, a.messages, 4, 100).await;
        del(&url, &key).await;
        let m1000 = memq(&topic, a.messages, 2, 1000).await;
        del(&url, &key).await;
        let p100 = memq(&piped, a.messages, 4, 100).await;
        del(&url, &piped_key).await;
        let p1000 = memq(&piped, a.messages, 4, 1000).await;
        del(&url, &piped_key).await;
        let row = [rb, rb_shape, nv, raw, m1, m100, m1000, p100, p1000];
        println!(
            "round {round}: {}",
            row.iter()
                .map(|r| format!("{:.0}", r))
                .collect::<Vec<_>>()
                .join(" / ")
        );
        for (i, r) in row.iter().enumerate() {
            results[i].push(*r);
        }
    }
    let medians: Vec<f64> = results.iter_mut().map(|v| median(v)).collect();
    println!("\n| publisher | median msgs/s | of the server's limit | of the limit for memq's entry shape |\n|---|---:|---:|---:|");
    for (name, m) in names.iter().zip(&medians) {
        println!(
            "| {name} | {:.0} | {:.0} % | {:.0} % |",
            m,
            100.0 * m / medians[0],
            100.0 * m / medians[1]
        );
    }
    let best = medians[7].max(medians[8]);
    let share = best / medians[0];
    println!(
        "\nmemq-redis pipelined (best median): {:.0} % of redis-benchmark's plain XADD rate, {:.0} % of its rate \
         for memq's entry shape; atomic: {:.0} % / {:.0} %",
        100.0 * share,
        100.0 * best / medians[1],
        100.0 * medians[5].max(medians[6]) / medians[0],
        100.0 * medians[5].max(medians[6]) / medians[1],
    );
    if !a.quick && share < 0.8 {
        eprintln!("redis_bench: under 80 % of the server's limit");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
