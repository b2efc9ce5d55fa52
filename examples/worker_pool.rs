//! Worker pools: a sequential pool (one worker, strict order) and a parallel pool (four
//! workers) over consumer groups of the same job topic, both publishing results that
//! carry the input's offset and the output or the error. A handler error and a handler
//! panic become error results; the pools go on. Plain threads here; the same builder
//! takes any runtime (`memq::rt::{Tokio, AsyncStd, Smol, Threads}`). Exits non-zero if a
//! job is missing, duplicated or out of order.
//!
//! Run it with `cargo run --example worker_pool`.

use std::sync::{Arc, Mutex};

use memq::pool::{Mode, Shutdown, WorkResult, WorkerPool};
use memq::rt::Threads;
use memq::{StartAt, Topic};

const JOBS: u64 = 1_000;

/// The work: fails on multiples of 100, panics on 333.
fn work(n: u64) -> Result<u64, String> {
    if n == 333 {
        panic!("job {n} hit a bug");
    }
    if n.is_multiple_of(100) {
        return Err(format!("job {n} refused"));
    }
    Ok(n * n)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Keep the expected panic's message short in the output.
    std::panic::set_hook(Box::new(|info| eprintln!("(handler panicked: {info})")));

    let jobs = Topic::<u64>::with_capacity(256)?;
    let seq_results = Topic::<WorkResult<u64>>::with_capacity(2 * JOBS as usize)?;
    let par_results = Topic::<WorkResult<u64>>::with_capacity(2 * JOBS as usize)?;
    let mut seq_reader = seq_results.subscribe(StartAt::Earliest)?;
    let mut par_reader = par_results.subscribe(StartAt::Earliest)?;

    // Two groups on one topic: each pool sees every job once.
    let order = Arc::new(Mutex::new(Vec::new()));
    let sequential = {
        let order = order.clone();
        WorkerPool::builder(&jobs, "sequential")
            .mode(Mode::Sequential)
            .results(seq_results)
            .spawn_blocking(&Threads, move |msg| {
                order.lock().expect("order").push(*msg.value());
                work(*msg.value())
            })?
    };
    let parallel = WorkerPool::builder(&jobs, "parallel")
        .mode(Mode::Parallel(4))
        .results(par_results)
        .spawn(&Threads, |msg| async move { work(*msg.value()) })?;

    for n in 0..JOBS {
        jobs.publish_blocking(n)?;
        if n == JOBS / 2 {
            let s = parallel.stats();
            println!(
                "half way, parallel pool: pushed {} processed {} consumed {} errors {} active {}",
                s.pushed, s.processed, s.consumed, s.errors, s.active
            );
        }
    }
    // Drain: everything published so far is handled, then the workers end.
    let seq_stats = sequential.shutdown_blocking(Shutdown::Drain)?;
    let par_stats = parallel.shutdown_blocking(Shutdown::Drain)?;
    println!("sequential: {seq_stats:?}");
    println!("parallel:   {par_stats:?}");

    let expected_errors = (0..JOBS)
        .filter(|n| n.is_multiple_of(100) || *n == 333)
        .count() as u64;
    for (name, reader, stats) in [
        ("sequential", &mut seq_reader, seq_stats),
        ("parallel", &mut par_reader, par_stats),
    ] {
        // The pools held the last handles to the results topics: they are closed now.
        let mut results = Vec::new();
        while let Ok(m) = reader.recv_blocking() {
            results.push(m.into_value());
        }
        if name == "sequential" && !results.windows(2).all(|w| w[0].offset < w[1].offset) {
            return Err("sequential results out of order".into());
        }
        results.sort_by_key(|r| r.offset);
        let offsets: Vec<u64> = results.iter().map(|r| r.offset).collect();
        if offsets != (0..JOBS).collect::<Vec<_>>() {
            return Err(format!("{name}: a job is missing or duplicated").into());
        }
        for r in &results {
            let ok = match &r.outcome {
                Ok(v) => *v == r.offset * r.offset,
                Err(e) if r.offset == 333 => e.is_panic(),
                Err(e) => !e.is_panic() && r.offset.is_multiple_of(100),
            };
            if !ok {
                return Err(format!("{name}: wrong result {r:?}").into());
            }
        }
        let bug = &results[333];
        println!(
            "{name}: {} results; job 333 -> {:?}",
            results.len(),
            bug.outcome
        );
        if (stats.processed, stats.consumed, stats.errors, stats.active)
            != (JOBS, JOBS, expected_errors, 0)
        {
            return Err(format!("{name}: counters {stats:?}").into());
        }
    }
    if *order.lock().expect("order") != (0..JOBS).collect::<Vec<_>>() {
        return Err("the sequential pool did not keep publishing order".into());
    }
    println!("ok: both pools handled every job once; errors and the panic became results");
    Ok(())
}
