//! The most that `perf_runner`'s S4 (batches of 100, one publisher, one consumer) can
//! measure for any queue: the harness's own work with the queue's taken away.
//!
//! ```text
//! cargo run --release -p memq-bench --bin s4_ceiling -- [--rounds N] [--messages N] [--static]
//! ```
//!
//! The publisher builds its batches as `perf_runner` does (a `Vec` of 100 messages, each
//! a clone of the shared 1 KiB payload) and the consumer counts every message with the same
//! tally. In between is no queue at all, only the cheapest handover there is: each whole
//! `Vec` moves through one `tokio::sync::mpsc` operation, one per 100 messages, with room
//! for ten batches (the scenarios' capacity of 1024). A queue that stores messages one by
//! one can only add to this, so this rate bounds every S4 row from above, memq's included.
//!
//! Most of what is left is the payload's reference count: the publisher's core increments
//! it and the consumer's core decrements it, so its cache line moves between them. With
//! `--static` the payload is a `Bytes::from_static`, whose clones copy a pointer, to show
//! that share; the scenarios' payload is counted, as a shared payload in a user's program
//! is.

extern crate alloc;

#[allow(dead_code)]
#[path = "../perf/mod.rs"]
mod perf;

use std::process::ExitCode;
use std::time::Instant;

use bytes::Bytes;
use perf::{make_payload, report, Msg, Params, Tally};

static STATIC_PAYLOAD: [u8; 1024] = [b'm'; 1024];

fn main() -> ExitCode {
    let mut rounds = 5usize;
    let mut messages = 1_000_000u64;
    let mut counted = true;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let number = |v: Option<String>| v.and_then(|v| v.parse::<u64>().ok()).filter(|&n| n > 0);
        match arg.as_str() {
            "--rounds" => match number(args.next()) {
                Some(n) => rounds = n as usize,
                None => return usage("--rounds needs a positive number"),
            },
            "--messages" => match number(args.next()) {
                Some(n) => messages = n,
                None => return usage("--messages needs a positive number"),
            },
            "--static" => counted = false,
            other => return usage(&format!("unknown argument {other}")),
        }
    }
    let params = Params::full(messages);
    let mut rates = Vec::with_capacity(rounds);
    for round in 1..=rounds {
        match run(&params, counted) {
            Ok(rate) => {
                println!("round {round}: {} msgs/s", report::fmt_rate(rate));
                rates.push(rate);
            }
            Err(e) => {
                eprintln!("round {round}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let median = report::median(&mut rates).unwrap_or(0.0);
    let payload = if counted {
        "shared, counted"
    } else {
        "static, not counted"
    };
    println!(
        "S4 harness ceiling ({payload} payload, {} messages, batches of {}): median {} msgs/s",
        params.messages,
        params.batch,
        report::fmt_rate(median)
    );
    ExitCode::SUCCESS
}

fn usage(problem: &str) -> ExitCode {
    eprintln!("s4_ceiling: {problem}\nusage: s4_ceiling [--rounds N] [--messages N] [--static]");
    ExitCode::from(2)
}

/// One round in a fresh runtime; the rate from the first batch built to the last message
/// counted, after checking that every message arrived once with its payload.
fn run(params: &Params, counted: bool) -> Result<f64, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(params.workers)
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let n = params.messages;
    let batch = params.batch as u64;
    let payload = if counted {
        make_payload(params.payload_size)
    } else {
        Bytes::from_static(&STATIC_PAYLOAD[..params.payload_size.min(STATIC_PAYLOAD.len())])
    };
    let slots = params.capacity.div_ceil(params.batch).max(1);
    let (tally, elapsed) = rt.block_on(async move {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<Msg>>(slots);
        let mut tally = Tally::new(n, &payload);
        let start = Instant::now();
        let consumer = tokio::spawn(async move {
            while let Some(mut chunk) = rx.recv().await {
                for m in chunk.drain(..) {
                    tally.record(&m);
                }
            }
            tally
        });
        let publisher = tokio::spawn(async move {
            let mut id = 0;
            while id < n {
                let hi = (id + batch).min(n);
                let chunk: Vec<Msg> = (id..hi)
                    .map(|id| Msg {
                        id,
                        payload: payload.clone(),
                    })
                    .collect();
                if tx.send(chunk).await.is_err() {
                    break;
                }
                id = hi;
            }
        });
        let published = publisher.await;
        let tally = consumer.await;
        let elapsed = start.elapsed();
        match (published, tally) {
            (Ok(()), Ok(tally)) => Ok((tally, elapsed)),
            _ => Err("a task panicked".to_string()),
        }
    })?;
    let wrong = tally.duplicated + tally.out_of_range + tally.payload_mismatch;
    if tally.distinct != n || wrong != 0 {
        return Err(format!(
            "{} of {n} messages arrived, {wrong} wrong",
            tally.distinct
        ));
    }
    Ok(n as f64 / elapsed.as_secs_f64())
}
