//! Explicit-ack groups on plain threads: how fast two members take and acknowledge what
//! one publisher sends, one delivery at a time or in batches.
//!
//! ```text
//! cargo run --release -p memq-bench --bin ack_bench -- [--messages N] [--rounds N]
//!     [--partitions N] [--modes LIST]
//! ```
//!
//! One topic of capacity 1024 (`Block`), one publisher thread (`publish_blocking`, a
//! shared 1 KiB `Arc<[u8]>` payload), an explicit-ack group of two member threads.
//! Modes: `one` (`recv_blocking`, then `ack`), `batch` (`recv_many_blocking` of up to 32,
//! then `ack` on each), `batch-ack-all` (the same batches settled by
//! `Delivery::ack_all`). Each cell runs in a process of its own, rounds interleaved;
//! prints the median messages per second and the range. Every message is counted: each
//! id must arrive, and any id that arrives twice must be a counted redelivery.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use memq::{AckConfig, Delivery, StartAt, Topic, TopicConfig};

const MODES: [&str; 3] = ["one", "batch", "batch-ack-all"];
const BATCH: usize = 32;

#[path = "../cells.rs"]
mod cells;

type Msg = (u64, Arc<[u8]>);

/// Runs one cell; messages per second, or what went wrong.
fn cell(mode: &str, n: u64, partitions: u32) -> Result<f64, String> {
    let topic: Topic<Msg> =
        Topic::new(TopicConfig::new(1024).partitions(partitions)).map_err(|e| e.to_string())?;
    let payload: Arc<[u8]> = Arc::from(vec![7u8; 1024]);
    let members = (0..2)
        .map(|_| topic.group_acked("workers", StartAt::Earliest, AckConfig::new()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let start = Instant::now();
    let readers: Vec<_> = members
        .into_iter()
        .map(|mut m| {
            let mode = mode.to_string();
            std::thread::spawn(move || -> Result<Vec<u64>, String> {
                let mut ids = Vec::new();
                let mut buf = Vec::new();
                loop {
                    if mode == "one" {
                        match m.recv_blocking() {
                            Ok(d) => {
                                ids.push(d.value().0);
                                d.ack().map_err(|e| e.to_string())?;
                            }
                            Err(_) => return Ok(ids),
                        }
                        continue;
                    }
                    match m.recv_many_blocking(&mut buf, BATCH) {
                        Ok(0) | Err(_) => return Ok(ids),
                        Ok(_) => {}
                    }
                    ids.extend(buf.iter().map(|d| d.value().0));
                    if mode == "batch" {
                        for d in buf.drain(..) {
                            d.ack().map_err(|e| e.to_string())?;
                        }
                    } else {
                        let report = Delivery::ack_all(&mut buf);
                        if !report.all_acked() {
                            return Err(format!("{report:?}"));
                        }
                    }
                }
            })
        })
        .collect();
    for id in 0..n {
        topic
            .publish_blocking((id, payload.clone()))
            .map_err(|e| e.to_string())?;
    }
    topic.close();
    let mut seen = vec![0u32; n as usize];
    for r in readers {
        for id in r.join().map_err(|_| "a member panicked")?? {
            seen[id as usize] += 1;
        }
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    if let Some(lost) = seen.iter().position(|&c| c == 0) {
        return Err(format!("message {lost} never arrived"));
    }
    let again: u64 = seen.iter().map(|&c| u64::from(c - 1)).sum();
    let redelivered = topic.stats().groups[0].redelivered;
    if again != redelivered {
        return Err(format!(
            "{again} messages arrived twice, {redelivered} were redelivered"
        ));
    }
    Ok(rate)
}

struct Args {
    messages: u64,
    rounds: usize,
    partitions: u32,
    modes: Vec<String>,
    cell: Option<String>,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        messages: 1_000_000,
        rounds: 5,
        partitions: 1,
        modes: MODES.iter().map(|s| s.to_string()).collect(),
        cell: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--messages" => a.messages = value()?.parse().map_err(|e| format!("{flag}: {e}"))?,
            "--rounds" => a.rounds = value()?.parse().map_err(|e| format!("{flag}: {e}"))?,
            "--partitions" => {
                a.partitions = value()?.parse().map_err(|e| format!("{flag}: {e}"))?;
            }
            "--modes" => a.modes = value()?.split(',').map(str::to_string).collect(),
            "--cell" => a.cell = Some(value()?),
            "-h" | "--help" => {
                return Err(
                    "usage: ack_bench [--messages N (1,000,000)] [--rounds N (5)] \
                            [--partitions N (1)] [--modes one,batch,batch-ack-all]"
                        .into(),
                )
            }
            other => return Err(format!("unknown option {other} (--help lists them)")),
        }
    }
    if a.messages == 0 || a.rounds == 0 || a.partitions == 0 {
        return Err("--messages, --rounds and --partitions must be at least 1".into());
    }
    if let Some(bad) = a.modes.iter().find(|m| !MODES.contains(&m.as_str())) {
        return Err(format!("unknown mode {bad} (known: {})", MODES.join(",")));
    }
    Ok(a)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if let Some(mode) = &args.cell {
        return match cell(mode, args.messages, args.partitions) {
            Ok(rate) => {
                println!("ack_bench cell: {rate}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{mode}: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let cell_args = [
        "--messages".to_string(),
        args.messages.to_string(),
        "--partitions".to_string(),
        args.partitions.to_string(),
    ];
    let mut runs = match cells::run_interleaved("ack_bench", &args.modes, args.rounds, &cell_args) {
        Ok(runs) => runs,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "ack_bench: {} messages, {} partition(s), two members on threads, median of {} \
         interleaved round(s)",
        args.messages, args.partitions, args.rounds
    );
    println!("| mode | median msgs/s | min–max |");
    println!("|---|---:|---:|");
    for (mode, r) in args.modes.iter().zip(&mut runs) {
        let (median, lo, hi) = cells::median_and_range(r);
        println!(
            "| {mode} | {:.2}M | {:.2}M–{:.2}M |",
            median / 1e6,
            lo / 1e6,
            hi / 1e6
        );
    }
    ExitCode::SUCCESS
}
